//! The grammar-based generator: random trees over every primitive, biased to valid and
//! matching expressions, with a share of invalid qualifier combinations and out-of-range
//! values so that rejections are compared too.

use super::values::{self, pick, weighted};
use super::{Arith, ArithOp, BoolOp, InheritedId, Leaf, Node, NumStyle, Prim, RelOp, Spelling};
use crate::corpus::pools;
use crate::rng::SplitMix64;

/// Seeded generator of filter expressions.
#[derive(Debug, Clone)]
pub struct Generator {
    pub(super) rng: SplitMix64,
    /// Deepest boolean nesting of an ordinary expression (deep-nesting expressions, a small
    /// share, go much further).
    pub max_depth: u32,
    /// Percent of primitives that are the keywords of particular link types (802.11
    /// `type`/`subtype`/`dir`, `wlan addr1` ..., `radio[]`, `llc`); 0 (the default) leaves
    /// the generated sequence exactly as it was before they existed.
    pub link_share: u64,
    /// Percent of primitives that are ARCnet address tests (`link src host $d5`, and
    /// misqualified ones); 0 (the default) leaves the generated sequence as it was.
    pub aid_share: u64,
    /// Percent of primitives that are ATM tests (`lane`, `vpi`/`vci`, `oam`, `sc` ...); 0
    /// (the default) leaves the generated sequence as it was.
    pub atm_share: u64,
    /// Percent of primitives that are pflog header tests (`ifname`, `rnr`, `reason`,
    /// `action` ...); 0 (the default) leaves the generated sequence as it was.
    pub pf_share: u64,
    /// Percent of primitives that are SS7 tests (`fisu`, `msu`, `sio`, `opc` ... and
    /// their `h` forms); 0 (the default) leaves the generated sequence as it was.
    pub mtp_share: u64,
}

/// Primitive families that take an id (and so can pass their qualifiers on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdFamily {
    Host4,
    Host6,
    EtherHost,
    Net4,
    Net6,
    Port,
    PortRange,
    IpProto,
    EtherProto,
    IsoProto,
    ProtoChain,
    Decnet,
}

impl Generator {
    pub fn new(seed: u64) -> Generator {
        Generator {
            rng: SplitMix64::new(seed),
            max_depth: 5,
            link_share: 0,
            aid_share: 0,
            atm_share: 0,
            pf_share: 0,
            mtp_share: 0,
        }
    }

    /// One random expression.
    pub fn expr(&mut self) -> Node {
        match self.rng.weighted(&[90, 3, 3, 4]) {
            0 => self.node(0),
            1 => self.deeply_nested(),
            2 => self.long_chain(),
            _ => self.leaf(),
        }
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.rng.chance(percent)
    }

    fn spelling(&mut self, word_percent: u64) -> Spelling {
        if self.chance(word_percent) {
            Spelling::Word
        } else {
            Spelling::Symbol
        }
    }

    fn node(&mut self, depth: u32) -> Node {
        let leaf_percent = [25u64, 40, 55, 70, 85];
        let p = leaf_percent.get(depth as usize).copied().unwrap_or(100);
        if depth >= self.max_depth || self.chance(p) {
            return self.leaf();
        }
        match self.rng.weighted(&[70, 18, 12]) {
            0 => {
                let op = if self.chance(55) { BoolOp::And } else { BoolOp::Or };
                let spelling = self.spelling(80);
                let lhs = Box::new(self.node(depth + 1));
                let rhs = Box::new(self.node(depth + 1));
                Node::Bool { op, spelling, lhs, rhs }
            }
            1 => {
                let spelling = self.spelling(70);
                Node::Not { spelling, inner: Box::new(self.node(depth + 1)) }
            }
            _ => Node::Group(Box::new(self.node(depth + 1))),
        }
    }

    /// A leaf under many `not`s and parentheses (staying under weir's documented nesting
    /// limit of 200, which libpcap does not have).
    fn deeply_nested(&mut self) -> Node {
        let layers = self.rng.range(20, 120);
        let mut n = self.leaf();
        for _ in 0..layers {
            n = if self.chance(50) {
                let spelling = self.spelling(50);
                Node::Not { spelling, inner: Box::new(n) }
            } else {
                Node::Group(Box::new(n))
            };
        }
        n
    }

    /// A flat `and`/`or` chain of many primitives.
    fn long_chain(&mut self) -> Node {
        let count = self.rng.range(8, 40);
        let mut n = self.leaf();
        for _ in 0..count {
            let op = if self.chance(50) { BoolOp::And } else { BoolOp::Or };
            let spelling = self.spelling(80);
            n = Node::Bool { op, spelling, lhs: Box::new(n), rhs: Box::new(self.leaf()) };
        }
        n
    }

