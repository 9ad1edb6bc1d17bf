//! Validation of classic programs before they run. Two authorities check classic BPF and
//! they disagree in places, so the rule set is a choice ([`Rules`]):
//!
//! - [`Rules::Kernel`] ([`validate`]): what Linux's classic checker accepts for a socket
//!   filter, and everything libpcap's `bpf_validate` also demands: 1..=4096 instructions;
//!   scratch index below 16; no `div`/`mod` by a constant 0; no constant shift by 32 or more;
//!   jumps forward and inside the program; the last instruction a return; no scratch cell read
//!   before it is written on every path; absolute loads in the kernel's negative-offset area
//!   only for the ancillary fields weir supports ([`crate::supported_ancillary`]).
//! - [`Rules::Libpcap`] ([`validate_libpcap`]): libpcap's own rules, which let `ja` jump
//!   backward inside the program (but not to itself) because `ip6 protochain` compiles to a
//!   loop, and give negative offsets no meaning (such loads are simply out of bounds).
//!
//! Classic opcodes are always known here: [`CbpfInsn`] only holds rows of the opcode table,
//! and decoding raw records reports unknown ones ([`crate::CbpfFilter::from_raw`]).

use thiserror::Error;
use weir_isa::cbpf::ancillary::{ancillary_field, SKF_LL_OFF};
use weir_isa::cbpf::{CbpfInsn, CbpfOp, MAX_INSNS, MEM_WORDS};

use crate::meta::supported_ancillary;

/// Which authority's rules a program must satisfy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rules {
    /// The Linux kernel's classic checker plus libpcap's `bpf_validate`.
    Kernel,
    /// libpcap's `bpf_validate` alone (backward `ja` allowed, no ancillary loads).
    Libpcap,
}

