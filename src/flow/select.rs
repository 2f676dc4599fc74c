//! A flow: which of a stream's columns reach its table (`columns` or `except_columns`),
//! what it computes (`with_columns`: `expr AS name`, Spark's `selectExpr`), and which rows
//! (`where`), as a `SELECT ... WHERE ...` over the decoded batch.
//!
//! Computed columns are values of the one expression engine (`expr::value`) over the
//! decoded columns; they go after the stream's data columns and before the trailing ones,
//! and the flow's expectations may read them.
//!
//! The condition binds against the stream's whole decoded schema (a column left out of
//! the table can still be filtered on); the projection keeps the trailing columns
//! (rescued data, corrupt record, partition columns, `_metadata`) whatever is listed, so
//! rescued values are never dropped by a projection. A row the condition leaves out is
//! counted (`filteredRows` in the summary and the commit), never silently dropped.
//! The flow's expectations (`expect.rs`) judge the rows the condition keeps, before the
//! projection, so a rule may read any column of the stream.

use std::sync::Arc;

use arrow_array::{BooleanArray, RecordBatch};
use arrow_schema::SchemaRef;
use chrono_tz::Tz;

use crate::expr::value::{BoundValue, ValueExpr};
use crate::expr::{self as predicate, Condition, Predicate, PredicateError};
use crate::flow::expect::{BoundRules, Expectation, ExpectationError, Tally, Violation};

/// Which columns of the stream reach the table.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Columns {
    /// Every column (the default).
    #[default]
    All,
    /// These, in the stream's order, plus the trailing ones. A column the schema gains
    /// later does not reach the table.
    Only(Vec<String>),
    /// Every column but these. A column the schema gains later reaches the table.
    Except(Vec<String>),
}

/// A column the flow computes: `expr AS name`.
#[derive(Debug, Clone, PartialEq)]
pub struct Computed {
    pub name: String,
    pub expr: ValueExpr,
}

impl Computed {
    /// Parses `expr AS name` (or `expr name`), as Spark's `selectExpr` reads an item.
    pub fn parse(text: &str) -> Result<Computed, FlowError> {
        use sqlparser::ast::SelectItem;
        let invalid = |message: String| FlowError::Columns {
            key: "with_columns",
            message: format!("\"{text}\": {message}"),
        };
        let dialect = sqlparser::dialect::DatabricksDialect;
        let mut parser = sqlparser::parser::Parser::new(&dialect)
            .with_recursion_limit(64)
            .try_with_sql(text)
            .map_err(|e| invalid(e.to_string()))?;
        let item = parser
            .parse_select_item()
            .map_err(|e| computed_error(PredicateError::from_parser(text, e)))?;
        let next = parser.peek_token();
        if next.token != sqlparser::tokenizer::Token::EOF {
            return Err(invalid(format!(
                "expected the end after the name, found {}",
                next.token
            )));
        }
        match item {
            SelectItem::ExprWithAlias { expr, alias } => Ok(Computed {
                name: alias.value,
                expr: ValueExpr::from_ast(text, &expr).map_err(computed_error)?,
            }),
            _ => Err(invalid(
                "name the column: `expression AS name` (a plain column goes in columns)".into(),
            )),
        }
    }

    /// The text it was parsed from, as the flow definition records it.
    pub fn text(&self) -> &str {
        self.expr.text()
    }
}

/// An expression's error as a `with_columns` error.
fn computed_error(e: PredicateError) -> FlowError {
    match e {
        PredicateError::Invalid { text, at, message } => FlowError::Columns {
            key: "with_columns",
            message: format!("\"{text}\" at {at}: {message}"),
        },
        other => FlowError::Columns {
            key: "with_columns",
            message: other.to_string(),
        },
    }
}

/// A stream's projection and filter, checked for syntax when the config or flags are read
/// and bound to the schema once the stream's schema is known.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowSpec {
    pub columns: Columns,
    /// Columns computed from the decoded ones, in order (names unique).
    pub computed: Vec<Computed>,
    pub condition: Option<Condition>,
    /// Data-quality rules, in the order given (names unique).
    pub expectations: Vec<Expectation>,
}

