//! The reference evaluator: the IR's meaning, written as directly as possible.
//!
//! Every other way of running a filter (the classic BPF and eBPF emitters, native code) is
//! checked against this, and this is checked against libpcap.

use crate::ir::{BinOp, CmpOp, Expr, Filter, Pred, SCRATCH_SLOTS};

/// Evaluation stopped: an out-of-bounds load or a division by zero. The packet is rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Abort;

/// One packet being filtered, plus scratch memory.
pub struct Evaluator<'a> {
    packet: &'a [u8],
    wire_len: u32,
    scratch: [u32; SCRATCH_SLOTS as usize],
}

impl<'a> Evaluator<'a> {
    pub fn new(packet: &'a [u8], wire_len: u32) -> Evaluator<'a> {
        Evaluator { packet, wire_len, scratch: [0; SCRATCH_SLOTS as usize] }
    }

    pub fn expr(&mut self, e: &Expr) -> Result<u32, Abort> {
        Ok(match e {
            Expr::Const(k) => *k,
            Expr::WireLen => self.wire_len,
            Expr::Load { offset, size } => {
                let off = self.expr(offset)? as usize;
                let end = off.checked_add(size.bytes() as usize).ok_or(Abort)?;
                let bytes = self.packet.get(off..end).ok_or(Abort)?;
                bytes.iter().fold(0u32, |acc, &b| (acc << 8) | u32::from(b))
            }
            Expr::Scratch(slot) => self.scratch.get(*slot as usize).copied().ok_or(Abort)?,
            Expr::Binary { op, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let b = self.expr(rhs)?;
                binary(*op, a, b)?
            }
            Expr::Neg(a) => self.expr(a)?.wrapping_neg(),
        })
    }

    pub fn pred(&mut self, p: &Pred) -> Result<bool, Abort> {
        Ok(match p {
            Pred::Const(b) => *b,
            Pred::Cmp { op, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let b = self.expr(rhs)?;
                compare(*op, a, b)
            }
            Pred::In { value, set } => set.contains(self.expr(value)?),
            Pred::And(parts) => {
                for part in parts {
                    if !self.pred(part)? {
                        return Ok(false);
                    }
                }
                true
            }
            Pred::Or(parts) => {
                for part in parts {
                    if self.pred(part)? {
                        return Ok(true);
                    }
                }
                false
            }
            Pred::Not(inner) => !self.pred(inner)?,
            Pred::Store { slot, value } => {
                let v = self.expr(value)?;
                *self.scratch.get_mut(*slot as usize).ok_or(Abort)? = v;
                true
            }
            Pred::Guard(n) => {
                if self.packet.len() < *n as usize {
                    return Err(Abort);
                }
                true
            }
        })
    }
}

/// u32 arithmetic with the IR's rules (wrapping; shifts >= 32 give 0; x/0 aborts).
pub fn binary(op: BinOp, a: u32, b: u32) -> Result<u32, Abort> {
    Ok(match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::Div => a.checked_div(b).ok_or(Abort)?,
        BinOp::Mod => a.checked_rem(b).ok_or(Abort)?,
        BinOp::And => a & b,
        BinOp::Or => a | b,
        BinOp::Xor => a ^ b,
        BinOp::Shl => a.checked_shl(b).unwrap_or(0),
        BinOp::Shr => a.checked_shr(b).unwrap_or(0),
    })
}

pub fn compare(op: CmpOp, a: u32, b: u32) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Set => a & b != 0,
    }
}

impl Filter {
    /// What the filter returns for one packet: `self.accept` or 0.
    pub fn run(&self, packet: &[u8], wire_len: u32) -> u32 {
        if self.matches(packet, wire_len) {
            self.accept
        } else {
            0
        }
    }

    /// True when the packet is accepted (the predicate holds and nothing aborted).
    pub fn matches(&self, packet: &[u8], wire_len: u32) -> bool {
        Evaluator::new(packet, wire_len).pred(&self.pred) == Ok(true)
    }
}
