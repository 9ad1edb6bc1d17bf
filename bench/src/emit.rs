//! `weir-bench emit`: how tight weir's emitted programs are next to libpcap's, per filter
//! (issue 13, items 3 and 4). One run gives, for every filter of the bench list and of the
//! everyday list (bench/everyday.txt):
//!
//! - classic BPF length: libpcap's optimized program (what `tcpdump -d` prints), weir's
//!   classic program before the flow-graph passes (`cbpf::emit_unoptimized` of the
//!   optimized IR) and after (`cbpf::emit`);
//! - eBPF length: the eBPF emitter's own program (before), what weir gives now
//!   (`weir::emit_ebpf`, after) and libpcap's program through weir-cbpf's translation;
//! - what weir's and the translated program execute per packet, exactly (weir's interpreter
//!   over the same packets): eBPF instructions, and legacy packet loads among them, each of
//!   which the kernel turns into a helper call;
//! - kernel ns per packet (`BPF_PROG_TEST_RUN`, net of an accept-all program) of those three
//!   eBPF programs, after checking that each gives libpcap's verdict on every packet. The
//!   programs take turns packet by packet ([`KernelTurns`]); the ratios are medians of
//!   per-round ratios with their quartiles, beside an A/A row (the translated program loaded
//!   twice, timed against itself) that gives the noise floor of that row's ratio. Weir's
//!   program and the translation are each loaded twice and compared in two pairs: where a
//!   program's code lands in the kernel moves its time by several percent for as long as it
//!   stays loaded, so a verdict that one pair alone gives does not repeat in the next run.

use weir_cbpf::translate::translate;
use weir_filter::emit::cbpf;
use weir_interp::{Config, Interpreter};
use weir_isa::cbpf::{decode, CbpfInsn, SockFilter};
use weir_pflang::names::NameDb;
use weir_pflang::LinkType;
use weir_program::abi::Bindings;
use weir_program::exec::Input;
use weir_program::{ProgType, Program, Verified};
use weir_sys::libpcap;

use crate::filterlist::{self, BenchFilter};
use crate::filters::compile_weir;
use crate::kernel_runs::{self, KernelTurns};
use crate::record::{self, Log};
use crate::timing::{per_round, Samples, Verdict};
use crate::workload::{self, Source, Workload};

/// The everyday list: filters people type.
const EVERYDAY: &str = include_str!("../everyday.txt");

/// `weir-bench emit` options.
#[derive(Debug, clap::Args)]
pub struct EmitArgs {
    /// Timed kernel rounds, each every program on every packet in turn (default 11; 3 with
    /// --quick).
    #[arg(long, value_name = "N")]
    pub rounds: Option<usize>,
    /// Test-run repetitions per packet (default 200; 10 with --quick).
    #[arg(long, value_name = "N")]
    pub kernel_repeat: Option<u32>,
    /// Smoke mode.
    #[arg(long)]
    pub quick: bool,
    /// Load the translation before weir's program (the load order decides where each
    /// program's code lands in the kernel; a verdict must not depend on it).
    #[arg(long)]
    pub translation_first: bool,
    /// Write bench/records/<date>-emit.txt.
    #[arg(long)]
    pub record: bool,
}

struct Lengths {
    pcap: usize,
    /// `None`: weir's classic program would pass classic BPF's 4096 instructions.
    before: Option<usize>,
    after: Option<usize>,
    /// Whether weir's eBPF program has as many instructions as the translation.
    equal_ebpf: bool,
}

/// Below this net (ns per packet) the translated program's time is within what the kernel's
/// test run resolves, and a ratio to it says nothing.
const FLOOR_NS: f64 = 2.0;

/// One row's kernel comparison, per-round ratios of two loads of each program: weir /
/// pcap and weir-again / pcap-again, and the A/A pairs pcap-again / pcap and weir-again /
/// weir.
struct KernelRow {
    pcap_ns: f64,
    /// Weir's program is the translation, instruction for instruction: the kernel compiles
    /// both to the same code, and any difference in time is where that code landed.
    identical: bool,
    now: Samples,
    now_again: Samples,
    aa: Samples,
    aa_weir: Samples,
}

/// A kernel row's verdict: [`Verdict`] over both loads of each program, unless the
/// programs are one (see [`KernelRow::identical`]) or the row is under [`FLOOR_NS`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RowVerdict {
    Judged(Verdict),
    Same,
    Floor,
}

