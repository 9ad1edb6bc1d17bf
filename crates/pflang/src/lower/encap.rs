//! Encapsulations that shift later offsets (vlan, mpls, pppoes, geneve, vxlan), pppoed and llc.
//!
//! STUB (being completed).

use weir_filter::Pred;

use super::{unsupported, CompileError, Lowerer};
use crate::ast::{Encap, LlcKind, Span};

impl Lowerer<'_> {
    pub(crate) fn encap(
        &mut self,
        _k: Encap,
        _n: Option<u32>,
        span: Span,
    ) -> Result<Pred, CompileError> {
        Err(unsupported(span, "encapsulation (lowering in progress)"))
    }

    pub(crate) fn pppoed(&mut self, span: Span) -> Result<Pred, CompileError> {
        Err(unsupported(span, "pppoed (lowering in progress)"))
    }

    pub(crate) fn llc(&mut self, _k: Option<&LlcKind>, span: Span) -> Result<Pred, CompileError> {
        Err(unsupported(span, "llc (lowering in progress)"))
    }
}
