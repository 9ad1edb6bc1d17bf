//! Filter IR -> classic BPF: the program tcpdump would print for the filter, runnable by
//! libpcap's `bpf_filter`, by `weir_cbpf::CbpfFilter` and, as a socket filter, by the
//! kernel (it passes the kernel's classic checker rules).
//!
//! # Machine model
//!
//! Expressions are computed in A; the right operand of an operation goes to X when it can
//! be loaded there directly (a constant, `len`, a scratch cell, the IPv4 header length
//! `4*([k]&0xf)`), else it is computed first and parked in a scratch cell. The filter's own
//! [`crate::Expr::Scratch`] slots keep their numbers; temporaries take the cells the filter
//! leaves free, from 15 down ([`EmitError::OutOfScratch`] when there are too few). A scratch
//! slot the filter may read before writing it is zeroed at the start, because the kernel
//! refuses reads of unwritten cells and the IR defines them as 0.
//!
//! # Where classic BPF and the IR differ, and what is emitted instead
//!
//! - A load that does not fit the captured bytes returns 0 in classic BPF, which is the
//!   IR's abort. Loads at an offset above `i32::MAX` abort without being emitted (the kernel
//!   reads such offsets as negative, header-relative ones; no packet is 2 GiB long), and a
//!   computed offset that could exceed it is checked first.
//! - `div x`/`mod x` with X = 0 return 0 (the IR's abort); a constant 0 divisor, which
//!   the kernel refuses to load, becomes a jump to the reject exit.
//! - A shift by 32 or more gives 0 in the IR. libpcap agrees for `lsh x`, the kernel does
//!   not (it masks the amount), so a shift amount not known to be below 32 is tested.
//! - `jt`/`jf` are 8 bits: a target further than 255 instructions is reached through a
//!   landing, a `ja` (or a copy of the `ret` it lands on) placed within reach where no
//!   instruction falls through, and shared by the tests around it that go the same way.
//!
//! Loads at `4*([k]&0xf) + c`, the transport header behind an IPv4 header, become
//! `ldxb 4*([k]&0xf)` and `ld [x + c]`, as libpcap writes them.

use std::collections::HashMap;

use weir_isa::cbpf::{CbpfInsn, CbpfOp, MAX_INSNS, MEM_WORDS};

use super::bounds::{can_abort, max_value, split_offset};
use super::flow::{with_label_table, Flow, Item, Label};
use super::set::{search, Searcher, Test};
use super::{mirror, scratch_usage, EmitError};
use crate::ir::{BinOp, Chain, ChainOutcome, ChainStep, CmpOp, Expr, Filter, Pred, Size};

pub use super::tighten::tighten;
use super::tighten::{is_accept, load_end};

/// A classic program for `filter`: `ret #accept` when it matches, `ret #0` when it does not
/// or when it aborts. The laid-out program goes through [`tighten`] (libpcap's flow-graph
/// passes: jump threading, redundant and dead loads, shared tails).
///
/// A filter with [`Pred::Pairs`] nodes is emitted from
/// [`crate::pairs::expanded_optimized`] (its expansion optimized in place).
pub fn emit(filter: &Filter) -> Result<Vec<CbpfInsn>, EmitError> {
    if let Some(expanded) = crate::pairs::expanded_optimized(filter) {
        return emit_unoptimized(&expanded).map(|p| tighten(&p));
    }
    emit_unoptimized(filter).map(|p| tighten(&p))
}

/// [`emit`] without [`tighten`]: the program as laid out, test for test (what `-O0` prints,
/// as tcpdump's `-O` prints libpcap's unoptimized code).
pub fn emit_unoptimized(filter: &Filter) -> Result<Vec<CbpfInsn>, EmitError> {
    lay_out(filter, BitTests::Jset)
}

/// [`emit_unoptimized`] with every bit test written as its `and #m` and compare, as the
/// emitter wrote them before it wrote `jset` itself: the oracle for the tests that check
/// that [`tighten`] gives the same program from both.
#[doc(hidden)]
pub fn emit_unoptimized_with_masked_compares(filter: &Filter) -> Result<Vec<CbpfInsn>, EmitError> {
    lay_out(filter, BitTests::MaskedCompare)
}

/// How a compare of `x & #m` with a constant that only asks whether a bit of `m` is set is
/// written (see [`bit_test`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum BitTests {
    /// `jset #m`, the form tighten's and_tests makes of the pair anyway.
    Jset,
    /// `and #m` and the compare.
    MaskedCompare,
}

fn lay_out(filter: &Filter, bit_tests: BitTests) -> Result<Vec<CbpfInsn>, EmitError> {
    let (_, used) = scratch_usage(&filter.pred)?;
    let mut e = Emitter::new(used, bit_tests);
    let accept = e.label();
    e.pred(&filter.pred, accept, e.reject)?;
    e.bind(accept);
    e.end(CbpfInsn::stmt(CbpfOp::RetK, filter.accept));
    e.bind(e.reject);
    e.end(CbpfInsn::stmt(CbpfOp::RetK, 0));
    if !e.guards.is_empty() {
        drop_needless_guards(&mut e.flow, &e.guards, &e.sure_ends);
    }
    e.flow.simplify();
    // Layout only adds instructions (landings for far jumps), so a flow already over the
    // limit fails now rather than after laying out thousands of landings.
    let at_least = e.flow.items().iter().filter(|i| !matches!(i, Item::Label(_))).count();
    if at_least > MAX_INSNS {
        return Err(EmitError::TooLong { len: at_least, max: MAX_INSNS });
    }
    let body = layout(&mut e.flow)?;
    let program = zero_unwritten_cells(body);
    if program.len() > MAX_INSNS {
        return Err(EmitError::TooLong { len: program.len(), max: MAX_INSNS });
    }
    Ok(program)
}

/// Removes the loads of the [`Pred::Guard`]s at `guards` (item indexes, ascending) that
/// vouch for nothing: every path from one to an accept loads at least as far anyway, so a
/// packet too short for it aborts on that path without it (and a path to a reject rejects
/// either way). Its value in A is never read: the code of every predicate sets A before it
/// reads it. [`tighten`]'s drop_dead would drop them too, but only in a round of its own
/// after a first analysis of the program, and a guard left in makes tighten's round
/// structure pay: its load repeats the first test's (`ldb [23]` of `port 22`), which costs
/// drop_redundant an analysis, and its removal alone costs a confirming round.
///
/// `need` is drop_dead's (see tighten's `need`) on the flow: for each point, the fewest
/// bytes that every path from it to an accept loads; [`u32::MAX`] where no path accepts.
/// One walk backwards: every jump but a loop's goes forward, to a label already seen.
/// `sure_ends` are the ends of the indirect loads known (see [`Emitter::sure_ends`]).
fn drop_needless_guards(
    flow: &mut Flow<CbpfInsn, Cond>,
    guards: &[usize],
    sure_ends: &[(usize, u32)],
) {
    // A label not seen yet is a loop's head (its jump is the only backward one): it
    // vouches for nothing.
    with_label_table(flow.label_count(), 0u32, |need_at| {
        drop_needless_guards_with(flow, guards, sure_ends, need_at);
    });
}

