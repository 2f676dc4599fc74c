//! Expectations: a flow's data-quality rules (Lakeflow's `@dlt.expect`, `expect_or_drop`,
//! `expect_or_fail`, SQL's `CONSTRAINT name EXPECT (cond) ON VIOLATION ...`, and
//! `expect_or_quarantine` as sdp-meta names it).
//!
//! A rule's check is a condition in the language of `where` (the one engine, `expr`),
//! evaluated on every row the `where` keeps. A row **passes** where the check is true;
//! where it is false *or unknown* (NULL: `amount > 0` for a NULL amount) the row fails,
//! as a filter would judge it and as Delta enforces a CHECK constraint: a rule that lets
//! NULL through says so (`amount IS NULL OR amount > 0`).
//!
//! What a failing row becomes is the rule's action: `warn` (it lands, counted), `drop`
//! (it does not land, counted), `quarantine` (it lands in the flow's quarantine table
//! instead, with the names of the rules it failed), `fail` (nothing of the batch lands;
//! the flow stops naming the rule, the file, the record and its values). A row failing
//! several rules takes the strongest action: fail, then quarantine, then drop.

use arrow_arith::boolean::{and, and_not, not, or};
use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{Array, BooleanArray, ListArray, RecordBatch};
use arrow_schema::{ArrowError, SchemaRef};
use chrono_tz::Tz;

use crate::expr::{Condition, Predicate, PredicateError};

/// What a row that fails a rule becomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OnViolation {
    /// The row lands; it is counted as failed (Lakeflow's `expect`).
    #[default]
    Warn,
    /// The row does not land; it is counted (`expect_or_drop`, `DROP ROW`).
    Drop,
    /// The row lands in the quarantine table instead of the flow's table.
    Quarantine,
    /// Nothing of the batch lands and the flow stops (`expect_or_fail`, `FAIL UPDATE`).
    Fail,
}

impl OnViolation {
    pub const NAMES: [&'static str; 4] = ["warn", "drop", "quarantine", "fail"];

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    pub fn parse(text: &str) -> Option<OnViolation> {
        match text.trim().to_ascii_lowercase().as_str() {
            "warn" => Some(OnViolation::Warn),
            "drop" => Some(OnViolation::Drop),
            "quarantine" => Some(OnViolation::Quarantine),
            "fail" => Some(OnViolation::Fail),
            _ => None,
        }
    }
}

/// One rule as written: checked for syntax when the config or flags are read, bound to
/// the stream's schema once it is known.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    pub name: String,
    pub check: Condition,
    pub on_violation: OnViolation,
}

#[derive(Debug, thiserror::Error)]
pub enum ExpectationError {
    /// The rule cannot be used: no name, a name given twice, a check that does not parse
    /// or does not fit the schema, a constraint that is not Lakeflow's shape.
    #[error("expectation {name}: {message}")]
    Invalid { name: String, message: String },
    /// The check could not be computed for a row (ANSI: a cast that cannot read its
    /// input); `row` is the judged batch's.
    #[error("expectation {name}: {message}")]
    Failed {
        name: String,
        row: Option<usize>,
        message: String,
    },
}

fn invalid(name: &str, message: impl Into<String>) -> ExpectationError {
    ExpectationError::Invalid {
        name: if name.is_empty() {
            "(unnamed)".to_string()
        } else {
            format!("\"{name}\"")
        },
        message: message.into(),
    }
}

/// A check's error, said of the rule (the engine's messages speak of `where`).
fn check_error(name: &str, e: PredicateError) -> ExpectationError {
    match e {
        PredicateError::Invalid { text, at, message } => {
            invalid(name, format!("check \"{text}\" at {at}: {message}"))
        }
        PredicateError::Failed { text, row, message } => ExpectationError::Failed {
            name: format!("\"{name}\""),
            row,
            message: format!("check \"{text}\": {message}"),
        },
        other => invalid(name, other.to_string()),
    }
}

