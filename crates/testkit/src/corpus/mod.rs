//! The seeded packet-corpus generator: link layers here, network and transport layers in
//! the submodules.
//!
//! Every choice draws from one SplitMix64 stream, in a fixed order, so a seed names a corpus
//! forever and `corpus(s, n)` is a prefix of `corpus(s, m)` for `n <= m`. The mix is chosen
//! for filter testing: each encapsulation a pflang primitive can see (VLAN, QinQ, MPLS,
//! PPPoE, LLC/SNAP, VXLAN, Geneve, GRE) and each protocol it can name appears often enough
//! that a few thousand packets cover them all, addresses and ports repeat so filters both
//! match and miss, and some records are cut short or are plain noise, because the
//! interesting bugs live at the bounds.

mod network;
pub(crate) mod pools;
mod transport;

use crate::rng::SplitMix64;
use crate::wire::{self, ethertype, Mac, VlanTag};
use crate::Packet;
use network::L3;
use pools::format_mac;

/// The first timestamp of every corpus (November 2023), so captures look like captures.
const FIRST_SECOND: u32 = 1_700_000_000;

/// Percentage of records that are random bytes rather than a built frame.
const GARBAGE_PERCENT: u64 = 4;

/// Percentage of built frames whose record is cut below the wire length.
const TRUNCATED_PERCENT: u64 = 10;

/// A deterministic corpus of `count` Ethernet (link type 1) packets for `seed`.
pub fn corpus(seed: u64, count: usize) -> Vec<Packet> {
    let mut rng = SplitMix64::new(seed);
    let mut clock = Clock { seconds: FIRST_SECOND, micros: 0 };
    (0..count).map(|_| next_packet(&mut rng, &mut clock)).collect()
}

/// Capture time that only moves forward, by up to a quarter second per packet.
struct Clock {
    seconds: u32,
    micros: u32,
}

impl Clock {
    fn tick(&mut self, rng: &mut SplitMix64) -> (u32, u32) {
        let step = u32::try_from(rng.range(1, 250_000)).unwrap_or(1);
        let micros = self.micros.wrapping_add(step);
        self.seconds = self.seconds.wrapping_add(micros / 1_000_000);
        self.micros = micros % 1_000_000;
        (self.seconds, self.micros)
    }
}

fn len32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

fn next_packet(rng: &mut SplitMix64, clock: &mut Clock) -> Packet {
    let (ts_sec, ts_usec) = clock.tick(rng);
    if rng.chance(GARBAGE_PERCENT) {
        let len = rng.below_usize(128);
        let data = rng.bytes(len);
        return Packet {
            wire_len: len32(len),
            data,
            ts_sec,
            ts_usec,
            description: format!("garbage {len} bytes"),
        };
    }
    let mut layers = Vec::new();
    let mut data = frame(rng, Depth::Outer, &mut layers);
    let mut description = layers.join(" / ");
    // Real NICs pad short frames to the Ethernet minimum, so IP lengths and `len` disagree.
    if data.len() < 60 && rng.chance(50) {
        data.resize(60, 0);
        description.push_str(" (padded to 60)");
    }
    let wire_len = len32(data.len());
    if rng.chance(TRUNCATED_PERCENT) && !data.is_empty() {
        // Most cuts land in the first 64 bytes, inside the headers filters look at.
        let cut = if rng.chance(60) {
            rng.below_usize(data.len().min(64))
        } else {
            rng.below_usize(data.len())
        };
        data.truncate(cut);
        description.push_str(&format!(" [captured {cut} of {wire_len}]"));
    }
    Packet { data, wire_len, ts_sec, ts_usec, description }
}

/// Whether a frame is the outer frame or one carried inside a tunnel; inner frames use
/// plain or VLAN-tagged Ethernet and no further tunnels, which bounds the recursion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Depth {
    Outer,
    Inner,
}

/// How the frame's link layer is built.
#[derive(Debug, Clone, Copy)]
enum Link {
    Plain,
    Vlan,
    QinQ,
    Llc,
    Mpls,
    PppoeSession,
    PppoeDiscovery,
}

const LINKS: [Link; 7] = [
    Link::Plain,
    Link::Vlan,
    Link::QinQ,
    Link::Llc,
    Link::Mpls,
    Link::PppoeSession,
    Link::PppoeDiscovery,
];
const OUTER_LINK_WEIGHTS: [u32; 7] = [52, 12, 7, 6, 6, 5, 3];
const INNER_LINK_WEIGHTS: [u32; 7] = [80, 20, 0, 0, 0, 0, 0];

