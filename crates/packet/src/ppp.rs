//! PPP protocol numbers (the `PPP_*` values): the protocol field of a PPP header, as after
//! PPPoE session headers.

pub const IP: u16 = 0x0021;
/// OSI network layer.
pub const OSI: u16 = 0x0023;
/// Xerox NS IDP.
pub const NS: u16 = 0x0025;
pub const DECNET: u16 = 0x0027;
/// AppleTalk.
pub const APPLE: u16 = 0x0029;
pub const IPX: u16 = 0x002b;
/// Bridging PDU (spanning tree).
pub const BRPDU: u16 = 0x0031;
pub const IPV6: u16 = 0x0057;
pub const MPLS_UCAST: u16 = 0x0281;

/// Every PPP protocol named here, with its name for printing.
pub const TABLE: &[(u16, &str)] = &[
    (IP, "IP"),
    (OSI, "OSI"),
    (NS, "NS"),
    (DECNET, "DECnet"),
    (APPLE, "AppleTalk"),
    (IPX, "IPX"),
    (BRPDU, "BPDU"),
    (IPV6, "IPv6"),
    (MPLS_UCAST, "MPLS unicast"),
];

/// The printing name of a PPP protocol.
pub fn name(proto: u16) -> Option<&'static str> {
    TABLE.iter().find(|(v, _)| *v == proto).map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    #[test]
    fn values_and_names_are_unique() {
        crate::tests::unique(super::TABLE);
    }
}
