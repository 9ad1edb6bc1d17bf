//! The interpreter's private instruction form, and the one-time translation into it.
//!
//! A [`Program`] is decoded once, when the [`crate::Interpreter`] is built, into one [`Step`]
//! per slot, so the run loop does no decoding at all: jump and call targets are absolute
//! slot indices checked here, immediates are already extended to the width they are used at,
//! helpers are already function pointers, and instructions that can only trap (unknown
//! helpers, kfuncs, map references, bad targets) are already the trap they will raise.
//!
//! The slot of step `i` is slot `i` of the program, so a trap's `pc` is simply the index of
//! the step that raised it. After the program's steps come a sentinel (reached by running
//! off the end) and one *detour* per conditional jump whose target is bad: taking such a
//! jump lands on its detour, which traps naming the jump. This keeps every target the run
//! loop sees valid, with no check on the hot path.
//!
//! Each `Insn` is executed as what `weir_isa::ebpf::encode` would write for it: fields the
//! operation does not use are ignored and 32-bit immediates are truncated to 32 bits.

use weir_isa::ebpf::{Insn, Op, Operands, REG_COUNT};
use weir_program::abi::{helper_id, Bindings, HelperFn};
use weir_program::{jump_target, Program, TrapCode};

use crate::guest;

/// What an atomic instruction computes; whether it returns the old value is separate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomicOp {
    Add,
    Or,
    And,
    Xor,
    /// Always returns the old value in `src`.
    Xchg,
    /// Compares with `r0` and returns the old value in `r0`.
    CmpXchg,
}

impl AtomicOp {
    /// The value stored over `old`, given the source register's `value` and, for
    /// compare-exchange, `r0`'s `expected` (at the operation's width). A failed compare
    /// stores `old` back: it still counts as a write, as the access rules do not depend on
    /// the data.
    #[inline]
    pub(crate) fn apply(self, old: u64, value: u64, expected: u64) -> u64 {
        match self {
            AtomicOp::Add => old.wrapping_add(value),
            AtomicOp::Or => old | value,
            AtomicOp::And => old & value,
            AtomicOp::Xor => old ^ value,
            AtomicOp::Xchg => value,
            AtomicOp::CmpXchg if old == expected => value,
            AtomicOp::CmpXchg => old,
        }
    }
}

