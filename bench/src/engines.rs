//! The engines a filter is measured on. An engine is a name and a `prepare` function that
//! turns the compiled filter (weir's IR, libpcap's program) into something that runs on
//! one packet; adding an engine is one entry in [`ENGINES`] and one such function.
//!
//! Names ending in `/pcap` run *libpcap's* optimized program on a weir engine (classic
//! interpreter, or translated to eBPF): the same engine as the plain name, fed libpcap's
//! code generation instead of weir's, so the two can be told apart.

use weir_cbpf::CbpfFilter;
use weir_filter::{Expr, Filter, Pred};
use weir_interp::{Config, Input, Interpreter};
use weir_isa::cbpf::{decode, CbpfInsn, SockFilter};
use weir_program::abi::{Bindings, SOCKET_FILTER};
use weir_program::ProgType;
use weir_program::Program;
use weir_sys::libpcap::{self, BpfInsn};

/// Runs the filter on one packet (captured bytes, wire length): true when it matches.
/// The packet is writable only because weir's interpreter takes writable packet memory.
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
    pub name: &'static str,
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

fn always() -> Result<(), String> {
    Ok(())
}

fn with_libpcap() -> Result<(), String> {
    libpcap::available()
}

fn with_kernel() -> Result<(), String> {
    weir_sys::kernel::available().map_err(|e| format!("kernel: {e}"))
}

/// Every engine, in report order.
pub static ENGINES: &[Engine] = &[
    Engine {
        name: "ir",
        about: "weir's reference evaluator on the optimized filter IR (tree walking)",
        role: Role::Engine,
        available: always,
        in_kernel: false,
        stream_only: false,
        prepare: ir,
    },
    Engine {
        name: "ir/unopt",
        about: "the same evaluator on the IR before the optimizer",
        role: Role::Engine,
        available: always,
        in_kernel: false,
        stream_only: false,
        prepare: ir_unoptimized,
    },
    Engine {
        name: "cbpf",
        about: "weir's classic BPF interpreter on weir's emitted classic program",
        role: Role::Engine,
        available: always,
        in_kernel: false,
        stream_only: false,
        prepare: cbpf,
    },
    Engine {
        name: "cbpf/pcap",
        about: "weir's classic BPF interpreter on libpcap's optimized program",
        role: Role::Engine,
        available: with_libpcap,
        in_kernel: false,
        stream_only: false,
        prepare: cbpf_pcap,
    },
    Engine {
        name: "ebpf-interp",
        about: "weir's eBPF interpreter on weir's emitted eBPF (socket-filter target)",
        role: Role::Engine,
        available: always,
        in_kernel: false,
        stream_only: false,
        prepare: ebpf_interp,
    },
    Engine {
        name: "ebpf-interp/pcap",
        about: "weir's eBPF interpreter on libpcap's program translated to eBPF",
        role: Role::Engine,
        available: with_libpcap,
        in_kernel: false,
        stream_only: false,
        prepare: ebpf_interp_pcap,
    },
    Engine {
        name: "libpcap",
        about: "libpcap's bpf_filter on pcap_compile's optimized program (the 1.00x line)",
        role: Role::Engine,
        available: with_libpcap,
        in_kernel: false,
        stream_only: false,
        prepare: pcap,
    },
    Engine {
        name: "kernel",
        about: "BPF_PROG_TEST_RUN of weir's emitted eBPF (SCHED_CLS, the kernel's JIT when on)",
        role: Role::Engine,
        available: with_kernel,
        in_kernel: true,
        stream_only: false,
        prepare: kernel,
    },
    Engine {
        name: "kernel/pcap",
        about: "BPF_PROG_TEST_RUN of libpcap's program translated to eBPF",
        role: Role::Engine,
        available: with_kernel,
        in_kernel: true,
        stream_only: false,
        prepare: kernel_pcap,
    },
    Engine {
        name: "native",
        about: "weir's optimized filter IR compiled to native code (weir_jit::filter)",
        role: Role::Engine,
        available: always,
        in_kernel: false,
        stream_only: false,
        prepare: native,
    },
    Engine {
        name: "ebpf-jit",
        about: "weir's emitted eBPF compiled by weir's eBPF JIT (issue 5)",
        role: Role::Engine,
        available: || Err("not written yet: the eBPF JIT (issue 5)".into()),
        in_kernel: false,
        stream_only: false,
        prepare: |_| Err("not written yet".into()),
    },
    Engine {
        name: "call",
        about: "baseline: the harness's own cost per packet, a call that reads nothing",
        role: Role::Baseline,
        available: always,
        in_kernel: false,
        stream_only: false,
        prepare: call,
    },
    Engine {
        name: "touch",
        about: "baseline (stream only): reads the header bytes the filter reads, sums them",
        role: Role::Baseline,
        available: always,
        in_kernel: false,
        stream_only: true,
        prepare: touch,
    },
];

