//! Ethernet types (the `ETHERTYPE_*` values): the 16-bit field after the MAC addresses, in
//! Linux cooked headers, after VLAN tags, in GRE and Geneve.
//!
//! A type/length field up to [`ETHERMTU`] is an 802.3 length instead, and an 802.2 LLC
//! header (see [`crate::llcsap`]) follows the MAC header.

/// The largest 802.3 length: a type/length field up to this is a length.
pub const ETHERMTU: u16 = 1500;

/// Xerox NS IDP.
pub const NS: u16 = 0x0600;
/// IPv4.
pub const IP: u16 = 0x0800;
/// ARP.
pub const ARP: u16 = 0x0806;
/// DEC MOP dump/load.
pub const MOPDL: u16 = 0x6001;
/// DEC MOP remote console.
pub const MOPRC: u16 = 0x6002;
/// DECnet phase IV.
pub const DN: u16 = 0x6003;
/// DEC LAT.
pub const LAT: u16 = 0x6004;
/// DEC SCA.
pub const SCA: u16 = 0x6007;
/// Transparent Ethernet bridging: an Ethernet frame inside Geneve or GRE.
pub const TEB: u16 = 0x6558;
/// Reverse ARP.
pub const REVARP: u16 = 0x8035;
/// AppleTalk (EtherTalk).
pub const ATALK: u16 = 0x809b;
/// AppleTalk ARP.
pub const AARP: u16 = 0x80f3;
/// 802.1Q customer VLAN tag.
pub const VLAN_8021Q: u16 = 0x8100;
/// Novell IPX.
pub const IPX: u16 = 0x8137;
/// IPv6.
pub const IPV6: u16 = 0x86dd;
/// MPLS unicast.
pub const MPLS: u16 = 0x8847;
/// MPLS multicast.
pub const MPLS_MULTI: u16 = 0x8848;
/// PPPoE discovery.
pub const PPPOED: u16 = 0x8863;
/// PPPoE session.
pub const PPPOES: u16 = 0x8864;
/// 802.1ad service VLAN tag.
pub const VLAN_8021AD: u16 = 0x88a8;
/// Link Layer Discovery Protocol.
pub const LLDP: u16 = 0x88cc;
/// Loopback (configuration test protocol).
pub const LOOPBACK: u16 = 0x9000;
/// The pre-standard QinQ tag.
pub const VLAN_9100: u16 = 0x9100;
/// Another pre-standard QinQ tag.
pub const VLAN_9200: u16 = 0x9200;

/// VLAN tags: a 4-byte tag whose last two bytes are the next Ethernet type.
pub const VLAN_TAGS: [u16; 4] = [VLAN_8021Q, VLAN_8021AD, VLAN_9100, VLAN_9200];

/// Every Ethernet type named here, with its name for printing.
pub const TABLE: &[(u16, &str)] = &[
    (NS, "NS"),
    (IP, "IPv4"),
    (ARP, "ARP"),
    (MOPDL, "MOP DL"),
    (MOPRC, "MOP RC"),
    (DN, "DECnet"),
    (LAT, "LAT"),
    (SCA, "SCA"),
    (TEB, "TEB"),
    (REVARP, "RARP"),
    (ATALK, "AppleTalk"),
    (AARP, "AARP"),
    (VLAN_8021Q, "802.1Q"),
    (IPX, "IPX"),
    (IPV6, "IPv6"),
    (MPLS, "MPLS unicast"),
    (MPLS_MULTI, "MPLS multicast"),
    (PPPOED, "PPPoE D"),
    (PPPOES, "PPPoE S"),
    (VLAN_8021AD, "802.1ad"),
    (LLDP, "LLDP"),
    (LOOPBACK, "Loopback"),
    (VLAN_9100, "QinQ"),
    (VLAN_9200, "QinQ 0x9200"),
];

/// The printing name of an Ethernet type.
pub fn name(ethertype: u16) -> Option<&'static str> {
    TABLE.iter().find(|(v, _)| *v == ethertype).map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_names_are_unique_and_types_not_lengths() {
        crate::tests::unique(TABLE);
        assert!(TABLE.iter().all(|(v, _)| *v > ETHERMTU));
        assert_eq!(name(IPV6), Some("IPv6"));
        assert_eq!(name(0x1234), None);
    }
}