/// One executable slot. Field names: `dst`/`src` registers (always < 11), `imm` the
/// immediate at the width the operation uses, `off` the memory offset, `target` an absolute
/// slot index that is always a valid step.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    // 64-bit ALU; immediates sign-extended to 64 bits.
    Add64Imm {
        dst: u8,
        imm: u64,
    },
    Add64Reg {
        dst: u8,
        src: u8,
    },
    Sub64Imm {
        dst: u8,
        imm: u64,
    },
    Sub64Reg {
        dst: u8,
        src: u8,
    },
    Mul64Imm {
        dst: u8,
        imm: u64,
    },
    Mul64Reg {
        dst: u8,
        src: u8,
    },
    Div64Imm {
        dst: u8,
        imm: u64,
    },
    Div64Reg {
        dst: u8,
        src: u8,
    },
    Sdiv64Imm {
        dst: u8,
        imm: u64,
    },
    Sdiv64Reg {
        dst: u8,
        src: u8,
    },
    Mod64Imm {
        dst: u8,
        imm: u64,
    },
    Mod64Reg {
        dst: u8,
        src: u8,
    },
    Smod64Imm {
        dst: u8,
        imm: u64,
    },
    Smod64Reg {
        dst: u8,
        src: u8,
    },
    Or64Imm {
        dst: u8,
        imm: u64,
    },
    Or64Reg {
        dst: u8,
        src: u8,
    },
    And64Imm {
        dst: u8,
        imm: u64,
    },
    And64Reg {
        dst: u8,
        src: u8,
    },
    Xor64Imm {
        dst: u8,
        imm: u64,
    },
    Xor64Reg {
        dst: u8,
        src: u8,
    },
    Lsh64Imm {
        dst: u8,
        imm: u64,
    },
    Lsh64Reg {
        dst: u8,
        src: u8,
    },
    Rsh64Imm {
        dst: u8,
        imm: u64,
    },
    Rsh64Reg {
        dst: u8,
        src: u8,
    },
    Arsh64Imm {
        dst: u8,
        imm: u64,
    },
    Arsh64Reg {
        dst: u8,
        src: u8,
    },
    Neg64 {
        dst: u8,
    },
    Mov64Reg {
        dst: u8,
        src: u8,
    },
    MovSx8To64 {
        dst: u8,
        src: u8,
    },
    MovSx16To64 {
        dst: u8,
        src: u8,
    },
    MovSx32To64 {
        dst: u8,
        src: u8,
    },
    // `mov`/`mov32` with an immediate: the value is final.
    Set {
        dst: u8,
        imm: u64,
    },
    /// A `Set` whose next slot is `exit` (how nearly every filter ends): the lean entry's
    /// loop runs that `exit` too when it would end the run (frame 0, budget left), one
    /// dispatch fewer a run; otherwise (and on the general path) it goes on to the `exit`
    /// step itself, which every jump to that slot reaches as before.
    SetThenExit {
        dst: u8,
        imm: u64,
    },

    // 32-bit ALU; immediates used as u32, results zero-extended.
    Add32Imm {
        dst: u8,
        imm: u32,
    },
    Add32Reg {
        dst: u8,
        src: u8,
    },
    Sub32Imm {
        dst: u8,
        imm: u32,
    },
    Sub32Reg {
        dst: u8,
        src: u8,
    },
    Mul32Imm {
        dst: u8,
        imm: u32,
    },
    Mul32Reg {
        dst: u8,
        src: u8,
    },
    Div32Imm {
        dst: u8,
        imm: u32,
    },
    Div32Reg {
        dst: u8,
        src: u8,
    },
    Sdiv32Imm {
        dst: u8,
        imm: u32,
    },
    Sdiv32Reg {
        dst: u8,
        src: u8,
    },
    Mod32Imm {
        dst: u8,
        imm: u32,
    },
    Mod32Reg {
        dst: u8,
        src: u8,
    },
    Smod32Imm {
        dst: u8,
        imm: u32,
    },
    Smod32Reg {
        dst: u8,
        src: u8,
    },
    Or32Imm {
        dst: u8,
        imm: u32,
    },
    Or32Reg {
        dst: u8,
        src: u8,
    },
    And32Imm {
        dst: u8,
        imm: u32,
    },
    And32Reg {
        dst: u8,
        src: u8,
    },
    Xor32Imm {
        dst: u8,
        imm: u32,
    },
    Xor32Reg {
        dst: u8,
        src: u8,
    },
    Lsh32Imm {
        dst: u8,
        imm: u32,
    },
    Lsh32Reg {
        dst: u8,
        src: u8,
    },
    Rsh32Imm {
        dst: u8,
        imm: u32,
    },
    Rsh32Reg {
        dst: u8,
        src: u8,
    },
    Arsh32Imm {
        dst: u8,
        imm: u32,
    },
    Arsh32Reg {
        dst: u8,
        src: u8,
    },
    Neg32 {
        dst: u8,
    },
    Mov32Reg {
        dst: u8,
        src: u8,
    },
    MovSx8To32 {
        dst: u8,
        src: u8,
    },
    MovSx16To32 {
        dst: u8,
        src: u8,
    },

    // Byte order on a little-endian guest: `le` truncates, `be` and `bswap` swap.
    Trunc16 {
        dst: u8,
    },
    Trunc32 {
        dst: u8,
    },
    Swap16 {
        dst: u8,
    },
    Swap32 {
        dst: u8,
    },
    Swap64 {
        dst: u8,
    },
    // `le64`: nothing to do, but it still counts as an executed instruction.
    Nop,

    // Jumps. 64-bit compares sign-extend `imm`; 32-bit compares use the low halves.
    Ja {
        target: usize,
    },
    Jeq64Imm {
        dst: u8,
        imm: i32,
        target: usize,
    },
    Jeq64Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jgt64Imm {
        dst: u8,
        imm: i32,
        target: usize,
    },
    Jgt64Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jge64Imm {
        dst: u8,
        imm: i32,
        target: usize,
    },
    Jge64Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jset64Imm {
        dst: u8,
        imm: i32,
        target: usize,
    },
    Jset64Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jne64Imm {
        dst: u8,
        imm: i32,
        target: usize,
    },
    Jne64Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jsgt64Imm {
        dst: u8,
        imm: i32,
        target: usize,
    },
    Jsgt64Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jsge64Imm {
        dst: u8,
        imm: i32,
        target: usize,
    },
    Jsge64Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jlt64Imm {
        dst: u8,
        imm: i32,
        target: usize,
    },
    Jlt64Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jle64Imm {
        dst: u8,
        imm: i32,
        target: usize,
    },
    Jle64Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jslt64Imm {
        dst: u8,
        imm: i32,
        target: usize,
    },
    Jslt64Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jsle64Imm {
        dst: u8,
        imm: i32,
        target: usize,
    },
    Jsle64Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jeq32Imm {
        dst: u8,
        imm: u32,
        target: usize,
    },
    Jeq32Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jgt32Imm {
        dst: u8,
        imm: u32,
        target: usize,
    },
    Jgt32Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jge32Imm {
        dst: u8,
        imm: u32,
        target: usize,
    },
    Jge32Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jset32Imm {
        dst: u8,
        imm: u32,
        target: usize,
    },
    Jset32Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jne32Imm {
        dst: u8,
        imm: u32,
        target: usize,
    },
    Jne32Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jsgt32Imm {
        dst: u8,
        imm: u32,
        target: usize,
    },
    Jsgt32Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jsge32Imm {
        dst: u8,
        imm: u32,
        target: usize,
    },
    Jsge32Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jlt32Imm {
        dst: u8,
        imm: u32,
        target: usize,
    },
    Jlt32Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jle32Imm {
        dst: u8,
        imm: u32,
        target: usize,
    },
    Jle32Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jslt32Imm {
        dst: u8,
        imm: u32,
        target: usize,
    },
    Jslt32Reg {
        dst: u8,
        src: u8,
        target: usize,
    },
    Jsle32Imm {
        dst: u8,
        imm: u32,
        target: usize,
    },
    Jsle32Reg {
        dst: u8,
        src: u8,
        target: usize,
    },

    // Calls.
    CallHelper {
        id: u32,
        func: HelperFn,
    },
    /// `bpf_loop` (helper 181, unbound): the engine runs the callback (`abi::bpf_loop`).
    Loop,
    CallLocal {
        target: usize,
    },
    CallReg {
        dst: u8,
    },
    Exit,

    // Memory: address is `reg + off`.
    LdxB {
        dst: u8,
        src: u8,
        off: i16,
    },
    LdxH {
        dst: u8,
        src: u8,
        off: i16,
    },
    LdxW {
        dst: u8,
        src: u8,
        off: i16,
    },
    LdxDw {
        dst: u8,
        src: u8,
        off: i16,
    },
    LdxBSx {
        dst: u8,
        src: u8,
        off: i16,
    },
    LdxHSx {
        dst: u8,
        src: u8,
        off: i16,
    },
    LdxWSx {
        dst: u8,
        src: u8,
        off: i16,
    },
    StB {
        dst: u8,
        off: i16,
        imm: u64,
    },
    StH {
        dst: u8,
        off: i16,
        imm: u64,
    },
    StW {
        dst: u8,
        off: i16,
        imm: u64,
    },
    StDw {
        dst: u8,
        off: i16,
        imm: u64,
    },
    StxB {
        dst: u8,
        src: u8,
        off: i16,
    },
    StxH {
        dst: u8,
        src: u8,
        off: i16,
    },
    StxW {
        dst: u8,
        src: u8,
        off: i16,
    },
    StxDw {
        dst: u8,
        src: u8,
        off: i16,
    },
    Atomic64 {
        op: AtomicOp,
        fetch: bool,
        dst: u8,
        src: u8,
        off: i16,
    },
    Atomic32 {
        op: AtomicOp,
        fetch: bool,
        dst: u8,
        src: u8,
        off: i16,
    },
    // Both slots of `lddw` (plain or `func`): sets `dst` and skips the filler slot.
    Lddw {
        dst: u8,
        imm: u64,
    },
    // Legacy packet loads (big-endian, 1, 2 or 4 bytes at `imm` or `src + imm`): one
    // variant per size, so the load is a fixed-size read (filters are mostly these).
    LdAbsB {
        imm: i32,
    },
    LdAbsH {
        imm: i32,
    },
    LdAbsW {
        imm: i32,
    },
    LdIndB {
        src: u8,
        imm: i32,
    },
    LdIndH {
        src: u8,
        imm: i32,
    },
    LdIndW {
        src: u8,
        imm: i32,
    },

    // Traps decided at translation.
    // Trap here with this code; `addr` is the helper id for helper traps.
    Fail {
        code: TrapCode,
        addr: u32,
    },
    // Trap naming another instruction (the jump that led here, or the last slot).
    FailAt {
        code: TrapCode,
        pc: usize,
    },
    // The second slot of `lddw`, reached without its `lddw`: control came here by falling
    // through from the slot before, which the trap names.
    Filler,
}

