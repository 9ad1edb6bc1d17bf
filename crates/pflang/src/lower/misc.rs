//! Direction (`inbound`/`outbound`), `ifindex`, pflog and 802.11 tests: link-type specific.
//!
//! STUB (being completed).

use weir_filter::Pred;

use super::{unsupported, CompileError, Lowerer};
use crate::ast::{PfTest, Proto, Span, WlanTest};

impl Lowerer<'_> {
    pub(crate) fn direction(&mut self, _inbound: bool, span: Span) -> Result<Pred, CompileError> {
        Err(unsupported(span, "inbound/outbound (lowering in progress)"))
    }

    pub(crate) fn ifindex(&mut self, _n: u32, span: Span) -> Result<Pred, CompileError> {
        Err(unsupported(span, "ifindex (lowering in progress)"))
    }

    pub(crate) fn pf(&mut self, _t: &PfTest, span: Span) -> Result<Pred, CompileError> {
        Err(unsupported(span, "pflog tests on this link type"))
    }

    pub(crate) fn wlan(
        &mut self,
        _p: Option<Proto>,
        _t: &WlanTest,
        span: Span,
    ) -> Result<Pred, CompileError> {
        Err(unsupported(span, "802.11 tests on this link type"))
    }
}
