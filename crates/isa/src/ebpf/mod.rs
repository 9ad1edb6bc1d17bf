//! eBPF instructions (RFC 9669): the raw 8-byte slot, the decoded [`Insn`], and the one
//! opcode table ([`OPCODES`]) that decoding, encoding, structural checks, the assembler and
//! the disassembler all read.
//!
//! A program is a sequence of 8-byte *slots*. `lddw` takes two slots; after decoding, the
//! first slot carries the whole 64-bit immediate and the second decodes to
//! [`Op::LddwHigh`], a filler that is never executed. Keeping slot indexing means a jump
//! target is always `pc + off + 1`, in every consumer.

mod codec;
mod table;

pub use codec::{decode, decode_bytes, encode, encode_bytes, encode_insn};
pub use table::{spec_of, specs_for_mnemonic, specs_for_opcode, Op, OpSpec, OPCODES};

/// Number of eBPF registers (r0-r10).
pub const REG_COUNT: u8 = 11;
/// The read-only frame pointer.
pub const FRAME_POINTER: u8 = 10;

/// One 8-byte instruction slot as laid out in memory (little-endian, the order clang and the
/// kernel use on x86-64).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RawInsn {
    pub opcode: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl RawInsn {
    pub const SIZE: usize = 8;

    pub fn from_bytes(b: [u8; 8]) -> Self {
        RawInsn {
            opcode: b[0],
            dst: b[1] & 0x0f,
            src: b[1] >> 4,
            off: i16::from_le_bytes([b[2], b[3]]),
            imm: i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    pub fn to_bytes(self) -> [u8; 8] {
        let off = self.off.to_le_bytes();
        let imm = self.imm.to_le_bytes();
        [
            self.opcode,
            (self.dst & 0x0f) | (self.src << 4),
            off[0],
            off[1],
            imm[0],
            imm[1],
            imm[2],
            imm[3],
        ]
    }

    /// The slot as the 64-bit little-endian word the conformance suites write in `-- raw`.
    pub fn to_u64(self) -> u64 {
        u64::from_le_bytes(self.to_bytes())
    }

    pub fn from_u64(word: u64) -> Self {
        Self::from_bytes(word.to_le_bytes())
    }
}

/// Which extra field picks the operation among rows that share an opcode byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disc {
    /// The opcode alone decides.
    None,
    /// `off` decides (sdiv/smod are div/mod with off = 1; movsx is mov with off = 8/16/32).
    Off(i16),
    /// `imm` decides (byte-swap width, atomic operation).
    Imm(i32),
    /// `src` decides (call kind, `lddw` pseudo source).
    Src(u8),
}

/// What `lddw` with a non-zero `src` refers to (the kernel's `BPF_PSEUDO_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PseudoKind {
    /// `BPF_PSEUDO_MAP_FD`: imm is a map file descriptor.
    MapFd,
    /// `BPF_PSEUDO_MAP_VALUE`: low imm is a map fd, high imm an offset into its value.
    MapValue,
    /// `BPF_PSEUDO_BTF_ID`: a kernel variable by BTF id.
    BtfId,
    /// `BPF_PSEUDO_FUNC`: address of a local function; imm is a slot offset.
    Func,
    /// `BPF_PSEUDO_MAP_IDX`: map by index into the program's map table.
    MapIdx,
    /// `BPF_PSEUDO_MAP_IDX_VALUE`: map by index; high imm an offset into its value.
    MapIdxValue,
}

impl PseudoKind {
    /// The name used in assembly, e.g. `lddw %r1, map_fd(3)`.
    pub fn name(self) -> &'static str {
        match self {
            PseudoKind::MapFd => "map_fd",
            PseudoKind::MapValue => "map_value",
            PseudoKind::BtfId => "btf_id",
            PseudoKind::Func => "func",
            PseudoKind::MapIdx => "map_idx",
            PseudoKind::MapIdxValue => "map_idx_value",
        }
    }

    /// Whether the high 32 bits of the immediate carry an offset (a second argument in text).
    pub fn has_offset(self) -> bool {
        matches!(self, PseudoKind::MapValue | PseudoKind::MapIdxValue)
    }
}