    /// One primitive of any kind.
    pub fn leaf(&mut self) -> Node {
        if self.link_share > 0 && self.chance(self.link_share) {
            return self.link_leaf();
        }
        if self.aid_share > 0 && self.chance(self.aid_share) {
            return self.arcnet_leaf();
        }
        if self.atm_share > 0 && self.chance(self.atm_share) {
            return self.atm_leaf();
        }
        if self.pf_share > 0 && self.chance(self.pf_share) {
            return self.pf_leaf();
        }
        if self.mtp_share > 0 && self.chance(self.mtp_share) {
            return self.mtp_leaf();
        }
        match self
            .rng
            .weighted(&[11, 5, 8, 10, 4, 6, 3, 12, 4, 3, 4, 3, 2, 2, 1, 2, 18, 7, 1, 1, 1])
        {
            0 => Node::Prim(self.host()),
            1 => Node::Prim(self.ether_host()),
            2 => Node::Prim(self.net()),
            3 => Node::Prim(self.port(false)),
            4 => Node::Prim(self.port(true)),
            5 => Node::Prim(self.proto()),
            6 => Node::Prim(self.protochain()),
            7 => {
                let kw = self.pick_weighted_keyword();
                leaf(kw_kind(kw), kw.to_string(), None)
            }
            8 => self.broadcast_multicast(),
            9 => {
                let (word, kind) =
                    if self.chance(50) { ("less", "less") } else { ("greater", "greater") };
                let n = values::length(&mut self.rng);
                leaf(kind, format!("{word} {n}"), None)
            }
            10 => {
                let id = values::vlan_id(&mut self.rng);
                self.encap("vlan", id)
            }
            11 => {
                let id = values::mpls_label(&mut self.rng);
                self.encap("mpls", id)
            }
            12 => {
                let id = values::pppoe_session(&mut self.rng);
                self.encap("pppoes", id)
            }
            13 => {
                let id = values::vni(&mut self.rng);
                self.encap("geneve", id)
            }
            14 => leaf("pppoed", "pppoed".into(), None),
            15 => {
                if self.chance(30) {
                    leaf("llc", "llc".into(), None)
                } else {
                    let k = pick(&mut self.rng, values::LLC_KINDS, "i");
                    leaf("llc", format!("llc {k}"), Some("llc".into()))
                }
            }
            16 => self.relation(),
            17 => self.inherit(),
            18 => {
                let off = pick(&mut self.rng, &[0u32, 1, 12, 13, 14, 23, 47, 59, 60, 100], 0);
                let op = pick(&mut self.rng, &["&", "|", "<", ">", "="], "=");
                let v = pick(&mut self.rng, &[0u32, 1, 2, 6, 8, 17, 0x45, 255, 256], 0);
                // Its own coverage class: libpcap's code for these is wrong (see
                // testdata/pflang/libpcap-bugs.txt, `@byte-and-or`).
                let kind = if matches!(op, "&" | "|") { "byte &/|" } else { "byte" };
                leaf(kind, format!("byte {off} {op} {v}"), None)
            }
            19 => match self.rng.below(3) {
                0 => leaf("inbound/outbound", "inbound".into(), None),
                1 => leaf("inbound/outbound", "outbound".into(), None),
                _ => {
                    let n = pick(&mut self.rng, &[0u32, 1, 2, 0xffff_ffff], 1);
                    leaf("ifindex", format!("ifindex {n}"), None)
                }
            },
            _ => Node::Prim(self.decnet()),
        }
    }

    /// A keyword of particular link types: 802.11 frame type, subtype and direction tests,
    /// 802.11 address qualifiers, radio header accesses, LLC tests.
    pub fn link_leaf(&mut self) -> Node {
        const TYPES: &[&str] = &["data", "mgt", "management", "ctl", "control", "Data", "bogus"];
        const SUBTYPES: &[&str] = &[
            "beacon",
            "probe-req",
            "proberesp",
            "assoc-req",
            "auth",
            "deauthentication",
            "atim",
            "rts",
            "cts",
            "ack",
            "ps-poll",
            "cf-end",
            "data",
            "null",
            "qos-data",
            "qos",
            "qos-cf-poll",
            "data-cf-ack",
            "cf-ack-poll",
            "nosuch",
        ];
        const DIRS: &[&str] = &["nods", "tods", "fromds", "dstods", "FromDS", "sideways"];
        const WLAN_DIRS: &[&str] = &[
            "addr1",
            "addr2",
            "addr3",
            "addr4",
            "address1",
            "ra",
            "ta",
            "src",
            "dst",
            "src or dst",
            "src and dst",
        ];
        match self.rng.below(9) {
            0 => {
                let t = if self.chance(70) {
                    pick(&mut self.rng, TYPES, "data").to_string()
                } else {
                    pick(&mut self.rng, &[0u32, 4, 8, 12, 3, 0x10], 8).to_string()
                };
                leaf("wlan type", format!("type {t}"), None)
            }
            1 => {
                let t = pick(&mut self.rng, &["mgt", "ctl", "data", "0", "4", "8"], "data");
                let s = if self.chance(70) {
                    pick(&mut self.rng, SUBTYPES, "beacon").to_string()
                } else {
                    pick(&mut self.rng, &[0u32, 0x40, 0x80, 0xd0, 0xc0, 0x81], 0).to_string()
                };
                leaf("wlan type", format!("type {t} subtype {s}"), Some(format!("type {t}")))
            }
            2 => {
                let s = pick(&mut self.rng, SUBTYPES, "beacon");
                leaf("wlan subtype", format!("subtype {s}"), None)
            }
            3 => {
                let d = if self.chance(70) {
                    pick(&mut self.rng, DIRS, "nods").to_string()
                } else {
                    pick(&mut self.rng, &[0u32, 1, 2, 3, 4], 0).to_string()
                };
                leaf("wlan dir", format!("dir {d}"), None)
            }
            4 | 5 => {
                let word = pick(&mut self.rng, &["wlan", "ether", "link"], "wlan");
                let dir = pick(&mut self.rng, WLAN_DIRS, "addr1");
                let host = if self.chance(50) { " host" } else { "" };
                let mac = values::mac(&mut self.rng);
                leaf("wlan addr", format!("{word} {dir}{host} {mac}"), None)
            }
            6 => {
                let what = pick(&mut self.rng, &["broadcast", "multicast"], "broadcast");
                let word = pick(&mut self.rng, &["wlan ", "ether ", ""], "");
                leaf("wlan cast", format!("{word}{what}"), None)
            }
            7 => {
                let off = pick(&mut self.rng, &[0u32, 1, 2, 3, 4, 8, 16, 30, 200], 0);
                let size = pick(&mut self.rng, &["", ":2", ":4"], "");
                let v = pick(&mut self.rng, &[0u32, 1, 8, 0x20, 0x80], 0);
                leaf("radio", format!("radio[{off}{size}] & {v} != 0"), None)
            }
            _ => {
                let off = pick(&mut self.rng, &[0u32, 1, 4, 10, 16, 24, 26, 30], 0);
                let v = pick(&mut self.rng, &[0u32, 0x08, 0x88, 0x80, 0x01, 0xaa], 0);
                leaf("wlan link", format!("link[{off}] = {v}"), None)
            }
        }
    }

