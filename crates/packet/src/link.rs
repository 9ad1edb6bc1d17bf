//! Capture link types: what tcpdump's `-y` calls them, the numbers libpcap (DLT_) and
//! capture files (LINKTYPE_) give them, and where their headers keep the fields the rest of
//! weir needs.
//!
//! One [`LinkType`] variant and one [`LinkInfo`] row per link type: everything that names,
//! numbers or measures a link type reads it from here. Which link types a filter can be
//! compiled for is the lowering's business (`weir_pflang`), not this table's: the table
//! knows [`LinkType::Ppp`] because `pppoes` reaches it, even though pflang does not take it
//! as a capture's link type.

mod opaque;

pub use opaque::OpaqueLink;

/// The link types weir knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LinkType {
    /// BSD loopback: a 4-byte address family in the capturing host's byte order.
    Null,
    /// Ethernet (and 802.3).
    Ethernet,
    /// PPP: a 4-byte header (address, control, protocol).
    Ppp,
    /// Raw IP: IPv4 or IPv6 with no link header.
    Raw,
    /// OpenBSD loopback: a 4-byte address family in network byte order.
    Loop,
    /// Linux cooked capture, version 1.
    LinuxSll,
    /// Raw IPv4.
    Ipv4,
    /// Raw IPv6.
    Ipv6,
    /// Linux cooked capture, version 2.
    LinuxSll2,
    /// SLIP: a 16-byte pseudo-header (direction, then the compressed-header state) before
    /// the IP packet.
    Slip,
    /// PPP in HDLC-like framing (RFC 1662): address, control, protocol.
    PppSerial,
    /// Cisco HDLC: address, control, then an EtherType.
    CHdlc,
    /// IEEE 802.11 frames, with no radio header before them.
    Ieee80211,
    /// IEEE 802.11 after a Prism monitor-mode header (or an AVS one, told by its cookie).
    Prism,
    /// IEEE 802.11 after a radiotap header (its little-endian length at offset 2).
    Radiotap,
    /// IEEE 802.11 after an AVS radio header (its big-endian length at offset 4).
    Avs,
    /// Per-Packet Information: a header of its own little-endian length (at offset 2) that
    /// names the link type after it (a little-endian DLT at offset 4; filters take 802.11).
    Ppi,
    /// Frame Relay: a 2-byte Q.922 address, then (RFC 2427) the UI control byte and an
    /// NLPID saying what follows.
    FrameRelay,
    /// ARCnet as BSD captures it: source and destination addresses (a byte each), then
    /// the ARCnet protocol ID.
    ArcnetBsd,
    /// ARCnet as Linux captures it: the two addresses, a 2-byte offset field, then the
    /// protocol ID.
    ArcnetLinux,
    /// IP over InfiniBand (RFC 4391): a 2-byte EtherType and 2 reserved bytes.
    IpOverIb,
    /// Linux netfilter log messages: family, version and resource ID, then TLVs (the
    /// packet is the payload TLV's value).
    Nflog,
    /// FDDI: frame control, destination and source MACs (13 bytes), then 802.2 LLC.
    Fddi,
    /// IEEE 802.5 Token Ring: access control, frame control, destination and source MACs
    /// (14 bytes, without source routing), then 802.2 LLC.
    TokenRing,
    /// SunATM: a 4-byte pseudo-header (traffic type in the low nibble of byte 0, VPI at 1,
    /// VCI at 2) before an AAL5 PDU: 802.2 LLC, LANE (2 bytes, then an Ethernet frame) or
    /// signalling.
    SunAtm,
    /// OpenBSD pflog: a header of its own length (the byte at 0, padded to 4 bytes) with
    /// the address family, action, reason, interface, ruleset, rule numbers and direction.
    Pflog,
    /// Solaris ipnet: a 24-byte header (version, address family at 1, direction at 2,
    /// lengths, zones) before the IP packet.
    Ipnet,
    /// Ethernet with a 4-byte Broadcom switch tag after the source MAC.
    DsaTagBrcm,
    /// Ethernet after a 4-byte Broadcom switch tag.
    DsaTagBrcmPrepend,
    /// Ethernet with a 4-byte Marvell DSA tag after the source MAC.
    DsaTagDsa,
    /// Ethernet with an 8-byte Marvell EDSA tag (an EtherType, 2 reserved bytes, the DSA
    /// tag) after the source MAC.
    DsaTagEdsa,
    /// Linux vISDN LAPD: a Linux cooked header before the LAPD frame.
    LinuxLapd,
    /// DOCSIS MAC frames (a 6-byte DOCSIS header before an Ethernet frame in data PDUs).
    Docsis,
    /// Linux IrDA: a Linux cooked header before the IrLAP frame.
    LinuxIrda,
    /// OpenBSD pfsync state messages.
    Pfsync,
    /// IEEE 802.15.4 frames with Linux padding.
    Ieee802154Linux,
    /// IEEE 802.15.4 frames ending in their FCS.
    Ieee802154,
    /// IEEE 802.15.4 frames with the PHY's preamble, delimiter and length.
    Ieee802154NonaskPhy,
    /// IEEE 802.15.4 frames without their FCS.
    Ieee802154Nofcs,
    /// IEEE 802.15.4 frames after a TLV pseudo-header.
    Ieee802154Tap,
    /// SS7 MTP2 after a 4-byte pseudo-header (sent, Annex A, link number).
    Mtp2WithPhdr,
    /// SS7 MTP2 frames: sequence numbers, the length indicator, then (MSUs) MTP3.
    Mtp2,
    /// SS7 MTP3 messages: the service information octet, then the routing label.
    Mtp3,
    /// ATM AAL5 frames with RFC 1483 LLC encapsulation: 802.2 LLC (SNAP) from the start.
    AtmRfc1483,
    /// OpenBSD enc(4): a 12-byte header (the address family in the capturing host's byte
    /// order, SPI, flags) before the IP packet.
    Enc,
    /// LocalTalk: the LLAP header and DDP; libpcap's filters see no type field.
    Ltalk,
    /// RFC 2625 IP over Fibre Channel: a 16-byte network header (destination and source
    /// addresses, each a 2-byte prefix and a MAC), then 802.2 LLC.
    IpOverFc,
    /// BACnet MS/TP frames: the 0x55 0xff preamble, frame type, addresses, length, CRC.
    BacnetMsTp,
    /// Ethernet after a 4-byte Hilscher netANALYZER pseudo-header.
    NetAnalyzer,
    /// Ethernet with its preamble and SFD, after a 4-byte netANALYZER pseudo-header.
    NetAnalyzerTransparent,
    /// Juniper Multi-Link PPP: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperMlppp,
    /// Juniper Multi-Link Frame Relay: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperMlfr,
    /// Juniper Encryption Services PIC: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperEs,
    /// Juniper GGSN PIC: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperGgsn,
    /// Juniper FRF.16 Frame Relay: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperMfr,
    /// Juniper ATM2 PIC: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperAtm2,
    /// Juniper Advanced Services PIC: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperServices,
    /// Juniper ATM1 PIC: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperAtm1,
    /// Juniper Passive Monitor PIC: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperMonitor,
    /// Juniper PPPoE: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperPppoe,
    /// Juniper PPPoE/ATM: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperPppoeAtm,
    /// Juniper Ethernet: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperEther,
    /// Juniper PPP: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperPpp,
    /// Juniper Frame Relay: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperFrelay,
    /// Juniper C-HDLC: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperChdlc,
    /// Juniper Voice PIC: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperVp,
    /// Juniper Virtual Server: a Juniper capture header (its `MGC` magic, flags, extensions)
    /// before the frame.
    JuniperVs,
    /// Juniper Integrated Service Module: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperIsm,
    /// Juniper Secure Tunnel: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperSt,
    /// Juniper SRX E2E: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperSrxE2e,
    /// Juniper Fibre Channel: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperFibreChannel,
    /// Juniper ATM CEMIC: a Juniper capture header (its `MGC` magic, flags, extensions) before the
    /// frame.
    JuniperAtmCemic,
    /// Juniper PIC Peer link-layer captures, for which libpcap compiles no protocol test.
    JuniperPicPeer,
    /// Endace ERF records (libpcap compiles only the SS7 tests for them, 20 bytes in).
    Erf,
    /// FRF.16 multi-link Frame Relay.
    Mfr,
    /// AX.25 frames after a KISS header.
    Ax25Kiss,
    /// BSD/OS SLIP: a 24-byte header before the IP packet.
    SlipBsdos,
    /// BSD/OS PPP: a 24-byte header with the PPP protocol at 5.
    PppBsdos,
    /// Linux Classical IP over ATM: 802.2 LLC (SNAP) from the start.
    AtmClip,
    /// PPPoE session frames without their Ethernet header: the 6-byte PPPoE header, then
    /// the PPP protocol.
    PppEther,
    /// Symantec Enterprise Firewall captures: a 44-byte header with an EtherType at 6.
    SymantecFirewall,
    /// Apple IP over IEEE 1394 (FireWire): addresses, then an EtherType at 16.
    AppleIpOverIeee1394,
    /// PPP as pppd logs it: a direction byte instead of the address, control, protocol.
    PppPppd,
    /// A link type known only by its name and number (USB, CAN, Bluetooth, netlink ...):
    /// libpcap compiles only `link[]`-style tests for it.
    Opaque(OpaqueLink),
}

