//! Filter IR -> eBPF, straight from the IR (not through classic BPF): values live in
//! 64-bit registers holding zero-extended 32-bit numbers, arithmetic is ALU32 (whose
//! zero-extension keeps that true), comparisons are JMP32, and scratch memory is used only
//! for the filter's own [`crate::Expr::Scratch`] slots and for the rare expression too deep
//! for the registers. Two forms, by the program type's [`PacketAccess`], with the meaning
//! `weir_cbpf::translate` gives them:
//!
//! - [`PacketAccess::SkBuff`] (socket filters, tc): the context is a `struct __sk_buff`, kept in r6; packet
//!   loads are the legacy `ldabs*`/`ldind*` loads, which read big-endian and end the program
//!   with 0 when the bytes are not in the packet (the IR's abort); `len` is `__sk_buff.len`
//!   (the wire length). The program returns the filter's `accept` value or 0. Loads into the
//!   kernel as `BPF_PROG_TYPE_SOCKET_FILTER`, `SCHED_CLS` or `SCHED_ACT`.
//! - [`PacketAccess::Xdp`] (XDP): the context is a `struct xdp_md`; loads read through `data` (r8)
//!   with explicit checks against `data_end` (r9) that the Linux verifier accepts, then swap
//!   to network order. The program returns `XDP_PASS` when the filter accepts and
//!   `XDP_DROP` when it rejects or aborts. XDP sees whole frames, so `len` is
//!   `data_end - data` and the verdicts are [`crate::Filter::matches`]`(frame,
//!   frame.len())`. The verifier bounds packet offsets by 65535, so frames are taken to be at
//!   most 65535 bytes: a load ending past that rejects.
//!
//! A [`crate::Pred::Try`] (a pfmatch clause) is emitted for XDP only: there an abort is a
//! jump to a label, which inside the Try is the Try's false; a legacy load of the socket
//! form ends the whole program when it misses. [`emit_xdp_head`] gives the predicate
//! without its exits, for a program that goes on after it (pfmatch's dispatch reads the
//! handler from a scratch slot and acts on it).
//!
//! # Where eBPF and the IR differ, and what is emitted instead
//!
//! - Division or modulo by zero gives 0 (or the dividend) in eBPF and aborts in the IR: a
//!   divisor that may be 0 is tested first, a constant 0 divisor is a jump to the reject exit.
//! - eBPF masks shift amounts; the IR gives 0 for 32 and more: an amount not known to be
//!   below 32 is tested.
//! - The kernel passes a legacy load's offset as a C `int`, so an offset above `i32::MAX`
//!   would read the negative, header-relative areas: such offsets are rejected first (no
//!   packet is that long), unless the offset is known to be small.
//!
//! # Bounds checks (XDP)
//!
//! Every load of an expression is evaluated, or the expression aborts first, so before a
//! comparison (or a store, or a set lookup) one check covers every constant-offset load in
//! it. What is known to be checked flows along the control flow: a [`crate::Pred::Guard`]
//! checks its length once, and loads it covers need no check of their own (the optimizer
//! places guards where every path would load that far anyway). A variable-offset load is
//! checked on its own: first that the offset leaves room below 65535 (unless the offset's
//! computation, which the verifier follows, bounds it already), then the end against
//! `data_end`.

mod expr;
mod layout;
mod pairs;
mod reuse;

pub use reuse::reuse_legacy_loads;

pub use pairs::pair_lists_share_loads;

use weir_isa::ebpf::{Insn, Op};
use weir_program::abi::{xdp_action, XDP};
use weir_program::{PacketAccess, ProgType, Program};

use super::bounds::{constant_load_end, max_value};
use super::flow::{Flow, Label};
use super::set::{search, Searcher, Test};
use super::{mirror, scratch_usage, EmitError};
use crate::ir::{
    Chain, ChainOutcome, ChainStep, CmpOp, Expr, Filter, Pred, CHAIN_HOP_BUDGET, SCRATCH_SLOTS,
};

