//! The flow key: what the kernel's flow dissector gives cls_flower, laid out in one fixed
//! array of 64-bit words so that a rule is a (value, mask) pair over it and a classifier
//! can hash any subset of its words.
//!
//! Extraction follows net/core/flow_dissector.c as flower calls it (no flags): Ethernet,
//! up to two VLAN tags (outer in `vlan_*`, inner in `cvlan_*`, the EtherType after them in
//! `eth_type`), the first MPLS label stack entry (and nothing after it), ARP and RARP for
//! Ethernet/IPv4 requests and replies only, IPv4 (`ihl` at least 5) and IPv6 with
//! hop-by-hop, routing and destination-options headers skipped. A fragment, first or not,
//! sets `frag` (`firstfrag` when its offset is 0) and ends the dissection before the
//! transport header: flower does not ask for `FLOW_DISSECTOR_F_PARSE_1ST_FRAG`, so no
//! fragment has ports. Ports are read for TCP, UDP, UDP-Lite, SCTP, DCCP, ESP and AH (the
//! kernel's `proto_ports_offset`); TCP flags
//! when the data offset is at least 5; ICMP and ICMPv6 type and code. A header cut short
//! leaves its fields (and everything after it) zero, as the kernel's key starts zeroed.
//!
//! Not followed (the kernel's dissector follows them): IP-in-IP, IPv6-in-IP and GRE
//! encapsulations, PPPoE sessions, and MPLS entries after the first.

use weir_packet::{ethertype, ipproto};

/// Words in a full key.
pub const WORDS: usize = 14;
/// Bytes in a full key.
pub const BYTES: usize = WORDS * 8;

/// A field of the key: its byte offset and width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub len: usize,
}

const fn f(offset: usize, len: usize) -> Field {
    Field { offset, len }
}

/// The layout. Fields a packet of one kind fills are kept near each other, so that rule
/// sets touching few kinds use few words.
pub mod field {
    use super::{f, Field};
    pub const INDEV: Field = f(0, 4);
    pub const ETH_TYPE: Field = f(4, 2);
    pub const IP_PROTO: Field = f(6, 1);
    /// Bit 0: fragment; bit 1: first fragment.
    pub const FLAGS: Field = f(7, 1);
    pub const DST_MAC: Field = f(8, 6);
    pub const SRC_MAC: Field = f(14, 6);
    pub const VLAN_ID: Field = f(20, 2);
    pub const VLAN_PRIO: Field = f(22, 1);
    pub const VLAN_TPID: Field = f(24, 2);
    pub const CVLAN_ID: Field = f(26, 2);
    pub const CVLAN_PRIO: Field = f(28, 1);
    pub const CVLAN_TPID: Field = f(30, 2);
    pub const IPV4_SRC: Field = f(32, 4);
    pub const IPV4_DST: Field = f(36, 4);
    pub const IPV6_SRC: Field = f(40, 16);
    pub const IPV6_DST: Field = f(56, 16);
    pub const SRC_PORT: Field = f(72, 2);
    pub const DST_PORT: Field = f(74, 2);
    pub const TCP_FLAGS: Field = f(76, 2);
    pub const IP_TOS: Field = f(78, 1);
    pub const IP_TTL: Field = f(79, 1);
    pub const ICMP_TYPE: Field = f(80, 1);
    pub const ICMP_CODE: Field = f(81, 1);
    pub const ARP_OP: Field = f(82, 1);
    pub const MPLS_TC: Field = f(83, 1);
    pub const MPLS_BOS: Field = f(84, 1);
    pub const MPLS_TTL: Field = f(85, 1);
    pub const MPLS_LABEL: Field = f(88, 4);
    pub const ARP_SIP: Field = f(92, 4);
    pub const ARP_TIP: Field = f(96, 4);
    pub const ARP_SHA: Field = f(100, 6);
    pub const ARP_THA: Field = f(106, 6);
}

/// Bits of [`field::FLAGS`] (and `rule::ADDR_V4`/`ADDR_V6`, the address type).
pub const FLAG_FRAG: u8 = 1;
pub const FLAG_FIRSTFRAG: u8 = 2;

/// A key (or a mask): the fields big-endian at their offsets, as the words' bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key(pub [u8; BYTES]);

