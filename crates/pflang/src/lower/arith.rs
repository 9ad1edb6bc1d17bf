//! Relations between arithmetic expressions (`expr relop expr`), packet accessors
//! `proto[expr:size]`, `len`, `less`, `greater` and `byte`.
//!
//! An accessor is a load plus the protocol checks libpcap puts in front of the comparison
//! that uses it: `ip[...]` holds only on IP packets, `tcp[...]` only on IPv4 packets whose
//! protocol is TCP and that are not later fragments. A relation is the checks of both of its
//! sides, left to right, ANDed before the comparison, so `not tcp[0] = 1` is also true for
//! packets that are not TCP. Two details follow libpcap to the letter although they look
//! like slips, because they decide verdicts and errors:
//!
//! - In `a OP b`, only `a`'s checks survive (`len + tcp[0] = 1` checks nothing);
//! - "division by zero", "modulus by zero" and "shift by more than 31 bits" are reported
//!   when the *first number written* in the right operand is 0 (or above 31), whatever the
//!   operand computes: `len / ip[0]` and `len >> (32 - 1)` are errors.
//!
//! The loads themselves compute their offset the way the classic BPF libpcap emits does: the
//! index (plus any variable header offset) in 32-bit arithmetic that wraps, then the
//! constant header offset added without wrapping, so `ip[-1]` reads past the packet rather
//! than the byte before the IP header ([`displaced_offset`]).

use weir_filter::{BinOp, CmpOp, Expr, Pred, Size};

use super::link::{
    ETHERTYPE_ARP, ETHERTYPE_ATALK, ETHERTYPE_DN, ETHERTYPE_IP, ETHERTYPE_IPV6, ETHERTYPE_LAT,
    ETHERTYPE_MOPDL, ETHERTYPE_MOPRC, ETHERTYPE_REVARP, ETHERTYPE_SCA,
};
use super::net_proto::IPPROTO_ICMPV6;
use super::{junction, CompileError, Layer, Lowerer, Offset};
use crate::ast::{self, Arith, ArithKind, ByteOp, Proto, RelOp, Relation, Span};
use crate::depth;

/// An arithmetic value and the protocol checks that guard the comparison using it.
struct Operand {
    value: Expr,
    checks: Vec<Pred>,
}

impl Operand {
    fn plain(value: Expr) -> Operand {
        Operand { value, checks: Vec::new() }
    }
}

/// The first number written in an arithmetic expression, if it starts with one: the
/// instruction libpcap looks at when it checks a divisor or a shift.
fn leading_number(a: &Arith) -> Option<u32> {
    match &a.kind {
        ArithKind::Num(n) => Some(*n),
        ArithKind::Len => None,
        ArithKind::Load { offset, .. } => leading_number(offset),
        ArithKind::Neg(inner) => leading_number(inner),
        ArithKind::Chain { first, .. } => leading_number(first),
    }
}

/// The largest value `e` can have (saturating; `u32::MAX` when unknown). Scratch slots count
/// as unknown.
fn upper_bound(e: &Expr) -> u32 {
    match e {
        Expr::Const(c) => *c,
        Expr::Load { size: Size::Byte, .. } => 0xff,
        Expr::Load { size: Size::Half, .. } => 0xffff,
        Expr::Load { size: Size::Word, .. } | Expr::WireLen | Expr::Scratch(_) | Expr::Neg(_) => {
            u32::MAX
        }
        Expr::Binary { op, lhs, rhs } => {
            let (a, b) = (upper_bound(lhs), upper_bound(rhs));
            match op {
                BinOp::Add => a.saturating_add(b),
                BinOp::Mul => a.saturating_mul(b),
                BinOp::And => a.min(b),
                BinOp::Div | BinOp::Shr => a,
                BinOp::Mod => a.min(b.saturating_sub(1)),
                BinOp::Or | BinOp::Xor => {
                    let m = a.max(b);
                    m.checked_next_power_of_two().map_or(u32::MAX, |p| p.saturating_sub(1).max(m))
                }
                BinOp::Shl => match **rhs {
                    Expr::Const(s) if s < 32 && a.leading_zeros() >= s => a << s,
                    _ => u32::MAX,
                },
                BinOp::Sub => u32::MAX,
            }
        }
    }
}

