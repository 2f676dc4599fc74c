//! The one integration-test binary (each test binary links deltalake, so there is one).
//! Tests run the real `autoloader` binary on real files and read the Delta table back with
//! delta-rs and, where noted, with Python `deltalake` as an outside reader.

mod alerts;
mod avro;
mod bad_inputs;
mod cdc;
mod clean_source;
mod cli;
mod common;
mod config;
mod crash;
mod definition;
mod delta_source;
mod deploy;
mod docs;
mod evolution;
mod expectations;
mod faults;
mod flows;
mod formats;
mod fuzz_smoke;
mod ingest_once;
mod layout;
mod lifecycle;
mod locations;
mod once;
mod optimize;
mod orc;
mod read_ahead;
mod reader;
mod reports;
mod reset;
mod s3;
mod scd2;
mod schemas;
mod snapshot_cdc;
mod snapshots;
mod sqs;
mod tables;
mod watch;
mod xml;
