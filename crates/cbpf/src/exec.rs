//! The reference interpreter for classic BPF. Its results are libpcap's `bpf_filter`
//! results, the oracle weir's translations and engines are measured against:
//!
//! - A, X and the 16 scratch cells start at 0 on every packet.
//! - A packet load that does not fit in the captured bytes ends the run with 0; so does
//!   `div x`/`mod x` with X = 0. `ld #pktlen`/`ldx #pktlen` give the wire length.
//! - `ldxb 4*([k]&0xf)` sets X to four times the low nibble of byte k.
//! - Arithmetic is 32-bit unsigned and wraps. A shift by 32 or more gives 0 (both for `x`
//!   and for a constant; validation rejects constant ones). This is what libpcap does: its
//!   interpreter tests the amount, where the kernel's translation masks it to 5 bits instead
//!   (`lsh x` with X = 33 shifts by 1 there). weir follows libpcap, the oracle of the tests.
//! - `ja` with a negative offset (libpcap's `ip6 protochain` loop) is followed; the run ends
//!   with 0 after [`MAX_BACKWARD_JUMPS`] of them, or at a jump to itself, as libpcap does.
//!   Kernel-rule programs have no such jumps.
//! - An instruction index outside the program (only possible in unvalidated programs) ends
//!   the run with 0.
//!
//! Every step is checked, so no input, validated or not, can make the interpreter panic or
//! loop forever; [`CbpfFilter`] validates first so that a program is known to be well formed.

use weir_isa::cbpf::ancillary::SKF_AD_OFF;
use weir_isa::cbpf::{decode, CbpfInsn, CbpfOp, SockFilter, MEM_WORDS};

use crate::meta::PacketMeta;
use crate::validate::{validate_with, CbpfValidateError, CbpfValidateErrorKind, Rules};

/// How many backward `ja` one run may take before it gives up with 0 (libpcap's limit).
pub const MAX_BACKWARD_JUMPS: u32 = 64;

/// A validated classic program, ready to run on any number of packets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CbpfFilter {
    insns: Box<[CbpfInsn]>,
    rules: Rules,
}

impl CbpfFilter {
    /// Validates `insns` under [`Rules::Kernel`] (see [`crate::validate`]).
    pub fn new(insns: &[CbpfInsn]) -> Result<Self, CbpfValidateError> {
        Self::with_rules(insns, Rules::Kernel)
    }

    /// Validates `insns` under libpcap's rules only, for programs `pcap_compile` produced
    /// (they may contain backward `ja`). Ancillary offsets have no meaning under these rules:
    /// such loads are out of bounds, as in libpcap.
    pub fn new_libpcap(insns: &[CbpfInsn]) -> Result<Self, CbpfValidateError> {
        Self::with_rules(insns, Rules::Libpcap)
    }

    pub fn with_rules(insns: &[CbpfInsn], rules: Rules) -> Result<Self, CbpfValidateError> {
        validate_with(insns, rules)?;
        Ok(CbpfFilter { insns: insns.into(), rules })
    }

    /// Decodes raw records (unknown opcodes are reported by index) and validates them.
    pub fn from_raw(raw: &[SockFilter], rules: Rules) -> Result<Self, CbpfValidateError> {
        let insns = decode(raw).map_err(|e| CbpfValidateError {
            index: e.index,
            kind: match e.kind {
                weir_isa::cbpf::CbpfDecodeErrorKind::UnknownOpcode(code) => {
                    CbpfValidateErrorKind::UnknownOpcode(code)
                }
                // `decode` (not `decode_strict`) reports unknown opcodes only.
                _ => CbpfValidateErrorKind::UnknownOpcode(raw.get(e.index).map_or(0, |r| r.code)),
            },
        })?;
        Self::with_rules(&insns, rules)
    }

    pub fn insns(&self) -> &[CbpfInsn] {
        &self.insns
    }

    pub fn rules(&self) -> Rules {
        self.rules
    }

    /// Runs the filter on one packet: `packet` is the captured bytes, `wire_len` the length
    /// the packet had on the wire. Ancillary loads (kernel rules only) read a zeroed
    /// [`PacketMeta`]; use [`CbpfFilter::run_with_meta`] to supply one.
    pub fn run(&self, packet: &[u8], wire_len: u32) -> u32 {
        self.run_with_meta(packet, wire_len, &PacketMeta::default())
    }

    /// [`CbpfFilter::run`] with the packet's metadata for ancillary loads.
    pub fn run_with_meta(&self, packet: &[u8], wire_len: u32, meta: &PacketMeta) -> u32 {
        let meta = match self.rules {
            Rules::Kernel => Some(meta),
            Rules::Libpcap => None,
        };
        exec(&self.insns, packet, wire_len, meta)
    }
}

/// Runs `prog` on one packet without validating it first; anything libpcap's interpreter
/// would stop on (a scratch index past 15, a constant division by 0, a jump out of the
/// program) gives 0. Supported ancillary loads read `ctx`; unsupported ones give 0.
pub fn run(prog: &[CbpfInsn], packet: &[u8], wire_len: u32, ctx: &PacketMeta) -> u32 {
    exec(prog, packet, wire_len, Some(ctx))
}

