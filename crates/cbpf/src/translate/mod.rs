//! Translation of classic BPF to eBPF, so that a classic program runs on every weir engine
//! and loads into the Linux kernel. The program is validated first ([`crate::validate`],
//! kernel rules), and the result gives the reference interpreter's verdict
//! ([`crate::CbpfFilter`], libpcap's semantics) on every packet. Two forms, by the program
//! type's [`PacketAccess`]:
//!
//! - [`PacketAccess::SkBuff`], in the manner of the kernel's own classic-to-eBPF converter:
//!   the context (`struct __sk_buff`) moves from r1 to r6, packet loads become the legacy
//!   `ldabs*`/`ldind*` loads (big-endian; the program returns 0 when the bytes are not in
//!   the packet, exactly libpcap's rule), `len` is `__sk_buff.len` (the wire length), and
//!   ancillary loads (`SKF_AD_*`) read the matching `__sk_buff` field. Runs in weir with
//!   [`bindings`]`(ProgType::SocketFilter)`, a context from [`sk_buff_context`], and the
//!   captured bytes as the packet; loads into the kernel as `BPF_PROG_TYPE_SOCKET_FILTER`,
//!   `SCHED_CLS` or `SCHED_ACT` (the types that allow the legacy loads).
//! - [`PacketAccess::Xdp`], direct packet access through `struct xdp_md`'s `data` and `data_end`:
//!   every load is preceded by a bounds check the Linux verifier accepts (hoisted and merged
//!   where one check covers later ones), reads little-endian and swaps to network order.
//!   Runs in weir with [`bindings`]`(ProgType::Xdp)` and [`xdp_context`]; loads into the
//!   kernel as `BPF_PROG_TYPE_XDP`.
//!
//! # Machine model
//!
//! A is r0 and X is r7, both set to 0 at entry; scratch cell `M[k]` is the 32-bit stack word
//! at `r10 - 64 + 4k`. Classic arithmetic is 32-bit unsigned: it becomes ALU32 operations,
//! whose zero-extension keeps A and X always equal to their 32-bit values, so jumps compare
//! all 64 bits (constants above `i32::MAX`, which an immediate would sign-extend, are
//! compared through a register). Where eBPF and libpcap differ, the translation adds the
//! check that makes it libpcap's:
//!
//! - `div x`/`mod x` with X = 0 return 0 (eBPF would go on with 0 or A).
//! - `lsh x`/`rsh x` with X >= 32 give 0 (eBPF masks the amount to 5 bits); the check is left
//!   out where X is known to be below 32.
//! - `ld [x + k]` fails when X + k overflows 32 bits (libpcap) where the kernel adds in 64
//!   bits and truncates to an `int`, which would wrap to a small or header-relative offset:
//!   unless X's known bound rules it out, the exact sum is checked first. (The kernel's own
//!   converter has no such check; this is a deliberate difference.)
//! - Conditional jumps never jump backward and returns are inline, so the eBPF program is a
//!   DAG like its source. Instructions no path reaches are left out: the Linux verifier
//!   rejects unreachable code, and libpcap's unoptimized programs have some.
//!
//! # Socket filter: ancillary loads
//!
//! protocol, pkttype, ifindex, mark, queue, rxhash, vlan_tci, vlan present and vlan_tpid read
//! `__sk_buff` fields (`protocol` and `vlan_proto` are network order there, as in the kernel,
//! and are swapped); `SKF_AD_ALU_XOR_X` is `A ^= X`. hatype, cpu and random have no
//! `__sk_buff` field: a program using them is a [`TranslateErrorKind::NoSkBuffField`] error
//! at that instruction (validation already refuses nla, nlan and poff).
//!
//! # XDP: length, limits and return values
//!
//! - XDP sees the whole frame, so there is no separate wire length: `len` is `data_end -
//!   data`, and the verdicts are libpcap's for a packet whose wire length equals its
//!   captured length. Computing it subtracts two packet pointers, which the Linux verifier
//!   allows to privileged loaders (CAP_PERFMON, or root).
//! - The verifier bounds packet offsets by `MAX_PACKET_OFF` (65535), so the target handles
//!   frames up to 65535 bytes: a load that ends past offset 65535 returns 0. (Linear XDP
//!   frames are at most a page; libpcap would differ only on a longer frame.) X-indexed loads
//!   check X + k + size <= 65535 first, which is what lets the verifier bound the pointer
//!   arithmetic, unless X's known bound already guarantees it.
//! - Ancillary loads other than `SKF_AD_ALU_XOR_X` have no socket buffer to read and are a
//!   [`TranslateErrorKind::AncillaryWithoutSkb`] error.
//! - The program returns the classic return value itself (0 for "reject", often 262144 or
//!   the snap length for "accept"). Linux 6.18's verifier accepts any return value for XDP
//!   and `BPF_PROG_TEST_RUN` reports it unchanged (checked by `tests/translate_kernel.rs`);
//!   attached to a device, though, a value that is not an `xdp_action` counts as invalid
//!   and the packet is dropped, so a caller that attaches the program maps the verdict to
//!   an action itself (`XDP_PASS` for non-zero, `XDP_DROP` for zero, for example).
//!
//! ```
//! use weir_cbpf::translate::{bindings, sk_buff_context, translate};
//! use weir_program::ProgType;
//! use weir_cbpf::{parse, Format, PacketMeta};
//! use weir_interp::{Config, Input, Interpreter};
//!
//! // tcpdump -d ip
//! let prog = parse(
//!     b"(000) ldh [12]\n(001) jeq #0x800 jt 2 jf 3\n(002) ret #262144\n(003) ret #0\n",
//!     Format::Listing,
//! )
//! .unwrap();
//! let program = translate(&prog, ProgType::SocketFilter).unwrap();
//! let program = weir_program::Verified::structural(program).unwrap();
//! let interp = Interpreter::new(&program, bindings(ProgType::SocketFilter), Config::default());
//! let mut cache = interp.cache();
//! let mut frame = [0u8; 60];
//! frame[12] = 0x08;
//! let mut ctx = sk_buff_context(60, &PacketMeta::default());
//! let input = Input::new().ctx(&mut ctx).packet(&mut frame);
//! assert_eq!(interp.run(&mut cache, input), Ok(262144));
//! ```