/// What the program returns for a packet the filter accepts: the filter's accept value,
/// or `XDP_PASS`.
pub fn accept_value(prog_type: ProgType, filter: &Filter) -> u32 {
    match prog_type.packet_access() {
        PacketAccess::SkBuff => filter.accept,
        PacketAccess::Xdp => xdp_action::PASS,
    }
}

/// What the program returns for a packet the filter rejects (or aborts on): 0, or
/// `XDP_DROP`.
pub fn reject_value(prog_type: ProgType) -> u32 {
    match prog_type.packet_access() {
        PacketAccess::SkBuff => 0,
        PacketAccess::Xdp => xdp_action::DROP,
    }
}

/// An eBPF program for `filter` as a program of type `prog_type` (see the module
/// documentation: socket filters and tc programs take the `__sk_buff` form, XDP the
/// `xdp_md` form).
pub fn emit(filter: &Filter, prog_type: ProgType) -> Result<Program, EmitError> {
    emit_program(filter, prog_type, true)
}

/// [`emit`] for weir's own engines only, not for the kernel: the same program but where a
/// long pair list's scan stays in line (no search trees: the kernel's verifier would
/// refuse it past about 2,700 pairs, weir's engines run it in a third of the slots).
pub fn emit_for_weir(filter: &Filter, prog_type: ProgType) -> Result<Program, EmitError> {
    emit_program(filter, prog_type, false)
}

fn emit_program(
    filter: &Filter,
    prog_type: ProgType,
    for_kernel: bool,
) -> Result<Program, EmitError> {
    let (read, _) = scratch_usage(&filter.pred)?;
    let mut e = Emitter::new(prog_type.packet_access());
    e.for_kernel = for_kernel;
    e.prologue(read);
    let accept = e.flow.label();
    let reject = e.reject;
    e.pred(&filter.pred, accept, reject)?;
    e.flow.bind(accept);
    e.ret(accept_value(prog_type, filter));
    e.flow.bind(reject);
    e.ret(reject_value(prog_type));
    e.flow.simplify();
    layout::link(&e.flow)
}

/// The predicate of `filter` as the first part of a larger XDP program (pfmatch's
/// dispatch, whose handler and arguments the filter leaves in scratch slots): the same code
/// as [`emit`] for [`ProgType::Xdp`], but where that returns, this sets r0 to 1 (the
/// predicate held) or 0 (it did not, or aborted) and goes on past its last instruction,
/// where the caller appends the rest (the head alone does not end). There every scratch
/// slot the filter reads or writes holds its value (each starts at 0, so a slot no path
/// wrote reads 0, as in the IR) at [`scratch_offset`]; the registers and the rest of the
/// stack are free.
pub fn emit_xdp_head(filter: &Filter) -> Result<Program, EmitError> {
    let (_, used) = scratch_usage(&filter.pred)?;
    let mut e = Emitter::new(PacketAccess::Xdp);
    e.prologue(used);
    let accept = e.flow.label();
    let reject = e.reject;
    let end = e.flow.label();
    e.pred(&filter.pred, accept, reject)?;
    e.flow.bind(accept);
    e.alu_imm(Op::Mov32Imm, R0, 1);
    e.flow.goto(end);
    e.flow.bind(reject);
    e.alu_imm(Op::Mov32Imm, R0, 0);
    e.flow.bind(end);
    e.flow.simplify();
    layout::link(&e.flow)
}

// -------------------------------------------------------------------------------------
// Registers and the stack

/// The return value.
const R0: u8 = 0;
/// The context at entry; afterwards a temporary of the XDP target.
const R1: u8 = 1;
const FRAME: u8 = 10;
/// Socket filter: the context, where the legacy loads expect it.
const SOCKET_CTX: u8 = 6;
/// XDP: `data`, never modified, so every bounds check widens what it is known to cover.
const XDP_DATA: u8 = 8;
/// XDP: `data_end`.
const XDP_DATA_END: u8 = 9;
/// XDP: the one temporary of a bounds check or a far load.
const XDP_TMP: u8 = R1;

/// Registers that hold values. The legacy loads are calls to the kernel and clobber r0-r5,
/// so the socket target keeps values in the callee-saved r7-r9 only.
fn value_registers(target: PacketAccess) -> &'static [u8] {
    match target {
        // Popped from the end: r7 first.
        PacketAccess::SkBuff => &[9, 8, 7],
        PacketAccess::Xdp => &[7, 6, 5, 4, 3, 2, 0],
    }
}

