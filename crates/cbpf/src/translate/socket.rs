//! Packet access for the socket-filter target: the classic program's loads become the eBPF
//! legacy loads (`ldabs*`/`ldind*`), which read big-endian from the socket buffer and end
//! the program with 0 when the bytes are not there, just as libpcap's loads do. The context
//! (`struct __sk_buff`) stays in r6, where those loads expect it, and supplies the wire
//! length and the ancillary (`SKF_AD_*`) fields.

use weir_isa::cbpf::ancillary::*;
use weir_isa::cbpf::{CbpfInsn, CbpfOp};
use weir_isa::ebpf::Op;
use weir_program::abi::SOCKET_FILTER;

use super::emit::{is_ancillary, Cmp, Emitter, Facts, Operand, REG_A, REG_TMP, REG_X};
use super::{TranslateError, TranslateErrorKind};

/// The context, kept where the legacy packet loads look for it.
const REG_CTX: u8 = 6;
/// Holds A while `ldxb 4*([k]&0xf)` uses r0 for its byte (callee-saved: survives the load).
const REG_SAVED_A: u8 = 8;

/// Largest offset a legacy load reads from exactly as computed: the kernel passes the offset
/// to its load routine as a C `int`.
const MAX_LEGACY_OFFSET: u64 = i32::MAX as u64;

pub(super) fn prologue(e: &mut Emitter<'_>) {
    e.b.alu_reg(Op::Mov64Reg, REG_CTX, 1);
}

/// The `__sk_buff` field that answers an ancillary load at `SKF_AD_OFF + offset`, and
/// whether it holds a network-order 16-bit value (the kernel keeps `protocol` and
/// `vlan_proto` as it found them on the wire). `None`: no such field.
fn sk_buff_field(offset: u32) -> Option<(&'static str, bool)> {
    Some(match offset {
        SKF_AD_PROTOCOL => ("protocol", true),
        SKF_AD_PKTTYPE => ("pkt_type", false),
        SKF_AD_IFINDEX => ("ifindex", false),
        SKF_AD_MARK => ("mark", false),
        SKF_AD_QUEUE => ("queue_mapping", false),
        SKF_AD_RXHASH => ("hash", false),
        SKF_AD_VLAN_TAG => ("vlan_tci", false),
        SKF_AD_VLAN_TAG_PRESENT => ("vlan_present", false),
        SKF_AD_VLAN_TPID => ("vlan_proto", true),
        _ => return None,
    })
}

/// Why an ancillary load at `SKF_AD_OFF + offset` cannot be translated for a socket filter,
/// if it cannot. `SKF_AD_ALU_XOR_X` is arithmetic, not a field, and always translates.
pub(super) fn ancillary_problem(offset: u32) -> Option<TranslateErrorKind> {
    if offset == SKF_AD_ALU_XOR_X || sk_buff_field(offset).is_some() {
        return None;
    }
    let name = ancillary_kernel_name(SKF_AD_OFF.wrapping_add(offset)).unwrap_or("SKF_AD_?");
    Some(TranslateErrorKind::NoSkBuffField(name))
}

/// The offset of a `__sk_buff` field in weir's layout (which is the kernel's).
fn field_offset(name: &str) -> Option<i16> {
    SOCKET_FILTER.field(name).and_then(|f| i16::try_from(f.offset).ok())
}

/// Translates a packet load, `len` or `ldxb 4*([k]&0xf)`.
pub(super) fn load(
    e: &mut Emitter<'_>,
    index: usize,
    insn: &CbpfInsn,
    facts: Facts,
) -> Result<Facts, TranslateError> {
    use CbpfOp::*;
    let k = insn.k;
    let mut out = facts;
    match insn.op {
        _ if is_ancillary(insn) => ancillary(e, index, k.wrapping_sub(SKF_AD_OFF))?,
        // An offset above i32::MAX is negative to the kernel, which then fails the load (the
        // negative areas other than SKF_AD_* do not pass validation), as libpcap would.
        LdAbsW => legacy_abs(e, Op::LdAbsW, k),
        LdAbsH => legacy_abs(e, Op::LdAbsH, k),
        LdAbsB => legacy_abs(e, Op::LdAbsB, k),
        LdIndW => legacy_ind(e, Op::LdIndW, 4, k, facts.x_max),
        LdIndH => legacy_ind(e, Op::LdIndH, 2, k, facts.x_max),
        LdIndB => legacy_ind(e, Op::LdIndB, 1, k, facts.x_max),
        LdxMsh => {
            e.b.alu_reg(Op::Mov64Reg, REG_SAVED_A, REG_A);
            legacy_abs(e, Op::LdAbsB, k);
            e.b.alu_imm(Op::And32Imm, REG_A, 0xf);
            e.b.alu_imm(Op::Lsh32Imm, REG_A, 2);
            e.b.alu_reg(Op::Mov32Reg, REG_X, REG_A);
            e.b.alu_reg(Op::Mov64Reg, REG_A, REG_SAVED_A);
            out.x_max = 60;
        }
        LdLen => wire_len(e, REG_A),
        LdxLen => {
            wire_len(e, REG_X);
            out.x_max = u32::MAX;
        }
        _ => {}
    }
    Ok(out)
}

fn legacy_abs(e: &mut Emitter<'_>, op: Op, k: u32) {
    e.b.ld_abs(op, k as i32);
}

/// `ld [x + k]`. The kernel adds X and the sign-extended `k` in 64 bits and truncates the
/// sum to an `int`, so X + k past `i32::MAX` would wrap to a small or negative (header-
/// relative) offset, where libpcap fails the load. Unless X's bound keeps the sum in range,
/// the exact sum is formed first and anything past `i32::MAX` (far beyond any packet)
/// returns 0.
fn legacy_ind(e: &mut Emitter<'_>, op: Op, size: u32, k: u32, x_max: u32) {
    let worst = u64::from(x_max).wrapping_add(u64::from(k)).wrapping_add(u64::from(size));
    if worst <= MAX_LEGACY_OFFSET {
        e.b.ld_ind(op, REG_X, k as i32);
        return;
    }
    e.b.alu_imm(Op::Mov32Imm, REG_TMP, k as i32);
    e.b.alu_reg(Op::Add64Reg, REG_TMP, REG_X);
    e.fail_unless(Cmp::Le, REG_TMP, Operand::Imm(i32::MAX));
    e.b.ld_ind(op, REG_TMP, 0);
}

/// `len`: the wire length is `__sk_buff.len`.
fn wire_len(e: &mut Emitter<'_>, dst: u8) {
    let offset = field_offset("len").unwrap_or(0);
    e.b.load(Op::LdxW, dst, REG_CTX, offset);
}

/// An ancillary load: A = the `__sk_buff` field, in host order.
fn ancillary(e: &mut Emitter<'_>, index: usize, offset: u32) -> Result<(), TranslateError> {
    if offset == SKF_AD_ALU_XOR_X {
        e.b.alu_reg(Op::Xor32Reg, REG_A, REG_X);
        return Ok(());
    }
    let field = sk_buff_field(offset).and_then(|(name, swap)| Some((field_offset(name)?, swap)));
    let Some((field_offset, network_order)) = field else {
        let kind =
            ancillary_problem(offset).unwrap_or(TranslateErrorKind::NoSkBuffField("SKF_AD_?"));
        return Err(TranslateError { index, kind });
    };
    e.b.load(Op::LdxW, REG_A, REG_CTX, field_offset);
    if network_order {
        e.b.byte_swap(Op::Be16, REG_A);
    }
    Ok(())
}