/// One complete Ethernet frame; `layers` receives a description of each header.
pub(crate) fn frame(rng: &mut SplitMix64, depth: Depth, layers: &mut Vec<String>) -> Vec<u8> {
    let weights = if depth == Depth::Outer { &OUTER_LINK_WEIGHTS } else { &INNER_LINK_WEIGHTS };
    let link = LINKS.get(rng.weighted(weights)).copied().unwrap_or(Link::Plain);
    let src = pools::unicast_mac(rng);
    match link {
        Link::Plain => {
            let l3 = network::any(rng, depth);
            ethernet_frame(rng, src, &[], l3, layers)
        }
        Link::Vlan => {
            let tag = vlan_tag(rng, ethertype::VLAN_8021Q);
            let l3 = network::any(rng, depth);
            ethernet_frame(rng, src, &[tag], l3, layers)
        }
        Link::QinQ => {
            // 802.1ad says 0x88a8 outside; older switches stack two 0x8100 tags.
            let outer_tpid =
                if rng.chance(85) { ethertype::VLAN_8021AD } else { ethertype::VLAN_8021Q };
            let outer = vlan_tag(rng, outer_tpid);
            let inner = vlan_tag(rng, ethertype::VLAN_8021Q);
            let l3 = network::any(rng, depth);
            ethernet_frame(rng, src, &[outer, inner], l3, layers)
        }
        Link::Llc => {
            let (llc, dst, llc_layers) = network::llc(rng);
            let dst = dst.unwrap_or_else(|| pools::unicast_mac(rng));
            layers.push(format!(
                "802.3 {}>{} length {}",
                format_mac(src),
                format_mac(dst),
                llc.len()
            ));
            layers.extend(llc_layers);
            wire::ieee8023(dst, src, &llc)
        }
        Link::Mpls => mpls_frame(rng, src, layers),
        Link::PppoeSession => pppoe_session_frame(rng, src, layers),
        Link::PppoeDiscovery => {
            let (payload, dst, pppoe_layers) = network::pppoe_discovery(rng);
            let dst = dst.unwrap_or_else(|| pools::unicast_mac(rng));
            layers.push(eth_description(src, dst, ethertype::PPPOED));
            layers.extend(pppoe_layers);
            wire::ethernet(dst, src, &[], ethertype::PPPOED, &payload)
        }
    }
}

fn eth_description(src: Mac, dst: Mac, ethertype: u16) -> String {
    format!("eth {}>{} type 0x{ethertype:04x}", format_mac(src), format_mac(dst))
}

fn vlan_tag(rng: &mut SplitMix64, tpid: u16) -> VlanTag {
    let priority = u16::try_from(rng.below(8)).unwrap_or(0);
    VlanTag { tpid, tci: (priority << 13) | pools::vlan_id(rng) }
}

fn ethernet_frame(
    rng: &mut SplitMix64,
    src: Mac,
    tags: &[VlanTag],
    l3: L3,
    layers: &mut Vec<String>,
) -> Vec<u8> {
    let dst = l3.dst_mac.unwrap_or_else(|| pools::unicast_mac(rng));
    let first_type = tags.first().map_or(l3.ethertype, |tag| tag.tpid);
    layers.push(eth_description(src, dst, first_type));
    for (index, tag) in tags.iter().enumerate() {
        let next = tags.get(index.wrapping_add(1)).map_or(l3.ethertype, |inner| inner.tpid);
        layers.push(format!(
            "vlan 0x{:04x} id {} prio {} type 0x{next:04x}",
            tag.tpid,
            tag.tci & 0x0fff,
            tag.tci >> 13
        ));
    }
    layers.extend(l3.layers);
    wire::ethernet(dst, src, tags, l3.ethertype, &l3.bytes)
}

const EXPLICIT_NULL_IPV4: u32 = 0;
const EXPLICIT_NULL_IPV6: u32 = 2;

fn mpls_frame(rng: &mut SplitMix64, src: Mac, layers: &mut Vec<String>) -> Vec<u8> {
    let count = if rng.chance(45) { 2 } else { 1 };
    let mut labels: Vec<wire::MplsLabel> = (0..count)
        .map(|_| wire::MplsLabel {
            label: pools::mpls_label(rng),
            traffic_class: rng.u8() & 7,
            ttl: pools::ttl(rng),
        })
        .collect();
    let l3 = network::ip(rng, Depth::Outer);
    // An explicit-null label names the payload's IP version; receivers (and tcpdump) trust it.
    if let Some(bottom) = labels.last_mut() {
        if bottom.label == EXPLICIT_NULL_IPV4 || bottom.label == EXPLICIT_NULL_IPV6 {
            bottom.label = if l3.ethertype == ethertype::IPV6 {
                EXPLICIT_NULL_IPV6
            } else {
                EXPLICIT_NULL_IPV4
            };
        }
    }
    let dst = pools::unicast_mac(rng);
    layers.push(eth_description(src, dst, ethertype::MPLS));
    let stack: Vec<String> = labels.iter().map(|entry| entry.label.to_string()).collect();
    layers.push(format!("mpls labels {}", stack.join(",")));
    layers.extend(l3.layers);
    let payload = wire::mpls(&labels, &l3.bytes);
    wire::ethernet(dst, src, &[], ethertype::MPLS, &payload)
}

fn pppoe_session_frame(rng: &mut SplitMix64, src: Mac, layers: &mut Vec<String>) -> Vec<u8> {
    let session = if rng.chance(60) {
        rng.pick(&[0x0001u16, 0x1234, 0xbeef]).unwrap_or(1)
    } else {
        rng.u16()
    };
    let (protocol, inner, inner_layers) = if rng.chance(12) {
        // LCP echo request: code, identifier, length, magic number.
        let body = vec![9, rng.u8(), 0, 8, rng.u8(), rng.u8(), rng.u8(), rng.u8()];
        (0xc021u16, body, vec!["lcp echo-request".to_string()])
    } else {
        let l3 = network::ip(rng, Depth::Outer);
        let protocol = if l3.ethertype == ethertype::IPV6 { 0x0057 } else { 0x0021 };
        (protocol, l3.bytes, l3.layers)
    };
    let mut ppp = protocol.to_be_bytes().to_vec();
    ppp.extend_from_slice(&inner);
    let dst = pools::unicast_mac(rng);
    layers.push(eth_description(src, dst, ethertype::PPPOES));
    layers.push(format!("pppoe session 0x{session:04x} ppp 0x{protocol:04x}"));
    layers.extend(inner_layers);
    let payload = wire::pppoe(0, session, &ppp);
    wire::ethernet(dst, src, &[], ethertype::PPPOES, &payload)
}