/// [`drop_needless_guards`] with `need_at`, a table by label index set to 0.
fn drop_needless_guards_with(
    flow: &mut Flow<CbpfInsn, Cond>,
    guards: &[usize],
    sure_ends: &[(usize, u32)],
    need_at: &mut [u32],
) {
    let need_of = |need_at: &[u32], label: &Label| need_at.get(label.index()).copied().unwrap_or(0);
    let mut need = 0u32;
    let mut unchecked = guards.len();
    let mut unread = sure_ends.len();
    // Backwards, so removing item `index` leaves the items still to visit where they were.
    for index in (0..flow.items().len()).rev() {
        let needless = match flow.items().get(index) {
            None => false,
            Some(Item::End(ret)) => {
                need = if is_accept(ret) { 0 } else { u32::MAX };
                false
            }
            Some(Item::Goto(target)) => {
                need = need_of(need_at, target);
                false
            }
            Some(Item::Cond { t, f, .. }) => {
                need = need_of(need_at, t).min(need_of(need_at, f));
                false
            }
            Some(Item::Back(_)) => {
                need = 0;
                false
            }
            Some(Item::Label(label)) => {
                if let Some(slot) = need_at.get_mut(label.index()) {
                    *slot = need;
                }
                false
            }
            Some(Item::Stmt(insn)) => {
                let mut end = load_end(insn);
                if let Some(&(at, sure)) = unread.checked_sub(1).and_then(|u| sure_ends.get(u)) {
                    if at == index {
                        unread -= 1;
                        end = Some(sure);
                    }
                }
                let guard = unchecked > 0 && guards.get(unchecked - 1) == Some(&index);
                if guard {
                    unchecked -= 1;
                }
                let needless = guard && end.is_some_and(|end| end <= need);
                if let (false, Some(end)) = (needless, end) {
                    need = need.max(end);
                }
                needless
            }
        };
        if needless {
            flow.remove(index);
        }
    }
}

/// The largest offset a classic load may name: the kernel reads larger ones as negative.
const MAX_OFFSET: u32 = i32::MAX as u32;

/// A test in the flow: the jump operation and its constant (ignored by the `x` forms).
type Cond = (CbpfOp, u32);

/// Items a flow has room for from the start (each label about every second item): port
/// 22's 39 without growing. Kept under glibc's large-chunk size (1 KiB, 16 bytes an
/// item): a larger request costs a `malloc_consolidate` on every compile.
const FLOW_ITEMS: usize = 62;

struct Emitter {
    flow: Flow<CbpfInsn, Cond>,
    bit_tests: BitTests,
    reject: Label,
    /// Scratch cells the filter does not use, to lend out as temporaries (bit `c` for cell
    /// `c`): the highest first. Temporaries are released in the reverse order of taking, so
    /// this is the stack of free cells it was (cells ascending, popped from the top).
    free_cells: u16,
    used_by_filter: u32,
    temporaries_wanted: u32,
    /// Where the loads of [`Pred::Guard`]s are among the flow's items, in program order.
    guards: Vec<usize>,
    /// Indirect loads after a guard with `4*([k]&0xf)` in X (item index, ascending, and the
    /// packet end they read up to at least: X >= 0), for [`drop_needless_guards`].
    sure_ends: Vec<(usize, u32)>,
    /// What X holds where the next item goes.
    x: XHolds,
    /// Each label's jumps so far, by label index. Jumps only go forward, so when a label is
    /// bound every jump to it has been written and this is final: a walk in program order,
    /// no fixpoint.
    labels: Vec<Jumps>,
}

/// The jumps written to a label: what X holds on them (their meet) and how many there are.
#[derive(Clone, Copy)]
struct Jumps {
    x: XHolds,
    count: u32,
}

/// What X is known to hold at a point of the program being written, so that a load into
/// X the code before it already made on every path in is not written again: the second
/// port test of `port 22` reads the transport header behind the same `ldxb 4*([14]&0xf)`
/// as the first one, on the only edge in. (Leaving the repeat for [`tighten`] to find costs
/// it a whole analysis of the program.)
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum XHolds {
    /// No path reaches here (after a jump or a return, before the next label jumped to).
    Unreached,
    /// Nothing known.
    Unknown,
    /// What this instruction loaded into X: `ldxb 4*([k]&0xf)`, `ldx #k` or `ldx len`,
    /// values of the packet and its length alone, which no instruction changes. (`ldx
    /// M[k]` is not kept: a store changes the cell.)
    Load(CbpfInsn),
}

impl XHolds {
    /// What X holds where paths holding `self` and `other` meet.
    fn meet(self, other: XHolds) -> XHolds {
        match (self, other) {
            (XHolds::Unreached, other) => other,
            (this, XHolds::Unreached) => this,
            (this, other) if this == other => this,
            _ => XHolds::Unknown,
        }
    }

    /// What X holds after `insn` runs where it held `self`.
    fn after(self, insn: CbpfInsn) -> XHolds {
        use CbpfOp::*;
        match insn.op {
            // Code no path reaches stays so until a label some jump names.
            _ if self == XHolds::Unreached => self,
            LdxMsh | LdxImm | LdxLen => XHolds::Load(insn),
            Tax | LdxMem => XHolds::Unknown,
            _ => self,
        }
    }
}

fn stmt(op: CbpfOp, k: u32) -> CbpfInsn {
    CbpfInsn::stmt(op, k)
}

/// `A op= #k` and `A op= x` for each operation.
fn alu_ops(op: BinOp) -> (CbpfOp, CbpfOp) {
    use CbpfOp::*;
    match op {
        BinOp::Add => (AddK, AddX),
        BinOp::Sub => (SubK, SubX),
        BinOp::Mul => (MulK, MulX),
        BinOp::Div => (DivK, DivX),
        BinOp::Mod => (ModK, ModX),
        BinOp::And => (AndK, AndX),
        BinOp::Or => (OrK, OrX),
        BinOp::Xor => (XorK, XorX),
        BinOp::Shl => (LshK, LshX),
        BinOp::Shr => (RshK, RshX),
    }
}

fn commutative(op: BinOp) -> bool {
    matches!(op, BinOp::Add | BinOp::Mul | BinOp::And | BinOp::Or | BinOp::Xor)
}

/// The byte offset `k` when `e` is `(byte at k & 0xf) << 2`, which `ldxb 4*([k]&0xf)` loads.
fn ipv4_header_length(e: &Expr) -> Option<u32> {
    let Expr::Binary { op: BinOp::Shl, lhs, rhs } = e else { return None };
    if **rhs != Expr::Const(2) {
        return None;
    }
    let Expr::Binary { op: BinOp::And, lhs: a, rhs: b } = lhs.as_ref() else { return None };
    let byte = match (a.as_ref(), b.as_ref()) {
        (byte, Expr::Const(0xf)) | (Expr::Const(0xf), byte) => byte,
        _ => return None,
    };
    match byte {
        Expr::Load { offset, size: Size::Byte } => match offset.as_ref() {
            Expr::Const(k) if *k <= MAX_OFFSET => Some(*k),
            _ => None,
        },
        _ => None,
    }
}

/// `lhs op k` as a test of the bits of a mask, when `lhs` is `x & m` (or `m & x`) and the
/// compare asks only whether `x & m` is 0 (or, for a one-bit `m`, whether it is `m`): `x`,
/// `m`, and whether the compare holds when some bit is set. Written `jset #m` on `x`, not
/// `and #m` and a compare: what tighten's and_tests makes of that pair (the same forms:
/// `jeq #0`, `jgt #0`, `jeq #m`), here without costing it a round. The operand is the one
/// [`Emitter::binary`] would mask (the right constant first).
fn bit_test(op: CmpOp, lhs: &Expr, k: u32) -> Option<(&Expr, u32, bool)> {
    let Expr::Binary { op: BinOp::And, lhs: a, rhs: b } = lhs else { return None };
    let (x, mask) = match (a.as_ref(), b.as_ref()) {
        (x, Expr::Const(m)) | (Expr::Const(m), x) => (x, *m),
        _ => return None,
    };
    let set_holds = match (op, k) {
        (CmpOp::Ne | CmpOp::Gt, 0) => true,
        (CmpOp::Eq | CmpOp::Le, 0) => false,
        (CmpOp::Eq, k) if k == mask && mask.is_power_of_two() => true,
        (CmpOp::Ne, k) if k == mask && mask.is_power_of_two() => false,
        _ => return None,
    };
    Some((x, mask, set_holds))
}

