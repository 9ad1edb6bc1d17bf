//! Random pflang (tcpdump filter) expressions for the differential tests of weir's pflang
//! compiler, and a shrinker that reduces a failing expression to a minimal one.
//!
//! The tests compile each generated expression with libpcap (the oracle of record) and with
//! weir, and compare acceptance and per-packet verdicts over [`crate::corpus`]. For that to
//! find bugs the expressions must (a) cover every primitive of the language that applies to
//! Ethernet, Linux cooked, raw IP and BSD loopback captures, with every qualifier
//! combination, (b) sit on the boundaries where compilers go wrong (0, 255, 65535, 2^31,
//! 2^32 - 1, offsets at the end of a packet, division by zero, shifts by 31 and 32), and
//! (c) name the addresses, ports, VLAN ids and labels the packet corpus actually uses, so
//! that filters match some packets and miss others.
//!
//! The tree here is the generator's own, not the compiler's: it keeps the *spelling*
//! (`and` or `&&`, hex or decimal, inherited qualifiers, optional parentheses) so that one
//! tree renders to one text, and it is shaped for shrinking (every node knows smaller
//! variants of itself). Its meaning is whatever libpcap makes of the rendered text; the
//! tree never claims to know it, which keeps the generator free to write odd but valid
//! syntax.

mod generate;
mod near_miss;
mod shrink;
mod values;

pub use generate::Generator;
pub use near_miss::near_miss;
pub use shrink::{shrink, shrink_cut, Shrunk, ShrunkCut};

use std::fmt::{self, Display, Formatter};

/// `and` / `or`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BoolOp {
    And,
    Or,
}

/// Word (`and`, `or`, `not`) or symbol (`&&`, `||`, `!`) spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Spelling {
    Word,
    Symbol,
}

/// A boolean filter expression as the generator built it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// `lhs op rhs`; a right operand that is itself a `Bool` is parenthesised, so the tree
    /// reads the way libpcap's left-associative grammar reads the text.
    Bool { op: BoolOp, spelling: Spelling, lhs: Box<Node>, rhs: Box<Node> },
    /// `not inner` / `!inner`.
    Not { spelling: Spelling, inner: Box<Node> },
    /// `( inner )`.
    Group(Box<Node>),
    /// A qualified primitive: `ip src host 10.0.0.1`.
    Prim(Prim),
    /// A primitive followed by ids that inherit its qualifiers: `host a and b or not c`, or
    /// with `grouped`, `port (80 or 443)`.
    Inherit { head: Prim, rest: Vec<InheritedId>, grouped: bool },
    /// Any other primitive, as text: `vlan 100`, `tcp`, `less 60`, `llc ui`.
    Leaf(Leaf),
    /// `lhs op rhs` over arithmetic.
    Relation { op: RelOp, lhs: Arith, rhs: Arith },
}

/// Qualifiers and an id. At least one of `dir` and `addr` is present whenever `id` is
/// written, since `ip 10.0.0.1` is not a primitive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prim {
    /// Coverage class (`host`, `ether host`, `net`, `port`, ...).
    pub kind: &'static str,
    pub proto: Option<&'static str>,
    pub dir: Option<&'static str>,
    pub addr: Option<&'static str>,
    pub id: String,
}

/// An id after `and`/`or` that takes the previous primitive's qualifiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InheritedId {
    pub op: BoolOp,
    pub spelling: Spelling,
    pub negated: bool,
    pub id: String,
}

/// A primitive kept as text, with the shorter form it may shrink to (`vlan 100` ->
/// `vlan`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    pub kind: &'static str,
    pub text: String,
    pub shorter: Option<String>,
}

/// Comparison operators; `Eq2` is the `==` spelling of `=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RelOp {
    Gt,
    Ge,
    Eq,
    Eq2,
    Le,
    Lt,
    Ne,
}

/// Arithmetic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

/// How a number is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NumStyle {
    Decimal,
    Hex,
    Octal,
}

/// An arithmetic expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arith {
    Num(u32, NumStyle),
    /// A named constant (`tcpflags`, `tcp-syn`, `icmp-echo`, ...) and its value.
    Named(&'static str, u32),
    /// `len` (or `length` when the flag is set).
    Len(bool),
    /// `proto[offset]` or `proto[offset:size]`.
    Load {
        proto: &'static str,
        offset: Box<Arith>,
        size: Option<u8>,
    },
    Neg(Box<Arith>),
    Bin {
        op: ArithOp,
        lhs: Box<Arith>,
        rhs: Box<Arith>,
    },
    Group(Box<Arith>),
}

