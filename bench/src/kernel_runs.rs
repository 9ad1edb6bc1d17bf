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

use crate::timing::Samples;
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

/// A loaded filter and the accept-all program it is measured against.
pub struct KernelPair {
    filter: LoadedProgram,
    overhead: LoadedProgram,
}

/// The figures of one kernel measurement, ns per packet.
pub struct KernelFigures {
    pub raw: Samples,
    pub overhead: Samples,
}

impl KernelFigures {
    pub fn net(&self) -> f64 {
        self.raw.median() - self.overhead.median()
    }
}

impl KernelPair {
    /// Loads `program`; a refusal carries the verifier's log.
    pub fn load(program: &Program) -> Result<KernelPair, String> {
        let filter = kernel::load(ProgType::SchedCls, &program.to_bytes())
            .map_err(|e| format!("the kernel refuses the program: {e}"))?;
        let overhead = kernel::load(ProgType::SchedCls, &ACCEPT_ALL)
            .map_err(|e| format!("the kernel refuses an accept-all program: {e}"))?;
        Ok(KernelPair { filter, overhead })
    }

    /// The kernel's verdict on every packet (one run each).
    pub fn verdicts(&self, w: &Workload) -> Result<Vec<bool>, String> {
        verdicts(&self.filter, w)
    }

    /// `rounds` rounds (after one for warm-up), each a test run of every packet with
    /// `repeat` repetitions, alternating the filter and the accept-all program.
    pub fn time(&self, w: &Workload, rounds: usize, repeat: u32) -> Result<KernelFigures, String> {
        let round = |prog: &LoadedProgram| -> Result<f64, String> {
            let mut total = 0u64;
            for (pkt, _) in w.packets() {
                let run = prog.test_run(pkt, repeat).map_err(|e| format!("test run: {e}"))?;
                total += u64::from(run.duration_ns);
            }
            Ok(total as f64 / w.len().max(1) as f64)
        };
        round(&self.filter)?;
        round(&self.overhead)?;
        let mut raw = Vec::with_capacity(rounds);
        let mut overhead = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            raw.push(round(&self.filter)?);
            overhead.push(round(&self.overhead)?);
        }
        Ok(KernelFigures { raw: Samples(raw), overhead: Samples(overhead) })
    }
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

impl KernelTurns {
    /// Loads each of `programs` (a program given twice is loaded twice: two programs, as an
    /// A/A comparison needs); a refusal carries the verifier's log.
    pub fn load(programs: &[&Program]) -> Result<KernelTurns, String> {
        let filters = programs
            .iter()
            .enumerate()
            .map(|(i, p)| {
                kernel::load(ProgType::SchedCls, &p.to_bytes())
                    .map_err(|e| format!("the kernel refuses program {i}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let overhead = kernel::load(ProgType::SchedCls, &ACCEPT_ALL)
            .map_err(|e| format!("the kernel refuses an accept-all program: {e}"))?;
        Ok(KernelTurns { filters, overhead })
    }

    /// The kernel's verdict of filter `index` on every packet.
    pub fn verdicts(&self, index: usize, w: &Workload) -> Result<Vec<bool>, String> {
        let program = self.filters.get(index).ok_or("no such program")?;
        verdicts(program, w)
    }

    /// `rounds` rounds (after one for warm-up). In a round every packet is test-run
    /// (`repeat` repetitions) by every filter and by the accept-all program, one after the
    /// other, the order rotated by one program each round so that none always runs first.
    /// Returns per round the net ns per packet of each filter: its mean over the packets
    /// less the accept-all program's in the same round.
    pub fn time(&self, w: &Workload, rounds: usize, repeat: u32) -> Result<Vec<Vec<f64>>, String> {
        let all: Vec<&LoadedProgram> =
            self.filters.iter().chain(std::iter::once(&self.overhead)).collect();
        let packets = w.len().max(1) as f64;
        let mut out = Vec::with_capacity(rounds);
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
            out.push(
                total[..all.len() - 1].iter().map(|&t| t as f64 / packets - overhead).collect(),
            );
        }
        Ok(out)
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