/// Whether one instruction loads `e` into X.
fn loads_into_x(e: &Expr) -> bool {
    matches!(e, Expr::Const(_) | Expr::WireLen | Expr::Scratch(_))
        || ipv4_header_length(e).is_some()
}

/// Whether `e` loads into A without touching X.
fn leaves_x(e: &Expr) -> bool {
    matches!(e, Expr::Const(_) | Expr::WireLen | Expr::Scratch(_))
        || matches!(e, Expr::Load { offset, .. } if matches!(offset.as_ref(), Expr::Const(_)))
}

impl Emitter {
    fn new(used: u16, bit_tests: BitTests) -> Self {
        // (room for a small filter's items and labels: growing from empty cost a few
        // reallocations a compile)
        let mut flow = Flow::with_capacity(FLOW_ITEMS);
        let reject = flow.label();
        let mut labels = Vec::with_capacity(FLOW_ITEMS / 2);
        labels.push(Jumps { x: XHolds::Unreached, count: 0 });
        // One bit of `used` a cell: a u16 holds them all.
        const _: () = assert!(MEM_WORDS == u16::BITS);
        let free_cells = !used;
        Emitter {
            flow,
            bit_tests,
            reject,
            free_cells,
            used_by_filter: used.count_ones(),
            temporaries_wanted: 0,
            guards: Vec::new(),
            sure_ends: Vec::new(),
            x: XHolds::Unknown,
            labels,
        }
    }

    fn op(&mut self, op: CbpfOp, k: u32) {
        let insn = stmt(op, k);
        self.x = self.x.after(insn);
        self.flow.stmt(insn);
    }

    /// Writes `ldx`-class `insn` unless X already holds what it loads on every path here.
    fn op_into_x(&mut self, insn: CbpfInsn) {
        if self.x != XHolds::Load(insn) {
            self.op(insn.op, insn.k);
        }
    }

    /// A new label, with no jumps to it yet.
    fn label(&mut self) -> Label {
        self.labels.push(Jumps { x: XHolds::Unreached, count: 0 });
        self.flow.label()
    }

    /// Notes that a jump to `label` leaves from here.
    fn jump_to(&mut self, label: Label) {
        if let Some(jumps) = self.labels.get_mut(label.index()) {
            jumps.x = jumps.x.meet(self.x);
            jumps.count = jumps.count.wrapping_add(1);
        }
    }

    fn cond(&mut self, cond: Cond, t: Label, f: Label) {
        self.jump_to(t);
        self.jump_to(f);
        self.x = XHolds::Unreached;
        self.flow.cond(cond, t, f);
    }

    fn goto(&mut self, target: Label) {
        self.jump_to(target);
        self.x = XHolds::Unreached;
        self.flow.goto(target);
    }

    fn end(&mut self, ret: CbpfInsn) {
        self.x = XHolds::Unreached;
        self.flow.end(ret);
    }

    /// Binds `label` (all jumps to it are written: see [`Emitter::labels`]). A label no
    /// jump names is left out, and so are it and the `goto` to it just written when that is
    /// its only jump (it goes to the next item): [`Flow::simplify`] would drop both, but in
    /// a round each and a third to see nothing change (every guard's `goto` to the part
    /// after it). (With other jumps to the label the `goto` stays: simplify may first make
    /// it a copy of what the label lands on.)
    fn bind(&mut self, label: Label) {
        let Some(jumps) = self.labels.get_mut(label.index()) else { return };
        if jumps.count == 1 && self.flow.drop_trailing_goto(label) {
            jumps.count = 0;
        }
        // (after a dropped goto, the meet already holds what X held on it)
        self.x = self.x.meet(jumps.x);
        if jumps.count > 0 {
            self.flow.bind(label);
        }
    }

    /// Binds the head of a loop, which [`Emitter::back`] jumps to later: X is whatever the
    /// last turn left there.
    fn bind_loop_head(&mut self, head: Label) {
        self.flow.bind(head);
        self.x = XHolds::Unknown;
    }

    /// The jump back to a head bound with [`Emitter::bind_loop_head`].
    fn back(&mut self, head: Label) {
        self.x = XHolds::Unreached;
        self.flow.back(head);
    }

    /// Control reaches here only to abort: the rest of the code on this path is dead and
    /// [`Flow::simplify`] removes it.
    fn abort(&mut self) {
        self.goto(self.reject);
    }

    fn temporary(&mut self) -> Result<u32, EmitError> {
        self.temporaries_wanted = self.temporaries_wanted.wrapping_add(1);
        // The highest set bit of the free mask.
        let Some(cell) = (u16::BITS - 1).checked_sub(self.free_cells.leading_zeros()) else {
            return Err(EmitError::OutOfScratch {
                used_by_filter: self.used_by_filter,
                needed: self.temporaries_wanted,
            });
        };
        self.free_cells &= !(1u16 << cell);
        Ok(cell)
    }

    fn release(&mut self, cell: u32) {
        self.temporaries_wanted = self.temporaries_wanted.saturating_sub(1);
        self.free_cells |= 1u16.checked_shl(cell).unwrap_or(0);
    }

    // ---------------------------------------------------------------------------------
    // Predicates

    fn pred(&mut self, p: &Pred, t: Label, f: Label) -> Result<(), EmitError> {
        match p {
            Pred::Const(true) => self.goto(t),
            Pred::Const(false) => self.goto(f),
            Pred::Cmp { op, lhs, rhs } => self.cmp(*op, lhs, rhs, t, f)?,
            Pred::In { value, set } => {
                self.load_a(value)?;
                search(self, set.ranges(), 0, max_value(value), t, f);
            }
            Pred::And(parts) => self.sequence(parts, true, t, f)?,
            Pred::Or(parts) => self.sequence(parts, false, t, f)?,
            Pred::Not(inner) => self.pred(inner, f, t)?,
            Pred::Store { slot, value } => {
                self.load_a(value)?;
                self.op(CbpfOp::St, u32::from(*slot));
                self.goto(t);
            }
            Pred::Guard(n) => {
                match n.checked_sub(1) {
                    None => {}
                    Some(last) if last > MAX_OFFSET => self.abort(),
                    Some(last) => {
                        self.guards.push(self.flow.items().len());
                        self.op(CbpfOp::LdAbsB, last);
                    }
                }
                self.goto(t);
            }
            Pred::Chain(chain) => self.chain(chain, t, f)?,
            // Classic BPF ends the program on an out-of-bounds load: an abort cannot be
            // caught there.
            Pred::Try(_) => return Err(EmitError::Unsupported("Pred::Try (a pfmatch clause)")),
            // No tables in classic BPF: the ordered expansion, which the node means.
            Pred::Pairs(pairs) => self.pred(&pairs.expand(), t, f)?,
        }
        Ok(())
    }

