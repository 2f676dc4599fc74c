//! A Lakeflow pipeline written in SQL (`autoloader run pipeline.sql`), read as written
//! and translated into the streams and tables of a config file, so it runs through the
//! same checks and the same builder as `streams.toml`.
//!
//! Statements (`;`-separated; `--` and `/* */` comments):
//! - `CREATE [OR REFRESH] STREAMING TABLE [IF NOT EXISTS] name [(column TYPE, ...,
//!   CONSTRAINT c EXPECT (cond) [ON VIOLATION ...])] [COMMENT '...'] [TBLPROPERTIES ('k' =
//!   'v', ...)] [LOCATION 'path'] [AS query]`; without a query the table is a target for
//!   flows. Its columns become `cloudFiles.schemaHints` of the flows reading files into
//!   it, its constraints expectations of every flow into it, its properties the table's.
//! - `CREATE FLOW name [ONCE] AS INSERT INTO target BY NAME query`.
//! - `APPLY CHANGES INTO target FROM source KEYS (...) ...` and `CREATE FLOW name AS AUTO
//!   CDC INTO target ...`, every clause of Databricks' grammar, as `[stream.cdc]`
//!   (`create_auto_cdc_flow`'s names).
//!
//! A query is `SELECT * | * EXCEPT (a, b) | a, b [, expression AS name ...] FROM source
//! [WHERE condition]` (computed items are `with_columns`, checked by the expression
//! engine), the source `STREAM read_files('path', format => 'json', option => value,
//! ...)`, `cloud_files('path', 'format', map('option', 'value', ...))`, `STREAM(name)`,
//! `STREAM name` or `name` (a table of this pipeline, or the Delta table at its place).
//! A name `a.b.c` is the table at `a/b/c` under the SQL file's folder (a spec maps names,
//! `spec.rs`); `LOCATION` overrides it. Anything else (joins, aggregates, windows, views)
//! is refused with its line and column, exit 2.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sqlparser::dialect::DatabricksDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

/// A statement's tokens (no whitespace or comments), with the text they came from.
struct Tokens<'a> {
    text: &'a str,
    /// Byte offset of each line's start.
    lines: Vec<usize>,
    tokens: Vec<TokenWithSpan>,
    at: usize,
}

/// How table names map to places: under `root`, qualified with the pipeline's default
/// catalog and database (a spec's), so `orders` and `main.bronze.orders` name one table at
/// `root/main/bronze/orders`. Without a spec: the name's parts as folders under the SQL
/// file's folder.
#[derive(Debug, Clone, Default)]
pub(super) struct Naming {
    /// Where tables go, `/`-terminated (empty: relative to the pipeline's folder).
    pub(super) root: String,
    pub(super) catalog: Option<String>,
    pub(super) database: Option<String>,
}

impl Naming {
    /// The name with the default catalog and database it leaves out.
    pub(super) fn qualify(&self, name: &str) -> String {
        let parts: Vec<&str> = name.split('.').collect();
        let mut out: Vec<&str> = Vec::with_capacity(3);
        if parts.len() < 3
            && let Some(c) = &self.catalog
        {
            out.push(c);
        }
        if parts.len() < 2
            && let Some(d) = &self.database
        {
            out.push(d);
        }
        out.extend(parts);
        out.join(".")
    }

    /// Where the table `name` (qualified) is.
    fn place(&self, qualified: &str) -> String {
        format!("{}{}", self.root, qualified.replace('.', "/"))
    }
}

/// A table the pipeline defines, and what its statement said of it.
#[derive(Default)]
struct TableDef {
    /// `LOCATION`, or the place its name maps to.
    location: String,
    explicit_location: bool,
    properties: BTreeMap<String, String>,
    /// `name TYPE` of each declared column.
    columns: Vec<String>,
    /// `CONSTRAINT ...` clauses, as written.
    constraints: Vec<String>,
}

/// One flow: a streaming table's own query, or a `CREATE FLOW`.
struct FlowDef {
    name: String,
    target: String,
    once: bool,
    query: Query,
    /// APPLY CHANGES / AUTO CDC: the `[stream.cdc]` settings.
    cdc: Option<BTreeMap<String, Value>>,
}

struct Query {
    columns: Option<Vec<String>>,
    except: Option<Vec<String>>,
    /// Computed items, `expression AS name` each (our `with_columns`).
    computed: Vec<ComputedItem>,
    source: Source,
    condition: Option<String>,
}

/// A select item after `*` or among columns.
enum Item {
    Column(String),
    Computed(ComputedItem),
}

/// `expression AS name`.
#[derive(Clone)]
struct ComputedItem {
    /// As written (comments left out).
    text: String,
    name: String,
    /// The expression alone, as sqlparser writes it back.
    expression: String,
}

enum Source {
    Files {
        path: String,
        options: Vec<(String, String)>,
    },
    Table(String),
}

/// The pipeline in `text` as a config (the JSON shape of `streams.toml`), or an error
/// with its line and column.
#[cfg(test)]
fn to_config(text: &str) -> Result<Value, String> {
    files_to_config(&[(String::new(), text.to_string())])
}

/// The pipeline of several SQL files (name, text), read in order as one: a flow of one
/// file may insert into a table of another. An error names its file, line and column.
pub(super) fn files_to_config(files: &[(String, String)]) -> Result<Value, String> {
    files_to_config_named(files, &Naming::default())
}

