//! Lowering: the pflang syntax tree -> a [`weir_filter::Filter`], with libpcap's semantics.
//!
//! The lowering walks the tree left to right, as libpcap's code generator does, because some
//! primitives change the meaning of everything written *after* them: the first `vlan`,
//! `mpls`, `pppoes`, `geneve` or `vxlan` shifts later link and network offsets, even across
//! `or` (a documented trap of the language). That state lives in [`Lowerer`].
//!
//! Offsets are expressed relative to a layer ([`Layer`]) and resolved here to absolute IR
//! expressions: constant for fixed-size headers, `scratch slot + k` once a variable-length
//! header (geneve) has been crossed, and `ip header length + k` for the IPv4 transport layer.
//!
//! Module map: `link` (link-layer types and the link-level protocol test), `net` (hosts,
//! nets, protocols, protochain, broadcast/multicast, gateway), `transport` (ports and port
//! ranges), `arith` (relations, `proto[expr:size]`, `len`, `less`/`greater`, `byte`),
//! `encap` (vlan, mpls, pppoe, geneve, vxlan, llc), `atm` (SunATM: `lane`, `vpi`/`vci`
//! and the ATM abbreviations), `misc` (direction, interface, pflog, the SS7 MTP tests).

mod arith;
mod atm;
mod encap;
pub mod fuse;
mod link;
mod misc;
mod net;
mod net_proto;
mod transport;
mod wlan;

use weir_filter::{BinOp, CmpOp, Expr, Filter, Pred, Size, SCRATCH_SLOTS};

use crate::ast::{self, BoolOp, ExprKind, Span};
use crate::depth::LINEAR_RUNS;
use crate::error::ParseError;
use crate::names::NameDb;

pub use link::{compiles_for, protocol_tests_refused, LinkType, LINK_TYPES};

/// Lowering errors carry a span into the expression, exactly like parse errors.
pub type CompileError = ParseError;

/// What the compiler needs besides the expression.
#[derive(Debug, Clone)]
pub struct Options {
    pub linktype: LinkType,
    /// The capture's IPv4 netmask, for `ip broadcast` (libpcap refuses it without one).
    pub netmask: Option<u32>,
}

impl Options {
    pub fn new(linktype: LinkType) -> Options {
        Options { linktype, netmask: None }
    }
}

/// Parses and lowers `expr` for a link type, resolving names from `names`. The filter is
/// not optimized: optimizing is the next stage of the compile path, which the facade
/// (`weir::compile_filter_with`) runs, or `weir_filter::opt` directly.
///
/// An empty expression accepts every packet, as in tcpdump.
pub fn compile(expr: &str, options: &Options, names: &NameDb) -> Result<Filter, CompileError> {
    let ast = crate::parse(expr)?;
    lower(ast.as_ref(), options, names)
}

/// Lowers a parsed expression (`None`: the empty expression) to the filter IR.
pub fn lower(
    ast: Option<&ast::Expr>,
    options: &Options,
    names: &NameDb,
) -> Result<Filter, CompileError> {
    lower_with_facts(ast, options, names).map(|l| l.filter)
}

/// A lowered expression and what libpcap's compiler would know about it.
#[derive(Debug, Clone)]
pub struct Lowered {
    pub filter: Filter,
    /// Whether libpcap runs its optimizer on this expression when asked to: it never does
    /// when the expression has a `protochain` (its loop is beyond the optimizer; gencode
    /// turns optimization off), so such an expression is never "rejects all packets".
    pub libpcap_optimizes: bool,
}

/// [`lower`], with what libpcap's compiler would know about the expression.
pub fn lower_with_facts(
    ast: Option<&ast::Expr>,
    options: &Options,
    names: &NameDb,
) -> Result<Lowered, CompileError> {
    let Some(ast) = ast else {
        return Ok(Lowered { filter: Filter::new(Pred::Const(true)), libpcap_optimizes: true });
    };
    lower_trees_as(ast, options, names, false)
}

