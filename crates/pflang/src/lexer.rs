//! The pflang scanner: expression text -> tokens with byte spans.
//!
//! It reproduces the scanner of record's longest-match rules, because they decide what is
//! valid: `1-1024` and `len-1` are single name tokens (so `ip[1-1]` is a syntax error there
//! and here), `1.2.3.4.5` is a name, `001122334455` is an Ethernet address, and on equal
//! length the earlier rule wins (keywords, then operators, then addresses, numbers, named
//! constants, names). Named constants (`tcp-syn`, `icmptype`, ...) become numbers here.

use crate::ast::{Proto, Span};
use crate::error::ParseError;
use std::net::Ipv6Addr;

/// Keywords (one token kind per keyword of the grammar of record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kw {
    Proto(Proto),
    Dst,
    Src,
    Host,
    Net,
    Mask,
    Port,
    PortRange,
    ProtoKw,
    ProtoChain,
    Gateway,
    Type,
    Subtype,
    Dir,
    Addr1,
    Addr2,
    Addr3,
    Addr4,
    Ra,
    Ta,
    Less,
    Greater,
    Byte,
    Broadcast,
    Multicast,
    And,
    Or,
    Not,
    Len,
    Inbound,
    Outbound,
    IfIndex,
    Vlan,
    Mpls,
    Pppoed,
    Pppoes,
    Geneve,
    Vxlan,
    Llc,
    Atm(crate::ast::AtmAbbrev),
    Vpi,
    Vci,
    PfIfname,
    PfRset,
    PfRnr,
    PfSrnr,
    PfReason,
    PfAction,
    Mtp2(crate::ast::Mtp2Type),
    Mtp3(crate::ast::Mtp3Field),
}

/// Punctuation and operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Punct {
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Colon,
    LBracket,
    RBracket,
    LParen,
    RParen,
    Amp,
    Pipe,
    Caret,
    Lt,
    Gt,
    Eq,
    Ge,
    Le,
    Ne,
    Shl,
    Shr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    Kw(Kw),
    Punct(Punct),
    /// A number, or a named constant already turned into its number.
    Num(u32),
    /// A name (or `\escaped` word, without the backslash).
    Id(String),
    /// Dotted IPv4 (2 to 4 parts), as written.
    Hid(String),
    Hid6(Ipv6Addr),
    Eid([u8; 6]),
    /// An ARCnet address `$x` or `$xx`: its hex digits as written (libpcap reads only the
    /// first, so `$5` and `$05` differ).
    Aid(String),
    End,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

use crate::ast::{AtmAbbrev as A, Mtp2Type as M2, Mtp3Field as M3, Proto as P};

