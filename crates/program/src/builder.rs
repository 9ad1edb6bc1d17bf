//! [`ProgramBuilder`]: how front ends emit eBPF without computing offsets by hand. Jumps,
//! local calls and `lddw func(...)` name a [`Label`]; [`ProgramBuilder::link`] turns labels
//! into slot offsets once every position is known, widening `ja` to `ja32` when 16 bits are
//! not enough.
//!
//! The builder writes instructions in the form `decode` produces (the discriminator field,
//! e.g. `off = 1` of `sdiv`, filled in from the opcode table; an `Op::LddwHigh` slot after
//! each `lddw`), so a linked program equals its own encode/decode round trip. It does not
//! check operands: [`crate::validate`] does, on the linked program.

use crate::Program;
use weir_isa::ebpf::{spec_of, Disc, Insn, Op};

/// A position in the program, bound once with [`ProgramBuilder::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Label(pub(crate) usize);

impl Label {
    /// The label's number within its builder (what [`LinkError`] reports).
    pub fn index(self) -> usize {
        self.0
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("label {0} is used but never bound")]
    Unbound(usize),
    #[error("label {0} is bound twice")]
    BoundTwice(usize),
    #[error("instruction {pc}: jump to label {label} is out of range for a 16-bit offset")]
    OutOfRange { pc: usize, label: usize },
    #[error("instruction {pc}: label {label} is out of range for a 32-bit offset")]
    OutOfRange32 { pc: usize, label: usize },
    #[error("label {0} was not made by this builder")]
    UnknownLabel(usize),
}

/// Builds a [`Program`] instruction by instruction. Every emitter returns the slot index of
/// the instruction it wrote.
#[derive(Debug, Default)]
pub struct ProgramBuilder {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, Label)>,
    errors: Vec<LinkError>,
}

/// Sets the field that selects `insn.op` among rows sharing an opcode byte to the table's
/// value, as `decode` would have it.
fn with_discriminator(mut insn: Insn) -> Insn {
    match spec_of(insn.op).map(|spec| spec.disc) {
        Some(Disc::Off(v)) => insn.off = v,
        Some(Disc::Imm(v)) => insn.imm = i64::from(v),
        Some(Disc::Src(v)) => insn.src = v,
        Some(Disc::None) | None => {}
    }
    insn
}

/// The 64-bit immediate of the two-value `lddw` pseudo forms: the map (fd or index) in the
/// low half, the offset into its value in the high half.
fn pair_imm(low: u32, high: u32) -> i64 {
    i64::from(low) | (i64::from(high) << 32)
}

/// Slot offset from the slot after `pc` to `target`, if it fits an `i64` at all.
fn offset_between(pc: usize, target: usize) -> Option<i64> {
    let pc = i64::try_from(pc).ok()?;
    let target = i64::try_from(target).ok()?;
    target.checked_sub(pc)?.checked_sub(1)
}

