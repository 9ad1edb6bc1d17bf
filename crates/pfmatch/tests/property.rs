//! The consistency property: random match programs (clause tests from the pflang
//! generator, nested matches, `otherwise`, arguments) over the testkit corpus. The compiled
//! dispatch, on the IR evaluator, as native code (weir-jit's filter compiler) and as eBPF
//! for XDP on weir's interpreter (the emitter's head of [`Dispatch::xdp`], whose Trys
//! confine aborts; whole frames only, as XDP sees them), must choose the handler and
//! arguments the reference does, and both must agree
//! with an oracle built here from nothing but the pflang compiler run on texts:
//! a clause matches when `TEST` accepts the packet and each argument `A` is computable
//! (`A = 0 or A != 0` accepts), and the value `v` reported for `A` is one `A = v` accepts.

use std::time::{Duration, Instant};

use weir_interp::{Config, Interpreter};
use weir_isa::ebpf::{Insn, Op};
use weir_pflang::names::NameDb;
use weir_pflang::{LinkType, Options};
use weir_pfmatch::{parse, Dispatch, Outcome};
use weir_program::abi::Bindings;
use weir_program::exec::Input;
use weir_program::{ProgType, Program};
use weir_testkit::pflang_gen::Generator;
use weir_testkit::{corpus, SplitMix64};

/// Argument texts: header fields, arithmetic that can divide by zero or read far out of
/// bounds, and the IP payload length.
const ARGS: &[&str] = &[
    "ip[0] & 0xf",
    "tcp[13]",
    "udp[2:2]",
    "len - 14",
    "ip[2:2] - ((ip[0] & 0xf) << 2)",
    "ip[100000]",
    "len / ip[1]",
    "ether[12:2]",
    "ip6[6]",
    "tcp[tcpflags] & tcp-syn",
    "icmp[0]",
    "42",
];

/// The generator's model of a clause list, for the oracle.
enum Body {
    Handler { name: String, args: Vec<&'static str> },
    Nested(Vec<Clause>),
}

struct Clause {
    test: Option<String>,
    body: Body,
}

struct Gen {
    exprs: Generator,
    rng: SplitMix64,
    options: Options,
    names: NameDb,
}

impl Gen {
    /// A test text the pflang compiler accepts for Ethernet.
    fn test(&mut self) -> String {
        loop {
            let text = self.exprs.expr().render();
            if text.contains('#') || text.len() > 400 {
                continue;
            }
            if weir_pflang::compile(&text, &self.options, &self.names).is_ok() {
                return text;
            }
        }
    }

    fn clauses(&mut self, depth: u32) -> Vec<Clause> {
        let n = 1 + self.rng.below_usize(5);
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let last = i + 1 == n;
            let test = if last && self.rng.chance(30) { None } else { Some(self.test()) };
            let body = if depth < 2 && self.rng.chance(15) {
                Body::Nested(self.clauses(depth + 1))
            } else {
                let name = format!("h{}", self.rng.below_usize(4));
                // A handler's arity is fixed by its name.
                let arity = name.as_bytes()[1] as usize - b'0' as usize;
                let args = (0..arity % 3).map(|_| ARGS[self.rng.below_usize(ARGS.len())]).collect();
                Body::Handler { name, args }
            };
            out.push(Clause { test, body });
        }
        out
    }
}

fn render(clauses: &[Clause], depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    for c in clauses {
        let test = c.test.as_deref().unwrap_or("otherwise");
        match &c.body {
            Body::Handler { name, args } => {
                if args.is_empty() {
                    out.push_str(&format!("{pad}{test} => {name} # a comment\n"));
                } else {
                    out.push_str(&format!("{pad}{test} => {name}({})\n", args.join(", ")));
                }
            }
            Body::Nested(inner) => {
                out.push_str(&format!("{pad}{test} => {{\n"));
                render(inner, depth + 1, out);
                out.push_str(&format!("{pad}}}\n"));
            }
        }
    }
}

/// Lines [`render`] writes for `clauses`.
fn lines(clauses: &[Clause]) -> usize {
    clauses
        .iter()
        .map(|c| match &c.body {
            Body::Nested(inner) => 2 + lines(inner),
            Body::Handler { .. } => 1,
        })
        .sum()
}