/// [`files_to_config`] with names mapped by `naming`.
pub(super) fn files_to_config_named(
    files: &[(String, String)],
    naming: &Naming,
) -> Result<Value, String> {
    let mut tables: BTreeMap<String, TableDef> = BTreeMap::new();
    let mut flows: Vec<FlowDef> = Vec::new();
    for (name, text) in files {
        let in_file = |e: String| {
            if name.is_empty() {
                e
            } else {
                format!("{name}: {e}")
            }
        };
        let mut t = Tokens::new(text).map_err(in_file)?;
        while !t.done() {
            if t.eat(&Token::SemiColon) {
                continue;
            }
            t.statement(&mut tables, &mut flows).map_err(in_file)?;
            if !t.done() && !t.eat(&Token::SemiColon) {
                return Err(in_file(t.error("expected ; after the statement")));
            }
        }
    }
    if flows.is_empty() {
        return Err(
            "the pipeline defines no flow: no CREATE STREAMING TABLE ... AS \
                    SELECT and no CREATE FLOW"
                .into(),
        );
    }
    // Every name qualified, every table placed.
    let mut qualified: BTreeMap<String, TableDef> = BTreeMap::new();
    for (name, mut def) in tables {
        let key = naming.qualify(&name);
        if !def.explicit_location {
            def.location = naming.place(&key);
        }
        if qualified.insert(key.clone(), def).is_some() {
            return Err(format!("the table {key} is defined twice"));
        }
    }
    let tables = qualified;
    for f in &mut flows {
        f.target = naming.qualify(&f.target);
        if let Source::Table(name) = &mut f.query.source {
            *name = naming.qualify(name);
        }
    }
    let place = |name: &str| -> String {
        tables
            .get(name)
            .map(|t| t.location.clone())
            .unwrap_or_else(|| naming.place(name))
    };
    let mut streams = Vec::new();
    for f in &flows {
        let Some(target) = tables.get(&f.target) else {
            return Err(format!(
                "flow {} inserts into {}, which no CREATE STREAMING TABLE defines",
                f.name, f.target
            ));
        };
        let mut options: BTreeMap<String, String> = BTreeMap::new();
        let (source, source_format) = match &f.query.source {
            Source::Files { path, options: o } => {
                options.extend(o.iter().cloned());
                if !target.columns.is_empty() {
                    // The table's declared columns, then the query's own hints.
                    let mut hints = target.columns.join(", ");
                    if let Some(own) = options.get("cloudFiles.schemaHints") {
                        hints = format!("{hints}, {own}");
                    }
                    options.insert("cloudFiles.schemaHints".into(), hints);
                }
                (path.clone(), "files")
            }
            Source::Table(name) => (place(name), "delta"),
        };
        // A table source into declared columns: the flow writes exactly those, each cast
        // to its declared type (ANSI: a value that does not fit stops the flow), NULL for
        // one its query leaves out; a file source reads them as schema hints above.
        let declared_casts = match &f.query.source {
            Source::Table(_) if !target.columns.is_empty() => {
                if f.cdc.is_some() {
                    return Err(format!(
                        "flow {} applies changes into {}, whose columns are declared: an \
                         APPLY CHANGES target takes its columns from the change records \
                         (COLUMNS ...); leave the declared columns out",
                        f.name, f.target
                    ));
                }
                Some(declared_casts(&target.columns, &f.query)?)
            }
            _ => None,
        };
        let mut stream = json!({
            "name": f.name.replace('.', "_"),
            "source": source,
            "source_format": source_format,
            "table": target.location,
            "options": options,
            "once": f.once,
        });
        if let Some(casts) = declared_casts {
            stream["columns"] = json!([]);
            stream["with_columns"] = json!(casts);
        } else {
            if let Some(c) = &f.query.columns {
                stream["columns"] = json!(c);
            }
            if let Some(c) = &f.query.except {
                stream["except_columns"] = json!(c);
            }
            if !f.query.computed.is_empty() {
                let texts: Vec<&str> = f.query.computed.iter().map(|c| c.text.as_str()).collect();
                stream["with_columns"] = json!(texts);
            }
        }
        if let Some(c) = &f.query.condition {
            stream["where"] = json!(c);
        }
        if !target.constraints.is_empty() {
            stream["expect"] = json!(target.constraints);
        }
        if let Some(cdc) = &f.cdc {
            stream["cdc"] = json!(cdc);
        }
        streams.push(stream);
    }
    let declared: Vec<Value> = tables
        .values()
        .filter(|t| !t.properties.is_empty())
        .map(|t| json!({ "path": t.location, "properties": t.properties }))
        .collect();
    Ok(json!({ "stream": streams, "table": declared }))
}

/// For each declared `c TYPE`: the query's computed `c` cast to TYPE, else `CAST(`c` AS
/// TYPE) AS `c`` (`CAST(NULL AS TYPE)` where the query leaves `c` out); then the query's
/// other computed items.
fn declared_casts(declared: &[String], query: &Query) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(declared.len() + query.computed.len());
    let mut used = vec![false; query.computed.len()];
    for column in declared {
        let (name, data_type) = column
            .trim()
            .split_once(char::is_whitespace)
            .ok_or_else(|| format!("declared column `{column}` has no type"))?;
        let name = name.trim_matches('`');
        let data_type = data_type.trim();
        let has = |list: &Vec<String>| list.iter().any(|c| c.eq_ignore_ascii_case(name));
        let selected = match (&query.columns, &query.except) {
            (Some(only), _) => has(only),
            (None, Some(except)) => !has(except),
            (None, None) => true,
        };
        let computed = query
            .computed
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name));
        out.push(match computed {
            Some(i) => {
                used[i] = true;
                format!(
                    "CAST(({}) AS {data_type}) AS `{name}`",
                    query.computed[i].expression
                )
            }
            None if selected => format!("CAST(`{name}` AS {data_type}) AS `{name}`"),
            None => format!("CAST(NULL AS {data_type}) AS `{name}`"),
        });
    }
    for (c, used) in query.computed.iter().zip(used) {
        if !used {
            out.push(c.text.clone());
        }
    }
    Ok(out)
}

