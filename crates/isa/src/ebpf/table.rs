//! The eBPF opcode table. Each row: `Variant = (opcode byte, discriminator, mnemonic,
//! operand shape)`. The [`Op`] enum is generated from the same rows, so an operation cannot
//! exist without an encoding, a mnemonic and an operand shape.

use super::{Disc, Operands, PseudoKind, Size};

/// One row of the opcode table.
#[derive(Clone, Copy, Debug)]
pub struct OpSpec {
    pub op: Op,
    pub opcode: u8,
    pub disc: Disc,
    pub mnemonic: &'static str,
    pub operands: Operands,
}

macro_rules! opcode_table {
    ($( $variant:ident = ($opcode:expr, $disc:expr, $mnemonic:expr, $operands:expr), )*) => {
        /// Every eBPF operation weir knows: one per row of [`OPCODES`], plus [`Op::LddwHigh`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Op {
            $( $variant, )*
            /// The second slot of `lddw`; never executed, never a jump target.
            LddwHigh,
        }

        /// The opcode table: the single source of truth for eBPF encodings.
        pub static OPCODES: &[OpSpec] = {
            use Operands::*;
            &[ $( OpSpec { op: Op::$variant, opcode: $opcode, disc: $disc, mnemonic: $mnemonic, operands: $operands }, )* ]
        };
    };
}

