//! A readable, stable text form of the IR, for `--explain` output and test failures.
//!
//! The form reads like pflang's own arithmetic: `pkt[12:2] == 0x800 and pkt[23:1] == 6`.
//! Loads are `pkt[offset:size]` (absolute offsets; pflang's `ip[9]` is `pkt[23:1]` on
//! Ethernet), `len` is the wire length, `M[k]` a scratch slot (classic BPF's name), and
//! `guard(n)` the hoisted captured-length check. Numbers below 10 print in decimal, larger
//! ones in hex, except inside `pkt[...]` where offsets are decimal (as in tcpdump's
//! listings: `ldh [12]`, `jeq #0x800`). Every binary operation inside another is
//! parenthesized and so is every nested `and`/`or`, so the text needs no precedence rules.
//!
//! `{:#}` prints the same tree indented one part per line, for filters too long for a line.
//! Set tests print every range: the text is exact, never elided.

use std::fmt::{self, Display, Formatter, Write};

use crate::ir::{BinOp, CmpOp, Expr, Filter, Pred, Size, ValueSet, DEFAULT_ACCEPT};

struct Num(u32);

impl Display for Num {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.0 < 10 {
            write!(f, "{}", self.0)
        } else {
            write!(f, "{:#x}", self.0)
        }
    }
}

impl Display for Size {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.bytes())
    }
}

impl Display for BinOp {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::And => "&",
            BinOp::Or => "|",
            BinOp::Xor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
        })
    }
}

impl Display for CmpOp {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            // `a & b != 0`: printed specially by `Pred`, this is the operator alone
            CmpOp::Set => "&",
        })
    }
}

/// An expression; `offset` prints numbers in decimal (inside `pkt[...]`, as tcpdump prints
/// `ldh [12]` but `jeq #0x800`).
fn write_expr(e: &Expr, f: &mut Formatter<'_>, offset: bool) -> fmt::Result {
    match e {
        Expr::Const(c) if offset => write!(f, "{c}"),
        Expr::Const(c) => write!(f, "{}", Num(*c)),
        Expr::WireLen => f.write_str("len"),
        Expr::Load { offset: off, size } => {
            f.write_str("pkt[")?;
            write_expr(off, f, true)?;
            write!(f, ":{size}]")
        }
        Expr::Scratch(k) => write!(f, "M[{k}]"),
        Expr::Binary { op, lhs, rhs } => {
            write_operand(lhs, f, offset)?;
            write!(f, " {op} ")?;
            write_operand(rhs, f, offset)
        }
        Expr::Neg(x) => {
            f.write_char('-')?;
            write_operand(x, f, offset)
        }
    }
}

/// An operand of a binary operation: parenthesized when it is itself one.
fn write_operand(e: &Expr, f: &mut Formatter<'_>, offset: bool) -> fmt::Result {
    if matches!(e, Expr::Binary { .. }) {
        f.write_char('(')?;
        write_expr(e, f, offset)?;
        f.write_char(')')
    } else {
        write_expr(e, f, offset)
    }
}

/// An operand as a displayable value (for `write!`).
struct Operand<'a>(&'a Expr);

impl Display for Operand<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_operand(self.0, f, false)
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_expr(self, f, false)
    }
}

impl Display for ValueSet {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_char('{')?;
        for (i, &(lo, hi)) in self.ranges().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            if lo == hi {
                write!(f, "{}", Num(lo))?;
            } else {
                write!(f, "{}-{}", Num(lo), Num(hi))?;
            }
        }
        f.write_char('}')
    }
}

impl Display for Pred {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            tree(self, f, 0)
        } else {
            line(self, f, false)
        }
    }
}

/// One-line form; `nested` parenthesizes junctions inside others.
fn line(p: &Pred, f: &mut Formatter<'_>, nested: bool) -> fmt::Result {
    match p {
        Pred::And(parts) | Pred::Or(parts) if !parts.is_empty() => {
            let word = if matches!(p, Pred::And(_)) { " and " } else { " or " };
            if nested {
                f.write_char('(')?;
            }
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    f.write_str(word)?;
                }
                line(part, f, true)?;
            }
            if nested {
                f.write_char(')')?;
            }
            Ok(())
        }
        Pred::Not(q) => {
            f.write_str("not ")?;
            line(q, f, true)
        }
        Pred::Try(q) => {
            f.write_str("try(")?;
            line(q, f, false)?;
            f.write_char(')')
        }
        leaf => write_leaf(leaf, f),
    }
}

