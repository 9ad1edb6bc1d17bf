//! IEEE 802.11 captures (bare, or after a radiotap, AVS or Prism radio header): the
//! variable offsets, the MAC address tests and the `type`/`subtype`/`dir` tests, with
//! libpcap's semantics.
//!
//! Two offsets depend on the packet. The radio header's length (read from the header:
//! radiotap's little-endian length at 2, AVS's big-endian one at 4, 144 for Prism unless
//! the first word carries the AVS cookie) is where the 802.11 header starts; the 802.11
//! header's length (24, plus 2 for a QoS data frame, rounded up to 4 when radiotap says
//! the frame is padded) is where the LLC payload starts. libpcap computes them once, at the
//! start of the program, and only when the expression reads past them: the loads of that
//! computation can then reject a short packet whatever the expression says. weir does the
//! same: the lowering reads the offsets from two scratch slots ([`WlanSlots`]) and, once
//! the whole expression is lowered, [`Lowerer::wlan_prologue`] puts the computation of
//! the slots it read in front. libpcap never optimizes such a program (its prologue has
//! jumps the optimizer cannot see), which matters for "rejects all packets".

use weir_filter::{BinOp, CmpOp, Expr, Pred, Size};

use super::{CompileError, Layer, LinkType, Lowerer, Offset};
use crate::ast::{Dir, NameOrNum, Span, WlanTest};

/// Frame control, first byte: the type bits and the subtype bits.
pub(crate) const TYPE_MASK: u32 = 0x0c;
pub(crate) const SUBTYPE_MASK: u32 = 0xf0;
const TYPE_MGT: u32 = 0x00;
const TYPE_CTL: u32 = 0x04;
const TYPE_DATA: u32 = 0x08;
const SUBTYPE_CTS: u32 = 0xc0;
const SUBTYPE_ACK: u32 = 0xd0;
/// Frame control, second byte: To DS and From DS.
const TO_DS: u32 = 0x01;
const FROM_DS: u32 = 0x02;
const DIR_MASK: u32 = 0x03;
/// The QoS bit of a data frame's subtype: two more header bytes.
const QOS: u32 = 0x80;

/// radiotap: the present word at 4 (loaded big-endian: bit 0 of the little-endian word is
/// 0x0100_0000), the flags field (bit 1), its "frame has padding" bit, and the extension bit.
const RADIOTAP_PRESENT_TSFT: u32 = 0x0100_0000;
const RADIOTAP_PRESENT_FLAGS: u32 = 0x0200_0000;
const RADIOTAP_PRESENT_EXT: u32 = 0x0000_0080;
const RADIOTAP_F_DATAPAD: u32 = 0x20;
/// The AVS cookie (high 20 bits of the first word) a Prism capture may carry instead.
const AVS_COOKIE: u32 = 0x8021_1000;
const PRISM_HEADER_LEN: u32 = 144;

/// 802.11 frame types by name, with their frame-control value.
const TYPES: [(&str, u32); 5] = [
    ("data", TYPE_DATA),
    ("mgt", TYPE_MGT),
    ("management", TYPE_MGT),
    ("ctl", TYPE_CTL),
    ("control", TYPE_CTL),
];

const MGT_SUBTYPES: [(&str, u32); 20] = [
    ("assocreq", 0x00),
    ("assoc-req", 0x00),
    ("assocresp", 0x10),
    ("assoc-resp", 0x10),
    ("reassocreq", 0x20),
    ("reassoc-req", 0x20),
    ("reassocresp", 0x30),
    ("reassoc-resp", 0x30),
    ("probereq", 0x40),
    ("probe-req", 0x40),
    ("proberesp", 0x50),
    ("probe-resp", 0x50),
    ("beacon", 0x80),
    ("atim", 0x90),
    ("disassoc", 0xa0),
    ("disassociation", 0xa0),
    ("auth", 0xb0),
    ("authentication", 0xb0),
    ("deauth", 0xc0),
    ("deauthentication", 0xc0),
];

const CTL_SUBTYPES: [(&str, u32); 6] = [
    ("ps-poll", 0xa0),
    ("rts", 0xb0),
    ("cts", 0xc0),
    ("ack", 0xd0),
    ("cf-end", 0xe0),
    ("cf-end-ack", 0xf0),
];

