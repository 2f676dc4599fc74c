//! Finding a table's streams: the checkpoints under it, or one named as such.

use crate::checkpoint::Checkpoint;
use crate::reports::ReportError;

use crate::location::Location;
use crate::schema::store::{SCHEMAS_DIR, SchemaStore};
use crate::storage::StorageSettings;
use crate::storage::object_dir::RemoteDir;
use crate::telemetry::events::{self, EventKind};

/// A stream's checkpoint, as a report found it.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamCheckpoint {
    /// The stream's name: its folder under `TABLE/_autoloader` (a config stream), or the
    /// table's folder name for `ingest`'s checkpoint `TABLE/_autoloader`; `None` for a
    /// checkpoint named as such.
    pub name: Option<String>,
    pub location: Location,
}

/// The checkpoints a report reads: `checkpoint` when given (it must be one); else `target`
/// itself when it is a checkpoint; else the streams of the table `target`, found where
/// their checkpoints are by default: `TABLE/_autoloader` (`ingest`) and
/// `TABLE/_autoloader/NAME` (the config stream NAME). All of them, or the one named
/// `stream`. Nothing else links a table to a checkpoint kept elsewhere (its commits record
/// the stream id, not the checkpoint), so such a stream needs `--checkpoint`.
pub fn checkpoints(
    target: Option<&Location>,
    checkpoint: Option<&Location>,
    stream: Option<&str>,
    state: &StorageSettings,
) -> Result<Vec<StreamCheckpoint>, ReportError> {
    let (target, given) = match (checkpoint, target) {
        (Some(c), _) => (c, true),
        (None, Some(t)) => (t, false),
        (None, None) => {
            return Err(ReportError::NoCheckpoint {
                path: ".".to_string(),
            });
        }
    };
    if is_checkpoint(target, state)? {
        return Ok(vec![StreamCheckpoint {
            name: None,
            location: target.clone(),
        }]);
    }
    // `--checkpoint TABLE` means the table's checkpoints too.
    let found = table_streams(target, state)?;
    if found.is_empty() && given {
        return Err(ReportError::NotACheckpoint {
            path: target.to_string(),
        });
    }
    if found.is_empty() {
        return Err(ReportError::NoCheckpoint {
            path: target.to_string(),
        });
    }
    let Some(name) = stream else {
        return Ok(found);
    };
    // `ingest`'s stream answers to its `--name` and to the table folder's name.
    let root = crate::checkpoint::default_location(target, None);
    let is_root_named = |s: &StreamCheckpoint| {
        s.location == root && crate::checkpoint::default_stream_name(target) == name
    };
    match found
        .iter()
        .find(|s| s.name.as_deref() == Some(name) || is_root_named(s))
    {
        Some(one) => Ok(vec![one.clone()]),
        None => Err(ReportError::NoSuchStream {
            path: target.to_string(),
            stream: name.to_string(),
            known: stream_names(&found),
        }),
    }
}

/// The one checkpoint of `found`, or an error naming the streams to choose from.
pub fn only_one(
    target: &Location,
    mut found: Vec<StreamCheckpoint>,
) -> Result<StreamCheckpoint, ReportError> {
    if found.len() == 1 {
        return Ok(found.remove(0));
    }
    Err(ReportError::SeveralStreams {
        path: target.to_string(),
        known: stream_names(&found),
    })
}

fn stream_names(found: &[StreamCheckpoint]) -> String {
    found
        .iter()
        .map(|s| s.name.clone().unwrap_or_else(|| s.location.to_string()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The name the stream of `checkpoint` last ran under (`ingest --name`), from its last
/// `stream_started` event; `None` without one.
fn started_as(checkpoint: &Location, state: &StorageSettings) -> Option<String> {
    let local = crate::checkpoint::local_dir(checkpoint, state);
    events::read_events(&local)
        .ok()?
        .into_iter()
        .rev()
        .find(|e| e.kind == EventKind::StreamStarted)
        .map(|e| e.stream)
        .filter(|name| !name.is_empty())
}

/// The checkpoints under a table's default places.
fn table_streams(
    table: &Location,
    state: &StorageSettings,
) -> Result<Vec<StreamCheckpoint>, ReportError> {
    let root = crate::checkpoint::default_location(table, None);
    let mut out = Vec::new();
    if is_checkpoint(&root, state)? {
        out.push(StreamCheckpoint {
            name: Some(
                started_as(&root, state)
                    .unwrap_or_else(|| crate::checkpoint::default_stream_name(table)),
            ),
            location: root.clone(),
        });
    }
    let mut children: Vec<String> = match &root {
        Location::Local(dir) => match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => {
                return Err(ReportError::Io {
                    path: dir.display().to_string(),
                    source,
                });
            }
        },
        Location::S3(url) => RemoteDir::open(url, state)
            .and_then(|d| d.subdirs())
            .map_err(crate::checkpoint::CheckpointError::from)?,
    };
    children.sort();
    for name in children.into_iter().filter(|n| n != SCHEMAS_DIR) {
        let location = root.join(&name);
        if is_checkpoint(&location, state)? {
            out.push(StreamCheckpoint {
                name: Some(name),
                location,
            });
        }
    }
    Ok(out)
}

/// The schema location a `schema` report reads: `location` itself when it holds schema
/// versions; else the checkpoint (the default schema location) of the one stream of the
/// table or checkpoint `location`, or of the stream `stream`.
pub fn schema_location(
    location: &Location,
    stream: Option<&str>,
    state: &StorageSettings,
) -> Result<Location, ReportError> {
    // The `_schemas` folder itself names its schema location.
    if location.file_name().as_deref() == Some(SCHEMAS_DIR)
        && let Some(parent) = location.parent()
        && !SchemaStore::open(&parent, state)?.versions()?.is_empty()
    {
        return Ok(parent);
    }
    let here = SchemaStore::open(location, state)?;
    if !here.versions()?.is_empty() {
        return Ok(location.clone());
    }
    match checkpoints(Some(location), None, stream, state) {
        Ok(found) => Ok(only_one(location, found)?.location),
        Err(ReportError::NoCheckpoint { .. }) => Err(ReportError::NoSchemas(here.describe())),
        Err(e) => Err(e),
    }
}

/// A stream's checkpoint is at `location`: its own, or (competing workers) its slots'.
pub(super) fn is_checkpoint(
    location: &Location,
    state: &StorageSettings,
) -> Result<bool, ReportError> {
    Ok(Checkpoint::exists(location, state)?
        || !crate::checkpoint::claims::slots(location, state)?.is_empty())
}
