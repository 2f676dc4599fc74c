//! Value expressions: what a select list computes (`_metadata.file_path`,
//! `COALESCE(a, CAST(get_json_object(_rescued_data, '$.a') AS DOUBLE))`, `amount * 1.2`),
//! and the part of a condition that is more than a column compared with a literal.
//!
//! Parsed by `sqlparser` (Databricks dialect), bound to an Arrow schema with Spark's type
//! rules, and evaluated with arrow's kernels. Semantics are Spark 4's ANSI mode, its
//! default: an operation that cannot produce a value for a row (a cast of `'abc'` to INT, a
//! division by zero, an overflow) stops the flow naming the row, never a silent NULL; the
//! `try_` forms (`try_cast`, `try_to_timestamp`) give NULL instead. Types mix as Spark
//! mixes them: integers widen to BIGINT, a DOUBLE makes the operation DOUBLE, a decimal
//! literal (`1.5`) is a DECIMAL, `/` of two integers is DOUBLE, strings compare with dates
//! and timestamps as those. A string does not silently become a number: that is an error
//! at bind time asking for a CAST.

use std::sync::Arc;

use arrow_arith::boolean::{and, and_kleene, is_not_null, is_null, not, or_kleene};
use arrow_array::builder::StringBuilder;
use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, TimestampMicrosecondType};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int64Array,
    RecordBatch, Scalar, StringArray, TimestampMicrosecondArray, new_empty_array, new_null_array,
};
use arrow_schema::{DataType as ArrowType, Schema as ArrowSchema};
use chrono::TimeZone;
use chrono_tz::Tz;
use sqlparser::ast::{self, BinaryOperator, Spanned, UnaryOperator};

use super::functions::{self, Function};
use super::syntax::{
    Literal, MAX_DEPTH, Position, PredicateError, Value, find_field as find, literal, sql_type,
    unknown_column,
};
use crate::parse::scalars;

/// A value expression that parsed, not yet bound to a schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueExpr {
    text: String,
    root: Expr,
}

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    /// A column, or a field of a struct column (`_metadata.file_path`).
    Column(Vec<String>, Position),
    Literal(Literal),
    Negate(Box<Expr>, Position),
    Not(Box<Expr>, Position),
    Binary {
        op: BinaryOp,
        left: Box<Expr>,
        right: Box<Expr>,
        at: Position,
    },
    IsNull(Box<Expr>, bool),
    In {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
        at: Position,
    },
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        negated: bool,
        ignore_case: bool,
        at: Position,
    },
    Case {
        whens: Vec<(Expr, Expr)>,
        otherwise: Option<Box<Expr>>,
        at: Position,
    },
    Cast {
        expr: Box<Expr>,
        to: String,
        safe: bool,
        at: Position,
    },
    Call {
        name: String,
        args: Vec<Expr>,
        at: Position,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    And,
    Or,
    Concat,
}

impl BinaryOp {
    fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq
                | BinaryOp::NotEq
                | BinaryOp::Lt
                | BinaryOp::LtEq
                | BinaryOp::Gt
                | BinaryOp::GtEq
        )
    }
}

impl ValueExpr {
    /// Parses `text`, one expression; an error points at the first character that does
    /// not fit.
    pub fn parse(text: &str) -> Result<ValueExpr, PredicateError> {
        let parsed = super::syntax::parse_one(text, "expression")?;
        ValueExpr::from_ast(text, &parsed)
    }

    /// The expression `e`, parsed from `text` (positions are in `text`).
    pub fn from_ast(text: &str, e: &ast::Expr) -> Result<ValueExpr, PredicateError> {
        Ok(ValueExpr {
            text: text.to_string(),
            root: expr(text, e, 0)?,
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The top-level columns the expression reads.
    pub fn columns(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.root.columns(&mut out);
        out
    }

    /// Binds the expression to `schema` (names exactly, else by a unique case-insensitive
    /// match); timestamps without a zone, and dates turned into timestamps, are read in
    /// `zone`, Spark's session time zone.
    pub fn bind(&self, schema: &ArrowSchema, zone: Tz) -> Result<BoundValue, PredicateError> {
        let binder = Binder {
            text: &self.text,
            schema,
            zone,
        };
        Ok(BoundValue {
            text: self.text.clone(),
            root: binder.bind(&self.root)?,
            zone,
        })
    }
}

impl Expr {
    fn columns<'a>(&'a self, out: &mut Vec<&'a str>) {
        let mut add = |e: &'a Expr| e.columns(out);
        match self {
            Expr::Column(path, _) => {
                if !out.contains(&path[0].as_str()) {
                    out.push(&path[0]);
                }
            }
            Expr::Literal(_) => {}
            Expr::Negate(e, _)
            | Expr::Not(e, _)
            | Expr::IsNull(e, _)
            | Expr::Cast { expr: e, .. } => add(e),
            Expr::Binary { left, right, .. } => {
                add(left);
                add(right);
            }
            Expr::In { expr, list, .. } => {
                add(expr);
                list.iter().for_each(add);
            }
            Expr::Like { expr, pattern, .. } => {
                add(expr);
                add(pattern);
            }
            Expr::Case {
                whens, otherwise, ..
            } => {
                for (w, t) in whens {
                    add(w);
                    add(t);
                }
                if let Some(o) = otherwise {
                    add(o);
                }
            }
            Expr::Call { args, .. } => args.iter().for_each(add),
        }
    }
}

/// Our expression for a parsed one: only what the language has, anything else named with
/// its position.
///
/// Long because it is one match over sqlparser's expression kinds, each arm a short
/// translation.
fn expr(text: &str, e: &ast::Expr, depth: usize) -> Result<Expr, PredicateError> {
    let at = Position::of(e.span().start);
    let invalid = |at: Position, message: String| PredicateError::Invalid {
        text: text.to_string(),
        at,
        message,
    };
    if depth > MAX_DEPTH {
        return Err(invalid(at, format!("nested more than {MAX_DEPTH} deep")));
    }
    let sub = |e: &ast::Expr| expr(text, e, depth + 1).map(Box::new);
    Ok(match e {
        ast::Expr::Nested(inner) => expr(text, inner, depth + 1)?,
        ast::Expr::Identifier(ident) => Expr::Column(vec![ident.value.clone()], at),
        ast::Expr::CompoundIdentifier(parts) => {
            Expr::Column(parts.iter().map(|p| p.value.clone()).collect(), at)
        }
        ast::Expr::Value(_) | ast::Expr::TypedString(_) => Expr::Literal(literal(text, e)?),
        ast::Expr::UnaryOp { op, expr: inner } => match op {
            UnaryOperator::Not => Expr::Not(sub(inner)?, at),
            UnaryOperator::Minus => match literal(text, e) {
                Ok(l) => Expr::Literal(l),
                Err(_) => Expr::Negate(sub(inner)?, at),
            },
            UnaryOperator::Plus => expr(text, inner, depth + 1)?,
            other => return Err(invalid(at, format!("operator {other} is not supported"))),
        },
        ast::Expr::BinaryOp { left, op, right } => {
            let op = match op {
                BinaryOperator::Plus => BinaryOp::Add,
                BinaryOperator::Minus => BinaryOp::Sub,
                BinaryOperator::Multiply => BinaryOp::Mul,
                BinaryOperator::Divide => BinaryOp::Div,
                BinaryOperator::Modulo => BinaryOp::Rem,
                BinaryOperator::Eq => BinaryOp::Eq,
                BinaryOperator::NotEq => BinaryOp::NotEq,
                BinaryOperator::Lt => BinaryOp::Lt,
                BinaryOperator::LtEq => BinaryOp::LtEq,
                BinaryOperator::Gt => BinaryOp::Gt,
                BinaryOperator::GtEq => BinaryOp::GtEq,
                BinaryOperator::And => BinaryOp::And,
                BinaryOperator::Or => BinaryOp::Or,
                BinaryOperator::StringConcat => BinaryOp::Concat,
                other => {
                    return Err(invalid(
                        Position::of(right.span().start),
                        format!(
                            "operator {other} is not supported (+ - * / %, comparisons, AND, OR, \
                             NOT, ||)"
                        ),
                    ));
                }
            };
            Expr::Binary {
                op,
                left: sub(left)?,
                right: sub(right)?,
                at,
            }
        }
        ast::Expr::IsNull(inner) => Expr::IsNull(sub(inner)?, false),
        ast::Expr::IsNotNull(inner) => Expr::IsNull(sub(inner)?, true),
        ast::Expr::InList {
            expr: inner,
            list,
            negated,
        } => Expr::In {
            expr: sub(inner)?,
            list: list
                .iter()
                .map(|l| expr(text, l, depth + 1))
                .collect::<Result<_, _>>()?,
            negated: *negated,
            at,
        },
        ast::Expr::Between {
            expr: inner,
            negated,
            low,
            high,
        } => {
            let range = Expr::Binary {
                op: BinaryOp::And,
                left: Box::new(Expr::Binary {
                    op: BinaryOp::GtEq,
                    left: sub(inner)?,
                    right: sub(low)?,
                    at,
                }),
                right: Box::new(Expr::Binary {
                    op: BinaryOp::LtEq,
                    left: sub(inner)?,
                    right: sub(high)?,
                    at,
                }),
                at,
            };
            if *negated {
                Expr::Not(Box::new(range), at)
            } else {
                range
            }
        }
        ast::Expr::Like {
            negated,
            any: false,
            expr: inner,
            pattern,
            escape_char: None,
        }
        | ast::Expr::ILike {
            negated,
            any: false,
            expr: inner,
            pattern,
            escape_char: None,
        } => Expr::Like {
            expr: sub(inner)?,
            pattern: sub(pattern)?,
            negated: *negated,
            ignore_case: matches!(e, ast::Expr::ILike { .. }),
            at,
        },
        ast::Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            let mut whens = Vec::with_capacity(conditions.len());
            for w in conditions {
                let condition = expr(text, &w.condition, depth + 1)?;
                // `CASE x WHEN v THEN ...` is `CASE WHEN x = v THEN ...`.
                let condition = match operand {
                    Some(operand) => Expr::Binary {
                        op: BinaryOp::Eq,
                        left: sub(operand)?,
                        right: Box::new(condition),
                        at: Position::of(w.condition.span().start),
                    },
                    None => condition,
                };
                whens.push((condition, expr(text, &w.result, depth + 1)?));
            }
            Expr::Case {
                whens,
                otherwise: else_result.as_deref().map(sub).transpose()?,
                at,
            }
        }
        ast::Expr::Cast {
            kind,
            expr: inner,
            data_type,
            format: None,
            array: false,
        } => Expr::Cast {
            expr: sub(inner)?,
            to: data_type.to_string(),
            safe: matches!(kind, ast::CastKind::TryCast | ast::CastKind::SafeCast),
            at,
        },
        ast::Expr::Trim {
            expr: inner,
            trim_where,
            trim_what: None,
            trim_characters: None,
        } => {
            let name = match trim_where {
                None | Some(ast::TrimWhereField::Both) => "trim",
                Some(ast::TrimWhereField::Leading) => "ltrim",
                Some(ast::TrimWhereField::Trailing) => "rtrim",
            };
            Expr::Call {
                name: name.into(),
                args: vec![expr(text, inner, depth + 1)?],
                at,
            }
        }
        ast::Expr::Function(f) => call(text, f, at, depth)?,
        ast::Expr::Subquery(_) | ast::Expr::Exists { .. } | ast::Expr::InSubquery { .. } => {
            return Err(invalid(
                at,
                "a subquery needs a query engine: a flow computes each row from that row \
                 alone (not planned)"
                    .into(),
            ));
        }
        _ => {
            return Err(invalid(
                at,
                format!(
                    "`{e}` is not supported: see the expression language in the docs \
                     (columns, literals, operators, CASE, CAST and the listed functions)"
                ),
            ));
        }
    })
}

/// A function call: plain positional arguments, no window, filter or DISTINCT.
fn call(text: &str, f: &ast::Function, at: Position, depth: usize) -> Result<Expr, PredicateError> {
    let invalid = |message: String| PredicateError::Invalid {
        text: text.to_string(),
        at,
        message,
    };
    let name = f.name.to_string().to_ascii_lowercase();
    if !functions::is_known(&name) && f.over.is_none() {
        return Err(invalid(functions::unknown(&name)));
    }
    if f.over.is_some() {
        return Err(invalid(format!(
            "{name}() OVER (...) is a window, which needs a query engine (not planned)"
        )));
    }
    if f.filter.is_some() || !matches!(f.parameters, ast::FunctionArguments::None) {
        return Err(invalid(functions::unknown(&name)));
    }
    let mut args = Vec::new();
    match &f.args {
        ast::FunctionArguments::None => {}
        ast::FunctionArguments::Subquery(_) => {
            return Err(invalid(format!(
                "{name}(SELECT ...): a subquery is not supported"
            )));
        }
        ast::FunctionArguments::List(list) => {
            if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
                return Err(invalid(functions::unknown(&name)));
            }
            for arg in &list.args {
                match arg {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => {
                        args.push(expr(text, e, depth + 1)?)
                    }
                    _ => {
                        return Err(invalid(format!(
                            "{name}(): `{arg}` is not supported (plain arguments only)"
                        )));
                    }
                }
            }
        }
    }
    Ok(Expr::Call { name, args, at })
}

