//! Filter IR -> one Cranelift function `(packet, captured length, wire length) -> 0 | 1`
//! (a byte, read as a `bool`).
//!
//! Predicates compile to control flow against a "true" and a "false" block, so `and`, `or`
//! and `not` cost no instructions of their own; every abort (out-of-bounds load, division
//! by zero, a scratch slot that does not exist) branches to one cold block that returns 0,
//! whatever `not`s surround it. Expressions compile to 32-bit SSA values; scratch slots are
//! Cranelift variables that start at 0, so they live in registers and need no zeroing.
//!
//! **Bounds.** The one memory-safety invariant: a packet load of `size` bytes at offset `k`
//! runs only on paths where `k + size <= captured length` was checked. The lowering tracks
//! the largest captured length proven on the current path (`proven`): a check or a
//! [`Pred::Guard`] raises it, and a block starts with the smallest value proven on the
//! edges into it. A load whose end is already proven needs no check. Blocks are entered
//! only after every edge into them was emitted (the predicate tree is lowered in order),
//! and the lowering refuses to compile if that ever fails to hold, rather than trust a
//! stale bound. Loads at a variable offset (`base + k`, a transport header's fields behind
//! the IPv4 header length) are tracked the same way per base expression (`proven_at`): a
//! check of `base + end <= captured length` covers the later loads of that base that end
//! no further on the path, so a dispatch's clauses that read the same ports check them
//! once. Within a predicate every expression is evaluated (there is no
//! short-circuit inside an expression, and an abort rejects the packet whichever load
//! causes it), so all of its loads at constant offsets are covered by one check up front.

use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, Block, ConstantData, Endianness, Function, InstBuilder, InstructionData, MemFlags,
    Opcode, Value,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use weir_filter::emit::bounds;
use weir_filter::{
    BinOp, Chain, ChainOutcome, ChainStep, CmpOp, Expr, Pred, Size, CHAIN_HOP_BUDGET, SCRATCH_SLOTS,
};

use super::set::SetTables;
use super::CompileError;

/// How deeply predicates and expressions may nest: the lowering recurses, and this keeps
/// its stack use bounded (within a 2 MiB thread stack in a debug build). pflang's parser
/// refuses expressions whose filter could be deeper than its own limit (1,000 levels) plus
/// what the optimizer may add, so every filter it accepts compiles.
pub(super) const MAX_DEPTH: u32 = 1_100;

