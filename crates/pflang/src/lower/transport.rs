//! Ports and port ranges over TCP, UDP and SCTP, on IPv4 and IPv6 (`port 80`, `tcp src port
//! http`, `portrange 1-1024`, `udp portrange domain-ntp`).
//!
//! A port test is an IPv6 test or an IPv4 test, in that order. The IPv4 one only reads ports
//! from first fragments (fragment offset 0); the IPv6 one reads them right after the fixed
//! header, so a port behind an extension header is not seen (libpcap's behaviour, kept).
//! Service names resolve as libpcap resolves them: the TCP entry of a name wins, and a name
//! whose TCP and UDP entries agree stands for every transport, SCTP included.

use weir_filter::{CmpOp, Expr, Pred, Size, ValueSet};

use super::link::{ETHERTYPE_IP, ETHERTYPE_IPV6};
use super::net::{dir_not_valid, Site};
use super::net_proto::{IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};
use super::{junction, CompileError, Layer, Lowerer};
use crate::ast::{Dir, Proto, Qualifiers};
use crate::names::{NameDb, Transport};

/// The transport a port test is about: one protocol number, or any of TCP, UDP, SCTP.
type PortProto = Option<u32>;

/// The transports a port test without a protocol qualifier is about, in libpcap's order
/// (its per-transport trees, kept in long lists; a merged tree's set holds them sorted).
const ANY_TRANSPORT: [u32; 3] = [IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP];

/// Port numbers before they are checked: service lookups and the `%d-%d` reading of a range
/// can give anything an `int` holds.
type RawPort = i64;

/// The largest port number a filter may name (libpcap refuses the rest).
pub(super) const MAX_PORT: u32 = 65535;

