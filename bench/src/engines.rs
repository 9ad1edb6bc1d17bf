//! The engines a filter is measured on. An engine row is a name and a `prepare` function
//! that turns the compiled filter (weir's IR, libpcap's program) into something that runs on
//! one packet.
//!
//! weir's own engines take their names from the facade's one engine table, `weir::Engine`
//! (the names `weir filter --engine` takes): one row per engine, fed weir's optimized
//! filter, and variants with a suffix. `/pcap` runs *libpcap's* optimized program on that
//! weir engine (the classic interpreter, or translated to eBPF for the eBPF engines): the
//! same engine fed libpcap's code generation instead of weir's, so the two can be told
//! apart. `/unopt` feeds the reference evaluator the filter before the optimizer. A new
//! engine in the facade is an arm of the (exhaustive) match in [`weir_rows`]. The other rows
//! (`libpcap`, the kernel, the `call` and `touch` baselines) are not weir engines and keep
//! their own names.

use std::sync::LazyLock;

use weir_cbpf::CbpfFilter;
use weir_filter::{Expr, Filter, Pred};
use weir_isa::cbpf::{decode, CbpfInsn, SockFilter};
use weir_program::abi::Bindings;
use weir_program::exec::{Engine as ExecEngine, Input, Limits, Prepared};
use weir_program::{ProgType, Program, Verified};
use weir_sys::libpcap::{self, BpfInsn};

/// Runs the filter on one packet (captured bytes, wire length): true when it matches.
/// The packet is writable because weir's eBPF engines take writable packet memory.
pub type Verdict = Box<dyn FnMut(&mut [u8], u32) -> bool>;

/// What `prepare` hands the harness.
pub enum Runner {
    /// Called once per packet, timed by the harness.
    InProcess(Verdict),
    /// An eBPF program for the socket-filter target, which the harness loads into the kernel
    /// and times with `BPF_PROG_TEST_RUN` (the kernel measures it).
    Kernel(Program),
}

/// Whether an engine's verdicts are checked against the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A filter engine: its verdicts must equal the reference's on every packet.
    Engine,
    /// A floor to compare with, not a filter (its verdicts mean nothing).
    Baseline,
}

/// What an engine is given: the expression and both compilers' results (or their errors).
pub struct Subject<'a> {
    pub expr: &'a str,
    /// weir's filter after the optimizer.
    pub filter: Result<&'a Filter, &'a str>,
    /// weir's filter straight from lowering.
    pub unoptimized: Result<&'a Filter, &'a str>,
    /// libpcap's optimized program.
    pub pcap: Result<&'a [BpfInsn], &'a str>,
}

pub struct Engine {
    pub name: String,
    pub about: &'static str,
    pub role: Role,
    /// Whether the engine can run here at all (asked once per run; `Err` says why not).
    pub available: fn() -> Result<(), String>,
    /// Whether it runs in the kernel (then only workloads the kernel's test run takes).
    pub in_kernel: bool,
    /// Whether it is measured on the stream workload only (the touch baseline: in cache,
    /// reading every byte any path of the filter reads says nothing).
    pub stream_only: bool,
    pub prepare: fn(&Subject) -> Result<Runner, String>,
}

/// What a row of one of weir's engines is fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// weir's optimized filter, or what weir emits from it: the engine's own name.
    Weir,
    /// weir's filter before the optimizer: `<engine>/unopt`.
    Unoptimized,
    /// libpcap's optimized program: `<engine>/pcap`.
    Pcap,
}

/// The name of the row of a weir engine fed `feed`.
pub fn row_name(engine: weir::Engine, feed: Feed) -> String {
    let suffix = match feed {
        Feed::Weir => "",
        Feed::Unoptimized => "/unopt",
        Feed::Pcap => "/pcap",
    };
    format!("{}{suffix}", engine.name())
}

/// The row whose verdicts the others are checked against (libpcap's when weir cannot
/// compile the filter).
pub fn reference_name() -> String {
    row_name(weir::Engine::Reference, Feed::Weir)
}

fn always() -> Result<(), String> {
    Ok(())
}

fn with_libpcap() -> Result<(), String> {
    libpcap::available()
}

fn with_kernel() -> Result<(), String> {
    weir_sys::kernel::available().map_err(|e| format!("kernel: {e}"))
}

