//! Random rule sets that hit: each rule is built from a template (a protocol and a set of
//! match kinds: one mask) with values read from a packet of the corpus, so that rules
//! match a fair share of the traffic. Rules are made as text, so the parser is exercised
//! too.

use weir_flow::key::{extract, field, Key, Need};
use weir_testkit::SplitMix64;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    DstMac(u8),
    SrcMac,
    Indev,
    SrcIp(u8),
    DstIp(u8),
    Tos(u8),
    Ttl,
    IpFlags(u8),
    SrcPort(u8),
    DstPort(u8),
    TcpFlags(u16),
    IcmpType,
    IcmpCode(u8),
    ArpOp,
    ArpSip(u8),
    ArpTip,
    ArpSha,
    ArpTha,
    VlanId,
    VlanPrio,
    MplsLabel,
    MplsTc,
    MplsBos,
}

#[derive(Clone, Debug)]
pub struct Template {
    protocol: &'static str,
    /// vlan_ethtype (and cvlan) text and the EtherType IP matches see.
    vlan: &'static str,
    ip_proto: Option<(&'static str, u8)>,
    kinds: Vec<Kind>,
}

pub struct Gen<'a> {
    pub rng: SplitMix64,
    keys: &'a [Key],
}

const V4_PROTOS: [(&str, u8); 4] = [("tcp", 6), ("udp", 17), ("icmp", 1), ("2f", 0x2f)];
const V6_PROTOS: [(&str, u8); 3] = [("tcp", 6), ("udp", 17), ("icmpv6", 58)];

impl<'a> Gen<'a> {
    pub fn new(seed: u64, keys: &'a [Key]) -> Gen<'a> {
        Gen { rng: SplitMix64::new(seed), keys }
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.rng.below_usize(items.len())]
    }

    fn subset(&mut self, kinds: &[Kind], out: &mut Vec<Kind>) {
        for &k in kinds {
            if self.rng.chance(40) {
                out.push(k);
            }
        }
    }

    pub fn template(&mut self) -> Template {
        let mut t = Template { protocol: "all", vlan: "", ip_proto: None, kinds: Vec::new() };
        let l2 = [Kind::DstMac(self.pick(&[48, 40, 24])), Kind::SrcMac, Kind::Indev];
        let family = self.rng.below(8);
        let v6 = family == 2;
        match family {
            0 => {}
            1..=3 => {
                t.protocol = if v6 { "ipv6" } else { "ip" };
                if family == 3 {
                    t.protocol = "802.1Q";
                    t.vlan = if v6 { "ipv6" } else { "ip" };
                    self.subset(&[Kind::VlanId, Kind::VlanPrio], &mut t.kinds);
                }
                let len =
                    if v6 { self.pick(&[128, 64, 48, 0]) } else { self.pick(&[32, 24, 16, 8]) };
                let ip = [
                    Kind::SrcIp(len),
                    Kind::DstIp(if v6 { 128 } else { self.pick(&[32, 24]) }),
                    Kind::Tos(self.pick(&[0xff, 0xfc])),
                    Kind::Ttl,
                    Kind::IpFlags(self.pick(&[1, 2, 3])),
                ];
                self.subset(&ip, &mut t.kinds);
                if self.rng.chance(75) {
                    let p = if v6 { self.pick(&V6_PROTOS) } else { self.pick(&V4_PROTOS) };
                    t.ip_proto = Some(p);
                    match p.1 {
                        6 | 17 => {
                            let port = |g: &mut Gen<'_>| g.pick(&[0u8, 0, 1, 2]);
                            let (a, b) = (port(self), port(self));
                            self.subset(&[Kind::SrcPort(a), Kind::DstPort(b)], &mut t.kinds);
                            if p.1 == 6 {
                                let m = self.pick(&[0xfff, 0x12, 0x02]);
                                self.subset(&[Kind::TcpFlags(m)], &mut t.kinds);
                            }
                        }
                        1 | 58 => {
                            let m = self.pick(&[0xff, 0x0f]);
                            self.subset(&[Kind::IcmpType, Kind::IcmpCode(m)], &mut t.kinds)
                        }
                        _ => {}
                    }
                }
            }
            4 => {
                t.protocol = "arp";
                let k = [
                    Kind::ArpOp,
                    Kind::ArpSip(self.pick(&[32, 24])),
                    Kind::ArpTip,
                    Kind::ArpSha,
                    Kind::ArpTha,
                ];
                self.subset(&k, &mut t.kinds);
            }
            5 => {
                t.protocol = "mpls_uc";
                self.subset(&[Kind::MplsLabel, Kind::MplsTc, Kind::MplsBos], &mut t.kinds);
            }
            6 => {
                t.protocol = "802.1Q";
                self.subset(&[Kind::VlanId, Kind::VlanPrio], &mut t.kinds);
            }
            _ => {
                t.protocol = "802.1ad";
                t.vlan = "802.1Q";
                self.subset(&[Kind::VlanId], &mut t.kinds);
            }
        }
        self.subset(&l2, &mut t.kinds);
        t
    }

