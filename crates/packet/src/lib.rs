//! `weir-packet`: one home for packet knowledge.
//!
//! It sits at the bottom of the pipeline, beside `weir-isa`, and depends on nothing of
//! weir's: front ends (pflang lowering), the capture runtime, the CLI and the test kit all
//! take their facts about packets from here, so that a link type or a protocol number is
//! written down once.
//!
//! - [`link`]: the capture link types ([`LinkType`]): the names tcpdump's `-y` accepts, DLT
//!   and LINKTYPE numbers, descriptions, header geometry, and the pcap header's link-type
//!   field ([`LinkField`]).
//! - [`ethertype`], [`ipproto`], [`llcsap`], [`ppp`]: protocol numbers as named constants,
//!   with names for printing.
//! - [`filter_names`]: the filter language's named constants (`icmp-echo`, `tcp-syn` ...).
//! - [`pflog`]: OpenBSD's pflog header, pf's reason and action codes.
//! - [`sll`], [`af`]: the fields of Linux cooked and BSD loopback headers.
//! - [`summary`]: one line per packet, as `tcpdump -q -n` prints it.
//!
//! Adding a link type is a row here (a [`LinkType`] variant, its [`LinkInfo`] in
//! [`LinkType::info`], and its place in [`LinkType::ALL`]) and its lowering in `weir-pflang`
//! (the exhaustive matches in `lower/link.rs`, which do not build until it has one);
//! nothing else: `weir_pflang::LINK_TYPES` is [`LinkType::ALL`], and the line printer and
//! the test kit's re-framing fall back for types they do not frame.
//!
//! ```
//! use weir_packet::{ethertype, ipproto, LinkType};
//!
//! let link = LinkType::from_name("linux_sll").unwrap();
//! assert_eq!(link, LinkType::LinuxSll);
//! assert_eq!((link.dlt(), link.linktype(), link.header_len()), (113, 113, 16));
//! // DLT_RAW and LINKTYPE_RAW differ.
//! assert_eq!(LinkType::from_number(101), Some(LinkType::Raw));
//! assert_eq!(LinkType::Raw.dlt(), 12);
//!
//! assert_eq!(ethertype::name(ethertype::IPV6), Some("IPv6"));
//! assert_eq!(ipproto::name(ipproto::TCP), Some("tcp"));
//!
//! // A TCP SYN over IPv4 on raw IP, printed as `tcpdump -q -n` would.
//! let mut packet = vec![0x45, 0, 0, 40, 0, 0, 0, 0, 64, ipproto::TCP, 0, 0];
//! packet.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
//! packet.extend_from_slice(&[0, 80, 1, 187, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 2, 0, 0]);
//! packet.extend_from_slice(&[0, 0, 0, 0]);
//! let line = weir_packet::summary::line(LinkType::Raw.linktype(), 3661, 0, &packet, 40);
//! assert_eq!(line, "01:01:01.000000 IP 10.0.0.1.80 > 10.0.0.2.443: tcp 0");
//! ```

pub mod af;
pub mod ethertype;
pub mod filter_names;
pub mod ipproto;
pub mod link;
pub mod llcsap;
pub mod pflog;
pub mod ppp;
pub mod sll;
pub mod summary;

pub use link::{LinkField, LinkInfo, LinkType, OpaqueLink};

#[cfg(test)]
mod tests {
    /// Asserts that a (value, name) table has no value and no name twice.
    pub(crate) fn unique<T: Copy + Eq + std::hash::Hash + std::fmt::Debug>(table: &[(T, &str)]) {
        let mut values = std::collections::HashSet::new();
        let mut names = std::collections::HashSet::new();
        for (value, name) in table {
            assert!(values.insert(*value), "{value:?} twice");
            assert!(names.insert(*name), "{name} twice");
        }
    }
}
