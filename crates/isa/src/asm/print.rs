//! The disassembler and the listing, driven by the opcode table: every instruction is printed
//! from its row's `mnemonic` and operand shape, so a new row prints without new code here.
//!
//! The disassembly is canonical text: assembling it gives back the same instructions, and
//! disassembling that gives back the same text. Hence the exact number formats below, each
//! of which the assembler reads back to the same bit pattern.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::ebpf::{encode_insn, Insn, Op, Operands, PseudoKind, RawInsn};

/// Immediates: decimal when small, hex when large (bit masks and addresses read better so).
pub(super) fn format_imm(value: i64) -> String {
    if value > -0x10000 && value < 0x10000 {
        value.to_string()
    } else if value < 0 {
        format!("-{:#x}", value.unsigned_abs())
    } else {
        format!("{value:#x}")
    }
}

/// Relative jump offsets always carry a sign: `+2`, `-1`, `+0`.
fn format_offset(value: i64) -> String {
    if value < 0 {
        value.to_string()
    } else {
        format!("+{value}")
    }
}

fn reg(n: u8) -> String {
    format!("%r{n}")
}

fn mem(base: u8, off: i16) -> String {
    format!("[%r{base}{}]", format_offset(i64::from(off)))
}

/// The low 32 bits of a 64-bit `lddw` immediate, when the high half is zero.
fn low_half(imm: i64) -> Option<u32> {
    u32::try_from(imm).ok()
}

/// The argument text of `lddw %rN, kind(...)`.
fn pseudo_args(kind: PseudoKind, imm: i64) -> String {
    let bits = imm as u64;
    if kind.has_offset() {
        let fd = bits as u32;
        let off = (bits >> 32) as u32 as i32;
        return format!("{}, {}", format_imm(i64::from(fd)), format_imm(i64::from(off)));
    }
    match (kind, low_half(imm)) {
        (PseudoKind::Func, Some(low)) => format_offset(i64::from(low as i32)),
        (_, Some(low)) => format_imm(i64::from(low)),
        // A value that does not fit in 32 bits is written whole; the assembler reads any
        // number beyond the 32-bit range as the full 64-bit immediate.
        (_, None) => format!("{bits:#x}"),
    }
}

/// One instruction as canonical text, without a newline. The second slot of `lddw` has no
/// text of its own and prints as a comment.
pub fn disassemble_insn(insn: &Insn) -> String {
    let Some(spec) = insn.spec() else {
        return "# second slot of lddw".to_string();
    };
    let m = spec.mnemonic;
    let (dst, src) = (reg(insn.dst), reg(insn.src));
    match spec.operands {
        Operands::DstImm => format!("{m} {dst}, {}", format_imm(insn.imm)),
        Operands::DstSrc => format!("{m} {dst}, {src}"),
        Operands::Dst | Operands::CallReg => format!("{m} {dst}"),
        Operands::JmpOff => format!("{m} {}", format_offset(i64::from(insn.off))),
        Operands::JmpImm | Operands::CallLocal => format!("{m} {}", format_offset(insn.imm)),
        Operands::DstImmOff => {
            format!("{m} {dst}, {}, {}", format_imm(insn.imm), format_offset(i64::from(insn.off)))
        }
        Operands::DstSrcOff => format!("{m} {dst}, {src}, {}", format_offset(i64::from(insn.off))),
        Operands::CallImm | Operands::Abs => format!("{m} {}", format_imm(insn.imm)),
        Operands::Nothing => m.to_string(),
        Operands::Load => format!("{m} {dst}, {}", mem(insn.src, insn.off)),
        Operands::StoreImm => format!("{m} {}, {}", mem(insn.dst, insn.off), format_imm(insn.imm)),
        Operands::StoreReg => format!("{m} {}, {src}", mem(insn.dst, insn.off)),
        Operands::DstImm64 => format!("{m} {dst}, {:#x}", insn.imm as u64),
        Operands::Pseudo(kind) => {
            format!("{m} {dst}, {}({})", kind.name(), pseudo_args(kind, insn.imm))
        }
        Operands::Ind => format!("{m} {src}, {}", format_imm(insn.imm)),
    }
}

/// Canonical text of a program, one instruction per line (each ending in a newline), with
/// relative jump offsets and without the `lddw` second-slot fillers.
pub fn disassemble(insns: &[Insn]) -> String {
    let mut out = String::new();
    for insn in insns.iter().filter(|i| i.op != Op::LddwHigh) {
        out.push_str(&disassemble_insn(insn));
        out.push('\n');
    }
    out
}

/// The absolute slot a jump, local call or `lddw func` at `pc` refers to.
fn target_slot(pc: usize, insn: &Insn) -> Option<i64> {
    let offset = match insn.spec()?.operands {
        Operands::JmpOff | Operands::DstImmOff | Operands::DstSrcOff => i64::from(insn.off),
        Operands::JmpImm | Operands::CallLocal => insn.imm,
        Operands::Pseudo(PseudoKind::Func) => i64::from(low_half(insn.imm)? as i32),
        _ => return None,
    };
    i64::try_from(pc).ok()?.checked_add(1)?.checked_add(offset)
}

fn hex_bytes(raw: RawInsn) -> String {
    let bytes: Vec<String> = raw.to_bytes().iter().map(|b| format!("{b:02x}")).collect();
    bytes.join(" ")
}

/// A listing for people: slot index, the slot's 8 bytes, the instruction and, for jumps and
/// calls, the absolute target slot; a label line `L<slot>:` precedes every target slot.
///
/// ```text
/// L2:
///    2: 15 01 02 00 05 00 00 00   jeq %r1, 5, +2   ; -> 5
/// ```
pub fn listing(insns: &[Insn]) -> String {
    let targets: BTreeSet<i64> =
        insns.iter().enumerate().filter_map(|(pc, insn)| target_slot(pc, insn)).collect();
    let width = insns.len().to_string().len().max(4);
    let mut out = String::new();
    // The second slot's bytes come from encoding its lddw.
    let mut high: Option<RawInsn> = None;
    for (pc, insn) in insns.iter().enumerate() {
        if i64::try_from(pc).is_ok_and(|pc| targets.contains(&pc)) {
            let _ = writeln!(out, "L{pc}:");
        }
        if insn.op == Op::LddwHigh {
            let raw = high.take().unwrap_or_default();
            let _ = writeln!(out, "{pc:>width$}: {}", hex_bytes(raw));
            continue;
        }
        let (slots, used) = encode_insn(insn);
        high = if used == 2 { slots.get(1).copied() } else { None };
        let text = disassemble_insn(insn);
        let first = slots.first().copied().unwrap_or_default();
        match target_slot(pc, insn) {
            Some(t) => {
                let _ = writeln!(out, "{pc:>width$}: {}   {text}   ; -> {t}", hex_bytes(first));
            }
            None => {
                let _ = writeln!(out, "{pc:>width$}: {}   {text}", hex_bytes(first));
            }
        }
    }
    out
}
