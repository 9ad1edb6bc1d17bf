//! Actions and controls on known packets: what each does to the bytes, the mark and the
//! verdict (the differential tests compare the two classifiers, which share this code;
//! here the code is checked against what the packet must become).

use weir_flow::{Outcome, Reference, RuleSet, Verdict, Work};
use weir_testkit::wire::{self, internet_checksum, Ipv4Header, TcpHeader, VlanTag};

fn tcp_frame(ttl: u8, tags: &[VlanTag]) -> Vec<u8> {
    let src = [10, 0, 0, 1];
    let dst = [10, 0, 0, 2];
    let mut seg = wire::tcp(
        &TcpHeader {
            src_port: 1234,
            dst_port: 80,
            seq: 1,
            ack: 0,
            flags: 0x02,
            window: 512,
            options: vec![],
        },
        b"hello",
    );
    // A correct TCP checksum to start with.
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src);
    pseudo.extend_from_slice(&dst);
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&(seg.len() as u16).to_be_bytes());
    seg[16] = 0;
    seg[17] = 0;
    let c = internet_checksum(&[pseudo.clone(), seg.clone()].concat());
    seg[16..18].copy_from_slice(&c.to_be_bytes());
    let ip = wire::ipv4(
        &Ipv4Header {
            src,
            dst,
            protocol: 6,
            ttl,
            tos: 0,
            id: 7,
            dont_fragment: false,
            more_fragments: false,
            fragment_offset: 0,
            options: vec![],
        },
        &seg,
    );
    wire::ethernet([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1], tags, 0x0800, &ip)
}

/// What a packet became: the outcome, its bytes, the mirrored copies.
type Result3 = (Outcome, Vec<u8>, Vec<(u16, Vec<u8>)>);

fn run(rules: &str, frame: &[u8]) -> Result3 {
    let set = RuleSet::parse(rules).unwrap();
    let r = Reference::new(&set);
    let mut data = frame.to_vec();
    let mut mirrored = Vec::new();
    let mut w = Work::new(&mut data, frame.len() as u32, 0, 5, &mut mirrored);
    let o = r.process(&mut w);
    (o, data, mirrored)
}

/// The IPv4 header starts at `at`: its checksum and the TCP checksum verify.
fn checksums_hold(f: &[u8], at: usize) -> bool {
    let ihl = usize::from(f[at] & 0xf) * 4;
    let ip_ok = internet_checksum(&f[at..at + ihl]) == 0;
    let tot = usize::from(u16::from_be_bytes([f[at + 2], f[at + 3]]));
    let seg = &f[at + ihl..at + tot];
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&f[at + 12..at + 20]);
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&(seg.len() as u16).to_be_bytes());
    let tcp_ok = internet_checksum(&[pseudo, seg.to_vec()].concat()) == 0;
    ip_ok && tcp_ok
}

#[test]
fn pedit_then_csum_leaves_valid_checksums() {
    let f = tcp_frame(64, &[]);
    assert!(checksums_hold(&f, 14));
    let (o, d, _) = run(
        "protocol ip flower ip_proto tcp action pedit ex munge ip ttl add 0xff munge tcp dport set 8080 munge ip dst set 192.168.9.9 pipe action csum ip and tcp",
        &f,
    );
    assert_eq!(o.verdict(), Verdict::Pass);
    assert!(o.modified);
    assert_eq!(d[22], 63, "ttl + 0xff wraps to ttl - 1");
    assert_eq!(u16::from_be_bytes([d[36], d[37]]), 8080);
    assert_eq!(&d[30..34], &[192, 168, 9, 9]);
    assert!(checksums_hold(&d, 14));
    // Without csum the checksums are stale.
    let (_, d, _) = run("protocol ip flower action pedit ex munge ip ttl set 9", &f);
    assert_eq!(d[22], 9);
    assert!(!checksums_hold(&d, 14));
}

