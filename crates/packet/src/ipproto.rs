//! IP protocol numbers (the `IPPROTO_*` values): IPv4's protocol field and IPv6's next
//! header, extension headers included.

/// IPv6 hop-by-hop options.
pub const HOPOPTS: u8 = 0;
pub const ICMP: u8 = 1;
pub const IGMP: u8 = 2;
/// IPv4 in IPv4.
pub const IPIP: u8 = 4;
pub const TCP: u8 = 6;
pub const EGP: u8 = 8;
pub const IGRP: u8 = 9;
pub const UDP: u8 = 17;
pub const DCCP: u8 = 33;
/// IPv6 in IP.
pub const IPV6: u8 = 41;
/// IPv6 routing header.
pub const ROUTING: u8 = 43;
/// IPv6 fragment header.
pub const FRAGMENT: u8 = 44;
pub const RSVP: u8 = 46;
pub const GRE: u8 = 47;
pub const ESP: u8 = 50;
pub const AH: u8 = 51;
pub const ICMPV6: u8 = 58;
/// IPv6: no next header.
pub const NONE: u8 = 59;
/// IPv6 destination options.
pub const DSTOPTS: u8 = 60;
pub const OSPF: u8 = 89;
pub const PIM: u8 = 103;
/// VRRP (and CARP, which uses its number).
pub const VRRP: u8 = 112;
pub const L2TP: u8 = 115;
pub const SCTP: u8 = 132;
pub const UDPLITE: u8 = 136;

/// Every protocol named here, with its name for printing (the protocols(5) names).
pub const TABLE: &[(u8, &str)] = &[
    (HOPOPTS, "hopopt"),
    (ICMP, "icmp"),
    (IGMP, "igmp"),
    (IPIP, "ipencap"),
    (TCP, "tcp"),
    (EGP, "egp"),
    (IGRP, "igrp"),
    (UDP, "udp"),
    (DCCP, "dccp"),
    (IPV6, "ipv6"),
    (ROUTING, "ipv6-route"),
    (FRAGMENT, "ipv6-frag"),
    (RSVP, "rsvp"),
    (GRE, "gre"),
    (ESP, "esp"),
    (AH, "ah"),
    (ICMPV6, "ipv6-icmp"),
    (NONE, "ipv6-nonxt"),
    (DSTOPTS, "ipv6-opts"),
    (OSPF, "ospf"),
    (PIM, "pim"),
    (VRRP, "vrrp"),
    (L2TP, "l2tp"),
    (SCTP, "sctp"),
    (UDPLITE, "udplite"),
];

/// The printing name of an IP protocol.
pub fn name(proto: u8) -> Option<&'static str> {
    TABLE.iter().find(|(v, _)| *v == proto).map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_names_are_unique() {
        crate::tests::unique(TABLE);
        assert_eq!(name(TCP), Some("tcp"));
        assert_eq!(name(255), None);
    }
}
