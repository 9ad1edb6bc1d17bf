//! Name resolution tables for the names the tree keeps: services (ports), IP protocols,
//! Ethernet types, hosts and Ethernet host names.
//!
//! Deterministic by design (DESIGN.md): built-in tables first-class, then the system's
//! `/etc/services`, `/etc/protocols`, `/etc/hosts` and `/etc/ethers` when present. Never DNS.
//! The parser never calls this; lowering does, so that parsing stays pure.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

use weir_packet::{ethertype, ipproto, llcsap};

/// Transport protocol of a service entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    Tcp,
    Udp,
    Sctp,
}

/// Built-in services, so resolution does not depend on the machine for common names. Each
/// lists the transports the services(5) file of record (netbase / IANA) gives it: which ones
/// a name has decides what `port NAME` tests (TCP only, UDP only, or every transport).
const BUILTIN_SERVICES: &[(&str, u16, &[Transport])] = &[
    ("ftp-data", 20, TCP),
    ("ftp", 21, TCP),
    ("ssh", 22, TCP),
    ("telnet", 23, TCP),
    ("smtp", 25, TCP),
    ("domain", 53, TCP_UDP),
    ("bootps", 67, UDP),
    ("bootpc", 68, UDP),
    ("tftp", 69, UDP),
    ("http", 80, TCP),
    ("www", 80, TCP),
    ("kerberos", 88, TCP_UDP),
    ("pop3", 110, TCP),
    ("sunrpc", 111, TCP_UDP),
    ("ntp", 123, UDP),
    ("netbios-ns", 137, UDP),
    ("netbios-dgm", 138, UDP),
    ("netbios-ssn", 139, TCP),
    ("imap", 143, TCP),
    ("snmp", 161, TCP_UDP),
    ("snmp-trap", 162, TCP_UDP),
    ("bgp", 179, TCP),
    ("ldap", 389, TCP_UDP),
    ("https", 443, TCP_UDP),
    ("microsoft-ds", 445, TCP),
    ("isakmp", 500, UDP),
    ("syslog", 514, UDP),
    ("submission", 587, TCP),
    ("ldaps", 636, TCP_UDP),
    ("imaps", 993, TCP),
    ("pop3s", 995, TCP),
    ("openvpn", 1194, TCP_UDP),
    ("mysql", 3306, TCP),
    ("postgresql", 5432, TCP),
];

const TCP: &[Transport] = &[Transport::Tcp];
const UDP: &[Transport] = &[Transport::Udp];
const TCP_UDP: &[Transport] = &[Transport::Tcp, Transport::Udp];

/// Built-in IP protocol numbers.
const BUILTIN_PROTOCOLS: &[(&str, u8)] = &[
    // protocols(5): "ip" is the pseudo protocol number 0.
    ("ip", 0),
    ("icmp", ipproto::ICMP),
    ("igmp", ipproto::IGMP),
    ("ipencap", ipproto::IPIP),
    ("tcp", ipproto::TCP),
    ("egp", ipproto::EGP),
    ("igrp", ipproto::IGRP),
    ("udp", ipproto::UDP),
    ("ipv6", ipproto::IPV6),
    ("rsvp", ipproto::RSVP),
    ("gre", ipproto::GRE),
    ("esp", ipproto::ESP),
    ("ah", ipproto::AH),
    ("icmp6", ipproto::ICMPV6),
    ("ipv6-icmp", ipproto::ICMPV6),
    ("ospf", ipproto::OSPF),
    ("pim", ipproto::PIM),
    ("vrrp", ipproto::VRRP),
    ("l2tp", ipproto::L2TP),
    ("sctp", ipproto::SCTP),
    ("udplite", ipproto::UDPLITE),
];

/// Ethernet type names accepted after `ether proto` (as the grammar of record knows them).
const ETHER_TYPES: &[(&str, u16)] = &[
    ("ip", ethertype::IP),
    ("ip6", ethertype::IPV6),
    ("arp", ethertype::ARP),
    ("rarp", ethertype::REVARP),
    ("atalk", ethertype::ATALK),
    ("aarp", ethertype::AARP),
    ("decnet", ethertype::DN),
    ("sca", ethertype::SCA),
    ("lat", ethertype::LAT),
    ("mopdl", ethertype::MOPDL),
    ("moprc", ethertype::MOPRC),
    ("loopback", ethertype::LOOPBACK),
];