impl Lowerer<'_> {
    /// `port N` / `portrange N` with a number.
    pub(super) fn port_number(
        &mut self,
        n: u32,
        range: bool,
        q: Qualifiers,
        site: Site,
    ) -> Result<Pred, CompileError> {
        let proto = qualified_transport(q.proto, range, site)?;
        if n > MAX_PORT {
            return Err(site.id(format!("illegal port number {n} > {MAX_PORT}")));
        }
        self.ports(n, n, proto, q.dir, range, site)
    }

    /// `port NAME`: a service name.
    pub(super) fn port_name(
        &mut self,
        name: &str,
        q: Qualifiers,
        site: Site,
    ) -> Result<Pred, CompileError> {
        let wanted = qualified_transport(q.proto, false, site)?;
        let (port, found) = service_port(self.names, name)
            .ok_or_else(|| site.id(format!("unknown port '{name}'")))?;
        let proto = reconcile(wanted, found, || format!("port '{name}'"), site)?;
        let port = checked_port(port, site)?;
        self.ports(port, port, proto, q.dir, false, site)
    }

    /// `portrange NAME`: `N-M`, or two service names (or numbers) joined by `-`.
    pub(super) fn portrange_name(
        &mut self,
        name: &str,
        q: Qualifiers,
        site: Site,
    ) -> Result<Pred, CompileError> {
        let wanted = qualified_transport(q.proto, true, site)?;
        let (first, last, found) = port_range(self.names, name)
            .ok_or_else(|| site.id(format!("unknown port in range '{name}'")))?;
        let proto = reconcile(wanted, found, || format!("port in range '{name}'"), site)?;
        let first = checked_port(first, site)?;
        let last = checked_port(last, site)?;
        self.ports(first, last, proto, q.dir, true, site)
    }

    /// The IPv6 test, then the IPv4 one. libpcap builds the IPv4 one first, so its errors
    /// are the ones reported; they are the same for both.
    fn ports(
        &mut self,
        first: u32,
        last: u32,
        proto: PortProto,
        dir: Option<Dir>,
        range: bool,
        site: Site,
    ) -> Result<Pred, CompileError> {
        let (lo, hi) = if first > last { (last, first) } else { (first, last) };
        let v4 = self.ports_for(false, lo, hi, proto, dir, range, site)?;
        let v6 = self.ports_for(true, lo, hi, proto, dir, range, site)?;
        Ok(junction(vec![v6, v4], false))
    }

    /// The link test for one IP version, then the transport test and the ports. For one
    /// transport that is libpcap's tree. For any of SCTP, TCP, UDP, libpcap's tree repeats
    /// the header tests and the ports once per transport (`or` of `proto == p and X`, in
    /// its order SCTP, TCP, UDP), and the optimizer's first act is to merge those copies
    /// back into `proto in {SCTP, TCP, UDP} and X`; that merged tree is built here at once,
    /// rather than the copies (the IPv4 header length expression six times a port) that the
    /// optimizer merged and freed (issue 13). The optimizer's first `simplify` gives the same
    /// tree for either, so its output is the same (tested below). Inside a long list
    /// ([`Lowerer::libpcap_trees`]) libpcap's tree is kept.
    #[allow(clippy::too_many_arguments)]
    fn ports_for(
        &mut self,
        v6: bool,
        lo: u32,
        hi: u32,
        proto: PortProto,
        dir: Option<Dir>,
        range: bool,
        site: Site,
    ) -> Result<Pred, CompileError> {
        let link = self.link_proto(if v6 { ETHERTYPE_IPV6 } else { ETHERTYPE_IP }, site.whole)?;
        let proto_offset = if v6 { 6 } else { 9 };
        let body = match proto {
            Some(p) => {
                let transport = self.cmp_field(Layer::Net, proto_offset, Size::Byte, u32::MAX, p);
                self.portop(v6, transport, lo, hi, dir, range, site)?
            }
            None if self.libpcap_trees => {
                let mut alternatives = Vec::with_capacity(ANY_TRANSPORT.len());
                for p in ANY_TRANSPORT {
                    let transport =
                        self.cmp_field(Layer::Net, proto_offset, Size::Byte, u32::MAX, p);
                    alternatives.push(self.portop(v6, transport, lo, hi, dir, range, site)?);
                }
                junction(alternatives, false)
            }
            None => {
                let transport = Pred::In {
                    value: self.load(Layer::Net, proto_offset, Size::Byte),
                    set: ValueSet::from_values(ANY_TRANSPORT),
                };
                self.portop(v6, transport, lo, hi, dir, range, site)?
            }
        };
        Ok(junction(vec![link, body], true))
    }

    /// The transport test, for IPv4 "not a later fragment", then the ports.
    /// (The junctions here and above are `junction`'s, not `Pred::and`/`Pred::or`: the same
    /// trees, with each list allocated once at its size; the generic constructors' growing
    /// lists were 3% of `port 22`'s whole compile, issue 13, measured on libpcap's tree.)
    #[allow(clippy::too_many_arguments)]
    fn portop(
        &mut self,
        v6: bool,
        transport: Pred,
        lo: u32,
        hi: u32,
        dir: Option<Dir>,
        range: bool,
        site: Site,
    ) -> Result<Pred, CompileError> {
        // The header tests, with room for the ports test after them.
        let mut parts = Vec::with_capacity(3);
        parts.push(transport);
        let layer = if v6 {
            Layer::TransportV6
        } else {
            let fragment_offset =
                Pred::cmp(CmpOp::Set, self.load(Layer::Net, 6, Size::Half), Expr::Const(0x1fff));
            parts.push(Pred::not(fragment_offset));
            Layer::TransportV4
        };
        let atom = |s: &Self, k: u32| {
            let port = || s.load(layer, k, Size::Half);
            if range {
                junction(
                    vec![
                        Pred::cmp(CmpOp::Ge, port(), Expr::Const(lo)),
                        Pred::cmp(CmpOp::Le, port(), Expr::Const(hi)),
                    ],
                    true,
                )
            } else {
                Pred::eq(port(), lo)
            }
        };
        let ports = match dir {
            Some(Dir::Src) => atom(self, 0),
            Some(Dir::Dst) => atom(self, 2),
            Some(Dir::SrcAndDst) => junction(vec![atom(self, 0), atom(self, 2)], true),
            None | Some(Dir::SrcOrDst) => junction(vec![atom(self, 0), atom(self, 2)], false),
            Some(d) => {
                let what = if range { "port ranges" } else { "ports" };
                return Err(site.qual(dir_not_valid(d, what)));
            }
        };
        parts.push(ports);
        Ok(junction(parts, true))
    }
}

