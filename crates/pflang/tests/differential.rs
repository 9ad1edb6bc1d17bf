//! The differential oracle for the pflang compiler: weir against libpcap (the semantics of
//! record) on generated and on everyday expressions, over the packet corpus.
//!
//! For every expression: libpcap compiles it unoptimized and optimized; weir compiles it
//! (optimized and not) and emits classic BPF for it. When libpcap refuses, weir must refuse.
//! When libpcap accepts, weir must accept ("not supported" is a failure: this test is the
//! target the lowering has to reach) and give libpcap's unoptimized verdict on every packet,
//! through its IR evaluator (optimized and unoptimized filter) and through the emitted
//! classic program run by weir-cbpf. libpcap's optimizer is checked against its own
//! unoptimized code too; a disagreement there is a libpcap bug, not weir's, and is counted
//! and shown but never fails this test (known ones are listed in
//! testdata/pflang/libpcap-bugs.txt).
//!
//! Names resolve from the machine's files only (`NameDb::system_files_only`), as libpcap's
//! resolver does; weir's command line adds built-in names for machines without them.
//!
//! The oracle is libpcap compiling for a capture file (`pcap_fopen_offline`, as `tcpdump -r`
//! does), as weir filters capture files: `inbound`/`outbound`/`ifindex` where the link type
//! does not record them are refused by both ("... not supported on Ethernet when reading
//! savefiles"), which is plain agreement. Where libpcap is wrong, or weir has a documented
//! limit, the case is recognised precisely (see differential/documented.rs), counted and
//! printed, never silently passed:
//!
//! - `byte N & V` / `byte N | V`: a libpcap bug (the byte is never loaded); libpcap gets
//!   the same primitive spelled `(link[N] & V != 0)` and must then agree.
//! - protochain on a packet whose extension-header chain needs more hops than weir's walk
//!   makes (`CHAIN_HOP_BUDGET`, 64; a documented weir limit, weir rejects where libpcap
//!   1.10 walks on): counted per packet.
//! - Packets on which weir's evaluation reads a scratch slot nothing stored (after a tunnel
//!   test that failed): libpcap reads a stale value there (another test's temporary), so
//!   the two are not comparable; set aside per packet.
//! - Classic BPF output over 4096 instructions (long alternatives of distinct tests): a
//!   limit of that output only; the IR verdicts must still agree.
//! - More tunnels than weir's lowering has scratch slots for (three `geneve`s): a weir
//!   limit, refused with its own message.
//! - A comparison under an all-zero mask (`ld; and #0; jeq #0`, the address words a `net`
//!   prefix ignores) reads nothing in weir, as in libpcap's optimized code: libpcap's
//!   unoptimized program is run with those loads skipped (`lp_compile`); the snaplen sweep
//!   (tests/truncation.rs) counts the cut packets where that matters.
//!
//! Failures are shrunk (weir_testkit::pflang_gen::shrink) and printed with the minimal
//! expression, the packet and every verdict. Environment: WEIR_DIFF_COUNT (expressions per
//! seed, default 10,000), WEIR_DIFF_SEED (an extra seed to explore, besides the fixed one).

// differential/documented.rs; truncation.rs and lower_net.rs use parts of it too.
pub(crate) mod documented;

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use weir_cbpf::CbpfFilter;
use weir_filter::emit::EmitError;
use weir_filter::{Evaluator, Filter};
use weir_pflang::names::NameDb;
use weir_pflang::{LinkType, Options};
use weir_sys::libpcap::{self, BpfInsn};
use weir_testkit::pflang_gen::{self, Generator, Node};
use weir_testkit::Packet;

use crate::generalize;
use documented::Features;

/// The seed every run checks.
const FIXED_SEED: u64 = 0x7eed_5eed_0001;
const DEFAULT_COUNT: usize = 10_000;
/// Generated packets per run (the edge cases come on top).
const CORPUS_PACKETS: usize = 1200;
const CORPUS_SEED: u64 = 0xc0de;
/// The netmask a share of expressions is compiled with, so that `ip broadcast` is tested.
const NETMASK: u32 = 0xffff_ff00;
/// At most this many failures are shrunk, and this many shown in full.
const SHRINK_LIMIT: usize = 30;
const SHOW_LIMIT: usize = 20;
/// libpcap optimizer divergences shrunk (for the summary) per run.
const OPTIMIZER_SHRINK_LIMIT: usize = 60;
/// Candidates tried per shrink.
const SHRINK_BUDGET: usize = 400;

// ---- packets for each link type ---------------------------------------------------------

/// A link type with packets in its own framing.
struct LinkSet {
    link: LinkType,
    dlt: i32,
    packets: Vec<Packet>,
}

/// The Ethernet corpus (seeded traffic and every hand-written edge case) and, for the other
/// link types, the same packets re-framed (weir_testkit::relink).
fn link_sets() -> Vec<LinkSet> {
    let mut eth = weir_testkit::corpus(CORPUS_SEED, CORPUS_PACKETS);
    eth.extend(weir_testkit::edge_cases());
    eth.extend(weir_testkit::link_edge_cases());
    eth.extend(weir_testkit::net_edge_cases());
    let links = [
        LinkType::Ethernet,
        LinkType::LinuxSll,
        LinkType::LinuxSll2,
        LinkType::Raw,
        LinkType::Null,
        LinkType::Loop,
    ];
    links
        .iter()
        .map(|&link| LinkSet {
            link,
            dlt: link.dlt() as i32,
            packets: eth
                .iter()
                .map(|p| weir_testkit::relink(p, link).expect("relink knows every link type"))
                .collect(),
        })
        .collect()
}

// ---- one expression, both compilers -----------------------------------------------------

/// libpcap's verdict: accepted or not, or `None` when libpcap's validator refuses its own
/// program.
type Verdict = Option<bool>;

/// libpcap's program for `expr`, with scratch memory zeroed first.
///
/// libpcap's `bpf_filter` declares its scratch memory without initialising it, and some of
/// its programs read a cell on a path that never wrote it (after a failed `geneve`, later
/// tests load their offset from a cell only `geneve` writes). The packets where that
/// happens are set aside (see [`Checked::unset_scratch`]), but the prologue keeps libpcap's
/// runs deterministic everywhere: it stores 0 in every cell, leaves A and X at 0 as
/// `bpf_filter` starts them, and, jumps being relative, changes nothing else.
///
/// The unoptimized program does not load the address words a `net` prefix masks out
/// entirely (`ld; and #0; jeq #0` compares nothing; libpcap's optimizer drops those loads
/// too, and weir never makes them: see [`documented::skip_masked_out_compares`]).
fn lp_compile(expr: &str, dlt: i32, optimize: bool, netmask: u32) -> Result<Vec<BpfInsn>, String> {
    const LD_IMM: u16 = 0x00;
    const ST: u16 = 0x02;
    let mut body = libpcap::required().compile_with_netmask(expr, dlt, optimize, netmask)?;
    if !optimize {
        documented::skip_masked_out_compares(&mut body);
    }
    let mut prog = vec![BpfInsn { code: LD_IMM, jt: 0, jf: 0, k: 0 }];
    prog.extend((0..16).map(|cell| BpfInsn { code: ST, jt: 0, jf: 0, k: cell }));
    prog.extend(body);
    Ok(prog)
}

