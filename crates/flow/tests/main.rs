//! weir-flow's integration tests, one binary.
mod actions;
mod control;
mod counters;
mod diff;
mod gen;
mod kernel;
mod rules;
