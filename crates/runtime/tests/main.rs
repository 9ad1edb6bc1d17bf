//! weir-runtime's integration tests, one binary.

mod live;