impl ProgramBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder with room for `slots` instructions, `labels` labels and `jumps` jumps to
    /// labels, for a caller that knows the program's size: vectors grown by doubling hold
    /// up to twice what they use, at the peak of a long program's emission.
    pub fn with_capacity(slots: usize, labels: usize, jumps: usize) -> Self {
        ProgramBuilder {
            insns: Vec::with_capacity(slots),
            labels: Vec::with_capacity(labels),
            fixups: Vec::with_capacity(jumps),
            errors: Vec::new(),
        }
    }

    pub fn new_label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len().saturating_sub(1))
    }

    /// Binds `label` to the current position (the slot the next instruction will take).
    pub fn bind(&mut self, label: Label) {
        let here = self.insns.len();
        match self.labels.get_mut(label.0) {
            Some(slot @ None) => *slot = Some(here),
            Some(Some(_)) => self.errors.push(LinkError::BoundTwice(label.0)),
            None => self.errors.push(LinkError::UnknownLabel(label.0)),
        }
    }

    /// A new label bound to the current position (for backward jumps and loops).
    pub fn here(&mut self) -> Label {
        let label = self.new_label();
        self.bind(label);
        label
    }

    /// Appends one instruction as given (offsets included), filling in its discriminator
    /// field; for `lddw` the second slot is added too.
    pub fn push(&mut self, insn: Insn) -> usize {
        let pc = self.insns.len();
        self.insns.push(with_discriminator(insn));
        if insn.op.is_lddw() {
            self.insns.push(Insn::new(Op::LddwHigh, 0, 0, 0, 0));
        }
        pc
    }

    fn push_to(&mut self, insn: Insn, target: Label) -> usize {
        let pc = self.push(insn);
        self.fixups.push((pc, target));
        pc
    }

    /// Current position (the slot the next instruction will take).
    pub fn position(&self) -> usize {
        self.insns.len()
    }

    // ALU

    /// ALU with an immediate (`add`, `mov32`, ...): `dst op= imm`.
    pub fn alu_imm(&mut self, op: Op, dst: u8, imm: i32) -> usize {
        self.push(Insn::new(op, dst, 0, 0, i64::from(imm)))
    }

    /// ALU with a register (`add`, `mov32`, `movsx1632`, ...): `dst op= src`.
    pub fn alu_reg(&mut self, op: Op, dst: u8, src: u8) -> usize {
        self.push(Insn::new(op, dst, src, 0, 0))
    }

    /// `neg %dst` (64-bit).
    pub fn neg64(&mut self, dst: u8) -> usize {
        self.push(Insn::new(Op::Neg64, dst, 0, 0, 0))
    }

    /// `neg32 %dst`.
    pub fn neg32(&mut self, dst: u8) -> usize {
        self.push(Insn::new(Op::Neg32, dst, 0, 0, 0))
    }

    /// A byte swap (`le16` ... `be64`, `bswap16` ... `bswap64`); the width comes from `op`.
    pub fn byte_swap(&mut self, op: Op, dst: u8) -> usize {
        self.push(Insn::new(op, dst, 0, 0, 0))
    }

    // Memory

    /// A load (`ldxb` ... `ldxdw`, `ldxbsx` ... `ldxwsx`): `dst = *(src + off)`.
    pub fn load(&mut self, op: Op, dst: u8, src: u8, off: i16) -> usize {
        self.push(Insn::new(op, dst, src, off, 0))
    }

    /// A store of an immediate (`stb` ... `stdw`): `*(dst + off) = imm`.
    pub fn store_imm(&mut self, op: Op, dst: u8, off: i16, imm: i32) -> usize {
        self.push(Insn::new(op, dst, 0, off, i64::from(imm)))
    }

    /// A store of a register (`stxb` ... `stxdw`): `*(dst + off) = src`.
    pub fn store_reg(&mut self, op: Op, dst: u8, off: i16, src: u8) -> usize {
        self.push(Insn::new(op, dst, src, off, 0))
    }

    /// An atomic operation on `*(dst + off)` with `src` (`lock add`, `lock fetch or32`,
    /// `lock xchg`, `lock cmpxchg`, ...); the operation comes from `op`.
    pub fn atomic(&mut self, op: Op, dst: u8, off: i16, src: u8) -> usize {
        self.push(Insn::new(op, dst, src, off, 0))
    }

    /// Legacy packet load `ldabsb|h|w imm`.
    pub fn ld_abs(&mut self, op: Op, imm: i32) -> usize {
        self.push(Insn::new(op, 0, 0, 0, i64::from(imm)))
    }

    /// Legacy packet load `ldindb|h|w %src, imm`.
    pub fn ld_ind(&mut self, op: Op, src: u8, imm: i32) -> usize {
        self.push(Insn::new(op, 0, src, 0, i64::from(imm)))
    }

    // 64-bit immediates (two slots each)

    /// `lddw %dst, imm`.
    pub fn lddw(&mut self, dst: u8, imm: i64) -> usize {
        self.push(Insn::new(Op::Lddw, dst, 0, 0, imm))
    }

    /// `lddw %dst, map_fd(fd)`.
    pub fn lddw_map_fd(&mut self, dst: u8, fd: i32) -> usize {
        self.push(Insn::new(Op::LddwMapFd, dst, 0, 0, i64::from(fd)))
    }

    /// `lddw %dst, map_value(fd, offset)`.
    pub fn lddw_map_value(&mut self, dst: u8, fd: u32, offset: u32) -> usize {
        self.push(Insn::new(Op::LddwMapValue, dst, 0, 0, pair_imm(fd, offset)))
    }

    /// `lddw %dst, btf_id(id)`.
    pub fn lddw_btf_id(&mut self, dst: u8, id: i32) -> usize {
        self.push(Insn::new(Op::LddwBtfId, dst, 0, 0, i64::from(id)))
    }

    /// `lddw %dst, map_idx(index)`.
    pub fn lddw_map_idx(&mut self, dst: u8, index: i32) -> usize {
        self.push(Insn::new(Op::LddwMapIdx, dst, 0, 0, i64::from(index)))
    }

    /// `lddw %dst, map_idx_value(index, offset)`.
    pub fn lddw_map_idx_value(&mut self, dst: u8, index: u32, offset: u32) -> usize {
        self.push(Insn::new(Op::LddwMapIdxValue, dst, 0, 0, pair_imm(index, offset)))
    }

    /// `lddw %dst, func(target)`: the address of the local function at `target`. The slot
    /// offset is stored sign-extended in `imm` (see [`crate::function_target`]).
    pub fn lddw_func(&mut self, dst: u8, target: Label) -> usize {
        self.push_to(Insn::new(Op::LddwFunc, dst, 0, 0, 0), target)
    }

    // Control flow

    /// A conditional jump comparing `dst` with an immediate, to `target`.
    pub fn jump_imm(&mut self, op: Op, dst: u8, imm: i32, target: Label) -> usize {
        self.push_to(Insn::new(op, dst, 0, 0, i64::from(imm)), target)
    }

    /// A conditional jump comparing `dst` with `src`, to `target`.
    pub fn jump_reg(&mut self, op: Op, dst: u8, src: u8, target: Label) -> usize {
        self.push_to(Insn::new(op, dst, src, 0, 0), target)
    }

    /// `ja` to `target` (or `ja32` if `link` finds the distance too long for 16 bits).
    pub fn jump(&mut self, target: Label) -> usize {
        self.push_to(Insn::new(Op::Ja, 0, 0, 0, 0), target)
    }

    /// `ja32` to `target`, whatever the distance.
    pub fn jump32(&mut self, target: Label) -> usize {
        self.push_to(Insn::new(Op::Ja32, 0, 0, 0, 0), target)
    }

    /// `call local` to the function starting at `target`.
    pub fn call_local(&mut self, target: Label) -> usize {
        self.push_to(Insn::new(Op::CallLocal, 0, 1, 0, 0), target)
    }

    /// `call id` (a helper).
    pub fn call_helper(&mut self, id: i32) -> usize {
        self.push(Insn::new(Op::Call, 0, 0, 0, i64::from(id)))
    }

    /// `call kfunc btf_id`.
    pub fn call_kfunc(&mut self, btf_id: i32) -> usize {
        self.push(Insn::new(Op::CallKfunc, 0, 0, 0, i64::from(btf_id)))
    }

    /// `call %reg` (callx): calls the function whose address `reg` holds.
    pub fn call_reg(&mut self, reg: u8) -> usize {
        self.push(Insn::new(Op::CallReg, reg, 0, 0, 0))
    }

    pub fn exit(&mut self) -> usize {
        self.push(Insn::new(Op::Exit, 0, 0, 0, 0))
    }

    /// Resolves every label into a slot offset. Reports the first problem: a label bound
    /// twice or not made here (in the order `bind` saw them), else a label used but never
    /// bound or a distance its instruction cannot encode (in the order of use).
    pub fn link(self) -> Result<Program, LinkError> {
        if let Some(e) = self.errors.into_iter().next() {
            return Err(e);
        }
        let mut insns = self.insns;
        for (pc, label) in self.fixups {
            let target = match self.labels.get(label.0) {
                Some(Some(target)) => *target,
                Some(None) => return Err(LinkError::Unbound(label.0)),
                None => return Err(LinkError::UnknownLabel(label.0)),
            };
            let too_far_16 = LinkError::OutOfRange { pc, label: label.0 };
            let too_far_32 = LinkError::OutOfRange32 { pc, label: label.0 };
            let delta = offset_between(pc, target).ok_or(too_far_32.clone())?;
            let Some(insn) = insns.get_mut(pc) else { continue };
            match insn.op {
                Op::CallLocal | Op::Ja32 | Op::LddwFunc => {
                    insn.imm = i64::from(i32::try_from(delta).map_err(|_| too_far_32)?);
                }
                Op::Ja => match i16::try_from(delta) {
                    Ok(off) => insn.off = off,
                    Err(_) => {
                        let imm = i32::try_from(delta).map_err(|_| too_far_32)?;
                        *insn = Insn::new(Op::Ja32, 0, 0, 0, i64::from(imm));
                    }
                },
                _ => insn.off = i16::try_from(delta).map_err(|_| too_far_16)?,
            }
        }
        Ok(Program::from_insns(insns))
    }
}
