//! Rules in tc-flower syntax: exactly the arguments after `tc filter add dev DEV ingress`,
//! one rule per line (`#` comments and blank lines allowed), and the same rules built in
//! Rust.
//!
//! ```text
//! prio 10 protocol ip flower ip_proto tcp dst_port 80 action drop
//! protocol 802.1Q flower vlan_id 5 vlan_ethtype ip src_ip 10.0.0.0/8 action goto chain 1
//! chain 1 prio 1 protocol ip flower ip_proto udp action mirred egress redirect dev out0
//! ```
//!
//! Keywords are matched as tc matches them (a prefix of the keyword, in tc's order: `ip_p`
//! is `ip_proto`). What tc refuses is refused with tc's message (iproute2's tc/f_flower.c,
//! tc_filter.c and the action modules), prefixed with the line and column; what weir does
//! not support is named. A rule without `prio` gets one as the kernel picks it
//! (`tcf_auto_prio`): 49152 for the first of its chain, else one less than the chain's
//! lowest priority number so far, so such a rule goes before the earlier ones.

use crate::key::{field, Key, Need, FLAG_FIRSTFRAG, FLAG_FRAG};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use weir_packet::{ethertype, ipproto};

/// `protocol all`.
pub const ETH_P_ALL: u16 = 0x0003;
/// The priority the kernel gives the first rule of a chain without `prio`.
pub const AUTO_PRIO_FIRST: u32 = 0xc000;

/// A parse or check failure: where (1-based line and column of the token) and tc's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for RuleError {}

/// An Ethernet address with its mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacMask {
    pub addr: [u8; 6],
    pub mask: [u8; 6],
}

/// An address and a prefix length (tc takes contiguous masks only, as prefixes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpPrefix {
    pub addr: IpAddr,
    pub len: u8,
}

/// A port match: `80`, `80/0xff00` or `1024-2047`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortMatch {
    Exact(u16),
    Masked(u16, u16),
    Range(u16, u16),
}

/// One flower match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    Indev(String),
    DstMac(MacMask),
    SrcMac(MacMask),
    VlanId(u16),
    VlanPrio(u8),
    VlanEthType(u16),
    CvlanId(u16),
    CvlanPrio(u8),
    CvlanEthType(u16),
    IpProto(u8),
    IpTos(u8, u8),
    IpTtl(u8, u8),
    SrcIp(IpPrefix),
    DstIp(IpPrefix),
    SrcPort(PortMatch),
    DstPort(PortMatch),
    TcpFlags(u16, u16),
    /// `ip_flags`: value and mask over [`FLAG_FRAG`] and [`FLAG_FIRSTFRAG`].
    IpFlags(u8, u8),
    IcmpType(u8, u8),
    IcmpCode(u8, u8),
    ArpTip(IpPrefix),
    ArpSip(IpPrefix),
    ArpOp(u8, u8),
    ArpSha(MacMask),
    ArpTha(MacMask),
    MplsLabel(u32),
    MplsTc(u8),
    MplsBos(u8),
    MplsTtl(u8),
}

/// What happens after an action (tc's `CONTROL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Control {
    /// `pass`/`ok`: stop, accept.
    Ok,
    /// `drop`/`shot`.
    Drop,
    /// On to the next action.
    Pipe,
    /// Stop the actions; classification goes on with the next rule of the chain.
    Continue,
    /// Classification starts again at chain 0.
    Reclassify,
    /// `goto chain N`.
    Goto(u32),
}

/// One `pedit ex munge` clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Munge {
    pub field: PeditField,
    pub add: bool,
    /// The value, right-aligned in the field's bytes (addresses as bytes).
    pub value: [u8; 16],
}

/// The header fields `pedit ex munge` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeditField {
    EthDst,
    EthSrc,
    EthType,
    IpSrc,
    IpDst,
    IpTos,
    IpTtl,
    IpProtocol,
    Ip6Src,
    Ip6Dst,
    Ip6TrafficClass,
    Ip6FlowLbl,
    Ip6PayloadLen,
    Ip6NextHdr,
    Ip6HopLimit,
    TcpSport,
    TcpDport,
    TcpFlags,
    UdpSport,
    UdpDport,
}

/// The header a pedit field is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeditHeader {
    Eth,
    Ip,
    Ip6,
    Tcp,
    Udp,
}

impl PeditField {
    /// (header, name, byte offset in the header, bytes, bit mask of the first/only byte
    /// group when the field is not whole bytes: (shift, width in bits)).
    pub fn layout(self) -> (PeditHeader, &'static str, usize, usize, Option<(u32, u32)>) {
        use PeditField::*;
        use PeditHeader as H;
        match self {
            EthDst => (H::Eth, "dst", 0, 6, None),
            EthSrc => (H::Eth, "src", 6, 6, None),
            EthType => (H::Eth, "type", 12, 2, None),
            IpSrc => (H::Ip, "src", 12, 4, None),
            IpDst => (H::Ip, "dst", 16, 4, None),
            IpTos => (H::Ip, "tos", 1, 1, None),
            IpTtl => (H::Ip, "ttl", 8, 1, None),
            IpProtocol => (H::Ip, "protocol", 9, 1, None),
            Ip6Src => (H::Ip6, "src", 8, 16, None),
            Ip6Dst => (H::Ip6, "dst", 24, 16, None),
            Ip6TrafficClass => (H::Ip6, "traffic_class", 0, 4, Some((20, 8))),
            Ip6FlowLbl => (H::Ip6, "flow_lbl", 0, 4, Some((0, 20))),
            Ip6PayloadLen => (H::Ip6, "payload_len", 4, 2, None),
            Ip6NextHdr => (H::Ip6, "nexthdr", 6, 1, None),
            Ip6HopLimit => (H::Ip6, "hoplimit", 7, 1, None),
            TcpSport => (H::Tcp, "sport", 0, 2, None),
            TcpDport => (H::Tcp, "dport", 2, 2, None),
            TcpFlags => (H::Tcp, "flags", 13, 1, None),
            UdpSport => (H::Udp, "sport", 0, 2, None),
            UdpDport => (H::Udp, "dport", 2, 2, None),
        }
    }

    const ALL: [PeditField; 20] = [
        PeditField::EthDst,
        PeditField::EthSrc,
        PeditField::EthType,
        PeditField::IpSrc,
        PeditField::IpDst,
        PeditField::IpTos,
        PeditField::IpTtl,
        PeditField::IpProtocol,
        PeditField::Ip6Src,
        PeditField::Ip6Dst,
        PeditField::Ip6TrafficClass,
        PeditField::Ip6FlowLbl,
        PeditField::Ip6PayloadLen,
        PeditField::Ip6NextHdr,
        PeditField::Ip6HopLimit,
        PeditField::TcpSport,
        PeditField::TcpDport,
        PeditField::TcpFlags,
        PeditField::UdpSport,
        PeditField::UdpDport,
    ];
}

impl PeditHeader {
    fn name(self) -> &'static str {
        match self {
            PeditHeader::Eth => "eth",
            PeditHeader::Ip => "ip",
            PeditHeader::Ip6 => "ip6",
            PeditHeader::Tcp => "tcp",
            PeditHeader::Udp => "udp",
        }
    }
}

/// `csum` targets (bits).
pub mod csum {
    pub const IPV4_HEADER: u8 = 1;
    pub const ICMP: u8 = 2;
    pub const TCP: u8 = 4;
    pub const UDP: u8 = 8;
}

/// One action, without its control.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ActionKind {
    /// gact: the control is the whole action.
    Gact,
    Mirred {
        redirect: bool,
        dev: String,
    },
    VlanPop,
    VlanPush {
        id: u16,
        prio: Option<u8>,
        tpid: u16,
    },
    VlanModify {
        id: u16,
        prio: Option<u8>,
        tpid: u16,
    },
    Pedit(Vec<Munge>),
    Csum(u8),
    SkbeditMark {
        mark: u32,
        mask: Option<u32>,
    },
}

/// An action and its control as written (`None`: the action's default).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Action {
    pub kind: ActionKind,
    pub control: Option<Control>,
}

