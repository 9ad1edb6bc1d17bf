//! Linux's negative load offsets. On a socket filter, an absolute load (`ld`/`ldh`/`ldb
//! [k]`) whose `k` is `SKF_AD_OFF + n` reads metadata of the packet (protocol, interface
//! index, VLAN tag, ...) instead of packet bytes, and offsets from `SKF_NET_OFF` and
//! `SKF_LL_OFF` read relative to the network or link-layer header. These are the kernel's
//! values (`include/uapi/linux/filter.h`), under the kernel's names.
//!
//! `tcpdump -d` (libpcap 1.10 on Linux) prints an absolute load of a known ancillary offset
//! by a short name, `ld [ifidx]`; [`ancillary_name`] gives that name and
//! [`ancillary_kernel_name`] the kernel's, for weir's own messages. Other negative offsets,
//! including the `SKF_NET_OFF`/`SKF_LL_OFF` ranges, print as signed numbers.

/// Start of the ancillary area: `-0x1000` as a `u32`.
pub const SKF_AD_OFF: u32 = 0xffff_f000;
pub const SKF_AD_PROTOCOL: u32 = 0;
pub const SKF_AD_PKTTYPE: u32 = 4;
pub const SKF_AD_IFINDEX: u32 = 8;
pub const SKF_AD_NLATTR: u32 = 12;
pub const SKF_AD_NLATTR_NEST: u32 = 16;
pub const SKF_AD_MARK: u32 = 20;
pub const SKF_AD_QUEUE: u32 = 24;
pub const SKF_AD_HATYPE: u32 = 28;
pub const SKF_AD_RXHASH: u32 = 32;
pub const SKF_AD_CPU: u32 = 36;
pub const SKF_AD_ALU_XOR_X: u32 = 40;
pub const SKF_AD_VLAN_TAG: u32 = 44;
pub const SKF_AD_VLAN_TAG_PRESENT: u32 = 48;
pub const SKF_AD_PAY_OFFSET: u32 = 52;
pub const SKF_AD_RANDOM: u32 = 56;
pub const SKF_AD_VLAN_TPID: u32 = 60;
/// Size of the ancillary area in bytes: one past the last offset.
pub const SKF_AD_MAX: u32 = 64;

/// Loads from `SKF_NET_OFF + n` read byte `n` of the network header: `-0x100000` as a `u32`.
pub const SKF_NET_OFF: u32 = 0xfff0_0000;
/// Loads from `SKF_LL_OFF + n` read byte `n` of the link-layer header: `-0x200000` as a `u32`.
pub const SKF_LL_OFF: u32 = 0xffe0_0000;

/// One ancillary field: offset from [`SKF_AD_OFF`], the name `tcpdump -d` prints, and the
/// kernel's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AncillaryField {
    pub offset: u32,
    pub tcpdump_name: &'static str,
    pub kernel_name: &'static str,
}

/// Every ancillary field, in offset order.
pub static ANCILLARY_FIELDS: &[AncillaryField] = &[
    field(SKF_AD_PROTOCOL, "proto", "SKF_AD_PROTOCOL"),
    field(SKF_AD_PKTTYPE, "type", "SKF_AD_PKTTYPE"),
    field(SKF_AD_IFINDEX, "ifidx", "SKF_AD_IFINDEX"),
    field(SKF_AD_NLATTR, "nla", "SKF_AD_NLATTR"),
    field(SKF_AD_NLATTR_NEST, "nlan", "SKF_AD_NLATTR_NEST"),
    field(SKF_AD_MARK, "mark", "SKF_AD_MARK"),
    field(SKF_AD_QUEUE, "queue", "SKF_AD_QUEUE"),
    field(SKF_AD_HATYPE, "hatype", "SKF_AD_HATYPE"),
    field(SKF_AD_RXHASH, "rxhash", "SKF_AD_RXHASH"),
    field(SKF_AD_CPU, "cpu", "SKF_AD_CPU"),
    field(SKF_AD_ALU_XOR_X, "xor_x", "SKF_AD_ALU_XOR_X"),
    field(SKF_AD_VLAN_TAG, "vlan_tci", "SKF_AD_VLAN_TAG"),
    field(SKF_AD_VLAN_TAG_PRESENT, "vlanp", "SKF_AD_VLAN_TAG_PRESENT"),
    field(SKF_AD_PAY_OFFSET, "poff", "SKF_AD_PAY_OFFSET"),
    field(SKF_AD_RANDOM, "random", "SKF_AD_RANDOM"),
    field(SKF_AD_VLAN_TPID, "vlan_tpid", "SKF_AD_VLAN_TPID"),
];

const fn field(
    offset: u32,
    tcpdump_name: &'static str,
    kernel_name: &'static str,
) -> AncillaryField {
    AncillaryField { offset, tcpdump_name, kernel_name }
}

/// The ancillary field an absolute load with this `k` reads, if `k` is exactly one.
pub fn ancillary_field(k: u32) -> Option<&'static AncillaryField> {
    let offset = k.checked_sub(SKF_AD_OFF)?;
    ANCILLARY_FIELDS.iter().find(|f| f.offset == offset)
}

/// The name `tcpdump -d` prints for an absolute load at `k` (`ifidx` for
/// `SKF_AD_OFF + SKF_AD_IFINDEX`), or `None` for an ordinary offset.
pub fn ancillary_name(k: u32) -> Option<&'static str> {
    ancillary_field(k).map(|f| f.tcpdump_name)
}

/// The kernel's name for an ancillary `k` (`SKF_AD_IFINDEX`), for weir's own messages.
pub fn ancillary_kernel_name(k: u32) -> Option<&'static str> {
    ancillary_field(k).map(|f| f.kernel_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_the_kernel_negative_values() {
        assert_eq!(SKF_AD_OFF as i32, -0x1000);
        assert_eq!(SKF_NET_OFF as i32, -0x10_0000);
        assert_eq!(SKF_LL_OFF as i32, -0x20_0000);
    }

    #[test]
    fn fields_are_every_fourth_byte_of_the_area() {
        assert_eq!(ANCILLARY_FIELDS.len() as u32, SKF_AD_MAX / 4);
        for (i, f) in ANCILLARY_FIELDS.iter().enumerate() {
            assert_eq!(f.offset, i as u32 * 4, "{}", f.kernel_name);
            assert!(f.kernel_name.starts_with("SKF_AD_"));
        }
    }

    #[test]
    fn names_only_for_exact_ancillary_offsets() {
        assert_eq!(ancillary_name(SKF_AD_OFF), Some("proto"));
        assert_eq!(ancillary_name(SKF_AD_OFF + SKF_AD_IFINDEX), Some("ifidx"));
        assert_eq!(ancillary_name(SKF_AD_OFF + SKF_AD_VLAN_TPID), Some("vlan_tpid"));
        assert_eq!(ancillary_kernel_name(SKF_AD_OFF + SKF_AD_MARK), Some("SKF_AD_MARK"));
        assert_eq!(ancillary_name(SKF_AD_OFF + 1), None);
        assert_eq!(ancillary_name(SKF_AD_OFF + SKF_AD_MAX), None);
        assert_eq!(ancillary_name(SKF_AD_OFF - 4), None);
        assert_eq!(ancillary_name(12), None);
        assert_eq!(ancillary_name(SKF_NET_OFF), None);
    }
}
