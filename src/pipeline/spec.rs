//! A stream as a front-end describes it (`ingest`'s command line, a config file's
//! `[[stream]]`, any later front-end), built into the [`IngestRequest`] the pipeline runs.
//! Every front-end builds through [`StreamSpec::build`], so the options, the CDC settings,
//! the source and its format are resolved one way, whichever way the user wrote them.

use crate::checkpoint::claims::Worker;
use crate::flow::FlowSpec;
use crate::flow::cdc::{CdcError, CdcSpec};
use crate::flow::snapshot::SnapshotSpec;
use crate::location::Location;
use crate::options::{self, OptionsError};
use crate::source::{Source, SourceError, SourceFormat};
use crate::storage::{StorageError, StorageSettings};

use super::{FirstWriter, IngestRequest, OnceFlow};

/// What a front-end says of one stream; locations already resolved (a config file's
/// relative paths against the file's folder).
#[derive(Debug, Clone)]
pub struct StreamSpec {
    /// The stream's name in events, alerts and metrics.
    pub name: String,
    pub source: Location,
    pub source_format: SourceFormat,
    pub table: Location,
    pub checkpoint: Location,
    /// Options as given, in order (a later key wins): Auto Loader's and Spark's, and the
    /// `cdc.*` and `snapshot.*` settings under their prefixes.
    pub options: Vec<(String, String)>,
    /// Which columns and rows reach the table.
    pub flow: FlowSpec,
    /// Streams of the same run whose table this stream reads (its source is then a Delta
    /// table, even before their first commit).
    pub upstream: Vec<String>,
    /// A ONCE flow.
    pub once: bool,
    /// `--worker`: one of several competing processes.
    pub worker: Option<Worker>,
    /// Where rows a `quarantine` expectation keeps out go (default: beside the checkpoint).
    pub quarantine_table: Option<Location>,
}

/// Why a stream could not be built; each keeps its cause's exit class.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error(transparent)]
    Options(#[from] OptionsError),
    #[error(transparent)]
    Cdc(#[from] CdcError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Source(#[from] SourceError),
}

impl StreamSpec {
    /// A stream with the defaults: everything flows, one process, not ONCE.
    pub fn new(name: String, source: Location, table: Location, checkpoint: Location) -> Self {
        StreamSpec {
            name,
            source,
            source_format: SourceFormat::Detect,
            table,
            checkpoint,
            options: Vec::new(),
            flow: FlowSpec::default(),
            upstream: Vec::new(),
            once: false,
            worker: None,
            quarantine_table: None,
        }
    }

    /// Resolves the options and CDC settings, checks the S3 configuration when a location
    /// is on S3, opens the source and fixes its format. Returns the request and the
    /// options' warnings (deprecated or ignored keys), for the front-end to say.
    pub fn build(
        self,
        storage: &StorageSettings,
    ) -> Result<(IngestRequest, Vec<String>), SpecError> {
        let (pairs, cdc_pairs) = CdcSpec::split_options(self.options);
        let (pairs, snapshot_pairs) =
            options::split_prefixed(pairs, crate::flow::snapshot::OPTION_PREFIX);
        let (mut settings, warnings) = options::resolve(&pairs, &self.checkpoint)?;
        let snapshot = SnapshotSpec::from_pairs(&snapshot_pairs)
            .map_err(|e| OptionsError::Conflict(e.to_string()))?;
        if settings.notifications.is_some() && snapshot.is_some() {
            return Err(OptionsError::Conflict(
                "a snapshot flow compares whole units of the listing; cloudFiles.useNotifications \
                 takes single files from a queue: leave one of them out"
                    .into(),
            )
            .into());
        }
        let cdc = CdcSpec::from_pairs_for(&cdc_pairs, snapshot.as_ref())?;
        let locations = [
            &self.source,
            &self.table,
            &self.checkpoint,
            &settings.schema_location,
        ];
        if locations.iter().any(|l| matches!(l, Location::S3(_))) {
            crate::storage::check_s3_settings(&storage.s3)?;
        }
        settings.delta.created_by_run = !self.upstream.is_empty();
        let source_format = match self.source_format {
            SourceFormat::Detect if settings.delta.created_by_run => SourceFormat::Delta,
            other => other,
        };
        let source = Source::open(&self.source, storage, source_format, &settings)?;
        source.fix_format(&mut settings)?;
        let request = IngestRequest {
            name: self.name,
            source,
            table: self.table,
            checkpoint: self.checkpoint,
            settings,
            storage: storage.clone(),
            first_writer: FirstWriter::Alone,
            table_properties: Vec::new(),
            auto_compact: None,
            flow: self.flow,
            upstream: self.upstream,
            cdc,
            snapshot,
            once: self.once.then(OnceFlow::default),
            worker: self.worker,
            quarantine_table: self.quarantine_table,
        };
        Ok((request, warnings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dir: &std::path::Path, options: &[(&str, &str)]) -> StreamSpec {
        let at = |p: &str| Location::parse(&dir.join(p).display().to_string()).unwrap();
        std::fs::create_dir_all(dir.join("landing")).unwrap();
        StreamSpec {
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..StreamSpec::new("s".into(), at("landing"), at("table"), at("ckpt"))
        }
    }

    #[test]
    fn cdc_and_file_options_are_told_apart_in_one_list() {
        let dir = tempfile::tempdir().unwrap();
        let storage = StorageSettings::local(dir.path().join("cache"));
        let options = [
            ("cloudFiles.format", "json"),
            ("cdc.keys", "id"),
            ("cdc.sequence_by", "ts"),
        ];
        let (req, _) = spec(dir.path(), &options).build(&storage).unwrap();
        let cdc = req.cdc.expect("the cdc.* keys make a CDC flow");
        assert_eq!(
            (cdc.keys, cdc.sequence_by),
            (vec!["id".into()], vec!["ts".into()])
        );
        assert!(req.once.is_none() && req.worker.is_none());
    }

    #[test]
    fn a_stream_reading_another_s_table_reads_it_as_delta_before_it_exists() {
        let dir = tempfile::tempdir().unwrap();
        let storage = StorageSettings::local(dir.path().join("cache"));
        let mut s = spec(dir.path(), &[]);
        s.upstream = vec!["bronze".into()];
        let (req, _) = s.build(&storage).unwrap();
        assert!(req.source.reads_delta());
        assert!(req.settings.delta.created_by_run);
    }

    #[test]
    fn a_bad_option_or_cdc_setting_keeps_its_kind() {
        let dir = tempfile::tempdir().unwrap();
        let storage = StorageSettings::local(dir.path().join("cache"));
        let bad_option = spec(dir.path(), &[("cloudFiles.nope", "1")]).build(&storage);
        assert!(matches!(bad_option, Err(SpecError::Options(_))));
        let bad_cdc = spec(dir.path(), &[("cdc.keys", "id")]).build(&storage);
        assert!(matches!(bad_cdc, Err(SpecError::Cdc(_))), "no sequence_by");
    }
}
