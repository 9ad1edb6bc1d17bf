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
//! Two interpreters share these semantics. [`run`] takes any program, validated or not, and
//! checks every step, so no input can make it panic or loop forever. [`CbpfFilter`]
//! validates first and then decodes the program once into a compact internal form (`Op`):
//! jump targets are absolute indices, loads are specialised by width (one length comparison
//! each), scratch indices, constant divisors and constant shifts are known good, and an
//! instruction that could only fail (a `ja` out of the program, to itself) becomes `ret #0`.
//! Its run loop then has no per-instruction checks beyond fetching the instruction; the unit
//! tests run both interpreters on every program and require the same result. A filter that
//! is one test and two returns (`ip`, `arp`, `greater 1000`) is mostly the loop's fixed cost,
//! so [`CbpfFilter`] runs such a program in line in the caller instead (`Head`).

use std::num::NonZeroU32;

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
    /// `insns` decoded once ([`decode_validated`]), what [`CbpfFilter::run`] executes when
    /// the program is not a `head`.
    code: Box<[Op]>,
    /// The whole program done in line by [`CbpfFilter::run_with_meta`], when it is a [`Head`].
    head: Option<Head>,
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
        let code = decode_validated(insns, rules);
        let head = Head::of(&code);
        Ok(CbpfFilter { insns: insns.into(), code, head, rules })
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
    #[inline]
    pub fn run(&self, packet: &[u8], wire_len: u32) -> u32 {
        self.run_with_meta(packet, wire_len, &PacketMeta::default())
    }

    /// [`CbpfFilter::run`] with the packet's metadata for ancillary loads.
    #[inline]
    pub fn run_with_meta(&self, packet: &[u8], wire_len: u32, meta: &PacketMeta) -> u32 {
        if let Some(head) = &self.head {
            let Some(a) = head.load.value(packet, wire_len) else { return 0 };
            // One comparison for every test: the masked value's distance above the range's start.
            let holds = (a & head.mask).wrapping_sub(head.low) <= head.span;
            return head.returns[usize::from(holds)];
        }
        // Under libpcap's rules the decoded program has no ancillary loads.
        exec_decoded(&self.code, packet, wire_len, meta)
    }
}

/// A program that tests a value it loads against a constant and returns a constant either way
/// (`ldh [12]; jeq #0x800; ret #k; ret #0`, `ld len; jge #1000; ...`): `ip`, `arp`, `ip6`,
/// `greater`, `less`. The run does it in line in the caller and never enters the
/// interpreter's loop, whose own start (saving registers, zeroing scratch memory, two
/// dispatches) costs such a filter more than its instructions do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Head {
    load: HeadLoad,
    /// The test, as a range of masked values (`A & mask - low <= span`, wrapping): `jeq #k`
    /// is `[k, k]`, `jgt #k` is `[k + 1, max]`, `jge #k` is `[k, max]`, and `jset #k` is
    /// `A & k` in `[0, 0]` with its ways swapped.
    mask: u32,
    low: u32,
    span: u32,
    /// The result when the test fails (`returns[0]`) and when it holds (`returns[1]`).
    returns: [u32; 2],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HeadLoad {
    /// `ld #pktlen`: the wire length.
    Len,
    Word(u32),
    Half(u32),
    Byte(u32),
}