impl Action {
    /// The control that applies: as written, else tc's default for the action (gact has
    /// none: it is the control; mirred redirect stops, as `stolen`, which is `Ok` here with
    /// the packet gone to the device; mirror, vlan and skbedit pipe; pedit and csum pass).
    pub fn effective_control(&self) -> Control {
        if let Some(c) = self.control {
            return c;
        }
        match &self.kind {
            ActionKind::Gact => Control::Ok,
            ActionKind::Mirred { redirect: true, .. } => Control::Ok,
            ActionKind::Mirred { redirect: false, .. }
            | ActionKind::VlanPop
            | ActionKind::VlanPush { .. }
            | ActionKind::VlanModify { .. }
            | ActionKind::SkbeditMark { .. } => Control::Pipe,
            ActionKind::Pedit(_) | ActionKind::Csum(_) => Control::Ok,
        }
    }

    pub fn drop() -> Action {
        Action { kind: ActionKind::Gact, control: Some(Control::Drop) }
    }
    pub fn pass() -> Action {
        Action { kind: ActionKind::Gact, control: Some(Control::Ok) }
    }
    pub fn goto_chain(n: u32) -> Action {
        Action { kind: ActionKind::Gact, control: Some(Control::Goto(n)) }
    }
    pub fn redirect(dev: &str) -> Action {
        Action { kind: ActionKind::Mirred { redirect: true, dev: dev.into() }, control: None }
    }
    pub fn mirror(dev: &str) -> Action {
        Action { kind: ActionKind::Mirred { redirect: false, dev: dev.into() }, control: None }
    }
}

/// One flower rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// 1-based line in its file (for the API: the position it was added at).
    pub line: usize,
    /// The priority as written.
    pub prio: Option<u32>,
    pub chain: u32,
    pub handle: Option<u32>,
    /// An EtherType, or [`ETH_P_ALL`].
    pub protocol: u16,
    pub matches: Vec<Match>,
    pub actions: Vec<Action>,
}

impl Rule {
    /// A rule matching every packet of `protocol`, with no actions yet (a rule without
    /// actions passes the packets it matches, as a flower filter without actions does).
    pub fn new(protocol: u16) -> Rule {
        Rule {
            line: 0,
            prio: None,
            chain: 0,
            handle: None,
            protocol,
            matches: Vec::new(),
            actions: Vec::new(),
        }
    }
    pub fn prio(mut self, prio: u32) -> Rule {
        self.prio = Some(prio);
        self
    }
    pub fn chain(mut self, chain: u32) -> Rule {
        self.chain = chain;
        self
    }
    pub fn with(mut self, m: Match) -> Rule {
        self.matches.push(m);
        self
    }
    pub fn action(mut self, a: Action) -> Rule {
        self.actions.push(a);
        self
    }

    /// tc's checks that depend on the order of the matches (`ip_proto` needs protocol ip
    /// or ipv6, ports need `ip_proto` before them, ...): the index of the offending match
    /// and tc's message.
    pub fn check(&self) -> Result<(), (usize, String)> {
        let tc_proto = self.protocol;
        let mut eth_type = tc_proto;
        let mut vlan_ethtype: u16 = 0;
        let mut ip_proto: u8 = 0xff;
        let is_vlan = |t: u16| t == ethertype::VLAN_8021Q || t == ethertype::VLAN_8021AD;
        let is_arp = |t: u16| t == ethertype::ARP || t == ethertype::REVARP;
        let is_mpls = |t: u16| t == ethertype::MPLS || t == ethertype::MPLS_MULTI;
        let ip_family_ok = |t: u16, v4: bool| match t {
            ethertype::IP => v4,
            ethertype::IPV6 => !v4,
            ETH_P_ALL => true,
            _ => false,
        };
        for (i, m) in self.matches.iter().enumerate() {
            let fail = |msg: &str| Err((i, msg.to_string()));
            match m {
                Match::Indev(_) | Match::DstMac(_) | Match::SrcMac(_) => {}
                Match::IpTos(..) | Match::IpTtl(..) | Match::TcpFlags(..) | Match::IpFlags(..) => {}
                Match::VlanId(_) if !is_vlan(tc_proto) => {
                    return fail("Can't set \"vlan_id\" if ethertype isn't 802.1Q or 802.1AD")
                }
                Match::VlanPrio(_) if !is_vlan(tc_proto) => {
                    return fail("Can't set \"vlan_prio\" if ethertype isn't 802.1Q or 802.1AD")
                }
                Match::VlanId(_) | Match::VlanPrio(_) => {}
                Match::VlanEthType(t) => {
                    if !is_vlan(eth_type) {
                        return fail(
                            "Can't set \"vlan_ethtype\" if ethertype isn't 802.1Q or 802.1AD",
                        );
                    }
                    vlan_ethtype = *t;
                    eth_type = *t;
                }
                Match::CvlanId(_) | Match::CvlanPrio(_) if !is_vlan(vlan_ethtype) => {
                    let name =
                        if matches!(m, Match::CvlanId(_)) { "cvlan_id" } else { "cvlan_prio" };
                    return Err((
                        i,
                        format!(
                            "Can't set \"{name}\" if inner vlan ethertype isn't 802.1Q or 802.1AD"
                        ),
                    ));
                }
                Match::CvlanId(_) | Match::CvlanPrio(_) => {}
                Match::CvlanEthType(t) => {
                    if !is_vlan(vlan_ethtype) {
                        return fail(
                            "Can't set \"cvlan_ethtype\" if ethertype isn't 802.1Q or 802.1AD",
                        );
                    }
                    eth_type = *t;
                }
                Match::MplsLabel(_) | Match::MplsTc(_) | Match::MplsBos(_) | Match::MplsTtl(_) => {
                    if !is_mpls(eth_type) {
                        let name = match m {
                            Match::MplsLabel(_) => "mpls_label",
                            Match::MplsTc(_) => "mpls_tc",
                            Match::MplsBos(_) => "mpls_bos",
                            _ => "mpls_ttl",
                        };
                        return Err((i, format!("Can't set \"{name}\" if ethertype isn't MPLS")));
                    }
                }
                Match::IpProto(p) => {
                    if eth_type != ethertype::IP && eth_type != ethertype::IPV6 {
                        return fail("Illegal \"eth_type\" for ip proto\nIllegal \"ip_proto\"");
                    }
                    ip_proto = *p;
                }
                Match::SrcIp(a) | Match::DstIp(a) => {
                    // The names only on the way out: every insert runs this (flow-insert-4).
                    if !ip_family_ok(eth_type, a.addr.is_ipv4()) {
                        let name = if matches!(m, Match::SrcIp(_)) { "src_ip" } else { "dst_ip" };
                        let known = matches!(eth_type, ethertype::IP | ethertype::IPV6);
                        let why = if known { "Illegal \"eth_type\" for ip address\n" } else { "" };
                        return Err((i, format!("{why}Illegal \"{name}\"")));
                    }
                }
                Match::SrcPort(p) | Match::DstPort(p) => {
                    let name =
                        || if matches!(m, Match::SrcPort(_)) { "src_port" } else { "dst_port" };
                    let l4 = matches!(ip_proto, ipproto::TCP | ipproto::UDP | ipproto::SCTP);
                    if let PortMatch::Range(lo, hi) = p {
                        if hi <= lo {
                            let name = name();
                            return Err((
                                i,
                                format!("max value should be greater than min value\nIllegal \"{name}\""),
                            ));
                        }
                    }
                    if !l4 {
                        let name = name();
                        return Err((i, format!("Illegal \"{name}\"")));
                    }
                }
                Match::IcmpType(..) | Match::IcmpCode(..) => {
                    let ok = (eth_type == ethertype::IP && ip_proto == ipproto::ICMP)
                        || (eth_type == ethertype::IPV6 && ip_proto == ipproto::ICMPV6);
                    if !ok {
                        let name = if matches!(m, Match::IcmpType(..)) { "type" } else { "code" };
                        return Err((i, format!("Illegal \"icmp {name}\"")));
                    }
                }
                Match::ArpTip(_) | Match::ArpSip(_) | Match::ArpOp(..) => {
                    if !is_arp(eth_type) {
                        let name = match m {
                            Match::ArpTip(_) => "arp_tip",
                            Match::ArpSip(_) => "arp_sip",
                            _ => "arp_op",
                        };
                        return Err((i, format!("Illegal \"{name}\"")));
                    }
                }
                Match::ArpSha(_) | Match::ArpTha(_) => {}
            }
        }
        // tc's icmp/icmpv6 names also check the family; numbers do not.
        Ok(())
    }