/// A declared column as `name TYPE`, without its options (`NOT NULL`, `COMMENT '...'`,
/// `DEFAULT ...`, `GENERATED ...`), which neither a schema hint nor a cast reads.
fn declared_column(element: &str) -> String {
    const OPTIONS: &[&str] = &[
        "NOT",
        "NULL",
        "COMMENT",
        "DEFAULT",
        "GENERATED",
        "PRIMARY",
        "CONSTRAINT",
        "MASK",
    ];
    let mut depth = 0usize;
    let mut out = String::new();
    for (i, word) in element.split_whitespace().enumerate() {
        if i > 0 && depth == 0 && OPTIONS.iter().any(|o| word.eq_ignore_ascii_case(o)) {
            break;
        }
        depth += word.matches(['(', '<']).count();
        depth = depth.saturating_sub(word.matches([')', '>']).count());
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

impl<'a> Tokens<'a> {
    fn new(text: &'a str) -> Result<Tokens<'a>, String> {
        let dialect = DatabricksDialect {};
        let tokens = Tokenizer::new(&dialect, text)
            .tokenize_with_location()
            .map_err(|e| e.to_string())?
            .into_iter()
            .filter(|t| !matches!(t.token, Token::Whitespace(_)))
            .collect();
        let mut lines = vec![0];
        lines.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Ok(Tokens {
            text,
            lines,
            tokens,
            at: 0,
        })
    }

    fn done(&self) -> bool {
        self.at >= self.tokens.len() || matches!(self.tokens[self.at].token, Token::EOF)
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|t| &t.token)
    }

    fn error(&self, message: &str) -> String {
        self.error_at(self.at, message)
    }

    /// An error at token `i`: its line and column, the message, and the token found.
    fn error_at(&self, i: usize, message: &str) -> String {
        let (position, found) = match self.tokens.get(i) {
            Some(t) if !matches!(t.token, Token::EOF) => (
                format!("line {}, column {}", t.span.start.line, t.span.start.column),
                format!("`{}`", t.token),
            ),
            _ => ("the end".to_string(), "the end".to_string()),
        };
        format!("pipeline SQL at {position}: {message} (found {found})")
    }

    /// Byte offset of token `i`'s start in the text.
    fn offset(&self, i: usize) -> usize {
        self.tokens
            .get(i)
            .map_or(self.text.len(), |t| self.byte_at(t.span.start))
    }

    /// Byte offset just past token `i`.
    fn end_offset(&self, i: usize) -> usize {
        self.tokens
            .get(i)
            .map_or(self.text.len(), |t| self.byte_at(t.span.end))
    }

    /// The byte offset of a tokenizer location (line and column from 1, in characters).
    fn byte_at(&self, at: sqlparser::tokenizer::Location) -> usize {
        let line = (at.line as usize).saturating_sub(1);
        let start = self.lines.get(line).copied().unwrap_or(self.text.len());
        let column = (at.column as usize).saturating_sub(1);
        self.text[start..]
            .char_indices()
            .nth(column)
            .map_or(self.text.len(), |(o, _)| start + o)
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
    }

    fn eat_word(&mut self, word: &str) -> bool {
        let yes = self.is_word(word);
        if yes {
            self.at += 1;
        }
        yes
    }

    fn word(&mut self, word: &str) -> Result<(), String> {
        if self.eat_word(word) {
            Ok(())
        } else {
            Err(self.error(&format!("expected {word}")))
        }
    }

    fn eat(&mut self, token: &Token) -> bool {
        let yes = self.peek() == Some(token);
        if yes {
            self.at += 1;
        }
        yes
    }

    fn expect(&mut self, token: &Token) -> Result<(), String> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.error(&format!("expected `{token}`")))
        }
    }

    /// A name, dotted parts joined (`catalog.db.table`).
    fn name(&mut self) -> Result<String, String> {
        let mut parts = Vec::new();
        loop {
            match self.peek() {
                Some(Token::Word(w)) => {
                    parts.push(w.value.clone());
                    self.at += 1;
                }
                _ => return Err(self.error("expected a name")),
            }
            if !self.eat(&Token::Period) {
                return Ok(parts.join("."));
            }
        }
    }

    fn string(&mut self) -> Result<String, String> {
        match self.peek() {
            Some(Token::SingleQuotedString(s) | Token::DoubleQuotedString(s)) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            _ => Err(self.error("expected a quoted string")),
        }
    }

    /// An option's value: a string, a number, TRUE or FALSE.
    fn value(&mut self) -> Result<String, String> {
        let v = match self.peek() {
            Some(Token::SingleQuotedString(s) | Token::DoubleQuotedString(s)) => s.clone(),
            Some(Token::Number(n, _)) => n.clone(),
            Some(Token::Word(w)) if w.quote_style.is_none() => {
                let v = w.value.to_ascii_lowercase();
                if v != "true" && v != "false" {
                    return Err(self.error("expected a value: a string, a number, true or false"));
                }
                v
            }
            _ => return Err(self.error("expected a value: a string, a number, true or false")),
        };
        self.at += 1;
        Ok(v)
    }

    /// The text of tokens `from` up to (not including) `to`, as written but without its
    /// comments (a space where there was space or a comment between two tokens).
    fn text_between(&self, from: usize, to: usize) -> String {
        let mut out = String::new();
        for i in from..to.min(self.tokens.len()) {
            let start = self.offset(i);
            if i > from && start > self.end_offset(i - 1) {
                out.push(' ');
            }
            out.push_str(&self.text[start..self.end_offset(i)]);
        }
        out
    }

    fn statement(
        &mut self,
        tables: &mut BTreeMap<String, TableDef>,
        flows: &mut Vec<FlowDef>,
    ) -> Result<(), String> {
        if self.eat_word("APPLY") {
            self.word("CHANGES")?;
            return self.auto_cdc(None, flows);
        }
        self.word("CREATE")?;
        if self.eat_word("OR") {
            self.word("REFRESH")?;
        }
        if self.eat_word("FLOW") {
            return self.flow(flows);
        }
        if self.is_word("MATERIALIZED") || self.is_word("VIEW") || self.is_word("TEMPORARY") {
            return Err(self.error(
                "materialized views and views need a query engine: only streaming tables and \
                 flows are run (docs/databricks.md)",
            ));
        }
        self.word("STREAMING")?;
        self.word("TABLE")?;
        if self.eat_word("IF") {
            self.word("NOT")?;
            self.word("EXISTS")?;
        }
        let name = self.name()?;
        if tables.contains_key(&name) {
            return Err(self.error(&format!("the table {name} is defined twice")));
        }
        let mut def = TableDef::default();
        if self.eat(&Token::LParen) {
            self.table_elements(&mut def)?;
        }
        loop {
            if self.eat_word("COMMENT") {
                self.string()?;
            } else if self.eat_word("TBLPROPERTIES") {
                self.expect(&Token::LParen)?;
                loop {
                    let key = self.string()?;
                    self.expect(&Token::Eq)?;
                    let value = self.value()?;
                    def.properties.insert(key, value);
                    if !self.eat(&Token::Comma) {
                        break;
                    }
                }
                self.expect(&Token::RParen)?;
            } else if self.eat_word("LOCATION") {
                def.location = self.string()?;
                def.explicit_location = true;
            } else if self.is_word("PARTITIONED") || self.is_word("CLUSTER") {
                return Err(self.error(
                    "PARTITIONED BY and CLUSTER BY are not supported: partition columns come \
                     from the source's folder names (docs/guide/table.md)",
                ));
            } else {
                break;
            }
        }
        if self.eat_word("AS") {
            let query = self.query()?;
            flows.push(FlowDef {
                name: name.clone(),
                target: name.clone(),
                once: false,
                query,
                cdc: None,
            });
        }
        tables.insert(name, def);
        Ok(())
    }

    /// `( column TYPE, ..., CONSTRAINT ... )` after a table's name.
    fn table_elements(&mut self, def: &mut TableDef) -> Result<(), String> {
        loop {
            let start = self.at;
            let is_constraint = self.is_word("CONSTRAINT");
            // To the next top-level comma or the closing parenthesis.
            let mut depth = 0usize;
            loop {
                match self.peek() {
                    None | Some(Token::EOF) => return Err(self.error("expected `)`")),
                    Some(Token::LParen) => depth += 1,
                    Some(Token::RParen) if depth == 0 => break,
                    Some(Token::RParen) => depth -= 1,
                    Some(Token::Comma) if depth == 0 => break,
                    _ => {}
                }
                self.at += 1;
            }
            if self.at == start {
                return Err(self.error("expected a column or a CONSTRAINT"));
            }
            let element = self.text_between(start, self.at);
            if is_constraint {
                def.constraints.push(element);
            } else {
                def.columns.push(declared_column(&element));
            }
            if self.eat(&Token::RParen) {
                return Ok(());
            }
            self.expect(&Token::Comma)?;
        }
    }

    /// `FLOW name [ONCE] AS INSERT INTO target BY NAME query` (after CREATE).
    fn flow(&mut self, flows: &mut Vec<FlowDef>) -> Result<(), String> {
        let name = self.name()?;
        let once = self.eat_word("ONCE");
        self.word("AS")?;
        if self.eat_word("AUTO") {
            self.word("CDC")?;
            if once {
                return Err(self.error("a ONCE flow appends: AUTO CDC has no ONCE"));
            }
            return self.auto_cdc(Some(name), flows);
        }
        // Databricks also writes `INSERT [ONCE] INTO` and `INSERT INTO ONCE`.
        self.word("INSERT")?;
        let once = self.eat_word("ONCE") || once;
        self.word("INTO")?;
        let once = self.eat_word("ONCE") || once;
        let target = self.name()?;
        self.word("BY")?;
        self.word("NAME")?;
        let query = self.query()?;
        if flows.iter().any(|f| f.name == name) {
            return Err(format!("the flow {name} is defined twice"));
        }
        flows.push(FlowDef {
            name,
            target,
            once,
            query,
            cdc: None,
        });
        Ok(())
    }

    /// `INTO target FROM source KEYS (...) [IGNORE NULL UPDATES] [APPLY AS DELETE WHEN
    /// cond] [APPLY AS TRUNCATE WHEN cond] SEQUENCE BY col [COLUMNS ...] [STORED AS SCD TYPE
    /// n] [TRACK HISTORY ON ...]`, after `APPLY CHANGES` or `CREATE FLOW name AS AUTO CDC`
    /// (an APPLY CHANGES flow is named after its target).
    fn auto_cdc(&mut self, name: Option<String>, flows: &mut Vec<FlowDef>) -> Result<(), String> {
        self.word("INTO")?;
        let target = self.name()?;
        self.word("FROM")?;
        let source = self.source()?;
        let mut cdc: BTreeMap<String, Value> = BTreeMap::new();
        let clause_start = |t: &Self| {
            [
                "APPLY", "SEQUENCE", "COLUMNS", "STORED", "TRACK", "IGNORE", "KEYS",
            ]
            .iter()
            .any(|w| t.is_word(w))
                || t.done()
                || t.peek() == Some(&Token::SemiColon)
        };
        while !self.done() && self.peek() != Some(&Token::SemiColon) {
            if self.eat_word("KEYS") {
                cdc.insert("keys".into(), json!(self.names_in_parens()?));
            } else if self.eat_word("IGNORE") {
                self.word("NULL")?;
                self.word("UPDATES")?;
                cdc.insert("ignore_null_updates".into(), json!(true));
            } else if self.eat_word("APPLY") {
                self.word("AS")?;
                let key = if self.eat_word("DELETE") {
                    "apply_as_deletes"
                } else if self.eat_word("TRUNCATE") {
                    "apply_as_truncates"
                } else {
                    return Err(self.error("expected DELETE or TRUNCATE"));
                };
                self.word("WHEN")?;
                let start = self.at;
                let mut depth = 0usize;
                while !self.done()
                    && self.peek() != Some(&Token::SemiColon)
                    && (depth > 0 || !clause_start(self))
                {
                    match self.peek() {
                        Some(Token::LParen) => depth += 1,
                        Some(Token::RParen) => depth = depth.saturating_sub(1),
                        _ => {}
                    }
                    self.at += 1;
                }
                if depth > 0 {
                    return Err(self.error_at(start, "a `(` of this condition is not closed"));
                }
                if self.at == start {
                    return Err(self.error("expected a condition"));
                }
                cdc.insert(key.into(), json!(self.text_between(start, self.at)));
            } else if self.eat_word("SEQUENCE") {
                self.word("BY")?;
                let by = if self.eat_word("STRUCT") {
                    self.names_in_parens()?
                } else {
                    vec![self.name()?]
                };
                cdc.insert("sequence_by".into(), json!(by));
            } else if self.eat_word("COLUMNS") {
                let (key, names) = self.column_choice("column_list", "except_column_list")?;
                cdc.insert(key.into(), json!(names));
            } else if self.eat_word("STORED") {
                self.word("AS")?;
                self.word("SCD")?;
                self.word("TYPE")?;
                let n = self.value()?;
                if n != "1" && n != "2" {
                    return Err(format!("SCD TYPE {n}: only 1 and 2 exist"));
                }
                cdc.insert(
                    "stored_as_scd_type".into(),
                    json!(n.parse::<u8>().unwrap_or(1)),
                );
            } else if self.eat_word("TRACK") {
                self.word("HISTORY")?;
                self.word("ON")?;
                let (key, names) = self.column_choice(
                    "track_history_column_list",
                    "track_history_except_column_list",
                )?;
                cdc.insert(key.into(), json!(names));
            } else {
                return Err(self.error(
                    "expected KEYS, IGNORE NULL UPDATES, APPLY AS DELETE/TRUNCATE WHEN, \
                     SEQUENCE BY, COLUMNS, STORED AS SCD TYPE or TRACK HISTORY ON",
                ));
            }
        }
        let name = name.unwrap_or_else(|| target.clone());
        if flows.iter().any(|f| f.name == name) {
            return Err(format!("the flow {name} is defined twice"));
        }
        flows.push(FlowDef {
            name,
            target,
            once: false,
            query: Query {
                columns: None,
                except: None,
                computed: Vec::new(),
                source,
                condition: None,
            },
            cdc: Some(cdc),
        });
        Ok(())
    }

    /// `(a, b)`.
    fn names_in_parens(&mut self) -> Result<Vec<String>, String> {
        self.expect(&Token::LParen)?;
        let mut names = Vec::new();
        loop {
            names.push(self.name()?);
            if !self.eat(&Token::Comma) {
                break;
            }
        }
        self.expect(&Token::RParen)?;
        Ok(names)
    }

    /// `a, b` (or `(a, b)`) as `only`, `* EXCEPT (a, b)` as `except`.
    fn column_choice(
        &mut self,
        only: &'static str,
        except: &'static str,
    ) -> Result<(&'static str, Vec<String>), String> {
        if self.eat(&Token::Mul) {
            self.word("EXCEPT")?;
            return Ok((except, self.names_in_parens()?));
        }
        if self.peek() == Some(&Token::LParen) {
            return Ok((only, self.names_in_parens()?));
        }
        let mut names = vec![self.name()?];
        while self.eat(&Token::Comma) {
            names.push(self.name()?);
        }
        Ok((only, names))
    }

    /// `SELECT list FROM source [WHERE condition]`, to the end of the statement.
    fn query(&mut self) -> Result<Query, String> {
        self.word("SELECT")?;
        let (columns, except, computed) = self.select_list()?;
        self.word("FROM")?;
        let source = self.source()?;
        let condition = if self.eat_word("WHERE") {
            let start = self.at;
            while !self.done() && self.peek() != Some(&Token::SemiColon) {
                self.at += 1;
            }
            Some(self.text_between(start, self.at))
        } else {
            None
        };
        if !self.done() && self.peek() != Some(&Token::SemiColon) {
            return Err(self.error(
                "only WHERE may follow the source (joins, GROUP BY and the like need a query \
                 engine)",
            ));
        }
        Ok(Query {
            columns,
            except,
            computed,
            source,
            condition,
        })
    }

    /// `*` or `* EXCEPT (a, b)` first, or plain columns; then more columns (one `*` holds
    /// is the same column) and computed items, `expression AS name`.
    #[allow(clippy::type_complexity)]
    fn select_list(
        &mut self,
    ) -> Result<(Option<Vec<String>>, Option<Vec<String>>, Vec<ComputedItem>), String> {
        let mut star = false;
        let mut except = None;
        if self.eat(&Token::Mul) {
            star = true;
            if self.eat_word("EXCEPT") {
                self.expect(&Token::LParen)?;
                let mut names = Vec::new();
                loop {
                    names.push(self.name()?);
                    if !self.eat(&Token::Comma) {
                        break;
                    }
                }
                self.expect(&Token::RParen)?;
                except = Some(names);
            }
            if !self.eat(&Token::Comma) {
                return Ok((None, except, Vec::new()));
            }
        }
        let mut names = Vec::new();
        let mut computed = Vec::new();
        loop {
            let start = self.at;
            // The item runs to the next comma outside parentheses, or FROM.
            let mut depth = 0usize;
            while !self.done() {
                match self.peek() {
                    Some(Token::LParen) => depth += 1,
                    Some(Token::RParen) => depth = depth.saturating_sub(1),
                    Some(Token::Comma) if depth == 0 => break,
                    _ if depth == 0 && self.is_word("FROM") => break,
                    _ => {}
                }
                self.at += 1;
            }
            if self.at == start {
                return Err(self.error("expected a column or an expression"));
            }
            match self.select_item(start, self.at)? {
                Item::Column(name) => {
                    if !star {
                        names.push(name);
                    }
                }
                Item::Computed(item) => computed.push(item),
            }
            if !self.eat(&Token::Comma) {
                break;
            }
        }
        if star {
            Ok((None, except, computed))
        } else {
            Ok((Some(names), None, computed))
        }
    }

    /// One select item, tokens `from..to`: a plain column, or `expression AS name` checked
    /// by the expression engine (an error points at its place in the file).
    fn select_item(&self, from: usize, to: usize) -> Result<Item, String> {
        use sqlparser::ast::{Expr, SelectItem};
        let raw = &self.text[self.offset(from)..self.end_offset(to - 1)];
        let start = self.tokens[from].span.start;
        let at = |p: crate::expr::Position, message: &str| {
            let (line, column) = if p.line <= 1 {
                (start.line, start.column + p.column - 1)
            } else {
                (start.line + p.line - 1, p.column)
            };
            format!("pipeline SQL at line {line}, column {column}: {message}")
        };
        let from_expr = |e: crate::expr::PredicateError| match e {
            crate::expr::PredicateError::Invalid { at: p, message, .. } => at(p, &message),
            other => self.error_at(from, &other.to_string()),
        };
        let dialect = DatabricksDialect {};
        let item = Parser::new(&dialect)
            .try_with_sql(raw)
            .and_then(|mut p| {
                let item = p.parse_select_item()?;
                p.expect_token(&Token::EOF)?;
                Ok(item)
            })
            .map_err(|e| from_expr(crate::expr::PredicateError::from_parser(raw, e)))?;
        match item {
            SelectItem::UnnamedExpr(Expr::Identifier(ident)) => Ok(Item::Column(ident.value)),
            SelectItem::ExprWithAlias { expr, alias } => {
                crate::expr::value::ValueExpr::from_ast(raw, &expr).map_err(from_expr)?;
                Ok(Item::Computed(ComputedItem {
                    text: self.text_between(from, to),
                    name: alias.value,
                    expression: expr.to_string(),
                }))
            }
            SelectItem::UnnamedExpr(_) => {
                Err(self.error_at(from, "name what this item computes: `expression AS name`"))
            }
            _ => Err(self.error_at(
                from,
                "a qualified * is not read (a join needs a query engine)",
            )),
        }
    }

    fn source(&mut self) -> Result<Source, String> {
        let streaming = self.eat_word("STREAM");
        if self.eat_word("read_files") {
            return self.read_files();
        }
        if self.eat_word("cloud_files") {
            return self.cloud_files();
        }
        if streaming && self.eat(&Token::LParen) {
            let name = self.name()?;
            self.expect(&Token::RParen)?;
            return Ok(Source::Table(name));
        }
        let name = self.name()?;
        if self.peek() == Some(&Token::LParen) {
            return Err(self.error(&format!(
                "{name}(...) is not a source autoloader reads: read_files, cloud_files, or a \
                 table"
            )));
        }
        Ok(Source::Table(name))
    }

    /// `read_files('path', name => value, ...)`: the names are Auto Loader's and Spark's
    /// options, with or without `cloudFiles.`.
    fn read_files(&mut self) -> Result<Source, String> {
        self.expect(&Token::LParen)?;
        let path = self.string()?;
        let mut options = Vec::new();
        while self.eat(&Token::Comma) {
            let key = self.name()?;
            self.expect(&Token::RArrow)?;
            let value = self.value()?;
            options.push((option_key(&key), value));
        }
        self.expect(&Token::RParen)?;
        Ok(Source::Files { path, options })
    }

    /// `cloud_files('path', 'format' [, map('key', 'value', ...)])`.
    fn cloud_files(&mut self) -> Result<Source, String> {
        self.expect(&Token::LParen)?;
        let path = self.string()?;
        self.expect(&Token::Comma)?;
        let format = self.string()?;
        let mut options = vec![("cloudFiles.format".to_string(), format)];
        if self.eat(&Token::Comma) {
            self.word("map")?;
            self.expect(&Token::LParen)?;
            loop {
                let key = self.string()?;
                self.expect(&Token::Comma)?;
                let value = self.value()?;
                options.push((option_key(&key), value));
                if !self.eat(&Token::Comma) {
                    break;
                }
            }
            self.expect(&Token::RParen)?;
        }
        self.expect(&Token::RParen)?;
        Ok(Source::Files { path, options })
    }
}