/// The facts of one link type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkInfo {
    /// The name `-y` accepts and libpcap prints (the DLT_ name without its prefix).
    pub name: &'static str,
    /// Other names `-y` accepts for it.
    pub aliases: &'static [&'static str],
    /// The DLT_ number libpcap uses on Linux (what `pcap_datalink` gives for a capture of
    /// this link type, and `pcap_open_dead` takes).
    pub dlt: u32,
    /// The LINKTYPE_ number capture files store.
    pub linktype: u32,
    /// Other numbers that mean this link type: DLT_ values of other systems.
    pub other_numbers: &'static [u32],
    /// What libpcap calls it in messages ("no VLAN support for ...").
    pub description: &'static str,
    /// Length of the link header: where the link payload (the network layer) starts.
    pub header_len: u32,
    /// Offset of the field that says what the payload is (EtherType, SLL protocol, address
    /// family, PPP protocol), or `None` when there is none.
    pub type_offset: Option<u32>,
}

/// The pattern that matches every Juniper capture format (the `MGC` magic first): the one
/// list of them, for `match` arms that must stay exhaustive (a guard such as
/// [`LinkType::is_juniper`] would not be counted by the compiler).
///
/// ```
/// use weir_packet::{juniper_links, LinkType};
///
/// assert!(matches!(LinkType::JuniperEther, juniper_links!()));
/// assert!(!matches!(LinkType::JuniperPicPeer, juniper_links!()));
/// ```
#[macro_export]
macro_rules! juniper_links {
    () => {
        $crate::LinkType::JuniperMlppp
            | $crate::LinkType::JuniperMlfr
            | $crate::LinkType::JuniperEs
            | $crate::LinkType::JuniperGgsn
            | $crate::LinkType::JuniperMfr
            | $crate::LinkType::JuniperAtm2
            | $crate::LinkType::JuniperServices
            | $crate::LinkType::JuniperAtm1
            | $crate::LinkType::JuniperMonitor
            | $crate::LinkType::JuniperPppoe
            | $crate::LinkType::JuniperPppoeAtm
            | $crate::LinkType::JuniperEther
            | $crate::LinkType::JuniperPpp
            | $crate::LinkType::JuniperFrelay
            | $crate::LinkType::JuniperChdlc
            | $crate::LinkType::JuniperVp
            | $crate::LinkType::JuniperVs
            | $crate::LinkType::JuniperIsm
            | $crate::LinkType::JuniperSt
            | $crate::LinkType::JuniperSrxE2e
            | $crate::LinkType::JuniperFibreChannel
            | $crate::LinkType::JuniperAtmCemic
    };
}