/// An expression bound to a schema, ready to evaluate over its batches.
#[derive(Debug, Clone)]
pub struct BoundValue {
    text: String,
    root: Node,
    zone: Tz,
}

#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    data_type: ArrowType,
}

#[derive(Debug, Clone)]
enum Kind {
    /// A column, then the struct fields on the way to the value.
    Column(usize, Vec<usize>),
    /// One value (a one-row array).
    Literal(ArrayRef),
    Now,
    Today,
    Cast {
        expr: Box<Node>,
        safe: bool,
    },
    Negate(Box<Node>),
    /// Spark's decimal `/`: `left * 10^up / right`, rounded half up, within the node's
    /// DECIMAL type.
    DecimalDiv {
        left: Box<Node>,
        right: Box<Node>,
        up: u32,
    },
    Arithmetic {
        op: BinaryOp,
        left: Box<Node>,
        right: Box<Node>,
    },
    Compare {
        op: BinaryOp,
        left: Box<Node>,
        right: Box<Node>,
    },
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>),
    IsNull(Box<Node>, bool),
    Like {
        expr: Box<Node>,
        pattern: Box<Node>,
        negated: bool,
        ignore_case: bool,
    },
    /// CASE and COALESCE: the first branch whose condition holds (COALESCE's condition is
    /// "its value is not null").
    Case {
        whens: Vec<(Option<Node>, Node)>,
        otherwise: Option<Box<Node>>,
    },
    NullIf(Box<Node>, Box<Node>),
    Call {
        function: Function,
        args: Vec<Node>,
    },
}

impl BoundValue {
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The type every evaluation returns.
    pub fn data_type(&self) -> &ArrowType {
        &self.root.data_type
    }

    /// The expression's value for each row of `batch` (of the schema it was bound to).
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<ArrayRef, PredicateError> {
        let rows = batch.num_rows();
        let evaluator = Evaluator {
            batch,
            zone: self.zone,
            now: chrono::Utc::now().timestamp_micros(),
        };
        let value = evaluator
            .eval(&self.root)
            .map_err(|f| PredicateError::Failed {
                text: self.text.clone(),
                row: f.row,
                message: f.message,
            })?;
        Ok(value.into_array(rows))
    }
}

/// A value during evaluation: one per row, or one for all rows (a literal).
enum Val {
    Array(ArrayRef),
    Scalar(ArrayRef),
}

impl Val {
    fn into_array(self, rows: usize) -> ArrayRef {
        match self {
            Val::Array(a) => a,
            Val::Scalar(s) => repeat(&s, rows),
        }
    }
}

/// A one-row array repeated `rows` times.
fn repeat(one: &ArrayRef, rows: usize) -> ArrayRef {
    if one.is_null(0) {
        return new_null_array(one.data_type(), rows);
    }
    let indices = arrow_array::UInt32Array::from(vec![0u32; rows]);
    arrow_select::take::take(one.as_ref(), &indices, None).expect("index 0 of a one-row array")
}

type Failure = functions::Failure;

fn failure(message: impl Into<String>) -> Failure {
    Failure {
        row: None,
        message: message.into(),
    }
}

struct Evaluator<'a> {
    batch: &'a RecordBatch,
    zone: Tz,
    /// `current_timestamp()`: one instant for the whole batch, as Spark fixes it per query.
    now: i64,
}

