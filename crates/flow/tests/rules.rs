//! The rule language: tc's syntax and refusals, printing, round trips.

use weir_flow::rule::{parse_rule, PortMatch};
use weir_flow::{Match, RuleSet};

fn err(text: &str) -> String {
    match RuleSet::parse(text) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn parses_the_everyday_forms() {
    let set = RuleSet::parse(
        "# a comment\n\
         \n\
         prio 10 protocol ip flower ip_proto tcp dst_port 80 action drop\n\
         protocol ipv6 flower src_ip 2001:db8::/32 ip_proto udp src_port 1000-2000 action pass\n\
         chain 1 prio 3 handle 0x5 protocol 802.1Q flower vlan_id 5 vlan_prio 2 vlan_ethtype ip dst_ip 10.0.0.0/255.0.0.0 action mirred egress redirect dev out0\n\
         protocol arp flower arp_op request arp_tip 10.0.0.1 arp_sha 00:11:22:33:44:01 action goto chain 1\n\
         protocol mpls_uc flower mpls_label 100 mpls_tc 3 mpls_bos 1 action vlan push id 7 priority 1 protocol 802.1ad pipe action skbedit mark 0x10\n\
         protocol ip flower ip_flags frag/nofirstfrag ip_tos 0x10/0xfc action pedit ex munge ip ttl add 0xff pipe action csum ip and tcp\n",
    )
    .unwrap();
    assert_eq!(set.rules.len(), 6);
    assert_eq!(set.rules[0].line, 3);
    assert_eq!(set.prios[0], 10);
    // No prio: the kernel's auto priority, one below the chain's lowest so far.
    assert_eq!(set.prios[1], 9);
    assert_eq!(set.prios[3], 8);
    assert!(matches!(set.rules[1].matches[2], Match::SrcPort(PortMatch::Range(1000, 2000))));
    match &set.rules[2].matches[3] {
        Match::DstIp(p) => assert_eq!(p.len, 8),
        m => panic!("{m:?}"),
    }
    assert_eq!(set.devices(), vec!["out0".to_string()]);
}

#[test]
fn first_auto_priority_is_the_kernels() {
    let set = RuleSet::parse("protocol ip flower action drop\nprotocol ip flower action pass\nchain 2 protocol all flower action drop\n").unwrap();
    assert_eq!(set.prios, vec![49152, 49151, 49152]);
}

#[test]
fn refuses_as_tc_does_with_line_and_column() {
    assert_eq!(
        err("protocol arp flower ip_proto tcp action drop"),
        "line 1, column 21: Illegal \"eth_type\" for ip proto\nIllegal \"ip_proto\""
    );
    assert_eq!(
        err("\nprotocol ip flower dst_port 80 action drop"),
        "line 2, column 20: Illegal \"dst_port\""
    );
    assert_eq!(
        err("protocol ip flower ip_proto tcp dst_port 90-80 action drop"),
        "line 1, column 33: max value should be greater than min value\nIllegal \"dst_port\""
    );
    assert_eq!(
        err("protocol ip flower vlan_id 3 action drop"),
        "line 1, column 20: Can't set \"vlan_id\" if ethertype isn't 802.1Q or 802.1AD"
    );
    assert_eq!(
        err("protocol ip flower ip_proto tcp type 3 action drop"),
        "line 1, column 33: Illegal \"icmp type\""
    );
    assert_eq!(
        err("protocol ipv6 flower dst_ip 10.0.0.1 action drop"),
        "line 1, column 22: Illegal \"eth_type\" for ip address\nIllegal \"dst_ip\""
    );
    assert_eq!(
        err("protocol ip flower vlan_id 4096 action drop"),
        "line 1, column 20: Can't set \"vlan_id\" if ethertype isn't 802.1Q or 802.1AD"
    );
    assert_eq!(
        err("protocol 802.1Q flower vlan_id 4096 action drop"),
        "line 1, column 24: Illegal \"vlan_id\""
    );
    assert_eq!(
        err("protocol ip flower ip_proto tcp dst_port 0 action drop"),
        "line 1, column 33: Illegal \"dst_port\""
    );
    assert_eq!(
        err("protocol ip flower frobnicate 1 action drop"),
        "line 1, column 20: What is \"frobnicate\"?"
    );
    assert_eq!(
        err("prio 0 protocol ip flower action drop"),
        "line 1, column 1: Error: argument \"0\" is wrong: invalid priority value"
    );
    assert_eq!(
        err("protocol ip flower tcp_flags 0x1000 action drop"),
        "line 1, column 20: Illegal \"tcp_flags\""
    );
    assert_eq!(
        err("protocol ip flower src_ip 10.0.0.0/255.0.255.0 action drop"),
        "line 1, column 20: Illegal \"src_ip\""
    );
    assert_eq!(
        err("protocol ip flower ip_flags fragile action drop"),
        "line 1, column 20: Illegal \"ip_flags\""
    );
}

#[test]
fn names_what_weir_does_not_support() {
    assert!(err("protocol ip flower ct_state +trk action drop")
        .contains("\"ct_state\" is not supported by weir"));
    assert!(err("protocol ip flower enc_key_id 5 action drop")
        .contains("\"enc_key_id\" is not supported"));
    assert!(err("protocol ip flower action police rate 1mbit")
        .contains("action \"police\" is not supported by weir"));
    assert!(err("protocol ip u32 match ip dst 1.2.3.4").contains("filter \"u32\" is not supported"));
    assert!(
        err("protocol ip flower action mirred ingress redirect dev x").contains("mirred ingress")
    );
    assert!(err("protocol ip flower action pedit ex munge ip ihl set 5")
        .contains("\"ip ihl\" is not supported"));
}

#[test]
fn prefixes_match_as_tcs_matches_does() {
    let r = parse_rule("protocol ip flower ip_p tcp dst_po 22 action drop", 1).unwrap();
    assert_eq!(r.matches, vec![Match::IpProto(6), Match::DstPort(PortMatch::Exact(22))]);
    // ip_proto numbers are hexadecimal in tc.
    let r = parse_rule("protocol ip flower ip_proto 11 action drop", 1).unwrap();
    assert_eq!(r.matches, vec![Match::IpProto(17)]);
}

#[test]
fn round_trips() {
    let text = "prio 5 chain 2 handle 0x9 protocol 802.1ad flower vlan_id 10 vlan_ethtype 802.1Q cvlan_id 20 cvlan_prio 3 cvlan_ethtype ipv6 src_ip 2001:db8::1/128 dst_ip ::/0 ip_proto tcp src_port 5/0xff tcp_flags 0x12/0x17 ip_ttl 64/ff action mirred egress mirror dev m1 action drop\n\
                protocol ip flower indev eth0 dst_mac 00:11:22:33:44:00/ff:ff:ff:ff:ff:00 src_mac 02:00:00:00:00:01 ip_proto icmp type 8 code 0/255 ip_flags nofrag action pedit ex munge ip dst set 10.1.2.3 munge eth src set 02:00:00:00:00:09 munge udp dport add 1 pipe action csum ip4h and icmp and udp action continue\n\
                protocol rarp flower arp_op 2/255 arp_sip 10.0.0.0/8 arp_tha 00:00:00:00:00:00/00:00:00:00:00:00 action vlan modify id 4 protocol 802.1Q reclassify\n\
                protocol ipv6 flower ip_proto udp dst_port 100-200 action pedit ex munge ip6 flow_lbl set 0x12345 munge ip6 hoplimit set 3 pipe action vlan pop action skbedit mark 0x5/0xff goto chain 7\n";
    let a = RuleSet::parse(text).unwrap();
    let printed = a.to_string();
    let b = RuleSet::parse(&printed).unwrap();
    let strip = |s: &RuleSet| {
        s.rules.iter().map(|r| weir_flow::Rule { line: 0, ..r.clone() }).collect::<Vec<_>>()
    };
    assert_eq!(strip(&a), strip(&b), "{printed}");
    assert_eq!(printed, b.to_string());
}

#[test]
fn api_builds_the_same_rules() {
    use weir_flow::{Action, Rule};
    let mut set = RuleSet::new();
    set.push(
        Rule::new(0x0800)
            .prio(3)
            .with(Match::IpProto(17))
            .with(Match::DstPort(PortMatch::Exact(53)))
            .action(Action::drop()),
    )
    .unwrap();
    let parsed =
        RuleSet::parse("prio 3 protocol ip flower ip_proto udp dst_port 53 action drop").unwrap();
    assert_eq!(set, parsed);
    // The API is checked as the parser is.
    let e = set.push(Rule::new(0x0806).with(Match::IpProto(6))).unwrap_err();
    assert!(e.message.contains("Illegal \"ip_proto\""), "{e}");
}

#[test]
fn random_text_is_refused_or_taken_never_a_panic() {
    // Keyword soup with plausible and broken values; every outcome is a rule or an error
    // with a line and a column inside the line.
    let words = [
        "prio",
        "chain",
        "handle",
        "protocol",
        "flower",
        "ip",
        "ipv6",
        "arp",
        "802.1Q",
        "all",
        "action",
        "drop",
        "pass",
        "goto",
        "chain",
        "mirred",
        "egress",
        "redirect",
        "mirror",
        "dev",
        "vlan",
        "push",
        "pop",
        "modify",
        "id",
        "pedit",
        "ex",
        "munge",
        "set",
        "add",
        "csum",
        "skbedit",
        "mark",
        "ip_proto",
        "tcp",
        "udp",
        "icmp",
        "src_ip",
        "dst_ip",
        "src_port",
        "dst_port",
        "tcp_flags",
        "ip_flags",
        "frag",
        "type",
        "code",
        "vlan_id",
        "vlan_ethtype",
        "cvlan_id",
        "mpls_label",
        "arp_op",
        "arp_tip",
        "dst_mac",
        "indev",
        "ttl",
        "dport",
        "10.0.0.1/33",
        "::1/200",
        "1-0",
        "0x10000",
        "-1",
        "65535",
        "00:11:22:33:44:55/49",
        "/",
        "#",
        "",
        "\u{e9}",
        "0",
        "7",
        "80-90",
        "1.2.3.4",
        "ff:ff",
        "continue",
        "pipe",
        "reclassify",
        "request",
    ];
    let mut rng = weir_testkit::SplitMix64::new(77);
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..20_000 {
        let n = rng.below_usize(14);
        let mut line: Vec<&str> = (0..n).map(|_| words[rng.below_usize(words.len())]).collect();
        if rng.chance(50) {
            line.insert(0, "protocol ip flower");
        }
        let text = line.join(" ");
        match RuleSet::parse(&text) {
            Ok(_) => ok += 1,
            Err(e) => {
                assert_eq!(e.line, 1);
                assert!(e.column >= 1 && e.column <= text.len() + 1, "{e} in {text:?}");
                refused += 1;
            }
        }
    }
    assert!(ok > 100 && refused > 100, "{ok} {refused}");
}

#[test]
fn random_bytes_extract_without_a_panic() {
    let mut rng = weir_testkit::SplitMix64::new(3);
    for _ in 0..20_000 {
        let len = rng.below_usize(120);
        let mut f = rng.bytes(len);
        // Steer some into the headers weir parses.
        if len > 14 && rng.chance(70) {
            let et: [u16; 7] = [0x0800, 0x86dd, 0x0806, 0x8100, 0x88a8, 0x8847, 0x8035];
            f[12..14].copy_from_slice(&et[rng.below_usize(et.len())].to_be_bytes());
        }
        let _ = weir_flow::key::extract(&f, 0, weir_flow::key::Need::ALL);
    }
}

/// Compiling puts each match's value and mask at its field and nothing anywhere else:
/// every match kind that writes the key, checked byte by byte against the layout (the
/// classifier and the reference share `Rule::compile`, so their diff tests cannot see a
/// field written at the wrong place or length).
#[test]
fn compile_puts_each_field_at_its_place() {
    use weir_flow::key::{field, Field, Key};
    type Want = Vec<(Field, Vec<u8>, Vec<u8>)>;
    let ip = |p: u16| (field::ETH_TYPE, p.to_be_bytes().to_vec(), vec![0xff; 2]);
    let v4 = vec![0xff; 4];
    let cases: Vec<(&str, Want)> = vec![
        (
            "protocol ip flower indev eth7 src_ip 10.1.2.3/24 dst_ip 192.168.0.9 ip_proto tcp src_port 0x1234/0xff00 dst_port 443 tcp_flags 0x12/0x3f ip_tos 0x10/0xfc ip_ttl 7",
            vec![
                ip(0x0800),
                (field::INDEV, 1u32.to_be_bytes().to_vec(), v4.clone()),
                (field::IPV4_SRC, vec![10, 1, 2, 0], vec![0xff, 0xff, 0xff, 0]),
                (field::IPV4_DST, vec![192, 168, 0, 9], v4.clone()),
                (field::IP_PROTO, vec![6], vec![0xff]),
                (field::SRC_PORT, vec![0x12, 0], vec![0xff, 0]),
                (field::DST_PORT, 443u16.to_be_bytes().to_vec(), vec![0xff; 2]),
                (field::TCP_FLAGS, vec![0, 0x12], vec![0, 0x3f]),
                (field::IP_TOS, vec![0x10], vec![0xfc]),
                (field::IP_TTL, vec![7], vec![0xff]),
                (field::FLAGS, vec![weir_flow::rule::ADDR_V4], vec![weir_flow::rule::ADDR_BITS]),
            ],
        ),
        (
            "protocol ipv6 flower src_ip 2001:db8::1/32 dst_mac 00:11:22:33:44:55 src_mac 66:77:88:99:aa:bb/ff:ff:ff:00:00:00 ip_proto icmpv6 type 128 code 0",
            vec![
                ip(0x86dd),
                (field::IPV6_SRC, vec![0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [vec![0xff; 4], vec![0; 12]].concat()),
                (field::DST_MAC, vec![0, 0x11, 0x22, 0x33, 0x44, 0x55], vec![0xff; 6]),
                (field::SRC_MAC, vec![0x66, 0x77, 0x88, 0, 0, 0], vec![0xff, 0xff, 0xff, 0, 0, 0]),
                (field::IP_PROTO, vec![58], vec![0xff]),
                (field::ICMP_TYPE, vec![128], vec![0xff]),
                (field::ICMP_CODE, vec![0], vec![0xff]),
                (field::FLAGS, vec![weir_flow::rule::ADDR_V6], vec![weir_flow::rule::ADDR_BITS]),
            ],
        ),
        (
            "protocol 802.1Q flower vlan_id 5 vlan_prio 2 vlan_ethtype 802.1Q cvlan_id 7 cvlan_prio 3 cvlan_ethtype ip",
            vec![
                (field::VLAN_TPID, vec![0x81, 0], vec![0xff; 2]),
                (field::CVLAN_TPID, vec![0x81, 0], vec![0xff; 2]),
                ip(0x0800),
                (field::VLAN_ID, vec![0, 5], vec![0x0f, 0xff]),
                (field::VLAN_PRIO, vec![2], vec![7]),
                (field::CVLAN_ID, vec![0, 7], vec![0x0f, 0xff]),
                (field::CVLAN_PRIO, vec![3], vec![7]),
            ],
        ),
        (
            "protocol arp flower arp_op request arp_tip 10.0.0.1 arp_sip 10.0.0.0/8 arp_sha 00:11:22:33:44:01 arp_tha 00:11:22:33:44:02",
            vec![
                ip(0x0806),
                (field::ARP_OP, vec![1], vec![0xff]),
                (field::ARP_TIP, vec![10, 0, 0, 1], v4.clone()),
                (field::ARP_SIP, vec![10, 0, 0, 0], vec![0xff, 0, 0, 0]),
                (field::ARP_SHA, vec![0, 0x11, 0x22, 0x33, 0x44, 1], vec![0xff; 6]),
                (field::ARP_THA, vec![0, 0x11, 0x22, 0x33, 0x44, 2], vec![0xff; 6]),
            ],
        ),
        (
            "protocol mpls_uc flower mpls_label 100 mpls_tc 3 mpls_bos 1 mpls_ttl 9",
            vec![
                ip(0x8847),
                (field::MPLS_LABEL, 100u32.to_be_bytes().to_vec(), 0x000f_ffffu32.to_be_bytes().to_vec()),
                (field::MPLS_TC, vec![3], vec![7]),
                (field::MPLS_BOS, vec![1], vec![1]),
                (field::MPLS_TTL, vec![9], vec![0xff]),
            ],
        ),
    ];
    for (text, want) in cases {
        let set = RuleSet::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let c = &set.compile()[0];
        let (mut key, mut mask) = (Key::default(), Key::default());
        for (f, v, m) in &want {
            assert_eq!((v.len(), m.len()), (f.len, f.len), "{text}: the case's own lengths");
            key.set(*f, v);
            mask.set(*f, m);
        }
        assert_eq!(c.mask, mask, "{text}: mask\n{:?}\n{:?}", c.mask, mask);
        assert_eq!(c.key, key, "{text}: key\n{:?}\n{:?}", c.key, key);
    }
}