impl LinkType {
    /// Every link type, in DLT order.
    pub const ALL: [LinkType; 152] = [
        LinkType::Null,
        LinkType::Ethernet,
        LinkType::TokenRing,
        LinkType::ArcnetBsd,
        LinkType::Slip,
        LinkType::Ppp,
        LinkType::Fddi,
        LinkType::AtmRfc1483,
        LinkType::Raw,
        LinkType::SlipBsdos,
        LinkType::PppBsdos,
        LinkType::AtmClip,
        LinkType::PppSerial,
        LinkType::PppEther,
        LinkType::SymantecFirewall,
        LinkType::CHdlc,
        LinkType::Ieee80211,
        LinkType::FrameRelay,
        LinkType::Loop,
        LinkType::Enc,
        LinkType::LinuxSll,
        LinkType::Ltalk,
        LinkType::Pflog,
        LinkType::Prism,
        LinkType::IpOverFc,
        LinkType::SunAtm,
        LinkType::Radiotap,
        LinkType::ArcnetLinux,
        LinkType::JuniperMlppp,
        LinkType::JuniperMlfr,
        LinkType::JuniperEs,
        LinkType::JuniperGgsn,
        LinkType::JuniperMfr,
        LinkType::JuniperAtm2,
        LinkType::JuniperServices,
        LinkType::JuniperAtm1,
        LinkType::AppleIpOverIeee1394,
        LinkType::Mtp2WithPhdr,
        LinkType::Mtp2,
        LinkType::Mtp3,
        LinkType::Opaque(OpaqueLink::Sccp),
        LinkType::Docsis,
        LinkType::LinuxIrda,
        LinkType::Avs,
        LinkType::JuniperMonitor,
        LinkType::BacnetMsTp,
        LinkType::PppPppd,
        LinkType::JuniperPppoe,
        LinkType::JuniperPppoeAtm,
        LinkType::Opaque(OpaqueLink::GprsLlc),
        LinkType::Opaque(OpaqueLink::GpfT),
        LinkType::Opaque(OpaqueLink::GpfF),
        LinkType::JuniperPicPeer,
        LinkType::Opaque(OpaqueLink::ErfEth),
        LinkType::Opaque(OpaqueLink::ErfPos),
        LinkType::LinuxLapd,
        LinkType::JuniperEther,
        LinkType::JuniperPpp,
        LinkType::JuniperFrelay,
        LinkType::JuniperChdlc,
        LinkType::Mfr,
        LinkType::JuniperVp,
        LinkType::Opaque(OpaqueLink::A429),
        LinkType::Opaque(OpaqueLink::A653Icm),
        LinkType::Opaque(OpaqueLink::UsbFreebsd),
        LinkType::Opaque(OpaqueLink::BluetoothHciH4),
        LinkType::Opaque(OpaqueLink::Ieee80216MacCps),
        LinkType::Opaque(OpaqueLink::UsbLinux),
        LinkType::Opaque(OpaqueLink::Can20b),
        LinkType::Ieee802154Linux,
        LinkType::Ppi,
        LinkType::Opaque(OpaqueLink::Ieee80216MacCpsRadio),
        LinkType::JuniperIsm,
        LinkType::Ieee802154,
        LinkType::Opaque(OpaqueLink::Sita),
        LinkType::Erf,
        LinkType::Opaque(OpaqueLink::Raif1),
        LinkType::Opaque(OpaqueLink::IpmbKontron),
        LinkType::JuniperSt,
        LinkType::Opaque(OpaqueLink::BluetoothHciH4WithPhdr),
        LinkType::Ax25Kiss,
        LinkType::Opaque(OpaqueLink::IpmbLinux),
        LinkType::Ieee802154NonaskPhy,
        LinkType::Opaque(OpaqueLink::LinuxEvdev),
        LinkType::Opaque(OpaqueLink::Mpls),
        LinkType::Opaque(OpaqueLink::UsbLinuxMmapped),
        LinkType::Opaque(OpaqueLink::Dect),
        LinkType::Opaque(OpaqueLink::Aos),
        LinkType::Opaque(OpaqueLink::Wihart),
        LinkType::Opaque(OpaqueLink::Fc2),
        LinkType::Opaque(OpaqueLink::Fc2WithFrameDelims),
        LinkType::Ipnet,
        LinkType::Opaque(OpaqueLink::CanSocketcan),
        LinkType::Ipv4,
        LinkType::Ipv6,
        LinkType::Ieee802154Nofcs,
        LinkType::Opaque(OpaqueLink::Dbus),
        LinkType::JuniperVs,
        LinkType::JuniperSrxE2e,
        LinkType::JuniperFibreChannel,
        LinkType::Opaque(OpaqueLink::DvbCi),
        LinkType::Opaque(OpaqueLink::Mux27010),
        LinkType::Opaque(OpaqueLink::Stanag5066DPdu),
        LinkType::JuniperAtmCemic,
        LinkType::Nflog,
        LinkType::NetAnalyzer,
        LinkType::NetAnalyzerTransparent,
        LinkType::IpOverIb,
        LinkType::Opaque(OpaqueLink::Mpeg2Ts),
        LinkType::Opaque(OpaqueLink::Ng40),
        LinkType::Opaque(OpaqueLink::NfcLlcp),
        LinkType::Pfsync,
        LinkType::Opaque(OpaqueLink::Infiniband),
        LinkType::Opaque(OpaqueLink::Sctp),
        LinkType::Opaque(OpaqueLink::Usbpcap),
        LinkType::Opaque(OpaqueLink::RtacSerial),
        LinkType::Opaque(OpaqueLink::BluetoothLeLl),
        LinkType::Opaque(OpaqueLink::Netlink),
        LinkType::Opaque(OpaqueLink::BluetoothLinuxMonitor),
        LinkType::Opaque(OpaqueLink::BluetoothBredrBb),
        LinkType::Opaque(OpaqueLink::BluetoothLeLlWithPhdr),
        LinkType::Opaque(OpaqueLink::ProfibusDl),
        LinkType::Opaque(OpaqueLink::Pktap),
        LinkType::Opaque(OpaqueLink::Epon),
        LinkType::Opaque(OpaqueLink::IpmiHpm2),
        LinkType::Opaque(OpaqueLink::ZwaveR1R2),
        LinkType::Opaque(OpaqueLink::ZwaveR3),
        LinkType::Opaque(OpaqueLink::WattstopperDlm),
        LinkType::Opaque(OpaqueLink::Iso14443),
        LinkType::Opaque(OpaqueLink::Rds),
        LinkType::Opaque(OpaqueLink::UsbDarwin),
        LinkType::Opaque(OpaqueLink::Openflow),
        LinkType::Opaque(OpaqueLink::Sdlc),
        LinkType::Opaque(OpaqueLink::TiLlnSniffer),
        LinkType::Opaque(OpaqueLink::Vsock),
        LinkType::Opaque(OpaqueLink::NordicBle),
        LinkType::Opaque(OpaqueLink::Docsis31Xra31),
        LinkType::Opaque(OpaqueLink::EthernetMpacket),
        LinkType::Opaque(OpaqueLink::DisplayportAux),
        LinkType::LinuxSll2,
        LinkType::Opaque(OpaqueLink::Openvizsla),
        LinkType::Opaque(OpaqueLink::Ebhscr),
        LinkType::Opaque(OpaqueLink::VppDispatch),
        LinkType::DsaTagBrcm,
        LinkType::DsaTagBrcmPrepend,
        LinkType::Ieee802154Tap,
        LinkType::DsaTagDsa,
        LinkType::DsaTagEdsa,
        LinkType::Opaque(OpaqueLink::Elee),
        LinkType::Opaque(OpaqueLink::ZWaveSerial),
        LinkType::Opaque(OpaqueLink::Usb20),
        LinkType::Opaque(OpaqueLink::AtscAlp),
    ];

