//! The benchmark's own traffic: seeded, ordinary-looking Ethernet frames, complete on the
//! wire (no cut records, no noise), so that every engine, the kernel's test run included,
//! can take every packet.
//!
//! The test corpus (weir-testkit) is built to hit corner cases; a benchmark wants the
//! opposite, traffic whose mix resembles a real link, so that match rates and the paths a
//! filter takes are the usual ones: mostly TCP (HTTPS, HTTP, a fair share of SSH, both with
//! payload and bare ACKs, with and without timestamp options), DNS and other UDP, some
//! IPv6, ICMP, ARP, VLAN-tagged frames and the odd IPv4 fragment. Addresses come from small
//! pools so that host and net filters match a useful fraction. The same seed gives the same
//! bytes on every machine.

use weir_packet::{ethertype, ipproto};
use weir_testkit::SplitMix64;

/// The seed of the default workloads.
pub const SEED: u64 = 0x5eed_b3c4;

/// One generated frame; its wire length is its length.
pub type Frame = Vec<u8>;

/// The test kit's SplitMix64 (tiny, fast, and its stream never changes with a dependency's
/// version), drawn from the way this generator needs.
struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// In `0..n` (0 when n is 0).
    fn below(&mut self, n: u32) -> u32 {
        self.0.below(u64::from(n)) as u32
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.0.chance(u64::from(percent))
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        self.0.pick(items).expect("pick from a non-empty slice")
    }

    /// An index chosen with the given weights.
    fn weighted(&mut self, weights: &[u32]) -> usize {
        self.0.weighted(weights)
    }
}

/// Generates `count` frames from `seed`; `frames(s, n)` is a prefix of `frames(s, m)`.
pub fn frames(seed: u64, count: usize) -> Vec<Frame> {
    stream(seed).take(count).collect()
}

/// The frames of `seed`, one at a time and without end (the e2e benchmark writes captures of
/// gigabytes from it): `frames(s, n)` is `stream(s).take(n)`.
pub fn stream(seed: u64) -> impl Iterator<Item = Frame> {
    let mut rng = Rng(SplitMix64::new(seed));
    std::iter::repeat_with(move || frame(&mut rng))
}

/// The MAC that `ether host` filters in filters.txt name; hosts use it often.
const MACS: [[u8; 6]; 4] = [
    [0x00, 0x11, 0x22, 0x33, 0x44, 0x01],
    [0x00, 0x11, 0x22, 0x33, 0x44, 0x02],
    [0x3c, 0xfd, 0xfe, 0x0a, 0x0b, 0x0c],
    [0x52, 0x54, 0x00, 0x12, 0x34, 0x56],
];

/// Servers: a few internal ones (10.0.0.0/24), a LAN (192.168.1.0/24) and public resolvers.
const SERVERS: [[u8; 4]; 9] = [
    [10, 0, 0, 1],
    [10, 0, 0, 2],
    [10, 0, 0, 53],
    [10, 0, 0, 80],
    [192, 168, 1, 10],
    [192, 168, 1, 20],
    [93, 184, 216, 34],
    [8, 8, 8, 8],
    [1, 1, 1, 1],
];

/// Clients live in 10.1.0.0/21; [`host_set`] draws from the same block, so a large host set
/// matches a share of the traffic.
fn client(rng: &mut Rng) -> [u8; 4] {
    let n = rng.below(2048);
    [10, 1, (n >> 8) as u8, (n & 0xff) as u8]
}

const V6_HOSTS: [[u16; 8]; 4] = [
    [0x2001, 0xdb8, 0, 0, 0, 0, 0, 1],
    [0x2001, 0xdb8, 0, 0, 0, 0, 0, 2],
    [0x2001, 0xdb8, 0, 1, 0, 0, 0, 0x10],
    [0x2606, 0x4700, 0, 0, 0, 0, 0, 0x1111],
];

fn v6(groups: [u16; 8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, g) in groups.iter().enumerate() {
        out[2 * i..2 * i + 2].copy_from_slice(&g.to_be_bytes());
    }
    out
}