/// What one generated function computes: a whole predicate, or a junction of some of the
/// parts of one (a piece of a filter split over several functions, see `super::split`).
#[derive(Clone, Copy)]
pub(super) enum Root<'p> {
    Pred(&'p Pred),
    /// `and` (true) or `or` (false) of these parts.
    Junction(&'p [Pred], bool),
}

/// Lowers `root` into `func` (whose signature is already set): it returns 1 when `root`
/// holds, 0 when not, and `abort_value` when it aborts (0 for a whole filter, where an
/// abort rejects). The tables of large sets go to `tables`, which the compiled code then
/// points into.
///
/// With `results` not empty the function takes a fourth parameter, a pointer to
/// `results.len()` 32-bit words, and when `root` holds it writes there the final values of
/// those scratch slots, in that order (pfmatch's handler index and arguments); on false or
/// an abort that rejects it writes 0 to the first of them and nothing else
/// ([`Lowering::write_no_match`]). `reads` narrows that (see `super::compile_results_read`): on a
/// path where the first slot's final value is a constant `v` with `reads[v]` given, only
/// the first `1 + reads[v]` slots are written; where it is one of several constants chosen
/// by data ([`Lowering::choose`]), the first `1 + max reads[v]` over them (and where that
/// choice ends the predicate, a slot past what the chosen handler reads may hold another
/// arm's value).
///
/// `hot` (with results only) lowers the hot half of a split function (see
/// `super::compile_results`): every bounds check that fails, and every [`Chain`] walk,
/// returns [`BAIL`] (having written nothing) instead of going on, so the code for short
/// packets and for protocol chains is not in the function at all; the caller then runs
/// the whole predicate's function, which answers from the start.
pub(super) fn lower(
    func: &mut Function,
    root: Root<'_>,
    abort_value: i64,
    tables: &mut SetTables,
    results: &[u8],
    reads: &[u8],
    hot: bool,
) -> Result<(), CompileError> {
    let mut context = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(func, &mut context);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let (packet, caplen, wire_len, out) = match (b.block_params(entry), results.is_empty()) {
        (&[packet, caplen, wire_len], true) => (packet, caplen, wire_len, None),
        (&[packet, caplen, wire_len, out], false) => (packet, caplen, wire_len, Some(out)),
        _ => return Err(CompileError::Internal("entry block parameters")),
    };
    if results.iter().any(|&s| s >= SCRATCH_SLOTS) {
        return Err(CompileError::Internal("a result slot that does not exist"));
    }
    let zero = b.ins().iconst(types::I32, 0);
    for slot in 0..SCRATCH_SLOTS {
        b.declare_var(scratch_var(slot), types::I32);
        b.def_var(scratch_var(slot), zero);
    }
    let accept = b.create_block();
    let reject = b.create_block();
    let abort = b.create_block();
    b.set_cold_block(abort);
    let bail = (hot && !results.is_empty()).then(|| {
        let block = b.create_block();
        b.set_cold_block(block);
        block
    });

    let mut l = Lowering {
        b,
        packet,
        caplen,
        wire_len,
        abort,
        root_abort: abort,
        bail,
        accept,
        reject,
        returns_verdict: out.is_none(),
        out,
        accepts: Vec::new(),
        proven: 0,
        entry_proven: SecondaryMap::new(),
        proven_at: Vec::new(),
        entry_proven_at: SecondaryMap::new(),
        reach: Reach::default(),
        entered: SecondaryMap::new(),
        broken: false,
        tables,
        next_var: u32::from(SCRATCH_SLOTS),
        zero,
        stored: 0,
        results: results.to_vec(),
        reads: reads.to_vec(),
    };
    if let (Some(_), Root::Pred(p)) = (bail, root) {
        l.entry_check(p);
    }
    match root {
        Root::Pred(p) => l.pred(p, accept, reject, 0)?,
        Root::Junction(parts, all) => l.sequence(parts, accept, reject, 0, all)?,
    }
    // With results, each edge into `accept` has a block of its own (`Lowering::accepts`)
    // that writes the slots' values on that path and returns: see `accept_edge`. Every
    // edge into them is emitted by now, so they are sealed before their variables are read.
    for block in std::mem::take(&mut l.accepts) {
        l.b.seal_block(block);
        l.b.switch_to_block(block);
        l.write_results(results, reads);
        let v = l.b.ins().iconst(types::I8, 1);
        l.b.ins().return_(&[v]);
    }
    if let Some(block) = bail {
        l.b.switch_to_block(block);
        let v = l.b.ins().iconst(types::I8, BAIL);
        l.b.ins().return_(&[v]);
    }
    for (block, verdict) in [(accept, 1), (reject, 0), (abort, abort_value)] {
        l.switch_to(block);
        if block == accept {
            l.write_results(results, reads);
        } else if verdict == 0 {
            l.write_no_match();
        }
        // Only 0, 1 and `abort_value` are ever returned (here and in `branch`): a whole
        // filter's caller reads the byte as a bool.
        let v = l.b.ins().iconst(types::I8, verdict);
        l.b.ins().return_(&[v]);
    }
    if l.broken {
        return Err(CompileError::Internal("a block was entered before every edge into it"));
    }
    l.b.seal_all_blocks();
    l.b.finalize();
    Ok(())
}

/// `v`'s value when it is a constant (its low 32 bits: the slots are 32 bits wide).
fn constant(dfg: &cranelift_codegen::ir::DataFlowGraph, v: Value) -> Option<u32> {
    match dfg.insts[dfg.value_def(v).inst()?] {
        InstructionData::UnaryImm { opcode: Opcode::Iconst, imm } => Some(imm.bits() as u32),
        _ => None,
    }
}

/// Pushes to `out` the constants `v` can be: true when `v` is a constant or a `select`
/// (nested) of constants, false when it may be anything else.
fn constants(dfg: &cranelift_codegen::ir::DataFlowGraph, v: Value, out: &mut Vec<u32>) -> bool {
    let Some(inst) = dfg.value_def(v).inst() else { return false };
    match dfg.insts[inst] {
        // The slot is 32 bits wide: its constant's low 32 bits are its value.
        InstructionData::UnaryImm { opcode: Opcode::Iconst, imm } => {
            out.push(imm.bits() as u32);
            true
        }
        InstructionData::Ternary { opcode: Opcode::Select, args } => {
            constants(dfg, args[1], out) && constants(dfg, args[2], out)
        }
        _ => false,
    }
}

/// The most arms one [`Lowering::choose`] takes (a longer run is split), and the bits that
/// flag arm 0 in its flags word (arm `i`: shifted by `i`; see [`Lowering::test_flag`]).
const MAX_ARMS: usize = 16;
const ARM_FLAGS: u32 = 0x0001_0001;

/// The most arms [`Lowering::port_lanes`] compares at once: two 16-bit lanes each, eight
/// lanes in a 128-bit vector.
const PORT_LANE_ARMS: usize = 4;

/// How many flag bits [`Lowering::port_lanes`] gives each arm (its two 16-bit lanes' four
/// bytes): arm i's are `0xf << (PORT_LANE_BITS * i)`.
const PORT_LANE_BITS: u32 = 4;

/// What the hot half of a split results function returns when it leaves the packet to the
/// whole function (see [`lower`]'s `hot`): neither 0 nor 1.
pub(super) const BAIL: i64 = 2;

fn scratch_var(slot: u8) -> Variable {
    Variable::from_u32(u32::from(slot))
}

/// Packet loads: never trap (checked first), unaligned, and the packet does not change
/// while the filter runs.
fn packet_flags() -> MemFlags {
    MemFlags::new().with_notrap().with_readonly()
}

pub(super) struct Lowering<'a, 'f> {
    pub(super) b: FunctionBuilder<'f>,
    packet: Value,
    caplen: Value,
    wire_len: Value,
    /// Where an abort goes: `root_abort`, or inside a [`Pred::Try`] its false target.
    pub(super) abort: Block,
    /// Returns `abort_value`; cold.
    root_abort: Block,
    /// In the hot half of a split function, returns [`BAIL`]: where failed bounds checks
    /// and protocol chains go (cold).
    bail: Option<Block>,
    /// Return 1 and 0: a test that decides the verdict returns its result instead of
    /// branching to them ([`Lowering::branch`]), unless results are written on accept.
    accept: Block,
    reject: Block,
    returns_verdict: bool,
    /// Where the result slots go, when the function reports them.
    out: Option<Value>,
    /// The blocks that write the results and return 1, one per edge into `accept`.
    accepts: Vec<Block>,
    /// Captured bytes proven present on the path being emitted.
    proven: u64,
    /// The smallest `proven` over the edges into each block emitted so far.
    entry_proven: SecondaryMap<Block, Option<u64>>,
    /// Variable offsets checked on the path being emitted: `(base, end)` when
    /// `base + end <= captured length` was checked (at most [`MAX_PROVEN_AT`] bases; bases
    /// that read no scratch slot, so every evaluation on one packet gives one value).
    proven_at: Vec<(Expr, u64)>,
    /// The bases proven on every edge into each block emitted so far, each with the
    /// smallest end over those edges.
    entry_proven_at: SecondaryMap<Block, Option<Vec<(Expr, u64)>>>,
    /// In a hot half, how far the innermost [`Pred::Try`] being emitted reads: a bounds
    /// check there checks that far at once (a packet it fails goes to the whole function,
    /// which answers as if nothing had been checked), so a clause's or a header branch's
    /// loads cost one check per base (the IPv4 addresses' two, the ports' two, one each).
    reach: Reach,
    /// Blocks already switched to; an edge into one of them would make its bound stale.
    entered: SecondaryMap<Block, bool>,
    broken: bool,
    pub(super) tables: &'a mut SetTables,
    /// The next free Cranelift variable (the scratch slots take the first ones).
    next_var: u32,
    /// The entry's 0 that every scratch slot starts with.
    zero: Value,
    /// Bit s: slot s has been stored in some block emitted so far. A block is entered only
    /// after every edge into it (`broken`), so a slot without its bit holds `zero` there.
    stored: u32,
    /// [`lower`]'s `results` and `reads`: which slots the caller reads after a match.
    results: Vec<u8>,
    reads: Vec<u8>,
}

impl Lowering<'_, '_> {
    /// The block an edge to `target` goes to. When the function reports results, an edge
    /// into `accept` gets a block of its own that writes the slots and returns, instead of
    /// all of them meeting in `accept`: there each slot would be a block parameter that
    /// every path into it must fill (the slots' variables live, in registers or spilled,
    /// across the whole function), while on one path they are mostly constants or values
    /// just computed. Those blocks hold no loads, so their bound needs no tracking.
    fn accept_edge(&mut self, target: Block) -> Block {
        if target != self.accept || self.out.is_none() {
            return target;
        }
        let block = self.b.create_block();
        self.accepts.push(block);
        block
    }

    /// Writes the reported slots' values on the current path (see [`lower`]): all of them,
    /// or, when the first slot is a constant here that `reads` covers, the ones the caller
    /// reads for it (pfmatch's handler and that handler's own arguments: the other
    /// argument slots' stores were a third of a dispatch's result writes).
    fn write_results(&mut self, results: &[u8], reads: &[u8]) {
        let Some(out) = self.out else { return };
        let mut count = results.len();
        if let Some(&first) = results.first() {
            let v = self.b.use_var(scratch_var(first));
            let mut candidates = Vec::new();
            if constants(&self.b.func.dfg, v, &mut candidates) {
                // The caller reads, for the value the first slot holds, at most what it
                // reads for any candidate ([`Lowering::choose`]'s selects of handlers).
                let each: Option<Vec<u8>> =
                    candidates.iter().map(|&c| reads.get(c as usize).copied()).collect();
                if let Some(n) = each.and_then(|each| each.into_iter().max()) {
                    count = count.min(1 + usize::from(n));
                }
            }
        }
        for (i, &slot) in results.iter().enumerate().take(count) {
            let v = self.b.use_var(scratch_var(slot));
            let at = i32::try_from(4 * i).unwrap_or(i32::MAX);
            self.b.ins().store(MemFlags::trusted(), v, out, at);
        }
    }

    /// On no match (a reject, or an abort that rejects) the first reported slot reads 0
    /// and the others are left as they were: a caller whose first slot is never 0 on a
    /// match (pfmatch's handler index plus one) reads the answer from the slot alone, with
    /// no branch on the verdict (the 8% of the benchmark's packets that no clause takes
    /// made that branch a misprediction; bench/records/2026-12-01-pfmatch-22.txt).
    fn write_no_match(&mut self) {
        if let (Some(out), false) = (self.out, self.results.is_empty()) {
            self.b.ins().store(MemFlags::trusted(), self.zero, out, 0);
        }
    }

    fn record(&mut self, target: Block) {
        if target == self.root_abort || Some(target) == self.bail {
            return;
        }
        if self.entered[target] {
            self.broken = true;
        }
        let slot = &mut self.entry_proven[target];
        *slot = Some(slot.map_or(self.proven, |p| p.min(self.proven)));
        let here = &self.proven_at;
        let slot = &mut self.entry_proven_at[target];
        *slot = Some(match slot.take() {
            None => here.clone(),
            Some(before) => before
                .into_iter()
                .filter_map(|(base, end)| {
                    let now = here.iter().find(|(b, _)| *b == base)?.1;
                    Some((base, end.min(now)))
                })
                .collect(),
        });
    }

    pub(super) fn jump(&mut self, target: Block) {
        let target = self.accept_edge(target);
        self.record(target);
        self.b.ins().jump(target, &[]);
    }

    /// To `t` when `cond` (a 0/1 byte, as `icmp` gives) is nonzero, else to `f`.
    pub(super) fn branch(&mut self, cond: Value, t: Block, f: Block) {
        if t == f {
            return self.jump(t);
        }
        // A test that decides the verdict is the verdict: returned as a value, it costs
        // no branch, and so no misprediction on traffic that mixes both answers.
        if self.returns_verdict && (t, f) == (self.accept, self.reject) {
            self.b.ins().return_(&[cond]);
            return;
        }
        if self.returns_verdict && (t, f) == (self.reject, self.accept) {
            let inverse = self.b.ins().bxor_imm(cond, 1);
            self.b.ins().return_(&[inverse]);
            return;
        }
        let (t, f) = (self.accept_edge(t), self.accept_edge(f));
        self.record(t);
        self.record(f);
        self.b.ins().brif(cond, t, &[], f, &[]);
    }

    /// Starts emitting into `block`, with the bound its incoming edges prove (any, for a
    /// block nothing jumps to: its code never runs).
    pub(super) fn switch_to(&mut self, block: Block) {
        self.entered[block] = true;
        self.b.switch_to_block(block);
        self.proven = self.entry_proven[block].unwrap_or(u64::MAX);
        // A block nothing reaches: proving nothing is as sound as anything.
        self.proven_at = self.entry_proven_at[block].take().unwrap_or_default();
    }

    pub(super) fn new_block(&mut self) -> Block {
        self.b.create_block()
    }

    /// A new 32-bit variable.
    pub(super) fn fresh_var(&mut self) -> Variable {
        let var = Variable::from_u32(self.next_var);
        self.next_var += 1;
        self.b.declare_var(var, types::I32);
        var
    }

    /// Aborts here; emitting goes on in a block nothing reaches.
    fn abort_here(&mut self) {
        self.jump(self.abort);
        let dead = self.new_block();
        self.switch_to(dead);
    }

    /// Aborts when `cond` is nonzero, else goes on.
    pub(super) fn abort_if(&mut self, cond: Value) {
        let cont = self.new_block();
        self.branch(cond, self.abort, cont);
        self.switch_to(cont);
    }

    /// A bounds check failed when `cond` is nonzero: abort, or in a hot half leave the
    /// packet to the whole function; else goes on.
    fn short_if(&mut self, cond: Value) {
        let cont = self.new_block();
        self.branch(cond, self.bail.unwrap_or(self.abort), cont);
        self.switch_to(cont);
    }

    /// Ensures `end` bytes are captured on the path from here on (one compare, unless the
    /// path already proved it).
    fn need(&mut self, end: u64) {
        if end <= self.proven {
            return;
        }
        let end = match self.bail {
            Some(_) if self.reach.constant <= HOT_REACH => end.max(self.reach.constant),
            _ => end,
        };
        let short = self.b.ins().icmp_imm(IntCC::UnsignedLessThan, self.caplen, end as i64);
        self.short_if(short);
        self.proven = end;
    }

    /// A hot half's first test: a packet shorter than the predicate's farthest load at a
    /// constant offset (or guard), up to [`HOT_ENTRY`], goes to the whole function at once,
    /// before any work; then no load or guard within that length is checked again on any
    /// path (the IPv4 path's checks at 14, 24 and 34 bytes, the IPv6 path's at 14, 21, 55
    /// and 58, are this one compare). Such a packet pays one compare more than before and
    /// the whole function, which it partly paid anyway (a shorter check on its path failed
    /// sooner or later); the whole function's answer is the one the hot half would give.
    fn entry_check(&mut self, p: &Pred) {
        let mut reach = Reach::default();
        reach.pred(p, 0);
        let end = reach.constant.max(reach.guard).min(HOT_ENTRY);
        if end == 0 {
            return;
        }
        let short = self.b.ins().icmp_imm(IntCC::UnsignedLessThan, self.caplen, end as i64);
        self.short_if(short);
        self.proven = end;
    }

    /// Checks up front the loads at constant offsets that evaluating all of `exprs` makes.
    pub(super) fn need_loads(&mut self, exprs: &[&Expr]) {
        if let Some(end) = exprs.iter().filter_map(|e| bounds::constant_load_end(e)).max() {
            self.need(end);
        }
    }

    pub(super) fn pred(
        &mut self,
        p: &Pred,
        t: Block,
        f: Block,
        depth: u32,
    ) -> Result<(), CompileError> {
        let depth = deeper(depth)?;
        match p {
            Pred::Const(holds) => self.jump(if *holds { t } else { f }),
            Pred::Guard(n) => {
                self.need(u64::from(*n));
                self.jump(t);
            }
            Pred::Cmp { op, lhs, rhs } => {
                self.need_loads(&[lhs, rhs]);
                let cond = self.compare(*op, lhs, rhs, depth)?;
                self.branch(cond, t, f);
            }
            Pred::In { value, set } => {
                self.need_loads(&[value]);
                let v = self.expr(value, depth)?;
                self.set_test(v, set.ranges(), t, f)?;
            }
            Pred::Store { slot, value } => {
                if *slot >= SCRATCH_SLOTS {
                    // The reference evaluator aborts on a slot that does not exist.
                    self.jump(self.abort);
                } else {
                    self.need_loads(&[value]);
                    let v = self.expr(value, depth)?;
                    self.store_slot(*slot, v);
                    self.jump(t);
                }
            }
            Pred::Not(inner) => self.pred(inner, f, t, depth)?,
            Pred::And(parts) => self.sequence(parts, t, f, depth, true)?,
            Pred::Or(parts) => match adjacent_halves(parts).filter(|_| self.bail.is_some()) {
                Some((offset, k)) => self.either_half(offset, k, t, f, depth)?,
                None if self.bail.is_some() && self.out.is_some() => {
                    self.or_choosing(parts, t, f, depth)?
                }
                None => self.sequence(parts, t, f, depth, false)?,
            },
            Pred::Chain(chain) => self.walk(chain, t, f, depth)?,
            Pred::Pairs(pairs) => self.pairs(pairs, t, f, depth)?,
            // An abort inside is the Try's false: the inner part's aborts branch to `f`,
            // each edge recording the length proven where it leaves (less than the path
            // inside may prove later), so `f`'s bound is the smallest over them all. The
            // scratch variables carry whatever was stored before the abort, as the
            // evaluator keeps them.
            Pred::Try(inner) => {
                let outer = std::mem::replace(&mut self.abort, f);
                let scope = match self.bail {
                    Some(_) => {
                        let mut reach = Reach::default();
                        reach.pred(inner, 0);
                        Some(std::mem::replace(&mut self.reach, reach))
                    }
                    None => None,
                };
                let lowered = self.pred(inner, t, f, depth);
                self.abort = outer;
                if let Some(scope) = scope {
                    self.reach = scope;
                }
                lowered?;
            }
        }
        Ok(())
    }

    /// A [`Chain`] walk: a loop whose head takes the next-header value, the offset and the
    /// hop count as block parameters. The jumps back to the head are the one kind of edge
    /// into an entered block: sound for `proven`, which the loop body only raises.
    fn walk(&mut self, chain: &Chain, t: Block, f: Block, depth: u32) -> Result<(), CompileError> {
        if let Some(bail) = self.bail {
            // A loop and its three variables: the register pressure the hot half avoids.
            self.b.ins().jump(bail, &[]);
            let dead = self.new_block();
            self.switch_to(dead);
            return Ok(());
        }
        self.need_loads(&[&chain.next, &chain.offset]);
        let a0 = self.expr(&chain.next, depth)?;
        let x0 = self.expr(&chain.offset, depth)?;
        let head = self.new_block();
        for _ in 0..3 {
            self.b.append_block_param(head, types::I32);
        }
        let zero = self.b.ins().iconst(types::I32, 0);
        self.record(head);
        self.b.ins().jump(head, &[a0.into(), x0.into(), zero.into()]);
        self.switch_to(head);
        let (a, x, hops) = match *self.b.block_params(head) {
            [a, x, hops] => (a, x, hops),
            _ => return Err(CompileError::Internal("loop head parameters")),
        };
        let (extension, ah) = (self.new_block(), self.new_block());
        let test = |l: &mut Self, k: u32, to: Block| {
            let next = l.new_block();
            let cond = l.b.ins().icmp_imm(IntCC::Equal, a, i64::from(k));
            l.branch(cond, to, next);
            l.switch_to(next);
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
        self.jump(f);
        for (block, step) in [(extension, ChainStep::Extension), (ah, ChainStep::Ah)] {
            self.switch_to(block);
            let spent = self.b.ins().icmp_imm(
                IntCC::UnsignedGreaterThanOrEqual,
                hops,
                i64::from(CHAIN_HOP_BUDGET),
            );
            self.abort_if(spent);
            // Both bytes at `base + x`, checked against the captured length in 64 bits.
            let at = self.b.ins().uextend(types::I64, x);
            let at = self.b.ins().iadd_imm(at, i64::from(chain.base));
            let end = self.b.ins().iadd_imm(at, 2);
            let short = self.b.ins().icmp(IntCC::UnsignedGreaterThan, end, self.caplen);
            self.abort_if(short);
            let address = self.b.ins().iadd(self.packet, at);
            let next = self.b.ins().uload8(types::I32, packet_flags(), address, 0);
            let length = self.b.ins().uload8(types::I32, packet_flags(), address, 1);
            let x2 = match step {
                ChainStep::Extension => {
                    let units = self.b.ins().iadd_imm(length, 1);
                    let bytes = self.b.ins().ishl_imm(units, 3);
                    self.b.ins().iadd(x, bytes)
                }
                ChainStep::Ah => {
                    let units = self.b.ins().iadd_imm(length, 2);
                    self.b.ins().ishl_imm(units, 2)
                }
            };
            let hops2 = self.b.ins().iadd_imm(hops, 1);
            self.b.ins().jump(head, &[next.into(), x2.into(), hops2.into()]);
            let dead = self.new_block();
            self.switch_to(dead);
        }
        Ok(())
    }

    /// `and` (`all`) or `or`: each part but the last decides the whole on one outcome
    /// and falls through to the next part on the other.
    pub(super) fn sequence(
        &mut self,
        parts: &[Pred],
        t: Block,
        f: Block,
        depth: u32,
        all: bool,
    ) -> Result<(), CompileError> {
        let Some((last, init)) = parts.split_last() else {
            self.jump(if all { t } else { f });
            return Ok(());
        };
        for part in init {
            let next = self.new_block();
            if all {
                self.pred(part, next, f, depth)?;
            } else {
                self.pred(part, t, next, depth)?;
            }
            self.switch_to(next);
        }
        self.pred(last, t, f, depth)
    }

    /// `or` in a hot half that reports results: each run of two or more parts that are
    /// [`choice_arm`]s (pfmatch's port clauses under one protocol) becomes one decision by
    /// data ([`Lowering::choose`]); the other parts branch as [`Lowering::sequence`] does.
    fn or_choosing(
        &mut self,
        parts: &[Pred],
        t: Block,
        f: Block,
        depth: u32,
    ) -> Result<(), CompileError> {
        let mut pieces: Vec<Result<Vec<Arm<'_>>, &Pred>> = Vec::new();
        for part in parts {
            match (choice_arm(part), pieces.last_mut()) {
                (Some(arm), Some(Ok(run))) if run.len() < MAX_ARMS => run.push(arm),
                (Some(arm), _) => pieces.push(Ok(vec![arm])),
                (None, _) => pieces.push(Err(part)),
            }
        }
        let last = pieces.len().saturating_sub(1);
        for (i, piece) in pieces.iter().enumerate() {
            let next = if i == last { f } else { self.new_block() };
            match piece {
                Ok(run) if run.len() >= 2 => self.choose(run, t, next, depth)?,
                Ok(run) => self.pred(run[0].whole, t, next, depth)?,
                Err(part) => self.pred(part, t, next, depth)?,
            }
            if i != last {
                self.switch_to(next);
            }
        }
        if pieces.is_empty() {
            self.jump(f);
        }
        Ok(())
    }

    /// `try(test1 and stores1) or try(test2 and stores2) or ...` ([`choice_arm`]s) with one
    /// branch, on "some test held", instead of one per arm: every test is computed, then
    /// where one held every arm's stored values, and each stored slot takes the first
    /// holding arm's value by `select` (an arm that does not store a slot keeps its value as
    /// it was). A dispatch's
    /// port clauses otherwise branch once per port, and traffic spread over the ports
    /// mispredicts those branches (bench/records/2026-12-01-pfmatch-16.txt, section 2).
    /// Exact: no test or value can abort, and a failed bounds check leaves the packet to
    /// the whole function (hot halves only), so the slots end as the arms in turn leave
    /// them; the first slot is then no constant on the path, so [`Lowering::write_results`]
    /// writes what any of the candidate values' readers read.
    fn choose(
        &mut self,
        arms: &[Arm<'_>],
        t: Block,
        f: Block,
        depth: u32,
    ) -> Result<(), CompileError> {
        // The bounds checks reach as far as any arm's loads (each arm is a Try).
        let mut reach = Reach::default();
        arms.iter().for_each(|arm| reach.pred(arm.whole, 0));
        let scope = std::mem::replace(&mut self.reach, reach);
        // One word of flags, arm i's bits `arm_bits[i]`: one value live across the tests
        // whatever their number (a value per arm spilled callee-saved registers).
        // `ordered`: every bit of arm i lies below every bit of a later arm (the port
        // lanes'), so the lowest set bit is the first holding arm's.
        let (any, arm_bits, ordered) = match self.port_lanes(arms, depth)? {
            Some((flags, bits)) => (flags, bits, true),
            None => {
                let mut any: Option<Value> = None;
                for (i, arm) in arms.iter().enumerate() {
                    let flag = self.test_flag(arm.test, i, depth)?;
                    any = Some(match any {
                        Some(a) => self.b.ins().bor(a, flag),
                        None => flag,
                    });
                }
                let any = any.ok_or(CompileError::Internal("a choice of no arms"))?;
                (any, (0..arms.len()).map(|i| ARM_FLAGS << i).collect(), false)
            }
        };
        let mut written: Vec<u8> = arms.iter().flat_map(|a| a.stores.iter().map(|s| s.0)).collect();
        written.sort_unstable();
        written.dedup();
        // A slot never stored yet is the entry's 0 as such (`pick` then needs no register
        // for it); the variable would be a block parameter until the blocks are sealed.
        let before: Vec<Value> = written
            .iter()
            .map(|&s| match self.stored & 1 << s {
                0 => self.zero,
                _ => self.b.use_var(scratch_var(s)),
            })
            .collect();
        let matched = self.new_block();
        // With results `branch` is a `brif`, which takes any nonzero word as true.
        self.branch(any, matched, f);
        self.switch_to(matched);
        // The stored values only where some arm held (fewer values live across the tests):
        // each arm's final value per slot it stores (a later store of an arm overrides);
        // equal expressions share one value, so equal values need no select.
        let mut computed: Vec<(&Expr, Value)> = Vec::new();
        let mut stored: Vec<Vec<(u8, Value)>> = Vec::with_capacity(arms.len());
        for arm in arms {
            let mut slots: Vec<(u8, Value)> = Vec::new();
            for &(slot, e) in &arm.stores {
                let v = match computed.iter().find(|(c, _)| *c == e) {
                    Some(&(_, v)) => v,
                    None => {
                        self.need_loads(&[e]);
                        let v = self.expr(e, depth)?;
                        computed.push((e, v));
                        v
                    }
                };
                match slots.iter_mut().find(|(s, _)| *s == slot) {
                    Some(entry) => entry.1 = v,
                    None => slots.push((slot, v)),
                }
            }
            stored.push(slots);
        }
        // With `ordered` flags, the first holding arm's bits alone (`x & -x`): each slot is
        // then the value most arms give, replaced by any other arm's where that arm's bits
        // are set (exactly one arm's are), rather than a chain from the last arm to the
        // first where each arm's test must also exclude the earlier arms' (a mask from two
        // flag groups: bench/records/2026-12-01-pfmatch-20.txt, section 7).
        let first = ordered.then(|| {
            let negated = self.b.ins().ineg(any);
            self.b.ins().band(any, negated)
        });
        // Where the choice ends the predicate (`t` is the accept), a result slot after the
        // first is read only when the first holding arm's handler (its constant in the
        // first slot) reads it (`reads`, see [`lower`]): an arm whose handler does not
        // leaves that slot's value to the other arms (http's M13 beside ssh and https: no
        // pick; bench/records/2026-12-01-pfmatch-21.txt).
        let handler_of: Vec<Option<u32>> = match self.results.first() {
            Some(&h) if t == self.accept && self.out.is_some() => stored
                .iter()
                .map(|arm| {
                    let (_, v) = arm.iter().find(|(s, _)| *s == h)?;
                    constant(&self.b.func.dfg, *v)
                })
                .collect(),
            _ => vec![None; arms.len()],
        };
        for (&slot, &old) in written.iter().zip(&before) {
            let value_of = |arm: &Vec<(u8, Value)>| {
                arm.iter().find(|(s, _)| *s == slot).map_or(old, |&(_, v)| v)
            };
            let values: Vec<Value> = stored.iter().map(value_of).collect();
            let position = self.results.iter().position(|&r| r == slot);
            let unread = |a: usize| match (position, handler_of[a]) {
                (Some(j), Some(h)) if j > 0 => {
                    self.reads.get(h as usize).is_some_and(|&r| j > usize::from(r))
                }
                _ => false,
            };
            // The values that matter, arm by arm (None: that arm's handler does not read it).
            let cared: Vec<Option<Value>> =
                values.iter().enumerate().map(|(a, &v)| (!unread(a)).then_some(v)).collect();
            if ordered {
                if let Some((start, step)) = self.progression(&values) {
                    // The first holding arm's index is the lowest set bit's arm, so its
                    // value is `start + step * index`: no pick per arm.
                    let low = self.b.ins().ctz(any);
                    let index = self.b.ins().ushr_imm(low, i64::from(PORT_LANE_BITS.ilog2()));
                    let scaled = self.b.ins().imul_imm(index, i64::from(step));
                    let v = self.b.ins().iadd_imm(scaled, i64::from(start));
                    self.store_slot(slot, v);
                    continue;
                }
            }
            let mattering: Vec<Value> = cared.iter().flatten().copied().collect();
            let mut v = match first {
                // The most frequent value (the fewest picks; the last arm's among equals).
                Some(_) => mattering
                    .iter()
                    .max_by_key(|&&x| mattering.iter().filter(|&&y| y == x).count())
                    .copied()
                    .unwrap_or(old),
                // Some arm held: the last arm's value is the one when no earlier arm held.
                None => mattering.last().copied().unwrap_or(old),
            };
            let default = v;
            for (i, &here) in cared.iter().enumerate().rev() {
                let Some(here) = here else { continue };
                match first {
                    Some(first) if here != default => {
                        let held = self.b.ins().band_imm(first, i64::from(arm_bits[i]));
                        v = self.pick(held, here, v);
                    }
                    None if here != v => {
                        let held = self.b.ins().band_imm(any, i64::from(arm_bits[i]));
                        v = self.pick(held, here, v);
                    }
                    _ => {}
                }
            }
            self.store_slot(slot, v);
        }
        self.jump(t);
        self.reach = scope;
        Ok(())
    }

    /// [`Lowering::choose`]'s flags in one vector compare, for a run of 2 to
    /// [`PORT_LANE_ARMS`] arms that each test either half of one 32-bit word at the same
    /// offset (a dispatch's port clauses under one protocol: the source and destination
    /// ports): the word in each 32-bit lane, its 16-bit lanes `2i` and `2i + 1` compared
    /// with arm i's port (lanes past the last arm repeat its port, so they hold only with
    /// it), the lanes' bytes' top bits gathered: arm i holds exactly when a bit of
    /// `0xf << 4i` is set. Four vector instructions where each arm's
    /// [`Lowering::either_half_marks`] is seven scalar ones
    /// (bench/records/2026-12-01-pfmatch-19.txt). None for other runs.
    fn port_lanes(
        &mut self,
        arms: &[Arm<'_>],
        depth: u32,
    ) -> Result<Option<(Value, Vec<u32>)>, CompileError> {
        if !(2..=PORT_LANE_ARMS).contains(&arms.len()) {
            return Ok(None);
        }
        let mut offset: Option<&Expr> = None;
        let mut ports = Vec::with_capacity(arms.len());
        for arm in arms {
            let Pred::Or(parts) = arm.test else { return Ok(None) };
            let Some((at, k)) = adjacent_halves(parts) else { return Ok(None) };
            if offset.is_some_and(|first| first != at) {
                return Ok(None);
            }
            offset = Some(at);
            ports.push(k);
        }
        let Some(offset) = offset else { return Ok(None) };
        let word = self.load_raw(offset, Size::Word, depth)?;
        let words = self.b.ins().splat(types::I32X4, word);
        let little = MemFlags::new().with_endianness(Endianness::Little);
        let halves = self.b.ins().bitcast(types::I16X8, little, words);
        // The loads are raw (the packet's byte order): each port's bytes so, lane by lane.
        let mut bytes = Vec::with_capacity(16);
        for lane in 0..8 {
            let k = ports[(lane / 2).min(ports.len() - 1)];
            bytes.extend_from_slice(&(k as u16).swap_bytes().to_le_bytes());
        }
        let constant = self.b.func.dfg.constants.insert(ConstantData::from(bytes));
        let wanted = self.b.ins().vconst(types::I16X8, constant);
        let equal = self.b.ins().icmp(IntCC::Equal, halves, wanted);
        // The top bit of each byte (one `pmovmskb`): a 16-bit lane's own top bit would
        // need its lanes packed to bytes first and the duplicate half shifted away.
        let bytes = self.b.ins().bitcast(types::I8X16, little, equal);
        let flags = self.b.ins().vhigh_bits(types::I32, bytes);
        let arm_bits = (0..arms.len() as u32).map(|i| 0xf << (PORT_LANE_BITS * i)).collect();
        Ok(Some((flags, arm_bits)))
    }

    /// `(start, step)` when `values` are at least three constants, all different, each
    /// `step` (wrapping) more than the one before: a handler slot over port arms whose
    /// handlers are consecutive clauses, which [`Lowering::choose`] then computes from the
    /// first holding arm's index (bench/records/2026-12-01-pfmatch-21.txt). With two,
    /// one pick costs no more.
    fn progression(&self, values: &[Value]) -> Option<(u32, u32)> {
        let dfg = &self.b.func.dfg;
        let ks = values.iter().map(|&v| constant(dfg, v)).collect::<Option<Vec<u32>>>()?;
        let start = *ks.first()?;
        let step = ks.get(1)?.wrapping_sub(start);
        let stepped = ks.windows(2).all(|w| w[1].wrapping_sub(w[0]) == step);
        (ks.len() >= 3 && step != 0 && stepped).then_some((start, step))
    }

    /// `held != 0 ? here : other`. Where one side is the constant 0 (a slot's zero
    /// before the choice, most often), a mask instead of a select: the select's 0 would
    /// be one constant register live across all the arms' tests (the e-graph merges it
    /// with the zero materialized before them), which spilled a callee-saved register
    /// on every path of the hot function.
    fn pick(&mut self, held: Value, here: Value, other: Value) -> Value {
        if self.is_zero(other) {
            let mask = self.b.ins().bmask(types::I32, held);
            self.b.ins().band(here, mask)
        } else if self.is_zero(here) {
            let mask = self.b.ins().bmask(types::I32, held);
            self.b.ins().band_not(other, mask)
        } else {
            self.b.ins().select(held, here, other)
        }
    }

    fn store_slot(&mut self, slot: u8, v: Value) {
        self.stored |= 1 << slot;
        self.b.def_var(scratch_var(slot), v);
    }

    /// Whether `v` is an `iconst` of 0 (as built here, before the e-graph's rewrites).
    fn is_zero(&self, v: Value) -> bool {
        let dfg = &self.b.func.dfg;
        dfg.value_def(v).inst().is_some_and(|inst| {
            matches!(
                dfg.insts[inst],
                InstructionData::UnaryImm { opcode: Opcode::Iconst, imm } if imm.bits() == 0
            )
        })
    }

    /// Arm `i`'s test (of at most [`MAX_ARMS`]) as flags: a 32-bit value that is, where
    /// the test holds, nonzero and within `ARM_FLAGS << i`, else 0 (no branch).
    fn test_flag(&mut self, test: &Pred, i: usize, depth: u32) -> Result<Value, CompileError> {
        let i = i64::try_from(i).ok().filter(|&i| i < MAX_ARMS as i64);
        let i = i.ok_or(CompileError::Internal("too many arms in one choice"))?;
        match test {
            Pred::Cmp { op, lhs, rhs } => {
                self.need_loads(&[lhs, rhs]);
                let holds = self.compare(*op, lhs, rhs, depth)?;
                let bit = self.b.ins().uextend(types::I32, holds);
                Ok(self.b.ins().ishl_imm(bit, i))
            }
            Pred::Or(parts) => match adjacent_halves(parts) {
                Some((offset, k)) => {
                    // The marks are bits 15 and 31: moved to bits i and 16 + i.
                    let marks = self.either_half_marks(offset, k, depth)?;
                    Ok(self.b.ins().ushr_imm(marks, 15 - i))
                }
                None => Err(CompileError::Internal("a choice's test is not two halves")),
            },
            _ => Err(CompileError::Internal("a choice's test is not a comparison")),
        }
    }

    /// `pkt[o:2] == k or pkt[o+2:2] == k` (a port clause's source or destination) in a
    /// hot half: one 4-byte load and one branch instead of two. With `x` the word xor
    /// `k` in both halves, a half is zero exactly when that half equalled `k`, and
    /// `(x - 0x0001_0001) & !x & 0x8000_8000` is nonzero exactly when some half is zero
    /// (a borrow marks a half above a zero one only when a zero half exists). The second
    /// half is loaded even when the first matched, so only in a hot half, where a failed
    /// bounds check leaves the packet to the whole function.
    fn either_half(
        &mut self,
        offset: &Expr,
        k: u32,
        t: Block,
        f: Block,
        depth: u32,
    ) -> Result<(), CompileError> {
        let marks = self.either_half_marks(offset, k, depth)?;
        let hit = self.b.ins().icmp_imm(IntCC::NotEqual, marks, 0);
        self.branch(hit, t, f);
        Ok(())
    }

    /// [`Lowering::either_half`]'s test as a 32-bit value, nonzero when it holds.
    fn either_half_marks(
        &mut self,
        offset: &Expr,
        k: u32,
        depth: u32,
    ) -> Result<Value, CompileError> {
        let word = self.load_raw(offset, Size::Word, depth)?;
        // The loads are raw (the packet's byte order): compare with `k`'s bytes so.
        let half = u32::from((k as u16).swap_bytes());
        // 32-bit immediates, sign-extended as Cranelift keeps them for I32.
        let both = i64::from((half | half << 16) as i32);
        let x = self.b.ins().bxor_imm(word, both);
        let below = self.b.ins().iadd_imm(x, -0x0001_0001);
        let zeroes = self.b.ins().band_not(below, x);
        Ok(self.b.ins().band_imm(zeroes, i64::from(0x8000_8000_u32 as i32)))
    }

    fn compare(
        &mut self,
        op: CmpOp,
        lhs: &Expr,
        rhs: &Expr,
        depth: u32,
    ) -> Result<Value, CompileError> {
        if let Expr::Const(k) = rhs {
            if let Some(cond) = self.compare_raw(op, lhs, *k, depth)? {
                return Ok(cond);
            }
        }
        let a = self.expr(lhs, depth)?;
        let cc = match op {
            CmpOp::Eq => IntCC::Equal,
            CmpOp::Ne => IntCC::NotEqual,
            CmpOp::Gt => IntCC::UnsignedGreaterThan,
            CmpOp::Ge => IntCC::UnsignedGreaterThanOrEqual,
            CmpOp::Lt => IntCC::UnsignedLessThan,
            CmpOp::Le => IntCC::UnsignedLessThanOrEqual,
            CmpOp::Set => {
                let masked = match rhs {
                    Expr::Const(k) => self.b.ins().band_imm(a, i64::from(*k)),
                    _ => {
                        let b = self.expr(rhs, depth)?;
                        self.b.ins().band(a, b)
                    }
                };
                return Ok(self.b.ins().icmp_imm(IntCC::NotEqual, masked, 0));
            }
        };
        Ok(match rhs {
            Expr::Const(k) => self.b.ins().icmp_imm(cc, a, i64::from(*k)),
            _ => {
                let b = self.expr(rhs, depth)?;
                self.b.ins().icmp(cc, a, b)
            }
        })
    }

    pub(super) fn expr(&mut self, e: &Expr, depth: u32) -> Result<Value, CompileError> {
        let depth = deeper(depth)?;
        Ok(match e {
            Expr::Const(k) => self.b.ins().iconst(types::I32, i64::from(*k)),
            Expr::WireLen => self.wire_len,
            Expr::Scratch(slot) if *slot < SCRATCH_SLOTS => self.b.use_var(scratch_var(*slot)),
            Expr::Scratch(_) => {
                // The reference evaluator aborts on a slot that does not exist.
                self.abort_here();
                self.b.ins().iconst(types::I32, 0)
            }
            Expr::Load { offset, size } => self.load(offset, *size, depth)?,
            Expr::Neg(inner) => {
                let v = self.expr(inner, depth)?;
                self.b.ins().ineg(v)
            }
            Expr::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs, depth)?,
        })
    }

    /// A big-endian load, checked unless the path already proves it in bounds.
    fn load(&mut self, offset: &Expr, size: Size, depth: u32) -> Result<Value, CompileError> {
        let (address, disp) = self.checked_address(offset, size, depth)?;
        let flags = packet_flags();
        Ok(match size {
            Size::Byte => self.b.ins().uload8(types::I32, flags, address, disp),
            Size::Half => {
                let raw = self.b.ins().load(types::I16, flags, address, disp);
                let swapped = self.b.ins().bswap(raw);
                self.b.ins().uextend(types::I32, swapped)
            }
            Size::Word => {
                let raw = self.b.ins().load(types::I32, flags, address, disp);
                self.b.ins().bswap(raw)
            }
        })
    }

    /// A load in the packet's byte order (as a little-endian host reads it), zero-extended
    /// to 32 bits: for comparisons with a byte-swapped constant ([`Lowering::compare_raw`]).
    fn load_raw(&mut self, offset: &Expr, size: Size, depth: u32) -> Result<Value, CompileError> {
        let (address, disp) = self.checked_address(offset, size, depth)?;
        let flags = packet_flags();
        Ok(match size {
            Size::Byte => self.b.ins().uload8(types::I32, flags, address, disp),
            Size::Half => self.b.ins().uload16(types::I32, flags, address, disp),
            Size::Word => self.b.ins().load(types::I32, flags, address, disp),
        })
    }

    /// The address (a value and a displacement) of `size` bytes at `offset`, checked to lie
    /// inside the captured bytes unless the path already proves it.
    fn checked_address(
        &mut self,
        offset: &Expr,
        size: Size,
        depth: u32,
    ) -> Result<(Value, i32), CompileError> {
        let bytes = u64::from(size.bytes());
        let (base, displacement) = split_offset(offset);
        let mut address = self.packet;
        match base {
            None => self.need(u64::from(displacement).wrapping_add(bytes)),
            Some(base_expr) => {
                // base + displacement + size: at most 2^32 + 2^32 + 4, no wrap in 64 bits.
                let mut reach = u64::from(displacement) + bytes;
                if self.bail.is_some() {
                    let scope = self.reach.at.iter().find(|(b, _)| b == base_expr);
                    reach = reach.max(scope.map_or(0, |s| s.1).min(HOT_REACH));
                }
                let base = self.expr(base_expr, depth)?;
                let base = self.b.ins().uextend(types::I64, base);
                let known = self.proven_at.iter().find(|(b, _)| b == base_expr).map(|p| p.1);
                if known.is_none_or(|end| end < reach) {
                    let end = self.b.ins().iadd_imm(base, reach as i64);
                    let short = self.b.ins().icmp(IntCC::UnsignedGreaterThan, end, self.caplen);
                    self.short_if(short);
                    self.proven = self.proven.max(reach);
                    if !reads_scratch(base_expr) {
                        let at = &mut self.proven_at;
                        match at.iter().position(|(b, _)| b == base_expr) {
                            Some(i) => at[i].1 = reach,
                            None if at.len() < MAX_PROVEN_AT => at.push((base_expr.clone(), reach)),
                            None => {}
                        }
                    }
                }
                address = self.b.ins().iadd(address, base);
            }
        }
        let disp = match i32::try_from(displacement) {
            Ok(d) => d,
            Err(_) => {
                address = self.b.ins().iadd_imm(address, i64::from(displacement));
                0
            }
        };
        Ok((address, disp))
    }

    /// `(load & mask) == k`, `!= k`, or `load & k != 0` for a half-word or word load,
    /// computed on the bytes as they lie in the packet against byte-swapped constants: no
    /// byte swap at run time. `None` when the test does not have that shape.
    fn compare_raw(
        &mut self,
        op: CmpOp,
        lhs: &Expr,
        k: u32,
        depth: u32,
    ) -> Result<Option<Value>, CompileError> {
        let (offset, size, mask) = match lhs {
            Expr::Load { offset, size } => (offset, *size, u32::MAX),
            Expr::Binary { op: BinOp::And, lhs, rhs } => match (lhs.as_ref(), rhs.as_ref()) {
                (Expr::Load { offset, size }, Expr::Const(m))
                | (Expr::Const(m), Expr::Load { offset, size }) => (offset, *size, *m),
                _ => return Ok(None),
            },
            _ => return Ok(None),
        };
        let (width, swap): (u32, fn(u32) -> u32) = match size {
            Size::Byte => return Ok(None),
            Size::Half => (0xffff, |v| u32::from((v as u16).swap_bytes())),
            Size::Word => (u32::MAX, u32::swap_bytes),
        };
        let mask = mask & width;
        let (mask, k, cc) = match op {
            CmpOp::Eq | CmpOp::Ne if k & !mask == 0 => {
                (mask, k, if op == CmpOp::Eq { IntCC::Equal } else { IntCC::NotEqual })
            }
            CmpOp::Set => (mask & k, 0, IntCC::NotEqual),
            _ => return Ok(None),
        };
        let raw = self.load_raw(offset, size, depth)?;
        let tested =
            if mask == width { raw } else { self.b.ins().band_imm(raw, i64::from(swap(mask))) };
        Ok(Some(self.b.ins().icmp_imm(cc, tested, i64::from(swap(k)))))
    }

    fn binary(
        &mut self,
        op: BinOp,
        lhs: &Expr,
        rhs: &Expr,
        depth: u32,
    ) -> Result<Value, CompileError> {
        let a = self.expr(lhs, depth)?;
        let constant = match rhs {
            Expr::Const(k) => Some(*k),
            _ => None,
        };
        match (op, constant) {
            (BinOp::Div | BinOp::Mod, Some(0)) => {
                self.abort_here();
                return Ok(self.b.ins().iconst(types::I32, 0));
            }
            (BinOp::Shl | BinOp::Shr, Some(k)) if k >= 32 => {
                return Ok(self.b.ins().iconst(types::I32, 0));
            }
            (BinOp::Shl, Some(k)) => return Ok(self.b.ins().ishl_imm(a, i64::from(k))),
            (BinOp::Shr, Some(k)) => return Ok(self.b.ins().ushr_imm(a, i64::from(k))),
            _ => {}
        }
        let b = self.expr(rhs, depth)?;
        let ins = self.b.ins();
        Ok(match op {
            BinOp::Add => ins.iadd(a, b),
            BinOp::Sub => ins.isub(a, b),
            BinOp::Mul => ins.imul(a, b),
            BinOp::And => ins.band(a, b),
            BinOp::Or => ins.bor(a, b),
            BinOp::Xor => ins.bxor(a, b),
            BinOp::Div | BinOp::Mod => {
                if constant.is_none() {
                    let zero = ins.icmp_imm(IntCC::Equal, b, 0);
                    self.abort_if(zero);
                }
                if op == BinOp::Div {
                    self.b.ins().udiv(a, b)
                } else {
                    self.b.ins().urem(a, b)
                }
            }
            BinOp::Shl | BinOp::Shr => {
                // The machine masks the amount; the IR gives 0 from 32 on.
                let shifted = if op == BinOp::Shl { ins.ishl(a, b) } else { ins.ushr(a, b) };
                let in_range = self.b.ins().icmp_imm(IntCC::UnsignedLessThan, b, 32);
                let zero = self.b.ins().iconst(types::I32, 0);
                self.b.ins().select(in_range, shifted, zero)
            }
        })
    }
}

/// How far the loads of a predicate reach: the largest end at a constant offset, and per
/// variable base that reads no scratch slot (at most [`MAX_PROVEN_AT`]) the largest
/// displacement + size (see [`Lowering::reach`]). Chain walks are left out: a hot half
/// does not lower them.
#[derive(Default)]
struct Reach {
    constant: u64,
    /// The largest [`Pred::Guard`] (for [`Lowering::entry_check`] only: a Try's own checks
    /// reach as far as its loads, its guards check for themselves).
    guard: u64,
    at: Vec<(Expr, u64)>,
}

impl Reach {
    fn pred(&mut self, p: &Pred, depth: u32) {
        let Ok(depth) = deeper(depth) else { return };
        match p {
            Pred::Const(_) | Pred::Chain(_) => {}
            Pred::Guard(n) => self.guard = self.guard.max(u64::from(*n)),
            Pred::Cmp { lhs, rhs, .. } => {
                self.expr(lhs, depth);
                self.expr(rhs, depth);
            }
            Pred::In { value, .. } | Pred::Store { value, .. } => self.expr(value, depth),
            Pred::Not(q) | Pred::Try(q) => self.pred(q, depth),
            Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|q| self.pred(q, depth)),
            // A pair table's two walks load their fields under their guards.
            Pred::Pairs(pairs) => pairs.parts().for_each(|(guards, fields)| {
                guards.iter().for_each(|g| self.pred(g, depth));
                fields.iter().for_each(|f| self.expr(f, depth));
            }),
        }
    }

    fn expr(&mut self, e: &Expr, depth: u32) {
        let Ok(depth) = deeper(depth) else { return };
        match e {
            Expr::Const(_) | Expr::WireLen | Expr::Scratch(_) => {}
            Expr::Load { offset, size } => {
                let end = |d: u32| u64::from(d) + u64::from(size.bytes());
                match split_offset(offset) {
                    (None, d) => self.constant = self.constant.max(end(d)),
                    (Some(base), d) if !reads_scratch(base) => {
                        match self.at.iter().position(|(b, _)| b == base) {
                            Some(i) => self.at[i].1 = self.at[i].1.max(end(d)),
                            None if self.at.len() < MAX_PROVEN_AT => {
                                self.at.push((base.clone(), end(d)));
                            }
                            None => {}
                        }
                    }
                    (Some(_), _) => {}
                }
                self.expr(offset, depth);
            }
            Expr::Neg(inner) => self.expr(inner, depth),
            Expr::Binary { lhs, rhs, .. } => {
                self.expr(lhs, depth);
                self.expr(rhs, depth);
            }
        }
    }
}

/// The farthest a hot half's bounds check reaches past what the load it guards needs
/// ([`Lowering::reach`]): 64 bytes, a minimum Ethernet frame, from the packet's start or
/// a variable base. A scope reading farther checks as the whole function does, so that a
/// far load (`ip[1000]`) does not send every packet to the whole function.
const HOT_REACH: u64 = 64;

/// The farthest a hot half's entry check reaches ([`Lowering::entry_check`]): 60 bytes,
/// the shortest Ethernet frame a NIC delivers (it pads shorter ones), so that on Ethernet
/// the entry check leaves no frame from the wire to the whole function.
const HOT_ENTRY: u64 = 60;

/// How many variable load bases a path remembers as checked (a few header lengths; the
/// bound keeps merging the sets at every block cheap on long filters).
const MAX_PROVEN_AT: usize = 8;

/// Whether `e` reads a scratch slot (then two evaluations on one packet may differ).
fn reads_scratch(e: &Expr) -> bool {
    match e {
        Expr::Scratch(_) => true,
        Expr::Const(_) | Expr::WireLen => false,
        Expr::Load { offset, .. } => reads_scratch(offset),
        Expr::Neg(inner) => reads_scratch(inner),
        Expr::Binary { lhs, rhs, .. } => reads_scratch(lhs) || reads_scratch(rhs),
    }
}

fn deeper(depth: u32) -> Result<u32, CompileError> {
    if depth >= MAX_DEPTH {
        return Err(CompileError::TooDeep { limit: MAX_DEPTH });
    }
    Ok(depth.wrapping_add(1))
}

/// Whether evaluating `e` can abort only on bounds (no division, no scratch slot): in a hot
/// half, where a failed bounds check leaves the packet to the whole function, it can then
/// be evaluated on any path without changing an answer.
fn plain(e: &Expr) -> bool {
    match e {
        Expr::Const(_) | Expr::WireLen => true,
        Expr::Scratch(_) | Expr::Neg(_) => false,
        Expr::Load { offset, .. } => plain(offset),
        Expr::Binary { op, lhs, rhs } => {
            !matches!(op, BinOp::Div | BinOp::Mod) && plain(lhs) && plain(rhs)
        }
    }
}

/// One arm of a [`Lowering::choose`]: `try(test and slot := value ...)`, where the test is
/// a comparison or a port's either-half test and the values are stores to existing slots,
/// all [`plain`].
pub(super) struct Arm<'p> {
    /// The whole `try`, for its reach.
    whole: &'p Pred,
    test: &'p Pred,
    stores: Vec<(u8, &'p Expr)>,
}

fn choice_arm(p: &Pred) -> Option<Arm<'_>> {
    let Pred::Try(inner) = p else { return None };
    let Pred::And(parts) = inner.as_ref() else { return None };
    let (test, rest) = parts.split_first()?;
    let testable = match test {
        Pred::Cmp { lhs, rhs, .. } => plain(lhs) && plain(rhs),
        Pred::Or(halves) => adjacent_halves(halves).is_some(),
        _ => false,
    };
    if !testable || rest.is_empty() {
        return None;
    }
    let stores = rest
        .iter()
        .map(|q| match q {
            Pred::Store { slot, value } if *slot < SCRATCH_SLOTS && plain(value) => {
                Some((*slot, value))
            }
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Arm { whole: p, test, stores })
}

/// `pkt[o:2] == k or pkt[o+2:2] == k` (either order of the halves' compares is the same
/// test): the first half's offset and `k`, when `k` fits 16 bits and the offset can abort
/// only on bounds (no division, no scratch slot).
fn adjacent_halves(parts: &[Pred]) -> Option<(&Expr, u32)> {
    fn half(p: &Pred) -> Option<(&Expr, u32)> {
        match p {
            Pred::Cmp {
                op: CmpOp::Eq,
                lhs: Expr::Load { offset, size: Size::Half },
                rhs: Expr::Const(k),
            } if *k <= 0xffff && plain(offset) => Some((offset.as_ref(), *k)),
            _ => None,
        }
    }
    let [a, b] = parts else { return None };
    let ((oa, ka), (ob, kb)) = (half(a)?, half(b)?);
    let ((base_a, da), (base_b, db)) = (split_offset(oa), split_offset(ob));
    if ka != kb || base_a != base_b {
        return None;
    }
    match db.checked_sub(da) {
        Some(2) => Some((oa, ka)),
        _ if da.checked_sub(db) == Some(2) => Some((ob, ka)),
        _ => None,
    }
}

/// Splits a load offset into a variable base and a constant displacement whose sum never
/// wraps (the IR's offset arithmetic wraps, address arithmetic must not), so that the
/// displacement folds into the load instruction: `(4*(p[14]&15) + 14) + 2` is
/// `(4*(p[14]&15), 16)`. A constant offset has no base. The split is weir-filter's (the
/// emitters' own, `bounds::split_offset`), which keeps a constant offset as its base.
fn split_offset(offset: &Expr) -> (Option<&Expr>, u32) {
    let (base, displacement) = bounds::split_offset(offset);
    match base {
        Expr::Const(k) => match displacement.checked_add(*k) {
            Some(total) => (None, total),
            None => (Some(base), displacement),
        },
        _ => (Some(base), displacement),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hlen(k: u32) -> Expr {
        Expr::binary(BinOp::Shl, Expr::load_at(k, Size::Byte).and_mask(0xf), Expr::Const(2))
    }

    #[test]
    fn offsets_split_where_the_sum_cannot_wrap() {
        assert_eq!(split_offset(&Expr::Const(7)), (None, 7));
        let nested = Expr::binary(BinOp::Add, hlen(14).plus(14), Expr::Const(2));
        assert_eq!(split_offset(&nested), (Some(&hlen(14)), 16));
        let word = Expr::load_at(0, Size::Word).plus(4);
        assert_eq!(split_offset(&word), (Some(&word), 0));
        let wraps = Expr::binary(BinOp::Add, Expr::Const(u32::MAX), Expr::Const(2));
        assert_eq!(split_offset(&wraps), (Some(&wraps), 0));
    }
}
