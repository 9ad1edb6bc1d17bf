//! Link-layer types weir compiles filters for, their header geometry, and the link-level
//! protocol test: what `ether proto N`, `ip`, `arp`, `iso`, `stp`, `ipx` ... mean on each link
//! type (libpcap's gen_linktype).
//!
//! Protocols are named the way libpcap names them internally, and the way the rest of the
//! lowering passes them to [`Lowerer::link_proto`]: a value above [`ETHERMTU`] is an
//! Ethernet type (`ETHERTYPE_*`), a value up to it is an 802.2 LLC SAP (`LLCSAP_*`). Each
//! link type maps that one number to its own test: the type field on Ethernet and Linux
//! cooked captures (with 802.3/802.2/SNAP variants for the LLC protocols), the IP version
//! nibble on raw IP, the address family on BSD loopback, the PPP protocol after `pppoes`.
//! Protocols a link type cannot carry give a test that is always false, as in libpcap.

use weir_filter::{CmpOp, Expr, Pred, Size};

use super::arith::displaced_offset;
use super::{CompileError, Layer, Lowerer};
use crate::ast::Span;

/// The largest 802.3 length: a type/length field up to this is a length, and an 802.2 LLC
/// header follows the MAC header.
pub(crate) const ETHERMTU: u32 = 1500;

// Ethernet types (`ETHERTYPE_*`).
pub(crate) const ETHERTYPE_IP: u32 = 0x0800;
pub(crate) const ETHERTYPE_ARP: u32 = 0x0806;
pub(crate) const ETHERTYPE_REVARP: u32 = 0x8035;
pub(crate) const ETHERTYPE_IPV6: u32 = 0x86dd;
pub(crate) const ETHERTYPE_ATALK: u32 = 0x809b;
pub(crate) const ETHERTYPE_AARP: u32 = 0x80f3;
pub(crate) const ETHERTYPE_IPX: u32 = 0x8137;
pub(crate) const ETHERTYPE_DN: u32 = 0x6003;
pub(crate) const ETHERTYPE_SCA: u32 = 0x6007;
pub(crate) const ETHERTYPE_LAT: u32 = 0x6004;
pub(crate) const ETHERTYPE_MOPDL: u32 = 0x6001;
pub(crate) const ETHERTYPE_MOPRC: u32 = 0x6002;
/// Xerox NS IDP (`ETHERTYPE_NS`); only its PPP mapping matters here.
pub(crate) const ETHERTYPE_NS: u32 = 0x0600;
/// 802.1Q customer tag.
pub(crate) const ETHERTYPE_8021Q: u32 = 0x8100;
/// 802.1ad service tag.
pub(crate) const ETHERTYPE_8021AD: u32 = 0x88a8;
/// The pre-standard QinQ tag that `vlan` also accepts.
pub(crate) const ETHERTYPE_8021QINQ: u32 = 0x9100;
pub(crate) const ETHERTYPE_MPLS: u32 = 0x8847;
pub(crate) const ETHERTYPE_PPPOED: u32 = 0x8863;
pub(crate) const ETHERTYPE_PPPOES: u32 = 0x8864;
/// Transparent Ethernet bridging: an Ethernet frame inside Geneve (or GRE).
pub(crate) const ETHERTYPE_TEB: u32 = 0x6558;

// 802.2 LLC SAPs (`LLCSAP_*`), passed where an Ethernet type would be.
/// IP over 802.2 (not over SNAP): DSAP and SSAP both 0x06.
pub(crate) const LLCSAP_IP: u32 = 0x06;
/// ISO/OSI network layer (`iso`, `clnp`, `esis`, `isis`).
pub(crate) const LLCSAP_ISONS: u32 = 0xfe;
/// NetBEUI (`netbeui`).
pub(crate) const LLCSAP_NETBEUI: u32 = 0xf0;
/// Novell IPX (`ipx`): also matches Ethernet II, raw 802.3 and SNAP encodings.
pub(crate) const LLCSAP_IPX: u32 = 0xe0;
/// 802.1D spanning tree (`stp`).
pub(crate) const LLCSAP_8021D: u32 = 0x42;
/// The SNAP SAP (`0xaa`).
pub(crate) const LLCSAP_SNAP: u32 = 0xaa;