/// [`lower`], with every port and host test as libpcap's tree (one copy per transport, the
/// link test once per host side), as the terms of a long list are lowered ([`Lowerer::libpcap_trees`]): for the tests that
/// compare a list's lowering with what `fuse` makes of its terms lowered one by one.
#[doc(hidden)]
pub fn lower_as_list_term(
    ast: &ast::Expr,
    options: &Options,
    names: &NameDb,
) -> Result<Filter, CompileError> {
    lower_trees_as(ast, options, names, true).map(|l| l.filter)
}

/// [`lower_with_facts`] of an expression, with every port and host test as libpcap's tree
/// (`libpcap_trees`) or not.
fn lower_trees_as(
    ast: &ast::Expr,
    options: &Options,
    names: &NameDb,
    libpcap_trees: bool,
) -> Result<Lowered, CompileError> {
    let mut lowerer = Lowerer::new(options, names);
    lowerer.libpcap_trees = libpcap_trees;
    let pred = lowerer.expr(ast)?;
    let (pred, prologue) = lowerer.wlan_prologue(pred);
    let pred = lowerer.pflog_prologue(pred);
    let pred = lowerer.ppi_dlt_check(pred);
    let libpcap_optimizes = !lowerer.protochain_seen && !prologue;
    Ok(Lowered { filter: Filter::new(pred), libpcap_optimizes })
}

/// The header an offset is relative to (libpcap's "offset relative to" notion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layer {
    /// The start of the (current, possibly encapsulated) link-layer header.
    LinkHdr,
    /// The link-layer type field (e.g. the Ethernet type).
    LinkType,
    /// The link-layer payload.
    LinkPayload,
    /// The network-layer header (link payload + any LLC/SNAP or MPLS in front of it).
    Net,
    /// The network-layer header of an 802.2 frame without SNAP (libpcap's OR_LINKPL_NOSNAP,
    /// used by the OSI protocols): link payload + `off_nl_nosnap`.
    NetNoSnap,
    /// The transport header after an IPv4 header of variable length (IHL * 4).
    TransportV4,
    /// The transport header after a fixed 40-byte IPv6 header.
    TransportV6,
}

/// An offset that may be variable: `scratch[slot] + constant` or just `constant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Offset {
    pub variable: Option<u8>,
    pub constant: u32,
}

impl Offset {
    pub const fn fixed(constant: u32) -> Offset {
        Offset { variable: None, constant }
    }

    pub fn plus(self, k: u32) -> Offset {
        Offset { variable: self.variable, constant: self.constant.wrapping_add(k) }
    }

    /// The absolute packet offset of `self + k` as an IR expression.
    pub fn expr(self, k: u32) -> Expr {
        let k = self.constant.wrapping_add(k);
        match self.variable {
            None => Expr::Const(k),
            Some(slot) => Expr::Scratch(slot).plus(k),
        }
    }
}