    /// A packet key that fits the template's protocol, if the corpus has one.
    fn sample(&mut self, t: &Template) -> Key {
        let eth = |k: &Key| k.get_u16(field::ETH_TYPE);
        let tpid = |k: &Key| k.get_u16(field::VLAN_TPID);
        for _ in 0..40 {
            let k = self.keys[self.rng.below_usize(self.keys.len())];
            let ok = match t.protocol {
                "ip" => eth(&k) == 0x0800 && tpid(&k) == 0,
                "ipv6" => eth(&k) == 0x86dd && tpid(&k) == 0,
                "arp" => eth(&k) == 0x0806,
                "mpls_uc" => eth(&k) == 0x8847,
                "802.1Q" => tpid(&k) == 0x8100,
                "802.1ad" => tpid(&k) == 0x88a8,
                _ => true,
            } && t.ip_proto.is_none_or(|(_, p)| k.get(field::IP_PROTO)[0] == p);
            if ok {
                return k;
            }
        }
        let mut k = Key::default();
        k.0.iter_mut().for_each(|b| *b = self.rng.u8());
        k
    }

    fn mac(k: &Key, f: weir_flow::key::Field) -> String {
        k.get(f).iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
    }

    fn ipv4(k: &Key, f: weir_flow::key::Field) -> String {
        let b = k.get(f);
        format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
    }