    /// This link type's row.
    pub const fn info(self) -> &'static LinkInfo {
        match self {
            LinkType::Opaque(opaque) => opaque.info(),
            LinkType::Null => &LinkInfo {
                name: "NULL",
                aliases: &[],
                dlt: 0,
                linktype: 0,
                other_numbers: &[],
                description: "BSD loopback",
                header_len: 4,
                type_offset: Some(0),
            },
            LinkType::Ethernet => &LinkInfo {
                name: "EN10MB",
                aliases: &[],
                dlt: 1,
                linktype: 1,
                other_numbers: &[],
                description: "Ethernet",
                header_len: 14,
                type_offset: Some(12),
            },
            LinkType::Ppp => &LinkInfo {
                name: "PPP",
                aliases: &[],
                dlt: 9,
                linktype: 9,
                other_numbers: &[],
                description: "PPP",
                header_len: 4,
                type_offset: Some(2),
            },
            LinkType::Raw => &LinkInfo {
                name: "RAW",
                aliases: &[],
                dlt: 12,
                linktype: 101,
                // DLT_RAW is 14 on some BSDs.
                other_numbers: &[14],
                description: "Raw IP",
                header_len: 0,
                type_offset: None,
            },
            LinkType::Loop => &LinkInfo {
                name: "LOOP",
                aliases: &[],
                dlt: 108,
                linktype: 108,
                other_numbers: &[],
                description: "OpenBSD loopback",
                header_len: 4,
                type_offset: Some(0),
            },
            LinkType::LinuxSll => &LinkInfo {
                name: "LINUX_SLL",
                aliases: &[],
                dlt: 113,
                linktype: 113,
                other_numbers: &[],
                description: "Linux cooked v1",
                header_len: 16,
                type_offset: Some(14),
            },
            LinkType::Ipv4 => &LinkInfo {
                name: "IPV4",
                aliases: &[],
                dlt: 228,
                linktype: 228,
                other_numbers: &[],
                description: "Raw IPv4",
                header_len: 0,
                type_offset: None,
            },
            LinkType::Ipv6 => &LinkInfo {
                name: "IPV6",
                aliases: &[],
                dlt: 229,
                linktype: 229,
                other_numbers: &[],
                description: "Raw IPv6",
                header_len: 0,
                type_offset: None,
            },
            LinkType::LinuxSll2 => &LinkInfo {
                name: "LINUX_SLL2",
                aliases: &[],
                dlt: 276,
                linktype: 276,
                other_numbers: &[],
                description: "Linux cooked v2",
                header_len: 20,
                type_offset: Some(0),
            },
            LinkType::Slip => &LinkInfo {
                name: "SLIP",
                aliases: &[],
                dlt: 8,
                linktype: 8,
                other_numbers: &[],
                description: "SLIP",
                header_len: 16,
                type_offset: None,
            },
            LinkType::PppSerial => &LinkInfo {
                name: "PPP_SERIAL",
                aliases: &[],
                dlt: 50,
                linktype: 50,
                other_numbers: &[],
                description: "PPP over serial",
                header_len: 4,
                type_offset: Some(2),
            },
            LinkType::CHdlc => &LinkInfo {
                name: "C_HDLC",
                aliases: &[],
                dlt: 104,
                linktype: 104,
                other_numbers: &[],
                description: "Cisco HDLC",
                header_len: 4,
                type_offset: Some(2),
            },
            // The 802.11 header is 24 bytes or more (QoS, four addresses, padding): the
            // length here is the shortest; filters compute the real one from the packet.
            LinkType::Ieee80211 => &LinkInfo {
                name: "IEEE802_11",
                aliases: &[],
                dlt: 105,
                linktype: 105,
                other_numbers: &[],
                description: "802.11",
                header_len: 24,
                type_offset: None,
            },
            LinkType::Prism => &LinkInfo {
                name: "PRISM_HEADER",
                aliases: &[],
                dlt: 119,
                linktype: 119,
                other_numbers: &[],
                description: "802.11 plus Prism header",
                header_len: 168,
                type_offset: None,
            },
            LinkType::Radiotap => &LinkInfo {
                name: "IEEE802_11_RADIO",
                aliases: &[],
                dlt: 127,
                linktype: 127,
                other_numbers: &[],
                description: "802.11 plus radiotap header",
                header_len: 32,
                type_offset: None,
            },
            LinkType::Avs => &LinkInfo {
                name: "IEEE802_11_RADIO_AVS",
                aliases: &[],
                dlt: 163,
                linktype: 163,
                other_numbers: &[],
                description: "802.11 plus AVS radio information header",
                header_len: 88,
                type_offset: None,
            },
            // The 4-byte header before the TLVs; the packet's place depends on them.
            LinkType::Nflog => &LinkInfo {
                name: "NFLOG",
                aliases: &[],
                dlt: 239,
                linktype: 239,
                other_numbers: &[],
                description: "Linux netfilter log messages",
                header_len: 4,
                type_offset: None,
            },
            LinkType::IpOverIb => &LinkInfo {
                name: "IPOIB",
                aliases: &[],
                dlt: 242,
                linktype: 242,
                other_numbers: &[],
                description: "RFC 4391 IP-over-Infiniband",
                header_len: 4,
                type_offset: Some(0),
            },
            LinkType::ArcnetBsd => &LinkInfo {
                name: "ARCNET",
                aliases: &[],
                dlt: 7,
                linktype: 7,
                other_numbers: &[],
                description: "BSD ARCNET",
                header_len: 6,
                type_offset: Some(2),
            },
            LinkType::ArcnetLinux => &LinkInfo {
                name: "ARCNET_LINUX",
                aliases: &[],
                dlt: 129,
                linktype: 129,
                other_numbers: &[],
                description: "Linux ARCNET",
                header_len: 8,
                type_offset: Some(4),
            },
            LinkType::FrameRelay => &LinkInfo {
                name: "FRELAY",
                aliases: &[],
                dlt: 107,
                linktype: 107,
                other_numbers: &[],
                description: "Frame Relay",
                header_len: 4,
                type_offset: None,
            },
            // No type field: the LLC header after the MACs says what follows.
            LinkType::Fddi => &LinkInfo {
                name: "FDDI",
                aliases: &[],
                dlt: 10,
                linktype: 10,
                other_numbers: &[],
                description: "FDDI",
                header_len: 13,
                type_offset: None,
            },
            LinkType::TokenRing => &LinkInfo {
                name: "IEEE802",
                aliases: &[],
                dlt: 6,
                linktype: 6,
                other_numbers: &[],
                description: "Token ring",
                header_len: 14,
                type_offset: None,
            },
            // The traffic type is a nibble of the pseudo-header, not a protocol number.
            LinkType::SunAtm => &LinkInfo {
                name: "SUNATM",
                aliases: &[],
                dlt: 123,
                linktype: 123,
                other_numbers: &[],
                description: "Sun raw ATM",
                header_len: 4,
                type_offset: None,
            },
            // The header is as long as its first byte says (61 bytes from OpenBSD, padded to
            // 64); filters read its length from the packet. The family is one byte at 1.
            LinkType::Pflog => &LinkInfo {
                name: "PFLOG",
                aliases: &[],
                dlt: 117,
                linktype: 117,
                other_numbers: &[],
                description: "OpenBSD pflog file",
                header_len: 64,
                type_offset: None,
            },
            // The address family is one byte at 1.
            LinkType::Ipnet => &LinkInfo {
                name: "IPNET",
                aliases: &[],
                dlt: 226,
                linktype: 226,
                other_numbers: &[],
                description: "Solaris ipnet",
                header_len: 24,
                type_offset: Some(1),
            },
            // Link types libpcap 1.10 compiles no protocol test for (`link[]`, `len` ...
            // only); the header lengths are where a payload would start.
            LinkType::DsaTagBrcm => &LinkInfo {
                name: "DSA_TAG_BRCM",
                aliases: &[],
                dlt: 281,
                linktype: 281,
                other_numbers: &[],
                description: "Broadcom tag",
                header_len: 18,
                type_offset: None,
            },
            LinkType::DsaTagBrcmPrepend => &LinkInfo {
                name: "DSA_TAG_BRCM_PREPEND",
                aliases: &[],
                dlt: 282,
                linktype: 282,
                other_numbers: &[],
                description: "Broadcom tag (prepended)",
                header_len: 18,
                type_offset: None,
            },
            LinkType::DsaTagDsa => &LinkInfo {
                name: "DSA_TAG_DSA",
                aliases: &[],
                dlt: 284,
                linktype: 284,
                other_numbers: &[],
                description: "Marvell DSA",
                header_len: 18,
                type_offset: None,
            },
            LinkType::DsaTagEdsa => &LinkInfo {
                name: "DSA_TAG_EDSA",
                aliases: &[],
                dlt: 285,
                linktype: 285,
                other_numbers: &[],
                description: "Marvell EDSA",
                header_len: 22,
                type_offset: None,
            },
            LinkType::LinuxLapd => &LinkInfo {
                name: "LINUX_LAPD",
                aliases: &[],
                dlt: 177,
                linktype: 177,
                other_numbers: &[],
                description: "Linux vISDN LAPD",
                header_len: 16,
                type_offset: None,
            },
            LinkType::Docsis => &LinkInfo {
                name: "DOCSIS",
                aliases: &[],
                dlt: 143,
                linktype: 143,
                other_numbers: &[],
                description: "DOCSIS",
                header_len: 6,
                type_offset: None,
            },
            LinkType::LinuxIrda => &LinkInfo {
                name: "LINUX_IRDA",
                aliases: &[],
                dlt: 144,
                linktype: 144,
                other_numbers: &[],
                description: "Linux IrDA",
                header_len: 16,
                type_offset: None,
            },
            LinkType::Pfsync => &LinkInfo {
                name: "PFSYNC",
                aliases: &[],
                dlt: 246,
                linktype: 246,
                other_numbers: &[],
                description: "Packet filter state syncing",
                header_len: 0,
                type_offset: None,
            },
            LinkType::Ieee802154Linux => &LinkInfo {
                name: "IEEE802_15_4_LINUX",
                aliases: &[],
                dlt: 191,
                linktype: 191,
                other_numbers: &[],
                description: "IEEE 802.15.4 with Linux padding",
                header_len: 0,
                type_offset: None,
            },
            LinkType::Ieee802154 => &LinkInfo {
                name: "IEEE802_15_4",
                aliases: &["IEEE802_15_4_WITHFCS"],
                dlt: 195,
                linktype: 195,
                other_numbers: &[],
                description: "IEEE 802.15.4 with FCS",
                header_len: 0,
                type_offset: None,
            },
            LinkType::Ieee802154NonaskPhy => &LinkInfo {
                name: "IEEE802_15_4_NONASK_PHY",
                aliases: &[],
                dlt: 215,
                linktype: 215,
                other_numbers: &[],
                description: "IEEE 802.15.4 with non-ASK PHY data",
                header_len: 0,
                type_offset: None,
            },
            LinkType::Ieee802154Nofcs => &LinkInfo {
                name: "IEEE802_15_4_NOFCS",
                aliases: &[],
                dlt: 230,
                linktype: 230,
                other_numbers: &[],
                description: "IEEE 802.15.4 without FCS",
                header_len: 0,
                type_offset: None,
            },
            LinkType::Ieee802154Tap => &LinkInfo {
                name: "IEEE802_15_4_TAP",
                aliases: &[],
                dlt: 283,
                linktype: 283,
                other_numbers: &[],
                description: "IEEE 802.15.4 with pseudo-header",
                header_len: 0,
                type_offset: None,
            },
            // SS7: no protocol tests; MTP2's fields are the `fisu`/`sio` ... tests.
            LinkType::Mtp2WithPhdr => &LinkInfo {
                name: "MTP2_WITH_PHDR",
                aliases: &[],
                dlt: 139,
                linktype: 139,
                other_numbers: &[],
                description: "SS7 MTP2 with Pseudo-header",
                header_len: 4,
                type_offset: None,
            },
            LinkType::Mtp2 => &LinkInfo {
                name: "MTP2",
                aliases: &[],
                dlt: 140,
                linktype: 140,
                other_numbers: &[],
                description: "SS7 MTP2",
                header_len: 3,
                type_offset: None,
            },
            LinkType::Mtp3 => &LinkInfo {
                name: "MTP3",
                aliases: &[],
                dlt: 141,
                linktype: 141,
                other_numbers: &[],
                description: "SS7 MTP3",
                header_len: 0,
                type_offset: None,
            },
            LinkType::AtmRfc1483 => &LinkInfo {
                name: "ATM_RFC1483",
                aliases: &[],
                dlt: 11,
                linktype: 100,
                other_numbers: &[],
                description: "RFC 1483 LLC-encapsulated ATM",
                header_len: 0,
                type_offset: Some(0),
            },
            LinkType::Enc => &LinkInfo {
                name: "ENC",
                aliases: &[],
                dlt: 109,
                linktype: 109,
                other_numbers: &[],
                description: "OpenBSD encapsulated IP",
                header_len: 12,
                type_offset: Some(0),
            },
            LinkType::Ltalk => &LinkInfo {
                name: "LTALK",
                aliases: &[],
                dlt: 114,
                linktype: 114,
                other_numbers: &[],
                description: "Localtalk",
                header_len: 0,
                type_offset: None,
            },
            LinkType::IpOverFc => &LinkInfo {
                name: "IP_OVER_FC",
                aliases: &[],
                dlt: 122,
                linktype: 122,
                other_numbers: &[],
                description: "RFC 2625 IP-over-Fibre Channel",
                header_len: 16,
                type_offset: Some(16),
            },
            LinkType::BacnetMsTp => &LinkInfo {
                name: "BACNET_MS_TP",
                aliases: &[],
                dlt: 165,
                linktype: 165,
                other_numbers: &[],
                description: "BACnet MS/TP",
                header_len: 8,
                type_offset: None,
            },
            LinkType::NetAnalyzer => &LinkInfo {
                name: "NETANALYZER",
                aliases: &[],
                dlt: 240,
                linktype: 240,
                other_numbers: &[],
                description: "Ethernet with Hilscher netANALYZER pseudo-header",
                header_len: 18,
                type_offset: Some(16),
            },
            LinkType::NetAnalyzerTransparent => &LinkInfo {
                name: "NETANALYZER_TRANSPARENT",
                aliases: &[],
                dlt: 241,
                linktype: 241,
                other_numbers: &[],
                description:
                    "Ethernet with Hilscher netANALYZER pseudo-header and with preamble and SFD",
                header_len: 26,
                type_offset: Some(24),
            },
            // Juniper captures: the payload's place as libpcap 1.10 notes it (0 where it
            // leaves it unset); the "type field" is what libpcap notes as one.
            LinkType::JuniperMlppp => &LinkInfo {
                name: "JUNIPER_MLPPP",
                aliases: &[],
                dlt: 130,
                linktype: 130,
                other_numbers: &[],
                description: "Juniper Multi-Link PPP",
                header_len: 4,
                type_offset: Some(4),
            },
            LinkType::JuniperMlfr => &LinkInfo {
                name: "JUNIPER_MLFR",
                aliases: &[],
                dlt: 131,
                linktype: 131,
                other_numbers: &[],
                description: "Juniper Multi-Link Frame Relay",
                header_len: 4,
                type_offset: Some(4),
            },
            LinkType::JuniperEs => &LinkInfo {
                name: "JUNIPER_ES",
                aliases: &[],
                dlt: 132,
                linktype: 132,
                other_numbers: &[],
                description: "Juniper Encryption Services PIC",
                header_len: 0,
                type_offset: Some(6),
            },
            LinkType::JuniperGgsn => &LinkInfo {
                name: "JUNIPER_GGSN",
                aliases: &[],
                dlt: 133,
                linktype: 133,
                other_numbers: &[],
                description: "Juniper GGSN PIC",
                header_len: 12,
                type_offset: Some(6),
            },
            LinkType::JuniperMfr => &LinkInfo {
                name: "JUNIPER_MFR",
                aliases: &[],
                dlt: 134,
                linktype: 134,
                other_numbers: &[],
                description: "Juniper FRF.16 Frame Relay",
                header_len: 4,
                type_offset: Some(4),
            },
            LinkType::JuniperAtm2 => &LinkInfo {
                name: "JUNIPER_ATM2",
                aliases: &[],
                dlt: 135,
                linktype: 135,
                other_numbers: &[],
                description: "Juniper ATM2 PIC",
                header_len: 8,
                type_offset: Some(8),
            },
            LinkType::JuniperServices => &LinkInfo {
                name: "JUNIPER_SERVICES",
                aliases: &[],
                dlt: 136,
                linktype: 136,
                other_numbers: &[],
                description: "Juniper Advanced Services PIC",
                header_len: 0,
                type_offset: Some(12),
            },
            LinkType::JuniperAtm1 => &LinkInfo {
                name: "JUNIPER_ATM1",
                aliases: &[],
                dlt: 137,
                linktype: 137,
                other_numbers: &[],
                description: "Juniper ATM1 PIC",
                header_len: 4,
                type_offset: Some(4),
            },
            LinkType::JuniperMonitor => &LinkInfo {
                name: "JUNIPER_MONITOR",
                aliases: &[],
                dlt: 164,
                linktype: 164,
                other_numbers: &[],
                description: "Juniper Passive Monitor PIC",
                header_len: 12,
                type_offset: Some(12),
            },
            LinkType::JuniperPppoe => &LinkInfo {
                name: "JUNIPER_PPPOE",
                aliases: &[],
                dlt: 167,
                linktype: 167,
                other_numbers: &[],
                description: "Juniper PPPoE",
                header_len: 14,
                type_offset: Some(16),
            },
            LinkType::JuniperPppoeAtm => &LinkInfo {
                name: "JUNIPER_PPPOE_ATM",
                aliases: &[],
                dlt: 168,
                linktype: 168,
                other_numbers: &[],
                description: "Juniper PPPoE/ATM",
                header_len: 6,
                type_offset: Some(4),
            },
            LinkType::JuniperEther => &LinkInfo {
                name: "JUNIPER_ETHER",
                aliases: &[],
                dlt: 178,
                linktype: 178,
                other_numbers: &[],
                description: "Juniper Ethernet",
                header_len: 14,
                type_offset: Some(16),
            },
            LinkType::JuniperPpp => &LinkInfo {
                name: "JUNIPER_PPP",
                aliases: &[],
                dlt: 179,
                linktype: 179,
                other_numbers: &[],
                description: "Juniper PPP",
                header_len: 4,
                type_offset: Some(4),
            },
            LinkType::JuniperFrelay => &LinkInfo {
                name: "JUNIPER_FRELAY",
                aliases: &[],
                dlt: 180,
                linktype: 180,
                other_numbers: &[],
                description: "Juniper Frame Relay",
                header_len: 4,
                type_offset: Some(4),
            },
            LinkType::JuniperChdlc => &LinkInfo {
                name: "JUNIPER_CHDLC",
                aliases: &[],
                dlt: 181,
                linktype: 181,
                other_numbers: &[],
                description: "Juniper C-HDLC",
                header_len: 4,
                type_offset: Some(4),
            },
            LinkType::JuniperVp => &LinkInfo {
                name: "JUNIPER_VP",
                aliases: &[],
                dlt: 183,
                linktype: 183,
                other_numbers: &[],
                description: "Juniper Voice PIC",
                header_len: 0,
                type_offset: Some(18),
            },
            LinkType::JuniperIsm => &LinkInfo {
                name: "JUNIPER_ISM",
                aliases: &[],
                dlt: 194,
                linktype: 194,
                other_numbers: &[],
                description: "Juniper Integrated Service Module",
                header_len: 0,
                type_offset: Some(8),
            },
            LinkType::JuniperSt => &LinkInfo {
                name: "JUNIPER_ST",
                aliases: &[],
                dlt: 200,
                linktype: 200,
                other_numbers: &[],
                description: "Juniper Secure Tunnel",
                header_len: 0,
                type_offset: Some(18),
            },
            LinkType::JuniperVs => &LinkInfo {
                name: "JUNIPER_VS",
                aliases: &[],
                dlt: 232,
                linktype: 232,
                other_numbers: &[],
                description: "Juniper Virtual Server",
                header_len: 0,
                type_offset: Some(8),
            },
            LinkType::JuniperSrxE2e => &LinkInfo {
                name: "JUNIPER_SRX_E2E",
                aliases: &[],
                dlt: 233,
                linktype: 233,
                other_numbers: &[],
                description: "Juniper SRX E2E",
                header_len: 0,
                type_offset: Some(8),
            },
            LinkType::JuniperFibreChannel => &LinkInfo {
                name: "JUNIPER_FIBRECHANNEL",
                aliases: &[],
                dlt: 234,
                linktype: 234,
                other_numbers: &[],
                description: "Juniper Fibre Channel",
                header_len: 0,
                type_offset: Some(8),
            },
            LinkType::JuniperAtmCemic => &LinkInfo {
                name: "JUNIPER_ATM_CEMIC",
                aliases: &[],
                dlt: 238,
                linktype: 238,
                other_numbers: &[],
                description: "Juniper ATM CEMIC",
                header_len: 0,
                type_offset: Some(8),
            },
            LinkType::JuniperPicPeer => &LinkInfo {
                name: "JUNIPER_PIC_PEER",
                aliases: &[],
                dlt: 174,
                linktype: 174,
                other_numbers: &[],
                description: "Juniper PIC Peer",
                header_len: 0,
                type_offset: None,
            },
            LinkType::Erf => &LinkInfo {
                name: "ERF",
                aliases: &[],
                dlt: 197,
                linktype: 197,
                other_numbers: &[],
                description: "Endace ERF header",
                header_len: 0,
                type_offset: None,
            },
            LinkType::Mfr => &LinkInfo {
                name: "MFR",
                aliases: &[],
                dlt: 182,
                linktype: 182,
                other_numbers: &[],
                description: "FRF.16 Frame Relay",
                header_len: 0,
                type_offset: None,
            },
            LinkType::Ax25Kiss => &LinkInfo {
                name: "AX25_KISS",
                aliases: &[],
                dlt: 202,
                linktype: 202,
                other_numbers: &[],
                description: "AX.25 with KISS header",
                header_len: 0,
                type_offset: None,
            },
            LinkType::SlipBsdos => &LinkInfo {
                name: "SLIP_BSDOS",
                aliases: &[],
                dlt: 15,
                linktype: 15,
                other_numbers: &[],
                description: "BSD/OS SLIP",
                header_len: 24,
                type_offset: None,
            },
            LinkType::PppBsdos => &LinkInfo {
                name: "PPP_BSDOS",
                aliases: &[],
                dlt: 16,
                linktype: 16,
                other_numbers: &[],
                description: "BSD/OS PPP",
                header_len: 24,
                type_offset: Some(5),
            },
            LinkType::AtmClip => &LinkInfo {
                name: "ATM_CLIP",
                aliases: &[],
                dlt: 19,
                linktype: 106,
                other_numbers: &[],
                description: "Linux Classical IP over ATM",
                header_len: 0,
                type_offset: Some(0),
            },
            LinkType::PppEther => &LinkInfo {
                name: "PPP_ETHER",
                aliases: &[],
                dlt: 51,
                linktype: 51,
                other_numbers: &[],
                description: "PPPoE",
                header_len: 8,
                type_offset: Some(6),
            },
            LinkType::SymantecFirewall => &LinkInfo {
                name: "SYMANTEC_FIREWALL",
                aliases: &[],
                dlt: 99,
                linktype: 99,
                other_numbers: &[],
                description: "Symantec Firewall",
                header_len: 44,
                type_offset: Some(6),
            },
            LinkType::AppleIpOverIeee1394 => &LinkInfo {
                name: "APPLE_IP_OVER_IEEE1394",
                aliases: &[],
                dlt: 138,
                linktype: 138,
                other_numbers: &[],
                description: "Apple IP-over-IEEE 1394",
                header_len: 18,
                type_offset: Some(16),
            },
            LinkType::PppPppd => &LinkInfo {
                name: "PPP_PPPD",
                aliases: &[],
                dlt: 166,
                linktype: 166,
                other_numbers: &[],
                description: "PPP for pppd, with direction flag",
                header_len: 4,
                type_offset: Some(2),
            },
            // The PPI header is 8 bytes or more; filters read its length from the packet.
            LinkType::Ppi => &LinkInfo {
                name: "PPI",
                aliases: &[],
                dlt: 192,
                linktype: 192,
                other_numbers: &[],
                description: "Per-Packet Information",
                header_len: 32,
                type_offset: None,
            },
        }
    }

    /// Whether the link carries IEEE 802.11 frames (after a radio header or not).
    pub const fn is_ieee80211(self) -> bool {
        matches!(
            self,
            LinkType::Ieee80211
                | LinkType::Prism
                | LinkType::Radiotap
                | LinkType::Avs
                | LinkType::Ppi
        )
    }

    /// Whether the link is Ethernet, or Ethernet behind a fixed-length pseudo-header
    /// (netANALYZER's), with the same link-level tests.
    pub const fn is_ethernet(self) -> bool {
        matches!(
            self,
            LinkType::Ethernet | LinkType::NetAnalyzer | LinkType::NetAnalyzerTransparent
        )
    }

    /// Whether the link is one of Juniper's capture formats (the `MGC` magic first).
    pub const fn is_juniper(self) -> bool {
        matches!(self, crate::juniper_links!())
    }

    /// Whether the link is ARCnet (BSD's or Linux's header).
    pub const fn is_arcnet(self) -> bool {
        matches!(self, LinkType::ArcnetBsd | LinkType::ArcnetLinux)
    }

    /// The name tcpdump's `-y` accepts (and libpcap prints).
    pub const fn name(self) -> &'static str {
        self.info().name
    }

    /// The DLT_ number libpcap uses for it on Linux.
    pub const fn dlt(self) -> u32 {
        self.info().dlt
    }

    /// The LINKTYPE_ number a capture file stores for it.
    pub const fn linktype(self) -> u32 {
        self.info().linktype
    }

    /// libpcap's description, as its error messages use it.
    pub const fn description(self) -> &'static str {
        self.info().description
    }

    /// Where the link payload starts.
    pub const fn header_len(self) -> u32 {
        self.info().header_len
    }

    /// Where the payload's type field is, if the header has one.
    pub const fn type_offset(self) -> Option<u32> {
        self.info().type_offset
    }

    /// The link type for a DLT_ or LINKTYPE_ number (they differ only where no two link
    /// types share a number, e.g. raw IP is DLT 12 or 14 and LINKTYPE 101).
    ///
    /// The whole value must match: a pcap header field with flag bits above the link type
    /// (see [`LinkField`]) is not a link type here.
    pub fn from_number(n: u32) -> Option<LinkType> {
        LinkType::ALL.into_iter().find(|l| {
            let info = l.info();
            info.dlt == n || info.linktype == n || info.other_numbers.contains(&n)
        })
    }

    /// Parses a `-y` argument: a name or alias, in any case (as tcpdump compares them), or
    /// a number (see [`LinkType::from_number`]).
    pub fn from_name(name: &str) -> Option<LinkType> {
        if let Ok(n) = name.parse::<u32>() {
            return LinkType::from_number(n);
        }
        LinkType::ALL.into_iter().find(|l| {
            let info = l.info();
            info.name.eq_ignore_ascii_case(name)
                || info.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
        })
    }
}

