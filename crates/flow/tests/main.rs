//! weir-flow's integration tests, one binary.
mod diff;
mod gen;
mod kernel;
mod rules;
