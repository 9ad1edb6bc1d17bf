//! The documented differences between weir and the oracle (libpcap compiling for a capture
//! file, as `tcpdump -r` does), recognised precisely so that the differential test can count them
//! instead of failing on them, and fail on everything else.
//!
//! Each one is recognised from what the compilers and the packet show, not from the text of
//! the expression alone:
//!
//! - **libpcap bug, `byte N & V` / `byte N | V`**: libpcap's code for these applies the
//!   operation to whatever the accumulator holds, without loading the byte. Recognised by
//!   spelling each such primitive out as `(link[N] & V != 0)` for libpcap only: weir must
//!   then agree everywhere.
//! - **weir limit, protochain depth**: weir's protochain walk gives up (rejects the
//!   packet) on its hop after [`PROTOCHAIN_HOPS`]; libpcap 1.10's loops on to the end of
//!   the chain. Recognised per packet by walking the packet's own IPv6 extension / AH
//!   chain the way the compiled walk does.
//! - **classic BPF's backward-jump budget**: classic BPF's walk loops with a backward
//!   `ja`, and weir-cbpf ends a packet's run at its 65th backward jump (libpcap's git head
//!   does too; 1.10 does not), however many walks made them: with several protochains,
//!   the classic program alone rejects a packet whose walks add up past 64 hops.
//!   Recognised when only the classic verdict differs and the expression's protochains
//!   times the packet's longest walk exceed 64.
//! - **weir limit, scratch slots**: three `geneve`s need more slots than lowering keeps;
//!   recognised by weir's own message for it.

use weir_pflang::ast::{AddrKind, ByteOp, Expr, ExprKind};
use weir_pflang::LinkType;
use weir_sys::libpcap::BpfInsn;

/// The hops a protochain walk makes before it gives up (the IR's `CHAIN_HOP_BUDGET`); the
/// differential test checks it against weir's verdicts on chains of every length around it
/// (`protochain_depth_is_the_documented_one`).
pub const PROTOCHAIN_HOPS: usize = weir_filter::CHAIN_HOP_BUDGET as usize;

/// weir's refusal when an expression's variable-length headers need more scratch slots
/// than lowering keeps (three `geneve`s): a documented weir limit.
pub const SCRATCH_BUDGET_MESSAGE: &str =
    "not supported: too many variable-length headers in one expression";

/// What an expression contains that a documented difference depends on.
#[derive(Debug, Clone, Default)]
pub struct Features {
    /// The expression with every `byte N & V` / `byte N | V` spelled out as a link-layer
    /// load libpcap compiles correctly; `None` when it has no such primitive.
    pub byte_spelled_out: Option<String>,
    /// A `protochain` primitive (written or inherited).
    pub protochain: bool,
    /// How many `protochain` primitives (each walks once on a packet of its IP version).
    pub protochains: usize,
}

impl Features {
    /// Reads `text` with weir's parser (an expression it cannot parse has no features).
    pub fn of(text: &str) -> Features {
        let Ok(Some(ast)) = weir_pflang::parse(text) else { return Features::default() };
        let mut bytes = Vec::new();
        let mut protochains = 0;
        visit(&ast, &mut |e| match &e.kind {
            ExprKind::Byte { offset, op: op @ (ByteOp::And | ByteOp::Or), value } => {
                let op = if *op == ByteOp::And { "&" } else { "|" };
                bytes.push((e.span, format!("(link[{offset}] {op} {value} != 0)")));
            }
            ExprKind::Primitive(p) if p.qual.addr == Some(AddrKind::ProtoChain) => {
                protochains += 1;
            }
            _ => {}
        });
        let byte_spelled_out = (!bytes.is_empty()).then(|| {
            let mut out = text.to_string();
            // Right to left, so earlier spans stay valid.
            bytes.sort_by_key(|(span, _)| std::cmp::Reverse(span.start));
            for (span, spelled) in bytes {
                out.replace_range(span.start..span.end, &spelled);
            }
            out
        });
        Features { byte_spelled_out, protochain: protochains > 0, protochains }
    }
}

fn visit<'a>(e: &'a Expr, f: &mut impl FnMut(&'a Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Chain { first, rest } => {
            visit(first, f);
            for (_, next) in rest {
                visit(next, f);
            }
        }
        ExprKind::Not(inner) => visit(inner, f),
        _ => {}
    }
}

