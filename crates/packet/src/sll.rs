//! Linux cooked capture headers (v1 and v2): the protocol values Linux uses for non-Ethernet
//! framing, and the packet types that say which way a packet went.
//!
//! v1 (16 bytes): packet type (2), ARPHRD type (2), address length (2), address (8),
//! protocol (2). v2 (20 bytes): protocol (2), reserved (2), interface index (4), ARPHRD type
//! (2), packet type (1), address length (1), address (8).

/// Protocol of a raw 802.3 frame (Novell IPX with no 802.2 header).
pub const P_802_3: u16 = 0x0001;
/// Protocol of an 802.3 frame with an 802.2 LLC header.
pub const P_802_2: u16 = 0x0004;

/// Packet type: addressed to this host.
pub const HOST: u8 = 0;
/// Packet type: broadcast.
pub const BROADCAST: u8 = 1;
/// Packet type: multicast.
pub const MULTICAST: u8 = 2;
/// Packet type: to another host, seen in promiscuous mode.
pub const OTHERHOST: u8 = 3;
/// Packet type: sent by this host.
pub const OUTGOING: u8 = 4;

/// The ARPHRD type of Ethernet interfaces.
pub const ARPHRD_ETHER: u16 = 1;

/// Offset of the packet type in a v1 header (a 16-bit field).
pub const V1_PACKET_TYPE: u32 = 0;
/// Offset of the packet type in a v2 header (a byte).
pub const V2_PACKET_TYPE: u32 = 10;
/// Offset of the interface index in a v2 header (32 bits).
pub const V2_IFINDEX: u32 = 4;