    /// A [`Chain`] walk as libpcap writes it: the next-header value in A, the header
    /// offset in X, a loop closed by a backward `ja`. The hop budget is the interpreter's:
    /// libpcap's `bpf_filter` (git head) and weir-cbpf give up on a packet's 65th backward
    /// jump, which is the IR's budget for a filter with one walk; with several walks whose
    /// hops add up past 64 on one packet, they reject where the IR does not. libpcap 1.10
    /// has no budget. The kernel refuses backward jumps altogether.
    fn chain(&mut self, chain: &Chain, t: Label, f: Label) -> Result<(), EmitError> {
        use CbpfOp::*;
        let cell = self.temporary()?;
        if loads_into_x(&chain.offset) && leaves_x(&chain.next) {
            self.load_x(&chain.offset);
            self.load_a(&chain.next)?;
        } else {
            self.load_a(&chain.offset)?;
            self.op(St, cell);
            self.load_a(&chain.next)?;
            self.op(LdxMem, cell);
        }
        let head = self.label();
        self.bind_loop_head(head);
        let (extension, ah) = (self.label(), self.label());
        let test = |e: &mut Self, k: u32, to: Label| {
            let next = e.label();
            e.cond((JeqK, k), to, next);
            e.bind(next);
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
        self.goto(f);
        // Both steps read the next header's number and its length at `base + x`.
        let base = chain.base;
        let Some(length_at) = base.checked_add(1).filter(|&k| k <= MAX_OFFSET) else {
            // No header that far is in any packet: the first step aborts.
            self.bind(extension);
            self.bind(ah);
            self.abort();
            self.release(cell);
            return Ok(());
        };
        for (label, add, unit, from_x) in [(extension, 1, 8, true), (ah, 2, 4, false)] {
            self.bind(label);
            self.op(LdIndB, base);
            self.op(St, cell);
            self.op(LdIndB, length_at);
            self.op(AddK, add);
            self.op(MulK, unit);
            if from_x {
                self.op(AddX, 0);
            }
            self.op(Tax, 0);
            self.op(LdMem, cell);
            self.back(head);
        }
        self.release(cell);
        Ok(())
    }

    /// `and` (`all` = true) or `or`: each part but the last continues to the next one on
    /// the outcome that does not decide the whole.
    fn sequence(&mut self, parts: &[Pred], all: bool, t: Label, f: Label) -> Result<(), EmitError> {
        let Some((last, init)) = parts.split_last() else {
            self.goto(if all { t } else { f });
            return Ok(());
        };
        for part in init {
            let next = self.label();
            if all {
                self.pred(part, next, f)?;
            } else {
                self.pred(part, t, next)?;
            }
            self.bind(next);
        }
        self.pred(last, t, f)
    }

    fn cmp(
        &mut self,
        op: CmpOp,
        lhs: &Expr,
        rhs: &Expr,
        t: Label,
        f: Label,
    ) -> Result<(), EmitError> {
        // Constants go on the right, where `#k` takes them.
        let (op, lhs, rhs) = match (lhs, rhs) {
            (Expr::Const(_), r) if !matches!(r, Expr::Const(_)) => (mirror(op), rhs, lhs),
            _ => (op, lhs, rhs),
        };
        if let Expr::Const(k) = rhs {
            if let Some((operand, mask, set_holds)) = bit_test(op, lhs, *k) {
                if self.bit_tests == BitTests::Jset {
                    self.load_a(operand)?;
                    let (t, f) = if set_holds { (t, f) } else { (f, t) };
                    self.cond((CbpfOp::JsetK, mask), t, f);
                    return Ok(());
                }
            }
            self.load_a(lhs)?;
            self.branch(op, false, *k, t, f);
            return Ok(());
        }
        let (op, lhs, rhs) = if !loads_into_x(rhs) && loads_into_x(lhs) {
            (mirror(op), rhs, lhs)
        } else {
            (op, lhs, rhs)
        };
        self.operands_in_a_and_x(lhs, rhs)?;
        self.branch(op, true, 0, t, f);
        Ok(())
    }

    /// A conditional jump on `A op k` (or `A op X`).
    fn branch(&mut self, op: CmpOp, use_x: bool, k: u32, t: Label, f: Label) {
        use CbpfOp::*;
        let pick = |kop, xop| if use_x { xop } else { kop };
        let (jump, t, f) = match op {
            CmpOp::Eq => (pick(JeqK, JeqX), t, f),
            CmpOp::Ne => (pick(JeqK, JeqX), f, t),
            CmpOp::Gt => (pick(JgtK, JgtX), t, f),
            CmpOp::Ge => (pick(JgeK, JgeX), t, f),
            CmpOp::Lt => (pick(JgeK, JgeX), f, t),
            CmpOp::Le => (pick(JgtK, JgtX), f, t),
            CmpOp::Set => (pick(JsetK, JsetX), t, f),
        };
        self.cond((jump, if use_x { 0 } else { k }), t, f);
    }

    // ---------------------------------------------------------------------------------
    // Expressions

    /// A = `e` (or a jump to the reject exit).
    fn load_a(&mut self, e: &Expr) -> Result<(), EmitError> {
        if let Some(k) = ipv4_header_length(e) {
            self.op_into_x(stmt(CbpfOp::LdxMsh, k));
            self.op(CbpfOp::Txa, 0);
            return Ok(());
        }
        match e {
            Expr::Const(k) => self.op(CbpfOp::LdImm, *k),
            Expr::WireLen => self.op(CbpfOp::LdLen, 0),
            Expr::Scratch(slot) => self.op(CbpfOp::LdMem, u32::from(*slot)),
            Expr::Load { offset, size } => self.load(offset, *size)?,
            Expr::Neg(inner) => {
                self.load_a(inner)?;
                self.op(CbpfOp::Neg, 0);
            }
            Expr::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs)?,
        }
        Ok(())
    }

    /// X = `e`, for an `e` that [`loads_into_x`].
    fn load_x(&mut self, e: &Expr) {
        if let Some(k) = ipv4_header_length(e) {
            self.op_into_x(stmt(CbpfOp::LdxMsh, k));
            return;
        }
        match e {
            Expr::Const(k) => self.op_into_x(stmt(CbpfOp::LdxImm, *k)),
            Expr::WireLen => self.op_into_x(stmt(CbpfOp::LdxLen, 0)),
            Expr::Scratch(slot) => self.op(CbpfOp::LdxMem, u32::from(*slot)),
            _ => {}
        }
    }

    /// A = `lhs`, X = `rhs`, in the cheapest order (operands have no effects).
    fn operands_in_a_and_x(&mut self, lhs: &Expr, rhs: &Expr) -> Result<(), EmitError> {
        if loads_into_x(rhs) {
            self.load_a(lhs)?;
            self.load_x(rhs);
        } else if leaves_x(lhs) {
            self.load_a(rhs)?;
            self.op(CbpfOp::Tax, 0);
            self.load_a(lhs)?;
        } else {
            self.load_a(rhs)?;
            let cell = self.temporary()?;
            self.op(CbpfOp::St, cell);
            self.load_a(lhs)?;
            self.op(CbpfOp::LdxMem, cell);
            self.release(cell);
        }
        Ok(())
    }

    fn binary(&mut self, op: BinOp, lhs: &Expr, rhs: &Expr) -> Result<(), EmitError> {
        let (k_op, x_op) = alu_ops(op);
        match (op, rhs) {
            (BinOp::Div | BinOp::Mod, Expr::Const(0)) => {
                self.abort();
                return Ok(());
            }
            (BinOp::Shl | BinOp::Shr, Expr::Const(k)) if *k >= 32 => {
                if can_abort(lhs) {
                    self.load_a(lhs)?;
                }
                self.op(CbpfOp::LdImm, 0);
                return Ok(());
            }
            (_, Expr::Const(k)) => {
                self.load_a(lhs)?;
                self.op(k_op, *k);
                return Ok(());
            }
            _ => {}
        }
        if let (true, Expr::Const(k)) = (commutative(op), lhs) {
            self.load_a(rhs)?;
            self.op(k_op, *k);
            return Ok(());
        }
        if matches!(op, BinOp::Shl | BinOp::Shr) && max_value(rhs) >= 32 {
            return self.checked_shift(x_op, lhs, rhs);
        }
        let (lhs, rhs) = if commutative(op) && !loads_into_x(rhs) && loads_into_x(lhs) {
            (rhs, lhs)
        } else {
            (lhs, rhs)
        };
        self.operands_in_a_and_x(lhs, rhs)?;
        // `div x`/`mod x` return 0 when X is 0: the IR's abort.
        self.op(x_op, 0);
        Ok(())
    }

