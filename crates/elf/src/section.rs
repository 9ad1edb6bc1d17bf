//! Program section names (libbpf's `SEC()` names) to program types.

use weir_program::ProgType;

/// The program type of a program in section `name`, or `None` when weir does not support
/// that kind of section. A name matches a kind when it is the kind itself or the kind
/// followed by `/` and anything (`xdp/devmap`, `socket/1`, `tc/ingress`): libbpf 1.x
/// spells some of these exactly and others with the suffix; weir takes both, as older
/// libbpf and iproute2 did.
pub fn prog_type_of_section(name: &str) -> Option<ProgType> {
    const KINDS: [(&str, ProgType); 9] = [
        ("socket", ProgType::SocketFilter),
        ("xdp", ProgType::Xdp),
        ("xdp.frags", ProgType::Xdp),
        ("tc", ProgType::SchedCls),
        ("tcx", ProgType::SchedCls),
        ("netkit", ProgType::SchedCls),
        ("classifier", ProgType::SchedCls),
        ("action", ProgType::SchedAct),
        ("sched_cls", ProgType::SchedCls),
    ];
    let kind = name.split_once('/').map_or(name, |(k, _)| k);
    // `tcx` and `netkit` only exist with their suffix (`tcx/ingress`, `netkit/peer`).
    if (kind == "tcx" || kind == "netkit") && kind == name {
        return None;
    }
    KINDS.iter().find(|(k, _)| *k == kind).map(|&(_, t)| t)
}

/// The supported kinds, for error messages.
pub(crate) const SUPPORTED: &str =
    "socket, xdp, xdp.frags, tc, tcx/*, netkit/*, classifier, action (each also with a /suffix)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(prog_type_of_section("xdp"), Some(ProgType::Xdp));
        assert_eq!(prog_type_of_section("xdp/devmap"), Some(ProgType::Xdp));
        assert_eq!(prog_type_of_section("xdp.frags/cpumap"), Some(ProgType::Xdp));
        assert_eq!(prog_type_of_section("socket"), Some(ProgType::SocketFilter));
        assert_eq!(prog_type_of_section("socket/7"), Some(ProgType::SocketFilter));
        assert_eq!(prog_type_of_section("tc"), Some(ProgType::SchedCls));
        assert_eq!(prog_type_of_section("tcx/ingress"), Some(ProgType::SchedCls));
        assert_eq!(prog_type_of_section("classifier/x"), Some(ProgType::SchedCls));
        assert_eq!(prog_type_of_section("action"), Some(ProgType::SchedAct));
        assert_eq!(prog_type_of_section("tcx"), None);
        assert_eq!(prog_type_of_section("xdpfoo"), None);
        assert_eq!(prog_type_of_section("kprobe/sys_open"), None);
        assert_eq!(prog_type_of_section(".text"), None);
    }
}