opcode_table! {
    Add64Imm = (0x07, Disc::None, "add", DstImm),
    Add64Reg = (0x0f, Disc::None, "add", DstSrc),
    Sub64Imm = (0x17, Disc::None, "sub", DstImm),
    Sub64Reg = (0x1f, Disc::None, "sub", DstSrc),
    Mul64Imm = (0x27, Disc::None, "mul", DstImm),
    Mul64Reg = (0x2f, Disc::None, "mul", DstSrc),
    Div64Imm = (0x37, Disc::Off(0), "div", DstImm),
    Div64Reg = (0x3f, Disc::Off(0), "div", DstSrc),
    Sdiv64Imm = (0x37, Disc::Off(1), "sdiv", DstImm),
    Sdiv64Reg = (0x3f, Disc::Off(1), "sdiv", DstSrc),
    Or64Imm = (0x47, Disc::None, "or", DstImm),
    Or64Reg = (0x4f, Disc::None, "or", DstSrc),
    And64Imm = (0x57, Disc::None, "and", DstImm),
    And64Reg = (0x5f, Disc::None, "and", DstSrc),
    Lsh64Imm = (0x67, Disc::None, "lsh", DstImm),
    Lsh64Reg = (0x6f, Disc::None, "lsh", DstSrc),
    Rsh64Imm = (0x77, Disc::None, "rsh", DstImm),
    Rsh64Reg = (0x7f, Disc::None, "rsh", DstSrc),
    Mod64Imm = (0x97, Disc::Off(0), "mod", DstImm),
    Mod64Reg = (0x9f, Disc::Off(0), "mod", DstSrc),
    Smod64Imm = (0x97, Disc::Off(1), "smod", DstImm),
    Smod64Reg = (0x9f, Disc::Off(1), "smod", DstSrc),
    Xor64Imm = (0xa7, Disc::None, "xor", DstImm),
    Xor64Reg = (0xaf, Disc::None, "xor", DstSrc),
    Mov64Imm = (0xb7, Disc::Off(0), "mov", DstImm),
    Mov64Reg = (0xbf, Disc::Off(0), "mov", DstSrc),
    Arsh64Imm = (0xc7, Disc::None, "arsh", DstImm),
    Arsh64Reg = (0xcf, Disc::None, "arsh", DstSrc),
    Neg64 = (0x87, Disc::None, "neg", Dst),
    MovSx8To64 = (0xbf, Disc::Off(8), "movsx864", DstSrc),
    MovSx16To64 = (0xbf, Disc::Off(16), "movsx1664", DstSrc),
    MovSx32To64 = (0xbf, Disc::Off(32), "movsx3264", DstSrc),
    Add32Imm = (0x04, Disc::None, "add32", DstImm),
    Add32Reg = (0x0c, Disc::None, "add32", DstSrc),
    Sub32Imm = (0x14, Disc::None, "sub32", DstImm),
    Sub32Reg = (0x1c, Disc::None, "sub32", DstSrc),
    Mul32Imm = (0x24, Disc::None, "mul32", DstImm),
    Mul32Reg = (0x2c, Disc::None, "mul32", DstSrc),
    Div32Imm = (0x34, Disc::Off(0), "div32", DstImm),
    Div32Reg = (0x3c, Disc::Off(0), "div32", DstSrc),
    Sdiv32Imm = (0x34, Disc::Off(1), "sdiv32", DstImm),
    Sdiv32Reg = (0x3c, Disc::Off(1), "sdiv32", DstSrc),
    Or32Imm = (0x44, Disc::None, "or32", DstImm),
    Or32Reg = (0x4c, Disc::None, "or32", DstSrc),
    And32Imm = (0x54, Disc::None, "and32", DstImm),
    And32Reg = (0x5c, Disc::None, "and32", DstSrc),
    Lsh32Imm = (0x64, Disc::None, "lsh32", DstImm),
    Lsh32Reg = (0x6c, Disc::None, "lsh32", DstSrc),
    Rsh32Imm = (0x74, Disc::None, "rsh32", DstImm),
    Rsh32Reg = (0x7c, Disc::None, "rsh32", DstSrc),
    Mod32Imm = (0x94, Disc::Off(0), "mod32", DstImm),
    Mod32Reg = (0x9c, Disc::Off(0), "mod32", DstSrc),
    Smod32Imm = (0x94, Disc::Off(1), "smod32", DstImm),
    Smod32Reg = (0x9c, Disc::Off(1), "smod32", DstSrc),
    Xor32Imm = (0xa4, Disc::None, "xor32", DstImm),
    Xor32Reg = (0xac, Disc::None, "xor32", DstSrc),
    Mov32Imm = (0xb4, Disc::Off(0), "mov32", DstImm),
    Mov32Reg = (0xbc, Disc::Off(0), "mov32", DstSrc),
    Arsh32Imm = (0xc4, Disc::None, "arsh32", DstImm),
    Arsh32Reg = (0xcc, Disc::None, "arsh32", DstSrc),
    Neg32 = (0x84, Disc::None, "neg32", Dst),
    MovSx8To32 = (0xbc, Disc::Off(8), "movsx832", DstSrc),
    MovSx16To32 = (0xbc, Disc::Off(16), "movsx1632", DstSrc),
    Le16 = (0xd4, Disc::Imm(16), "le16", Dst),
    Be16 = (0xdc, Disc::Imm(16), "be16", Dst),
    Bswap16 = (0xd7, Disc::Imm(16), "bswap16", Dst),
    Le32 = (0xd4, Disc::Imm(32), "le32", Dst),
    Be32 = (0xdc, Disc::Imm(32), "be32", Dst),
    Bswap32 = (0xd7, Disc::Imm(32), "bswap32", Dst),
    Le64 = (0xd4, Disc::Imm(64), "le64", Dst),
    Be64 = (0xdc, Disc::Imm(64), "be64", Dst),
    Bswap64 = (0xd7, Disc::Imm(64), "bswap64", Dst),
    Ja = (0x05, Disc::None, "ja", JmpOff),
    Ja32 = (0x06, Disc::None, "ja32", JmpImm),
    Jeq64Imm = (0x15, Disc::None, "jeq", DstImmOff),
    Jeq64Reg = (0x1d, Disc::None, "jeq", DstSrcOff),
    Jgt64Imm = (0x25, Disc::None, "jgt", DstImmOff),
    Jgt64Reg = (0x2d, Disc::None, "jgt", DstSrcOff),
    Jge64Imm = (0x35, Disc::None, "jge", DstImmOff),
    Jge64Reg = (0x3d, Disc::None, "jge", DstSrcOff),
    Jset64Imm = (0x45, Disc::None, "jset", DstImmOff),
    Jset64Reg = (0x4d, Disc::None, "jset", DstSrcOff),
    Jne64Imm = (0x55, Disc::None, "jne", DstImmOff),
    Jne64Reg = (0x5d, Disc::None, "jne", DstSrcOff),
    Jsgt64Imm = (0x65, Disc::None, "jsgt", DstImmOff),
    Jsgt64Reg = (0x6d, Disc::None, "jsgt", DstSrcOff),
    Jsge64Imm = (0x75, Disc::None, "jsge", DstImmOff),
    Jsge64Reg = (0x7d, Disc::None, "jsge", DstSrcOff),
    Jlt64Imm = (0xa5, Disc::None, "jlt", DstImmOff),
    Jlt64Reg = (0xad, Disc::None, "jlt", DstSrcOff),
    Jle64Imm = (0xb5, Disc::None, "jle", DstImmOff),
    Jle64Reg = (0xbd, Disc::None, "jle", DstSrcOff),
    Jslt64Imm = (0xc5, Disc::None, "jslt", DstImmOff),
    Jslt64Reg = (0xcd, Disc::None, "jslt", DstSrcOff),
    Jsle64Imm = (0xd5, Disc::None, "jsle", DstImmOff),
    Jsle64Reg = (0xdd, Disc::None, "jsle", DstSrcOff),
    Jeq32Imm = (0x16, Disc::None, "jeq32", DstImmOff),
    Jeq32Reg = (0x1e, Disc::None, "jeq32", DstSrcOff),
    Jgt32Imm = (0x26, Disc::None, "jgt32", DstImmOff),
    Jgt32Reg = (0x2e, Disc::None, "jgt32", DstSrcOff),
    Jge32Imm = (0x36, Disc::None, "jge32", DstImmOff),
    Jge32Reg = (0x3e, Disc::None, "jge32", DstSrcOff),
    Jset32Imm = (0x46, Disc::None, "jset32", DstImmOff),
    Jset32Reg = (0x4e, Disc::None, "jset32", DstSrcOff),
    Jne32Imm = (0x56, Disc::None, "jne32", DstImmOff),
    Jne32Reg = (0x5e, Disc::None, "jne32", DstSrcOff),
    Jsgt32Imm = (0x66, Disc::None, "jsgt32", DstImmOff),
    Jsgt32Reg = (0x6e, Disc::None, "jsgt32", DstSrcOff),
    Jsge32Imm = (0x76, Disc::None, "jsge32", DstImmOff),
    Jsge32Reg = (0x7e, Disc::None, "jsge32", DstSrcOff),
    Jlt32Imm = (0xa6, Disc::None, "jlt32", DstImmOff),
    Jlt32Reg = (0xae, Disc::None, "jlt32", DstSrcOff),
    Jle32Imm = (0xb6, Disc::None, "jle32", DstImmOff),
    Jle32Reg = (0xbe, Disc::None, "jle32", DstSrcOff),
    Jslt32Imm = (0xc6, Disc::None, "jslt32", DstImmOff),
    Jslt32Reg = (0xce, Disc::None, "jslt32", DstSrcOff),
    Jsle32Imm = (0xd6, Disc::None, "jsle32", DstImmOff),
    Jsle32Reg = (0xde, Disc::None, "jsle32", DstSrcOff),
    Call = (0x85, Disc::Src(0), "call", CallImm),
    CallLocal = (0x85, Disc::Src(1), "call local", CallLocal),
    CallKfunc = (0x85, Disc::Src(2), "call kfunc", CallImm),
    CallReg = (0x8d, Disc::None, "call", CallReg),
    Exit = (0x95, Disc::None, "exit", Nothing),
    LdxB = (0x71, Disc::None, "ldxb", Load),
    LdxH = (0x69, Disc::None, "ldxh", Load),
    LdxW = (0x61, Disc::None, "ldxw", Load),
    LdxDw = (0x79, Disc::None, "ldxdw", Load),
    LdxBSx = (0x91, Disc::None, "ldxbsx", Load),
    LdxHSx = (0x89, Disc::None, "ldxhsx", Load),
    LdxWSx = (0x81, Disc::None, "ldxwsx", Load),
    StB = (0x72, Disc::None, "stb", StoreImm),
    StH = (0x6a, Disc::None, "sth", StoreImm),
    StW = (0x62, Disc::None, "stw", StoreImm),
    StDw = (0x7a, Disc::None, "stdw", StoreImm),
    StxB = (0x73, Disc::None, "stxb", StoreReg),
    StxH = (0x6b, Disc::None, "stxh", StoreReg),
    StxW = (0x63, Disc::None, "stxw", StoreReg),
    StxDw = (0x7b, Disc::None, "stxdw", StoreReg),
    AtomicAdd64 = (0xdb, Disc::Imm(0x00), "lock add", StoreReg),
    AtomicFetchAdd64 = (0xdb, Disc::Imm(0x01), "lock fetch add", StoreReg),
    AtomicOr64 = (0xdb, Disc::Imm(0x40), "lock or", StoreReg),
    AtomicFetchOr64 = (0xdb, Disc::Imm(0x41), "lock fetch or", StoreReg),
    AtomicAnd64 = (0xdb, Disc::Imm(0x50), "lock and", StoreReg),
    AtomicFetchAnd64 = (0xdb, Disc::Imm(0x51), "lock fetch and", StoreReg),
    AtomicXor64 = (0xdb, Disc::Imm(0xa0), "lock xor", StoreReg),
    AtomicFetchXor64 = (0xdb, Disc::Imm(0xa1), "lock fetch xor", StoreReg),
    AtomicXchg64 = (0xdb, Disc::Imm(0xe1), "lock xchg", StoreReg),
    AtomicCmpXchg64 = (0xdb, Disc::Imm(0xf1), "lock cmpxchg", StoreReg),
    AtomicAdd32 = (0xc3, Disc::Imm(0x00), "lock add32", StoreReg),
    AtomicFetchAdd32 = (0xc3, Disc::Imm(0x01), "lock fetch add32", StoreReg),
    AtomicOr32 = (0xc3, Disc::Imm(0x40), "lock or32", StoreReg),
    AtomicFetchOr32 = (0xc3, Disc::Imm(0x41), "lock fetch or32", StoreReg),
    AtomicAnd32 = (0xc3, Disc::Imm(0x50), "lock and32", StoreReg),
    AtomicFetchAnd32 = (0xc3, Disc::Imm(0x51), "lock fetch and32", StoreReg),
    AtomicXor32 = (0xc3, Disc::Imm(0xa0), "lock xor32", StoreReg),
    AtomicFetchXor32 = (0xc3, Disc::Imm(0xa1), "lock fetch xor32", StoreReg),
    AtomicXchg32 = (0xc3, Disc::Imm(0xe1), "lock xchg32", StoreReg),
    AtomicCmpXchg32 = (0xc3, Disc::Imm(0xf1), "lock cmpxchg32", StoreReg),
    Lddw = (0x18, Disc::Src(0), "lddw", DstImm64),
    LddwMapFd = (0x18, Disc::Src(1), "lddw", Pseudo(PseudoKind::MapFd)),
    LddwMapValue = (0x18, Disc::Src(2), "lddw", Pseudo(PseudoKind::MapValue)),
    LddwBtfId = (0x18, Disc::Src(3), "lddw", Pseudo(PseudoKind::BtfId)),
    LddwFunc = (0x18, Disc::Src(4), "lddw", Pseudo(PseudoKind::Func)),
    LddwMapIdx = (0x18, Disc::Src(5), "lddw", Pseudo(PseudoKind::MapIdx)),
    LddwMapIdxValue = (0x18, Disc::Src(6), "lddw", Pseudo(PseudoKind::MapIdxValue)),
    LdAbsB = (0x30, Disc::None, "ldabsb", Abs),
    LdAbsH = (0x28, Disc::None, "ldabsh", Abs),
    LdAbsW = (0x20, Disc::None, "ldabsw", Abs),
    LdIndB = (0x50, Disc::None, "ldindb", Ind),
    LdIndH = (0x48, Disc::None, "ldindh", Ind),
    LdIndW = (0x40, Disc::None, "ldindw", Ind),
}