/// Scratch slot `s` is the 32-bit word at `r10 - 4 * (s + 1)`; spill slots lie below.
pub fn scratch_offset(slot: u8) -> i16 {
    -4 * (i16::from(slot) + 1)
}

/// Spill slots fill the rest of the 512-byte frame but its last word, the hop counter of
/// a `protochain` walk.
const MAX_SPILLS: u16 = (512 - 4 * SCRATCH_SLOTS as u16) / 4 - 1;

/// The hop counter of a [`crate::Chain`] walk, reset by each walk.
const HOP_COUNTER: i16 = -512;

fn spill_offset(index: u16) -> i16 {
    let below_scratch = 4 * i16::from(SCRATCH_SLOTS);
    let index = i16::try_from(index).unwrap_or(0);
    -(below_scratch + 4 * (index + 1))
}

/// The last packet offset (plus one) the XDP target can read: the verifier gives a packet
/// pointer no range past `MAX_PACKET_OFF`.
const XDP_MAX_END: u32 = 0xffff;

/// The largest offset a legacy load reads as it is: the kernel takes it as a C `int`.
const LEGACY_MAX_OFFSET: u32 = i32::MAX as u32;

// -------------------------------------------------------------------------------------
// Jumps

/// The relation a jump tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rel {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Set,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operand {
    Imm(i32),
    Reg(u8),
}

/// A conditional jump: `dst rel rhs`, on the low 32 bits (values) or on all 64 (pointers
/// and the range checks of offsets, which the verifier follows best in 64 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Jump {
    rel: Rel,
    wide: bool,
    dst: u8,
    rhs: Operand,
}

impl Jump {
    fn value(rel: Rel, dst: u8, rhs: Operand) -> Jump {
        Jump { rel, wide: false, dst, rhs }
    }

    fn wide(rel: Rel, dst: u8, rhs: Operand) -> Jump {
        Jump { rel, wide: true, dst, rhs }
    }

    fn op(self) -> Op {
        use Op::*;
        let imm = matches!(self.rhs, Operand::Imm(_));
        let ops = match (self.rel, self.wide) {
            (Rel::Eq, false) => (Jeq32Imm, Jeq32Reg),
            (Rel::Ne, false) => (Jne32Imm, Jne32Reg),
            (Rel::Gt, false) => (Jgt32Imm, Jgt32Reg),
            (Rel::Ge, false) => (Jge32Imm, Jge32Reg),
            (Rel::Lt, false) => (Jlt32Imm, Jlt32Reg),
            (Rel::Le, false) => (Jle32Imm, Jle32Reg),
            (Rel::Set, false) => (Jset32Imm, Jset32Reg),
            (Rel::Eq, true) => (Jeq64Imm, Jeq64Reg),
            (Rel::Ne, true) => (Jne64Imm, Jne64Reg),
            (Rel::Gt, true) => (Jgt64Imm, Jgt64Reg),
            (Rel::Ge, true) => (Jge64Imm, Jge64Reg),
            (Rel::Lt, true) => (Jlt64Imm, Jlt64Reg),
            (Rel::Le, true) => (Jle64Imm, Jle64Reg),
            (Rel::Set, true) => (Jset64Imm, Jset64Reg),
        };
        if imm {
            ops.0
        } else {
            ops.1
        }
    }

    /// The jump taken exactly when this one is not (eBPF has no "jnset").
    fn inverse(self) -> Option<Jump> {
        let rel = match self.rel {
            Rel::Eq => Rel::Ne,
            Rel::Ne => Rel::Eq,
            Rel::Gt => Rel::Le,
            Rel::Le => Rel::Gt,
            Rel::Ge => Rel::Lt,
            Rel::Lt => Rel::Ge,
            Rel::Set => return None,
        };
        Some(Jump { rel, ..self })
    }
}