/// Lowering state: link-layer geometry (changed by encapsulation keywords) and scratch use.
pub(crate) struct Lowerer<'a> {
    pub options: &'a Options,
    pub names: &'a NameDb,
    /// The link type the *current* position in the expression sees: starts as the capture's,
    /// becomes PPP after `pppoes`, Ethernet inside geneve/vxlan.
    pub link: LinkType,
    /// Start of the link-layer header (moves inside tunnels).
    pub off_linkhdr: Offset,
    /// Offset of the link-layer type field, if the link type has one.
    pub off_linktype: Option<Offset>,
    /// Start of the link-layer payload.
    pub off_linkpl: Offset,
    /// Network layer relative to the link payload (e.g. after an MPLS label stack).
    pub off_nl: u32,
    /// The same for 802.2 frames without SNAP (3 on Ethernet, moved by `mpls`).
    pub off_nl_nosnap: u32,
    /// Number of `vlan` keywords seen so far.
    pub vlan_depth: u32,
    /// Number of `mpls` keywords seen so far.
    pub mpls_depth: u32,
    /// Set once a `pppoes` has been seen (each one shifts again: PPPoE inside PPPoE).
    pub pppoes_seen: bool,
    /// True while the current link header is a tunnel's inner frame (`geneve`, `vxlan`;
    /// libpcap's is_geneve): MAC-level tests then first check that the inner frame has a
    /// MAC header at all (see `inner_mac_check` in `encap`). A later `pppoes` clears it.
    pub tunnel_seen: bool,
    /// After `geneve`: the scratch slots of the inner link header and link payload offsets,
    /// which are equal when Geneve carries a bare network packet instead of a frame.
    pub geneve_slots: Option<(u8, u8)>,
    /// On 802.11 captures: the slots of the packet-dependent link offsets (see `wlan`).
    pub wlan_slots: Option<wlan::WlanSlots>,
    /// Whether the expression has a `protochain` (libpcap then does not optimize it).
    pub protochain_seen: bool,
    /// Set by a `lane` on a SunATM capture: the current link is the LANE frame's Ethernet,
    /// and its tests first check that the frame is data (see `atm`). Cleared by the next
    /// `lane`, `pppoes` or tunnel, as libpcap forgets the outer link type then.
    pub lane_outer: bool,
    /// On pflog captures: whether anything lowered so far reads the payload offset's slot
    /// (libpcap's register for it is allocated then; see `pppoes`).
    pub pflog_read: std::cell::Cell<bool>,
    /// While the terms of a long list are lowered ([`Lowerer::fused_list`]): ports and hosts
    /// as libpcap's trees (one copy of the port test per transport, the link test once per
    /// host side) rather than the merged trees (see `transport`, `net`). `fuse` finds its
    /// sets and pairs in the shapes of those trees, and what it makes of them is kept as it
    /// was.
    pub libpcap_trees: bool,
    /// The slot every long mixed `and`/`or` chain keeps its value in (see
    /// [`Lowerer::linear_chain`]), taken by the first one.
    chain_slot: Option<u8>,
    next_scratch: u8,
}

