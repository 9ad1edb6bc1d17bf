//! Hosts, networks, protocols, protochain, broadcast/multicast and gateway.
//!
//! STUB (being completed).

use weir_filter::Pred;

use super::{unsupported, CompileError, Lowerer};
use crate::ast::{Primitive, Proto, Span};

impl Lowerer<'_> {
    pub(crate) fn primitive(&mut self, _p: &Primitive, span: Span) -> Result<Pred, CompileError> {
        Err(unsupported(span, "this primitive (lowering in progress)"))
    }

    pub(crate) fn proto_abbrev(&mut self, proto: Proto, span: Span) -> Result<Pred, CompileError> {
        match proto {
            Proto::Ip => self.link_proto(0x0800, span),
            Proto::Ip6 => self.link_proto(0x86dd, span),
            Proto::Arp => self.link_proto(0x0806, span),
            _ => Err(unsupported(span, "this protocol (lowering in progress)")),
        }
    }

    pub(crate) fn broadcast(
        &mut self,
        _p: Option<Proto>,
        span: Span,
    ) -> Result<Pred, CompileError> {
        Err(unsupported(span, "broadcast (lowering in progress)"))
    }

    pub(crate) fn multicast(
        &mut self,
        _p: Option<Proto>,
        span: Span,
    ) -> Result<Pred, CompileError> {
        Err(unsupported(span, "multicast (lowering in progress)"))
    }
}