impl Evaluator<'_> {
    fn array(&self, node: &Node) -> Result<ArrayRef, Failure> {
        Ok(self.eval(node)?.into_array(self.batch.num_rows()))
    }

    /// `node` computed only on the rows `mask` holds (it has no nulls), NULL elsewhere; a
    /// failure names its row in this batch.
    fn array_where(&self, node: &Node, mask: &BooleanArray) -> Result<ArrayRef, Failure> {
        let rows = self.batch.num_rows();
        let live = mask.true_count();
        if live == rows {
            return self.array(node);
        }
        if live == 0 {
            return Ok(new_null_array(&node.data_type, rows));
        }
        let arrow = |e: arrow_schema::ArrowError| failure(e.to_string());
        let filtered =
            arrow_select::filter::filter_record_batch(self.batch, mask).map_err(arrow)?;
        let positions: Vec<usize> = (0..rows).filter(|&i| mask.value(i)).collect();
        let sub = Evaluator {
            batch: &filtered,
            zone: self.zone,
            now: self.now,
        };
        let values = sub.array(node).map_err(|mut f| {
            f.row = f.row.and_then(|r| positions.get(r).copied());
            f
        })?;
        let mut next = 0u32;
        let indices: arrow_array::UInt32Array = (0..rows)
            .map(|i| {
                mask.value(i).then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        arrow_select::take::take(values.as_ref(), &indices, None).map_err(arrow)
    }

    fn bools(&self, node: &Node) -> Result<BooleanArray, Failure> {
        Ok(self.array(node)?.as_boolean().clone())
    }

    /// Long because it is one match over the bound kinds, each arm one kernel call.
    fn eval(&self, node: &Node) -> Result<Val, Failure> {
        let arrow = |e: arrow_schema::ArrowError| failure(e.to_string());
        Ok(match &node.kind {
            Kind::Column(index, path) => {
                let mut column = Arc::clone(self.batch.column(*index));
                for field in path {
                    let parent = column.as_struct();
                    let child = Arc::clone(parent.column(*field));
                    // A null struct has null fields.
                    column = match parent.nulls() {
                        Some(_) => {
                            arrow_select::nullif::nullif(&child, &is_null(parent).map_err(arrow)?)
                                .map_err(arrow)?
                        }
                        None => child,
                    };
                }
                Val::Array(column)
            }
            Kind::Literal(one) => Val::Scalar(Arc::clone(one)),
            Kind::Now => Val::Scalar(Arc::new(
                TimestampMicrosecondArray::from(vec![self.now]).with_timezone("UTC"),
            )),
            Kind::Today => Val::Scalar(Arc::new(Date32Array::from(vec![functions::day_of(
                self.now, self.zone,
            )]))),
            Kind::Cast { expr, safe } => {
                let input = self.eval(expr)?;
                match input {
                    // A literal's failure is every row's: no row is named.
                    Val::Scalar(one) => Val::Scalar(
                        cast(&one, &node.data_type, *safe, self.zone).map_err(|mut f| {
                            f.row = None;
                            f
                        })?,
                    ),
                    Val::Array(a) => Val::Array(cast(&a, &node.data_type, *safe, self.zone)?),
                }
            }
            Kind::Negate(e) => {
                let a = self.array(e)?;
                Val::Array(arrow_arith::numeric::neg(&a).map_err(arrow)?)
            }
            Kind::DecimalDiv { left, right, up } => {
                let ArrowType::Decimal128(p, s) = node.data_type else {
                    return Err(failure("a decimal division of another type"));
                };
                let l = self.array(left)?;
                let r = self.array(right)?;
                Val::Array(Arc::new(decimal_divide(
                    l.as_primitive::<arrow_array::types::Decimal128Type>(),
                    r.as_primitive::<arrow_array::types::Decimal128Type>(),
                    *up,
                    p,
                    s,
                )?))
            }
            Kind::Arithmetic { op, left, right } => {
                let l = self.eval(left)?;
                let r = self.eval(right)?;
                let one = l.is_scalar() && r.is_scalar();
                Val::of(one, self.arithmetic(*op, l, r)?)
            }
            Kind::Compare { op, left, right } => {
                use arrow_ord::cmp;
                let l = self.eval(left)?;
                let r = self.eval(right)?;
                let one = l.is_scalar() && r.is_scalar();
                let (l, r) = (datum(&l), datum(&r));
                Val::of(
                    one,
                    Arc::new(
                        match op {
                            BinaryOp::Eq => cmp::eq(l.as_ref(), r.as_ref()),
                            BinaryOp::NotEq => cmp::neq(l.as_ref(), r.as_ref()),
                            BinaryOp::Lt => cmp::lt(l.as_ref(), r.as_ref()),
                            BinaryOp::LtEq => cmp::lt_eq(l.as_ref(), r.as_ref()),
                            BinaryOp::Gt => cmp::gt(l.as_ref(), r.as_ref()),
                            _ => cmp::gt_eq(l.as_ref(), r.as_ref()),
                        }
                        .map_err(arrow)?,
                    ),
                )
            }
            // The right side only where the left does not decide (false for AND, true for
            // OR), as Spark short-circuits.
            Kind::And(a, b) => {
                let left = self.bools(a)?;
                let undecided = decided_by(&left, false);
                let right = self.array_where(b, &undecided)?;
                Val::Array(Arc::new(
                    and_kleene(&left, right.as_boolean()).map_err(arrow)?,
                ))
            }
            Kind::Or(a, b) => {
                let left = self.bools(a)?;
                let undecided = decided_by(&left, true);
                let right = self.array_where(b, &undecided)?;
                Val::Array(Arc::new(
                    or_kleene(&left, right.as_boolean()).map_err(arrow)?,
                ))
            }
            Kind::Not(a) => Val::Array(Arc::new(not(&self.bools(a)?).map_err(arrow)?)),
            Kind::IsNull(e, negated) => {
                let a = self.array(e)?;
                Val::Array(Arc::new(
                    if *negated {
                        is_not_null(&a)
                    } else {
                        is_null(&a)
                    }
                    .map_err(arrow)?,
                ))
            }
            Kind::Like {
                expr,
                pattern,
                negated,
                ignore_case,
            } => {
                use arrow_string::like;
                let e = self.eval(expr)?;
                let p = self.eval(pattern)?;
                let one = e.is_scalar() && p.is_scalar();
                let (e, p) = (datum(&e), datum(&p));
                let (e, p) = (e.as_ref(), p.as_ref());
                Val::of(
                    one,
                    Arc::new(
                        match (negated, ignore_case) {
                            (false, false) => like::like(e, p),
                            (true, false) => like::nlike(e, p),
                            (false, true) => like::ilike(e, p),
                            (true, true) => like::nilike(e, p),
                        }
                        .map_err(arrow)?,
                    ),
                )
            }
            Kind::Case { whens, otherwise } => {
                // Lazily, as Spark: a branch is computed only for the rows that reach it,
                // so a guard (`CASE WHEN b = 0 THEN NULL ELSE a / b END`) keeps an ANSI
                // error of the rows it excludes from firing.
                let rows = self.batch.num_rows();
                let mut remaining = BooleanArray::from(vec![true; rows]);
                let mut result = new_null_array(&node.data_type, rows);
                for (condition, value) in whens {
                    if remaining.true_count() == 0 {
                        break;
                    }
                    let (take, value) = match condition {
                        Some(c) => {
                            let holds = self.array_where(c, &remaining)?;
                            let take =
                                known(and_kleene(holds.as_boolean(), &remaining).map_err(arrow)?);
                            let value = self.array_where(value, &take)?;
                            (take, value)
                        }
                        None => {
                            let value = self.array_where(value, &remaining)?;
                            let present = is_not_null(&value).map_err(arrow)?;
                            (and(&present, &remaining).map_err(arrow)?, value)
                        }
                    };
                    result = arrow_select::zip::zip(&take, &value, &result).map_err(arrow)?;
                    remaining = and(&remaining, &not(&take).map_err(arrow)?).map_err(arrow)?;
                }
                if let Some(o) = otherwise
                    && remaining.true_count() > 0
                {
                    let value = self.array_where(o, &remaining)?;
                    result = arrow_select::zip::zip(&remaining, &value, &result).map_err(arrow)?;
                }
                Val::Array(result)
            }
            Kind::NullIf(a, b) => {
                let left = self.array(a)?;
                let right = self.array(b)?;
                let equal = arrow_ord::cmp::eq(&left, &right).map_err(arrow)?;
                let equal = known(equal);
                Val::Array(arrow_select::nullif::nullif(&left, &equal).map_err(arrow)?)
            }
            Kind::Call { function, args } => {
                let rows = self.batch.num_rows();
                let args = args
                    .iter()
                    .map(|a| Ok(self.eval(a)?.into_array(rows)))
                    .collect::<Result<Vec<_>, Failure>>()?;
                Val::Array(function.evaluate(&args, self.zone)?)
            }
        })
    }

    /// `+ - * / %` on operands already cast to one type (DOUBLE for `/` but decimals),
    /// ANSI: a zero divisor or an overflow is an error naming the row where it can.
    fn arithmetic(&self, op: BinaryOp, l: Val, r: Val) -> Result<ArrayRef, Failure> {
        use arrow_arith::numeric;
        if matches!(op, BinaryOp::Div | BinaryOp::Rem) {
            let divisor = r.clone_array(self.batch.num_rows());
            let zero = arrow_cast::cast(&Int64Array::from(vec![0]), divisor.data_type())
                .map_err(|e| failure(e.to_string()))?;
            let is_zero = arrow_ord::cmp::eq(&divisor, &Scalar::new(zero))
                .map_err(|e| failure(e.to_string()))?;
            if let Some(row) = (0..is_zero.len()).find(|&i| is_zero.is_valid(i) && is_zero.value(i))
            {
                return Err(Failure {
                    row: Some(row),
                    message: "division by zero (a / NULLIF(b, 0) gives NULL instead)".into(),
                });
            }
        }
        let (l, r) = (datum(&l), datum(&r));
        let (l, r) = (l.as_ref(), r.as_ref());
        match op {
            BinaryOp::Add => numeric::add(l, r),
            BinaryOp::Sub => numeric::sub(l, r),
            BinaryOp::Mul => numeric::mul(l, r),
            BinaryOp::Div => numeric::div(l, r),
            _ => numeric::rem(l, r),
        }
        .map_err(|e| failure(format!("{e} (the result does not fit its type)")))
    }
}

impl Val {
    /// A kernel's result: one value when every input was one.
    fn of(one: bool, a: ArrayRef) -> Val {
        if one { Val::Scalar(a) } else { Val::Array(a) }
    }

    fn is_scalar(&self) -> bool {
        matches!(self, Val::Scalar(_))
    }

    fn clone_array(&self, rows: usize) -> ArrayRef {
        match self {
            Val::Array(a) => Arc::clone(a),
            Val::Scalar(s) => repeat(s, rows),
        }
    }
}

/// `l * 10^up / r` per row, rounded half up (Spark's decimal division); a zero divisor or
/// a result beyond `precision` digits is an error naming the row (ANSI).
fn decimal_divide(
    l: &arrow_array::Decimal128Array,
    r: &arrow_array::Decimal128Array,
    up: u32,
    precision: u8,
    scale: i8,
) -> Result<Decimal128Array, Failure> {
    use arrow_buffer::i256;
    let ten = i256::from_i128(10);
    let factor = ten
        .checked_pow(up)
        .ok_or_else(|| failure("decimal scale too large"))?;
    let limit = ten
        .checked_pow(u32::from(precision))
        .ok_or_else(|| failure("decimal precision too large"))?;
    let mut out = Vec::with_capacity(l.len());
    for row in 0..l.len() {
        if l.is_null(row) || r.is_null(row) {
            out.push(None);
            continue;
        }
        let overflow = || Failure {
            row: Some(row),
            message: format!(
                "the quotient does not fit DECIMAL({precision}, {scale}) (the result does not \
                 fit its type)"
            ),
        };
        let divisor = i256::from_i128(r.value(row));
        if divisor == i256::ZERO {
            return Err(Failure {
                row: Some(row),
                message: "division by zero (a / NULLIF(b, 0) gives NULL instead)".into(),
            });
        }
        let numerator = i256::from_i128(l.value(row))
            .checked_mul(factor)
            .ok_or_else(overflow)?;
        let mut q = numerator.checked_div(divisor).ok_or_else(overflow)?;
        let rem = numerator.checked_rem(divisor).ok_or_else(overflow)?;
        // Half up: away from zero when the remainder is at least half the divisor.
        let twice = rem
            .wrapping_abs()
            .checked_mul(i256::from_i128(2))
            .ok_or_else(overflow)?;
        if twice >= divisor.wrapping_abs() {
            let away = if numerator.is_negative() != divisor.is_negative() {
                i256::MINUS_ONE
            } else {
                i256::ONE
            };
            q = q.checked_add(away).ok_or_else(overflow)?;
        }
        if q.wrapping_abs() >= limit {
            return Err(overflow());
        }
        out.push(Some(q.to_i128().ok_or_else(overflow)?));
    }
    Decimal128Array::from(out)
        .with_precision_and_scale(precision, scale)
        .map_err(|e| failure(e.to_string()))
}

/// The rows `left` does not decide: not `decisive` (false for AND, true for OR).
fn decided_by(left: &BooleanArray, decisive: bool) -> BooleanArray {
    (0..left.len())
        .map(|i| Some(!(left.is_valid(i) && left.value(i) == decisive)))
        .collect()
}

/// Unknown (null) as false, as a WHEN or NULLIF reads it.
fn known(b: BooleanArray) -> BooleanArray {
    match b.nulls() {
        Some(_) => arrow_select::filter::prep_null_mask_filter(&b),
        None => b,
    }
}

/// A value as arrow's kernels take it: an array, or a scalar for a literal.
fn datum(v: &Val) -> Box<dyn arrow_array::Datum> {
    match v {
        Val::Array(a) => Box::new(Arc::clone(a)),
        Val::Scalar(s) => Box::new(Scalar::new(Arc::clone(s))),
    }
}

/// Casts `input` to `to` as Spark does: strings read as dates and timestamps in the session
/// time zone, timestamps written as `yyyy-MM-dd HH:mm:ss[.ffffff]` in it; a value that
/// cannot be read is an error naming it (ANSI), or NULL when `safe` (`try_cast`).
fn cast(input: &ArrayRef, to: &ArrowType, safe: bool, zone: Tz) -> Result<ArrayRef, Failure> {
    let from = input.data_type();
    if from == to {
        return Ok(Arc::clone(input));
    }
    if from == &ArrowType::Null {
        return Ok(new_null_array(to, input.len()));
    }
    let out: ArrayRef = match (from, to) {
        (ArrowType::Utf8, ArrowType::Date32) => Arc::new(Date32Array::from_iter(
            input.as_string::<i32>().iter().map(|v| {
                v.and_then(|t| {
                    scalars::parse_date(t)
                        .or_else(|| functions::day_of(scalars::parse_timestamp(t, zone)?, zone))
                })
            }),
        )),
        (ArrowType::Utf8, ArrowType::Timestamp(..)) => Arc::new(
            TimestampMicrosecondArray::from_iter(input.as_string::<i32>().iter().map(|v| {
                v.and_then(|t| crate::parse::temporal::Temporal::ISO.read_timestamp(t, zone))
            }))
            .with_timezone("UTC"),
        ),
        (ArrowType::Date32, ArrowType::Timestamp(..)) => Arc::new(
            TimestampMicrosecondArray::from_iter(
                input
                    .as_primitive::<Date32Type>()
                    .iter()
                    .map(|d| d.and_then(|d| functions::midnight(d, zone))),
            )
            .with_timezone("UTC"),
        ),
        (ArrowType::Timestamp(..), ArrowType::Date32) => {
            let micros = arrow_cast::cast(input, &functions::timestamp_type())
                .map_err(|e| failure(e.to_string()))?;
            Arc::new(Date32Array::from_iter(
                micros
                    .as_primitive::<TimestampMicrosecondType>()
                    .iter()
                    .map(|m| m.and_then(|m| functions::day_of(m, zone))),
            ))
        }
        (ArrowType::Timestamp(..), ArrowType::Utf8) => {
            let micros = arrow_cast::cast(input, &functions::timestamp_type())
                .map_err(|e| failure(e.to_string()))?;
            let mut out = StringBuilder::with_capacity(input.len(), input.len() * 26);
            for m in micros.as_primitive::<TimestampMicrosecondType>().iter() {
                out.append_option(m.and_then(|m| {
                    let at = zone.timestamp_micros(m).single()?;
                    // Spark: the fraction without its trailing zeros (`10:30:00.1`).
                    let mut text = at.format("%Y-%m-%d %H:%M:%S").to_string();
                    let fraction = m.rem_euclid(1_000_000);
                    if fraction != 0 {
                        text.push_str(format!(".{fraction:06}").trim_end_matches('0'));
                    }
                    Some(text)
                }));
            }
            Arc::new(out.finish())
        }
        // TIMESTAMP and numbers: seconds since the epoch, as Spark casts them.
        (ArrowType::Timestamp(..), t) if is_numeric(t) => {
            let micros = arrow_cast::cast(input, &functions::timestamp_type())
                .map_err(|e| failure(e.to_string()))?;
            let micros = micros.as_primitive::<TimestampMicrosecondType>();
            let seconds: ArrayRef = if t.is_floating() {
                Arc::new(Float64Array::from_iter(
                    micros.iter().map(|m| m.map(|m| m as f64 / 1e6)),
                ))
            } else {
                Arc::new(Int64Array::from_iter(
                    micros.iter().map(|m| m.map(|m| m.div_euclid(1_000_000))),
                ))
            };
            let safe = arrow_cast::CastOptions {
                safe: true,
                ..Default::default()
            };
            arrow_cast::cast_with_options(&seconds, to, &safe)
                .map_err(|e| failure(e.to_string()))?
        }
        (f, ArrowType::Timestamp(..)) if is_numeric(f) => {
            let as_f64 =
                arrow_cast::cast(input, &ArrowType::Float64).map_err(|e| failure(e.to_string()))?;
            Arc::new(
                TimestampMicrosecondArray::from_iter(
                    as_f64
                        .as_primitive::<arrow_array::types::Float64Type>()
                        .iter()
                        .map(|s| {
                            s.and_then(|s| {
                                let m = (s * 1e6).trunc();
                                (m.is_finite() && m.abs() < 9.2e18).then_some(m as i64)
                            })
                        }),
                )
                .with_timezone("UTC"),
            )
        }
        (ArrowType::Float64 | ArrowType::Float32, ArrowType::Utf8) => {
            let values =
                arrow_cast::cast(input, &ArrowType::Float64).map_err(|e| failure(e.to_string()))?;
            let texts: StringArray = values
                .as_primitive::<arrow_array::types::Float64Type>()
                .iter()
                .map(|v| v.map(spark_double_text))
                .collect();
            Arc::new(texts)
        }
        (ArrowType::Utf8, ArrowType::Boolean) => {
            // Spark's ANSI mode reads t, true, y, yes, 1 and f, false, n, no, 0.
            Arc::new(BooleanArray::from_iter(
                input.as_string::<i32>().iter().map(|v| {
                    let v = scalars::trim(v?).to_ascii_lowercase();
                    match v.as_str() {
                        "t" | "true" | "y" | "yes" | "1" => Some(true),
                        "f" | "false" | "n" | "no" | "0" => Some(false),
                        _ => None,
                    }
                }),
            ))
        }
        (ArrowType::Utf8, _) => {
            // Spark trims the text it reads as a number or a boolean.
            let trimmed: StringArray = input
                .as_string::<i32>()
                .iter()
                .map(|v| v.map(scalars::trim))
                .collect();
            arrow_cast::cast(&trimmed, to).map_err(|e| failure(e.to_string()))?
        }
        _ => arrow_cast::cast(input, to).map_err(|e| failure(e.to_string()))?,
    };
    if !safe && let Some(row) = (0..out.len()).find(|&i| input.is_valid(i) && out.is_null(i)) {
        let value = arrow_cast::display::array_value_to_string(input, row).unwrap_or_default();
        return Err(Failure {
            row: Some(row),
            message: format!(
                "cannot cast '{value}' to {} (try_cast gives NULL instead)",
                sql_type(to)
            ),
        });
    }
    Ok(out)
}

struct Binder<'a> {
    text: &'a str,
    schema: &'a ArrowSchema,
    zone: Tz,
}

