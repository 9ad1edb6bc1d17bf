//! The part of the translation both targets share: the register assignment, scratch memory
//! on the stack, 32-bit arithmetic, jumps, returns, and the walk over the classic program
//! that tracks what is known at each instruction. Packet loads and `len` differ per target
//! and are delegated to [`super::socket`] and [`super::xdp`].

use weir_isa::cbpf::ancillary::SKF_AD_OFF;
use weir_isa::cbpf::{CbpfInsn, CbpfOp};
use weir_isa::ebpf::Op;
use weir_program::{Label, LinkError, Program, ProgramBuilder};

use super::analysis;
use super::{socket, xdp, PacketAccess, TranslateError, TranslateErrorKind};

/// The accumulator A. r0 because legacy packet loads put their result there.
pub(super) const REG_A: u8 = 0;
/// A scratch register for values that live inside one classic instruction's translation.
pub(super) const REG_TMP: u8 = 1;
/// The index register X: callee-saved, so legacy packet loads (calls, to the kernel) keep it.
pub(super) const REG_X: u8 = 7;
/// Classic scratch cell `M[k]` is the 32-bit word at `r10 + SCRATCH_BASE + 4 * k`.
const SCRATCH_BASE: i16 = -64;

/// What is known on entry to a classic instruction, over every path emitted so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Facts {
    /// Packet bytes from offset 0 that a bounds check has proven present (XDP only).
    pub checked: u32,
    /// The largest value X can hold here.
    pub x_max: u32,
}

impl Facts {
    /// At the start: A = X = 0, nothing checked.
    const ENTRY: Facts = Facts { checked: 0, x_max: 0 };

    /// What holds when control can arrive with either.
    fn merge(self, other: Facts) -> Facts {
        Facts { checked: self.checked.min(other.checked), x_max: self.x_max.max(other.x_max) }
    }
}

/// The right-hand side of a comparison.
#[derive(Clone, Copy, Debug)]
pub(super) enum Operand {
    Imm(i32),
    Reg(u8),
}

/// A comparison an eBPF jump can make, with the 64-bit opcodes for each operand kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cmp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Set,
}

impl Cmp {
    fn ops(self) -> (Op, Op) {
        match self {
            Cmp::Eq => (Op::Jeq64Imm, Op::Jeq64Reg),
            Cmp::Ne => (Op::Jne64Imm, Op::Jne64Reg),
            Cmp::Gt => (Op::Jgt64Imm, Op::Jgt64Reg),
            Cmp::Ge => (Op::Jge64Imm, Op::Jge64Reg),
            Cmp::Lt => (Op::Jlt64Imm, Op::Jlt64Reg),
            Cmp::Le => (Op::Jle64Imm, Op::Jle64Reg),
            Cmp::Set => (Op::Jset64Imm, Op::Jset64Reg),
        }
    }

    /// The comparison that holds exactly when this one does not (eBPF has no "jnset").
    fn inverse(self) -> Option<Cmp> {
        match self {
            Cmp::Eq => Some(Cmp::Ne),
            Cmp::Ne => Some(Cmp::Eq),
            Cmp::Gt => Some(Cmp::Le),
            Cmp::Le => Some(Cmp::Gt),
            Cmp::Ge => Some(Cmp::Lt),
            Cmp::Lt => Some(Cmp::Ge),
            Cmp::Set => None,
        }
    }
}

/// The translation of one classic program to one target.
pub(super) struct Emitter<'a> {
    pub(super) b: ProgramBuilder,
    pub(super) target: PacketAccess,
    insns: &'a [CbpfInsn],
    /// One label per classic instruction, bound where its translation starts.
    labels: Vec<Label>,
    reachable: Vec<bool>,
    /// Per instruction, packet bytes every path from it reads (XDP; see
    /// [`analysis::anticipated_reads`]).
    anticipated: Vec<u32>,
    /// Per instruction, the facts merged from the predecessors translated so far.
    entry: Vec<Option<Facts>>,
    /// `(first slot, classic index)` of each translated instruction, for error messages.
    starts: Vec<(usize, usize)>,
}