    /// `lhs << rhs` (or `>>`) when `rhs` may be 32 or more, which must give 0.
    fn checked_shift(&mut self, x_op: CbpfOp, lhs: &Expr, rhs: &Expr) -> Result<(), EmitError> {
        let (small, big, done) = (self.label(), self.label(), self.label());
        if leaves_x(lhs) {
            self.load_a(rhs)?;
            self.cond((CbpfOp::JgeK, 32), big, small);
            self.bind(small);
            self.op(CbpfOp::Tax, 0);
            self.load_a(lhs)?;
            self.op(x_op, 0);
            self.goto(done);
            self.bind(big);
            if can_abort(lhs) {
                self.load_a(lhs)?;
            }
        } else {
            self.load_a(lhs)?;
            let cell = self.temporary()?;
            self.op(CbpfOp::St, cell);
            self.load_a(rhs)?;
            self.cond((CbpfOp::JgeK, 32), big, small);
            self.bind(small);
            self.op(CbpfOp::Tax, 0);
            self.op(CbpfOp::LdMem, cell);
            self.op(x_op, 0);
            self.goto(done);
            self.bind(big);
            self.release(cell);
        }
        self.op(CbpfOp::LdImm, 0);
        self.bind(done);
        Ok(())
    }

    fn load(&mut self, offset: &Expr, size: Size) -> Result<(), EmitError> {
        use CbpfOp::*;
        let (abs, ind) = match size {
            Size::Byte => (LdAbsB, LdIndB),
            Size::Half => (LdAbsH, LdIndH),
            Size::Word => (LdAbsW, LdIndW),
        };
        if let Expr::Const(k) = offset {
            if *k > MAX_OFFSET {
                self.abort();
            } else {
                self.op(abs, *k);
            }
            return Ok(());
        }
        let (base, displacement) = split_offset(offset);
        let Some(base_limit) = MAX_OFFSET.checked_sub(displacement) else {
            // The offset is at least the displacement: past any packet.
            self.abort();
            return Ok(());
        };
        if loads_into_x(base) && max_value(base) <= base_limit {
            self.load_x(base);
        } else {
            self.load_a(base)?;
            if max_value(base) > base_limit {
                let ok = self.label();
                self.cond((JgtK, base_limit), self.reject, ok);
                self.bind(ok);
            }
            self.op(Tax, 0);
        }
        if !self.guards.is_empty() && matches!(self.x, XHolds::Load(x) if x.op == LdxMsh) {
            // X = 4*([k]&0xf) >= 0 and displacement <= MAX_OFFSET: no wrap.
            let end = displacement.saturating_add(size.bytes());
            self.sure_ends.push((self.flow.items().len(), end));
        }
        self.op(ind, displacement);
        Ok(())
    }
}

impl Searcher for Emitter {
    fn new_label(&mut self) -> Label {
        self.label()
    }

    fn bind_label(&mut self, label: Label) {
        self.bind(label);
    }

    fn goto_label(&mut self, label: Label) {
        self.goto(label);
    }

    fn test(&mut self, test: Test, t: Label, f: Label) {
        let cond = match test {
            Test::Eq(k) => (CbpfOp::JeqK, k),
            Test::Ge(k) => (CbpfOp::JgeK, k),
            Test::Gt(k) => (CbpfOp::JgtK, k),
        };
        self.cond(cond, t, f);
    }
}

// -------------------------------------------------------------------------------------
// Layout

/// Where each label lands, as an instruction index (where the instruction after it sits).
fn label_positions(items: &[Item<CbpfInsn, Cond>], labels: usize) -> Vec<usize> {
    let mut at = vec![0usize; labels];
    let mut index = 0usize;
    for item in items {
        match item {
            Item::Label(label) => {
                if let Some(slot) = at.get_mut(label.index()) {
                    *slot = index;
                }
            }
            _ => index = index.wrapping_add(1),
        }
    }
    at
}

/// Where each item sits, as an instruction index (a label where the instruction after it
/// does), paired with the item.
fn with_positions(
    items: &[Item<CbpfInsn, Cond>],
) -> impl Iterator<Item = (&Item<CbpfInsn, Cond>, usize)> {
    items.iter().scan(0usize, |index, item| {
        let here = *index;
        if !matches!(item, Item::Label(_)) {
            *index = here.wrapping_add(1);
        }
        Some((item, here))
    })
}

/// Distance from the instruction after `from` to `target` (jumps only go forward).
fn distance(at: &[usize], from: usize, target: Label) -> usize {
    at.get(target.index()).copied().unwrap_or(0).saturating_sub(from.wrapping_add(1))
}

/// The farthest a `jt`/`jf` reaches.
const REACH: usize = u8::MAX as usize;
/// Landings are placed this far short of the reach when they can be, so that the landings
/// inserted later between a test and its landing seldom push it out of reach again.
const SLACK: usize = 16;
/// Layout passes before giving up (a few suffice in practice; each pass is linear).
const MAX_PASSES: usize = 64;

/// Turns the flow into instructions. A test whose target is more than 255 instructions
/// away jumps instead to a landing within reach: a `ja` to the target, or a copy of the
/// `ret` the target is. A landing goes where no instruction falls through (after a test, a
/// `ja` or a `ret`), at the last such place the reach allows, and the tests before it that
/// go the same far way share it, so a long run of tests that all reject far away costs one
/// landing per ~240 instructions, not one each. An identical instruction already within
/// reach ahead (a landing of an earlier pass, or the `ret` itself) serves as it is.
///
/// Each pass walks the program once, placing the landings the distances it knows call for;
/// a landing placed between a test and its target can push a test that was in reach out of
/// it, which the next pass sees. A pass that places nothing leaves every test in reach.
fn layout(flow: &mut Flow<CbpfInsn, Cond>) -> Result<Vec<CbpfInsn>, EmitError> {
    for _ in 0..MAX_PASSES {
        if let Some(at) = place_landings(flow) {
            return encode(flow, &at);
        }
    }
    let len = flow.items().iter().filter(|i| !matches!(i, Item::Label(_))).count();
    Err(EmitError::TooLong { len, max: MAX_INSNS })
}

/// What a landing is: a copy of a `ret`, or a jump to a label. Identical instructions
/// already in the program serve as landings too.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum LandingKey {
    Ret(CbpfInsn),
    Goto(usize),
}

impl LandingKey {
    fn of(item: &Item<CbpfInsn, Cond>) -> Option<LandingKey> {
        match item {
            Item::End(ret) => Some(LandingKey::Ret(*ret)),
            Item::Goto(target) => Some(LandingKey::Goto(target.index())),
            _ => None,
        }
    }
}

/// A landing some tests will jump to, not placed yet.
struct Pending {
    landing: Item<CbpfInsn, Cond>,
    label: Label,
    /// The last instruction index it may take.
    deadline: usize,
}

