//! Link-type specific tests: direction (`inbound`/`outbound`), `ifindex`, the pflog header
//! tests (and where a pflog capture's payload starts), and the SS7 MTP2/MTP3 tests.
//!
//! Linux cooked captures (v1 and v2), pflog, ipnet and Juniper's record a direction, and cooked v2
//! an interface, in the packet. weir filters capture files, so elsewhere it does what
//! libpcap does when it reads a savefile: refuses them, with libpcap's words
//! ("inbound/outbound not supported on Ethernet when reading savefiles"). (libpcap
//! compiling for a live Linux socket instead emits loads of kernel metadata, which a
//! capture file does not have.) The pflog and MTP tests on other link types get libpcap's
//! error, after the same name checks libpcap's grammar makes first, so a misspelt name
//! reports the same thing in both.

use weir_filter::{CmpOp, Expr, Pred, Size};
use weir_packet::{pflog, sll};

use super::{CompileError, Layer, LinkType, Lowerer};
use crate::ast::Span;
use crate::ast::{FieldValue, Mtp2Type, Mtp3Field, NameOrNum, PfTest};

/// The SLL packet type of a packet the capturing host sent (PACKET_OUTGOING).
const LINUX_SLL_OUTGOING: u32 = sll::OUTGOING as u32;

/// The scratch slot a pflog capture's payload offset lives in: the header's length (its
/// first byte) rounded up to 4 bytes, computed in front of the filter when it is read.
pub(crate) const PFLOG_SLOT: u8 = 0;

/// Where the pflog header keeps its fields (weir-packet's `pflog`, as offsets).
const PFLOG_ACTION: u32 = pflog::ACTION as u32;
const PFLOG_REASON: u32 = pflog::REASON as u32;
const PFLOG_IFNAME: u32 = pflog::IFNAME as u32;
const PFLOG_RULESET: u32 = pflog::RULESET as u32;
const PFLOG_RULENR: u32 = pflog::RULENR as u32;
const PFLOG_SUBRULENR: u32 = pflog::SUBRULENR as u32;
const PFLOG_DIR: u32 = pflog::DIR as u32;
/// Interface and ruleset names are 16-byte fields with their terminating NUL.
const PFLOG_NAME_MAX: usize = pflog::NAME_LEN - 1;
/// pf's directions.
const PF_IN: u32 = pflog::DIR_IN as u32;
const PF_OUT: u32 = pflog::DIR_OUT as u32;
/// Juniper's direction flag, in the flags byte after the magic.
const JUNIPER_FLAG_IN: u32 = 0x01;
/// ipnet's direction field (a half-word at 2).
const IPNET_OUTBOUND: u32 = 1;
const IPNET_INBOUND: u32 = 2;

/// MTP2's length indicator (a byte; the high-speed link's is a half-word further on) and
/// the MTP3 fields after it: the service information octet, the routing label (point
/// codes), the link selection in the label's last byte.
const MTP2_LI: u32 = 2;
const MTP2_LI_HSL: u32 = 4;
const MTP3_SIO: u32 = 3;
const MTP3_LABEL: u32 = 4;
const MTP3_SLS: u32 = 7;

fn error(span: Span, message: impl Into<String>) -> CompileError {
    CompileError::new(span, message)
}

