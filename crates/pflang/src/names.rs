//! Name resolution tables for the names the tree keeps: services (ports), IP protocols,
//! Ethernet types, hosts and Ethernet host names.
//!
//! Deterministic by design (DESIGN.md): built-in tables first-class, then the system's
//! `/etc/services`, `/etc/protocols`, `/etc/hosts` and `/etc/ethers` when present. Never DNS.
//! The parser never calls this; lowering does, so that parsing stays pure.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

/// Transport protocol of a service entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    Tcp,
    Udp,
    Sctp,
}

/// Built-in services, so resolution does not depend on the machine for common names.
const BUILTIN_SERVICES: &[(&str, u16)] = &[
    ("ftp-data", 20),
    ("ftp", 21),
    ("ssh", 22),
    ("telnet", 23),
    ("smtp", 25),
    ("domain", 53),
    ("bootps", 67),
    ("bootpc", 68),
    ("tftp", 69),
    ("http", 80),
    ("www", 80),
    ("kerberos", 88),
    ("pop3", 110),
    ("sunrpc", 111),
    ("ntp", 123),
    ("netbios-ns", 137),
    ("netbios-dgm", 138),
    ("netbios-ssn", 139),
    ("imap", 143),
    ("snmp", 161),
    ("snmp-trap", 162),
    ("bgp", 179),
    ("ldap", 389),
    ("https", 443),
    ("microsoft-ds", 445),
    ("isakmp", 500),
    ("syslog", 514),
    ("submission", 587),
    ("ldaps", 636),
    ("imaps", 993),
    ("pop3s", 995),
    ("openvpn", 1194),
    ("mysql", 3306),
    ("postgresql", 5432),
];

/// Built-in IP protocol numbers.
const BUILTIN_PROTOCOLS: &[(&str, u8)] = &[
    ("ip", 0),
    ("icmp", 1),
    ("igmp", 2),
    ("ipencap", 4),
    ("tcp", 6),
    ("egp", 8),
    ("igrp", 9),
    ("udp", 17),
    ("ipv6", 41),
    ("rsvp", 46),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("icmp6", 58),
    ("ipv6-icmp", 58),
    ("ospf", 89),
    ("pim", 103),
    ("vrrp", 112),
    ("l2tp", 115),
    ("sctp", 132),
    ("udplite", 136),
];

/// Ethernet type names accepted after `ether proto` (as the grammar of record knows them).
const ETHER_TYPES: &[(&str, u16)] = &[
    ("ip", 0x0800),
    ("ip6", 0x86dd),
    ("arp", 0x0806),
    ("rarp", 0x8035),
    ("atalk", 0x809b),
    ("aarp", 0x80f3),
    ("decnet", 0x6003),
    ("sca", 0x6007),
    ("lat", 0x6004),
    ("mopdl", 0x6001),
    ("moprc", 0x6002),
    ("loopback", 0x9000),
    ("vlan", 0x8100),
    ("mpls", 0x8847),
];

/// Resolution tables. [`NameDb::builtin`] for reproducible results, [`NameDb::system`] to
/// add the machine's files on top.
#[derive(Debug, Clone, Default)]
pub struct NameDb {
    services: HashMap<String, Vec<(u16, Transport)>>,
    protocols: HashMap<String, u8>,
    hosts: HashMap<String, Vec<IpAddr>>,
    ethers: HashMap<String, [u8; 6]>,
}

impl NameDb {
    /// Only the built-in tables.
    pub fn builtin() -> NameDb {
        let mut db = NameDb::default();
        for (name, port) in BUILTIN_SERVICES {
            for t in [Transport::Tcp, Transport::Udp] {
                db.add_service(name, *port, t);
            }
        }
        for (name, n) in BUILTIN_PROTOCOLS {
            db.protocols.insert((*name).to_string(), *n);
        }
        db.hosts.insert("localhost".to_string(), vec![IpAddr::from([127, 0, 0, 1])]);
        db
    }

    /// Built-in tables plus `/etc/services`, `/etc/protocols`, `/etc/hosts`, `/etc/ethers`
    /// (missing or unreadable files are skipped: they only add names).
    pub fn system() -> NameDb {
        let mut db = NameDb::builtin();
        let read = |p: &str| std::fs::read_to_string(Path::new(p)).unwrap_or_default();
        db.load_services(&read("/etc/services"));
        db.load_protocols(&read("/etc/protocols"));
        db.load_hosts(&read("/etc/hosts"));
        db.load_ethers(&read("/etc/ethers"));
        db
    }