fn lp_verdict(prog: &[BpfInsn], p: &Packet) -> Verdict {
    libpcap::required().run(prog, &p.data, p.wire_len).map(|r| r != 0)
}

fn show(v: Verdict) -> &'static str {
    match v {
        Some(true) => "accept",
        Some(false) => "reject",
        None => "unrunnable",
    }
}

/// What went wrong for weir on one expression.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    /// libpcap accepts, weir refuses (with this message).
    WeirRejects(String),
    /// libpcap refuses (with this message), weir accepts.
    WeirAccepts(String),
    /// weir panicked (compiling or running).
    WeirPanics(String),
    /// weir compiled the filter but could not emit classic BPF for it (or the kernel rules
    /// refuse what it emitted).
    Emit(String),
    /// Verdicts differ on a packet.
    Verdict(Box<VerdictDiff>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct VerdictDiff {
    packet: usize,
    libpcap: Verdict,
    libpcap_opt: Verdict,
    weir: bool,
    weir_unopt: bool,
    /// `None` when no classic BPF program exists (over the size limit).
    cbpf: Option<bool>,
    /// The text libpcap compiled, when it is not the expression itself (`byte` spelled
    /// out).
    libpcap_text: Option<String>,
}

impl Failure {
    /// Failures of the same class shrink into each other.
    fn class(&self) -> String {
        match self {
            Failure::WeirRejects(m) => format!("weir rejects: {}", generalize(m)),
            Failure::WeirAccepts(m) => format!("weir accepts, libpcap rejects: {}", generalize(m)),
            Failure::WeirPanics(_) => "weir panics".to_string(),
            Failure::Emit(m) => format!("cbpf emitter: {m}"),
            Failure::Verdict(_) => "verdict".to_string(),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Failure::Verdict(_) | Failure::WeirPanics(_) | Failure::Emit(_) => 0,
            Failure::WeirAccepts(_) => 1,
            Failure::WeirRejects(m) if !m.starts_with("not supported") => 2,
            Failure::WeirRejects(_) => 3,
        }
    }
}

/// A whole-expression difference that is documented, not a failure (see the module doc and
/// differential/documented.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Documented {
    /// libpcap bug: `byte N &/| V` tests the accumulator; weir agrees with libpcap once the
    /// primitive is spelled out for it.
    ByteAndOr,
    /// The classic BPF program would exceed 4096 instructions; the IR verdicts agree.
    CbpfTooLong,
    /// weir limit: the expression's tunnels (3 slots per `geneve`) need more than the 8
    /// scratch slots lowering keeps (the other 8 are the emitters' temporaries); libpcap
    /// shares its 16 cells among everything.
    ScratchBudget,
    /// libpcap bug on 802.11 and pflog: the register holding a packet-dependent link offset
    /// is reused by an arithmetic temporary, or never written (after `geneve`); weir keeps
    /// the offset.
    WlanOffsetRegister,
}

impl Documented {
    const ALL: [Documented; 4] = [
        Documented::ByteAndOr,
        Documented::CbpfTooLong,
        Documented::ScratchBudget,
        Documented::WlanOffsetRegister,
    ];

    /// Its class entry in testdata/pflang/libpcap-bugs.txt, where it is explained.
    fn entry(self) -> &'static str {
        match self {
            Documented::ByteAndOr => "@byte-and-or",
            Documented::CbpfTooLong => "@limit:cbpf-size",
            Documented::ScratchBudget => "@limit:scratch-slots",
            Documented::WlanOffsetRegister => "@wlan-offset-register",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Documented::ByteAndOr => "libpcap bug: byte &/|",
            Documented::CbpfTooLong => "cBPF size limit (documented)",
            Documented::WlanOffsetRegister => "libpcap bug: 802.11/pflog offset register reused",
            Documented::ScratchBudget => {
                "weir limit: more variable-length headers than lowering's 8 scratch slots"
            }
        }
    }
}

/// The outcome of checking one expression.
#[derive(Debug, Clone, Default)]
struct Checked {
    libpcap_accepts: bool,
    failure: Option<Failure>,
    /// Documented differences that explain what would otherwise have been failures.
    documented: Vec<Documented>,
    /// Packets on which libpcap's optimized and unoptimized programs disagree.
    optimizer_diffs: Vec<usize>,
    /// libpcap accepted but its own validator refused the program.
    unrunnable: bool,
    /// Packets set aside because weir's (unoptimized) evaluation read a scratch slot that
    /// nothing had stored on that packet: libpcap reads a stale cell there.
    unset_scratch: usize,
    /// Packets whose verdicts differ only because their extension-header chain needs more
    /// hops than weir's protochain walk makes (a documented weir limit).
    protochain_limit: usize,
    /// Packets on which only the classic program differs, its protochain walks adding up
    /// past weir-cbpf's 64 backward jumps per packet (a documented classic BPF limit).
    cbpf_backward_jumps: usize,
}

struct Oracle<'a> {
    names: &'a NameDb,
}

