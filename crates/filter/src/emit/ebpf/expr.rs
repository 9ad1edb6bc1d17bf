//! Expressions for the eBPF emitter: each evaluates into a value register, operands in the
//! order that needs the fewest registers (Sethi-Ullman; the IR's operands have no effects,
//! so any order is right), spilling to the stack only when an expression needs more
//! registers than the target has. Packet loads are per target ([`Emitter::load`]).

use weir_isa::ebpf::Op;

use super::{
    scratch_offset, spill_offset, Emitter, Jump, Operand, PacketAccess, Rel, FRAME,
    LEGACY_MAX_OFFSET, MAX_SPILLS, R0, SOCKET_CTX, XDP_DATA, XDP_DATA_END, XDP_MAX_END, XDP_TMP,
};
use crate::emit::bounds::{can_abort, max_value, split_offset};
use crate::emit::EmitError;
use crate::ir::{BinOp, Expr, Size};

/// `dst op= imm` and `dst op= src`, 32-bit.
fn alu32(op: BinOp) -> (Op, Op) {
    use Op::*;
    match op {
        BinOp::Add => (Add32Imm, Add32Reg),
        BinOp::Sub => (Sub32Imm, Sub32Reg),
        BinOp::Mul => (Mul32Imm, Mul32Reg),
        BinOp::Div => (Div32Imm, Div32Reg),
        BinOp::Mod => (Mod32Imm, Mod32Reg),
        BinOp::And => (And32Imm, And32Reg),
        BinOp::Or => (Or32Imm, Or32Reg),
        BinOp::Xor => (Xor32Imm, Xor32Reg),
        BinOp::Shl => (Lsh32Imm, Lsh32Reg),
        BinOp::Shr => (Rsh32Imm, Rsh32Reg),
    }
}

fn commutative(op: BinOp) -> bool {
    matches!(op, BinOp::Add | BinOp::Mul | BinOp::And | BinOp::Or | BinOp::Xor)
}

/// How an expression is computed: the cases [`Emitter::eval`] and [`need`] agree on.
enum Shape<'a> {
    /// One register, whatever the operand (a constant, `len`, a slot, a constant-offset
    /// load, or a path that only aborts).
    Leaf,
    /// `inner`, then one instruction on its register (a constant operand, a negation, a
    /// load at a variable offset).
    Chain(&'a Expr),
    /// Both operands in registers.
    Pair(&'a Expr, &'a Expr),
}

fn shape(e: &Expr) -> Shape<'_> {
    match e {
        Expr::Const(_) | Expr::WireLen | Expr::Scratch(_) => Shape::Leaf,
        Expr::Load { offset, .. } => match offset.as_ref() {
            Expr::Const(_) => Shape::Leaf,
            offset => Shape::Chain(split_offset(offset).0),
        },
        Expr::Neg(inner) => Shape::Chain(inner),
        Expr::Binary { op, lhs, rhs } => match (op, lhs.as_ref(), rhs.as_ref()) {
            (BinOp::Div | BinOp::Mod, _, Expr::Const(0)) => Shape::Leaf,
            (BinOp::Shl | BinOp::Shr, l, Expr::Const(k)) if *k >= 32 => {
                if can_abort(l) {
                    Shape::Chain(l)
                } else {
                    Shape::Leaf
                }
            }
            (_, l, Expr::Const(_)) => Shape::Chain(l),
            (op, Expr::Const(_), r) if commutative(*op) => Shape::Chain(r),
            (_, l, r) => Shape::Pair(l, r),
        },
    }
}

/// Registers needed to evaluate `e` without spilling.
pub(super) fn need(e: &Expr) -> usize {
    match shape(e) {
        Shape::Leaf => 1,
        Shape::Chain(inner) => need(inner),
        Shape::Pair(l, r) => {
            let (a, b) = (need(l), need(r));
            if a == b {
                a.saturating_add(1)
            } else {
                a.max(b)
            }
        }
    }
}