impl Expectation {
    /// A rule from its parts; the name must be a plain identifier (it names a metric
    /// label and a definition setting).
    pub fn new(
        name: &str,
        check: &str,
        on_violation: OnViolation,
    ) -> Result<Expectation, ExpectationError> {
        let name = name.trim();
        if name.is_empty() {
            return Err(invalid(name, "the name is empty"));
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        {
            return Err(invalid(
                name,
                "a name holds letters, digits, '_', '-' and '.' only",
            ));
        }
        let check = Condition::parse(check).map_err(|e| check_error(name, e))?;
        Ok(Expectation {
            name: name.to_string(),
            check,
            on_violation,
        })
    }

    /// `NAME=COND` as the command line's `--expect*` flags take it, or a Lakeflow
    /// constraint (`CONSTRAINT ...`), whose own ON VIOLATION clause then decides.
    pub fn from_flag(
        text: &str,
        on_violation: OnViolation,
    ) -> Result<Expectation, ExpectationError> {
        if starts_with_word(text.trim_start(), "CONSTRAINT") {
            return Expectation::from_constraint(text);
        }
        let Some((name, check)) = text.split_once('=') else {
            return Err(invalid(
                "",
                format!("\"{text}\": expected NAME=CONDITION, e.g. valid_amount=\"amount > 0\""),
            ));
        };
        Expectation::new(name, check, on_violation)
    }

    /// A Lakeflow constraint as written in SQL: `CONSTRAINT name EXPECT (cond) [ON
    /// VIOLATION DROP ROW | FAIL UPDATE]`, and our `ON VIOLATION QUARANTINE ROW`.
    pub fn from_constraint(text: &str) -> Result<Expectation, ExpectationError> {
        let shape = "expected CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | \
                     FAIL UPDATE | QUARANTINE ROW]";
        let rest = text.trim();
        let Some(rest) = strip_word(rest, "CONSTRAINT") else {
            return Err(invalid("", format!("\"{text}\": {shape}")));
        };
        let (name, rest) =
            identifier(rest).ok_or_else(|| invalid("", format!("\"{text}\": {shape}")))?;
        let Some(rest) = strip_word(rest, "EXPECT") else {
            return Err(invalid(&name, format!("\"{text}\": {shape}")));
        };
        let (check, rest) = parenthesized(rest).ok_or_else(|| {
            invalid(
                &name,
                format!("\"{text}\": the condition needs its parentheses; {shape}"),
            )
        })?;
        let words: Vec<String> = rest
            .split_whitespace()
            .map(|w| w.to_ascii_uppercase())
            .collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let on_violation = match words.as_slice() {
            [] => OnViolation::Warn,
            ["ON", "VIOLATION", "DROP", "ROW"] => OnViolation::Drop,
            ["ON", "VIOLATION", "FAIL", "UPDATE"] => OnViolation::Fail,
            ["ON", "VIOLATION", "QUARANTINE", "ROW"] => OnViolation::Quarantine,
            _ => {
                return Err(invalid(
                    &name,
                    format!("\"{}\" after the condition: {shape}", rest.trim()),
                ));
            }
        };
        Expectation::new(&name, check, on_violation)
    }

    /// The rule as a definition records it: `action: check`.
    pub fn definition_value(&self) -> String {
        format!("{}: {}", self.on_violation.name(), self.check.text())
    }

    /// A rule from its name and its recorded [`Expectation::definition_value`].
    pub fn from_definition(name: &str, value: &str) -> Result<Expectation, ExpectationError> {
        let (action, check) = value
            .split_once(": ")
            .ok_or_else(|| invalid(name, format!("\"{value}\" is not \"action: check\"")))?;
        let action = OnViolation::parse(action)
            .ok_or_else(|| invalid(name, format!("unknown action \"{action}\"")))?;
        Expectation::new(name, check, action)
    }
}

/// Whether `text` starts with `word` (any case) followed by a space or its end.
fn starts_with_word(text: &str, word: &str) -> bool {
    strip_word(text, word).is_some()
}

fn strip_word<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let head = text.get(..word.len())?;
    let rest = &text[word.len()..];
    let ends = rest.is_empty() || rest.starts_with(char::is_whitespace) || rest.starts_with('(');
    (head.eq_ignore_ascii_case(word) && ends).then(|| rest.trim_start())
}

