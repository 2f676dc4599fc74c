//! The one expression engine of flows: conditions (`where`, expectations, CDC's `APPLY AS
//! DELETE WHEN`, `optimize --where`) here, and the values a select list computes in
//! [`value`]. Parsed by `sqlparser` (Databricks dialect, so `` `col` `` is a column and
//! `"x"` a string, as in Spark), bound against an Arrow schema and evaluated over Arrow
//! arrays with arrow's kernels.
//!
//! A condition is any boolean value expression. A column compared with literals
//! (`= == != <> < <= > >=`, `[NOT] IN (...)`, `[NOT] BETWEEN`, `IS [NOT] NULL`, a BOOLEAN
//! column alone) takes a fast form here: the literal is read as its column's type (a string
//! compared with a DATE or TIMESTAMP column is read as one, as Spark casts it), and a literal
//! that cannot be is an error at bind time with its position, so a typo never silently
//! filters everything. Anything else (`lower(region) = 'eu'`, `qty * price > 100`,
//! `name LIKE 'a%'`, `CASE ...`) is computed by [`value`], with Spark's type rules.
//!
//! Evaluation follows SQL's three-valued logic: a comparison with a null value is
//! unknown, and a row is kept only where the whole condition is true (as Spark's WHERE).

use std::sync::Arc;

use arrow_arith::boolean::{and_kleene, is_not_null, is_null, not, or_kleene};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int64Array,
    RecordBatch, Scalar, StringArray, TimestampMicrosecondArray,
};
use arrow_schema::{ArrowError, DataType as ArrowType, Schema as ArrowSchema, TimeUnit};
use chrono_tz::Tz;
use sqlparser::ast::{self, BinaryOperator, Spanned, UnaryOperator};

use crate::parse::scalars;

mod functions;
mod syntax;
pub mod value;

pub(crate) use syntax::unknown_column;
use syntax::{Literal, MAX_DEPTH, Value, literal, sql_type};
pub use syntax::{Position, PredicateError};

