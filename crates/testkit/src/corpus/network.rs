//! Network-layer choices for the corpus: IPv4 (options, fragments), IPv6 (extension header
//! chains, fragments), ARP/RARP, LLC/SNAP payloads of 802.3 frames, PPPoE discovery, and a
//! few EtherTypes no filter primitive names.
//!
//! The transport layer is chosen first because some protocols decide the destination
//! (IGMP to its group, DHCP to broadcast, neighbor solicitation to a solicited-node group);
//! the destination then decides the Ethernet destination MAC, as a real stack would.

use super::pools::{self, format_ipv4, format_ipv6};
use super::transport::{self, Dst};
use super::Depth;
use crate::rng::SplitMix64;
use crate::wire::{self, ethertype, ipproto, Mac, BROADCAST_MAC};

/// A network-layer packet ready to be put in a link-layer frame.
pub(crate) struct L3 {
    /// The EtherType that announces it.
    pub ethertype: u16,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// The destination MAC its destination address implies (broadcast or multicast), if any.
    pub dst_mac: Option<Mac>,
    /// Descriptions of its headers.
    pub layers: Vec<String>,
}

/// Anything that rides directly in an Ethernet II frame.
pub(crate) fn any(rng: &mut SplitMix64, depth: Depth) -> L3 {
    match rng.weighted(&[50, 30, 7, 3, 4]) {
        0 => ipv4(rng, depth),
        1 => ipv6(rng, depth),
        2 => arp(rng, false),
        3 => arp(rng, true),
        _ => unnamed_ethertype(rng),
    }
}

/// IPv4 or IPv6, for encapsulations that carry only IP (MPLS, PPPoE session, GRE).
pub(crate) fn ip(rng: &mut SplitMix64, depth: Depth) -> L3 {
    if rng.chance(60) {
        ipv4(rng, depth)
    } else {
        ipv6(rng, depth)
    }
}

/// Which piece of a fragmented datagram a packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fragment {
    Whole,
    First,
    Later { offset: u16, more: bool },
}

fn fragment_choice(rng: &mut SplitMix64, percent_each: u32) -> Fragment {
    match rng.weighted(&[
        100u32.saturating_sub(percent_each.saturating_mul(2)),
        percent_each,
        percent_each,
    ]) {
        1 => Fragment::First,
        2 => {
            // Mostly plausible offsets, sometimes the largest one.
            let offset =
                if rng.chance(10) { 0x1fff } else { u16::try_from(rng.range(1, 200)).unwrap_or(1) };
            Fragment::Later { offset, more: rng.chance(50) }
        }
        _ => Fragment::Whole,
    }
}

/// The bytes after the IP header(s) of a non-first fragment: data from the middle of some
/// datagram, which a filter must not read as a transport header.
fn fragment_data(rng: &mut SplitMix64) -> Vec<u8> {
    let len = rng.range_usize(8, 64);
    rng.bytes(len)
}

pub(crate) fn ipv4(rng: &mut SplitMix64, depth: Depth) -> L3 {
    let l4 = transport::over_ipv4(rng, depth);
    let src = pools::ipv4_host(rng);
    let (dst, dst_mac) = match l4.dst {
        Dst::Broadcast => {
            (rng.pick(&pools::IPV4_BROADCASTS).unwrap_or([255; 4]), Some(BROADCAST_MAC))
        }
        Dst::V4(group) => (group, Some(pools::ipv4_multicast_mac(group))),
        Dst::Any | Dst::V6(_) => (pools::ipv4_host(rng), None),
    };
    let options = if l4.router_alert && rng.chance(70) {
        vec![0x94, 4, 0, 0]
    } else if rng.chance(15) {
        ipv4_options(rng)
    } else {
        Vec::new()
    };
    let fragment = fragment_choice(rng, 6);
    let (more_fragments, fragment_offset) = match fragment {
        Fragment::Whole => (false, 0),
        Fragment::First => (true, 0),
        Fragment::Later { offset, more } => (more, offset),
    };
    let header = wire::Ipv4Header {
        src,
        dst,
        protocol: l4.protocol,
        ttl: l4.ttl.unwrap_or_else(|| pools::ttl(rng)),
        tos: rng.pick(&[0u8, 0, 0, 0x10, 0xb8, 0x02]).unwrap_or(0),
        id: rng.u16(),
        dont_fragment: fragment == Fragment::Whole && rng.chance(40),
        more_fragments,
        fragment_offset,
        options,
    };
    let mut description = format!(
        "ipv4 {}>{} proto {} ttl {}",
        format_ipv4(src),
        format_ipv4(dst),
        l4.protocol,
        header.ttl
    );
    if !header.options.is_empty() {
        description.push_str(&format!(
            " ihl {}",
            5usize.saturating_add(header.options.len().div_ceil(4).min(10))
        ));
    }
    let (payload, upper_layers) = match fragment {
        Fragment::Whole => (l4.bytes, l4.layers),
        Fragment::First => {
            description.push_str(" first-fragment MF");
            (l4.bytes, l4.layers)
        }
        Fragment::Later { offset, more } => {
            description
                .push_str(&format!(" fragment offset {offset}{}", if more { " MF" } else { "" }));
            let data = fragment_data(rng);
            let layers = vec![format!("fragment data {} bytes", data.len())];
            (data, layers)
        }
    };
    let mut layers = vec![description];
    layers.extend(upper_layers);
    L3 { ethertype: ethertype::IP, bytes: wire::ipv4(&header, &payload), dst_mac, layers }
}

