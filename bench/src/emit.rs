//! `weir-bench emit`: how tight weir's emitted programs are next to libpcap's, per filter
//! (issue 13, items 3 and 4). One run gives, for every filter of the bench list and of the
//! everyday list (bench/everyday.txt):
//!
//! - classic BPF length: libpcap's optimized program (what `tcpdump -d` prints), weir's
//!   classic program before the flow-graph passes (`cbpf::emit_unoptimized` of the
//!   optimized IR) and after (`cbpf::emit`);
//! - eBPF length: the eBPF emitter's own program (before), what weir gives now
//!   (`weir::emit_ebpf`, after) and libpcap's program through weir-cbpf's translation;
//! - kernel ns per packet (`BPF_PROG_TEST_RUN`, net of an accept-all program) of those three
//!   eBPF programs, after checking that each gives libpcap's verdict on every packet.

use weir_cbpf::translate::translate;
use weir_filter::emit::cbpf;
use weir_isa::cbpf::{decode, CbpfInsn, SockFilter};
use weir_pflang::names::NameDb;
use weir_pflang::LinkType;
use weir_program::{ProgType, Program};
use weir_sys::libpcap;

use crate::filterlist::{self, BenchFilter};
use crate::filters::compile_weir;
use crate::kernel_runs::{self, KernelPair};
use crate::record::{self, Log};
use crate::workload::{self, Source, Workload};

/// The everyday list: filters people type.
const EVERYDAY: &str = include_str!("../everyday.txt");

/// `weir-bench emit` options.
#[derive(Debug, clap::Args)]
pub struct EmitArgs {
    /// Timed kernel rounds per program (default 5; 2 with --quick).
    #[arg(long, value_name = "N")]
    pub rounds: Option<usize>,
    /// Test-run repetitions per packet (default 200; 10 with --quick).
    #[arg(long, value_name = "N")]
    pub kernel_repeat: Option<u32>,
    /// Smoke mode.
    #[arg(long)]
    pub quick: bool,
    /// Write bench/records/<date>-emit.txt.
    #[arg(long)]
    pub record: bool,
}

struct Lengths {
    pcap: usize,
    /// `None`: weir's classic program would pass classic BPF's 4096 instructions.
    before: Option<usize>,
    after: Option<usize>,
}

fn count(n: Option<usize>) -> String {
    n.map_or("-".into(), |n| n.to_string())
}

pub fn run(args: &EmitArgs, command: &str) -> Result<bool, String> {
    let rounds = args.rounds.unwrap_or(if args.quick { 2 } else { 5 }).max(1);
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
        format!(
            "ns: BPF_PROG_TEST_RUN (SCHED_CLS, JIT on), {repeat} repetitions per packet, median \
             of {rounds} rounds, net of an accept-all program; each program's verdicts are \
             checked against libpcap's on every packet first; x = weir / pcap"
        ),
        format!("workload: {}", w.describe()),
    ];
    eprintln!("machine: {}", record::machine());
    for n in &notes {
        eprintln!("{n}");
    }
    let mut ok = true;
    let mut worse = Vec::new();
    log.line(format!(
        "{:<4} {:>5} {:>6} {:>5} {:>4} | {:>6} {:>5} {:>5} | {:>7} {:>7} {:>7} {:>5} {:>5} | filter",
        "#",
        "pcap",
        "before",
        "after",
        "same",
        "direct",
        "weir",
        "pcap",
        "ns dir",
        "ns weir",
        "ns pcap",
        "x bef",
        "x now"
    ));
    for (i, bench) in list.iter().enumerate() {
        if i == bench_count {
            log.line("-- everyday list (bench/everyday.txt)");
        }
        match one(bench, pcap, &names, &w, kernel_off.is_none(), rounds, repeat) {
            Ok((line, lengths)) => {
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

fn one(
    bench: &BenchFilter,
    pcap: &libpcap::Libpcap,
    names: &NameDb,
    w: &Workload,
    kernel: bool,
    rounds: usize,
    repeat: u32,
) -> Result<(String, Lengths), String> {
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
    let lengths = Lengths { pcap: pcap_insns.len(), before, after };
    let mut line = format!(
        "{:>5} {:>6} {:>5} {:>4} | {:>6} {:>5} {:>5} |",
        lengths.pcap,
        count(lengths.before),
        count(lengths.after),
        if same { "=" } else { "" },
        direct.insns().len(),
        chosen.insns().len(),
        translated.insns().len()
    );
    if kernel {
        let prog = pcap.validate(&raw)?;
        let want: Vec<bool> = w.packets().map(|(p, wire)| prog.filter(p, wire) != 0).collect();
        let mut ns = Vec::new();
        for (name, program) in [("direct", &direct), ("weir", &chosen), ("pcap", &translated)] {
            ns.push(time(name, program, w, &want, rounds, repeat)?);
        }
        line.push_str(&format!(
            " {:>7.1} {:>7.1} {:>7.1} {:>5.2} {:>5.2}",
            ns[0],
            ns[1],
            ns[2],
            ns[0] / ns[2],
            ns[1] / ns[2]
        ));
    }
    Ok((line, lengths))
}

/// Net kernel ns per packet of `program`, once its verdicts are libpcap's.
fn time(
    name: &str,
    program: &Program,
    w: &Workload,
    want: &[bool],
    rounds: usize,
    repeat: u32,
) -> Result<f64, String> {
    let pair = KernelPair::load(program).map_err(|e| format!("{name}: {e}"))?;
    let got = pair.verdicts(w)?;
    if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
        return Err(format!("{name}: packet {i}: kernel says {}, libpcap {}", got[i], want[i]));
    }
    Ok(pair.time(w, rounds, repeat)?.net())
}
