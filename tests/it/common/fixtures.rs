//! The bundled binary fixtures (`fixtures/`, made by its `*-generate.py` scripts).

use std::fs;
use std::path::{Path, PathBuf};

use super::{Scratch, column_strings, read_table};

/// The path of `fixtures/<rel>`.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

/// Copies `fixtures/<rel>` into the landing folder under its file name.
pub fn land_fixture(s: &Scratch, rel: &str) {
    let name = rel.rsplit('/').next().unwrap();
    s.land(name, fs::read(fixture(rel)).unwrap());
}

/// `column` by `id`, as text, rows sorted by id.
pub fn by_id(table: &Path, column: &str) -> Vec<(i64, String)> {
    let t = read_table(table);
    let mut rows: Vec<(i64, String)> = column_strings(&t, "id")
        .iter()
        .map(|i| i.parse().unwrap())
        .zip(column_strings(&t, column))
        .collect();
    rows.sort();
    rows
}
