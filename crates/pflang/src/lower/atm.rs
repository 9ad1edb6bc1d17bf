//! SunATM captures (libpcap's DLT_SUNATM): the 4-byte pseudo-header's fields (`vpi`,
//! `vci`, the traffic type), the ATM abbreviations (`oam`, `metac`, `sc`, `connectmsg` ...)
//! and `lane`, which makes everything after it look at the LANE frame's Ethernet.
//!
//! The pseudo-header is: flags and traffic type (low nibble: 1 LANE, 2 LLC), VPI (a
//! byte), VCI (two bytes). Signalling messages carry their message type 9 bytes in. As in
//! libpcap, every offset is relative to the current link header, so after a `lane` (whose
//! Ethernet header starts 6 bytes in) `vpi` reads byte 7.

use weir_filter::{CmpOp, Expr, Pred, Size};

use super::link::SUNATM_PT_LANE;
use super::{CompileError, Layer, LinkType, Lowerer, Offset};
use crate::ast::{AtmAbbrev, AtmField, AtmTest, FieldValue, RelOp, Span};

/// Where the pseudo-header keeps its fields.
const VPI_POS: u32 = 1;
const VCI_POS: u32 = 2;
/// The signalling message type, after the pseudo-header and the start of the Q.2931 PDU.
const MSG_TYPE_POS: u32 = 9;
/// The LANE frame's Ethernet header: after the pseudo-header and the 2-byte LE header.
const LANE_ETHER_HEADER: u32 = 4 + 2;
/// An LE control frame starts with this marker where data frames have their LE client ID.
const LANE_CONTROL_MARKER: u32 = 0xff00;

/// Well-known VCIs on VPI 0.
const VCI_METAC: u32 = 1;
const VCI_BCC: u32 = 2;
const VCI_OAMF4SC: u32 = 3;
const VCI_OAMF4EC: u32 = 4;
const VCI_SC: u32 = 5;
const VCI_ILMIC: u32 = 16;

/// Q.2931 message types, in the order libpcap's code tests them: `connectmsg` takes all of
/// them, `metaconnect` all but CONNECT_ACK.
const CONNECT_MSGS: [u32; 6] = [0x5a, 0x4d, 0x0f, 0x07, 0x05, 0x02];
const CONNECT_ACK: u32 = 0x0f;

/// `load <op> value` as libpcap's gen_ncmp builds a field test (`vpi > 3`, MTP3's `sio`):
/// `<` and `<=` are the negated `>=` and `>`; `!=` is compared as `=`, because libpcap
/// negates only the ordered comparisons (so `vci != 3` matches VCI 3 in libpcap, and in
/// weir). A parenthesised list is any of its values, in order.
pub(crate) fn field_test(load: impl Fn() -> Expr, value: &FieldValue) -> Pred {
    let eq = |v: u32| Pred::eq(load(), v);
    match value {
        FieldValue::Eq(v) => eq(*v),
        FieldValue::Rel(op, v) => {
            let k = Expr::Const(*v);
            match op {
                RelOp::Gt => Pred::cmp(CmpOp::Gt, load(), k),
                RelOp::Ge => Pred::cmp(CmpOp::Ge, load(), k),
                RelOp::Lt => Pred::not(Pred::cmp(CmpOp::Ge, load(), k)),
                RelOp::Le => Pred::not(Pred::cmp(CmpOp::Gt, load(), k)),
                RelOp::Eq | RelOp::Ne => eq(*v),
            }
        }
        FieldValue::List(values) => Pred::or(values.iter().map(|&v| eq(v))),
    }
}