// PPP protocol numbers (the link type after `pppoes`).
pub(crate) const PPP_IP: u32 = 0x0021;
pub(crate) const PPP_IPV6: u32 = 0x0057;
pub(crate) const PPP_DECNET: u32 = 0x0027;
pub(crate) const PPP_APPLE: u32 = 0x0029;
pub(crate) const PPP_NS: u32 = 0x0025;
pub(crate) const PPP_OSI: u32 = 0x0023;
pub(crate) const PPP_BRPDU: u32 = 0x0031;
pub(crate) const PPP_IPX: u32 = 0x002b;
/// MPLS unicast over PPP; `mpls` after `pppoes` tests for it.
pub(crate) const PPP_MPLS_UCAST: u32 = 0x0281;

/// Linux cooked captures: the protocol field holds this for frames with an 802.2 header.
const LINUX_SLL_P_802_2: u32 = 0x0004;
/// Linux cooked captures: raw 802.3 frames (Novell IPX without LLC).
const LINUX_SLL_P_802_3: u32 = 0x0001;

/// AF_INET: the same on every system.
const AF_INET: u32 = 2;
/// AF_INET6 as libpcap on Linux uses it for BSD loopback headers when it compiles for a
/// capture it did not read from a file (the oracle's case and weir's): Linux's value. BSD
/// values (24, 28, 30) are what libpcap checks only when reading a savefile.
const AF_INET6_LINUX: u32 = 10;

/// The capture link types pflang lowering supports (values are LINKTYPE_/DLT_ numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// DLT_EN10MB (1).
    Ethernet,
    /// DLT_LINUX_SLL (113).
    LinuxSll,
    /// DLT_LINUX_SLL2 (276).
    LinuxSll2,
    /// DLT_RAW (12 on most systems, 14 on some; LINKTYPE_RAW 101).
    Raw,
    /// DLT_IPV4 (228).
    Ipv4,
    /// DLT_IPV6 (229).
    Ipv6,
    /// DLT_NULL (0): BSD loopback, 4-byte address family in host byte order.
    Null,
    /// DLT_LOOP (108): BSD loopback, address family in network byte order.
    Loop,
    /// DLT_PPP (9): reached only after `pppoes`, never a capture's link type here.
    Ppp,
}

/// Where a link type keeps its fields.
pub(crate) struct Geometry {
    pub off_linktype: Option<u32>,
    pub off_linkpl: u32,
    /// Network layer relative to the link payload when an 802.2 header (without SNAP)
    /// precedes it: 3 on Ethernet (802.3 frames), 0 where there is no LLC.
    pub off_nl_nosnap: u32,
}

impl LinkType {
    /// The link type for a LINKTYPE_/DLT_ number, if weir supports it.
    pub fn from_dlt(dlt: u32) -> Option<LinkType> {
        Some(match dlt {
            1 => LinkType::Ethernet,
            113 => LinkType::LinuxSll,
            276 => LinkType::LinuxSll2,
            12 | 14 | 101 => LinkType::Raw,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            0 => LinkType::Null,
            108 => LinkType::Loop,
            _ => return None,
        })
    }

    /// The DLT_ number libpcap uses for this link type on Linux.
    pub fn dlt(self) -> u32 {
        match self {
            LinkType::Ethernet => 1,
            LinkType::LinuxSll => 113,
            LinkType::LinuxSll2 => 276,
            LinkType::Raw => 12,
            LinkType::Ipv4 => 228,
            LinkType::Ipv6 => 229,
            LinkType::Null => 0,
            LinkType::Loop => 108,
            LinkType::Ppp => 9,
        }
    }