/// The transport a `port`/`portrange` qualifier names; other protocols are refused.
fn qualified_transport(
    proto: Option<Proto>,
    range: bool,
    site: Site,
) -> Result<PortProto, CompileError> {
    match proto {
        None => Ok(None),
        Some(Proto::Tcp) => Ok(Some(IPPROTO_TCP)),
        Some(Proto::Udp) => Ok(Some(IPPROTO_UDP)),
        Some(Proto::Sctp) => Ok(Some(IPPROTO_SCTP)),
        Some(_) => {
            let what = if range { "portrange" } else { "port" };
            Err(site.qual(format!("illegal qualifier of '{what}'")))
        }
    }
}

/// A qualified transport against the one a service name was found for: `udp port http`
/// is refused when `http` is TCP only; an unqualified name keeps what it was found for.
fn reconcile(
    wanted: PortProto,
    found: PortProto,
    what: impl Fn() -> String,
    site: Site,
) -> Result<PortProto, CompileError> {
    let name = |p: u32| match p {
        IPPROTO_TCP => "tcp",
        IPPROTO_UDP => "udp",
        _ => "sctp",
    };
    match (wanted, found) {
        (Some(w), Some(f)) if w != f => Err(site.id(format!("{} is {}", what(), name(f)))),
        (Some(w), _) => Ok(Some(w)),
        (None, f) => Ok(f),
    }
}

fn checked_port(port: RawPort, site: Site) -> Result<u32, CompileError> {
    if port < 0 {
        return Err(site.id(format!("illegal port number {port} < 0")));
    }
    if port > RawPort::from(MAX_PORT) {
        return Err(site.id(format!("illegal port number {port} > {MAX_PORT}")));
    }
    Ok(port as u32)
}

/// A service name as libpcap resolves it: a number stands for itself on every transport
/// (the resolver reads it as a port, see [`numeric_service`]); otherwise the TCP entry wins,
/// and equal TCP and UDP entries mean "any transport". SCTP entries are not consulted.
fn service_port(names: &NameDb, name: &str) -> Option<(RawPort, PortProto)> {
    if let Some(number) = numeric_service(name) {
        return number.map(|port| (RawPort::from(port), None));
    }
    let tcp = names.port(name, Transport::Tcp);
    let udp = names.port(name, Transport::Udp);
    match (tcp, udp) {
        (Some(t), Some(u)) if t == u => Some((RawPort::from(t), None)),
        (Some(t), _) => Some((RawPort::from(t), Some(IPPROTO_TCP))),
        (None, Some(u)) => Some((RawPort::from(u), Some(IPPROTO_UDP))),
        (None, None) => None,
    }
}