/// A rule a program breaks, at an instruction.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("instruction {index}: {kind}")]
pub struct CbpfValidateError {
    /// The instruction that breaks the rule (for a too-long program, the first one past the
    /// limit; for an empty one, 0).
    pub index: usize,
    pub kind: CbpfValidateErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CbpfValidateErrorKind {
    #[error("empty program: a classic program has at least one instruction")]
    Empty,
    #[error("program has {0} instructions, more than the limit of 4096")]
    TooLong(usize),
    #[error("unknown classic BPF opcode {0:#04x}")]
    UnknownOpcode(u16),
    #[error("{mnemonic} M[{k}]: scratch memory has cells 0..15 only")]
    ScratchIndex { mnemonic: &'static str, k: u32 },
    #[error("{0} #0: division or modulo by the constant zero")]
    DivisionByZero(&'static str),
    #[error("{mnemonic} #{k}: a constant shift must be below 32")]
    ShiftTooLarge { mnemonic: &'static str, k: u32 },
    #[error(
        "{field} lands on instruction {target}, past the end of the {len}-instruction program"
    )]
    JumpOutOfRange { field: &'static str, target: u64, len: usize },
    #[error("ja with k = {k:#x} jumps backward; the kernel allows forward jumps only")]
    BackwardJump { k: u32 },
    #[error("ja jumps to itself: an endless loop")]
    JumpToSelf,
    #[error("the last instruction is {0}, not a return")]
    NoFinalReturn(&'static str),
    #[error("{mnemonic} M[{cell}] reads a scratch cell not written on every path to it")]
    UninitializedScratch { mnemonic: &'static str, cell: u32 },
    #[error("ancillary load {0} is not supported by weir")]
    UnsupportedAncillary(&'static str),
    #[error(
        "load at negative offset {offset}: only the supported SKF_AD_* ancillary fields are \
         recognised (header-relative SKF_NET_OFF/SKF_LL_OFF loads are not supported)"
    )]
    NegativeOffset { offset: i32 },
}

fn err(index: usize, kind: CbpfValidateErrorKind) -> CbpfValidateError {
    CbpfValidateError { index, kind }
}

/// Checks `prog` against the kernel's and libpcap's rules ([`Rules::Kernel`]).
pub fn validate(prog: &[CbpfInsn]) -> Result<(), CbpfValidateError> {
    validate_with(prog, Rules::Kernel)
}

/// Checks `prog` against libpcap's `bpf_validate` rules only ([`Rules::Libpcap`]).
pub fn validate_libpcap(prog: &[CbpfInsn]) -> Result<(), CbpfValidateError> {
    validate_with(prog, Rules::Libpcap)
}

pub(crate) fn validate_with(prog: &[CbpfInsn], rules: Rules) -> Result<(), CbpfValidateError> {
    let len = prog.len();
    if len == 0 {
        return Err(err(0, CbpfValidateErrorKind::Empty));
    }
    if len > MAX_INSNS {
        return Err(err(MAX_INSNS, CbpfValidateErrorKind::TooLong(len)));
    }
    for (index, insn) in prog.iter().enumerate() {
        check_insn(index, insn, len, rules).map_err(|kind| err(index, kind))?;
    }
    // `len >= 1` was checked above.
    let last_index = len.saturating_sub(1);
    if let Some(last) = prog.get(last_index) {
        if !last.op.is_return() {
            return Err(err(last_index, CbpfValidateErrorKind::NoFinalReturn(last.op.mnemonic())));
        }
    }
    if rules == Rules::Kernel {
        check_scratch_written_before_read(prog)?;
    }
    Ok(())
}

fn check_insn(
    index: usize,
    insn: &CbpfInsn,
    len: usize,
    rules: Rules,
) -> Result<(), CbpfValidateErrorKind> {
    use CbpfOp::*;
    let k = insn.k;
    let mnemonic = insn.op.mnemonic();
    // `index < len <= 4096`, so none of the u64 sums below can overflow.
    let next = (index as u64).wrapping_add(1);
    match insn.op {
        LdMem | LdxMem | St | Stx if k >= MEM_WORDS => {
            Err(CbpfValidateErrorKind::ScratchIndex { mnemonic, k })
        }
        DivK | ModK if k == 0 => Err(CbpfValidateErrorKind::DivisionByZero(mnemonic)),
        LshK | RshK if k >= 32 => Err(CbpfValidateErrorKind::ShiftTooLarge { mnemonic, k }),
        Ja => match rules {
            Rules::Kernel => {
                if k as i32 >= 0 {
                    let target = next.wrapping_add(u64::from(k));
                    if target >= len as u64 {
                        return Err(CbpfValidateErrorKind::JumpOutOfRange {
                            field: "ja",
                            target,
                            len,
                        });
                    }
                    Ok(())
                } else {
                    Err(CbpfValidateErrorKind::BackwardJump { k })
                }
            }
            Rules::Libpcap => {
                // Offsets are 32-bit and wrap: a "negative" k lands before this instruction.
                let target = (next as u32).wrapping_add(k);
                if u64::from(target) >= len as u64 {
                    return Err(CbpfValidateErrorKind::JumpOutOfRange {
                        field: "ja",
                        target: u64::from(target),
                        len,
                    });
                }
                if k == u32::MAX {
                    return Err(CbpfValidateErrorKind::JumpToSelf);
                }
                Ok(())
            }
        },
        op if op.is_conditional_jump() => {
            for (field, off) in [("jt", insn.jt), ("jf", insn.jf)] {
                let target = next.wrapping_add(u64::from(off));
                if target >= len as u64 {
                    return Err(CbpfValidateErrorKind::JumpOutOfRange { field, target, len });
                }
            }
            Ok(())
        }
        LdAbsW | LdAbsH | LdAbsB | LdxMsh if rules == Rules::Kernel && k >= SKF_LL_OFF => {
            let ancillary = ancillary_field(k).filter(|_| insn.op != LdxMsh);
            match ancillary {
                Some(f) if supported_ancillary(f.offset) => Ok(()),
                Some(f) => Err(CbpfValidateErrorKind::UnsupportedAncillary(f.kernel_name)),
                None => Err(CbpfValidateErrorKind::NegativeOffset { offset: k as i32 }),
            }
        }
        _ => Ok(()),
    }
}

/// The kernel's rule that a scratch cell is read only after a store to it on every path. Jumps
/// only go forward here (checked before), so one pass in program order sees every
/// predecessor of an instruction before the instruction itself.
fn check_scratch_written_before_read(prog: &[CbpfInsn]) -> Result<(), CbpfValidateError> {
    // For each instruction, the cells written on every path reaching it. Unreached ones keep
    // "all written", the identity of the intersection, so dead code is not judged.
    const ALL: u16 = u16::MAX;
    let mut written = vec![ALL; prog.len()];
    if let Some(first) = written.first_mut() {
        *first = 0;
    }
    for (index, insn) in prog.iter().enumerate() {
        let mut here = written.get(index).copied().unwrap_or(ALL);
        let cell_bit = 1u16.checked_shl(insn.k).unwrap_or(0);
        match insn.op {
            CbpfOp::LdMem | CbpfOp::LdxMem if here & cell_bit == 0 => {
                return Err(err(
                    index,
                    CbpfValidateErrorKind::UninitializedScratch {
                        mnemonic: insn.op.mnemonic(),
                        cell: insn.k,
                    },
                ));
            }
            CbpfOp::St | CbpfOp::Stx => here |= cell_bit,
            _ => {}
        }
        let next = index.wrapping_add(1);
        let successors: [Option<usize>; 2] = if insn.op.is_return() {
            [None, None]
        } else if insn.op == CbpfOp::Ja {
            [usize::try_from(insn.k).ok().and_then(|k| next.checked_add(k)), None]
        } else if insn.op.is_conditional_jump() {
            [next.checked_add(usize::from(insn.jt)), next.checked_add(usize::from(insn.jf))]
        } else {
            [Some(next), None]
        };
        for succ in successors.into_iter().flatten() {
            if let Some(w) = written.get_mut(succ) {
                *w &= here;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_isa::cbpf::ancillary::*;
    use CbpfOp::*;

    fn s(op: CbpfOp, k: u32) -> CbpfInsn {
        CbpfInsn::stmt(op, k)
    }

    fn kind(prog: &[CbpfInsn]) -> (usize, CbpfValidateErrorKind) {
        let e = validate(prog).unwrap_err();
        (e.index, e.kind)
    }

    #[test]
    fn accepts_a_simple_filter() {
        let prog = [s(LdAbsH, 12), CbpfInsn::jump(JeqK, 0x800, 0, 1), s(RetK, 262_144), s(RetK, 0)];
        assert_eq!(validate(&prog), Ok(()));
        assert_eq!(validate_libpcap(&prog), Ok(()));
    }

    #[test]
    fn length_limits() {
        assert_eq!(kind(&[]), (0, CbpfValidateErrorKind::Empty));
        let long = vec![s(RetK, 0); MAX_INSNS + 1];
        assert_eq!(kind(&long), (MAX_INSNS, CbpfValidateErrorKind::TooLong(MAX_INSNS + 1)));
        assert_eq!(validate(&long[..MAX_INSNS]), Ok(()));
    }

    #[test]
    fn each_rule_names_its_instruction() {
        let ret = s(RetK, 0);
        assert_eq!(
            kind(&[s(LdImm, 1), s(St, 16), ret]),
            (1, CbpfValidateErrorKind::ScratchIndex { mnemonic: "st", k: 16 })
        );
        assert_eq!(
            kind(&[s(LdImm, 1), s(ModK, 0), ret]),
            (1, CbpfValidateErrorKind::DivisionByZero("mod"))
        );
        assert_eq!(kind(&[s(DivK, 0), ret]), (0, CbpfValidateErrorKind::DivisionByZero("div")));
        assert_eq!(
            kind(&[s(LshK, 32), ret]),
            (0, CbpfValidateErrorKind::ShiftTooLarge { mnemonic: "lsh", k: 32 })
        );
        assert_eq!(
            kind(&[CbpfInsn::jump(JeqK, 0, 0, 1), ret]),
            (0, CbpfValidateErrorKind::JumpOutOfRange { field: "jf", target: 2, len: 2 })
        );
        assert_eq!(
            kind(&[s(Ja, 1), ret]),
            (0, CbpfValidateErrorKind::JumpOutOfRange { field: "ja", target: 2, len: 2 })
        );
        assert_eq!(
            kind(&[ret, s(Ja, u32::MAX - 1), ret]),
            (1, CbpfValidateErrorKind::BackwardJump { k: u32::MAX - 1 })
        );
        assert_eq!(kind(&[ret, s(Tax, 0)]), (1, CbpfValidateErrorKind::NoFinalReturn("tax")));
        let e = validate(&[s(LdImm, 0), s(Ja, 5), ret]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "instruction 1: ja lands on instruction 7, past the end of the 3-instruction program"
        );
    }

    #[test]
    fn libpcap_rules_allow_backward_ja_but_not_to_itself() {
        // ret; ldb [0]; ja 0 (backward, to the ret) ... as protochain does.
        let back = [s(RetK, 1), s(LdAbsB, 0), s(Ja, u32::MAX - 2), s(RetK, 0)];
        assert_eq!(validate_libpcap(&back), Ok(()));
        assert!(matches!(kind(&back).1, CbpfValidateErrorKind::BackwardJump { .. }));
        let selfloop = [s(Ja, u32::MAX), s(RetK, 0)];
        let e = validate_libpcap(&selfloop).unwrap_err();
        assert_eq!((e.index, e.kind), (0, CbpfValidateErrorKind::JumpToSelf));
        let before_start = [s(RetK, 1), s(Ja, u32::MAX - 2), s(RetK, 0)];
        assert!(matches!(
            validate_libpcap(&before_start).unwrap_err().kind,
            CbpfValidateErrorKind::JumpOutOfRange { field: "ja", .. }
        ));
    }

    #[test]
    fn scratch_must_be_written_on_every_path() {
        // Written only on the jt path, read after the join.
        let prog = [CbpfInsn::jump(JeqK, 0, 0, 1), s(St, 3), s(LdMem, 3), s(RetA, 0)];
        assert_eq!(
            kind(&prog),
            (2, CbpfValidateErrorKind::UninitializedScratch { mnemonic: "ld", cell: 3 })
        );
        assert_eq!(validate_libpcap(&prog), Ok(()));
        let both = [
            CbpfInsn::jump(JeqK, 0, 0, 2),
            s(Stx, 3),
            s(Ja, 1),
            s(St, 3),
            s(LdxMem, 3),
            s(RetA, 0),
        ];
        assert_eq!(validate(&both), Ok(()));
        // Dead code is not judged.
        let dead = [s(RetK, 0), s(LdMem, 9), s(RetA, 0)];
        assert_eq!(validate(&dead), Ok(()));
    }

    #[test]
    fn ancillary_loads() {
        let ret = s(RetA, 0);
        for f in ANCILLARY_FIELDS {
            let prog = [s(LdAbsW, SKF_AD_OFF + f.offset), ret];
            match validate(&prog) {
                Ok(()) => assert!(supported_ancillary(f.offset), "{}", f.kernel_name),
                Err(e) => {
                    assert_eq!(e.index, 0);
                    assert_eq!(e.kind, CbpfValidateErrorKind::UnsupportedAncillary(f.kernel_name));
                }
            }
            // libpcap gives these offsets no meaning: plain (out of bounds) loads.
            assert_eq!(validate_libpcap(&prog), Ok(()));
        }
        assert_eq!(
            kind(&[s(LdAbsB, SKF_NET_OFF + 9), ret]),
            (0, CbpfValidateErrorKind::NegativeOffset { offset: -0x10_0000 + 9 })
        );
        assert_eq!(
            kind(&[s(LdxMsh, SKF_AD_OFF), ret]),
            (0, CbpfValidateErrorKind::NegativeOffset { offset: -0x1000 })
        );
        assert_eq!(
            kind(&[s(LdAbsH, SKF_AD_OFF + 2), ret]),
            (0, CbpfValidateErrorKind::NegativeOffset { offset: -0x1000 + 2 })
        );
        // Below the kernel's special area a large offset is just out of bounds.
        assert_eq!(validate(&[s(LdAbsW, 0x8000_0000), ret]), Ok(()));
    }
}
