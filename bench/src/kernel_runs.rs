//! The kernel as an engine: programs loaded as `BPF_PROG_TYPE_SCHED_CLS` (a socket filter
//! that sees the whole frame, Ethernet header included), verdicts and timings from
//! `BPF_PROG_TEST_RUN`.
//!
//! The kernel times the program itself, `repeat` times per call, and reports the mean; that
//! figure includes its own loop around the program. The same loop around a program that
//! only returns is measured alongside (the overhead), and the report gives both the raw
//! figure and the net one (raw - overhead), which is the part comparable with in-process
//! engines. The test run copies every packet into a fresh socket buffer, so only the hot
//! workload can be measured this way.

use weir_program::Program;
use weir_sys::kernel::{self, LoadedProgram, ProgType};

use crate::timing::{per_round, Samples};
use crate::workload::Workload;

/// `mov32 r0, 262144; exit`: accepts everything and does nothing else.
const ACCEPT_ALL: [u8; 16] = [0xb4, 0, 0, 0, 0, 0, 4, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];

/// Why the kernel cannot measure `w`, if it cannot.
pub fn unusable(w: &Workload, available: &Result<(), String>) -> Option<String> {
    if let Err(reason) = available {
        return Some(format!("kernel unavailable: {reason}"));
    }
    if w.kind != "hot" {
        return Some(
            "hot workload only (the test run copies each packet into a fresh socket buffer, \
             so it cannot read a stream)"
                .into(),
        );
    }
    if w.linktype != 1 {
        return Some(format!("Ethernet captures only (link type {})", w.linktype));
    }
    let refused = w.packets().filter(|(pkt, wire)| !takes(pkt, *wire)).count();
    if refused > 0 {
        return Some(format!(
            "{refused} of {} records are cut short or too short for the test run",
            w.len()
        ));
    }
    None
}

/// Whether the skb test run takes the frame: whole (the kernel knows no wire length),
/// at least an Ethernet header, the fixed IPv4/IPv6 header behind those EtherTypes, and
/// small enough for one page.
fn takes(pkt: &[u8], wire: u32) -> bool {
    let whole = pkt.len() as u64 == u64::from(wire);
    let sized = match pkt.get(12..14) {
        Some([0x08, 0x00]) => pkt.len() >= 14 + 20,
        Some([0x86, 0xdd]) => pkt.len() >= 14 + 40,
        Some(_) => true,
        None => false,
    };
    whole && sized && pkt.len() <= 3_000
}

/// The kernel's verdict of `program` on every packet of `w` (one run each).
fn verdicts(program: &LoadedProgram, w: &Workload) -> Result<Vec<bool>, String> {
    w.packets()
        .enumerate()
        .map(|(i, (pkt, _))| {
            program
                .test_run(pkt, 1)
                .map(|r| r.retval != 0)
                .map_err(|e| format!("test run of packet {i}: {e}"))
        })
        .collect()
}

/// Several filters and the accept-all program, timed in turns so that a comparison of two
/// filters is a ratio within one round rather than of figures taken seconds apart: on a
/// loaded machine the kernel's figures drift by tens of percent between phases, which
/// sequential timings (one program's rounds, then the next's) read as a difference between
/// the programs.
pub struct KernelTurns {
    filters: Vec<LoadedProgram>,
    overhead: LoadedProgram,
}

/// What [`KernelTurns::time`] measured, ns per packet, one entry per round.
pub struct TurnTimes {
    /// Per round, each filter's mean less the accept-all program's in the same round.
    pub nets: Vec<Vec<f64>>,
    /// Per round, the accept-all program's mean (the kernel's own loop).
    pub overhead: Samples,
}

impl TurnTimes {
    /// Filter `index`'s net per round.
    pub fn net(&self, index: usize) -> Samples {
        per_round(&self.nets, |r| r[index])
    }

    /// Filter `index`'s raw figure per round (net plus that round's overhead).
    pub fn raw(&self, index: usize) -> Samples {
        Samples(self.nets.iter().zip(&self.overhead.0).map(|(r, o)| r[index] + o).collect())
    }
}

impl KernelTurns {
    /// No filter yet, the accept-all program loaded.
    pub fn new() -> Result<KernelTurns, String> {
        let overhead = kernel::load(ProgType::SchedCls, &ACCEPT_ALL)
            .map_err(|e| format!("the kernel refuses an accept-all program: {e}"))?;
        Ok(KernelTurns { filters: Vec::new(), overhead })
    }

    /// Loads each of `programs` (a program given twice is loaded twice: two programs, as an
    /// A/A comparison needs); a refusal carries the verifier's log.
    pub fn load(programs: &[&Program]) -> Result<KernelTurns, String> {
        let mut turns = KernelTurns::new()?;
        for (i, p) in programs.iter().enumerate() {
            turns.add(p).map_err(|e| format!("program {i}: {e}"))?;
        }
        Ok(turns)
    }

    /// Loads `program` as the next filter and returns its index; a refusal carries the
    /// verifier's log.
    pub fn add(&mut self, program: &Program) -> Result<usize, String> {
        let loaded = kernel::load(ProgType::SchedCls, &program.to_bytes())
            .map_err(|e| format!("the kernel refuses the program: {e}"))?;
        self.filters.push(loaded);
        Ok(self.filters.len() - 1)
    }

    /// The kernel's verdict of filter `index` on every packet.
    pub fn verdicts(&self, index: usize, w: &Workload) -> Result<Vec<bool>, String> {
        let program = self.filters.get(index).ok_or("no such program")?;
        verdicts(program, w)
    }

    /// `rounds` rounds (after one for warm-up). In a round every packet is test-run
    /// (`repeat` repetitions) by every filter and by the accept-all program, one after the
    /// other, the order rotated by one program each round so that none always runs first.
    pub fn time(&self, w: &Workload, rounds: usize, repeat: u32) -> Result<TurnTimes, String> {
        let all: Vec<&LoadedProgram> =
            self.filters.iter().chain(std::iter::once(&self.overhead)).collect();
        let packets = w.len().max(1) as f64;
        let mut nets = Vec::with_capacity(rounds);
        let mut overheads = Vec::with_capacity(rounds);
        for round in 0..=rounds {
            let mut total = vec![0u64; all.len()];
            for (pkt, _) in w.packets() {
                for k in 0..all.len() {
                    let at = (k + round) % all.len();
                    let run =
                        all[at].test_run(pkt, repeat).map_err(|e| format!("test run: {e}"))?;
                    total[at] += u64::from(run.duration_ns);
                }
            }
            if round == 0 {
                continue;
            }
            let overhead = total[all.len() - 1] as f64 / packets;
            overheads.push(overhead);
            nets.push(
                total[..all.len() - 1].iter().map(|&t| t as f64 / packets - overhead).collect(),
            );
        }
        Ok(TurnTimes { nets, overhead: Samples(overheads) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_the_test_run_refuses() {
        let mut ip = vec![0u8; 60];
        ip[12] = 0x08;
        assert!(takes(&ip, 60));
        assert!(!takes(&ip, 61), "cut record");
        assert!(!takes(&ip[..30], 30), "IPv4 EtherType without the IPv4 header");
        assert!(!takes(&ip[..10], 10));
        let mut v6 = vec![0u8; 60];
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        assert!(takes(&v6, 60));
        assert!(!takes(&v6[..50], 50));
    }
}
