//! The fields of a classic BPF `code`, under the kernel's names (`BPF_LD` is [`LD`], and so
//! on; each constant carries its kernel name as a doc alias). The opcode table in this module's
//! parent is written with these, so that every row reads like the kernel's `BPF_STMT` lines.
//!
//! A code is `class | size | mode` for loads and stores, `class | op | source` for ALU and
//! jumps, `class | rval` for `ret` and `class | miscop` for `tax`/`txa`.

// Instruction classes (low three bits).
#[doc(alias = "BPF_LD")]
pub const LD: u16 = 0x00;
#[doc(alias = "BPF_LDX")]
pub const LDX: u16 = 0x01;
#[doc(alias = "BPF_ST")]
pub const ST: u16 = 0x02;
#[doc(alias = "BPF_STX")]
pub const STX: u16 = 0x03;
#[doc(alias = "BPF_ALU")]
pub const ALU: u16 = 0x04;
#[doc(alias = "BPF_JMP")]
pub const JMP: u16 = 0x05;
#[doc(alias = "BPF_RET")]
pub const RET: u16 = 0x06;
#[doc(alias = "BPF_MISC")]
pub const MISC: u16 = 0x07;

// Load sizes (bits 3-4).
#[doc(alias = "BPF_W")]
pub const W: u16 = 0x00;
#[doc(alias = "BPF_H")]
pub const H: u16 = 0x08;
#[doc(alias = "BPF_B")]
pub const B: u16 = 0x10;

// Load modes (bits 5-7).
#[doc(alias = "BPF_IMM")]
pub const IMM: u16 = 0x00;
#[doc(alias = "BPF_ABS")]
pub const ABS: u16 = 0x20;
#[doc(alias = "BPF_IND")]
pub const IND: u16 = 0x40;
#[doc(alias = "BPF_MEM")]
pub const MEM: u16 = 0x60;
#[doc(alias = "BPF_LEN")]
pub const LEN: u16 = 0x80;
#[doc(alias = "BPF_MSH")]
pub const MSH: u16 = 0xa0;

// ALU operations (bits 4-7).
#[doc(alias = "BPF_ADD")]
pub const ADD: u16 = 0x00;
#[doc(alias = "BPF_SUB")]
pub const SUB: u16 = 0x10;
#[doc(alias = "BPF_MUL")]
pub const MUL: u16 = 0x20;
#[doc(alias = "BPF_DIV")]
pub const DIV: u16 = 0x30;
#[doc(alias = "BPF_OR")]
pub const OR: u16 = 0x40;
#[doc(alias = "BPF_AND")]
pub const AND: u16 = 0x50;
#[doc(alias = "BPF_LSH")]
pub const LSH: u16 = 0x60;
#[doc(alias = "BPF_RSH")]
pub const RSH: u16 = 0x70;
#[doc(alias = "BPF_NEG")]
pub const NEG: u16 = 0x80;
#[doc(alias = "BPF_MOD")]
pub const MOD: u16 = 0x90;
#[doc(alias = "BPF_XOR")]
pub const XOR: u16 = 0xa0;

// Jump operations (bits 4-7).
#[doc(alias = "BPF_JA")]
pub const JA: u16 = 0x00;
#[doc(alias = "BPF_JEQ")]
pub const JEQ: u16 = 0x10;
#[doc(alias = "BPF_JGT")]
pub const JGT: u16 = 0x20;
#[doc(alias = "BPF_JGE")]
pub const JGE: u16 = 0x30;
#[doc(alias = "BPF_JSET")]
pub const JSET: u16 = 0x40;

// Operand source of ALU and jumps (bit 3): the constant `k` or the index register `x`.
#[doc(alias = "BPF_K")]
pub const K: u16 = 0x00;
#[doc(alias = "BPF_X")]
pub const X: u16 = 0x08;

/// `ret` source (bits 3-4): `ret #k` is `RET | K`, `ret a` is `RET | A`. `RET | X` (0x0e) is
/// defined by neither the kernel nor libpcap and does not decode.
#[doc(alias = "BPF_A")]
pub const A: u16 = 0x10;

// Miscellaneous operations (bits 3-7).
#[doc(alias = "BPF_TAX")]
pub const TAX: u16 = 0x00;
#[doc(alias = "BPF_TXA")]
pub const TXA: u16 = 0x80;

/// The class bits of a code (the kernel's `BPF_CLASS`).
#[doc(alias = "BPF_CLASS")]
#[inline]
pub const fn class(code: u16) -> u16 {
    code & 0x07
}

/// The size bits of a load or store code (`BPF_SIZE`).
#[doc(alias = "BPF_SIZE")]
pub const fn size(code: u16) -> u16 {
    code & 0x18
}

/// The mode bits of a load or store code (`BPF_MODE`).
#[doc(alias = "BPF_MODE")]
pub const fn mode(code: u16) -> u16 {
    code & 0xe0
}

/// The operation bits of an ALU or jump code (`BPF_OP`).
#[doc(alias = "BPF_OP")]
#[inline]
pub const fn op(code: u16) -> u16 {
    code & 0xf0
}

/// The source bit of an ALU or jump code (`BPF_SRC`).
#[doc(alias = "BPF_SRC")]
pub const fn src(code: u16) -> u16 {
    code & 0x08
}

/// The return-value bits of a `ret` code (`BPF_RVAL`).
#[doc(alias = "BPF_RVAL")]
pub const fn rval(code: u16) -> u16 {
    code & 0x18
}

/// The operation bits of a misc code (`BPF_MISCOP`).
#[doc(alias = "BPF_MISCOP")]
pub const fn miscop(code: u16) -> u16 {
    code & 0xf8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_extractors_split_a_code_into_what_built_it() {
        let ld = LD | H | IND;
        assert_eq!((class(ld), size(ld), mode(ld)), (LD, H, IND));
        let jmp = JMP | JSET | X;
        assert_eq!((class(jmp), op(jmp), src(jmp)), (JMP, JSET, X));
        assert_eq!(rval(RET | A), A);
        assert_eq!(miscop(MISC | TXA), TXA);
        assert_eq!(LDX | B | MSH, 0xb1);
    }
}