/// An option named as `read_files` names it: `format` is `cloudFiles.format`, and a name
/// that only the `cloudFiles.` spelling knows takes it.
fn option_key(name: &str) -> String {
    let known = |k: &str| {
        crate::options::OPTIONS
            .iter()
            .any(|o| o.key.eq_ignore_ascii_case(k))
    };
    if name.eq_ignore_ascii_case("format") {
        return "cloudFiles.format".into();
    }
    let prefixed = format!("cloudFiles.{name}");
    if !known(name) && known(&prefixed) {
        prefixed
    } else {
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_tables_and_flows_read_as_streams() {
        let sql = r#"
-- seed 003
CREATE OR REFRESH STREAMING TABLE bronze_orders (
  CONSTRAINT positive EXPECT (amount > 0) -- don't keep refunds
    ON VIOLATION DROP ROW
)
TBLPROPERTIES ('pipelines.reset.allowed' = 'false')
AS SELECT *, _rescued_data,
    _metadata.file_path AS _source_file, -- lineage
    current_timestamp() AS _ingested_at
FROM STREAM read_files('landing/orders', format => 'json', inferColumnTypes => true,
  schemaEvolutionMode => 'addNewColumns');
CREATE OR REFRESH STREAMING TABLE raw_events
AS SELECT * FROM cloud_files('events', 'json', map('cloudFiles.inferColumnTypes', 'true'));
CREATE OR REFRESH STREAMING TABLE all_orders (order_id BIGINT, amount DECIMAL(10,2));
CREATE FLOW backfill ONCE AS INSERT INTO all_orders BY NAME
SELECT order_id, amount FROM read_files('archive', format => 'json', schemaHints => 'note STRING') WHERE amount < 100;
CREATE OR REFRESH STREAMING TABLE silver.orders AS SELECT * EXCEPT (note) FROM STREAM(bronze_orders)
"#;
        let c = to_config(sql).unwrap();
        let streams = c["stream"].as_array().unwrap();
        assert_eq!(streams.len(), 4);
        let bronze = &streams[0];
        assert_eq!(bronze["name"], "bronze_orders");
        assert_eq!(bronze["source"], "landing/orders");
        assert_eq!(bronze["options"]["cloudFiles.format"], "json");
        assert_eq!(bronze["options"]["cloudFiles.inferColumnTypes"], "true");
        assert_eq!(
            bronze["options"]["cloudFiles.schemaEvolutionMode"],
            "addNewColumns"
        );
        assert_eq!(
            bronze["expect"][0],
            "CONSTRAINT positive EXPECT (amount > 0) ON VIOLATION DROP ROW"
        );
        assert_eq!(
            bronze["with_columns"],
            json!([
                "_metadata.file_path AS _source_file",
                "current_timestamp() AS _ingested_at"
            ]),
            "computed items as written, without the comment"
        );
        assert_eq!(bronze.get("columns"), None, "_rescued_data is in *");
        assert_eq!(streams[1]["options"]["cloudFiles.format"], "json");
        let backfill = &streams[2];
        assert_eq!(backfill["table"], "all_orders");
        assert_eq!(backfill["once"], true);
        assert_eq!(backfill["where"], "amount < 100");
        assert_eq!(backfill["columns"], json!(["order_id", "amount"]));
        assert_eq!(
            backfill["options"]["cloudFiles.schemaHints"],
            "order_id BIGINT, amount DECIMAL(10,2), note STRING"
        );
        let silver = &streams[3];
        assert_eq!(silver["name"], "silver_orders");
        assert_eq!(silver["table"], "silver/orders");
        assert_eq!(silver["source"], "bronze_orders");
        assert_eq!(silver["source_format"], "delta");
        assert_eq!(silver["except_columns"], json!(["note"]));
        assert_eq!(
            c["table"][0]["properties"]["pipelines.reset.allowed"],
            "false"
        );
    }

    #[test]
    fn apply_changes_and_auto_cdc_read_as_cdc_settings() {
        let sql = r#"
CREATE OR REFRESH STREAMING TABLE customers;
APPLY CHANGES INTO customers
FROM STREAM(raw_customer_cdc)
  KEYS (customer_id)
  APPLY AS DELETE WHEN operation = 'DELETE' AND (x IS NULL)
  SEQUENCE BY updated_at
  COLUMNS * EXCEPT (_rescued_data, operation)
  STORED AS SCD TYPE 1;
CREATE OR REFRESH STREAMING TABLE customers_history;
CREATE FLOW history AS AUTO CDC INTO customers_history
FROM STREAM raw_customer_cdc KEYS (customer_id, region) IGNORE NULL UPDATES
  SEQUENCE BY STRUCT(updated_at, seq) STORED AS SCD TYPE 2 TRACK HISTORY ON address, name;
"#;
        let c = to_config(sql).unwrap();
        let s1 = &c["stream"][0];
        assert_eq!(s1["name"], "customers");
        assert_eq!(s1["source_format"], "delta");
        let cdc = &s1["cdc"];
        assert_eq!(cdc["keys"], json!(["customer_id"]));
        assert_eq!(
            cdc["apply_as_deletes"],
            "operation = 'DELETE' AND (x IS NULL)"
        );
        assert_eq!(cdc["sequence_by"], json!(["updated_at"]));
        assert_eq!(
            cdc["except_column_list"],
            json!(["_rescued_data", "operation"])
        );
        assert_eq!(cdc["stored_as_scd_type"], 1);
        let s2 = &c["stream"][1];
        assert_eq!(s2["name"], "history");
        assert_eq!(s2["table"], "customers_history");
        let cdc = &s2["cdc"];
        assert_eq!(cdc["keys"], json!(["customer_id", "region"]));
        assert_eq!(cdc["ignore_null_updates"], true);
        assert_eq!(cdc["sequence_by"], json!(["updated_at", "seq"]));
        assert_eq!(cdc["stored_as_scd_type"], 2);
        assert_eq!(cdc["track_history_column_list"], json!(["address", "name"]));
    }

    #[test]
    fn declared_columns_shape_a_table_source_s_flow() {
        let c = to_config(
            "CREATE STREAMING TABLE s (id INT NOT NULL COMMENT 'key', total DECIMAL(10, 2), \
             note STRING);\n\
             CREATE FLOW f AS INSERT INTO s BY NAME \
             SELECT id, price * qty AS total, upper(x) AS extra FROM STREAM(b)",
        )
        .unwrap();
        let f = &c["stream"][0];
        assert_eq!(f["columns"], json!([]));
        assert_eq!(
            f["with_columns"],
            json!([
                "CAST(`id` AS INT) AS `id`",
                "CAST((price * qty) AS DECIMAL(10, 2)) AS `total`",
                "CAST(NULL AS STRING) AS `note`",
                "upper(x) AS extra"
            ])
        );
        let e = to_config(
            "CREATE STREAMING TABLE c (id INT); APPLY CHANGES INTO c FROM STREAM(b) KEYS (id) \
             SEQUENCE BY seq",
        )
        .unwrap_err();
        assert!(
            e.contains("an APPLY CHANGES target takes its columns"),
            "{e}"
        );
    }

    #[test]
    fn what_is_not_read_yet_is_named_with_its_place() {
        let cases = [
            (
                "CREATE STREAMING TABLE t AS SELECT *, frob(a) AS at FROM read_files('x')",
                "line 1, column 39: unknown function frob()",
            ),
            (
                "CREATE STREAMING TABLE t AS\nSELECT id,\n  sum(amount) AS total FROM read_files('x')",
                "line 3, column 3: sum() aggregates",
            ),
            (
                "CREATE STREAMING TABLE t AS SELECT *, rank() OVER (ORDER BY a) AS r FROM t0",
                "line 1, column 39: rank() OVER (...) is a window",
            ),
            (
                "CREATE STREAMING TABLE t AS SELECT *, upper(a) FROM t0",
                "line 1, column 39: name what this item computes",
            ),
            (
                "CREATE STREAMING TABLE t AS SELECT *, (SELECT max(x) FROM u) AS m FROM t0",
                "line 1, column 40: a subquery needs a query engine",
            ),
            (
                "CREATE STREAMING TABLE t AS SELECT *, a +* 2 AS m FROM t0",
                "line 1, column 42:",
            ),
            (
                "CREATE STREAMING TABLE t AS SELECT * FROM read_files('x') a JOIN b ON a.x = b.x",
                "only WHERE may follow",
            ),
            (
                "CREATE STREAMING TABLE t; APPLY CHANGES INTO t FROM STREAM(s) KEYS (id) \
                 SEQUENCE BY ts PARTITION",
                "line 1, column 88: expected KEYS",
            ),
            (
                "CREATE STREAMING TABLE t; APPLY CHANGES INTO t FROM STREAM(s) KEYS (id) \
                 APPLY AS DELETE WHEN (op = 'D' SEQUENCE BY ts",
                "line 1, column 94: a `(` of this condition is not closed",
            ),
            (
                "CREATE MATERIALIZED VIEW v AS SELECT count(*) FROM t",
                "need a query engine",
            ),
            (
                "CREATE FLOW f AS INSERT INTO nowhere BY NAME SELECT * FROM read_files('x')",
                "which no CREATE STREAMING TABLE defines",
            ),
        ];
        for (sql, message) in cases {
            let e = to_config(sql).unwrap_err();
            assert!(e.contains(message), "{sql}: {e}");
        }
    }
}