/// Which register fields an operand shape reads or writes: (dst, src).
fn register_fields(operands: Operands) -> (bool, bool) {
    use Operands::*;
    match operands {
        DstImm | Dst | DstImmOff | CallReg | StoreImm | DstImm64 | Pseudo(_) => (true, false),
        DstSrc | DstSrcOff | Load | StoreReg => (true, true),
        Ind => (false, true),
        JmpOff | JmpImm | CallImm | CallLocal | Nothing | Abs => (false, false),
    }
}

/// The absolute slot `delta` slots after the one following `pc`, if it is an instruction
/// (inside the program and not the second slot of `lddw`).
fn resolve(insns: &[Insn], pc: usize, delta: i64) -> Option<usize> {
    let target = i64::try_from(pc).ok()?.checked_add(1)?.checked_add(delta)?;
    let target = usize::try_from(target).ok()?;
    match insns.get(target)?.op {
        Op::LddwHigh => None,
        _ => Some(target),
    }
}

/// Translates a whole program. The result holds one step per slot, then the
/// run-off-the-end sentinel, then the detours of conditional jumps with bad targets.
pub(crate) fn translate(program: &Program, bindings: &Bindings) -> Vec<Step> {
    let insns = program.insns();
    let len = insns.len();
    let mut code = Vec::with_capacity(len.saturating_add(1));
    let mut detours = Vec::new();
    for (pc, insn) in insns.iter().enumerate() {
        let mut translator = Translator { insns, pc, len, bindings, detours: &mut detours };
        code.push(translator.step(insn));
    }
    fuse_set_then_exit(&mut code);
    code.push(Step::FailAt { code: TrapCode::BadJump, pc: len.saturating_sub(1) });
    code.extend(detours);
    code
}