/// `size` big-endian bytes at `offset`, if they were captured.
#[inline]
fn load_be(packet: &[u8], offset: u32, size: usize) -> Option<u32> {
    let start = usize::try_from(offset).ok()?;
    let bytes = packet.get(start..start.checked_add(size)?)?;
    Some(bytes.iter().fold(0u32, |acc, &b| (acc << 8) | u32::from(b)))
}

#[inline]
fn shift_left(a: u32, amount: u32) -> u32 {
    a.checked_shl(amount).unwrap_or(0)
}

#[inline]
fn shift_right(a: u32, amount: u32) -> u32 {
    a.checked_shr(amount).unwrap_or(0)
}

/// The interpreter. `meta` is `Some` when ancillary loads are recognised (kernel dialect).
fn exec(prog: &[CbpfInsn], packet: &[u8], wire_len: u32, meta: Option<&PacketMeta>) -> u32 {
    use CbpfOp::*;
    let mut a: u32 = 0;
    let mut x: u32 = 0;
    let mut mem = [0u32; MEM_WORDS as usize];
    let mut backward_jumps: u32 = 0;
    let mut pc: usize = 0;
    // Loads return from the whole run when they fail: libpcap's "return 0".
    macro_rules! or_reject {
        ($e:expr) => {
            match $e {
                Some(v) => v,
                None => return 0,
            }
        };
    }
    loop {
        let insn = or_reject!(prog.get(pc));
        let k = insn.k;
        // `pc < prog.len()`, so this cannot overflow.
        pc = pc.wrapping_add(1);
        match insn.op {
            RetK => return k,
            RetA => return a,
            LdAbsW | LdAbsH | LdAbsB => {
                if let Some(meta) = meta {
                    if k >= SKF_AD_OFF {
                        a = or_reject!(meta.load(k.wrapping_sub(SKF_AD_OFF), a, x));
                        continue;
                    }
                }
                let size = match insn.op {
                    LdAbsW => 4,
                    LdAbsH => 2,
                    _ => 1,
                };
                a = or_reject!(load_be(packet, k, size));
            }
            LdIndW => a = or_reject!(load_be(packet, or_reject!(x.checked_add(k)), 4)),
            LdIndH => a = or_reject!(load_be(packet, or_reject!(x.checked_add(k)), 2)),
            LdIndB => a = or_reject!(load_be(packet, or_reject!(x.checked_add(k)), 1)),
            LdLen => a = wire_len,
            LdxLen => x = wire_len,
            LdxMsh => x = (or_reject!(load_be(packet, k, 1)) & 0xf) << 2,
            LdImm => a = k,
            LdxImm => x = k,
            LdMem => a = *or_reject!(mem.get(k as usize)),
            LdxMem => x = *or_reject!(mem.get(k as usize)),
            St => *or_reject!(mem.get_mut(k as usize)) = a,
            Stx => *or_reject!(mem.get_mut(k as usize)) = x,
            Ja => {
                // Offsets are 32-bit and wrap, so a "negative" k jumps backward.
                let target = (pc as u32).wrapping_add(k);
                if target as usize >= prog.len() {
                    return 0;
                }
                if (k as i32) < 0 {
                    if k == u32::MAX || backward_jumps >= MAX_BACKWARD_JUMPS {
                        return 0;
                    }
                    backward_jumps = backward_jumps.wrapping_add(1);
                }
                pc = target as usize;
            }
            JeqK | JgtK | JgeK | JsetK | JeqX | JgtX | JgeX | JsetX => {
                let operand = if matches!(insn.op, JeqX | JgtX | JgeX | JsetX) { x } else { k };
                let taken = match insn.op {
                    JeqK | JeqX => a == operand,
                    JgtK | JgtX => a > operand,
                    JgeK | JgeX => a >= operand,
                    _ => a & operand != 0,
                };
                let off = if taken { insn.jt } else { insn.jf };
                pc = pc.wrapping_add(usize::from(off));
            }
            AddX => a = a.wrapping_add(x),
            SubX => a = a.wrapping_sub(x),
            MulX => a = a.wrapping_mul(x),
            DivX => a = or_reject!(a.checked_div(x)),
            ModX => a = or_reject!(a.checked_rem(x)),
            AndX => a &= x,
            OrX => a |= x,
            XorX => a ^= x,
            LshX => a = shift_left(a, x),
            RshX => a = shift_right(a, x),
            AddK => a = a.wrapping_add(k),
            SubK => a = a.wrapping_sub(k),
            MulK => a = a.wrapping_mul(k),
            DivK => a = or_reject!(a.checked_div(k)),
            ModK => a = or_reject!(a.checked_rem(k)),
            AndK => a &= k,
            OrK => a |= k,
            XorK => a ^= k,
            LshK => a = shift_left(a, k),
            RshK => a = shift_right(a, k),
            Neg => a = a.wrapping_neg(),
            Tax => x = a,
            Txa => a = x,
        }
    }
}

#[cfg(test)]
mod tests;
