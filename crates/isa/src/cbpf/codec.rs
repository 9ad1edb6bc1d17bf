//! Decoding and encoding of classic BPF, both driven by the opcode table.
//!
//! Two levels of strictness, because the two authorities differ: libpcap runs any record
//! whose code it knows and ignores `jt`/`jf` outside conditional jumps, while weir's own
//! checks want those fields zero so that a stray value is reported rather than carried.
//! [`decode`] is libpcap's level; [`decode_strict`] (or [`check_strict`] on decoded
//! instructions) adds the jump-field rule, and the kernel-rules validator chooses.

use thiserror::Error;

use super::{CbpfInsn, CbpfOp, SockFilter};

/// A classic record that does not decode, with its index in the program.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("instruction {index}: {kind}")]
pub struct CbpfDecodeError {
    pub index: usize,
    pub kind: CbpfDecodeErrorKind,
}

impl CbpfDecodeError {
    pub fn new(index: usize, kind: CbpfDecodeErrorKind) -> Self {
        CbpfDecodeError { index, kind }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CbpfDecodeErrorKind {
    #[error("unknown classic BPF opcode {0:#04x}")]
    UnknownOpcode(u16),
    #[error("{mnemonic}: {field} must be 0 outside conditional jumps, is {value}")]
    JumpFieldSet { mnemonic: &'static str, field: &'static str, value: u8 },
    #[error("{0} trailing bytes: a classic program is a whole number of 8-byte records")]
    TrailingBytes(usize),
}

fn decode_one(index: usize, raw: &SockFilter) -> Result<CbpfInsn, CbpfDecodeError> {
    let Some(op) = CbpfOp::from_code(raw.code) else {
        return Err(CbpfDecodeError::new(index, CbpfDecodeErrorKind::UnknownOpcode(raw.code)));
    };
    Ok(CbpfInsn { op, jt: raw.jt, jf: raw.jf, k: raw.k })
}

/// Decodes records as libpcap accepts them: every code must be in the table, and `jt`, `jf`
/// and `k` are kept as they are, whether the operation reads them or not.
pub fn decode(raw: &[SockFilter]) -> Result<Vec<CbpfInsn>, CbpfDecodeError> {
    raw.iter().enumerate().map(|(index, r)| decode_one(index, r)).collect()
}

/// Checks weir's strict rule on one decoded instruction: `jt` and `jf` are 0 unless the
/// operation is a conditional jump. `index` only names the place in the error.
pub fn check_strict(index: usize, insn: &CbpfInsn) -> Result<(), CbpfDecodeError> {
    if insn.op.is_conditional_jump() {
        return Ok(());
    }
    for (field, value) in [("jt", insn.jt), ("jf", insn.jf)] {
        if value != 0 {
            return Err(CbpfDecodeError::new(
                index,
                CbpfDecodeErrorKind::JumpFieldSet { mnemonic: insn.op.mnemonic(), field, value },
            ));
        }
    }
    Ok(())
}

/// [`decode`], then [`check_strict`] on every instruction; the first problem wins.
pub fn decode_strict(raw: &[SockFilter]) -> Result<Vec<CbpfInsn>, CbpfDecodeError> {
    raw.iter()
        .enumerate()
        .map(|(index, r)| {
            let insn = decode_one(index, r)?;
            check_strict(index, &insn)?;
            Ok(insn)
        })
        .collect()
}

/// Decodes a byte string of little-endian records (length a multiple of 8) with [`decode`].
pub fn decode_bytes(bytes: &[u8]) -> Result<Vec<CbpfInsn>, CbpfDecodeError> {
    let chunks = bytes.chunks_exact(SockFilter::SIZE);
    if !chunks.remainder().is_empty() {
        return Err(CbpfDecodeError::new(
            bytes.len() / SockFilter::SIZE,
            CbpfDecodeErrorKind::TrailingBytes(chunks.remainder().len()),
        ));
    }
    let raw: Vec<SockFilter> = chunks
        .map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            SockFilter::from_bytes(b)
        })
        .collect();
    decode(&raw)
}

/// Encodes instructions to records; the code comes from the table, the other fields as held.
pub fn encode(insns: &[CbpfInsn]) -> Vec<SockFilter> {
    insns.iter().map(CbpfInsn::to_raw).collect()
}