    /// The rule as a (value, mask) pair over the flow key, with port ranges apart.
    /// `indev` resolves an `indev` name to the id extraction is given.
    pub fn compile(&self, indev: &mut dyn FnMut(&str) -> u32) -> Compiled {
        let mut c = Compiled::default();
        let (k, m) = (&mut c.key, &mut c.mask);
        let mut put = |fld: crate::key::Field, val: &[u8], mask: &[u8]| {
            k.set(fld, val);
            m.set(fld, mask);
        };
        let is_vlan = |t: u16| t == ethertype::VLAN_8021Q || t == ethertype::VLAN_8021AD;
        if self.protocol != ETH_P_ALL {
            if is_vlan(self.protocol) {
                put(field::VLAN_TPID, &self.protocol.to_be_bytes(), &[0xff; 2]);
                let vlan_eth = self.matches.iter().find_map(|m| match m {
                    Match::VlanEthType(t) => Some(*t),
                    _ => None,
                });
                if let Some(t) = vlan_eth {
                    if is_vlan(t) {
                        put(field::CVLAN_TPID, &t.to_be_bytes(), &[0xff; 2]);
                        let inner = self.matches.iter().find_map(|m| match m {
                            Match::CvlanEthType(t) => Some(*t),
                            _ => None,
                        });
                        if let Some(t) = inner {
                            put(field::ETH_TYPE, &t.to_be_bytes(), &[0xff; 2]);
                        }
                    } else {
                        put(field::ETH_TYPE, &t.to_be_bytes(), &[0xff; 2]);
                    }
                }
            } else {
                put(field::ETH_TYPE, &self.protocol.to_be_bytes(), &[0xff; 2]);
            }
        }
        let mut flags_v = 0u8;
        let mut flags_m = 0u8;
        let prefix4 = |len: u8| -> [u8; 4] {
            (u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)).to_be_bytes()
        };
        let prefix16 = |len: u8| -> [u8; 16] {
            (u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)).to_be_bytes()
        };
        for mt in &self.matches {
            match mt {
                Match::Indev(name) => put(field::INDEV, &indev(name).to_be_bytes(), &[0xff; 4]),
                Match::DstMac(a) => put(field::DST_MAC, &a.addr, &a.mask),
                Match::SrcMac(a) => put(field::SRC_MAC, &a.addr, &a.mask),
                Match::VlanId(v) => put(field::VLAN_ID, &v.to_be_bytes(), &0x0fffu16.to_be_bytes()),
                Match::VlanPrio(v) => put(field::VLAN_PRIO, &[*v], &[7]),
                Match::CvlanId(v) => {
                    put(field::CVLAN_ID, &v.to_be_bytes(), &0x0fffu16.to_be_bytes())
                }
                Match::CvlanPrio(v) => put(field::CVLAN_PRIO, &[*v], &[7]),
                Match::VlanEthType(_) | Match::CvlanEthType(_) => {}
                Match::IpProto(p) => put(field::IP_PROTO, &[*p], &[0xff]),
                Match::IpTos(v, mk) => put(field::IP_TOS, &[*v], &[*mk]),
                Match::IpTtl(v, mk) => put(field::IP_TTL, &[*v], &[*mk]),
                Match::SrcIp(a) | Match::DstIp(a) => {
                    let src = matches!(mt, Match::SrcIp(_));
                    match a.addr {
                        IpAddr::V4(v4) => {
                            let fl = if src { field::IPV4_SRC } else { field::IPV4_DST };
                            put(fl, &v4.octets(), &prefix4(a.len));
                            flags_v = (flags_v & !ADDR_BITS) | ADDR_V4;
                        }
                        IpAddr::V6(v6) => {
                            let fl = if src { field::IPV6_SRC } else { field::IPV6_DST };
                            put(fl, &v6.octets(), &prefix16(a.len));
                            flags_v = (flags_v & !ADDR_BITS) | ADDR_V6;
                        }
                    }
                    flags_m |= ADDR_BITS;
                }
                Match::SrcPort(p) | Match::DstPort(p) => {
                    let src = matches!(mt, Match::SrcPort(_));
                    let fl = if src { field::SRC_PORT } else { field::DST_PORT };
                    match *p {
                        PortMatch::Exact(v) => put(fl, &v.to_be_bytes(), &[0xff; 2]),
                        PortMatch::Masked(v, mk) => put(fl, &v.to_be_bytes(), &mk.to_be_bytes()),
                        PortMatch::Range(lo, hi) => {
                            if src {
                                c.src_range = Some((lo, hi));
                            } else {
                                c.dst_range = Some((lo, hi));
                            }
                        }
                    }
                }
                Match::TcpFlags(v, mk) => {
                    put(field::TCP_FLAGS, &v.to_be_bytes(), &mk.to_be_bytes())
                }
                Match::IpFlags(v, mk) => {
                    flags_v = (flags_v & !mk) | (v & mk);
                    flags_m |= mk;
                }
                Match::IcmpType(v, mk) => put(field::ICMP_TYPE, &[*v], &[*mk]),
                Match::IcmpCode(v, mk) => put(field::ICMP_CODE, &[*v], &[*mk]),
                Match::ArpTip(a) | Match::ArpSip(a) => {
                    let fl = if matches!(mt, Match::ArpTip(_)) {
                        field::ARP_TIP
                    } else {
                        field::ARP_SIP
                    };
                    if let IpAddr::V4(v4) = a.addr {
                        put(fl, &v4.octets(), &prefix4(a.len));
                    }
                }
                Match::ArpOp(v, mk) => put(field::ARP_OP, &[*v], &[*mk]),
                Match::ArpSha(a) => put(field::ARP_SHA, &a.addr, &a.mask),
                Match::ArpTha(a) => put(field::ARP_THA, &a.addr, &a.mask),
                Match::MplsLabel(v) => {
                    put(field::MPLS_LABEL, &v.to_be_bytes(), &0x000f_ffffu32.to_be_bytes())
                }
                Match::MplsTc(v) => put(field::MPLS_TC, &[*v], &[7]),
                Match::MplsBos(v) => put(field::MPLS_BOS, &[*v], &[1]),
                Match::MplsTtl(v) => put(field::MPLS_TTL, &[*v], &[0xff]),
            }
        }
        if flags_m != 0 {
            put(field::FLAGS, &[flags_v], &[flags_m]);
        }
        c.key = c.key.and(&c.mask);
        let mut need = Need::of_mask(&c.mask);
        if c.src_range.is_some() || c.dst_range.is_some() {
            need = need.union(Need::ALL);
        }
        c.need = need;
        c
    }
}

/// Bits of [`field::FLAGS`] that say which address key the dissector filled (the kernel's
/// `control.addr_type`, which flower matches exactly when a rule has IP addresses).
pub const ADDR_V4: u8 = 4;
pub const ADDR_V6: u8 = 8;
pub const ADDR_BITS: u8 = ADDR_V4 | ADDR_V6;

/// A rule as the classifiers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Compiled {
    /// Already masked.
    pub key: Key,
    pub mask: Key,
    /// Inclusive port ranges, checked apart from the mask.
    pub src_range: Option<(u16, u16)>,
    pub dst_range: Option<(u16, u16)>,
    pub need: Need,
}

impl Compiled {
    /// Whether each port has a range (with the mask, a subtable's identity).
    #[inline]
    pub fn range_flags(&self) -> (bool, bool) {
        (self.src_range.is_some(), self.dst_range.is_some())
    }
}

/// A rule's port ranges, checked apart from the mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ranges {
    pub src: Option<(u16, u16)>,
    pub dst: Option<(u16, u16)>,
}

impl Ranges {
    #[inline]
    pub fn hold(&self, key: &Key) -> bool {
        let ok = |r: Option<(u16, u16)>, fl| match r {
            None => true,
            Some((lo, hi)) => {
                let v = key.get_u16(fl);
                lo <= v && v <= hi
            }
        };
        ok(self.src, field::SRC_PORT) && ok(self.dst, field::DST_PORT)
    }
}

impl Compiled {
    pub fn ranges(&self) -> Ranges {
        Ranges { src: self.src_range, dst: self.dst_range }
    }

    /// Whether a packet's key matches.
    pub fn matches(&self, key: &Key) -> bool {
        key.and(&self.mask) == self.key && self.ranges_hold(key)
    }
    #[inline]
    pub fn ranges_hold(&self, key: &Key) -> bool {
        self.ranges().hold(key)
    }
}

/// A rule file: rules in order, with the priorities the kernel would give them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
    /// `prios[i]`: rule `i`'s priority (as written, or as the kernel picks it).
    pub prios: Vec<u32>,
}