impl Default for Key {
    fn default() -> Self {
        Key([0; BYTES])
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i % 8 == 0 && i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl Key {
    pub fn set(&mut self, fld: Field, bytes: &[u8]) {
        let n = fld.len.min(bytes.len());
        self.0[fld.offset..fld.offset + n].copy_from_slice(&bytes[..n]);
    }
    pub fn set_u8(&mut self, fld: Field, v: u8) {
        self.0[fld.offset] = v;
    }
    pub fn set_u16(&mut self, fld: Field, v: u16) {
        self.put(fld, v.to_be_bytes());
    }
    pub fn set_u32(&mut self, fld: Field, v: u32) {
        self.put(fld, v.to_be_bytes());
    }
    /// A field of `N` bytes: a fixed-size copy (the hot path's; `set` copies a run-time
    /// length, which becomes a `memcpy` call).
    #[inline]
    pub fn put<const N: usize>(&mut self, fld: Field, v: [u8; N]) {
        if let Some(dst) = self.0.get_mut(fld.offset..fld.offset + N) {
            dst.copy_from_slice(&v);
        }
    }
    /// A field of `N` bytes straight from `p` at `at` (left as it is, zero in a fresh key,
    /// when `p` is too short): no `[u8; N]` built on the stack between, whose narrow stores
    /// the key's wide loads then waited on (measured in weir-bench flow).
    #[inline]
    pub fn put_from<const N: usize>(&mut self, fld: Field, p: &[u8], at: usize) {
        if let (Some(dst), Some(src)) =
            (self.0.get_mut(fld.offset..fld.offset + N), p.get(at..at + N))
        {
            dst.copy_from_slice(src);
        }
    }
    pub fn get(&self, fld: Field) -> &[u8] {
        &self.0[fld.offset..fld.offset + fld.len]
    }
    pub fn get_u16(&self, fld: Field) -> u16 {
        u16::from_be_bytes([self.0[fld.offset], self.0[fld.offset + 1]])
    }
    /// Word `i` (native order: only ever compared and hashed, never printed).
    #[inline]
    pub fn word(&self, i: usize) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.0[i * 8..i * 8 + 8]);
        u64::from_ne_bytes(w)
    }
    /// `self & mask` byte by byte.
    pub fn and(&self, mask: &Key) -> Key {
        let mut out = *self;
        for (o, m) in out.0.iter_mut().zip(mask.0.iter()) {
            *o &= m;
        }
        out
    }
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }
}

/// The bytes of `fields`, all ones, in a key otherwise zero.
const fn bytes_of(fields: &[Field]) -> Key {
    let mut k = [0u8; BYTES];
    let mut i = 0;
    while i < fields.len() {
        let mut b = 0;
        while b < fields[i].len {
            k[fields[i].offset + b] = 0xff;
            b += 1;
        }
        i += 1;
    }
    Key(k)
}

/// The fields a rule may read without parsing past Ethernet ([`Need::of_mask`]).
const L2_ONLY: Key = bytes_of(&[field::INDEV, field::DST_MAC, field::SRC_MAC]);
/// The fields that need the transport header parsed ([`Need::of_mask`]).
const L4_FIELDS: Key = bytes_of(&[
    field::SRC_PORT,
    field::DST_PORT,
    field::TCP_FLAGS,
    field::ICMP_TYPE,
    field::ICMP_CODE,
]);

/// Which parts of a packet a rule set reads: extraction parses only those.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Need {
    /// Anything past Ethernet (VLAN tags, EtherType, and all below).
    pub l3: bool,
    /// Transport ports, TCP flags, ICMP type and code.
    pub l4: bool,
}

impl Need {
    pub const ALL: Need = Need { l3: true, l4: true };

    /// What a mask reads: past Ethernet if it sets any byte outside the `indev` and MAC
    /// fields, the transport if any byte of the ports, TCP flags, ICMP type and code.
    /// A word at a time against constant byte masks, no branch a word (a copy of the mask
    /// with the L2 fields cleared, then byte loops, were ~25 instructions of every insert's
    /// compile: flow-insert-5).
    pub fn of_mask(mask: &Key) -> Need {
        let (mut l3, mut l4) = (0u64, 0u64);
        for i in 0..WORDS {
            let w = mask.word(i);
            l3 |= w & !L2_ONLY.word(i);
            l4 |= w & L4_FIELDS.word(i);
        }
        Need { l3: l3 != 0 || l4 != 0, l4: l4 != 0 }
    }

    pub fn union(self, other: Need) -> Need {
        Need { l3: self.l3 || other.l3, l4: self.l4 || other.l4 }
    }
}

/// Where the headers of a packet start, as extraction found them (actions use them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offsets {
    /// Bytes of VLAN tags after the Ethernet addresses.
    pub vlan_tags: u8,
    /// Network header (after Ethernet and tags), when the packet is long enough.
    pub network: Option<usize>,
    /// Transport header of an IPv4/IPv6 packet that is not a fragment.
    pub transport: Option<usize>,
    /// 4 or 6 for IP packets.
    pub ip_version: u8,
    pub ip_proto: u8,
}

fn be16(p: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*p.get(at)?, *p.get(at + 1)?]))
}

