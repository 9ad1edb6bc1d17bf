//! Canonical printing of the tree: every qualifier written out (no inheritance), every
//! arithmetic operation and every `not`/`and`/`or` group in parentheses, names that would
//! lex as something else escaped with `\`. Parsing the printed form gives the same tree
//! (up to spans and the `inherited` flag), which the tests check.
//!
//! An `and`/`or` chain prints flat, `(a and b or c)`: equal precedence and left
//! association make that unambiguous, and it keeps long chains from nesting deeper than
//! the parser's limit.

use crate::ast::*;
use crate::lexer::{tokenize, Punct, Tok};
use std::fmt::{self, Display, Formatter};

pub(crate) fn punct_str(p: Punct) -> &'static str {
    match p {
        Punct::Plus => "+",
        Punct::Minus => "-",
        Punct::Star => "*",
        Punct::Slash => "/",
        Punct::Percent => "%",
        Punct::Colon => ":",
        Punct::LBracket => "[",
        Punct::RBracket => "]",
        Punct::LParen => "(",
        Punct::RParen => ")",
        Punct::Amp => "&",
        Punct::Pipe => "|",
        Punct::Caret => "^",
        Punct::Lt => "<",
        Punct::Gt => ">",
        Punct::Eq => "=",
        Punct::Ge => ">=",
        Punct::Le => "<=",
        Punct::Ne => "!=",
        Punct::Shl => "<<",
        Punct::Shr => ">>",
    }
}

impl Proto {
    /// The keyword that names this qualifier (`ether` for the link layer).
    pub fn keyword(self) -> &'static str {
        match self {
            Proto::Link => "ether",
            Proto::Ip => "ip",
            Proto::Arp => "arp",
            Proto::Rarp => "rarp",
            Proto::Sctp => "sctp",
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Icmp => "icmp",
            Proto::Igmp => "igmp",
            Proto::Igrp => "igrp",
            Proto::Pim => "pim",
            Proto::Vrrp => "vrrp",
            Proto::Carp => "carp",
            Proto::Radio => "radio",
            Proto::Ip6 => "ip6",
            Proto::Icmp6 => "icmp6",
            Proto::Ah => "ah",
            Proto::Esp => "esp",
            Proto::Atalk => "atalk",
            Proto::Aarp => "aarp",
            Proto::Decnet => "decnet",
            Proto::Lat => "lat",
            Proto::Sca => "sca",
            Proto::Moprc => "moprc",
            Proto::Mopdl => "mopdl",
            Proto::Iso => "iso",
            Proto::Esis => "esis",
            Proto::Isis => "isis",
            Proto::L1 => "l1",
            Proto::L2 => "l2",
            Proto::Iih => "iih",
            Proto::Lsp => "lsp",
            Proto::Snp => "snp",
            Proto::Csnp => "csnp",
            Proto::Psnp => "psnp",
            Proto::Clnp => "clnp",
            Proto::Stp => "stp",
            Proto::Ipx => "ipx",
            Proto::Netbeui => "netbeui",
        }
    }
}

impl Dir {
    pub fn keyword(self) -> &'static str {
        match self {
            Dir::Src => "src",
            Dir::Dst => "dst",
            Dir::SrcOrDst => "src or dst",
            Dir::SrcAndDst => "src and dst",
            Dir::Addr1 => "addr1",
            Dir::Addr2 => "addr2",
            Dir::Addr3 => "addr3",
            Dir::Addr4 => "addr4",
            Dir::Ra => "ra",
            Dir::Ta => "ta",
        }
    }
}

impl AddrKind {
    pub fn keyword(self) -> &'static str {
        match self {
            AddrKind::Host => "host",
            AddrKind::Net => "net",
            AddrKind::Port => "port",
            AddrKind::PortRange => "portrange",
            AddrKind::Gateway => "gateway",
            AddrKind::Proto => "proto",
            AddrKind::ProtoChain => "protochain",
        }
    }
}

impl RelOp {
    pub fn symbol(self) -> &'static str {
        match self {
            RelOp::Gt => ">",
            RelOp::Ge => ">=",
            RelOp::Eq => "=",
            RelOp::Le => "<=",
            RelOp::Lt => "<",
            RelOp::Ne => "!=",
        }
    }
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
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
        }
    }
}

