//! Link-layer types weir compiles filters for, their header geometry, and the link-level
//! protocol test (`ether proto`, and what `ip`, `ip6`, `arp` ... mean on each link type).
//!
//! STUB (being completed): Ethernet only for the protocol test.

use weir_filter::{Pred, Size};

use super::{unsupported, CompileError, Layer, Lowerer};
use crate::ast::Span;

/// The capture link types pflang lowering supports (values are LINKTYPE_/DLT_ numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// DLT_EN10MB (1).
    Ethernet,
    /// DLT_LINUX_SLL (113).
    LinuxSll,
    /// DLT_LINUX_SLL2 (276).
    LinuxSll2,
    /// DLT_RAW (12 on most systems, 14 on some; LINKTYPE_RAW 101).
    Raw,
    /// DLT_IPV4 (228).
    Ipv4,
    /// DLT_IPV6 (229).
    Ipv6,
    /// DLT_NULL (0): BSD loopback, 4-byte address family in host byte order.
    Null,
    /// DLT_LOOP (108): BSD loopback, address family in network byte order.
    Loop,
    /// DLT_PPP (9): reached only after `pppoes`, never a capture's link type here.
    Ppp,
}

/// Where a link type keeps its fields.
pub(crate) struct Geometry {
    pub off_linktype: Option<u32>,
    pub off_linkpl: u32,
}

impl LinkType {
    /// The link type for a LINKTYPE_/DLT_ number, if weir supports it.
    pub fn from_dlt(dlt: u32) -> Option<LinkType> {
        Some(match dlt {
            1 => LinkType::Ethernet,
            113 => LinkType::LinuxSll,
            276 => LinkType::LinuxSll2,
            12 | 14 | 101 => LinkType::Raw,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            0 => LinkType::Null,
            108 => LinkType::Loop,
            _ => return None,
        })
    }

    /// The DLT_ number libpcap uses for this link type on Linux.
    pub fn dlt(self) -> u32 {
        match self {
            LinkType::Ethernet => 1,
            LinkType::LinuxSll => 113,
            LinkType::LinuxSll2 => 276,
            LinkType::Raw => 12,
            LinkType::Ipv4 => 228,
            LinkType::Ipv6 => 229,
            LinkType::Null => 0,
            LinkType::Loop => 108,
            LinkType::Ppp => 9,
        }
    }

    /// The name tcpdump's `-y` accepts.
    pub fn name(self) -> &'static str {
        match self {
            LinkType::Ethernet => "EN10MB",
            LinkType::LinuxSll => "LINUX_SLL",
            LinkType::LinuxSll2 => "LINUX_SLL2",
            LinkType::Raw => "RAW",
            LinkType::Ipv4 => "IPV4",
            LinkType::Ipv6 => "IPV6",
            LinkType::Null => "NULL",
            LinkType::Loop => "LOOP",
            LinkType::Ppp => "PPP",
        }
    }

    /// Parses a `-y` name (case-insensitive) or a number.
    pub fn from_name(name: &str) -> Option<LinkType> {
        if let Ok(n) = name.parse::<u32>() {
            return LinkType::from_dlt(n);
        }
        let upper = name.to_ascii_uppercase();
        [
            LinkType::Ethernet,
            LinkType::LinuxSll,
            LinkType::LinuxSll2,
            LinkType::Raw,
            LinkType::Ipv4,
            LinkType::Ipv6,
            LinkType::Null,
            LinkType::Loop,
        ]
        .into_iter()
        .find(|l| l.name() == upper)
    }

    pub(crate) fn geometry(self) -> Geometry {
        let (off_linktype, off_linkpl) = match self {
            LinkType::Ethernet => (Some(12), 14),
            LinkType::LinuxSll => (Some(14), 16),
            LinkType::LinuxSll2 => (Some(0), 20),
            LinkType::Raw | LinkType::Ipv4 | LinkType::Ipv6 => (None, 0),
            LinkType::Null | LinkType::Loop => (Some(0), 4),
            LinkType::Ppp => (Some(2), 4),
        };
        Geometry { off_linktype, off_linkpl }
    }
}

impl Lowerer<'_> {
    /// The link-level test for an Ethernet type / protocol number (libpcap's gen_linktype).
    pub(crate) fn link_proto(&mut self, ethertype: u32, span: Span) -> Result<Pred, CompileError> {
        match self.link {
            LinkType::Ethernet => {
                Ok(self.cmp_field(Layer::LinkType, 0, Size::Half, u32::MAX, ethertype))
            }
            other => Err(unsupported(span, &format!("link-level tests on {}", other.name()))),
        }
    }
}