impl std::fmt::Display for LinkType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The link-type field of a pcap file header: the LINKTYPE_ number in the low 26 bits and,
/// above it, whether the packets end in a frame check sequence and how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkField(pub u32);

impl LinkField {
    /// Bits of the LINKTYPE_ number (libpcap's `LT_LINKTYPE`).
    pub const LINKTYPE_MASK: u32 = 0x03ff_ffff;
    /// Set when the FCS length is given.
    pub const FCS_PRESENT: u32 = 0x0400_0000;

    /// The LINKTYPE_ number, without the flag bits.
    pub const fn linktype(self) -> u32 {
        self.0 & LinkField::LINKTYPE_MASK
    }

    /// The length in bytes of the frame check sequence each packet ends with, when the
    /// field says (the top four bits count 16-bit words).
    pub const fn fcs_len(self) -> Option<u32> {
        if self.0 & LinkField::FCS_PRESENT == 0 {
            None
        } else {
            Some((self.0 >> 28) * 2)
        }
    }

    /// The link type of the LINKTYPE_ number, flag bits ignored.
    pub fn link_type(self) -> Option<LinkType> {
        LinkType::from_number(self.linktype())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_and_numbers_round_trip() {
        for link in LinkType::ALL {
            let info = link.info();
            assert_eq!(LinkType::from_name(info.name), Some(link), "{link:?}");
            assert_eq!(LinkType::from_name(&info.name.to_ascii_lowercase()), Some(link));
            for alias in info.aliases {
                assert_eq!(LinkType::from_name(alias), Some(link), "{alias}");
            }
            assert_eq!(LinkType::from_number(info.dlt), Some(link));
            assert_eq!(LinkType::from_number(info.linktype), Some(link));
            for &n in info.other_numbers {
                assert_eq!(LinkType::from_number(n), Some(link));
            }
            assert_eq!(LinkType::from_name(&info.dlt.to_string()), Some(link));
            assert_eq!(link.to_string(), info.name);
        }
        assert_eq!(LinkType::from_name("en10mb"), Some(LinkType::Ethernet));
        assert_eq!(LinkType::from_name("Linux_Sll2"), Some(LinkType::LinuxSll2));
        assert_eq!(LinkType::from_name("nope"), None);
        assert_eq!(LinkType::from_name(""), None);
        assert_eq!(LinkType::from_number(147), None);
    }

    #[test]
    fn no_name_or_number_is_used_twice() {
        let mut names = HashSet::new();
        let mut numbers = HashSet::new();
        for link in LinkType::ALL {
            let info = link.info();
            for name in std::iter::once(&info.name).chain(info.aliases) {
                assert!(names.insert(name.to_ascii_uppercase()), "name {name} twice");
                assert!(name.parse::<u32>().is_err(), "name {name} is a number");
            }
            let mut own: Vec<u32> = vec![info.dlt, info.linktype];
            own.extend_from_slice(info.other_numbers);
            own.sort_unstable();
            own.dedup();
            for n in own {
                assert!(numbers.insert(n), "number {n} twice");
            }
        }
        let all: HashSet<LinkType> = LinkType::ALL.into_iter().collect();
        assert_eq!(all.len(), LinkType::ALL.len());
        assert!(LinkType::ALL.windows(2).all(|w| w[0].dlt() < w[1].dlt()));
    }

    #[test]
    fn the_header_field_keeps_flags_apart() {
        let plain = LinkField(1);
        assert_eq!(
            (plain.linktype(), plain.fcs_len(), plain.link_type()),
            (1, None, Some(LinkType::Ethernet))
        );
        // Ethernet with a 4-byte FCS: F bit and two 16-bit words.
        let fcs = LinkField(0x2400_0001);
        assert_eq!(fcs.linktype(), 1);
        assert_eq!(fcs.fcs_len(), Some(4));
        assert_eq!(fcs.link_type(), Some(LinkType::Ethernet));
        assert_eq!(LinkType::from_number(fcs.0), None, "numbers match whole");
    }
}
