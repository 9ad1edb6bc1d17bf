//! Link-type specific tests: direction (`inbound`/`outbound`), `ifindex`, and the pflog
//! and SS7 MTP tests.
//!
//! Only Linux cooked captures record a direction (v1 and v2) and an interface (v2) in the
//! packet. weir filters capture files, so elsewhere it does what libpcap does when it reads
//! a savefile: refuses them, with libpcap's words ("inbound/outbound not supported on
//! Ethernet when reading savefiles"). (libpcap compiling for a live Linux socket instead
//! emits loads of kernel metadata, which a capture file does not have.) pflog and MTP
//! headers are not among weir's link types; these tests get libpcap's error,
//! after the same name checks libpcap's grammar makes first, so a misspelt name reports the
//! same thing in both.

use weir_filter::{Pred, Size};
use weir_packet::sll;

use super::{CompileError, Layer, LinkType, Lowerer};
use crate::ast::Span;
use crate::ast::{Mtp2Type, Mtp3Field, NameOrNum, PfTest};

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