fn node(kind: Kind, data_type: ArrowType) -> Node {
    Node { kind, data_type }
}

fn is_integer(t: &ArrowType) -> bool {
    t.is_integer()
}

fn is_numeric(t: &ArrowType) -> bool {
    t.is_integer() || t.is_floating() || matches!(t, ArrowType::Decimal128(..))
}

/// The type two values meet at (Spark's widening), or `None` when they do not mix.
fn common_type(a: &ArrowType, b: &ArrowType) -> Option<ArrowType> {
    use ArrowType::*;
    Some(match (a, b) {
        _ if a == b => a.clone(),
        (Null, t) | (t, Null) => t.clone(),
        _ if is_integer(a) && is_integer(b) => Int64,
        _ if (a.is_floating() && is_numeric(b)) || (b.is_floating() && is_numeric(a)) => Float64,
        (Decimal128(..), _) | (_, Decimal128(..)) if is_numeric(a) && is_numeric(b) => {
            let (p1, s1) = decimal_shape(a);
            let (p2, s2) = decimal_shape(b);
            let scale = s1.max(s2);
            let whole = (i16::from(p1) - i16::from(s1)).max(i16::from(p2) - i16::from(s2));
            Decimal128((whole + i16::from(scale)).clamp(1, 38) as u8, scale)
        }
        (Utf8, Date32) | (Date32, Utf8) => Date32,
        (Utf8, Timestamp(..))
        | (Timestamp(..), Utf8)
        | (Date32, Timestamp(..))
        | (Timestamp(..), Date32) => functions::timestamp_type(),
        (Timestamp(..), Timestamp(..)) => functions::timestamp_type(),
        _ => return None,
    })
}