// ---- comparisons under an all-zero mask (@masked-out-words) ------------------------------

/// Absolute and indexed loads (word, half, byte).
pub const LD_ABS: [u16; 3] = [0x20, 0x28, 0x30];
pub const LD_IND: [u16; 3] = [0x40, 0x48, 0x50];
const AND_K: u16 = 0x54;
const JEQ_K: u16 = 0x15;
const JA: u16 = 0x05;

/// `prog` with every comparison under an all-zero mask (`ld; and #0; jeq #0`) replaced by
/// a jump to its true branch: such a comparison compares nothing, and reads nothing in weir
/// (and in libpcap's optimized code). Returns how many were replaced. Unoptimized gencode
/// never jumps into the middle of the three instructions, and the next block loads afresh.
pub fn skip_masked_out_compares(prog: &mut [BpfInsn]) -> usize {
    let mut n = 0;
    for i in 0..prog.len().saturating_sub(2) {
        let (Some(ld), Some(and), Some(jeq)) = (prog.get(i), prog.get(i + 1), prog.get(i + 2))
        else {
            continue;
        };
        let is_load = LD_ABS.contains(&ld.code) || LD_IND.contains(&ld.code);
        if is_load && and.code == AND_K && and.k == 0 && jeq.code == JEQ_K && jeq.k == 0 {
            let target = 2 + u32::from(jeq.jt);
            if let Some(slot) = prog.get_mut(i) {
                *slot = BpfInsn { code: JA, jt: 0, jf: 0, k: target };
                n += 1;
            }
        }
    }
    n
}

// IP protocol numbers the protochain walk steps over.
const HOP_BY_HOP: u8 = 0;
const ROUTING: u8 = 43;
const FRAGMENT: u8 = 44;
const AH: u8 = 51;
const DEST_OPTS: u8 = 60;