impl Lowerer<'_> {
    /// The ATM tests: only on SunATM captures (the capture's link type, whatever came
    /// before in the expression), else libpcap's message.
    pub(crate) fn atm(&mut self, t: &AtmTest, span: Span) -> Result<Pred, CompileError> {
        if self.options.linktype != LinkType::SunAtm {
            let what = match t {
                AtmTest::Field(AtmField::Vpi, _) => "vpi",
                AtmTest::Field(AtmField::Vci, _) => "vci",
                AtmTest::Abbrev(a) => abbrev_word(*a),
            };
            return Err(CompileError::new(span, format!("'{what}' supported only on raw ATM")));
        }
        Ok(match t {
            AtmTest::Field(AtmField::Vpi, v) => {
                field_test(|| self.load(Layer::LinkHdr, VPI_POS, Size::Byte), v)
            }
            AtmTest::Field(AtmField::Vci, v) => {
                field_test(|| self.load(Layer::LinkHdr, VCI_POS, Size::Half), v)
            }
            AtmTest::Abbrev(AtmAbbrev::Lane) => self.lane(),
            AtmTest::Abbrev(AtmAbbrev::Oam | AtmAbbrev::Oamf4) => {
                self.vpi0_vci(&[VCI_OAMF4SC, VCI_OAMF4EC])
            }
            AtmTest::Abbrev(AtmAbbrev::Oamf4ec) => self.vpi0_vci(&[VCI_OAMF4EC]),
            AtmTest::Abbrev(AtmAbbrev::Oamf4sc) => self.vpi0_vci(&[VCI_OAMF4SC]),
            AtmTest::Abbrev(AtmAbbrev::Metac) => self.vpi0_vci(&[VCI_METAC]),
            AtmTest::Abbrev(AtmAbbrev::Bcc) => self.vpi0_vci(&[VCI_BCC]),
            AtmTest::Abbrev(AtmAbbrev::Sc) => self.vpi0_vci(&[VCI_SC]),
            AtmTest::Abbrev(AtmAbbrev::Ilmic) => self.vpi0_vci(&[VCI_ILMIC]),
            AtmTest::Abbrev(AtmAbbrev::Connectmsg) => {
                Pred::and([self.vpi0_vci(&[VCI_SC]), self.msg_type_in(&CONNECT_MSGS)])
            }
            AtmTest::Abbrev(AtmAbbrev::Metaconnect) => {
                let msgs: Vec<u32> =
                    CONNECT_MSGS.iter().copied().filter(|&m| m != CONNECT_ACK).collect();
                Pred::and([self.vpi0_vci(&[VCI_METAC]), self.msg_type_in(&msgs)])
            }
        })
    }

    /// `(traffic type nibble) == pt`, at the current link header.
    pub(crate) fn atm_traffic_type_is(&self, pt: u32) -> Pred {
        self.cmp_field(Layer::LinkHdr, 0, Size::Byte, 0x0f, pt)
    }

    /// After a `lane` on a SunATM capture, what libpcap checks before each Ethernet test:
    /// the LE header is not the LE control marker (read in the outer pseudo-header's
    /// place, 4 bytes into the packet).
    pub(crate) fn lane_data_check(&self) -> Option<Pred> {
        self.lane_outer
            .then(|| Pred::not(Pred::eq(Expr::load_at(4, Size::Half), LANE_CONTROL_MARKER)))
    }

    /// `lane`: LANE traffic; from here on the link is the LANE frame's Ethernet, at fixed
    /// offsets (libpcap sets them from the pseudo-header's place, whatever came before).
    fn lane(&mut self) -> Pred {
        let test = self.atm_traffic_type_is(SUNATM_PT_LANE);
        self.lane_outer = self.link == LinkType::SunAtm;
        self.link = LinkType::Ethernet;
        self.off_linkhdr = Offset::fixed(LANE_ETHER_HEADER);
        self.off_linktype = Some(Offset::fixed(LANE_ETHER_HEADER + 12));
        self.off_linkpl = Offset::fixed(LANE_ETHER_HEADER + 14);
        self.off_nl = 0;
        self.off_nl_nosnap = 3;
        test
    }

    /// VPI 0 and one of the VCIs.
    fn vpi0_vci(&self, vcis: &[u32]) -> Pred {
        let vpi = self.cmp_field(Layer::LinkHdr, VPI_POS, Size::Byte, u32::MAX, 0);
        let vci = Pred::or(
            vcis.iter().map(|&v| self.cmp_field(Layer::LinkHdr, VCI_POS, Size::Half, u32::MAX, v)),
        );
        Pred::and([vpi, vci])
    }

    /// The signalling message type is one of `msgs`.
    fn msg_type_in(&self, msgs: &[u32]) -> Pred {
        Pred::or(
            msgs.iter()
                .map(|&m| self.cmp_field(Layer::LinkHdr, MSG_TYPE_POS, Size::Byte, u32::MAX, m)),
        )
    }
}

/// The word libpcap's messages use for an abbreviation (`oamf4ec` is `oam4ec` there).
fn abbrev_word(a: AtmAbbrev) -> &'static str {
    match a {
        AtmAbbrev::Lane => "lane",
        AtmAbbrev::Metac => "metac",
        AtmAbbrev::Bcc => "bcc",
        AtmAbbrev::Oamf4ec => "oam4ec",
        AtmAbbrev::Oamf4sc => "oam4sc",
        AtmAbbrev::Sc => "sc",
        AtmAbbrev::Ilmic => "ilmic",
        AtmAbbrev::Oam => "oam",
        AtmAbbrev::Oamf4 => "oamf4",
        AtmAbbrev::Connectmsg => "connectmsg",
        AtmAbbrev::Metaconnect => "metaconnect",
    }
}
