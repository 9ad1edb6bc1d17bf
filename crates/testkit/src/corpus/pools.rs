//! The small address, port and label pools the corpus draws from.
//!
//! Filters under test name hosts, nets and ports; drawing from a handful of values makes
//! each such filter match a fair share of packets and miss the rest, which is what a
//! differential test needs to be informative. A few draws are fully random so that values
//! outside every pool appear too.

use crate::rng::SplitMix64;
use crate::wire::Mac;

/// Unicast MACs hosts use as sources and ordinary destinations.
pub const UNICAST_MACS: [Mac; 6] = [
    [0x00, 0x11, 0x22, 0x33, 0x44, 0x01],
    [0x00, 0x11, 0x22, 0x33, 0x44, 0x02],
    [0x00, 0x11, 0x22, 0x33, 0x44, 0x03],
    [0x00, 0x11, 0x22, 0x33, 0x44, 0x04],
    [0x02, 0x42, 0xac, 0x11, 0x00, 0x02],
    [0x52, 0x54, 0x00, 0x12, 0x34, 0x56],
];

/// IPv4 hosts: two small nets plus a few outside addresses.
pub const IPV4_HOSTS: [[u8; 4]; 11] = [
    [10, 0, 0, 1],
    [10, 0, 0, 2],
    [10, 0, 0, 3],
    [10, 0, 0, 4],
    [192, 168, 1, 1],
    [192, 168, 1, 2],
    [192, 168, 1, 10],
    [192, 168, 1, 100],
    [172, 16, 5, 4],
    [8, 8, 8, 8],
    [1, 1, 1, 1],
];

/// IPv4 broadcast destinations (limited and directed).
pub const IPV4_BROADCASTS: [[u8; 4]; 2] = [[255, 255, 255, 255], [192, 168, 1, 255]];

/// IPv4 multicast groups for UDP and IGMP traffic.
pub const IPV4_GROUPS: [[u8; 4]; 3] = [[239, 1, 2, 3], [224, 0, 0, 251], [239, 255, 255, 250]];

/// IPv6 hosts: documentation prefix, link-local and loopback.
pub const IPV6_HOSTS: [[u8; 16]; 7] = [
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]),
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 2]),
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 3]),
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 4]),
    v6([0x2001, 0xdb8, 1, 0, 0, 0, 0, 0x10]),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 1]),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 2]),
];

/// IPv6 multicast destinations for UDP traffic.
pub const IPV6_GROUPS: [[u8; 16]; 3] = [
    v6([0xff02, 0, 0, 0, 0, 0, 0, 1]),
    v6([0xff02, 0, 0, 0, 0, 0, 0, 0xfb]),
    v6([0xff05, 0, 0, 0, 0, 0, 1, 3]),
];

/// Ports that filters in tests are likely to name, including the extremes 0 and 65535.
pub const PORTS: [u16; 12] = [22, 80, 443, 53, 0, 65535, 8080, 25, 123, 179, 1024, 5060];

/// VLAN ids: common small ids, the largest usable id, and 0 (priority-only tag) is left to
/// the edge cases.
pub const VLAN_IDS: [u16; 5] = [1, 10, 100, 200, 4094];

/// MPLS labels: the first unreserved label, two ordinary ones, the largest, and explicit
/// null (0 for IPv4 payloads; the generator swaps in 2 when the payload is IPv6).
pub const MPLS_LABELS: [u32; 5] = [16, 100, 1000, 0x000f_ffff, 0];

/// Builds an IPv6 address from its eight 16-bit groups.
pub const fn v6(groups: [u16; 8]) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    let mut i = 0;
    while i < 8 {
        let [hi, lo] = groups[i].to_be_bytes();
        bytes[2 * i] = hi;
        bytes[2 * i + 1] = lo;
        i += 1;
    }
    bytes
}