/// A name, plain or in backquotes, and what follows it.
fn identifier(text: &str) -> Option<(String, &str)> {
    if let Some(quoted) = text.strip_prefix('`') {
        let end = quoted.find('`')?;
        return Some((quoted[..end].to_string(), quoted[end + 1..].trim_start()));
    }
    let end = text
        .find(|c: char| c.is_whitespace() || c == '(')
        .unwrap_or(text.len());
    (end > 0).then(|| (text[..end].to_string(), text[end..].trim_start()))
}

/// The text inside a leading `( ... )`, parentheses in quotes not counted, and what
/// follows the closing one.
fn parenthesized(text: &str) -> Option<(&str, &str)> {
    let inner = text.strip_prefix('(')?;
    let mut depth = 1usize;
    let mut quote: Option<char> = None;
    for (i, c) in inner.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '\'' | '"' | '`' => quote = Some(c),
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some((&inner[..i], &inner[i + 1..]));
                    }
                }
                _ => {}
            },
        }
    }
    None
}

/// Rule names unique per stream, as Lakeflow requires (they key the counts).
pub fn check_unique(rules: &[Expectation]) -> Result<(), ExpectationError> {
    for (i, r) in rules.iter().enumerate() {
        if rules[..i].iter().any(|o| o.name == r.name) {
            return Err(invalid(
                &r.name,
                "the name is given twice; each rule needs its own",
            ));
        }
    }
    Ok(())
}

/// A stream's rules bound to one decoded schema.
#[derive(Debug, Clone)]
pub struct BoundRules {
    rules: Vec<(Expectation, Predicate)>,
    /// Where the decoded schema keeps rescued data (rows that do not land are told apart).
    rescued: Option<usize>,
}

/// Per-rule counts of one batch (or file), in the order the rules were given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Rows the rules were checked on (those the `where` kept).
    pub checked: u64,
    /// Rows that did not land because a `drop` rule failed them (and no quarantine one).
    pub dropped_rows: u64,
    /// Rows that went to the quarantine table.
    pub quarantined_rows: u64,
    /// Of the dropped and quarantined rows, those that had rescued data.
    pub rescued_rows: u64,
    pub rules: Vec<RuleTally>,
}

/// One rule's counts: rows it failed, and of those the ones it dropped or quarantined
/// (a `warn` rule drops and quarantines none; a `drop` rule's row that a quarantine rule
/// also failed is quarantined, so kept).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuleTally {
    pub failed: u64,
    pub dropped: u64,
    pub quarantined: u64,
}

impl Tally {
    /// Adds `other`'s counts (of the same rules).
    pub fn add(&mut self, other: &Tally) {
        self.checked += other.checked;
        self.dropped_rows += other.dropped_rows;
        self.quarantined_rows += other.quarantined_rows;
        self.rescued_rows += other.rescued_rows;
        if self.rules.len() < other.rules.len() {
            self.rules.resize(other.rules.len(), RuleTally::default());
        }
        for (a, b) in self.rules.iter_mut().zip(&other.rules) {
            a.failed += b.failed;
            a.dropped += b.dropped;
            a.quarantined += b.quarantined;
        }
    }

    /// Rows of the batch that did not land because of a rule.
    pub fn left_out(&self) -> u64 {
        self.dropped_rows + self.quarantined_rows
    }
}

/// One rule's counts as reports show them (commit info, summary, `quality`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpectationCounts {
    pub name: String,
    pub passed: u64,
    pub failed: u64,
    pub dropped: u64,
    pub quarantined: u64,
    /// The first file in which the rule failed a row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example_file: Option<String>,
}

impl Tally {
    /// The counts under the rules' names (`names` in the order the rules were bound).
    pub fn named<'a>(&self, names: impl Iterator<Item = &'a str>) -> Vec<ExpectationCounts> {
        names
            .zip(
                self.rules
                    .iter()
                    .copied()
                    .chain(std::iter::repeat(RuleTally::default())),
            )
            .map(|(name, r)| ExpectationCounts {
                name: name.to_string(),
                passed: self.checked - r.failed,
                failed: r.failed,
                dropped: r.dropped,
                quarantined: r.quarantined,
                example_file: None,
            })
            .collect()
    }
}