fn rel(op: CmpOp) -> Rel {
    match op {
        CmpOp::Eq => Rel::Eq,
        CmpOp::Ne => Rel::Ne,
        CmpOp::Gt => Rel::Gt,
        CmpOp::Ge => Rel::Ge,
        CmpOp::Lt => Rel::Lt,
        CmpOp::Le => Rel::Le,
        CmpOp::Set => Rel::Set,
    }
}

// -------------------------------------------------------------------------------------
// The emitter

pub(super) struct Emitter {
    flow: Flow<Insn, Jump>,
    target: PacketAccess,
    reject: Label,
    /// Value registers not in use (a stack).
    free: Vec<u8>,
    /// Spill slots in use.
    spills: u16,
    /// Packet bytes from offset 0 known to be present here (XDP).
    checked: u32,
    /// The program must load in the kernel, whose verifier refuses a path of more than
    /// 8,192 pending branches: long pair lists take the search trees (`pairs.rs`). weir's
    /// own engines have no such limit and run the in-line scan, a third of the slots.
    for_kernel: bool,
}

impl Emitter {
    fn new(target: PacketAccess) -> Self {
        let mut flow = Flow::new();
        let reject = flow.label();
        Emitter {
            flow,
            target,
            reject,
            free: value_registers(target).to_vec(),
            spills: 0,
            checked: 0,
            for_kernel: true,
        }
    }

    fn insn(&mut self, op: Op, dst: u8, src: u8, off: i16, imm: i32) {
        self.flow.stmt(Insn::new(op, dst, src, off, i64::from(imm)));
    }

    fn alu_imm(&mut self, op: Op, dst: u8, imm: i32) {
        self.insn(op, dst, 0, 0, imm);
    }

    fn alu_reg(&mut self, op: Op, dst: u8, src: u8) {
        self.insn(op, dst, src, 0, 0);
    }

    /// Goes on only when `jump` does not hold; otherwise rejects.
    fn reject_if(&mut self, jump: Jump) {
        let ok = self.flow.label();
        self.flow.cond(jump, self.reject, ok);
        self.flow.bind(ok);
    }

    /// The rest of this path only aborts: a jump to the reject exit ([`Flow::simplify`]
    /// removes the dead code after it).
    fn abort(&mut self) {
        self.flow.goto(self.reject);
    }

    fn ret(&mut self, value: u32) {
        self.alu_imm(Op::Mov32Imm, R0, value as i32);
        self.flow.end(Insn::new(Op::Exit, 0, 0, 0, 0));
    }

    fn prologue(&mut self, scratch_read: u16) {
        match self.target {
            PacketAccess::SkBuff => self.alu_reg(Op::Mov64Reg, SOCKET_CTX, R1),
            PacketAccess::Xdp => {
                let field =
                    |name| XDP.field(name).and_then(|f| i16::try_from(f.offset).ok()).unwrap_or(0);
                self.insn(Op::LdxW, XDP_DATA, R1, field("data"), 0);
                self.insn(Op::LdxW, XDP_DATA_END, R1, field("data_end"), 0);
            }
        }
        // The IR's scratch slots start at 0, and the verifier refuses reads of unwritten
        // stack.
        for slot in 0..SCRATCH_SLOTS {
            if scratch_read & (1u16 << slot) != 0 {
                self.insn(Op::StW, FRAME, 0, scratch_offset(slot), 0);
            }
        }
    }

    // ---------------------------------------------------------------------------------
    // Predicates

