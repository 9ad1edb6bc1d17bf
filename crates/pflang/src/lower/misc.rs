//! Link-type specific tests: direction (`inbound`/`outbound`), `ifindex`, and the pflog,
//! 802.11, ATM and SS7 MTP tests.
//!
//! Only Linux cooked captures record a direction (v1 and v2) and an interface (v2) in the
//! packet. weir filters capture files, so elsewhere it does what libpcap does when it reads
//! a savefile: refuses them, with libpcap's words ("inbound/outbound not supported on
//! Ethernet when reading savefiles"). (libpcap compiling for a live Linux socket instead
//! emits loads of kernel metadata, which a capture file does not have.) pflog, 802.11,
//! ATM and MTP headers are not among weir's link types; these tests get libpcap's error,
//! after the same name checks libpcap's grammar makes first, so a misspelt name reports the
//! same thing in both.

use weir_filter::{Pred, Size};
use weir_packet::sll;

use super::{CompileError, Layer, LinkType, Lowerer};
use crate::ast::{AtmAbbrev, AtmField, AtmTest, Mtp2Type, Mtp3Field, NameOrNum, PfTest};
use crate::ast::{Proto, Span, WlanTest};

/// The SLL packet type of a packet the capturing host sent (PACKET_OUTGOING).
const LINUX_SLL_OUTGOING: u32 = sll::OUTGOING as u32;

/// pflog reasons libpcap knows by name (their index is the reason code).
const PF_REASONS: [&str; 15] = [
    "match",
    "bad-offset",
    "fragment",
    "short",
    "normalize",
    "memory",
    "bad-timestamp",
    "congestion",
    "ip-option",
    "proto-cksum",
    "state-mismatch",
    "state-insert",
    "state-limit",
    "src-limit",
    "synproxy",
];

/// pflog actions libpcap knows by name.
const PF_ACTIONS: [&str; 13] = [
    "pass",
    "accept",
    "drop",
    "block",
    "scrub",
    "noscrub",
    "nat",
    "nonat",
    "binat",
    "nobinat",
    "rdr",
    "nordr",
    "synproxy-drop",
];

/// 802.11 frame types by name, with their frame-control value.
const WLAN_TYPES: [(&str, u32); 5] =
    [("data", 0x08), ("mgt", 0x00), ("management", 0x00), ("ctl", 0x04), ("control", 0x04)];

const WLAN_MGT_SUBTYPES: [&str; 20] = [
    "assocreq",
    "assoc-req",
    "assocresp",
    "assoc-resp",
    "reassocreq",
    "reassoc-req",
    "reassocresp",
    "reassoc-resp",
    "probereq",
    "probe-req",
    "proberesp",
    "probe-resp",
    "beacon",
    "atim",
    "disassoc",
    "disassociation",
    "auth",
    "authentication",
    "deauth",
    "deauthentication",
];

const WLAN_CTL_SUBTYPES: [&str; 6] = ["ps-poll", "rts", "cts", "ack", "cf-end", "cf-end-ack"];

const WLAN_DATA_SUBTYPES: [&str; 15] = [
    "data",
    "data-cf-ack",
    "data-cf-poll",
    "data-cf-ack-poll",
    "null",
    "cf-ack",
    "cf-poll",
    "cf-ack-poll",
    "qos-data",
    "qos-data-cf-ack",
    "qos-data-cf-poll",
    "qos-data-cf-ack-poll",
    "qos",
    "qos-cf-poll",
    "qos-cf-ack-poll",
];

const WLAN_DIRECTIONS: [&str; 4] = ["nods", "tods", "fromds", "dstods"];

/// The frame-control type bits and subtype bits.
const WLAN_TYPE_MASK: u32 = 0x0c;
const WLAN_SUBTYPE_MASK: u32 = 0xf0;

fn known(names: &[&str], name: &str) -> bool {
    names.iter().any(|n| n.eq_ignore_ascii_case(name))
}

fn error(span: Span, message: impl Into<String>) -> CompileError {
    CompileError::new(span, message)
}

