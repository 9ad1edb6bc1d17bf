//! [`ProgType`]: what a program is for, the one enum every crate uses for it (the front
//! ends' targets, the kernel loader, the facade). It decides the context the program gets
//! in `r1` and how it reaches the packet.

use std::fmt;
use std::str::FromStr;

use crate::abi::{ContextLayout, SOCKET_FILTER, TC, XDP};

/// A program type, with the kernel's numbering (`enum bpf_prog_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProgType {
    /// `BPF_PROG_TYPE_SOCKET_FILTER`: `struct __sk_buff` context, the legacy `ldabs`/`ldind`
    /// packet loads. The kernel's test run strips the Ethernet header before the program
    /// sees the packet, as a socket does.
    #[doc(alias = "BPF_PROG_TYPE_SOCKET_FILTER")]
    SocketFilter,
    /// `BPF_PROG_TYPE_SCHED_CLS` (tc classifier): the same context and loads as a socket
    /// filter, on the whole frame.
    #[doc(alias = "BPF_PROG_TYPE_SCHED_CLS")]
    SchedCls,
    /// `BPF_PROG_TYPE_SCHED_ACT` (tc action): as `SchedCls`.
    #[doc(alias = "BPF_PROG_TYPE_SCHED_ACT")]
    SchedAct,
    /// `BPF_PROG_TYPE_XDP`: `struct xdp_md` context, direct packet access.
    #[doc(alias = "BPF_PROG_TYPE_XDP")]
    Xdp,
}

impl ProgType {
    pub const ALL: [ProgType; 4] =
        [ProgType::SocketFilter, ProgType::SchedCls, ProgType::SchedAct, ProgType::Xdp];

    /// The kernel's `enum bpf_prog_type` value.
    pub fn kernel_id(self) -> u32 {
        match self {
            ProgType::SocketFilter => 1,
            ProgType::SchedCls => 3,
            ProgType::SchedAct => 4,
            ProgType::Xdp => 6,
        }
    }

    /// The kernel's name, `BPF_PROG_TYPE_*`.
    pub fn kernel_name(self) -> &'static str {
        match self {
            ProgType::SocketFilter => "BPF_PROG_TYPE_SOCKET_FILTER",
            ProgType::SchedCls => "BPF_PROG_TYPE_SCHED_CLS",
            ProgType::SchedAct => "BPF_PROG_TYPE_SCHED_ACT",
            ProgType::Xdp => "BPF_PROG_TYPE_XDP",
        }
    }

    /// The name the command line uses (`--target`, bpftool's `type`).
    pub fn name(self) -> &'static str {
        match self {
            ProgType::SocketFilter => "socket",
            ProgType::SchedCls => "sched_cls",
            ProgType::SchedAct => "sched_act",
            ProgType::Xdp => "xdp",
        }
    }

    /// The context layout the program gets in `r1`.
    pub fn context_layout(self) -> &'static ContextLayout {
        match self {
            ProgType::SocketFilter => &SOCKET_FILTER,
            ProgType::SchedCls | ProgType::SchedAct => &TC,
            ProgType::Xdp => &XDP,
        }
    }

    /// How the program reaches its packet.
    pub fn packet_access(self) -> PacketAccess {
        match self {
            ProgType::SocketFilter | ProgType::SchedCls | ProgType::SchedAct => {
                PacketAccess::SkBuff
            }
            ProgType::Xdp => PacketAccess::Xdp,
        }
    }
}

/// How a program reaches its packet, which decides how front ends emit packet loads: the one
/// distinction the emitters and translators make between program types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PacketAccess {
    /// Through a `struct __sk_buff` context: the legacy `ldabs`/`ldind` loads (socket
    /// filters, tc classifiers and actions).
    SkBuff,
    /// Through `struct xdp_md`'s `data`/`data_end`, with explicit bounds checks.
    Xdp,
}

impl fmt::Display for ProgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProgType::SocketFilter => "socket filter",
            ProgType::SchedCls => "tc classifier",
            ProgType::SchedAct => "tc action",
            ProgType::Xdp => "XDP",
        })
    }
}

impl FromStr for ProgType {
    type Err = String;

    /// The command-line names ([`ProgType::name`]), bpftool's and libbpf's section-style
    /// spellings (`socket_filter`, `classifier`, `tc`, `action`) and the kernel names.
    fn from_str(s: &str) -> Result<Self, String> {
        let lower = s.to_ascii_lowercase();
        let name = lower.strip_prefix("bpf_prog_type_").unwrap_or(&lower);
        Ok(match name {
            "socket" | "socket_filter" | "socketfilter" => ProgType::SocketFilter,
            "sched_cls" | "classifier" | "tc" => ProgType::SchedCls,
            "sched_act" | "action" => ProgType::SchedAct,
            "xdp" => ProgType::Xdp,
            _ => {
                let names: Vec<_> = ProgType::ALL.iter().map(|t| t.name()).collect();
                return Err(format!("unknown program type `{s}` (known: {})", names.join(", ")));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_ids_are_distinct() {
        for t in ProgType::ALL {
            assert_eq!(t.name().parse::<ProgType>(), Ok(t));
            assert_eq!(t.kernel_name().parse::<ProgType>(), Ok(t));
            assert_eq!(ProgType::ALL.iter().filter(|o| o.kernel_id() == t.kernel_id()).count(), 1);
        }
        assert!("kprobe".parse::<ProgType>().unwrap_err().contains("known: socket"));
    }
}