/// One to ten words of options: a router alert, a record-route or timestamp option with
/// room for a few addresses, or padding, followed by no-ops up to the chosen size.
fn ipv4_options(rng: &mut SplitMix64) -> Vec<u8> {
    let words = rng.range_usize(1, 10);
    let size = words.saturating_mul(4);
    let mut options = match rng.below(4) {
        0 => vec![0x94, 4, 0, 0],
        1 if size >= 7 => {
            let slots = (size.saturating_sub(3) / 4).min(9);
            let mut record_route = vec![
                7,
                u8::try_from(3usize.saturating_add(slots.saturating_mul(4))).unwrap_or(7),
                4,
            ];
            record_route.extend(std::iter::repeat_n(0u8, slots.saturating_mul(4)));
            record_route
        }
        2 if size >= 8 => {
            let slots = (size.saturating_sub(4) / 4).min(9);
            let mut timestamp = vec![
                0x44,
                u8::try_from(4usize.saturating_add(slots.saturating_mul(4))).unwrap_or(4),
                5,
                0,
            ];
            timestamp.extend(std::iter::repeat_n(0u8, slots.saturating_mul(4)));
            timestamp
        }
        _ => Vec::new(),
    };
    options.truncate(size);
    while options.len() < size {
        options.push(1);
    }
    // End of option list, as senders write it when there is room.
    if options.last() == Some(&1) {
        if let Some(last) = options.last_mut() {
            *last = 0;
        }
    }
    options
}

/// Kinds of IPv6 extension header the generator chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Extension {
    HopByHop,
    DestinationOptions,
    Routing,
    Fragment,
}

pub(crate) fn ipv6(rng: &mut SplitMix64, depth: Depth) -> L3 {
    let l4 = transport::over_ipv6(rng, depth);
    let src = pools::ipv6_host(rng);
    let (dst, dst_mac) = match l4.dst {
        Dst::V6(group) => (group, Some(pools::ipv6_multicast_mac(group))),
        Dst::Broadcast => {
            let all_nodes = pools::v6([0xff02, 0, 0, 0, 0, 0, 0, 1]);
            (all_nodes, Some(pools::ipv6_multicast_mac(all_nodes)))
        }
        Dst::Any | Dst::V4(_) => (pools::ipv6_host(rng), None),
    };
    let mut chain = Vec::new();
    if rng.chance(35) {
        // RFC 8200 order: hop-by-hop first, then destination options, routing, fragment.
        for (kind, percent) in [
            (Extension::HopByHop, 40),
            (Extension::DestinationOptions, 35),
            (Extension::Routing, 30),
            (Extension::Fragment, 40),
        ] {
            if rng.chance(percent) {
                chain.push(kind);
            }
        }
        if chain.is_empty() {
            let only = [
                Extension::HopByHop,
                Extension::DestinationOptions,
                Extension::Routing,
                Extension::Fragment,
            ];
            chain.push(rng.pick(&only).unwrap_or(Extension::HopByHop));
        }
    }
    let fragment = if chain.contains(&Extension::Fragment) {
        if rng.chance(50) {
            Fragment::First
        } else {
            Fragment::Later {
                offset: u16::try_from(rng.range(1, 200)).unwrap_or(1),
                more: rng.chance(50),
            }
        }
    } else {
        Fragment::Whole
    };
    let hop_limit = l4.ttl.unwrap_or_else(|| pools::ttl(rng));
    let flow_label = if rng.chance(50) { 0 } else { rng.u32() & 0x000f_ffff };
    let (mut payload, upper_layers) = match fragment {
        Fragment::Later { .. } => {
            let data = fragment_data(rng);
            let layers = vec![format!("fragment data {} bytes", data.len())];
            (data, layers)
        }
        Fragment::Whole | Fragment::First => (l4.bytes, l4.layers),
    };
    let mut next_header = l4.protocol;
    let mut chain_layers = Vec::new();
    for kind in chain.iter().rev() {
        let (code, header, text) = match *kind {
            Extension::HopByHop => (
                ipproto::HOPOPTS,
                wire::ipv6_extension(next_header, &hop_by_hop_body(rng)),
                "hop-by-hop".to_string(),
            ),
            Extension::DestinationOptions => {
                let len = rng.range_usize(2, 20);
                let mut body = vec![0x1e, u8::try_from(len).unwrap_or(2)];
                body.extend(rng.bytes(len));
                (
                    ipproto::DSTOPTS,
                    wire::ipv6_extension(next_header, &body),
                    "destination-options".to_string(),
                )
            }
            Extension::Routing => {
                // Type 2 (mobility): segments left 1, 4 reserved bytes, one address.
                let mut body = vec![2, 1, 0, 0, 0, 0];
                body.extend_from_slice(&pools::ipv6_host(rng));
                (
                    ipproto::ROUTING,
                    wire::ipv6_extension(next_header, &body),
                    "routing type 2".to_string(),
                )
            }
            Extension::Fragment => {
                let (offset, more, text) = match fragment {
                    Fragment::Later { offset, more } => (
                        offset,
                        more,
                        format!("fragment offset {offset}{}", if more { " M" } else { "" }),
                    ),
                    Fragment::First | Fragment::Whole => (0, true, "fragment first M".to_string()),
                };
                (ipproto::FRAGMENT, wire::ipv6_fragment(next_header, offset, more, rng.u32()), text)
            }
        };
        let mut with_header = header;
        with_header.extend_from_slice(&payload);
        payload = with_header;
        next_header = code;
        chain_layers.push(text);
    }
    chain_layers.reverse();
    let mut layers = vec![format!(
        "ipv6 {}>{} next {} hlim {hop_limit}",
        format_ipv6(src),
        format_ipv6(dst),
        next_header
    )];
    layers.extend(chain_layers);
    layers.extend(upper_layers);
    L3 {
        ethertype: ethertype::IPV6,
        bytes: wire::ipv6(src, dst, next_header, hop_limit, flow_label, &payload),
        dst_mac,
        layers,
    }
}