/// One layout pass (see [`layout`]): where each label lands (as [`label_positions`] gives
/// it) when it placed no landing, else `None`.
fn place_landings(flow: &mut Flow<CbpfInsn, Cond>) -> Option<Vec<usize>> {
    let at = label_positions(flow.items(), flow.label_count());
    // With every test in reach nothing is rerouted, so the pass below would give the items
    // back as they are: skip its copy, tables and map (the common case, any small filter).
    let in_reach = |from: usize, target: Label| distance(&at, from, target) <= REACH;
    let all_in_reach = with_positions(flow.items()).all(|(item, from)| match item {
        Item::Cond { t, f, .. } => in_reach(from, *t) && in_reach(from, *f),
        _ => true,
    });
    if all_in_reach {
        return Some(at);
    }
    let item_at: Vec<usize> = with_positions(flow.items()).map(|(_, index)| index).collect();
    let items = flow.items().to_vec();
    // What each label lands on: a `ret` a landing may copy, or something to jump to.
    let mut lands_on: Vec<Option<CbpfInsn>> = vec![None; flow.label_count()];
    let mut next_real: Option<CbpfInsn> = None;
    for item in items.iter().rev() {
        match item {
            Item::Label(l) => {
                if let Some(slot) = lands_on.get_mut(l.index()) {
                    *slot = next_real;
                }
            }
            Item::End(ret) => next_real = Some(*ret),
            _ => next_real = None,
        }
    }
    // Places before item `k` where no instruction falls through, and for each, the next one.
    let is_place: Vec<bool> =
        std::iter::once(false)
            .chain(items.iter().map(|i| {
                matches!(i, Item::Cond { .. } | Item::Goto(_) | Item::Back(_) | Item::End(_))
            }))
            .collect();
    let mut next_place = vec![None; is_place.len()];
    let mut following = None;
    for (k, &place) in is_place.iter().enumerate().rev() {
        if let Some(slot) = next_place.get_mut(k) {
            *slot = following;
        }
        if place {
            following = Some(k);
        }
    }
    let total = item_at.last().map_or(0, |&p| p.wrapping_add(1));
    let position_of = |k: usize| item_at.get(k).copied().unwrap_or(total);
    // Where each kind of landing already stands (item indexes, ascending), and the labels
    // put in front of those that tests jump to.
    let mut standing: HashMap<LandingKey, Vec<usize>> = HashMap::new();
    for (k, item) in items.iter().enumerate() {
        if let Some(key) = LandingKey::of(item) {
            standing.entry(key).or_default().push(k);
        }
    }
    let mut labelled: HashMap<usize, Label> = HashMap::new();

    let mut out: Vec<Item<CbpfInsn, Cond>> = Vec::with_capacity(items.len());
    let mut pos = 0usize; // index of the next instruction written
    let mut shift = 0usize; // landings placed so far: everything ahead moved by this much
    let mut pending: Vec<Pending> = Vec::new();
    let mut placed = false;
    // Places the pending landings due before `limit` (all of them without one), most
    // urgent first.
    let flush = |out: &mut Vec<Item<CbpfInsn, Cond>>,
                 pending: &mut Vec<Pending>,
                 limit: Option<usize>,
                 pos: &mut usize,
                 shift: &mut usize| {
        pending.sort_by_key(|p| p.deadline);
        let due = limit.map_or(pending.len(), |l| pending.partition_point(|p| p.deadline < l));
        for p in pending.drain(..due) {
            out.push(Item::Label(p.label));
            out.push(p.landing);
            *pos = pos.wrapping_add(1);
            *shift = shift.wrapping_add(1);
        }
        due > 0
    };
    for (k, item) in items.into_iter().enumerate() {
        if is_place.get(k).copied().unwrap_or(false) && !pending.is_empty() {
            // Those the next place would be too late for go here; the others wait for it.
            let next = next_place.get(k).copied().flatten().map(|k2| {
                position_of(k2)
                    .wrapping_add(shift)
                    .saturating_add(pending.len())
                    .saturating_add(SLACK)
            });
            placed |= flush(&mut out, &mut pending, next, &mut pos, &mut shift);
        }
        if let Some(&label) = labelled.get(&k) {
            out.push(Item::Label(label));
        }
        match item {
            Item::Cond { cond, t, f } => {
                let from = pos;
                let mut reroute = |target: Label| {
                    let ahead = at.get(target.index()).copied().unwrap_or(0).wrapping_add(shift);
                    if ahead.saturating_sub(from.wrapping_add(1)) <= REACH {
                        return target;
                    }
                    let landing = match lands_on.get(target.index()).copied().flatten() {
                        Some(ret) => Item::End(ret),
                        None => Item::Goto(target),
                    };
                    let deadline = from.wrapping_add(1).wrapping_add(REACH);
                    // The same instruction standing within reach ahead serves as it is.
                    let in_place = LandingKey::of(&landing)
                        .and_then(|key| standing.get(&key))
                        .and_then(|places| places.get(places.partition_point(|&i| i <= k)).copied())
                        .filter(|&i| position_of(i).wrapping_add(shift) <= deadline);
                    if let Some(i) = in_place {
                        return *labelled.entry(i).or_insert_with(|| flow.label());
                    }
                    if let Some(p) = pending.iter_mut().find(|p| p.landing == landing) {
                        p.deadline = p.deadline.min(deadline);
                        return p.label;
                    }
                    let label = flow.label();
                    pending.push(Pending { landing, label, deadline });
                    label
                };
                let (t, f) = (reroute(t), reroute(f));
                out.push(Item::Cond { cond, t, f });
                pos = pos.wrapping_add(1);
            }
            Item::Label(_) => out.push(item),
            other => {
                out.push(other);
                pos = pos.wrapping_add(1);
            }
        }
    }
    placed |= flush(&mut out, &mut pending, None, &mut pos, &mut shift);
    flow.set_items(out);
    (!placed).then(|| label_positions(flow.items(), flow.label_count()))
}

/// The instructions of `flow`, whose labels land at `at` (see [`label_positions`]).
fn encode(flow: &Flow<CbpfInsn, Cond>, at: &[usize]) -> Result<Vec<CbpfInsn>, EmitError> {
    let items = flow.items();
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let index = out.len();
        match item {
            Item::Label(_) => continue,
            Item::Stmt(insn) | Item::End(insn) => out.push(*insn),
            Item::Goto(target) => {
                let k = u32::try_from(distance(at, index, *target)).unwrap_or(u32::MAX);
                out.push(stmt(CbpfOp::Ja, k));
            }
            Item::Back(target) => {
                // A negative offset, as libpcap writes its protochain loop.
                let head = at.get(target.index()).copied().unwrap_or(0);
                let back = index.wrapping_add(1).saturating_sub(head);
                let k = u32::try_from(back).map_or(u32::MAX, u32::wrapping_neg);
                out.push(stmt(CbpfOp::Ja, k));
            }
            Item::Cond { cond: (op, k), t, f } => {
                let jt = u8::try_from(distance(at, index, *t));
                let jf = u8::try_from(distance(at, index, *f));
                match (jt, jf) {
                    (Ok(jt), Ok(jf)) => out.push(CbpfInsn::jump(*op, *k, jt, jf)),
                    // Only when layout gave up on a program far over the length limit.
                    _ => return Err(EmitError::TooLong { len: items.len(), max: MAX_INSNS }),
                }
            }
        }
    }
    Ok(out)
}