const DATA_SUBTYPES: [(&str, u32); 15] = [
    ("data", 0x00),
    ("data-cf-ack", 0x10),
    ("data-cf-poll", 0x20),
    ("data-cf-ack-poll", 0x30),
    ("null", 0x40),
    ("cf-ack", 0x50),
    ("cf-poll", 0x60),
    ("cf-ack-poll", 0x70),
    ("qos-data", 0x80),
    ("qos-data-cf-ack", 0x90),
    ("qos-data-cf-poll", 0xa0),
    ("qos-data-cf-ack-poll", 0xb0),
    ("qos", 0xc0),
    ("qos-cf-poll", 0xe0),
    ("qos-cf-ack-poll", 0xf0),
];

const DIRECTIONS: [(&str, u32); 4] = [("nods", 0), ("tods", 1), ("fromds", 2), ("dstods", 3)];

/// Every type's subtype table, in the order libpcap searches them.
const SUBTYPE_TABLES: [(u32, &[(&str, u32)]); 3] =
    [(TYPE_MGT, &MGT_SUBTYPES), (TYPE_CTL, &CTL_SUBTYPES), (TYPE_DATA, &DATA_SUBTYPES)];

fn find(table: &[(&str, u32)], name: &str) -> Option<u32> {
    table.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, v)| v)
}

fn error(span: Span, message: impl Into<String>) -> CompileError {
    CompileError::new(span, message)
}

/// The scratch slots an 802.11 capture's offsets live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WlanSlots {
    /// The radio header's length (where the 802.11 header starts); `None` without one.
    pub header: Option<u8>,
    /// Where the 802.11 payload (the LLC header) starts.
    pub payload: u8,
}

impl WlanSlots {
    /// The slots for `link`, taken first (slots 0 and 1), or `None` if it is not 802.11.
    pub fn of(link: LinkType) -> Option<WlanSlots> {
        match link {
            LinkType::Ieee80211 => Some(WlanSlots { header: None, payload: 0 }),
            LinkType::Radiotap | LinkType::Avs | LinkType::Prism | LinkType::Ppi => {
                Some(WlanSlots { header: Some(0), payload: 1 })
            }
            _ => None,
        }
    }

    /// How many slots they take.
    pub fn count(self) -> u8 {
        if self.header.is_some() {
            2
        } else {
            1
        }
    }

    /// Where the 802.11 header starts.
    pub fn header_offset(self) -> Offset {
        Offset { variable: self.header, constant: 0 }
    }

    /// Where the 802.11 payload starts.
    pub fn payload_offset(self) -> Offset {
        Offset { variable: Some(self.payload), constant: 0 }
    }
}

/// Whether `p` reads scratch slot `slot`.
pub(crate) fn reads_slot(p: &Pred, slot: u8) -> bool {
    match p {
        Pred::Const(_) | Pred::Guard(_) => false,
        Pred::Cmp { lhs, rhs, .. } => expr_reads(lhs, slot) || expr_reads(rhs, slot),
        Pred::In { value, .. } => expr_reads(value, slot),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().any(|p| reads_slot(p, slot)),
        Pred::Not(p) | Pred::Try(p) => reads_slot(p, slot),
        Pred::Store { value, .. } => expr_reads(value, slot),
        Pred::Chain(chain) => expr_reads(&chain.next, slot) || expr_reads(&chain.offset, slot),
        Pred::Pairs(pairs) => pairs.parts().any(|(guards, fields)| {
            guards.iter().any(|g| reads_slot(g, slot)) || fields.iter().any(|f| expr_reads(f, slot))
        }),
    }
}

pub(crate) fn expr_reads(e: &Expr, slot: u8) -> bool {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::Scratch(s) if *s == slot => return true,
            Expr::Const(_) | Expr::WireLen | Expr::Scratch(_) => {}
            Expr::Load { offset, .. } => stack.push(offset),
            Expr::Binary { lhs, rhs, .. } => {
                stack.push(lhs);
                stack.push(rhs);
            }
            Expr::Neg(inner) => stack.push(inner),
        }
    }
    false
}

/// `value & bit != 0`.
fn set(value: Expr, bit: u32) -> Pred {
    Pred::cmp(CmpOp::Set, value, Expr::Const(bit))
}

/// Runs `p` for its stores and its loads' bounds checks; true whatever it says.
fn always(p: Pred) -> Pred {
    Pred::Or(vec![p, Pred::Const(true)])
}