impl Head {
    /// The head of a decoded program, if it is one: its first instruction (or its first two:
    /// `ld len` and a jump) a test whose ways both land on a `ret #k`.
    fn of(code: &[Op]) -> Option<Head> {
        let ret = |target: u16| match code.get(usize::from(target)) {
            Some(&Op::Ret(k)) => Some(k),
            _ => None,
        };
        // A fused load keeps its jump in the next slot (`fuse`), as `ld len` does.
        let load = match *code.first()? {
            Op::LdLen => HeadLoad::Len,
            Op::LdWJeq(o, ..) | Op::LdWJgt(o, ..) | Op::LdWJge(o, ..) | Op::LdWJset(o, ..) => {
                HeadLoad::Word(o)
            }
            Op::LdHJeq(o, ..) | Op::LdHJgt(o, ..) | Op::LdHJge(o, ..) | Op::LdHJset(o, ..) => {
                HeadLoad::Half(o)
            }
            Op::LdBJeq(o, ..) | Op::LdBJgt(o, ..) | Op::LdBJge(o, ..) | Op::LdBJset(o, ..) => {
                HeadLoad::Byte(o)
            }
            _ => return None,
        };
        let jump = *code.get(1)?;
        // (mask, low, span, the way when the range holds, the way when it does not)
        let (mask, low, span, inside, outside) = match jump {
            Op::JeqK(k, jt, jf) => (u32::MAX, k, 0, jt, jf),
            // `jgt #max` never holds: the empty mask's range [0, 0] always does, to `jf`.
            Op::JgtK(u32::MAX, _, jf) => (0, 0, 0, jf, jf),
            Op::JgtK(k, jt, jf) => {
                let low = k.wrapping_add(1);
                (u32::MAX, low, u32::MAX.wrapping_sub(low), jt, jf)
            }
            Op::JgeK(k, jt, jf) => (u32::MAX, k, u32::MAX.wrapping_sub(k), jt, jf),
            Op::JsetK(k, jt, jf) => (k, 0, 0, jf, jt),
            _ => return None,
        };
        Some(Head { load, mask, low, span, returns: [ret(outside)?, ret(inside)?] })
    }
}