pub fn find(name: &str) -> Option<&'static Engine> {
    ENGINES.iter().find(|e| e.name == name)
}

fn ir(s: &Subject) -> Result<Runner, String> {
    let filter = s.filter?.clone();
    Ok(Runner::InProcess(Box::new(move |pkt, wire| filter.matches(pkt, wire))))
}

fn ir_unoptimized(s: &Subject) -> Result<Runner, String> {
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
fn pcap_insns(s: &Subject) -> Result<Vec<CbpfInsn>, String> {
    let raw: Vec<SockFilter> =
        s.pcap?.iter().map(|i| SockFilter::new(i.code, i.jt, i.jf, i.k)).collect();
    decode(&raw).map_err(|e| format!("libpcap's program does not decode: {e}"))
}

fn cbpf_pcap(s: &Subject) -> Result<Runner, String> {
    let filter = CbpfFilter::new_libpcap(&pcap_insns(s)?)
        .map_err(|e| format!("libpcap's program is refused: {e}"))?;
    Ok(Runner::InProcess(Box::new(move |pkt, wire| filter.run(pkt, wire) != 0)))
}

fn emitted_ebpf(s: &Subject) -> Result<Program, String> {
    weir_filter::emit::ebpf::emit(s.filter?, weir_program::ProgType::SocketFilter)
        .map_err(|e| format!("eBPF emitter: {e}"))
}

fn translated_pcap(s: &Subject) -> Result<Program, String> {
    weir_cbpf::translate::translate(&pcap_insns(s)?, ProgType::SocketFilter)
        .map_err(|e| format!("translating libpcap's program: {e}"))
}

/// A socket-filter program on weir's interpreter: a `struct __sk_buff` whose `len` is the
/// wire length, the packet as the legacy loads' packet.
fn on_interpreter(program: &Program) -> Result<Runner, String> {
    let mut bindings = Bindings::new();
    bindings.context = Some(&SOCKET_FILTER);
    let program = weir_program::Verified::structural(program.clone())
        .map_err(|e| format!("the interpreter refuses the program: {e}"))?;
    let interp = Interpreter::new(&program, bindings, Config::default());
    let mut cache = interp.cache();
    let mut ctx = vec![0u8; SOCKET_FILTER.size as usize];
    let len_at = SOCKET_FILTER.field("len").map_or(0, |f| f.offset as usize);
    Ok(Runner::InProcess(Box::new(move |pkt, wire| {
        if let Some(field) = ctx.get_mut(len_at..len_at + 4) {
            field.copy_from_slice(&wire.to_le_bytes());
        }
        matches!(interp.run(&mut cache, Input::new().ctx(&mut ctx).packet(pkt)), Ok(r0) if r0 != 0)
    })))
}

fn ebpf_interp(s: &Subject) -> Result<Runner, String> {
    on_interpreter(&emitted_ebpf(s)?)
}

fn ebpf_interp_pcap(s: &Subject) -> Result<Runner, String> {
    on_interpreter(&translated_pcap(s)?)
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
        Pred::Not(inner) => pred_touches(inner, out),
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
            assert!(std::ptr::eq(find(e.name).unwrap(), e));
        }
        assert!(find("nope").is_none());
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
        for name in ["ir", "cbpf", "ebpf-interp", "kernel", "native"] {
            let err = (find(name).unwrap().prepare)(&subject).err().unwrap();
            assert!(err.contains("not compiled"), "{name}: {err}");
        }
        for name in ["cbpf/pcap", "libpcap", "kernel/pcap"] {
            let err = (find(name).unwrap().prepare)(&subject).err().unwrap();
            assert!(err.contains("no libpcap"), "{name}: {err}");
        }
        // The baseline falls back to the usual header bytes.
        assert!((find("touch").unwrap().prepare)(&subject).is_ok());
    }
}