/// Keyword spellings, in the scanner of record's rule order.
pub const KEYWORDS: &[(&str, Kw)] = &[
    ("dst", Kw::Dst),
    ("src", Kw::Src),
    ("link", Kw::Proto(P::Link)),
    ("ether", Kw::Proto(P::Link)),
    ("ppp", Kw::Proto(P::Link)),
    ("slip", Kw::Proto(P::Link)),
    ("fddi", Kw::Proto(P::Link)),
    ("tr", Kw::Proto(P::Link)),
    ("wlan", Kw::Proto(P::Link)),
    ("arp", Kw::Proto(P::Arp)),
    ("rarp", Kw::Proto(P::Rarp)),
    ("ip", Kw::Proto(P::Ip)),
    ("sctp", Kw::Proto(P::Sctp)),
    ("tcp", Kw::Proto(P::Tcp)),
    ("udp", Kw::Proto(P::Udp)),
    ("icmp", Kw::Proto(P::Icmp)),
    ("igmp", Kw::Proto(P::Igmp)),
    ("igrp", Kw::Proto(P::Igrp)),
    ("pim", Kw::Proto(P::Pim)),
    ("vrrp", Kw::Proto(P::Vrrp)),
    ("carp", Kw::Proto(P::Carp)),
    ("radio", Kw::Proto(P::Radio)),
    ("ip6", Kw::Proto(P::Ip6)),
    ("icmp6", Kw::Proto(P::Icmp6)),
    ("ah", Kw::Proto(P::Ah)),
    ("esp", Kw::Proto(P::Esp)),
    ("atalk", Kw::Proto(P::Atalk)),
    ("aarp", Kw::Proto(P::Aarp)),
    ("decnet", Kw::Proto(P::Decnet)),
    ("lat", Kw::Proto(P::Lat)),
    ("sca", Kw::Proto(P::Sca)),
    ("moprc", Kw::Proto(P::Moprc)),
    ("mopdl", Kw::Proto(P::Mopdl)),
    ("iso", Kw::Proto(P::Iso)),
    ("esis", Kw::Proto(P::Esis)),
    ("es-is", Kw::Proto(P::Esis)),
    ("isis", Kw::Proto(P::Isis)),
    ("is-is", Kw::Proto(P::Isis)),
    ("l1", Kw::Proto(P::L1)),
    ("l2", Kw::Proto(P::L2)),
    ("iih", Kw::Proto(P::Iih)),
    ("lsp", Kw::Proto(P::Lsp)),
    ("snp", Kw::Proto(P::Snp)),
    ("csnp", Kw::Proto(P::Csnp)),
    ("psnp", Kw::Proto(P::Psnp)),
    ("clnp", Kw::Proto(P::Clnp)),
    ("stp", Kw::Proto(P::Stp)),
    ("ipx", Kw::Proto(P::Ipx)),
    ("netbeui", Kw::Proto(P::Netbeui)),
    ("host", Kw::Host),
    ("net", Kw::Net),
    ("mask", Kw::Mask),
    ("port", Kw::Port),
    ("portrange", Kw::PortRange),
    ("proto", Kw::ProtoKw),
    ("protochain", Kw::ProtoChain),
    ("gateway", Kw::Gateway),
    ("type", Kw::Type),
    ("subtype", Kw::Subtype),
    ("direction", Kw::Dir),
    ("dir", Kw::Dir),
    ("address1", Kw::Addr1),
    ("addr1", Kw::Addr1),
    ("address2", Kw::Addr2),
    ("addr2", Kw::Addr2),
    ("address3", Kw::Addr3),
    ("addr3", Kw::Addr3),
    ("address4", Kw::Addr4),
    ("addr4", Kw::Addr4),
    ("ra", Kw::Ra),
    ("ta", Kw::Ta),
    ("less", Kw::Less),
    ("greater", Kw::Greater),
    ("byte", Kw::Byte),
    ("broadcast", Kw::Broadcast),
    ("multicast", Kw::Multicast),
    ("and", Kw::And),
    ("&&", Kw::And),
    ("or", Kw::Or),
    ("||", Kw::Or),
    ("not", Kw::Not),
    ("len", Kw::Len),
    ("length", Kw::Len),
    ("inbound", Kw::Inbound),
    ("outbound", Kw::Outbound),
    ("ifindex", Kw::IfIndex),
    ("vlan", Kw::Vlan),
    ("mpls", Kw::Mpls),
    ("pppoed", Kw::Pppoed),
    ("pppoes", Kw::Pppoes),
    ("geneve", Kw::Geneve),
    ("vxlan", Kw::Vxlan),
    ("lane", Kw::Atm(A::Lane)),
    ("llc", Kw::Llc),
    ("metac", Kw::Atm(A::Metac)),
    ("bcc", Kw::Atm(A::Bcc)),
    ("oam", Kw::Atm(A::Oam)),
    ("oamf4", Kw::Atm(A::Oamf4)),
    ("oamf4ec", Kw::Atm(A::Oamf4ec)),
    ("oamf4sc", Kw::Atm(A::Oamf4sc)),
    ("sc", Kw::Atm(A::Sc)),
    ("ilmic", Kw::Atm(A::Ilmic)),
    ("vpi", Kw::Vpi),
    ("vci", Kw::Vci),
    ("connectmsg", Kw::Atm(A::Connectmsg)),
    ("metaconnect", Kw::Atm(A::Metaconnect)),
    ("on", Kw::PfIfname),
    ("ifname", Kw::PfIfname),
    ("rset", Kw::PfRset),
    ("ruleset", Kw::PfRset),
    ("rnr", Kw::PfRnr),
    ("rulenum", Kw::PfRnr),
    ("srnr", Kw::PfSrnr),
    ("subrulenum", Kw::PfSrnr),
    ("reason", Kw::PfReason),
    ("action", Kw::PfAction),
    ("fisu", Kw::Mtp2(M2::Fisu)),
    ("lssu", Kw::Mtp2(M2::Lssu)),
    ("lsu", Kw::Mtp2(M2::Lssu)),
    ("msu", Kw::Mtp2(M2::Msu)),
    ("hfisu", Kw::Mtp2(M2::Hfisu)),
    ("hlssu", Kw::Mtp2(M2::Hlssu)),
    ("hmsu", Kw::Mtp2(M2::Hmsu)),
    ("sio", Kw::Mtp3(M3::Sio)),
    ("opc", Kw::Mtp3(M3::Opc)),
    ("dpc", Kw::Mtp3(M3::Dpc)),
    ("sls", Kw::Mtp3(M3::Sls)),
    ("hsio", Kw::Mtp3(M3::Hsio)),
    ("hopc", Kw::Mtp3(M3::Hopc)),
    ("hdpc", Kw::Mtp3(M3::Hdpc)),
    ("hsls", Kw::Mtp3(M3::Hsls)),
];