/// A numeric type's precision and scale as a decimal (an integer is DECIMAL(19, 0)... at
/// most).
fn decimal_shape(t: &ArrowType) -> (u8, i8) {
    match t {
        ArrowType::Decimal128(p, s) => (*p, *s),
        ArrowType::Int8 | ArrowType::UInt8 => (3, 0),
        ArrowType::Int16 | ArrowType::UInt16 => (5, 0),
        ArrowType::Int32 | ArrowType::UInt32 => (10, 0),
        _ => (20, 0),
    }
}

impl Binder<'_> {
    fn invalid(&self, at: Position, message: String) -> PredicateError {
        PredicateError::Invalid {
            text: self.text.to_string(),
            at,
            message,
        }
    }

    /// `n` as `to` (no node when it already is).
    fn cast_to(&self, n: Node, to: &ArrowType) -> Node {
        if &n.data_type == to || to == &ArrowType::Null {
            return n;
        }
        if let Kind::Literal(one) = &n.kind
            && (one.data_type() == &ArrowType::Null || one.is_null(0))
        {
            return node(Kind::Literal(new_null_array(to, 1)), to.clone());
        }
        node(
            Kind::Cast {
                expr: Box::new(n),
                safe: false,
            },
            to.clone(),
        )
    }

    /// Long because it is one match over the expression kinds, each arm its type rule.
    fn bind(&self, e: &Expr) -> Result<Node, PredicateError> {
        Ok(match e {
            Expr::Column(path, at) => self.column(path, *at)?,
            Expr::Literal(l) => self.literal(l)?,
            Expr::Negate(inner, at) => {
                let n = self.bind(inner)?;
                if !is_numeric(&n.data_type) {
                    return Err(self.not_numeric(*at, "-", &n.data_type));
                }
                let t = if is_integer(&n.data_type) {
                    ArrowType::Int64
                } else {
                    n.data_type.clone()
                };
                let n = self.cast_to(n, &t);
                node(Kind::Negate(Box::new(n)), t)
            }
            Expr::Not(inner, at) => {
                let n = self.boolean(inner, *at, "NOT")?;
                node(Kind::Not(Box::new(n)), ArrowType::Boolean)
            }
            Expr::Binary {
                op,
                left,
                right,
                at,
            } => self.binary(*op, left, right, *at)?,
            Expr::IsNull(inner, negated) => node(
                Kind::IsNull(Box::new(self.bind(inner)?), *negated),
                ArrowType::Boolean,
            ),
            Expr::In {
                expr,
                list,
                negated,
                at,
            } => {
                // `x IN (a, b)` is `x = a OR x = b`, with SQL's unknowns.
                let mut any: Option<Node> = None;
                for item in list {
                    let eq = self.compare(BinaryOp::Eq, expr, item, *at)?;
                    any = Some(match any {
                        None => eq,
                        Some(so_far) => {
                            node(Kind::Or(Box::new(so_far), Box::new(eq)), ArrowType::Boolean)
                        }
                    });
                }
                let any = any.ok_or_else(|| self.invalid(*at, "IN () is empty".into()))?;
                if *negated {
                    node(Kind::Not(Box::new(any)), ArrowType::Boolean)
                } else {
                    any
                }
            }
            Expr::Like {
                expr,
                pattern,
                negated,
                ignore_case,
                at,
            } => {
                let text = self.text_of(expr, *at, "LIKE")?;
                let pattern = self.text_of(pattern, *at, "LIKE")?;
                node(
                    Kind::Like {
                        expr: Box::new(text),
                        pattern: Box::new(pattern),
                        negated: *negated,
                        ignore_case: *ignore_case,
                    },
                    ArrowType::Boolean,
                )
            }
            Expr::Case {
                whens,
                otherwise,
                at,
            } => {
                let mut bound = Vec::with_capacity(whens.len());
                for (condition, value) in whens {
                    bound.push((
                        Some(self.boolean(condition, *at, "WHEN")?),
                        self.bind(value)?,
                    ));
                }
                let otherwise = otherwise.as_deref().map(|o| self.bind(o)).transpose()?;
                self.branches(bound, otherwise, *at, "CASE")?
            }
            Expr::Cast { expr, to, safe, at } => {
                let target = self.type_named(to, *at)?;
                let n = self.bind(expr)?;
                if !castable(&n.data_type, &target) {
                    return Err(self.invalid(
                        *at,
                        format!(
                            "CAST from {} to {} is not supported",
                            sql_type(&n.data_type),
                            sql_type(&target)
                        ),
                    ));
                }
                if n.data_type == target {
                    n
                } else {
                    node(
                        Kind::Cast {
                            expr: Box::new(n),
                            safe: *safe,
                        },
                        target,
                    )
                }
            }
            Expr::Call { name, args, at } => self.call(name, args, *at)?,
        })
    }

    fn column(&self, path: &[String], at: Position) -> Result<Node, PredicateError> {
        let fields = self.schema.fields();
        let index = find(fields, &path[0]).ok_or_else(|| {
            let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
            self.invalid(at, unknown_column(&path[0], &names))
        })?;
        let mut data_type = fields[index].data_type().clone();
        let mut steps = Vec::new();
        for name in &path[1..] {
            let ArrowType::Struct(children) = &data_type else {
                return Err(self.invalid(
                    at,
                    format!(
                        "{} is {}, not a struct: it has no field {name}",
                        path[0],
                        sql_type(&data_type)
                    ),
                ));
            };
            let i = find(children, name).ok_or_else(|| {
                let names: Vec<&str> = children.iter().map(|f| f.name().as_str()).collect();
                self.invalid(at, unknown_column(name, &names))
            })?;
            steps.push(i);
            data_type = children[i].data_type().clone();
        }
        let n = node(Kind::Column(index, steps), data_type.clone());
        // One string type inside (decoders write Utf8; a Delta source may hold others).
        Ok(match data_type {
            ArrowType::LargeUtf8 | ArrowType::Utf8View => self.cast_to(n, &ArrowType::Utf8),
            _ => n,
        })
    }

    fn literal(&self, l: &Literal) -> Result<Node, PredicateError> {
        let one = |a: ArrayRef| {
            let t = a.data_type().clone();
            node(Kind::Literal(a), t)
        };
        let bad = |what: &str| self.invalid(l.at, format!("{} is not {what}", l.value.describe()));
        Ok(match &l.value {
            Value::Null => one(new_null_array(&ArrowType::Null, 1)),
            Value::Bool(b) => one(Arc::new(BooleanArray::from(vec![*b]))),
            Value::Text(s) => one(Arc::new(StringArray::from(vec![s.as_str()]))),
            Value::Number(n) => {
                if let Ok(v) = n.parse::<i64>() {
                    one(Arc::new(Int64Array::from(vec![v])))
                } else if !n.contains(['e', 'E'])
                    && let Some((p, s)) = scalars::decimal_type(n)
                    && let Some(v) = scalars::parse_decimal(n, p, s)
                {
                    // Spark reads `1.5` as DECIMAL(2, 1), so money stays exact.
                    let a = Decimal128Array::from(vec![v])
                        .with_precision_and_scale(p, s)
                        .map_err(|_| bad("a decimal that fits"))?;
                    one(Arc::new(a))
                } else {
                    let v = scalars::parse_double(n).ok_or_else(|| bad("a number"))?;
                    one(Arc::new(Float64Array::from(vec![v])))
                }
            }
            Value::Date(s) => {
                let d = scalars::parse_date(s).ok_or_else(|| bad("a date ('YYYY-MM-DD')"))?;
                one(Arc::new(Date32Array::from(vec![d])))
            }
            Value::Timestamp(s) => {
                let m = crate::parse::temporal::Temporal::ISO
                    .read_timestamp(s, self.zone)
                    .ok_or_else(|| bad("a timestamp ('YYYY-MM-DD HH:MM:SS')"))?;
                one(Arc::new(
                    TimestampMicrosecondArray::from(vec![m]).with_timezone("UTC"),
                ))
            }
        })
    }

    fn not_numeric(&self, at: Position, op: &str, t: &ArrowType) -> PredicateError {
        self.invalid(
            at,
            format!(
                "{op} needs numbers, and this is {}{}",
                sql_type(t),
                if t == &ArrowType::Utf8 {
                    ": CAST(... AS DOUBLE) (or a schema hint) reads it as a number"
                } else {
                    ""
                }
            ),
        )
    }

    fn boolean(&self, e: &Expr, at: Position, what: &str) -> Result<Node, PredicateError> {
        let n = self.bind(e)?;
        match n.data_type {
            ArrowType::Boolean => Ok(n),
            ArrowType::Null => Ok(self.cast_to(n, &ArrowType::Boolean)),
            ref other => Err(self.invalid(
                at,
                format!("{what} needs a condition, and this is {}", sql_type(other)),
            )),
        }
    }

    /// A value read as text: strings as they are, numbers, dates and booleans cast (as
    /// Spark casts them implicitly for string functions).
    fn text_of(&self, e: &Expr, at: Position, what: &str) -> Result<Node, PredicateError> {
        let n = self.bind(e)?;
        self.as_text(n, at, what)
    }

    fn as_text(&self, n: Node, at: Position, what: &str) -> Result<Node, PredicateError> {
        match &n.data_type {
            ArrowType::Utf8 => Ok(n),
            t if is_numeric(t)
                || matches!(
                    t,
                    ArrowType::Null
                        | ArrowType::Boolean
                        | ArrowType::Date32
                        | ArrowType::Timestamp(..)
                ) =>
            {
                Ok(self.cast_to(n, &ArrowType::Utf8))
            }
            other => Err(self.invalid(
                at,
                format!("{what} reads text, and this is {}", sql_type(other)),
            )),
        }
    }

    fn binary(
        &self,
        op: BinaryOp,
        left: &Expr,
        right: &Expr,
        at: Position,
    ) -> Result<Node, PredicateError> {
        match op {
            BinaryOp::And | BinaryOp::Or => {
                let word = if op == BinaryOp::And { "AND" } else { "OR" };
                let l = Box::new(self.boolean(left, at, word)?);
                let r = Box::new(self.boolean(right, at, word)?);
                let kind = if op == BinaryOp::And {
                    Kind::And(l, r)
                } else {
                    Kind::Or(l, r)
                };
                Ok(node(kind, ArrowType::Boolean))
            }
            BinaryOp::Concat => {
                let args = vec![
                    self.text_of(left, at, "||")?,
                    self.text_of(right, at, "||")?,
                ];
                Ok(node(
                    Kind::Call {
                        function: Function::Concat,
                        args,
                    },
                    ArrowType::Utf8,
                ))
            }
            _ if op.is_comparison() => self.compare(op, left, right, at),
            _ => {
                let l = self.bind(left)?;
                let r = self.bind(right)?;
                for n in [&l, &r] {
                    if !is_numeric(&n.data_type) && n.data_type != ArrowType::Null {
                        return Err(self.not_numeric(at, "arithmetic", &n.data_type));
                    }
                }
                let mut t = common_type(&l.data_type, &r.data_type).unwrap_or(ArrowType::Int64);
                if t == ArrowType::Null {
                    t = ArrowType::Int64;
                }
                // `/` of integers or doubles is DOUBLE; of decimals, a decimal.
                if op == BinaryOp::Div && !matches!(t, ArrowType::Decimal128(..)) {
                    t = ArrowType::Float64;
                }
                // Decimals keep their own precision and scale (Spark's result type for
                // `*` is p1 + p2 + 1, s1 + s2); other types meet at one.
                let (l, r) = if matches!(t, ArrowType::Decimal128(..)) {
                    let own = |n: Node| {
                        let (p, s) = decimal_shape(&n.data_type);
                        self.cast_to(n, &ArrowType::Decimal128(p, s))
                    };
                    (own(l), own(r))
                } else {
                    (self.cast_to(l, &t), self.cast_to(r, &t))
                };
                if op == BinaryOp::Div
                    && let (ArrowType::Decimal128(p1, s1), ArrowType::Decimal128(p2, s2)) =
                        (&l.data_type, &r.data_type)
                {
                    // Spark's decimal division: scale max(6, s1 + p2 + 1), rounded half up.
                    let (p1, s1, p2, s2) = (
                        i32::from(*p1),
                        i32::from(*s1),
                        i32::from(*p2),
                        i32::from(*s2),
                    );
                    let mut scale = 6.max(s1 + p2 + 1);
                    let mut precision = p1 - s1 + s2 + scale;
                    if precision > 38 {
                        let whole = precision - scale;
                        scale = (38 - whole).max(scale.min(6));
                        precision = 38;
                    }
                    let up = u32::try_from(s2 + scale - s1).unwrap_or(0);
                    return Ok(node(
                        Kind::DecimalDiv {
                            left: Box::new(l),
                            right: Box::new(r),
                            up,
                        },
                        ArrowType::Decimal128(precision as u8, scale as i8),
                    ));
                }
                // The result's type, as arrow's kernel computes it (decimals widen).
                let (a, b) = (new_empty_array(&l.data_type), new_empty_array(&r.data_type));
                let probe = match op {
                    BinaryOp::Add => arrow_arith::numeric::add(&a, &b),
                    BinaryOp::Sub => arrow_arith::numeric::sub(&a, &b),
                    BinaryOp::Mul => arrow_arith::numeric::mul(&a, &b),
                    BinaryOp::Div => arrow_arith::numeric::div(&a, &b),
                    _ => arrow_arith::numeric::rem(&a, &b),
                }
                .map_err(|e| self.invalid(at, e.to_string()))?;
                Ok(node(
                    Kind::Arithmetic {
                        op,
                        left: Box::new(l),
                        right: Box::new(r),
                    },
                    probe.data_type().clone(),
                ))
            }
        }
    }

    fn compare(
        &self,
        op: BinaryOp,
        left: &Expr,
        right: &Expr,
        at: Position,
    ) -> Result<Node, PredicateError> {
        let l = self.bind(left)?;
        let r = self.bind(right)?;
        let t = common_type(&l.data_type, &r.data_type).ok_or_else(|| {
            self.invalid(
                at,
                format!(
                    "cannot compare {} with {}: CAST one side to the other's type",
                    sql_type(&l.data_type),
                    sql_type(&r.data_type)
                ),
            )
        })?;
        // `NULL = NULL` is unknown: compared as two null booleans.
        let t = if t == ArrowType::Null {
            ArrowType::Boolean
        } else {
            t
        };
        if !comparable(&t) {
            return Err(self.invalid(at, format!("{} values cannot be compared", sql_type(&t))));
        }
        let (l, r) = (self.cast_to(l, &t), self.cast_to(r, &t));
        Ok(node(
            Kind::Compare {
                op,
                left: Box::new(l),
                right: Box::new(r),
            },
            ArrowType::Boolean,
        ))
    }

    /// CASE and COALESCE: every branch at one type.
    fn branches(
        &self,
        whens: Vec<(Option<Node>, Node)>,
        otherwise: Option<Node>,
        at: Position,
        what: &str,
    ) -> Result<Node, PredicateError> {
        let mut t = ArrowType::Null;
        for n in whens.iter().map(|(_, v)| v).chain(otherwise.iter()) {
            t = common_type(&t, &n.data_type).ok_or_else(|| {
                self.invalid(
                    at,
                    format!(
                        "{what} mixes {} and {}: CAST them to one type",
                        sql_type(&t),
                        sql_type(&n.data_type)
                    ),
                )
            })?;
        }
        let whens = whens
            .into_iter()
            .map(|(c, v)| (c, self.cast_to(v, &t)))
            .collect();
        let otherwise = otherwise.map(|o| Box::new(self.cast_to(o, &t)));
        Ok(node(Kind::Case { whens, otherwise }, t))
    }

    fn call(&self, name: &str, args: &[Expr], at: Position) -> Result<Node, PredicateError> {
        let no_arguments = |kind: Kind, t: ArrowType| {
            if args.is_empty() {
                Ok(node(kind, t))
            } else {
                Err(self.invalid(at, format!("{name}() takes no arguments")))
            }
        };
        match name {
            "current_timestamp" | "now" => {
                return no_arguments(Kind::Now, functions::timestamp_type());
            }
            "current_date" | "curdate" => return no_arguments(Kind::Today, ArrowType::Date32),
            "coalesce" | "ifnull" | "nvl" => {
                if args.is_empty() || (name != "coalesce" && args.len() != 2) {
                    return Err(self.invalid(
                        at,
                        format!(
                            "{name}() takes {}",
                            if name == "coalesce" {
                                "at least one argument"
                            } else {
                                "2 arguments"
                            }
                        ),
                    ));
                }
                let bound = args
                    .iter()
                    .map(|a| Ok((None, self.bind(a)?)))
                    .collect::<Result<Vec<_>, PredicateError>>()?;
                return self.branches(bound, None, at, name);
            }
            "nullif" => {
                let [a, b] = args else {
                    return Err(self.invalid(at, "nullif() takes 2 arguments".into()));
                };
                let l = self.bind(a)?;
                let r = self.bind(b)?;
                let t = common_type(&l.data_type, &r.data_type).ok_or_else(|| {
                    self.invalid(at, "nullif() compares values of one type: CAST one".into())
                })?;
                let (l, r) = (self.cast_to(l, &t), self.cast_to(r, &t));
                return Ok(node(Kind::NullIf(Box::new(l), Box::new(r)), t));
            }
            "isnull" | "isnotnull" => {
                let [a] = args else {
                    return Err(self.invalid(at, format!("{name}() takes 1 argument")));
                };
                return Ok(node(
                    Kind::IsNull(Box::new(self.bind(a)?), name == "isnotnull"),
                    ArrowType::Boolean,
                ));
            }
            _ => {}
        }
        let bound = args
            .iter()
            .map(|a| self.bind(a))
            .collect::<Result<Vec<_>, _>>()?;
        let types: Vec<ArrowType> = bound.iter().map(|n| n.data_type.clone()).collect();
        let literals: Vec<Option<String>> = args
            .iter()
            .map(|a| match a {
                Expr::Literal(Literal {
                    value: Value::Text(s),
                    ..
                }) => Some(s.clone()),
                _ => None,
            })
            .collect();
        let signature =
            functions::resolve(name, &types, &literals).map_err(|m| self.invalid(at, m))?;
        let mut cast = Vec::with_capacity(bound.len());
        for (n, to) in bound.into_iter().zip(&signature.arguments) {
            cast.push(if to == &ArrowType::Utf8 {
                self.as_text(n, at, name)?
            } else {
                self.cast_to(n, to)
            });
        }
        Ok(node(
            Kind::Call {
                function: signature.function,
                args: cast,
            },
            signature.returns,
        ))
    }

    /// A type as CAST names it (`DOUBLE`, `DECIMAL(10,2)`, `STRING`, ...): the names of
    /// schema hints.
    fn type_named(&self, text: &str, at: Position) -> Result<ArrowType, PredicateError> {
        let hint = crate::schema::hints::parse_hints(&format!("v {text}"))
            .ok()
            .and_then(|h| h.into_iter().next())
            .ok_or_else(|| {
                self.invalid(
                    at,
                    format!("CAST to {text}: not a type (STRING, INT, BIGINT, DOUBLE, DECIMAL(p,s), BOOLEAN, DATE, TIMESTAMP, ...)"),
                )
            })?;
        Ok(hint.data_type.to_arrow())
    }
}

