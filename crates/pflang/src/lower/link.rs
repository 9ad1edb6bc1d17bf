//! The link types pflang compiles filters for ([`LINK_TYPES`]; the types themselves, their
//! names, numbers and header geometry are `weir_packet`'s), and the link-level protocol
//! test: what `ether proto N`, `ip`, `arp`, `iso`, `stp`, `ipx` ... mean on each link
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
use weir_packet::{af, ethertype, llcsap, ppp, sll};

use super::arith::displaced_offset;
use super::{CompileError, Layer, Lowerer};
use crate::ast::Span;

pub use weir_packet::{LinkType, OpaqueLink};

/// The capture link types pflang compiles filters for: every one weir-packet knows
/// ([`LinkType::ALL`], in DLT order), since the lowering's matches below are exhaustive
/// (a new link type does not build until it has its lowering). On the
/// [`OpaqueLink`]s, known by name and number only, only `link[]`-style tests compile.
pub const LINK_TYPES: [LinkType; LinkType::ALL.len()] = LinkType::ALL;

/// For link types libpcap 1.10 compiles no protocol test for (only `link[]`, `len`,
/// `byte` and the like), the name its message gives them ("... link-layer type filtering
/// not implemented").
pub fn protocol_tests_refused(link: LinkType) -> Option<&'static str> {
    Some(match link {
        LinkType::IpOverIb
        | LinkType::DsaTagBrcm
        | LinkType::DsaTagBrcmPrepend
        | LinkType::DsaTagDsa
        | LinkType::DsaTagEdsa => link.description(),
        LinkType::Nflog => "NFLOG",
        LinkType::Mtp2 | LinkType::Mtp2WithPhdr => "MTP2",
        LinkType::Mtp3 => "SS7 MTP3",
        LinkType::JuniperPicPeer => link.description(),
        LinkType::Erf => "ERF",
        LinkType::Mfr => "Multi-link Frame Relay",
        LinkType::Ax25Kiss => "AX.25",
        LinkType::LinuxLapd => "LAPD",
        LinkType::Docsis => "DOCSIS",
        LinkType::LinuxIrda => "IrDA",
        LinkType::Pfsync => "PFSYNC",
        LinkType::Ieee802154Linux
        | LinkType::Ieee802154
        | LinkType::Ieee802154NonaskPhy
        | LinkType::Ieee802154Nofcs
        | LinkType::Ieee802154Tap => "IEEE 802.15.4",
        // gencode's own names for some; its description for the rest.
        LinkType::Opaque(opaque) => match opaque {
            OpaqueLink::UsbFreebsd
            | OpaqueLink::UsbLinux
            | OpaqueLink::UsbLinuxMmapped
            | OpaqueLink::Usbpcap => "USB",
            OpaqueLink::BluetoothHciH4 | OpaqueLink::BluetoothHciH4WithPhdr => "Bluetooth",
            OpaqueLink::Can20b | OpaqueLink::CanSocketcan => "CAN",
            OpaqueLink::Ieee80216MacCpsRadio => "IEEE 802.16",
            OpaqueLink::Sita => "SITA",
            OpaqueLink::Raif1 => "RAIF1",
            OpaqueLink::IpmbKontron | OpaqueLink::IpmbLinux => "IPMB",
            _ => link.description(),
        },
        _ => return None,
    })
}

/// Whether pflang compiles filters for captures of this link type.
pub fn compiles_for(link: LinkType) -> bool {
    LINK_TYPES.contains(&link)
}

