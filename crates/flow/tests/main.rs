//! weir-flow's integration tests, one binary.
mod actions;
mod control;
mod diff;
mod gen;
mod kernel;
mod rules;