/// A DOUBLE as Spark writes it: `1.0`, `0.001`, `1.0E7`, `1.5E-4`, `NaN`, `Infinity`.
fn spark_double_text(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let magnitude = v.abs();
    if magnitude != 0.0 && !(1e-3..1e7).contains(&magnitude) {
        let text = format!("{v:E}");
        return match text.split_once('E') {
            Some((mantissa, exponent)) if !mantissa.contains('.') => {
                format!("{mantissa}.0E{exponent}")
            }
            _ => text,
        };
    }
    format!("{v:?}")
}

/// Whether `CAST(from AS to)` is one Spark's ANSI mode allows (and we compute): nested
/// types only as themselves, DATE not with numbers, TIMESTAMP with numbers as seconds.
fn castable(from: &ArrowType, to: &ArrowType) -> bool {
    let nested = |t: &ArrowType| {
        matches!(
            t,
            ArrowType::Struct(_)
                | ArrowType::List(_)
                | ArrowType::LargeList(_)
                | ArrowType::Map(..)
        )
    };
    if from == to || from == &ArrowType::Null {
        return true;
    }
    if nested(from) || nested(to) {
        return false;
    }
    let date_and_number = |a: &ArrowType, b: &ArrowType| {
        matches!(a, ArrowType::Date32) && (is_numeric(b) || b == &ArrowType::Boolean)
    };
    let decimal_and_time = |a: &ArrowType, b: &ArrowType| {
        matches!(a, ArrowType::Decimal128(..)) && matches!(b, ArrowType::Timestamp(..))
    };
    !(date_and_number(from, to)
        || date_and_number(to, from)
        || decimal_and_time(from, to)
        || decimal_and_time(to, from))
}