/// The dispatch's predicate as eBPF for XDP (the head [`Dispatch::xdp`] starts with), one
/// program per result slot: each returns that slot's value when the predicate held, else
/// 0; on weir's interpreter.
fn ebpf_results(dispatch: &Dispatch) -> Result<Vec<Interpreter>, String> {
    let head = weir_filter::emit::ebpf::emit_xdp_head(dispatch.filter())
        .map_err(|e| format!("eBPF emitter: {e}"))?;
    dispatch
        .result_slots()
        .into_iter()
        .map(|slot| {
            let mut insns = head.insns().to_vec();
            let off = weir_filter::emit::ebpf::scratch_offset(slot);
            insns.extend([
                Insn::new(Op::Mov64Reg, 1, 0, 0, 0),
                Insn::new(Op::Mov64Imm, 0, 0, 0, 0),
                Insn::new(Op::Jeq64Imm, 1, 0, 1, 0),
                Insn::new(Op::LdxW, 0, 10, off, 0),
                Insn::new(Op::Exit, 0, 0, 0, 0),
            ]);
            let program = Program::from_insns(insns).with_prog_type(ProgType::Xdp);
            weir_program::validate(&program).map_err(|e| format!("invalid eBPF: {e}"))?;
            let mut bindings = Bindings::new();
            bindings.context = Some(ProgType::Xdp.context_layout());
            let v = weir_program::Verified::structural(program).map_err(|e| e.to_string())?;
            Ok(Interpreter::new(&v, bindings, Config::default()))
        })
        .collect()
}

/// The outcome of the eBPF form on a whole frame.
fn ebpf_outcome(dispatch: &Dispatch, engines: &[Interpreter], frame: &[u8]) -> Outcome {
    let results: Vec<u32> = engines
        .iter()
        .map(|e| {
            let mut packet = frame.to_vec();
            let mut ctx = vec![0u8; ProgType::Xdp.context_layout().size as usize];
            let input = Input::new().ctx(&mut ctx).packet(&mut packet);
            match e.run(&mut e.cache(), input) {
                Ok(v) => v as u32,
                Err(t) => panic!("eBPF trap {t:?}"),
            }
        })
        .collect();
    dispatch.outcome(results.first().is_some_and(|&h| h != 0), &results)
}

struct Oracle<'a> {
    options: &'a Options,
    names: &'a NameDb,
}

impl Oracle<'_> {
    fn accepts(&self, text: &str, pkt: &[u8], wire: u32) -> bool {
        match weir_pflang::compile(text, self.options, self.names) {
            Ok(f) => f.matches(pkt, wire),
            Err(e) => panic!("oracle filter {text:?} does not compile: {e}"),
        }
    }

    /// The source lines (the program as [`render`] writes it, its clauses from `line`) of
    /// the clauses dispatch chooses on this packet: the nested ones it enters and the one
    /// whose handler it calls. None of them may be warned about.
    fn chosen_lines(
        &self,
        clauses: &[Clause],
        mut line: usize,
        pkt: &[u8],
        wire: u32,
        out: &mut Vec<usize>,
    ) {
        for c in clauses {
            let passes = c.test.as_ref().is_none_or(|t| self.accepts(t, pkt, wire));
            match &c.body {
                Body::Nested(inner) => {
                    if passes {
                        out.push(line);
                        return self.chosen_lines(inner, line + 1, pkt, wire, out);
                    }
                    line += 2 + lines(inner);
                }
                Body::Handler { args, .. } => {
                    if passes
                        && args
                            .iter()
                            .all(|a| self.accepts(&format!("{a} = 0 or {a} != 0"), pkt, wire))
                    {
                        out.push(line);
                        return;
                    }
                    line += 1;
                }
            }
        }
    }

    /// The first matching clause's handler name and argument texts.
    fn choose<'c>(
        &self,
        clauses: &'c [Clause],
        pkt: &[u8],
        wire: u32,
    ) -> Option<(&'c str, &'c [&'static str])> {
        for c in clauses {
            if let Some(t) = &c.test {
                if !self.accepts(t, pkt, wire) {
                    continue;
                }
            }
            match &c.body {
                Body::Nested(inner) => return self.choose(inner, pkt, wire),
                Body::Handler { name, args } => {
                    let computable = args
                        .iter()
                        .all(|a| self.accepts(&format!("{a} = 0 or {a} != 0"), pkt, wire));
                    if computable {
                        return Some((name, args));
                    }
                }
            }
        }
        None
    }
}

// 10,000 random programs per run, in two halves of 5,000 from different seeds: the test
// harness runs the two at once, one per core (compiling each program to native code is
// most of the time).
#[test]
fn compiled_dispatch_agrees_with_reference_and_pflang() {
    property(0x9f3a, 15, 5_000);
}

#[test]
fn compiled_dispatch_agrees_with_reference_and_pflang_second_half() {
    property(0x51ce, 16, 5_000);
}

