//! Spark's pipeline spec, `spark-pipeline.yml` (or `.yaml`): the pipeline's name, `storage`
//! (the root of the flows' checkpoints), `libraries` (`glob: include:` patterns of SQL
//! files, relative to the spec), the default `catalog` and `database` (alias `schema`) of
//! unqualified table names, and `configuration` (strings; `${key}` in the SQL is replaced by
//! its value, and `spark.sql.warehouse.dir` is where tables go, `spark-warehouse` by
//! default, as in Spark). Any other key is an error naming it, as Spark's is.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::sql::Naming;

/// The file names a folder's spec may have.
pub(super) const FILE_NAMES: &[&str] = &["spark-pipeline.yml", "spark-pipeline.yaml"];

/// Where a table root is set in `configuration`.
const WAREHOUSE_KEY: &str = "spark.sql.warehouse.dir";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    name: String,
    storage: String,
    #[serde(default)]
    libraries: Vec<Library>,
    catalog: Option<String>,
    #[serde(alias = "schema")]
    database: Option<String>,
    #[serde(default)]
    configuration: BTreeMap<String, serde_norway::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Library {
    glob: Glob,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Glob {
    include: String,
}

/// A spec read: its SQL files (name relative to the spec's folder, and text with
/// `${key}` replaced), how names map to places, and where checkpoints go.
#[derive(Debug)]
pub(super) struct Pipeline {
    pub(super) files: Vec<(String, String)>,
    pub(super) naming: Naming,
    /// `storage`, `/`-terminated: each flow's checkpoint is `<storage><flow name>`.
    pub(super) storage: String,
}

/// Whether `path` is a spec file, or a folder holding one: the spec's path.
pub(super) fn find(path: &Path) -> Option<PathBuf> {
    if path.is_dir() {
        return FILE_NAMES
            .iter()
            .map(|n| path.join(n))
            .find(|p| p.is_file());
    }
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    (ext == "yml" || ext == "yaml").then(|| path.to_path_buf())
}

/// Reads the spec at `path` and the SQL files its libraries include.
pub(super) fn read(path: &Path) -> Result<Pipeline, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
    let spec: Spec = serde_norway::from_str(&text).map_err(|e| e.to_string())?;
    if spec.name.trim().is_empty() {
        return Err("name is empty".into());
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut configuration = BTreeMap::new();
    for (key, value) in &spec.configuration {
        let text = match value {
            serde_norway::Value::String(s) => s.clone(),
            serde_norway::Value::Number(n) => n.to_string(),
            serde_norway::Value::Bool(b) => b.to_string(),
            _ => return Err(format!("configuration: {key} is not a string")),
        };
        configuration.insert(key.clone(), text);
    }
    if spec.libraries.is_empty() {
        return Err(
            "libraries is empty: list the SQL files (- glob: include: transformations/**)".into(),
        );
    }
    let mut globs = globset::GlobSetBuilder::new();
    for library in &spec.libraries {
        let pattern = library.glob.include.trim_start_matches("./");
        globs.add(globset::Glob::new(pattern).map_err(|e| format!("libraries: {pattern}: {e}"))?);
    }
    let globs = globs.build().map_err(|e| format!("libraries: {e}"))?;
    let mut files = Vec::new();
    let mut todo = vec![folder.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        for entry in entries {
            let p = entry
                .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
                .path();
            let relative = p.strip_prefix(folder).unwrap_or(&p).to_path_buf();
            if p.is_dir() {
                todo.push(p);
                continue;
            }
            // A folder pattern (`transformations` or `transformations/`) takes what is under it.
            let matched = globs.is_match(&relative)
                || relative
                    .ancestors()
                    .skip(1)
                    .any(|a| !a.as_os_str().is_empty() && globs.is_match(a));
            if !matched {
                continue;
            }
            match p.extension().and_then(|e| e.to_str()) {
                Some(e) if e.eq_ignore_ascii_case("sql") => files.push(relative),
                Some(e) if e.eq_ignore_ascii_case("py") => {
                    return Err(format!(
                        "{}: Python transformations need Spark (pyspark.pipelines or dlt); \
                         autoloader runs SQL pipelines (docs/databricks.md maps the Python \
                         decorators to its config)",
                        relative.display()
                    ));
                }
                _ => {}
            }
        }
    }
    files.sort();
    if files.is_empty() {
        return Err("its libraries include no .sql file".into());
    }
    let mut texts = Vec::with_capacity(files.len());
    for f in &files {
        let full = folder.join(f);
        let text = std::fs::read_to_string(&full)
            .map_err(|e| format!("cannot read {}: {e}", full.display()))?;
        texts.push((f.display().to_string(), substitute(&text, &configuration)));
    }
    let warehouse = configuration
        .get(WAREHOUSE_KEY)
        .cloned()
        .unwrap_or_else(|| "spark-warehouse".into());
    Ok(Pipeline {
        files: texts,
        naming: Naming {
            root: with_slash(&warehouse),
            catalog: spec.catalog,
            database: spec.database,
        },
        storage: with_slash(&spec.storage),
    })
}

fn with_slash(place: &str) -> String {
    if place.ends_with('/') {
        place.to_string()
    } else {
        format!("{place}/")
    }
}

/// `${key}` replaced by the configuration's value (a key it lacks is left as written).
fn substitute(text: &str, configuration: &BTreeMap<String, String>) -> String {
    let mut out = text.to_string();
    for (key, value) in configuration {
        out = out.replace(&format!("${{{key}}}"), value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(spec: &str, files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spark-pipeline.yml");
        std::fs::write(&path, spec).unwrap();
        for (name, text) in files {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        (dir, path)
    }

    #[test]
    fn a_spec_reads_its_libraries_and_names() {
        let (dir, path) = project(
            "name: orders\nstorage: checkpoints\ncatalog: main\nschema: bronze\n\
             libraries:\n  - glob:\n      include: transformations/**\n\
             configuration:\n  source_root: landing\n  spark.sql.warehouse.dir: tables\n",
            &[
                ("transformations/b.sql", "SELECT '${source_root}/b'"),
                ("transformations/sub/a.sql", "x"),
                ("transformations/notes.md", "not SQL"),
                ("other.sql", "not included"),
            ],
        );
        assert_eq!(find(dir.path()), Some(path.clone()));
        let p = read(&path).unwrap();
        let names: Vec<&str> = p.files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["transformations/b.sql", "transformations/sub/a.sql"]
        );
        assert_eq!(p.files[0].1, "SELECT 'landing/b'");
        assert_eq!(p.storage, "checkpoints/");
        assert_eq!(p.naming.root, "tables/");
        assert_eq!(p.naming.qualify("orders"), "main.bronze.orders");
        assert_eq!(p.naming.qualify("silver.orders"), "main.silver.orders");
        assert_eq!(p.naming.qualify("c.d.t"), "c.d.t");
    }

    #[test]
    fn unknown_keys_and_python_files_are_errors() {
        let (_dir, path) = project(
            "name: x\nstorage: s\nlibraries: []\nserverless: true\n",
            &[],
        );
        let e = read(&path).unwrap_err();
        assert!(e.contains("unknown field `serverless`"), "{e}");
        let (_dir, path) = project("name: x\nlibraries: []\n", &[]);
        assert!(read(&path).unwrap_err().contains("missing field `storage`"));
        let (_dir, path) = project(
            "name: x\nstorage: s\nlibraries:\n  - glob:\n      include: t/**\n",
            &[("t/flow.py", "import dlt")],
        );
        assert!(
            read(&path)
                .unwrap_err()
                .contains("Python transformations need Spark")
        );
    }
}