impl KernelRow {
    /// Slower (faster) when both pairs' quartiles lie above (below) 1.0 and both A/A
    /// pairs' quartiles: one pair alone is one placement of each program's code.
    fn verdict(&self) -> RowVerdict {
        if self.identical {
            return RowVerdict::Same;
        }
        if self.pcap_ns < FLOOR_NS {
            return RowVerdict::Floor;
        }
        RowVerdict::Judged(Verdict::of_all(
            &[&self.now, &self.now_again],
            &[&self.aa, &self.aa_weir],
        ))
    }
}

impl RowVerdict {
    fn word(self) -> &'static str {
        match self {
            RowVerdict::Judged(verdict) => verdict.word(),
            RowVerdict::Same => "same",
            RowVerdict::Floor => "floor",
        }
    }
}

/// The kernel rows' summary: medians over 1.0x, verdicts, the geometric mean.
#[derive(Default)]
struct Judged {
    rows: usize,
    over: Vec<String>,
    slower: Vec<String>,
    faster: usize,
    same: usize,
    floor: usize,
    aa_widest: f64,
    log_sum: f64,
    logs: usize,
}

impl Judged {
    fn add(&mut self, label: &str, equal_ebpf: bool, k: &KernelRow) {
        self.rows += 1;
        let verdict = k.verdict();
        let median = k.now.median();
        let (aa_q1, aa_q3) = k.aa.quartiles();
        let named = format!(
            "{label} {median:.2}x{}",
            if equal_ebpf { "" } else { " (eBPF lengths differ)" }
        );
        match verdict {
            RowVerdict::Floor => {
                self.floor += 1;
                return;
            }
            RowVerdict::Same => {
                self.same += 1;
                return;
            }
            RowVerdict::Judged(Verdict::Slower) => self.slower.push(named.clone()),
            RowVerdict::Judged(Verdict::Faster) => self.faster += 1,
            RowVerdict::Judged(Verdict::Unresolved) => {}
        }
        self.aa_widest = self.aa_widest.max(aa_q3 - aa_q1);
        if median > 1.0 {
            self.over.push(named);
        }
        if median > 0.0 {
            self.log_sum += median.ln();
            self.logs += 1;
        }
    }

    fn report(&self, log: &mut Log) {
        let judged = self.rows - self.floor - self.same;
        log.line(format!(
            "kernel: {} rows the same program as the translation; {} of {judged} other rows \
             judged (net over {FLOOR_NS} ns) have a median x now over 1.0; geomean {:.2}x; slower \
             beyond the A/A floor: {}, faster: {}, not told apart: {}; the widest A/A \
             interquartile range {:.2}",
            self.same,
            self.over.len(),
            (self.log_sum / self.logs.max(1) as f64).exp(),
            self.slower.len(),
            self.faster,
            judged - self.slower.len() - self.faster,
            self.aa_widest
        ));
        for row in &self.slower {
            log.line(format!("  slower: {row}"));
        }
    }
}

fn count(n: Option<usize>) -> String {
    n.map_or("-".into(), |n| n.to_string())
}