/// Adds `more` into `into`, rule by rule (by name; a rule new to `into` is appended).
pub fn add_counts(into: &mut Vec<ExpectationCounts>, more: &[ExpectationCounts]) {
    for m in more {
        match into.iter_mut().find(|c| c.name == m.name) {
            Some(c) => {
                c.passed += m.passed;
                c.failed += m.failed;
                c.dropped += m.dropped;
                c.quarantined += m.quarantined;
                if c.example_file.is_none() {
                    c.example_file.clone_from(&m.example_file);
                }
            }
            None => into.push(m.clone()),
        }
    }
}

/// A row a `fail` rule failed: what the error names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub rule: String,
    pub check: String,
    /// The row's index in the checked batch.
    pub row: usize,
    /// The row's values as `column=value, ...` (long ones cut).
    pub values: String,
}

/// What the rules made of one batch.
#[derive(Debug)]
pub struct Verdict {
    pub tally: Tally,
    /// The rows that land; `None` when all do.
    pub lands: Option<BooleanArray>,
    /// The rows quarantined, and for each of them (in order) the names of every rule
    /// it failed; `None` when none.
    pub quarantined: Option<(BooleanArray, ListArray)>,
    /// The first row a `fail` rule failed.
    pub violation: Option<Violation>,
}

/// Longest text of a violation's values.
const VALUES_CHARS: usize = 600;

impl BoundRules {
    /// Binds `rules` to `decoded`; an unknown column or a literal of another type is an
    /// error naming the rule and the position in its check.
    pub fn bind(
        rules: &[Expectation],
        decoded: &SchemaRef,
        zone: Tz,
    ) -> Result<BoundRules, ExpectationError> {
        let rules = rules
            .iter()
            .map(|r| {
                let p = r
                    .check
                    .bind(decoded, zone)
                    .map_err(|e| check_error(&r.name, e))?;
                Ok((r.clone(), p))
            })
            .collect::<Result<Vec<_>, ExpectationError>>()?;
        Ok(BoundRules {
            rules,
            rescued: None,
        })
    }

    /// Tells rows with rescued data (in column `index`) apart among those left out.
    pub fn rescued(mut self, index: Option<usize>) -> Self {
        self.rescued = index;
        self
    }

    /// Judges every row of `batch` (of the bound schema) by every rule.
    pub fn judge(&self, batch: &RecordBatch) -> Result<Verdict, ExpectationError> {
        let arrow = |name: &str, e: ArrowError| invalid(name, e.to_string());
        let rows = batch.num_rows();
        let none = || BooleanArray::from(vec![false; rows]);
        let mut failed: Vec<BooleanArray> = Vec::with_capacity(self.rules.len());
        let (mut to_fail, mut to_quarantine, mut to_drop) = (none(), none(), none());
        for (rule, predicate) in &self.rules {
            let passes = predicate
                .evaluate(batch)
                .map_err(|e| check_error(&rule.name, e))?;
            let fails = not(&passes).map_err(|e| arrow(&rule.name, e))?;
            let into = match rule.on_violation {
                OnViolation::Warn => None,
                OnViolation::Drop => Some(&mut to_drop),
                OnViolation::Quarantine => Some(&mut to_quarantine),
                OnViolation::Fail => Some(&mut to_fail),
            };
            if let Some(into) = into {
                *into = or(into, &fails).map_err(|e| arrow(&rule.name, e))?;
            }
            failed.push(fails);
        }
        let mut tally = Tally {
            checked: rows as u64,
            rules: vec![RuleTally::default(); self.rules.len()],
            ..Tally::default()
        };
        if let Some(row) = (0..rows).find(|&i| to_fail.value(i)) {
            let index = self
                .rules
                .iter()
                .zip(&failed)
                .position(|((r, _), f)| r.on_violation == OnViolation::Fail && f.value(row))
                .unwrap_or_default();
            let (rule, _) = &self.rules[index];
            for (t, f) in tally.rules.iter_mut().zip(&failed) {
                t.failed = f.true_count() as u64;
            }
            return Ok(Verdict {
                tally,
                lands: None,
                quarantined: None,
                violation: Some(Violation {
                    rule: rule.name.clone(),
                    check: rule.check.text().to_string(),
                    row,
                    values: row_values(batch, row),
                }),
            });
        }
        let dropped = and_not(&to_drop, &to_quarantine).map_err(|e| arrow("drop", e))?;
        for (((rule, _), f), t) in self.rules.iter().zip(&failed).zip(&mut tally.rules) {
            t.failed = f.true_count() as u64;
            if matches!(
                rule.on_violation,
                OnViolation::Drop | OnViolation::Quarantine
            ) {
                t.quarantined = and(f, &to_quarantine)
                    .map_err(|e| arrow(&rule.name, e))?
                    .true_count() as u64;
                t.dropped = t.failed - t.quarantined;
            }
        }
        tally.dropped_rows = dropped.true_count() as u64;
        tally.quarantined_rows = to_quarantine.true_count() as u64;
        let left_out = or(&dropped, &to_quarantine).map_err(|e| arrow("drop", e))?;
        if let Some(i) = self.rescued {
            let rescued = batch.column(i);
            tally.rescued_rows = (0..rows)
                .filter(|&r| left_out.value(r) && rescued.is_valid(r))
                .count() as u64;
        }
        let lands = (left_out.true_count() > 0)
            .then(|| not(&left_out))
            .transpose()
            .map_err(|e| arrow("drop", e))?;
        let quarantined = (tally.quarantined_rows > 0).then(|| {
            let mut names = ListBuilder::new(StringBuilder::new());
            for row in (0..rows).filter(|&r| to_quarantine.value(r)) {
                for ((rule, _), f) in self.rules.iter().zip(&failed) {
                    if f.value(row) {
                        names.values().append_value(&rule.name);
                    }
                }
                names.append(true);
            }
            (to_quarantine, names.finish())
        });
        Ok(Verdict {
            tally,
            lands,
            quarantined,
            violation: None,
        })
    }
}