/// A condition that parsed, not yet bound to a schema (what a config holds before the
/// stream's schema is known).
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    text: String,
    root: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>),
    Compare {
        column: Name,
        op: Op,
        literal: Literal,
    },
    In {
        column: Name,
        list: Vec<Literal>,
        negated: bool,
    },
    IsNull {
        column: Name,
        negated: bool,
    },
    /// A BOOLEAN column alone (`is_test`, `NOT is_test`).
    Truth(Name),
    /// Anything else: a value expression that must be a condition
    /// (`lower(region) = 'eu'`, `amount * qty > 100`, `name LIKE 'a%'`).
    Value {
        expr: value::ValueExpr,
        /// Where it starts, and its text, for an error saying it is not a condition.
        at: Position,
        shown: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
struct Name {
    text: String,
    at: Position,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

impl Op {
    /// The same comparison with its operands swapped (`5 < a` is `a > 5`).
    fn flipped(self) -> Op {
        match self {
            Op::Lt => Op::Gt,
            Op::LtEq => Op::GtEq,
            Op::Gt => Op::Lt,
            Op::GtEq => Op::LtEq,
            other => other,
        }
    }
}

impl Condition {
    /// Parses `text`; the error points at the first character that does not fit.
    pub fn parse(text: &str) -> Result<Condition, PredicateError> {
        let expr = syntax::parse_one(text, "condition")?;
        let mut root = node(text, &expr, 0)?;
        if root.has_value() {
            // Computed as one value expression, so AND and OR short-circuit as Spark's do
            // (`b = 0 OR a / b > 1` never divides by zero).
            root = Node::Value {
                expr: value::ValueExpr::from_ast(text, &expr)?,
                at: Position::of(expr.span().start),
                shown: expr.to_string(),
            };
        }
        Ok(Condition {
            text: text.to_string(),
            root,
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The column names the condition reads.
    pub fn columns(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.root.columns(&mut out);
        out
    }

    /// Binds the condition to `schema`: each column found (exactly, else by a unique
    /// case-insensitive match) and each literal read as its column's type. Timestamps
    /// without a zone are read in `zone`.
    pub fn bind(&self, schema: &ArrowSchema, zone: Tz) -> Result<Predicate, PredicateError> {
        let binder = Binder {
            text: &self.text,
            schema,
            zone,
        };
        Ok(Predicate {
            text: self.text.clone(),
            fields: schema
                .fields()
                .iter()
                .map(|f| (f.name().clone(), f.data_type().clone()))
                .collect(),
            root: binder.bind(&self.root)?,
        })
    }
}

impl Node {
    /// Whether any part of it is a value expression.
    fn has_value(&self) -> bool {
        match self {
            Node::And(a, b) | Node::Or(a, b) => a.has_value() || b.has_value(),
            Node::Not(a) => a.has_value(),
            Node::Value { .. } => true,
            _ => false,
        }
    }

    fn columns<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Node::And(a, b) | Node::Or(a, b) => {
                a.columns(out);
                b.columns(out);
            }
            Node::Not(a) => a.columns(out),
            Node::Compare { column, .. }
            | Node::In { column, .. }
            | Node::IsNull { column, .. }
            | Node::Truth(column) => {
                if !out.contains(&column.text.as_str()) {
                    out.push(&column.text);
                }
            }
            Node::Value { expr: v, .. } => {
                for c in v.columns() {
                    if !out.contains(&c) {
                        out.push(c);
                    }
                }
            }
        }
    }
}

/// Our node for a parsed expression: a column compared with literals takes the fast forms
/// (the literal read as the column's type); anything else is a value expression that must
/// be a condition.
fn node(text: &str, expr: &ast::Expr, depth: usize) -> Result<Node, PredicateError> {
    let at = Position::of(expr.span().start);
    if depth > MAX_DEPTH {
        return Err(PredicateError::Invalid {
            text: text.to_string(),
            at,
            message: format!("nested more than {MAX_DEPTH} deep"),
        });
    }
    let sub = |e: &ast::Expr| node(text, e, depth + 1);
    let column = column_name;
    let literal = |e: &ast::Expr| literal(text, e).ok();
    let comparison = |op: &BinaryOperator| match op {
        BinaryOperator::Eq => Some(Op::Eq),
        BinaryOperator::NotEq => Some(Op::NotEq),
        BinaryOperator::Lt => Some(Op::Lt),
        BinaryOperator::LtEq => Some(Op::LtEq),
        BinaryOperator::Gt => Some(Op::Gt),
        BinaryOperator::GtEq => Some(Op::GtEq),
        _ => None,
    };
    let fast = match expr {
        ast::Expr::Nested(inner) => Some(sub(inner)?),
        ast::Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => Some(Node::Not(Box::new(sub(expr)?))),
        ast::Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => Some(Node::And(Box::new(sub(left)?), Box::new(sub(right)?))),
        ast::Expr::BinaryOp {
            left,
            op: BinaryOperator::Or,
            right,
        } => Some(Node::Or(Box::new(sub(left)?), Box::new(sub(right)?))),
        ast::Expr::BinaryOp { left, op, right } => {
            match (comparison(op), is_column(left), is_column(right)) {
                (Some(op), true, false) => literal(right).map(|literal| Node::Compare {
                    column: column(left),
                    op,
                    literal,
                }),
                (Some(op), false, true) => literal(left).map(|literal| Node::Compare {
                    column: column(right),
                    op: op.flipped(),
                    literal,
                }),
                _ => None,
            }
        }
        ast::Expr::InList {
            expr,
            list,
            negated,
        } if is_column(expr) => list
            .iter()
            .map(literal)
            .collect::<Option<Vec<_>>>()
            .map(|list| Node::In {
                column: column(expr),
                list,
                negated: *negated,
            }),
        ast::Expr::Between {
            expr,
            negated,
            low,
            high,
        } if is_column(expr) => match (literal(low), literal(high)) {
            (Some(low), Some(high)) => {
                let name = column(expr);
                let range = Node::And(
                    Box::new(Node::Compare {
                        column: name.clone(),
                        op: Op::GtEq,
                        literal: low,
                    }),
                    Box::new(Node::Compare {
                        column: name,
                        op: Op::LtEq,
                        literal: high,
                    }),
                );
                Some(if *negated {
                    Node::Not(Box::new(range))
                } else {
                    range
                })
            }
            _ => None,
        },
        ast::Expr::Identifier(_) => Some(Node::Truth(column(expr))),
        ast::Expr::IsNull(e) if is_column(e) => Some(Node::IsNull {
            column: column(e),
            negated: false,
        }),
        ast::Expr::IsNotNull(e) if is_column(e) => Some(Node::IsNull {
            column: column(e),
            negated: true,
        }),
        _ => None,
    };
    match fast {
        Some(n) => Ok(n),
        None => Ok(Node::Value {
            expr: value::ValueExpr::from_ast(text, expr)?,
            at,
            shown: expr.to_string(),
        }),
    }
}

fn is_column(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Identifier(_))
}

/// The name of an [`is_column`] expression.
fn column_name(e: &ast::Expr) -> Name {
    match e {
        ast::Expr::Identifier(ident) => Name {
            text: ident.value.clone(),
            at: Position::of(ident.span.start),
        },
        other => Name {
            text: other.to_string(),
            at: Position::of(other.span().start),
        },
    }
}

/// A condition bound to a schema, ready to evaluate over its batches.
#[derive(Debug, Clone)]
pub struct Predicate {
    text: String,
    /// The columns it was bound to, checked against each batch.
    fields: Vec<(String, ArrowType)>,
    root: Bound,
}

#[derive(Debug, Clone)]
enum Bound {
    And(Box<Bound>, Box<Bound>),
    Or(Box<Bound>, Box<Bound>),
    Not(Box<Bound>),
    Compare {
        operand: Operand,
        op: Op,
        value: ArrayRef,
    },
    In {
        operand: Operand,
        values: Vec<ArrayRef>,
        negated: bool,
    },
    IsNull {
        index: usize,
        negated: bool,
    },
    Value(value::BoundValue),
}

/// Why evaluating failed: a kernel, or a value expression's row.
enum EvalError {
    Arrow(ArrowError),
    Value(PredicateError),
}

impl From<ArrowError> for EvalError {
    fn from(e: ArrowError) -> Self {
        EvalError::Arrow(e)
    }
}

/// A column as it is compared: cast first when the literal's type is wider (a SMALLINT
/// column compared with 100000 is compared as BIGINT).
#[derive(Debug, Clone)]
struct Operand {
    index: usize,
    cast: Option<ArrowType>,
}

impl Predicate {
    /// Parses `text` and binds it to `schema` (timestamps without a zone read as UTC).
    pub fn parse(text: &str, schema: &ArrowSchema) -> Result<Predicate, PredicateError> {
        Condition::parse(text)?.bind(schema, Tz::UTC)
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// Which rows of `batch` the condition holds for: true where it is true, false where
    /// it is false or unknown (null), so the result has no nulls.
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, PredicateError> {
        let schema = batch.schema();
        let matches = schema.fields().len() == self.fields.len()
            && schema
                .fields()
                .iter()
                .zip(&self.fields)
                .all(|(f, (name, t))| f.name() == name && f.data_type() == t);
        if !matches {
            return Err(PredicateError::Mismatch {
                text: self.text.clone(),
                message: "the batch's columns are not the ones the condition was bound to".into(),
            });
        }
        let result = eval(&self.root, batch).map_err(|e| match e {
            EvalError::Arrow(source) => PredicateError::Evaluate {
                text: self.text.clone(),
                source,
            },
            EvalError::Value(e) => e,
        })?;
        // Unknown is not true: nulls become false.
        Ok(match result.nulls() {
            Some(_) => arrow_select::filter::prep_null_mask_filter(&result),
            None => result,
        })
    }
}

fn eval(node: &Bound, batch: &RecordBatch) -> Result<BooleanArray, EvalError> {
    Ok(match node {
        Bound::And(a, b) => and_kleene(&eval(a, batch)?, &eval(b, batch)?)?,
        Bound::Or(a, b) => or_kleene(&eval(a, batch)?, &eval(b, batch)?)?,
        Bound::Not(a) => not(&eval(a, batch)?)?,
        Bound::Compare { operand, op, value } => {
            let column = operand_values(operand, batch)?;
            compare(&column, *op, value)?
        }
        Bound::In {
            operand,
            values,
            negated,
        } => {
            let column = operand_values(operand, batch)?;
            let mut any: Option<BooleanArray> = None;
            for value in values {
                let eq = compare(&column, Op::Eq, value)?;
                any = Some(match any {
                    Some(so_far) => or_kleene(&so_far, &eq)?,
                    None => eq,
                });
            }
            let any = any.unwrap_or_else(|| BooleanArray::from(vec![false; batch.num_rows()]));
            if *negated { not(&any)? } else { any }
        }
        Bound::Value(v) => v
            .evaluate(batch)
            .map_err(EvalError::Value)?
            .as_any()
            .downcast_ref::<BooleanArray>()
            .cloned()
            .ok_or_else(|| ArrowError::CastError("a condition that is not BOOLEAN".into()))?,
        Bound::IsNull { index, negated } => {
            let column = batch.column(*index);
            if *negated {
                is_not_null(column)?
            } else {
                is_null(column)?
            }
        }
    })
}

fn operand_values(operand: &Operand, batch: &RecordBatch) -> Result<ArrayRef, ArrowError> {
    let column = batch.column(operand.index);
    match &operand.cast {
        Some(t) => arrow_cast::cast(column, t),
        None => Ok(Arc::clone(column)),
    }
}

fn compare(column: &ArrayRef, op: Op, value: &ArrayRef) -> Result<BooleanArray, ArrowError> {
    use arrow_ord::cmp;
    let value = Scalar::new(Arc::clone(value));
    match op {
        Op::Eq => cmp::eq(column, &value),
        Op::NotEq => cmp::neq(column, &value),
        Op::Lt => cmp::lt(column, &value),
        Op::LtEq => cmp::lt_eq(column, &value),
        Op::Gt => cmp::gt(column, &value),
        Op::GtEq => cmp::gt_eq(column, &value),
    }
}

struct Binder<'a> {
    text: &'a str,
    schema: &'a ArrowSchema,
    zone: Tz,
}

impl Binder<'_> {
    fn invalid(&self, at: Position, message: String) -> PredicateError {
        PredicateError::Invalid {
            text: self.text.to_string(),
            at,
            message,
        }
    }

    fn bind(&self, node: &Node) -> Result<Bound, PredicateError> {
        Ok(match node {
            Node::And(a, b) => Bound::And(Box::new(self.bind(a)?), Box::new(self.bind(b)?)),
            Node::Or(a, b) => Bound::Or(Box::new(self.bind(a)?), Box::new(self.bind(b)?)),
            Node::Not(a) => Bound::Not(Box::new(self.bind(a)?)),
            Node::Compare {
                column,
                op,
                literal,
            } => {
                let index = self.column(column)?;
                let (cast, value) = self.literal(index, column, literal)?;
                Bound::Compare {
                    operand: Operand { index, cast },
                    op: *op,
                    value,
                }
            }
            Node::In {
                column,
                list,
                negated,
            } => {
                let index = self.column(column)?;
                let mut cast = None;
                let mut values = Vec::with_capacity(list.len());
                for literal in list {
                    let (c, v) = self.literal(index, column, literal)?;
                    values.push(v);
                    cast = c;
                }
                // Every literal of a list must be read at one type: a fractional number
                // makes the whole list (and the column) DOUBLE.
                if let Some(target) = &cast {
                    values = values
                        .iter()
                        .map(|v| {
                            if v.data_type() == target {
                                Ok(Arc::clone(v))
                            } else {
                                arrow_cast::cast(v, target)
                            }
                        })
                        .collect::<Result<_, _>>()
                        .map_err(|e| self.invalid(column.at, e.to_string()))?;
                }
                Bound::In {
                    operand: Operand { index, cast },
                    values,
                    negated: *negated,
                }
            }
            Node::IsNull { column, negated } => Bound::IsNull {
                index: self.column(column)?,
                negated: *negated,
            },
            Node::Value { expr: v, at, shown } => {
                let bound = v.bind(self.schema, self.zone)?;
                match bound.data_type() {
                    ArrowType::Boolean => Bound::Value(bound),
                    other => {
                        return Err(self.invalid(
                            *at,
                            format!(
                                "`{shown}` is {}, not a condition: compare it with a value",
                                sql_type(other)
                            ),
                        ));
                    }
                }
            }
            Node::Truth(column) => {
                let index = self.column(column)?;
                let field = &self.schema.fields()[index];
                if field.data_type() != &ArrowType::Boolean {
                    return Err(self.invalid(
                        column.at,
                        format!(
                            "column {} is {}, not BOOLEAN: compare it with a value",
                            field.name(),
                            sql_type(field.data_type())
                        ),
                    ));
                }
                Bound::Compare {
                    operand: Operand { index, cast: None },
                    op: Op::Eq,
                    value: Arc::new(BooleanArray::from(vec![true])),
                }
            }
        })
    }

    /// The index of a column: its exact name, else the one column equal ignoring case.
    fn column(&self, name: &Name) -> Result<usize, PredicateError> {
        let fields = self.schema.fields();
        if let Some(i) = syntax::find_field(fields, &name.text) {
            return Ok(i);
        }
        let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
        Err(self.invalid(name.at, unknown_column(&name.text, &names)))
    }

    /// The literal read as the type its column is compared at, and that type when the
    /// column must be cast to it.
    ///
    /// Long because it is one match of a literal's kind against the column's type, each arm
    /// one of Spark's comparison rules.
    fn literal(
        &self,
        index: usize,
        column: &Name,
        literal: &Literal,
    ) -> Result<(Option<ArrowType>, ArrayRef), PredicateError> {
        let field = &self.schema.fields()[index];
        let column_type = field.data_type();
        let mismatch = |expected: &str| {
            self.invalid(
                literal.at,
                format!(
                    "column {} is {}; {} is not {expected}",
                    field.name(),
                    sql_type(column_type),
                    literal.value.describe()
                ),
            )
        };
        if literal.value == Value::Null {
            return Err(self.invalid(
                literal.at,
                format!(
                    "a comparison with NULL is never true; write `{} IS NULL` or `{} IS NOT NULL`",
                    column.text, column.text
                ),
            ));
        }
        let cast_to = |target: ArrowType| (column_type != &target).then_some(target);
        Ok(match column_type {
            ArrowType::Int8
            | ArrowType::Int16
            | ArrowType::Int32
            | ArrowType::Int64
            | ArrowType::UInt8
            | ArrowType::UInt16
            | ArrowType::UInt32
            | ArrowType::UInt64 => {
                let Value::Number(n) = &literal.value else {
                    return Err(mismatch("a number"));
                };
                match n.parse::<i64>() {
                    Ok(v) => (
                        cast_to(ArrowType::Int64),
                        Arc::new(Int64Array::from(vec![v])),
                    ),
                    Err(_) => {
                        let v = scalars::parse_double(n).ok_or_else(|| mismatch("a number"))?;
                        (
                            Some(ArrowType::Float64),
                            Arc::new(Float64Array::from(vec![v])),
                        )
                    }
                }
            }
            ArrowType::Float16 | ArrowType::Float32 | ArrowType::Float64 => {
                let Value::Number(n) = &literal.value else {
                    return Err(mismatch("a number"));
                };
                let v = scalars::parse_double(n).ok_or_else(|| mismatch("a number"))?;
                (
                    cast_to(ArrowType::Float64),
                    Arc::new(Float64Array::from(vec![v])),
                )
            }
            ArrowType::Decimal128(precision, scale) => {
                let Value::Number(n) = &literal.value else {
                    return Err(mismatch("a number"));
                };
                // Compared exactly at the larger of the two scales.
                let literal_scale = n
                    .split_once('.')
                    .map_or(0, |(_, f)| f.len())
                    .try_into()
                    .unwrap_or(i8::MAX);
                let target_scale = (*scale).max(literal_scale);
                let target_precision =
                    (i16::from(*precision) + i16::from(target_scale - scale)).clamp(1, 38) as u8;
                let v = scalars::parse_decimal(n, 38, target_scale)
                    .ok_or_else(|| mismatch("a decimal number"))?;
                let target = ArrowType::Decimal128(target_precision, target_scale);
                let array = Decimal128Array::from(vec![v])
                    .with_precision_and_scale(target_precision, target_scale)
                    .map_err(|_| mismatch("a decimal number that fits"))?;
                (cast_to(target), Arc::new(array))
            }
            ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => {
                let Value::Text(s) = &literal.value else {
                    if let Value::Number(n) = &literal.value {
                        // Most often every column is STRING because inference is off: quoting
                        // would compare text ('999' > '1200'), which is not what was meant.
                        return Err(mismatch(&format!(
                            "a string: to compare numbers, read the column as one \
                             (cloudFiles.inferColumnTypes=true infers JSON and CSV types, or a \
                             hint: cloudFiles.schemaHints = \"{} DOUBLE\"); to compare text, \
                             quote it: '{n}'",
                            field.name()
                        )));
                    }
                    return Err(mismatch("a string (quote it: '...')"));
                };
                (
                    cast_to(ArrowType::Utf8),
                    Arc::new(StringArray::from(vec![s.clone()])),
                )
            }
            ArrowType::Boolean => {
                let Value::Bool(b) = &literal.value else {
                    return Err(mismatch("TRUE or FALSE"));
                };
                (None, Arc::new(BooleanArray::from(vec![*b])))
            }
            ArrowType::Date32 | ArrowType::Date64 => {
                let (Value::Text(s) | Value::Date(s)) = &literal.value else {
                    return Err(mismatch("a date ('YYYY-MM-DD')"));
                };
                let days =
                    scalars::parse_date(s).ok_or_else(|| mismatch("a date ('YYYY-MM-DD')"))?;
                (
                    cast_to(ArrowType::Date32),
                    Arc::new(Date32Array::from(vec![days])),
                )
            }
            ArrowType::Timestamp(_, zone) => {
                let (Value::Text(s) | Value::Timestamp(s) | Value::Date(s)) = &literal.value else {
                    return Err(mismatch("a timestamp ('YYYY-MM-DD HH:MM:SS')"));
                };
                let micros = scalars::parse_timestamp(s, self.zone)
                    .or_else(|| {
                        // A date alone is its midnight, as Spark casts it.
                        let days = scalars::parse_date(s)?;
                        let date = chrono::NaiveDate::from_num_days_from_ce_opt(
                            days + scalars::EPOCH_DAYS_FROM_CE,
                        )?;
                        scalars::to_utc_micros(date.and_hms_opt(0, 0, 0)?, None, self.zone)
                    })
                    .ok_or_else(|| mismatch("a timestamp ('YYYY-MM-DD HH:MM:SS')"))?;
                let target = ArrowType::Timestamp(TimeUnit::Microsecond, zone.clone());
                let array =
                    TimestampMicrosecondArray::from(vec![micros]).with_timezone_opt(zone.clone());
                (cast_to(target), Arc::new(array))
            }
            other => {
                return Err(self.invalid(
                    column.at,
                    format!(
                        "column {} is {}: only IS [NOT] NULL applies to it",
                        field.name(),
                        sql_type(other)
                    ),
                ));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int16Array, Int32Array};
    use arrow_schema::Field;

    /// id INT, name STRING, amount DECIMAL(10,2), score DOUBLE, ok BOOLEAN,
    /// day DATE, at TIMESTAMP, small SMALLINT; row 3 is all null.
    fn batch() -> RecordBatch {
        let days = |s: &str| scalars::parse_date(s).unwrap();
        let micros = |s: &str| scalars::parse_timestamp(s, Tz::UTC).unwrap();
        let schema = Arc::new(ArrowSchema::new(vec![
            Field::new("id", ArrowType::Int32, true),
            Field::new("name", ArrowType::Utf8, true),
            Field::new("amount", ArrowType::Decimal128(10, 2), true),
            Field::new("score", ArrowType::Float64, true),
            Field::new("ok", ArrowType::Boolean, true),
            Field::new("day", ArrowType::Date32, true),
            Field::new(
                "at",
                ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new("small", ArrowType::Int16, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![Some(1), Some(2), Some(3), None])),
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    Some("b"),
                    Some("c"),
                    None,
                ])),
                Arc::new(
                    Decimal128Array::from(vec![Some(1000), Some(1010), Some(99999), None])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
                Arc::new(Float64Array::from(vec![
                    Some(0.5),
                    Some(1.5),
                    Some(2.5),
                    None,
                ])),
                Arc::new(BooleanArray::from(vec![
                    Some(true),
                    Some(false),
                    Some(true),
                    None,
                ])),
                Arc::new(Date32Array::from(vec![
                    Some(days("2024-12-31")),
                    Some(days("2025-01-01")),
                    Some(days("2025-06-30")),
                    None,
                ])),
                Arc::new(
                    TimestampMicrosecondArray::from(vec![
                        Some(micros("2024-12-31T23:59:59Z")),
                        Some(micros("2025-01-01T00:00:00Z")),
                        Some(micros("2025-01-01T10:30:00Z")),
                        None,
                    ])
                    .with_timezone("UTC"),
                ),
                Arc::new(Int16Array::from(vec![Some(-1), Some(0), Some(300), None])),
            ],
        )
        .unwrap()
    }

    /// The ids of the rows `text` keeps.
    fn kept(text: &str) -> Vec<usize> {
        let b = batch();
        let p = Predicate::parse(text, &b.schema()).unwrap_or_else(|e| panic!("{text}: {e}"));
        let mask = p.evaluate(&b).unwrap();
        assert_eq!(mask.null_count(), 0, "{text}");
        (0..mask.len())
            .filter(|i| mask.value(*i))
            .map(|i| i + 1)
            .collect()
    }

    fn error(text: &str) -> String {
        let b = batch();
        match Predicate::parse(text, &b.schema()) {
            Ok(_) => panic!("{text} should not bind"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn each_comparison_operator() {
        assert_eq!(kept("id = 2"), [2]);
        assert_eq!(kept("id == 2"), [2]);
        assert_eq!(kept("id != 2"), [1, 3]);
        assert_eq!(kept("id <> 2"), [1, 3]);
        assert_eq!(kept("id < 2"), [1]);
        assert_eq!(kept("id <= 2"), [1, 2]);
        assert_eq!(kept("id > 2"), [3]);
        assert_eq!(kept("id >= 2"), [2, 3]);
        // The literal on the left is the same comparison turned around.
        assert_eq!(kept("2 < id"), [3]);
        assert_eq!(kept("-1 = small"), [1]);
    }

    #[test]
    fn literals_of_each_type() {
        assert_eq!(kept("name = 'b'"), [2]);
        assert_eq!(
            kept("name = \"b\""),
            [2],
            "a double-quoted string, as in Spark"
        );
        assert_eq!(kept("`name` >= 'b'"), [2, 3]);
        assert_eq!(kept("amount = 10.10"), [2]);
        assert_eq!(kept("amount = 10.1"), [2]);
        assert_eq!(kept("amount > 10.005"), [2, 3]);
        assert_eq!(kept("amount < 11"), [1, 2]);
        assert_eq!(kept("score > 1"), [2, 3]);
        assert_eq!(kept("score <= 1.5"), [1, 2]);
        assert_eq!(
            kept("id < 2.5"),
            [1, 2],
            "a fractional literal compares as DOUBLE"
        );
        assert!(kept("small > 100000").is_empty(), "wider than SMALLINT");
        assert_eq!(kept("small >= 300"), [3]);
        assert_eq!(kept("ok = true"), [1, 3]);
        assert_eq!(kept("ok = FALSE"), [2]);
    }

    #[test]
    fn strings_read_as_dates_and_timestamps() {
        assert_eq!(kept("day < '2025-01-01'"), [1]);
        assert_eq!(kept("day >= DATE '2025-01-01'"), [2, 3]);
        assert_eq!(kept("at < '2025-01-01'"), [1], "a date is its midnight");
        assert_eq!(kept("at >= '2025-01-01 10:00:00'"), [3]);
        assert_eq!(kept("at = TIMESTAMP '2025-01-01T00:00:00Z'"), [2]);
        assert_eq!(kept("at > '2025-01-01T11:00:00+02:00'"), [3]);
    }

    #[test]
    fn in_between_null_and_logic() {
        assert_eq!(kept("id IN (1, 3)"), [1, 3]);
        assert_eq!(kept("id NOT IN (1, 3)"), [2]);
        assert_eq!(kept("id IN (1, 2.5)"), [1]);
        assert_eq!(kept("name IN ('a', 'c', 'z')"), [1, 3]);
        assert_eq!(kept("day IN ('2025-01-01')"), [2]);
        assert_eq!(kept("id BETWEEN 2 AND 3"), [2, 3]);
        assert_eq!(kept("id NOT BETWEEN 2 AND 3"), [1]);
        assert_eq!(kept("id IS NULL"), [4]);
        assert_eq!(kept("name IS NOT NULL"), [1, 2, 3]);
        assert_eq!(kept("id = 1 OR name = 'c'"), [1, 3]);
        assert_eq!(kept("id >= 1 AND name != 'b'"), [1, 3]);
        assert_eq!(kept("NOT id = 1"), [2, 3]);
        assert_eq!(kept("NOT (id = 1 OR id = 2) AND ok = true"), [3]);
        assert_eq!(kept("ok"), [1, 3], "a BOOLEAN column alone is a condition");
        assert_eq!(kept("NOT ok AND id > 0"), [2]);
        assert!(error("id AND ok").contains("column id is INT, not BOOLEAN"));
    }

    #[test]
    fn nesting_and_precedence() {
        // AND binds tighter than OR.
        assert_eq!(kept("id = 1 OR id = 2 AND name = 'a'"), [1]);
        assert_eq!(kept("(id = 1 OR id = 2) AND name = 'a'"), [1]);
        assert_eq!(kept("((id = 1) OR (id = 3)) AND NOT (ok = false)"), [1, 3]);
        assert_eq!(kept("NOT (NOT (id = 2))"), [2]);
    }

    #[test]
    fn unknown_is_not_true() {
        // Row 4 is null everywhere: neither a comparison nor its negation keeps it.
        assert_eq!(kept("id != 1"), [2, 3]);
        assert_eq!(kept("NOT (id = 1)"), [2, 3]);
        assert_eq!(kept("id NOT IN (1)"), [2, 3]);
        // Unknown OR true is true; unknown AND false is false.
        assert_eq!(kept("id = 1 OR id IS NULL"), [1, 4]);
        assert_eq!(kept("NOT (id = 9 AND name = 'x')"), [1, 2, 3]);
    }

    #[test]
    fn parse_errors_point_at_the_position() {
        let e = error("id = = 2");
        assert_eq!(
            e,
            "where \"id = = 2\" at column 6: expected an expression, found ="
        );
        let e = error("id = 2 name = 'a'");
        assert!(e.contains("at column 8"), "{e}");
        assert!(
            e.contains("expected the end of the condition, found name"),
            "{e}"
        );
        let e = error("id = 'a");
        assert!(e.contains("column 6"), "{e}");
        let e = error("");
        assert!(e.contains("empty"), "{e}");
        // No parser internals (`No infix parser for token ShiftRight`).
        let e = error("id >> 2");
        assert!(
            e.contains("unexpected >>") && !e.contains("ShiftRight"),
            "{e}"
        );
        let e = error("id = 1 AND\n  nme = 'a'");
        assert!(
            e.contains("at line 2, column 3: no column nme; did you mean name?"),
            "{e}"
        );
        let deep = format!("{}id = 1{}", "(".repeat(200), ")".repeat(200));
        assert!(
            error(&deep).contains("nested"),
            "deep nesting is an error, not a crash"
        );
    }

    #[test]
    fn value_expressions_are_conditions_too() {
        // Beyond a column and a literal, the value engine (value.rs) computes the sides.
        assert_eq!(kept("id + 1 = 3"), [2]);
        assert_eq!(kept("upper(name) = 'B'"), [2]);
        assert_eq!(kept("name LIKE 'c%' OR id * 2 = 2"), [1, 3]);
        assert_eq!(kept("small > id"), [3]);
        // With a value part, the whole condition short-circuits: no division by zero.
        assert_eq!(kept("small = 0 OR id / small > 0"), [2, 3]);
        // What is not a condition, or does not compare, is refused at bind time.
        let e = error("upper(name)");
        assert!(
            e.contains("`upper(name)` is STRING, not a condition"),
            "{e}"
        );
        assert!(error("id = name").contains("cannot compare INT with STRING"));
        assert!(error("s.x = 1").contains("no column s"));
        assert!(error("count(id) > 1").contains("query engine"));
    }

    #[test]
    fn unknown_columns_suggest_the_closest() {
        assert_eq!(
            error("amunt > 1"),
            "where \"amunt > 1\" at column 1: no column amunt; did you mean amount?"
        );
        let e = error("zzzzzzzz = 1");
        assert!(e.contains("no column zzzzzzzz (columns: id, name"), "{e}");
        // A unique case-insensitive match binds.
        assert_eq!(kept("ID = 1"), [1]);
    }

    #[test]
    fn literals_of_another_type_are_errors() {
        assert_eq!(
            error("day < 'soon'"),
            "where \"day < 'soon'\" at column 7: column day is DATE; the string 'soon' is not a date ('YYYY-MM-DD')"
        );
        assert!(error("id = 'one'").contains("at column 6: column id is INT"));
        let e = error("name = 5");
        assert!(
            e.contains("cloudFiles.inferColumnTypes=true")
                && e.contains("name DOUBLE")
                && e.contains("quote it: '5'"),
            "{e}"
        );
        assert!(error("ok = 1").contains("not TRUE or FALSE"));
        assert!(error("at > 'noon'").contains("not a timestamp"));
        assert!(error("id IN (1, 'x')").contains("at column 11"));
        assert!(error("id = NULL").contains("IS NULL"));
        assert!(error("amount = 1e400").contains("decimal"));
    }

    #[test]
    fn a_batch_of_other_columns_is_refused() {
        let b = batch();
        let p = Predicate::parse("id = 1", &b.schema()).unwrap();
        let other = b.project(&[1, 0]).unwrap();
        assert!(matches!(
            p.evaluate(&other),
            Err(PredicateError::Mismatch { .. })
        ));
    }

    /// Column names that are SQL keywords still read as columns where unambiguous.
    #[test]
    fn keyword_like_column_names() {
        let names = [
            "date",
            "timestamp",
            "value",
            "user",
            "year",
            "month",
            "order",
        ];
        let schema = Arc::new(ArrowSchema::new(
            names
                .iter()
                .map(|n| Field::new(*n, ArrowType::Int64, true))
                .collect::<Vec<_>>(),
        ));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            names
                .iter()
                .map(|_| Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef)
                .collect(),
        )
        .unwrap();
        for text in [
            "date = 1",
            "timestamp = 1",
            "value = 1",
            "user = 1",
            "year = 1 and month in (1, 3)",
            "`order` = 1",
        ] {
            let p = Predicate::parse(text, &schema).unwrap_or_else(|e| panic!("{e}"));
            let mask = p.evaluate(&batch).unwrap();
            assert_eq!(mask.true_count(), 1, "{text}");
        }
    }
}