/// Whether each step of `code` (translated from `insns`) runs at most once a run: every
/// jump goes forward (a jump's target is after its slot; a bad target's detour is after the
/// whole program) and nothing calls (a callee may lie anywhere, and `bpf_loop` calls again),
/// so each step moves `pc` forward or ends the run. Such a run dispatches at most
/// `code.len()` steps.
pub(crate) fn forward_only(insns: &[Insn], code: &[Step]) -> bool {
    let jumps_forward = insns.iter().enumerate().all(|(pc, insn)| {
        jump_target(pc, insn).is_none_or(|target| target > i64::try_from(pc).unwrap_or(i64::MAX))
    });
    let calls = code
        .iter()
        .any(|step| matches!(step, Step::CallLocal { .. } | Step::CallReg { .. } | Step::Loop));
    jumps_forward && !calls
}

/// Turns each `Set` followed by `exit` into [`Step::SetThenExit`]. The `exit` step stays in
/// its slot: a jump to it, a run out of budget after the `Set` and a return from a called
/// frame all take it as before.
fn fuse_set_then_exit(code: &mut [Step]) {
    for slot in 0..code.len() {
        let next_is_exit = matches!(code.get(slot.saturating_add(1)), Some(Step::Exit));
        if let Some(step) = code.get_mut(slot) {
            if let (Step::Set { dst, imm }, true) = (*step, next_is_exit) {
                *step = Step::SetThenExit { dst, imm };
            }
        }
    }
}

struct Translator<'a> {
    insns: &'a [Insn],
    pc: usize,
    len: usize,
    bindings: &'a Bindings,
    detours: &'a mut Vec<Step>,
}