/// An upper bound of `e` that the Linux verifier also derives when it follows the code
/// [`Emitter::eval`] writes for `e` (`None`: it may not). Only what its range tracking is
/// sure to see: byte loads, masks, constant shifts and constant sums along one chain of
/// registers.
fn verifier_bound(e: &Expr) -> Option<u32> {
    match e {
        Expr::Const(k) => Some(*k),
        Expr::Load { size: Size::Byte, .. } => Some(0xff),
        Expr::Binary { op, lhs, rhs } => match (op, lhs.as_ref(), rhs.as_ref()) {
            (BinOp::And, x, Expr::Const(m)) | (BinOp::And, Expr::Const(m), x) => {
                Some(verifier_bound(x).map_or(*m, |b| b.min(*m)))
            }
            (BinOp::Shl, x, Expr::Const(k)) if *k < 32 => {
                let wide = u64::from(verifier_bound(x)?).checked_shl(*k)?;
                u32::try_from(wide).ok()
            }
            (BinOp::Shr, x, Expr::Const(k)) if *k < 32 => {
                Some(verifier_bound(x).unwrap_or(u32::MAX).checked_shr(*k).unwrap_or(0))
            }
            (BinOp::Add, x, Expr::Const(k)) | (BinOp::Add, Expr::Const(k), x) => {
                verifier_bound(x)?.checked_add(*k)
            }
            _ => None,
        },
        _ => None,
    }
}

impl Emitter {
    pub(super) fn release(&mut self, reg: u8) {
        self.free.push(reg);
    }

    pub(super) fn allocate(&mut self) -> Result<u8, EmitError> {
        // `need` sizes every evaluation and `eval_pair` spills before the registers run
        // out, so a register is always free here.
        self.free.pop().ok_or(EmitError::Internal("no value register left"))
    }