impl<'a> Lowerer<'a> {
    pub fn new(options: &'a Options, names: &'a NameDb) -> Lowerer<'a> {
        let geometry = link::geometry(options.linktype);
        let wlan_slots = wlan::WlanSlots::of(options.linktype);
        let (off_linkhdr, off_linktype, off_linkpl) = match wlan_slots {
            // The type field libpcap notes at 24 is never read: the LLC header says.
            Some(slots) => (
                slots.header_offset(),
                Some(slots.header_offset().plus(24)),
                slots.payload_offset(),
            ),
            // pflog: the payload offset lives in its slot (see `misc`).
            None if options.linktype == LinkType::Pflog => (
                Offset::fixed(0),
                geometry.off_linktype.map(Offset::fixed),
                Offset { variable: Some(misc::PFLOG_SLOT), constant: 0 },
            ),
            None => (
                Offset::fixed(geometry.off_linkhdr),
                geometry.off_linktype.map(Offset::fixed),
                Offset::fixed(geometry.off_linkpl),
            ),
        };
        Lowerer {
            options,
            names,
            link: options.linktype,
            off_linkhdr,
            off_linktype,
            off_linkpl,
            off_nl: geometry.off_nl,
            off_nl_nosnap: geometry.off_nl_nosnap,
            vlan_depth: 0,
            mpls_depth: 0,
            pppoes_seen: false,
            tunnel_seen: false,
            geneve_slots: None,
            protochain_seen: false,
            lane_outer: false,
            pflog_read: std::cell::Cell::new(false),
            libpcap_trees: false,
            chain_slot: None,
            next_scratch: match wlan_slots {
                Some(s) => s.count(),
                None if options.linktype == LinkType::Pflog => misc::PFLOG_SLOT + 1,
                None => 0,
            },
            wlan_slots,
        }
    }

    /// A fresh scratch slot for a variable offset, or an error when the expression needs more
    /// than classic BPF's scratch memory holds.
    pub fn alloc_scratch(&mut self, span: Span) -> Result<u8, CompileError> {
        // Keep the top slots free for the emitters' temporaries.
        if self.next_scratch >= SCRATCH_SLOTS / 2 {
            return Err(CompileError::new(
                span,
                "not supported: too many variable-length headers in one expression",
            ));
        }
        let slot = self.next_scratch;
        self.next_scratch += 1;
        Ok(slot)
    }

    /// The absolute offset of `layer + k`.
    pub fn offset(&self, layer: Layer, k: u32) -> Expr {
        let e = self.offset_of(layer, k);
        if self.options.linktype == LinkType::Pflog && wlan::expr_reads(&e, misc::PFLOG_SLOT) {
            self.pflog_read.set(true);
        }
        e
    }

    fn offset_of(&self, layer: Layer, k: u32) -> Expr {
        let net = self.off_linkpl.plus(self.off_nl);
        match layer {
            Layer::LinkHdr => self.off_linkhdr.expr(k),
            // Link types without a type field never ask for it (their tests are built
            // differently in `link`); fall back to the payload so nothing panics.
            Layer::LinkType => self.off_linktype.unwrap_or(self.off_linkpl).expr(k),
            Layer::LinkPayload => self.off_linkpl.expr(k),
            Layer::Net => net.expr(k),
            Layer::NetNoSnap => self.off_linkpl.plus(self.off_nl_nosnap).expr(k),
            Layer::TransportV4 => {
                // 4 * (first byte of the IPv4 header & 0xf): the header length.
                let ihl = Expr::binary(
                    BinOp::Shl,
                    Expr::load(net.expr(0), Size::Byte).and_mask(0xf),
                    Expr::Const(2),
                );
                Expr::binary(BinOp::Add, ihl, net.expr(k))
            }
            Layer::TransportV6 => net.expr(40u32.wrapping_add(k)),
        }
    }

    /// A guarded load of `size` bytes at `layer + k`.
    pub fn load(&self, layer: Layer, k: u32, size: Size) -> Expr {
        Expr::load(self.offset(layer, k), size)
    }

    /// `(load(layer + k) & mask) == value`.
    pub fn cmp_field(&self, layer: Layer, k: u32, size: Size, mask: u32, value: u32) -> Pred {
        // Under an all-zero mask (the address words a `net` prefix ignores) nothing is
        // compared, so nothing is read: libpcap's unoptimized code still loads the word
        // (`ld; and #0; jeq #0`), its optimizer (and so tcpdump) does not, and neither does
        // weir. A packet cut inside such a word is not rejected for it.
        if mask == 0 {
            return Pred::Const(value == 0);
        }
        Pred::eq_masked(self.load(layer, k, size), mask, value)
    }

    /// Lowers one boolean expression, left to right.
    pub fn expr(&mut self, e: &ast::Expr) -> Result<Pred, CompileError> {
        match &e.kind {
            ExprKind::Chain { first, rest } if crate::depth::runs(rest) > LINEAR_RUNS => {
                self.linear_chain(first, rest, e.span)
            }
            ExprKind::Chain { first, rest }
                if rest.len() + 1 >= fuse::MIN_TERMS
                    && rest.iter().all(|(op, _)| *op == rest[0].0) =>
            {
                // A long list joined by one operator: its runs of like terms become set
                // lookups (`fuse`).
                // A pair term the run already vouches for is not lowered (`fuse::PairHint`).
                let terms = std::iter::once(&**first).chain(rest.iter().map(|(_, e)| e));
                if rest[0].0 == BoolOp::Or {
                    self.fused_list::<fuse::Fuser>(terms)
                } else {
                    self.fused_list::<fuse::AndFuser>(terms)
                }
            }
            ExprKind::Chain { first, rest } => {
                // Equal precedence, left associative: ((e0 op1 e1) op2 e2) ...
                let mut acc = self.expr(first)?;
                for (op, next) in rest {
                    let rhs = self.expr(next)?;
                    acc = join(acc, *op == BoolOp::And, rhs);
                }
                Ok(acc)
            }
            ExprKind::Not(inner) => Ok(Pred::not(self.expr(inner)?)),
            ExprKind::Primitive(p) => self.primitive(p, e.span),
            ExprKind::Proto(proto) => self.proto_abbrev(*proto, e.span),
            ExprKind::Relation(r) => self.relation(r, e.span),
            ExprKind::Broadcast(proto) => self.broadcast(*proto, e.span),
            ExprKind::Multicast(proto) => self.multicast(*proto, e.span),
            ExprKind::Less(n) => Ok(self.less(*n)),
            ExprKind::Greater(n) => Ok(self.greater(*n)),
            ExprKind::Byte { offset, op, value } => Ok(self.byte(*offset, *op, *value)),
            ExprKind::Inbound => self.direction(true, e.span),
            ExprKind::Outbound => self.direction(false, e.span),
            ExprKind::IfIndex(n) => self.ifindex(*n, e.span),
            ExprKind::Encap(kind, num) => self.encap(*kind, *num, e.span),
            ExprKind::Pppoed => self.pppoed(e.span),
            ExprKind::Llc(kind) => self.llc(kind.as_ref(), e.span),
            ExprKind::Pf(test) => self.pf(test, e.span),
            ExprKind::Wlan(_, test) => self.wlan(test, e.span),
            ExprKind::Atm(test) => self.atm(test, e.span),
            ExprKind::Mtp2(kind) => self.mtp2(*kind, e.span),
            ExprKind::Mtp3(field, value) => self.mtp3(*field, value, e.span),
        }
    }
}