/// Every engine, in report order: weir's, slowest first (the facade's table lists them
/// fastest first), then libpcap, the kernel and the baselines.
pub static ENGINES: LazyLock<Vec<Engine>> = LazyLock::new(|| {
    let mut rows: Vec<Engine> =
        weir::Engine::ALL.iter().rev().flat_map(|&e| weir_rows(e)).collect();
    rows.extend([
        Engine {
            name: "libpcap".into(),
            about: "libpcap's bpf_filter on pcap_compile's optimized program (the 1.00x line)",
            role: Role::Engine,
            available: with_libpcap,
            in_kernel: false,
            stream_only: false,
            prepare: pcap,
        },
        Engine {
            name: "kernel".into(),
            about: "BPF_PROG_TEST_RUN of weir's emitted eBPF (SCHED_CLS, the kernel's JIT when on)",
            role: Role::Engine,
            available: with_kernel,
            in_kernel: true,
            stream_only: false,
            prepare: kernel,
        },
        Engine {
            name: "kernel/direct".into(),
            about: "BPF_PROG_TEST_RUN of the eBPF emitter's own program (weir's eBPF before emit_ebpf)",
            role: Role::Engine,
            available: with_kernel,
            in_kernel: true,
            stream_only: false,
            prepare: kernel_direct,
        },
        Engine {
            name: "kernel/pcap".into(),
            about: "BPF_PROG_TEST_RUN of libpcap's program translated to eBPF",
            role: Role::Engine,
            available: with_kernel,
            in_kernel: true,
            stream_only: false,
            prepare: kernel_pcap,
        },
        Engine {
            name: "call".into(),
            about: "baseline: the harness's own cost per packet, a call that reads nothing",
            role: Role::Baseline,
            available: always,
            in_kernel: false,
            stream_only: false,
            prepare: call,
        },
        Engine {
            name: "touch".into(),
            about: "baseline (stream only): reads the header bytes the filter reads, sums them",
            role: Role::Baseline,
            available: always,
            in_kernel: false,
            stream_only: true,
            prepare: touch,
        },
    ]);
    rows
});

/// The rows of one of weir's engines: the engine on weir's filter, then its variants.
fn weir_rows(engine: weir::Engine) -> Vec<Engine> {
    use weir::Engine as W;
    let row = |feed, about, available, prepare| Engine {
        name: row_name(engine, feed),
        about,
        role: Role::Engine,
        available,
        in_kernel: false,
        stream_only: false,
        prepare,
    };
    match engine {
        W::Reference => vec![
            row(
                Feed::Weir,
                "weir's reference evaluator on the optimized filter IR (tree walking)",
                always,
                reference,
            ),
            row(
                Feed::Unoptimized,
                "the same evaluator on the IR before the optimizer",
                always,
                reference_unoptimized,
            ),
        ],
        W::Cbpf => vec![
            row(
                Feed::Weir,
                "weir's classic BPF interpreter on weir's emitted classic program",
                always,
                cbpf,
            ),
            row(
                Feed::Pcap,
                "weir's classic BPF interpreter on libpcap's optimized program",
                with_libpcap,
                cbpf_pcap,
            ),
        ],
        W::Interp => vec![
            row(
                Feed::Weir,
                "weir's eBPF interpreter on weir's emitted eBPF (socket-filter target)",
                always,
                interp,
            ),
            row(
                Feed::Pcap,
                "weir's eBPF interpreter on libpcap's program translated to eBPF",
                with_libpcap,
                interp_pcap,
            ),
        ],
        W::Jit => vec![
            row(
                Feed::Weir,
                "weir's eBPF JIT (Cranelift) on weir's emitted eBPF (socket-filter target)",
                always,
                jit,
            ),
            row(
                Feed::Pcap,
                "weir's eBPF JIT on libpcap's program translated to eBPF",
                with_libpcap,
                jit_pcap,
            ),
        ],
        W::Native => vec![row(
            Feed::Weir,
            "weir's optimized filter IR compiled to native code (weir_jit::filter)",
            always,
            native,
        )],
    }
}

