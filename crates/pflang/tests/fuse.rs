//! Long lists lowered as set lookups (`lower::fuse`) against the same lists lowered term by
//! term: random lists (of hosts, ports, nets, MAC addresses, mixed kinds, under `not`, with
//! repeated values and with kinds that do not fuse), random packets built to hit the
//! listed values, every packet cut at every length. The verdict of the reference evaluator
//! must be the same on the fused and the term-by-term filter, before and after the
//! optimizer, and on the classic BPF the fused filter compiles to.

use weir_cbpf::CbpfFilter;
use weir_filter::emit::cbpf;
use weir_filter::opt::optimize;
use weir_filter::{Filter, Pred};
use weir_pflang::lower::fuse::MIN_TERMS;
use weir_pflang::names::NameDb;
use weir_pflang::{LinkType, Options};
use weir_testkit::SplitMix64;

const SEED: u64 = 0xf05e_0013;
const LISTS: usize = 120;
const PACKETS_PER_LIST: usize = 24;

/// The values a list draws from: few, so that lists repeat values and packets hit them.
struct Pool {
    hosts: Vec<[u8; 4]>,
    ports: Vec<u16>,
    macs: Vec<[u8; 6]>,
}

impl Pool {
    fn new(rng: &mut SplitMix64) -> Pool {
        let hosts = (0..24).map(|_| [10, rng.u8() % 4, rng.u8() % 4, rng.u8()]).collect();
        let ports = (0..24).map(|_| rng.range(1, 2000) as u16).collect();
        let macs = (0..12).map(|_| [0, 0x11, 0x22, 0, rng.u8() % 3, rng.u8()]).collect();
        Pool { hosts, ports, macs }
    }
}

