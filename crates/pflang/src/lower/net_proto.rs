//! Protocol tests: the protocol keywords alone (`tcp`, `icmp6`, `isis`, ...), `[ip|ip6|ether|
//! iso|isis] proto N|NAME` and `[ip|ip6] protochain N|NAME`.
//!
//! `protochain` is the one primitive libpcap compiles to a loop: it walks the IPv6 extension
//! headers (and AH, for IPv4 too) until it finds the protocol, hits "no next header", or
//! meets something it cannot step over. It lowers to one [`weir_filter::Chain`] walk per
//! IP version, the IR's loop node, which every engine runs as a loop.

use weir_filter::{BinOp, Chain, Expr, Pred, Size};
use weir_packet::ipproto;

use super::link::{
    ETHERTYPE_AARP, ETHERTYPE_ARP, ETHERTYPE_ATALK, ETHERTYPE_DN, ETHERTYPE_IP, ETHERTYPE_IPV6,
    ETHERTYPE_LAT, ETHERTYPE_MOPDL, ETHERTYPE_MOPRC, ETHERTYPE_REVARP, ETHERTYPE_SCA, LLCSAP_8021D,
    LLCSAP_IPX, LLCSAP_ISONS, LLCSAP_NETBEUI,
};
use super::net::Site;
use super::{junction, CompileError, Layer, LinkType, Lowerer};
use crate::ast::{Dir, Proto, Span};
use crate::names;

// weir-packet's IP protocol numbers, widened to the u32 lowering compares with.
const IPPROTO_ICMP: u32 = ipproto::ICMP as u32;
const IPPROTO_IGMP: u32 = ipproto::IGMP as u32;
pub(crate) const IPPROTO_TCP: u32 = ipproto::TCP as u32;
const IPPROTO_IGRP: u32 = ipproto::IGRP as u32;
pub(crate) const IPPROTO_UDP: u32 = ipproto::UDP as u32;
const IPPROTO_FRAGMENT: u32 = ipproto::FRAGMENT as u32;
const IPPROTO_ESP: u32 = ipproto::ESP as u32;
const IPPROTO_AH: u32 = ipproto::AH as u32;
pub(crate) const IPPROTO_ICMPV6: u32 = ipproto::ICMPV6 as u32;
const IPPROTO_PIM: u32 = ipproto::PIM as u32;
/// VRRP and CARP share the number.
const IPPROTO_VRRP: u32 = ipproto::VRRP as u32;
pub(crate) const IPPROTO_SCTP: u32 = ipproto::SCTP as u32;

// OSI network-layer protocol identifiers (the first byte after the LLC header).
const ISO8473_CLNP: u32 = 0x81;
const ISO9542_ESIS: u32 = 0x82;
const ISO10589_ISIS: u32 = 0x83;

// IS-IS PDU types.
const ISIS_L1_LAN_IIH: u32 = 15;
const ISIS_L2_LAN_IIH: u32 = 16;
const ISIS_PTP_IIH: u32 = 17;
const ISIS_L1_LSP: u32 = 18;
const ISIS_L2_LSP: u32 = 20;
const ISIS_L1_CSNP: u32 = 24;
const ISIS_L2_CSNP: u32 = 25;
const ISIS_L1_PSNP: u32 = 26;
const ISIS_L2_PSNP: u32 = 27;