/// Where the network layer may start in a packet of `link`: after the link header, and
/// again after each VLAN tag, MPLS label and PPPoE session header in front of it (the
/// walk of `vlan and protochain 6` starts behind the tag).
fn network_starts(link: LinkType, data: &[u8]) -> Vec<usize> {
    let half = |at: usize| data.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    // Juniper: where libpcap puts the network layer (the unset offsets read before the
    // packet), and behind the Ethernet PICs' frame: anywhere in the first bytes.
    if link.is_juniper() {
        return (0..data.len().min(64)).collect();
    }
    match link {
        LinkType::Ethernet => {
            let mut starts = vec![14];
            let mut type_at = 12;
            while let Some(ty) = half(type_at) {
                match ty {
                    0x8100 | 0x88a8 | 0x9100 => type_at += 4,
                    0x8864 => {
                        // PPPoE session: 6 bytes, then the 2-byte PPP protocol.
                        starts.push(type_at + 2 + 8);
                        break;
                    }
                    0x8847 => {
                        let mut at = type_at + 2;
                        while let Some(&bos) = data.get(at + 2) {
                            at += 4;
                            starts.push(at);
                            if bos & 1 == 1 {
                                break;
                            }
                        }
                        break;
                    }
                    _ => break,
                }
                starts.push(type_at + 2);
            }
            starts
        }
        LinkType::LinuxSll => vec![16],
        LinkType::LinuxSll2 => vec![20],
        LinkType::Null | LinkType::Loop => vec![4],
        LinkType::Raw | LinkType::Ipv4 | LinkType::Ipv6 => vec![0],
        LinkType::Ppp | LinkType::PppSerial | LinkType::CHdlc => vec![4],
        LinkType::Slip => vec![16],
        // libpcap reads Frame Relay's network layer at 0.
        LinkType::FrameRelay => vec![0],
        LinkType::ArcnetBsd => vec![6],
        LinkType::ArcnetLinux => vec![8],
        LinkType::IpOverIb => vec![4],
        // libpcap compiles nothing that reads these payloads.
        LinkType::Nflog
        | LinkType::DsaTagBrcm
        | LinkType::DsaTagBrcmPrepend
        | LinkType::DsaTagDsa
        | LinkType::DsaTagEdsa
        | LinkType::LinuxLapd
        | LinkType::Docsis
        | LinkType::LinuxIrda
        | LinkType::Pfsync
        | LinkType::Ieee802154Linux
        | LinkType::Ieee802154
        | LinkType::Ieee802154NonaskPhy
        | LinkType::Ieee802154Nofcs
        | LinkType::Ieee802154Tap
        | LinkType::Mtp2
        | LinkType::Mtp2WithPhdr
        | LinkType::Mtp3
        | LinkType::JuniperPicPeer
        | LinkType::Erf
        | LinkType::Mfr
        | LinkType::Ax25Kiss
        | LinkType::Opaque(_) => vec![],
        // Handled above.
        weir_packet::juniper_links!() => vec![],
        // Juniper: where libpcap puts the network layer (the unset offsets read before the
        // packet), and behind the Ethernet PICs' frame.
        link if link.is_juniper() => (0..data.len().min(64)).collect(),
        // Behind LLC and SNAP, and behind a PPPoE session header there.
        LinkType::Fddi => vec![21, 29],
        LinkType::TokenRing => vec![22, 30],
        // LLC traffic as above; LANE's Ethernet frame (6 bytes in), a VLAN tag or a PPPoE
        // session header in it.
        LinkType::SunAtm => vec![12, 20, 20 + 4, 20 + 8, 20 + 12, 12 + 8],
        // Behind the header, as long as its first byte says, rounded up to 4.
        LinkType::Pflog => data.first().map_or(vec![], |&len| vec![(usize::from(len) + 3) & !3]),
        LinkType::Ipnet => vec![24],
        LinkType::SlipBsdos | LinkType::PppBsdos => vec![24],
        LinkType::PppPppd => vec![4],
        LinkType::PppEther => vec![8],
        LinkType::SymantecFirewall => vec![44],
        LinkType::AppleIpOverIeee1394 => vec![18],
        LinkType::AtmClip => vec![8, 16],
        LinkType::AtmRfc1483 => vec![8, 16],
        LinkType::IpOverFc => vec![24, 32],
        LinkType::Ltalk => vec![0],
        LinkType::Enc => vec![12],
        // libpcap reads BACnet's network layer 2 bytes before the packet.
        LinkType::BacnetMsTp => vec![],
        // Ethernet behind the pseudo-header.
        LinkType::NetAnalyzer | LinkType::NetAnalyzerTransparent => {
            let skip = if link == LinkType::NetAnalyzer { 4 } else { 12 };
            let inner = data.get(skip..).unwrap_or(&[]);
            network_starts(LinkType::Ethernet, inner).into_iter().map(|n| n + skip).collect()
        }
        // Behind a radio header and an 802.11 header of the packet's own lengths: any
        // place from the shortest 802.11 header and LLC/SNAP on.
        LinkType::Ieee80211
        | LinkType::Prism
        | LinkType::Radiotap
        | LinkType::Avs
        | LinkType::Ppi => (32..data.len().min(320)).collect(),
    }
}

/// Whether the protochain walk over the packet's header chain needs more than
/// [`PROTOCHAIN_HOPS`] hops, from any place the network layer may start: the packets on
/// which weir's walk gives up (rejects) where libpcap's loop goes on.
///
/// The walk is followed as the compiled one moves (weir's follows libpcap's): each hop
/// steps over one IPv6 extension header (next header at byte 0, length in 8-octet units
/// past the first at byte 1) or one AH header, whose length (4-octet units plus 2) becomes
/// the offset itself rather than being added to it (a libpcap quirk both keep). A load past
/// the captured bytes ends the walk (both abort). The sought protocol is not known here, so
/// a chain is "too long" even when the walk would have stopped early at it; only packets
/// on which the verdicts differ are recognised this way.
pub fn protochain_walk_exceeds(link: LinkType, data: &[u8]) -> bool {
    network_starts(link, data)
        .into_iter()
        .any(|net| versions(link, data, net).any(|v| walk(data, net, v).1))
}

/// The most hops a protochain walk makes on the packet, from any place the network layer
/// may start (at most [`PROTOCHAIN_HOPS`]), whatever protocol it seeks.
pub fn protochain_walk_hops(link: LinkType, data: &[u8]) -> usize {
    network_starts(link, data)
        .into_iter()
        .flat_map(|net| versions(link, data, net).map(move |v| walk(data, net, v).0))
        .max()
        .unwrap_or(0)
}