/// Extract the flow key of an Ethernet frame that came in on interface `indev` (an id
/// from the rule set's device table; 0 for unknown).
pub fn extract(p: &[u8], indev: u32, need: Need) -> (Key, Offsets) {
    let mut k = Key::default();
    let mut off = Offsets::default();
    extract_into(p, indev, need, &mut k, &mut off);
    (k, off)
}

/// [`extract`] into a key in place (reset first): the batch path fills its array of keys
/// without copying each 112-byte key out of a return value (measured: the copy after
/// the field stores stalled on store forwarding).
///
/// The offsets too go to the caller's place: returned, the narrow stores that fill them
/// stalled the wide copy out (measured: most of extraction's time at one mask).
#[inline]
pub fn extract_into(p: &[u8], indev: u32, need: Need, key: &mut Key, off: &mut Offsets) {
    *key = Key::default();
    extract_into_zeroed(p, indev, need, key, off);
}

/// [`extract_into`] into a key that is all zero already (a batch's fresh array of keys:
/// zeroing each again was 6% of a one-mask batch in `perf`).
#[inline]
pub(crate) fn extract_into_zeroed(
    p: &[u8],
    indev: u32,
    need: Need,
    key: &mut Key,
    off: &mut Offsets,
) {
    if need.l3 && ipv4_plain(p, indev, need, key, off) {
        return;
    }
    extract_general(p, indev, need, key, off);
}

/// The common frame, untagged IPv4 with a 20-byte header and not a fragment, in a few
/// whole-word stores with one length check (the general path's field-by-field stores and
/// per-header checks were most of a one-mask lookup's fixed cost): false, nothing written,
/// for any other frame. The same key and offsets as [`extract_general`] (tested).
#[inline]
fn ipv4_plain(p: &[u8], indev: u32, need: Need, k: &mut Key, off: &mut Offsets) -> bool {
    let Some(h) = p.get(..34) else { return false };
    if h[12] != 0x08 || h[13] != 0x00 || h[14] != 0x45 || (h[20] & 0x3f) | h[21] != 0 {
        return false;
    }
    let proto = h[23];
    let i = indev.to_be_bytes();
    // INDEV, ETH_TYPE, IP_PROTO and FLAGS: word 0.
    k.0[0..8].copy_from_slice(&[i[0], i[1], i[2], i[3], 0x08, 0x00, proto, crate::rule::ADDR_V4]);
    // DST_MAC and SRC_MAC, as on the wire.
    k.0[field::DST_MAC.offset..field::DST_MAC.offset + 12].copy_from_slice(&h[0..12]);
    // IPV4_SRC and IPV4_DST: one word.
    k.0[field::IPV4_SRC.offset..field::IPV4_SRC.offset + 8].copy_from_slice(&h[26..34]);
    k.0[field::IP_TOS.offset] = h[15];
    k.0[field::IP_TTL.offset] = h[22];
    *off = Offsets {
        vlan_tags: 0,
        network: Some(14),
        transport: Some(34),
        ip_version: 4,
        ip_proto: proto,
    };
    if need.l4 {
        transport(p, 34, proto, k);
    }
    true
}

/// The words of the common frame's key (untagged IPv4, a 20-byte header, not a
/// fragment: `ipv4_plain`'s frame) as values in registers, the words no field of that
/// frame fills zero: the batch path takes the words its tables read straight from here,
/// with no 112-byte key zeroed, written and gathered a packet. `None` for any other frame.
/// The same words as [`extract`]'s key (tested).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlainWords {
    w0: u64,
    w1: u64,
    w2: u64,
    w4: u64,
    w9: u64,
    w10: u64,
}

impl PlainWords {
    /// Write the words into `a` at their key positions, for gathering by index (the key
    /// words this frame does not fill are left as they are: zero in a caller's array that
    /// only ever gets these six). A `match` on a run-time word number per gathered word
    /// was an indirect jump each in `perf` (issue 14).
    #[inline(always)]
    pub(crate) fn put(&self, a: &mut [u64; 16]) {
        a[0] = self.w0;
        a[1] = self.w1;
        a[2] = self.w2;
        a[4] = self.w4;
        a[9] = self.w9;
        a[10] = self.w10;
    }

    /// Key words 0, 4 and 9 ([`TUPLE_WORDS`]): the only ones of this frame that a reader
    /// of IPv4 5-tuple fields (`PlainRead::PORTS` at most) needs.
    #[inline(always)]
    pub(crate) fn tuple(&self) -> [u64; 3] {
        [self.w0, self.w4, self.w9]
    }
}

/// The key words [`PlainWords::tuple`] gives, in its order.
pub(crate) const TUPLE_WORDS: [usize; 3] = [0, 4, 9];

