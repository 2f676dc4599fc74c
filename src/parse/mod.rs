//! Parsers at the bottom of the tree, with no dependency on the rest: our JSON parser (a
//! value that borrows from the line) and text to typed scalars (numbers, dates,
//! timestamps, booleans as Spark reads them). Formats, inference and the row builders all
//! use them.

pub mod json;
pub mod scalars;
pub mod temporal;