pub fn run(args: &EmitArgs, command: &str) -> Result<bool, String> {
    let rounds = args.rounds.unwrap_or(if args.quick { 3 } else { 11 }).max(1);
    let repeat = args.kernel_repeat.unwrap_or(if args.quick { 10 } else { 200 }).max(1);
    let mut list = filterlist::filters(&[], args.quick)?;
    let everyday = filterlist::parse(EVERYDAY, args.quick)?;
    let bench_count = list.len();
    list.extend(everyday);
    let packets = Source::Generated.load(workload::HOT_PACKETS)?;
    let w = Workload::new("hot", &packets, workload::HOT_PACKETS);
    let kernel_state = weir_sys::kernel::available().map_err(|e| e.to_string());
    let kernel_off = kernel_runs::unusable(&w, &kernel_state);
    let pcap = libpcap::load()?;
    let names = NameDb::system();
    let mut log = Log::default();
    let notes = vec![
        "cbpf: instructions; pcap = tcpdump -d (libpcap's optimizer), before = weir's classic \
         program without the flow-graph passes (emit_unoptimized of the optimized IR), after = \
         cbpf::emit, same = \"=\" when weir's classic program is libpcap's, instruction for \
         instruction"
            .to_string(),
        "ebpf: instructions; direct = the eBPF emitter's own program (before), weir = \
         weir::emit_ebpf (after), pcap = libpcap's program through weir-cbpf's translation"
            .to_string(),
        "exec: per packet, what weir's program (w) and the translation (p) execute on weir's \
         interpreter over the same packets: eBPF instructions / legacy packet loads (each a \
         helper call in the kernel)"
            .to_string(),
        format!(
            "ns: BPF_PROG_TEST_RUN (SCHED_CLS, JIT on), {repeat} repetitions per packet; {rounds} \
             rounds, in each every packet run by the direct, weir, pcap, weir-again and \
             pcap-again programs (loaded in that order{}) and an accept-all program in turn \
             (the order rotated each round), net = a program's mean less the accept-all \
             program's in the same round; ns = median of the rounds' nets; x bef = direct / \
             pcap, x now = weir / pcap, x again = weir-again / pcap-again, A/A = pcap-again / \
             pcap: medians of per-round ratios [quartiles]; each program's verdicts are checked \
             against libpcap's on every packet first",
            if args.translation_first { ", the pcap programs first" } else { "" }
        ),
        format!(
            "verdict: same when weir's program is the translation instruction for instruction \
             (the kernel compiles both alike); else slower when the first quartiles of x now \
             and x again are above 1.0 and the third quartiles of both A/A pairs (pcap-again / \
             pcap, weir-again / weir), faster when their third quartiles are below 1.0 and both \
             A/A pairs' first, else ~ (not told apart); rows whose pcap net is under {FLOOR_NS} \
             ns are not judged (below what the test run resolves)"
        ),
        format!("workload: {}", w.describe()),
    ];
    eprintln!("machine: {}", record::machine());
    for n in &notes {
        eprintln!("{n}");
    }
    let mut ok = true;
    let mut worse = Vec::new();
    let mut judged = Judged::default();
    log.line(format!(
        "{:<4} {:>5} {:>6} {:>5} {:>4} | {:>6} {:>5} {:>5} | {:>13} | {:>6} {:>6} {:>6} {:>5} \
         {:>16} {:>16} {:>16} {:>7} | filter",
        "#",
        "pcap",
        "before",
        "after",
        "same",
        "direct",
        "weir",
        "pcap",
        "exec w / p",
        "ns dir",
        "nsweir",
        "nspcap",
        "x bef",
        "x now [q1-q3]",
        "x again [q1-q3]",
        "A/A [q1-q3]",
        "verdict"
    ));
    for (i, bench) in list.iter().enumerate() {
        if i == bench_count {
            log.line("-- everyday list (bench/everyday.txt)");
        }
        let kernel = kernel_off.is_none().then_some(KernelPlan {
            rounds,
            repeat,
            translation_first: args.translation_first,
        });
        match one(bench, pcap, &names, &w, kernel) {
            Ok((line, lengths, kernel)) => {
                if let Some(k) = kernel {
                    judged.add(&bench.label, lengths.equal_ebpf, &k);
                }
                if lengths.after.is_none_or(|after| after > lengths.pcap) {
                    worse.push(format!(
                        "{} ({} vs {})",
                        bench.label,
                        count(lengths.after),
                        lengths.pcap
                    ));
                }
                log.line(format!("{:<4} {line} | {}", i + 1, bench.label));
            }
            Err(e) => {
                ok = false;
                log.line(format!("{:<4} FAILED: {e} | {}", i + 1, bench.label));
            }
        }
    }
    if let Some(why) = &kernel_off {
        log.line(format!("kernel columns not measured: {why}"));
    }
    if kernel_off.is_none() {
        judged.report(&mut log);
    }
    log.line(format!("classic programs longer than libpcap's: {}", worse.len()));
    for w in &worse {
        log.line(format!("  {w}"));
    }
    if args.record {
        let path = record::write("emit", command, &notes, &log.lines)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(ok)
}

/// How the kernel columns are measured.
struct KernelPlan {
    rounds: usize,
    repeat: u32,
    translation_first: bool,
}

fn one(
    bench: &BenchFilter,
    pcap: &libpcap::Libpcap,
    names: &NameDb,
    w: &Workload,
    kernel: Option<KernelPlan>,
) -> Result<(String, Lengths, Option<KernelRow>), String> {
    let (_, optimized) = compile_weir(&bench.expr, LinkType::Ethernet, names)?;
    let raw = pcap.compile(&bench.expr, 1, true)?;
    let sock: Vec<SockFilter> =
        raw.iter().map(|i| SockFilter::new(i.code, i.jt, i.jf, i.k)).collect();
    let pcap_insns: Vec<CbpfInsn> = decode(&sock).map_err(|e| format!("libpcap's program: {e}"))?;
    let before = cbpf::emit_unoptimized(&optimized).ok().map(|p| p.len());
    let tightened = cbpf::emit(&optimized).ok();
    let after = tightened.as_ref().map(Vec::len);
    // The same classic program as libpcap's, instruction for instruction: then the
    // translations are the same program too, and any kernel difference is noise.
    let same = tightened.as_ref() == Some(&pcap_insns);
    let direct = weir_filter::emit::ebpf::emit(&optimized, ProgType::SocketFilter)
        .map_err(|e| format!("eBPF emitter: {e}"))?;
    let chosen = weir::emit_ebpf(&optimized, ProgType::SocketFilter)?;
    let translated = translate(&pcap_insns, ProgType::SocketFilter)
        .map_err(|e| format!("translating libpcap's program: {e}"))?;
    let equal_ebpf = chosen.insns().len() == translated.insns().len();
    let lengths = Lengths { pcap: pcap_insns.len(), before, after, equal_ebpf };
    let (weir_exec, pcap_exec) = (executed(&chosen, w)?, executed(&translated, w)?);
    let mut line = format!(
        "{:>5} {:>6} {:>5} {:>4} | {:>6} {:>5} {:>5} | {:>13} |",
        lengths.pcap,
        count(lengths.before),
        count(lengths.after),
        if same { "=" } else { "" },
        direct.insns().len(),
        chosen.insns().len(),
        translated.insns().len(),
        format!("{weir_exec} / {pcap_exec}")
    );
    let Some(plan) = kernel else {
        return Ok((line, lengths, None));
    };
    let prog = pcap.validate(&raw)?;
    let want: Vec<bool> = w.packets().map(|(p, wire)| prog.filter(p, wire) != 0).collect();
    // Weir's program and the translation twice each: a second load timed against the first
    // is an A/A pair, and the two loads of each give two independent weir / pcap pairs.
    let mut programs = [
        ("direct", &direct),
        ("weir", &chosen),
        ("pcap", &translated),
        ("weir again", &chosen),
        ("pcap again", &translated),
    ];
    if plan.translation_first {
        programs.sort_by_key(|(name, _)| !name.starts_with("pcap"));
    }
    let turns = KernelTurns::load(&programs.map(|(_, p)| p))?;
    for (index, (name, _)) in programs.iter().enumerate() {
        let got = turns.verdicts(index, w)?;
        if let Some(i) = got.iter().zip(&want).position(|(g, w)| g != w) {
            return Err(format!("{name}: packet {i}: kernel says {}, libpcap {}", got[i], want[i]));
        }
    }
    let at = |want: &str| programs.iter().position(|(name, _)| *name == want).unwrap_or(0);
    let (direct_at, weir_at, pcap_at) = (at("direct"), at("weir"), at("pcap"));
    let (weir_again, pcap_again) = (at("weir again"), at("pcap again"));
    let times = turns.time(w, plan.rounds, plan.repeat)?;
    let ns = |index: usize| times.net(index).median();
    let ratio = |of: usize, over: usize| per_round(&times.nets, |r| r[of] / r[over]);
    let row = KernelRow {
        pcap_ns: ns(pcap_at),
        identical: chosen.insns() == translated.insns(),
        now: ratio(weir_at, pcap_at),
        now_again: ratio(weir_again, pcap_again),
        aa: ratio(pcap_again, pcap_at),
        aa_weir: ratio(weir_again, weir_at),
    };
    let with_quartiles = |s: &Samples| {
        let (q1, q3) = s.quartiles();
        format!("{:.2} [{q1:.2}-{q3:.2}]", s.median())
    };
    line.push_str(&format!(
        " {:>6.1} {:>6.1} {:>6.1} {:>5.2} {:>16} {:>16} {:>16} {:>7}",
        ns(direct_at),
        ns(weir_at),
        ns(pcap_at),
        ratio(direct_at, pcap_at).median(),
        with_quartiles(&row.now),
        with_quartiles(&row.now_again),
        with_quartiles(&row.aa),
        row.verdict().word()
    ));
    Ok((line, lengths, Some(row)))
}

/// Per packet over `w`, what `program` executes on weir's interpreter: "instructions /
/// legacy loads", one decimal each (exact counts divided by the packets).
fn executed(program: &Program, w: &Workload) -> Result<String, String> {
    let insns = program.insns();
    let verified = Verified::structural(program.clone()).map_err(|e| e.to_string())?;
    let interp = Interpreter::new(
        &verified,
        Bindings::for_prog_type(ProgType::SocketFilter),
        Config::default(),
    );
    let mut cache = interp.cache();
    let layout = ProgType::SocketFilter.context_layout();
    let len_at = layout.field("len").map_or(0, |f| f.offset as usize);
    let mut ctx = vec![0u8; layout.size as usize];
    let (mut steps, mut loads) = (0u64, 0u64);
    for (pkt, wire) in w.packets() {
        if let Some(field) = ctx.get_mut(len_at..len_at + 4) {
            field.copy_from_slice(&wire.to_le_bytes());
        }
        let mut packet = pkt.to_vec();
        let input = Input::new().ctx(&mut ctx).packet(&mut packet);
        let outcome = interp
            .run_observed(&mut cache, input, |slot, _| {
                let legacy = insns.get(slot).is_some_and(|i| i.op.is_legacy_load());
                loads += u64::from(legacy);
            })
            .map_err(|trap| format!("the interpreter trapped: {trap}"))?;
        steps += outcome.executed;
    }
    let per = w.len().max(1) as f64;
    Ok(format!("{:.1} / {:.1}", steps as f64 / per, loads as f64 / per))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row whose weir / pcap pairs read `now` and `again` (every round alike), with A/A
    /// pairs of quartiles about `aa_spread` either side of 1.0.
    fn row(now: f64, again: f64, aa_spread: f64) -> KernelRow {
        let spread = |centre: f64, half: f64| {
            Samples((0..9).map(|i| centre - half + half * f64::from(i) / 4.0).collect())
        };
        KernelRow {
            pcap_ns: 20.0,
            identical: false,
            now: spread(now, 0.01),
            now_again: spread(again, 0.01),
            aa: spread(1.0, aa_spread * 2.0),
            aa_weir: spread(1.0, 0.01),
        }
    }

    #[test]
    fn a_verdict_needs_both_pairs_beyond_both_floors() {
        assert_eq!(row(1.10, 1.10, 0.02).verdict(), RowVerdict::Judged(Verdict::Slower));
        assert_eq!(row(0.90, 0.90, 0.02).verdict(), RowVerdict::Judged(Verdict::Faster));
        // One placement slower, the other not: not told apart.
        assert_eq!(row(1.10, 1.00, 0.02).verdict(), RowVerdict::Judged(Verdict::Unresolved));
        assert_eq!(row(1.00, 1.10, 0.02).verdict(), RowVerdict::Judged(Verdict::Unresolved));
        assert_eq!(row(0.90, 1.00, 0.02).verdict(), RowVerdict::Judged(Verdict::Unresolved));
        // Both pairs 5% slower, but an A/A pair spreads over 10% either side.
        assert_eq!(row(1.05, 1.05, 0.10).verdict(), RowVerdict::Judged(Verdict::Unresolved));
        let mut noisy_weir = row(1.05, 1.05, 0.0);
        noisy_weir.aa_weir = Samples((0..9).map(|i| 0.8 + 0.05 * f64::from(i)).collect());
        assert_eq!(noisy_weir.verdict(), RowVerdict::Judged(Verdict::Unresolved));
        let mut floor = row(1.5, 1.5, 0.0);
        floor.pcap_ns = FLOOR_NS / 2.0;
        assert_eq!(floor.verdict(), RowVerdict::Floor);
        let mut same = row(1.10, 1.10, 0.0);
        same.identical = true;
        assert_eq!(same.verdict(), RowVerdict::Same);
    }
}