/// 802.2 LLC SAP names `ether proto` accepts after the Ethernet type names.
const LLC_SAPS: &[(&str, u8)] = &[
    ("iso", llcsap::ISONS),
    ("stp", llcsap::STP),
    ("ipx", llcsap::IPX),
    ("netbeui", llcsap::NETBEUI),
];

/// Resolution tables. [`NameDb::builtin`] for reproducible results, [`NameDb::system`] to
/// add the machine's files on top.
#[derive(Debug, Clone, Default)]
pub struct NameDb {
    services: HashMap<String, Vec<(u16, Transport)>>,
    protocols: HashMap<String, u8>,
    hosts: HashMap<String, Vec<IpAddr>>,
    ethers: HashMap<String, [u8; 6]>,
    /// Network numbers as networks(5) writes them, not left-justified (`127` or `127.0.0.0`).
    networks: HashMap<String, u32>,
}

impl NameDb {
    /// Only the built-in tables.
    pub fn builtin() -> NameDb {
        let mut db = NameDb::default();
        for (name, port, transports) in BUILTIN_SERVICES {
            for t in *transports {
                db.add_service(name, *port, *t);
            }
        }
        for (name, n) in BUILTIN_PROTOCOLS {
            db.protocols.insert((*name).to_string(), *n);
        }
        db.hosts.insert("localhost".to_string(), vec![IpAddr::from([127, 0, 0, 1])]);
        db
    }

    /// Built-in tables plus `/etc/services`, `/etc/protocols`, `/etc/hosts`, `/etc/ethers`,
    /// `/etc/networks` (missing or unreadable files are skipped: they only add names).
    pub fn system() -> NameDb {
        let mut db = NameDb::builtin();
        db.load_system_files();
        db
    }

    /// Only the machine's files, no built-in names: what the C library's resolver, and so
    /// libpcap, sees (the built-in tables know names some systems' files lack, such as
    /// `igrp`). For comparing with libpcap.
    pub fn system_files_only() -> NameDb {
        let mut db = NameDb::default();
        db.load_system_files();
        db
    }

