//! Facts about a classic program that the translation needs before it emits anything:
//! where control can go from each instruction, which instructions are reachable, and, for
//! the XDP target, how many packet bytes every path from an instruction is sure to read.
//!
//! Kernel-rule classic programs only jump forward, so every analysis here is one pass in
//! program order (reachability) or in reverse order (anticipated reads), with no fixpoint.
//! Unreachable instructions are never emitted: the Linux verifier rejects eBPF programs that
//! contain instructions no path reaches, and libpcap's unoptimized output has such code.

use weir_isa::cbpf::ancillary::SKF_AD_OFF;
use weir_isa::cbpf::{CbpfInsn, CbpfOp};

use super::PacketAccess;

/// The last packet offset the XDP target can reach, plus one: the Linux verifier gives a
/// packet pointer no range beyond `MAX_PACKET_OFF` (0xffff), so a load ending past it is
/// translated as a load that fails.
pub(super) const XDP_MAX_END: u32 = 0xffff;

/// Where control can go after a classic instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// The program ends here (a return, or a load that can never succeed).
    Stop,
    One(usize),
    /// A conditional jump: the instruction if true, the one if false.
    Two(usize, usize),
}

impl Next {
    /// The successors, in the order true, false.
    pub(super) fn targets(self) -> impl Iterator<Item = usize> {
        let (first, second) = match self {
            Next::Stop => (None, None),
            Next::One(t) => (Some(t), None),
            Next::Two(t, f) => (Some(t), Some(f)),
        };
        first.into_iter().chain(second)
    }
}

/// The packet bytes an instruction reads at a constant offset, as `(offset, size)`: absolute
/// loads that are not ancillary, and `ldxb 4*([k]&0xf)`.
pub(super) fn constant_access(insn: &CbpfInsn) -> Option<(u32, u32)> {
    let k = insn.k;
    match insn.op {
        CbpfOp::LdAbsW | CbpfOp::LdAbsH | CbpfOp::LdAbsB if k >= SKF_AD_OFF => None,
        CbpfOp::LdAbsW => Some((k, 4)),
        CbpfOp::LdAbsH => Some((k, 2)),
        CbpfOp::LdAbsB | CbpfOp::LdxMsh => Some((k, 1)),
        _ => None,
    }
}

/// One past the last byte of an access, without overflow.
pub(super) fn access_end(offset: u32, size: u32) -> u64 {
    u64::from(offset).wrapping_add(u64::from(size))
}

/// Whether the instruction is a packet load that can never succeed on this target (XDP:
/// it ends beyond [`XDP_MAX_END`]). It is translated as `return 0`, so nothing after it on
/// its path is reached.
pub(super) fn always_fails(insn: &CbpfInsn, target: PacketAccess) -> bool {
    target == PacketAccess::Xdp
        && constant_access(insn)
            .is_some_and(|(k, size)| access_end(k, size) > u64::from(XDP_MAX_END))
}

/// Where control goes after instruction `index`. The program is validated: jump targets
/// are inside it, so the sums here stay far below `usize::MAX`.
pub(super) fn next(insns: &[CbpfInsn], index: usize, target: PacketAccess) -> Next {
    let Some(insn) = insns.get(index) else {
        return Next::Stop;
    };
    if insn.op.is_return() || always_fails(insn, target) {
        return Next::Stop;
    }
    let after = index.wrapping_add(1);
    match insn.op {
        CbpfOp::Ja => Next::One(after.wrapping_add(insn.k as usize)),
        op if op.is_conditional_jump() => Next::Two(
            after.wrapping_add(usize::from(insn.jt)),
            after.wrapping_add(usize::from(insn.jf)),
        ),
        _ => Next::One(after),
    }
}

