//! The stream's schema steps: the first version (`first_version`), inference on every
//! core (`infer`), one-pass inference for a large first run (`one_pass`), and the version
//! batches are read with (`active`).

mod active;
pub(super) mod first_version;
pub(super) mod infer;
pub(super) mod one_pass;

pub(crate) use active::{ActiveSchema, OnePassInference, layout_for, trailing_columns};