// weir-packet's numbers, widened to the u32 protocols lowering passes around (patterns
// need constants).
pub(crate) const ETHERMTU: u32 = ethertype::ETHERMTU as u32;
pub(crate) const ETHERTYPE_IP: u32 = ethertype::IP as u32;
pub(crate) const ETHERTYPE_ARP: u32 = ethertype::ARP as u32;
pub(crate) const ETHERTYPE_REVARP: u32 = ethertype::REVARP as u32;
pub(crate) const ETHERTYPE_IPV6: u32 = ethertype::IPV6 as u32;
pub(crate) const ETHERTYPE_ATALK: u32 = ethertype::ATALK as u32;
pub(crate) const ETHERTYPE_AARP: u32 = ethertype::AARP as u32;
pub(crate) const ETHERTYPE_IPX: u32 = ethertype::IPX as u32;
pub(crate) const ETHERTYPE_DN: u32 = ethertype::DN as u32;
pub(crate) const ETHERTYPE_SCA: u32 = ethertype::SCA as u32;
pub(crate) const ETHERTYPE_LAT: u32 = ethertype::LAT as u32;
pub(crate) const ETHERTYPE_MOPDL: u32 = ethertype::MOPDL as u32;
pub(crate) const ETHERTYPE_MOPRC: u32 = ethertype::MOPRC as u32;
pub(crate) const ETHERTYPE_NS: u32 = ethertype::NS as u32;
pub(crate) const ETHERTYPE_8021Q: u32 = ethertype::VLAN_8021Q as u32;
pub(crate) const ETHERTYPE_8021AD: u32 = ethertype::VLAN_8021AD as u32;
pub(crate) const ETHERTYPE_8021QINQ: u32 = ethertype::VLAN_9100 as u32;
pub(crate) const ETHERTYPE_MPLS: u32 = ethertype::MPLS as u32;
pub(crate) const ETHERTYPE_PPPOED: u32 = ethertype::PPPOED as u32;
pub(crate) const ETHERTYPE_PPPOES: u32 = ethertype::PPPOES as u32;
pub(crate) const ETHERTYPE_TEB: u32 = ethertype::TEB as u32;

// 802.2 LLC SAPs, passed where an Ethernet type would be.
pub(crate) const LLCSAP_IP: u32 = llcsap::IP as u32;
pub(crate) const LLCSAP_ISONS: u32 = llcsap::ISONS as u32;
pub(crate) const LLCSAP_NETBEUI: u32 = llcsap::NETBEUI as u32;
pub(crate) const LLCSAP_IPX: u32 = llcsap::IPX as u32;
pub(crate) const LLCSAP_8021D: u32 = llcsap::STP as u32;
pub(crate) const LLCSAP_SNAP: u32 = llcsap::SNAP as u32;

/// Van Jacobson compressed and uncompressed TCP/IP over PPP (BSD/OS PPP's IP).
const PPP_VJC: u32 = 0x2d;
const PPP_VJNC: u32 = 0x2f;

/// MPLS unicast over PPP; `mpls` after `pppoes` tests for it.
pub(crate) const PPP_MPLS_UCAST: u32 = ppp::MPLS_UCAST as u32;

/// Frame Relay (RFC 2427): the UI control byte and the NLPIDs libpcap tests.
const FR_UI: u32 = 0x03;
const NLPID_IP: u32 = 0xcc;
const NLPID_IPV6: u32 = 0x8e;
const NLPID_CLNP: u32 = 0x81;
const NLPID_ESIS: u32 = 0x82;
const NLPID_ISIS: u32 = 0x83;

/// ARCnet protocol IDs libpcap tests.
const ARCTYPE_IP_OLD: u32 = 0xf0;
const ARCTYPE_ARP_OLD: u32 = 0xf1;
const ARCTYPE_IP: u32 = 0xd4;
const ARCTYPE_ARP: u32 = 0xd5;
const ARCTYPE_REVARP: u32 = 0xd6;
const ARCTYPE_ATALK: u32 = 0xdd;
const ARCTYPE_INET6: u32 = 0xc4;

/// Address families as pflog headers (the capturing host's, Linux's here, as libpcap
/// compiles them) and Solaris ipnet headers give them.
const PFLOG_AF_INET: u32 = af::INET;
const PFLOG_AF_INET6: u32 = af::INET6_LINUX;
const IPNET_AF_INET: u32 = 2;
const IPNET_AF_INET6: u32 = 26;

/// Juniper's capture header magic, "MGC", in the top 3 bytes of the first word.
const JUNIPER_MAGIC: u32 = 0x4d47_4300;

/// The BACnet MS/TP preamble (0x55 0xff), in the top half of the first word.
const BACNET_PREAMBLE: u32 = 0x55ff_0000;

/// SunATM traffic types (the low nibble of the pseudo-header's first byte).
pub(crate) const SUNATM_PT_LANE: u32 = 0x01;
pub(crate) const SUNATM_PT_LLC: u32 = 0x02;

const LINUX_SLL_P_802_2: u32 = sll::P_802_2 as u32;
const LINUX_SLL_P_802_3: u32 = sll::P_802_3 as u32;