impl<'a> Emitter<'a> {
    pub(super) fn new(insns: &'a [CbpfInsn], target: PacketAccess) -> Self {
        let mut b = ProgramBuilder::new();
        let labels = insns.iter().map(|_| b.new_label()).collect();
        let reachable = analysis::reachable(insns, target);
        let anticipated = match target {
            PacketAccess::Xdp => analysis::anticipated_reads(insns, target, &reachable),
            PacketAccess::SkBuff => vec![0; insns.len()],
        };
        let mut entry = vec![None; insns.len()];
        if let Some(first) = entry.first_mut() {
            *first = Some(Facts::ENTRY);
        }
        Emitter { b, target, insns, labels, reachable, anticipated, entry, starts: Vec::new() }
    }

    /// Translates the whole program.
    pub(super) fn run(mut self) -> Result<Program, TranslateError> {
        match self.target {
            PacketAccess::SkBuff => socket::prologue(&mut self),
            PacketAccess::Xdp => xdp::prologue(&mut self),
        }
        // A and X start at zero in classic BPF; scratch cells need no zeroing because
        // validation proved every read comes after a write.
        self.b.alu_imm(Op::Mov32Imm, REG_A, 0);
        self.b.alu_imm(Op::Mov32Imm, REG_X, 0);
        for index in 0..self.insns.len() {
            if !self.is_reachable(index) {
                continue;
            }
            let (Some(insn), Some(label)) = (self.insns.get(index), self.labels.get(index)) else {
                continue;
            };
            let (insn, label) = (*insn, *label);
            let facts = self.entry.get(index).copied().flatten().unwrap_or(Facts::ENTRY);
            self.b.bind(label);
            self.starts.push((self.b.position(), index));
            let out = self.insn(index, &insn, facts)?;
            for succ in analysis::next(self.insns, index, self.target).targets() {
                if let Some(slot) = self.entry.get_mut(succ) {
                    *slot = Some(slot.map_or(out, |known| known.merge(out)));
                }
            }
        }
        let starts = self.starts;
        self.b.link().map_err(|e| link_error(&starts, e))
    }

    fn is_reachable(&self, index: usize) -> bool {
        self.reachable.get(index).copied().unwrap_or(false)
    }

    /// Packet bytes every path from `index` reads (XDP).
    pub(super) fn anticipated(&self, index: usize) -> u32 {
        self.anticipated.get(index).copied().unwrap_or(0)
    }

    /// The next instruction that gets translated after `index`: where falling through goes.
    fn fall_through(&self, index: usize) -> Option<usize> {
        let start = index.wrapping_add(1);
        (start..self.insns.len()).find(|&i| self.is_reachable(i))
    }

