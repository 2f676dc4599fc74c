//! The vocabulary both kinds of expression share: positions in the text, the error, and
//! literals as parsed (conditions in `mod.rs`, values in `value.rs`).

use std::fmt;

use arrow_schema::{ArrowError, DataType as ArrowType};
use sqlparser::ast::{self, Spanned, UnaryOperator};
use sqlparser::parser::ParserError;
use sqlparser::tokenizer::Location as SqlLocation;

/// Nesting deeper than this is refused (an error, never a stack overflow).
pub(super) const MAX_DEPTH: usize = 64;

/// Where in the condition's text an error is: line and column, from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: u64,
    pub column: u64,
}

impl Position {
    pub(super) fn of(location: SqlLocation) -> Self {
        Position {
            line: location.line.max(1),
            column: location.column.max(1),
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 1 {
            write!(f, "line {}, column {}", self.line, self.column)
        } else {
            write!(f, "column {}", self.column)
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PredicateError {
    /// The condition does not parse, names an unknown column, or compares a column with
    /// a literal of another type.
    #[error("where \"{text}\" at {at}: {message}")]
    Invalid {
        text: String,
        at: Position,
        message: String,
    },
    /// A batch does not have the columns the condition was bound to.
    #[error("where \"{text}\": {message}")]
    Mismatch { text: String, message: String },
    #[error("where \"{text}\": {source}")]
    Evaluate { text: String, source: ArrowError },
    /// A value could not be computed for one row, as Spark's ANSI mode refuses it: a cast
    /// or a parse that cannot read its input, a division by zero, an overflow. `row` is
    /// the row of the evaluated batch, when known.
    #[error("\"{text}\": {message}")]
    Failed {
        text: String,
        row: Option<usize>,
        message: String,
    },
}

/// `text` parsed as one expression (a `what`: condition or expression); an error points at
/// the first character that does not fit.
pub(super) fn parse_one(text: &str, what: &str) -> Result<ast::Expr, PredicateError> {
    let invalid = |at: Position, message: String| PredicateError::Invalid {
        text: text.to_string(),
        at,
        message,
    };
    if text.trim().is_empty() {
        return Err(invalid(
            Position { line: 1, column: 1 },
            format!("the {what} is empty"),
        ));
    }
    let dialect = sqlparser::dialect::DatabricksDialect;
    let mut parser = sqlparser::parser::Parser::new(&dialect)
        .with_recursion_limit(MAX_DEPTH)
        .try_with_sql(text)
        .map_err(|e| parser_error(text, e))?;
    let expr = parser.parse_expr().map_err(|e| parser_error(text, e))?;
    let next = parser.peek_token();
    if next.token != sqlparser::tokenizer::Token::EOF {
        return Err(invalid(
            Position::of(next.span.start),
            format!("expected the end of the {what}, found {}", next.token),
        ));
    }
    Ok(expr)
}

/// A field by its exact name, else the one field equal ignoring case.
pub(super) fn find_field(fields: &arrow_schema::Fields, name: &str) -> Option<usize> {
    fields.iter().position(|f| f.name() == name).or_else(|| {
        let folded: Vec<usize> = (0..fields.len())
            .filter(|i| fields[*i].name().eq_ignore_ascii_case(name))
            .collect();
        (folded.len() == 1).then(|| folded[0])
    })
}

impl PredicateError {
    /// sqlparser's error for `text`, with our position and wording.
    pub fn from_parser(text: &str, e: ParserError) -> PredicateError {
        parser_error(text, e)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Literal {
    pub(super) value: Value,
    pub(super) at: Position,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value {
    Number(String),
    Text(String),
    Bool(bool),
    Null,
    Date(String),
    Timestamp(String),
}

impl Value {
    pub(super) fn describe(&self) -> String {
        match self {
            Value::Number(n) => format!("the number {n}"),
            Value::Text(t) => format!("the string '{t}'"),
            Value::Bool(b) => format!("the boolean {b}"),
            Value::Null => "NULL".into(),
            Value::Date(d) => format!("DATE '{d}'"),
            Value::Timestamp(t) => format!("TIMESTAMP '{t}'"),
        }
    }
}

/// sqlparser's messages end in ` at Line: L, Column: C`; that becomes our position.
pub(super) fn parser_error(text: &str, e: ParserError) -> PredicateError {
    let (message, at) = match e {
        ParserError::TokenizerError(m) | ParserError::ParserError(m) => {
            match m.rsplit_once(" at Line: ").and_then(|(msg, rest)| {
                let (line, column) = rest.split_once(", Column: ")?;
                Some((
                    msg.to_string(),
                    Position {
                        line: line.trim().parse().ok()?,
                        column: column.trim().parse().ok()?,
                    },
                ))
            }) {
                Some(found) => found,
                None => (m, Position { line: 1, column: 1 }),
            }
        }
        ParserError::RecursionLimitExceeded => (
            format!("nested more than {MAX_DEPTH} deep"),
            Position { line: 1, column: 1 },
        ),
    };
    let message = if message.starts_with("No infix parser for token")
        || message.starts_with("No prefix parser for token")
    {
        // sqlparser names the token by its Rust name (`ShiftRight`): show the text there.
        let found: String = text
            .lines()
            .nth(at.line.saturating_sub(1) as usize)
            .unwrap_or("")
            .chars()
            .skip(at.column.saturating_sub(1) as usize)
            .take_while(|c| !c.is_whitespace())
            .collect();
        format!(
            "unexpected {found}: a condition compares columns with literals (=, <>, <, <=, >, \
             >=, IN, BETWEEN, IS NULL), joined by AND, OR and NOT"
        )
    } else {
        message
            .replacen("Expected: ", "expected ", 1)
            .replacen(", found: ", ", found ", 1)
    };
    PredicateError::Invalid {
        text: text.to_string(),
        at,
        message,
    }
}

pub(super) fn literal(text: &str, e: &ast::Expr) -> Result<Literal, PredicateError> {
    let at = Position::of(e.span().start);
    let invalid = |message: String| PredicateError::Invalid {
        text: text.to_string(),
        at,
        message,
    };
    let value = match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => Value::Number(n.clone()),
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => {
                Value::Text(s.clone())
            }
            ast::Value::Boolean(b) => Value::Bool(*b),
            ast::Value::Null => Value::Null,
            other => return Err(invalid(format!("literal {other} is not supported"))),
        },
        ast::Expr::UnaryOp {
            op: op @ (UnaryOperator::Minus | UnaryOperator::Plus),
            expr,
        } => match literal(text, expr)?.value {
            Value::Number(n) if *op == UnaryOperator::Minus => {
                Value::Number(match n.strip_prefix('-') {
                    Some(positive) => positive.to_string(),
                    None => format!("-{n}"),
                })
            }
            Value::Number(n) => Value::Number(n),
            _ => return Err(invalid(format!("`{e}`: a sign goes before a number only"))),
        },
        ast::Expr::TypedString(t) => {
            let Some(s) = t.value.value.clone().into_string() else {
                return Err(invalid(format!("`{e}` is not a literal")));
            };
            match t.data_type {
                ast::DataType::Date => Value::Date(s),
                ast::DataType::Timestamp(..) => Value::Timestamp(s),
                _ => {
                    return Err(invalid(format!(
                        "`{e}`: only DATE '...' and TIMESTAMP '...' literals are supported"
                    )));
                }
            }
        }
        _ => return Err(invalid(format!("expected a literal, found `{e}`"))),
    };
    Ok(Literal { value, at })
}

/// "no column X", with the closest name when one is close enough to be a typo.
pub(crate) fn unknown_column(name: &str, names: &[&str]) -> String {
    let lower = name.to_ascii_lowercase();
    let closest = names
        .iter()
        .map(|n| {
            (
                *n,
                crate::options::edit_distance(&lower, &n.to_ascii_lowercase()),
            )
        })
        .min_by_key(|(_, d)| *d)
        .filter(|(_, d)| *d <= 2.max(name.len() / 4));
    match closest {
        Some((best, _)) => format!("no column {name}; did you mean {best}?"),
        None => format!("no column {name} (columns: {})", names.join(", ")),
    }
}

/// An Arrow type as the user knows it from the schema (Spark's names).
pub(super) fn sql_type(t: &ArrowType) -> String {
    crate::schema::DataType::from_arrow(t)
        .map_or_else(|| t.to_string(), |d| d.to_string().to_uppercase())
}