/// `count` distinct client addresses (10.1.0.0/21 first, then further 10.x blocks that no
/// traffic uses), dotted, for `host a or host b or ...` filters.
pub fn host_set(count: usize) -> Vec<String> {
    (0..count)
        .map(|i| {
            // Every third address of the client block, so about a third of clients match.
            let n = i.wrapping_mul(3).wrapping_add(1);
            let (b, c, d) = (1 + n / 65_536, (n / 256) % 256, n % 256);
            format!("10.{b}.{c}.{d}")
        })
        .collect()
}

/// `host a or host b or ...` over [`host_set`].
pub fn host_set_expr(count: usize) -> String {
    let terms: Vec<String> = host_set(count).into_iter().map(|h| format!("host {h}")).collect();
    terms.join(" or ")
}

fn frame(rng: &mut Rng) -> Frame {
    let (vlan, ethertype, payload) = match rng.weighted(&[60, 17, 8, 3, 2, 2, 7, 1]) {
        0 => (None, ethertype::IP, tcp_over_v4(rng)),
        1 => (None, ethertype::IP, udp_over_v4(rng)),
        2 => (None, ethertype::IPV6, over_v6(rng)),
        3 => (None, ethertype::IP, icmp_v4(rng)),
        4 => return pad(arp(rng)),
        5 => (None, ethertype::IP, fragment_v4(rng)),
        6 => {
            let vid = rng.pick(&[10u16, 100, 200]);
            let inner = if rng.chance(70) { tcp_over_v4(rng) } else { udp_over_v4(rng) };
            (Some(vid), ethertype::IP, inner)
        }
        _ => (None, ethertype::LLDP, vec![0x02, 0x07, 0x04, 0, 0x11, 0x22, 0x33, 0x44, 0x01, 0, 0]),
    };
    pad(ethernet(rng, vlan, ethertype, &payload))
}