    /// Translates one instruction; returns the facts that hold after it.
    fn insn(
        &mut self,
        index: usize,
        insn: &CbpfInsn,
        facts: Facts,
    ) -> Result<Facts, TranslateError> {
        use CbpfOp::*;
        let k = insn.k;
        // Classic constants are u32; ALU32 immediates are used as u32, so the bits carry over.
        let imm = k as i32;
        let mut out = facts;
        match insn.op {
            LdAbsW | LdAbsH | LdAbsB | LdIndW | LdIndH | LdIndB | LdxMsh | LdLen | LdxLen => {
                return match self.target {
                    PacketAccess::SkBuff => socket::load(self, index, insn, facts),
                    PacketAccess::Xdp => xdp::load(self, index, insn, facts),
                };
            }
            LdImm => {
                self.b.alu_imm(Op::Mov32Imm, REG_A, imm);
            }
            LdxImm => {
                self.b.alu_imm(Op::Mov32Imm, REG_X, imm);
                out.x_max = k;
            }
            LdMem => {
                self.b.load(Op::LdxW, REG_A, 10, scratch_offset(k));
            }
            LdxMem => {
                self.b.load(Op::LdxW, REG_X, 10, scratch_offset(k));
                out.x_max = u32::MAX;
            }
            St => {
                self.b.store_reg(Op::StxW, 10, scratch_offset(k), REG_A);
            }
            Stx => {
                self.b.store_reg(Op::StxW, 10, scratch_offset(k), REG_X);
            }
            AddK => self.alu_k(Op::Add32Imm, imm),
            SubK => self.alu_k(Op::Sub32Imm, imm),
            MulK => self.alu_k(Op::Mul32Imm, imm),
            // Validation rules out a constant 0 divisor and constant shifts of 32 or more.
            DivK => self.alu_k(Op::Div32Imm, imm),
            ModK => self.alu_k(Op::Mod32Imm, imm),
            AndK => self.alu_k(Op::And32Imm, imm),
            OrK => self.alu_k(Op::Or32Imm, imm),
            XorK => self.alu_k(Op::Xor32Imm, imm),
            LshK => self.alu_k(Op::Lsh32Imm, imm),
            RshK => self.alu_k(Op::Rsh32Imm, imm),
            AddX => self.alu_x(Op::Add32Reg),
            SubX => self.alu_x(Op::Sub32Reg),
            MulX => self.alu_x(Op::Mul32Reg),
            AndX => self.alu_x(Op::And32Reg),
            OrX => self.alu_x(Op::Or32Reg),
            XorX => self.alu_x(Op::Xor32Reg),
            DivX | ModX => {
                // eBPF division by zero gives 0 (mod: leaves A) and goes on; classic BPF
                // ends the program with 0.
                self.fail_unless(Cmp::Ne, REG_X, Operand::Imm(0));
                self.alu_x(if insn.op == DivX { Op::Div32Reg } else { Op::Mod32Reg });
            }
            LshX | RshX => {
                let op = if insn.op == LshX { Op::Lsh32Reg } else { Op::Rsh32Reg };
                self.shift_x(op, facts.x_max);
            }
            Neg => {
                self.b.neg32(REG_A);
            }
            Tax => {
                self.b.alu_reg(Op::Mov32Reg, REG_X, REG_A);
                out.x_max = u32::MAX;
            }
            Txa => {
                self.b.alu_reg(Op::Mov32Reg, REG_A, REG_X);
            }
            RetK => {
                self.b.alu_imm(Op::Mov32Imm, REG_A, imm);
                self.b.exit();
            }
            RetA => {
                self.b.exit();
            }
            Ja => {
                let target = index.wrapping_add(1).wrapping_add(k as usize);
                self.goto(index, target);
            }
            JeqK | JgtK | JgeK | JsetK | JeqX | JgtX | JgeX | JsetX => {
                self.conditional_jump(index, insn);
            }
        }
        Ok(out)
    }

    fn alu_k(&mut self, op: Op, imm: i32) {
        self.b.alu_imm(op, REG_A, imm);
    }

    fn alu_x(&mut self, op: Op) {
        self.b.alu_reg(op, REG_A, REG_X);
    }

    /// `A <<= X` / `A >>= X`. libpcap gives 0 for X >= 32 where eBPF masks X to 5 bits, so
    /// unless X is known to be below 32 the shift is guarded.
    fn shift_x(&mut self, op: Op, x_max: u32) {
        if x_max < 32 {
            self.alu_x(op);
            return;
        }
        let shift = self.b.new_label();
        let done = self.b.new_label();
        self.b.jump_imm(Op::Jlt64Imm, REG_X, 32, shift);
        self.b.alu_imm(Op::Mov32Imm, REG_A, 0);
        self.b.jump(done);
        self.b.bind(shift);
        self.alu_x(op);
        self.b.bind(done);
    }

    /// A jump to classic instruction `target` from the end of `from`'s translation, left out
    /// when `target` is translated next anyway.
    fn goto(&mut self, from: usize, target: usize) {
        if self.fall_through(from) == Some(target) {
            return;
        }
        if let Some(label) = self.labels.get(target).copied() {
            self.b.jump(label);
        }
    }