impl Lowerer<'_> {
    /// `inbound` / `outbound`: the packet type of Linux cooked captures.
    pub(crate) fn direction(&mut self, inbound: bool, span: Span) -> Result<Pred, CompileError> {
        let outgoing = match self.link {
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

    /// pflog header tests: never weir's link type.
    pub(crate) fn pf(&mut self, t: &PfTest, span: Span) -> Result<Pred, CompileError> {
        let what = match t {
            PfTest::Ifname(_) => "ifname",
            PfTest::Ruleset(_) => "ruleset",
            PfTest::Rulenum(_) => "rnr",
            PfTest::Subrulenum(_) => "srnr",
            PfTest::Reason(NameOrNum::Num(_)) => "reason",
            PfTest::Reason(NameOrNum::Name(name)) => {
                if !known(&PF_REASONS, name) {
                    return Err(error(span, format!("unknown PF reason \"{name}\"")));
                }
                "reason"
            }
            PfTest::Action(name) => {
                if !known(&PF_ACTIONS, name) {
                    return Err(error(span, format!("unknown PF action \"{name}\"")));
                }
                "action"
            }
        };
        Err(error(span, format!("{what} supported only on PF linktype")))
    }

    /// 802.11 header tests: never weir's link type.
    pub(crate) fn wlan(
        &mut self,
        _p: Option<Proto>,
        t: &WlanTest,
        span: Span,
    ) -> Result<Pred, CompileError> {
        match t {
            WlanTest::Type { ty, subtype } => {
                let ty = wlan_type(ty, span)?;
                if let Some(subtype) = subtype {
                    wlan_subtype(ty, subtype, span)?;
                }
            }
            WlanTest::Subtype(name) => {
                // A bare subtype name implies its type; libpcap searches every type's table.
                let tables: [&[&str]; 3] =
                    [&WLAN_MGT_SUBTYPES, &WLAN_CTL_SUBTYPES, &WLAN_DATA_SUBTYPES];
                if !tables.iter().any(|table| known(table, name)) {
                    return Err(error(span, "unknown 802.11 type name"));
                }
            }
            WlanTest::Dir(dir) => {
                if let NameOrNum::Name(name) = dir {
                    if !known(&WLAN_DIRECTIONS, name) {
                        return Err(error(span, "unknown 802.11 direction"));
                    }
                }
                return Err(error(span, "frame direction supported only with 802.11 headers"));
            }
        }
        Err(error(span, "802.11 link-layer types supported only on 802.11"))
    }

    /// ATM tests: never weir's link type.
    pub(crate) fn atm(&mut self, t: &AtmTest, span: Span) -> Result<Pred, CompileError> {
        let what = match t {
            AtmTest::Field(AtmField::Vpi, _) => "vpi",
            AtmTest::Field(AtmField::Vci, _) => "vci",
            AtmTest::Abbrev(a) => match a {
                AtmAbbrev::Lane => "lane",
                AtmAbbrev::Metac => "metac",
                AtmAbbrev::Bcc => "bcc",
                // libpcap's messages spell these two without the `f`.
                AtmAbbrev::Oamf4ec => "oam4ec",
                AtmAbbrev::Oamf4sc => "oam4sc",
                AtmAbbrev::Sc => "sc",
                AtmAbbrev::Ilmic => "ilmic",
                AtmAbbrev::Oam => "oam",
                AtmAbbrev::Oamf4 => "oamf4",
                AtmAbbrev::Connectmsg => "connectmsg",
                AtmAbbrev::Metaconnect => "metaconnect",
            },
        };
        Err(error(span, format!("'{what}' supported only on raw ATM")))
    }

    /// SS7 MTP2 frame types: never weir's link type.
    pub(crate) fn mtp2(&mut self, t: Mtp2Type, span: Span) -> Result<Pred, CompileError> {
        let (what, link) = match t {
            Mtp2Type::Fisu => ("fisu", "MTP2"),
            Mtp2Type::Lssu => ("lssu", "MTP2"),
            Mtp2Type::Msu => ("msu", "MTP2"),
            Mtp2Type::Hfisu => ("hfisu", "MTP2_HSL"),
            Mtp2Type::Hlssu => ("hlssu", "MTP2_HSL"),
            Mtp2Type::Hmsu => ("hmsu", "MTP2_HSL"),
        };
        Err(error(span, format!("'{what}' supported only on {link}")))
    }

    /// SS7 MTP3 fields: never weir's link type. The high-speed variants share the names.
    pub(crate) fn mtp3(&mut self, f: Mtp3Field, span: Span) -> Result<Pred, CompileError> {
        let what = match f {
            Mtp3Field::Sio | Mtp3Field::Hsio => "sio",
            Mtp3Field::Opc | Mtp3Field::Hopc => "opc",
            Mtp3Field::Dpc | Mtp3Field::Hdpc => "dpc",
            Mtp3Field::Sls | Mtp3Field::Hsls => "sls",
        };
        Err(error(span, format!("'{what}' supported only on SS7")))
    }
}

/// An 802.11 `type` value: a name, or a number with only the type bits set.
fn wlan_type(ty: &NameOrNum, span: Span) -> Result<u32, CompileError> {
    match ty {
        NameOrNum::Num(n) if n & !WLAN_TYPE_MASK != 0 => {
            Err(error(span, format!("invalid 802.11 type value 0x{n:02x}")))
        }
        NameOrNum::Num(n) => Ok(*n),
        NameOrNum::Name(name) => WLAN_TYPES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, v)| v)
            .ok_or_else(|| error(span, format!("unknown 802.11 type name \"{name}\""))),
    }
}

/// Checks an 802.11 `subtype` value after `type ty`.
fn wlan_subtype(ty: u32, subtype: &NameOrNum, span: Span) -> Result<(), CompileError> {
    match subtype {
        NameOrNum::Num(n) if n & !WLAN_SUBTYPE_MASK != 0 => {
            Err(error(span, format!("invalid 802.11 subtype value 0x{n:02x}")))
        }
        NameOrNum::Num(_) => Ok(()),
        NameOrNum::Name(name) => {
            let table: &[&str] = match ty {
                0x00 => &WLAN_MGT_SUBTYPES,
                0x04 => &WLAN_CTL_SUBTYPES,
                0x08 => &WLAN_DATA_SUBTYPES,
                _ => return Err(error(span, "unknown 802.11 type")),
            };
            if known(table, name) {
                Ok(())
            } else {
                Err(error(span, format!("unknown 802.11 subtype name \"{name}\"")))
            }
        }
    }
}