/// A service "name" that is a number, read the way libpcap gets it read: libpcap hands
/// service names to the C library's getaddrinfo, which takes a string `strtoul` consumes
/// whole (an optional sign, decimal digits; saturating) as a port number, keeps it in a C
/// `int`, and stores its low 16 bits as the port. So a port range `ssh-70000` is 22..4464,
/// not an error, because nothing after the resolver checks the range: a libpcap quirk weir
/// follows, as it decides what a filter matches. A negative `int` makes the resolver look
/// the digits up as a name, which finds nothing: `Some(None)`. `None`: not a number.
fn numeric_service(name: &str) -> Option<Option<u16>> {
    let (negative, digits) = match name.as_bytes().first() {
        Some(b'-') => (true, &name[1..]),
        Some(b'+') => (false, &name[1..]),
        _ => (false, name),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude =
        digits.bytes().try_fold(0u64, |v, b| v.checked_mul(10)?.checked_add(u64::from(b - b'0')));
    // strtoul: an overflow gives ULONG_MAX whatever the sign; otherwise the sign negates.
    let value = match magnitude {
        None => u64::MAX,
        Some(m) if negative => m.wrapping_neg(),
        Some(m) => m,
    };
    // Into an `int` (the low 32 bits); the port is the low 16 bits of a non-negative one.
    let as_int = value as u32 as i32;
    Some((as_int >= 0).then_some(as_int as u16))
}

/// A port range id: `N-M` read as libpcap reads it (two signed numbers around a dash,
/// anything after them ignored), else `NAME-NAME` split at the first dash, each side a
/// service. Two sides found for different transports make a range for any transport.
fn port_range(names: &NameDb, text: &str) -> Option<(RawPort, RawPort, PortProto)> {
    if let Some((first, rest)) = leading_int(text) {
        if let Some((last, _)) = rest.strip_prefix('-').and_then(leading_int) {
            return Some((first, last, None));
        }
    }
    let (a, b) = text.split_once('-')?;
    let (first, first_proto) = service_port(names, a)?;
    let (last, last_proto) = service_port(names, b)?;
    let proto = if first_proto == last_proto { last_proto } else { None };
    Some((first, last, proto))
}

/// An optionally signed decimal number at the start of `s`, as the C library's `%d` reads
/// one: into a `long` (saturating at its limits), then stored in an `int`, which keeps the
/// low 32 bits. So `4294967297` reads as 1 and `99999999999999999999` as -1: what libpcap's
/// range then checks (and accepts or refuses), a libpcap quirk weir follows.
fn leading_int(s: &str) -> Option<(RawPort, &str)> {
    let (negative, digits_start) = match s.as_bytes().first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let rest = &s[digits_start..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let magnitude = rest[..digits]
        .bytes()
        .try_fold(0i128, |v, b| v.checked_mul(10)?.checked_add(i128::from(b - b'0')))
        .unwrap_or(i128::MAX);
    let signed = if negative { -magnitude } else { magnitude };
    let long = signed.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    Some((RawPort::from(long as i32), &rest[digits..]))
}

#[cfg(test)]
mod tests {
    use super::super::{lower_trees_as, Options};
    use super::*;

    /// Port tests in every form (qualifiers, directions, ranges, names), alone and beside the
    /// tests the optimizer merges them with, rules out parts of, or decides against.
    const PORT_FILTERS: &[&str] = &[
        "port 22",
        "src port 22",
        "dst port 22",
        "src and dst port 22",
        "src or dst port 22",
        "portrange 1-1024",
        "src portrange 1000-2000",
        "src and dst portrange 10-20",
        "portrange 20-10",
        "port domain",
        "portrange ssh-http",
        "tcp port 80",
        "udp portrange 1-2",
        "port 67 or port 68",
        "udp and (port 67 or port 68)",
        "tcp and not port 22",
        "not port 22",
        "host 10.0.0.1 and port 80",
        "port 80 and host 10.0.0.1",
        "port 80 or port 443",
        "port 80 and port 80",
        "port 53 and udp",
        "icmp and port 22",
        "sctp and port 22",
        "ip6 and port 22",
        "ip and dst port 22",
        "vlan and port 22",
        "vlan 10 and port 22 or vlan 20 and portrange 5-6",
        "mpls and port 22",
        "pppoes and port 22",
        "geneve and port 80",
        "ip[9] = 17 and port 53",
        "ip6[6] = 6 and port 22",
        "tcp[0:2] = 22 or port 22",
        "not (port 1 or port 2) and port 3",
        "(port 1 and src port 2) or (dst port 3 and port 4)",
        "port 1 or port 2 or port 3 or port 4 or tcp or port 5",
        "ether src port 22",
        "port 70000",
    ];

    /// The merged port tree (`ports_for`) against libpcap's, lowered from the same
    /// expression on every link type: the same errors; where both lower, the same tree after
    /// the optimizer's first factoring `simplify` (and so the same optimized filter, checked
    /// too) and the same "rejects all packets" verdict. Most pairs must differ (else this
    /// compares nothing): more than three in four.
    #[test]
    fn merged_port_trees_optimize_as_libpcaps() {
        let (compared, differing) = super::super::merged_trees_optimize_as_libpcaps(PORT_FILTERS);
        // Most link types carry IP; each filter with an unqualified port lowers differently.
        assert!(compared > 1000 && differing * 4 > compared * 3, "{differing} of {compared}");
    }

    /// Whether `p` tests an Ethernet frame's transport protocol against a set, as a merged
    /// port tree does (`proto in {SCTP, TCP, UDP}`: the IPv6 next header is byte 20, the
    /// IPv4 protocol byte 23), pair tables' tests included.
    fn tests_transport_set(p: &Pred) -> bool {
        fn in_branches(branches: &[weir_filter::PairBranch]) -> bool {
            branches
                .iter()
                .any(|b| b.guards.iter().any(tests_transport_set) || in_branches(&b.inner))
        }
        match p {
            Pred::In { value: Expr::Load { offset, size: Size::Byte }, .. } => {
                matches!(**offset, Expr::Const(20 | 23))
            }
            Pred::And(ps) | Pred::Or(ps) => ps.iter().any(tests_transport_set),
            Pred::Not(q) => tests_transport_set(q),
            Pred::Pairs(pairs) => {
                in_branches(&pairs.first.branches) || in_branches(&pairs.second.branches)
            }
            _ => false,
        }
    }

    /// The terms of a long list keep libpcap's port trees, whose shapes `fuse` turns into
    /// sets and pairs (or not) as it always has; a short list's ports are merged trees.
    #[test]
    fn long_lists_keep_libpcaps_port_trees() {
        let names = NameDb::builtin();
        let options = Options::new(crate::LinkType::Ethernet);
        let lowered = |text: &str| {
            let ast = crate::parse(text).expect(text).expect(text);
            lower_trees_as(&ast, &options, &names, false).expect(text).filter.pred
        };
        let ports: Vec<String> = (1..=9).map(|p| format!("port {p}")).collect();
        let pairs: Vec<String> =
            (1..=9).map(|p| format!("(host 10.0.0.{p} and port {p})")).collect();
        let negated: Vec<String> =
            (1..=9).map(|p| format!("not portrange {p}-{}", p + 1)).collect();
        for list in [ports.join(" or "), pairs.join(" or "), negated.join(" and ")] {
            let pred = lowered(&list);
            assert!(!tests_transport_set(&pred), "{list}: {pred:?}");
            // (the pair list is one table, its tests taken from the first term's tree)
            assert_eq!(matches!(pred, Pred::Pairs(_)), list.contains("host"), "{list}");
        }
        for short in
            ["port 1 or port 2", "(host 10.0.0.1 and port 1) or (host 10.0.0.2 and port 2)"]
        {
            assert!(tests_transport_set(&lowered(short)), "{short}");
        }
    }

    /// The C library's readings, as libpcap 1.10 on glibc shows them (`tcpdump -d`).
    #[test]
    fn numbers_read_as_the_c_library_reads_them() {
        assert_eq!(numeric_service("70000"), Some(Some(4464)));
        assert_eq!(numeric_service("65536"), Some(Some(0)));
        assert_eq!(numeric_service("4294967297"), Some(Some(1)));
        assert_eq!(numeric_service("010"), Some(Some(10)));
        // Negative as an int: looked up as a name, found nowhere.
        assert_eq!(numeric_service("2147483648"), Some(None));
        assert_eq!(numeric_service("4294967295"), Some(None));
        assert_eq!(numeric_service("99999999999999999999"), Some(None));
        assert_eq!(numeric_service("-5"), Some(None));
        assert_eq!(numeric_service("ssh"), None);
        assert_eq!(numeric_service("0x10"), None);
        assert_eq!(numeric_service(""), None);

        assert_eq!(leading_int("8080-1"), Some((8080, "-1")));
        assert_eq!(leading_int("4294967297"), Some((1, "")));
        assert_eq!(leading_int("2147483648"), Some((-2_147_483_648, "")));
        assert_eq!(leading_int("99999999999999999999x"), Some((-1, "x")));
        assert_eq!(leading_int("-99999999999999999999"), Some((0, "")));
        assert_eq!(leading_int("ssh"), None);
    }

    #[test]
    fn a_service_range_past_65535_keeps_the_low_bits() {
        let names = NameDb::builtin();
        assert_eq!(port_range(&names, "ssh-70000"), Some((22, 4464, None)));
        assert_eq!(port_range(&names, "ssh-2147483648"), None);
        assert_eq!(port_range(&names, "8080-4294967297"), Some((8080, 1, None)));
    }
}