pub fn encode_bytes(insns: &[CbpfInsn]) -> Vec<u8> {
    insns.iter().flat_map(|i| i.to_raw().to_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cbpf::code::*;
    use crate::cbpf::CBPF_OPCODES;
    use proptest::prelude::*;

    #[test]
    fn every_row_round_trips() {
        for spec in CBPF_OPCODES {
            let insn = CbpfInsn { op: spec.op, jt: 1, jf: 2, k: 0xdead_beef };
            let raw = encode(&[insn]);
            assert_eq!(raw, [SockFilter { code: spec.code, jt: 1, jf: 2, k: 0xdead_beef }]);
            assert_eq!(decode(&raw), Ok(vec![insn]), "{:?}", spec.op);
            let bytes = encode_bytes(&[insn]);
            assert_eq!(decode_bytes(&bytes), Ok(vec![insn]), "{:?}", spec.op);
        }
    }

    #[test]
    fn unknown_opcode_names_index_and_code() {
        let prog = [SockFilter::stmt(LD | W | ABS, 0), SockFilter::stmt(RET | X, 0)];
        let err = decode(&prog).unwrap_err();
        assert_eq!(err, CbpfDecodeError::new(1, CbpfDecodeErrorKind::UnknownOpcode(0x0e)));
        assert_eq!(err.to_string(), "instruction 1: unknown classic BPF opcode 0x0e");
        // Codes are 16 bits wide, and a set high byte is not ignored.
        let err = decode(&[SockFilter::stmt(0x0106, 0)]).unwrap_err();
        assert_eq!(err, CbpfDecodeError::new(0, CbpfDecodeErrorKind::UnknownOpcode(0x106)));
        assert_eq!(err.to_string(), "instruction 0: unknown classic BPF opcode 0x106");
    }

    #[test]
    fn lenient_decode_keeps_stray_fields_strict_decode_names_them() {
        let prog = [
            SockFilter::jump(JMP | JEQ | K, 1, 7, 9),
            SockFilter::new(MISC | TAX, 0, 0, 5),
            SockFilter::new(RET | K, 0, 3, 0),
        ];
        let insns = decode(&prog).unwrap();
        assert_eq!(insns[2], CbpfInsn { op: CbpfOp::RetK, jt: 0, jf: 3, k: 0 });
        assert_eq!(encode(&insns), prog);
        let err = decode_strict(&prog).unwrap_err();
        assert_eq!(
            err,
            CbpfDecodeError::new(
                2,
                CbpfDecodeErrorKind::JumpFieldSet { mnemonic: "ret", field: "jf", value: 3 }
            )
        );
        assert_eq!(
            err.to_string(),
            "instruction 2: ret: jf must be 0 outside conditional jumps, is 3"
        );
        let err = check_strict(4, &CbpfInsn::new(CbpfOp::Ja, 1, 0, 2)).unwrap_err();
        assert_eq!(err.index, 4);
        assert!(matches!(err.kind, CbpfDecodeErrorKind::JumpFieldSet { field: "jt", .. }));
        // A stray k (libpcap leaves them in tax) is no error at either level.
        assert_eq!(decode_strict(&prog[..2]).unwrap(), insns[..2]);
    }

    #[test]
    fn trailing_bytes_are_reported_after_the_last_whole_record() {
        let err = decode_bytes(&[0x06, 0, 0, 0, 0, 0, 0, 0, 0x06, 0]).unwrap_err();
        assert_eq!(err, CbpfDecodeError::new(1, CbpfDecodeErrorKind::TrailingBytes(2)));
    }

    fn any_record() -> impl Strategy<Value = SockFilter> {
        // Half the codes from the low byte, where every valid one lives, so that the
        // success branch is exercised as often as the error branch.
        let code = prop_oneof![any::<u16>(), 0u16..0x100];
        (code, any::<u8>(), any::<u8>(), any::<u32>()).prop_map(|(code, jt, jf, k)| SockFilter {
            code,
            jt,
            jf,
            k,
        })
    }

    proptest! {
        #[test]
        fn decode_never_panics_and_encode_inverts_it(bytes in any::<[u8; 8]>()) {
            let raw = SockFilter::from_bytes(bytes);
            prop_assert_eq!(raw.to_bytes(), bytes);
            match decode(&[raw]) {
                Ok(insns) => {
                    prop_assert_eq!(encode(&insns), vec![raw]);
                    prop_assert_eq!(encode_bytes(&insns), bytes.to_vec());
                }
                Err(e) => prop_assert_eq!(e.index, 0),
            }
        }

        #[test]
        fn programs_round_trip_and_strict_only_adds_errors(
            prog in proptest::collection::vec(any_record(), 0..24)
        ) {
            match decode(&prog) {
                Ok(insns) => {
                    prop_assert_eq!(encode(&insns), prog.clone());
                    if let Ok(strict) = decode_strict(&prog) {
                        prop_assert_eq!(strict, insns);
                    }
                }
                Err(e) => {
                    prop_assert!(CbpfOp::from_code(prog[e.index].code).is_none());
                    prop_assert!(prog[..e.index].iter().all(|r| CbpfOp::from_code(r.code).is_some()));
                    prop_assert!(decode_strict(&prog).is_err());
                }
            }
        }
    }
}
