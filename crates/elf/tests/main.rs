//! The crate's integration tests as one binary, linked once. Each module is one test file;
//! run one with `cargo test --release -p weir-elf --test integration MODULE::`.

mod hostile;
mod kernel;
mod objects;
mod write;
