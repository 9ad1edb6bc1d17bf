//! Inputs that are long or deep, through every stage (parse, lower, optimize or not, classic
//! BPF, eBPF, native code), on a 2 MiB thread stack (a spawned thread's default; the main
//! thread has 8 MiB): flat chains of any length cost no stack, and nesting is refused past
//! [`MAX_DEPTH`] with a caret, every stage handling that limit.
//!
//! `cargo test --release -p weir-pflang --lib deep_tests -- --nocapture` prints each stage's
//! time.

use std::time::{Duration, Instant};

use weir_filter::emit::{cbpf, ebpf, EmitError};
use weir_filter::{Filter, Pred};
use weir_program::ProgType;

use crate::depth::{LINEAR_LEVELS, LINEAR_RUNS, LOAD, PRIMITIVE};

/// Levels the optimizer may add over the bound (a length guard in front of a junction, say);
/// the native compiler's limit (1,100) leaves room for them. Over the corpus it adds none.
const OPTIMIZER_SLACK: usize = 4;
use crate::names::NameDb;
use crate::{parse, LinkType, Options, MAX_DEPTH};

const STACK: usize = 2 << 20;

/// Cranelift's compile time grows faster than linearly with the size of one function:
/// native code is compiled for filters up to this many IR nodes (an unoptimized 100,000-term
/// `or` of loads, 400,000 nodes, takes about a minute; 25,000 terms about 6 s).
const NATIVE_MAX_NODES: usize = 120_000;

/// What each stage did with one expression.
#[derive(Debug)]
struct Report {
    times: Vec<(&'static str, Duration)>,
    nodes: usize,
    cbpf: Result<usize, EmitError>,
    ebpf: Result<usize, EmitError>,
}

fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let handle = std::thread::Builder::new().stack_size(STACK).spawn(f).expect("spawn");
    handle.join().expect("the stage panicked")
}

/// Every stage on `expr`, on a 2 MiB stack; `Err` is the parse or lowering error.
fn all_stages(expr: String, optimize: bool) -> Result<Report, String> {
    on_small_stack(move || {
        let mut times = Vec::new();
        let mut t = Instant::now();
        let mut lap = |name, times: &mut Vec<_>| {
            times.push((name, t.elapsed()));
            t = Instant::now();
        };
        let ast = parse(&expr).map_err(|e| e.render(&expr))?;
        lap("parse", &mut times);
        let options = Options::new(LinkType::Ethernet);
        let names = NameDb::builtin();
        let filter = crate::lower(ast.as_ref(), &options, &names).map_err(|e| e.to_string())?;
        lap("lower", &mut times);
        drop(ast);
        lap("drop ast", &mut times);
        let filter = if optimize { weir_filter::opt::optimize_owned(filter) } else { filter };
        if optimize {
            lap("optimize", &mut times);
        }
        let nodes = weir_filter::opt::node_count(&filter.pred);
        let c = cbpf::emit(&filter).map(|p| p.len());
        lap("emit cbpf", &mut times);
        let e = ebpf::emit(&filter, ProgType::SocketFilter).map(|p| p.insns().len());
        lap("emit ebpf", &mut times);
        if nodes <= NATIVE_MAX_NODES {
            let native = weir_jit::filter::compile(&filter).map_err(|e| e.to_string())?;
            lap("native", &mut times);
            // The two agree on a few packets.
            for len in [0usize, 14, 34, 54, 60] {
                let mut packet = vec![0u8; len];
                if len >= 14 {
                    packet[12] = 0x08;
                }
                assert_eq!(native.run(&packet, len as u32), filter.run(&packet, len as u32));
            }
            drop(native);
        }
        drop(filter);
        lap("drop", &mut times);
        Ok(Report { times, nodes, cbpf: c, ebpf: e })
    })
}

fn show(what: &str, r: &Report) {
    let times: Vec<String> =
        r.times.iter().map(|(n, d)| format!("{n} {:.1} ms", d.as_secs_f64() * 1e3)).collect();
    let cbpf = r.cbpf.as_ref().map_or_else(|e| format!("{e}"), |n| format!("{n} insns"));
    let ebpf = r.ebpf.as_ref().map_or_else(|e| format!("{e}"), |n| format!("{n} insns"));
    println!("{what}: {} | {} IR nodes | cbpf {cbpf} | ebpf {ebpf}", times.join(", "), r.nodes);
}

