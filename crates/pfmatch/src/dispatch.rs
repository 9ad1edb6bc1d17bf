//! The compiled dispatch: per clause one optimized predicate (the test and the protocol
//! checks of the handler's arguments together, so the optimizer decides a shared header
//! test once), tried in order, each on its own evaluator so that an abort fails that clause
//! only.
//!
//! Why not yet one predicate for the whole match: the filter IR has no construct that
//! confines an abort to a part of a filter, and the optimizer's guard hoisting
//! (`opt::insert_guards`) would lift a length check out of one clause into a place where
//! its failure rejects the packets another clause accepts. That construct (a `Try` that
//! turns an abort inside it into false, a boundary no guard crosses) is the next step.

use std::fmt;

use weir_filter::{opt, Evaluator, Expr, Filter, Pred};

use crate::{Body, Clause, Program, Test};

/// What dispatch chose for one packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Index into [`Program::handlers`]; `None`: no clause matched.
    pub handler: Option<usize>,
    /// The handler's argument values (empty when no clause matched).
    pub args: Vec<u32>,
}

/// A compiled match program.
#[derive(Debug, Clone)]
pub struct Dispatch {
    nodes: Vec<Node>,
    handlers: Vec<String>,
}

#[derive(Debug, Clone)]
struct Node {
    /// 1-based source line of the clause.
    line: usize,
    pred: Pred,
    action: Action,
}

#[derive(Debug, Clone)]
enum Action {
    Handler { handler: usize, args: Vec<ArgCode> },
    Nested(Vec<Node>),
}

#[derive(Debug, Clone)]
struct ArgCode {
    /// Checks kept apart from the clause's predicate: those that use scratch slots, which
    /// the test's own stores must not meet.
    own_checks: Option<Pred>,
    value: Expr,
}

impl Dispatch {
    pub fn compile(program: &Program) -> Dispatch {
        Dispatch { nodes: compile_list(&program.clauses), handlers: program.handlers.clone() }
    }

    /// The handler and arguments for one packet; the same as [`Program::reference`].
    pub fn run(&self, packet: &[u8], wire_len: u32) -> Outcome {
        run_list(&self.nodes, packet, wire_len)
            .unwrap_or(Outcome { handler: None, args: Vec::new() })
    }

    /// The handler names, as in [`Program::handlers`].
    pub fn handlers(&self) -> &[String] {
        &self.handlers
    }
}

fn compile_list(clauses: &[Clause]) -> Vec<Node> {
    clauses.iter().map(compile_clause).collect()
}

fn compile_clause(clause: &Clause) -> Node {
    let test = match &clause.test {
        Test::Otherwise => Pred::Const(true),
        Test::Filter { filter, .. } => filter.pred.clone(),
    };
    match &clause.body {
        Body::Nested(inner) => Node {
            line: clause.line,
            pred: opt::optimize_owned(Filter::new(test)).pred,
            action: Action::Nested(compile_list(inner)),
        },
        Body::Handler { handler, args } => {
            let mut parts = vec![test];
            let mut codes = Vec::with_capacity(args.len());
            for arg in args {
                let private =
                    arg.checks.iter().any(pred_uses_scratch) || expr_uses_scratch(&arg.value);
                if private {
                    codes.push(ArgCode {
                        own_checks: Some(Pred::and(arg.checks.iter().cloned())),
                        value: arg.value.clone(),
                    });
                } else {
                    parts.extend(arg.checks.iter().cloned());
                    codes.push(ArgCode { own_checks: None, value: arg.value.clone() });
                }
            }
            Node {
                line: clause.line,
                pred: opt::optimize_owned(Filter::new(Pred::and(parts))).pred,
                action: Action::Handler { handler: *handler, args: codes },
            }
        }
    }
}

fn run_list(nodes: &[Node], packet: &[u8], wire_len: u32) -> Option<Outcome> {
    for node in nodes {
        // A fresh evaluator per clause: an abort here fails this clause only.
        if Evaluator::new(packet, wire_len).pred(&node.pred) != Ok(true) {
            continue;
        }
        match &node.action {
            Action::Nested(inner) => return run_list(inner, packet, wire_len),
            Action::Handler { handler, args } => {
                let values: Option<Vec<u32>> = args
                    .iter()
                    .map(|a| {
                        let mut e = Evaluator::new(packet, wire_len);
                        if let Some(checks) = &a.own_checks {
                            if e.pred(checks) != Ok(true) {
                                return None;
                            }
                        }
                        e.expr(&a.value).ok()
                    })
                    .collect();
                if let Some(args) = values {
                    return Some(Outcome { handler: Some(*handler), args });
                }
            }
        }
    }
    None
}

fn expr_uses_scratch(e: &Expr) -> bool {
    match e {
        Expr::Const(_) | Expr::WireLen => false,
        Expr::Scratch(_) => true,
        Expr::Load { offset, .. } => expr_uses_scratch(offset),
        Expr::Binary { lhs, rhs, .. } => expr_uses_scratch(lhs) || expr_uses_scratch(rhs),
        Expr::Neg(a) => expr_uses_scratch(a),
    }
}

fn pred_uses_scratch(p: &Pred) -> bool {
    match p {
        Pred::Const(_) | Pred::Guard(_) => false,
        Pred::Store { .. } => true,
        Pred::Cmp { lhs, rhs, .. } => expr_uses_scratch(lhs) || expr_uses_scratch(rhs),
        Pred::In { value, .. } => expr_uses_scratch(value),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().any(pred_uses_scratch),
        Pred::Not(p) => pred_uses_scratch(p),
        Pred::Chain(c) => expr_uses_scratch(&c.next) || expr_uses_scratch(&c.offset),
    }
}

impl fmt::Display for Dispatch {
    /// The decision structure (`weir match --explain`): per clause its optimized
    /// predicate and what follows when it holds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_nodes(f, &self.nodes, &self.handlers, 0)
    }
}

fn write_nodes(
    f: &mut fmt::Formatter<'_>,
    nodes: &[Node],
    names: &[String],
    depth: usize,
) -> fmt::Result {
    let pad = "  ".repeat(depth);
    for node in nodes {
        writeln!(f, "{pad}line {}: if {}", node.line, node.pred)?;
        match &node.action {
            Action::Nested(inner) => {
                writeln!(f, "{pad}  then match (no fall-through):")?;
                write_nodes(f, inner, names, depth + 2)?;
            }
            Action::Handler { handler, args } => {
                let name = names.get(*handler).map_or("?", String::as_str);
                let shown: Vec<String> = args
                    .iter()
                    .map(|a| match &a.own_checks {
                        Some(c) => format!("{} [if {c}]", a.value),
                        None => a.value.to_string(),
                    })
                    .collect();
                writeln!(f, "{pad}  then {name}({})", shown.join(", "))?;
            }
        }
    }
    writeln!(f, "{pad}else no handler")
}
