//! [`ProgramBuilder`]: emit instructions with symbolic labels; [`ProgramBuilder::link`]
//! turns labels into slot offsets. (To be completed: see the module's tests.)

use crate::Program;
use weir_isa::ebpf::{Insn, Op};

/// A position in the program, bound once with [`ProgramBuilder::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Label(pub(crate) usize);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("label {0} is used but never bound")]
    Unbound(usize),
    #[error("label {0} is bound twice")]
    BoundTwice(usize),
    #[error("instruction {pc}: jump to label {label} is out of range for a 16-bit offset")]
    OutOfRange { pc: usize, label: usize },
}

/// Builds a [`Program`] instruction by instruction.
#[derive(Debug, Default)]
pub struct ProgramBuilder {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, Label)>,
    errors: Vec<LinkError>,
}

impl ProgramBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn new_label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    pub fn bind(&mut self, label: Label) {
        match self.labels.get_mut(label.0) {
            Some(slot @ None) => *slot = Some(self.insns.len()),
            _ => self.errors.push(LinkError::BoundTwice(label.0)),
        }
    }

    /// Appends one instruction; for `lddw` the filler slot is added too.
    pub fn push(&mut self, insn: Insn) -> usize {
        let pc = self.insns.len();
        self.insns.push(insn);
        if insn.op.is_lddw() {
            self.insns.push(Insn::new(Op::LddwHigh, 0, 0, 0, 0));
        }
        pc
    }

    pub fn alu_imm(&mut self, op: Op, dst: u8, imm: i32) -> usize {
        self.push(Insn::new(op, dst, 0, 0, i64::from(imm)))
    }

    pub fn alu_reg(&mut self, op: Op, dst: u8, src: u8) -> usize {
        self.push(Insn::new(op, dst, src, 0, 0))
    }

    /// A conditional jump comparing `dst` with an immediate, to `target`.
    pub fn jump_imm(&mut self, op: Op, dst: u8, imm: i32, target: Label) -> usize {
        let pc = self.push(Insn::new(op, dst, 0, 0, i64::from(imm)));
        self.fixups.push((pc, target));
        pc
    }

    /// A conditional jump comparing `dst` with `src`, to `target`.
    pub fn jump_reg(&mut self, op: Op, dst: u8, src: u8, target: Label) -> usize {
        let pc = self.push(Insn::new(op, dst, src, 0, 0));
        self.fixups.push((pc, target));
        pc
    }

    /// `ja` to `target` (or `ja32` if `link` finds the distance too long for 16 bits).
    pub fn jump(&mut self, target: Label) -> usize {
        let pc = self.push(Insn::new(Op::Ja, 0, 0, 0, 0));
        self.fixups.push((pc, target));
        pc
    }

    /// `call local` to the function starting at `target`.
    pub fn call_local(&mut self, target: Label) -> usize {
        let pc = self.push(Insn::new(Op::CallLocal, 0, 1, 0, 0));
        self.fixups.push((pc, target));
        pc
    }

    pub fn call_helper(&mut self, id: i32) -> usize {
        self.push(Insn::new(Op::Call, 0, 0, 0, i64::from(id)))
    }

    pub fn exit(&mut self) -> usize {
        self.push(Insn::new(Op::Exit, 0, 0, 0, 0))
    }

    /// Current position (the slot the next instruction will take).
    pub fn position(&self) -> usize {
        self.insns.len()
    }

    /// Resolves every label into a slot offset.
    pub fn link(self) -> Result<Program, LinkError> {
        if let Some(e) = self.errors.into_iter().next() {
            return Err(e);
        }
        let mut insns = self.insns;
        for (pc, label) in self.fixups {
            let target = self.labels[label.0].ok_or(LinkError::Unbound(label.0))?;
            let delta = target as i64 - pc as i64 - 1;
            let insn = &mut insns[pc];
            match insn.op {
                Op::CallLocal => insn.imm = delta,
                Op::Ja if i16::try_from(delta).is_err() => {
                    insn.op = Op::Ja32;
                    insn.imm = delta;
                }
                _ => {
                    insn.off = i16::try_from(delta)
                        .map_err(|_| LinkError::OutOfRange { pc, label: label.0 })?;
                }
            }
        }
        Ok(Program::from_insns(insns))
    }
}