    /// A value register holding `e` (or, on a path that only aborts, any register).
    pub(super) fn eval(&mut self, e: &Expr) -> Result<u8, EmitError> {
        match e {
            Expr::Const(k) => {
                let r = self.allocate()?;
                self.alu_imm(Op::Mov32Imm, r, *k as i32);
                Ok(r)
            }
            Expr::WireLen => {
                let r = self.allocate()?;
                match self.target {
                    PacketAccess::SkBuff => {
                        let len = weir_program::abi::SOCKET_FILTER
                            .field("len")
                            .and_then(|f| i16::try_from(f.offset).ok())
                            .unwrap_or(0);
                        self.insn(Op::LdxW, r, SOCKET_CTX, len, 0);
                    }
                    PacketAccess::Xdp => {
                        // The difference of two packet pointers: allowed to privileged
                        // loaders (CAP_PERFMON or root).
                        self.alu_reg(Op::Mov64Reg, r, XDP_DATA_END);
                        self.alu_reg(Op::Sub64Reg, r, XDP_DATA);
                    }
                }
                Ok(r)
            }
            Expr::Scratch(slot) => {
                let r = self.allocate()?;
                self.insn(Op::LdxW, r, FRAME, scratch_offset(*slot), 0);
                Ok(r)
            }
            Expr::Load { offset, size } => self.load(offset, *size),
            Expr::Neg(inner) => {
                let r = self.eval(inner)?;
                self.insn(Op::Neg32, r, 0, 0, 0);
                Ok(r)
            }
            Expr::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs),
        }
    }

    /// Registers holding `lhs` and `rhs`, the operand needing more registers first; the
    /// first is spilled while the second is computed when the two do not fit together.
    pub(super) fn eval_pair(&mut self, lhs: &Expr, rhs: &Expr) -> Result<(u8, u8), EmitError> {
        let lhs_first = need(lhs) >= need(rhs);
        let (first, second) = if lhs_first { (lhs, rhs) } else { (rhs, lhs) };
        let mut a = self.eval(first)?;
        let b = if self.free.len() >= need(second) {
            self.eval(second)?
        } else {
            if self.spills >= MAX_SPILLS {
                return Err(EmitError::StackFull);
            }
            let slot = spill_offset(self.spills);
            self.spills = self.spills.wrapping_add(1);
            self.insn(Op::StxW, FRAME, a, slot, 0);
            self.release(a);
            let b = self.eval(second)?;
            a = self.allocate()?;
            self.insn(Op::LdxW, a, FRAME, slot, 0);
            self.spills = self.spills.wrapping_sub(1);
            b
        };
        Ok(if lhs_first { (a, b) } else { (b, a) })
    }

    fn binary(&mut self, op: BinOp, lhs: &Expr, rhs: &Expr) -> Result<u8, EmitError> {
        let (imm_op, reg_op) = alu32(op);
        match (op, lhs, rhs) {
            (BinOp::Div | BinOp::Mod, _, Expr::Const(0)) => {
                let r = self.allocate()?;
                self.abort();
                return Ok(r);
            }
            (BinOp::Shl | BinOp::Shr, l, Expr::Const(k)) if *k >= 32 => {
                let r = if can_abort(l) { self.eval(l)? } else { self.allocate()? };
                self.alu_imm(Op::Mov32Imm, r, 0);
                return Ok(r);
            }
            // ALU32 immediates are used as 32-bit values: the bits carry over.
            (_, l, Expr::Const(k)) => {
                let r = self.eval(l)?;
                self.alu_imm(imm_op, r, *k as i32);
                return Ok(r);
            }
            (op, Expr::Const(k), r) if commutative(op) => {
                let reg = self.eval(r)?;
                self.alu_imm(imm_op, reg, *k as i32);
                return Ok(reg);
            }
            _ => {}
        }
        let (a, b) = self.eval_pair(lhs, rhs)?;
        match op {
            BinOp::Div | BinOp::Mod => {
                self.reject_if(Jump::value(Rel::Eq, b, Operand::Imm(0)));
                self.alu_reg(reg_op, a, b);
            }
            BinOp::Shl | BinOp::Shr if max_value(rhs) >= 32 => {
                let (shift, zero, done) = (self.flow.label(), self.flow.label(), self.flow.label());
                self.flow.cond(Jump::value(Rel::Lt, b, Operand::Imm(32)), shift, zero);
                self.flow.bind(zero);
                self.alu_imm(Op::Mov32Imm, a, 0);
                self.flow.goto(done);
                self.flow.bind(shift);
                self.alu_reg(reg_op, a, b);
                self.flow.bind(done);
            }
            _ => self.alu_reg(reg_op, a, b),
        }
        self.release(b);
        Ok(a)
    }

    /// A register holding the `size` bytes at `offset`, big-endian.
    fn load(&mut self, offset: &Expr, size: Size) -> Result<u8, EmitError> {
        let bytes = size.bytes();
        if let Expr::Const(k) = offset {
            return self.constant_load(*k, size);
        }
        let (base, displacement) = split_offset(offset);
        match self.target {
            PacketAccess::SkBuff => {
                let Some(base_limit) = LEGACY_MAX_OFFSET.checked_sub(displacement) else {
                    let r = self.allocate()?;
                    self.abort();
                    return Ok(r);
                };
                let r = self.eval(base)?;
                if max_value(base) > base_limit {
                    self.reject_if(Jump::wide(Rel::Gt, r, Operand::Imm(base_limit as i32)));
                }
                let op = match size {
                    Size::Byte => Op::LdIndB,
                    Size::Half => Op::LdIndH,
                    Size::Word => Op::LdIndW,
                };
                self.insn(op, 0, r, 0, displacement as i32);
                self.alu_reg(Op::Mov64Reg, r, R0);
                Ok(r)
            }
            PacketAccess::Xdp => {
                let room = displacement.checked_add(bytes).and_then(|n| XDP_MAX_END.checked_sub(n));
                let Some(base_limit) = room else {
                    let r = self.allocate()?;
                    self.abort();
                    return Ok(r);
                };
                let r = self.eval(base)?;
                // The verifier needs the offset bounded before it is added to a packet
                // pointer, and bounded by 65535 to give the sum a range.
                if verifier_bound(base).is_none_or(|b| b > base_limit) {
                    self.reject_if(Jump::wide(Rel::Gt, r, Operand::Imm(base_limit as i32)));
                }
                self.alu_reg(Op::Mov64Reg, XDP_TMP, XDP_DATA);
                self.alu_reg(Op::Add64Reg, XDP_TMP, r);
                let off = match i16::try_from(displacement) {
                    Ok(off) => off,
                    Err(_) => {
                        self.alu_imm(Op::Add64Imm, XDP_TMP, displacement as i32);
                        0
                    }
                };
                // `off` is at most 32767 and `bytes` at most 4.
                let end = u32::try_from(off).unwrap_or(0).wrapping_add(bytes);
                self.alu_reg(Op::Mov64Reg, r, XDP_TMP);
                self.alu_imm(Op::Add64Imm, r, end as i32);
                self.reject_if(Jump::wide(Rel::Gt, r, Operand::Reg(XDP_DATA_END)));
                self.packet_read(r, XDP_TMP, off, size);
                Ok(r)
            }
        }
    }

    fn constant_load(&mut self, k: u32, size: Size) -> Result<u8, EmitError> {
        let r = self.allocate()?;
        match self.target {
            PacketAccess::SkBuff => {
                if k > LEGACY_MAX_OFFSET {
                    self.abort();
                    return Ok(r);
                }
                let op = match size {
                    Size::Byte => Op::LdAbsB,
                    Size::Half => Op::LdAbsH,
                    Size::Word => Op::LdAbsW,
                };
                self.insn(op, 0, 0, 0, k as i32);
                self.alu_reg(Op::Mov64Reg, r, R0);
            }
            PacketAccess::Xdp => {
                let end = u64::from(k).wrapping_add(u64::from(size.bytes()));
                let Some(end) = u32::try_from(end).ok().filter(|&e| e <= XDP_MAX_END) else {
                    self.abort();
                    return Ok(r);
                };
                // Normally covered by the check before the comparison.
                self.ensure_checked(end);
                match i16::try_from(k) {
                    Ok(off) => self.packet_read(r, XDP_DATA, off, size),
                    Err(_) => {
                        self.alu_reg(Op::Mov64Reg, XDP_TMP, XDP_DATA);
                        self.alu_imm(Op::Add64Imm, XDP_TMP, k as i32);
                        self.packet_read(r, XDP_TMP, 0, size);
                    }
                }
            }
        }
        Ok(r)
    }

    /// `dst` = the bytes at `base + off` as the big-endian number they spell.
    pub(super) fn packet_read(&mut self, dst: u8, base: u8, off: i16, size: Size) {
        let (load, swap) = match size {
            Size::Byte => (Op::LdxB, None),
            Size::Half => (Op::LdxH, Some(Op::Be16)),
            Size::Word => (Op::LdxW, Some(Op::Be32)),
        };
        self.insn(load, dst, base, off, 0);
        if let Some(swap) = swap {
            self.insn(swap, dst, 0, 0, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msh(k: u32) -> Expr {
        Expr::binary(BinOp::Shl, Expr::load_at(k, Size::Byte).and_mask(0xf), Expr::Const(2))
    }

    #[test]
    fn need_counts_registers() {
        assert_eq!(need(&Expr::Const(1)), 1);
        assert_eq!(need(&msh(14).plus(2)), 1);
        let sum = |a, b| Expr::binary(BinOp::Add, a, b);
        assert_eq!(need(&sum(Expr::WireLen, Expr::Scratch(0))), 2);
        let deep = sum(sum(Expr::WireLen, Expr::WireLen), sum(Expr::WireLen, Expr::WireLen));
        assert_eq!(need(&deep), 3);
    }

    #[test]
    fn verifier_bounds_stay_on_one_chain() {
        assert_eq!(verifier_bound(&msh(14).plus(14)), Some(74));
        assert_eq!(verifier_bound(&Expr::load_at(0, Size::Half)), None);
        assert_eq!(verifier_bound(&Expr::load_at(0, Size::Half).and_mask(0x3ff)), Some(0x3ff));
        let two = Expr::binary(BinOp::Add, msh(14), msh(14));
        assert_eq!(verifier_bound(&two), None);
    }
}