/// Names the bench gave weir's engines before they took the facade's (issue 17), and the
/// rows that replaced them: `--engines` refuses an old name and says the new one.
const RENAMED: [(&str, weir::Engine, Feed); 5] = [
    ("ir", weir::Engine::Reference, Feed::Weir),
    ("ir/unopt", weir::Engine::Reference, Feed::Unoptimized),
    ("ebpf-interp", weir::Engine::Interp, Feed::Weir),
    ("ebpf-interp/pcap", weir::Engine::Interp, Feed::Pcap),
    ("ebpf-jit", weir::Engine::Jit, Feed::Weir),
];

pub fn find(name: &str) -> Option<&'static Engine> {
    ENGINES.iter().find(|e| e.name == name)
}

/// The row called `name`, or an error: for a name from before the renaming, the new name;
/// otherwise the known names.
pub fn lookup(name: &str) -> Result<&'static Engine, String> {
    if let Some(engine) = find(name) {
        return Ok(engine);
    }
    if let Some(&(_, engine, feed)) = RENAMED.iter().find(|(old, ..)| *old == name) {
        return Err(format!("engine `{name}` is now `{}`", row_name(engine, feed)));
    }
    let known: Vec<&str> = ENGINES.iter().map(|e| e.name.as_str()).collect();
    Err(format!("unknown engine `{name}` (known: {})", known.join(", ")))
}

fn reference(s: &Subject) -> Result<Runner, String> {
    let filter = s.filter?.clone();
    Ok(Runner::InProcess(Box::new(move |pkt, wire| filter.matches(pkt, wire))))
}

fn reference_unoptimized(s: &Subject) -> Result<Runner, String> {
    let filter = s.unoptimized?.clone();
    Ok(Runner::InProcess(Box::new(move |pkt, wire| filter.matches(pkt, wire))))
}

fn native(s: &Subject) -> Result<Runner, String> {
    let filter =
        weir_jit::filter::compile(s.filter?).map_err(|e| format!("native compiler: {e}"))?;
    Ok(Runner::InProcess(Box::new(move |pkt, wire| filter.matches(pkt, wire))))
}

fn cbpf(s: &Subject) -> Result<Runner, String> {
    let insns =
        weir_filter::emit::cbpf::emit(s.filter?).map_err(|e| format!("cBPF emitter: {e}"))?;
    let filter = CbpfFilter::new(&insns).map_err(|e| format!("emitted cBPF is invalid: {e}"))?;
    Ok(Runner::InProcess(Box::new(move |pkt, wire| filter.run(pkt, wire) != 0)))
}

/// libpcap's instructions as weir's classic instructions.
pub(crate) fn pcap_insns(pcap: &[BpfInsn]) -> Result<Vec<CbpfInsn>, String> {
    let raw: Vec<SockFilter> =
        pcap.iter().map(|i| SockFilter::new(i.code, i.jt, i.jf, i.k)).collect();
    decode(&raw).map_err(|e| format!("libpcap's program does not decode: {e}"))
}

fn cbpf_pcap(s: &Subject) -> Result<Runner, String> {
    let filter = CbpfFilter::new_libpcap(&pcap_insns(s.pcap?)?)
        .map_err(|e| format!("libpcap's program is refused: {e}"))?;
    Ok(Runner::InProcess(Box::new(move |pkt, wire| filter.run(pkt, wire) != 0)))
}

/// weir's eBPF for the filter, as `weir compile --ebpf` gives it ([`weir::emit_ebpf`]).
fn emitted_ebpf(s: &Subject) -> Result<Program, String> {
    weir::emit_ebpf(s.filter?, ProgType::SocketFilter)
}

/// The eBPF emitter's own program (before [`weir::emit_ebpf`] chose between it and the
/// translated classic program): the "before" column of the emit record.
fn direct_ebpf(s: &Subject) -> Result<Program, String> {
    weir_filter::emit::ebpf::emit(s.filter?, ProgType::SocketFilter)
        .map_err(|e| format!("eBPF emitter: {e}"))
}

fn kernel_direct(s: &Subject) -> Result<Runner, String> {
    Ok(Runner::Kernel(direct_ebpf(s)?))
}

fn translated_pcap(s: &Subject) -> Result<Program, String> {
    weir_cbpf::translate::translate(&pcap_insns(s.pcap?)?, ProgType::SocketFilter)
        .map_err(|e| format!("translating libpcap's program: {e}"))
}