/// Both optimizer settings; every stage must succeed, classic BPF may be too long.
fn accepted(what: &str, expr: String) {
    for optimize in [false, true] {
        let r = all_stages(expr.clone(), optimize)
            .unwrap_or_else(|e| panic!("{what} (optimize {optimize}): {e}"));
        show(&format!("{what} (optimize {optimize})"), &r);
        if let Err(e) = &r.cbpf {
            assert!(matches!(e, EmitError::TooLong { .. }), "{what}: {e}");
        }
        if let Err(e) = &r.ebpf {
            assert!(matches!(e, EmitError::Link(_)), "{what}: {e}");
        }
    }
}

fn refused_as_too_deep(expr: String) {
    let short: String = expr.chars().take(40).collect();
    let err = on_small_stack(move || parse(&expr).map(|_| ()).unwrap_err());
    assert!(
        err.message.contains(&format!("nested too deeply (more than {MAX_DEPTH} levels)")),
        "{short}...: {}",
        err.message
    );
}

const N: usize = 100_000;

#[test]
fn flat_or_and_chains_of_100000_terms() {
    let terms = |i: usize| format!("ether[{}] = {}", i % 64, i % 251);
    accepted("or chain", (0..N).map(terms).collect::<Vec<_>>().join(" or "));
    accepted("and chain", (0..N).map(|i| format!("len != {i}")).collect::<Vec<_>>().join(" and "));
    // Mixed, without parentheses: one run per term.
    let mixed: Vec<String> = (0..N)
        .map(|i| {
            format!(
                "{}ether[{}] = {}",
                ["", "and ", "or "][(i > 0) as usize * (1 + i % 2)],
                i % 64,
                i % 7
            )
        })
        .collect();
    accepted("and/or alternating", mixed.join(" "));
    // Native code for the unoptimized chains, at the largest size that compiles in seconds.
    let n = 15_000;
    accepted("or chain, 15,000", (0..n).map(terms).collect::<Vec<_>>().join(" or "));
    accepted("and/or alternating, 10,000", mixed[..10_000].join(" "));
}

#[test]
fn flat_arithmetic_and_not_chains_of_100000_terms() {
    accepted("+ chain of 1", format!("len = {}", vec!["1"; N].join(" + ")));
    let loads: Vec<String> = (0..N).map(|i| format!("ether[{}]", i % 64)).collect();
    accepted("+ chain of loads", format!("len != {}", loads.join(" + ")));
    accepted("- chain", format!("len != {}", loads.join(" - ")));
    accepted("& chain", format!("0 = {}", loads.join(" & ")));
    accepted("not chain", format!("{}tcp", "not ".repeat(N)));
    accepted("! chain", format!("{}udp", "!".repeat(N - 1)));
    accepted("unary minus chain", format!("len = {}1", "-".repeat(N)));
}

#[test]
fn redundant_parentheses_cost_no_depth() {
    for n in [10_000, N] {
        accepted(
            &format!("{n} parentheses around tcp"),
            format!("{}tcp{}", "(".repeat(n), ")".repeat(n)),
        );
        accepted(
            &format!("{n} parentheses in arithmetic"),
            format!("len = {}1{}", "(".repeat(n), ")".repeat(n)),
        );
        accepted(
            &format!("{n} parentheses around a relation"),
            format!("{}len = 1{}", "(".repeat(n), ")".repeat(n)),
        );
    }
    // The misreport of 100-199 levels ("expected a number ... found `tcp`") is gone.
    for n in [99, 100, 150, 199, 200, 201, 5_000] {
        let e = format!("{}tcp{}", "(".repeat(n), ")".repeat(n));
        assert!(parse(&e).is_ok(), "{n}");
    }
}

