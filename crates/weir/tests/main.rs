//! The crate's integration tests as one binary; run one with
//! `cargo test --release -p weir --test integration MODULE::`.

mod batch;
mod bpf_loop_kernel;
mod bpf_loop_object;
mod firewall;
mod flow_xdp;
mod hash_recalc;
mod jit_facts;
mod kernel;
mod lookup_direct;
mod lookup_known;
mod pfmatch_xdp;
mod verifier_corpus;
mod verify;
mod verify_kernel;
mod verify_soundness;