fn ip(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

/// One term of a list of kind `kind`.
fn term(kind: usize, rng: &mut SplitMix64, pool: &Pool) -> String {
    let h = pool.hosts[rng.below_usize(pool.hosts.len())];
    let host = ip(h);
    let port = pool.ports[rng.below_usize(pool.ports.len())];
    let m = pool.macs[rng.below_usize(pool.macs.len())];
    let mac =
        format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
    match kind {
        0 => format!("host {host}"),
        1 => format!("src host {host}"),
        2 => format!("dst host {host}"),
        3 => format!("ip host {host}"),
        4 => format!("port {port}"),
        5 => format!("tcp port {port}"),
        6 => format!("udp dst port {port}"),
        7 => format!("net {}.{}.{}.0/24", h[0], h[1], h[2]),
        8 => format!("ether host {mac}"),
        9 => format!("ether src {mac}"),
        10 => format!("arp host {host}"),
        11 => format!("host {host} and port {port}"),
        12 => format!("src port {port}"),
        _ => format!("ip6 host 2001:db8::{:x}", rng.below(20)),
    }
}

/// A random list: one kind, or a few kinds in runs; `or`-joined, or `not`s `and`-joined.
fn list(rng: &mut SplitMix64, pool: &Pool) -> (Vec<String>, bool) {
    let n = rng.range_usize(1, 3 * MIN_TERMS + 10);
    let mixed = rng.chance(30);
    let mut kind = rng.below_usize(14);
    let terms = (0..n)
        .map(|_| {
            if mixed && rng.chance(15) {
                kind = rng.below_usize(14);
            }
            term(kind, rng, pool)
        })
        .collect();
    (terms, rng.chance(25))
}

/// A packet meant to meet the pool: Ethernet (sometimes VLAN-tagged) carrying IPv4 (random
/// header length, protocol, fragment field), ARP, RARP or IPv6, with addresses, ports and
/// MAC addresses drawn from the pool or at random.
fn packet(rng: &mut SplitMix64, pool: &Pool) -> Vec<u8> {
    let len = rng.range_usize(44, 90);
    let mut p = rng.bytes(len);
    let pick_host = |rng: &mut SplitMix64| {
        if rng.chance(70) {
            pool.hosts[rng.below_usize(pool.hosts.len())]
        } else {
            rng.u32().to_be_bytes()
        }
    };
    for at in [0, 6] {
        if rng.chance(50) {
            p[at..at + 6].copy_from_slice(&pool.macs[rng.below_usize(pool.macs.len())]);
        }
    }
    let ethertype: u16 = match rng.below(10) {
        0 => 0x0806,
        1 => 0x8035,
        2 => 0x86dd,
        3 => rng.u16(),
        _ => 0x0800,
    };
    p[12..14].copy_from_slice(&ethertype.to_be_bytes());
    match ethertype {
        0x0800 => {
            let ihl = if rng.chance(80) { 5 } else { rng.below(16) as u8 };
            p[14] = 0x40 | ihl;
            p[20] = if rng.chance(80) { 0 } else { rng.u8() };
            p[21] = if rng.chance(80) { 0 } else { rng.u8() };
            p[23] = rng.one_of(&[6, 17, 132, 1, 6, 17]);
            let src = pick_host(rng);
            p[26..30].copy_from_slice(&src);
            let dst = pick_host(rng);
            p[30..34].copy_from_slice(&dst);
            let th = 14 + 4 * usize::from(ihl);
            for at in [th, th + 2] {
                if at + 2 <= p.len() && rng.chance(70) {
                    let port = pool.ports[rng.below_usize(pool.ports.len())];
                    p[at..at + 2].copy_from_slice(&port.to_be_bytes());
                }
            }
        }
        0x0806 | 0x8035 => {
            p[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
            let spa = pick_host(rng);
            p[28..32].copy_from_slice(&spa);
            let tpa = pick_host(rng);
            p[38..42].copy_from_slice(&tpa);
        }
        _ => {}
    }
    p
}

fn lowered(expr: &str, names: &NameDb) -> Filter {
    let options = Options::new(LinkType::Ethernet);
    match weir_pflang::compile(expr, &options, names) {
        Ok(f) => f,
        Err(e) => panic!("{expr}: {e}"),
    }
}

#[test]
fn fused_lists_match_their_terms_on_cut_packets() {
    let names = NameDb::builtin();
    let mut rng = SplitMix64::new(SEED);
    let (mut fused_lists, mut cuts) = (0usize, 0usize);
    for _ in 0..LISTS {
        let pool = Pool::new(&mut rng);
        let (terms, negated) = list(&mut rng, &pool);
        let joined = if negated {
            terms.iter().map(|t| format!("not ({t})")).collect::<Vec<_>>().join(" and ")
        } else {
            terms.iter().map(|t| format!("({t})")).collect::<Vec<_>>().join(" or ")
        };
        let fused = lowered(&joined, &names);
        // Term by term: each term lowered alone, joined in order.
        let parts = terms.iter().map(|t| lowered(t, &names).pred);
        let expanded = if negated {
            Filter::new(Pred::And(parts.map(Pred::not).collect()))
        } else {
            Filter::new(Pred::Or(parts.collect()))
        };
        if weir_filter::opt::node_count(&fused.pred) < weir_filter::opt::node_count(&expanded.pred)
        {
            fused_lists += 1;
        }
        let optimized = optimize(&fused);
        let classic = cbpf::emit(&optimized).ok().and_then(|prog| CbpfFilter::new(&prog).ok());
        for _ in 0..PACKETS_PER_LIST {
            let pkt = packet(&mut rng, &pool);
            for cut in 0..=pkt.len() {
                let bytes = &pkt[..cut];
                let wire = pkt.len() as u32;
                let want = expanded.run(bytes, wire);
                let got = fused.run(bytes, wire);
                assert_eq!(got, want, "fused `{joined}` on {pkt:02x?} cut at {cut}");
                let got = optimized.run(bytes, wire);
                assert_eq!(got, want, "optimized fused `{joined}` on {pkt:02x?} cut at {cut}");
                if let Some(classic) = &classic {
                    let got = classic.run(bytes, wire);
                    assert_eq!(got, want, "classic fused `{joined}` on {pkt:02x?} cut at {cut}");
                }
                cuts += 1;
            }
        }
    }
    eprintln!("fuse: {LISTS} lists ({fused_lists} fused), {cuts} cut packets");
    // The generator must exercise the rewrite, not only lists that do not fuse.
    assert!(fused_lists >= LISTS / 4, "only {fused_lists} of {LISTS} lists fused");
}

#[test]
fn a_long_host_list_lowers_to_one_term_and_sets() {
    let names = NameDb::builtin();
    let hosts: Vec<String> =
        (0..1000).map(|i| format!("host 10.{}.{}.{}", i / 250, i % 250, 7)).collect();
    let f = lowered(&hosts.join(" or "), &names);
    let one = weir_filter::opt::node_count(&lowered(&hosts[0], &names).pred);
    let n = weir_filter::opt::node_count(&f.pred);
    // The first term, and a branch of set lookups per protocol the first term tests.
    assert!(n < 3 * one, "{n} nodes for 1,000 hosts (one host: {one})");
}