/// A key word from its bytes' value read little-endian (`Key::word` reads native
/// order): built with shifts in registers, not bytes on the stack (a wide load of narrow
/// stores waits for them: no store forwarding).
#[inline]
fn ne(le: u64) -> u64 {
    u64::from_ne_bytes(le.to_le_bytes())
}

/// `N` bytes of `p` from `at` read little-endian (the caller checked the length).
#[inline]
fn le_at<const N: usize>(p: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..N].copy_from_slice(&p[at..at + N]);
    u64::from_le_bytes(b)
}

/// Which of the common frame's optional fields [`ipv4_plain_words`] computes, as bits
/// (a const parameter: each flavour compiled without the others' code): those under a
/// caller's mask of the key. A batch path's tables gather a few bytes of a few words (the
/// bench's 5-tuple rules read the protocol, the addresses and a port), and the MAC words,
/// TCP flags, TOS, TTL and ICMP words computed besides were most of the one-mask row's
/// extraction (issue 14). Word 0 and the addresses are always computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlainRead(pub(crate) u8);

impl PlainRead {
    /// Key word 1 (DST_MAC, SRC_MAC's first two bytes).
    pub(crate) const W1: u8 = 1;
    /// Key word 2 (SRC_MAC's last four bytes; the absent VLAN's fields).
    pub(crate) const W2: u8 = 2;
    pub(crate) const PORTS: u8 = 4;
    pub(crate) const FLAGS: u8 = 8;
    pub(crate) const TOS_TTL: u8 = 16;
    /// Key word 10 (of this frame: ICMP type and code only).
    pub(crate) const ICMP: u8 = 32;
    pub(crate) const ALL: u8 = 63;

    /// What a reader of the key's bytes under `mask` (nonzero bytes: read) needs.
    pub(crate) fn of(mask: &Key) -> PlainRead {
        let any = |fl: Field| mask.get(fl).iter().any(|&b| b != 0);
        let bit = |on: bool, b: u8| if on { b } else { 0 };
        PlainRead(
            bit(mask.word(1) != 0, Self::W1)
                | bit(mask.word(2) != 0, Self::W2)
                | bit(any(field::SRC_PORT) || any(field::DST_PORT), Self::PORTS)
                | bit(any(field::TCP_FLAGS), Self::FLAGS)
                | bit(any(field::IP_TOS) || any(field::IP_TTL), Self::TOS_TTL)
                | bit(mask.word(10) != 0, Self::ICMP),
        )
    }

    /// Whether `READ`'s fields hold every field this reads.
    pub(crate) fn within(self, read: u8) -> bool {
        self.0 & !read == 0
    }
}

/// The common frame's [`PlainWords`] (`None` for any other frame): the bytes of the
/// fields `READ` names (bits of [`PlainRead`]) are the key's, of the other optional
/// fields zero instead.
// Inlined into the batch loop: returned through memory, its six words were a call and
// a round trip through the stack a packet.
#[inline(always)]
pub(crate) fn ipv4_plain_words<const READ: u8>(
    p: &[u8],
    indev: u32,
    need: Need,
) -> Option<PlainWords> {
    let read = |b: u8| READ & b != 0;
    if !need.l3 {
        return None;
    }
    let h = p.get(..34)?;
    // `ipv4_plain`'s test (EtherType 0x0800, version 4 with a 20-byte header, no fragment
    // offset or more-fragments flag) as two loads and masks instead of five byte compares
    // (issue 14: the one-mask row's extraction).
    if le_at::<4>(h, 12) & 0x00ff_ffff != 0x0045_0008 || le_at::<2>(h, 20) & 0xff3f != 0 {
        return None;
    }
    let proto = h[23];
    // INDEV (big-endian), ETH_TYPE 0x0800, IP_PROTO, FLAGS.
    let w0 = u64::from(u32::from_le_bytes(indev.to_be_bytes()))
        | 0x08 << 32
        | u64::from(proto) << 48
        | u64::from(crate::rule::ADDR_V4) << 56;
    // Key bytes 8..16: DST_MAC and the first two bytes of SRC_MAC, as on the wire; 16..24:
    // the rest of SRC_MAC, then the (absent) VLAN's fields; 32..40: IPV4_SRC, IPV4_DST.
    let w1 = if read(PlainRead::W1) { le_at::<8>(h, 0) } else { 0 };
    let w2 = if read(PlainRead::W2) { le_at::<4>(h, 8) } else { 0 };
    let w4 = le_at::<8>(h, 26);
    // Key bytes 72..80: SRC_PORT, DST_PORT, TCP_FLAGS (as `transport` fills them), IP_TOS,
    // IP_TTL; 80..88: ICMP_TYPE and ICMP_CODE, the rest zero for this frame.
    let mut w9 =
        if read(PlainRead::TOS_TTL) { u64::from(h[15]) << 48 | u64::from(h[22]) << 56 } else { 0 };
    let mut w10 = 0;
    if need.l4 && read(PlainRead::PORTS | PlainRead::FLAGS | PlainRead::ICMP) {
        const AT: usize = 34;
        let plus_1 = usize::from(PORTS_AT_PLUS_1[usize::from(proto)]);
        if plus_1 != 0 {
            let at_ports = AT + plus_1 - 1;
            if read(PlainRead::PORTS) && p.len() >= at_ports + 4 {
                w9 |= le_at::<4>(p, at_ports);
            }
            if read(PlainRead::FLAGS) {
                if let Some(flags) = tcp_flags(p, proto, AT) {
                    w9 |= u64::from(u16::from_le_bytes(flags.to_be_bytes())) << 32;
                }
            }
        } else if read(PlainRead::ICMP)
            && matches!(proto, ipproto::ICMP | ipproto::ICMPV6)
            && p.len() >= AT + 2
        {
            w10 = le_at::<2>(p, AT);
        }
    }
    Some(PlainWords { w0: ne(w0), w1: ne(w1), w2: ne(w2), w4: ne(w4), w9: ne(w9), w10: ne(w10) })
}