/// A load of `size` bytes at `x + k` where `x` is computed in wrapping 32-bit arithmetic
/// and `k` is added without wrapping, as classic BPF's indexed loads do: when `x + k`
/// passes 2^32 the load is out of bounds, not a wrapped-around offset.
fn displaced_load(x: Expr, k: u32, size: Size) -> Expr {
    Expr::load(displaced_offset(x, k), size)
}

/// The offset `x + k` (see [`displaced_load`]): the sum when it cannot pass 2^32, else the
/// sum with every bit set when the addition carries out, an offset no capture reaches.
pub(crate) fn displaced_offset(x: Expr, k: u32) -> Expr {
    if let Expr::Const(c) = x {
        return Expr::Const(c.saturating_add(k));
    }
    if k == 0 || upper_bound(&x).checked_add(k).is_some() {
        return x.plus(k);
    }
    // Carry out of bit 31: (x & k) | ((x | k) & !(x + k)), its top bit.
    let sum = x.clone().plus(k);
    let carry = Expr::binary(
        BinOp::Shr,
        Expr::binary(
            BinOp::Or,
            x.clone().and_mask(k),
            Expr::binary(
                BinOp::And,
                Expr::binary(BinOp::Or, x, Expr::Const(k)),
                Expr::binary(BinOp::Xor, sum.clone(), Expr::Const(u32::MAX)),
            ),
        ),
        Expr::Const(31),
    );
    // -carry is 0 or all ones.
    Expr::binary(BinOp::Or, sum, Expr::Neg(Box::new(carry)))
}

/// `x + var` for an offset's variable part, if any (the index first, as libpcap adds).
fn with_variable(x: Expr, base: Offset) -> Expr {
    match base.variable {
        Some(slot) => Expr::binary(BinOp::Add, x, Expr::Scratch(slot)),
        None => x,
    }
}

fn cmp_op(op: RelOp) -> CmpOp {
    match op {
        RelOp::Gt => CmpOp::Gt,
        RelOp::Ge => CmpOp::Ge,
        RelOp::Eq => CmpOp::Eq,
        RelOp::Le => CmpOp::Le,
        RelOp::Lt => CmpOp::Lt,
        RelOp::Ne => CmpOp::Ne,
    }
}

fn bin_op(op: ast::BinOp) -> BinOp {
    match op {
        ast::BinOp::Add => BinOp::Add,
        ast::BinOp::Sub => BinOp::Sub,
        ast::BinOp::Mul => BinOp::Mul,
        ast::BinOp::Div => BinOp::Div,
        ast::BinOp::Mod => BinOp::Mod,
        ast::BinOp::And => BinOp::And,
        ast::BinOp::Or => BinOp::Or,
        ast::BinOp::Xor => BinOp::Xor,
        ast::BinOp::Shl => BinOp::Shl,
        ast::BinOp::Shr => BinOp::Shr,
    }
}

/// An arithmetic chain being lowered, left to right: the value so far and the run of
/// operators of one family ([`depth::family`]) after it.
///
/// A run of up to [`depth::BALANCE_OVER`] operators becomes the left-leaning tree the chain
/// reads as (`((a + b) - c) + d`), exactly what libpcap computes in that order. A longer run
/// becomes a balanced tree, so that `len + 1 + 1 ...` with 100,000 terms is 18 levels deep,
/// not 100,000: wrapping `+` and `*`, `&`, `|`, `^` are associative and commutative, and a
/// run of `+` and `-` is the sum of its added terms minus the sum of its subtracted ones.
/// Evaluating an expression has no effect but its value or an abort, and every abort rejects,
/// so the order its terms are computed in changes nothing.
struct Spine {
    value: Expr,
    family: Option<u8>,
    /// The run: its operators and right operands (the value so far is its first term).
    run: Vec<(ast::BinOp, Expr)>,
}