impl Oracle<'_> {
    /// Checks `expr`; when it has `byte N &/| V` primitives and verdicts differ, checks it
    /// again with libpcap given those primitives spelled out, and takes that answer.
    fn check(&self, expr: &str, set: &LinkSet, netmask: Option<u32>) -> Checked {
        let features = Features::of(expr);
        let out = self.compare(expr, None, set, netmask, &features);
        match (&out.failure, &features.byte_spelled_out) {
            (Some(Failure::Verdict(_)), Some(spelled)) => {
                let mut again = self.compare(expr, Some(spelled), set, netmask, &features);
                if again.failure.is_none() {
                    again.documented.push(Documented::ByteAndOr);
                }
                again
            }
            _ => out,
        }
    }

    /// weir on `expr` against libpcap on `libpcap_text` (default: `expr`).
    fn compare(
        &self,
        expr: &str,
        libpcap_text: Option<&str>,
        set: &LinkSet,
        netmask: Option<u32>,
        features: &Features,
    ) -> Checked {
        let lp_text = libpcap_text.unwrap_or(expr);
        let lp_mask = netmask.unwrap_or(libpcap::NETMASK_UNKNOWN);
        let unopt = lp_compile(lp_text, set.dlt, false, lp_mask);
        let opt = lp_compile(lp_text, set.dlt, true, lp_mask);
        let weir = catch_unwind(AssertUnwindSafe(|| {
            let mut options = Options::new(set.link);
            options.netmask = netmask;
            let plain = weir_pflang::compile(expr, &options, self.names);
            let optimized = plain.clone().map(weir_filter::opt::optimize_owned);
            (optimized, plain)
        }));
        let mut out = Checked { libpcap_accepts: unopt.is_ok(), ..Checked::default() };
        let (weir, weir_plain) = match weir {
            Ok(pair) => pair,
            Err(e) => {
                out.failure = Some(Failure::WeirPanics(panic_text(&e)));
                return out;
            }
        };
        let unopt = match unopt {
            Err(msg) => {
                if weir.is_ok() {
                    out.failure = Some(Failure::WeirAccepts(msg));
                }
                return out;
            }
            Ok(p) => p,
        };
        let (weir, weir_plain) = match (weir, weir_plain) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                if e.message == documented::SCRATCH_BUDGET_MESSAGE {
                    out.documented.push(Documented::ScratchBudget);
                } else {
                    out.failure = Some(Failure::WeirRejects(e.message));
                }
                return out;
            }
        };
        let cbpf = match weir_filter::emit::cbpf::emit(&weir) {
            // A protochain loop jumps backward, as libpcap's does: libpcap's rules only.
            Ok(insns) => match if features.protochain {
                CbpfFilter::new_libpcap(&insns)
            } else {
                CbpfFilter::new(&insns)
            } {
                Ok(f) => Some(f),
                Err(e) => {
                    let m = format!("kernel rules refuse the program: {e}");
                    out.failure = Some(Failure::Emit(m));
                    return out;
                }
            },
            // Documented when the IR verdicts below agree.
            Err(EmitError::TooLong { .. }) => None,
            Err(e) => {
                out.failure = Some(Failure::Emit(format!("{e:?}")));
                return out;
            }
        };
        // libpcap's optimizer reports a filter it proved always false as an error; that
        // is its verdict "reject" for every packet. Other optimizer errors are verdicts
        // nobody can run.
        let opt = match opt {
            Ok(prog) => Ok(prog),
            Err(m) if m.contains("rejects all packets") => Err(Some(false)),
            Err(_) => Err(None),
        };
        for (i, p) in set.packets.iter().enumerate() {
            let lp = lp_verdict(&unopt, p);
            let lp_opt = match &opt {
                Ok(prog) => lp_verdict(prog, p),
                Err(v) => *v,
            };
            if lp_opt != lp {
                out.optimizer_diffs.push(i);
            }
            let Some(expected) = lp else {
                out.unrunnable = true;
                return out;
            };
            let verdicts = catch_unwind(AssertUnwindSafe(|| {
                let mut plain = Evaluator::new(&p.data, p.wire_len);
                let w_plain = plain.pred(&weir_plain.pred) == Ok(true);
                let c = cbpf.as_ref().map(|f| f.run(&p.data, p.wire_len) != 0);
                (run_weir(&weir, p), w_plain, plain.reads_unset_scratch(), c)
            }));
            let (w, w_plain, unset, c) = match verdicts {
                Ok(v) => v,
                Err(e) => {
                    out.failure = Some(Failure::WeirPanics(panic_text(&e)));
                    return out;
                }
            };
            if unset {
                out.unset_scratch += 1;
                continue;
            }
            let agree = w == expected && w_plain == expected && c.unwrap_or(expected) == expected;
            if agree {
                continue;
            }
            if features.protochain && documented::protochain_walk_exceeds(set.link, &p.data) {
                out.protochain_limit += 1;
                continue;
            }
            let variable_offsets = set.link.is_ieee80211() || set.link == LinkType::Pflog;
            if variable_offsets && documented::offset_register_reused(&unopt) {
                if !out.documented.contains(&Documented::WlanOffsetRegister) {
                    out.documented.push(Documented::WlanOffsetRegister);
                }
                continue;
            }
            let hops = features.protochains * documented::protochain_walk_hops(set.link, &p.data);
            if w == expected && w_plain == expected && hops > weir_cbpf::MAX_BACKWARD_JUMPS as usize
            {
                out.cbpf_backward_jumps += 1;
                continue;
            }
            if out.failure.is_none() {
                out.failure = Some(Failure::Verdict(Box::new(VerdictDiff {
                    packet: i,
                    libpcap: lp,
                    libpcap_opt: lp_opt,
                    weir: w,
                    weir_unopt: w_plain,
                    cbpf: c,
                    libpcap_text: libpcap_text.map(str::to_string),
                })));
            }
        }
        if cbpf.is_none() && out.failure.is_none() {
            out.documented.push(Documented::CbpfTooLong);
        }
        out
    }
}

fn run_weir(f: &Filter, p: &Packet) -> bool {
    f.matches(&p.data, p.wire_len)
}