impl HeadLoad {
    /// The loaded value, or `None` where the load does not fit in the captured bytes.
    #[inline(always)]
    fn value(self, packet: &[u8], wire_len: u32) -> Option<u32> {
        Some(match self {
            HeadLoad::Len => wire_len,
            HeadLoad::Word(o) => u32::from_be_bytes(bytes(packet, o)?),
            HeadLoad::Half(o) => u32::from(u16::from_be_bytes(bytes(packet, o)?)),
            HeadLoad::Byte(o) => u32::from(bytes::<1>(packet, o)?[0]),
        })
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

/// One decoded instruction. Jump targets are absolute instruction indices (a program has at
/// most 4096 instructions, so they fit in 16 bits). Every operand is as validation proved it:
/// scratch indices are below 16, constant divisors are not 0, constant shifts are below 32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Ret(u32),
    RetA,
    LdW(u32),
    LdH(u32),
    LdB(u32),
    LdIndW(u32),
    LdIndH(u32),
    LdIndB(u32),
    /// An ancillary load (kernel rules), by offset from `SKF_AD_OFF`.
    LdAnc(u32),
    LdLen,
    LdxLen,
    LdxMsh(u32),
    LdImm(u32),
    LdxImm(u32),
    LdMem(u8),
    LdxMem(u8),
    St(u8),
    Stx(u8),
    Ja(u16),
    /// A backward `ja` (libpcap rules): counted against [`MAX_BACKWARD_JUMPS`].
    JaBack(u16),
    JeqK(u32, u16, u16),
    JgtK(u32, u16, u16),
    JgeK(u32, u16, u16),
    JsetK(u32, u16, u16),
    JeqX(u16, u16),
    JgtX(u16, u16),
    JgeX(u16, u16),
    JsetX(u16, u16),
    AddX,
    SubX,
    MulX,
    DivX,
    ModX,
    AndX,
    OrX,
    XorX,
    LshX,
    RshX,
    AddK(u32),
    SubK(u32),
    MulK(u32),
    DivK(NonZeroU32),
    ModK(NonZeroU32),
    AndK(u32),
    OrK(u32),
    XorK(u32),
    /// Shift amounts below 32.
    LshK(u32),
    RshK(u32),
    Neg,
    Tax,
    Txa,
    // A packet load followed by a conditional jump on a constant (the commonest pair in
    // compiled filters), fused into the load's slot: `(offset, k, jt, jf)`. A is set to the
    // loaded value, as the pair does; the jump's slot keeps the jump for jumps that land there.
    LdWJeq(u32, u32, u16, u16),
    LdWJgt(u32, u32, u16, u16),
    LdWJge(u32, u32, u16, u16),
    LdWJset(u32, u32, u16, u16),
    LdHJeq(u32, u32, u16, u16),
    LdHJgt(u32, u32, u16, u16),
    LdHJge(u32, u32, u16, u16),
    LdHJset(u32, u32, u16, u16),
    LdBJeq(u32, u32, u16, u16),
    LdBJgt(u32, u32, u16, u16),
    LdBJge(u32, u32, u16, u16),
    LdBJset(u32, u32, u16, u16),
    LdIndWJeq(u32, u32, u16, u16),
    LdIndWJgt(u32, u32, u16, u16),
    LdIndWJge(u32, u32, u16, u16),
    LdIndWJset(u32, u32, u16, u16),
    LdIndHJeq(u32, u32, u16, u16),
    LdIndHJgt(u32, u32, u16, u16),
    LdIndHJge(u32, u32, u16, u16),
    LdIndHJset(u32, u32, u16, u16),
    LdIndBJeq(u32, u32, u16, u16),
    LdIndBJgt(u32, u32, u16, u16),
    LdIndBJge(u32, u32, u16, u16),
    LdIndBJset(u32, u32, u16, u16),
    // `and #mask` followed by a conditional jump on a constant (a `net` test): `(mask, k, jt,
    // jf)`, fused the same way.
    AndJeq(u32, u32, u16, u16),
    AndJgt(u32, u32, u16, u16),
    AndJge(u32, u32, u16, u16),
    AndJset(u32, u32, u16, u16),
    /// `jeq #k1` whose false way lands on `jeq #k2` with the same true way: both tests of the
    /// same A in one dispatch, `(k1, k2, jt, jf2)`. libpcap's programs test one loaded value
    /// against a chain of constants this way (`vlan`'s three tags, a host set's addresses);
    /// each link skips one. The fields are the fused pairs' shape, so the loop's dispatch
    /// reads no field it did not read before.
    JeqOr(u32, u32, u16, u16),
}

/// Decodes a program that passed [`validate_with`] under `rules`. Anything validation would
/// have refused still decodes to something that behaves as [`run`] does: an instruction that
/// can only fail becomes `ret #0`, a jump target past the end becomes the index just past
/// the last instruction, where the fetch fails and the run ends with 0.
fn decode_validated(insns: &[CbpfInsn], rules: Rules) -> Box<[Op]> {
    use CbpfOp as C;
    let len = insns.len();
    // Index just past the end (or the largest representable one): fetching there gives 0.
    let end = u16::try_from(len).unwrap_or(u16::MAX);
    let to_index = |target: u64| -> u16 {
        if target >= len as u64 {
            end
        } else {
            u16::try_from(target).unwrap_or(end)
        }
    };
    let scratch = |k: u32| u8::try_from(k).ok().filter(|&i| u32::from(i) < MEM_WORDS);
    let mut code = insns
        .iter()
        .enumerate()
        .map(|(index, insn)| {
            let k = insn.k;
            let next = (index as u64).wrapping_add(1);
            let jt = to_index(next.wrapping_add(u64::from(insn.jt)));
            let jf = to_index(next.wrapping_add(u64::from(insn.jf)));
            let reject = Op::Ret(0);
            match insn.op {
                C::RetK => Op::Ret(k),
                C::RetA => Op::RetA,
                C::LdAbsW | C::LdAbsH | C::LdAbsB if rules == Rules::Kernel && k >= SKF_AD_OFF => {
                    Op::LdAnc(k.wrapping_sub(SKF_AD_OFF))
                }
                C::LdAbsW => Op::LdW(k),
                C::LdAbsH => Op::LdH(k),
                C::LdAbsB => Op::LdB(k),
                C::LdIndW => Op::LdIndW(k),
                C::LdIndH => Op::LdIndH(k),
                C::LdIndB => Op::LdIndB(k),
                C::LdLen => Op::LdLen,
                C::LdxLen => Op::LdxLen,
                C::LdxMsh => Op::LdxMsh(k),
                C::LdImm => Op::LdImm(k),
                C::LdxImm => Op::LdxImm(k),
                C::LdMem => scratch(k).map_or(reject, Op::LdMem),
                C::LdxMem => scratch(k).map_or(reject, Op::LdxMem),
                C::St => scratch(k).map_or(reject, Op::St),
                C::Stx => scratch(k).map_or(reject, Op::Stx),
                C::Ja => {
                    // Offsets are 32-bit and wrap, so a "negative" k jumps backward.
                    let target = (next as u32).wrapping_add(k);
                    if target as usize >= len || k == u32::MAX {
                        reject
                    } else if (k as i32) < 0 {
                        Op::JaBack(to_index(u64::from(target)))
                    } else {
                        Op::Ja(to_index(u64::from(target)))
                    }
                }
                C::JeqK => Op::JeqK(k, jt, jf),
                C::JgtK => Op::JgtK(k, jt, jf),
                C::JgeK => Op::JgeK(k, jt, jf),
                C::JsetK => Op::JsetK(k, jt, jf),
                C::JeqX => Op::JeqX(jt, jf),
                C::JgtX => Op::JgtX(jt, jf),
                C::JgeX => Op::JgeX(jt, jf),
                C::JsetX => Op::JsetX(jt, jf),
                C::AddX => Op::AddX,
                C::SubX => Op::SubX,
                C::MulX => Op::MulX,
                C::DivX => Op::DivX,
                C::ModX => Op::ModX,
                C::AndX => Op::AndX,
                C::OrX => Op::OrX,
                C::XorX => Op::XorX,
                C::LshX => Op::LshX,
                C::RshX => Op::RshX,
                C::AddK => Op::AddK(k),
                C::SubK => Op::SubK(k),
                C::MulK => Op::MulK(k),
                C::DivK => NonZeroU32::new(k).map_or(reject, Op::DivK),
                C::ModK => NonZeroU32::new(k).map_or(reject, Op::ModK),
                C::AndK => Op::AndK(k),
                C::OrK => Op::OrK(k),
                C::XorK => Op::XorK(k),
                // A shift by 32 or more gives 0.
                C::LshK | C::RshK if k >= 32 => Op::LdImm(0),
                C::LshK => Op::LshK(k),
                C::RshK => Op::RshK(k),
                C::Neg => Op::Neg,
                C::Tax => Op::Tax,
                C::Txa => Op::Txa,
            }
        })
        .collect::<Vec<_>>();
    fuse(&mut code);
    chain_jeqs(&mut code);
    code.into_boxed_slice()
}

/// Makes each `jeq #k` whose false way lands on another `jeq #k` (as decoded, before this
/// pass) with the same true way an `Op::JeqOr` that does both; the second keeps its own slot,
/// for the jumps that land there and for the chain's next link. Nothing runs between the two
/// tests, so A is the same for both.
fn chain_jeqs(code: &mut [Op]) {
    let plain = code.to_vec();
    for (slot, &op) in code.iter_mut().zip(&plain) {
        let Op::JeqK(k1, jt1, jf1) = op else { continue };
        if let Some(&Op::JeqK(k2, jt2, jf2)) = plain.get(usize::from(jf1)) {
            if jt2 == jt1 {
                *slot = Op::JeqOr(k1, k2, jt1, jf2);
            }
        }
    }
}

/// Fuses each packet load with the conditional jump after it (see `Op::LdWJeq`). The jump
/// keeps its own slot, so a jump that lands on it still runs it alone and indices stay put.
fn fuse(code: &mut [Op]) {
    for index in 0..code.len().saturating_sub(1) {
        let next = index.wrapping_add(1);
        let (Some(&load), Some(&jump)) = (code.get(index), code.get(next)) else { continue };
        let fused = match (load, jump) {
            (Op::LdW(o), Op::JeqK(k, t, f)) => Op::LdWJeq(o, k, t, f),
            (Op::LdW(o), Op::JgtK(k, t, f)) => Op::LdWJgt(o, k, t, f),
            (Op::LdW(o), Op::JgeK(k, t, f)) => Op::LdWJge(o, k, t, f),
            (Op::LdW(o), Op::JsetK(k, t, f)) => Op::LdWJset(o, k, t, f),
            (Op::LdH(o), Op::JeqK(k, t, f)) => Op::LdHJeq(o, k, t, f),
            (Op::LdH(o), Op::JgtK(k, t, f)) => Op::LdHJgt(o, k, t, f),
            (Op::LdH(o), Op::JgeK(k, t, f)) => Op::LdHJge(o, k, t, f),
            (Op::LdH(o), Op::JsetK(k, t, f)) => Op::LdHJset(o, k, t, f),
            (Op::LdB(o), Op::JeqK(k, t, f)) => Op::LdBJeq(o, k, t, f),
            (Op::LdB(o), Op::JgtK(k, t, f)) => Op::LdBJgt(o, k, t, f),
            (Op::LdB(o), Op::JgeK(k, t, f)) => Op::LdBJge(o, k, t, f),
            (Op::LdB(o), Op::JsetK(k, t, f)) => Op::LdBJset(o, k, t, f),
            (Op::LdIndW(o), Op::JeqK(k, t, f)) => Op::LdIndWJeq(o, k, t, f),
            (Op::LdIndW(o), Op::JgtK(k, t, f)) => Op::LdIndWJgt(o, k, t, f),
            (Op::LdIndW(o), Op::JgeK(k, t, f)) => Op::LdIndWJge(o, k, t, f),
            (Op::LdIndW(o), Op::JsetK(k, t, f)) => Op::LdIndWJset(o, k, t, f),
            (Op::LdIndH(o), Op::JeqK(k, t, f)) => Op::LdIndHJeq(o, k, t, f),
            (Op::LdIndH(o), Op::JgtK(k, t, f)) => Op::LdIndHJgt(o, k, t, f),
            (Op::LdIndH(o), Op::JgeK(k, t, f)) => Op::LdIndHJge(o, k, t, f),
            (Op::LdIndH(o), Op::JsetK(k, t, f)) => Op::LdIndHJset(o, k, t, f),
            (Op::LdIndB(o), Op::JeqK(k, t, f)) => Op::LdIndBJeq(o, k, t, f),
            (Op::LdIndB(o), Op::JgtK(k, t, f)) => Op::LdIndBJgt(o, k, t, f),
            (Op::LdIndB(o), Op::JgeK(k, t, f)) => Op::LdIndBJge(o, k, t, f),
            (Op::LdIndB(o), Op::JsetK(k, t, f)) => Op::LdIndBJset(o, k, t, f),
            (Op::AndK(m), Op::JeqK(k, t, f)) => Op::AndJeq(m, k, t, f),
            (Op::AndK(m), Op::JgtK(k, t, f)) => Op::AndJgt(m, k, t, f),
            (Op::AndK(m), Op::JgeK(k, t, f)) => Op::AndJge(m, k, t, f),
            (Op::AndK(m), Op::JsetK(k, t, f)) => Op::AndJset(m, k, t, f),
            _ => continue,
        };
        if let Some(slot) = code.get_mut(index) {
            *slot = fused;
        }
    }
}

/// The `N` bytes at `offset`, if they were captured: one length comparison.
#[inline(always)]
fn bytes<const N: usize>(packet: &[u8], offset: u32) -> Option<[u8; N]> {
    let start = usize::try_from(offset).ok()?;
    packet.get(start..start.checked_add(N)?)?.try_into().ok()
}

/// An ancillary load, out of line: rare, and inlined it would make every run copy the
/// metadata's fields into registers or the stack up front.
#[cold]
#[inline(never)]
fn ancillary(meta: &PacketMeta, offset: u32, a: u32, x: u32) -> Option<u32> {
    meta.load(offset, a, x)
}

/// The interpreter over a decoded program. Out of line, so that a caller whose filter is a
/// head saves none of the registers the loop uses.
#[inline(never)]
fn exec_decoded(code: &[Op], packet: &[u8], wire_len: u32, meta: &PacketMeta) -> u32 {
    let mut a: u32 = 0;
    let mut x: u32 = 0;
    let mut mem = [0u32; MEM_WORDS as usize];
    let mut backward_jumps: u32 = 0;
    let mut pc: usize = 0;
    macro_rules! or_reject {
        ($e:expr) => {
            match $e {
                Some(v) => v,
                None => return 0,
            }
        };
    }
    // `MEM_WORDS` is 16, so `i & 15` indexes `mem` without a bounds check; decoding
    // guaranteed `i < 16` already, so the mask changes nothing.
    macro_rules! cell {
        ($i:expr) => {
            mem[usize::from($i & 15)]
        };
    }
    // A conditional jump as a branch rather than a select: filters' jumps are predictable, and
    // a select would make fetching the next instruction wait for the comparison.
    macro_rules! jump {
        ($cond:expr, $jt:expr, $jf:expr) => {{
            if $cond {
                pc = usize::from($jt);
                continue;
            }
            pc = usize::from($jf);
        }};
    }
    macro_rules! load {
        (w, $o:expr) => {
            u32::from_be_bytes(or_reject!(bytes(packet, $o)))
        };
        (h, $o:expr) => {
            u32::from(u16::from_be_bytes(or_reject!(bytes(packet, $o))))
        };
        (b, $o:expr) => {
            u32::from(or_reject!(bytes::<1>(packet, $o))[0])
        };
    }
    macro_rules! fused {
        ($w:tt, ind($o:expr), $cond:expr, $jt:expr, $jf:expr) => {{
            // X + k overflowing 32 bits is out of bounds, as in `LdInd*`.
            a = load!($w, or_reject!(x.checked_add($o)));
            jump!($cond, $jt, $jf);
        }};
        ($w:tt, $o:expr, $cond:expr, $jt:expr, $jf:expr) => {{
            a = load!($w, $o);
            jump!($cond, $jt, $jf);
        }};
    }
    loop {
        let op = *or_reject!(code.get(pc));
        pc = pc.wrapping_add(1);
        match op {
            Op::Ret(k) => return k,
            Op::RetA => return a,
            Op::LdW(k) => a = load!(w, k),
            Op::LdH(k) => a = load!(h, k),
            Op::LdB(k) => a = load!(b, k),
            Op::LdIndW(k) => a = load!(w, or_reject!(x.checked_add(k))),
            Op::LdIndH(k) => a = load!(h, or_reject!(x.checked_add(k))),
            Op::LdIndB(k) => a = load!(b, or_reject!(x.checked_add(k))),
            Op::LdAnc(offset) => a = or_reject!(ancillary(meta, offset, a, x)),
            Op::LdLen => a = wire_len,
            Op::LdxLen => x = wire_len,
            Op::LdxMsh(k) => x = (u32::from(or_reject!(bytes::<1>(packet, k))[0]) & 0xf) << 2,
            Op::LdImm(k) => a = k,
            Op::LdxImm(k) => x = k,
            Op::LdMem(i) => a = cell!(i),
            Op::LdxMem(i) => x = cell!(i),
            Op::St(i) => cell!(i) = a,
            Op::Stx(i) => cell!(i) = x,
            Op::Ja(target) => pc = usize::from(target),
            Op::JaBack(target) => {
                if backward_jumps >= MAX_BACKWARD_JUMPS {
                    return 0;
                }
                backward_jumps = backward_jumps.wrapping_add(1);
                pc = usize::from(target);
            }
            Op::JeqK(k, jt, jf) => jump!(a == k, jt, jf),
            Op::JgtK(k, jt, jf) => jump!(a > k, jt, jf),
            Op::JgeK(k, jt, jf) => jump!(a >= k, jt, jf),
            Op::JsetK(k, jt, jf) => jump!(a & k != 0, jt, jf),
            Op::JeqX(jt, jf) => jump!(a == x, jt, jf),
            Op::JgtX(jt, jf) => jump!(a > x, jt, jf),
            Op::JgeX(jt, jf) => jump!(a >= x, jt, jf),
            Op::JsetX(jt, jf) => jump!(a & x != 0, jt, jf),
            Op::AddX => a = a.wrapping_add(x),
            Op::SubX => a = a.wrapping_sub(x),
            Op::MulX => a = a.wrapping_mul(x),
            Op::DivX => a = or_reject!(a.checked_div(x)),
            Op::ModX => a = or_reject!(a.checked_rem(x)),
            Op::AndX => a &= x,
            Op::OrX => a |= x,
            Op::XorX => a ^= x,
            Op::LshX => a = shift_left(a, x),
            Op::RshX => a = shift_right(a, x),
            Op::AddK(k) => a = a.wrapping_add(k),
            Op::SubK(k) => a = a.wrapping_sub(k),
            Op::MulK(k) => a = a.wrapping_mul(k),
            Op::DivK(k) => a /= k,
            Op::ModK(k) => a %= k,
            Op::AndK(k) => a &= k,
            Op::OrK(k) => a |= k,
            Op::XorK(k) => a ^= k,
            // Decoding keeps these below 32, where wrapping shifts are plain shifts.
            Op::LshK(k) => a = a.wrapping_shl(k),
            Op::RshK(k) => a = a.wrapping_shr(k),
            Op::Neg => a = a.wrapping_neg(),
            Op::Tax => x = a,
            Op::Txa => a = x,
            Op::LdWJeq(o, k, jt, jf) => fused!(w, o, a == k, jt, jf),
            Op::LdWJgt(o, k, jt, jf) => fused!(w, o, a > k, jt, jf),
            Op::LdWJge(o, k, jt, jf) => fused!(w, o, a >= k, jt, jf),
            Op::LdWJset(o, k, jt, jf) => fused!(w, o, a & k != 0, jt, jf),
            Op::LdHJeq(o, k, jt, jf) => fused!(h, o, a == k, jt, jf),
            Op::LdHJgt(o, k, jt, jf) => fused!(h, o, a > k, jt, jf),
            Op::LdHJge(o, k, jt, jf) => fused!(h, o, a >= k, jt, jf),
            Op::LdHJset(o, k, jt, jf) => fused!(h, o, a & k != 0, jt, jf),
            Op::LdBJeq(o, k, jt, jf) => fused!(b, o, a == k, jt, jf),
            Op::LdBJgt(o, k, jt, jf) => fused!(b, o, a > k, jt, jf),
            Op::LdBJge(o, k, jt, jf) => fused!(b, o, a >= k, jt, jf),
            Op::LdBJset(o, k, jt, jf) => fused!(b, o, a & k != 0, jt, jf),
            Op::LdIndWJeq(o, k, jt, jf) => fused!(w, ind(o), a == k, jt, jf),
            Op::LdIndWJgt(o, k, jt, jf) => fused!(w, ind(o), a > k, jt, jf),
            Op::LdIndWJge(o, k, jt, jf) => fused!(w, ind(o), a >= k, jt, jf),
            Op::LdIndWJset(o, k, jt, jf) => fused!(w, ind(o), a & k != 0, jt, jf),
            Op::LdIndHJeq(o, k, jt, jf) => fused!(h, ind(o), a == k, jt, jf),
            Op::LdIndHJgt(o, k, jt, jf) => fused!(h, ind(o), a > k, jt, jf),
            Op::LdIndHJge(o, k, jt, jf) => fused!(h, ind(o), a >= k, jt, jf),
            Op::LdIndHJset(o, k, jt, jf) => fused!(h, ind(o), a & k != 0, jt, jf),
            Op::LdIndBJeq(o, k, jt, jf) => fused!(b, ind(o), a == k, jt, jf),
            Op::LdIndBJgt(o, k, jt, jf) => fused!(b, ind(o), a > k, jt, jf),
            Op::LdIndBJge(o, k, jt, jf) => fused!(b, ind(o), a >= k, jt, jf),
            Op::LdIndBJset(o, k, jt, jf) => fused!(b, ind(o), a & k != 0, jt, jf),
            Op::JeqOr(k1, k2, jt, jf) => jump!(a == k1 || a == k2, jt, jf),
            Op::AndJeq(m, k, jt, jf) => {
                a &= m;
                jump!(a == k, jt, jf)
            }
            Op::AndJgt(m, k, jt, jf) => {
                a &= m;
                jump!(a > k, jt, jf)
            }
            Op::AndJge(m, k, jt, jf) => {
                a &= m;
                jump!(a >= k, jt, jf)
            }
            Op::AndJset(m, k, jt, jf) => {
                a &= m;
                jump!(a & k != 0, jt, jf)
            }
        }
    }
}

#[cfg(test)]
mod tests;