mod analysis;
mod emit;
mod socket;
mod xdp;

use thiserror::Error;
use weir_isa::cbpf::ancillary::{SKF_AD_ALU_XOR_X, SKF_AD_OFF};
use weir_isa::cbpf::CbpfInsn;
use weir_program::abi::{Bindings, SOCKET_FILTER, XDP};
use weir_program::{LinkError, PacketAccess, ProgType, Program};

use crate::{CbpfValidateError, CbpfValidateErrorKind, PacketMeta};

/// A classic program that cannot be translated, with the classic instruction at fault.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("instruction {index}: {kind}")]
pub struct TranslateError {
    pub index: usize,
    pub kind: TranslateErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TranslateErrorKind {
    /// The program breaks a validation rule ([`crate::validate`]).
    #[error("{0}")]
    Invalid(CbpfValidateErrorKind),
    /// A socket-filter ancillary load whose field `struct __sk_buff` does not expose.
    #[error("ancillary load {0} has no __sk_buff field to translate to")]
    NoSkBuffField(&'static str),
    /// An ancillary load on the XDP target, which has no socket buffer.
    #[error("ancillary load {0} needs a socket buffer, and an XDP context has none")]
    AncillaryWithoutSkb(&'static str),
    /// The eBPF program does not link (a jump too long to encode).
    #[error("the eBPF translation does not link: {0}")]
    Link(LinkError),
}

impl From<CbpfValidateError> for TranslateError {
    fn from(e: CbpfValidateError) -> Self {
        TranslateError { index: e.index, kind: TranslateErrorKind::Invalid(e.kind) }
    }
}

/// Translates a classic program to eBPF as a program of type `prog_type` (socket filters
/// and tc programs take the `__sk_buff` form, XDP the `xdp_md` form). The program is
/// validated under the kernel's rules first; see the module documentation for what the
/// result does.
pub fn translate(insns: &[CbpfInsn], prog_type: ProgType) -> Result<Program, TranslateError> {
    let target = prog_type.packet_access();
    crate::validate(insns)?;
    check_ancillary_support(insns, target)?;
    emit::Emitter::new(insns, target).run()
}

/// Refuses ancillary loads the target has nothing to translate to, at their instruction.
fn check_ancillary_support(insns: &[CbpfInsn], target: PacketAccess) -> Result<(), TranslateError> {
    for (index, insn) in insns.iter().enumerate() {
        if !emit::is_ancillary(insn) {
            continue;
        }
        let offset = insn.k.wrapping_sub(SKF_AD_OFF);
        if offset == SKF_AD_ALU_XOR_X {
            continue;
        }
        let problem = match target {
            PacketAccess::SkBuff => socket::ancillary_problem(offset),
            PacketAccess::Xdp => Some(xdp::ancillary_problem(insn.k)),
        };
        if let Some(kind) = problem {
            return Err(TranslateError { index, kind });
        }
    }
    Ok(())
}

/// Bindings that run a translation for `prog_type` on a weir engine: its context layout, so
/// that the engine fills in the packet pointers, and no helpers (translations call none).
pub fn bindings(prog_type: ProgType) -> Bindings {
    Bindings::for_prog_type(prog_type)
}

/// A `struct __sk_buff` for a socket-filter translation: `len` is the wire length, and the
/// fields ancillary loads read hold `meta`, laid out as the kernel does (`protocol` and
/// `vlan_proto` in network byte order). The engine fills in `data`/`data_end`.
pub fn sk_buff_context(wire_len: u32, meta: &PacketMeta) -> Vec<u8> {
    let mut ctx = vec![0u8; SOCKET_FILTER.size as usize];
    let network_u16 = |v: u16| {
        let [hi, lo] = v.to_be_bytes();
        [hi, lo, 0, 0]
    };
    let fields = [
        ("len", wire_len.to_le_bytes()),
        ("pkt_type", u32::from(meta.pkttype).to_le_bytes()),
        ("mark", meta.mark.to_le_bytes()),
        ("queue_mapping", u32::from(meta.queue).to_le_bytes()),
        ("protocol", network_u16(meta.protocol)),
        ("vlan_present", u32::from(meta.vlan_present).to_le_bytes()),
        ("vlan_tci", u32::from(meta.vlan_tci).to_le_bytes()),
        ("vlan_proto", network_u16(meta.vlan_tpid)),
        ("ifindex", meta.ifindex.to_le_bytes()),
        ("hash", meta.rxhash.to_le_bytes()),
    ];
    for (name, bytes) in fields {
        let slot = SOCKET_FILTER.field(name).and_then(|f| {
            let start = usize::try_from(f.offset).ok()?;
            ctx.get_mut(start..start.checked_add(4)?)
        });
        if let Some(slot) = slot {
            slot.copy_from_slice(&bytes);
        }
    }
    ctx
}

/// A `struct xdp_md` for an XDP translation (the engine fills in the packet pointers).
pub fn xdp_context() -> Vec<u8> {
    vec![0u8; XDP.size as usize]
}

#[cfg(test)]
mod tests;