    fn add_service(&mut self, name: &str, port: u16, t: Transport) {
        let e = self.services.entry(name.to_string()).or_default();
        if !e.contains(&(port, t)) {
            e.push((port, t));
        }
    }

    /// Adds entries in services(5) format: `name port/proto [aliases...]`.
    pub fn load_services(&mut self, text: &str) {
        for line in lines(text) {
            let mut w = line.split_whitespace();
            let (Some(name), Some(pp)) = (w.next(), w.next()) else {
                continue;
            };
            let Some((port, proto)) = pp.split_once('/') else {
                continue;
            };
            let Ok(port) = port.parse::<u16>() else {
                continue;
            };
            let t = match proto {
                "tcp" => Transport::Tcp,
                "udp" => Transport::Udp,
                "sctp" => Transport::Sctp,
                _ => continue,
            };
            self.add_service(name, port, t);
            for alias in w {
                self.add_service(alias, port, t);
            }
        }
    }

    /// Adds entries in protocols(5) format: `name number [aliases...]`.
    pub fn load_protocols(&mut self, text: &str) {
        for line in lines(text) {
            let mut w = line.split_whitespace();
            let (Some(name), Some(num)) = (w.next(), w.next()) else {
                continue;
            };
            let Ok(num) = num.parse::<u8>() else { continue };
            self.protocols.entry(name.to_string()).or_insert(num);
            for alias in w {
                self.protocols.entry(alias.to_string()).or_insert(num);
            }
        }
    }

    /// Adds entries in hosts(5) format: `address name [aliases...]`.
    pub fn load_hosts(&mut self, text: &str) {
        for line in lines(text) {
            let mut w = line.split_whitespace();
            let Some(Ok(addr)) = w.next().map(str::parse::<IpAddr>) else {
                continue;
            };
            for name in w {
                let e = self.hosts.entry(name.to_string()).or_default();
                if !e.contains(&addr) {
                    e.push(addr);
                }
            }
        }
    }

    /// Adds entries in ethers(5) format: `aa:bb:cc:dd:ee:ff name`.
    pub fn load_ethers(&mut self, text: &str) {
        for line in lines(text) {
            let mut w = line.split_whitespace();
            let (Some(mac), Some(name)) = (w.next(), w.next()) else {
                continue;
            };
            let bytes: Option<Vec<u8>> =
                mac.split(':').map(|g| u8::from_str_radix(g, 16).ok()).collect();
            if let Some(Ok(m)) = bytes.map(<[u8; 6]>::try_from) {
                self.ethers.entry(name.to_string()).or_insert(m);
            }
        }
    }

    /// Ports a service name stands for, with their transports.
    pub fn service(&self, name: &str) -> &[(u16, Transport)] {
        self.services.get(name).map_or(&[], Vec::as_slice)
    }

    /// A port for `name` on one transport.
    pub fn port(&self, name: &str, t: Transport) -> Option<u16> {
        self.service(name).iter().find(|(_, tt)| *tt == t).map(|(p, _)| *p)
    }

    /// IP protocol number for a name (`tcp`, `gre`, ...).
    pub fn protocol(&self, name: &str) -> Option<u8> {
        self.protocols.get(name).copied()
    }

    /// Addresses of a host name from the hosts table (never DNS).
    pub fn host(&self, name: &str) -> &[IpAddr] {
        self.hosts.get(name).map_or(&[], Vec::as_slice)
    }

    /// Ethernet address of a host name from the ethers table.
    pub fn ether_host(&self, name: &str) -> Option<[u8; 6]> {
        self.ethers.get(name).copied()
    }
}

/// Ethernet type for a name after `ether proto` (`ip`, `arp`, ...).
pub fn ether_type(name: &str) -> Option<u16> {
    ETHER_TYPES.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// A dotted IPv4 id as the grammar of record reads it: 1 to 4 decimal parts of 0..=255.
/// Returns the value with the given parts in the high bytes and the number of parts
/// (`10.1` is `10.1.0.0` with 2 parts, which lowering turns into a /16 network).
pub fn ipv4_parts(text: &str) -> Option<(u32, u8)> {
    let mut value: u32 = 0;
    let mut count: u8 = 0;
    for part in text.split('.') {
        if count == 4 || part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let v: u32 = part.parse().ok()?;
        if v > 255 {
            return None;
        }
        value = (value << 8) | v;
        count += 1;
    }
    let shift = 8 * u32::from(4 - count);
    Some((value.checked_shl(shift).unwrap_or(0), count))
}

fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty())
}
