//! Encapsulations that move the headers everything after them looks at (`vlan`, `mpls`,
//! `pppoes`, `geneve`, `vxlan`), `pppoed`, and `llc`.
//!
//! Each encapsulation keyword tests for its header and then changes the lowering state, so
//! that every primitive lowered *after* it, even across `or`, reads the encapsulated
//! packet: `vlan` and `mpls` push the payload 4 bytes further (and stack), `pppoes` makes
//! the link PPP behind the PPPoE header, `geneve` and `vxlan` make it the tunnel's inner
//! frame, whose position is only known at run time, so the test stores the offsets in
//! scratch slots as it finds them (the `Pred::Store`s) and later loads are relative to them.

use weir_filter::{BinOp, CmpOp, Expr, Pred, Size};

use super::link::{
    ETHERMTU, ETHERTYPE_8021AD, ETHERTYPE_8021Q, ETHERTYPE_8021QINQ, ETHERTYPE_IP, ETHERTYPE_IPV6,
    ETHERTYPE_MPLS, ETHERTYPE_PPPOED, ETHERTYPE_PPPOES, ETHERTYPE_TEB, PPP_MPLS_UCAST,
};
use super::net_proto::IPPROTO_UDP;
use super::{junction, CompileError, Layer, LinkType, Lowerer, Offset};
use crate::ast::{Encap, LlcKind, Span};

const GENEVE_PORT: u32 = 6081;
/// VXLAN's IANA port (RFC 7348).
const VXLAN_PORT: u32 = 4789;

/// The 802.2 control byte: low bits for the I/S/U formats, masks for the S and U commands.
const LLC_S_FMT: u32 = 0x01;
const LLC_U_FMT: u32 = 0x03;
const LLC_S_CMD_MASK: u32 = 0x0f;
const LLC_U_CMD_MASK: u32 = 0xef;
const LLC_S_SUBTYPES: [(&str, u32); 3] = [("rr", 0x01), ("rnr", 0x05), ("rej", 0x09)];
const LLC_U_SUBTYPES: [(&str, u32); 8] = [
    ("ui", 0x03),
    ("ua", 0x63),
    ("disc", 0x43),
    ("dm", 0x0f),
    ("sabme", 0x6f),
    ("test", 0xe3),
    ("xid", 0xaf),
    ("frmr", 0x87),
];

/// Which UDP tunnel.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tunnel {
    Geneve,
    Vxlan,
}

fn too_big(span: Span, what: &str, value: u32, max: u32) -> CompileError {
    CompileError::new(span, format!("{what} {value} greater than maximum {max}"))
}