/// Where a link type keeps its fields, as lowering starts from it.
pub(crate) struct Geometry {
    /// Where the link header starts: 0, or after a fixed pseudo-header (netANALYZER's).
    pub off_linkhdr: u32,
    pub off_linktype: Option<u32>,
    pub off_linkpl: u32,
    /// Network layer relative to the link payload: 8 behind 802.2 LLC and SNAP (802.11),
    /// else 0.
    pub off_nl: u32,
    /// Network layer relative to the link payload when an 802.2 header (without SNAP)
    /// precedes it: 3 on Ethernet (802.3 frames), 0 where there is no LLC.
    pub off_nl_nosnap: u32,
}

/// The header geometry (weir-packet's) plus where 802.2-framed network layers start.
pub(crate) fn geometry(link: LinkType) -> Geometry {
    let plain = |off_linktype, off_linkpl, off_nl, off_nl_nosnap| Geometry {
        off_linkhdr: 0,
        off_linktype,
        off_linkpl,
        off_nl,
        off_nl_nosnap,
    };
    match link {
        // The payload offset is computed from the packet (see `wlan`); it starts with
        // 802.2 LLC, and SNAP before the usual network layers.
        LinkType::Ieee80211
        | LinkType::Prism
        | LinkType::Radiotap
        | LinkType::Avs
        | LinkType::Ppi => plain(None, 0, 8, 3),
        // Links that always carry 802.2 LLC: SNAP before the usual network layers, 3 bytes
        // of LLC before the OSI ones (libpcap's off_nl / off_nl_nosnap). libpcap notes the
        // LLC header as their type field (so `host NAME` is not "IP only" there).
        LinkType::Fddi
        | LinkType::TokenRing
        | LinkType::SunAtm
        | LinkType::AtmRfc1483
        | LinkType::AtmClip
        | LinkType::IpOverFc => {
            let llc = link.header_len();
            plain(Some(llc), llc, 8, 3)
        }
        // pflog's payload offset is read from the packet (see `misc`); its family byte is
        // at 1, but libpcap notes the header's start as the type field.
        LinkType::Pflog => plain(Some(0), 0, 0, 0),
        // libpcap 1.10 reads Frame Relay's network layer from the start of the packet (its
        // payload offset is 0; only the NLPID test looks past the address), and so does
        // weir.
        LinkType::FrameRelay => plain(None, 0, 0, 0),
        // libpcap leaves BACnet's offsets unset (-1): the network layer is read 2 bytes
        // before the packet (wrapping), so its tests abort, as in libpcap.
        LinkType::BacnetMsTp => plain(None, u32::MAX, u32::MAX, u32::MAX),
        // Ethernet after a pseudo-header: libpcap moves the link header, so `link[0]`
        // and the MACs are read after it.
        LinkType::NetAnalyzer | LinkType::NetAnalyzerTransparent => {
            let ether = link.header_len() - LinkType::Ethernet.header_len();
            Geometry {
                off_linkhdr: ether,
                off_linktype: link.type_offset(),
                off_linkpl: link.header_len(),
                off_nl: 0,
                off_nl_nosnap: 3,
            }
        }
        // Juniper: where libpcap 1.10 puts the payload and the network layer (-1 where it
        // leaves them unset, read wrapping as libpcap's loads do).
        weir_packet::juniper_links!() => {
            let (pl, nl, nosnap) = juniper_offsets(link);
            plain(link.type_offset(), pl as u32, nl as u32, nosnap as u32)
        }
        LinkType::Ethernet => plain(link.type_offset(), link.header_len(), 0, 3),
        LinkType::Slip
        | LinkType::PppSerial
        | LinkType::CHdlc
        | LinkType::ArcnetBsd
        | LinkType::ArcnetLinux
        | LinkType::IpOverIb
        | LinkType::Nflog
        | LinkType::LinuxSll
        | LinkType::LinuxSll2
        | LinkType::Raw
        | LinkType::Ipv4
        | LinkType::Ipv6
        | LinkType::Null
        | LinkType::Loop
        | LinkType::Enc
        | LinkType::Ltalk
        | LinkType::Ipnet
        | LinkType::DsaTagBrcm
        | LinkType::DsaTagBrcmPrepend
        | LinkType::DsaTagDsa
        | LinkType::DsaTagEdsa
        | LinkType::LinuxLapd
        | LinkType::Docsis
        | LinkType::LinuxIrda
        | LinkType::Pfsync
        | LinkType::Ieee802154Linux
        | LinkType::Ieee802154
        | LinkType::Ieee802154NonaskPhy
        | LinkType::Ieee802154Nofcs
        | LinkType::Ieee802154Tap
        | LinkType::Mtp2
        | LinkType::Mtp2WithPhdr
        | LinkType::Mtp3
        | LinkType::JuniperPicPeer
        | LinkType::Erf
        | LinkType::Mfr
        | LinkType::Ax25Kiss
        | LinkType::SlipBsdos
        | LinkType::PppBsdos
        | LinkType::PppEther
        | LinkType::SymantecFirewall
        | LinkType::AppleIpOverIeee1394
        | LinkType::PppPppd
        | LinkType::Opaque(_)
        | LinkType::Ppp => plain(link.type_offset(), link.header_len(), 0, 0),
    }
}

