//! Decoding and encoding, both driven by the opcode table.

use super::{spec_of, specs_for_opcode, Disc, Insn, Op, OpSpec, Operands, RawInsn, REG_COUNT};
use crate::error::{DecodeError, DecodeErrorKind};

fn used_fields(operands: Operands) -> (bool, bool, bool, bool) {
    let u = operands.used_fields();
    (u.dst, u.src, u.off, u.imm)
}

fn disc_matches(disc: Disc, raw: &RawInsn) -> bool {
    match disc {
        Disc::None => true,
        Disc::Off(v) => raw.off == v,
        Disc::Imm(v) => raw.imm == v,
        Disc::Src(v) => raw.src == v,
    }
}

fn pick_row(index: usize, raw: &RawInsn) -> Result<&'static OpSpec, DecodeError> {
    let mut rows = specs_for_opcode(raw.opcode).peekable();
    let Some(first) = rows.peek().copied() else {
        return Err(DecodeError::new(index, DecodeErrorKind::UnknownOpcode(raw.opcode)));
    };
    if let Some(row) = specs_for_opcode(raw.opcode).find(|s| disc_matches(s.disc, raw)) {
        return Ok(row);
    }
    let (field, value) = match first.disc {
        Disc::Off(_) => ("off", i64::from(raw.off)),
        Disc::Imm(_) => ("imm", i64::from(raw.imm)),
        Disc::Src(_) => ("src", i64::from(raw.src)),
        Disc::None => unreachable_disc(),
    };
    let allowed: Vec<String> = specs_for_opcode(raw.opcode)
        .map(|s| match s.disc {
            Disc::Off(v) => v.to_string(),
            Disc::Imm(v) => format!("{v:#x}"),
            Disc::Src(v) => v.to_string(),
            Disc::None => String::new(),
        })
        .collect();
    Err(DecodeError::new(
        index,
        DecodeErrorKind::BadDiscriminator {
            opcode: raw.opcode,
            field,
            value,
            allowed: allowed.join(", "),
        },
    ))
}

/// A row with `Disc::None` always matches, so a miss always names a real field.
fn unreachable_disc() -> (&'static str, i64) {
    ("opcode", 0)
}

fn check_fields(index: usize, spec: &OpSpec, raw: &RawInsn) -> Result<(), DecodeError> {
    let (dst, src, off, imm) = used_fields(spec.operands);
    let disc_field = match spec.disc {
        Disc::Off(_) => "off",
        Disc::Imm(_) => "imm",
        Disc::Src(_) => "src",
        Disc::None => "",
    };
    let checks: [(&'static str, bool, i64); 4] = [
        ("dst", dst, i64::from(raw.dst)),
        ("src", src, i64::from(raw.src)),
        ("off", off, i64::from(raw.off)),
        ("imm", imm, i64::from(raw.imm)),
    ];
    for (field, used, value) in checks {
        if !used && field != disc_field && value != 0 {
            return Err(DecodeError::new(
                index,
                DecodeErrorKind::UnusedFieldSet { mnemonic: spec.mnemonic, field, value },
            ));
        }
    }
    for (field, used, value) in [("dst", dst, raw.dst), ("src", src, raw.src)] {
        if used && value >= REG_COUNT {
            return Err(DecodeError::new(index, DecodeErrorKind::BadRegister { field, value }));
        }
    }
    Ok(())
}

/// Decodes slots into slot-indexed instructions (see the module docs for `lddw`).
pub fn decode(raw: &[RawInsn]) -> Result<Vec<Insn>, DecodeError> {
    let mut out = Vec::with_capacity(raw.len());
    let mut index = 0;
    while let Some(slot) = raw.get(index) {
        let spec = pick_row(index, slot)?;
        check_fields(index, spec, slot)?;
        let mut imm = i64::from(slot.imm);
        if spec.opcode == 0x18 {
            let Some(high) = raw.get(index.wrapping_add(1)) else {
                return Err(DecodeError::new(index, DecodeErrorKind::TruncatedLddw));
            };
            if high.opcode != 0 || high.dst != 0 || high.src != 0 || high.off != 0 {
                return Err(DecodeError::new(index.wrapping_add(1), DecodeErrorKind::BadLddwHigh));
            }
            imm = i64::from(slot.imm as u32) | (i64::from(high.imm) << 32);
        }
        out.push(Insn { op: spec.op, dst: slot.dst, src: slot.src, off: slot.off, imm });
        if spec.opcode == 0x18 {
            out.push(Insn { op: Op::LddwHigh, dst: 0, src: 0, off: 0, imm: 0 });
            index = index.wrapping_add(2);
        } else {
            index = index.wrapping_add(1);
        }
    }
    Ok(out)
}

/// Decodes a byte string whose length must be a multiple of 8.
pub fn decode_bytes(bytes: &[u8]) -> Result<Vec<Insn>, DecodeError> {
    let chunks = bytes.chunks_exact(RawInsn::SIZE);
    if !chunks.remainder().is_empty() {
        return Err(DecodeError::new(
            bytes.len() / RawInsn::SIZE,
            DecodeErrorKind::TrailingBytes(chunks.remainder().len()),
        ));
    }
    let raw: Vec<RawInsn> = chunks
        .map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            RawInsn::from_bytes(b)
        })
        .collect();
    decode(&raw)
}