impl RuleSet {
    pub fn new() -> RuleSet {
        RuleSet::default()
    }

    /// Parse a whole file.
    pub fn parse(text: &str) -> Result<RuleSet, RuleError> {
        let mut set = RuleSet::new();
        for (i, line) in text.lines().enumerate() {
            let content = line.split('#').next().unwrap_or("");
            if content.trim().is_empty() {
                continue;
            }
            let rule = parse_rule(content, i + 1)?;
            set.push(rule).map_err(|e| RuleError { line: i + 1, ..e })?;
        }
        Ok(set)
    }

    /// Add a rule (checked as tc checks it). Its `line` is kept when set, else its
    /// position. The error's line is the rule's; its column 0 when it has no text.
    pub fn push(&mut self, mut rule: Rule) -> Result<(), RuleError> {
        if rule.line == 0 {
            rule.line = self.rules.len() + 1;
        }
        if let Err((_, message)) = rule.check() {
            return Err(RuleError { line: rule.line, column: 0, message });
        }
        for a in &rule.actions {
            if let ActionKind::Mirred { dev, .. } = &a.kind {
                check_dev(dev).map_err(|message| RuleError {
                    line: rule.line,
                    column: 0,
                    message,
                })?;
            }
        }
        let prio = match rule.prio {
            Some(p) => p,
            None => {
                let lowest = self
                    .rules
                    .iter()
                    .zip(&self.prios)
                    .filter(|(r, _)| r.chain == rule.chain)
                    .map(|(_, &p)| p)
                    .min();
                match lowest {
                    None => AUTO_PRIO_FIRST,
                    Some(p) if p > 1 => p - 1,
                    Some(_) => {
                        return Err(RuleError {
                            line: rule.line,
                            column: 0,
                            message: "no priority left below 1 for a rule without \"prio\"".into(),
                        })
                    }
                }
            }
        };
        self.rules.push(rule);
        self.prios.push(prio);
        Ok(())
    }

    /// The devices `mirred` sends to, in order of first mention.
    pub fn devices(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in &self.rules {
            for a in &r.actions {
                if let ActionKind::Mirred { dev, .. } = &a.kind {
                    if !out.contains(dev) {
                        out.push(dev.clone());
                    }
                }
            }
        }
        out
    }

    /// `indev` names, in order of first mention: id `i + 1` each (0: no device).
    pub fn indevs(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in &self.rules {
            for m in &r.matches {
                if let Match::Indev(d) = m {
                    if !out.contains(d) {
                        out.push(d.clone());
                    }
                }
            }
        }
        out
    }

    /// Every rule compiled, with `indev` names as [`RuleSet::indevs`] numbers them.
    pub fn compile(&self) -> Vec<Compiled> {
        let indevs = self.indevs();
        let mut id = |name: &str| indevs.iter().position(|d| d == name).map_or(0, |i| i as u32 + 1);
        self.rules.iter().map(|r| r.compile(&mut id)).collect()
    }
}

impl fmt::Display for RuleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.rules {
            writeln!(f, "{r}")?;
        }
        Ok(())
    }
}

/// A device name as tc's `check_ifname` takes it (and one weir can make a file of:
/// `pass` is the file of passed packets).
pub(crate) fn check_dev(dev: &str) -> Result<(), String> {
    let ok = !dev.is_empty()
        && dev.len() < 16
        && dev != "."
        && dev != ".."
        && dev.chars().all(|c| !c.is_whitespace() && c != '/' && c != ':');
    if !ok {
        return Err(format!("Error: argument \"{dev}\" is wrong: \"dev\" not a valid ifname"));
    }
    if dev == "pass" {
        return Err("device \"pass\": weir writes passed packets to pass.pcap; rename it".into());
    }
    Ok(())
}

// ---------------------------------------------------------------- parsing

struct Cursor<'a> {
    toks: Vec<(usize, &'a str)>,
    pos: usize,
    line: usize,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str, line: usize) -> Cursor<'a> {
        let mut toks = Vec::new();
        let mut start = None;
        for (i, ch) in text.char_indices() {
            if ch.is_whitespace() {
                if let Some(s) = start.take() {
                    toks.push((s, &text[s..i]));
                }
            } else if start.is_none() {
                start = Some(i);
            }
        }
        if let Some(s) = start {
            toks.push((s, &text[s..]));
        }
        Cursor { toks, pos: 0, line }
    }
    fn peek(&self) -> Option<&'a str> {
        self.toks.get(self.pos).map(|t| t.1)
    }
    fn column(&self) -> usize {
        match self.toks.get(self.pos) {
            Some(t) => t.0 + 1,
            None => self.toks.last().map_or(1, |t| t.0 + t.1.len() + 1),
        }
    }
    fn err<T>(&self, message: impl Into<String>) -> Result<T, RuleError> {
        Err(RuleError { line: self.line, column: self.column(), message: message.into() })
    }
    fn next(&mut self) -> Option<&'a str> {
        let t = self.peek();
        if t.is_some() {
            self.pos += 1;
        }
        t
    }
    /// The argument of the keyword just taken; tc's NEXT_ARG message when missing.
    fn arg(&mut self, keyword: &str) -> Result<&'a str, RuleError> {
        match self.next() {
            Some(t) => Ok(t),
            None => self.err(format!(
                "Command line is not complete. Try option \"help\" (after \"{keyword}\")"
            )),
        }
    }
}

/// tc's `matches(arg, keyword)`: `arg` is a non-empty prefix of `keyword`.
fn tc_matches(arg: &str, keyword: &str) -> bool {
    !arg.is_empty() && keyword.starts_with(arg)
}

/// C's strtoul-style unsigned parse with base 0 (0x hex, leading 0 octal), 10 or 16.
fn parse_num(s: &str, base: u32) -> Option<u64> {
    let (digits, radix) = match base {
        0 => {
            if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                (h, 16)
            } else if s.len() > 1 && s.starts_with('0') {
                (&s[1..], 8)
            } else {
                (s, 10)
            }
        }
        16 => (s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s), 16),
        b => (s, b),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

fn num<T: TryFrom<u64>>(s: &str, base: u32) -> Option<T> {
    parse_num(s, base).and_then(|v| T::try_from(v).ok())
}

/// EtherType names as iproute2's `ll_proto_a2n` knows them (those flower rules use), or a
/// number (base 0).
pub fn parse_protocol(s: &str) -> Option<u16> {
    let named = PROTO_NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(s)).map(|(_, v)| *v);
    named.or_else(|| num::<u16>(s, 0))
}

const PROTO_NAMES: &[(&str, u16)] = &[
    ("all", ETH_P_ALL),
    ("ip", ethertype::IP),
    ("ipv4", ethertype::IP),
    ("ipv6", ethertype::IPV6),
    ("arp", ethertype::ARP),
    ("rarp", ethertype::REVARP),
    ("802.1Q", ethertype::VLAN_8021Q),
    ("802.1ad", ethertype::VLAN_8021AD),
    ("mpls_uc", ethertype::MPLS),
    ("mpls_mc", ethertype::MPLS_MULTI),
];

/// The name tc prints for an EtherType.
pub fn protocol_name(p: u16) -> String {
    match p {
        ETH_P_ALL => "all".into(),
        ethertype::IP => "ip".into(),
        ethertype::IPV6 => "ipv6".into(),
        ethertype::ARP => "arp".into(),
        ethertype::REVARP => "rarp".into(),
        ethertype::VLAN_8021Q => "802.1Q".into(),
        ethertype::VLAN_8021AD => "802.1ad".into(),
        ethertype::MPLS => "mpls_uc".into(),
        ethertype::MPLS_MULTI => "mpls_mc".into(),
        other => format!("0x{other:04x}"),
    }
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return None;
    }
    let mut out = [0u8; 6];
    for (o, p) in out.iter_mut().zip(parts) {
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *o = u8::from_str_radix(p, 16).ok()?;
    }
    Some(out)
}

fn parse_mac_mask(s: &str) -> Option<MacMask> {
    let (a, m) = match s.split_once('/') {
        Some((a, m)) => (a, Some(m)),
        None => (s, None),
    };
    let addr = parse_mac(a)?;
    let mask = match m {
        None => [0xff; 6],
        Some(m) => match num::<u32>(m, 10) {
            Some(bits) if bits <= 48 => {
                let v: u64 = if bits == 0 { 0 } else { (u64::MAX << (64 - bits)) >> 16 };
                let b = v.to_be_bytes();
                [b[2], b[3], b[4], b[5], b[6], b[7]]
            }
            Some(_) => return None,
            None => parse_mac(m)?,
        },
    };
    Some(MacMask { addr, mask })
}