/// A Juniper link type's payload offset, network layer and network layer without SNAP
/// (relative to the payload), as libpcap 1.10 sets them; -1 is libpcap's "not set".
fn juniper_offsets(link: LinkType) -> (i32, i32, i32) {
    match link {
        LinkType::JuniperMlppp => (4, 0, -1),
        LinkType::JuniperMlfr => (4, 0, -1),
        LinkType::JuniperEs => (-1, -1, -1),
        LinkType::JuniperGgsn => (12, 0, -1),
        LinkType::JuniperMfr => (4, 0, -1),
        LinkType::JuniperAtm2 => (8, 0, 10),
        LinkType::JuniperServices => (-1, -1, -1),
        LinkType::JuniperAtm1 => (4, 0, 10),
        LinkType::JuniperMonitor => (12, 0, -1),
        LinkType::JuniperPppoe => (14, 18, 21),
        LinkType::JuniperPppoeAtm => (6, 0, -1),
        LinkType::JuniperEther => (14, 18, 21),
        LinkType::JuniperPpp => (4, 0, -1),
        LinkType::JuniperFrelay => (4, 0, -1),
        LinkType::JuniperChdlc => (4, 0, -1),
        LinkType::JuniperVp => (-1, -1, -1),
        LinkType::JuniperVs => (-1, -1, -1),
        LinkType::JuniperIsm => (-1, -1, -1),
        LinkType::JuniperSt => (-1, -1, -1),
        LinkType::JuniperSrxE2e => (-1, -1, -1),
        LinkType::JuniperFibreChannel => (-1, -1, -1),
        LinkType::JuniperAtmCemic => (-1, -1, -1),
        _ => (-1, -1, -1),
    }
}