impl Lowerer<'_> {
    /// A long list joined by one operator, each term pushed into `F` as it is lowered, or
    /// by its syntax alone where the run vouches for it (`fuse::PairHint`).
    fn fused_list<'e, F: fuse::ListFuser>(
        &mut self,
        terms: impl Iterator<Item = &'e ast::Expr>,
    ) -> Result<Pred, CompileError> {
        let mut fuser = F::default();
        for term in terms {
            let pair_term = match &term.kind {
                _ if !F::NEGATED => Some(term),
                ExprKind::Not(inner) => Some(&**inner),
                _ => None,
            };
            let hint = pair_term.and_then(pair_hint);
            if hint.is_some_and(|h| fuser.push_known(&h)) {
                continue;
            }
            let outer = std::mem::replace(&mut self.libpcap_trees, true);
            let lowered = self.expr(term);
            self.libpcap_trees = outer;
            fuser.push_hinted(lowered?, hint);
        }
        Ok(fuser.finish_list())
    }

    /// A chain that switches between `and` and `or` more than [`LINEAR_RUNS`] times, as a
    /// flat list rather than a tree one level deeper per switch. Its runs (terms joined by
    /// one operator) are `J1 op2 J2 op3 J3 ...`, evaluated `((J1 op2 J2) op3 J3) ...`; the
    /// value so far lives in scratch slot `s` (0 or 1), and each run after the first runs
    /// only where the value so far does not already decide it:
    ///
    /// ```text
    /// and( or(and(J1, s := 1), s := 0),
    ///      or(s == 0, and(J2, s := 1), s := 0),      -- op2 = and: skipped when false
    ///      or(s != 0, and(J3, s := 1), s := 0),      -- op3 = or: skipped when true
    ///      ...,
    ///      s != 0 )
    /// ```
    ///
    /// Every run is evaluated exactly when the tree would evaluate it, so the verdicts and
    /// aborts are the tree's. One slot serves every such chain, nested or not: the value is
    /// live only from a store to the test right after it, and no run is evaluated between.
    fn linear_chain(
        &mut self,
        first: &ast::Expr,
        rest: &[(BoolOp, ast::Expr)],
        span: Span,
    ) -> Result<Pred, CompileError> {
        let slot = match self.chain_slot {
            Some(slot) => slot,
            None => {
                let slot = self.alloc_scratch(span)?;
                self.chain_slot = Some(slot);
                slot
            }
        };
        let value = || Expr::Scratch(slot);
        let store = |v: u32| Pred::Store { slot, value: Expr::Const(v) };
        let set = |run: Pred| Pred::Or(vec![Pred::And(vec![run, store(1)]), store(0)]);
        let mut out = Vec::new();
        // The first run: the first term and the terms after it joined by the first operator.
        let mut run = vec![self.expr(first)?];
        let mut run_op = rest.first().map_or(BoolOp::And, |(op, _)| *op);
        let mut first_run = true;
        let finish = |out: &mut Vec<Pred>, run: Vec<Pred>, op: BoolOp, first_run: bool| {
            let j = junction(run, op == BoolOp::And);
            if first_run {
                out.push(set(j));
            } else {
                // The value so far decides the run's outcome: false before `and`, true
                // before `or`.
                let decided = if op == BoolOp::And { CmpOp::Eq } else { CmpOp::Ne };
                let skip = Pred::cmp(decided, value(), Expr::Const(0));
                out.push(Pred::Or(vec![skip, Pred::And(vec![j, store(1)]), store(0)]));
            }
        };
        for (op, term) in rest {
            if *op != run_op {
                finish(&mut out, std::mem::take(&mut run), run_op, first_run);
                first_run = false;
                run_op = *op;
            }
            run.push(self.expr(term)?);
        }
        finish(&mut out, run, run_op, first_run);
        out.push(Pred::cmp(CmpOp::Ne, value(), Expr::Const(0)));
        Ok(Pred::And(out))
    }
}