/// The hops a walk from `net` makes within [`PROTOCHAIN_HOPS`], and whether it would go
/// on past them.
/// The IP versions a walk from `net` may take the header for: its version nibble, except on
/// Frame Relay, whose NLPID (not the header read at 0) says, so both.
fn versions(link: LinkType, data: &[u8], net: usize) -> impl Iterator<Item = u8> {
    let nibble = data.get(net).map_or(0, |b| b >> 4);
    let both = link == LinkType::FrameRelay;
    [if both { 4 } else { nibble }, if both { 6 } else { 0 }].into_iter().filter(|&v| v != 0)
}

fn walk(data: &[u8], net: usize, version: u8) -> (usize, bool) {
    let byte = |at: usize| data.get(net.checked_add(at)?).copied();
    let (v6, mut next, mut offset) = match version {
        4 => match (byte(9), byte(0)) {
            (Some(next), Some(first)) => (false, next, usize::from(first & 0xf) * 4),
            _ => return (0, false),
        },
        6 => match byte(6) {
            Some(next) => (true, next, 40),
            None => return (0, false),
        },
        _ => return (0, false),
    };
    let is_extension = |n: u8| matches!(n, HOP_BY_HOP | DEST_OPTS | ROUTING | FRAGMENT);
    let steps = |n: u8| (v6 && is_extension(n)) || n == AH;
    for hops in 0..PROTOCHAIN_HOPS {
        if !steps(next) {
            return (hops, false);
        }
        let (Some(n), Some(len)) = (byte(offset), byte(offset + 1)) else { return (hops, false) };
        offset = if next == AH {
            (usize::from(len) + 2) * 4
        } else {
            offset + (usize::from(len) + 1) * 8
        };
        next = n;
    }
    (PROTOCHAIN_HOPS, steps(next))
}

/// Whether libpcap's program (with the harness's 17-instruction zeroing prologue) reads a
/// packet-dependent link offset from a register that holds something else: a register
/// used as an index (`ldx M[k]` then an indexed load) that is also stored by something
/// other than the 802.11 or pflog offset computation (a relation's temporary: `ld #0;
/// st M[k]`), or never stored (after `geneve` on 802.11, libpcap indexes with a register
/// nothing wrote). The offset computation's stores follow `add #24`, `add #2`,
/// `and #0xfffffffc` (also pflog's rounded header length), `or x` (radiotap length),
/// `ld [4]` (AVS length) or `ld #144`.
pub fn offset_register_reused(prog: &[BpfInsn]) -> bool {
    const LDX_MEM: u16 = 0x61;
    const ST: u16 = 0x02;
    let body = prog.get(17..).unwrap_or(&[]);
    let mut index_regs = Vec::new();
    for w in body.windows(2) {
        // ldx M[k] followed by ld/ldh/ldb [x + k].
        if w[0].code == LDX_MEM && matches!(w[1].code, 0x40 | 0x48 | 0x50) {
            index_regs.push(w[0].k);
        }
    }
    let offset_store = |prev: &BpfInsn| {
        matches!(
            (prev.code, prev.k),
            (0x04, 24) | (0x04, 2) | (0x54, 0xffff_fffc) | (0x4c, _) | (0x20, 4) | (0x00, 144)
        )
    };
    index_regs.iter().any(|&k| {
        let stores: Vec<usize> =
            (1..body.len()).filter(|&i| body[i].code == ST && body[i].k == k).collect();
        stores.is_empty() || stores.iter().any(|&i| !offset_store(&body[i - 1]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_tests_with_and_or_are_spelled_out_for_libpcap() {
        let f = Features::of("not byte 14 & 0x40 or byte 0 = 1 and (byte 3 | 2)");
        assert_eq!(
            f.byte_spelled_out.as_deref(),
            Some("not (link[14] & 64 != 0) or byte 0 = 1 and (link[3] | 2 != 0)")
        );
        assert!(!f.protochain);
        assert!(Features::of("byte 1 < 2").byte_spelled_out.is_none());
        assert!(Features::of("ip6 protochain 6 or 17").protochain);
        assert!(!Features::of("ip proto 6").protochain);
    }
}
