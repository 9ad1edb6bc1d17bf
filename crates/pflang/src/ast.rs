//! The pflang syntax tree: what the parser produces and what lowering consumes.
//!
//! The tree is faithful to the grammar of record (libpcap's): every primitive keeps the
//! qualifiers that apply to it *after* qualifier inheritance, so lowering never re-derives
//! `host a and b`. Names (hosts, services, protocols, pf reasons, 802.11 types) stay names;
//! `crate::names` resolves them. Named constants (`tcp-syn`, `icmptype`, ...) are already
//! numbers, as the scanner of record makes them. Every node carries a byte [`Span`].

use std::net::Ipv6Addr;

/// Byte offsets `start..end` into the filter expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub const fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// A boolean filter expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExprKind {
    /// `e0 op1 e1 op2 e2 ...` with `and`/`&&` and `or`/`||`: equal precedence, evaluated
    /// left to right, i.e. `((e0 op1 e1) op2 e2) ...`. A flat list rather than nested
    /// binary nodes, so a 10,000-term filter is not a 10,000-deep tree.
    Chain {
        first: Box<Expr>,
        rest: Vec<(BoolOp, Expr)>,
    },
    /// `not` / `!`.
    Not(Box<Expr>),
    /// Qualifiers + id: `ip src host 10.0.0.1`, `port 80`, and inherited ids.
    Primitive(Primitive),
    /// A protocol keyword alone: `tcp`, `ip6`, `arp`.
    Proto(Proto),
    /// `arith relop arith`.
    Relation(Relation),
    /// `[proto] broadcast`.
    Broadcast(Option<Proto>),
    /// `[proto] multicast`.
    Multicast(Option<Proto>),
    /// `less N`: wire length <= N.
    Less(u32),
    /// `greater N`: wire length >= N.
    Greater(u32),
    /// `byte OFF OP VAL` (an old form kept by the grammar of record).
    Byte {
        offset: u32,
        op: ByteOp,
        value: u32,
    },
    Inbound,
    Outbound,
    /// `ifindex N` (Linux cooked captures).
    IfIndex(u32),
    /// An encapsulation keyword with its optional number: `vlan 100`, `mpls`, `pppoes 5`.
    Encap(Encap, Option<u32>),
    /// `pppoed`.
    Pppoed,
    /// pflog header tests: `ifname`, `rnr`, `reason`, ...
    Pf(PfTest),
    /// 802.11 header tests, with the optional protocol qualifier written before them.
    Wlan(Option<Proto>, WlanTest),
    /// `llc` and `llc SUBTYPE`.
    Llc(Option<LlcKind>),
    /// ATM tests (parsed; lowering marks them unsupported on the link types weir handles).
    Atm(AtmTest),
    /// SS7 MTP2 frame type abbreviations (parsed; marked unsupported by lowering).
    Mtp2(Mtp2Type),
    /// SS7 MTP3 field tests (parsed; marked unsupported by lowering).
    Mtp3(Mtp3Field, FieldValue),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BoolOp {
    And,
    Or,
}

/// An id with the qualifiers that apply to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Primitive {
    pub qual: Qualifiers,
    pub id: Id,
    pub id_span: Span,
    /// True when the qualifiers were not written at this id but inherited from an earlier
    /// primitive (`b` in `host a and b`). Informational: `qual` is already complete.
    pub inherited: bool,
}

/// Qualifiers; `None` is the grammar's "default" (unqualified) value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Qualifiers {
    pub proto: Option<Proto>,
    pub dir: Option<Dir>,
    pub addr: Option<AddrKind>,
}

/// Protocol qualifiers (`pname` in the grammar of record). `ether`, `link`, `ppp`, `slip`,
/// `fddi`, `tr` and `wlan` are one qualifier there: [`Proto::Link`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Proto {
    Link,
    Ip,
    Arp,
    Rarp,
    Sctp,
    Tcp,
    Udp,
    Icmp,
    Igmp,
    Igrp,
    Pim,
    Vrrp,
    Carp,
    Radio,
    Ip6,
    Icmp6,
    Ah,
    Esp,
    Atalk,
    Aarp,
    Decnet,
    Lat,
    Sca,
    Moprc,
    Mopdl,
    Iso,
    Esis,
    Isis,
    L1,
    L2,
    Iih,
    Lsp,
    Snp,
    Csnp,
    Psnp,
    Clnp,
    Stp,
    Ipx,
    Netbeui,
}

/// Direction qualifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    Src,
    Dst,
    /// `src or dst` / `dst or src`.
    SrcOrDst,
    /// `src and dst` / `dst and src`.
    SrcAndDst,
    Addr1,
    Addr2,
    Addr3,
    Addr4,
    Ra,
    Ta,
}

/// Address-type qualifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrKind {
    Host,
    Net,
    Port,
    PortRange,
    Gateway,
    Proto,
    ProtoChain,
}

/// The id part of a primitive, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Id {
    /// A number (decimal, `0x` hex or `0` octal; named constants already resolved).
    Num(u32),
    /// A name: host, service, protocol, port range (`1-1024` lexes as a name), or a
    /// backslash-escaped keyword (`\tcp`), without the backslash.
    Name(String),
    /// A dotted IPv4 address, possibly abbreviated (`10.1`, `10.1.2`), as written.
    Ipv4(String),
    /// `A.B.C.D/len` (or abbreviated), as written, and the prefix length.
    Ipv4Cidr(String, u32),
    /// `A.B.C.D mask M.M.M.M`.
    Ipv4Mask(String, String),
    Ipv6(Ipv6Addr),
    /// `addr/len`.
    Ipv6Cidr(Ipv6Addr, u32),
    /// Ethernet address (any of the three spellings).
    Mac([u8; 6]),
    /// ARCnet address `$x` or `$xx`: the hex digits as written.
    Arcnet(String),
}

