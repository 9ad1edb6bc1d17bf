//! The classic BPF opcode table. Each row: `Variant = (code, mnemonic, operand form)`, with the
//! mnemonic and operand form `tcpdump -d` prints. The [`CbpfOp`] enum is generated from the
//! same rows, so an operation cannot exist without an encoding and a printed form.
//!
//! The rows are exactly the codes both the kernel's classic checker and libpcap's interpreter
//! accept: a code is one whole value, not a set of fields to combine freely (`ld` with
//! `BPF_H | BPF_IMM` is not an instruction, nor is `ret x`).

use super::code::*;

/// How the operand of a row is written. [`CbpfOperand::template`] gives the shape with `k`
/// standing for the constant field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CbpfOperand {
    /// `#0x800`: `k` in unsigned hex (`ld`/`ldx` immediates, `and`/`or`/`xor`, jump constants).
    ImmHex,
    /// `#20`: `k` in signed decimal (arithmetic and shift constants, `ret #k`).
    ImmDec,
    /// `[12]`: the packet at absolute offset `k`; Linux ancillary offsets print by name.
    Abs,
    /// `[x + 14]`: the packet at offset `x + k`.
    Ind,
    /// `M[3]`: scratch memory cell `k`.
    Mem,
    /// `#pktlen`: the packet's wire length.
    PktLen,
    /// `4*([14]&0xf)`: the IPv4 header length from the byte at offset `k`.
    Msh,
    /// `x`: the index register.
    X,
    /// `ret a`: the accumulator; `tcpdump -d` prints no operand for it.
    A,
    /// `ja 12`: an unconditional jump, printed as the absolute target index.
    JumpTarget,
    /// `neg`, `tax`, `txa`: no operand.
    Nothing,
}

impl CbpfOperand {
    /// The operand's written shape, `k` standing for the constant field.
    pub fn template(self) -> &'static str {
        match self {
            CbpfOperand::ImmHex | CbpfOperand::ImmDec => "#k",
            CbpfOperand::Abs => "[k]",
            CbpfOperand::Ind => "[x + k]",
            CbpfOperand::Mem => "M[k]",
            CbpfOperand::PktLen => "#pktlen",
            CbpfOperand::Msh => "4*([k]&0xf)",
            CbpfOperand::X => "x",
            CbpfOperand::A => "a",
            CbpfOperand::JumpTarget => "k",
            CbpfOperand::Nothing => "",
        }
    }

    /// Whether the operation reads `k` (conditional jumps with `x` do not, but use jt/jf).
    pub fn uses_k(self) -> bool {
        !matches!(
            self,
            CbpfOperand::PktLen | CbpfOperand::X | CbpfOperand::A | CbpfOperand::Nothing
        )
    }
}

/// One row of the classic opcode table.
#[derive(Clone, Copy, Debug)]
pub struct CbpfOpSpec {
    pub op: CbpfOp,
    pub code: u16,
    pub mnemonic: &'static str,
    pub operand: CbpfOperand,
}

