//! Classic BPF (the kernel's `struct sock_filter`, libpcap's `struct bpf_insn`): the raw
//! 8-byte record [`SockFilter`], the decoded [`CbpfInsn`], and the one opcode table
//! ([`CBPF_OPCODES`]) that decoding, encoding and printing all read.
//!
//! Classic BPF is the instruction set tcpdump compiles filters to and that `SO_ATTACH_FILTER`
//! accepts. Weir reads it (`-dd` output, socket filters), prints it exactly as `tcpdump -d`
//! does, and later validates it (kernel rules), runs it and translates it to eBPF in the
//! `weir-cbpf` crate, all on top of these encodings.
//!
//! ```
//! use weir_isa::cbpf::{code::*, decode, encode, format_insn, SockFilter};
//! // ldh [12]; jeq #0x800 jt 2 jf 3; ret #262144; ret #0
//! let raw = [
//!     SockFilter::stmt(LD | H | ABS, 12),
//!     SockFilter::jump(JMP | JEQ | K, 0x800, 0, 1),
//!     SockFilter::stmt(RET | K, 262144),
//!     SockFilter::stmt(RET | K, 0),
//! ];
//! let insns = decode(&raw).unwrap();
//! assert_eq!(format_insn(1, &insns[1]), "(001) jeq      #0x800           jt 2\tjf 3");
//! assert_eq!(encode(&insns), raw);
//! ```

pub mod ancillary;
pub mod code;
mod codec;
mod print;
mod table;

#[cfg(test)]
mod tcpdump_vectors;

pub use codec::{
    check_strict, decode, decode_bytes, decode_strict, encode, encode_bytes, CbpfDecodeError,
    CbpfDecodeErrorKind,
};
pub use print::{format_dd, format_ddd, format_insn, format_listing};
pub use table::{CbpfOp, CbpfOpSpec, CbpfOperand, CBPF_OPCODES};

/// Most instructions a classic program may have (the kernel's `BPF_MAXINSNS`).
#[doc(alias = "BPF_MAXINSNS")]
pub const MAX_INSNS: usize = 4096;

/// Number of 32-bit scratch memory cells `M[0]`..`M[15]` (the kernel's `BPF_MEMWORDS`).
#[doc(alias = "BPF_MEMWORDS")]
pub const MEM_WORDS: u32 = 16;

/// One classic BPF instruction as the kernel and libpcap lay it out: `code` (u16), `jt` (u8),
/// `jf` (u8), `k` (u32), in host order; weir reads and writes it little-endian.
#[doc(alias = "sock_filter")]
#[doc(alias = "bpf_insn")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

impl SockFilter {
    pub const SIZE: usize = 8;

    pub const fn new(code: u16, jt: u8, jf: u8, k: u32) -> Self {
        SockFilter { code, jt, jf, k }
    }

    /// A non-jump instruction (the kernel's `BPF_STMT`).
    #[doc(alias = "BPF_STMT")]
    pub const fn stmt(code: u16, k: u32) -> Self {
        SockFilter { code, jt: 0, jf: 0, k }
    }

    /// A jump instruction (the kernel's `BPF_JUMP`; note the argument order, k before jt/jf).
    #[doc(alias = "BPF_JUMP")]
    pub const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Self {
        SockFilter { code, jt, jf, k }
    }

    pub fn from_bytes(b: [u8; 8]) -> Self {
        SockFilter {
            code: u16::from_le_bytes([b[0], b[1]]),
            jt: b[2],
            jf: b[3],
            k: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    pub fn to_bytes(self) -> [u8; 8] {
        let code = self.code.to_le_bytes();
        let k = self.k.to_le_bytes();
        [code[0], code[1], self.jt, self.jf, k[0], k[1], k[2], k[3]]
    }
}

/// A decoded classic instruction: the operation from the table, and `jt`, `jf`, `k` exactly
/// as they were in the record. Classic BPF has no rule that unused fields are zero (libpcap
/// itself leaves stale `k` values in `tax`), so they are kept and re-encoded unchanged; see
/// [`decode_strict`] for the jump-offset rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CbpfInsn {
    pub op: CbpfOp,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

impl CbpfInsn {
    pub const fn new(op: CbpfOp, jt: u8, jf: u8, k: u32) -> Self {
        CbpfInsn { op, jt, jf, k }
    }

    /// A non-jump instruction (`jt` = `jf` = 0).
    pub const fn stmt(op: CbpfOp, k: u32) -> Self {
        CbpfInsn { op, jt: 0, jf: 0, k }
    }

    /// A conditional jump; `jt` and `jf` count instructions after the next one.
    pub const fn jump(op: CbpfOp, k: u32, jt: u8, jf: u8) -> Self {
        CbpfInsn { op, jt, jf, k }
    }

    /// The table row of this instruction.
    pub fn spec(&self) -> &'static CbpfOpSpec {
        self.op.spec()
    }

    /// The raw record (same as [`encode`] on one instruction).
    pub fn to_raw(&self) -> SockFilter {
        SockFilter { code: self.op.code(), jt: self.jt, jf: self.jf, k: self.k }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sock_filter_bytes_are_code_jt_jf_k_little_endian() {
        let f = SockFilter::new(0x1234, 0x56, 0x78, 0x9abc_def0);
        let bytes = [0x34, 0x12, 0x56, 0x78, 0xf0, 0xde, 0xbc, 0x9a];
        assert_eq!(f.to_bytes(), bytes);
        assert_eq!(SockFilter::from_bytes(bytes), f);
    }

    #[test]
    fn stmt_and_jump_put_fields_where_the_kernel_macros_do() {
        assert_eq!(SockFilter::stmt(6, 7), SockFilter { code: 6, jt: 0, jf: 0, k: 7 });
        assert_eq!(SockFilter::jump(0x15, 9, 1, 2), SockFilter { code: 0x15, jt: 1, jf: 2, k: 9 });
    }

    #[test]
    fn insn_to_raw_uses_the_table_code() {
        let insn = CbpfInsn::jump(CbpfOp::JgtX, 3, 4, 5);
        assert_eq!(insn.to_raw(), SockFilter { code: 0x2d, jt: 4, jf: 5, k: 3 });
        assert_eq!(insn.spec().mnemonic, "jgt");
    }
}