    /// The name tcpdump's `-y` accepts.
    pub fn name(self) -> &'static str {
        match self {
            LinkType::Ethernet => "EN10MB",
            LinkType::LinuxSll => "LINUX_SLL",
            LinkType::LinuxSll2 => "LINUX_SLL2",
            LinkType::Raw => "RAW",
            LinkType::Ipv4 => "IPV4",
            LinkType::Ipv6 => "IPV6",
            LinkType::Null => "NULL",
            LinkType::Loop => "LOOP",
            LinkType::Ppp => "PPP",
        }
    }

    /// The description libpcap puts in its error messages ("no VLAN support for ...").
    pub fn description(self) -> &'static str {
        match self {
            LinkType::Ethernet => "Ethernet",
            LinkType::LinuxSll => "Linux cooked v1",
            LinkType::LinuxSll2 => "Linux cooked v2",
            LinkType::Raw => "Raw IP",
            LinkType::Ipv4 => "Raw IPv4",
            LinkType::Ipv6 => "Raw IPv6",
            LinkType::Null => "BSD loopback",
            LinkType::Loop => "OpenBSD loopback",
            LinkType::Ppp => "PPP",
        }
    }

    /// Parses a `-y` name (case-insensitive) or a number.
    pub fn from_name(name: &str) -> Option<LinkType> {
        if let Ok(n) = name.parse::<u32>() {
            return LinkType::from_dlt(n);
        }
        let upper = name.to_ascii_uppercase();
        [
            LinkType::Ethernet,
            LinkType::LinuxSll,
            LinkType::LinuxSll2,
            LinkType::Raw,
            LinkType::Ipv4,
            LinkType::Ipv6,
            LinkType::Null,
            LinkType::Loop,
        ]
        .into_iter()
        .find(|l| l.name() == upper)
    }

    pub(crate) fn geometry(self) -> Geometry {
        let (off_linktype, off_linkpl, off_nl_nosnap) = match self {
            LinkType::Ethernet => (Some(12), 14, 3),
            LinkType::LinuxSll => (Some(14), 16, 0),
            LinkType::LinuxSll2 => (Some(0), 20, 0),
            LinkType::Raw | LinkType::Ipv4 | LinkType::Ipv6 => (None, 0, 0),
            LinkType::Null | LinkType::Loop => (Some(0), 4, 0),
            LinkType::Ppp => (Some(2), 4, 0),
        };
        Geometry { off_linktype, off_linkpl, off_nl_nosnap }
    }
}

/// The PPP protocol number libpcap tests for an Ethernet type or SAP once the link is PPP
/// (after `pppoes`); numbers without a PPP counterpart are compared as they are.
pub(crate) fn ppp_protocol(proto: u32) -> u32 {
    match proto {
        ETHERTYPE_IP => PPP_IP,
        ETHERTYPE_IPV6 => PPP_IPV6,
        ETHERTYPE_DN => PPP_DECNET,
        ETHERTYPE_ATALK => PPP_APPLE,
        ETHERTYPE_NS => PPP_NS,
        LLCSAP_ISONS => PPP_OSI,
        LLCSAP_8021D => PPP_BRPDU,
        LLCSAP_IPX => PPP_IPX,
        other => other,
    }
}