/// Encodes one instruction into one slot, or two for `lddw`. The discriminator field comes
/// from the table, whatever the instruction holds in it.
pub fn encode_insn(insn: &Insn) -> ([RawInsn; 2], usize) {
    let Some(spec) = spec_of(insn.op) else {
        return ([RawInsn::default(); 2], 0);
    };
    let (dst, src, off, imm) = used_fields(spec.operands);
    let mut raw = RawInsn {
        opcode: spec.opcode,
        dst: if dst { insn.dst } else { 0 },
        src: if src { insn.src } else { 0 },
        off: if off { insn.off } else { 0 },
        imm: if imm { insn.imm as i32 } else { 0 },
    };
    match spec.disc {
        Disc::None => {}
        Disc::Off(v) => raw.off = v,
        Disc::Imm(v) => raw.imm = v,
        Disc::Src(v) => raw.src = v,
    }
    if spec.opcode == 0x18 {
        let high = RawInsn { imm: (insn.imm >> 32) as i32, ..RawInsn::default() };
        ([raw, high], 2)
    } else {
        ([raw, RawInsn::default()], 1)
    }
}

/// Encodes slot-indexed instructions; [`Op::LddwHigh`] fillers emit nothing because their
/// `lddw` already wrote both slots.
pub fn encode(insns: &[Insn]) -> Vec<RawInsn> {
    let mut out = Vec::with_capacity(insns.len());
    for insn in insns {
        let (slots, n) = encode_insn(insn);
        out.extend_from_slice(&slots[..n]);
    }
    out
}

pub fn encode_bytes(insns: &[Insn]) -> Vec<u8> {
    encode(insns).into_iter().flat_map(RawInsn::to_bytes).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ebpf::OPCODES;

    fn raw(opcode: u8, dst: u8, src: u8, off: i16, imm: i32) -> RawInsn {
        RawInsn { opcode, dst, src, off, imm }
    }

    #[test]
    fn every_row_round_trips() {
        for spec in OPCODES {
            let insn = Insn { op: spec.op, dst: 1, src: 2, off: 3, imm: 4 };
            let mut slots = encode(&[insn]);
            if slots.len() == 1 {
                slots.push(raw(0x95, 0, 0, 0, 0));
            }
            let back = decode(&slots).unwrap_or_else(|e| panic!("{:?}: {e}", spec.op));
            assert_eq!(back[0].op, spec.op);
            assert_eq!(encode(&back[..1]), encode(&[insn])[..]);
        }
    }

    #[test]
    fn rejects_unknown_opcode_with_index() {
        let err = decode(&[raw(0x95, 0, 0, 0, 0), raw(0xff, 0, 0, 0, 0)]).unwrap_err();
        assert_eq!(err.index, 1);
        assert_eq!(err.kind, DecodeErrorKind::UnknownOpcode(0xff));
    }

    #[test]
    fn rejects_unused_field() {
        let err = decode(&[raw(0x95, 0, 0, 0, 7)]).unwrap_err();
        assert!(matches!(err.kind, DecodeErrorKind::UnusedFieldSet { field: "imm", .. }));
        let err = decode(&[raw(0x07, 1, 3, 0, 7)]).unwrap_err();
        assert!(matches!(err.kind, DecodeErrorKind::UnusedFieldSet { field: "src", .. }));
    }

    #[test]
    fn rejects_bad_discriminator_and_register() {
        let err = decode(&[raw(0x3f, 0, 1, 2, 0)]).unwrap_err();
        assert!(matches!(err.kind, DecodeErrorKind::BadDiscriminator { field: "off", .. }));
        let err = decode(&[raw(0xbf, 11, 1, 0, 0)]).unwrap_err();
        assert!(matches!(err.kind, DecodeErrorKind::BadRegister { field: "dst", value: 11 }));
    }

    #[test]
    fn lddw_takes_two_slots() {
        let slots = [raw(0x18, 0, 0, 0, 0x5566_7788), raw(0, 0, 0, 0, 0x1122_3344)];
        let insns = decode(&slots).unwrap();
        assert_eq!(insns[0].imm, 0x1122_3344_5566_7788);
        assert_eq!(insns[1].op, Op::LddwHigh);
        assert_eq!(encode(&insns), slots);
        let err = decode(&slots[..1]).unwrap_err();
        assert_eq!(err.kind, DecodeErrorKind::TruncatedLddw);
    }
}