/// A unicast MAC, occasionally a random locally administered one.
pub fn unicast_mac(rng: &mut SplitMix64) -> Mac {
    if rng.chance(8) {
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&rng.bytes(6));
        // Clear the group bit, set the locally administered bit: still unicast.
        mac[0] = (mac[0] & 0xfc) | 0x02;
        return mac;
    }
    rng.pick(&UNICAST_MACS).unwrap_or(UNICAST_MACS[0])
}

/// A unicast IPv4 host, occasionally random.
pub fn ipv4_host(rng: &mut SplitMix64) -> [u8; 4] {
    if rng.chance(8) {
        return rng.u32().to_be_bytes();
    }
    rng.pick(&IPV4_HOSTS).unwrap_or(IPV4_HOSTS[0])
}

/// A unicast IPv6 host, occasionally random inside 2001:db8::/32.
pub fn ipv6_host(rng: &mut SplitMix64) -> [u8; 16] {
    if rng.chance(8) {
        let mut address = v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0]);
        for byte in address.iter_mut().skip(4) {
            *byte = rng.u8();
        }
        return address;
    }
    rng.pick(&IPV6_HOSTS).unwrap_or(IPV6_HOSTS[0])
}

/// A port from the pool or, about a third of the time, any port.
pub fn port(rng: &mut SplitMix64) -> u16 {
    if rng.chance(35) {
        return rng.u16();
    }
    rng.pick(&PORTS).unwrap_or(80)
}

/// An ephemeral client port.
pub fn ephemeral_port(rng: &mut SplitMix64) -> u16 {
    u16::try_from(rng.range(32768, 65535)).unwrap_or(40000)
}

/// A VLAN id from the pool or any id in 1..=4094.
pub fn vlan_id(rng: &mut SplitMix64) -> u16 {
    if rng.chance(25) {
        return u16::try_from(rng.range(1, 4094)).unwrap_or(1);
    }
    rng.pick(&VLAN_IDS).unwrap_or(1)
}

/// An MPLS label from the pool or any 20-bit label.
pub fn mpls_label(rng: &mut SplitMix64) -> u32 {
    if rng.chance(25) {
        // Labels below 16 are reserved for special meanings; random ones stay clear of them.
        return u32::try_from(rng.range(16, 0x000f_ffff)).unwrap_or(16);
    }
    rng.pick(&MPLS_LABELS).unwrap_or(16)
}

/// A TTL / hop limit.
pub fn ttl(rng: &mut SplitMix64) -> u8 {
    rng.pick(&[1u8, 32, 64, 64, 128, 255]).unwrap_or(64)
}

/// The Ethernet multicast MAC an IPv4 group maps to (01:00:5e + low 23 bits).
pub fn ipv4_multicast_mac(group: [u8; 4]) -> Mac {
    [0x01, 0x00, 0x5e, group[1] & 0x7f, group[2], group[3]]
}

/// The Ethernet multicast MAC an IPv6 group maps to (33:33 + low 32 bits).
pub fn ipv6_multicast_mac(group: [u8; 16]) -> Mac {
    [0x33, 0x33, group[12], group[13], group[14], group[15]]
}

/// The solicited-node multicast group for a target address (ff02::1:ffXX:XXXX).
pub fn solicited_node(target: [u8; 16]) -> [u8; 16] {
    let mut group = v6([0xff02, 0, 0, 0, 0, 1, 0xff00, 0]);
    group[13] = target[13];
    group[14] = target[14];
    group[15] = target[15];
    group
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: Mac) -> String {
    let parts: Vec<String> = mac.iter().map(|byte| format!("{byte:02x}")).collect();
    parts.join(":")
}

/// Dotted-quad IPv4.
pub fn format_ipv4(address: [u8; 4]) -> String {
    std::net::Ipv4Addr::from(address).to_string()
}

/// Compressed IPv6.
pub fn format_ipv6(address: [u8; 16]) -> String {
    std::net::Ipv6Addr::from(address).to_string()
}