/// A name as the scanner will read it back: raw if it lexes as that very name, else `\`.
struct NameText<'a>(&'a str);

impl Display for NameText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let raw_ok = matches!(tokenize(self.0).as_deref(),
            Ok([t, end]) if t.tok == Tok::Id(self.0.to_string()) && end.tok == Tok::End);
        if raw_ok {
            f.write_str(self.0)
        } else {
            write!(f, "\\{}", self.0)
        }
    }
}

impl Display for NameOrNum {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            NameOrNum::Name(s) => NameText(s).fmt(f),
            NameOrNum::Num(n) => write!(f, "{n}"),
        }
    }
}

impl Display for Id {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Name(s) => NameText(s).fmt(f),
            Id::Ipv4(a) => f.write_str(a),
            Id::Ipv4Cidr(a, len) => write!(f, "{a}/{len}"),
            Id::Ipv4Mask(a, m) => write!(f, "{a} mask {m}"),
            Id::Ipv6(a) => write!(f, "{a}"),
            Id::Ipv6Cidr(a, len) => write!(f, "{a}/{len}"),
            Id::Mac(m) => write!(
                f,
                "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                m[0], m[1], m[2], m[3], m[4], m[5]
            ),
            Id::Arcnet(a) => write!(f, "${a}"),
        }
    }
}

impl Display for Qualifiers {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let words = [
            self.proto.map(Proto::keyword),
            self.dir.map(Dir::keyword),
            self.addr.map(AddrKind::keyword),
        ];
        let mut first = true;
        for w in words.into_iter().flatten() {
            if !first {
                f.write_str(" ")?;
            }
            f.write_str(w)?;
            first = false;
        }
        Ok(())
    }
}

impl Display for Arith {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ArithKind::Num(n) => write!(f, "{n}"),
            ArithKind::Len => f.write_str("len"),
            ArithKind::Load { proto, offset, size } => {
                write!(f, "{}[{offset}:{size}]", proto.keyword())
            }
            ArithKind::Neg(a) => write!(f, "(-{a})"),
            // `((x0 op1 x1) op2 x2)`: every operator with its parentheses, as the parser
            // reads the chain back (in a loop: a long chain is no deeper to print).
            ArithKind::Chain { first, rest } => {
                for _ in rest {
                    f.write_str("(")?;
                }
                write!(f, "{first}")?;
                for (op, a) in rest {
                    write!(f, " {} {a})", op.symbol())?;
                }
                Ok(())
            }
        }
    }
}

fn opt_proto(f: &mut Formatter<'_>, p: &Option<Proto>) -> fmt::Result {
    match p {
        Some(p) => write!(f, "{} ", p.keyword()),
        None => Ok(()),
    }
}