/// Named constants, which the scanner of record turns into numbers: weir-packet's table of
/// the names the filter language gives to header offsets and field values.
pub use weir_packet::filter_names::NAMED_CONSTANTS;

const PUNCT1: &[(u8, Punct)] = &[
    (b'+', Punct::Plus),
    (b'-', Punct::Minus),
    (b'*', Punct::Star),
    (b'/', Punct::Slash),
    (b'%', Punct::Percent),
    (b':', Punct::Colon),
    (b'[', Punct::LBracket),
    (b']', Punct::RBracket),
    (b'(', Punct::LParen),
    (b')', Punct::RParen),
    (b'&', Punct::Amp),
    (b'|', Punct::Pipe),
    (b'^', Punct::Caret),
    (b'<', Punct::Lt),
    (b'>', Punct::Gt),
    (b'=', Punct::Eq),
];

const PUNCT2: &[(&str, Punct)] = &[
    (">=", Punct::Ge),
    ("<=", Punct::Le),
    ("!=", Punct::Ne),
    ("==", Punct::Eq),
    ("<<", Punct::Shl),
    (">>", Punct::Shr),
];

/// Rule classes in the scanner's priority order (lower wins a tie on length).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rule {
    Keyword,
    Space,
    Punct1,
    Punct2,
    Aid,
    Mac,
    Num,
    Hid,
    V6,
    BogusEther,
    Constant,
    Id,
    EscapedId,
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// Length of `N`: `[0-9]+` or `0[xX][0-9A-Fa-f]+`, longest.
fn num_len(s: &[u8]) -> usize {
    let dec = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if s.len() >= 3 && s[0] == b'0' && (s[1] == b'x' || s[1] == b'X') && is_hex(s[2]) {
        let hex = 2 + s[2..].iter().take_while(|b| is_hex(**b)).count();
        return hex.max(dec);
    }
    dec
}

/// Length of up to `max` hex digits (at least one), else 0.
fn hex_run(s: &[u8], max: usize) -> usize {
    s.iter().take(max).take_while(|b| is_hex(**b)).count()
}

/// Longest match of the Ethernet address patterns.
fn mac_len(s: &[u8]) -> usize {
    let mut best = 0;
    // {B}sep{B}sep... six groups of one or two hex digits, for ':', '-' and '.'.
    for sep in [b':', b'-', b'.'] {
        // Each group may take one or two digits; try the greedy combination first and
        // fall back per group, which is enough because a separator follows each group.
        let mut pos = 0;
        let mut ok = true;
        for g in 0..6 {
            let n = hex_run(&s[pos..], 2);
            if n == 0 {
                ok = false;
                break;
            }
            pos += n;
            if g < 5 {
                if s.get(pos) != Some(&sep) {
                    ok = false;
                    break;
                }
                pos += 1;
            }
        }
        if ok {
            best = best.max(pos);
        }
    }
    // {B2}.{B2}.{B2}
    if hex_run(s, 4) == 4
        && s.get(4) == Some(&b'.')
        && hex_run(s.get(5..).unwrap_or(&[]), 4) == 4
        && s.get(9) == Some(&b'.')
        && hex_run(s.get(10..).unwrap_or(&[]), 4) == 4
    {
        best = best.max(14);
    }
    // {B2}{3}: exactly twelve hex digits (a prefix of a longer run also matches).
    if hex_run(s, 12) == 12 {
        best = best.max(12);
    }
    best
}

/// Longest match of `N.N`, `N.N.N` or `N.N.N.N`.
fn hid_len(s: &[u8]) -> usize {
    let mut pos = num_len(s);
    if pos == 0 {
        return 0;
    }
    let mut best = 0;
    for _ in 0..3 {
        if s.get(pos) != Some(&b'.') {
            break;
        }
        let n = num_len(&s[pos + 1..]);
        if n == 0 {
            break;
        }
        pos += 1 + n;
        best = pos;
    }
    best
}