/// The row of `op` (`None` for [`Op::LddwHigh`]). Rows are in `Op` order, so this is an index.
pub fn spec_of(op: Op) -> Option<&'static OpSpec> {
    OPCODES.get(op as usize)
}

/// All rows with this opcode byte (several when a discriminator field picks among them).
pub fn specs_for_opcode(opcode: u8) -> impl Iterator<Item = &'static OpSpec> {
    OPCODES.iter().filter(move |s| s.opcode == opcode)
}

/// All rows with this mnemonic (e.g. `add` has an immediate and a register form).
pub fn specs_for_mnemonic(mnemonic: &str) -> impl Iterator<Item = &'static OpSpec> + '_ {
    OPCODES.iter().filter(move |s| s.mnemonic == mnemonic)
}

impl Op {
    pub fn spec(self) -> Option<&'static OpSpec> {
        spec_of(self)
    }

    /// The instruction class (low three bits of the opcode).
    pub fn class(self) -> u8 {
        match self.spec() {
            Some(s) => s.opcode & 0x07,
            None => 0,
        }
    }

    pub fn is_lddw(self) -> bool {
        matches!(self.spec(), Some(s) if s.opcode == 0x18)
    }

    /// A legacy packet load (`ldabs*`, `ldind*`: the kernel makes each a helper call).
    pub fn is_legacy_load(self) -> bool {
        matches!(self.spec().map(|s| s.operands), Some(Operands::Abs | Operands::Ind))
    }

    /// Conditional or unconditional jump within the function (not call or exit).
    pub fn is_jump(self) -> bool {
        matches!(
            self.spec().map(|s| s.operands),
            Some(Operands::JmpOff | Operands::JmpImm | Operands::DstImmOff | Operands::DstSrcOff)
        )
    }

    pub fn is_conditional_jump(self) -> bool {
        matches!(self.spec().map(|s| s.operands), Some(Operands::DstImmOff | Operands::DstSrcOff))
    }

    /// Writes `dst` as a register (ALU, loads, lddw). Stores and atomics write memory instead.
    pub fn writes_dst(self) -> bool {
        matches!(
            self.spec().map(|s| s.operands),
            Some(
                Operands::DstImm
                    | Operands::DstSrc
                    | Operands::Dst
                    | Operands::Load
                    | Operands::DstImm64
                    | Operands::Pseudo(_)
            )
        )
    }

    /// Width of a memory access (loads, stores, atomics, legacy packet loads).
    pub fn mem_size(self) -> Option<Size> {
        let s = self.spec()?;
        match s.operands {
            Operands::Load
            | Operands::StoreImm
            | Operands::StoreReg
            | Operands::Abs
            | Operands::Ind => Some(match s.opcode & 0x18 {
                0x10 => Size::B,
                0x08 => Size::H,
                0x00 => Size::W,
                _ => Size::Dw,
            }),
            _ => None,
        }
    }

    /// Whether the operation uses 32-bit (ALU32 / JMP32 / 32-bit atomic) semantics.
    pub fn is_32bit(self) -> bool {
        match self.spec() {
            Some(s) => match s.opcode & 0x07 {
                0x04 | 0x06 => true,
                0x03 => s.opcode & 0x18 == 0x00,
                _ => false,
            },
            None => false,
        }
    }

    pub fn pseudo_kind(self) -> Option<PseudoKind> {
        match self.spec()?.operands {
            Operands::Pseudo(k) => Some(k),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_loads_are_the_ld_class_abs_and_ind_modes() {
        for s in OPCODES {
            let want = s.opcode & 0x07 == 0 && matches!(s.opcode & 0xe0, 0x20 | 0x40);
            assert_eq!(s.op.is_legacy_load(), want, "{:?}", s.op);
        }
        assert_eq!(OPCODES.iter().filter(|s| s.op.is_legacy_load()).count(), 6);
    }

    #[test]
    fn rows_are_in_op_order() {
        for (i, s) in OPCODES.iter().enumerate() {
            assert_eq!(s.op as usize, i, "{:?}", s.op);
        }
        assert_eq!(Op::LddwHigh as usize, OPCODES.len());
    }

    #[test]
    fn opcode_and_discriminator_pick_one_row() {
        for (i, a) in OPCODES.iter().enumerate() {
            for b in &OPCODES[i + 1..] {
                assert!(
                    !(a.opcode == b.opcode && a.disc == b.disc),
                    "{:?} and {:?} share an encoding",
                    a.op,
                    b.op
                );
            }
        }
    }

    #[test]
    fn table_size_matches_the_instruction_set() {
        // ALU: 12 ops x 2 sources x 2 widths, sdiv/smod 8, neg 2, movsx 5; byte swaps 9;
        // jumps 2 + 44; calls 4; exit 1; loads 7; stores 8; atomics 20; lddw 7; legacy 6.
        assert_eq!(OPCODES.len(), 48 + 8 + 2 + 5 + 9 + 46 + 4 + 1 + 7 + 8 + 20 + 7 + 6);
    }
}
