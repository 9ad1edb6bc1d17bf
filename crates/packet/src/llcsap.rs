//! 802.2 LLC service access points (the `LLCSAP_*` values): the DSAP and SSAP bytes of the
//! LLC header that follows an 802.3 frame's MAC header.

/// IP over 802.2 (not over SNAP).
pub const IP: u8 = 0x06;
/// 802.1D spanning tree.
pub const STP: u8 = 0x42;
/// SNAP: an organization code and an Ethernet type follow.
pub const SNAP: u8 = 0xaa;
/// Novell IPX.
pub const IPX: u8 = 0xe0;
/// NetBEUI.
pub const NETBEUI: u8 = 0xf0;
/// The ISO/OSI network layer (CLNP, ES-IS, IS-IS).
pub const ISONS: u8 = 0xfe;

/// Every SAP named here, with its name for printing.
pub const TABLE: &[(u8, &str)] =
    &[(IP, "IP"), (STP, "STP"), (SNAP, "SNAP"), (IPX, "IPX"), (NETBEUI, "NetBEUI"), (ISONS, "OSI")];

/// The printing name of a SAP.
pub fn name(sap: u8) -> Option<&'static str> {
    TABLE.iter().find(|(v, _)| *v == sap).map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    #[test]
    fn values_and_names_are_unique() {
        crate::tests::unique(super::TABLE);
    }
}