impl Translator<'_> {
    /// Target of a conditional jump: the slot itself, or a detour that traps naming `pc`.
    fn branch(&mut self, delta: i16) -> usize {
        if let Some(target) = resolve(self.insns, self.pc, i64::from(delta)) {
            return target;
        }
        let index = self.len.saturating_add(1).saturating_add(self.detours.len());
        self.detours.push(Step::FailAt { code: TrapCode::BadJump, pc: self.pc });
        index
    }

    /// Whether the slot after this `lddw` is its filler.
    fn has_filler(&self) -> bool {
        matches!(self.insns.get(self.pc.saturating_add(1)), Some(i) if i.op == Op::LddwHigh)
    }

    fn fail(code: TrapCode) -> Step {
        Step::Fail { code, addr: 0 }
    }

    fn step(&mut self, insn: &Insn) -> Step {
        let Some(spec) = insn.op.spec() else {
            return Step::Filler;
        };
        let (uses_dst, uses_src) = register_fields(spec.operands);
        if (uses_dst && insn.dst >= REG_COUNT) || (uses_src && insn.src >= REG_COUNT) {
            return Self::fail(TrapCode::Unsupported);
        }
        let (dst, src, off) = (insn.dst, insn.src, insn.off);
        // What the encoding keeps of the immediate, at the widths it is used at.
        let imm32 = insn.imm as i32;
        let imm64 = i64::from(imm32) as u64;
        let immu32 = imm32 as u32;
        use Op::*;
        match insn.op {
            Add64Imm => Step::Add64Imm { dst, imm: imm64 },
            Add64Reg => Step::Add64Reg { dst, src },
            Sub64Imm => Step::Sub64Imm { dst, imm: imm64 },
            Sub64Reg => Step::Sub64Reg { dst, src },
            Mul64Imm => Step::Mul64Imm { dst, imm: imm64 },
            Mul64Reg => Step::Mul64Reg { dst, src },
            Div64Imm => Step::Div64Imm { dst, imm: imm64 },
            Div64Reg => Step::Div64Reg { dst, src },
            Sdiv64Imm => Step::Sdiv64Imm { dst, imm: imm64 },
            Sdiv64Reg => Step::Sdiv64Reg { dst, src },
            Mod64Imm => Step::Mod64Imm { dst, imm: imm64 },
            Mod64Reg => Step::Mod64Reg { dst, src },
            Smod64Imm => Step::Smod64Imm { dst, imm: imm64 },
            Smod64Reg => Step::Smod64Reg { dst, src },
            Or64Imm => Step::Or64Imm { dst, imm: imm64 },
            Or64Reg => Step::Or64Reg { dst, src },
            And64Imm => Step::And64Imm { dst, imm: imm64 },
            And64Reg => Step::And64Reg { dst, src },
            Xor64Imm => Step::Xor64Imm { dst, imm: imm64 },
            Xor64Reg => Step::Xor64Reg { dst, src },
            Lsh64Imm => Step::Lsh64Imm { dst, imm: imm64 },
            Lsh64Reg => Step::Lsh64Reg { dst, src },
            Rsh64Imm => Step::Rsh64Imm { dst, imm: imm64 },
            Rsh64Reg => Step::Rsh64Reg { dst, src },
            Arsh64Imm => Step::Arsh64Imm { dst, imm: imm64 },
            Arsh64Reg => Step::Arsh64Reg { dst, src },
            Neg64 => Step::Neg64 { dst },
            Mov64Imm => Step::Set { dst, imm: imm64 },
            Mov64Reg => Step::Mov64Reg { dst, src },
            MovSx8To64 => Step::MovSx8To64 { dst, src },
            MovSx16To64 => Step::MovSx16To64 { dst, src },
            MovSx32To64 => Step::MovSx32To64 { dst, src },

            Add32Imm => Step::Add32Imm { dst, imm: immu32 },
            Add32Reg => Step::Add32Reg { dst, src },
            Sub32Imm => Step::Sub32Imm { dst, imm: immu32 },
            Sub32Reg => Step::Sub32Reg { dst, src },
            Mul32Imm => Step::Mul32Imm { dst, imm: immu32 },
            Mul32Reg => Step::Mul32Reg { dst, src },
            Div32Imm => Step::Div32Imm { dst, imm: immu32 },
            Div32Reg => Step::Div32Reg { dst, src },
            Sdiv32Imm => Step::Sdiv32Imm { dst, imm: immu32 },
            Sdiv32Reg => Step::Sdiv32Reg { dst, src },
            Mod32Imm => Step::Mod32Imm { dst, imm: immu32 },
            Mod32Reg => Step::Mod32Reg { dst, src },
            Smod32Imm => Step::Smod32Imm { dst, imm: immu32 },
            Smod32Reg => Step::Smod32Reg { dst, src },
            Or32Imm => Step::Or32Imm { dst, imm: immu32 },
            Or32Reg => Step::Or32Reg { dst, src },
            And32Imm => Step::And32Imm { dst, imm: immu32 },
            And32Reg => Step::And32Reg { dst, src },
            Xor32Imm => Step::Xor32Imm { dst, imm: immu32 },
            Xor32Reg => Step::Xor32Reg { dst, src },
            Lsh32Imm => Step::Lsh32Imm { dst, imm: immu32 },
            Lsh32Reg => Step::Lsh32Reg { dst, src },
            Rsh32Imm => Step::Rsh32Imm { dst, imm: immu32 },
            Rsh32Reg => Step::Rsh32Reg { dst, src },
            Arsh32Imm => Step::Arsh32Imm { dst, imm: immu32 },
            Arsh32Reg => Step::Arsh32Reg { dst, src },
            Neg32 => Step::Neg32 { dst },
            Mov32Imm => Step::Set { dst, imm: u64::from(immu32) },
            Mov32Reg => Step::Mov32Reg { dst, src },
            MovSx8To32 => Step::MovSx8To32 { dst, src },
            MovSx16To32 => Step::MovSx16To32 { dst, src },

            Le16 => Step::Trunc16 { dst },
            Le32 => Step::Trunc32 { dst },
            Le64 => Step::Nop,
            Be16 | Bswap16 => Step::Swap16 { dst },
            Be32 | Bswap32 => Step::Swap32 { dst },
            Be64 | Bswap64 => Step::Swap64 { dst },

            Ja => match resolve(self.insns, self.pc, i64::from(off)) {
                Some(target) => Step::Ja { target },
                None => Self::fail(TrapCode::BadJump),
            },
            Ja32 => match resolve(self.insns, self.pc, i64::from(imm32)) {
                Some(target) => Step::Ja { target },
                None => Self::fail(TrapCode::BadJump),
            },
            Jeq64Imm => Step::Jeq64Imm { dst, imm: imm32, target: self.branch(off) },
            Jeq64Reg => Step::Jeq64Reg { dst, src, target: self.branch(off) },
            Jgt64Imm => Step::Jgt64Imm { dst, imm: imm32, target: self.branch(off) },
            Jgt64Reg => Step::Jgt64Reg { dst, src, target: self.branch(off) },
            Jge64Imm => Step::Jge64Imm { dst, imm: imm32, target: self.branch(off) },
            Jge64Reg => Step::Jge64Reg { dst, src, target: self.branch(off) },
            Jset64Imm => Step::Jset64Imm { dst, imm: imm32, target: self.branch(off) },
            Jset64Reg => Step::Jset64Reg { dst, src, target: self.branch(off) },
            Jne64Imm => Step::Jne64Imm { dst, imm: imm32, target: self.branch(off) },
            Jne64Reg => Step::Jne64Reg { dst, src, target: self.branch(off) },
            Jsgt64Imm => Step::Jsgt64Imm { dst, imm: imm32, target: self.branch(off) },
            Jsgt64Reg => Step::Jsgt64Reg { dst, src, target: self.branch(off) },
            Jsge64Imm => Step::Jsge64Imm { dst, imm: imm32, target: self.branch(off) },
            Jsge64Reg => Step::Jsge64Reg { dst, src, target: self.branch(off) },
            Jlt64Imm => Step::Jlt64Imm { dst, imm: imm32, target: self.branch(off) },
            Jlt64Reg => Step::Jlt64Reg { dst, src, target: self.branch(off) },
            Jle64Imm => Step::Jle64Imm { dst, imm: imm32, target: self.branch(off) },
            Jle64Reg => Step::Jle64Reg { dst, src, target: self.branch(off) },
            Jslt64Imm => Step::Jslt64Imm { dst, imm: imm32, target: self.branch(off) },
            Jslt64Reg => Step::Jslt64Reg { dst, src, target: self.branch(off) },
            Jsle64Imm => Step::Jsle64Imm { dst, imm: imm32, target: self.branch(off) },
            Jsle64Reg => Step::Jsle64Reg { dst, src, target: self.branch(off) },
            Jeq32Imm => Step::Jeq32Imm { dst, imm: immu32, target: self.branch(off) },
            Jeq32Reg => Step::Jeq32Reg { dst, src, target: self.branch(off) },
            Jgt32Imm => Step::Jgt32Imm { dst, imm: immu32, target: self.branch(off) },
            Jgt32Reg => Step::Jgt32Reg { dst, src, target: self.branch(off) },
            Jge32Imm => Step::Jge32Imm { dst, imm: immu32, target: self.branch(off) },
            Jge32Reg => Step::Jge32Reg { dst, src, target: self.branch(off) },
            Jset32Imm => Step::Jset32Imm { dst, imm: immu32, target: self.branch(off) },
            Jset32Reg => Step::Jset32Reg { dst, src, target: self.branch(off) },
            Jne32Imm => Step::Jne32Imm { dst, imm: immu32, target: self.branch(off) },
            Jne32Reg => Step::Jne32Reg { dst, src, target: self.branch(off) },
            Jsgt32Imm => Step::Jsgt32Imm { dst, imm: immu32, target: self.branch(off) },
            Jsgt32Reg => Step::Jsgt32Reg { dst, src, target: self.branch(off) },
            Jsge32Imm => Step::Jsge32Imm { dst, imm: immu32, target: self.branch(off) },
            Jsge32Reg => Step::Jsge32Reg { dst, src, target: self.branch(off) },
            Jlt32Imm => Step::Jlt32Imm { dst, imm: immu32, target: self.branch(off) },
            Jlt32Reg => Step::Jlt32Reg { dst, src, target: self.branch(off) },
            Jle32Imm => Step::Jle32Imm { dst, imm: immu32, target: self.branch(off) },
            Jle32Reg => Step::Jle32Reg { dst, src, target: self.branch(off) },
            Jslt32Imm => Step::Jslt32Imm { dst, imm: immu32, target: self.branch(off) },
            Jslt32Reg => Step::Jslt32Reg { dst, src, target: self.branch(off) },
            Jsle32Imm => Step::Jsle32Imm { dst, imm: immu32, target: self.branch(off) },
            Jsle32Reg => Step::Jsle32Reg { dst, src, target: self.branch(off) },

            Call => match self.bindings.helper(immu32) {
                Some(helper) => Step::CallHelper { id: immu32, func: helper.func },
                None if immu32 == helper_id::LOOP => Step::Loop,
                None => Step::Fail { code: TrapCode::UnknownHelper, addr: immu32 },
            },
            CallLocal => match resolve(self.insns, self.pc, i64::from(imm32)) {
                Some(target) => Step::CallLocal { target },
                None => Self::fail(TrapCode::BadCallTarget),
            },
            CallKfunc => Self::fail(TrapCode::Unsupported),
            CallReg => Step::CallReg { dst },
            Exit => Step::Exit,

            LdxB => Step::LdxB { dst, src, off },
            LdxH => Step::LdxH { dst, src, off },
            LdxW => Step::LdxW { dst, src, off },
            LdxDw => Step::LdxDw { dst, src, off },
            LdxBSx => Step::LdxBSx { dst, src, off },
            LdxHSx => Step::LdxHSx { dst, src, off },
            LdxWSx => Step::LdxWSx { dst, src, off },
            StB => Step::StB { dst, off, imm: imm64 },
            StH => Step::StH { dst, off, imm: imm64 },
            StW => Step::StW { dst, off, imm: imm64 },
            StDw => Step::StDw { dst, off, imm: imm64 },
            StxB => Step::StxB { dst, src, off },
            StxH => Step::StxH { dst, src, off },
            StxW => Step::StxW { dst, src, off },
            StxDw => Step::StxDw { dst, src, off },

            AtomicAdd64 => atomic64(AtomicOp::Add, false, dst, src, off),
            AtomicFetchAdd64 => atomic64(AtomicOp::Add, true, dst, src, off),
            AtomicOr64 => atomic64(AtomicOp::Or, false, dst, src, off),
            AtomicFetchOr64 => atomic64(AtomicOp::Or, true, dst, src, off),
            AtomicAnd64 => atomic64(AtomicOp::And, false, dst, src, off),
            AtomicFetchAnd64 => atomic64(AtomicOp::And, true, dst, src, off),
            AtomicXor64 => atomic64(AtomicOp::Xor, false, dst, src, off),
            AtomicFetchXor64 => atomic64(AtomicOp::Xor, true, dst, src, off),
            AtomicXchg64 => atomic64(AtomicOp::Xchg, true, dst, src, off),
            AtomicCmpXchg64 => atomic64(AtomicOp::CmpXchg, false, dst, src, off),
            AtomicAdd32 => atomic32(AtomicOp::Add, false, dst, src, off),
            AtomicFetchAdd32 => atomic32(AtomicOp::Add, true, dst, src, off),
            AtomicOr32 => atomic32(AtomicOp::Or, false, dst, src, off),
            AtomicFetchOr32 => atomic32(AtomicOp::Or, true, dst, src, off),
            AtomicAnd32 => atomic32(AtomicOp::And, false, dst, src, off),
            AtomicFetchAnd32 => atomic32(AtomicOp::And, true, dst, src, off),
            AtomicXor32 => atomic32(AtomicOp::Xor, false, dst, src, off),
            AtomicFetchXor32 => atomic32(AtomicOp::Xor, true, dst, src, off),
            AtomicXchg32 => atomic32(AtomicOp::Xchg, true, dst, src, off),
            AtomicCmpXchg32 => atomic32(AtomicOp::CmpXchg, false, dst, src, off),

            // An `lddw` without its filler slot is malformed: nothing sensible to run.
            Lddw | LddwFunc | LddwMapFd | LddwMapValue | LddwBtfId | LddwMapIdx
            | LddwMapIdxValue
                if !self.has_filler() =>
            {
                Self::fail(TrapCode::Unsupported)
            }
            Lddw => Step::Lddw { dst, imm: insn.imm as u64 },
            // A function address that names no instruction is refused where it is made.
            LddwFunc => {
                match resolve(self.insns, self.pc, i64::from(imm32)).and_then(guest::func_addr) {
                    Some(addr) => Step::Lddw { dst, imm: addr },
                    None => Self::fail(TrapCode::BadCallTarget),
                }
            }
            // Maps and kernel variables come with the runtime; until then they cannot run.
            LddwMapFd | LddwMapValue | LddwBtfId | LddwMapIdx | LddwMapIdxValue => {
                Self::fail(TrapCode::Unsupported)
            }

            LdAbsB => Step::LdAbsB { imm: imm32 },
            LdAbsH => Step::LdAbsH { imm: imm32 },
            LdAbsW => Step::LdAbsW { imm: imm32 },
            LdIndB => Step::LdIndB { src, imm: imm32 },
            LdIndH => Step::LdIndH { src, imm: imm32 },
            LdIndW => Step::LdIndW { src, imm: imm32 },

            LddwHigh => Step::Filler,
        }
    }
}