    pub fn rule(
        &mut self,
        t: &Template,
        chain: u32,
        chains: u32,
        devices: &[&str],
        first: bool,
    ) -> String {
        let k = self.sample(t);
        let mut s = String::new();
        // Without `prio` only when first: the kernel's automatic priority goes below the
        // chain's lowest, which runs out after an explicit `prio 1`.
        if !first || self.rng.chance(50) {
            s += &format!("prio {} ", 1 + self.rng.below(12));
        }
        if chain != 0 {
            s += &format!("chain {chain} ");
        }
        s += &format!("protocol {} flower", t.protocol);
        if t.protocol == "802.1Q" && !t.vlan.is_empty() || t.protocol == "802.1ad" {
            for kd in &t.kinds {
                match kd {
                    Kind::VlanId => s += &format!(" vlan_id {}", k.get_u16(field::VLAN_ID) & 0xfff),
                    Kind::VlanPrio => {
                        s += &format!(" vlan_prio {}", k.get(field::VLAN_PRIO)[0] & 7)
                    }
                    _ => {}
                }
            }
            s += &format!(" vlan_ethtype {}", t.vlan);
            if t.protocol == "802.1ad" {
                s += " cvlan_ethtype ip";
            }
        }
        let mut proto_done = t.ip_proto.is_none();
        for kd in &t.kinds {
            // ip_proto goes before the port, flags and icmp matches that need it.
            let needs_proto = matches!(
                kd,
                Kind::SrcPort(_) | Kind::DstPort(_) | Kind::IcmpType | Kind::IcmpCode(_)
            );
            if needs_proto && !proto_done {
                s += &format!(" ip_proto {}", t.ip_proto.map_or("", |p| p.0));
                proto_done = true;
            }
            let v6 = t.protocol == "ipv6" || t.vlan == "ipv6";
            let m = match *kd {
                Kind::DstMac(bits) => {
                    if bits == 48 {
                        format!("dst_mac {}", Self::mac(&k, field::DST_MAC))
                    } else {
                        format!("dst_mac {}/{bits}", Self::mac(&k, field::DST_MAC))
                    }
                }
                Kind::SrcMac => format!("src_mac {}", Self::mac(&k, field::SRC_MAC)),
                Kind::Indev => format!("indev {}", self.pick(&["in0", "in1"])),
                Kind::SrcIp(len) | Kind::DstIp(len) => {
                    let name = if matches!(kd, Kind::SrcIp(_)) { "src_ip" } else { "dst_ip" };
                    let addr = if v6 {
                        let f = if name == "src_ip" { field::IPV6_SRC } else { field::IPV6_DST };
                        let mut b = [0u8; 16];
                        b.copy_from_slice(k.get(f));
                        std::net::Ipv6Addr::from(b).to_string()
                    } else {
                        Self::ipv4(
                            &k,
                            if name == "src_ip" { field::IPV4_SRC } else { field::IPV4_DST },
                        )
                    };
                    format!("{name} {addr}/{len}")
                }
                Kind::Tos(mask) => format!("ip_tos {}/{mask:x}", k.get(field::IP_TOS)[0] & mask),
                Kind::Ttl => format!("ip_ttl {}", k.get(field::IP_TTL)[0]),
                Kind::IpFlags(which) => {
                    let f = k.get(field::FLAGS)[0];
                    let mut parts = Vec::new();
                    if which & 1 != 0 {
                        parts.push(if f & 1 != 0 { "frag" } else { "nofrag" });
                    }
                    if which & 2 != 0 {
                        parts.push(if f & 2 != 0 { "firstfrag" } else { "nofirstfrag" });
                    }
                    format!("ip_flags {}", parts.join("/"))
                }
                Kind::SrcPort(v) | Kind::DstPort(v) => {
                    let name = if matches!(kd, Kind::SrcPort(_)) { "src_port" } else { "dst_port" };
                    let p = k.get_u16(if name == "src_port" {
                        field::SRC_PORT
                    } else {
                        field::DST_PORT
                    });
                    match v {
                        0 => format!("{name} {}", p.max(1)),
                        1 => format!("{name} {}/0xff00", p & 0xff00),
                        _ => {
                            let lo = p.saturating_sub(self.rng.below(100) as u16).clamp(1, 65534);
                            let hi = lo.saturating_add(1 + self.rng.below(300) as u16);
                            format!("{name} {lo}-{hi}")
                        }
                    }
                }
                Kind::TcpFlags(m) => {
                    format!("tcp_flags 0x{:x}/0x{m:x}", k.get_u16(field::TCP_FLAGS) & m)
                }
                Kind::IcmpType => format!("type {}", k.get(field::ICMP_TYPE)[0]),
                Kind::IcmpCode(m) => format!("code {}/{m}", k.get(field::ICMP_CODE)[0] & m),
                Kind::ArpOp => format!(
                    "arp_op {}",
                    ["request", "reply"][usize::from(k.get(field::ARP_OP)[0] == 2)]
                ),
                Kind::ArpSip(len) => format!("arp_sip {}/{len}", Self::ipv4(&k, field::ARP_SIP)),
                Kind::ArpTip => format!("arp_tip {}", Self::ipv4(&k, field::ARP_TIP)),
                Kind::ArpSha => format!("arp_sha {}", Self::mac(&k, field::ARP_SHA)),
                Kind::ArpTha => format!("arp_tha {}", Self::mac(&k, field::ARP_THA)),
                Kind::VlanId | Kind::VlanPrio if !t.vlan.is_empty() || t.protocol == "802.1ad" => {
                    continue
                }
                Kind::VlanId => format!("vlan_id {}", k.get_u16(field::VLAN_ID) & 0xfff),
                Kind::VlanPrio => format!("vlan_prio {}", k.get(field::VLAN_PRIO)[0] & 7),
                Kind::MplsLabel => {
                    let b = k.get(field::MPLS_LABEL);
                    format!("mpls_label {}", u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & 0xfffff)
                }
                Kind::MplsTc => format!("mpls_tc {}", k.get(field::MPLS_TC)[0] & 7),
                Kind::MplsBos => format!("mpls_bos {}", k.get(field::MPLS_BOS)[0] & 1),
            };
            s += " ";
            s += &m;
        }
        if !proto_done {
            s += &format!(" ip_proto {}", t.ip_proto.map_or("", |p| p.0));
        }
        s += " ";
        s += &self.actions(chain, chains, devices);
        s
    }