macro_rules! cbpf_opcode_table {
    ($( $(#[$meta:meta])* $variant:ident = ($code:expr, $mnemonic:expr, $operand:ident), )*) => {
        /// Every classic BPF operation: one per row of [`CBPF_OPCODES`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum CbpfOp {
            $( $(#[$meta])* $variant, )*
        }

        /// The classic opcode table: the single source of truth for classic BPF encodings.
        pub static CBPF_OPCODES: &[CbpfOpSpec] = &[
            $( CbpfOpSpec {
                op: CbpfOp::$variant,
                code: $code,
                mnemonic: $mnemonic,
                operand: CbpfOperand::$operand,
            }, )*
        ];

        impl CbpfOp {
            /// The instruction's `code`.
            #[inline]
            pub const fn code(self) -> u16 {
                match self {
                    $( CbpfOp::$variant => $code, )*
                }
            }
        }
    };
}

cbpf_opcode_table! {
    /// `ld #k`: A = k.
    LdImm = (LD | IMM, "ld", ImmHex),
    /// `ld [k]`: A = 32-bit big-endian word at packet offset k.
    LdAbsW = (LD | W | ABS, "ld", Abs),
    LdAbsH = (LD | H | ABS, "ldh", Abs),
    LdAbsB = (LD | B | ABS, "ldb", Abs),
    /// `ld [x + k]`: A = word at packet offset x + k.
    LdIndW = (LD | W | IND, "ld", Ind),
    LdIndH = (LD | H | IND, "ldh", Ind),
    LdIndB = (LD | B | IND, "ldb", Ind),
    /// `ld M[k]`: A = scratch cell k.
    LdMem = (LD | MEM, "ld", Mem),
    /// `ld #pktlen`: A = wire length.
    LdLen = (LD | W | LEN, "ld", PktLen),
    /// `ldx #k`: X = k.
    LdxImm = (LDX | IMM, "ldx", ImmHex),
    /// `ldx M[k]`: X = scratch cell k.
    LdxMem = (LDX | MEM, "ldx", Mem),
    /// `ldx #pktlen`: X = wire length. (libpcap 1.10 prints this one as `unimp 0x81`; later
    /// versions print `ldx #pktlen`, which weir follows.)
    LdxLen = (LDX | W | LEN, "ldx", PktLen),
    /// `ldxb 4*([k]&0xf)`: X = 4 * (low nibble of the byte at packet offset k).
    LdxMsh = (LDX | B | MSH, "ldxb", Msh),
    /// `st M[k]`: scratch cell k = A.
    St = (ST, "st", Mem),
    /// `stx M[k]`: scratch cell k = X.
    Stx = (STX, "stx", Mem),
    AddK = (ALU | ADD | K, "add", ImmDec),
    AddX = (ALU | ADD | X, "add", X),
    SubK = (ALU | SUB | K, "sub", ImmDec),
    SubX = (ALU | SUB | X, "sub", X),
    MulK = (ALU | MUL | K, "mul", ImmDec),
    MulX = (ALU | MUL | X, "mul", X),
    DivK = (ALU | DIV | K, "div", ImmDec),
    DivX = (ALU | DIV | X, "div", X),
    ModK = (ALU | MOD | K, "mod", ImmDec),
    ModX = (ALU | MOD | X, "mod", X),
    AndK = (ALU | AND | K, "and", ImmHex),
    AndX = (ALU | AND | X, "and", X),
    OrK = (ALU | OR | K, "or", ImmHex),
    OrX = (ALU | OR | X, "or", X),
    XorK = (ALU | XOR | K, "xor", ImmHex),
    XorX = (ALU | XOR | X, "xor", X),
    LshK = (ALU | LSH | K, "lsh", ImmDec),
    LshX = (ALU | LSH | X, "lsh", X),
    RshK = (ALU | RSH | K, "rsh", ImmDec),
    RshX = (ALU | RSH | X, "rsh", X),
    /// `neg`: A = -A.
    Neg = (ALU | NEG, "neg", Nothing),
    /// `ja k`: jump forward k instructions (32-bit offset; jt and jf unused).
    Ja = (JMP | JA, "ja", JumpTarget),
    JeqK = (JMP | JEQ | K, "jeq", ImmHex),
    JeqX = (JMP | JEQ | X, "jeq", X),
    JgtK = (JMP | JGT | K, "jgt", ImmHex),
    JgtX = (JMP | JGT | X, "jgt", X),
    JgeK = (JMP | JGE | K, "jge", ImmHex),
    JgeX = (JMP | JGE | X, "jge", X),
    JsetK = (JMP | JSET | K, "jset", ImmHex),
    JsetX = (JMP | JSET | X, "jset", X),
    /// `ret #k`: accept k bytes of the packet (0 drops it).
    RetK = (RET | K, "ret", ImmDec),
    /// `ret a`: accept A bytes.
    RetA = (RET | A, "ret", A),
    /// `tax`: X = A.
    Tax = (MISC | TAX, "tax", Nothing),
    /// `txa`: A = X.
    Txa = (MISC | TXA, "txa", Nothing),
}

impl CbpfOp {
    /// The row of this operation. Rows are in `CbpfOp` order (a test checks it), so the
    /// discriminant is the row index; no input reaches this index.
    pub fn spec(self) -> &'static CbpfOpSpec {
        &CBPF_OPCODES[self as usize]
    }

    /// The operation with this `code`, if any.
    pub fn from_code(code: u16) -> Option<CbpfOp> {
        CBPF_OPCODES.iter().find(|s| s.code == code).map(|s| s.op)
    }

    pub fn mnemonic(self) -> &'static str {
        self.spec().mnemonic
    }

    pub fn operand(self) -> CbpfOperand {
        self.spec().operand
    }

    /// The instruction class ([`LD`], [`LDX`], ... [`MISC`]).
    #[inline]
    pub const fn class(self) -> u16 {
        class(self.code())
    }

    /// `ja` or a conditional jump.
    #[inline]
    pub const fn is_jump(self) -> bool {
        self.is_in(CbpfOp::Ja, CbpfOp::JsetX)
    }

    /// A jump that uses `jt` and `jf` (every jump but `ja`).
    #[inline]
    pub const fn is_conditional_jump(self) -> bool {
        self.is_in(CbpfOp::JeqK, CbpfOp::JsetX)
    }

    /// `ret #k` or `ret a`: ends the program.
    #[inline]
    pub const fn is_return(self) -> bool {
        self.is_in(CbpfOp::RetK, CbpfOp::RetA)
    }

    /// True when the row is one of `first..=last`. The rows of each kind the predicates
    /// above ask about are adjacent (a test checks each against the row's code), so a kind
    /// is a range of discriminants: one compare of the operation's byte, where the code's
    /// class took a table load (the classic emitter's passes ask per instruction per pass).
    #[inline]
    const fn is_in(self, first: CbpfOp, last: CbpfOp) -> bool {
        (self as u8).wrapping_sub(first as u8) <= (last as u8).wrapping_sub(first as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_in_op_order() {
        for (i, s) in CBPF_OPCODES.iter().enumerate() {
            assert_eq!(s.op as usize, i, "{:?}", s.op);
            assert_eq!(s.op.code(), s.code, "{:?}", s.op);
        }
    }

    #[test]
    fn no_two_rows_share_a_code() {
        for (i, a) in CBPF_OPCODES.iter().enumerate() {
            for b in &CBPF_OPCODES[i + 1..] {
                assert_ne!(a.code, b.code, "{:?} and {:?} share a code", a.op, b.op);
            }
        }
    }

    #[test]
    fn table_size_matches_the_instruction_set() {
        // ld: imm, 3 abs, 3 ind, mem, len; ldx: imm, mem, len, msh; st, stx;
        // alu: 10 ops x 2 sources + neg; jmp: ja + 4 ops x 2 sources; ret k, a; tax, txa.
        assert_eq!(CBPF_OPCODES.len(), 9 + 4 + 2 + 21 + 9 + 2 + 2);
    }

    #[test]
    fn every_code_fits_in_the_low_byte_and_from_code_finds_its_row() {
        for s in CBPF_OPCODES {
            assert!(s.code <= 0xff, "{:?}", s.op);
            assert_eq!(CbpfOp::from_code(s.code), Some(s.op));
        }
        assert_eq!(CbpfOp::from_code(RET | X), None);
        assert_eq!(CbpfOp::from_code(LD | H | IMM), None);
        assert_eq!(CbpfOp::from_code(0x100 | (LD | IMM)), None);
    }

    #[test]
    fn source_bit_matches_the_operand_form() {
        for s in CBPF_OPCODES {
            let class = class(s.code);
            if (class == ALU && s.op != CbpfOp::Neg) || (class == JMP && s.op != CbpfOp::Ja) {
                let wants_x = src(s.code) == X;
                assert_eq!(wants_x, s.operand == CbpfOperand::X, "{:?}", s.op);
            }
        }
    }

    #[test]
    fn kinds_asked_by_range_agree_with_the_codes() {
        for s in CBPF_OPCODES {
            let class = class(s.code);
            assert_eq!(s.op.is_jump(), class == JMP, "{:?}", s.op);
            assert_eq!(s.op.is_conditional_jump(), class == JMP && op(s.code) != JA, "{:?}", s.op);
            assert_eq!(s.op.is_return(), class == RET, "{:?}", s.op);
        }
    }

    #[test]
    fn classification() {
        assert!(CbpfOp::Ja.is_jump() && !CbpfOp::Ja.is_conditional_jump());
        assert!(CbpfOp::JsetX.is_conditional_jump());
        assert!(!CbpfOp::Tax.is_jump());
        assert!(CbpfOp::RetA.is_return() && !CbpfOp::Txa.is_return());
        assert_eq!(CbpfOp::LdxMsh.class(), LDX);
        assert!(CbpfOp::Ja.operand().uses_k() && !CbpfOp::RetA.operand().uses_k());
        assert_eq!(CbpfOp::LdxMsh.operand().template(), "4*([k]&0xf)");
    }
}