fn hop_by_hop_body(rng: &mut SplitMix64) -> Vec<u8> {
    match rng.below(3) {
        // Router alert (MLD).
        0 => vec![5, 2, 0, 0],
        // PadN only.
        1 => vec![1, 4, 0, 0, 0, 0],
        // An experimental option long enough that the header spans two 8-byte units.
        _ => {
            let mut body = vec![0x1e, 12];
            body.extend(rng.bytes(12));
            body
        }
    }
}

fn arp(rng: &mut SplitMix64, reverse: bool) -> L3 {
    let reply = rng.chance(45);
    let sender_mac = pools::unicast_mac(rng);
    let sender_ip = pools::ipv4_host(rng);
    let target_ip = if rng.chance(10) { sender_ip } else { pools::ipv4_host(rng) };
    let (ethertype, operation, name) = match (reverse, reply) {
        (false, false) => (ethertype::ARP, 1, "arp request"),
        (false, true) => (ethertype::ARP, 2, "arp reply"),
        (true, false) => (ethertype::REVARP, 3, "rarp request"),
        (true, true) => (ethertype::REVARP, 4, "rarp reply"),
    };
    let (bytes, dst_mac) = match (reverse, reply) {
        (false, false) => {
            (wire::arp(operation, sender_mac, sender_ip, [0; 6], target_ip), Some(BROADCAST_MAC))
        }
        (true, false) => {
            (wire::arp(operation, sender_mac, [0; 4], sender_mac, [0; 4]), Some(BROADCAST_MAC))
        }
        (_, true) => {
            let target_mac = pools::unicast_mac(rng);
            (wire::arp(operation, sender_mac, sender_ip, target_mac, target_ip), Some(target_mac))
        }
    };
    let text = if reply {
        format!(
            "{name} {} is-at {} to {}",
            format_ipv4(sender_ip),
            pools::format_mac(sender_mac),
            format_ipv4(target_ip)
        )
    } else {
        format!(
            "{name} who-has {} tell {} ({})",
            format_ipv4(target_ip),
            format_ipv4(sender_ip),
            pools::format_mac(sender_mac)
        )
    };
    L3 { ethertype, bytes, dst_mac, layers: vec![text] }
}

/// EtherTypes that no filter primitive names, so that every `ether proto`-style test has
/// packets outside its set.
fn unnamed_ethertype(rng: &mut SplitMix64) -> L3 {
    if rng.chance(40) {
        let mut tlvs = vec![0x02, 0x07, 0x04];
        tlvs.extend_from_slice(&pools::unicast_mac(rng));
        tlvs.extend_from_slice(&[0x04, 0x03, 0x07, b'e', b'0', 0x06, 0x02, 0x00, 0x78, 0x00, 0x00]);
        let nearest_bridge = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e];
        return L3 {
            ethertype: ethertype::LLDP,
            bytes: tlvs,
            dst_mac: Some(nearest_bridge),
            layers: vec!["lldp".to_string()],
        };
    }
    let ethertype = rng.pick(&[0x9000u16, 0x88e5, 0x22f0, 0x0842, 0x88b5]).unwrap_or(0x88b5);
    let len = rng.range_usize(0, 46);
    L3 {
        ethertype,
        bytes: rng.bytes(len),
        dst_mac: None,
        layers: vec![format!("ethertype 0x{ethertype:04x} {len} bytes")],
    }
}

