//! weir-pflang: the tcpdump filter language ("pflang") front end.
//!
//! `parse` turns an expression into an [`ast::Expr`] with byte spans, following the grammar,
//! precedence and qualifier-inheritance rules of libpcap (the semantics of record, see
//! DESIGN.md). [`names`] resolves the names the tree keeps (hosts, services, protocols,
//! Ethernet names) from built-in tables and the system's files, never DNS. Lowering to the
//! filter IR builds on this tree.

pub mod ast;
mod depth;
mod display;
pub mod error;
pub mod lexer;
pub mod lower;
pub mod names;
pub mod parser;
mod rejects_all;

pub use ast::{Expr, ExprKind, Span};
pub use error::ParseError;
pub use lower::{
    compile, compiles_for, lower, lower_with_facts, protocol_tests_refused, CompileError, LinkType,
    Lowered, Options, LINK_TYPES,
};
pub use parser::{parse, MAX_DEPTH};
pub use rejects_all::{libpcap_rejects_all, rejects_all};

#[cfg(test)]
mod deep_tests;