    /// An ARCnet address test: `$` and one or two hex digits, mostly under the `link` or
    /// `ether` qualifier with a direction, sometimes with qualifiers ARCnet addresses do
    /// not take.
    pub fn arcnet_leaf(&mut self) -> Node {
        const DIGITS: &[u8] = b"0123456789abcdefABCDEF";
        let mut aid = String::from("$");
        for _ in 0..1 + self.rng.below(2) {
            aid.push(char::from(DIGITS[self.rng.below_usize(DIGITS.len())]));
        }
        let word = pick(&mut self.rng, &["link ", "ether ", "link ", "ether ", "", "ip "], "link ");
        let dir = pick(
            &mut self.rng,
            &["", "src ", "dst ", "src or dst ", "src and dst ", "", "dst ", "addr1 ", "ta "],
            "",
        );
        let kind = pick(&mut self.rng, &["host ", "", "host ", "", "net ", "port "], "host ");
        let text = format!("{word}{dir}{kind}{aid}");
        let text = if text.starts_with('$') { format!("host {text}") } else { text };
        leaf("arcnet host", text, None)
    }

    /// An ATM test: `lane` (often, as it changes what follows), a `vpi`/`vci` comparison
    /// (a value, a relation or a parenthesised list) or an abbreviation.
    pub fn atm_leaf(&mut self) -> Node {
        const ABBREVS: &[&str] = &[
            "oam",
            "oamf4",
            "oamf4ec",
            "oamf4sc",
            "metac",
            "bcc",
            "sc",
            "ilmic",
            "connectmsg",
            "metaconnect",
        ];
        match self.rng.below(4) {
            0 => leaf("atm lane", "lane".into(), None),
            1 => {
                let field = if self.chance(50) { "vpi" } else { "vci" };
                let values: &[u32] =
                    if field == "vpi" { &[0, 1, 5, 15, 300] } else { &[1, 3, 5, 16, 40, 70000] };
                let v = pick(&mut self.rng, values, 0);
                let text = match self.rng.below(3) {
                    0 => format!("{field} {v}"),
                    1 => {
                        let op = pick(&mut self.rng, &[">", ">=", "<", "<=", "=", "!="], ">");
                        format!("{field} {op} {v}")
                    }
                    _ => {
                        let w = pick(&mut self.rng, values, 1);
                        format!("{field} ({v} or {w})")
                    }
                };
                leaf("atm field", text, None)
            }
            _ => {
                let a = pick(&mut self.rng, ABBREVS, "oam");
                leaf("atm abbrev", a.to_string(), None)
            }
        }
    }