    /// Emits `p`, going to `t` or `f`. `self.checked` holds on entry; returns what holds
    /// on arrival at `t` and at `f`.
    fn pred(&mut self, p: &Pred, t: Label, f: Label) -> Result<(u32, u32), EmitError> {
        match p {
            Pred::Const(value) => self.flow.goto(if *value { t } else { f }),
            Pred::Cmp { op, lhs, rhs } => {
                self.check_constant_loads(&[lhs, rhs]);
                self.cmp(*op, lhs, rhs, t, f)?;
            }
            Pred::In { value, set } => {
                self.check_constant_loads(&[value]);
                let reg = self.eval(value)?;
                search(&mut SetSearch { e: self, reg }, set.ranges(), 0, max_value(value), t, f);
                self.release(reg);
            }
            Pred::Store { slot, value } => {
                self.check_constant_loads(&[value]);
                let reg = self.eval(value)?;
                self.insn(Op::StxW, FRAME, reg, scratch_offset(*slot), 0);
                self.release(reg);
                self.flow.goto(t);
            }
            Pred::Guard(n) => {
                self.guard(*n);
                self.flow.goto(t);
            }
            Pred::Not(inner) => {
                let (on_true, on_false) = self.pred(inner, f, t)?;
                return Ok((on_false, on_true));
            }
            Pred::And(parts) => return self.sequence(parts, true, t, f),
            Pred::Or(parts) => return self.sequence(parts, false, t, f),
            Pred::Chain(chain) => self.chain(chain, t, f)?,
            Pred::Try(inner) => return self.try_pred(inner, t, f),
            // XDP: the two walks once, then compares on registers (`pairs.rs`); else
            // the ordered expansion, which the node means.
            Pred::Pairs(pairs) => {
                if !self.pairs_shared(pairs, t, f)? {
                    return self.pred(&pairs.expand(), t, f);
                }
            }
        }
        Ok((self.checked, self.checked))
    }

    /// A [`Pred::Try`]: its aborts go to `f` instead of the reject exit (XDP: every abort
    /// is a jump to `self.reject`, so the Try swaps that label for its own false). The
    /// socket form cannot: a legacy load that misses ends the whole program.
    fn try_pred(&mut self, inner: &Pred, t: Label, f: Label) -> Result<(u32, u32), EmitError> {
        if self.target == PacketAccess::SkBuff {
            return Err(EmitError::Unsupported(
                "Pred::Try (a pfmatch clause) in the socket form (its legacy loads end the \
                 program on a miss): emit it for XDP",
            ));
        }
        let entry = self.checked;
        let outer = std::mem::replace(&mut self.reject, f);
        let result = self.pred(inner, t, f);
        self.reject = outer;
        let (on_true, on_false) = result?;
        // An abort leaves with what held before its failed check, at least `entry`.
        Ok((on_true, on_false.min(entry)))
    }

    /// A [`Chain`] walk: a bounded loop the verifier explores hop by hop. The next-header
    /// value and the offset live in registers, the hop count in the frame's last word
    /// (reset by each walk, so that once a walk has answered, nothing of it is live and
    /// the verifier prunes what follows as if it were a plain test).
    fn chain(&mut self, chain: &Chain, t: Label, f: Label) -> Result<(), EmitError> {
        self.check_constant_loads(&[&chain.next, &chain.offset]);
        let a = self.eval(&chain.next)?;
        let x = self.eval(&chain.offset)?;
        let tmp = self.allocate()?;
        self.insn(Op::StW, FRAME, 0, HOP_COUNTER, 0);
        let head = self.flow.label();
        self.flow.bind(head);
        let (extension, ah) = (self.flow.label(), self.flow.label());
        let test = |e: &mut Self, k: u32, to: Label| {
            let next = e.flow.label();
            e.flow.cond(Jump::value(Rel::Eq, a, Operand::Imm(k as i32)), to, next);
            e.flow.bind(next);
        };
        for (k, outcome) in chain.dispatch() {
            let to = match outcome {
                ChainOutcome::Found => t,
                ChainOutcome::NotFound => f,
                ChainOutcome::Step(ChainStep::Extension) => extension,
                ChainOutcome::Step(ChainStep::Ah) => ah,
            };
            test(self, k, to);
        }
        self.flow.goto(f);
        for (label, add, shift, from_x) in [(extension, 1, 3, true), (ah, 2, 2, false)] {
            self.flow.bind(label);
            // The hop budget: a hop past it aborts.
            self.insn(Op::LdxW, tmp, FRAME, HOP_COUNTER, 0);
            self.reject_if(Jump::value(Rel::Ge, tmp, Operand::Imm(CHAIN_HOP_BUDGET as i32)));
            self.alu_imm(Op::Add32Imm, tmp, 1);
            self.insn(Op::StxW, FRAME, tmp, HOP_COUNTER, 0);
            // a = pkt[base + x], tmp = pkt[base + x + 1].
            if !self.chain_bytes(chain.base, a, x, tmp) {
                continue;
            }
            self.alu_imm(Op::Add32Imm, tmp, add);
            self.alu_imm(Op::Lsh32Imm, tmp, shift);
            if from_x {
                self.alu_reg(Op::Add32Reg, x, tmp);
            } else {
                self.alu_reg(Op::Mov32Reg, x, tmp);
            }
            if self.target == PacketAccess::Xdp {
                self.widen_chain_offset(x);
            }
            self.flow.back(head);
        }
        self.release(tmp);
        self.release(x);
        self.release(a);
        Ok(())
    }