/// The deepest nesting accepted, then one more level, for each way of nesting.
#[test]
fn nesting_at_and_beyond_the_limit() {
    // `not (not (... tcp))`: one level per `not (`.
    let k = MAX_DEPTH - PRIMITIVE;
    let not_paren = |k: usize| format!("{}tcp{}", "not (".repeat(k), ")".repeat(k));
    accepted("not ( at the limit", not_paren(k));
    refused_as_too_deep(not_paren(k + 1));

    // `(tcp and (udp or (...)))`: one chain of one run per level.
    let alternating = |k: usize| {
        let open: String =
            (0..k).map(|i| format!("(ether[{}] = 1 {} ", i % 50, ["and", "or"][i % 2])).collect();
        format!("{open}tcp{}", ")".repeat(k))
    };
    accepted("and/or nesting at the limit", alternating(k));
    refused_as_too_deep(alternating(k + 1));

    // Each level a chain of LINEAR_RUNS runs (the deepest a chain lowers as a tree).
    let runs = |k: usize| {
        let level: String =
            (0..LINEAR_RUNS).map(|i| format!("ip {} ", ["and", "or"][i % 2])).collect();
        format!("{}tcp{}", format!("({level}").repeat(k), ")".repeat(k))
    };
    let k_runs = (MAX_DEPTH - PRIMITIVE) / LINEAR_RUNS;
    accepted("chains of 8 runs nested at the limit", runs(k_runs));
    refused_as_too_deep(runs(k_runs + 1));
    // A chain of more runs is a list of LINEAR_LEVELS levels.
    let linear = |k: usize| {
        let level: String =
            (0..LINEAR_RUNS + 1).map(|i| format!("ip {} ", ["and", "or"][i % 2])).collect();
        format!("{}tcp{}", format!("({level}").repeat(k), ")".repeat(k))
    };
    let k_lin = (MAX_DEPTH - PRIMITIVE) / LINEAR_LEVELS;
    accepted("linear chains nested at the limit", linear(k_lin));
    refused_as_too_deep(linear(k_lin + 1));

    // Arithmetic: `len - (len - (...))`, one level each, 2 for the relation.
    let arith = |k: usize| format!("len != {}1{}", "(len - ".repeat(k), ")".repeat(k));
    let k_arith = MAX_DEPTH - 3;
    accepted("arithmetic nesting at the limit", arith(k_arith));
    refused_as_too_deep(arith(k_arith + 1));
    // `%` takes the rest of the expression: a chain of them nests, one level each over the
    // last packet access.
    let modulo = |k: usize| format!("len != ether[0]{}", " % ether[1]".repeat(k));
    let k_mod = MAX_DEPTH - 3 - LOAD;
    accepted("% chain at the limit", modulo(k_mod));
    refused_as_too_deep(modulo(k_mod + 1));

    // Packet accesses inside packet accesses: LOAD levels each.
    let loads = |k: usize| format!("{}0{} = 1", "ether[".repeat(k), "]".repeat(k));
    let k_loads = (MAX_DEPTH - 3) / LOAD;
    accepted("nested packet accesses at the limit", loads(k_loads));
    refused_as_too_deep(loads(k_loads + 1));

    // Boolean and arithmetic nesting add up.
    let both =
        |k: usize| format!("{}{}{}", "not (".repeat(k), arith(MAX_DEPTH - 3 - k), ")".repeat(k));
    accepted("not ( around deep arithmetic at the limit", both(500));
    refused_as_too_deep(format!("not ({})", both(500)));
}

#[test]
fn issue_18_three_thousand_pairs() {
    let expr: Vec<String> =
        (0..3000).map(|i| format!("tcp port {i} and host 10.0.0.{}", i % 256)).collect();
    accepted("3,000 pairs", expr.join(" or "));
}