/// Extraction for every frame, header by header.
fn extract_general(p: &[u8], indev: u32, need: Need, key: &mut Key, off: &mut Offsets) {
    *off = Offsets::default();
    let k = key;
    k.set_u32(field::INDEV, indev);
    if p.len() < 14 {
        return;
    }
    k.put_from::<6>(field::DST_MAC, p, 0);
    k.put_from::<6>(field::SRC_MAC, p, 6);
    if !need.l3 {
        return;
    }
    let mut proto = be16(p, 12).unwrap_or(0);
    if proto < 0x0600 {
        // An 802.3 length, not a type: skb->protocol as eth_type_trans sets it (Novell's
        // raw 802.3 when the payload starts 0xffff, else 802.2 LLC), which flower sees.
        proto = if be16(p, 14) == Some(0xffff) { 0x0001 } else { 0x0004 };
        k.set_u16(field::ETH_TYPE, proto);
        return;
    }
    let mut at = 14;
    // VLAN tags: 802.1Q and 802.1ad, the first in vlan_*, the second in cvlan_* (the
    // dissector keeps two; a third tag is left as the EtherType, as the kernel leaves it).
    for depth in 0..2 {
        if proto != ethertype::VLAN_8021Q && proto != ethertype::VLAN_8021AD {
            break;
        }
        let (Some(tci), Some(next)) = (be16(p, at), be16(p, at + 2)) else {
            // A tag cut short: the kernel's dissection stops with n_proto the tag's TPID.
            k.set_u16(field::ETH_TYPE, proto);
            return;
        };
        let (id, prio, tpid) = if depth == 0 {
            (field::VLAN_ID, field::VLAN_PRIO, field::VLAN_TPID)
        } else {
            (field::CVLAN_ID, field::CVLAN_PRIO, field::CVLAN_TPID)
        };
        k.set_u16(id, tci & 0x0fff);
        k.set_u8(prio, (tci >> 13) as u8);
        k.set_u16(tpid, proto);
        proto = next;
        at += 4;
        off.vlan_tags += 4;
    }
    k.set_u16(field::ETH_TYPE, proto);
    off.network = (p.len() >= at).then_some(at);
    match proto {
        ethertype::IP => ipv4(p, at, k, off, need),
        ethertype::IPV6 => ipv6(p, at, k, off, need),
        ethertype::ARP | ethertype::REVARP => arp(p, at, k),
        ethertype::MPLS | ethertype::MPLS_MULTI => {
            if let Some(lse) = p.get(at..at + 4) {
                let v = u32::from_be_bytes([lse[0], lse[1], lse[2], lse[3]]);
                k.set_u32(field::MPLS_LABEL, v >> 12);
                k.set_u8(field::MPLS_TC, ((v >> 9) & 7) as u8);
                k.set_u8(field::MPLS_BOS, ((v >> 8) & 1) as u8);
                k.set_u8(field::MPLS_TTL, (v & 0xff) as u8);
            }
        }
        _ => {}
    }
}