/// iproute2's `get_prefix` for one family (`None`: either).
fn parse_prefix(s: &str, v4_only: bool) -> Option<IpPrefix> {
    let (a, m) = match s.split_once('/') {
        Some((a, m)) => (a, Some(m)),
        None => (s, None),
    };
    let addr: IpAddr = if let Ok(v4) = a.parse::<Ipv4Addr>() {
        IpAddr::V4(v4)
    } else if v4_only {
        return None;
    } else {
        IpAddr::V6(a.parse::<Ipv6Addr>().ok()?)
    };
    let max: u8 = if addr.is_ipv4() { 32 } else { 128 };
    let len = match m {
        None => max,
        Some(m) => match num::<u8>(m, 10) {
            Some(l) if l <= max => l,
            Some(_) => return None,
            None => {
                // A dotted IPv4 mask, contiguous only (get_netmask's mask2bits).
                let mask: Ipv4Addr = m.parse().ok().filter(|_| addr.is_ipv4())?;
                let v = u32::from(mask);
                let ones = v.leading_ones();
                if v.checked_shl(ones).unwrap_or(0) != 0 {
                    return None;
                }
                ones as u8
            }
        },
    };
    Some(IpPrefix { addr, len })
}

fn parse_masked_u8(s: &str, value_base: u32, mask_base: u32) -> Option<(u8, u8)> {
    let (v, m) = match s.split_once('/') {
        Some((v, m)) => (v, Some(m)),
        None => (s, None),
    };
    let value = num::<u8>(v, value_base)?;
    let mask = match m {
        None => 0xff,
        Some(m) => num::<u8>(m, mask_base)?,
    };
    Some((value, mask))
}

fn parse_port(s: &str) -> Option<PortMatch> {
    // tc's parse_range: "A-B" or "A" in decimal; else "A/M" (base 0) through get_u16.
    let range = if let Some((a, b)) = s.split_once('-') {
        match (num::<u16>(a, 10), num::<u16>(b, 10)) {
            (Some(a), Some(b)) => Some((a, b)),
            _ => None,
        }
    } else {
        num::<u16>(s, 10).map(|a| (a, 0))
    };
    match range {
        Some((min, max)) if min != 0 && max != 0 => Some(PortMatch::Range(min, max)),
        Some((min, 0)) if min != 0 => Some(PortMatch::Exact(min)),
        Some(_) => None,
        None => {
            let (v, m) = s.split_once('/')?;
            Some(PortMatch::Masked(num::<u16>(v, 0)?, num::<u16>(m, 0)?))
        }
    }
}

fn parse_ip_flags(s: &str) -> Option<(u8, u8)> {
    let (mut v, mut m) = (0u8, 0u8);
    for tok in s.split('/').filter(|t| !t.is_empty()) {
        let (no, name) = match tok.strip_prefix("no") {
            Some(rest) => (true, rest),
            None => (false, tok),
        };
        let bit = match name {
            "frag" => FLAG_FRAG,
            "firstfrag" => FLAG_FIRSTFRAG,
            _ => return None,
        };
        if no {
            v &= !bit;
        } else {
            v |= bit;
        }
        m |= bit;
    }
    Some((v, m))
}

/// Flower's keywords in f_flower.c's order (the first that an argument is a prefix of
/// wins, as tc's `matches` does).
const FLOWER_KEYWORDS: &[&str] = &[
    "classid",
    "flowid",
    "hw_tc",
    "ip_flags",
    "verbose",
    "skip_hw",
    "skip_sw",
    "ct_state",
    "ct_zone",
    "ct_mark",
    "ct_label",
    "indev",
    "vlan_id",
    "vlan_prio",
    "vlan_ethtype",
    "cvlan_id",
    "cvlan_prio",
    "cvlan_ethtype",
    "mpls",
    "mpls_label",
    "mpls_tc",
    "mpls_bos",
    "mpls_ttl",
    "dst_mac",
    "src_mac",
    "ip_proto",
    "ip_tos",
    "ip_ttl",
    "dst_ip",
    "src_ip",
    "dst_port",
    "src_port",
    "tcp_flags",
    "type",
    "code",
    "arp_tip",
    "arp_sip",
    "arp_op",
    "arp_tha",
    "arp_sha",
    "enc_dst_ip",
    "enc_src_ip",
    "enc_key_id",
    "enc_dst_port",
    "enc_tos",
    "enc_ttl",
    "geneve_opts",
    "vxlan_opts",
    "erspan_opts",
    "action",
];