fn panic_text(e: &Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".to_string())
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

// ---- runs ------------------------------------------------------------------------------

/// One expression to check: its tree (for shrinking, absent for hand-written ones), its
/// text, which link set, and whether the netmask is known.
struct Case {
    tree: Option<Node>,
    text: String,
    set: usize,
    netmask: Option<u32>,
}

/// What the run found, for the summary.
#[derive(Default)]
struct Tally {
    total: usize,
    libpcap_accepts: usize,
    both_reject: usize,
    /// libpcap accepts and weir agrees on every packet compared, with no documented
    /// difference.
    agree: usize,
    unrunnable: usize,
    /// Expressions explained by each documented difference.
    documented: BTreeMap<Documented, usize>,
    /// Packets (and expressions with any) set aside for reading unset scratch slots.
    unset_scratch: (usize, usize),
    /// Packets (and expressions with any) past the protochain walk's documented depth.
    protochain_limit: (usize, usize),
    /// Packets (and expressions with any) past classic BPF's backward-jump budget.
    cbpf_backward_jumps: (usize, usize),
    per_link: BTreeMap<&'static str, (usize, usize, usize)>,
    coverage: BTreeMap<&'static str, (usize, usize, usize)>,
    failures: Vec<(usize, Failure)>,
    optimizer: Vec<usize>,
}

fn check_all(oracle: &Oracle, sets: &[LinkSet], cases: &[Case]) -> Vec<Checked> {
    let workers = 2;
    let mut results: Vec<Option<Checked>> = vec![None; cases.len()];
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                s.spawn(move || {
                    cases
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| i % workers == w)
                        .map(|(i, c)| (i, oracle.check(&c.text, &sets[c.set], c.netmask)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (i, r) in h.join().expect("checker thread panicked") {
                results[i] = Some(r);
            }
        }
    });
    results.into_iter().map(|r| r.expect("every case checked")).collect()
}

fn tally(sets: &[LinkSet], cases: &[Case], results: &[Checked]) -> Tally {
    let mut t = Tally::default();
    for (i, (case, r)) in cases.iter().zip(results).enumerate() {
        t.total += 1;
        let ok = r.failure.is_none();
        let agreed = ok && r.documented.is_empty() && !r.unrunnable;
        let link = t.per_link.entry(sets[case.set].link.name()).or_default();
        link.0 += 1;
        if r.libpcap_accepts {
            link.1 += 1;
            link.2 += usize::from(agreed);
        }
        if r.libpcap_accepts {
            t.libpcap_accepts += 1;
            t.unrunnable += usize::from(r.unrunnable);
            t.agree += usize::from(agreed);
        } else if ok {
            t.both_reject += 1;
        }
        for d in &r.documented {
            *t.documented.entry(*d).or_default() += 1;
        }
        if r.unset_scratch > 0 {
            t.unset_scratch.0 += r.unset_scratch;
            t.unset_scratch.1 += 1;
        }
        if r.protochain_limit > 0 {
            t.protochain_limit.0 += r.protochain_limit;
            t.protochain_limit.1 += 1;
        }
        if r.cbpf_backward_jumps > 0 {
            t.cbpf_backward_jumps.0 += r.cbpf_backward_jumps;
            t.cbpf_backward_jumps.1 += 1;
        }
        if let Some(tree) = &case.tree {
            let mut kinds = Vec::new();
            tree.kinds(&mut kinds);
            let kinds: BTreeSet<&'static str> = kinds.into_iter().collect();
            for k in kinds {
                let e = t.coverage.entry(k).or_default();
                e.0 += 1;
                if r.libpcap_accepts {
                    e.1 += 1;
                    e.2 += usize::from(agreed);
                }
            }
        }
        if let Some(f) = &r.failure {
            t.failures.push((i, f.clone()));
        }
        if !r.optimizer_diffs.is_empty() {
            t.optimizer.push(i);
        }
    }
    t
}

/// The entry of libpcap-bugs.txt that stands for every divergence explained by bounds
/// alone (see [`bounds_only`]).
const BOUNDS_ENTRY: &str = "@bounds";

fn known_libpcap_bugs() -> BTreeSet<String> {
    let path = format!("{}/../../testdata/pflang/libpcap-bugs.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(|l| l.split("\t#").next().unwrap_or("").trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Packets on which libpcap's optimized and unoptimized programs for `expr` disagree
/// (`None` when libpcap refuses the expression).
fn libpcap_divergence(expr: &str, set: &LinkSet, netmask: Option<u32>) -> Option<Vec<usize>> {
    let mask = netmask.unwrap_or(libpcap::NETMASK_UNKNOWN);
    let unopt = lp_compile(expr, set.dlt, false, mask).ok()?;
    let opt = lp_compile(expr, set.dlt, true, mask);
    let diffs = set.packets.iter().enumerate().filter(|(_, p)| {
        let lp = lp_verdict(&unopt, p);
        match &opt {
            Ok(prog) => lp_verdict(prog, p) != lp,
            Err(m) if m.contains("rejects all packets") => lp != Some(false),
            Err(_) => true,
        }
    });
    Some(diffs.map(|(i, _)| i).collect())
}

/// Whether libpcap's optimized and unoptimized programs for `expr` agree, on every packet
/// where they disagreed, once the packet is padded with zeros (so that no load runs out of
/// captured bytes; the wire length stays): the optimizer then changed only which
/// out-of-bounds loads abort.
fn bounds_only(expr: &str, set: &LinkSet, netmask: Option<u32>, diffs: &[usize]) -> bool {
    let mask = netmask.unwrap_or(libpcap::NETMASK_UNKNOWN);
    let (Ok(unopt), Ok(opt)) =
        (lp_compile(expr, set.dlt, false, mask), lp_compile(expr, set.dlt, true, mask))
    else {
        return false;
    };
    !diffs.is_empty()
        && diffs.iter().all(|&i| {
            let p = &set.packets[i];
            let mut data = p.data.clone();
            data.resize(p.data.len().max(p.wire_len as usize) + 4096, 0);
            libpcap::required().run(&unopt, &data, p.wire_len)
                == libpcap::required().run(&opt, &data, p.wire_len)
        })
}

/// Shrinks and describes failures and optimizer bugs, prints the summary, and returns the
/// failure report (empty when weir agrees everywhere).
fn report(title: &str, oracle: &Oracle, sets: &[LinkSet], cases: &[Case], t: &Tally) -> String {
    println!(
        "{title}: {} expressions; libpcap accepts {} (weir agrees on {}, libpcap cannot run {}); \
         both reject {}; failures {}; libpcap optimizer disagrees on {}",
        t.total,
        t.libpcap_accepts,
        t.agree,
        t.unrunnable,
        t.both_reject,
        t.failures.len(),
        t.optimizer.len()
    );
    println!("  documented differences (expressions; not failures, see the module doc):");
    for d in Documented::ALL {
        println!("    {:>6}  {}", t.documented.get(&d).copied().unwrap_or(0), d.label());
    }
    println!(
        "  packets not compared: {} reading a scratch slot nothing stored (in {} expressions); \
         {} past the protochain walk's {} hops, a documented weir limit (in {} expressions)",
        t.unset_scratch.0,
        t.unset_scratch.1,
        t.protochain_limit.0,
        documented::PROTOCHAIN_HOPS,
        t.protochain_limit.1
    );
    println!(
        "  packets where only classic BPF differs, its protochain walks past 64 backward \
         jumps in all (documented): {} (in {} expressions)",
        t.cbpf_backward_jumps.0, t.cbpf_backward_jumps.1
    );
    for (link, (n, acc, agree)) in &t.per_link {
        println!(
            "  link {link:<10} {n:>6} expressions, libpcap accepts {acc:>6}, agreed {agree:>6}"
        );
    }
    if !t.coverage.is_empty() {
        println!("  per-primitive coverage (expressions containing it: generated / libpcap accepts / agreed):");
        for (k, (n, acc, agree)) in &t.coverage {
            println!("    {k:<24} {n:>6} {acc:>6} {agree:>6}");
        }
    }

    // Failures by class, most serious first.
    let mut classes: BTreeMap<(u8, String), Vec<usize>> = BTreeMap::new();
    for (i, f) in &t.failures {
        classes.entry((f.rank(), f.class())).or_default().push(*i);
    }
    let mut report = String::new();
    if !classes.is_empty() {
        report.push_str(&format!("{} failures in {} classes:\n", t.failures.len(), classes.len()));
        for ((_, class), idx) in &classes {
            report.push_str(&format!("  {:>6} x {class}\n", idx.len()));
        }
    }
    // Shrink and show examples round-robin over the classes (most serious first), so that
    // every class is seen; verdict failures get the remaining room.
    let mut shown = BTreeSet::new();
    let mut shrunk_count = 0;
    let mut details = Vec::new();
    let queues: Vec<(&String, &Vec<usize>)> = classes.iter().map(|((_, c), v)| (c, v)).collect();
    let mut round = 0;
    while shrunk_count < SHRINK_LIMIT && details.len() < SHOW_LIMIT {
        let mut progressed = false;
        for (class, idx) in &queues {
            if round > 0 && class.as_str() != "verdict" {
                continue;
            }
            let Some(&i) = idx.get(round) else { continue };
            if shrunk_count >= SHRINK_LIMIT || details.len() >= SHOW_LIMIT {
                break;
            }
            progressed = true;
            shrunk_count += 1;
            let case = &cases[i];
            let set = &sets[case.set];
            let failing = |text: &str| {
                oracle.check(text, set, case.netmask).failure.is_some_and(|f| f.class() == **class)
            };
            let text = match &case.tree {
                Some(tree) => pflang_gen::shrink(tree, SHRINK_BUDGET, failing).text,
                None => case.text.clone(),
            };
            if !shown.insert((case.set, text.clone())) {
                continue;
            }
            let r = oracle.check(&text, set, case.netmask);
            let Some(f) = r.failure else { continue };
            details.push(describe(&text, &case.text, set, case.netmask, &f));
        }
        if !progressed {
            break;
        }
        round += 1;
    }
    for d in &details {
        report.push_str(d);
    }

    // libpcap's optimizer against itself: reported, never a weir failure.
    if !t.optimizer.is_empty() {
        let known = known_libpcap_bugs();
        let mut minimal = BTreeMap::new();
        for &i in t.optimizer.iter().take(OPTIMIZER_SHRINK_LIMIT) {
            let case = &cases[i];
            let set = &sets[case.set];
            let text = match &case.tree {
                Some(tree) => {
                    let diverges = |text: &str| {
                        libpcap_divergence(text, set, case.netmask).is_some_and(|d| !d.is_empty())
                    };
                    pflang_gen::shrink(tree, SHRINK_BUDGET, diverges).text
                }
                None => case.text.clone(),
            };
            minimal.entry((set.link.name(), text)).or_insert(i);
        }
        // Minimal forms libpcap-bugs.txt does not explain, with their first packet.
        let mut bounds = 0;
        let mut new = Vec::new();
        for ((link, text), &i) in &minimal {
            let case = &cases[i];
            let set = &sets[case.set];
            let diffs = libpcap_divergence(text, set, case.netmask).unwrap_or_default();
            if bounds_only(text, set, case.netmask, &diffs) {
                bounds += 1;
                if known.contains(BOUNDS_ENTRY) {
                    continue;
                }
            }
            if !known.contains(text) {
                new.push((link, text, set, diffs.first().copied()));
            }
        }
        println!(
            "  libpcap optimizer bug: optimized != unoptimized libpcap on {} expressions \
             ({} minimal forms: {bounds} differ only in which short packets abort, {} not \
             explained by libpcap-bugs.txt); weir follows unoptimized",
            t.optimizer.len(),
            minimal.len(),
            new.len()
        );
        for (link, text, set, first) in new.iter().take(10) {
            if let Some(p) = first {
                let pkt = &set.packets[*p];
                println!(
                    "    [{link}] `{text}` packet #{p} {}: {}",
                    pkt.description,
                    hex(&pkt.data)
                );
            }
        }
    }
    report
}

fn describe(
    text: &str,
    original: &str,
    set: &LinkSet,
    netmask: Option<u32>,
    f: &Failure,
) -> String {
    let mask = netmask.map_or(String::new(), |m| format!(", netmask {m:#010x}"));
    let mut s = format!("\n[{}{mask}] {}\n  minimal: {text}\n", set.link.name(), f.class());
    if original != text {
        s.push_str(&format!("  from:    {original}\n"));
    }
    match f {
        Failure::WeirRejects(m) => s.push_str(&format!("  weir: {m}\n")),
        Failure::WeirAccepts(m) => s.push_str(&format!("  libpcap: {m}\n")),
        Failure::WeirPanics(m) => s.push_str(&format!("  panic: {m}\n")),
        Failure::Emit(m) => s.push_str(&format!("  emitter: {m}\n")),
        Failure::Verdict(d) => {
            let p = &set.packets[d.packet];
            if let Some(lp_text) = &d.libpcap_text {
                s.push_str(&format!("  libpcap compiled: {lp_text}\n"));
            }
            let cbpf = match d.cbpf {
                Some(true) => "accept",
                Some(false) => "reject",
                None => "none (over the size limit)",
            };
            s.push_str(&format!(
                "  packet #{} ({}; {} of {} bytes): {}\n  libpcap unoptimized: {}, \
                 libpcap optimized: {}, weir: {} (weir unoptimized: {}, weir classic BPF: {})\n",
                d.packet,
                p.description,
                p.data.len(),
                p.wire_len,
                hex(&p.data),
                show(d.libpcap),
                show(d.libpcap_opt),
                if d.weir { "accept" } else { "reject" },
                if d.weir_unopt { "accept" } else { "reject" },
                cbpf,
            ));
        }
    }
    s
}

/// Generated cases: most on Ethernet, a share on each other link type, a share with a
/// known netmask.
fn generated_cases(seed: u64, count: usize, sets: &[LinkSet]) -> Vec<Case> {
    let mut g = Generator::new(seed);
    let mut pick = weir_testkit::SplitMix64::new(seed ^ 0x11f7);
    (0..count)
        .map(|_| {
            let tree = g.expr();
            let set = if pick.chance(80) { 0 } else { 1 + pick.below_usize(sets.len() - 1) };
            let netmask = if pick.chance(30) { Some(NETMASK) } else { None };
            Case { text: tree.render(), tree: Some(tree), set, netmask }
        })
        .collect()
}

#[test]
fn generated_expressions_agree_with_libpcap() {
    let start = Instant::now();
    let names = NameDb::system_files_only();
    let oracle = Oracle { names: &names };
    let sets = link_sets();
    let count = crate::env_number("WEIR_DIFF_COUNT").map_or(DEFAULT_COUNT, |n| n as usize);
    let mut seeds = vec![FIXED_SEED];
    seeds.extend(crate::env_number("WEIR_DIFF_SEED"));
    let mut reports = Vec::new();
    for seed in seeds {
        let cases = generated_cases(seed, count, &sets);
        let results = check_all(&oracle, &sets, &cases);
        let t = tally(&sets, &cases, &results);
        // The generator must keep producing expressions libpcap accepts, or the test
        // checks little.
        assert!(
            t.libpcap_accepts * 3 >= t.total,
            "only {} of {} generated expressions are valid for libpcap",
            t.libpcap_accepts,
            t.total
        );
        let title =
            format!("differential seed {seed:#x}, {} packets per link type", sets[0].packets.len());
        let r = report(&title, &oracle, &sets, &cases, &t);
        if !r.is_empty() {
            reports.push(format!("seed {seed:#x}: {r}"));
        }
    }
    println!("differential run took {:.1} s", start.elapsed().as_secs_f64());
    assert!(reports.is_empty(), "weir disagrees with libpcap:\n{}", reports.join("\n"));
}

/// Expressions per link type of [`link_type_sets`] (`WEIR_LINK_DIFF_COUNT` changes it).
const LINK_DEFAULT_COUNT: usize = 1_500;

/// The serial and wireless link types (weir_testkit::reframe), each with the Ethernet
/// corpus re-framed in its own variants (radio headers, 802.11 frame kinds, PPP and HDLC
/// protocols), on 1,200 corpus packets plus the edge cases.
fn link_type_sets() -> Vec<LinkSet> {
    let mut eth = weir_testkit::corpus(CORPUS_SEED, CORPUS_PACKETS);
    eth.extend(weir_testkit::edge_cases());
    eth.extend(weir_testkit::link_edge_cases());
    eth.extend(weir_testkit::net_edge_cases());
    weir_testkit::reframe::link_types()
        .map(|link| LinkSet {
            link,
            dlt: link.dlt() as i32,
            packets: eth
                .iter()
                .map(|p| weir_testkit::relink(p, link).expect("reframe knows the link type"))
                .collect(),
        })
        .collect()
}

/// Each serial and wireless link type on its own: generated expressions with a share of
/// the keywords of those links (802.11 `type`/`subtype`/`dir`, `wlan addr1`..., `radio[]`),
/// libpcap unoptimized and optimized against weir, per link type.
#[test]
fn link_types_agree_with_libpcap() {
    let start = Instant::now();
    let names = NameDb::system_files_only();
    let oracle = Oracle { names: &names };
    let count =
        crate::env_number("WEIR_LINK_DIFF_COUNT").map_or(LINK_DEFAULT_COUNT, |n| n as usize);
    // WEIR_LINK_DIFF_ONLY: a comma-separated list of link type names to run alone (the
    // seeds stay each type's own).
    let only: Option<Vec<LinkType>> = std::env::var("WEIR_LINK_DIFF_ONLY")
        .ok()
        .map(|v| v.split(',').filter_map(|n| LinkType::from_name(n.trim())).collect());
    let mut reports = Vec::new();
    for set in link_type_sets() {
        if only.as_ref().is_some_and(|o| !o.contains(&set.link)) {
            continue;
        }
        // Seeded by the link type's own number, so that the order of the list changes
        // nothing.
        let seed = FIXED_SEED ^ (0x1111 * (u64::from(set.link.dlt()) + 1));
        let mut g = Generator::new(seed);
        g.link_share = if set.link.is_ieee80211() { 20 } else { 8 };
        g.aid_share = if set.link.is_arcnet() { 12 } else { 0 };
        g.atm_share = if set.link == LinkType::SunAtm { 15 } else { 0 };
        g.pf_share = if set.link == LinkType::Pflog { 15 } else { 0 };
        // The SS7 tests compile on MTP2 only; on MTP3 a few check libpcap's refusals.
        g.mtp_share = match set.link {
            LinkType::Mtp2 | LinkType::Mtp2WithPhdr | LinkType::Erf => 40,
            LinkType::Mtp3 => 4,
            _ => 0,
        };
        let mut pick = weir_testkit::SplitMix64::new(seed ^ 0x11f7);
        // libpcap refuses every protocol test on IP over InfiniBand, NFLOG, DSA tags, LAPD
        // ... (`protocol_tests_refused`), so few generated expressions compile there (about
        // one in 29: 195 to 213 of 6,000 in the runs seen): four times as many, and a
        // fortieth must.
        // On the link types known only by name (USB, CAN ...) fewer still: eight times as
        // many, and a fortieth must.
        let ipoib = weir_pflang::protocol_tests_refused(set.link).is_some();
        let (count, share) = match set.link {
            LinkType::Opaque(_) => (count * 8, 40),
            _ if ipoib => (count * 4, 40),
            _ => (count, 4),
        };
        let cases: Vec<Case> = (0..count)
            .map(|_| {
                let tree = g.expr();
                let netmask = if pick.chance(30) { Some(NETMASK) } else { None };
                Case { text: tree.render(), tree: Some(tree), set: 0, netmask }
            })
            .collect();
        let sets = [set];
        let results = check_all(&oracle, &sets, &cases);
        let t = tally(&sets, &cases, &results);
        let (n, acc, agree) = t.per_link.values().copied().next().unwrap_or_default();
        println!(
            "link {:<20} {n:>5} expressions, libpcap accepts {acc:>5}, agreed {agree:>5}",
            sets[0].link.name()
        );
        assert!(
            t.libpcap_accepts * share >= t.total,
            "{}: only {} of {} generated expressions are valid for libpcap",
            sets[0].link.name(),
            t.libpcap_accepts,
            t.total
        );
        let title = format!("{} seed {seed:#x}", sets[0].link.name());
        let r = report(&title, &oracle, &sets, &cases, &t);
        if !r.is_empty() {
            reports.push(r);
        }
    }
    println!("link-type differential run took {:.1} s", start.elapsed().as_secs_f64());
    assert!(reports.is_empty(), "weir disagrees with libpcap:\n{}", reports.join("\n"));
}

/// ARCnet addresses and protocol IDs, and the link-level keywords of the newer link types,
/// spelled out: each expression on each of these link types agrees with libpcap (accepted
/// or refused alike, same verdicts), whatever the generator happens to draw.
#[test]
fn newer_link_keywords_agree_with_libpcap() {
    let names = NameDb::system_files_only();
    let oracle = Oracle { names: &names };
    let exprs = [
        "link host $ff",
        "link src $5",
        "link dst $05",
        "ether src and dst $a",
        "link src or dst host $D3",
        "link host $ff or $1",
        "host $ff",
        "link net $ff",
        "link addr1 $ff",
        "link ta $d0",
        "broadcast",
        "multicast",
        "ether multicast",
        "ip",
        "arp",
        "rarp",
        "ip6",
        "atalk",
        "ipx",
        "iso",
        "iso proto 0x83",
        "isis",
        "clnp",
        "esis",
        "l1",
        "ip host 192.168.1.1",
        "tcp port 80",
        "vlan",
        "llc",
        "type data",
        "dir tods",
        "wlan host ff:ff:ff:ff:ff:ff",
        "pppoes and ip",
        "geneve and ip",
    ];
    let sets: Vec<LinkSet> = link_type_sets()
        .into_iter()
        .filter(|s| {
            matches!(s.link, LinkType::ArcnetBsd | LinkType::ArcnetLinux | LinkType::FrameRelay)
                || s.link == LinkType::Ppi
        })
        .collect();
    assert_eq!(sets.len(), 4);
    let cases: Vec<Case> = (0..sets.len())
        .flat_map(|set| {
            exprs.iter().map(move |e| Case {
                tree: None,
                text: (*e).to_string(),
                set,
                netmask: Some(NETMASK),
            })
        })
        .collect();
    let results = check_all(&oracle, &sets, &cases);
    let t = tally(&sets, &cases, &results);
    // Each link type accepts a good share of them (the test would prove little otherwise).
    for (link, (n, acc, _)) in &t.per_link {
        assert!(acc * 3 >= *n, "{link}: libpcap accepts only {acc} of {n}");
    }
    let r = report("newer link keywords", &oracle, &sets, &cases, &t);
    assert!(r.is_empty(), "weir disagrees with libpcap:\n{r}");
}

/// SunATM's keywords (`lane` and what follows it, `vpi`/`vci`, the abbreviations) and the
/// MAC-level tests of FDDI and Token Ring, spelled out: each expression on SunATM, FDDI and
/// Token Ring agrees with libpcap (accepted or refused alike, same verdicts).
#[test]
fn atm_and_lan_keywords_agree_with_libpcap() {
    let names = NameDb::system_files_only();
    let oracle = Oracle { names: &names };
    let exprs = [
        "lane",
        "lane and ip",
        "lane and ether host 0:11:22:33:44:1",
        "lane and broadcast",
        "lane and multicast",
        "lane and vlan and ip",
        "lane and mpls",
        "lane and pppoes and ip",
        "lane and lane and ip",
        "lane and llc",
        "lane and vpi 1",
        "lane and geneve and ip",
        "pppoes and lane",
        "ip and lane and ip",
        "vpi 0",
        "vpi > 3",
        "vci < 40",
        "vci != 5",
        "vci <= 16",
        "vpi (0 or 1)",
        "oam",
        "oamf4",
        "oamf4ec",
        "oamf4sc",
        "metac",
        "bcc",
        "sc",
        "ilmic",
        "connectmsg",
        "metaconnect",
        "ether host 0:11:22:33:44:1",
        "ether src 0:11:22:33:44:1",
        "ether dst host ff:ff:ff:ff:ff:ff",
        "ether src and dst 0:11:22:33:44:1",
        "ether addr1 0:11:22:33:44:1",
        "broadcast",
        "multicast",
        "ip broadcast",
        "ip6 multicast",
        "llc",
        "llc i",
        "not llc",
        "vlan",
        "mpls",
        "ip",
        "arp",
        "atalk",
        "aarp",
        "ipx",
        "stp",
        "iso",
        "isis",
        "netbeui",
        "ether proto 3",
        "host localhost",
        "tcp port 80",
        "pppoes and ip",
        "geneve and ether host 0:11:22:33:44:1",
    ];
    let sets: Vec<LinkSet> = link_type_sets()
        .into_iter()
        .filter(|s| matches!(s.link, LinkType::SunAtm | LinkType::Fddi | LinkType::TokenRing))
        .collect();
    assert_eq!(sets.len(), 3);
    let cases: Vec<Case> = (0..sets.len())
        .flat_map(|set| {
            exprs.iter().map(move |e| Case {
                tree: None,
                text: (*e).to_string(),
                set,
                netmask: Some(NETMASK),
            })
        })
        .collect();
    let results = check_all(&oracle, &sets, &cases);
    let t = tally(&sets, &cases, &results);
    for (link, (n, acc, _)) in &t.per_link {
        assert!(acc * 3 >= *n, "{link}: libpcap accepts only {acc} of {n}");
    }
    let r = report("ATM and LAN keywords", &oracle, &sets, &cases, &t);
    assert!(r.is_empty(), "weir disagrees with libpcap:\n{r}");
}

/// pflog's header tests and the direction and family tests of pflog and ipnet, spelled
/// out: each expression on PFLOG and IPNET agrees with libpcap (accepted or refused alike,
/// same verdicts).
#[test]
fn pflog_and_ipnet_keywords_agree_with_libpcap() {
    let names = NameDb::system_files_only();
    let oracle = Oracle { names: &names };
    let exprs = [
        "ifname em0",
        "on pppoe0",
        "ifname abcdefghijklmno",
        "ifname abcdefghijklmnop",
        "ruleset main",
        "rset foo",
        "rnr 3",
        "rulenum 4294967295",
        "srnr 1",
        "subrulenum 4294967295",
        "reason match",
        "reason SHORT",
        "reason 3",
        "reason nosuch",
        "action pass",
        "action block",
        "action synproxy-drop",
        "action nosuch",
        "inbound",
        "outbound",
        "ip",
        "ip6",
        "arp",
        "iso",
        "ether proto 0x800",
        "ether proto 3",
        "host 10.0.0.3",
        "tcp port 80",
        "ip6 multicast",
        "ether host 0:11:22:33:44:1",
        "broadcast",
        "vlan",
        "mpls",
        "llc",
        "pppoes and ip",
        "pppoes 1",
        "ip and pppoes and ip",
        "pppoes and rnr 1",
        "geneve and ip",
        "0 > 0 or host 10.0.0.3",
        "less 64",
    ];
    let sets: Vec<LinkSet> = link_type_sets()
        .into_iter()
        .filter(|s| matches!(s.link, LinkType::Pflog | LinkType::Ipnet))
        .collect();
    assert_eq!(sets.len(), 2);
    let cases: Vec<Case> = (0..sets.len())
        .flat_map(|set| {
            exprs.iter().map(move |e| Case {
                tree: None,
                text: (*e).to_string(),
                set,
                netmask: Some(NETMASK),
            })
        })
        .collect();
    let results = check_all(&oracle, &sets, &cases);
    let t = tally(&sets, &cases, &results);
    for (link, (n, acc, _)) in &t.per_link {
        assert!(acc * 3 >= *n, "{link}: libpcap accepts only {acc} of {n}");
    }
    let r = report("pflog and ipnet keywords", &oracle, &sets, &cases, &t);
    assert!(r.is_empty(), "weir disagrees with libpcap:\n{r}");
}

fn everyday_list() -> Vec<String> {
    let path = format!("{}/../../testdata/pflang/everyday.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn everyday_expressions_agree_with_libpcap() {
    let names = NameDb::system_files_only();
    let oracle = Oracle { names: &names };
    let sets = link_sets();
    let exprs = everyday_list();
    assert!(exprs.len() >= 200, "only {} everyday expressions", exprs.len());
    let mut invalid = Vec::new();
    for e in &exprs {
        if let Err(m) = libpcap::required().compile_with_netmask(e, 1, false, NETMASK) {
            invalid.push(format!("libpcap rejects everyday expression `{e}`: {m}"));
        }
    }
    assert!(invalid.is_empty(), "{}", invalid.join("\n"));
    let cases: Vec<Case> = exprs
        .iter()
        .map(|e| Case { tree: None, text: e.clone(), set: 0, netmask: Some(NETMASK) })
        .collect();
    let results = check_all(&oracle, &sets, &cases);
    let t = tally(&sets, &cases, &results);
    let r = report("everyday expressions", &oracle, &sets, &cases, &t);
    assert!(r.is_empty(), "weir disagrees with libpcap:\n{r}");
}

/// Every link type's packet set means something to libpcap: `ip` matches a good share.
#[test]
fn every_link_type_has_ip_traffic() {
    let sets = link_sets();
    assert_eq!(sets.len(), 6);
    assert!(sets.iter().all(|s| s.packets.len() == sets[0].packets.len()));
    for s in &sets {
        let prog = lp_compile("ip", s.dlt, false, libpcap::NETMASK_UNKNOWN).expect("`ip` compiles");
        let hits = s.packets.iter().filter(|p| lp_verdict(&prog, p) == Some(true)).count();
        assert!(hits > s.packets.len() / 8, "{}: `ip` matches only {hits} packets", s.link.name());
    }
}

/// The protochain depth the documented limit is about is weir's real one: on IPv6 packets
/// with `n` destination-options headers before UDP (each hop then crosses one, possibly
/// behind a VLAN tag), weir finds UDP exactly when `n` is at most
/// [`documented::PROTOCHAIN_HOPS`], libpcap 1.10 for every `n`, and the packet walk the
/// test uses to recognise the limit says "too long" exactly when weir gives up.
#[test]
fn protochain_depth_is_the_documented_one() {
    use weir_testkit::wire;
    let names = NameDb::system_files_only();
    let mac = [0x00, 0x11, 0x22, 0x33, 0x44, 0x55];
    let udp = wire::udp(5000, 53, &[]);
    for (expr, tags) in [
        ("ip6 protochain 17", Vec::new()),
        ("vlan and protochain 17", vec![wire::VlanTag { tpid: 0x8100, tci: 7 }]),
    ] {
        let filter = weir_pflang::compile(expr, &Options::new(LinkType::Ethernet), &names)
            .map(weir_filter::opt::optimize_owned)
            .unwrap_or_else(|e| panic!("{}", e.render(expr)));
        let lp = lp_compile(expr, 1, false, libpcap::NETMASK_UNKNOWN).expect("libpcap compiles");
        for n in (0..=12).chain(documented::PROTOCHAIN_HOPS - 2..=documented::PROTOCHAIN_HOPS + 4) {
            let mut payload = udp.clone();
            let mut next = 17;
            for _ in 0..n {
                let mut header = wire::ipv6_extension(next, &[1, 4, 0, 0, 0, 0]);
                header.extend_from_slice(&payload);
                payload = header;
                next = 60;
            }
            let ip = wire::ipv6([0x20; 16], [0x21; 16], next, 64, 0, &payload);
            let data = wire::ethernet(mac, mac, &tags, 0x86dd, &ip);
            let packet = Packet {
                wire_len: u32::try_from(data.len()).expect("small"),
                data,
                ts_sec: 0,
                ts_usec: 0,
                description: format!("{n} headers"),
            };
            let within = n <= documented::PROTOCHAIN_HOPS;
            assert_eq!(lp_verdict(&lp, &packet), Some(true), "libpcap, {expr}, {n} headers");
            assert_eq!(run_weir(&filter, &packet), within, "weir, {expr}, {n} headers");
            assert_eq!(
                documented::protochain_walk_exceeds(LinkType::Ethernet, &packet.data),
                !within,
                "the packet walk, {n} headers"
            );
        }
    }
}

/// Every documented difference the test sets aside is explained in libpcap-bugs.txt, under
/// the class entry the test knows it by (the per-packet ones too).
#[test]
fn every_documented_difference_is_listed() {
    let known = known_libpcap_bugs();
    let entries = Documented::ALL.iter().map(|d| d.entry());
    for entry in entries.chain([
        BOUNDS_ENTRY,
        "@limit:protochain-depth",
        "@limit:cbpf-backward-jumps",
        "@unset-scratch",
        "@masked-out-words",
    ]) {
        assert!(known.contains(entry), "libpcap-bugs.txt does not list {entry}");
    }
}

/// Each documented difference is recognised on an expression that shows it, and only
/// there: the classification machinery itself is tested, not just trusted.
#[test]
fn documented_differences_are_recognised() {
    let names = NameDb::system_files_only();
    let oracle = Oracle { names: &names };
    let sets = link_sets();
    let ethernet = &sets[0];
    let raw = sets.iter().find(|s| s.link == LinkType::Raw).expect("raw IP set");
    let documented = |set: &LinkSet, expr: &str| {
        let r = oracle.check(expr, set, None);
        assert_eq!(r.failure, None, "{expr} on {}", set.link.name());
        r
    };
    // No direction or interface field in the capture: libpcap (reading a capture file) and
    // weir both refuse, which is agreement, not a documented difference.
    for (set, expr) in [(ethernet, "inbound"), (raw, "ip and ifindex 2")] {
        let r = documented(set, expr);
        assert!(!r.libpcap_accepts && r.documented.is_empty(), "{expr}: {r:?}");
    }
    assert_eq!(documented(ethernet, "byte 14 & 17").documented, [Documented::ByteAndOr]);
    assert_eq!(documented(ethernet, "ip or byte 59 | 0").documented, [Documented::ByteAndOr]);
    assert!(documented(ethernet, "byte 14 = 69").documented.is_empty());
    assert_eq!(
        documented(ethernet, "geneve or geneve or geneve").documented,
        [Documented::ScratchBudget]
    );
    let chain = documented(ethernet, "ip6 protochain 6");
    assert!(chain.documented.is_empty() && chain.protochain_limit > 0, "{chain:?}");
    let walks = documented(ethernet, "ip6 protochain 17 or ip6 protochain 6");
    assert!(
        walks.documented.is_empty() && walks.cbpf_backward_jumps > 0 && walks.protochain_limit > 0,
        "{walks:?}"
    );
    let one = documented(ethernet, "ip6 protochain 17");
    assert_eq!(one.cbpf_backward_jumps, 0, "{one:?}");
    let tunnel = documented(ethernet, "geneve or ip");
    assert!(tunnel.documented.is_empty() && tunnel.unset_scratch > 0, "{tunnel:?}");
    // A long enough alternative of distinct tests overflows classic BPF; weir's IR still
    // agrees with libpcap.
    let terms: Vec<String> =
        (0..4000).map(|i| format!("ip[{}] + ip[{}] = {}", i % 40, i / 40 % 40, i % 500)).collect();
    let long = [500, 1000, 2000, 4000]
        .into_iter()
        .map(|n| terms[..n].join(" or "))
        .find(|e| {
            let f = weir_pflang::compile(e, &Options::new(LinkType::Ethernet), &names)
                .map(weir_filter::opt::optimize_owned);
            matches!(
                f.map(|f| weir_filter::emit::cbpf::emit(&f)),
                Ok(Err(EmitError::TooLong { .. }))
            )
        })
        .expect("4000 tests fit in 4096 classic BPF instructions: update this test");
    assert_eq!(documented(ethernet, &long).documented, [Documented::CbpfTooLong], "{long}");
    // And a plain mismatch is still a failure: weir's `byte 14 & 17` against libpcap's
    // `byte 14 = 17` must not pass for the byte bug.
    let mismatch = oracle.compare(
        "byte 14 & 17",
        Some("byte 14 = 17"),
        ethernet,
        None,
        &Features::of("byte 14 & 17"),
    );
    assert!(matches!(mismatch.failure, Some(Failure::Verdict(_))), "{mismatch:?}");
}