    fn conditional_jump(&mut self, index: usize, insn: &CbpfInsn) {
        use CbpfOp::*;
        let after = index.wrapping_add(1);
        let on_true = after.wrapping_add(usize::from(insn.jt));
        let on_false = after.wrapping_add(usize::from(insn.jf));
        if on_true == on_false {
            self.goto(index, on_true);
            return;
        }
        let cmp = match insn.op {
            JeqK | JeqX => Cmp::Eq,
            JgtK | JgtX => Cmp::Gt,
            JgeK | JgeX => Cmp::Ge,
            _ => Cmp::Set,
        };
        let operand = match insn.op {
            JeqX | JgtX | JgeX | JsetX => Operand::Reg(REG_X),
            _ => self.constant_operand(insn.k, cmp),
        };
        let fall = self.fall_through(index);
        match cmp.inverse() {
            Some(inverse) if fall == Some(on_true) => self.branch(inverse, operand, on_false),
            _ => {
                self.branch(cmp, operand, on_true);
                self.goto(index, on_false);
            }
        }
    }

    /// The constant of a classic comparison as an eBPF operand. The jumps compare 64 bits,
    /// and A is always zero-extended, so a constant whose sign extension would change it
    /// (above `i32::MAX`) goes through a register; for `jset` only the low 32 bits matter.
    fn constant_operand(&mut self, k: u32, cmp: Cmp) -> Operand {
        if cmp == Cmp::Set || i32::try_from(k).is_ok() {
            return Operand::Imm(k as i32);
        }
        self.b.alu_imm(Op::Mov32Imm, REG_TMP, k as i32);
        Operand::Reg(REG_TMP)
    }

    fn branch(&mut self, cmp: Cmp, operand: Operand, target: usize) {
        let Some(label) = self.labels.get(target).copied() else { return };
        self.jump_if(cmp, REG_A, operand, label);
    }

    pub(super) fn jump_if(&mut self, cmp: Cmp, dst: u8, operand: Operand, label: Label) {
        let (imm_op, reg_op) = cmp.ops();
        match operand {
            Operand::Imm(imm) => self.b.jump_imm(imm_op, dst, imm, label),
            Operand::Reg(src) => self.b.jump_reg(reg_op, dst, src, label),
        };
    }

    /// Goes on only if `dst cmp operand`; otherwise the program returns 0, as classic BPF
    /// does on a failed load or a division by zero. The return is inline, so no jump in the
    /// program spans more than one classic instruction's translation plus its jump distance.
    pub(super) fn fail_unless(&mut self, cmp: Cmp, dst: u8, operand: Operand) {
        let ok = self.b.new_label();
        self.jump_if(cmp, dst, operand, ok);
        self.return_zero();
        self.b.bind(ok);
    }

    /// `return 0`: a failed load.
    pub(super) fn return_zero(&mut self) {
        self.b.alu_imm(Op::Mov32Imm, REG_A, 0);
        self.b.exit();
    }
}

/// The stack offset of scratch cell `k` (validated to be below 16).
fn scratch_offset(k: u32) -> i16 {
    let cell = i16::try_from(k.min(15)).unwrap_or(0);
    SCRATCH_BASE.wrapping_add(cell.wrapping_mul(4))
}

/// Whether an absolute load reads an `SKF_AD_*` field rather than the packet.
pub(super) fn is_ancillary(insn: &CbpfInsn) -> bool {
    matches!(insn.op, CbpfOp::LdAbsW | CbpfOp::LdAbsH | CbpfOp::LdAbsB) && insn.k >= SKF_AD_OFF
}

/// A link failure, placed at the classic instruction whose translation holds the slot.
fn link_error(starts: &[(usize, usize)], error: LinkError) -> TranslateError {
    let slot = match &error {
        LinkError::OutOfRange { pc, .. } | LinkError::OutOfRange32 { pc, .. } => Some(*pc),
        _ => None,
    };
    let index = slot
        .and_then(|pc| starts.iter().rev().find(|(start, _)| *start <= pc))
        .map_or(0, |(_, index)| *index);
    TranslateError { index, kind: TranslateErrorKind::Link(error) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_cells_tile_the_64_bytes_below_the_frame_pointer() {
        assert_eq!(scratch_offset(0), -64);
        assert_eq!(scratch_offset(15), -4);
    }

    #[test]
    fn facts_merge_to_what_holds_on_both_paths() {
        let a = Facts { checked: 20, x_max: 60 };
        let b = Facts { checked: 34, x_max: 8 };
        assert_eq!(a.merge(b), Facts { checked: 20, x_max: 60 });
    }
}