/// Parse one rule (the text after `tc filter add dev DEV ingress`).
pub fn parse_rule(text: &str, line: usize) -> Result<Rule, RuleError> {
    let mut c = Cursor::new(text, line);
    let mut rule = Rule::new(0);
    rule.line = line;
    let mut protocol = None;
    loop {
        let Some(t) = c.peek() else {
            return c.err("a rule needs \"protocol P flower ...\"");
        };
        let col = c.column();
        c.next();
        match t {
            "prio" | "pref" | "priority" => {
                let a = c.arg(t)?;
                match num::<u32>(a, 0) {
                    Some(p) if p <= 0xffff && p > 0 => rule.prio = Some(p),
                    _ => {
                        return err_at(
                            line,
                            col,
                            format!("Error: argument \"{a}\" is wrong: invalid priority value"),
                        )
                    }
                }
            }
            "chain" => {
                let a = c.arg(t)?;
                match num::<u32>(a, 0) {
                    Some(n) => rule.chain = n,
                    None => {
                        return err_at(
                            line,
                            col,
                            format!("Error: argument \"{a}\" is wrong: Illegal \"chain\""),
                        )
                    }
                }
            }
            "handle" => {
                let a = c.arg(t)?;
                match num::<u32>(a, 0) {
                    Some(h) => rule.handle = Some(h),
                    None => return err_at(line, col, "Illegal \"handle\""),
                }
            }
            "protocol" => {
                let a = c.arg(t)?;
                match parse_protocol(a) {
                    Some(p) => protocol = Some(p),
                    None => {
                        return err_at(
                            line,
                            col,
                            format!("Error: argument \"{a}\" is wrong: invalid protocol"),
                        )
                    }
                }
            }
            "flower" => break,
            "dev" | "root" | "ingress" | "egress" | "parent" | "estimator" | "block" => {
                return err_at(
                    line,
                    col,
                    format!("\"{t}\": a rule is what follows `tc filter add dev DEV ingress`"),
                )
            }
            other => {
                return err_at(
                    line,
                    col,
                    format!("filter \"{other}\" is not supported by weir (flower only)"),
                )
            }
        }
    }
    let Some(protocol) = protocol else {
        return c.err("a rule needs \"protocol P\" before \"flower\"");
    };
    rule.protocol = protocol;
    let mut match_cols: Vec<usize> = Vec::new();
    while let Some(t) = c.peek() {
        let col = c.column();
        let Some(kw) = FLOWER_KEYWORDS.iter().copied().find(|k| tc_matches(t, k)) else {
            return c.err(format!("What is \"{t}\"?"));
        };
        c.next();
        if kw == "action" {
            parse_actions(&mut c, &mut rule)?;
            break;
        }
        // Where tc looks at the protocol before the value, so does this.
        let dummy = match kw {
            "vlan_id" => Some(Match::VlanId(0)),
            "vlan_prio" => Some(Match::VlanPrio(0)),
            "cvlan_id" => Some(Match::CvlanId(0)),
            "cvlan_prio" => Some(Match::CvlanPrio(0)),
            "mpls_label" => Some(Match::MplsLabel(0)),
            "mpls_tc" => Some(Match::MplsTc(0)),
            "mpls_bos" => Some(Match::MplsBos(0)),
            "mpls_ttl" => Some(Match::MplsTtl(0)),
            "ip_proto" => Some(Match::IpProto(0)),
            "type" => Some(Match::IcmpType(0, 0)),
            "code" => Some(Match::IcmpCode(0, 0)),
            "arp_op" => Some(Match::ArpOp(0, 0)),
            "arp_tip" | "arp_sip" => {
                Some(Match::ArpTip(IpPrefix { addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED), len: 0 }))
            }
            _ => None,
        };
        if let Some(d) = dummy {
            let mut probe = rule.clone();
            probe.matches.push(d);
            if let Err((i, message)) = probe.check() {
                if i == probe.matches.len() - 1 {
                    let message = match kw {
                        "arp_sip" => message.replace("arp_tip", "arp_sip"),
                        _ => message,
                    };
                    return err_at(line, col, message);
                }
            }
        }
        let illegal = |name: &str| err_at::<Match>(line, col, format!("Illegal \"{name}\""));
        let m = match kw {
            "classid" | "flowid" | "hw_tc" | "verbose" | "skip_hw" | "skip_sw" | "mpls"
            | "geneve_opts" | "vxlan_opts" | "erspan_opts" => {
                return err_at(line, col, format!("\"{kw}\" is not supported by weir"));
            }
            k if k.starts_with("ct_") || k.starts_with("enc_") => {
                return err_at(
                    line,
                    col,
                    format!("\"{k}\" is not supported by weir (no conntrack or tunnel keys)"),
                );
            }
            "indev" => {
                let a = c.arg(kw)?;
                if check_dev(a).is_err() {
                    return err_at(
                        line,
                        col,
                        format!("Error: argument \"{a}\" is wrong: \"indev\" not a valid ifname"),
                    );
                }
                Match::Indev(a.to_string())
            }
            "ip_flags" => match parse_ip_flags(c.arg(kw)?) {
                Some((v, m)) => Match::IpFlags(v, m),
                None => illegal("ip_flags")?,
            },
            "vlan_id" | "cvlan_id" => match num::<u16>(c.arg(kw)?, 10) {
                Some(v) if v & !0xfff == 0 => {
                    if kw == "vlan_id" {
                        Match::VlanId(v)
                    } else {
                        Match::CvlanId(v)
                    }
                }
                _ => illegal(kw)?,
            },
            "vlan_prio" | "cvlan_prio" => match num::<u8>(c.arg(kw)?, 10) {
                Some(v) if v & !7 == 0 => {
                    if kw == "vlan_prio" {
                        Match::VlanPrio(v)
                    } else {
                        Match::CvlanPrio(v)
                    }
                }
                _ => illegal(kw)?,
            },
            "vlan_ethtype" | "cvlan_ethtype" => {
                let a = c.arg(kw)?;
                match parse_protocol(a) {
                    Some(p) if kw == "vlan_ethtype" => Match::VlanEthType(p),
                    Some(p) => Match::CvlanEthType(p),
                    None => {
                        return err_at(
                            line,
                            col,
                            format!("Error: argument \"{a}\" is wrong: invalid vlan_ethtype"),
                        )
                    }
                }
            }
            "mpls_label" => match num::<u32>(c.arg(kw)?, 10) {
                Some(v) if v & !0xfffff == 0 => Match::MplsLabel(v),
                _ => illegal(kw)?,
            },
            "mpls_tc" => match num::<u8>(c.arg(kw)?, 10) {
                Some(v) if v <= 7 => Match::MplsTc(v),
                _ => illegal(kw)?,
            },
            "mpls_bos" => match num::<u8>(c.arg(kw)?, 10) {
                Some(v) if v <= 1 => Match::MplsBos(v),
                _ => illegal(kw)?,
            },
            "mpls_ttl" => match num::<u8>(c.arg(kw)?, 10) {
                Some(v) => Match::MplsTtl(v),
                _ => illegal(kw)?,
            },
            "dst_mac" | "src_mac" | "arp_tha" | "arp_sha" => match parse_mac_mask(c.arg(kw)?) {
                Some(m) => match kw {
                    "dst_mac" => Match::DstMac(m),
                    "src_mac" => Match::SrcMac(m),
                    "arp_tha" => Match::ArpTha(m),
                    _ => Match::ArpSha(m),
                },
                None => illegal(kw)?,
            },
            "ip_proto" => {
                let a = c.arg(kw)?;
                let named = [
                    ("tcp", ipproto::TCP),
                    ("udp", ipproto::UDP),
                    ("sctp", ipproto::SCTP),
                    ("icmp", ipproto::ICMP),
                    ("icmpv6", ipproto::ICMPV6),
                ];
                // tc checks the family of the names icmp and icmpv6 at once.
                let eth = effective_eth_type(protocol, &rule.matches);
                match named.iter().find(|(n, _)| tc_matches(a, n)) {
                    Some((n, p)) => {
                        let bad = (*n == "icmp" && eth != ethertype::IP)
                            || (*n == "icmpv6" && eth != ethertype::IPV6);
                        if bad {
                            return err_at(
                                line,
                                col,
                                "Illegal \"eth_type\" for ip proto\nIllegal \"ip_proto\"",
                            );
                        }
                        Match::IpProto(*p)
                    }
                    None => match num::<u8>(a, 16) {
                        Some(p) => Match::IpProto(p),
                        None => illegal(kw)?,
                    },
                }
            }
            "ip_tos" | "ip_ttl" => {
                let a = c.arg(kw)?;
                let (v, m) = match a.split_once('/') {
                    Some((v, m)) => (v, Some(m)),
                    None => (a, None),
                };
                let value = num::<u8>(v, 10).or_else(|| num::<u8>(v, 16));
                let mask = match m {
                    None => Some(0xff),
                    Some(m) => num::<u8>(m, 16),
                };
                match (value, mask) {
                    (Some(v), Some(m)) if kw == "ip_tos" => Match::IpTos(v, m),
                    (Some(v), Some(m)) => Match::IpTtl(v, m),
                    _ => illegal(kw)?,
                }
            }
            "dst_ip" | "src_ip" => match parse_prefix(c.arg(kw)?, false) {
                Some(p) if kw == "dst_ip" => Match::DstIp(p),
                Some(p) => Match::SrcIp(p),
                None => illegal(kw)?,
            },
            "arp_tip" | "arp_sip" => match parse_prefix(c.arg(kw)?, true) {
                Some(p) if kw == "arp_tip" => Match::ArpTip(p),
                Some(p) => Match::ArpSip(p),
                None => illegal(kw)?,
            },
            "dst_port" | "src_port" => match parse_port(c.arg(kw)?) {
                Some(p) if kw == "dst_port" => Match::DstPort(p),
                Some(p) => Match::SrcPort(p),
                None => illegal(kw)?,
            },
            "tcp_flags" => {
                let a = c.arg(kw)?;
                let (v, m) = match a.split_once('/') {
                    Some((v, m)) => (v, Some(m)),
                    None => (a, None),
                };
                let value = num::<u16>(v, 16).filter(|v| v & !0xfff == 0);
                let mask = match m {
                    None => Some(0xfff),
                    Some(m) => num::<u16>(m, 16).filter(|v| v & !0xfff == 0),
                };
                match (value, mask) {
                    (Some(v), Some(m)) => Match::TcpFlags(v, m),
                    _ => illegal(kw)?,
                }
            }
            "type" | "code" => {
                let name = if kw == "type" { "icmp type" } else { "icmp code" };
                match parse_masked_u8(c.arg(kw)?, 10, 10) {
                    Some((v, m)) if kw == "type" => Match::IcmpType(v, m),
                    Some((v, m)) => Match::IcmpCode(v, m),
                    None => illegal(name)?,
                }
            }
            "arp_op" => {
                let a = c.arg(kw)?;
                let (v, m) = match a.split_once('/') {
                    Some((v, m)) => (v, Some(m)),
                    None => (a, None),
                };
                let value = match v {
                    "request" => Some(1),
                    "reply" => Some(2),
                    v => num::<u8>(v, 10),
                }
                .filter(|&op| op <= 2);
                let mask = match m {
                    None => Some(0xff),
                    Some(m) => num::<u8>(m, 10),
                };
                match (value, mask) {
                    (Some(v), Some(m)) => Match::ArpOp(v, m),
                    _ => illegal(kw)?,
                }
            }
            _ => return err_at(line, col, format!("What is \"{t}\"?")),
        };
        rule.matches.push(m);
        match_cols.push(col);
    }
    if let Some(t) = c.peek() {
        return c.err(format!("What is \"{t}\"?"));
    }
    if let Err((i, message)) = rule.check() {
        return err_at(line, match_cols.get(i).copied().unwrap_or(1), message);
    }
    Ok(rule)
}

fn effective_eth_type(protocol: u16, matches: &[Match]) -> u16 {
    let mut eth = protocol;
    for m in matches {
        if let Match::VlanEthType(t) | Match::CvlanEthType(t) = m {
            eth = *t;
        }
    }
    eth
}