#[test]
fn vlan_push_pop_modify() {
    let f = tcp_frame(64, &[]);
    let (_, pushed, _) =
        run("protocol all flower action vlan push id 42 priority 5 protocol 802.1ad", &f);
    assert_eq!(pushed.len(), f.len() + 4);
    assert_eq!(&pushed[12..16], &[0x88, 0xa8, 0xa0, 42]);
    assert_eq!(&pushed[16..], &f[12..]);
    let (_, popped, _) = run("protocol all flower action vlan pop", &pushed);
    assert_eq!(popped, f);
    let (_, modified, _) = run("protocol all flower action vlan modify id 7", &pushed);
    // The priority is kept, the id and the TPID (802.1Q by default) change.
    assert_eq!(&modified[12..16], &[0x81, 0x00, 0xa0, 7]);
    // pop on an untagged frame changes nothing.
    let (o, same, _) = run("protocol all flower action vlan pop", &f);
    assert_eq!((same, o.modified), (f.clone(), false));
    // A pushed tag is seen by the next chain: the rule in chain 1 matches the new id.
    let (o, _, _) = run(
        "protocol ip flower action vlan push id 9 pipe action goto chain 1\nchain 1 protocol 802.1Q flower vlan_id 9 action drop",
        &f,
    );
    assert_eq!((o.line(), o.verdict()), (Some(2), Verdict::Drop));
}

#[test]
fn controls_chains_and_marks() {
    let f = tcp_frame(64, &[]);
    // continue: on to the next rule of the chain.
    let (o, _, _) = run("prio 1 protocol ip flower action skbedit mark 0xff00 continue\nprio 2 protocol ip flower action skbedit mark 0x12/0xff pipe action drop", &f);
    assert_eq!((o.line(), o.verdict(), o.mark), (Some(2), Verdict::Drop, 0xff12));
    // goto chain with nothing there: pass.
    let (o, _, _) = run("protocol ip flower action goto chain 5", &f);
    assert_eq!((o.line(), o.verdict()), (Some(1), Verdict::Pass));
    // A loop: dropped after the kernel's 16 restarts.
    let (o, _, _) = run(
        "protocol ip flower action goto chain 1\nchain 1 protocol ip flower action goto chain 0",
        &f,
    );
    assert_eq!(o.verdict(), Verdict::Drop);
    // mirror copies the packet as it is then and goes on; redirect ends it.
    let (o, d, m) = run(
        "protocol ip flower action mirred egress mirror dev a action pedit ex munge ip ttl set 1 pipe action mirred egress redirect dev b",
        &f,
    );
    assert_eq!(o.verdict(), Verdict::Redirect(1));
    assert_eq!(m, vec![(0, f.clone())]);
    assert_eq!(d[22], 1);
    // A redirect given a control is a copy; the packet goes on to the control.
    let (o, _, m) =
        run("protocol ip flower action mirred egress redirect dev a pipe action drop", &f);
    assert_eq!((o.verdict(), m.len()), (Verdict::Drop, 1));
    // No rule: pass, no line.
    let (o, _, _) = run("protocol arp flower action drop", &f);
    assert_eq!((o.line(), o.verdict()), (None, Verdict::Pass));
}

#[test]
fn matches_read_the_headers_flower_reads() {
    let tagged = tcp_frame(64, &[VlanTag { tpid: 0x8100, tci: (3 << 13) | 100 }]);
    let cases: &[(&str, bool)] = &[
        ("protocol 802.1Q flower vlan_id 100 vlan_prio 3 vlan_ethtype ip ip_proto tcp dst_port 80 action drop", true),
        ("protocol 802.1Q flower vlan_id 101 action drop", false),
        // n_proto is the EtherType after the tags: protocol ip matches the tagged frame.
        ("protocol ip flower src_ip 10.0.0.0/8 tcp_flags 0x2/0x3 action drop", true),
        ("protocol ip flower ip_proto tcp src_port 1000-2000 action drop", true),
        ("protocol ip flower ip_proto tcp src_port 1235-2000 action drop", false),
        ("protocol ip flower ip_flags nofrag ip_ttl 64 action drop", true),
        ("protocol ip flower ip_flags frag action drop", false),
        ("protocol ipv6 flower action drop", false),
        ("protocol all flower dst_mac 02:00:00:00:00:00/ff:ff:ff:00:00:00 action drop", true),
    ];
    for (rule, hit) in cases {
        let (o, _, _) = run(rule, &tagged);
        assert_eq!(o.line().is_some(), *hit, "{rule}");
    }
}