impl BoolOp {
    fn text(self, spelling: Spelling) -> &'static str {
        match (self, spelling) {
            (BoolOp::And, Spelling::Word) => "and",
            (BoolOp::And, Spelling::Symbol) => "&&",
            (BoolOp::Or, Spelling::Word) => "or",
            (BoolOp::Or, Spelling::Symbol) => "||",
        }
    }
}

impl RelOp {
    pub fn text(self) -> &'static str {
        match self {
            RelOp::Gt => ">",
            RelOp::Ge => ">=",
            RelOp::Eq => "=",
            RelOp::Eq2 => "==",
            RelOp::Le => "<=",
            RelOp::Lt => "<",
            RelOp::Ne => "!=",
        }
    }
}

impl ArithOp {
    pub fn text(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
            ArithOp::Mod => "%",
            ArithOp::And => "&",
            ArithOp::Or => "|",
            ArithOp::Xor => "^",
            ArithOp::Shl => "<<",
            ArithOp::Shr => ">>",
        }
    }
}

impl Display for Prim {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        self.qualifiers(f)?;
        write!(f, " {}", self.id)
    }
}

impl Prim {
    fn qualifiers(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let words: Vec<&str> = [self.proto, self.dir, self.addr].into_iter().flatten().collect();
        f.write_str(&words.join(" "))
    }
}

fn not_text(spelling: Spelling) -> &'static str {
    match spelling {
        Spelling::Word => "not ",
        Spelling::Symbol => "!",
    }
}

impl Display for Node {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Node::Bool { op, spelling, lhs, rhs } => {
                write!(f, "{lhs} {} ", op.text(*spelling))?;
                if matches!(**rhs, Node::Bool { .. }) {
                    write!(f, "({rhs})")
                } else {
                    write!(f, "{rhs}")
                }
            }
            Node::Not { spelling, inner } => {
                f.write_str(not_text(*spelling))?;
                // `not` binds tighter than `and`/`or`; an inheriting list after `not` would
                // still parse, but as something else, so keep it whole.
                if matches!(**inner, Node::Bool { .. } | Node::Inherit { grouped: false, .. }) {
                    write!(f, "({inner})")
                } else {
                    write!(f, "{inner}")
                }
            }
            Node::Group(inner) => write!(f, "({inner})"),
            Node::Prim(p) => write!(f, "{p}"),
            Node::Inherit { head, rest, grouped } => {
                if *grouped {
                    head.qualifiers(f)?;
                    write!(f, " ({}", head.id)?;
                } else {
                    write!(f, "{head}")?;
                }
                for r in rest {
                    let not = if r.negated { not_text(r.spelling) } else { "" };
                    write!(f, " {} {not}{}", r.op.text(r.spelling), r.id)?;
                }
                if *grouped {
                    f.write_str(")")?;
                }
                Ok(())
            }
            Node::Leaf(l) => f.write_str(&l.text),
            Node::Relation { op, lhs, rhs } => write!(f, "{lhs} {} {rhs}", op.text()),
        }
    }
}

impl Display for Arith {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Arith::Num(n, NumStyle::Decimal) => write!(f, "{n}"),
            Arith::Num(n, NumStyle::Hex) => write!(f, "0x{n:x}"),
            Arith::Num(0, NumStyle::Octal) => f.write_str("0"),
            Arith::Num(n, NumStyle::Octal) => write!(f, "0{n:o}"),
            Arith::Named(name, _) => f.write_str(name),
            Arith::Len(false) => f.write_str("len"),
            Arith::Len(true) => f.write_str("length"),
            Arith::Load { proto, offset, size: None } => write!(f, "{proto}[{offset}]"),
            Arith::Load { proto, offset, size: Some(s) } => write!(f, "{proto}[{offset}:{s}]"),
            // No space: `- 1` and `-1` mean the same, and `-` never glues to a name here.
            Arith::Neg(a) => write!(f, "-{a}"),
            // Spaces around every operator: `len-1` would lex as one name.
            Arith::Bin { op, lhs, rhs } => write!(f, "{lhs} {} {rhs}", op.text()),
            Arith::Group(a) => write!(f, "({a})"),
        }
    }
}

impl Node {
    /// The expression text handed to the compilers.
    pub fn render(&self) -> String {
        self.to_string()
    }

    /// Coverage classes of every primitive in the tree, in order, with repeats.
    pub fn kinds(&self, out: &mut Vec<&'static str>) {
        match self {
            Node::Bool { lhs, rhs, .. } => {
                lhs.kinds(out);
                rhs.kinds(out);
            }
            Node::Not { inner, .. } | Node::Group(inner) => inner.kinds(out),
            Node::Prim(p) => out.push(p.kind),
            Node::Inherit { head, .. } => {
                out.push(head.kind);
                out.push("inherited qualifiers");
            }
            Node::Leaf(l) => out.push(l.kind),
            Node::Relation { lhs, rhs, .. } => {
                out.push("relation");
                lhs.kinds(out);
                rhs.kinds(out);
            }
        }
    }