fn ipv4(p: &[u8], at: usize, k: &mut Key, off: &mut Offsets, need: Need) {
    let Some(h) = p.get(at..at + 20) else { return };
    let ihl = usize::from(h[0] & 0x0f) * 4;
    if ihl < 20 || p.len() < at + ihl {
        return;
    }
    let proto = h[9];
    // The kernel's control.addr_type: which address key the packet filled.
    k.set_u8(field::FLAGS, crate::rule::ADDR_V4);
    off.ip_version = 4;
    off.ip_proto = proto;
    k.set_u8(field::IP_PROTO, proto);
    k.put_from::<4>(field::IPV4_SRC, h, 12);
    k.put_from::<4>(field::IPV4_DST, h, 16);
    k.set_u8(field::IP_TOS, h[1]);
    k.set_u8(field::IP_TTL, h[8]);
    let frag = u16::from_be_bytes([h[6], h[7]]);
    if frag & 0x3fff != 0 {
        let first = if frag & 0x1fff == 0 { FLAG_FIRSTFRAG } else { 0 };
        k.set_u8(field::FLAGS, crate::rule::ADDR_V4 | FLAG_FRAG | first);
        return;
    }
    off.transport = Some(at + ihl);
    if need.l4 {
        transport(p, at + ihl, proto, k);
    }
}

fn ipv6(p: &[u8], at: usize, k: &mut Key, off: &mut Offsets, need: Need) {
    let Some(h) = p.get(at..at + 40) else { return };
    off.ip_version = 6;
    k.set_u8(field::FLAGS, crate::rule::ADDR_V6);
    k.put_from::<16>(field::IPV6_SRC, h, 8);
    k.put_from::<16>(field::IPV6_DST, h, 24);
    k.set_u8(field::IP_TOS, (u16::from_be_bytes([h[0], h[1]]) >> 4) as u8);
    k.set_u8(field::IP_TTL, h[7]);
    let mut next = h[6];
    let mut at = at + 40;
    // Extension headers the dissector steps over; a fragment header ends it. The kernel
    // loops on these without a count; the packet's length bounds the loop here.
    loop {
        match next {
            ipproto::HOPOPTS | ipproto::ROUTING | ipproto::DSTOPTS => {
                let (Some(&nh), Some(&len)) = (p.get(at), p.get(at + 1)) else {
                    k.set_u8(field::IP_PROTO, next);
                    off.ip_proto = next;
                    return;
                };
                next = nh;
                at += (usize::from(len) + 1) * 8;
            }
            ipproto::FRAGMENT => {
                let Some(fh) = p.get(at..at + 8) else {
                    k.set_u8(field::IP_PROTO, next);
                    off.ip_proto = next;
                    return;
                };
                let offset = u16::from_be_bytes([fh[2], fh[3]]) & 0xfff8;
                let first = if offset == 0 { FLAG_FIRSTFRAG } else { 0 };
                k.set_u8(field::FLAGS, crate::rule::ADDR_V6 | FLAG_FRAG | first);
                // ip_proto stays 44: the kernel takes the fragment's next header only
                // with FLOW_DISSECTOR_F_PARSE_1ST_FRAG.
                k.set_u8(field::IP_PROTO, next);
                off.ip_proto = next;
                return;
            }
            _ => break,
        }
    }
    k.set_u8(field::IP_PROTO, next);
    off.ip_proto = next;
    off.transport = Some(at);
    if need.l4 {
        transport(p, at, next, k);
    }
}

fn transport(p: &[u8], at: usize, proto: u8, k: &mut Key) {
    if let Some(at_ports) = ports_offset(proto, at) {
        if let (Some(s), Some(d)) = (be16(p, at_ports), be16(p, at_ports + 2)) {
            k.set_u16(field::SRC_PORT, s);
            k.set_u16(field::DST_PORT, d);
        }
        if let Some(flags) = tcp_flags(p, proto, at) {
            k.set_u16(field::TCP_FLAGS, flags);
        }
    } else if matches!(proto, ipproto::ICMP | ipproto::ICMPV6) {
        if let (Some(&t), Some(&c)) = (p.get(at), p.get(at + 1)) {
            k.set_u8(field::ICMP_TYPE, t);
            k.set_u8(field::ICMP_CODE, c);
        }
    }
}

/// Where a transport header at `at` keeps its two 16-bit ports, for the protocols that have
/// them (the kernel's proto_ports_offset: AH's "ports" are 4 bytes in, the others' at 0).
#[inline]
const fn ports_offset(proto: u8, at: usize) -> Option<usize> {
    match proto {
        ipproto::TCP
        | ipproto::UDP
        | ipproto::UDPLITE
        | ipproto::SCTP
        | ipproto::DCCP
        | ipproto::ESP => Some(at),
        ipproto::AH => Some(at + 4),
        _ => None,
    }
}

/// [`ports_offset`] of a header at 0, + 1 (0: no ports), for every protocol: the batch
/// path's one load a packet instead of a range test, a bit test and AH's case (issue 14).
const PORTS_AT_PLUS_1: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        if let Some(at) = ports_offset(i as u8, 0) {
            t[i] = at as u8 + 1;
        }
        i += 1;
    }
    t
};

