//! The first validation pass: each slot on its own (plus the `lddw` pairing, which only
//! looks at neighbours). Hand-built programs (`Program::from_insns`) may hold anything, so
//! this pass re-establishes what `decode` guarantees for bytecode: registers exist, fields
//! the operation ignores are zero, the fields that select the operation agree with it, and
//! non-`lddw` immediates fit the 32 bits they are encoded in. Then it adds the first
//! semantic rule that needs no data flow: nothing writes r10.

use super::{ValidateError, ValidateErrorKind};
use weir_isa::ebpf::{Disc, Insn, Op, OpSpec, FRAME_POINTER, REG_COUNT};

/// Runs the per-slot checks in slot order.
pub(super) fn check_slots(insns: &[Insn]) -> Result<(), ValidateError> {
    // Index of an lddw whose second slot must come next.
    let mut pending_lddw: Option<usize> = None;
    for (index, insn) in insns.iter().enumerate() {
        let fail = |kind| Err(ValidateError::new(index, kind));
        if insn.op == Op::LddwHigh {
            if pending_lddw.take().is_none() {
                return fail(ValidateErrorKind::StrayLddwHigh);
            }
            check_filler(index, insn)?;
            continue;
        }
        if let Some(lddw) = pending_lddw {
            return Err(ValidateError::new(lddw, ValidateErrorKind::MissingLddwHigh));
        }
        let Some(spec) = insn.spec() else {
            // Only LddwHigh lacks a table row, and it was handled above.
            return fail(ValidateErrorKind::StrayLddwHigh);
        };
        check_fields(index, spec, insn)?;
        check_frame_pointer(index, insn)?;
        if insn.op.is_lddw() {
            pending_lddw = Some(index);
        }
    }
    match pending_lddw {
        Some(lddw) => Err(ValidateError::new(lddw, ValidateErrorKind::MissingLddwHigh)),
        None => Ok(()),
    }
}

/// The second slot of `lddw` carries nothing once decoded: its immediate lives in the first.
fn check_filler(index: usize, insn: &Insn) -> Result<(), ValidateError> {
    let fields = [
        ("dst", i64::from(insn.dst)),
        ("src", i64::from(insn.src)),
        ("off", i64::from(insn.off)),
        ("imm", insn.imm),
    ];
    for (field, value) in fields {
        if value != 0 {
            return Err(ValidateError::new(
                index,
                ValidateErrorKind::UnusedFieldSet { mnemonic: "lddw (second slot)", field, value },
            ));
        }
    }
    Ok(())
}

fn check_fields(index: usize, spec: &OpSpec, insn: &Insn) -> Result<(), ValidateError> {
    let fail = |kind| Err(ValidateError::new(index, kind));
    let used = spec.operands.used_fields();
    for (field, is_used, value) in [("dst", used.dst, insn.dst), ("src", used.src, insn.src)] {
        if is_used && value >= REG_COUNT {
            return fail(ValidateErrorKind::BadRegister { field, value });
        }
    }
    let (disc_field, disc_value) = match spec.disc {
        Disc::None => ("", 0),
        Disc::Off(v) => ("off", i64::from(v)),
        Disc::Imm(v) => ("imm", i64::from(v)),
        Disc::Src(v) => ("src", i64::from(v)),
    };
    let fields = [
        ("dst", used.dst, i64::from(insn.dst)),
        ("src", used.src, i64::from(insn.src)),
        ("off", used.off, i64::from(insn.off)),
        ("imm", used.imm, insn.imm),
    ];
    for (field, is_used, value) in fields {
        if field == disc_field {
            // The table decides the operation, so the field may hold its value (as `decode`
            // leaves it) or 0 (as a hand-built instruction may); anything else is a
            // different operation than `op` says.
            if value != 0 && value != disc_value {
                return fail(ValidateErrorKind::BadDiscriminator {
                    mnemonic: spec.mnemonic,
                    field,
                    expected: disc_value,
                    value,
                });
            }
        } else if !is_used && value != 0 {
            return fail(ValidateErrorKind::UnusedFieldSet {
                mnemonic: spec.mnemonic,
                field,
                value,
            });
        }
    }
    // Only lddw has a 64-bit immediate; elsewhere the encoding keeps 32 bits, and an engine
    // reading a wider `imm` would run something different from the bytecode.
    if used.imm && !insn.op.is_lddw() && i32::try_from(insn.imm).is_err() {
        return fail(ValidateErrorKind::ImmOutOfRange { mnemonic: spec.mnemonic, value: insn.imm });
    }
    Ok(())
}

/// r10 is read-only. Atomic fetch forms and xchg write the old value into `src`; cmpxchg
/// writes r0, which is always allowed.
fn check_frame_pointer(index: usize, insn: &Insn) -> Result<(), ValidateError> {
    let field = if insn.op.writes_dst() && insn.dst == FRAME_POINTER {
        "dst"
    } else if writes_src(insn.op) && insn.src == FRAME_POINTER {
        "src"
    } else {
        return Ok(());
    };
    Err(ValidateError::new(index, ValidateErrorKind::WritesFramePointer { field }))
}

fn writes_src(op: Op) -> bool {
    use Op::*;
    matches!(
        op,
        AtomicFetchAdd64
            | AtomicFetchOr64
            | AtomicFetchAnd64
            | AtomicFetchXor64
            | AtomicXchg64
            | AtomicFetchAdd32
            | AtomicFetchOr32
            | AtomicFetchAnd32
            | AtomicFetchXor32
            | AtomicXchg32
    )
}