impl Lowerer<'_> {
    /// `inbound` / `outbound`: the packet type of Linux cooked captures, the direction of
    /// pflog and ipnet headers.
    pub(crate) fn direction(&mut self, inbound: bool, span: Span) -> Result<Pred, CompileError> {
        match self.link {
            LinkType::Pflog => {
                let dir = if inbound { PF_IN } else { PF_OUT };
                return Ok(self.cmp_field(Layer::LinkHdr, PFLOG_DIR, Size::Byte, u32::MAX, dir));
            }
            LinkType::Ipnet => {
                let dir = if inbound { IPNET_INBOUND } else { IPNET_OUTBOUND };
                return Ok(self.cmp_field(Layer::LinkHdr, 2, Size::Half, u32::MAX, dir));
            }
            // pppd's direction byte: 0 received, 1 sent.
            LinkType::PppPppd => {
                let dir = u32::from(!inbound);
                return Ok(self.cmp_field(Layer::LinkHdr, 0, Size::Byte, u32::MAX, dir));
            }
            // Juniper: the capture header's direction flag (set: received).
            link if link.is_juniper() => {
                let dir = u32::from(inbound);
                return Ok(self.cmp_field(Layer::LinkHdr, 3, Size::Byte, JUNIPER_FLAG_IN, dir));
            }
            _ => {}
        }
        let outgoing = match self.link {
            // SLIP's first byte: 0 for a packet received, else sent.
            LinkType::Slip => Pred::not(self.cmp_field(Layer::LinkHdr, 0, Size::Byte, u32::MAX, 0)),
            LinkType::LinuxSll => self.cmp_field(
                Layer::LinkHdr,
                sll::V1_PACKET_TYPE,
                Size::Half,
                u32::MAX,
                LINUX_SLL_OUTGOING,
            ),
            LinkType::LinuxSll2 => self.cmp_field(
                Layer::LinkHdr,
                sll::V2_PACKET_TYPE,
                Size::Byte,
                u32::MAX,
                LINUX_SLL_OUTGOING,
            ),
            other => {
                return Err(error(
                    span,
                    format!(
                        "inbound/outbound not supported on {} when reading savefiles",
                        other.description()
                    ),
                ))
            }
        };
        Ok(if inbound { Pred::not(outgoing) } else { outgoing })
    }

    /// `ifindex N`: the interface index of Linux cooked v2 captures.
    pub(crate) fn ifindex(&mut self, n: u32, span: Span) -> Result<Pred, CompileError> {
        match self.link {
            LinkType::LinuxSll2 => {
                Ok(self.cmp_field(Layer::LinkHdr, sll::V2_IFINDEX, Size::Word, u32::MAX, n))
            }
            other => Err(error(
                span,
                format!("ifindex not supported on {} when reading savefiles", other.description()),
            )),
        }
    }

    /// pflog header tests: the header's interface, ruleset, rule numbers, reason and
    /// action. The names are checked first (libpcap's grammar looks them up), then the link
    /// type the expression is at (after `pppoes` or a tunnel it is not pflog's any more),
    /// then the lengths of interface and ruleset names.
    pub(crate) fn pf(&mut self, t: &PfTest, span: Span) -> Result<Pred, CompileError> {
        let what = match t {
            PfTest::Ifname(_) => "ifname",
            PfTest::Ruleset(_) => "ruleset",
            PfTest::Rulenum(_) => "rnr",
            PfTest::Subrulenum(_) => "srnr",
            PfTest::Reason(NameOrNum::Num(_)) => "reason",
            PfTest::Reason(NameOrNum::Name(name)) => {
                if pflog::reason_code(name).is_none() {
                    return Err(error(span, format!("unknown PF reason \"{name}\"")));
                }
                "reason"
            }
            PfTest::Action(name) => {
                if pflog::action_code(name).is_none() {
                    return Err(error(span, format!("unknown PF action \"{name}\"")));
                }
                "action"
            }
        };
        if self.link != LinkType::Pflog {
            return Err(error(span, format!("{what} supported only on PF linktype")));
        }
        let byte = |l: &Self, k, v| l.cmp_field(Layer::LinkHdr, k, Size::Byte, u32::MAX, v);
        let word = |l: &Self, k, v| l.cmp_field(Layer::LinkHdr, k, Size::Word, u32::MAX, v);
        Ok(match t {
            PfTest::Ifname(name) => {
                if name.len() > PFLOG_NAME_MAX {
                    return Err(error(
                        span,
                        format!("ifname interface names can only be {PFLOG_NAME_MAX} characters"),
                    ));
                }
                self.bytes_at(PFLOG_IFNAME, name.as_bytes())
            }
            PfTest::Ruleset(name) => {
                if name.len() > PFLOG_NAME_MAX {
                    return Err(error(
                        span,
                        format!("ruleset names can only be {PFLOG_NAME_MAX} characters"),
                    ));
                }
                self.bytes_at(PFLOG_RULESET, name.as_bytes())
            }
            PfTest::Rulenum(n) => word(self, PFLOG_RULENR, *n),
            PfTest::Subrulenum(n) => word(self, PFLOG_SUBRULENR, *n),
            PfTest::Reason(NameOrNum::Num(n)) => byte(self, PFLOG_REASON, *n),
            PfTest::Reason(NameOrNum::Name(name)) => {
                let code = pflog::reason_code(name).unwrap_or(0);
                byte(self, PFLOG_REASON, u32::from(code))
            }
            PfTest::Action(name) => {
                let code = pflog::action_code(name).unwrap_or(0);
                byte(self, PFLOG_ACTION, u32::from(code))
            }
        })
    }

    /// `bytes` at link header + `k`, compared as libpcap's gen_bcmp does: words from the
    /// end, then a half-word, then the first byte.
    fn bytes_at(&self, k: u32, bytes: &[u8]) -> Pred {
        let mut tests = Vec::new();
        let mut size = bytes.len();
        let value = |b: &[u8]| b.iter().fold(0u32, |v, &x| (v << 8) | u32::from(x));
        let mut cmp = |at: usize, sz: Size, len: usize| {
            let v = value(&bytes[at..at + len]);
            tests.push(self.cmp_field(Layer::LinkHdr, k + at as u32, sz, u32::MAX, v));
        };
        while size >= 4 {
            cmp(size - 4, Size::Word, 4);
            size -= 4;
        }
        while size >= 2 {
            cmp(size - 2, Size::Half, 2);
            size -= 2;
        }
        if size > 0 {
            cmp(0, Size::Byte, 1);
        }
        Pred::and(tests)
    }

    /// On pflog captures, the payload offset's computation in front of `pred` when `pred`
    /// reads it (libpcap computes it when its register was allocated; a `pppoes` before
    /// anything read it moves on to a slot nothing writes, see `pppoes`).
    pub(crate) fn pflog_prologue(&self, pred: Pred) -> Pred {
        if self.options.linktype != LinkType::Pflog || !super::wlan::reads_slot(&pred, PFLOG_SLOT) {
            return pred;
        }
        // The header length byte, rounded up to 4.
        let length = Expr::load_at(0, Size::Byte).plus(3).and_mask(0xffff_fffc);
        Pred::And(vec![Pred::Store { slot: PFLOG_SLOT, value: length }, pred])
    }

    /// SS7 MTP2 frame types, by the length indicator: 0 a fill-in, 1-2 a link status, more
    /// a message signal unit (`h` forms: the high-speed link's 9-bit indicator).
    pub(crate) fn mtp2(&mut self, t: Mtp2Type, span: Span) -> Result<Pred, CompileError> {
        let (what, link, high_speed) = match t {
            Mtp2Type::Fisu => ("fisu", "MTP2", false),
            Mtp2Type::Lssu => ("lssu", "MTP2", false),
            Mtp2Type::Msu => ("msu", "MTP2", false),
            Mtp2Type::Hfisu => ("hfisu", "MTP2_HSL", true),
            Mtp2Type::Hlssu => ("hlssu", "MTP2_HSL", true),
            Mtp2Type::Hmsu => ("hmsu", "MTP2_HSL", true),
        };
        let Some(base) = mtp2_base(self.link) else {
            return Err(error(span, format!("'{what}' supported only on {link}")));
        };
        let (li, mask, lssu_max) = if high_speed {
            (Expr::load_at(base + MTP2_LI_HSL, Size::Half), 0xff80, 0x100)
        } else {
            (Expr::load_at(base + MTP2_LI, Size::Byte), 0x3f, 2)
        };
        let li = move || li.clone().and_mask(mask);
        let gt = |v: u32| Pred::cmp(CmpOp::Gt, li(), Expr::Const(v));
        Ok(match t {
            Mtp2Type::Fisu | Mtp2Type::Hfisu => Pred::eq(li(), 0),
            Mtp2Type::Lssu | Mtp2Type::Hlssu => Pred::and([gt(0), Pred::not(gt(lssu_max))]),
            Mtp2Type::Msu | Mtp2Type::Hmsu => gt(lssu_max),
        })
    }

    /// SS7 MTP3 fields of MTP2 captures (the `h` forms 3 bytes further, behind the
    /// high-speed link's longer header): the service information octet, the routing
    /// label's point codes (their bits where the label keeps them) and link selection.
    pub(crate) fn mtp3(
        &mut self,
        f: Mtp3Field,
        value: &FieldValue,
        span: Span,
    ) -> Result<Pred, CompileError> {
        let what = match f {
            Mtp3Field::Sio | Mtp3Field::Hsio => "sio",
            Mtp3Field::Opc | Mtp3Field::Hopc => "opc",
            Mtp3Field::Dpc | Mtp3Field::Hdpc => "dpc",
            Mtp3Field::Sls | Mtp3Field::Hsls => "sls",
        };
        let Some(base) = mtp2_base(self.link) else {
            return Err(error(span, format!("'{what}' supported only on SS7")));
        };
        let high =
            matches!(f, Mtp3Field::Hsio | Mtp3Field::Hopc | Mtp3Field::Hdpc | Mtp3Field::Hsls);
        let at = base + if high { 3 } else { 0 };
        let (offset, size, mask, max, encode): (u32, Size, u32, u32, fn(u32) -> u32) = match what {
            "sio" => (at + MTP3_SIO, Size::Byte, u32::MAX, 255, |v| v),
            "opc" => (at + MTP3_LABEL, Size::Word, 0x00c0_ff0f, 16383, |v| {
                ((v & 0x3c00) >> 10) | ((v & 0x03fc) << 6) | ((v & 0x0003) << 22)
            }),
            "dpc" => (at + MTP3_LABEL, Size::Word, 0xff3f_0000, 16383, |v| {
                ((v & 0x00ff) << 24) | ((v & 0x3f00) << 8)
            }),
            _ => (at + MTP3_SLS, Size::Byte, 0xf0, 15, |v| v << 4),
        };
        let values: Vec<u32> = match value {
            FieldValue::Eq(v) | FieldValue::Rel(_, v) => vec![*v],
            FieldValue::List(vs) => vs.clone(),
        };
        if let Some(v) = values.iter().find(|&&v| v > max) {
            return Err(error(span, format!("{what} value {v} too big; max value = {max}")));
        }
        let encoded = match value {
            FieldValue::Eq(v) => FieldValue::Eq(encode(*v)),
            FieldValue::Rel(op, v) => FieldValue::Rel(*op, encode(*v)),
            FieldValue::List(vs) => FieldValue::List(vs.iter().map(|&v| encode(v)).collect()),
        };
        let load = || {
            let l = Expr::load_at(offset, size);
            if mask == u32::MAX {
                l
            } else {
                l.and_mask(mask)
            }
        };
        Ok(super::atm::field_test(load, &encoded))
    }
}

/// Where an MTP2 capture's frame starts: after the pseudo-header on MTP2_WITH_PHDR; `None`
/// on link types without MTP2 (libpcap's messages then).
fn mtp2_base(link: LinkType) -> Option<u32> {
    match link {
        LinkType::Mtp2 => Some(0),
        LinkType::Mtp2WithPhdr => Some(4),
        // ERF records: the MTP2 frame after the 16-byte ERF header and 4 more bytes.
        LinkType::Erf => Some(20),
        _ => None,
    }
}