/// A TCP header's 12 flag bits, when the header at `at` is whole (data offset >= 5 words
/// and 20 bytes captured).
#[inline]
fn tcp_flags(p: &[u8], proto: u8, at: usize) -> Option<u16> {
    if proto != ipproto::TCP {
        return None;
    }
    let word = be16(p, at + 12)?;
    (usize::from(word >> 12) >= 5 && p.len() >= at + 20).then_some(word & 0x0fff)
}

fn arp(p: &[u8], at: usize, k: &mut Key) {
    let Some(a) = p.get(at..at + 28) else { return };
    let (hrd, pro, op) = (
        u16::from_be_bytes([a[0], a[1]]),
        u16::from_be_bytes([a[2], a[3]]),
        u16::from_be_bytes([a[6], a[7]]),
    );
    if hrd != 1 || pro != ethertype::IP || a[4] != 6 || a[5] != 4 || (op != 1 && op != 2) {
        return;
    }
    k.set_u8(field::ARP_OP, op as u8);
    k.put_from::<6>(field::ARP_SHA, a, 8);
    k.put_from::<4>(field::ARP_SIP, a, 14);
    k.put_from::<6>(field::ARP_THA, a, 18);
    k.put_from::<4>(field::ARP_TIP, a, 24);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Need::of_mask` a word at a time against its definition byte by byte (any byte
    /// outside the L2 fields; any byte of the L4 fields), for every single byte of a mask
    /// at its lowest and highest bit, and for masks of a few random bytes.
    #[test]
    fn need_of_a_mask_is_its_bytes_outside_l2_and_inside_l4() {
        let l2 = [field::INDEV, field::DST_MAC, field::SRC_MAC];
        let l4 = [
            field::SRC_PORT,
            field::DST_PORT,
            field::TCP_FLAGS,
            field::ICMP_TYPE,
            field::ICMP_CODE,
        ];
        let within =
            |b: usize, fs: &[Field]| fs.iter().any(|f| (f.offset..f.offset + f.len).contains(&b));
        let by_bytes = |m: &Key| {
            let l4 = (0..BYTES).any(|b| m.0[b] != 0 && within(b, &l4));
            let l3 = (0..BYTES).any(|b| m.0[b] != 0 && !within(b, &l2));
            Need { l3: l3 || l4, l4 }
        };
        let mut masks = vec![Key::default()];
        for b in 0..BYTES {
            for v in [0x01, 0x80] {
                let mut m = Key::default();
                m.0[b] = v;
                masks.push(m);
            }
        }
        let mut rng = weir_testkit::SplitMix64::new(0x0f);
        for _ in 0..2000 {
            let mut m = Key::default();
            for _ in 0..3 {
                m.0[rng.below_usize(BYTES)] = rng.next_u64() as u8 | 1;
            }
            masks.push(m);
        }
        let (mut l3s, mut l4s) = (0, 0);
        for m in &masks {
            let n = Need::of_mask(m);
            assert_eq!(n, by_bytes(m), "mask {m:?}");
            l3s += usize::from(n.l3);
            l4s += usize::from(n.l4);
        }
        // Both answers met both ways.
        assert!(l4s > 0 && l3s > l4s && l3s < masks.len(), "{l3s} {l4s}");
    }

    /// The plain-IPv4 shortcut gives what the general path gives, on frames around its
    /// conditions (EtherType, version and header length, fragment bits, length, protocol).
    #[test]
    fn ipv4_shortcut_agrees_with_the_general_path() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let (mut taken, mut declined) = (0, 0);
        // Masks of one byte of the common frame's optional fields each (the MAC addresses,
        // key bytes 8..20; ports, TCP flags, TOS, TTL, ICMP type and code, 72..82), and of
        // them all.
        let mut masks: Vec<Key> = (8..20)
            .chain(72..82)
            .map(|b| {
                let mut m = Key::default();
                m.0[b] = 0xff;
                m
            })
            .collect();
        let mut all = Key::default();
        for m in &masks {
            all = Key(std::array::from_fn(|b| all.0[b] | m.0[b]));
        }
        masks.push(all);
        for n in 0..20_000 {
            let len = (next() % 80) as usize;
            let mut f: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            // Most frames near the shortcut's case, some changed in one place.
            if len >= 14 && n % 8 != 0 {
                f[12] = 0x08;
                f[13] = 0x00;
            }
            if len >= 15 && n % 4 != 1 {
                f[14] = 0x45;
            }
            if len >= 22 && n % 3 != 2 {
                // The flags byte's reserved and don't-fragment bits (ignored), and each
                // end of the fragment offset's low byte (a fragment: declined).
                f[20] &= if n % 5 == 0 { 0xc0 } else { 0 };
                f[21] = if n % 7 == 0 { [1, 0x40, 0x80][n / 7 % 3] } else { 0 };
            }
            if len >= 24 && n % 2 == 0 {
                f[23] = [6, 17, 1, 132, 51, 50, 33, 136][(next() % 8) as usize];
            }
            let indev = (next() % 3) as u32;
            for need in [Need::default(), Need { l3: true, l4: false }, Need::ALL] {
                let (mut k1, mut o1) = (Key::default(), Offsets::default());
                let (mut k2, mut o2) = (Key::default(), Offsets::default());
                extract_into_zeroed(&f, indev, need, &mut k1, &mut o1);
                extract_general(&f, indev, need, &mut k2, &mut o2);
                assert_eq!((k1, o1), (k2, o2), "frame {f:02x?}, {need:?}");
                let mut k3 = Key::default();
                // (extraction takes the shortcut only when the rules read past Ethernet)
                let took = need.l3 && ipv4_plain(&f, indev, need, &mut k3, &mut o1);
                if took {
                    taken += 1;
                } else {
                    declined += 1;
                }
                // The words the batch path reads: every word as the general path's key
                // has it, on exactly the frames the shortcut takes.
                let words = ipv4_plain_words::<{ PlainRead::ALL }>(&f, indev, need);
                assert_eq!(words.is_some(), took, "frame {f:02x?}, {need:?}");
                if let Some(w) = words {
                    // As the batch path gathers them: from an array `put` writes into,
                    // the words it does not write staying zero.
                    let mut a = [0u64; 16];
                    w.put(&mut a);
                    for (i, &x) in a.iter().enumerate().take(WORDS) {
                        assert_eq!(x, k2.word(i), "word {i}, frame {f:02x?}, {need:?}");
                    }
                }
                // Reading some fields only, in each flavour the batch path compiles that
                // holds them: those fields' bytes as the key has them.
                let mask = masks[n % masks.len()];
                let read = PlainRead::of(&mask);
                // Every optional field asks for its flavour's code; all of them, for all.
                assert_ne!(read.0, 0, "{mask:?}");
                assert!(n % masks.len() + 1 < masks.len() || read.0 == PlainRead::ALL);
                check::<{ PlainRead::ALL }>(&f, indev, need, &mask, &k2);
                if read.within(PlainRead::PORTS) {
                    check::<{ PlainRead::PORTS }>(&f, indev, need, &mask, &k2);
                }
            }
        }
        // Both sides of the shortcut were exercised.
        assert!(taken > 5_000 && declined > 5_000, "taken {taken}, declined {declined}");
    }

    /// `ipv4_plain_words::<READ>`'s words under `mask` are `key`'s, when it takes the frame.
    fn check<const READ: u8>(f: &[u8], indev: u32, need: Need, mask: &Key, key: &Key) {
        if let Some(w) = ipv4_plain_words::<READ>(f, indev, need) {
            let mut a = [0u64; 16];
            w.put(&mut a);
            for (i, &x) in a.iter().enumerate().take(WORDS) {
                let m = mask.word(i);
                assert_eq!(x & m, key.word(i) & m, "word {i}, READ {READ}, frame {f:02x?}");
            }
        }
    }

    #[test]
    fn fields_do_not_overlap_and_fit() {
        let all = [
            field::INDEV,
            field::ETH_TYPE,
            field::IP_PROTO,
            field::FLAGS,
            field::DST_MAC,
            field::SRC_MAC,
            field::VLAN_ID,
            field::VLAN_PRIO,
            field::VLAN_TPID,
            field::CVLAN_ID,
            field::CVLAN_PRIO,
            field::CVLAN_TPID,
            field::IPV4_SRC,
            field::IPV4_DST,
            field::IPV6_SRC,
            field::IPV6_DST,
            field::SRC_PORT,
            field::DST_PORT,
            field::TCP_FLAGS,
            field::IP_TOS,
            field::IP_TTL,
            field::ICMP_TYPE,
            field::ICMP_CODE,
            field::ARP_OP,
            field::MPLS_TC,
            field::MPLS_BOS,
            field::MPLS_TTL,
            field::MPLS_LABEL,
            field::ARP_SIP,
            field::ARP_TIP,
            field::ARP_SHA,
            field::ARP_THA,
        ];
        let mut used = [false; BYTES];
        for fl in all {
            for b in &mut used[fl.offset..fl.offset + fl.len] {
                assert!(!*b, "overlap at {fl:?}");
                *b = true;
            }
        }
    }
}