impl Spine {
    fn new(value: Expr) -> Spine {
        Spine { value, family: None, run: Vec::new() }
    }

    fn push(&mut self, op: ast::BinOp, rhs: Expr) {
        let fam = depth::family(op);
        if fam.is_none() || fam != self.family {
            self.close_run();
        }
        match fam {
            Some(_) => {
                self.family = fam;
                self.run.push((op, rhs));
            }
            None => {
                let lhs = std::mem::replace(&mut self.value, Expr::Const(0));
                self.value = Expr::binary(bin_op(op), lhs, rhs);
            }
        }
    }

    fn close_run(&mut self) {
        let run = std::mem::take(&mut self.run);
        self.family = None;
        let first = std::mem::replace(&mut self.value, Expr::Const(0));
        if run.len() <= depth::BALANCE_OVER {
            self.value =
                run.into_iter().fold(first, |acc, (op, rhs)| Expr::binary(bin_op(op), acc, rhs));
            return;
        }
        let op = run[0].0;
        let mut added = vec![first];
        let mut subtracted = Vec::new();
        for (o, rhs) in run {
            if o == ast::BinOp::Sub {
                subtracted.push(rhs);
            } else {
                added.push(rhs);
            }
        }
        let op = if op == ast::BinOp::Sub { BinOp::Add } else { bin_op(op) };
        let sum = balanced(op, added);
        self.value = if subtracted.is_empty() {
            sum
        } else {
            Expr::binary(BinOp::Sub, sum, balanced(BinOp::Add, subtracted))
        };
    }

    fn finish(mut self) -> Expr {
        self.close_run();
        self.value
    }
}

/// `t0 op t1 op ...` as a balanced tree (`terms` is not empty), built bottom up.
fn balanced(op: BinOp, terms: Vec<Expr>) -> Expr {
    let mut level = terms;
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(2));
        let mut it = level.into_iter();
        while let Some(a) = it.next() {
            next.push(match it.next() {
                Some(b) => Expr::binary(op, a, b),
                None => a,
            });
        }
        level = next;
    }
    level.pop().unwrap_or(Expr::Const(0))
}