impl Lowerer<'_> {
    /// A protocol keyword alone: `tcp`, `ip6`, `arp`, `isis`, ... (libpcap's gen_proto_abbrev).
    pub(crate) fn proto_abbrev(&mut self, proto: Proto, span: Span) -> Result<Pred, CompileError> {
        let ip = Some(Proto::Ip);
        match proto {
            Proto::Sctp => self.proto_test(IPPROTO_SCTP, None, None, span),
            Proto::Tcp => self.proto_test(IPPROTO_TCP, None, None, span),
            Proto::Udp => self.proto_test(IPPROTO_UDP, None, None, span),
            Proto::Icmp => self.proto_test(IPPROTO_ICMP, ip, None, span),
            Proto::Igmp => self.proto_test(IPPROTO_IGMP, ip, None, span),
            Proto::Igrp => self.proto_test(IPPROTO_IGRP, ip, None, span),
            Proto::Pim => self.proto_test(IPPROTO_PIM, None, None, span),
            Proto::Vrrp | Proto::Carp => self.proto_test(IPPROTO_VRRP, ip, None, span),
            Proto::Icmp6 => self.proto_test(IPPROTO_ICMPV6, Some(Proto::Ip6), None, span),
            Proto::Ah => self.proto_test(IPPROTO_AH, None, None, span),
            Proto::Esp => self.proto_test(IPPROTO_ESP, None, None, span),
            Proto::Ip => self.link_proto(ETHERTYPE_IP, span),
            Proto::Ip6 => self.link_proto(ETHERTYPE_IPV6, span),
            Proto::Arp => self.link_proto(ETHERTYPE_ARP, span),
            Proto::Rarp => self.link_proto(ETHERTYPE_REVARP, span),
            Proto::Atalk => self.link_proto(ETHERTYPE_ATALK, span),
            Proto::Aarp => self.link_proto(ETHERTYPE_AARP, span),
            Proto::Decnet => self.link_proto(ETHERTYPE_DN, span),
            Proto::Sca => self.link_proto(ETHERTYPE_SCA, span),
            Proto::Lat => self.link_proto(ETHERTYPE_LAT, span),
            Proto::Mopdl => self.link_proto(ETHERTYPE_MOPDL, span),
            Proto::Moprc => self.link_proto(ETHERTYPE_MOPRC, span),
            Proto::Iso => self.link_proto(LLCSAP_ISONS, span),
            Proto::Esis => self.proto_test(ISO9542_ESIS, Some(Proto::Iso), None, span),
            Proto::Isis => self.proto_test(ISO10589_ISIS, Some(Proto::Iso), None, span),
            Proto::Clnp => self.proto_test(ISO8473_CLNP, Some(Proto::Iso), None, span),
            // The IS-IS groups, in the order libpcap's or-chains end up testing them.
            Proto::L1 => self.isis_types(
                &[ISIS_L1_PSNP, ISIS_L1_CSNP, ISIS_L1_LSP, ISIS_L1_LAN_IIH, ISIS_PTP_IIH],
                span,
            ),
            Proto::L2 => self.isis_types(
                &[ISIS_L2_PSNP, ISIS_L2_CSNP, ISIS_L2_LSP, ISIS_L2_LAN_IIH, ISIS_PTP_IIH],
                span,
            ),
            Proto::Iih => self.isis_types(&[ISIS_PTP_IIH, ISIS_L1_LAN_IIH, ISIS_L2_LAN_IIH], span),
            Proto::Lsp => self.isis_types(&[ISIS_L1_LSP, ISIS_L2_LSP], span),
            Proto::Snp => {
                self.isis_types(&[ISIS_L2_PSNP, ISIS_L1_PSNP, ISIS_L1_CSNP, ISIS_L2_CSNP], span)
            }
            Proto::Csnp => self.isis_types(&[ISIS_L1_CSNP, ISIS_L2_CSNP], span),
            Proto::Psnp => self.isis_types(&[ISIS_L1_PSNP, ISIS_L2_PSNP], span),
            Proto::Stp => self.link_proto(LLCSAP_8021D, span),
            Proto::Ipx => self.link_proto(LLCSAP_IPX, span),
            Proto::Netbeui => self.link_proto(LLCSAP_NETBEUI, span),
            Proto::Link => Err(CompileError::new(span, "link layer applied in wrong context")),
            Proto::Radio => Err(CompileError::new(span, "'radio' is not a valid protocol type")),
        }
    }

    /// Any of several IS-IS PDU types, tested in the order given.
    fn isis_types(&mut self, types: &[u32], span: Span) -> Result<Pred, CompileError> {
        let mut tests = Vec::with_capacity(types.len());
        for &t in types {
            tests.push(self.proto_test(t, Some(Proto::Isis), None, span)?);
        }
        Ok(Pred::or(tests))
    }

    /// `[qualifier] proto v` (libpcap's gen_proto): the protocol field of the layer the
    /// qualifier names equals `v`.
    pub(super) fn proto_test(
        &mut self,
        v: u32,
        proto: Option<Proto>,
        dir: Option<Dir>,
        span: Span,
    ) -> Result<Pred, CompileError> {
        if dir.is_some() {
            return Err(CompileError::new(span, "direction applied to 'proto'"));
        }
        let refuse = |message: String| Err(CompileError::new(span, message));
        match proto {
            None => {
                let v4 = self.proto_test(v, Some(Proto::Ip), None, span)?;
                let v6 = self.proto_test(v, Some(Proto::Ip6), None, span)?;
                // (`junction`: `Pred::or`'s tree, its list allocated once at its size.)
                Ok(junction(vec![v4, v6], false))
            }
            Some(Proto::Link) => self.link_proto(v, span),
            Some(Proto::Ip) => {
                let link = self.link_proto(ETHERTYPE_IP, span)?;
                let field = self.cmp_field(Layer::Net, 9, Size::Byte, u32::MAX, v);
                Ok(junction(vec![link, field], true))
            }
            Some(Proto::Ip6) => {
                // The next header, or the one after a fragment header.
                let link = self.link_proto(ETHERTYPE_IPV6, span)?;
                let next =
                    |s: &Self, k, value| s.cmp_field(Layer::Net, k, Size::Byte, u32::MAX, value);
                let direct = next(self, 6, v);
                let fragment = vec![next(self, 6, IPPROTO_FRAGMENT), next(self, 40, v)];
                let either = junction(vec![direct, junction(fragment, true)], false);
                Ok(junction(vec![link, either], true))
            }
            // Frame Relay's NLPID is the protocol itself: one test of control byte and NLPID.
            Some(Proto::Iso) if self.link == LinkType::FrameRelay => Ok(self.fr_nlpid_is(v)),
            Some(Proto::Iso) => {
                let link = self.link_proto(LLCSAP_ISONS, span)?;
                let nlpid = self.cmp_field(Layer::NetNoSnap, 0, Size::Byte, u32::MAX, v);
                Ok(Pred::and([link, nlpid]))
            }
            Some(Proto::Isis) => {
                let isis = self.proto_test(ISO10589_ISIS, Some(Proto::Iso), None, span)?;
                // The PDU type is the fifth byte of the IS-IS header.
                let pdu = self.cmp_field(Layer::NetNoSnap, 4, Size::Byte, u32::MAX, v);
                Ok(Pred::and([isis, pdu]))
            }
            Some(Proto::Arp) => refuse("arp does not encapsulate another protocol".into()),
            Some(Proto::Rarp) => refuse("rarp does not encapsulate another protocol".into()),
            Some(Proto::Atalk) => refuse("AppleTalk encapsulation is not specifiable".into()),
            Some(Proto::Decnet) => refuse("DECNET encapsulation is not specifiable".into()),
            Some(p @ (Proto::Lat | Proto::Sca | Proto::Moprc | Proto::Mopdl)) => refuse(format!(
                "{} does not encapsulate another protocol",
                p.keyword().to_ascii_uppercase()
            )),
            Some(Proto::Clnp) => refuse("'clnp proto' is not supported".into()),
            Some(p) => refuse(format!("'{} proto' is bogus", p.keyword())),
        }
    }

    /// The number a protocol name stands for after `proto`/`protochain`, looked up in the
    /// table the qualifier implies (libpcap's lookup_proto).
    pub(super) fn lookup_proto(
        &self,
        name: &str,
        proto: Option<Proto>,
        site: Site,
    ) -> Result<u32, CompileError> {
        match proto {
            None | Some(Proto::Ip) | Some(Proto::Ip6) => self
                .names
                .protocol(name)
                .map(u32::from)
                .ok_or_else(|| site.id(format!("unknown ip proto '{name}'"))),
            Some(Proto::Link) => names::ether_type(name)
                .map(u32::from)
                .or_else(|| names::llc_sap(name).map(u32::from))
                .ok_or_else(|| site.id(format!("unknown ether proto '{name}'"))),
            Some(Proto::Iso) => match name {
                "esis" => Ok(ISO9542_ESIS),
                "isis" => Ok(ISO10589_ISIS),
                "clnp" => Ok(ISO8473_CLNP),
                _ => Err(site.id(format!("unknown osi proto '{name}'"))),
            },
            Some(_) => Err(site.id(format!("unknown protocol: {name}"))),
        }
    }

    /// `[ip|ip6] protochain v`: `v` is the protocol, or appears in the chain of IPv6
    /// extension and AH headers before it (libpcap's gen_protochain; see the module doc).
    pub(super) fn protochain(
        &mut self,
        v: u32,
        proto: Option<Proto>,
        span: Span,
    ) -> Result<Pred, CompileError> {
        let versions: &[bool] = match proto {
            None => &[false, true],
            Some(Proto::Ip) => &[false],
            Some(Proto::Ip6) => &[true],
            Some(_) => {
                return Err(CompileError::new(span, "bad protocol applied for 'protochain'"))
            }
        };
        if self.off_linkpl.variable.is_some() {
            return Err(CompileError::new(
                span,
                "'protochain' not supported with variable length headers",
            ));
        }
        self.protochain_seen = true;
        let mut walks = Vec::with_capacity(versions.len());
        for &v6 in versions {
            walks.push(self.protochain_walk(v, v6, span)?);
        }
        Ok(Pred::or(walks))
    }

    /// One walk: the link test, then the walk from the IP header's next-header value and
    /// the offset of the header it names.
    fn protochain_walk(&mut self, v: u32, v6: bool, span: Span) -> Result<Pred, CompileError> {
        let link = self.link_proto(if v6 { ETHERTYPE_IPV6 } else { ETHERTYPE_IP }, span)?;
        let (next, offset) = if v6 {
            (self.load(Layer::Net, 6, Size::Byte), Expr::Const(40))
        } else {
            let ihl = self.load(Layer::Net, 0, Size::Byte).and_mask(0xf);
            (self.load(Layer::Net, 9, Size::Byte), Expr::binary(BinOp::Shl, ihl, Expr::Const(2)))
        };
        let Expr::Const(base) = self.offset(Layer::Net, 0) else {
            return Err(CompileError::new(
                span,
                "'protochain' not supported with variable length headers",
            ));
        };
        let chain = Chain { target: v, ipv6: v6, base, next, offset };
        Ok(Pred::and([link, Pred::Chain(Box::new(chain))]))
    }
}