impl Lowerer<'_> {
    pub(crate) fn encap(
        &mut self,
        k: Encap,
        n: Option<u32>,
        span: Span,
    ) -> Result<Pred, CompileError> {
        match k {
            Encap::Vlan => self.vlan(n, span),
            Encap::Mpls => self.mpls(n, span),
            Encap::Pppoes => self.pppoes(n, span),
            Encap::Geneve => self.tunnel(Tunnel::Geneve, n, span),
            Encap::Vxlan => self.tunnel(Tunnel::Vxlan, n, span),
        }
    }

    /// `vlan [id]`: an 802.1Q, 802.1ad or 0x9100 tag, then everything moves past it.
    fn vlan(&mut self, id: Option<u32>, span: Span) -> Result<Pred, CompileError> {
        if self.mpls_depth > 0 {
            return Err(CompileError::new(span, "no VLAN match after MPLS"));
        }
        // PPI is 802.11 to every other keyword, not to this one (libpcap's switch).
        if !self.link.is_ethernet() && (!self.link.is_ieee80211() || self.link == LinkType::Ppi) {
            let message = format!("no VLAN support for {}", self.link.description());
            return Err(CompileError::new(span, message));
        }
        // (`junction`: `Pred::or`'s and `Pred::and`'s trees, each list allocated once.)
        let tagged = junction(
            vec![
                self.link_proto(ETHERTYPE_8021Q, span)?,
                self.link_proto(ETHERTYPE_8021AD, span)?,
                self.link_proto(ETHERTYPE_8021QINQ, span)?,
            ],
            false,
        );
        let pred = match id {
            None => tagged,
            Some(id) if id > 0x0fff => return Err(too_big(span, "VLAN tag", id, 0x0fff)),
            Some(id) => {
                junction(vec![tagged, self.cmp_field(Layer::Net, 0, Size::Half, 0x0fff, id)], true)
            }
        };
        // Both the type field and the payload follow the tag.
        self.off_linkpl = self.off_linkpl.plus(4);
        self.off_linktype = self.off_linktype.map(|o| o.plus(4));
        self.vlan_depth += 1;
        Ok(pred)
    }

    /// `mpls [label]`: an MPLS label (the first one by type, later ones by the previous
    /// label's bottom-of-stack bit being clear), then the network layer moves past it.
    fn mpls(&mut self, label: Option<u32>, span: Span) -> Result<Pred, CompileError> {
        let is_mpls = if self.mpls_depth > 0 {
            // The previous label's bottom-of-stack bit clear.
            self.mpls_bottom_of_stack(0)
        } else {
            match self.link {
                LinkType::Ethernet
                | LinkType::NetAnalyzer
                | LinkType::NetAnalyzerTransparent
                | LinkType::CHdlc => self.link_proto(ETHERTYPE_MPLS, span)?,
                LinkType::Ppp => self.link_proto(PPP_MPLS_UCAST, span)?,
                other => {
                    let message = format!("no MPLS support for {}", other.description());
                    return Err(CompileError::new(span, message));
                }
            }
        };
        let pred = match label {
            None => is_mpls,
            Some(l) if l > 0xf_ffff => return Err(too_big(span, "MPLS label", l, 0xf_ffff)),
            // The label is the top 20 bits of the 4-byte entry.
            Some(l) => Pred::and([
                is_mpls,
                self.cmp_field(Layer::Net, 0, Size::Word, 0xffff_f000, l << 12),
            ]),
        };
        self.off_nl += 4;
        self.off_nl_nosnap += 4;
        self.mpls_depth += 1;
        Ok(pred)
    }

    /// `pppoed`: a PPPoE discovery frame.
    pub(crate) fn pppoed(&mut self, span: Span) -> Result<Pred, CompileError> {
        self.link_proto(ETHERTYPE_PPPOED, span)
    }

    /// `pppoes [session]`: a PPPoE session frame; the link becomes PPP behind the 6-byte
    /// PPPoE header. Each `pppoes` moves again (PPPoE inside PPPoE).
    fn pppoes(&mut self, session: Option<u32>, span: Span) -> Result<Pred, CompileError> {
        let is_pppoes = self.link_proto(ETHERTYPE_PPPOES, span)?;
        let pred = match session {
            None => is_pppoes,
            Some(s) if s > 0xffff => return Err(too_big(span, "PPPoE session number", s, 0xffff)),
            // Version/type, code, then the session id: the low half of the first word.
            Some(s) => {
                Pred::and([is_pppoes, self.cmp_field(Layer::Net, 0, Size::Word, 0x0000_ffff, s)])
            }
        };
        // On pflog, libpcap's payload register exists only once something has read it;
        // otherwise the PPP offsets get a register of their own that nothing writes.
        let variable = match self.off_linkpl.variable {
            Some(super::misc::PFLOG_SLOT)
                if self.options.linktype == LinkType::Pflog && !self.pflog_read.get() =>
            {
                Some(self.alloc_scratch(span)?)
            }
            v => v,
        };
        let ppp = Offset {
            variable,
            constant: self.off_linkpl.constant.wrapping_add(self.off_nl).wrapping_add(6),
        };
        self.link = LinkType::Ppp;
        self.off_linkhdr = ppp;
        self.off_linktype = Some(ppp);
        self.off_linkpl = ppp.plus(2);
        self.off_nl = 0;
        self.off_nl_nosnap = 0;
        self.tunnel_seen = false;
        self.geneve_slots = None;
        self.pppoes_seen = true;
        self.lane_outer = false;
        Ok(pred)
    }

    /// `geneve [vni]` and `vxlan [vni]`: UDP to the tunnel's port over IPv4 or IPv6, a
    /// version 0 header (Geneve) or the I flag alone (VXLAN), the VNI if given; then the
    /// inner frame's offsets are stored and everything after looks inside the tunnel.
    ///
    /// libpcap 1.10, the oracle, has no `vxlan`: it follows pcap-filter(7) of later releases
    /// (UDP port 4789, flags byte 0x08, the VNI in the top 24 bits of the second word, an
    /// Ethernet frame after the 8-byte header), built the way libpcap builds `geneve`, and is
    /// tested against an equivalent expression libpcap 1.10 compiles, not against libpcap's
    /// own `vxlan`.
    fn tunnel(&mut self, kind: Tunnel, vni: Option<u32>, span: Span) -> Result<Pred, CompileError> {
        let (port, name) = match kind {
            Tunnel::Geneve => (GENEVE_PORT, "Geneve VNI"),
            Tunnel::Vxlan => (VXLAN_PORT, "VXLAN VNI"),
        };
        // Geneve's version is the top 2 bits of its first byte; VXLAN's flags byte must be
        // exactly the I flag.
        let header_ok = |l: &Self, layer: Layer| match kind {
            Tunnel::Geneve => l.cmp_field(layer, 8, Size::Byte, 0xc0, 0),
            Tunnel::Vxlan => l.cmp_field(layer, 8, Size::Byte, u32::MAX, 0x08),
        };
        let vni_is = |l: &Self, layer: Layer, vni: u32| {
            l.cmp_field(layer, 12, Size::Word, 0xffff_ff00, vni << 8)
        };

        let mut over_v4 = vec![self.udp_to_v4(port, span)?, header_ok(self, Layer::TransportV4)];
        if let Some(v) = vni {
            if v > 0xff_ffff {
                return Err(too_big(span, name, v, 0xff_ffff));
            }
            over_v4.push(vni_is(self, Layer::TransportV4, v));
        }
        let mut over_v6 = vec![self.udp_to_v6(port, span)?, header_ok(self, Layer::TransportV6)];
        if let Some(v) = vni {
            over_v6.push(vni_is(self, Layer::TransportV6, v));
        }

        // Where the tunnel header starts (the UDP payload), found by whichever branch
        // matched; kept in the slot that ends up holding the inner payload offset.
        let start_v4 = self.offset(Layer::TransportV4, 8);
        let start_v6 = self.offset(Layer::TransportV6, 8);
        match kind {
            Tunnel::Geneve => {
                // Fresh slots, as libpcap takes fresh registers: a tunnel test that did not
                // run leaves its slots unwritten rather than holding an earlier tunnel's.
                let hdr = self.alloc_scratch(span)?;
                let ty = self.alloc_scratch(span)?;
                let pl = self.alloc_scratch(span)?;
                over_v4.push(Pred::Store { slot: pl, value: start_v4 });
                over_v6.push(Pred::Store { slot: pl, value: start_v6 });
                let start = || Expr::Scratch(pl);
                // Option length: the low 6 bits of the first byte, in 4-byte words.
                let opt_len = Expr::binary(
                    BinOp::Mul,
                    Expr::load(start(), Size::Byte).and_mask(0x3f),
                    Expr::Const(4),
                );
                let end = Expr::binary(BinOp::Add, opt_len.plus(8), start());
                let inner = || Expr::Scratch(hdr);
                let pred = Pred::and([
                    Pred::or([Pred::and(over_v4), Pred::and(over_v6)]),
                    // Until an inner Ethernet header is seen, the protocol type is Geneve's.
                    Pred::Store { slot: ty, value: start().plus(2) },
                    Pred::Store { slot: hdr, value: end },
                    Pred::or([
                        Pred::and([
                            Pred::eq(Expr::load(start().plus(2), Size::Half), ETHERTYPE_TEB),
                            Pred::Store { slot: ty, value: inner().plus(12) },
                            Pred::Store { slot: pl, value: inner().plus(14) },
                        ]),
                        // A bare network packet: no MAC header, the payload starts here.
                        Pred::Store { slot: pl, value: inner() },
                    ]),
                ]);
                self.enter_tunnel(
                    Offset { variable: Some(hdr), constant: 0 },
                    Offset { variable: Some(ty), constant: 0 },
                    Offset { variable: Some(pl), constant: 0 },
                );
                self.geneve_slots = Some((hdr, pl));
                Ok(pred)
            }
            Tunnel::Vxlan => {
                // Always an Ethernet frame 8 bytes in: one slot holds its start.
                let hdr = self.alloc_scratch(span)?;
                over_v4.push(Pred::Store { slot: hdr, value: start_v4 });
                over_v6.push(Pred::Store { slot: hdr, value: start_v6 });
                let pred = Pred::and([
                    Pred::or([Pred::and(over_v4), Pred::and(over_v6)]),
                    Pred::Store { slot: hdr, value: Expr::Scratch(hdr).plus(8) },
                ]);
                let inner = Offset { variable: Some(hdr), constant: 0 };
                self.enter_tunnel(inner, inner.plus(12), inner.plus(14));
                Ok(pred)
            }
        }
    }

    /// The state after a tunnel header: an Ethernet link at variable offsets.
    fn enter_tunnel(&mut self, hdr: Offset, ty: Offset, pl: Offset) {
        self.link = LinkType::Ethernet;
        self.off_linkhdr = hdr;
        self.off_linktype = Some(ty);
        self.off_linkpl = pl;
        self.off_nl = 0;
        self.tunnel_seen = true;
        self.geneve_slots = None;
        self.lane_outer = false;
    }

    /// What MAC-level tests (`ether host`, `ether broadcast`, `ether multicast`) must check
    /// first, ANDed in front of them, as libpcap's gen_prevlinkhdr_check: inside Geneve,
    /// that the inner packet has a MAC header at all (the link header and payload offsets
    /// differ). `None` when nothing is needed (outside tunnels, and inside VXLAN, which
    /// always carries Ethernet frames). After a SunATM `lane`: that the LANE frame is data.
    pub(crate) fn inner_mac_check(&self) -> Option<Pred> {
        if !self.tunnel_seen {
            return self.lane_data_check();
        }
        let (hdr, pl) = self.geneve_slots?;
        // libpcap compares the registers alone, ignoring `vlan`s since the tunnel.
        Some(Pred::cmp(CmpOp::Ne, Expr::Scratch(hdr), Expr::Scratch(pl)))
    }

    /// `test`, behind [`Self::inner_mac_check`]'s check when there is one: `Pred::and([check,
    /// test])`'s tree, with no list at all for the usual case of no check (issue 13).
    pub(crate) fn after_inner_mac_check(&self, test: Pred) -> Pred {
        match self.inner_mac_check() {
            Some(check) => junction(vec![check, test], true),
            None => test,
        }
    }

    /// UDP over IPv4 to `port` (libpcap's gen_port for a destination port): IPv4, protocol
    /// UDP, not a later fragment, destination port.
    fn udp_to_v4(&mut self, port: u32, span: Span) -> Result<Pred, CompileError> {
        Ok(Pred::and([
            self.link_proto(ETHERTYPE_IP, span)?,
            self.cmp_field(Layer::Net, 9, Size::Byte, u32::MAX, IPPROTO_UDP),
            self.cmp_field(Layer::Net, 6, Size::Half, 0x1fff, 0),
            self.cmp_field(Layer::TransportV4, 2, Size::Half, u32::MAX, port),
        ]))
    }

    /// UDP over IPv6 to `port` (libpcap's gen_port6): next header UDP (no extension
    /// headers), destination port.
    fn udp_to_v6(&mut self, port: u32, span: Span) -> Result<Pred, CompileError> {
        Ok(Pred::and([
            self.link_proto(ETHERTYPE_IPV6, span)?,
            self.cmp_field(Layer::Net, 6, Size::Byte, u32::MAX, IPPROTO_UDP),
            self.cmp_field(Layer::TransportV6, 2, Size::Half, u32::MAX, port),
        ]))
    }

    /// `llc` and `llc SUBTYPE`: an 802.2 frame (Ethernet 802.3 length, and not Novell's raw
    /// 802.3 0xffff), and its control byte's format or command.
    pub(crate) fn llc(&mut self, k: Option<&LlcKind>, span: Span) -> Result<Pred, CompileError> {
        // The subtype name is checked before the link type, as libpcap's grammar does.
        let control = match k {
            None => None,
            Some(LlcKind::Rnr) => Some((LLC_S_CMD_MASK, 0x05)),
            Some(LlcKind::Name(name)) => Some(llc_control(name).ok_or_else(|| {
                CompileError::new(span, format!("unknown LLC type name \"{name}\""))
            })?),
        };
        let is_llc = if self.link.is_ieee80211() {
            // Data frames carry LLC.
            self.wlan_data_frame()
        } else if matches!(self.link, LinkType::Fddi | LinkType::TokenRing | LinkType::AtmRfc1483) {
            // Every frame is 802.2 LLC: libpcap's test is always true.
            Pred::Const(true)
        } else if self.link == LinkType::SunAtm {
            self.atm_traffic_type_is(super::link::SUNATM_PT_LLC)
        } else if self.link == LinkType::Ethernet {
            Pred::and([
                Pred::cmp(
                    CmpOp::Le,
                    self.load(Layer::LinkType, 0, Size::Half),
                    Expr::Const(ETHERMTU),
                ),
                Pred::not(self.cmp_field(Layer::LinkPayload, 0, Size::Half, u32::MAX, 0xffff)),
            ])
        } else {
            let message = format!("'llc' not supported for {}", self.link.description());
            return Err(CompileError::new(span, message));
        };
        Ok(match control {
            None => is_llc,
            Some((mask, value)) => {
                Pred::and([is_llc, self.cmp_field(Layer::LinkPayload, 2, Size::Byte, mask, value)])
            }
        })
    }
}

/// The control-byte (mask, value) an `llc` subtype name tests; names are case-insensitive.
fn llc_control(name: &str) -> Option<(u32, u32)> {
    let lower = name.to_ascii_lowercase();
    match lower.as_str() {
        // I frames: low bit clear.
        "i" => Some((0x01, 0x00)),
        "s" => Some((0x03, LLC_S_FMT)),
        "u" => Some((0x03, LLC_U_FMT)),
        other => LLC_S_SUBTYPES
            .iter()
            .find(|(n, _)| *n == other)
            .map(|&(_, v)| (LLC_S_CMD_MASK, v))
            .or_else(|| {
                LLC_U_SUBTYPES.iter().find(|(n, _)| *n == other).map(|&(_, v)| (LLC_U_CMD_MASK, v))
            }),
    }
}