#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error(transparent)]
    Predicate(#[from] PredicateError),
    #[error("{key}: {message}")]
    Columns { key: &'static str, message: String },
    #[error(transparent)]
    Expectation(#[from] ExpectationError),
    /// A `fail` rule failed a row: nothing of the batch may land.
    #[error("expectation \"{}\" ({}) failed: {}", .0.rule, .0.check, .0.values)]
    Violated(Box<Violation>),
    /// A value could not be computed for a row (ANSI: a cast that cannot read its input, a
    /// division by zero); `row` is the input batch's row, when known.
    #[error("{what}: {message}")]
    Computed {
        what: String,
        row: Option<usize>,
        message: String,
    },
}

impl FlowSpec {
    /// The spec from what a user wrote: `columns` and `except_columns` exclude each other,
    /// and `where` must parse.
    pub fn new(
        columns: Option<Vec<String>>,
        except_columns: Option<Vec<String>>,
        condition: Option<&str>,
    ) -> Result<FlowSpec, FlowError> {
        let columns = match (columns, except_columns) {
            (Some(_), Some(_)) => {
                return Err(FlowError::Columns {
                    key: "columns",
                    message: "give columns or except_columns, not both".into(),
                });
            }
            // No column at all is allowed for a flow that computes every column it keeps
            // (checked by `with_columns`).
            (Some(c), None) if c.is_empty() => Columns::Only(c),
            (Some(c), None) => Columns::Only(checked_names("columns", c)?),
            (None, Some(c)) => Columns::Except(checked_names("except_columns", c)?),
            (None, None) => Columns::All,
        };
        let condition = condition.map(Condition::parse).transpose()?;
        Ok(FlowSpec {
            columns,
            computed: Vec::new(),
            condition,
            expectations: Vec::new(),
        })
    }

    /// The spec with these computed columns (`expr AS name` each; names unique).
    pub fn with_columns(mut self, items: &[String]) -> Result<FlowSpec, FlowError> {
        if items.is_empty() && self.columns == Columns::Only(Vec::new()) {
            return Err(FlowError::Columns {
                key: "columns",
                message: "the list is empty".into(),
            });
        }
        let mut computed: Vec<Computed> = Vec::with_capacity(items.len());
        for item in items {
            let c = Computed::parse(item)?;
            if computed
                .iter()
                .any(|o| o.name.eq_ignore_ascii_case(&c.name))
            {
                return Err(FlowError::Columns {
                    key: "with_columns",
                    message: format!("{} is computed twice", c.name),
                });
            }
            computed.push(c);
        }
        self.computed = computed;
        Ok(self)
    }

    /// The spec with these rules (names checked unique).
    pub fn with_expectations(
        mut self,
        expectations: Vec<Expectation>,
    ) -> Result<FlowSpec, FlowError> {
        crate::flow::expect::check_unique(&expectations)?;
        self.expectations = expectations;
        Ok(self)
    }

    /// Whether the flow keeps every row and column (nothing to bind or apply).
    pub fn is_everything(&self) -> bool {
        self.columns == Columns::All
            && self.computed.is_empty()
            && self.condition.is_none()
            && self.expectations.is_empty()
    }

    /// Binds the flow to a decoded schema whose last columns are `trailing` (always
    /// kept; the first of them may be the rescued data, named by [`BoundFlow::rescued`]).
    /// Names match exactly, else by a unique case-insensitive match.
    pub fn bind(
        &self,
        decoded: &SchemaRef,
        trailing: &[String],
        zone: Tz,
    ) -> Result<BoundFlow, FlowError> {
        let predicate = self
            .condition
            .as_ref()
            .map(|c| c.bind(decoded, zone))
            .transpose()?;
        let computed = self
            .computed
            .iter()
            .map(|c| {
                let bound = c.expr.bind(decoded, zone).map_err(computed_error)?;
                if bound.data_type() == &arrow_schema::DataType::Null {
                    return Err(FlowError::Columns {
                        key: "with_columns",
                        message: format!(
                            "{} is NULL of no type, which a table cannot hold: \
                             CAST(NULL AS type) AS {}",
                            c.name, c.name
                        ),
                    });
                }
                Ok(bound)
            })
            .collect::<Result<Vec<BoundValue>, FlowError>>()?;
        // The decoded columns, then the computed ones: what rules read and what is projected.
        let extended = if computed.is_empty() {
            Arc::clone(decoded)
        } else {
            let mut fields: Vec<arrow_schema::FieldRef> =
                decoded.fields().iter().cloned().collect();
            for (c, bound) in self.computed.iter().zip(&computed) {
                fields.push(Arc::new(arrow_schema::Field::new(
                    &c.name,
                    bound.data_type().clone(),
                    true,
                )));
            }
            Arc::new(arrow_schema::Schema::new_with_metadata(
                fields,
                decoded.metadata().clone(),
            ))
        };
        let rules = if self.expectations.is_empty() {
            None
        } else {
            Some(BoundRules::bind(&self.expectations, &extended, zone)?)
        };
        let names: Vec<&str> = decoded.fields().iter().map(|f| f.name().as_str()).collect();
        let is_trailing = |i: usize| trailing.iter().any(|t| t == names[i]);
        let data: Vec<usize> = match &self.columns {
            Columns::All => (0..names.len()).collect(),
            Columns::Only(listed) => {
                let chosen = resolve("columns", listed, &names)?;
                (0..names.len())
                    .filter(|i| chosen.contains(i) || is_trailing(*i))
                    .collect()
            }
            Columns::Except(listed) => {
                let left_out = resolve("except_columns", listed, &names)?;
                if let Some(i) = left_out.iter().find(|i| is_trailing(**i)) {
                    return Err(FlowError::Columns {
                        key: "except_columns",
                        message: format!(
                            "{} cannot be left out: it holds rescued values, partition \
                             values or lineage, which would be lost",
                            names[*i]
                        ),
                    });
                }
                (0..names.len()).filter(|i| !left_out.contains(i)).collect()
            }
        };
        for c in &self.computed {
            if let Some(&i) = data
                .iter()
                .find(|&&i| names[i].eq_ignore_ascii_case(&c.name))
            {
                return Err(FlowError::Columns {
                    key: "with_columns",
                    message: format!(
                        "{} is already a column of the table; leave it out (except_columns, \
                         or * EXCEPT ({}) in SQL) to replace it, or give the computed one \
                         another name",
                        c.name, names[i]
                    ),
                });
            }
        }
        // Data columns, then computed ones, then the trailing ones (rescued data and
        // `_metadata` stay last).
        let projection: Option<Vec<usize>> = if self.columns == Columns::All && computed.is_empty()
        {
            None
        } else {
            let (body, tail): (Vec<usize>, Vec<usize>) =
                data.into_iter().partition(|&i| !is_trailing(i));
            let added = names.len()..names.len() + computed.len();
            Some(body.into_iter().chain(added).chain(tail).collect())
        };
        if let Some(indices) = &projection {
            let all: Vec<&str> = extended
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect();
            self.rules_see_the_table(&all, indices)?;
        }
        let schema = match &projection {
            Some(indices) => {
                Arc::new(extended.project(indices).map_err(|e| FlowError::Columns {
                    key: "columns",
                    message: e.to_string(),
                })?)
            }
            None => Arc::clone(decoded),
        };
        Ok(BoundFlow {
            predicate,
            computed: (!computed.is_empty()).then(|| Computing {
                values: computed,
                names: self.computed.iter().map(|c| c.name.clone()).collect(),
                schema: extended,
            }),
            rules,
            projection,
            schema,
            rescued: None,
        })
    }

    /// With a quarantine rule, every rule reads only columns the table keeps: a
    /// quarantined row holds the table's columns, and `quarantine replay` judges it again.
    fn rules_see_the_table(&self, names: &[&str], kept: &[usize]) -> Result<(), FlowError> {
        use crate::flow::expect::OnViolation;
        if !self
            .expectations
            .iter()
            .any(|e| e.on_violation == OnViolation::Quarantine)
        {
            return Ok(());
        }
        for rule in &self.expectations {
            for column in rule.check.columns() {
                let at = names.iter().position(|n| n.eq_ignore_ascii_case(column));
                if at.is_some_and(|i| !kept.contains(&i)) {
                    return Err(FlowError::Columns {
                        key: "columns",
                        message: format!(
                            "expectation \"{}\" reads {column}, which the table leaves out: \
                             a quarantined row holds the table's columns, and quarantine \
                             replay could not judge it again; keep {column} in the table",
                            rule.name
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// The table's columns for a decoded schema (what a table created for it holds).
    pub fn table_schema(
        &self,
        decoded: &SchemaRef,
        trailing: &[String],
        zone: Tz,
    ) -> Result<SchemaRef, FlowError> {
        if self.is_everything() {
            return Ok(Arc::clone(decoded));
        }
        Ok(self.bind(decoded, trailing, zone)?.schema)
    }
}

/// Names given once each, none empty.
fn checked_names(key: &'static str, names: Vec<String>) -> Result<Vec<String>, FlowError> {
    if names.is_empty() {
        return Err(FlowError::Columns {
            key,
            message: "the list is empty".into(),
        });
    }
    for (i, n) in names.iter().enumerate() {
        if n.trim().is_empty() {
            return Err(FlowError::Columns {
                key,
                message: "a column name is empty".into(),
            });
        }
        if names[..i].contains(n) {
            return Err(FlowError::Columns {
                key,
                message: format!("{n} is listed twice"),
            });
        }
    }
    Ok(names)
}

/// The indices of `listed` among `names`; an unknown name is an error naming the closest.
fn resolve(key: &'static str, listed: &[String], names: &[&str]) -> Result<Vec<usize>, FlowError> {
    listed
        .iter()
        .map(|l| {
            names
                .iter()
                .position(|n| n == l)
                .or_else(|| {
                    let folded: Vec<usize> = (0..names.len())
                        .filter(|i| names[*i].eq_ignore_ascii_case(l))
                        .collect();
                    (folded.len() == 1).then(|| folded[0])
                })
                .ok_or_else(|| FlowError::Columns {
                    key,
                    message: predicate::unknown_column(l, names),
                })
        })
        .collect()
}

/// A flow bound to one decoded schema: apply it to each batch of that schema.
#[derive(Debug, Clone)]
pub struct BoundFlow {
    predicate: Option<Predicate>,
    computed: Option<Computing>,
    rules: Option<BoundRules>,
    projection: Option<Vec<usize>>,
    schema: SchemaRef,
    /// The decoded schema's rescued-data column, whose filtered rows are counted apart.
    rescued: Option<usize>,
}

/// The computed columns of a bound flow.
#[derive(Debug, Clone)]
struct Computing {
    values: Vec<BoundValue>,
    names: Vec<String>,
    /// The decoded columns and the computed ones.
    schema: SchemaRef,
}

/// What [`BoundFlow::apply`] left out of a batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filtered {
    pub rows: u64,
    /// Of those, rows that had rescued data.
    pub rescued_rows: u64,
}

impl BoundFlow {
    /// Counts filtered rows that had rescued data in column `name` of the decoded schema
    /// (they leave the rescued count, and are reported, not lost unseen).
    pub fn rescued(mut self, name: Option<&str>, decoded: &SchemaRef) -> Self {
        self.rescued = name.and_then(|n| decoded.index_of(n).ok());
        if let Some(rules) = self.rules.take() {
            self.rules = Some(rules.rescued(self.rescued));
        }
        self
    }

    /// The columns of the batches [`BoundFlow::apply`] returns: the table's.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// What the flow makes of a decoded batch: the condition filters it, the rules judge
    /// the rows it keeps, and the rows that land and those quarantined are projected.
    pub fn apply(&self, batch: RecordBatch) -> Result<Applied, FlowError> {
        let input_rows = batch.num_rows();
        let (batch, filtered, mut kept) = self.filter(batch)?;
        let batch = self.compute(batch, kept.as_ref(), input_rows)?;
        let mut quality = Tally::default();
        let mut quarantine = None;
        let batch = match &self.rules {
            None => batch,
            Some(rules) => {
                let verdict = rules.judge(&batch).map_err(|e| match e {
                    ExpectationError::Failed { name, row, message } => FlowError::Computed {
                        what: format!("expectation {name}"),
                        row: row.and_then(|r| {
                            input_positions(kept.as_ref(), input_rows).get(r).copied()
                        }),
                        message,
                    },
                    other => FlowError::Expectation(other),
                })?;
                if let Some(mut v) = verdict.violation {
                    v.row = input_positions(kept.as_ref(), input_rows)[v.row];
                    return Err(FlowError::Violated(Box::new(v)));
                }
                quality = verdict.tally;
                if let Some((rows, rules)) = verdict.quarantined {
                    let inputs = input_positions(kept.as_ref(), input_rows);
                    let inputs = (0..rows.len())
                        .filter(|&i| rows.value(i))
                        .map(|i| inputs[i])
                        .collect();
                    let chosen = self.filter_by(&batch, &rows)?;
                    quarantine = Some(Quarantined {
                        rows: self.project(chosen)?,
                        inputs,
                        rules,
                    });
                }
                match verdict.lands {
                    None => batch,
                    Some(lands) => {
                        let out = self.filter_by(&batch, &lands)?;
                        kept = Some(narrow(kept.as_ref(), &lands, input_rows));
                        out
                    }
                }
            }
        };
        Ok(Applied {
            batch: self.project(batch)?,
            filtered,
            kept,
            quality,
            quarantine,
        })
    }

    /// `batch` with the computed columns added; a row that cannot be computed is an error
    /// naming its input row.
    fn compute(
        &self,
        batch: RecordBatch,
        kept: Option<&BooleanArray>,
        input_rows: usize,
    ) -> Result<RecordBatch, FlowError> {
        let Some(c) = &self.computed else {
            return Ok(batch);
        };
        let mut columns = batch.columns().to_vec();
        for (value, name) in c.values.iter().zip(&c.names) {
            let array = value.evaluate(&batch).map_err(|e| match e {
                PredicateError::Failed { text, row, message } => FlowError::Computed {
                    what: format!("computing {name} ({text})"),
                    row: row.and_then(|r| input_positions(kept, input_rows).get(r).copied()),
                    message,
                },
                other => FlowError::Predicate(other),
            })?;
            columns.push(array);
        }
        RecordBatch::try_new(Arc::clone(&c.schema), columns).map_err(|e| FlowError::Columns {
            key: "with_columns",
            message: e.to_string(),
        })
    }

    /// The rows the condition keeps; what it left out; and which input rows it kept,
    /// when not all.
    fn filter(
        &self,
        batch: RecordBatch,
    ) -> Result<(RecordBatch, Filtered, Option<BooleanArray>), FlowError> {
        let Some(p) = &self.predicate else {
            return Ok((batch, Filtered::default(), None));
        };
        let keep = p.evaluate(&batch).map_err(|e| match e {
            PredicateError::Failed { text, row, message } => FlowError::Computed {
                what: format!("where {text}"),
                row,
                message,
            },
            other => FlowError::Predicate(other),
        })?;
        let kept = keep.true_count();
        if kept == batch.num_rows() {
            return Ok((batch, Filtered::default(), None));
        }
        let rescued_rows = self.rescued.map_or(0, |i| {
            let rescued = batch.column(i);
            (0..batch.num_rows())
                .filter(|r| !keep.value(*r) && rescued.is_valid(*r))
                .count() as u64
        });
        let out = self.filter_by(&batch, &keep)?;
        let filtered = Filtered {
            rows: (batch.num_rows() - kept) as u64,
            rescued_rows,
        };
        Ok((out, filtered, Some(keep)))
    }

    fn filter_by(
        &self,
        batch: &RecordBatch,
        rows: &BooleanArray,
    ) -> Result<RecordBatch, FlowError> {
        arrow_select::filter::filter_record_batch(batch, rows).map_err(|e| FlowError::Columns {
            key: "where",
            message: e.to_string(),
        })
    }

    fn project(&self, batch: RecordBatch) -> Result<RecordBatch, FlowError> {
        match &self.projection {
            Some(indices) => batch.project(indices).map_err(|e| FlowError::Columns {
                key: "columns",
                message: e.to_string(),
            }),
            None => Ok(batch),
        }
    }
}

/// What [`BoundFlow::apply`] made of one decoded batch.
#[derive(Debug)]
pub struct Applied {
    /// The rows that land, in the table's columns.
    pub batch: RecordBatch,
    /// What the condition left out.
    pub filtered: Filtered,
    /// Which input rows land, when not all (for their record numbers).
    pub kept: Option<BooleanArray>,
    /// The rules' counts (empty without rules).
    pub quality: Tally,
    /// The rows a quarantine rule took.
    pub quarantine: Option<Quarantined>,
}

/// Rows for the quarantine table.
#[derive(Debug)]
pub struct Quarantined {
    /// In the table's columns, as they would have landed.
    pub rows: RecordBatch,
    /// Each row's index in the input batch (its record number, less the batch's first).
    pub inputs: Vec<usize>,
    /// For each row, the names of every rule it failed.
    pub rules: arrow_array::ListArray,
}

/// The input rows that `kept` (over the input) keeps, in order; all when `None`.
fn input_positions(kept: Option<&BooleanArray>, input_rows: usize) -> Vec<usize> {
    match kept {
        None => (0..input_rows).collect(),
        Some(k) => (0..k.len()).filter(|&i| k.value(i)).collect(),
    }
}

/// `inner` (over the rows `outer` kept) as a mask over the input rows.
fn narrow(outer: Option<&BooleanArray>, inner: &BooleanArray, input_rows: usize) -> BooleanArray {
    let mut out = vec![false; input_rows];
    for (j, i) in input_positions(outer, input_rows).into_iter().enumerate() {
        out[i] = inner.value(j);
    }
    BooleanArray::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    fn decoded() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("order_id", DataType::Int64, true),
            Field::new("region", DataType::Utf8, true),
            Field::new("note", DataType::Utf8, true),
            Field::new("_rescued_data", DataType::Utf8, true),
        ]))
    }

    fn trailing() -> Vec<String> {
        vec!["_rescued_data".to_string()]
    }

    fn names(schema: &SchemaRef) -> Vec<&str> {
        schema.fields().iter().map(|f| f.name().as_str()).collect()
    }

    fn spec(
        columns: Option<&[&str]>,
        except: Option<&[&str]>,
        cond: Option<&str>,
    ) -> Result<FlowSpec, FlowError> {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        FlowSpec::new(columns.map(list), except.map(list), cond)
    }

    #[test]
    fn columns_keep_the_trailing_ones() {
        let flow = spec(Some(&["region", "order_id"]), None, None).unwrap();
        let schema = flow.table_schema(&decoded(), &trailing(), Tz::UTC).unwrap();
        // The stream's order, and the rescued data stays.
        assert_eq!(names(&schema), ["order_id", "region", "_rescued_data"]);
        let flow = spec(None, Some(&["note"]), None).unwrap();
        let schema = flow.table_schema(&decoded(), &trailing(), Tz::UTC).unwrap();
        assert_eq!(names(&schema), ["order_id", "region", "_rescued_data"]);
    }

    #[test]
    fn bad_column_lists_are_errors() {
        let both = spec(Some(&["a"]), Some(&["b"]), None).unwrap_err();
        assert_eq!(
            both.to_string(),
            "columns: give columns or except_columns, not both"
        );
        let twice = spec(Some(&["a", "a"]), None, None).unwrap_err();
        assert!(twice.to_string().contains("a is listed twice"));
        let unknown = spec(Some(&["regon"]), None, None).unwrap();
        let e = unknown.bind(&decoded(), &trailing(), Tz::UTC).unwrap_err();
        assert_eq!(
            e.to_string(),
            "columns: no column regon; did you mean region?"
        );
        let rescue = spec(None, Some(&["_rescued_data"]), None).unwrap();
        let e = rescue.bind(&decoded(), &trailing(), Tz::UTC).unwrap_err();
        assert!(
            e.to_string().contains("_rescued_data cannot be left out"),
            "{e}"
        );
        assert!(
            spec(None, None, Some("region = ")).is_err(),
            "where parses up front"
        );
    }

    #[test]
    fn apply_filters_then_projects_and_counts() {
        // The condition reads a column the projection leaves out.
        let flow = spec(None, Some(&["note"]), Some("note != 'skip'")).unwrap();
        let bound = flow
            .bind(&decoded(), &trailing(), Tz::UTC)
            .unwrap()
            .rescued(Some("_rescued_data"), &decoded());
        let batch = RecordBatch::try_new(
            decoded(),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3])),
                Arc::new(StringArray::from(vec!["eu", "us", "eu"])),
                Arc::new(StringArray::from(vec![Some("keep"), Some("skip"), None])),
                Arc::new(StringArray::from(vec![None, Some("{}"), None])),
            ],
        )
        .unwrap();
        let applied = bound.apply(batch).unwrap();
        let (out, filtered) = (applied.batch, applied.filtered);
        let kept = applied.kept.expect("rows were left out");
        let kept: Vec<bool> = (0..3).map(|i| kept.is_valid(i) && kept.value(i)).collect();
        assert_eq!(kept, [true, false, false]);
        let expected = Filtered {
            rows: 2,
            rescued_rows: 1,
        };
        assert_eq!(
            filtered, expected,
            "the null note is unknown, so filtered too"
        );
        assert_eq!(out.schema(), *bound.schema());
        let ids = out.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(ids.values(), &[1]);
    }
}