/// The operand shape of a row: which fields are meaningful (all others must be zero) and how
/// the assembler and the disassembler write them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operands {
    /// `add32 %r0, 1`: dst, imm.
    DstImm,
    /// `add32 %r0, %r1`: dst, src.
    DstSrc,
    /// `neg %r0`, `be16 %r0`: dst only.
    Dst,
    /// `ja +3`: off.
    JmpOff,
    /// `ja32 +70000`: imm is the slot offset.
    JmpImm,
    /// `jeq %r1, 5, +2`: dst, imm, off.
    DstImmOff,
    /// `jeq %r1, %r2, +2`: dst, src, off.
    DstSrcOff,
    /// `call 5`: imm (helper id, or BTF id for kfuncs).
    CallImm,
    /// `call local +4`: imm is a slot offset.
    CallLocal,
    /// `call %r2`: dst holds the target.
    CallReg,
    /// `exit`.
    Nothing,
    /// `ldxw %r0, [%r1+4]`: dst, src, off.
    Load,
    /// `stw [%r1+4], 7`: dst, off, imm.
    StoreImm,
    /// `stxw [%r1+4], %r2`, `lock add [%r1+4], %r2`: dst, src, off.
    StoreReg,
    /// `lddw %r0, 0x1122334455667788`: dst, 64-bit imm (two slots).
    DstImm64,
    /// `lddw %r1, map_fd(3)`: dst, pseudo source, imm (and offset for the *_value kinds).
    Pseudo(PseudoKind),
    /// `ldabsw 12`: imm.
    Abs,
    /// `ldindw %r1, 12`: src, imm.
    Ind,
}

/// Which raw fields an operand shape gives meaning to; every other field must be zero
/// (the discriminator field, see [`Disc`], is checked separately).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UsedFields {
    pub dst: bool,
    pub src: bool,
    pub off: bool,
    pub imm: bool,
}

impl Operands {
    pub fn used_fields(self) -> UsedFields {
        use Operands::*;
        let (dst, src, off, imm) = match self {
            DstImm => (true, false, false, true),
            DstSrc => (true, true, false, false),
            Dst => (true, false, false, false),
            JmpOff => (false, false, true, false),
            JmpImm => (false, false, false, true),
            DstImmOff => (true, false, true, true),
            DstSrcOff => (true, true, true, false),
            CallImm | CallLocal => (false, false, false, true),
            CallReg => (true, false, false, false),
            Nothing => (false, false, false, false),
            Load => (true, true, true, false),
            StoreImm => (true, false, true, true),
            StoreReg => (true, true, true, false),
            DstImm64 | Pseudo(_) => (true, false, false, true),
            Abs => (false, false, false, true),
            Ind => (false, true, false, true),
        };
        UsedFields { dst, src, off, imm }
    }
}

/// A decoded instruction. Fields the operation does not use are zero. For `lddw`, `imm` is
/// the full 64-bit value (for the `*_value` pseudo kinds: fd or index in the low half, offset
/// in the high half).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Insn {
    pub op: Op,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i64,
}

impl Insn {
    pub const fn new(op: Op, dst: u8, src: u8, off: i16, imm: i64) -> Self {
        Insn { op, dst, src, off, imm }
    }

    /// The table row of this instruction (`None` only for [`Op::LddwHigh`]).
    pub fn spec(&self) -> Option<&'static OpSpec> {
        spec_of(self.op)
    }

    /// How many slots the instruction takes (2 for `lddw`, else 1).
    pub fn slots(&self) -> usize {
        if self.op.is_lddw() {
            2
        } else {
            1
        }
    }
}

/// Memory access width in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    B = 1,
    H = 2,
    W = 4,
    Dw = 8,
}

impl Size {
    pub fn bytes(self) -> usize {
        self as usize
    }
}