/// The PPP protocol number libpcap tests for an Ethernet type or SAP once the link is PPP
/// (after `pppoes`); numbers without a PPP counterpart are compared as they are.
pub(crate) fn ppp_protocol(proto: u32) -> u32 {
    match proto {
        ETHERTYPE_IP => u32::from(ppp::IP),
        ETHERTYPE_IPV6 => u32::from(ppp::IPV6),
        ETHERTYPE_DN => u32::from(ppp::DECNET),
        ETHERTYPE_ATALK => u32::from(ppp::APPLE),
        ETHERTYPE_NS => u32::from(ppp::NS),
        LLCSAP_ISONS => u32::from(ppp::OSI),
        LLCSAP_8021D => u32::from(ppp::BRPDU),
        LLCSAP_IPX => u32::from(ppp::IPX),
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
            // After `lane`, every Ethernet test first checks that the LANE frame is data,
            // not an LE control frame (libpcap's gen_prevlinkhdr_check).
            LinkType::Ethernet | LinkType::NetAnalyzer | LinkType::NetAnalyzerTransparent => {
                match self.lane_data_check() {
                    Some(check) => Pred::and([check, self.ether_link_proto(proto)]),
                    None => self.ether_link_proto(proto),
                }
            }
            // 802.2 LLC right after the MAC header (or from the start, on RFC 1483 ATM).
            LinkType::Fddi
            | LinkType::TokenRing
            | LinkType::AtmRfc1483
            | LinkType::AtmClip
            | LinkType::IpOverFc => self.llc_link_proto(proto),
            // Juniper: every protocol is the capture header's `MGC` magic, as libpcap 1.10
            // compiles it.
            weir_packet::juniper_links!() => {
                self.cmp_field(Layer::LinkHdr, 0, Size::Word, 0xffff_ff00, JUNIPER_MAGIC)
            }
            // LocalTalk carries AppleTalk, nothing libpcap tests for.
            LinkType::Ltalk => Pred::Const(proto == ETHERTYPE_ATALK),
            // Every protocol is the MS/TP preamble, as libpcap compiles it.
            LinkType::BacnetMsTp => {
                self.cmp_field(Layer::LinkHdr, 0, Size::Word, 0xffff_0000, BACNET_PREAMBLE)
            }
            // LLC-multiplexed traffic (not LANE, not signalling), then its LLC header.
            LinkType::SunAtm => {
                Pred::and([self.atm_traffic_type_is(SUNATM_PT_LLC), self.llc_link_proto(proto)])
            }
            LinkType::LinuxSll => self.sll_link_proto(proto),
            LinkType::LinuxSll2 => self.type_field_is(proto),
            LinkType::Ppp | LinkType::PppSerial | LinkType::PppPppd | LinkType::PppEther => {
                self.type_field_is(ppp_protocol(proto))
            }
            // BSD/OS PPP: IP is IP or either Van Jacobson form.
            LinkType::PppBsdos if proto == ETHERTYPE_IP => {
                Pred::or([u32::from(ppp::IP), PPP_VJC, PPP_VJNC].map(|p| self.type_field_is(p)))
            }
            LinkType::PppBsdos => self.type_field_is(ppp_protocol(proto)),
            // An EtherType field, compared with whatever number is asked for.
            LinkType::SymantecFirewall | LinkType::AppleIpOverIeee1394 => self.type_field_is(proto),
            // Cisco HDLC carries EtherTypes; OSI is its own value (the SAP doubled).
            LinkType::CHdlc if proto == LLCSAP_ISONS => {
                self.type_field_is((LLCSAP_ISONS << 8) | LLCSAP_ISONS)
            }
            LinkType::CHdlc => self.type_field_is(proto),
            LinkType::Ieee80211
            | LinkType::Prism
            | LinkType::Radiotap
            | LinkType::Avs
            | LinkType::Ppi => Pred::and([self.wlan_data_frame(), self.llc_link_proto(proto)]),
            // Control byte (UI) and NLPID, as one half-word after the Q.922 address: IP, IPv6,
            // and for OSI any of CLNP, ES-IS and IS-IS.
            LinkType::FrameRelay => match proto {
                ETHERTYPE_IP => self.fr_nlpid_is(NLPID_IP),
                ETHERTYPE_IPV6 => self.fr_nlpid_is(NLPID_IPV6),
                LLCSAP_ISONS => Pred::or([
                    self.fr_nlpid_is(NLPID_CLNP),
                    self.fr_nlpid_is(NLPID_ESIS),
                    self.fr_nlpid_is(NLPID_ISIS),
                ]),
                _ => Pred::Const(false),
            },
            // libpcap 1.10 compiles no protocol test for these, and says so.
            link @ (LinkType::IpOverIb
            | LinkType::Nflog
            | LinkType::DsaTagBrcm
            | LinkType::DsaTagBrcmPrepend
            | LinkType::DsaTagDsa
            | LinkType::DsaTagEdsa
            | LinkType::LinuxLapd
            | LinkType::Docsis
            | LinkType::LinuxIrda
            | LinkType::Pfsync
            | LinkType::Ieee802154Linux
            | LinkType::Ieee802154
            | LinkType::Ieee802154NonaskPhy
            | LinkType::Ieee802154Nofcs
            | LinkType::Ieee802154Tap
            | LinkType::Mtp2
            | LinkType::Mtp2WithPhdr
            | LinkType::Mtp3
            | LinkType::JuniperPicPeer
            | LinkType::Erf
            | LinkType::Mfr
            | LinkType::Ax25Kiss
            | LinkType::Opaque(_)) => {
                let name = protocol_tests_refused(link).unwrap_or_else(|| link.description());
                return Err(CompileError::new(
                    span,
                    format!("{name} link-layer type filtering not implemented"),
                ));
            }
            // The address family byte: IPv4 and IPv6 only.
            LinkType::Pflog | LinkType::Ipnet => {
                let family = match (self.link, proto) {
                    (LinkType::Pflog, ETHERTYPE_IP) => PFLOG_AF_INET,
                    (LinkType::Pflog, ETHERTYPE_IPV6) => PFLOG_AF_INET6,
                    (_, ETHERTYPE_IP) => IPNET_AF_INET,
                    (_, ETHERTYPE_IPV6) => IPNET_AF_INET6,
                    _ => return Ok(Pred::Const(false)),
                };
                self.cmp_field(Layer::LinkHdr, 1, Size::Byte, u32::MAX, family)
            }
            // ARCnet protocol IDs (one byte), old and new numbers for IP and ARP.
            LinkType::ArcnetBsd | LinkType::ArcnetLinux => {
                let ids: &[u32] = match proto {
                    ETHERTYPE_IP => &[ARCTYPE_IP, ARCTYPE_IP_OLD],
                    ETHERTYPE_ARP => &[ARCTYPE_ARP, ARCTYPE_ARP_OLD],
                    ETHERTYPE_IPV6 => &[ARCTYPE_INET6],
                    ETHERTYPE_REVARP => &[ARCTYPE_REVARP],
                    ETHERTYPE_ATALK => &[ARCTYPE_ATALK],
                    _ => &[],
                };
                if ids.is_empty() {
                    return Ok(Pred::Const(false));
                }
                Pred::or(
                    ids.iter()
                        .map(|&id| self.cmp_field(Layer::LinkType, 0, Size::Byte, u32::MAX, id)),
                )
            }
            // No type field: the version nibble says what the packet is. On SLIP libpcap
            // reads it at the start of the link header, which is SLIP's direction byte.
            LinkType::Raw | LinkType::Slip | LinkType::SlipBsdos => match proto {
                ETHERTYPE_IP => self.cmp_field(Layer::LinkHdr, 0, Size::Byte, 0xf0, 0x40),
                ETHERTYPE_IPV6 => self.cmp_field(Layer::LinkHdr, 0, Size::Byte, 0xf0, 0x60),
                _ => Pred::Const(false),
            },
            LinkType::Ipv4 => Pred::Const(proto == ETHERTYPE_IP),
            LinkType::Ipv6 => Pred::Const(proto == ETHERTYPE_IPV6),
            LinkType::Null | LinkType::Loop | LinkType::Enc => {
                // For a capture file libpcap tests every BSD AF_INET6 (the writer's is
                // unknown), in its order: Darwin, then NetBSD/OpenBSD, then FreeBSD.
                let families: &[u32] = match proto {
                    ETHERTYPE_IP => &[af::INET],
                    ETHERTYPE_IPV6 => &[af::INET6_DARWIN, af::INET6_NETBSD, af::INET6_FREEBSD],
                    _ => return Ok(Pred::Const(false)),
                };
                // DLT_NULL stores the family in the capturing host's byte order; libpcap
                // compiles for the host it runs on, and weir for the little-endian hosts
                // the oracle runs on. Loads are big-endian, hence the swap.
                let host_order = matches!(self.link, LinkType::Null | LinkType::Enc);
                Pred::or(families.iter().map(|&family| {
                    let word = if host_order { family.swap_bytes() } else { family };
                    self.cmp_field(Layer::LinkHdr, 0, Size::Word, u32::MAX, word)
                }))
            }
        })
    }

    /// The protocol test of link types that carry 802.2 LLC (libpcap's gen_llc_linktype):
    /// DSAP and SSAP for OSI, IP and NetBEUI, the DSAP for IPX and other SAPs, an Apple
    /// SNAP header for AppleTalk, and for any other Ethernet type only the SNAP type field.
    pub(crate) fn llc_link_proto(&self, proto: u32) -> Pred {
        match proto {
            LLCSAP_IP | LLCSAP_ISONS | LLCSAP_NETBEUI => {
                self.cmp_field(Layer::LinkPayload, 0, Size::Half, u32::MAX, (proto << 8) | proto)
            }
            ETHERTYPE_ATALK => self.snap_is(0x08_0007, ETHERTYPE_ATALK),
            sap if sap <= ETHERMTU => {
                self.cmp_field(Layer::LinkPayload, 0, Size::Byte, u32::MAX, sap)
            }
            ethertype => self.cmp_field(Layer::LinkPayload, 6, Size::Half, u32::MAX, ethertype),
        }
    }

    /// Frame Relay: the UI control byte (3) and then `nlpid`, 2 bytes into the link header.
    pub(crate) fn fr_nlpid_is(&self, nlpid: u32) -> Pred {
        self.cmp_field(Layer::LinkHdr, 2, Size::Half, u32::MAX, (FR_UI << 8) | nlpid)
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