/// A term `host A and port P` (either order, any qualifiers the lowering takes for an IPv4
/// address and a port number) read from its syntax: `None` for anything else, or for values
/// the lowering would read differently (an address of fewer than four parts is a network)
/// or refuse (a port past 65535).
fn pair_hint(term: &ast::Expr) -> Option<fuse::PairHint> {
    use ast::{AddrKind, Id, Proto};
    let ExprKind::Chain { first, rest } = &term.kind else { return None };
    let [(BoolOp::And, second)] = rest.as_slice() else { return None };
    let side = |e: &ast::Expr| {
        let ExprKind::Primitive(p) = &e.kind else { return None };
        let q = p.qual;
        match &p.id {
            Id::Ipv4(text)
                if matches!(q.addr, None | Some(AddrKind::Host))
                    && !matches!(q.proto, Some(Proto::Decnet | Proto::Link)) =>
            {
                let (value, parts) = crate::names::ipv4_parts(text)?;
                (parts == 4).then_some(((fuse::PairSide::Host, q), value))
            }
            Id::Num(n) if q.addr == Some(AddrKind::Port) && *n <= transport::MAX_PORT => {
                Some(((fuse::PairSide::Port, q), *n))
            }
            _ => None,
        }
    };
    let (a, x) = side(first)?;
    let (b, y) = side(second)?;
    Some(fuse::PairHint { syntax: [a, b], pair: (x, y) })
}