/// Whether `s` has the shape of the scanner's IPv6 patterns: hex groups of 1-4 digits
/// separated by ':', at most one '::', 8 groups without '::' or fewer with it, optionally
/// ending in a dotted quad that counts as two groups.
fn v6_shape(s: &[u8]) -> bool {
    let text = match std::str::from_utf8(s) {
        Ok(t) => t,
        Err(_) => return false,
    };
    let (head, tail4) = match text.rfind(':') {
        Some(i) if text[i + 1..].contains('.') => (&text[..=i], Some(&text[i + 1..])),
        _ => (text, None),
    };
    if let Some(q) = tail4 {
        let parts: Vec<&str> = q.split('.').collect();
        if parts.len() != 4
            || parts.iter().any(|p| p.is_empty() || num_len(p.as_bytes()) != p.len())
        {
            return false;
        }
    }
    let extra = if tail4.is_some() { 2 } else { 0 };
    let compressed = head.matches("::").count();
    if compressed > 1 || head.contains(":::") {
        return false;
    }
    let group_ok = |g: &str| !g.is_empty() && g.len() <= 4 && g.bytes().all(is_hex);
    if compressed == 1 {
        let (l, r) = match head.split_once("::") {
            Some(x) => x,
            None => return false,
        };
        let lg: Vec<&str> = if l.is_empty() { vec![] } else { l.split(':').collect() };
        // With a dotted tail the right side ends in ':' (already stripped as part of `head`).
        let r = if tail4.is_some() { r.strip_suffix(':').unwrap_or(r) } else { r };
        if tail4.is_some() && r.is_empty() && !head.ends_with("::") {
            return false;
        }
        let rg: Vec<&str> = if r.is_empty() { vec![] } else { r.split(':').collect() };
        if !lg.iter().chain(rg.iter()).all(|g| group_ok(g)) {
            return false;
        }
        lg.len() + rg.len() + extra <= 7
    } else {
        let h = if tail4.is_some() {
            match head.strip_suffix(':') {
                Some(h) => h,
                None => return false,
            }
        } else {
            head
        };
        let groups: Vec<&str> = h.split(':').collect();
        groups.iter().all(|g| group_ok(g)) && groups.len() + extra == 8
    }
}

/// Whether `s` can have [`v6_shape`] at all, by its colons alone: it needs a `::`, or else
/// 8 groups (7 colons) or 6 groups and a dotted quad (6 colons). A cheap test that lets
/// [`v6_len`] skip most prefixes: a MAC address `00:11:22:33:44:55` (5 colons) cost 16 full
/// shape checks, ~30,000 instructions per token (issue 13).
fn v6_colons_fit(s: &[u8]) -> bool {
    let colons = s.iter().filter(|&&b| b == b':').count();
    colons == 6 || colons == 7 || s.windows(2).any(|w| w == b"::")
}

/// Longest prefix with the IPv6 shape.
fn v6_len(s: &[u8]) -> usize {
    let run = s.iter().take(128).take_while(|b| is_hex(**b) || **b == b':' || **b == b'.').count();
    if !s[..run].contains(&b':') {
        return 0;
    }
    (2..=run).rev().find(|&n| v6_colons_fit(&s[..n]) && v6_shape(&s[..n])).unwrap_or(0)
}

/// Longest match of `{B}:+({B}:+)+` (an Ethernet-looking word the scanner rejects).
fn bogus_ether_len(s: &[u8]) -> usize {
    let mut pos = 0;
    let mut groups = 0;
    let mut best = 0;
    loop {
        let n = hex_run(&s[pos..], 2);
        if n == 0 {
            break;
        }
        let colons = s[pos + n..].iter().take_while(|b| **b == b':').count();
        if colons == 0 {
            break;
        }
        pos += n + colons;
        groups += 1;
        if groups >= 2 {
            best = pos;
        }
    }
    best
}

/// Longest match of `[A-Za-z0-9]([-_.A-Za-z0-9]*[.A-Za-z0-9])?`.
fn id_len(s: &[u8]) -> usize {
    match s.first() {
        Some(b) if b.is_ascii_alphanumeric() => {}
        _ => return 0,
    }
    let run = 1 + s[1..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        .count();
    let mut n = run;
    while n > 1 && matches!(s[n - 1], b'-' | b'_') {
        n -= 1;
    }
    n
}

fn escaped_id_len(s: &[u8]) -> usize {
    if s.first() != Some(&b'\\') {
        return 0;
    }
    let n = s[1..]
        .iter()
        .take_while(|b| !matches!(b, b' ' | b'!' | b'(' | b')' | b'\n' | b'\t'))
        .count();
    if n == 0 {
        0
    } else {
        n + 1
    }
}

/// The scanner's number conversion: decimal, `0x` hex, leading-`0` octal, 32 bits.
pub fn parse_number(text: &str) -> Result<u32, String> {
    let (digits, radix) =
        if let Some(h) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            (h, 16)
        } else if text.len() > 1 && text.starts_with('0') {
            (&text[1..], 8)
        } else {
            (text, 10)
        };
    let kind = match radix {
        16 => "hex",
        8 => "octal",
        _ => "decimal",
    };
    let mut n: u32 = 0;
    for c in digits.chars() {
        let d =
            c.to_digit(radix).ok_or_else(|| format!("number {text} contains non-{kind} digit"))?;
        n = n
            .checked_mul(radix)
            .and_then(|n| n.checked_add(d))
            .ok_or_else(|| format!("number {text} overflows 32 bits"))?;
    }
    Ok(n)
}

fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let digits: Vec<u8> = if text.contains([':', '-']) || text.matches('.').count() == 5 {
        text.split([':', '-', '.'])
            .map(|g| u8::from_str_radix(g, 16).ok())
            .collect::<Option<Vec<u8>>>()?
    } else {
        let hex: String = text.chars().filter(|c| *c != '.').collect();
        (0..6)
            .map(|i| hex.get(2 * i..2 * i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
            .collect::<Option<Vec<u8>>>()?
    };
    digits.try_into().ok()
}

/// For each first byte, the indexes of the spellings in `table` that start with it: the
/// scanner tries only those at each position instead of every keyword and constant.
struct ByFirstByte(Vec<Vec<u16>>);

impl ByFirstByte {
    fn new<T>(table: &[(&str, T)]) -> ByFirstByte {
        let mut index = vec![Vec::new(); 256];
        for (i, (spelling, _)) in table.iter().enumerate() {
            let first = spelling.as_bytes().first().map_or(0, |&b| usize::from(b));
            if let (Some(slot), Ok(i)) = (index.get_mut(first), u16::try_from(i)) {
                slot.push(i);
            }
        }
        ByFirstByte(index)
    }

    /// The entries of `table` (the one the index was built from) starting with `first`.
    fn candidates<'t, T>(
        &'t self,
        table: &'t [(&'static str, T)],
        first: u8,
    ) -> impl Iterator<Item = &'t (&'static str, T)> + 't {
        let slots = self.0.get(usize::from(first)).map_or(&[][..], Vec::as_slice);
        slots.iter().filter_map(move |&i| table.get(usize::from(i)))
    }
}

fn keyword_index() -> &'static ByFirstByte {
    static INDEX: std::sync::OnceLock<ByFirstByte> = std::sync::OnceLock::new();
    INDEX.get_or_init(|| ByFirstByte::new(KEYWORDS))
}

fn constant_index() -> &'static ByFirstByte {
    static INDEX: std::sync::OnceLock<ByFirstByte> = std::sync::OnceLock::new();
    INDEX.get_or_init(|| ByFirstByte::new(NAMED_CONSTANTS))
}

/// Whether a match of one of the address, number and name rules can start with byte `b`
/// (the tests check that each of them matches nothing at any other byte). The scanner
/// tries at each position only the rules that can start there, instead of all of them.
#[inline]
fn may_start(rule: Rule, b: u8) -> bool {
    match rule {
        // Six hex groups, three of four hex digits, or twelve hex digits.
        Rule::Mac | Rule::BogusEther => is_hex(b),
        // A dotted address starts with a number, and a number with a decimal digit.
        Rule::Num | Rule::Hid => b.is_ascii_digit(),
        // A hex group, or `::`.
        Rule::V6 => is_hex(b) || b == b':',
        Rule::Id => b.is_ascii_alphanumeric(),
        Rule::EscapedId => b == b'\\',
        // The others are matched by their first byte already.
        Rule::Keyword | Rule::Space | Rule::Punct1 | Rule::Punct2 | Rule::Aid | Rule::Constant => {
            true
        }
    }
}