    /// A measure that every shrinking step strictly decreases (so shrinking ends).
    pub fn cost(&self) -> u64 {
        match self {
            Node::Bool { lhs, rhs, .. } => 20 + lhs.cost() + rhs.cost(),
            Node::Not { inner, .. } => 10 + inner.cost(),
            Node::Group(inner) => 5 + inner.cost(),
            Node::Prim(p) => p.cost(),
            Node::Inherit { head, rest, grouped } => {
                head.cost()
                    + u64::from(*grouped)
                    + rest.iter().map(|r| 20 + id_cost(&r.id) + u64::from(r.negated)).sum::<u64>()
            }
            Node::Leaf(l) => 10 + l.text.len() as u64,
            Node::Relation { lhs, rhs, .. } => 10 + lhs.cost() + rhs.cost(),
        }
    }
}

impl Prim {
    fn cost(&self) -> u64 {
        let quals = [self.proto, self.dir, self.addr].iter().flatten().count() as u64;
        10 + 3 * quals + id_cost(&self.id)
    }
}

fn id_cost(id: &str) -> u64 {
    id.len() as u64
}

impl Arith {
    /// See [`Node::cost`].
    pub fn cost(&self) -> u64 {
        match self {
            Arith::Num(n, style) => {
                2 + u64::from(32 - n.leading_zeros()) + u64::from(*style != NumStyle::Decimal)
            }
            Arith::Named(..) => 3,
            Arith::Len(long) => 2 + u64::from(*long),
            Arith::Load { offset, size, .. } => 10 + offset.cost() + u64::from(size.is_some()),
            Arith::Neg(a) => 5 + a.cost(),
            Arith::Bin { lhs, rhs, .. } => 8 + lhs.cost() + rhs.cost(),
            Arith::Group(a) => 1 + a.cost(),
        }
    }

    fn kinds(&self, out: &mut Vec<&'static str>) {
        match self {
            Arith::Num(..) | Arith::Len(_) => {}
            Arith::Named(..) => out.push("named constant"),
            Arith::Load { proto, offset, .. } => {
                out.push(values::load_kind(proto));
                offset.kinds(out);
            }
            Arith::Neg(a) => {
                out.push("unary -");
                a.kinds(out);
            }
            Arith::Group(a) => a.kinds(out),
            Arith::Bin { op, lhs, rhs } => {
                out.push(values::arith_kind(*op));
                lhs.kinds(out);
                rhs.kinds(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendering_keeps_tree_shape_and_spelling() {
        let host = |id: &str| Prim {
            kind: "host",
            proto: Some("ip"),
            dir: Some("src"),
            addr: Some("host"),
            id: id.to_string(),
        };
        let tree = Node::Bool {
            op: BoolOp::And,
            spelling: Spelling::Symbol,
            lhs: Box::new(Node::Prim(host("10.0.0.1"))),
            rhs: Box::new(Node::Bool {
                op: BoolOp::Or,
                spelling: Spelling::Word,
                lhs: Box::new(Node::Leaf(Leaf {
                    kind: "vlan",
                    text: "vlan 100".into(),
                    shorter: Some("vlan".into()),
                })),
                rhs: Box::new(Node::Not {
                    spelling: Spelling::Symbol,
                    inner: Box::new(Node::Relation {
                        op: RelOp::Ne,
                        lhs: Arith::Bin {
                            op: ArithOp::And,
                            lhs: Box::new(Arith::Load {
                                proto: "tcp",
                                offset: Box::new(Arith::Named("tcpflags", 13)),
                                size: None,
                            }),
                            rhs: Box::new(Arith::Num(0x12, NumStyle::Hex)),
                        },
                        rhs: Arith::Neg(Box::new(Arith::Num(8, NumStyle::Octal))),
                    }),
                }),
            }),
        };
        assert_eq!(
            tree.render(),
            "ip src host 10.0.0.1 && (vlan 100 or !tcp[tcpflags] & 0x12 != -010)"
        );
        let inherit = Node::Inherit {
            head: Prim {
                kind: "port",
                proto: None,
                dir: None,
                addr: Some("port"),
                id: "80".into(),
            },
            rest: vec![InheritedId {
                op: BoolOp::Or,
                spelling: Spelling::Word,
                negated: true,
                id: "443".into(),
            }],
            grouped: true,
        };
        assert_eq!(inherit.render(), "port (80 or not 443)");
        let mut kinds = Vec::new();
        tree.kinds(&mut kinds);
        assert_eq!(
            kinds,
            ["host", "vlan", "relation", "arith &", "tcp[]", "named constant", "unary -"]
        );
    }
}