    /// Forgets what the verifier knows of the walk's offset `x`, without changing it, so
    /// that the states it reaches the loop head with, one per hop and path, are the same
    /// and prune (with what it tracks, each path through a chain of extension and AH
    /// headers is a state of its own: a walk cost Linux 6.18's verifier about 48,000
    /// instructions, and a dispatch with a dozen copies of a walk passed its million).
    /// The verifier does not follow a division (`x / 1 == x`), so `x` leaves it unknown,
    /// and the bound check of `chain_bytes` then gives it the same range on every path.
    /// (An earlier `add 2^17; lsh 47; rsh 47` lost the range on older kernels, but 6.18
    /// carries the known bits through the shifts, and `x`, used in pointer arithmetic, is
    /// compared precisely.) Measured: 5,700 instructions for a walk, the sum for several
    /// (bench/records/2026-11-29-pfmatch-3.txt).
    fn widen_chain_offset(&mut self, x: u8) {
        self.alu_imm(Op::Div64Imm, x, 1);
    }

    /// `a` = the byte at `base + x`, `tmp` = the one after it; false (after a jump to the
    /// reject exit) when no packet holds them.
    fn chain_bytes(&mut self, base: u32, a: u8, x: u8, tmp: u8) -> bool {
        match self.target {
            PacketAccess::SkBuff => {
                let Some(second) = base.checked_add(1).filter(|&k| k <= LEGACY_MAX_OFFSET) else {
                    self.abort();
                    return false;
                };
                // `x` stays far below 2^31: it grows by at most 2,048 past a byte read.
                self.insn(Op::LdIndB, 0, x, 0, base as i32);
                self.alu_reg(Op::Mov32Reg, a, R0);
                self.insn(Op::LdIndB, 0, x, 0, second as i32);
                self.alu_reg(Op::Mov32Reg, tmp, R0);
                true
            }
            PacketAccess::Xdp => {
                let Some(limit) = base.checked_add(2).and_then(|n| XDP_MAX_END.checked_sub(n))
                else {
                    self.abort();
                    return false;
                };
                self.reject_if(Jump::wide(Rel::Gt, x, Operand::Imm(limit as i32)));
                self.alu_reg(Op::Mov64Reg, XDP_TMP, XDP_DATA);
                self.alu_reg(Op::Add64Reg, XDP_TMP, x);
                // `base` is below 65533 here; an `i16` offset takes most of them.
                let off = match i16::try_from(base) {
                    Ok(off) if off < i16::MAX => off,
                    _ => {
                        self.alu_imm(Op::Add64Imm, XDP_TMP, base as i32);
                        0
                    }
                };
                self.alu_reg(Op::Mov64Reg, tmp, XDP_TMP);
                self.alu_imm(Op::Add64Imm, tmp, i32::from(off) + 2);
                self.reject_if(Jump::wide(Rel::Gt, tmp, Operand::Reg(XDP_DATA_END)));
                self.packet_read(a, XDP_TMP, off, crate::ir::Size::Byte);
                self.packet_read(tmp, XDP_TMP, off + 1, crate::ir::Size::Byte);
                true
            }
        }
    }