/// Splits `expr` into tokens, ending with [`Tok::End`].
pub fn tokenize(expr: &str) -> Result<Vec<Token>, ParseError> {
    let bytes = expr.as_bytes();
    // Room for a token per four bytes and the end: everyday filters (`host 10.0.0.1 and
    // udp`, five tokens) fit without growing the list from four to eight.
    let mut out = Vec::with_capacity(expr.len() / 4 + 2);
    let mut pos = 0;
    while pos < bytes.len() {
        let s = &bytes[pos..];
        // No rule but `Space` matches at a blank (the other rules start with a letter, a
        // digit, punctuation, `$` or `\`): skip it without trying them all.
        if matches!(s[0], b' ' | b'\r' | b'\n' | b'\t') {
            pos += 1;
            continue;
        }
        let mut best: Option<(usize, Rule)> = None;
        let mut consider = |len: usize, rule: Rule| {
            if len > 0 && best.is_none_or(|(l, r)| len > l || (len == l && rule < r)) {
                best = Some((len, rule));
            }
        };
        let b = s[0];
        // The name here, the `Id` rule's match. Every keyword and named constant that starts
        // with a letter or digit is spelled as a name (the tests check it), so one that
        // matches is a prefix of this name and at most as long: a shorter one loses to the
        // name, and only those of the name's length need comparing. Where no name starts
        // (`&&`, `||`), all candidates are compared.
        let word = if may_start(Rule::Id, b) { id_len(s) } else { 0 };
        for (kw, _) in keyword_index().candidates(KEYWORDS, b) {
            if (word == 0 || kw.len() == word) && s.starts_with(kw.as_bytes()) {
                consider(kw.len(), Rule::Keyword);
            }
        }
        if matches!(s[0], b' ' | b'\r' | b'\n' | b'\t') {
            consider(1, Rule::Space);
        }
        if s[0] == b'!' || PUNCT1.iter().any(|(c, _)| *c == s[0]) {
            consider(1, Rule::Punct1);
        }
        if PUNCT2.iter().any(|(p, _)| s.starts_with(p.as_bytes())) {
            consider(2, Rule::Punct2);
        }
        if s[0] == b'$' {
            let n = hex_run(&s[1..], 2);
            if n > 0 {
                consider(1 + n, Rule::Aid);
            }
        }
        // The address, number and name rules are tried only where they can start (`host`
        // is no number, Ethernet or IPv6 address): a rule skipped here would match nothing
        // at this byte, so the longest match and its rule are the same as trying them all.
        if may_start(Rule::Mac, b) {
            consider(mac_len(s), Rule::Mac);
        }
        if may_start(Rule::Num, b) {
            consider(num_len(s), Rule::Num);
        }
        if may_start(Rule::Hid, b) {
            consider(hid_len(s), Rule::Hid);
        }
        if may_start(Rule::V6, b) {
            consider(v6_len(s), Rule::V6);
        }
        if may_start(Rule::BogusEther, b) {
            consider(bogus_ether_len(s), Rule::BogusEther);
        }
        for (c, _) in constant_index().candidates(NAMED_CONSTANTS, b) {
            if (word == 0 || c.len() == word) && s.starts_with(c.as_bytes()) {
                consider(c.len(), Rule::Constant);
            }
        }
        consider(word, Rule::Id);
        if may_start(Rule::EscapedId, b) {
            consider(escaped_id_len(s), Rule::EscapedId);
        }

        let Some((len, rule)) = best else {
            let ch_len = expr[pos..].chars().next().map_or(1, char::len_utf8);
            let ch = &expr[pos..pos + ch_len];
            return Err(ParseError::new(
                Span::new(pos, pos + ch_len),
                format!("unexpected character `{}`", ch.escape_debug()),
            ));
        };
        let span = Span::new(pos, pos + len);
        // All rules match ASCII only, so `len` ends on a character boundary.
        let text = &expr[pos..pos + len];
        let tok = match rule {
            Rule::Space => None,
            Rule::Keyword => keyword_index()
                .candidates(KEYWORDS, s[0])
                .find(|(k, _)| *k == text)
                .map(|(_, kw)| Tok::Kw(*kw)),
            Rule::Punct1 if s[0] == b'!' => Some(Tok::Kw(Kw::Not)),
            Rule::Punct1 => PUNCT1.iter().find(|(c, _)| *c == s[0]).map(|(_, p)| Tok::Punct(*p)),
            Rule::Punct2 => PUNCT2.iter().find(|(p, _)| *p == text).map(|(_, p)| Tok::Punct(*p)),
            Rule::Aid => Some(Tok::Aid(text[1..].to_string())),
            Rule::Mac => {
                Some(Tok::Eid(parse_mac(text).ok_or_else(|| {
                    ParseError::new(span, format!("bogus ethernet address {text}"))
                })?))
            }
            Rule::Num => Some(Tok::Num(parse_number(text).map_err(|m| ParseError::new(span, m))?)),
            Rule::Hid => Some(Tok::Hid(text.to_string())),
            Rule::V6 => Some(Tok::Hid6(
                text.parse::<Ipv6Addr>()
                    .map_err(|_| ParseError::new(span, format!("bogus IPv6 address {text}")))?,
            )),
            Rule::BogusEther => {
                return Err(ParseError::new(span, format!("bogus ethernet address {text}")))
            }
            Rule::Constant => constant_index()
                .candidates(NAMED_CONSTANTS, s[0])
                .find(|(c, _)| *c == text)
                .map(|(_, v)| Tok::Num(*v)),
            Rule::Id => Some(Tok::Id(text.to_string())),
            Rule::EscapedId => Some(Tok::Id(text[1..].to_string())),
        };
        if rule != Rule::Space {
            let tok = tok.ok_or_else(|| ParseError::new(span, format!("cannot read `{text}`")))?;
            out.push(Token { tok, span });
        }
        pos += len;
    }
    out.push(Token { tok: Tok::End, span: Span::new(bytes.len(), bytes.len()) });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rule's length function: its longest match at the start of the text, 0 for none.
    type RuleLen = fn(&[u8]) -> usize;

    /// The rules `may_start` gates, with their length functions.
    const GATED: &[(Rule, RuleLen)] = &[
        (Rule::Mac, mac_len),
        (Rule::Num, num_len),
        (Rule::Hid, hid_len),
        (Rule::V6, v6_len),
        (Rule::BogusEther, bogus_ether_len),
        (Rule::Id, id_len),
        (Rule::EscapedId, escaped_id_len),
    ];

    /// Text that follows a first byte: pieces of every token shape (addresses, numbers,
    /// names, IPv6 with and without `::` or a dotted tail, Ethernet in each spelling).
    const TAILS: &[&str] = &[
        "",
        "0",
        "1",
        "a",
        "f",
        "z",
        "x1f",
        "X1f",
        ".",
        ":",
        "::",
        ":1",
        "::1",
        ":0:0:0:0:0:0:1",
        ":2:3:4:5:6:7:8",
        "1:2:3:4:5:6:7:8",
        "::ffff:1.2.3.4",
        ":ffff:1.2.3.4",
        "0:0:0:0:0:0:1",
        "e80::1",
        "0::1",
        ".0.0.1",
        "0.0.0.1",
        "0.0.0.1.5",
        ".2",
        "2.3",
        "-1024",
        "en-1",
        "ost",
        "nd",
        "cp-syn",
        "_x",
        "-x",
        "1:22:33:44:55:66",
        ":22:33:44:55:66",
        "-22-33-44-55-66",
        ".22.33.44.55.66",
        "a:",
        "a::bb:",
        ":bb:cc",
        "122.3344.5566",
        ".3344.5566",
        "122334455",
        "1122334455",
        "11223344556",
        "11223344556677",
        "abcdef012",
        "x",
        "\\x",
        "$1",
        "!",
        " ",
    ];

    /// `v6_len` skips the prefixes `v6_colons_fit` refuses: none of them may have the IPv6
    /// shape. Every string over `0:` of up to 16 bytes, and groups of `""`, `0`, `1234`, `g`
    /// joined by ':' (up to 9) with and without a dotted tail.
    #[test]
    fn v6_colons_fit_refuses_no_ipv6_shape() {
        let mut texts: Vec<String> = Vec::new();
        for len in 0..=16 {
            for bits in 0..1u32 << len {
                texts
                    .push((0..len).map(|i| if (bits >> i) & 1 == 1 { ':' } else { '0' }).collect());
            }
        }
        let groups = ["", "0", "1234", "g"];
        for n in 1..=9u32 {
            for pick in 0..4usize.pow(n) {
                let head: Vec<&str> = (0..n).map(|i| groups[pick / 4usize.pow(i) % 4]).collect();
                let head = head.join(":");
                for tail in ["", ":1.2.3.4", "1.2.3.4", ":1.2.3"] {
                    texts.push(format!("{head}{tail}"));
                }
            }
        }
        let mut shaped = [0usize; 8];
        for t in &texts {
            if v6_shape(t.as_bytes()) {
                assert!(v6_colons_fit(t.as_bytes()), "{t:?} has the IPv6 shape");
                let colons = t.bytes().filter(|&b| b == b':').count();
                if !t.contains("::") {
                    shaped[colons.min(7)] += 1;
                }
            }
        }
        // Both forms without `::` were met: 8 groups, and 6 groups with a dotted quad.
        assert!(shaped[7] > 50 && shaped[6] > 50, "{shaped:?}");
        assert!(texts.iter().filter(|t| !v6_colons_fit(t.as_bytes())).count() > 10_000);
        assert_eq!(v6_len(b"00:11:22:33:44:55"), 0);
        assert_eq!(v6_len(b"0:0:0:0:0:0:1.2.3.4 "), 19);
    }

    #[test]
    fn rules_skipped_at_a_byte_match_nothing_there() {
        let mut checked = 0usize;
        let mut skipped_bytes = 0usize;
        for &(rule, len) in GATED {
            for b in 0..=255u8 {
                if may_start(rule, b) {
                    continue;
                }
                skipped_bytes += 1;
                for tail in TAILS {
                    let mut text = vec![b];
                    text.extend_from_slice(tail.as_bytes());
                    assert_eq!(
                        len(&text),
                        0,
                        "{rule:?} matches {:?} although may_start says it cannot start with {b:#04x}",
                        String::from_utf8_lossy(&text)
                    );
                    checked += 1;
                }
            }
        }
        // Every gated rule skips most bytes (at most 62 of 256 start one).
        assert!(skipped_bytes >= GATED.len() * 194, "{skipped_bytes}");
        assert_eq!(checked, skipped_bytes * TAILS.len());
    }

    /// Each gated rule does match at some byte it allows, after some tail: the tails above
    /// reach each rule (a test whose tails matched nothing anywhere would prove nothing).
    #[test]
    fn every_gated_rule_matches_after_some_allowed_byte() {
        for &(rule, len) in GATED {
            let hit = (0..=255u8).filter(|&b| may_start(rule, b)).any(|b| {
                TAILS.iter().any(|tail| {
                    let mut text = vec![b];
                    text.extend_from_slice(tail.as_bytes());
                    len(&text) > 0
                })
            });
            assert!(hit, "{rule:?} matched nothing");
        }
    }

    /// Where a name starts, the scanner compares only the keywords and named constants as
    /// long as the name, which is sound when each one starting with a letter or digit is
    /// spelled as a name (is its own `Id` match).
    #[test]
    fn keywords_and_constants_are_spelled_as_names() {
        let spellings =
            KEYWORDS.iter().map(|(k, _)| *k).chain(NAMED_CONSTANTS.iter().map(|(c, _)| *c));
        let (mut n, mut names) = (0, 0);
        for k in spellings {
            n += 1;
            if may_start(Rule::Id, k.as_bytes()[0]) {
                assert_eq!(id_len(k.as_bytes()), k.len(), "{k:?} is not spelled as a name");
                names += 1;
            }
        }
        assert_eq!(n, KEYWORDS.len() + NAMED_CONSTANTS.len());
        assert!(names + 4 >= n, "{names} of {n}");
        assert!(n > 100, "{n}");
    }

    /// The scanner's output is the longest match with the earlier rule winning a tie: a few
    /// inputs where a gated rule and another compete, with their tokens and spans.
    #[test]
    fn gated_rules_still_win_where_they_should() {
        let kinds = |e: &str| -> Vec<(Tok, usize, usize)> {
            tokenize(e).unwrap().into_iter().map(|t| (t.tok, t.span.start, t.span.end)).collect()
        };
        assert_eq!(
            kinds("host 10.0.0.1 and udp"),
            vec![
                (Tok::Kw(Kw::Host), 0, 4),
                (Tok::Hid("10.0.0.1".into()), 5, 13),
                (Tok::Kw(Kw::And), 14, 17),
                (Tok::Kw(Kw::Proto(Proto::Udp)), 18, 21),
                (Tok::End, 21, 21),
            ]
        );
        assert_eq!(kinds("::1")[0], (Tok::Hid6(Ipv6Addr::LOCALHOST), 0, 3));
        assert_eq!(kinds("1-1024")[0], (Tok::Id("1-1024".into()), 0, 6));
        assert_eq!(kinds("\\and")[0], (Tok::Id("and".into()), 0, 4));
        // A keyword or constant that is a prefix of a longer name loses to the name; one
        // as long as the name wins.
        assert_eq!(kinds("hosts")[0], (Tok::Id("hosts".into()), 0, 5));
        assert_eq!(kinds("host-")[0], (Tok::Kw(Kw::Host), 0, 4));
        assert_eq!(kinds("tcp-synx")[0], (Tok::Id("tcp-synx".into()), 0, 8));
        assert_eq!(kinds("tcp-syn")[0], (Tok::Num(2), 0, 7));
        assert_eq!(kinds("tcp-")[0], (Tok::Kw(Kw::Proto(Proto::Tcp)), 0, 3));
        assert_eq!(kinds("ip&&udp")[1], (Tok::Kw(Kw::And), 2, 4));
        assert_eq!(kinds("ip||udp")[1], (Tok::Kw(Kw::Or), 2, 4));
        assert_eq!(kinds("001122334455")[0], (Tok::Eid([0, 0x11, 0x22, 0x33, 0x44, 0x55]), 0, 12));
        let e = tokenize("ip and 1:2:").unwrap_err();
        assert_eq!((e.span.start, e.span.end), (7, 11), "{e:?}");
        let e = tokenize("ip and .").unwrap_err();
        assert_eq!((e.span.start, e.span.end), (7, 8), "{e:?}");
    }
}