/// Whether each instruction can be reached from the first.
pub(super) fn reachable(insns: &[CbpfInsn], target: PacketAccess) -> Vec<bool> {
    let mut reach = vec![false; insns.len()];
    if let Some(first) = reach.first_mut() {
        *first = true;
    }
    for index in 0..insns.len() {
        if !reach.get(index).copied().unwrap_or(false) {
            continue;
        }
        for succ in next(insns, index, target).targets() {
            if let Some(r) = reach.get_mut(succ) {
                *r = true;
            }
        }
    }
    reach
}

/// For each reachable instruction, the number of packet bytes (from offset 0) that every
/// path starting there reads at a constant offset before it returns: if the packet is
/// shorter, every path fails a load and the program returns 0, so one bounds check for that
/// many bytes, placed at the instruction, decides exactly what the loads on the way would
/// have decided. This is how the XDP target hoists and merges its bounds checks.
///
/// A load that always fails counts as reading [`XDP_MAX_END`] bytes: the check that stands
/// for it is weaker than the load but still only rejects packets the load would reject, and
/// stays within what the Linux verifier can reason about.
pub(super) fn anticipated_reads(
    insns: &[CbpfInsn],
    target: PacketAccess,
    reach: &[bool],
) -> Vec<u32> {
    let mut need = vec![0u32; insns.len()];
    for index in (0..insns.len()).rev() {
        if !reach.get(index).copied().unwrap_or(false) {
            continue;
        }
        let Some(insn) = insns.get(index) else { continue };
        let at = |i: usize| need.get(i).copied().unwrap_or(0);
        let here = if always_fails(insn, target) {
            XDP_MAX_END
        } else {
            let onward = match next(insns, index, target) {
                Next::Stop => 0,
                Next::One(t) => at(t),
                Next::Two(t, f) => at(t).min(at(f)),
            };
            match constant_access(insn) {
                // Not an always-failing load, so the end fits in u32.
                Some((k, size)) => onward.max(k.wrapping_add(size)),
                None => onward,
            }
        };
        if let Some(slot) = need.get_mut(index) {
            *slot = here;
        }
    }
    need
}

#[cfg(test)]
mod tests {
    use super::*;
    use CbpfOp::*;

    fn stmt(op: CbpfOp, k: u32) -> CbpfInsn {
        CbpfInsn::stmt(op, k)
    }

    #[test]
    fn code_after_a_return_is_unreachable_until_a_jump_lands_there() {
        let prog = [
            CbpfInsn::jump(JeqK, 1, 1, 0), // 0: -> 2 or 1
            stmt(RetK, 1),                 // 1
            stmt(RetK, 2),                 // 2
            stmt(RetK, 3),                 // 3: nobody jumps here
        ];
        assert_eq!(reachable(&prog, PacketAccess::SkBuff), [true, true, true, false]);
    }

    #[test]
    fn a_load_past_the_xdp_limit_stops_its_path_on_xdp_only() {
        let prog = [stmt(LdAbsB, 0x1_0000), stmt(RetA, 0)];
        assert_eq!(reachable(&prog, PacketAccess::Xdp), [true, false]);
        assert_eq!(reachable(&prog, PacketAccess::SkBuff), [true, true]);
        assert_eq!(anticipated_reads(&prog, PacketAccess::Xdp, &[true, false]), [XDP_MAX_END, 0]);
    }

    #[test]
    fn anticipated_reads_take_the_most_on_a_path_and_the_least_over_branches() {
        let prog = [
            stmt(LdAbsH, 12),              // 0: 14, then min(24, 22)
            CbpfInsn::jump(JeqK, 1, 0, 2), // 1: -> 2 or 4
            stmt(LdAbsB, 23),              // 2: 24
            stmt(RetA, 0),                 // 3
            stmt(LdAbsW, 18),              // 4: 22
            stmt(LdxMsh, 14),              // 5: 15
            stmt(RetK, 0),                 // 6
        ];
        let reach = reachable(&prog, PacketAccess::Xdp);
        assert_eq!(anticipated_reads(&prog, PacketAccess::Xdp, &reach), [22, 22, 24, 0, 22, 15, 0]);
    }
}