/// A row's values as `column=value, ...`, for an error a person reads (`_metadata` left
/// out: the error names the file and record).
pub fn row_values(batch: &RecordBatch, row: usize) -> String {
    use arrow_cast::display::{ArrayFormatter, FormatOptions};
    let options = FormatOptions::default().with_null("NULL");
    let mut out = String::new();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if field.name() == crate::record::METADATA_COLUMN {
            continue;
        }
        let value = match ArrayFormatter::try_new(column.as_ref(), &options) {
            Ok(f) => f.value(row).to_string(),
            Err(_) => "?".to_string(),
        };
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(field.name());
        out.push('=');
        out.push_str(&value);
        if out.len() > VALUES_CHARS {
            let mut cut = VALUES_CHARS;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push_str(" ...");
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("amount", DataType::Int64, true),
            Field::new("_rescued_data", DataType::Utf8, true),
        ]))
    }

    fn batch() -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3, 4])),
                Arc::new(Int64Array::from(vec![Some(10), Some(-1), None, Some(500)])),
                Arc::new(StringArray::from(vec![None, Some("{}"), None, None])),
            ],
        )
        .unwrap()
    }

    fn bind(rules: &[Expectation]) -> BoundRules {
        BoundRules::bind(rules, &schema(), Tz::UTC)
            .unwrap()
            .rescued(Some(2))
    }

    #[test]
    fn the_three_ways_to_write_a_rule() {
        let a = Expectation::new("valid_amount", "amount > 0", OnViolation::Drop).unwrap();
        let b = Expectation::from_flag("valid_amount=amount > 0", OnViolation::Drop).unwrap();
        let c = Expectation::from_constraint(
            "constraint valid_amount EXPECT (amount > 0) ON VIOLATION DROP ROW",
        )
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(a, c);
        let fail = Expectation::from_flag(
            "CONSTRAINT `has id` EXPECT ((id IS NOT NULL) AND id != ')') ON VIOLATION FAIL UPDATE",
            OnViolation::Warn,
        );
        // A backquoted name with a space is no plain identifier.
        assert!(fail.unwrap_err().to_string().contains("\"has id\""));
        let fail = Expectation::from_constraint(
            "CONSTRAINT has_id EXPECT ((id IS NOT NULL) AND id != ')') ON VIOLATION FAIL UPDATE",
        )
        .unwrap();
        assert_eq!(fail.on_violation, OnViolation::Fail);
        assert_eq!(fail.check.text(), "(id IS NOT NULL) AND id != ')'");
        let warn = Expectation::from_constraint("CONSTRAINT w EXPECT (id > 1)").unwrap();
        assert_eq!(warn.on_violation, OnViolation::Warn);
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        let e = Expectation::from_constraint("CONSTRAINT r EXPECT id > 1").unwrap_err();
        assert!(e.to_string().contains("needs its parentheses"), "{e}");
        let e = Expectation::from_constraint("CONSTRAINT r EXPECT (id > 1) ON VIOLATION STOP")
            .unwrap_err();
        assert!(e.to_string().contains("\"ON VIOLATION STOP\" after"), "{e}");
        let e = Expectation::from_flag("amount > 0", OnViolation::Drop).unwrap_err();
        assert!(e.to_string().contains("expected NAME=CONDITION"), "{e}");
        let e = Expectation::new("r", "amount >", OnViolation::Warn).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("expectation \"r\": check \"amount >\" at column"),
            "{e}"
        );
        let twice = [
            Expectation::new("r", "id > 1", OnViolation::Warn).unwrap(),
            Expectation::new("r", "id > 2", OnViolation::Drop).unwrap(),
        ];
        assert!(
            check_unique(&twice)
                .unwrap_err()
                .to_string()
                .contains("given twice")
        );
        let unknown = [Expectation::new("r", "amout > 1", OnViolation::Warn).unwrap()];
        let e = BoundRules::bind(&unknown, &schema(), Tz::UTC).unwrap_err();
        assert!(e.to_string().contains("did you mean amount"), "{e}");
        let clash = [Expectation::new("r", "amount > 'x'", OnViolation::Warn).unwrap()];
        assert!(BoundRules::bind(&clash, &schema(), Tz::UTC).is_err());
    }

    #[test]
    fn each_action_and_null_fails() {
        let rules = [
            Expectation::new("positive", "amount > 0", OnViolation::Drop).unwrap(),
            Expectation::new("small", "amount < 100", OnViolation::Quarantine).unwrap(),
            Expectation::new("not_two", "id != 2", OnViolation::Warn).unwrap(),
        ];
        let verdict = bind(&rules).judge(&batch()).unwrap();
        // Row 1 (-1) fails positive and not_two: dropped. Row 2 (NULL) fails positive and
        // small: quarantined (the stronger action). Row 3 (500) fails small: quarantined.
        let lands: Vec<bool> = (0..4)
            .map(|i| verdict.lands.as_ref().unwrap().value(i))
            .collect();
        assert_eq!(lands, [true, false, false, false]);
        let t = &verdict.tally;
        assert_eq!(
            (
                t.checked,
                t.dropped_rows,
                t.quarantined_rows,
                t.rescued_rows
            ),
            (4, 1, 2, 1)
        );
        let counts: Vec<(u64, u64, u64)> = t
            .rules
            .iter()
            .map(|r| (r.failed, r.dropped, r.quarantined))
            .collect();
        assert_eq!(counts, [(2, 1, 1), (2, 0, 2), (1, 0, 0)]);
        let (rows, names) = verdict.quarantined.unwrap();
        assert_eq!(rows.true_count(), 2);
        let names: Vec<Vec<String>> = (0..names.len())
            .map(|i| {
                let v = names.value(i);
                let v = v.as_any().downcast_ref::<StringArray>().unwrap();
                v.iter().map(|s| s.unwrap().to_string()).collect()
            })
            .collect();
        assert_eq!(names, [vec!["positive", "small"], vec!["small"]]);
        assert!(verdict.violation.is_none());
    }

    #[test]
    fn a_fail_rule_names_the_first_row_it_fails() {
        let rules = [Expectation::new("positive", "amount > 0", OnViolation::Fail).unwrap()];
        let verdict = bind(&rules).judge(&batch()).unwrap();
        let v = verdict.violation.unwrap();
        assert_eq!((v.rule.as_str(), v.row), ("positive", 1));
        assert_eq!(v.values, "id=2, amount=-1, _rescued_data={}");
    }
}