/// The list a long mixed chain lowers to means what the left-leaning tree means: verdicts
/// and aborts (a load past the packet rejects it, even under `not`).
#[test]
fn linear_chains_mean_the_tree() {
    let mut rng = weir_testkit::SplitMix64::new(0x9e37_79b9_7f4a_7c15);
    let mut next = move |n: u64| rng.below(n);
    let names = NameDb::builtin();
    let options = Options::new(LinkType::Ethernet);
    for _ in 0..200 {
        let n = 9 + next(30) as usize;
        let terms: Vec<String> = (0..n)
            .map(|_| match next(4) {
                0 => format!("ether[{}] = {}", next(24), next(3)),
                1 => format!("len > {}", next(30)),
                2 => format!("ether[{}] != 0", next(24)),
                _ => format!("not ether[{}] = 1", next(24)),
            })
            .collect();
        let ops: Vec<bool> = (1..n).map(|_| next(3) != 0).collect(); // mostly switching
        let mut text = terms[0].clone();
        let mut conj = false;
        for (i, t) in terms.iter().enumerate().skip(1) {
            conj = if ops[i - 1] { !conj } else { conj };
            text.push_str(if conj { " and " } else { " or " });
            text.push_str(t);
        }
        let one = |t: &str| crate::compile(t, &options, &names).expect(t).pred;
        let parts: Vec<Pred> = terms.iter().map(|t| one(t)).collect();
        for negate in [false, true] {
            let expr = if negate { format!("not ({text})") } else { text.clone() };
            let filter = crate::compile(&expr, &options, &names).expect(&expr);
            let optimized = weir_filter::opt::optimize(&filter);
            for len in 0..26usize {
                let packet: Vec<u8> = (0..len).map(|_| next(3) as u8).collect();
                // The tree, evaluated by hand: left to right, short-circuit, abort rejects.
                let mut conj = false;
                let mut want = weir_filter::Evaluator::new(&packet, len as u32).pred(&parts[0]);
                for (i, p) in parts.iter().enumerate().skip(1) {
                    conj = if ops[i - 1] { !conj } else { conj };
                    want = match want {
                        Ok(v) if v == conj => {
                            weir_filter::Evaluator::new(&packet, len as u32).pred(p)
                        }
                        other => other,
                    };
                }
                let want = match want {
                    Ok(v) => v != negate,
                    Err(_) => false,
                };
                let got = filter.matches(&packet, len as u32);
                assert_eq!(got, want, "{expr} on {packet:?}");
                assert_eq!(optimized.matches(&packet, len as u32), want, "{expr} optimized");
            }
        }
    }
}

/// The bound the parser checks is a bound: over the valid corpus, no lowered filter
/// (optimized or not) is deeper.
#[test]
fn the_depth_bound_bounds_the_corpus() {
    fn pred_depth(p: &Pred) -> usize {
        1 + match p {
            Pred::Const(_) | Pred::Guard(_) => 0,
            Pred::Cmp { lhs, rhs, .. } => expr_depth(lhs).max(expr_depth(rhs)),
            Pred::In { value, .. } | Pred::Store { value, .. } => expr_depth(value),
            Pred::And(ps) | Pred::Or(ps) => ps.iter().map(pred_depth).max().unwrap_or(0),
            Pred::Not(q) | Pred::Try(q) => pred_depth(q),
            Pred::Chain(c) => expr_depth(&c.next).max(expr_depth(&c.offset)),
            Pred::Pairs(p) => p
                .parts()
                .map(|(guards, fields)| {
                    let g = guards.iter().map(pred_depth).max().unwrap_or(0);
                    g.max(fields.iter().map(expr_depth).max().unwrap_or(0)) + 2
                })
                .max()
                .unwrap_or(0),
        }
    }
    fn expr_depth(e: &weir_filter::Expr) -> usize {
        use weir_filter::Expr;
        1 + match e {
            Expr::Const(_) | Expr::WireLen | Expr::Scratch(_) => 0,
            Expr::Load { offset, .. } => expr_depth(offset),
            Expr::Binary { lhs, rhs, .. } => expr_depth(lhs).max(expr_depth(rhs)),
            Expr::Neg(x) => expr_depth(x),
        }
    }
    let path = format!("{}/../../testdata/pflang/valid.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let names = NameDb::builtin();
    let mut checked = 0;
    let mut deepest = 0;
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let Ok(Some(ast)) = parse(line) else { continue };
        let bound = crate::depth::bound(&ast).unwrap();
        for link in [LinkType::Ethernet, LinkType::Raw, LinkType::LinuxSll] {
            for optimize in [false, true] {
                let options = Options::new(link);
                let Ok(f): Result<Filter, _> = crate::lower(Some(&ast), &options, &names) else {
                    continue;
                };
                let f = if optimize { weir_filter::opt::optimize_owned(f) } else { f };
                let d = pred_depth(&f.pred);
                deepest = deepest.max(d);
                let slack = if optimize { OPTIMIZER_SLACK } else { 0 };
                assert!(d <= bound + slack, "{line} (optimize {optimize}): depth {d} > {bound}");
                checked += 1;
            }
        }
    }
    println!("{checked} filters, deepest {deepest}");
    assert!(checked > 1000);
}
