//! Reports for people on call: schema history, diffs and versions as DDL, drift from the
//! table's rescued-data column, what its expectations did (`quality`), a stream's status and events. Each takes a table (local or
//! S3) and finds its streams' checkpoints under it, or a checkpoint named as such.

mod drift;
mod error;
mod events;
mod find;
mod quality;
mod schema;
mod since;
mod status;

pub use drift::*;
pub use error::*;
pub use events::*;
pub use find::*;
pub use quality::*;
pub use schema::*;
pub use since::*;
pub use status::*;

#[cfg(test)]
mod tests {
    use super::schema::ddl_field;
    use super::*;

    #[test]
    fn cdc_totals_sum_the_commits_cdc_records() {
        let commits = vec![
            (1, serde_json::json!({"batch": 0})),
            (
                2,
                serde_json::json!({"cdc": {"rowsInserted": 3, "rowsUpdated": 1, "rowsDeleted": 0, "recordsStale": 2, "recordsTruncated": 1}}),
            ),
            (
                3,
                serde_json::json!({"cdc": {"rowsInserted": 1, "rowsUpdated": 0, "rowsDeleted": 4, "recordsStale": 0}}),
            ),
        ];
        let t = CdcTotals::of(&commits).unwrap();
        assert_eq!((t.rows_inserted, t.rows_updated, t.rows_deleted), (4, 1, 4));
        assert_eq!((t.records_stale, t.records_truncated), (2, 1));
        assert_eq!(CdcTotals::of(&commits[..1]), None, "not a CDC target");
    }
    use crate::schema::{DataType, Field, Schema};

    #[test]
    fn shown_ddl_reads_back_as_the_schema_option() {
        let schema = Schema::new(vec![
            Field::new("order_id", DataType::Long),
            Field::new("unit price", DataType::Decimal(12, 2)),
            Field::new(
                "address",
                DataType::Struct(vec![Field::new("zip", DataType::String)]),
            ),
            Field::new("tags", DataType::Array(Box::new(DataType::String))),
        ]);
        let ddl: Vec<String> = schema.fields.iter().map(ddl_field).collect();
        let ddl = ddl.join(", ");
        assert!(ddl.contains("`unit price` DECIMAL(12,2)"), "{ddl}");
        assert_eq!(crate::schema::hints::parse_schema(&ddl).unwrap(), schema);
    }

    const NOW: i64 = 1_800_000_000_000;

    #[test]
    fn since_takes_the_units_the_help_shows() {
        for (text, ago_ms) in [
            ("90s", 90_000),
            ("15m", 900_000),
            ("24h", 86_400_000),
            ("7d", 7 * 86_400_000),
            ("2w", 14 * 86_400_000),
            ("1.5h", 5_400_000),
            ("3 days", 3 * 86_400_000),
            ("500ms", 500),
        ] {
            assert_eq!(parse_since(text, NOW).unwrap(), NOW - ago_ms, "{text}");
        }
        assert_eq!(
            parse_since("2026-03-15T00:00:00Z", NOW).unwrap(),
            1_773_532_800_000
        );
        for bad in ["7", "7y", "d", "", "-1d"] {
            let err = parse_since(bad, NOW).unwrap_err().to_string();
            assert!(err.contains("s, m, h, d or w"), "{bad}: {err}");
        }
    }
}