/// A socket-filter program on one of weir's eBPF engines (the interpreter, the JIT),
/// through the engine contract and set up as the facade sets up a filter's run: the
/// socket-filter bindings, a `struct __sk_buff` of zeros but `len` (the wire length), the
/// packet as the legacy loads' packet; a trap rejects. The harness's packets are writable
/// already, so the engine runs on them in place (the facade copies each one first).
fn on_engine<E: ExecEngine>(engine: &E, program: Program) -> Result<Runner, String>
where
    E::Prepared: 'static,
    <E::Prepared as Prepared>::Cache: 'static,
{
    let layout = ProgType::SocketFilter.context_layout();
    let program = Verified::structural(program)
        .map_err(|e| format!("the {} engine refuses the program: {e}", engine.name()))?;
    let prepared = engine
        .prepare(&program, Bindings::for_prog_type(ProgType::SocketFilter), Limits::default())
        .map_err(|e| format!("the {} engine cannot take the program: {e}", engine.name()))?;
    let mut cache = prepared.cache();
    let mut ctx = vec![0u8; layout.size as usize];
    let len_at = layout.field("len").map_or(0, |f| f.offset as usize);
    Ok(Runner::InProcess(Box::new(move |pkt, wire| {
        if let Some(field) = ctx.get_mut(len_at..len_at + 4) {
            field.copy_from_slice(&wire.to_le_bytes());
        }
        let input = Input::new().ctx(&mut ctx).packet(pkt);
        matches!(prepared.run(&mut cache, input), Ok(outcome) if outcome.r0 != 0)
    })))
}

fn interp(s: &Subject) -> Result<Runner, String> {
    on_engine(&weir_interp::Interp, emitted_ebpf(s)?)
}

fn interp_pcap(s: &Subject) -> Result<Runner, String> {
    on_engine(&weir_interp::Interp, translated_pcap(s)?)
}

fn jit(s: &Subject) -> Result<Runner, String> {
    on_engine(&weir_jit::Jit, emitted_ebpf(s)?)
}

fn jit_pcap(s: &Subject) -> Result<Runner, String> {
    on_engine(&weir_jit::Jit, translated_pcap(s)?)
}

fn pcap(s: &Subject) -> Result<Runner, String> {
    let prog = libpcap::load()?.validate(s.pcap?)?;
    Ok(Runner::InProcess(Box::new(move |pkt, wire| prog.filter(pkt, wire) != 0)))
}

fn kernel(s: &Subject) -> Result<Runner, String> {
    Ok(Runner::Kernel(emitted_ebpf(s)?))
}

fn kernel_pcap(s: &Subject) -> Result<Runner, String> {
    Ok(Runner::Kernel(translated_pcap(s)?))
}

/// The floor every in-process engine stands on: the harness's loop and the boxed call,
/// with nothing inside. An engine's time minus this is its own.
fn call(_: &Subject) -> Result<Runner, String> {
    Ok(Runner::InProcess(Box::new(|pkt, wire| {
        std::hint::black_box((pkt, wire));
        false
    })))
}

/// Where the touch baseline reads: a fixed offset, or an offset behind an IPv4 header
/// (4 * the low nibble of the byte at `ihl_at`, plus `plus`), each `size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Touch {
    At { offset: usize, size: usize },
    BehindIhl { ihl_at: usize, plus: usize, size: usize },
}

/// Ethernet type, IPv4 protocol, the two ports behind a 20-byte IPv4 header: what most
/// filters read, for when the filter's own loads are unknown.
const DEFAULT_TOUCHES: [Touch; 3] = [
    Touch::At { offset: 12, size: 2 },
    Touch::At { offset: 23, size: 1 },
    Touch::At { offset: 34, size: 4 },
];