/// Prepends `st M[c]` of 0 for every cell some path may read before writing it (the IR's
/// slots start at 0; the kernel refuses such reads). The analysis is the kernel's: jumps
/// only go forward, so one pass in program order sees every predecessor first.
fn zero_unwritten_cells(body: Vec<CbpfInsn>) -> Vec<CbpfInsn> {
    const ALL: u16 = u16::MAX;
    // (most filters read no cell: no walk, no table)
    if !body.iter().any(|insn| matches!(insn.op, CbpfOp::LdMem | CbpfOp::LdxMem)) {
        return body;
    }
    let mut written = vec![ALL; body.len()];
    if let Some(first) = written.first_mut() {
        *first = 0;
    }
    let mut unwritten_reads = 0u16;
    for (index, insn) in body.iter().enumerate() {
        let mut here = written.get(index).copied().unwrap_or(ALL);
        let bit = 1u16.checked_shl(insn.k).unwrap_or(0);
        match insn.op {
            CbpfOp::LdMem | CbpfOp::LdxMem if here & bit == 0 => unwritten_reads |= bit,
            CbpfOp::St | CbpfOp::Stx => here |= bit,
            _ => {}
        }
        let next = index.wrapping_add(1);
        let successors = if insn.op.is_return() {
            [None, None]
        } else if insn.op == CbpfOp::Ja {
            [usize::try_from(insn.k).ok().and_then(|k| next.checked_add(k)), None]
        } else if insn.op.is_conditional_jump() {
            [next.checked_add(usize::from(insn.jt)), next.checked_add(usize::from(insn.jf))]
        } else {
            [Some(next), None]
        };
        for succ in successors.into_iter().flatten() {
            if let Some(w) = written.get_mut(succ) {
                *w &= here;
            }
        }
    }
    if unwritten_reads == 0 {
        return body;
    }
    let mut program = vec![stmt(CbpfOp::LdImm, 0)];
    for cell in 0..MEM_WORDS {
        if unwritten_reads & (1u16 << cell) != 0 {
            program.push(stmt(CbpfOp::St, cell));
        }
    }
    program.extend(body);
    program
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_isa::cbpf::format_listing;

    fn listing(pred: Pred) -> String {
        format_listing(&emit(&Filter::new(pred)).unwrap())
    }

    /// Temporaries take the cells the filter leaves free from 15 down, and give them back
    /// in reverse order: two at once are 15 and 14, the next one 15 again; a filter's own
    /// cell 15 moves them to 14 and 13.
    #[test]
    fn temporaries_take_the_highest_free_cells() {
        let byte = |k| Expr::load_at(k, Size::Byte);
        let sum = |k| Expr::binary(BinOp::Add, byte(k), byte(k + 1));
        let diff = |k| Expr::binary(BinOp::Sub, sum(k), sum(k + 2));
        let cells = |pred: Pred| {
            let program = emit_unoptimized(&Filter::new(pred)).unwrap();
            let cell_ops = [CbpfOp::St, CbpfOp::LdxMem, CbpfOp::LdMem];
            program.iter().filter(|i| cell_ops.contains(&i.op)).map(|i| i.k).collect::<Vec<_>>()
        };
        let nested = Pred::cmp(CmpOp::Eq, diff(0), diff(4));
        assert_eq!(cells(nested.clone()), [15, 15, 15, 14, 14, 15]);
        let own = Pred::Store { slot: 15, value: Expr::Const(1) };
        assert_eq!(cells(Pred::and([own, nested])), [15, 14, 14, 14, 13, 13, 14]);
    }

    /// A classic flow item is 16 bytes (a 32-bit label), so a small filter's flow fits one
    /// allocation under glibc's 1 KiB large-chunk size (see [`FLOW_ITEMS`]).
    #[test]
    fn a_small_filters_flow_fits_one_small_chunk() {
        let item = std::mem::size_of::<Item<CbpfInsn, Cond>>();
        assert_eq!(item, 16);
        assert!(FLOW_ITEMS * item <= 1000, "{} bytes", FLOW_ITEMS * item);
    }

    #[test]
    fn ipv4_header_length_loads_use_ldxb() {
        let hlen =
            Expr::binary(BinOp::Shl, Expr::load_at(14, Size::Byte).and_mask(0xf), Expr::Const(2));
        let port = Expr::load(hlen.plus(14).plus(2), Size::Half);
        assert_eq!(
            listing(Pred::eq(port, 80)),
            "(000) ldxb     4*([14]&0xf)\n\
             (001) ldh      [x + 16]\n\
             (002) jeq      #0x50            jt 3\tjf 4\n\
             (003) ret      #262144\n\
             (004) ret      #0\n"
        );
    }

    fn header_length(k: u32) -> Expr {
        Expr::binary(BinOp::Shl, Expr::load_at(k, Size::Byte).and_mask(0xf), Expr::Const(2))
    }

    /// `4*([14]&0xf) + 14 + at` as a half word equal to 22 (a TCP port test).
    fn port_at(at: u32) -> Pred {
        Pred::eq(Expr::load(header_length(14).plus(14 + at), Size::Half), 22)
    }

    fn count(prog: &[CbpfInsn], op: CbpfOp) -> usize {
        prog.iter().filter(|i| i.op == op).count()
    }

    #[test]
    fn x_is_not_loaded_again_where_it_holds_the_value_on_every_path_in() {
        // `port 22`'s two tests: the second is reached only from the first.
        let prog = emit_unoptimized(&Filter::new(Pred::or([port_at(0), port_at(2)]))).unwrap();
        assert_eq!(count(&prog, CbpfOp::LdxMsh), 1, "{}", format_listing(&prog));
        // The length itself into A: `txa` alone the second time.
        let length = Pred::cmp(CmpOp::Gt, header_length(14), Expr::Const(20));
        let prog = emit_unoptimized(&Filter::new(Pred::and([port_at(0), length]))).unwrap();
        assert_eq!(count(&prog, CbpfOp::LdxMsh), 1, "{}", format_listing(&prog));
        assert_eq!(count(&prog, CbpfOp::Txa), 1);
        // Both ways into the join hold it.
        let both = Pred::or([Pred::and([port_at(0), port_at(2)]), port_at(4)]);
        let prog = emit_unoptimized(&Filter::new(Pred::and([both, port_at(6)]))).unwrap();
        assert_eq!(count(&prog, CbpfOp::LdxMsh), 1, "{}", format_listing(&prog));
    }

    #[test]
    fn x_is_loaded_again_after_a_join_a_write_or_a_loop() {
        let byte = |k| Pred::eq(Expr::load_at(k, Size::Byte), 1);
        // A way into the join that never loaded it.
        let join = Pred::and([Pred::or([byte(1), port_at(0)]), port_at(2)]);
        // A computed offset goes through `tax`.
        let offset = Expr::load_at(0, Size::Byte).and_mask(0x3f);
        let tax = Pred::eq(Expr::load(offset, Size::Byte), 1);
        let written = Pred::and([port_at(0), tax, port_at(2)]);
        // Another header length in between.
        let other = Pred::eq(Expr::load(header_length(16).plus(1), Size::Byte), 1);
        let replaced = Pred::and([port_at(0), other, port_at(2)]);
        // A protochain walk from the same header length: X is the walked offset after it.
        let chain = Chain {
            target: 6,
            ipv6: false,
            base: 14,
            next: Expr::load_at(23, Size::Byte),
            offset: header_length(14),
        };
        let looped = Pred::and([Pred::Chain(Box::new(chain)), port_at(2)]);
        // A shift that may be by 32 or more: `tax` on one way into its end, not the other
        // (the end is reached by falling through as well as by a jump).
        let amount = Expr::load_at(1, Size::Byte);
        let shift = Expr::binary(BinOp::Shl, Expr::load_at(0, Size::Byte), amount);
        let shifted = Pred::and([port_at(0), Pred::eq(shift, 0), port_at(2)]);
        let cases = [(join, 2), (written, 2), (replaced, 3), (looped, 2), (shifted, 2)];
        for (pred, want) in cases {
            let prog = emit_unoptimized(&Filter::new(pred.clone())).unwrap();
            assert_eq!(count(&prog, CbpfOp::LdxMsh), want, "{pred:?}\n{}", format_listing(&prog));
        }
    }

    #[test]
    fn a_guard_is_left_out_only_where_every_path_to_an_accept_loads_as_far() {
        // The loads of byte n - 1 in the program of `Guard(n) and rest`.
        let guards = |n: u32, rest: Pred| {
            let prog = emit_unoptimized(&Filter::new(Pred::and([Pred::Guard(n), rest]))).unwrap();
            prog.iter().filter(|i| **i == stmt(CbpfOp::LdAbsB, n - 1)).count()
        };
        let at = |k: u32, size| Pred::eq(Expr::load_at(k, size), 6);
        // Every accepting path loads byte 23 (or further): the guard goes.
        assert_eq!(guards(24, at(23, Size::Byte)), 1);
        assert_eq!(guards(24, at(22, Size::Half)), 0);
        // Paths to the reject do not count.
        let or_reject = Pred::or([at(30, Size::Word), at(0, Size::Byte)]);
        assert_eq!(guards(24, Pred::and([or_reject, at(40, Size::Byte)])), 0);
        // One accepting path loads less far: the guard stays.
        assert_eq!(guards(24, Pred::or([at(0, Size::Byte), at(23, Size::Byte)])), 2);
        assert_eq!(guards(24, at(21, Size::Half)), 1);
        // Behind 4*([14]&0xf) (>= 0), `ldb [x + 29]` reads byte 29 at least; not behind `tax`.
        let tcp = || Pred::eq(Expr::load(header_length(14).plus(29), Size::Byte), 2);
        assert_eq!(guards(30, tcp()), 0);
        assert_eq!(guards(31, tcp()), 1);
        let computed = Expr::load(Expr::load_at(0, Size::Byte).and_mask(0x3f).plus(29), Size::Byte);
        assert_eq!(guards(30, Pred::eq(computed, 2)), 1);
    }

    #[test]
    fn a_compare_that_asks_only_for_a_set_bit_is_a_jset() {
        let flags = || Expr::load_at(13, Size::Byte);
        let masked = |m| flags().and_mask(m);
        let laid_out = |pred: Pred| {
            format_listing(&emit_unoptimized(&Filter::new(pred)).unwrap())
                .lines()
                .map(|l| {
                    l.get(6..).unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ")
                })
                .collect::<Vec<_>>()
        };
        // jt 2 goes to the accept, jt 3 to the reject.
        let set = ["ldb [13]", "jset #0x2 jt 2 jf 3", "ret #262144", "ret #0"];
        let clear = ["ldb [13]", "jset #0x2 jt 3 jf 2", "ret #262144", "ret #0"];
        let cmp = |op, lhs, k| Pred::cmp(op, lhs, Expr::Const(k));
        assert_eq!(laid_out(cmp(CmpOp::Ne, masked(2), 0)), set);
        assert_eq!(laid_out(cmp(CmpOp::Gt, masked(2), 0)), set);
        assert_eq!(laid_out(cmp(CmpOp::Eq, masked(2), 2)), set);
        assert_eq!(laid_out(cmp(CmpOp::Eq, masked(2), 0)), clear);
        assert_eq!(laid_out(cmp(CmpOp::Le, masked(2), 0)), clear);
        assert_eq!(laid_out(cmp(CmpOp::Ne, masked(2), 2)), clear);
        assert_eq!(laid_out(Pred::not(cmp(CmpOp::Ne, masked(2), 0))), clear);
        // The mask on the left, the constant first: mirrored as the and would be.
        let left = Expr::binary(BinOp::And, Expr::Const(2), flags());
        assert_eq!(laid_out(Pred::cmp(CmpOp::Lt, Expr::Const(0), left)), set);
        // Compares that ask more than a bit: the and and the compare.
        let and = |m: u32, test: &str| {
            vec![
                "ldb [13]".to_string(),
                format!("and #{m:#x}"),
                test.to_string(),
                "ret #262144".to_string(),
                "ret #0".to_string(),
            ]
        };
        let two_bits = cmp(CmpOp::Eq, masked(0x12), 0x12);
        assert_eq!(laid_out(two_bits), and(0x12, "jeq #0x12 jt 3 jf 4"));
        assert_eq!(laid_out(cmp(CmpOp::Eq, masked(2), 1)), and(2, "jeq #0x1 jt 3 jf 4"));
        assert_eq!(laid_out(cmp(CmpOp::Ge, masked(2), 1)), and(2, "jge #0x1 jt 3 jf 4"));
        // The and's value used otherwise: stored, searched, computed with, compared to X.
        let and_count = |pred: Pred| {
            let prog = emit_unoptimized(&Filter::new(pred)).unwrap();
            (count(&prog, CbpfOp::AndK), count(&prog, CbpfOp::JsetK))
        };
        assert_eq!(and_count(Pred::Store { slot: 1, value: masked(2) }), (1, 0));
        let set = crate::ValueSet::from_ranges([(0, 0), (5, 9)]);
        assert_eq!(and_count(Pred::In { value: masked(2), set }), (1, 0));
        assert_eq!(and_count(cmp(CmpOp::Ne, masked(2).plus(1), 0)), (1, 0));
        assert_eq!(and_count(Pred::cmp(CmpOp::Ne, masked(2), Expr::WireLen)), (1, 0));
        assert_eq!(and_count(cmp(CmpOp::Set, masked(6), 2)), (1, 1));
    }

    #[test]
    fn a_goto_to_the_next_label_is_left_out_only_when_no_other_jump_lands_there() {
        let byte = |k| Pred::eq(Expr::load_at(k, Size::Byte), 1);
        // The guard's goto to the test after it, its only jump: no label, no goto.
        let mut e = Emitter::new(0, BitTests::Jset);
        let (t, f) = (e.label(), e.label());
        e.pred(&Pred::and([Pred::Guard(4), byte(3)]), t, f).unwrap();
        let jumps = e.flow.items().iter().filter(|i| !matches!(i, Item::Stmt(_))).count();
        assert_eq!(jumps, 1, "{:?}", e.flow.items());
        // With another jump to the accept, the guard's goto stays, and simplify makes it a
        // copy of the `ret` as it always did (tighten's merge_tails shares them later).
        let or_guard = Filter::new(Pred::Or(vec![byte(0), Pred::Guard(4)]));
        let prog = emit_unoptimized(&or_guard).unwrap();
        let accepts = prog.iter().filter(|i| **i == stmt(CbpfOp::RetK, or_guard.accept)).count();
        assert_eq!(accepts, 2, "{}", format_listing(&prog));
        // A goto on which a label lands stays too: simplify threads through it.
        let or_true = Filter::new(Pred::Or(vec![byte(0), Pred::Const(true)]));
        let prog = emit_unoptimized(&or_true).unwrap();
        assert_eq!(prog, [stmt(CbpfOp::LdAbsB, 0), stmt(CbpfOp::RetK, or_true.accept)]);
    }

    #[test]
    fn division_by_a_constant_zero_rejects() {
        let div = Expr::binary(BinOp::Div, Expr::load_at(0, Size::Byte), Expr::Const(0));
        assert_eq!(listing(Pred::not(Pred::eq(div, 1))), "(000) ret      #0\n");
    }

    #[test]
    fn far_targets_get_trampolines() {
        // 300 tests of distinct bytes, any of which rejects: the early ones reach the
        // final `ret #0` through a copy placed next to them.
        let parts = (0..300).map(|i| Pred::eq(Expr::load_at(i, Size::Byte), i & 0xff));
        let prog = emit(&Filter::new(Pred::and(parts))).unwrap();
        assert!(prog.len() > 600);
        assert!(prog.iter().filter(|i| i.op == CbpfOp::RetK && i.k == 0).count() > 1);
    }

    #[test]
    fn unwritten_scratch_reads_start_at_zero() {
        let filter = Filter::new(Pred::eq(Expr::Scratch(3), 0));
        let prog = emit_unoptimized(&filter).unwrap();
        assert_eq!(&prog[..2], &[stmt(CbpfOp::LdImm, 0), stmt(CbpfOp::St, 3)]);
        // Tightened, the cell is known to hold 0 where it is read: the test is decided.
        assert_eq!(emit(&filter).unwrap(), vec![stmt(CbpfOp::RetK, filter.accept)]);
    }
}