impl Display for FieldValue {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            FieldValue::Eq(n) => write!(f, "{n}"),
            FieldValue::Rel(op, n) => write!(f, "{} {n}", op.symbol()),
            FieldValue::List(ns) => {
                f.write_str("(")?;
                for (i, n) in ns.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" or ")?;
                    }
                    write!(f, "{n}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ExprKind::Chain { first, rest } => {
                write!(f, "({first}")?;
                for (op, e) in rest {
                    let w = match op {
                        BoolOp::And => "and",
                        BoolOp::Or => "or",
                    };
                    write!(f, " {w} {e}")?;
                }
                f.write_str(")")
            }
            ExprKind::Not(e) => write!(f, "(not {e})"),
            ExprKind::Primitive(p) => write!(f, "{} {}", p.qual, p.id),
            ExprKind::Proto(p) => f.write_str(p.keyword()),
            ExprKind::Relation(r) => write!(f, "({} {} {})", r.lhs, r.op.symbol(), r.rhs),
            ExprKind::Broadcast(p) => {
                opt_proto(f, p)?;
                f.write_str("broadcast")
            }
            ExprKind::Multicast(p) => {
                opt_proto(f, p)?;
                f.write_str("multicast")
            }
            ExprKind::Less(n) => write!(f, "less {n}"),
            ExprKind::Greater(n) => write!(f, "greater {n}"),
            ExprKind::Byte { offset, op, value } => {
                let o = match op {
                    ByteOp::And => "&",
                    ByteOp::Or => "|",
                    ByteOp::Lt => "<",
                    ByteOp::Gt => ">",
                    ByteOp::Eq => "=",
                };
                write!(f, "byte {offset} {o} {value}")
            }
            ExprKind::Inbound => f.write_str("inbound"),
            ExprKind::Outbound => f.write_str("outbound"),
            ExprKind::IfIndex(n) => write!(f, "ifindex {n}"),
            ExprKind::Encap(e, n) => {
                let w = match e {
                    Encap::Vlan => "vlan",
                    Encap::Mpls => "mpls",
                    Encap::Pppoes => "pppoes",
                    Encap::Geneve => "geneve",
                    Encap::Vxlan => "vxlan",
                };
                match n {
                    Some(n) => write!(f, "{w} {n}"),
                    None => f.write_str(w),
                }
            }
            ExprKind::Pppoed => f.write_str("pppoed"),
            ExprKind::Pf(t) => match t {
                PfTest::Ifname(s) => write!(f, "ifname {}", NameText(s)),
                PfTest::Ruleset(s) => write!(f, "ruleset {}", NameText(s)),
                PfTest::Rulenum(n) => write!(f, "rulenum {n}"),
                PfTest::Subrulenum(n) => write!(f, "subrulenum {n}"),
                PfTest::Reason(r) => write!(f, "reason {r}"),
                PfTest::Action(s) => write!(f, "action {}", NameText(s)),
            },
            ExprKind::Wlan(p, t) => {
                opt_proto(f, p)?;
                match t {
                    WlanTest::Type { ty, subtype } => {
                        write!(f, "type {ty}")?;
                        match subtype {
                            Some(s) => write!(f, " subtype {s}"),
                            None => Ok(()),
                        }
                    }
                    WlanTest::Subtype(s) => write!(f, "subtype {}", NameText(s)),
                    WlanTest::Dir(d) => write!(f, "dir {d}"),
                }
            }
            ExprKind::Llc(k) => match k {
                None => f.write_str("llc"),
                Some(LlcKind::Rnr) => f.write_str("llc rnr"),
                Some(LlcKind::Name(s)) => write!(f, "llc {}", NameText(s)),
            },
            ExprKind::Atm(t) => match t {
                AtmTest::Abbrev(a) => f.write_str(match a {
                    AtmAbbrev::Lane => "lane",
                    AtmAbbrev::Metac => "metac",
                    AtmAbbrev::Bcc => "bcc",
                    AtmAbbrev::Oamf4ec => "oamf4ec",
                    AtmAbbrev::Oamf4sc => "oamf4sc",
                    AtmAbbrev::Sc => "sc",
                    AtmAbbrev::Ilmic => "ilmic",
                    AtmAbbrev::Oam => "oam",
                    AtmAbbrev::Oamf4 => "oamf4",
                    AtmAbbrev::Connectmsg => "connectmsg",
                    AtmAbbrev::Metaconnect => "metaconnect",
                }),
                AtmTest::Field(field, v) => {
                    let w = match field {
                        AtmField::Vpi => "vpi",
                        AtmField::Vci => "vci",
                    };
                    write!(f, "{w} {v}")
                }
            },
            ExprKind::Mtp2(t) => f.write_str(match t {
                Mtp2Type::Fisu => "fisu",
                Mtp2Type::Lssu => "lssu",
                Mtp2Type::Msu => "msu",
                Mtp2Type::Hfisu => "hfisu",
                Mtp2Type::Hlssu => "hlssu",
                Mtp2Type::Hmsu => "hmsu",
            }),
            ExprKind::Mtp3(field, v) => {
                let w = match field {
                    Mtp3Field::Sio => "sio",
                    Mtp3Field::Opc => "opc",
                    Mtp3Field::Dpc => "dpc",
                    Mtp3Field::Sls => "sls",
                    Mtp3Field::Hsio => "hsio",
                    Mtp3Field::Hopc => "hopc",
                    Mtp3Field::Hdpc => "hdpc",
                    Mtp3Field::Hsls => "hsls",
                };
                write!(f, "{w} {v}")
            }
        }
    }
}