fn write_leaf(p: &Pred, f: &mut Formatter<'_>) -> fmt::Result {
    match p {
        Pred::Const(b) => write!(f, "{b}"),
        Pred::Cmp { op: CmpOp::Set, lhs, rhs } => {
            write!(f, "{} & {} != 0", Operand(lhs), Operand(rhs))
        }
        Pred::Cmp { op, lhs, rhs } => write!(f, "{lhs} {op} {rhs}"),
        Pred::In { value, set } => write!(f, "{value} in {set}"),
        Pred::Store { slot, value } => write!(f, "M[{slot}] := {value}"),
        Pred::Guard(n) => write!(f, "guard({n})"),
        Pred::Try(q) => write!(f, "try({q})"),
        Pred::Pairs(p) => {
            let (a, b) = (p.first.with(0), p.second.with(0));
            write!(
                f,
                "pairs({} pairs of ({a}) and ({b}), 0 standing for each value)",
                p.table.pairs().len()
            )
        }
        Pred::Chain(c) => write!(
            f,
            "chain{}({}, from {}: {}, at {})",
            if c.ipv6 { "6" } else { "4" },
            Num(c.target),
            c.base,
            c.next,
            c.offset
        ),
        // empty junctions: their constant meaning
        Pred::And(_) => f.write_str("true"),
        Pred::Or(_) => f.write_str("false"),
        Pred::Not(q) => write!(f, "not {q}"),
    }
}

/// Indented form: each part of a junction on its own line under `and`/`or`.
fn tree(p: &Pred, f: &mut Formatter<'_>, depth: usize) -> fmt::Result {
    let indent = depth * 2;
    match p {
        Pred::And(parts) | Pred::Or(parts) if !parts.is_empty() => {
            let word = if matches!(p, Pred::And(_)) { "and" } else { "or" };
            writeln!(f, "{:indent$}{word}", "")?;
            for part in parts {
                tree(part, f, depth + 1)?;
            }
            Ok(())
        }
        Pred::Not(q) => {
            writeln!(f, "{:indent$}not", "")?;
            tree(q, f, depth + 1)
        }
        leaf => {
            write!(f, "{:indent$}", "")?;
            write_leaf(leaf, f)?;
            f.write_char('\n')
        }
    }
}

impl Display for Filter {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.accept != DEFAULT_ACCEPT {
            if f.alternate() {
                writeln!(f, "accept {}", self.accept)?;
            } else {
                write!(f, "accept {} if ", self.accept)?;
            }
        }
        if f.alternate() {
            write!(f, "{:#}", self.pred)
        } else {
            write!(f, "{}", self.pred)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::{BinOp, CmpOp, Expr, Filter, Pred, Size, ValueSet};

    #[test]
    fn one_line_form() {
        let ihl =
            Expr::binary(BinOp::Shl, Expr::load_at(14, Size::Byte).and_mask(0xf), Expr::Const(2));
        let sport = Expr::load(Expr::binary(BinOp::Add, ihl, Expr::Const(14)), Size::Half);
        let p = Pred::and([
            Pred::Guard(24),
            Pred::eq(Expr::load_at(12, Size::Half), 0x800),
            Pred::or([
                Pred::eq(sport, 80),
                Pred::not(Pred::cmp(
                    CmpOp::Set,
                    Expr::load_at(20, Size::Half),
                    Expr::Const(0x1fff),
                )),
                Pred::In { value: Expr::WireLen, set: ValueSet::from_ranges([(1, 1), (20, 30)]) },
            ]),
            Pred::Store { slot: 2, value: Expr::Scratch(1) },
        ]);
        assert_eq!(
            p.to_string(),
            "guard(24) and pkt[12:2] == 0x800 and (pkt[((pkt[14:1] & 15) << 2) + 14:2] == 0x50 \
             or not pkt[20:2] & 0x1fff != 0 or len in {1, 0x14-0x1e}) and M[2] := M[1]"
        );
        let f = Filter { pred: Pred::Const(false), accept: 7 };
        assert_eq!(f.to_string(), "accept 7 if false");
    }

    #[test]
    fn tree_form() {
        let p = Pred::or([
            Pred::eq(Expr::load_at(12, Size::Half), 0x800),
            Pred::and([Pred::Const(true), Pred::eq(Expr::WireLen, 3)]),
        ]);
        assert_eq!(format!("{p:#}"), "or\n  pkt[12:2] == 0x800\n  and\n    true\n    len == 3\n");
    }
}