fn pad(mut f: Frame) -> Frame {
    // NICs pad short frames to the Ethernet minimum.
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

fn ethernet(rng: &mut Rng, vlan: Option<u16>, ethertype: u16, payload: &[u8]) -> Frame {
    let dst = rng.pick(&MACS);
    let mut src = rng.pick(&MACS);
    if src == dst {
        src[5] ^= 0x80;
    }
    let mut f = Vec::with_capacity(18 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    if let Some(vid) = vlan {
        f.extend_from_slice(&ethertype::VLAN_8021Q.to_be_bytes());
        f.extend_from_slice(&vid.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An IPv4 header (checksum included) followed by `payload`.
fn ipv4(
    rng: &mut Rng,
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    frag: u16,
    payload: &[u8],
) -> Vec<u8> {
    // One packet in a hundred carries a router-alert option (IHL 6).
    let options: &[u8] = if rng.chance(1) { &[0x94, 0x04, 0, 0] } else { &[] };
    let header_len = 20 + options.len();
    let total = (header_len + payload.len()) as u16;
    let ttl = rng.pick(&[64u8, 64, 64, 128, 128, 255, 57, 1]);
    let mut p = Vec::with_capacity(total as usize);
    p.push(0x40 | (header_len / 4) as u8);
    p.push(0);
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&(rng.next() as u16).to_be_bytes());
    p.extend_from_slice(&frag.to_be_bytes());
    p.extend_from_slice(&[ttl, proto, 0, 0]);
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    p.extend_from_slice(options);
    let sum = checksum(&p);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 =
        bytes.chunks(2).map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Server port of a TCP connection: HTTPS dominates, SSH has a fair share.
fn tcp_service(rng: &mut Rng) -> u16 {
    match rng.weighted(&[45, 15, 18, 3, 5, 14]) {
        0 => 443,
        1 => 80,
        2 => 22,
        3 => 25,
        4 => 8080,
        _ => 1024 + rng.below(60_000) as u16,
    }
}

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

/// A TCP segment of a connection to `service`, either direction; `mss` bounds the payload.
fn tcp_segment(rng: &mut Rng, service: u16, mss: u32) -> Vec<u8> {
    let ephemeral = 32_768 + rng.below(28_000) as u16;
    let to_server = rng.chance(50);
    let (sport, dport) = if to_server { (ephemeral, service) } else { (service, ephemeral) };
    let (flags, payload_len) = match rng.weighted(&[5, 5, 3, 2, 35, 50]) {
        0 => (SYN, 0),
        1 => (SYN | ACK, 0),
        2 => (FIN | ACK, 0),
        3 => (RST | ACK, 0),
        4 => (ACK, 0),
        _ => {
            let len = match rng.weighted(&[40, 20, 40]) {
                0 => 1 + rng.below(200),
                1 => 200 + rng.below(800),
                _ => mss,
            };
            (PSH | ACK, len)
        }
    };
    // Handshakes carry MSS/SACK/timestamp options; most later segments carry timestamps.
    let options: &[u8] = if flags & SYN != 0 {
        &[2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7]
    } else if rng.chance(70) {
        &[1, 1, 8, 10, 0, 0, 0, 2, 0, 0, 0, 3]
    } else {
        &[]
    };
    let mut s = Vec::with_capacity(20 + options.len() + payload_len as usize);
    s.extend_from_slice(&sport.to_be_bytes());
    s.extend_from_slice(&dport.to_be_bytes());
    s.extend_from_slice(&(rng.next() as u32).to_be_bytes());
    s.extend_from_slice(&(rng.next() as u32).to_be_bytes());
    s.push((((20 + options.len()) / 4) as u8) << 4);
    s.push(flags);
    s.extend_from_slice(&[0xfa, 0xf0, 0, 0, 0, 0]);
    s.extend_from_slice(options);
    let mut payload = Vec::new();
    if service == 80 && to_server && payload_len > 0 && rng.chance(60) {
        payload.extend_from_slice(b"GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n");
    }
    payload.resize(payload_len as usize, b'a');
    s.extend_from_slice(&payload);
    s
}

fn tcp_over_v4(rng: &mut Rng) -> Vec<u8> {
    let (a, b) = (client(rng), rng.pick(&SERVERS));
    let (src, dst) = if rng.chance(50) { (a, b) } else { (b, a) };
    let service = tcp_service(rng);
    let segment = tcp_segment(rng, service, 1448);
    ipv4(rng, src, dst, ipproto::TCP, 0x4000, &segment)
}

fn udp(sport: u16, dport: u16, payload_len: usize) -> Vec<u8> {
    let mut d = Vec::with_capacity(8 + payload_len);
    d.extend_from_slice(&sport.to_be_bytes());
    d.extend_from_slice(&dport.to_be_bytes());
    d.extend_from_slice(&((8 + payload_len) as u16).to_be_bytes());
    d.extend_from_slice(&[0, 0]);
    d.resize(8 + payload_len, 0x42);
    d
}

fn udp_over_v4(rng: &mut Rng) -> Vec<u8> {
    let c = client(rng);
    let ephemeral = 32_768 + rng.below(28_000) as u16;
    let (service, server, len) = match rng.weighted(&[50, 10, 25, 15]) {
        0 => (53, rng.pick(&[[10, 0, 0, 53], [8, 8, 8, 8], [1, 1, 1, 1]]), 30 + rng.below(150)),
        1 => (123, [10, 0, 0, 1], 48),
        2 => (443, [93, 184, 216, 34], 100 + rng.below(1150)),
        _ => (1024 + rng.below(60_000) as u16, rng.pick(&SERVERS), rng.below(600)),
    };
    let (src, dst, sport, dport) = if rng.chance(55) {
        (c, server, ephemeral, service)
    } else {
        (server, c, service, ephemeral)
    };
    let datagram = udp(sport, dport, len as usize);
    ipv4(rng, src, dst, ipproto::UDP, 0, &datagram)
}

fn icmp_v4(rng: &mut Rng) -> Vec<u8> {
    let (kind, len) = match rng.weighted(&[45, 45, 10]) {
        0 => (8u8, 56),
        1 => (0, 56),
        _ => (3, 28),
    };
    let mut m = vec![kind, 0, 0, 0, 0x12, 0x34, 0, rng.below(255) as u8];
    m.resize(8 + len, 0x10);
    let sum = checksum(&m);
    m[2..4].copy_from_slice(&sum.to_be_bytes());
    let (src, dst) = (client(rng), rng.pick(&SERVERS));
    ipv4(rng, src, dst, ipproto::ICMP, 0, &m)
}

/// A non-first fragment of a large UDP datagram: no transport header in it.
fn fragment_v4(rng: &mut Rng) -> Vec<u8> {
    let offset_units = 185 * (1 + rng.below(3)) as u16;
    let more = if rng.chance(50) { 0x2000 } else { 0 };
    let body = vec![0x33u8; 200 + rng.below(1000) as usize];
    let (src, dst) = (rng.pick(&SERVERS), client(rng));
    ipv4(rng, src, dst, ipproto::UDP, more | offset_units, &body)
}

fn over_v6(rng: &mut Rng) -> Vec<u8> {
    let a = v6(rng.pick(&V6_HOSTS));
    let mut b = v6(rng.pick(&V6_HOSTS));
    if a == b {
        b[15] ^= 0x40;
    }
    let (next, payload) = match rng.weighted(&[60, 25, 15]) {
        0 => {
            let service = tcp_service(rng);
            (ipproto::TCP, tcp_segment(rng, service, 1428))
        }
        1 => {
            let port = rng.pick(&[53u16, 443, 5353]);
            (
                ipproto::UDP,
                udp(40_000 + rng.below(20_000) as u16, port, 20 + rng.below(300) as usize),
            )
        }
        _ => {
            let kind = rng.pick(&[128u8, 129, 135, 136]);
            let mut m = vec![kind, 0, 0, 0];
            m.resize(if kind >= 135 { 32 } else { 64 }, 0);
            (ipproto::ICMPV6, m)
        }
    };
    let mut p = Vec::with_capacity(40 + payload.len());
    p.extend_from_slice(&0x6000_0000u32.to_be_bytes());
    p.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    p.push(next);
    p.push(64);
    p.extend_from_slice(&a);
    p.extend_from_slice(&b);
    p.extend_from_slice(&payload);
    p
}

fn arp(rng: &mut Rng) -> Frame {
    let sender = rng.pick(&MACS);
    let request = rng.chance(60);
    let dst = if request { [0xff; 6] } else { rng.pick(&MACS) };
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&sender);
    f.extend_from_slice(&ethertype::ARP.to_be_bytes());
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, if request { 1 } else { 2 }]);
    f.extend_from_slice(&sender);
    f.extend_from_slice(&client(rng));
    f.extend_from_slice(&if request { [0; 6] } else { rng.pick(&MACS) });
    f.extend_from_slice(&rng.pick(&SERVERS));
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_prefixes_and_sane_frames() {
        let a = frames(SEED, 500);
        let b = frames(SEED, 200);
        assert_eq!(&a[..200], &b[..]);
        assert!(a.iter().all(|f| f.len() >= 60 && f.len() <= 1518));
        let ssh = a
            .iter()
            .filter(|f| f[12..14] == [8, 0] && f[23] == ipproto::TCP)
            .filter(|f| {
                let th = 14 + 4 * usize::from(f[14] & 0xf);
                f[th..th + 2] == [0, 22] || f[th + 2..th + 4] == [0, 22]
            })
            .count();
        assert!(ssh > 25, "only {ssh} SSH segments in 500 frames");
        let sizes: usize = a.iter().map(Vec::len).sum();
        assert!(sizes / a.len() > 300, "mean frame {} bytes", sizes / a.len());
    }

    #[test]
    fn host_sets_hit_clients_and_are_distinct() {
        let set = host_set(500);
        assert_eq!(set.len(), 500);
        let unique: std::collections::HashSet<_> = set.iter().collect();
        assert_eq!(unique.len(), 500);
        assert_eq!(set[1], "10.1.0.4");
        assert!(host_set_expr(2) == "host 10.1.0.1 or host 10.1.0.4");
    }
}