    /// A pflog header test, names valid and not, interface and ruleset names of every
    /// length up to and past the 15 characters libpcap allows.
    pub fn pf_leaf(&mut self) -> Node {
        const NAMES: &[&str] = &[
            "em0",
            "pppoe0",
            "vio0",
            "eth0",
            "lo",
            "abcdefghijklmno",
            "abcdefghijklmnop",
            "main",
            "foo",
        ];
        const REASONS: &[&str] =
            &["match", "bad-offset", "short", "memory", "synproxy", "MATCH", "nosuch"];
        const ACTIONS: &[&str] = &[
            "pass",
            "accept",
            "drop",
            "block",
            "scrub",
            "nat",
            "rdr",
            "nordr",
            "synproxy-drop",
            "Block",
            "nosuch",
        ];
        match self.rng.below(6) {
            0 => {
                let word = pick(&mut self.rng, &["ifname", "on"], "ifname");
                let name = pick(&mut self.rng, NAMES, "em0");
                leaf("pf ifname", format!("{word} {name}"), None)
            }
            1 => {
                let word = pick(&mut self.rng, &["ruleset", "rset"], "ruleset");
                let name = pick(&mut self.rng, NAMES, "main");
                leaf("pf ruleset", format!("{word} {name}"), None)
            }
            2 => {
                let word = pick(&mut self.rng, &["rnr", "rulenum", "srnr", "subrulenum"], "rnr");
                let n = pick(&mut self.rng, &[0u32, 1, 3, 7, 4_294_967_295], 0);
                leaf("pf rule", format!("{word} {n}"), None)
            }
            3 => {
                let r = if self.chance(70) {
                    pick(&mut self.rng, REASONS, "match").to_string()
                } else {
                    pick(&mut self.rng, &[0u32, 1, 5, 14, 300], 0).to_string()
                };
                leaf("pf reason", format!("reason {r}"), None)
            }
            4 => {
                let a = pick(&mut self.rng, ACTIONS, "pass");
                leaf("pf action", format!("action {a}"), None)
            }
            _ => {
                let d = pick(&mut self.rng, &["inbound", "outbound"], "inbound");
                leaf("inbound/outbound", d.to_string(), None)
            }
        }
    }

    /// An SS7 test: an MTP2 frame kind, or an MTP3 field with a value (up to and past its
    /// maximum), a relation or a parenthesised list.
    pub fn mtp_leaf(&mut self) -> Node {
        const KINDS: &[&str] = &["fisu", "lssu", "msu", "hfisu", "hlssu", "hmsu"];
        const FIELDS: &[&str] = &["sio", "opc", "dpc", "sls", "hsio", "hopc", "hdpc", "hsls"];
        if self.chance(35) {
            let k = pick(&mut self.rng, KINDS, "msu");
            return leaf("mtp2", k.to_string(), None);
        }
        let f = pick(&mut self.rng, FIELDS, "sio");
        let values: &[u32] = match f.trim_start_matches('h') {
            "sio" => &[0, 3, 5, 0x83, 255, 256],
            "sls" => &[0, 1, 3, 15, 16],
            _ => &[0, 1, 5, 0x3fff, 0x2c4a, 16384],
        };
        let v = pick(&mut self.rng, values, 0);
        let text = match self.rng.below(3) {
            0 => format!("{f} {v}"),
            1 => {
                let op = pick(&mut self.rng, &[">", ">=", "<", "<=", "=", "!="], ">");
                format!("{f} {op} {v}")
            }
            _ => {
                let w = pick(&mut self.rng, values, 1);
                format!("{f} ({v} or {w})")
            }
        };
        leaf("mtp3", text, None)
    }

