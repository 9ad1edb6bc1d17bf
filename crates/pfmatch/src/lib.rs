//! weir-pfmatch: multi-way packet dispatch (pfmatch) whose clauses mean what pflang means.
//!
//! Place in the pipeline: beside weir-pflang. A match program is parsed here ([`parse`]);
//! each clause's test is compiled by the existing pflang compiler, unchanged, and each
//! handler argument by the same compiler (as the left side of a relation), so the
//! dispatch's meaning is pflang's, clause by clause ([`Program::reference`]). [`Dispatch`]
//! is the compiled form: the whole match as one filter IR predicate, each clause inside a
//! `Pred::Try` (its abort is its false), header tests shared across clauses, the handler
//! and arguments stored to scratch slots, run by the IR's evaluator ([`Dispatch::run`]) or
//! by any engine that reports [`Dispatch::result_slots`] ([`Dispatch::outcome`]; the
//! facade's `weir::Dispatch` runs it as native code), or as an XDP program for the kernel
//! ([`Dispatch::xdp`], module [`xdp`]: handler names that are XDP actions act, every
//! handler is counted in a map).
//!
//! ```
//! use weir_pfmatch::{parse, Dispatch};
//! use weir_pflang::{names::NameDb, LinkType};
//! let src = "match {\n  tcp => web(&tcp[0]) # a comment\n  otherwise => rest\n}\n";
//! let program = parse(src, LinkType::Ethernet, &NameDb::builtin()).unwrap();
//! let dispatch = Dispatch::compile(&program).unwrap();
//! let short = [0u8; 10]; // too short for any header: only `otherwise` matches
//! let out = dispatch.run(&short, 10);
//! assert_eq!(out.handler.map(|h| program.handlers[h].as_str()), Some("rest"));
//! ```
//!
//! Semantics (the reference, [`Program::reference`]):
//! - clauses are tried in order; a clause's test matches exactly when the same text as a
//!   tcpdump filter accepts the packet: an out-of-bounds load or a division by zero fails
//!   that clause's test as a whole (never the whole dispatch) and the next clause is tried;
//! - the first matching clause wins. If its body is a nested match, the result is the
//!   nested match's, and a packet that matches no nested clause goes to no handler (it does
//!   not fall through to the outer clauses after it);
//! - a handler's arguments are evaluated only for the chosen clause, each as the filter IR
//!   evaluates the left side of `ARG = 0` compiled by pflang: its protocol checks must hold
//!   (`tcp[0]` on a UDP packet) and its loads must be in bounds, else the clause fails and
//!   dispatch moves on to the next clause (the choice: a handler is never called with a
//!   value pflang would not have computed);
//! - `&proto[off]` is the packet offset of that byte: the protocol checks of `proto[off]`
//!   must hold, but the byte itself need not have been captured (nothing is read);
//! - no clause matching is a result too: `handler` is `None`.
//!
//! Comments run from `#` to the end of the line (as in tcpdump's `-F` files); pflang has no
//! `#`, so a comment can never cut a test short.

mod dispatch;
mod syntax;
pub mod xdp;

pub use dispatch::{Dispatch, Outcome};
pub use syntax::{parse, parse_with, MatchError, Warning};

use weir_filter::{Expr, Filter, Pred};

/// A parsed and compiled match program.
#[derive(Debug, Clone)]
pub struct Program {
    pub clauses: Vec<Clause>,
    /// Handler names, in order of first appearance; [`Outcome::handler`] indexes this.
    pub handlers: Vec<String>,
    /// Unreachable clauses and similar, each with the position it concerns.
    pub warnings: Vec<Warning>,
}

/// One `test => body` line.
#[derive(Debug, Clone)]
pub struct Clause {
    pub test: Test,
    pub body: Body,
    /// 1-based source line of the clause.
    pub line: usize,
}

#[derive(Debug, Clone)]
pub enum Test {
    /// `otherwise`: always matches.
    Otherwise,
    /// A pflang expression and its filter as the pflang compiler makes it (unoptimized).
    Filter { text: String, filter: Filter },
}

#[derive(Debug, Clone)]
pub enum Body {
    Handler { handler: usize, args: Vec<Arg> },
    Nested(Vec<Clause>),
}

/// A handler argument: `checks` must all hold, then `value` is the argument.
#[derive(Debug, Clone)]
pub struct Arg {
    pub text: String,
    pub checks: Vec<Pred>,
    pub value: Expr,
}

impl Program {
    /// The reference semantics (see the crate documentation): each clause's own pflang
    /// filter, run alone on the packet, in order.
    pub fn reference(&self, packet: &[u8], wire_len: u32) -> Outcome {
        reference_list(&self.clauses, packet, wire_len)
            .unwrap_or(Outcome { handler: None, args: Vec::new() })
    }
}

fn reference_list(clauses: &[Clause], packet: &[u8], wire_len: u32) -> Option<Outcome> {
    for clause in clauses {
        let matched = match &clause.test {
            Test::Otherwise => true,
            Test::Filter { filter, .. } => filter.matches(packet, wire_len),
        };
        if !matched {
            continue;
        }
        match &clause.body {
            Body::Nested(inner) => return reference_list(inner, packet, wire_len),
            Body::Handler { handler, args } => {
                if let Some(values) = eval_args(args, packet, wire_len) {
                    return Some(Outcome { handler: Some(*handler), args: values });
                }
            }
        }
    }
    None
}

/// Each argument on its own evaluator: checks, then the value; `None` when a check fails
/// or anything aborts.
fn eval_args(args: &[Arg], packet: &[u8], wire_len: u32) -> Option<Vec<u32>> {
    args.iter()
        .map(|a| {
            let mut e = weir_filter::Evaluator::new(packet, wire_len);
            for c in &a.checks {
                if e.pred(c) != Ok(true) {
                    return None;
                }
            }
            e.expr(&a.value).ok()
        })
        .collect()
}