fn touch(s: &Subject) -> Result<Runner, String> {
    let touches = match s.unoptimized.or(s.filter) {
        Ok(filter) => {
            let mut t = Vec::new();
            pred_touches(&filter.pred, &mut t);
            t
        }
        Err(_) => DEFAULT_TOUCHES.to_vec(),
    };
    // Each byte once: fixed ranges, and ranges behind each header-length byte, merged.
    let mut fixed = Vec::new();
    let mut behind: Vec<(usize, Vec<(usize, usize)>)> = Vec::new();
    for t in touches {
        match t {
            Touch::At { offset, size } => fixed.push((offset, offset + size)),
            Touch::BehindIhl { ihl_at, plus, size } => {
                match behind.iter_mut().find(|(at, _)| *at == ihl_at) {
                    Some((_, ranges)) => ranges.push((plus, plus + size)),
                    None => behind.push((ihl_at, vec![(plus, plus + size)])),
                }
            }
        }
    }
    let fixed = merge(fixed);
    let behind: Vec<(usize, Vec<(usize, usize)>)> =
        behind.into_iter().map(|(at, ranges)| (at, merge(ranges))).collect();
    let mut sum = 0u32;
    let mut add = move |bytes: Option<&[u8]>| {
        for &b in bytes.unwrap_or_default() {
            sum = sum.wrapping_add(u32::from(b));
        }
        std::hint::black_box(sum);
    };
    Ok(Runner::InProcess(Box::new(move |pkt, _wire| {
        for &(a, b) in &fixed {
            add(pkt.get(a..b));
        }
        for (ihl_at, ranges) in &behind {
            if let Some(&h) = pkt.get(*ihl_at) {
                let base = usize::from(h & 0xf) * 4;
                for &(a, b) in ranges {
                    add(pkt.get(base + a..base + b));
                }
            }
        }
        false
    })))
}

/// Sorted, overlapping or adjacent ranges joined.
fn merge(mut ranges: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    ranges.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

fn pred_touches(p: &Pred, out: &mut Vec<Touch>) {
    match p {
        Pred::Const(_) | Pred::Guard(_) => {}
        Pred::Cmp { lhs, rhs, .. } => {
            expr_touches(lhs, out);
            expr_touches(rhs, out);
        }
        Pred::In { value, .. } | Pred::Store { value, .. } => expr_touches(value, out),
        Pred::And(parts) | Pred::Or(parts) => parts.iter().for_each(|q| pred_touches(q, out)),
        Pred::Not(inner) | Pred::Try(inner) => pred_touches(inner, out),
        Pred::Chain(c) => {
            expr_touches(&c.next, out);
            expr_touches(&c.offset, out);
        }
        Pred::Pairs(pairs) => pairs.parts().for_each(|(guards, fields)| {
            guards.iter().for_each(|g| pred_touches(g, out));
            fields.iter().for_each(|f| expr_touches(f, out));
        }),
    }
}

fn expr_touches(e: &Expr, out: &mut Vec<Touch>) {
    match e {
        Expr::Const(_) | Expr::WireLen | Expr::Scratch(_) => {}
        Expr::Load { offset, size } => {
            let size = size.bytes() as usize;
            if let Expr::Const(k) = **offset {
                out.push(Touch::At { offset: k as usize, size });
            } else if let Some((ihl_at, plus)) = behind_ihl(offset) {
                out.push(Touch::BehindIhl { ihl_at, plus, size });
            }
            expr_touches(offset, out);
        }
        Expr::Binary { lhs, rhs, .. } => {
            expr_touches(lhs, out);
            expr_touches(rhs, out);
        }
        Expr::Neg(inner) => expr_touches(inner, out),
    }
}

/// `variable + constants`, where the one variable term reads a byte at a fixed offset (the
/// IPv4 header-length byte): that byte's offset and the sum of the constants.
fn behind_ihl(offset: &Expr) -> Option<(usize, usize)> {
    let mut terms = Vec::new();
    add_terms(offset, &mut terms);
    let mut plus = 0usize;
    let mut variable = None;
    for term in terms {
        match term {
            Expr::Const(k) => plus += *k as usize,
            other if variable.is_none() => variable = Some(other),
            _ => return None,
        }
    }
    first_byte_load(variable?).map(|at| (at, plus))
}

fn add_terms<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::Binary { op: weir_filter::BinOp::Add, lhs, rhs } => {
            add_terms(lhs, out);
            add_terms(rhs, out);
        }
        other => out.push(other),
    }
}