/// The LLC header and payload of an 802.3 frame, the destination MAC it implies, and its
/// description.
pub(crate) fn llc(rng: &mut SplitMix64) -> (Vec<u8>, Option<Mac>, Vec<String>) {
    match rng.weighted(&[40, 25, 10, 15, 10]) {
        0 => {
            let rapid = rng.chance(40);
            let mut bpdu = vec![0x42, 0x42, 0x03, 0x00, 0x00];
            bpdu.push(if rapid { 2 } else { 0 });
            bpdu.push(if rapid { 2 } else { 0 });
            bpdu.push(rng.u8());
            // Root bridge id (priority, MAC), root path cost, this bridge's id.
            bpdu.extend_from_slice(&[0x80, 0x00]);
            bpdu.extend_from_slice(&pools::unicast_mac(rng));
            bpdu.extend_from_slice(&rng.u32().to_be_bytes());
            bpdu.extend_from_slice(&[0x80, 0x00]);
            bpdu.extend_from_slice(&pools::unicast_mac(rng));
            // Port id, message age, max age 20 s, hello 2 s, forward delay 15 s (1/256 s units).
            bpdu.extend_from_slice(&[0x80, 0x01, 0x00, 0x00, 0x14, 0x00, 0x02, 0x00, 0x0f, 0x00]);
            if rapid {
                bpdu.push(0);
            }
            let stp = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x00];
            let text = if rapid { "llc 0x42 stp rst bpdu" } else { "llc 0x42 stp config bpdu" };
            (bpdu, Some(stp), vec![text.to_string()])
        }
        1 => {
            let inner = ipv4(rng, Depth::Inner);
            let mut snap = vec![0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00, 0x08, 0x00];
            snap.extend_from_slice(&inner.bytes);
            let mut layers = vec!["llc snap oui 000000 type 0x0800".to_string()];
            layers.extend(inner.layers);
            (snap, inner.dst_mac, layers)
        }
        2 => {
            let mut cdp =
                vec![0xaa, 0xaa, 0x03, 0x00, 0x00, 0x0c, 0x20, 0x00, 0x02, 0xb4, 0x00, 0x00];
            let len = rng.range_usize(4, 30);
            cdp.extend(rng.bytes(len));
            let cisco_multicast = [0x01, 0x00, 0x0c, 0xcc, 0xcc, 0xcc];
            (cdp, Some(cisco_multicast), vec!["llc snap oui 00000c type 0x2000 (cdp)".to_string()])
        }
        3 => {
            let mut netbios = vec![0xf0, 0xf0, 0x03];
            let len = rng.range_usize(10, 40);
            netbios.extend(rng.bytes(len));
            (netbios, None, vec!["llc 0xf0 netbios".to_string()])
        }
        _ => {
            let mut ipx = vec![0xe0, 0xe0, 0x03, 0xff, 0xff];
            let len = rng.range_usize(10, 40);
            ipx.extend(rng.bytes(len));
            (ipx, Some(BROADCAST_MAC), vec!["llc 0xe0 ipx".to_string()])
        }
    }
}

/// A PPPoE discovery packet (PADI, PADO, PADR, PADS or PADT) with a few tags.
pub(crate) fn pppoe_discovery(rng: &mut SplitMix64) -> (Vec<u8>, Option<Mac>, Vec<String>) {
    let (code, name) = rng
        .pick(&[(0x09u8, "padi"), (0x07, "pado"), (0x19, "padr"), (0x65, "pads"), (0xa7, "padt")])
        .unwrap_or((0x09, "padi"));
    let session = if code == 0x65 || code == 0xa7 { rng.u16() | 1 } else { 0 };
    let mut tags = vec![0x01, 0x01, 0x00, 0x00];
    tags.extend_from_slice(&[0x01, 0x03, 0x00, 0x04]);
    tags.extend_from_slice(&rng.u32().to_be_bytes());
    if code == 0x07 {
        tags.extend_from_slice(&[0x01, 0x02, 0x00, 0x07]);
        tags.extend_from_slice(b"weir-ac");
    }
    let dst = if code == 0x09 { Some(BROADCAST_MAC) } else { None };
    let text = format!("pppoe discovery {name} session 0x{session:04x}");
    (wire::pppoe(code, session, &tags), dst, vec![text])
}