    fn actions(&mut self, chain: u32, chains: u32, devices: &[&str]) -> String {
        let dev = self.pick(devices);
        let goto = |g: &mut Gen<'_>| {
            if chains == 0 {
                "drop".to_string()
            } else if g.rng.chance(90) {
                let lo = chain + 1;
                format!(
                    "goto chain {}",
                    lo + g.rng.below(u64::from(chains.saturating_sub(chain).max(1))) as u32
                )
            } else {
                // Loops too: the restart limit ends them.
                format!("goto chain {}", g.rng.below(u64::from(chains) + 1))
            }
        };
        match self.rng.weighted(&[20, 15, 15, 10, 5, 10, 5, 5, 5, 5, 5]) {
            0 => "action drop".into(),
            1 => "action pass".into(),
            2 => format!("action {}", goto(self)),
            3 => format!("action mirred egress redirect dev {dev}"),
            4 => format!("action mirred egress mirror dev {dev} action {}", self.pick(&["drop", "pass", "continue"])),
            5 => "action continue".into(),
            6 => format!(
                "action vlan push id {} priority {} pipe action {}",
                self.rng.below(4096),
                self.rng.below(8),
                goto(self)
            ),
            7 => format!("action vlan pop pipe action {}", goto(self)),
            8 => "action pedit ex munge ip ttl add 0xff munge tcp dport set 8080 pipe action csum ip and tcp and udp".into(),
            9 => format!("action skbedit mark 0x{:x} pipe action {}", self.rng.u32(), self.pick(&["continue", "pass"])),
            _ => format!(
                "action vlan modify id {} pipe action mirred egress redirect dev {dev}",
                self.rng.below(4096)
            ),
        }
    }

    /// A rule set: `rules` rules over `masks` templates, in `chains + 1` chains.
    pub fn rule_set(&mut self, rules: usize, masks: usize, chains: u32) -> String {
        let templates: Vec<Template> = (0..masks).map(|_| self.template()).collect();
        let devices = ["d0", "d1", "d2"];
        let mut out = String::new();
        for i in 0..rules {
            let t = templates[self.rng.below_usize(templates.len())].clone();
            let chain = if chains == 0 { 0 } else { self.rng.below(u64::from(chains) + 1) as u32 };
            out += &self.rule(&t, chain, chains, &devices, i == 0);
            out += "\n";
        }
        out
    }
}

/// The keys of the corpus packets (to draw rule values from).
pub fn keys_of(frames: &[Vec<u8>]) -> Vec<Key> {
    frames.iter().map(|f| extract(f, 0, Need::ALL).0).collect()
}