fn first_byte_load(e: &Expr) -> Option<usize> {
    match e {
        Expr::Load { offset, size: weir_filter::Size::Byte } => match **offset {
            Expr::Const(k) => Some(k as usize),
            _ => None,
        },
        Expr::Binary { lhs, rhs, .. } => first_byte_load(lhs).or_else(|| first_byte_load(rhs)),
        Expr::Neg(inner) => first_byte_load(inner),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_filter::{BinOp, Size};

    #[test]
    fn engine_names_are_unique_and_found() {
        for (i, e) in ENGINES.iter().enumerate() {
            assert!(ENGINES[..i].iter().all(|o| o.name != e.name), "{} twice", e.name);
            assert!(std::ptr::eq(find(&e.name).unwrap(), e));
            assert!(std::ptr::eq(lookup(&e.name).unwrap(), e));
        }
        assert!(find("nope").is_none());
        let err = lookup("nope").err().unwrap();
        assert!(err.starts_with("unknown engine `nope` (known: "), "{err}");
        assert!(err.contains("jit") && err.contains("libpcap"), "{err}");
    }

    #[test]
    fn every_facade_engine_has_a_row_under_its_own_name() {
        for engine in weir::Engine::ALL {
            let row = find(engine.name()).unwrap_or_else(|| panic!("no row for {engine}"));
            assert_eq!(row.role, Role::Engine);
            // A row's name before any suffix is the facade's name, as --engine parses it.
            for e in ENGINES.iter().filter(|e| e.name.starts_with(engine.name())) {
                let base = e.name.split('/').next().unwrap();
                assert_eq!(base.parse::<weir::Engine>(), Ok(engine), "{}", e.name);
            }
        }
        assert!(find(&reference_name()).is_some());
    }

    #[test]
    fn old_names_say_the_new_one() {
        for (old, new) in [
            ("ir", "reference"),
            ("ir/unopt", "reference/unopt"),
            ("ebpf-interp", "interp"),
            ("ebpf-interp/pcap", "interp/pcap"),
            ("ebpf-jit", "jit"),
        ] {
            assert!(find(old).is_none(), "{old} is still a row");
            assert!(find(new).is_some(), "{new} is not a row");
            assert_eq!(lookup(old).err().unwrap(), format!("engine `{old}` is now `{new}`"));
        }
    }

    #[test]
    fn touches_follow_the_filter_loads() {
        // ldh [12] == 0x800 and (4*([14]&0xf) + 16):2 == 22
        let ihl =
            Expr::binary(BinOp::Shl, Expr::load_at(14, Size::Byte).and_mask(0xf), Expr::Const(2));
        let port = Expr::load(Expr::binary(BinOp::Add, ihl, Expr::Const(16)), Size::Half);
        let filter = Filter::new(Pred::and([
            Pred::eq(Expr::load_at(12, Size::Half), 0x800),
            Pred::eq(port, 22),
        ]));
        let mut t = Vec::new();
        pred_touches(&filter.pred, &mut t);
        assert_eq!(
            t,
            vec![
                Touch::At { offset: 12, size: 2 },
                Touch::BehindIhl { ihl_at: 14, plus: 16, size: 2 },
                Touch::At { offset: 14, size: 1 },
            ]
        );
    }

    #[test]
    fn ranges_merge() {
        assert_eq!(
            merge(vec![(14, 15), (12, 14), (23, 24), (20, 22), (21, 23)]),
            [(12, 15), (20, 24)]
        );
        assert!(merge(Vec::new()).is_empty());
    }

    #[test]
    fn engines_without_their_input_say_why() {
        let subject = Subject {
            expr: "ip",
            filter: Err("not compiled"),
            unoptimized: Err("not compiled"),
            pcap: Err("no libpcap"),
        };
        for name in ["reference", "cbpf", "interp", "jit", "kernel", "native"] {
            let err = (find(name).unwrap().prepare)(&subject).err().unwrap();
            assert!(err.contains("not compiled"), "{name}: {err}");
        }
        for name in ["cbpf/pcap", "interp/pcap", "jit/pcap", "libpcap", "kernel/pcap"] {
            let err = (find(name).unwrap().prepare)(&subject).err().unwrap();
            assert!(err.contains("no libpcap"), "{name}: {err}");
        }
        // The baseline falls back to the usual header bytes.
        assert!((find("touch").unwrap().prepare)(&subject).is_ok());
    }
}