impl Lowerer<'_> {
    /// The computation of the offsets `pred` reads, in front of it: `pred` unchanged when it
    /// reads neither. Also says whether a prologue was added (libpcap then does not
    /// optimize).
    pub(crate) fn wlan_prologue(&self, pred: Pred) -> (Pred, bool) {
        let Some(slots) = self.wlan_slots else { return (pred, false) };
        let payload = reads_slot(&pred, slots.payload);
        let header = payload || slots.header.is_some_and(|h| reads_slot(&pred, h));
        if !header {
            return (pred, false);
        }
        let mut steps = Vec::new();
        if let Some(h) = slots.header {
            steps.push(self.radio_header_length(h));
        }
        if payload {
            steps.extend(self.wlan_header_length(slots));
        }
        steps.push(pred);
        (Pred::And(steps), true)
    }

    /// On PPI captures, `pred` only where PPI's header says 802.11 follows (its DLT, a
    /// little-endian word at 4), checked first, as libpcap does for every expression that
    /// ends on the PPI link (not after a `pppoes` or a tunnel, which change it).
    pub(crate) fn ppi_dlt_check(&self, pred: Pred) -> Pred {
        if self.link != LinkType::Ppi {
            return pred;
        }
        let dlt = LinkType::Ieee80211.dlt().swap_bytes();
        Pred::And(vec![Pred::eq(Expr::load_at(4, Size::Word), dlt), pred])
    }

    /// `slot := length of the radio header`, as each header keeps it.
    fn radio_header_length(&self, slot: u8) -> Pred {
        let store = |value| Pred::Store { slot, value };
        let byte = |k| Expr::load_at(k, Size::Byte);
        match self.options.linktype {
            // Little-endian 16 bits at 2 (radiotap's and PPI's headers alike).
            LinkType::Radiotap | LinkType::Ppi => store(Expr::binary(
                BinOp::Or,
                Expr::binary(BinOp::Shl, byte(3), Expr::Const(8)),
                byte(2),
            )),
            LinkType::Avs => store(Expr::load_at(4, Size::Word)),
            // A Prism header, or an AVS one when the first word has the AVS cookie.
            _ => Pred::Or(vec![
                Pred::And(vec![
                    Pred::eq(Expr::load_at(0, Size::Word).and_mask(0xffff_f000), AVS_COOKIE),
                    store(Expr::load_at(4, Size::Word)),
                ]),
                store(Expr::Const(PRISM_HEADER_LEN)),
            ]),
        }
    }

    /// `payload slot := radio header + 24`, 2 more for QoS data frames, rounded up to 4
    /// bytes on radiotap when its flags say the data frame is padded (not when the
    /// expression has a `pppoes`, as in libpcap).
    fn wlan_header_length(&self, slots: WlanSlots) -> Vec<Pred> {
        let pl = slots.payload;
        let header = slots.header_offset();
        let add = |k: u32| Pred::Store { slot: pl, value: Expr::Scratch(pl).plus(k) };
        let fc = Expr::load(header.expr(0), Size::Byte);
        let mut data_steps = vec![
            set(fc.clone(), TYPE_DATA),
            Pred::not(set(fc.clone(), TYPE_CTL)),
            always(Pred::And(vec![set(fc, QOS), add(2)])),
        ];
        // libpcap builds this computation after the whole expression, checking the link
        // type it ends with: after a `pppoes` that is PPP, and the padding is not rounded.
        if self.options.linktype == LinkType::Radiotap && !self.pppoes_seen {
            let present = || Expr::load_at(4, Size::Word);
            let flags_at = |k| set(Expr::load_at(k, Size::Byte), RADIOTAP_F_DATAPAD);
            let padded = Pred::Or(vec![
                Pred::And(vec![set(present(), RADIOTAP_PRESENT_TSFT), flags_at(16)]),
                Pred::And(vec![Pred::not(set(present(), RADIOTAP_PRESENT_TSFT)), flags_at(8)]),
            ]);
            let round =
                Pred::Store { slot: pl, value: Expr::Scratch(pl).plus(3).and_mask(0xffff_fffc) };
            data_steps.push(always(Pred::And(vec![
                set(present(), RADIOTAP_PRESENT_FLAGS),
                Pred::not(set(present(), RADIOTAP_PRESENT_EXT)),
                padded,
                round,
            ])));
        }
        vec![Pred::Store { slot: pl, value: header.expr(24) }, always(Pred::And(data_steps))]
    }

    /// Whether `type`/`subtype`/`dir` are allowed: on 802.11 links, except PPI (libpcap's
    /// list of link types for them leaves it out).
    fn frame_control_tests(&self) -> bool {
        self.link.is_ieee80211() && self.link != LinkType::Ppi
    }

    /// The frame-control byte.
    fn fc0(&self) -> Expr {
        self.load(Layer::LinkHdr, 0, Size::Byte)
    }

    /// A data frame: type bits 10 (libpcap tests 0x04 clear, then 0x08 set).
    pub(crate) fn wlan_data_frame(&self) -> Pred {
        Pred::and([Pred::not(set(self.fc0(), TYPE_CTL)), set(self.fc0(), TYPE_DATA)])
    }

    /// `(frame control byte k & mask) == value`.
    fn fc_is(&self, k: u32, mask: u32, value: u32) -> Pred {
        self.cmp_field(Layer::LinkHdr, k, Size::Byte, mask, value)
    }

    /// A 6-byte address at `offset` in the 802.11 header (word first, as libpcap).
    fn wlan_addr(&self, offset: u32, mac: &[u8; 6]) -> Pred {
        let word = u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]);
        let half = u32::from(u16::from_be_bytes([mac[0], mac[1]]));
        Pred::and([
            self.cmp_field(Layer::LinkHdr, offset + 2, Size::Word, u32::MAX, word),
            self.cmp_field(Layer::LinkHdr, offset, Size::Half, u32::MAX, half),
        ])
    }

    /// An 802.11 MAC address test with a direction (libpcap's gen_wlanhostop).
    pub(crate) fn wlan_host(&self, mac: &[u8; 6], dir: Option<Dir>) -> Pred {
        let fc1 = |bit| set(self.load(Layer::LinkHdr, 1, Size::Byte), bit);
        let not_ctl = || Pred::not(set(self.fc0(), TYPE_CTL));
        let data = || set(self.fc0(), TYPE_DATA);
        let mgt = || Pred::not(set(self.fc0(), TYPE_DATA));
        match dir {
            Some(Dir::Src) => {
                // Data frames: SA at 24 (To and From DS), 16 (From DS), 10 (neither);
                // management frames: 10; control frames have none.
                let from_ds = Pred::and([
                    fc1(FROM_DS),
                    Pred::or([
                        Pred::and([Pred::not(fc1(TO_DS)), self.wlan_addr(16, mac)]),
                        Pred::and([fc1(TO_DS), self.wlan_addr(24, mac)]),
                    ]),
                ]);
                let data_frame = Pred::and([
                    data(),
                    Pred::or([
                        Pred::and([Pred::not(fc1(FROM_DS)), self.wlan_addr(10, mac)]),
                        from_ds,
                    ]),
                ]);
                Pred::and([
                    not_ctl(),
                    Pred::or([Pred::and([mgt(), self.wlan_addr(10, mac)]), data_frame]),
                ])
            }
            Some(Dir::Dst) => {
                // Data frames: DA at 16 with To DS, else 4; management frames: 4.
                let data_frame = Pred::and([
                    data(),
                    Pred::or([
                        Pred::and([Pred::not(fc1(TO_DS)), self.wlan_addr(4, mac)]),
                        Pred::and([fc1(TO_DS), self.wlan_addr(16, mac)]),
                    ]),
                ]);
                Pred::and([
                    not_ctl(),
                    Pred::or([Pred::and([mgt(), self.wlan_addr(4, mac)]), data_frame]),
                ])
            }
            Some(Dir::SrcAndDst) => Pred::and([
                self.wlan_host(mac, Some(Dir::Src)),
                self.wlan_host(mac, Some(Dir::Dst)),
            ]),
            None | Some(Dir::SrcOrDst) => {
                Pred::or([self.wlan_host(mac, Some(Dir::Src)), self.wlan_host(mac, Some(Dir::Dst))])
            }
            Some(Dir::Addr1) => self.wlan_addr(4, mac),
            // Not in CTS and ACK frames.
            Some(Dir::Addr2) => Pred::and([self.has_addr2(), self.wlan_addr(10, mac)]),
            // Not in control frames.
            Some(Dir::Addr3) => {
                Pred::and([Pred::not(self.fc_is(0, TYPE_MASK, TYPE_CTL)), self.wlan_addr(16, mac)])
            }
            // Only with both To DS and From DS.
            Some(Dir::Addr4) => Pred::and([self.fc_is(1, DIR_MASK, 0x03), self.wlan_addr(24, mac)]),
            // addr1, except in management frames.
            Some(Dir::Ra) => Pred::and([data(), self.wlan_addr(4, mac)]),
            // addr2, except in management, CTS and ACK frames.
            Some(Dir::Ta) => Pred::and([self.has_addr2(), data(), self.wlan_addr(10, mac)]),
        }
    }

    /// Not a CTS or ACK control frame.
    fn has_addr2(&self) -> Pred {
        Pred::or([
            Pred::not(self.fc_is(0, TYPE_MASK, TYPE_CTL)),
            Pred::and([
                Pred::not(self.fc_is(0, SUBTYPE_MASK, SUBTYPE_CTS)),
                Pred::not(self.fc_is(0, SUBTYPE_MASK, SUBTYPE_ACK)),
            ]),
        ])
    }

    /// `link multicast` on 802.11: the group bit of the destination address, where the
    /// frame has one (as [`Lowerer::wlan_host`] finds it).
    pub(crate) fn wlan_multicast(&self) -> Pred {
        let fc1 = |bit| set(self.load(Layer::LinkHdr, 1, Size::Byte), bit);
        let group = |k| set(self.load(Layer::LinkHdr, k, Size::Byte), 0x01);
        let data_frame = Pred::and([
            set(self.fc0(), TYPE_DATA),
            Pred::or([
                Pred::and([Pred::not(fc1(TO_DS)), group(4)]),
                Pred::and([fc1(TO_DS), group(16)]),
            ]),
        ]);
        Pred::and([
            Pred::not(set(self.fc0(), TYPE_CTL)),
            Pred::or([Pred::and([Pred::not(set(self.fc0(), TYPE_DATA)), group(4)]), data_frame]),
        ])
    }

    /// `type`, `subtype` and `dir` (libpcap's gen_p80211_type and gen_p80211_fcdir), after
    /// the grammar's name and value checks.
    pub(crate) fn wlan(&mut self, t: &WlanTest, span: Span) -> Result<Pred, CompileError> {
        let (k, mask, value) = match t {
            WlanTest::Type { ty, subtype } => {
                let ty = wlan_type(ty, span)?;
                match subtype {
                    None => (0, TYPE_MASK, ty),
                    Some(s) => (0, TYPE_MASK | SUBTYPE_MASK, ty | wlan_subtype(ty, s, span)?),
                }
            }
            WlanTest::Subtype(name) => {
                // A bare subtype name implies its type; libpcap searches every table.
                let value = SUBTYPE_TABLES
                    .iter()
                    .find_map(|&(ty, table)| find(table, name).map(|s| ty | s))
                    .ok_or_else(|| error(span, "unknown 802.11 type name"))?;
                (0, TYPE_MASK | SUBTYPE_MASK, value)
            }
            WlanTest::Dir(dir) => {
                let value = match dir {
                    NameOrNum::Num(n) => *n,
                    NameOrNum::Name(name) => find(&DIRECTIONS, name)
                        .ok_or_else(|| error(span, "unknown 802.11 direction"))?,
                };
                if !self.frame_control_tests() {
                    return Err(error(span, "frame direction supported only with 802.11 headers"));
                }
                (1, DIR_MASK, value)
            }
        };
        if !self.frame_control_tests() {
            return Err(error(span, "802.11 link-layer types supported only on 802.11"));
        }
        Ok(self.fc_is(k, mask, value))
    }
}