/// `arith relop arith`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub op: RelOp,
    pub lhs: Arith,
    pub rhs: Arith,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RelOp {
    Gt,
    Ge,
    /// `=` or `==`.
    Eq,
    Le,
    Lt,
    Ne,
}

/// An arithmetic expression (unsigned 32-bit values, as in the grammar of record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arith {
    pub kind: ArithKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArithKind {
    Num(u32),
    /// `len` / `length`: the wire length.
    Len,
    /// `proto[offset]` (size 1) or `proto[offset:size]`, size 1, 2 or 4.
    Load {
        proto: Proto,
        offset: Box<Arith>,
        size: u8,
    },
    /// Unary minus.
    Neg(Box<Arith>),
    /// `x0 op1 x1 op2 x2 ...` evaluated left to right: `((x0 op1 x1) op2 x2) ...`. The left
    /// spine of an arithmetic expression is one list, so `len + 1 + 1 ...` with 100,000
    /// terms is a list, not a 100,000-deep tree. `rest` is never empty and `x0` is never a
    /// chain (its operators would be the start of this one).
    Chain {
        first: Box<Arith>,
        rest: Vec<(BinOp, Arith)>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
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

/// The operator of `byte OFF OP VAL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOp {
    And,
    Or,
    Lt,
    Gt,
    Eq,
}

/// Encapsulations that take an optional number and shift later offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encap {
    Vlan,
    Mpls,
    Pppoes,
    Geneve,
    Vxlan,
}

/// A name or a number, where the grammar accepts either (`reason`, 802.11 `type` ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameOrNum {
    Name(String),
    Num(u32),
}

/// pflog header tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PfTest {
    /// `ifname NAME` / `on NAME`.
    Ifname(String),
    /// `rset NAME` / `ruleset NAME`.
    Ruleset(String),
    /// `rnr N` / `rulenum N`.
    Rulenum(u32),
    /// `srnr N` / `subrulenum N`.
    Subrulenum(u32),
    /// `reason NAME|N`.
    Reason(NameOrNum),
    /// `action NAME`.
    Action(String),
}

/// 802.11 tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WlanTest {
    /// `type T [subtype S]`.
    Type { ty: NameOrNum, subtype: Option<NameOrNum> },
    /// `subtype NAME` (a name that implies its type).
    Subtype(String),
    /// `dir NAME|N` / `direction ...`.
    Dir(NameOrNum),
}

/// `llc` subtypes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LlcKind {
    /// `llc i`, `llc s`, `llc u`, `llc ui`, ... (the name, resolved by lowering).
    Name(String),
    /// `llc rnr` (`rnr` is a keyword, so the grammar spells it out).
    Rnr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AtmTest {
    /// `lane`, `metac`, `bcc`, `oamf4ec`, `oamf4sc`, `sc`, `ilmic`, `oam`, `oamf4`,
    /// `connectmsg`, `metaconnect`.
    Abbrev(AtmAbbrev),
    /// `vpi VALUE` / `vci VALUE`.
    Field(AtmField, FieldValue),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtmAbbrev {
    Lane,
    Metac,
    Bcc,
    Oamf4ec,
    Oamf4sc,
    Sc,
    Ilmic,
    Oam,
    Oamf4,
    Connectmsg,
    Metaconnect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtmField {
    Vpi,
    Vci,
}

/// Value of an ATM or MTP3 field test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldValue {
    /// `vpi 5`.
    Eq(u32),
    /// `vpi > 5`.
    Rel(RelOp, u32),
    /// `vpi (1 or 2 or 3)`.
    List(Vec<u32>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mtp2Type {
    Fisu,
    Lssu,
    Msu,
    Hfisu,
    Hlssu,
    Hmsu,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mtp3Field {
    Sio,
    Opc,
    Dpc,
    Sls,
    Hsio,
    Hopc,
    Hdpc,
    Hsls,
}

impl Expr {
    /// A copy with every span zeroed and `inherited` cleared: two trees that mean the
    /// same filter and differ only in how they were written compare equal after this.
    pub fn normalized(&self) -> Expr {
        let kind = match &self.kind {
            ExprKind::Chain { first, rest } => ExprKind::Chain {
                first: Box::new(first.normalized()),
                rest: rest.iter().map(|(op, e)| (*op, e.normalized())).collect(),
            },
            ExprKind::Not(a) => ExprKind::Not(Box::new(a.normalized())),
            ExprKind::Primitive(p) => ExprKind::Primitive(Primitive {
                qual: p.qual,
                id: p.id.clone(),
                id_span: Span::default(),
                inherited: false,
            }),
            ExprKind::Relation(r) => ExprKind::Relation(Relation {
                op: r.op,
                lhs: r.lhs.normalized(),
                rhs: r.rhs.normalized(),
            }),
            other => other.clone(),
        };
        Expr { kind, span: Span::default() }
    }
}

impl Arith {
    /// A copy with every span zeroed.
    pub fn normalized(&self) -> Arith {
        let kind = match &self.kind {
            ArithKind::Load { proto, offset, size } => ArithKind::Load {
                proto: *proto,
                offset: Box::new(offset.normalized()),
                size: *size,
            },
            ArithKind::Neg(a) => ArithKind::Neg(Box::new(a.normalized())),
            ArithKind::Chain { first, rest } => ArithKind::Chain {
                first: Box::new(first.normalized()),
                rest: rest.iter().map(|(op, a)| (*op, a.normalized())).collect(),
            },
            other => other.clone(),
        };
        Arith { kind, span: Span::default() }
    }
}
