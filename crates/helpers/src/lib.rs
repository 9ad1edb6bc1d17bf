//! Kernel BPF helpers for weir's engines, by the kernel's numbers and prototypes, and the
//! run environment they work in ([`Env`]: the object's live maps, the map values window of
//! guest memory, the worker index, the random state, and what a run asks of its runner: a
//! tail call, a redirect).
//!
//! Engines see none of this crate: [`bindings`] is plain data (a `Bindings` with the
//! helper table), and an [`Env`] reaches a run as a `&mut dyn RunEnv` in its `Input`. A
//! helper gets the environment back through `HelperCtx::env` and downcasts it.
//!
//! Map values live in the maps (atomic words, in place); a program reaches one at a guest
//! address in the map values window ([`weir_program::exec::guest::MAPS_BASE`]) that the
//! environment hands out: global data (`.data`, `.bss`, `.rodata`) at fixed addresses for
//! the environment's life, lookup results at addresses given for the current run (the same
//! value twice in a run gets the same address). Every access is checked against the one
//! value it falls in.

mod csum;
mod env;
mod flow;
mod funcs;

pub use env::{Env, PacketBounds, Redirect};
pub use flow::flow_hash;
pub use funcs::{bindings, helper_name, unsupported_helpers, SUPPORTED};

/// `MAX_TAIL_CALL_CNT`: tail calls one packet may chain (the kernel's 33).
pub const MAX_TAIL_CALLS: u32 = 33;