impl Lowerer<'_> {
    /// The link-level test for an Ethernet type or LLC SAP (libpcap's gen_linktype), at the
    /// current position in the expression: after `mpls` it looks at the IP version behind
    /// the label stack, after `pppoes` at the PPP protocol, inside a tunnel at the inner
    /// frame.
    ///
    /// Errors only under MPLS, for anything but IPv4 and IPv6 (libpcap's message).
    pub(crate) fn link_proto(&mut self, proto: u32, span: Span) -> Result<Pred, CompileError> {
        if self.mpls_depth > 0 {
            return self.mpls_link_proto(proto, span);
        }
        Ok(match self.link {
            LinkType::Ethernet => self.ether_link_proto(proto),
            LinkType::LinuxSll => self.sll_link_proto(proto),
            LinkType::LinuxSll2 => self.type_field_is(proto),
            LinkType::Ppp => self.type_field_is(ppp_protocol(proto)),
            // No type field: the version nibble says what the packet is.
            LinkType::Raw => match proto {
                ETHERTYPE_IP => self.cmp_field(Layer::LinkHdr, 0, Size::Byte, 0xf0, 0x40),
                ETHERTYPE_IPV6 => self.cmp_field(Layer::LinkHdr, 0, Size::Byte, 0xf0, 0x60),
                _ => Pred::Const(false),
            },
            LinkType::Ipv4 => Pred::Const(proto == ETHERTYPE_IP),
            LinkType::Ipv6 => Pred::Const(proto == ETHERTYPE_IPV6),
            LinkType::Null | LinkType::Loop => {
                let family = match proto {
                    ETHERTYPE_IP => AF_INET,
                    ETHERTYPE_IPV6 => AF_INET6_LINUX,
                    _ => return Ok(Pred::Const(false)),
                };
                // DLT_NULL stores the family in the capturing host's byte order; libpcap
                // compiles for the host it runs on, and weir for the little-endian hosts
                // the oracle runs on. Loads are big-endian, hence the swap.
                let word = if self.link == LinkType::Null { family.swap_bytes() } else { family };
                self.cmp_field(Layer::LinkHdr, 0, Size::Word, u32::MAX, word)
            }
        })
    }

    /// `type field == value` (2 bytes at the link type offset).
    fn type_field_is(&self, value: u32) -> Pred {
        self.cmp_field(Layer::LinkType, 0, Size::Half, u32::MAX, value)
    }

    /// Ethernet: Ethernet II type, or an 802.3 length followed by the protocol's LLC (and
    /// possibly SNAP) encoding.
    fn ether_link_proto(&self, proto: u32) -> Pred {
        let is_8023 = || {
            Pred::cmp(CmpOp::Le, self.load(Layer::LinkType, 0, Size::Half), Expr::Const(ETHERMTU))
        };
        match proto {
            // These always use 802.2: check DSAP and SSAP together.
            LLCSAP_ISONS | LLCSAP_IP | LLCSAP_NETBEUI => Pred::and([
                is_8023(),
                self.cmp_field(Layer::LinkPayload, 0, Size::Half, u32::MAX, (proto << 8) | proto),
            ]),
            // Ethernet II, or 802.3 carrying SNAP, an IPX 802.2 header or raw IPX (0xffff).
            LLCSAP_IPX => Pred::or([
                self.type_field_is(ETHERTYPE_IPX),
                Pred::and([
                    is_8023(),
                    Pred::or([
                        self.snap_is(0x00_0000, ETHERTYPE_IPX),
                        self.cmp_field(Layer::LinkPayload, 0, Size::Byte, u32::MAX, LLCSAP_IPX),
                        self.cmp_field(Layer::LinkPayload, 0, Size::Half, u32::MAX, 0xffff),
                    ]),
                ]),
            ]),
            // EtherTalk phase 1 (Ethernet II) or phase 2 (802.3 + SNAP).
            ETHERTYPE_ATALK | ETHERTYPE_AARP => Pred::or([
                self.type_field_is(proto),
                Pred::and([is_8023(), self.snap_is(snap_org(proto), proto)]),
            ]),
            // Any other SAP: an 802.3 frame with that DSAP.
            sap if sap <= ETHERMTU => Pred::and([
                is_8023(),
                self.cmp_field(Layer::LinkType, 2, Size::Byte, u32::MAX, sap),
            ]),
            ethertype => self.type_field_is(ethertype),
        }
    }

    /// Linux cooked v1: the protocol field, with special values for 802.2 and raw 802.3.
    fn sll_link_proto(&self, proto: u32) -> Pred {
        match proto {
            LLCSAP_ISONS | LLCSAP_IP | LLCSAP_NETBEUI => Pred::and([
                self.type_field_is(LINUX_SLL_P_802_2),
                self.cmp_field(Layer::LinkPayload, 0, Size::Half, u32::MAX, (proto << 8) | proto),
            ]),
            LLCSAP_IPX => Pred::or([
                self.type_field_is(ETHERTYPE_IPX),
                self.type_field_is(LINUX_SLL_P_802_3),
                Pred::and([
                    self.type_field_is(LINUX_SLL_P_802_2),
                    Pred::or([
                        self.cmp_field(Layer::LinkPayload, 0, Size::Byte, u32::MAX, LLCSAP_IPX),
                        self.snap_is(0x00_0000, ETHERTYPE_IPX),
                    ]),
                ]),
            ]),
            ETHERTYPE_ATALK | ETHERTYPE_AARP => Pred::or([
                self.type_field_is(proto),
                Pred::and([
                    self.type_field_is(LINUX_SLL_P_802_2),
                    self.snap_is(snap_org(proto), proto),
                ]),
            ]),
            sap if sap <= ETHERMTU => Pred::and([
                self.type_field_is(LINUX_SLL_P_802_2),
                // libpcap addresses the DSAP from the link header by the payload's
                // constant offset.
                self.cmp_field(Layer::LinkHdr, self.off_linkpl.constant, Size::Byte, u32::MAX, sap),
            ]),
            ethertype => self.type_field_is(ethertype),
        }
    }

    /// After `mpls`: the bottom-of-stack bit of the last label, then the IP version.
    fn mpls_link_proto(&self, proto: u32, span: Span) -> Result<Pred, CompileError> {
        let version = match proto {
            ETHERTYPE_IP => 0x40,
            ETHERTYPE_IPV6 => 0x60,
            _ => return Err(CompileError::new(span, "unsupported protocol over mpls")),
        };
        let bottom = self.mpls_bottom_of_stack(0x01);
        Ok(Pred::and([bottom, self.cmp_field(Layer::Net, 0, Size::Byte, 0xf0, version)]))
    }

    /// `(bottom-of-stack bit of the last MPLS label) == value`: the label's third byte, 2
    /// bytes before the network header. Relative to a tunnel's variable offset the -2 is
    /// added the classic BPF way, without wrapping, so (as in libpcap) it reads out of
    /// bounds when the label stack came before the tunnel.
    pub(crate) fn mpls_bottom_of_stack(&self, value: u32) -> Pred {
        let net = self.off_linkpl.plus(self.off_nl);
        let k = net.constant.wrapping_sub(2);
        let offset = match net.variable {
            None => Expr::Const(k),
            Some(slot) => displaced_offset(Expr::Scratch(slot), k),
        };
        Pred::eq_masked(Expr::load(offset, Size::Byte), 0x01, value)
    }

    /// An 802.2 LLC + SNAP header with `org` and `ptype` at the link payload: DSAP and SSAP
    /// 0xaa, control UI (3). Compared as two words, the second first, as libpcap does.
    pub(crate) fn snap_is(&self, org: u32, ptype: u32) -> Pred {
        let head = (LLCSAP_SNAP << 24) | (LLCSAP_SNAP << 16) | (0x03 << 8) | ((org >> 16) & 0xff);
        let tail = ((org & 0xffff) << 16) | (ptype & 0xffff);
        Pred::and([
            self.cmp_field(Layer::LinkPayload, 4, Size::Word, u32::MAX, tail),
            self.cmp_field(Layer::LinkPayload, 0, Size::Word, u32::MAX, head),
        ])
    }
}

/// The SNAP organization code of the 802.2 encodings of AppleTalk (Apple) and AARP
/// (encapsulated Ethernet).
fn snap_org(proto: u32) -> u32 {
    if proto == ETHERTYPE_ATALK {
        0x08_0007
    } else {
        0x00_0000
    }
}
