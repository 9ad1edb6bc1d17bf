//! The reference evaluator: the IR's meaning, written as directly as possible.
//!
//! Every other way of running a filter (the classic BPF and eBPF emitters, native code) is
//! checked against this, and this is checked against libpcap.

use crate::ir::{
    BinOp, Chain, ChainStep, CmpOp, Expr, Filter, Pred, CHAIN_HOP_BUDGET, SCRATCH_SLOTS,
};

/// Evaluation stopped: an out-of-bounds load or a division by zero. The packet is rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Abort;

/// One packet being filtered, plus scratch memory.
pub struct Evaluator<'a> {
    packet: &'a [u8],
    wire_len: u32,
    scratch: [u32; SCRATCH_SLOTS as usize],
    /// Bit `s` set once slot `s` has been stored to on this packet.
    written: u32,
    /// Set when a slot was read before anything stored to it.
    read_unset: bool,
}

impl<'a> Evaluator<'a> {
    pub fn new(packet: &'a [u8], wire_len: u32) -> Evaluator<'a> {
        Evaluator {
            packet,
            wire_len,
            scratch: [0; SCRATCH_SLOTS as usize],
            written: 0,
            read_unset: false,
        }
    }

    /// Whether the evaluation so far read a scratch slot before any [`Pred::Store`] wrote
    /// it on this packet. The IR defines such a read as 0; classic BPF programs that other
    /// tools build (libpcap's) read whatever the cell last held there, so differential
    /// tests use this to set aside packets on which the two are not comparable.
    pub fn reads_unset_scratch(&self) -> bool {
        self.read_unset
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
            Expr::Scratch(slot) => {
                if self.written & 1u32.checked_shl(u32::from(*slot)).unwrap_or(0) == 0 {
                    self.read_unset = true;
                }
                self.scratch.get(*slot as usize).copied().ok_or(Abort)?
            }
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
                self.written |= 1u32.checked_shl(u32::from(*slot)).unwrap_or(0);
                true
            }
            Pred::Guard(n) => {
                if self.packet.len() < *n as usize {
                    return Err(Abort);
                }
                true
            }
            Pred::Chain(chain) => self.chain(chain)?,
            Pred::Try(inner) => self.pred(inner).unwrap_or(false),
            Pred::Pairs(pairs) => pairs.eval(self)?,
        })
    }

    /// The walk of [`Chain`], a loop as libpcap's is, ended by its hop budget.
    fn chain(&mut self, chain: &Chain) -> Result<bool, Abort> {
        let mut a = self.expr(&chain.next)?;
        let mut x = self.expr(&chain.offset)?;
        let mut hops = 0u32;
        loop {
            if a == chain.target {
                return Ok(true);
            }
            let Some(step) = chain.steps_over(a) else {
                return Ok(false);
            };
            if hops >= CHAIN_HOP_BUDGET {
                return Err(Abort);
            }
            hops += 1;
            // Offsets in u64: they cannot wrap (libpcap's loads check without wrapping).
            let at = u64::from(chain.base) + u64::from(x);
            let byte = |k: u64| {
                usize::try_from(at + k).ok().and_then(|i| self.packet.get(i)).copied().ok_or(Abort)
            };
            let next = u32::from(byte(0)?);
            let length = u32::from(byte(1)?);
            a = next;
            x = match step {
                ChainStep::Extension => x.wrapping_add((length + 1) * 8),
                ChainStep::Ah => (length + 2) * 4,
            };
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Size;

    /// A read of a slot before its store is noticed; a read after the store is not, and
    /// a store on a path not taken does not count.
    #[test]
    fn reads_of_unset_scratch_are_noticed() {
        let store = |slot| Pred::Store { slot, value: Expr::Const(7) };
        let read = |slot| Pred::eq(Expr::Scratch(slot), 7);
        let check = |p: &Pred| {
            let mut e = Evaluator::new(&[1, 2, 3], 3);
            let verdict = e.pred(p);
            (verdict, e.reads_unset_scratch())
        };
        assert_eq!(check(&Pred::and([store(3), read(3)])), (Ok(true), false));
        assert_eq!(check(&Pred::and([store(2), read(3)])), (Ok(false), true));
        let skipped = Pred::or([Pred::and([Pred::Const(false), store(1)]), read(1)]);
        assert_eq!(check(&skipped), (Ok(false), true));
        // An abort before the read: nothing read.
        let aborted = Pred::and([Pred::eq(Expr::load_at(10, Size::Byte), 0), read(0)]);
        assert_eq!(check(&aborted), (Err(Abort), false));
    }

    /// `Try` turns an abort inside into false (stores before the abort stay), and the
    /// optimizer keeps it a boundary: on packets of every length the optimized filter
    /// evaluates as the original, and keeps the stores whose slots nothing in it reads.
    #[test]
    fn try_confines_an_abort_and_survives_the_optimizer() {
        let load = |k| Expr::load_at(k, Size::Byte);
        let clause = |k: u32, slot: u8| {
            Pred::Try(Box::new(Pred::and([
                Pred::eq(load(0), 1),
                Pred::Store { slot, value: Expr::Const(k) },
                Pred::eq(load(k), 0),
                Pred::Store { slot: 15, value: Expr::Const(k) },
            ])))
        };
        let f = Filter::new(Pred::or([clause(40, 3), clause(8, 4), clause(2, 5)]));
        let o = crate::opt::optimize(&f);
        assert!(crate::opt::has_store(&o.pred), "{o}");
        for len in 0..48usize {
            let mut pkt = vec![0u8; len];
            if let Some(b) = pkt.first_mut() {
                *b = 1;
            }
            let run = |f: &Filter| {
                let mut e = Evaluator::new(&pkt, 64);
                let r = e.pred(&f.pred);
                (r, e.expr(&Expr::Scratch(15)), e.expr(&Expr::Scratch(3)))
            };
            let (want, got) = (run(&f), run(&o));
            assert_eq!(got, want, "length {len}: {o}");
            // Never an abort; the longest clause that fits wins.
            let expect = if len > 40 {
                40
            } else if len > 8 {
                8
            } else if len > 2 {
                2
            } else {
                0
            };
            assert_eq!(want.0, Ok(len > 2), "length {len}");
            assert_eq!(want.1, Ok(expect), "length {len}");
        }
    }
}
