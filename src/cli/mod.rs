//! The binary's command line: arguments (`args`), what each command does (`commands`)
//! and how results are shown (`render`). The library does the work.

pub(crate) mod args;
pub(crate) mod commands;
pub(crate) mod render;