    /// `and` (`all`) or `or`: each part but the last continues to the next one on the
    /// outcome that does not decide the whole.
    fn sequence(
        &mut self,
        parts: &[Pred],
        all: bool,
        t: Label,
        f: Label,
    ) -> Result<(u32, u32), EmitError> {
        // What holds where the sequence exits early: the least over the parts that exit.
        let mut early = u32::MAX;
        let Some((last, init)) = parts.split_last() else {
            self.flow.goto(if all { t } else { f });
            return Ok((self.checked, self.checked));
        };
        for part in init {
            let next = self.flow.label();
            let (on_true, on_false) =
                if all { self.pred(part, next, f)? } else { self.pred(part, t, next)? };
            let (go_on, exit) = if all { (on_true, on_false) } else { (on_false, on_true) };
            early = early.min(exit);
            self.flow.bind(next);
            self.checked = go_on;
        }
        let (on_true, on_false) = self.pred(last, t, f)?;
        Ok(if all { (on_true, on_false.min(early)) } else { (on_true.min(early), on_false) })
    }

    fn cmp(
        &mut self,
        op: CmpOp,
        lhs: &Expr,
        rhs: &Expr,
        t: Label,
        f: Label,
    ) -> Result<(), EmitError> {
        // Constants go on the right, where the jump's immediate takes them.
        let (op, lhs, rhs) = match (lhs, rhs) {
            (Expr::Const(_), r) if !matches!(r, Expr::Const(_)) => (mirror(op), rhs, lhs),
            _ => (op, lhs, rhs),
        };
        if let Expr::Const(k) = rhs {
            let a = self.eval(lhs)?;
            // JMP32 immediates compare as 32-bit values: the bits carry over.
            self.flow.cond(Jump::value(rel(op), a, Operand::Imm(*k as i32)), t, f);
            self.release(a);
            return Ok(());
        }
        let (a, b) = self.eval_pair(lhs, rhs)?;
        self.flow.cond(Jump::value(rel(op), a, Operand::Reg(b)), t, f);
        self.release(b);
        self.release(a);
        Ok(())
    }

    /// XDP: one bounds check for every constant-offset load of the expressions, which all
    /// run unless one aborts first.
    fn check_constant_loads(&mut self, exprs: &[&Expr]) {
        if self.target != PacketAccess::Xdp {
            return;
        }
        let Some(end) = exprs.iter().filter_map(|e| constant_load_end(e)).max() else {
            return;
        };
        match u32::try_from(end) {
            Ok(end) if end <= XDP_MAX_END => self.ensure_checked(end),
            _ => self.abort(),
        }
    }

    /// XDP: `if data + end > data_end: reject`, unless that much is known present.
    fn ensure_checked(&mut self, end: u32) {
        if end <= self.checked {
            return;
        }
        self.alu_reg(Op::Mov64Reg, XDP_TMP, XDP_DATA);
        self.alu_imm(Op::Add64Imm, XDP_TMP, end as i32);
        self.reject_if(Jump::wide(Rel::Gt, XDP_TMP, Operand::Reg(XDP_DATA_END)));
        self.checked = end;
    }

    fn guard(&mut self, n: u32) {
        match self.target {
            PacketAccess::Xdp if n > XDP_MAX_END => self.abort(),
            PacketAccess::Xdp => self.ensure_checked(n),
            PacketAccess::SkBuff => match n.checked_sub(1) {
                None => {}
                Some(last) if last > LEGACY_MAX_OFFSET => self.abort(),
                // The byte itself is not needed: the load fails when it is not there.
                Some(last) => self.insn(Op::LdAbsB, 0, 0, 0, last as i32),
            },
        }
    }
}

/// The set search on the value in `reg`.
struct SetSearch<'a> {
    e: &'a mut Emitter,
    reg: u8,
}

impl Searcher for SetSearch<'_> {
    fn new_label(&mut self) -> Label {
        self.e.flow.label()
    }

    fn bind_label(&mut self, label: Label) {
        self.e.flow.bind(label);
    }

    fn goto_label(&mut self, label: Label) {
        self.e.flow.goto(label);
    }

    fn test(&mut self, test: Test, t: Label, f: Label) {
        let (rel, k) = match test {
            Test::Eq(k) => (Rel::Eq, k),
            Test::Ge(k) => (Rel::Ge, k),
            Test::Gt(k) => (Rel::Gt, k),
        };
        self.e.flow.cond(Jump::value(rel, self.reg, Operand::Imm(k as i32)), t, f);
    }
}