    fn pick_weighted_keyword(&mut self) -> &'static str {
        let i = self.rng.weighted(values::PROTO_KEYWORD_WEIGHTS);
        values::PROTO_KEYWORDS.get(i).copied().unwrap_or("ip")
    }

    /// An optional direction qualifier (usually none).
    fn dir(&mut self, none_percent: u64) -> Option<&'static str> {
        if self.chance(none_percent) {
            None
        } else {
            Some(weighted(&mut self.rng, values::DIRS, "src"))
        }
    }

    /// `host`, or nothing when a direction already makes it a host primitive.
    fn addr_word(&mut self, dir: Option<&'static str>, word: &'static str) -> Option<&'static str> {
        if dir.is_some() && self.chance(25) {
            None
        } else {
            Some(word)
        }
    }

    /// A protocol qualifier from `good` (weighted), or now and then any protocol word.
    fn proto_qual(&mut self, good: &[(Option<&'static str>, u32)]) -> Option<&'static str> {
        if self.chance(4) {
            return Some(self.pick_weighted_keyword());
        }
        weighted(&mut self.rng, good, None)
    }

    fn host(&mut self) -> Prim {
        let family = if self.chance(28) { IdFamily::Host6 } else { IdFamily::Host4 };
        let proto = if family == IdFamily::Host6 {
            self.proto_qual(&[(None, 70), (Some("ip6"), 25), (Some("ip"), 2), (Some("arp"), 1)])
        } else {
            self.proto_qual(&[
                (None, 60),
                (Some("ip"), 20),
                (Some("arp"), 8),
                (Some("rarp"), 5),
                (Some("ip6"), 2),
            ])
        };
        let dir = self.dir(55);
        let addr = self.addr_word(dir, "host");
        let id = self.id(family);
        Prim { kind: "host", proto, dir, addr, id }
    }

    fn ether_host(&mut self) -> Prim {
        let proto = Some(weighted(&mut self.rng, values::LINK_WORDS, "ether"));
        let dir = self.dir(50);
        let addr = self.addr_word(dir, "host");
        let id = if self.chance(3) {
            values::ipv4_host(&mut self.rng)
        } else {
            self.id(IdFamily::EtherHost)
        };
        Prim { kind: "ether host", proto, dir, addr, id }
    }

    fn net(&mut self) -> Prim {
        let family = if self.chance(25) { IdFamily::Net6 } else { IdFamily::Net4 };
        let proto = if family == IdFamily::Net6 {
            self.proto_qual(&[(None, 75), (Some("ip6"), 23), (Some("ip"), 2)])
        } else {
            self.proto_qual(&[
                (None, 65),
                (Some("ip"), 20),
                (Some("arp"), 7),
                (Some("rarp"), 5),
                (Some("ip6"), 3),
            ])
        };
        let dir = self.dir(60);
        let id = self.id(family);
        Prim { kind: "net", proto, dir, addr: Some("net"), id }
    }

    fn port(&mut self, range: bool) -> Prim {
        let proto = self.proto_qual(&[
            (None, 60),
            (Some("tcp"), 17),
            (Some("udp"), 15),
            (Some("sctp"), 5),
            (Some("ip"), 1),
            (Some("ip6"), 1),
            (Some("icmp"), 1),
        ]);
        let dir = self.dir(60);
        let (kind, word, family) = if range {
            ("portrange", "portrange", IdFamily::PortRange)
        } else {
            ("port", "port", IdFamily::Port)
        };
        let id = self.id(family);
        Prim { kind, proto, dir, addr: Some(word), id }
    }

    fn proto(&mut self) -> Prim {
        let (kind, proto, family) = match self.rng.weighted(&[30, 15, 25, 20, 5, 5]) {
            0 => ("ip proto", Some("ip"), IdFamily::IpProto),
            1 => ("ip6 proto", Some("ip6"), IdFamily::IpProto),
            2 => ("proto", None, IdFamily::IpProto),
            3 => {
                let word = weighted(&mut self.rng, values::LINK_WORDS, "ether");
                ("ether proto", Some(word), IdFamily::EtherProto)
            }
            4 => ("iso proto", Some("iso"), IdFamily::IsoProto),
            _ => {
                let kw = self.pick_weighted_keyword();
                ("proto", Some(kw), IdFamily::IpProto)
            }
        };
        let id = self.id(family);
        Prim { kind, proto, dir: None, addr: Some("proto"), id }
    }

    fn protochain(&mut self) -> Prim {
        let proto = self.proto_qual(&[(None, 45), (Some("ip"), 25), (Some("ip6"), 30)]);
        let id = self.id(IdFamily::ProtoChain);
        Prim { kind: "protochain", proto, dir: None, addr: Some("protochain"), id }
    }

    fn decnet(&mut self) -> Prim {
        let dir = self.dir(50);
        let addr = self.addr_word(dir, "host");
        let id = self.id(IdFamily::Decnet);
        Prim { kind: "decnet host", proto: Some("decnet"), dir, addr, id }
    }

    /// A fresh id of a family, as text.
    fn id(&mut self, family: IdFamily) -> String {
        let rng = &mut self.rng;
        match family {
            IdFamily::Host4 => match rng.weighted(&[88, 4, 4, 4]) {
                0 => values::ipv4_host(rng),
                1 => "localhost".to_string(),
                // Abbreviated dotted forms mean a network to libpcap.
                2 => pick(rng, &["10.0.0", "192.168.1", "10.0", "10"], "10").to_string(),
                _ => pick(rng, &["167772161", "0", "4294967295", "1"], "1").to_string(),
            },
            IdFamily::Host6 => values::ipv6_host(rng),
            IdFamily::EtherHost => values::mac(rng),
            IdFamily::Net4 => values::ipv4_net(rng),
            IdFamily::Net6 => values::ipv6_net(rng),
            IdFamily::Port => values::port(rng),
            IdFamily::PortRange => values::port_range(rng),
            IdFamily::IpProto => pick(rng, values::IP_PROTO_IDS, "6").to_string(),
            IdFamily::EtherProto => pick(rng, values::ETHER_PROTO_IDS, "0x800").to_string(),
            IdFamily::IsoProto => pick(rng, values::ISO_PROTO_IDS, "0x81").to_string(),
            IdFamily::ProtoChain => pick(rng, values::PROTOCHAIN_IDS, "6").to_string(),
            IdFamily::Decnet => {
                pick(rng, &["10.23", "1.2", "1.1023", "63.1023", "0.0", "64.1", "1.1024"], "1.2")
                    .to_string()
            }
        }
    }

    /// `head and id or not id ...` with ids that inherit the head's qualifiers.
    fn inherit(&mut self) -> Node {
        let (head, family) = match self.rng.weighted(&[30, 8, 12, 30, 8, 8, 4]) {
            0 => {
                let h = self.host();
                let fam = if h.id.contains(':') { IdFamily::Host6 } else { IdFamily::Host4 };
                (h, fam)
            }
            1 => (self.ether_host(), IdFamily::EtherHost),
            2 => {
                let n = self.net();
                let fam = if n.id.contains(':') { IdFamily::Net6 } else { IdFamily::Net4 };
                (n, fam)
            }
            3 => (self.port(false), IdFamily::Port),
            4 => (self.port(true), IdFamily::PortRange),
            5 => {
                let p = self.proto();
                let fam = match p.kind {
                    "ether proto" => IdFamily::EtherProto,
                    "iso proto" => IdFamily::IsoProto,
                    _ => IdFamily::IpProto,
                };
                (p, fam)
            }
            _ => (self.protochain(), IdFamily::ProtoChain),
        };
        // A grouped list may only start with a plain id.
        let count = self.rng.range(1, 3);
        let grouped = self.chance(25);
        let spelling = self.spelling(80);
        let rest = (0..count)
            .map(|_| {
                let op = if self.chance(60) { BoolOp::Or } else { BoolOp::And };
                // Occasionally an id of another family: `port 80 and 10.0.0.1` is an error.
                let fam = if self.chance(4) { IdFamily::Host4 } else { family };
                let negated = self.chance(15);
                InheritedId { op, spelling, negated, id: self.id(fam) }
            })
            .collect();
        Node::Inherit { head, rest, grouped }
    }

    fn broadcast_multicast(&mut self) -> Node {
        let word = if self.chance(45) { "broadcast" } else { "multicast" };
        let proto = weighted(
            &mut self.rng,
            &[
                (None, 30),
                (Some("ether"), 25),
                (Some("link"), 3),
                (Some("ip"), 20),
                (Some("ip6"), 15),
                (Some("arp"), 2),
                (Some("tcp"), 2),
            ],
            None,
        );
        match proto {
            Some(p) => leaf(word, format!("{p} {word}"), Some(word.to_string())),
            None => leaf(word, word.to_string(), None),
        }
    }

    fn encap(&mut self, word: &'static str, id: u32) -> Node {
        match self.rng.weighted(&[45, 45, 5, 5]) {
            0 => leaf(word, word.to_string(), None),
            1 => leaf(word, format!("{word} {id}"), Some(word.to_string())),
            2 => leaf(word, format!("{word} {id:#x}"), Some(word.to_string())),
            _ => leaf(word, format!("{word} ({id})"), Some(word.to_string())),
        }
    }

    // ---- arithmetic -------------------------------------------------------------------

    fn relation(&mut self) -> Node {
        let op = weighted(
            &mut self.rng,
            &[
                (RelOp::Eq, 25),
                (RelOp::Eq2, 5),
                (RelOp::Ne, 15),
                (RelOp::Gt, 15),
                (RelOp::Ge, 10),
                (RelOp::Lt, 15),
                (RelOp::Le, 10),
            ],
            RelOp::Eq,
        );
        if self.chance(35) {
            return self.idiom(op);
        }
        let lhs = self.arith(0);
        let rhs = if self.chance(65) { self.num() } else { self.arith(1) };
        Node::Relation { op, lhs, rhs }
    }

    /// Everyday relations, with the constants varied.
    fn idiom(&mut self, op: RelOp) -> Node {
        let n = |v: u32| Arith::Num(v, NumStyle::Decimal);
        let h = |v: u32| Arith::Num(v, NumStyle::Hex);
        let named = |name: &'static str| {
            let v = values::NAMED.iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v);
            Arith::Named(name, v)
        };
        let load = |proto: &'static str, offset: Arith, size: Option<u8>| Arith::Load {
            proto,
            offset: Box::new(offset),
            size,
        };
        let bin =
            |op: ArithOp, l: Arith, r: Arith| Arith::Bin { op, lhs: Box::new(l), rhs: Box::new(r) };
        let group = |a: Arith| Arith::Group(Box::new(a));
        let rng = &mut self.rng;
        let (lhs, rhs) = match rng.below(16) {
            0 => {
                let flags = ["tcp-syn", "tcp-ack", "tcp-fin", "tcp-rst", "tcp-push", "tcp-urg"];
                let a = pick(rng, &flags, "tcp-syn");
                let b = pick(rng, &flags, "tcp-ack");
                let mask = group(bin(ArithOp::Or, named(a), named(b)));
                let value = if rng.chance(50) { named(a) } else { n(0) };
                (bin(ArithOp::And, load("tcp", named("tcpflags"), None), mask), value)
            }
            1 => (bin(ArithOp::And, load("ip", n(6), Some(2)), h(0x1fff)), n(0)),
            2 => (bin(ArithOp::And, load("ether", n(0), None), n(1)), n(pick(rng, &[0, 1], 0))),
            3 => (bin(ArithOp::And, load("ip", n(0), None), h(0xf)), n(pick(rng, &[5, 6, 15], 5))),
            4 => {
                let t = pick(rng, &["icmp-echo", "icmp-echoreply", "icmp-unreach"], "icmp-echo");
                (load("icmp", named("icmptype"), None), named(t))
            }
            5 => {
                let t = pick(
                    rng,
                    &["icmp6-echo", "icmp6-neighborsolicit", "icmp6-routeradvert"],
                    "icmp6-echo",
                );
                (load("icmp6", named("icmp6type"), None), named(t))
            }
            6 => (load("ip6", n(6), None), n(pick(rng, &[6, 17, 58, 0, 44], 6))),
            7 => {
                // The HTTP GET idiom: the first four payload bytes after the TCP header.
                let doff = group(bin(
                    ArithOp::Shr,
                    group(bin(ArithOp::And, load("tcp", n(12), Some(1)), h(0xf0))),
                    n(2),
                ));
                (load("tcp", doff, Some(4)), h(pick(rng, &[0x4745_5420, 0x504f_5354], 0x4745_5420)))
            }
            8 => {
                let p = pick(rng, &["tcp", "udp"], "tcp");
                let at = pick(rng, &[0, 2], 0);
                (load(p, n(at), Some(2)), n(u32::from(pick(rng, &pools::PORTS, 80))))
            }
            9 => {
                // IP payload length minus both headers: non-zero when there is TCP data.
                let ihl = group(bin(
                    ArithOp::Shl,
                    group(bin(ArithOp::And, load("ip", n(0), None), h(0xf))),
                    n(2),
                ));
                let doff = group(bin(
                    ArithOp::Shr,
                    group(bin(ArithOp::And, load("tcp", n(12), None), h(0xf0))),
                    n(2),
                ));
                (bin(ArithOp::Sub, bin(ArithOp::Sub, load("ip", n(2), Some(2)), ihl), doff), n(0))
            }
            10 => {
                let at = pick(rng, &[12, 16], 12);
                let a = pick(rng, &pools::IPV4_HOSTS, [10, 0, 0, 1]);
                (load("ip", n(at), Some(4)), h(u32::from_be_bytes(a)))
            }
            11 => {
                let v = pick(rng, &[0x8100, 0x0800, 0x86dd, 0x88a8, 0x8847, 0x8864], 0x0800);
                (load("ether", n(12), Some(2)), h(v))
            }
            12 => {
                // A load relative to the end of the packet.
                let back = pick(rng, &[1, 2, 4, 0, 14], 1);
                let p = pick(rng, &["ether", "ip", "tcp", "udp"], "ether");
                (load(p, bin(ArithOp::Sub, Arith::Len(false), n(back)), None), n(0))
            }
            13 => (bin(ArithOp::Sub, Arith::Len(false), n(14)), n(values::length(rng))),
            14 => (
                load("ip", n(pick(rng, &[8, 9, 1], 9)), None),
                n(pick(rng, &[1, 6, 17, 64, 255], 6)),
            ),
            _ => (load("arp", n(6), Some(2)), n(pick(rng, &[1, 2, 3, 4], 1))),
        };
        Node::Relation { op, lhs, rhs }
    }

    fn arith(&mut self, depth: u32) -> Arith {
        let atom_percent = [45u64, 60, 75, 90];
        let p = atom_percent.get(depth as usize).copied().unwrap_or(100);
        if self.chance(p) {
            return self.atom(depth);
        }
        match self.rng.weighted(&[70, 8, 7, 15]) {
            0 => self.binary(depth),
            1 => Arith::Neg(Box::new(self.arith(depth + 1))),
            2 => Arith::Group(Box::new(self.arith(depth + 1))),
            _ => self.load(depth, true),
        }
    }

    fn atom(&mut self, depth: u32) -> Arith {
        match self.rng.weighted(&[30, 8, 12, 50]) {
            0 => self.num(),
            1 => self.named(),
            2 => Arith::Len(self.chance(10)),
            _ => self.load(depth, false),
        }
    }

    fn named(&mut self) -> Arith {
        let (name, v) = pick(&mut self.rng, values::NAMED, ("tcpflags", 13));
        Arith::Named(name, v)
    }

    /// A constant: boundaries, small numbers, values found in packets, anything.
    fn num(&mut self) -> Arith {
        let rng = &mut self.rng;
        let v = match rng.weighted(&[35, 25, 25, 15]) {
            0 => pick(rng, values::BOUNDARY, 0),
            1 => u32::try_from(rng.below(64)).unwrap_or(0),
            2 => pick(
                rng,
                &[
                    80,
                    443,
                    53,
                    22,
                    6,
                    17,
                    1,
                    58,
                    0x45,
                    0x60,
                    0x0800,
                    0x86dd,
                    0x8100,
                    0x0a00_0001,
                    0xc0a8_0101,
                    0x2001_0db8,
                    0x02,
                    0x12,
                    0x10,
                    0x18,
                    64,
                    255,
                ],
                0,
            ),
            _ => rng.u32(),
        };
        let style = weighted(
            rng,
            &[(NumStyle::Decimal, 70), (NumStyle::Hex, 25), (NumStyle::Octal, 5)],
            NumStyle::Decimal,
        );
        Arith::Num(v, style)
    }

    fn binary(&mut self, depth: u32) -> Arith {
        let op = weighted(
            &mut self.rng,
            &[
                (ArithOp::Add, 12),
                (ArithOp::Sub, 10),
                (ArithOp::Mul, 6),
                (ArithOp::Div, 8),
                (ArithOp::Mod, 6),
                (ArithOp::And, 16),
                (ArithOp::Or, 8),
                (ArithOp::Xor, 5),
                (ArithOp::Shl, 8),
                (ArithOp::Shr, 10),
            ],
            ArithOp::Add,
        );
        let lhs = self.arith(depth + 1);
        let rhs = match op {
            ArithOp::Div | ArithOp::Mod => match self.rng.weighted(&[25, 45, 30]) {
                0 => Arith::Num(0, NumStyle::Decimal),
                1 => Arith::Num(
                    pick(&mut self.rng, &[1, 2, 3, 4, 7, 8, 16, 255, 256], 2),
                    NumStyle::Decimal,
                ),
                _ => self.arith(depth + 1),
            },
            ArithOp::Shl | ArithOp::Shr if self.chance(70) => Arith::Num(
                pick(&mut self.rng, &[0, 1, 2, 4, 8, 16, 24, 30, 31, 32, 33, 63], 2),
                NumStyle::Decimal,
            ),
            _ => self.arith(depth + 1),
        };
        Arith::Bin { op, lhs: Box::new(lhs), rhs: Box::new(rhs) }
    }

    /// `proto[offset]` / `proto[offset:size]`; `variable` makes the offset an expression.
    fn load(&mut self, depth: u32, variable: bool) -> Arith {
        let proto = weighted(&mut self.rng, values::LOAD_PROTOS, "ip");
        let offset = if variable {
            self.arith(depth + 1)
        } else {
            match self.rng.weighted(&[60, 12, 16, 12]) {
                0 => Arith::Num(u32::try_from(self.rng.below(48)).unwrap_or(0), NumStyle::Decimal),
                1 => {
                    let name = pick(
                        &mut self.rng,
                        &["tcpflags", "icmptype", "icmpcode", "icmp6type", "icmp6code"],
                        "tcpflags",
                    );
                    let v = values::NAMED.iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v);
                    Arith::Named(name, v)
                }
                2 => Arith::Num(pick(&mut self.rng, values::OFFSETS_FAR, 60), NumStyle::Decimal),
                _ => self.arith(depth + 1),
            }
        };
        let size = weighted(
            &mut self.rng,
            &[(None, 25), (Some(1), 20), (Some(2), 30), (Some(4), 24), (Some(3), 1)],
            None,
        );
        Arith::Load { proto, offset: Box::new(offset), size }
    }
}