fn property(expr_seed: u64, seed: u64, programs: usize) {
    let start = Instant::now();
    let names = NameDb::builtin();
    let options = Options::new(LinkType::Ethernet);
    let mut g = Gen {
        exprs: Generator::new(expr_seed),
        rng: SplitMix64::new(seed),
        options: options.clone(),
        names: names.clone(),
    };
    let oracle = Oracle { options: &options, names: &names };
    let packets = corpus(0x15, 40);
    let (mut matched, mut unmatched, mut with_args) = (0usize, 0usize, 0usize);
    let (mut lowering, mut native_compile) = (Duration::ZERO, Duration::ZERO);
    let (mut ebpf_compile, mut ebpf_runs) = (Duration::ZERO, 0usize);
    let mut warnings = 0usize;
    for n in 0..programs {
        let model = g.clauses(0);
        let mut src = String::from("match {\n");
        render(&model, 1, &mut src);
        src.push_str("}\n");
        let program = parse(&src, LinkType::Ethernet, &names)
            .unwrap_or_else(|e| panic!("program {n} does not parse: {e}\n{src}"));
        let warned: Vec<usize> = program.warnings.iter().map(|w| w.0.line).collect();
        warnings += warned.len();
        let t = Instant::now();
        let dispatch = Dispatch::compile(&program).unwrap();
        lowering += t.elapsed();
        let t = Instant::now();
        let native = weir_jit::filter::compile_results_read(
            dispatch.filter(),
            &dispatch.result_slots(),
            &dispatch.result_reads(),
        )
        .unwrap_or_else(|e| panic!("program {n} does not compile natively: {e}\n{src}"));
        native_compile += t.elapsed();
        let t = Instant::now();
        let ebpf = ebpf_results(&dispatch).unwrap_or_else(|e| panic!("program {n}: {e}\n{src}"));
        ebpf_compile += t.elapsed();
        for (k, p) in packets.iter().enumerate() {
            let reference = program.reference(&p.data, p.wire_len);
            let compiled = dispatch.run(&p.data, p.wire_len);
            assert_eq!(compiled, reference, "program {n}, packet {k}:\n{src}");
            // Results left from an earlier packet must not leak into this one's outcome.
            let mut results = [0xdead_beef; 16];
            let hit = native.run(&p.data, p.wire_len, &mut results);
            // A miss writes 0, "no handler", to the handler slot (weir's Dispatch reads
            // the slot alone).
            assert!(hit || results[0] == 0, "native miss: program {n}, packet {k}:\n{src}");
            let native_outcome = dispatch.outcome(hit, &results);
            assert_eq!(native_outcome, reference, "native: program {n}, packet {k}:\n{src}");
            // XDP sees whole frames, below 64 KiB.
            if !p.is_truncated() && p.data.len() <= 0xffff {
                let got = ebpf_outcome(&dispatch, &ebpf, &p.data);
                assert_eq!(got, reference, "eBPF: program {n}, packet {k}:\n{src}");
                ebpf_runs += 1;
            }
            // A clause warned about is never chosen.
            let mut chosen = Vec::new();
            oracle.chosen_lines(&model, 2, &p.data, p.wire_len, &mut chosen);
            if let Some(l) = chosen.iter().find(|l| warned.contains(l)) {
                panic!(
                    "program {n}, packet {k}: line {l} warned unreachable, reached:\n{src}\n{:?}",
                    program.warnings
                );
            }
            let expected = oracle.choose(&model, &p.data, p.wire_len);
            let Outcome { handler, args } = &reference;
            match (expected, handler) {
                (None, None) => unmatched += 1,
                (Some((name, arg_texts)), Some(h)) => {
                    assert_eq!(program.handlers[*h], name, "program {n}, packet {k}:\n{src}");
                    assert_eq!(args.len(), arg_texts.len());
                    for (a, v) in arg_texts.iter().zip(args) {
                        assert!(
                            oracle.accepts(&format!("{a} = {v}"), &p.data, p.wire_len),
                            "program {n}, packet {k}: {a} is not {v}:\n{src}"
                        );
                    }
                    matched += 1;
                    with_args += usize::from(!args.is_empty());
                }
                (e, h) => panic!("program {n}, packet {k}: oracle {e:?}, dispatch {h:?}:\n{src}"),
            }
        }
    }
    let total = matched + unmatched;
    println!(
        "{programs} programs x {} packets: {matched} dispatched ({with_args} with arguments), {unmatched} to no handler, {ebpf_runs} on eBPF, {warnings} clauses warned unreachable, {:?} (compiling: {lowering:?} to the IR, {native_compile:?} to native code, {ebpf_compile:?} to eBPF)",
        packets.len(),
        start.elapsed()
    );
    assert!(ebpf_runs * 2 > total, "only {ebpf_runs} of {total} runs were whole frames for eBPF");
    // The property checks little unless both outcomes are common.
    assert!(matched * 10 > total && unmatched * 20 > total, "{matched} matched of {total}");
    assert!(with_args * 20 > total, "{with_args} with arguments of {total}");
}