/// `Pred::and([acc, rhs])` (`conjunction`) or `Pred::or([acc, rhs])`, built in place when
/// `acc` already is that junction: a chain of n terms then costs O(n), not the O(n^2) of
/// copying the growing junction at every term (10,000 `host` terms: 60,000 parts).
fn join(acc: Pred, conjunction: bool, rhs: Pred) -> Pred {
    let mut parts = match acc {
        Pred::And(parts) if conjunction && !parts.is_empty() => parts,
        Pred::Or(parts) if !conjunction && !parts.is_empty() => parts,
        acc => return junction(vec![acc, rhs], conjunction),
    };
    match rhs {
        Pred::And(inner) if conjunction => parts.extend(inner),
        Pred::Or(inner) if !conjunction => parts.extend(inner),
        rhs => parts.push(rhs),
    }
    // Exactly what the flattening constructors give: a single part stands for itself.
    match (parts.len(), conjunction) {
        (1, _) => parts.pop().unwrap_or(Pred::Const(conjunction)),
        (_, true) => Pred::And(parts),
        (_, false) => Pred::Or(parts),
    }
}

/// `Pred::and(parts)` (`conjunction`) or `Pred::or(parts)`: the same tree, flattened the
/// same way, but with each list of parts allocated at its final size (the generic
/// constructors give a two-part list room for four). A filter of thousands of terms is
/// mostly such small lists, and the optimizer walks a smaller heap faster.
pub(crate) fn junction(parts: Vec<Pred>, conjunction: bool) -> Pred {
    let same_kind = |p: &Pred| match p {
        Pred::And(_) => conjunction,
        Pred::Or(_) => !conjunction,
        _ => false,
    };
    let mut out = if parts.iter().any(same_kind) {
        let len = parts
            .iter()
            .map(|p| match p {
                Pred::And(inner) | Pred::Or(inner) if same_kind(p) => inner.len(),
                _ => 1,
            })
            .sum();
        let mut out = Vec::with_capacity(len);
        for p in parts {
            match p {
                Pred::And(inner) if conjunction => out.extend(inner),
                Pred::Or(inner) if !conjunction => out.extend(inner),
                p => out.push(p),
            }
        }
        out
    } else {
        parts
    };
    match (out.len(), conjunction) {
        (1, _) => out.pop().unwrap_or(Pred::Const(conjunction)),
        (_, true) => Pred::And(out),
        (_, false) => Pred::Or(out),
    }
}

/// Lowers each of `filters` on every link type with the merged trees and with libpcap's
/// (`libpcap_trees`) and checks that they agree: the same errors; where both lower, the same
/// tree after the optimizer's first factoring `simplify` (and so the same optimized filter,
/// checked too) and the same "rejects all packets" verdict. Returns how many pairs were
/// compared and how many of those were lowered differently (a test that compares only equal
/// trees proves nothing).
#[cfg(test)]
pub(super) fn merged_trees_optimize_as_libpcaps(filters: &[&str]) -> (usize, usize) {
    use weir_filter::opt;
    let names = NameDb::builtin();
    let (mut compared, mut differing) = (0, 0);
    for linktype in link::LINK_TYPES {
        let options = Options::new(linktype);
        for &text in filters {
            let ast = crate::parse(text).expect(text).expect(text);
            let merged = lower_trees_as(&ast, &options, &names, false);
            let libpcap = lower_trees_as(&ast, &options, &names, true);
            let (merged, libpcap) = match (merged, libpcap) {
                (Ok(m), Ok(l)) => (m, l),
                (Err(m), Err(l)) => {
                    assert_eq!(m, l, "{linktype:?}: {text}");
                    continue;
                }
                (m, l) => panic!("{linktype:?}: {text}: {m:?} against {l:?}"),
            };
            compared += 1;
            differing += usize::from(merged.filter != libpcap.filter);
            let first = |f| opt::simplify_factoring(&opt::drop_ruled_out(f));
            assert_eq!(first(&merged.filter), first(&libpcap.filter), "{linktype:?}: {text}");
            assert_eq!(
                opt::optimize(&merged.filter),
                opt::optimize(&libpcap.filter),
                "{linktype:?}: {text}"
            );
            assert_eq!(
                crate::libpcap_rejects_all(&merged),
                crate::libpcap_rejects_all(&libpcap),
                "{linktype:?}: {text}"
            );
        }
    }
    (compared, differing)
}