fn leaf(kind: &'static str, text: String, shorter: Option<String>) -> Node {
    Node::Leaf(Leaf { kind, text, shorter })
}

/// Coverage class of a protocol keyword standing alone.
fn kw_kind(kw: &str) -> &'static str {
    match kw {
        "ip" => "kw ip",
        "ip6" => "kw ip6",
        "arp" | "rarp" => "kw arp/rarp",
        "tcp" => "kw tcp",
        "udp" => "kw udp",
        "sctp" => "kw sctp",
        "icmp" => "kw icmp",
        "icmp6" => "kw icmp6",
        "igmp" | "igrp" | "pim" | "vrrp" | "carp" | "ah" | "esp" => "kw other ip proto",
        "atalk" | "aarp" | "decnet" | "lat" | "sca" | "moprc" | "mopdl" | "ipx" | "netbeui"
        | "stp" => "kw other link proto",
        "iso" | "esis" | "es-is" | "isis" | "is-is" | "clnp" | "l1" | "l2" | "iih" | "lsp"
        | "snp" | "csnp" | "psnp" => "kw iso/isis",
        _ => "kw invalid alone",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_varied() {
        let a: Vec<String> = {
            let mut g = Generator::new(42);
            (0..200).map(|_| g.expr().render()).collect()
        };
        let b: Vec<String> = {
            let mut g = Generator::new(42);
            (0..200).map(|_| g.expr().render()).collect()
        };
        assert_eq!(a, b);
        let distinct: std::collections::HashSet<&String> = a.iter().collect();
        assert!(distinct.len() > 180, "only {} distinct expressions", distinct.len());
    }

    #[test]
    fn every_leaf_kind_appears() {
        let mut g = Generator::new(7);
        let mut kinds = std::collections::BTreeSet::new();
        for _ in 0..5000 {
            let mut k = Vec::new();
            g.expr().kinds(&mut k);
            kinds.extend(k);
        }
        for want in [
            "host",
            "ether host",
            "net",
            "port",
            "portrange",
            "ip proto",
            "ether proto",
            "protochain",
            "kw tcp",
            "broadcast",
            "multicast",
            "less",
            "greater",
            "vlan",
            "mpls",
            "pppoes",
            "geneve",
            "pppoed",
            "llc",
            "relation",
            "inherited qualifiers",
            "byte",
            "byte &/|",
            "decnet host",
            "tcp[]",
            "arith /",
            "arith %",
            "arith <<",
            "unary -",
            "named constant",
        ] {
            assert!(kinds.contains(want), "{want} never generated; got {kinds:?}");
        }
    }
}