    /// Adds the machine's files; missing or unreadable ones are skipped.
    fn load_system_files(&mut self) {
        let read = |p: &str| std::fs::read_to_string(Path::new(p)).unwrap_or_default();
        self.load_services(&read("/etc/services"));
        self.load_protocols(&read("/etc/protocols"));
        self.load_hosts(&read("/etc/hosts"));
        self.load_ethers(&read("/etc/ethers"));
        self.load_networks(&read("/etc/networks"));
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

    /// Adds entries in networks(5) format: `name number [aliases...]`, the number in dotted
    /// notation of 1 to 4 parts, each part a byte (`loopback 127`, `link-local 169.254.0.0`).
    pub fn load_networks(&mut self, text: &str) {
        for line in lines(text) {
            let mut w = line.split_whitespace();
            let (Some(name), Some(number)) = (w.next(), w.next()) else {
                continue;
            };
            let Some((value, parts)) = ipv4_parts(number) else { continue };
            // networks(5) numbers are right-justified: `10.1` is 0x0a01, not 10.1.0.0.
            let value = value.checked_shr(8 * u32::from(4 - parts)).unwrap_or(0);
            self.networks.entry(name.to_string()).or_insert(value);
            for alias in w {
                self.networks.entry(alias.to_string()).or_insert(value);
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

    /// The number of a network name, right-justified as networks(5) writes it (`loopback`
    /// is 127 when the file says `127`, 0x7f000000 when it says `127.0.0.0`).
    pub fn network(&self, name: &str) -> Option<u32> {
        self.networks.get(name).copied()
    }
}

/// Ethernet type for a name after `ether proto` (`ip`, `arp`, ...).
pub fn ether_type(name: &str) -> Option<u16> {
    ETHER_TYPES.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// 802.2 LLC SAP for a name after `ether proto` (`iso`, `stp`, `ipx`, `netbeui`), tried
/// when [`ether_type`] does not know the name.
pub fn llc_sap(name: &str) -> Option<u8> {
    LLC_SAPS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// A dotted IPv4 id as the grammar of record reads it: 1 to 4 decimal parts of 0..=255.
/// Returns the value with the given parts in the high bytes and the number of parts
/// (`10.1` is `10.1.0.0` with 2 parts, which lowering turns into a /16 network).
pub fn ipv4_parts(text: &str) -> Option<(u32, u8)> {
    // One pass over the bytes, a '.' closing each part (the last one too): splitting the
    // text and parsing each part was most of a `host` primitive's own lowering (issue 13).
    // `part` is the value of the part being read, `None` until it has a digit.
    let (mut value, mut count, mut part) = (0u32, 0u8, None::<u32>);
    for b in text.bytes().chain([b'.']) {
        if b == b'.' {
            if count == 4 {
                return None;
            }
            value = (value << 8) | part.take()?;
            count += 1;
        } else if b.is_ascii_digit() {
            let v = part.unwrap_or(0) * 10 + u32::from(b - b'0');
            if v > 255 {
                return None;
            }
            part = Some(v);
        } else {
            return None;
        }
    }
    let shift = 8 * u32::from(4 - count);
    Some((value.checked_shl(shift).unwrap_or(0), count))
}

fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reading of record, written plainly: split at '.', each part 1 or more ASCII
    /// digits parsed as a number of at most 255, at most 4 parts.
    fn ipv4_parts_by_splitting(text: &str) -> Option<(u32, u8)> {
        let parts: Vec<&str> = text.split('.').collect();
        if parts.len() > 4 {
            return None;
        }
        let mut value = 0u32;
        for part in &parts {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let v: u32 = part.parse().ok()?;
            if v > 255 {
                return None;
            }
            value = (value << 8) | v;
        }
        let count = parts.len() as u8;
        Some((value.checked_shl(8 * u32::from(4 - count)).unwrap_or(0), count))
    }

    /// [`ipv4_parts`] against [`ipv4_parts_by_splitting`] on every string of up to 6 bytes
    /// over digits, '.', a letter and a sign, of up to 9 over digits and '.', and on long
    /// and non-ASCII ones; both answers
    /// must be seen (valid and refused ids), at every part count.
    #[test]
    fn ipv4_parts_reads_as_splitting_does() {
        let mut texts: Vec<String> = vec![String::new()];
        // Every byte class up to 6 bytes, then digits and dots up to 9 (four parts).
        for (alphabet, longest) in [(&b"01259.x+"[..], 6), (&b"029."[..], 9)] {
            let mut level = vec![String::new()];
            for _ in 0..longest {
                level = level
                    .iter()
                    .flat_map(|t| alphabet.iter().map(move |&b| format!("{t}{}", b as char)))
                    .collect();
                texts.extend(level.iter().cloned());
            }
        }
        for t in [
            "10.0.0.1",
            "255.255.255.255",
            "256.0.0.1",
            "1.2.3.4.5",
            "1.2.3.4.",
            "0000000000001.2",
            "99999999999",
            "4294967296.1",
            "10.1",
            "10.0.0.٣",
            "١.2",
            "1. 2",
            " 1.2",
        ] {
            texts.push(t.to_string());
        }
        let mut counts = [0usize; 5];
        for t in &texts {
            let got = ipv4_parts(t);
            assert_eq!(got, ipv4_parts_by_splitting(t), "{t:?}");
            counts[got.map_or(0, |(_, n)| usize::from(n))] += 1;
        }
        assert!(counts.iter().all(|&n| n > 10), "refused, then 1..=4 parts: {counts:?}");
        assert_eq!(ipv4_parts("10.1.2.3"), Some((0x0a01_0203, 4)));
        assert_eq!(ipv4_parts("10.1"), Some((0x0a01_0000, 2)));
    }
}
