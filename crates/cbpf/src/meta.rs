//! The packet context that Linux ancillary loads read. On a socket filter, `ld [k]` with
//! `k = SKF_AD_OFF + n` reads a field of the kernel's `sk_buff` rather than packet bytes; weir
//! takes those fields from a [`PacketMeta`] the caller fills in, so a classic program written
//! for the kernel runs the same way here, given the same metadata.
//!
//! Supported: protocol, pkttype, ifindex, mark, queue, hatype, rxhash, cpu, `xor_x` (A ^= X,
//! which is an ALU operation in disguise), vlan_tci, vlan present, vlan_tpid and random (the
//! caller supplies the "random" number, so runs stay reproducible). Not supported, and
//! rejected by [`crate::validate`]: the netlink attribute searches (`nla`, `nlan`, which need a
//! netlink message) and the payload offset (`poff`, which needs the kernel's flow dissector).
//! As in the kernel, the value does not depend on the load's size: `ldb [proto]` gives the
//! whole protocol number.

use weir_isa::cbpf::ancillary::*;

/// Metadata of one packet, as the kernel would expose it to ancillary loads. Every value is
/// what the load returns, in host order (`protocol` is the EtherType as a number, `0x0800`
/// for IPv4, like the kernel's `ntohs(skb->protocol)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PacketMeta {
    /// `SKF_AD_PROTOCOL`: the EtherType the packet arrived with.
    pub protocol: u16,
    /// `SKF_AD_PKTTYPE`: `PACKET_HOST` (0), `PACKET_BROADCAST` (1), ... `PACKET_OUTGOING` (4).
    pub pkttype: u8,
    /// `SKF_AD_IFINDEX`: the receiving interface's index.
    pub ifindex: u32,
    /// `SKF_AD_MARK`: the firewall mark.
    pub mark: u32,
    /// `SKF_AD_QUEUE`: the receive queue.
    pub queue: u16,
    /// `SKF_AD_HATYPE`: the device's ARPHRD_* type (1 for Ethernet).
    pub hatype: u16,
    /// `SKF_AD_RXHASH`: the flow hash.
    pub rxhash: u32,
    /// `SKF_AD_CPU`: the CPU the filter runs on.
    pub cpu: u32,
    /// `SKF_AD_VLAN_TAG`: the offloaded VLAN TCI (meaningful when `vlan_present`).
    pub vlan_tci: u16,
    /// `SKF_AD_VLAN_TAG_PRESENT`: whether the VLAN tag was removed into metadata.
    pub vlan_present: bool,
    /// `SKF_AD_VLAN_TPID`: the offloaded tag's protocol (0x8100, 0x88a8).
    pub vlan_tpid: u16,
    /// `SKF_AD_RANDOM`: the value the kernel would draw at random, fixed by the caller.
    pub random: u32,
}

/// Whether weir runs the ancillary field at this offset from `SKF_AD_OFF`.
pub fn supported_ancillary(offset: u32) -> bool {
    matches!(
        offset,
        SKF_AD_PROTOCOL
            | SKF_AD_PKTTYPE
            | SKF_AD_IFINDEX
            | SKF_AD_MARK
            | SKF_AD_QUEUE
            | SKF_AD_HATYPE
            | SKF_AD_RXHASH
            | SKF_AD_CPU
            | SKF_AD_ALU_XOR_X
            | SKF_AD_VLAN_TAG
            | SKF_AD_VLAN_TAG_PRESENT
            | SKF_AD_RANDOM
            | SKF_AD_VLAN_TPID
    )
}

impl PacketMeta {
    /// The new accumulator after an ancillary load at `offset`, or `None` for an offset
    /// weir does not support (validation keeps those out of a [`crate::CbpfFilter`]).
    pub(crate) fn load(&self, offset: u32, a: u32, x: u32) -> Option<u32> {
        Some(match offset {
            SKF_AD_PROTOCOL => u32::from(self.protocol),
            SKF_AD_PKTTYPE => u32::from(self.pkttype),
            SKF_AD_IFINDEX => self.ifindex,
            SKF_AD_MARK => self.mark,
            SKF_AD_QUEUE => u32::from(self.queue),
            SKF_AD_HATYPE => u32::from(self.hatype),
            SKF_AD_RXHASH => self.rxhash,
            SKF_AD_CPU => self.cpu,
            SKF_AD_ALU_XOR_X => a ^ x,
            SKF_AD_VLAN_TAG => u32::from(self.vlan_tci),
            SKF_AD_VLAN_TAG_PRESENT => u32::from(self.vlan_present),
            SKF_AD_RANDOM => self.random,
            SKF_AD_VLAN_TPID => u32::from(self.vlan_tpid),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_fields_load_and_the_rest_do_not() {
        let meta = PacketMeta {
            protocol: 0x86dd,
            pkttype: 3,
            ifindex: 7,
            mark: 0xdead,
            queue: 2,
            hatype: 1,
            rxhash: 0x1234_5678,
            cpu: 5,
            vlan_tci: 0x0064,
            vlan_present: true,
            vlan_tpid: 0x88a8,
            random: 42,
        };
        assert_eq!(meta.load(SKF_AD_PROTOCOL, 0, 0), Some(0x86dd));
        assert_eq!(meta.load(SKF_AD_PKTTYPE, 0, 0), Some(3));
        assert_eq!(meta.load(SKF_AD_MARK, 0, 0), Some(0xdead));
        assert_eq!(meta.load(SKF_AD_ALU_XOR_X, 0xf0, 0x0f), Some(0xff));
        assert_eq!(meta.load(SKF_AD_VLAN_TAG_PRESENT, 0, 0), Some(1));
        assert_eq!(meta.load(SKF_AD_VLAN_TPID, 0, 0), Some(0x88a8));
        assert_eq!(meta.load(SKF_AD_RANDOM, 0, 0), Some(42));
        for unsupported in [SKF_AD_NLATTR, SKF_AD_NLATTR_NEST, SKF_AD_PAY_OFFSET, 1, SKF_AD_MAX] {
            assert_eq!(meta.load(unsupported, 0, 0), None, "{unsupported}");
            assert!(!supported_ancillary(unsupported));
        }
        for f in ANCILLARY_FIELDS {
            assert_eq!(supported_ancillary(f.offset), meta.load(f.offset, 1, 2).is_some());
        }
    }
}