impl Lowerer<'_> {
    /// `lhs relop rhs`: both sides' protocol checks, then the unsigned comparison.
    pub(crate) fn relation(&mut self, r: &Relation, _span: Span) -> Result<Pred, CompileError> {
        let lhs = self.operand(&r.lhs)?;
        let rhs = self.operand(&r.rhs)?;
        // One list at its final size (`junction`: `Pred::and`'s tree, issue 13).
        let mut parts = Vec::with_capacity(lhs.checks.len() + rhs.checks.len() + 1);
        parts.extend(lhs.checks);
        parts.extend(rhs.checks);
        parts.push(Pred::cmp(cmp_op(r.op), lhs.value, rhs.value));
        Ok(junction(parts, true))
    }

    fn operand(&mut self, a: &Arith) -> Result<Operand, CompileError> {
        Ok(match &a.kind {
            ArithKind::Num(n) => Operand::plain(Expr::Const(*n)),
            ArithKind::Len => Operand::plain(Expr::WireLen),
            ArithKind::Neg(inner) => {
                let inner = self.operand(inner)?;
                Operand { value: Expr::Neg(Box::new(inner.value)), checks: inner.checks }
            }
            ArithKind::Chain { first, rest } => {
                // ((x0 op1 x1) op2 x2) ...: only x0's checks survive, as in libpcap, where
                // each operator drops its right operand's.
                let left = self.operand(first)?;
                let mut spine = Spine::new(left.value);
                for (op, rhs) in rest {
                    let right = self.operand(rhs)?;
                    let leading = leading_number(rhs);
                    let message = match op {
                        ast::BinOp::Div if leading == Some(0) => Some("division by zero"),
                        ast::BinOp::Mod if leading == Some(0) => Some("modulus by zero"),
                        ast::BinOp::Shl | ast::BinOp::Shr if leading.is_some_and(|n| n > 31) => {
                            Some("shift by more than 31 bits")
                        }
                        _ => None,
                    };
                    if let Some(message) = message {
                        return Err(CompileError::new(rhs.span, message));
                    }
                    spine.push(*op, right.value);
                }
                Operand { value: spine.finish(), checks: left.checks }
            }
            ArithKind::Load { proto, offset, size } => {
                let index = self.operand(offset)?;
                let size = Size::from_bytes(u32::from(*size))
                    .ok_or_else(|| CompileError::new(a.span, "data size must be 1, 2, or 4"))?;
                self.accessor(*proto, index, size, a.span)?
            }
        })
    }

    /// `proto[index:size]`: the load and the checks that go before it.
    fn accessor(
        &mut self,
        proto: Proto,
        index: Operand,
        size: Size,
        span: Span,
    ) -> Result<Operand, CompileError> {
        let Operand { value: idx, checks: mut inner } = index;
        let net = self.off_linkpl.plus(self.off_nl);
        Ok(match proto {
            Proto::Link => {
                let base = self.off_linkhdr;
                Operand {
                    value: displaced_load(with_variable(idx, base), base.constant, size),
                    checks: inner,
                }
            }
            Proto::Ip
            | Proto::Arp
            | Proto::Rarp
            | Proto::Atalk
            | Proto::Decnet
            | Proto::Sca
            | Proto::Lat
            | Proto::Moprc
            | Proto::Mopdl
            | Proto::Ip6 => {
                let value = displaced_load(with_variable(idx, net), net.constant, size);
                let ethertype = match proto {
                    Proto::Ip => ETHERTYPE_IP,
                    Proto::Arp => ETHERTYPE_ARP,
                    Proto::Rarp => ETHERTYPE_REVARP,
                    Proto::Atalk => ETHERTYPE_ATALK,
                    Proto::Decnet => ETHERTYPE_DN,
                    Proto::Sca => ETHERTYPE_SCA,
                    Proto::Lat => ETHERTYPE_LAT,
                    Proto::Moprc => ETHERTYPE_MOPRC,
                    Proto::Mopdl => ETHERTYPE_MOPDL,
                    _ => ETHERTYPE_IPV6,
                };
                inner.push(self.link_proto(ethertype, span)?);
                Operand { value, checks: inner }
            }
            Proto::Tcp
            | Proto::Udp
            | Proto::Sctp
            | Proto::Icmp
            | Proto::Igmp
            | Proto::Igrp
            | Proto::Pim
            | Proto::Vrrp
            | Proto::Carp => {
                // Relative to the transport header after a variable-length IPv4 header.
                let ihl = Expr::binary(
                    BinOp::Shl,
                    Expr::load(net.expr(0), Size::Byte).and_mask(0x0f),
                    Expr::Const(2),
                );
                let header_len = with_variable(ihl, net);
                let x = Expr::binary(BinOp::Add, idx, header_len);
                let value = displaced_load(x, net.constant, size);
                // IPv4 first, then the index's own checks, then the protocol (which
                // libpcap spells as for the bare keyword, IPv6 included) and no later
                // fragment.
                let mut checks = vec![self.link_proto(ETHERTYPE_IP, span)?];
                checks.append(&mut inner);
                checks.push(self.proto_abbrev(proto, span)?);
                checks.push(self.cmp_field(Layer::Net, 6, Size::Half, 0x1fff, 0));
                Operand { value, checks }
            }
            Proto::Icmp6 => {
                // Right after a fixed IPv6 header whose next header is ICMPv6.
                let value =
                    displaced_load(with_variable(idx, net), net.constant.wrapping_add(40), size);
                inner.push(self.link_proto(ETHERTYPE_IPV6, span)?);
                inner.push(self.cmp_field(Layer::Net, 6, Size::Byte, u32::MAX, IPPROTO_ICMPV6));
                Operand { value, checks: inner }
            }
            // From the start of the packet, when it starts with a radio header.
            Proto::Radio
                if matches!(
                    self.link,
                    super::LinkType::Radiotap | super::LinkType::Avs | super::LinkType::Prism
                ) =>
            {
                let base = super::Offset::fixed(0);
                Operand { value: displaced_load(with_variable(idx, base), 0, size), checks: inner }
            }
            Proto::Radio => {
                return Err(CompileError::new(span, "radio information not present in capture"))
            }
            _ => return Err(CompileError::new(span, "unsupported index operation")),
        })
    }

    /// `less N`: the wire length is at most N.
    pub(crate) fn less(&mut self, n: u32) -> Pred {
        Pred::cmp(CmpOp::Le, Expr::WireLen, Expr::Const(n))
    }

    /// `greater N`: the wire length is at least N.
    pub(crate) fn greater(&mut self, n: u32) -> Pred {
        Pred::cmp(CmpOp::Ge, Expr::WireLen, Expr::Const(n))
    }

    /// `byte OFF OP VAL`: the byte at OFF from the link header, compared (`=`, `<`, `>`) or
    /// tested (`&`, `|`: the result is nonzero).
    ///
    /// For `&` and `|` libpcap emits the operation without loading the byte (it tests
    /// whatever the accumulator last held), which no filter can mean; weir tests the byte,
    /// as the other operators do. This is a documented difference from libpcap.
    pub(crate) fn byte(&mut self, offset: u32, op: ByteOp, value: u32) -> Pred {
        let base = self.off_linkhdr;
        // The offset joins the header's constant part at compile time (wrapping), and a
        // variable part at run time (not wrapping).
        let byte = match base.variable {
            None => Expr::load_at(base.constant.wrapping_add(offset), Size::Byte),
            Some(slot) => {
                displaced_load(Expr::Scratch(slot), base.constant.wrapping_add(offset), Size::Byte)
            }
        };
        let value = Expr::Const(value);
        match op {
            ByteOp::Eq => Pred::cmp(CmpOp::Eq, byte, value),
            ByteOp::Lt => Pred::cmp(CmpOp::Lt, byte, value),
            ByteOp::Gt => Pred::cmp(CmpOp::Gt, byte, value),
            ByteOp::And => Pred::cmp(CmpOp::Set, byte, value),
            ByteOp::Or => {
                Pred::cmp(CmpOp::Ne, Expr::binary(BinOp::Or, byte, value), Expr::Const(0))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_filter::Evaluator;

    /// Loading a byte at `x + k` (with `x` as the wire length, a value the lowering cannot
    /// bound) aborts exactly when `x + k`, without wrapping, is past the captured bytes.
    #[test]
    fn displaced_offsets_never_wrap_around() {
        let packet = [7u8; 64];
        let ks = [0u32, 1, 14, 40, 0x7fff_ffff, 0xffff_fff0, u32::MAX - 1, u32::MAX];
        let xs = [0u32, 1, 2, 13, 63, 64, 100, 0x8000_0000, u32::MAX - 13, u32::MAX];
        for &k in &ks {
            for &x in &xs {
                let load = displaced_load(Expr::WireLen, k, Size::Byte);
                let got = Evaluator::new(&packet, x).expr(&load).ok();
                let end = u64::from(x) + u64::from(k) + 1;
                let want = (end <= packet.len() as u64).then_some(7);
                assert_eq!(got, want, "x {x:#x} + k {k:#x}");
            }
        }
    }

    #[test]
    fn the_leading_number_is_the_first_one_written() {
        let n = |v| Arith { kind: ArithKind::Num(v), span: Span::default() };
        let load = Arith {
            kind: ArithKind::Load { proto: Proto::Ip, offset: Box::new(n(0)), size: 1 },
            span: Span::default(),
        };
        let sum = Arith {
            kind: ArithKind::Chain { first: Box::new(load), rest: vec![(ast::BinOp::Sub, n(5))] },
            span: Span::default(),
        };
        assert_eq!(leading_number(&sum), Some(0));
        assert_eq!(leading_number(&Arith { kind: ArithKind::Len, span: Span::default() }), None);
    }
}