fn err_at<T>(line: usize, column: usize, message: impl Into<String>) -> Result<T, RuleError> {
    Err(RuleError { line, column, message: message.into() })
}

/// tc's `CONTROL` words, if `t` is one.
fn parse_control(c: &mut Cursor<'_>) -> Result<Option<Control>, RuleError> {
    let Some(t) = c.peek() else { return Ok(None) };
    let ctl = match t {
        "pass" | "ok" => Control::Ok,
        "drop" | "shot" => Control::Drop,
        "pipe" => Control::Pipe,
        "continue" => Control::Continue,
        "reclassify" => Control::Reclassify,
        "goto" => {
            c.next();
            if c.peek() != Some("chain") {
                return c.err("Bad action type goto");
            }
            c.next();
            let a = c.arg("chain")?;
            match num::<u32>(a, 10) {
                Some(n) => return Ok(Some(Control::Goto(n))),
                None => return c.err("Illegal \"chain index\""),
            }
        }
        "trap" | "jump" | "stolen" | "queued" | "repeat" => {
            return c.err(format!("control \"{t}\" is not supported by weir"))
        }
        _ => return Ok(None),
    };
    c.next();
    Ok(Some(ctl))
}

fn parse_actions(c: &mut Cursor<'_>, rule: &mut Rule) -> Result<(), RuleError> {
    loop {
        let Some(kind) = c.peek() else {
            return c.err("Command line is not complete. Try option \"help\" (after \"action\")");
        };
        let action = match kind {
            "pass" | "ok" | "drop" | "shot" | "pipe" | "continue" | "reclassify" | "goto" => {
                let ctl = parse_control(c)?;
                Action { kind: ActionKind::Gact, control: ctl }
            }
            "gact" => {
                c.next();
                match parse_control(c)? {
                    Some(ctl) => Action { kind: ActionKind::Gact, control: Some(ctl) },
                    None => {
                        return c.err("bad value for gact: expected a control (pass, drop, ...)")
                    }
                }
            }
            "mirred" => {
                c.next();
                parse_mirred(c)?
            }
            "vlan" => {
                c.next();
                parse_vlan(c)?
            }
            "pedit" => {
                c.next();
                parse_pedit(c)?
            }
            "csum" => {
                c.next();
                parse_csum(c)?
            }
            "skbedit" => {
                c.next();
                parse_skbedit(c)?
            }
            other => return c.err(format!("action \"{other}\" is not supported by weir")),
        };
        rule.actions.push(action);
        match c.peek() {
            None => return Ok(()),
            Some("action") => {
                c.next();
            }
            Some(t) => return c.err(format!("What is \"{t}\"?")),
        }
    }
}

fn parse_mirred(c: &mut Cursor<'_>) -> Result<Action, RuleError> {
    match c.next() {
        Some("egress") => {}
        Some("ingress") => return c.err("mirred ingress is not supported by weir"),
        _ => return c.err("Illegal \"mirred\": expected egress"),
    }
    let redirect = match c.next() {
        Some("redirect") => true,
        Some("mirror") => false,
        _ => return c.err("bad value for mirred: expected redirect or mirror"),
    };
    if c.next() != Some("dev") {
        return c.err("bad value for mirred: expected dev");
    }
    let dev = c.arg("dev")?;
    if let Err(m) = check_dev(dev) {
        return c.err(m);
    }
    let control = parse_control(c)?;
    Ok(Action { kind: ActionKind::Mirred { redirect, dev: dev.to_string() }, control })
}

fn parse_vlan(c: &mut Cursor<'_>) -> Result<Action, RuleError> {
    let op = c.next();
    match op {
        Some("pop") => {
            let control = parse_control(c)?;
            Ok(Action { kind: ActionKind::VlanPop, control })
        }
        Some(op @ ("push" | "modify")) => {
            let (mut id, mut prio, mut tpid) = (None, None, ethertype::VLAN_8021Q);
            loop {
                match c.peek() {
                    Some("id") => {
                        c.next();
                        let a = c.arg("id")?;
                        match num::<u16>(a, 0) {
                            Some(v) if v < 4096 => id = Some(v),
                            _ => return c.err(format!("Error: argument \"{a}\" is wrong: id")),
                        }
                    }
                    Some("priority") => {
                        c.next();
                        let a = c.arg("priority")?;
                        match num::<u8>(a, 0) {
                            Some(v) if v < 8 => prio = Some(v),
                            _ => {
                                return c.err(format!("Error: argument \"{a}\" is wrong: priority"))
                            }
                        }
                    }
                    Some("protocol") => {
                        c.next();
                        let a = c.arg("protocol")?;
                        match parse_protocol(a) {
                            Some(p @ (ethertype::VLAN_8021Q | ethertype::VLAN_8021AD)) => tpid = p,
                            _ => {
                                return c.err(format!("Error: argument \"{a}\" is wrong: protocol"))
                            }
                        }
                    }
                    _ => break,
                }
            }
            let Some(id) = id else {
                return c.err(format!("vlan {op}: \"id\" is required"));
            };
            let control = parse_control(c)?;
            let kind = if op == "push" {
                ActionKind::VlanPush { id, prio, tpid }
            } else {
                ActionKind::VlanModify { id, prio, tpid }
            };
            Ok(Action { kind, control })
        }
        _ => c.err("vlan: expected pop, push or modify"),
    }
}

fn parse_pedit(c: &mut Cursor<'_>) -> Result<Action, RuleError> {
    if c.next() != Some("ex") {
        return c.err("pedit: only \"pedit ex munge ...\" is supported by weir");
    }
    let mut munges = Vec::new();
    while c.peek() == Some("munge") {
        c.next();
        let hdr = c.arg("munge")?;
        let fname = c.arg(hdr)?;
        let Some(fld) = PeditField::ALL.iter().copied().find(|f| {
            let (h, n, ..) = f.layout();
            h.name() == hdr && n == fname
        }) else {
            return c.err(format!("pedit: field \"{hdr} {fname}\" is not supported by weir"));
        };
        let add = match c.next() {
            Some("set") => false,
            Some("add") => true,
            _ => return c.err("pedit: expected set or add"),
        };
        let v = c.arg("set")?;
        let (_, _, _, len, bits) = fld.layout();
        let mut value = [0u8; 16];
        let parsed: Option<()> = (|| {
            match fld {
                PeditField::EthDst | PeditField::EthSrc => {
                    value[..6].copy_from_slice(&parse_mac(v)?)
                }
                PeditField::IpSrc | PeditField::IpDst => {
                    value[..4].copy_from_slice(&v.parse::<Ipv4Addr>().ok()?.octets())
                }
                PeditField::Ip6Src | PeditField::Ip6Dst => {
                    value.copy_from_slice(&v.parse::<Ipv6Addr>().ok()?.octets())
                }
                _ => {
                    let n = num::<u32>(v, 0)?;
                    let width = bits.map_or(len as u32 * 8, |(_, w)| w);
                    if width < 32 && n >> width != 0 {
                        return None;
                    }
                    let b = n.to_be_bytes();
                    let take = len.min(4);
                    value[..take].copy_from_slice(&b[4 - take..]);
                }
            }
            Some(())
        })();
        if parsed.is_none() {
            return c.err(format!("Illegal \"{v}\" for pedit {hdr} {fname}"));
        }
        munges.push(Munge { field: fld, add, value });
    }
    if munges.is_empty() {
        return c.err("pedit ex: expected munge");
    }
    let control = parse_control(c)?;
    Ok(Action { kind: ActionKind::Pedit(munges), control })
}

fn parse_csum(c: &mut Cursor<'_>) -> Result<Action, RuleError> {
    let mut targets = 0u8;
    while let Some(t) = c.peek() {
        let bit = if tc_matches(t, "iph") || tc_matches(t, "ip4h") || tc_matches(t, "ipv4h") {
            csum::IPV4_HEADER
        } else if tc_matches(t, "icmp") {
            csum::ICMP
        } else if tc_matches(t, "tcp") {
            csum::TCP
        } else if tc_matches(t, "udp") {
            csum::UDP
        } else if t == "and" || t == "or" {
            c.next();
            continue;
        } else if ["igmp", "udplite", "sctp"].iter().any(|k| tc_matches(t, k)) {
            return c.err(format!("csum \"{t}\" is not supported by weir"));
        } else {
            break;
        };
        targets |= bit;
        c.next();
    }
    if targets == 0 {
        return c.err("Illegal csum construct");
    }
    let control = parse_control(c)?;
    Ok(Action { kind: ActionKind::Csum(targets), control })
}

