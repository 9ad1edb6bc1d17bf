//! One test binary: the model tests, the kernel differential tests, the unit behaviours.
mod common;
mod kernel;
mod model;
mod units;
