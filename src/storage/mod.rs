//! Durable writes of small state files: create-only local writes, and a folder of objects
//! on S3 with create-only puts.

pub mod atomic;
pub mod object_dir;