fn parse_skbedit(c: &mut Cursor<'_>) -> Result<Action, RuleError> {
    match c.next() {
        Some("mark") => {}
        Some(other) => {
            return c.err(format!("skbedit \"{other}\" is not supported by weir (mark only)"))
        }
        None => return c.err("skbedit: expected mark"),
    }
    let a = c.arg("mark")?;
    let (v, m) = match a.split_once('/') {
        Some((v, m)) => (v, Some(m)),
        None => (a, None),
    };
    let Some(mark) = num::<u32>(v, 0) else {
        return c.err("Illegal mark");
    };
    let mask = match m {
        None => None,
        Some(m) => match num::<u32>(m, 0) {
            Some(m) => Some(m),
            None => return c.err("Illegal mark mask"),
        },
    };
    let control = parse_control(c)?;
    Ok(Action { kind: ActionKind::SkbeditMark { mark, mask }, control })
}

// ---------------------------------------------------------------- printing

fn fmt_mac(a: &[u8; 6]) -> String {
    a.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

impl fmt::Display for MacMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", fmt_mac(&self.addr))?;
        if self.mask != [0xff; 6] {
            write!(f, "/{}", fmt_mac(&self.mask))?;
        }
        Ok(())
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl fmt::Display for PortMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortMatch::Exact(v) => write!(f, "{v}"),
            PortMatch::Masked(v, m) => write!(f, "{v}/0x{m:x}"),
            PortMatch::Range(a, b) => write!(f, "{a}-{b}"),
        }
    }
}

impl fmt::Display for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Match::Indev(d) => write!(f, "indev {d}"),
            Match::DstMac(m) => write!(f, "dst_mac {m}"),
            Match::SrcMac(m) => write!(f, "src_mac {m}"),
            Match::VlanId(v) => write!(f, "vlan_id {v}"),
            Match::VlanPrio(v) => write!(f, "vlan_prio {v}"),
            Match::VlanEthType(t) => write!(f, "vlan_ethtype {}", protocol_name(*t)),
            Match::CvlanId(v) => write!(f, "cvlan_id {v}"),
            Match::CvlanPrio(v) => write!(f, "cvlan_prio {v}"),
            Match::CvlanEthType(t) => write!(f, "cvlan_ethtype {}", protocol_name(*t)),
            Match::IpProto(p) => match *p {
                ipproto::TCP => f.write_str("ip_proto tcp"),
                ipproto::UDP => f.write_str("ip_proto udp"),
                ipproto::SCTP => f.write_str("ip_proto sctp"),
                ipproto::ICMP => f.write_str("ip_proto icmp"),
                ipproto::ICMPV6 => f.write_str("ip_proto icmpv6"),
                p => write!(f, "ip_proto {p:02x}"),
            },
            Match::IpTos(v, m) => write!(f, "ip_tos {v}/{m:x}"),
            Match::IpTtl(v, m) => write!(f, "ip_ttl {v}/{m:x}"),
            Match::SrcIp(p) => write!(f, "src_ip {p}"),
            Match::DstIp(p) => write!(f, "dst_ip {p}"),
            Match::SrcPort(p) => write!(f, "src_port {p}"),
            Match::DstPort(p) => write!(f, "dst_port {p}"),
            Match::TcpFlags(v, m) => write!(f, "tcp_flags 0x{v:x}/0x{m:x}"),
            Match::IpFlags(v, m) => {
                let mut parts = Vec::new();
                for (bit, name) in [(FLAG_FRAG, "frag"), (FLAG_FIRSTFRAG, "firstfrag")] {
                    if m & bit != 0 {
                        parts.push(if v & bit != 0 {
                            name.to_string()
                        } else {
                            format!("no{name}")
                        });
                    }
                }
                write!(f, "ip_flags {}", parts.join("/"))
            }
            Match::IcmpType(v, m) => write!(f, "type {v}/{m}"),
            Match::IcmpCode(v, m) => write!(f, "code {v}/{m}"),
            Match::ArpTip(p) => write!(f, "arp_tip {p}"),
            Match::ArpSip(p) => write!(f, "arp_sip {p}"),
            Match::ArpOp(v, m) => write!(f, "arp_op {v}/{m}"),
            Match::ArpSha(m) => write!(f, "arp_sha {m}"),
            Match::ArpTha(m) => write!(f, "arp_tha {m}"),
            Match::MplsLabel(v) => write!(f, "mpls_label {v}"),
            Match::MplsTc(v) => write!(f, "mpls_tc {v}"),
            Match::MplsBos(v) => write!(f, "mpls_bos {v}"),
            Match::MplsTtl(v) => write!(f, "mpls_ttl {v}"),
        }
    }
}

impl fmt::Display for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Control::Ok => f.write_str("pass"),
            Control::Drop => f.write_str("drop"),
            Control::Pipe => f.write_str("pipe"),
            Control::Continue => f.write_str("continue"),
            Control::Reclassify => f.write_str("reclassify"),
            Control::Goto(n) => write!(f, "goto chain {n}"),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ActionKind::Gact => {
                return write!(f, "{}", self.control.unwrap_or(Control::Ok));
            }
            ActionKind::Mirred { redirect, dev } => {
                let how = if *redirect { "redirect" } else { "mirror" };
                write!(f, "mirred egress {how} dev {dev}")?;
            }
            ActionKind::VlanPop => f.write_str("vlan pop")?,
            ActionKind::VlanPush { id, prio, tpid } | ActionKind::VlanModify { id, prio, tpid } => {
                let op = if matches!(self.kind, ActionKind::VlanPush { .. }) {
                    "push"
                } else {
                    "modify"
                };
                write!(f, "vlan {op} id {id}")?;
                if let Some(p) = prio {
                    write!(f, " priority {p}")?;
                }
                write!(f, " protocol {}", protocol_name(*tpid))?;
            }
            ActionKind::Pedit(munges) => {
                f.write_str("pedit ex")?;
                for m in munges {
                    let (h, name, _, len, _) = m.field.layout();
                    let how = if m.add { "add" } else { "set" };
                    write!(f, " munge {} {name} {how} ", h.name())?;
                    match m.field {
                        PeditField::EthDst | PeditField::EthSrc => {
                            let mut a = [0u8; 6];
                            a.copy_from_slice(&m.value[..6]);
                            f.write_str(&fmt_mac(&a))?;
                        }
                        PeditField::IpSrc | PeditField::IpDst => write!(
                            f,
                            "{}",
                            Ipv4Addr::new(m.value[0], m.value[1], m.value[2], m.value[3])
                        )?,
                        PeditField::Ip6Src | PeditField::Ip6Dst => {
                            write!(f, "{}", Ipv6Addr::from(m.value))?
                        }
                        _ => {
                            let take = len.min(4);
                            let mut b = [0u8; 4];
                            b[4 - take..].copy_from_slice(&m.value[..take]);
                            write!(f, "0x{:x}", u32::from_be_bytes(b))?;
                        }
                    }
                }
            }
            ActionKind::Csum(t) => {
                f.write_str("csum")?;
                let mut first = true;
                for (bit, name) in [
                    (csum::IPV4_HEADER, "ip4h"),
                    (csum::ICMP, "icmp"),
                    (csum::TCP, "tcp"),
                    (csum::UDP, "udp"),
                ] {
                    if t & bit != 0 {
                        if !first {
                            f.write_str(" and")?;
                        }
                        write!(f, " {name}")?;
                        first = false;
                    }
                }
            }
            ActionKind::SkbeditMark { mark, mask } => {
                write!(f, "skbedit mark 0x{mark:x}")?;
                if let Some(m) = mask {
                    write!(f, "/0x{m:x}")?;
                }
            }
        }
        if let Some(c) = self.control {
            write!(f, " {c}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = self.prio {
            write!(f, "prio {p} ")?;
        }
        if self.chain != 0 {
            write!(f, "chain {} ", self.chain)?;
        }
        if let Some(h) = self.handle {
            write!(f, "handle 0x{h:x} ")?;
        }
        write!(f, "protocol {} flower", protocol_name(self.protocol))?;
        for m in &self.matches {
            write!(f, " {m}")?;
        }
        for a in &self.actions {
            write!(f, " action {a}")?;
        }
        Ok(())
    }
}