fn atomic64(op: AtomicOp, fetch: bool, dst: u8, src: u8, off: i16) -> Step {
    Step::Atomic64 { op, fetch, dst, src, off }
}

fn atomic32(op: AtomicOp, fetch: bool, dst: u8, src: u8, off: i16) -> Step {
    Step::Atomic32 { op, fetch, dst, src, off }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_stay_small() {
        // The run loop copies steps out of a slice; keep them two words.
        assert!(std::mem::size_of::<Step>() <= 16, "{}", std::mem::size_of::<Step>());
    }

    #[test]
    fn bad_conditional_targets_get_detours_after_the_sentinel() {
        let insns = vec![
            Insn::new(Op::Jeq64Imm, 1, 0, 100, 0),
            Insn::new(Op::Jeq64Imm, 1, 0, -5, 0),
            Insn::new(Op::Exit, 0, 0, 0, 0),
        ];
        let code = translate(&Program::from_insns(insns), &Bindings::new());
        assert_eq!(code.len(), 3 + 1 + 2);
        assert!(matches!(code[0], Step::Jeq64Imm { target: 4, .. }));
        assert!(matches!(code[1], Step::Jeq64Imm { target: 5, .. }));
        assert!(matches!(code[3], Step::FailAt { code: TrapCode::BadJump, pc: 2 }));
        assert!(matches!(code[4], Step::FailAt { code: TrapCode::BadJump, pc: 0 }));
        assert!(matches!(code[5], Step::FailAt { code: TrapCode::BadJump, pc: 1 }));
    }

    #[test]
    fn immediates_are_what_the_encoding_keeps() {
        let insns = vec![
            Insn::new(Op::Add64Imm, 1, 0, 0, -1),
            Insn::new(Op::Add32Imm, 1, 0, 0, -1),
            // Wider than 32 bits: the encoding truncates, so does the interpreter.
            Insn::new(Op::Mov64Imm, 1, 0, 0, 0x1_0000_0002),
        ];
        let code = translate(&Program::from_insns(insns), &Bindings::new());
        assert!(matches!(code[0], Step::Add64Imm { imm: u64::MAX, .. }));
        assert!(matches!(code[1], Step::Add32Imm { imm: u32::MAX, .. }));
        assert!(matches!(code[2], Step::Set { imm: 2, .. }));
    }
}