/// Whether values of `t` have an order arrow compares.
fn comparable(t: &ArrowType) -> bool {
    is_numeric(t)
        || matches!(
            t,
            ArrowType::Utf8
                | ArrowType::Boolean
                | ArrowType::Date32
                | ArrowType::Timestamp(..)
                | ArrowType::Null
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int32Array, StructArray};
    use arrow_schema::{Field, Fields};

    /// id INT, name STRING, amount DECIMAL(10,2), score DOUBLE, raw STRING (JSON),
    /// _metadata STRUCT<file_path: STRING>; row 3 is all null.
    fn batch() -> RecordBatch {
        let meta_fields = Fields::from(vec![Field::new("file_path", ArrowType::Utf8, true)]);
        let meta = StructArray::new(
            meta_fields.clone(),
            vec![Arc::new(StringArray::from(vec!["f1", "f1", "f2", "f2"])) as ArrayRef],
            None,
        );
        let schema = Arc::new(ArrowSchema::new(vec![
            Field::new("id", ArrowType::Int32, true),
            Field::new("name", ArrowType::Utf8, true),
            Field::new("amount", ArrowType::Decimal128(10, 2), true),
            Field::new("score", ArrowType::Float64, true),
            Field::new("raw", ArrowType::Utf8, true),
            Field::new("_metadata", ArrowType::Struct(meta_fields), true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![Some(1), Some(2), Some(3), None])),
                Arc::new(StringArray::from(vec![
                    Some(" Ann "),
                    Some("bob"),
                    Some("Cy"),
                    None,
                ])),
                Arc::new(
                    Decimal128Array::from(vec![Some(1000), Some(1050), Some(99999), None])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
                Arc::new(Float64Array::from(vec![
                    Some(0.5),
                    Some(2.0),
                    Some(0.0),
                    None,
                ])),
                Arc::new(StringArray::from(vec![
                    Some(r#"{"coupon": "A1", "rate": "0.25"}"#),
                    Some(r#"{"rate": 1}"#),
                    Some("not json"),
                    None,
                ])),
                Arc::new(meta),
            ],
        )
        .unwrap()
    }

    fn eval(text: &str) -> ArrayRef {
        let b = batch();
        ValueExpr::parse(text)
            .and_then(|e| e.bind(&b.schema(), Tz::UTC))
            .and_then(|v| v.evaluate(&b))
            .unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn strings(text: &str) -> Vec<Option<String>> {
        let a = eval(text);
        let a = arrow_cast::cast(&a, &ArrowType::Utf8).unwrap();
        a.as_string::<i32>()
            .iter()
            .map(|v| v.map(String::from))
            .collect()
    }

    fn error(text: &str) -> String {
        let b = batch();
        match ValueExpr::parse(text)
            .and_then(|e| e.bind(&b.schema(), Tz::UTC))
            .and_then(|v| v.evaluate(&b))
        {
            Ok(_) => panic!("{text} should fail"),
            Err(e) => e.to_string(),
        }
    }

    fn some(values: &[&str]) -> Vec<Option<String>> {
        values
            .iter()
            .map(|v| (*v != "NULL").then(|| v.to_string()))
            .collect()
    }

    #[test]
    fn struct_fields_and_string_functions() {
        assert_eq!(
            strings("_metadata.file_path"),
            some(&["f1", "f1", "f2", "f2"])
        );
        assert_eq!(
            strings("upper(trim(name))"),
            some(&["ANN", "BOB", "CY", "NULL"])
        );
        assert_eq!(
            strings("lower(name) || '-' || id"),
            some(&[" ann -1", "bob-2", "cy-3", "NULL"])
        );
        assert_eq!(
            strings("concat_ws('/', name, id)"),
            some(&[" Ann /1", "bob/2", "Cy/3", ""])
        );
        assert_eq!(strings("length(name)"), some(&["5", "3", "2", "NULL"]));
    }

    #[test]
    fn the_seeds_rescued_field_promotion() {
        // silver_orders: COALESCE of a column and a field read back from the rescued JSON.
        assert_eq!(
            strings("COALESCE(CAST(id AS STRING), get_json_object(raw, '$.coupon'))"),
            some(&["1", "2", "3", "NULL"])
        );
        assert_eq!(
            strings("COALESCE(get_json_object(raw, '$.coupon'), name)"),
            some(&["A1", "bob", "Cy", "NULL"])
        );
        let rate = eval("COALESCE(CAST(get_json_object(raw, '$.rate') AS DOUBLE), score)");
        let rate = rate.as_primitive::<arrow_array::types::Float64Type>();
        assert_eq!(
            rate.iter().collect::<Vec<_>>(),
            [Some(0.25), Some(1.0), Some(0.0), None]
        );
    }

    #[test]
    fn arithmetic_follows_spark_types() {
        assert_eq!(eval("id + 1").data_type(), &ArrowType::Int64);
        assert_eq!(eval("id / 2").data_type(), &ArrowType::Float64);
        assert_eq!(strings("id / 2"), some(&["0.5", "1.0", "1.5", "NULL"]));
        // A decimal literal keeps money exact.
        assert!(matches!(
            eval("amount * 1.5").data_type(),
            ArrowType::Decimal128(_, 3)
        ));
        assert_eq!(
            strings("amount + 1"),
            some(&["11.00", "11.50", "1000.99", "NULL"])
        );
        assert_eq!(eval("score * 2").data_type(), &ArrowType::Float64);
        assert_eq!(strings("-id"), some(&["-1", "-2", "-3", "NULL"]));
    }

    #[test]
    fn case_in_like_and_comparisons() {
        assert_eq!(
            strings("CASE WHEN id = 1 THEN 'one' WHEN id > 2 THEN 'many' ELSE 'other' END"),
            some(&["one", "other", "many", "other"])
        );
        assert_eq!(
            strings("CASE id WHEN 2 THEN 'two' END"),
            some(&["NULL", "two", "NULL", "NULL"])
        );
        assert_eq!(
            strings("id IN (1, 3)"),
            some(&["true", "false", "true", "NULL"])
        );
        assert_eq!(
            strings("name LIKE 'b%'"),
            some(&["false", "true", "false", "NULL"])
        );
        assert_eq!(
            strings("name ILIKE 'c%'"),
            some(&["false", "false", "true", "NULL"])
        );
        assert_eq!(
            strings("amount > score"),
            some(&["true", "true", "true", "NULL"])
        );
        assert_eq!(strings("nullif(id, 2)"), some(&["1", "NULL", "3", "NULL"]));
    }

    #[test]
    fn dates_and_timestamps_in_the_session_zone() {
        let b = batch();
        let zone: Tz = "Asia/Seoul".parse().unwrap();
        let v = ValueExpr::parse(
            "date_format(to_timestamp('2024-01-15 10:30:00'), 'yyyy-MM-dd HH:mm')",
        )
        .unwrap()
        .bind(&b.schema(), zone)
        .unwrap()
        .evaluate(&b)
        .unwrap();
        assert_eq!(v.as_string::<i32>().value(0), "2024-01-15 10:30");
        assert_eq!(
            strings("to_date('15/01/2024', 'dd/MM/yyyy')"),
            some(&["2024-01-15"; 4])
        );
        assert_eq!(
            strings("CAST('2024-01-15' AS DATE) = DATE '2024-01-15'"),
            some(&["true"; 4])
        );
        let now = eval("current_timestamp()");
        let now = now.as_primitive::<TimestampMicrosecondType>();
        assert_eq!(now.value(0), now.value(3), "one instant for the batch");
        assert_eq!(eval("current_date()").data_type(), &ArrowType::Date32);
    }

    #[test]
    fn ansi_errors_name_the_row_and_try_forms_give_null() {
        let e = error("CAST(name AS INT)");
        assert!(
            e.contains("cannot cast ' Ann ' to INT") || e.contains("cannot cast 'Ann"),
            "{e}"
        );
        assert_eq!(strings("try_cast(name AS INT)"), some(&["NULL"; 4]));
        let b = batch();
        let failed = ValueExpr::parse("id / score")
            .unwrap()
            .bind(&b.schema(), Tz::UTC)
            .unwrap()
            .evaluate(&b)
            .unwrap_err();
        match failed {
            PredicateError::Failed { row, message, .. } => {
                assert_eq!(row, Some(2));
                assert!(message.contains("division by zero"), "{message}");
            }
            other => panic!("{other}"),
        }
        assert!(error("to_timestamp(name)").contains("try_to_timestamp"));
        assert_eq!(strings("try_to_timestamp(name)"), some(&["NULL"; 4]));
    }

    #[test]
    fn guards_keep_ansi_errors_of_the_rows_they_exclude_from_firing() {
        // score is 0 in row 3: each guard keeps `id / score` from that row.
        assert_eq!(
            strings("CASE WHEN score = 0 THEN NULL ELSE id / score END"),
            some(&["2.0", "1.0", "NULL", "NULL"])
        );
        assert_eq!(
            strings("score = 0 OR id / score > 1"),
            some(&["true", "false", "true", "NULL"])
        );
        assert_eq!(
            strings("score <> 0 AND id / score > 1"),
            some(&["true", "false", "false", "NULL"])
        );
        assert_eq!(
            strings("COALESCE(id, CAST(raw AS INT))"),
            some(&["1", "2", "3", "NULL"]),
            "raw is never read where name is present"
        );
        // A failure inside a branch names its row in the whole batch.
        let b = batch();
        let e = ValueExpr::parse("CASE WHEN id > 1 THEN CAST(name AS INT) END")
            .unwrap()
            .bind(&b.schema(), Tz::UTC)
            .unwrap()
            .evaluate(&b)
            .unwrap_err();
        assert!(
            matches!(e, PredicateError::Failed { row: Some(1), .. }),
            "{e:?}"
        );
    }

    #[test]
    fn casts_read_and_write_values_as_spark_does() {
        assert_eq!(
            strings("CAST(TIMESTAMP '2024-01-15 10:30:00.1' AS STRING)"),
            some(&["2024-01-15 10:30:00.1"; 4])
        );
        assert_eq!(
            strings("CAST(TIMESTAMP '2024-01-15 10:30:00' AS BIGINT)"),
            some(&["1705314600"; 4])
        );
        assert_eq!(
            strings("CAST(CAST(1705314600 AS TIMESTAMP) AS STRING)"),
            some(&["2024-01-15 10:30:00"; 4])
        );
        assert_eq!(strings("CAST(5e19 AS STRING)"), some(&["5.0E19"; 4]));
        assert_eq!(
            strings("CAST(score AS STRING)"),
            some(&["0.5", "2.0", "0.0", "NULL"])
        );
        assert_eq!(strings("CAST('yes' AS BOOLEAN)"), some(&["true"; 4]));
        assert!(error("CAST('on' AS BOOLEAN)").contains("cannot cast 'on' to BOOLEAN"));
        assert!(error("CAST(name AS ARRAY<INT>)").contains("not supported"));
        assert!(error("CAST(DATE '2024-01-01' AS INT)").contains("not supported"));
        // Spark's decimal division: DECIMAL(10,2) / BIGINT is DECIMAL(32, 23)... rounded.
        assert_eq!(
            strings("CAST(10.00 AS DECIMAL(10,2)) / 6")[0]
                .as_deref()
                .map(|s| &s[..10]),
            Some("1.66666666")
        );
        assert_eq!(
            strings("CAST(2.00 AS DECIMAL(10,2)) / CAST(3 AS DECIMAL(10,0))"),
            some(&["0.6666666666667"; 4]),
            "scale max(6, s1 + p2 + 1) = 13, rounded half up"
        );
        assert!(error("amount / (id - id)").contains("division by zero"));
    }

    #[test]
    fn nulls_of_no_type_compare_as_unknown() {
        assert_eq!(strings("NULL = NULL"), some(&["NULL"; 4]));
        assert_eq!(
            strings("COALESCE(NULL, id)"),
            some(&["1", "2", "3", "NULL"])
        );
    }

    #[test]
    fn databricks_casts_and_keyword_forms() {
        assert_eq!(strings("score::INT"), some(&["0", "2", "0", "NULL"]));
        assert_eq!(strings("ltrim(name)"), some(&["Ann ", "bob", "Cy", "NULL"]));
        assert_eq!(
            strings("id BETWEEN 2 AND 3"),
            some(&["false", "true", "true", "NULL"])
        );
        assert_eq!(
            strings("isnull(id)"),
            some(&["false", "false", "false", "true"])
        );
    }

    #[test]
    fn bind_errors_point_at_the_cause() {
        assert!(error("nme || 'x'").contains("no column nme; did you mean name?"));
        assert!(error("_metadata.file_pth").contains("did you mean file_path?"));
        assert!(error("name + 1").contains("CAST(... AS DOUBLE)"));
        assert!(error("name = 1").contains("cannot compare STRING with BIGINT"));
        assert!(error("sum(id)").contains("query engine"));
        assert!(error("frob(id)").contains("unknown function frob()"));
        assert!(error("row_number() OVER (ORDER BY id)").contains("window"));
        assert!(error("(SELECT 1)").contains("subquery"));
        assert!(error("CASE WHEN id = 1 THEN 'a' ELSE 2 END").contains("CAST them"));
        assert!(error("get_json_object(raw, 'coupon')").contains("does not start with $"));
        assert!(error("to_date(name, 'yyyy-QQ')").contains("to_date()"));
        assert!(error("upper(name, id)").contains("takes 1 argument"));
    }
}