/// An 802.11 `type` value: a name, or a number with only the type bits set.
fn wlan_type(ty: &NameOrNum, span: Span) -> Result<u32, CompileError> {
    match ty {
        NameOrNum::Num(n) if n & !TYPE_MASK != 0 => {
            Err(error(span, format!("invalid 802.11 type value 0x{n:02x}")))
        }
        NameOrNum::Num(n) => Ok(*n),
        NameOrNum::Name(name) => find(&TYPES, name)
            .ok_or_else(|| error(span, format!("unknown 802.11 type name \"{name}\""))),
    }
}

/// An 802.11 `subtype` value after `type ty`.
fn wlan_subtype(ty: u32, subtype: &NameOrNum, span: Span) -> Result<u32, CompileError> {
    match subtype {
        NameOrNum::Num(n) if n & !SUBTYPE_MASK != 0 => {
            Err(error(span, format!("invalid 802.11 subtype value 0x{n:02x}")))
        }
        NameOrNum::Num(n) => Ok(*n),
        NameOrNum::Name(name) => {
            let table = SUBTYPE_TABLES
                .iter()
                .find(|(t, _)| *t == ty)
                .map(|&(_, table)| table)
                .ok_or_else(|| error(span, "unknown 802.11 type"))?;
            find(table, name)
                .ok_or_else(|| error(span, format!("unknown 802.11 subtype name \"{name}\"")))
        }
    }
}
