//! The walk: path exploration with state pruning (see the crate docs), and the rules of
//! each instruction (ALU, jumps, memory, calls, exits). Helper calls are in `helpers`.

use std::collections::VecDeque;
use std::time::Instant;

use weir_isa::asm::disassemble_insn;
use weir_isa::ebpf::{Insn, Op, Operands};
use weir_program::abi::{kernel_helper, ContextLayout, FieldKind, HelperSig, KERNEL_HELPERS};
use weir_program::{function_target, jump_target, InsnFact, MapSpec, ProgType, Program, Region};

use crate::cfg;
use crate::domain::{AluOp, JmpCond, Scalar, Width};
use crate::state::{state_equal, state_subsumes, Byte, Frame, Kind, Reg, Slot, State};
use crate::{Facts, Options, Proof, Rejection, Rule, Stats};

/// Stack bytes per frame, and for all frames of a call chain together.
pub const STACK_SIZE: i64 = 512;
const STACK_BYTES: usize = STACK_SIZE as usize;
/// Call frames at most (the kernel's `MAX_CALL_FRAMES`).
pub const MAX_FRAMES: usize = 8;
/// States kept per instruction for pruning; past this, paths are explored without
/// storing (still sound, only slower).
const MAX_STATES_PER_PC: usize = 1024;
/// The largest packet offset (the kernel's `MAX_PACKET_OFF`).
const MAX_PACKET_OFF: u64 = 0xffff;
/// Largest offset a pointer may carry (the kernel's `BPF_MAX_VAR_OFF`).
const MAX_VAR_OFF: i64 = 1 << 29;
/// Branches pending at once (the kernel's `BPF_COMPLEXITY_LIMIT_JMP_SEQ`).
const MAX_PENDING: usize = 8192;
/// `bpf_loop`: the one helper that runs a callback.
pub(crate) const CALLBACK_HELPER: i64 = 181;

/// Instructions kept in a rejection's trace.
const TRACE_LEN: usize = 12;

pub(crate) type Result<T> = std::result::Result<T, Rejection>;

/// A stored state, for pruning. `branches` counts the paths still being explored below
/// it: 0 means every continuation from it was proven safe, so a state it covers may stop.
struct Node {
    state: State,
    /// The slot it was stored at.
    pc: usize,
    /// [`live_hash`] of `state`: equal states hash equal, so the infinite-loop check
    /// compares numbers first.
    hash: u64,
    parent: Option<usize>,
    branches: u32,
}

/// The hasher of [`live_hash`]: multiply and rotate per word (the "Fx" scheme). SipHash's
/// resistance to chosen collisions buys nothing for a hash only ever compared within one
/// verification (a collision costs one [`state_equal`]), and it was a tenth of the time of
/// the protochain walk (bench/records/2026-11-29-jit-2.txt).
#[derive(Default)]
struct QuickHasher(u64);

impl QuickHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for QuickHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            if let Some(head) = word.get_mut(..chunk.len()) {
                head.copy_from_slice(chunk);
            }
            self.add(u64::from_le_bytes(word));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }
    fn write_u16(&mut self, n: u16) {
        self.add(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A hash of what [`state_equal`] compares (the live registers, the stack, the references).
fn live_hash(state: &State, live: &[u16]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = QuickHasher::default();
    for (f, frame) in state.frames.iter().enumerate() {
        let mask = live.get(f).copied().unwrap_or(u16::MAX);
        frame.callsite.hash(&mut h);
        for (r, reg) in frame.regs.iter().enumerate() {
            if mask & (1 << r) != 0 {
                reg.hash(&mut h);
            }
        }
        // Trailing empty slots do not change equality.
        let used = frame.stack.iter().rposition(|s| *s != Slot::EMPTY).map_or(0, |i| i + 1);
        frame.stack[..used].hash(&mut h);
    }
    state.refs.hash(&mut h);
    h.finish()
}

/// A path being explored: where it is, its state, its nearest stored ancestor and the last
/// instructions it ran (for the trace).
struct Path {
    pc: usize,
    state: State,
    parent: Option<usize>,
    history: VecDeque<(usize, Option<String>)>,
}

enum Step {
    Next(usize),
    End,
}

/// How memory is touched.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Load {
        sign_extend: bool,
    },
    /// A store of this value (`None`: a value the verifier does not track); `imm` for
    /// `st` (refused into the context).
    Store {
        value: Option<Reg>,
        imm: bool,
    },
    Atomic,
    /// A helper reads the bytes.
    HelperRead,
    /// A helper writes the bytes.
    HelperWrite,
}

impl Access {
    fn writes(self) -> bool {
        matches!(self, Access::Store { .. } | Access::Atomic | Access::HelperWrite)
    }
    fn reads(self) -> bool {
        matches!(self, Access::Load { .. } | Access::Atomic | Access::HelperRead)
    }
    fn word(self) -> &'static str {
        if self.writes() {
            "write to"
        } else {
            "read from"
        }
    }
}

pub(crate) struct Verifier<'p> {
    pub(crate) insns: &'p [Insn],
    pub(crate) maps: &'p [MapSpec],
    pub(crate) opts: &'p Options,
    pub(crate) prog_type: Option<ProgType>,
    layout: Option<&'static ContextLayout>,
    pub(crate) helpers: Vec<&'static HelperSig>,
    live: Vec<u16>,
    /// Registers whose values pruning compares (`cfg::precision`).
    precise: Vec<u16>,
    prune: Vec<bool>,
    /// Deepest stack use seen, per function (by first slot).
    depth: Vec<i64>,
    next_id: u32,
    pub(crate) facts: Vec<InsnFact>,
    /// Slots whose accesses reached different regions on different paths (their fact then
    /// names none).
    mixed_regions: Vec<bool>,
    /// Frame 0's bytes (index i: fp-(i+1), as `Facts::stack_observed`'s bits) some path
    /// writes, and those whose content at entry some run may observe: read while
    /// unwritten (by the program or a helper), hit by a write that may miss them (a
    /// variable offset, an atomic, a helper's), or left unwritten where a run may end (an
    /// exit, or a stop: `Verifier::mark_stop`). By byte, not by slot: xdp_counter's 4-byte
    /// key leaves its slot's other half unwritten on every path, which no run shows
    /// changed (issue 11, bench/records/2026-12-01-runtime-37.txt).
    stack_written: [bool; STACK_BYTES],
    stack_observed: [bool; STACK_BYTES],
    stack_unwritten_at_exit: [bool; STACK_BYTES],
    explored: Vec<Vec<usize>>,
    nodes: Vec<Node>,
    stats: Stats,
    log: Vec<String>,
    states: Vec<Vec<Frame>>,
    start: Instant,
    /// Show states in the trace from this processed-instruction count on (a second walk
    /// after a rejection: only the last steps are formatted).
    trace_from: Option<u64>,
    /// A callback's first state, made by the `bpf_loop` call just checked: the walk
    /// explores it as a branch while the caller goes on after the call.
    pub(crate) callback: Option<(usize, State)>,
    /// Whether any path called a callback: the callback may run any number of times, so
    /// the processed count bounds no run (`Facts::max_executed`).
    pub(crate) calls_back: bool,
}

/// A call from `pc` to the function at `target` (a local call, or a helper's callback)
/// opens a frame: refused beyond [`MAX_FRAMES`] and when `target` is already on the stack
/// (the kernel refuses recursion).
pub(crate) fn room_for_frame(st: &State, pc: usize, target: usize) -> Result<()> {
    if st.frames.len() >= MAX_FRAMES {
        return err(
            pc,
            Rule::CallDepth,
            format!("the call stack of {} frames is too deep", st.frames.len() + 1),
        );
    }
    if st.frames.iter().any(|f| f.func == target) {
        return err(pc, Rule::CallDepth, format!("recursive call from insn {pc} to {target}"));
    }
    Ok(())
}

fn err<T>(pc: usize, rule: Rule, message: impl Into<String>) -> Result<T> {
    Err(Rejection::new(pc, rule, message))
}

/// An unknown scalar of `size` bytes, zero-extended.
pub(crate) fn sized_unknown(size: u64) -> Reg {
    if size >= 8 {
        Reg::unknown()
    } else {
        Reg::scalar(Scalar::range_u64(0, (1u64 << (size * 8)) - 1))
    }
}

impl<'p> Verifier<'p> {
    pub fn new(program: &'p Program, opts: &'p Options) -> Result<Verifier<'p>> {
        let insns = program.insns();
        cfg::check_reachable(insns)?;
        let prog_type = opts.prog_type.or(program.prog_type());
        let helpers: Vec<&'static HelperSig> = KERNEL_HELPERS
            .iter()
            .filter(|h| {
                h.available_for(prog_type)
                    && opts.helpers.as_ref().is_none_or(|ids| ids.contains(&h.id))
            })
            .collect();
        let helper_args =
            |id: i64| u32::try_from(id).ok().and_then(kernel_helper).map_or(5, |h| h.args.len());
        let n = insns.len();
        let live = cfg::liveness(insns, &helper_args);
        let precise = cfg::precision(insns, &helper_args, &live);
        Ok(Verifier {
            insns,
            maps: program.maps(),
            opts,
            prog_type,
            layout: prog_type.map(ProgType::context_layout),
            helpers,
            live,
            precise,
            prune: cfg::prune_points(insns),
            depth: vec![0; n],
            next_id: 0,
            facts: vec![InsnFact::default(); n],
            mixed_regions: vec![false; n],
            stack_written: [false; STACK_BYTES],
            stack_observed: [false; STACK_BYTES],
            stack_unwritten_at_exit: [false; STACK_BYTES],
            explored: vec![Vec::new(); n],
            nodes: Vec::new(),
            stats: Stats::default(),
            log: Vec::new(),
            states: if opts.record_states { vec![Vec::new(); n] } else { Vec::new() },
            start: Instant::now(),
            trace_from: None,
            callback: None,
            calls_back: false,
        })
    }

    pub(crate) fn new_id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }

    fn initial_state(&self) -> State {
        let mut regs = [Reg::NOT_INIT; 11];
        regs[10] = Reg::pointer(Kind::Stack, 0);
        match self.prog_type {
            Some(_) => regs[1] = Reg::pointer(Kind::Ctx, 0),
            None => {
                // Empty memory is a null r1 (the engines' convention); of unknown size,
                // a pointer that may be null and reaches nothing.
                regs[1] = match self.opts.memory_len {
                    Some(0) => Reg::scalar(Scalar::constant(0)),
                    Some(len) => Reg::pointer(Kind::Mem, u32::try_from(len).unwrap_or(u32::MAX)),
                    None => Reg::pointer(Kind::Mem, 0),
                };
                regs[2] = match self.opts.memory_len {
                    Some(len) => Reg::scalar(Scalar::constant(len)),
                    None => Reg::unknown(),
                };
            }
        }
        State {
            frames: vec![Frame {
                regs,
                stack: Vec::new(),
                callsite: usize::MAX,
                func: 0,
                callback: false,
            }],
            refs: Vec::new(),
        }
    }

    /// The same walk again, showing states in the trace of its last steps before
    /// `processed` instructions.
    pub fn tracing_until(mut self, processed: u64) -> Self {
        self.trace_from = Some(processed.saturating_sub(TRACE_LEN as u64 + 1));
        self
    }

    /// Walks the program; a rejection comes with the count of processed instructions.
    pub fn run(mut self) -> std::result::Result<Proof, (Rejection, u64)> {
        match self.walk() {
            Ok(proof) => Ok(proof),
            Err(e) => Err((e, self.stats.insns_processed)),
        }
    }

    fn walk(&mut self) -> Result<Proof> {
        let mut work = vec![Path {
            pc: 0,
            state: self.initial_state(),
            parent: None,
            history: VecDeque::new(),
        }];
        while let Some(mut path) = work.pop() {
            loop {
                let pc = path.pc;
                self.stats.insns_processed += 1;
                if self.stats.insns_processed > self.opts.budget {
                    return Err(self.fail(
                        &path,
                        Rejection::new(
                            pc,
                            Rule::TooComplex,
                            format!(
                                "BPF program is too large. Processed {} insn",
                                self.stats.insns_processed
                            ),
                        ),
                    ));
                }
                if self.opts.record_states {
                    if let Some(states) = self.states.get_mut(pc) {
                        states.push(path.state.top().clone());
                    }
                }
                if self.prune.get(pc).copied().unwrap_or(false) {
                    match self.visit(&mut path) {
                        Ok(true) => {
                            self.stats.pruned += 1;
                            self.end_path(path.parent);
                            break;
                        }
                        Ok(false) => {}
                        Err(e) => return Err(self.fail(&path, e)),
                    }
                }
                let Some(insn) = self.insns.get(pc).copied() else {
                    let e =
                        Rejection::new(pc, Rule::Structure, format!("jump out of range to {pc}"));
                    return Err(self.fail(&path, e));
                };
                self.facts[pc].reached = true;
                let traced = self.trace_from.is_some_and(|n| self.stats.insns_processed >= n);
                let shown = (self.opts.log || traced).then(|| path.state.to_string());
                if let (Some(s), true) = (&shown, self.opts.log) {
                    self.log.push(format!("{pc}: {} ;{s}", disassemble_insn(&insn)));
                }
                if path.history.len() == TRACE_LEN {
                    path.history.pop_front();
                }
                path.history.push_back((pc, shown));
                match self.step(&mut path, &mut work, pc, &insn) {
                    Ok(Step::Next(next)) => path.pc = next,
                    Ok(Step::End) => {
                        self.end_path(path.parent);
                        break;
                    }
                    Err(e) => return Err(self.fail(&path, e)),
                }
            }
            self.stats.max_pending = self.stats.max_pending.max(work.len() as u64);
            self.stats.peak_states =
                self.stats.peak_states.max(self.stats.states + work.len() as u64);
        }
        self.stats.time = self.start.elapsed();
        let mut insns = std::mem::take(&mut self.facts);
        for (fact, &mixed) in insns.iter_mut().zip(&self.mixed_regions) {
            if mixed {
                fact.region = None;
            }
        }
        let facts = Facts {
            insns,
            prog_type: self.prog_type,
            memory_len: if self.prog_type.is_none() { self.opts.memory_len } else { None },
            stack_size: STACK_SIZE as u64,
            max_executed: if self.calls_back { u64::MAX } else { self.stats.insns_processed },
            stack_observed: self.stack_observed(),
        };
        Ok(Proof {
            stats: self.stats,
            facts,
            program: self.insns.to_vec(),
            prog_type: self.prog_type,
            log: std::mem::take(&mut self.log),
            precise: if self.opts.record_states { self.precise.clone() } else { Vec::new() },
            states: std::mem::take(&mut self.states),
        })
    }

    /// The rejection with the path's trace.
    fn fail(&self, path: &Path, mut e: Rejection) -> Rejection {
        for (pc, state) in &path.history {
            let text = self.insns.get(*pc).map_or(String::new(), disassemble_insn);
            match state {
                Some(s) if *pc != e.pc => e.trace.push(format!("{pc}: {text} ;{s}")),
                _ => e.trace.push(format!("{pc}: {text}")),
            }
        }
        e.trace.push(format!("state at {}:{}", e.pc, path.state));
        e
    }

    /// Masks per frame of `state` at the path's current slot, from `table` (liveness or
    /// precision): a caller frame's are those at its return slot, without r0-r5 (the
    /// callee's return overwrites them).
    fn frame_masks(table: &[u16], state: &State, pc: usize) -> Vec<u16> {
        let n = state.frames.len();
        (0..n)
            .map(|i| {
                if i + 1 == n {
                    table.get(pc).copied().unwrap_or(u16::MAX)
                } else {
                    let callee = &state.frames[i + 1];
                    if callee.callback {
                        // A callback returns to the `call`, which reads r1-r4 again.
                        return table.get(callee.callsite).copied().unwrap_or(u16::MAX);
                    }
                    let ret = callee.callsite + 1;
                    table.get(ret).copied().unwrap_or(u16::MAX) & !0b11_1111
                }
            })
            .collect()
    }

    /// At a prune point: `true` when a finished state covers the path's (stop here), else
    /// stores the path's state. A state equal to one still being explored on this very
    /// path is an infinite loop.
    fn visit(&mut self, path: &mut Path) -> Result<bool> {
        let pc = path.pc;
        let live = Self::frame_masks(&self.live, &path.state, pc);
        let precise = Self::frame_masks(&self.precise, &path.state, pc);
        let hash = live_hash(&path.state, &live);
        for &idx in &self.explored[pc] {
            let node = &self.nodes[idx];
            if node.branches > 0 && self.calls_back_at(pc) {
                // A `bpf_loop` call reached again from its callback: as the kernel does for
                // callback call sites, a state still being explored that covers this one
                // ends the path (the loop has converged), and none is an infinite loop.
                if state_subsumes(&node.state, &path.state, &live, &precise) {
                    return Ok(true);
                }
                continue;
            }
            if node.branches > 0 {
                // Inside a `bpf_loop` callback an equal state may be the next call's: the
                // kernel tells them apart by `callback_unroll_depth`, which weir does not
                // keep, so it reports no infinite loop there (the call site's convergence
                // test above, and the budget, still end the walk).
                let in_callback = path.state.frames.iter().any(|f| f.callback);
                if !in_callback
                    && node.hash == hash
                    && state_equal(&node.state, &path.state, &live)
                    && self.is_ancestor(idx, path.parent)
                {
                    return err(
                        pc,
                        Rule::InfiniteLoop,
                        format!("infinite loop detected at insn {pc}"),
                    );
                }
                continue;
            }
            if state_subsumes(&node.state, &path.state, &live, &precise) {
                return Ok(true);
            }
        }
        if self.explored[pc].len() < MAX_STATES_PER_PC {
            let idx = self.nodes.len();
            self.nodes.push(Node {
                state: path.state.clone(),
                pc,
                hash,
                parent: path.parent,
                branches: 1,
            });
            self.explored[pc].push(idx);
            path.parent = Some(idx);
            self.stats.states += 1;
        }
        Ok(false)
    }

    /// Whether the slot is a helper call that runs a callback (`bpf_loop`).
    fn calls_back_at(&self, pc: usize) -> bool {
        self.insns.get(pc).is_some_and(|i| i.op == Op::Call && i.imm == CALLBACK_HELPER)
    }

    /// After a callback returns: the scalars it changed in its callers' stack since the
    /// last time the path stood at the call become unknown, so that the states at the call
    /// converge (the kernel's `widen_imprecise_scalars`; the kernel keeps those it found
    /// precise, weir has no per-slot precision and keeps only the unchanged ones).
    fn widen_callback_caller(&self, path: &mut Path, pc: usize) {
        let mut parent = path.parent;
        let previous = loop {
            let Some(p) = parent else { return };
            let node = &self.nodes[p];
            if node.pc == pc && node.state.frames.len() == path.state.frames.len() {
                break &node.state;
            }
            parent = node.parent;
        };
        for (frame, old) in path.state.frames.iter_mut().zip(&previous.frames) {
            for (i, slot) in frame.stack.iter_mut().enumerate() {
                let before = old.slot(i);
                if *slot == before {
                    continue;
                }
                match slot {
                    Slot::Spill(r) if r.is_scalar() => *r = Reg::unknown(),
                    Slot::Part { reg, size, .. } => *reg = sized_unknown(u64::from(*size)),
                    _ => {}
                }
            }
        }
    }

    fn is_ancestor(&self, idx: usize, mut parent: Option<usize>) -> bool {
        while let Some(p) = parent {
            if p == idx {
                return true;
            }
            parent = self.nodes[p].parent;
        }
        false
    }

    fn end_path(&mut self, mut parent: Option<usize>) {
        while let Some(p) = parent {
            let node = &mut self.nodes[p];
            node.branches = node.branches.saturating_sub(1);
            if node.branches > 0 {
                return;
            }
            parent = node.parent;
        }
    }

    fn branch(
        &mut self,
        path: &Path,
        work: &mut Vec<Path>,
        pc: usize,
        state: State,
        at: usize,
    ) -> Result<()> {
        if work.len() >= MAX_PENDING {
            return err(
                at,
                Rule::TooComplex,
                format!("The sequence of {} jumps is too complex.", work.len() + 1),
            );
        }
        if let Some(p) = path.parent {
            self.nodes[p].branches += 1;
        }
        work.push(Path { pc, state, parent: path.parent, history: path.history.clone() });
        Ok(())
    }

    pub(crate) fn read_reg(&self, st: &State, r: u8, pc: usize) -> Result<Reg> {
        let reg = *st.reg(r);
        if !reg.is_init() {
            return err(pc, Rule::UninitRegister, format!("R{r} !read_ok"));
        }
        Ok(reg)
    }

    fn step(
        &mut self,
        path: &mut Path,
        work: &mut Vec<Path>,
        pc: usize,
        insn: &Insn,
    ) -> Result<Step> {
        let Some(spec) = insn.op.spec() else {
            return err(pc, Rule::Structure, "the second slot of lddw is not an instruction");
        };
        let st = &mut path.state;
        match spec.operands {
            Operands::DstImm | Operands::DstSrc | Operands::Dst => {
                self.alu(st, pc, insn)?;
                Ok(Step::Next(pc + 1))
            }
            Operands::JmpOff | Operands::JmpImm => Ok(Step::Next(self.target(pc, insn)?)),
            Operands::DstImmOff | Operands::DstSrcOff => self.cond_jump(path, work, pc, insn),
            Operands::CallImm => match insn.op {
                Op::Call => {
                    self.call_helper(st, pc, insn.imm)?;
                    if let Some((target, state)) = self.callback.take() {
                        self.calls_back = true;
                        self.branch(path, work, target, state, pc)?;
                    }
                    Ok(Step::Next(pc + 1))
                }
                _ => err(
                    pc,
                    Rule::Unsupported,
                    format!("kfunc calls are not supported (call kfunc {})", insn.imm),
                ),
            },
            Operands::CallLocal => self.call_local(st, pc, insn),
            Operands::CallReg => {
                err(pc, Rule::Unsupported, "BPF_CALLX is not supported (unknown opcode 8d)")
            }
            Operands::Nothing => {
                let callback = st.frames.len() > 1 && st.top().callback;
                let step = self.exit(st, pc)?;
                if let (true, Step::Next(callsite)) = (callback, &step) {
                    self.widen_callback_caller(path, *callsite);
                }
                Ok(step)
            }
            Operands::Load => {
                let ptr = self.read_reg(st, insn.src, pc)?;
                let size = insn.op.mem_size().map_or(8, |s| s.bytes() as u64);
                let sx = matches!(insn.op, Op::LdxBSx | Op::LdxHSx | Op::LdxWSx);
                let value = self.access(
                    st,
                    pc,
                    insn.src,
                    ptr,
                    i64::from(insn.off),
                    size,
                    Access::Load { sign_extend: sx },
                )?;
                *st.reg_mut(insn.dst) = value;
                Ok(Step::Next(pc + 1))
            }
            Operands::StoreImm => {
                let ptr = self.read_reg(st, insn.dst, pc)?;
                let size = insn.op.mem_size().map_or(8, |s| s.bytes() as u64);
                let value = Scalar::constant(truncate(insn.imm as u64, size));
                let store = Access::Store { value: Some(Reg::scalar(value)), imm: true };
                self.access(st, pc, insn.dst, ptr, i64::from(insn.off), size, store)?;
                Ok(Step::Next(pc + 1))
            }
            Operands::StoreReg => {
                let ptr = self.read_reg(st, insn.dst, pc)?;
                let value = self.read_reg(st, insn.src, pc)?;
                let size = insn.op.mem_size().map_or(8, |s| s.bytes() as u64);
                if spec.mnemonic.starts_with("lock") {
                    self.atomic(st, pc, insn, ptr, size, spec.mnemonic)?;
                } else {
                    // A narrow store keeps what is known of the low bytes; a copy that
                    // lost high bits is no longer linked to the register (the kernel
                    // breaks the relation on a narrowing spill too).
                    let stored = if value.is_scalar() && size < 8 {
                        if value.var.umax <= truncate(u64::MAX, size) {
                            value
                        } else {
                            Reg::scalar(value.var.truncated(size as u32))
                        }
                    } else {
                        value
                    };
                    let store = Access::Store { value: Some(stored), imm: false };
                    self.access(st, pc, insn.dst, ptr, i64::from(insn.off), size, store)?;
                }
                Ok(Step::Next(pc + 1))
            }
            Operands::DstImm64 | Operands::Pseudo(_) => {
                let reg = self.lddw(pc, insn)?;
                *st.reg_mut(insn.dst) = reg;
                Ok(Step::Next(pc + 2))
            }
            Operands::Abs | Operands::Ind => {
                self.mark_stop(st);
                self.legacy_load(st, pc, insn)?;
                Ok(Step::Next(pc + 1))
            }
        }
    }

    fn target(&self, pc: usize, insn: &Insn) -> Result<usize> {
        jump_target(pc, insn)
            .and_then(|t| usize::try_from(t).ok())
            .filter(|&t| t < self.insns.len())
            .map_or_else(|| err(pc, Rule::Structure, "jump out of range"), Ok)
    }

    fn lddw(&self, pc: usize, insn: &Insn) -> Result<Reg> {
        let index = insn.imm as u32;
        let map = |index: u32| -> Result<&MapSpec> {
            self.maps.get(index as usize).map_or_else(
                || {
                    err(
                        pc,
                        Rule::InvalidMap,
                        format!("fd {index} is not pointing to valid bpf_map"),
                    )
                },
                Ok,
            )
        };
        Ok(match insn.op {
            Op::Lddw => Reg::scalar(Scalar::constant(insn.imm as u64)),
            Op::LddwMapIdx | Op::LddwMapFd => {
                map(index)?;
                Reg::pointer(Kind::MapPtr, index)
            }
            Op::LddwMapIdxValue | Op::LddwMapValue => {
                let spec = map(index)?;
                let off = (insn.imm as u64 >> 32) as u32;
                if spec.map_type != weir_program::MapType::Array {
                    return err(
                        pc,
                        Rule::InvalidMap,
                        "no direct value access support for this map type",
                    );
                }
                if off >= spec.value_size || spec.max_entries != 1 {
                    return err(
                        pc,
                        Rule::InvalidMap,
                        format!(
                            "invalid access to map value pointer, value_size={} off={off}",
                            spec.value_size
                        ),
                    );
                }
                Reg { off: i64::from(off), ..Reg::pointer(Kind::MapValue, index) }
            }
            Op::LddwFunc => {
                if !self.opts.func_info {
                    return err(pc, Rule::Callback, "missing btf func_info");
                }
                let target = function_target(pc, insn).unwrap_or(-1);
                Reg::pointer(Kind::Func, u32::try_from(target).unwrap_or(u32::MAX))
            }
            _ => return err(pc, Rule::Unsupported, "lddw of a BTF id (ksym) is not supported"),
        })
    }

    fn legacy_load(&mut self, st: &mut State, pc: usize, insn: &Insn) -> Result<()> {
        if !matches!(
            self.prog_type,
            Some(ProgType::SocketFilter | ProgType::SchedCls | ProgType::SchedAct)
        ) {
            return err(
                pc,
                Rule::LegacyPacketAccess,
                "BPF_LD_[ABS|IND] instructions not allowed for this program type",
            );
        }
        let r6 = *st.reg(6);
        if r6.kind != Kind::Ctx || !r6.at_base() {
            return err(
                pc,
                Rule::LegacyPacketAccess,
                "at the time of BPF_LD_ABS|IND R6 != pointer to skb",
            );
        }
        if insn.op.spec().is_some_and(|s| s.operands == Operands::Ind) {
            let src = self.read_reg(st, insn.src, pc)?;
            if !src.is_scalar() {
                return err(
                    pc,
                    Rule::LegacyPacketAccess,
                    format!("R{} type={} expected=scalar", insn.src, src.kind.name()),
                );
            }
        }
        if let Some((id, _)) = st.refs.first() {
            return err(
                pc,
                Rule::LegacyPacketAccess,
                format!("BPF_LD_[ABS|IND] cannot be mixed with references (id={id})"),
            );
        }
        let size = insn.op.mem_size().map_or(4, |s| s.bytes() as u64);
        for r in 1..=5 {
            *st.reg_mut(r) = Reg::NOT_INIT;
        }
        *st.reg_mut(0) = sized_unknown(size);
        // Checked by the engines at run time (a load past the packet ends the program).
        self.facts[pc].access_in_bounds = Some(false);
        Ok(())
    }

    // ----- ALU -----

    fn alu(&mut self, st: &mut State, pc: usize, insn: &Insn) -> Result<()> {
        let Some((op, width)) = alu_of(insn.op) else {
            return err(pc, Rule::Unsupported, format!("unknown ALU operation {:?}", insn.op));
        };
        let spec_src = insn.op.spec().map(|s| s.operands);
        let unary = spec_src == Some(Operands::Dst);
        let src = match spec_src {
            Some(Operands::DstSrc) => self.read_reg(st, insn.src, pc)?,
            _ => {
                // A 32-bit operation's immediate is its low 32 bits; a 64-bit one's is
                // sign-extended (the decoder keeps imm sign-extended).
                Reg::scalar(Scalar::constant(insn.imm as u64))
            }
        };
        let is_mov = matches!(op, AluOp::Mov | AluOp::MovSx8 | AluOp::MovSx16 | AluOp::MovSx32);
        let dst = if is_mov { Reg::NOT_INIT } else { self.read_reg(st, insn.dst, pc)? };
        let r = insn.dst;

        // A shift by an immediate the width cannot hold is refused (by a register, it is
        // masked at run time).
        if matches!(op, AluOp::Lsh | AluOp::Rsh | AluOp::Arsh) && spec_src == Some(Operands::DstImm)
        {
            let bits = if width == Width::W32 { 32 } else { 64 };
            if !(0..bits).contains(&insn.imm) {
                return err(pc, Rule::InvalidShift, format!("invalid shift {}", insn.imm));
            }
        }
        if matches!(op, AluOp::Div | AluOp::Mod | AluOp::SDiv | AluOp::SMod) {
            if spec_src == Some(Operands::DstImm)
                && truncate(insn.imm as u64, if width == Width::W32 { 4 } else { 8 }) == 0
            {
                return err(pc, Rule::DivisionByZero, "div by zero");
            }
            if spec_src == Some(Operands::DstSrc) && src.is_scalar() {
                let divisor = if width == Width::W32 { src.var.zext32() } else { src.var };
                let nonzero = !divisor.contains(0);
                let fact = &mut self.facts[pc].divisor_nonzero;
                *fact = Some(fact.unwrap_or(true) && nonzero);
            }
        }

        // Moves.
        if is_mov {
            let value = if op == AluOp::Mov && width == Width::W64 {
                if src.is_scalar() && spec_src == Some(Operands::DstSrc) {
                    // Copies share an id: a bound learnt on one holds for the other.
                    let id = if src.id == 0 { self.new_id() } else { src.id };
                    st.reg_mut(insn.src).id = id;
                    Reg { id, ..src }
                } else {
                    src
                }
            } else if src.is_scalar() {
                Reg::scalar(Scalar::alu(op, width, &Scalar::unknown(), &src.var))
            } else {
                // A partial or sign-extended copy of a pointer (privileged: an unknown
                // scalar).
                if width == Width::W32 {
                    sized_unknown(4)
                } else {
                    Reg::unknown()
                }
            };
            *st.reg_mut(r) = value;
            return Ok(());
        }

        if unary {
            let value = if dst.is_scalar() {
                Scalar::alu(op, width, &dst.var, &dst.var)
            } else if width == Width::W32 {
                sized_unknown(4).var
            } else {
                Scalar::unknown()
            };
            *st.reg_mut(r) = Reg::scalar(value);
            return Ok(());
        }

        match (dst.is_scalar(), src.is_scalar()) {
            (true, true) => {
                // The kernel computes no bounds for a division or remainder, nor for a
                // shift by anything but a constant below the width, and then does not even
                // zero the upper half of a 32-bit result (`is_safe_to_compute_dst_reg_range`);
                // agreeing with it means knowing as little (a program may not rely on more).
                let bits = if width == Width::W32 { 32 } else { 64 };
                let opaque = match op {
                    AluOp::Div | AluOp::Mod | AluOp::SDiv | AluOp::SMod => true,
                    AluOp::Lsh | AluOp::Rsh | AluOp::Arsh => {
                        src.var.as_const().is_none_or(|k| k >= bits)
                    }
                    _ => false,
                };
                // A left shift that may move a set bit past the top keeps only the known
                // bits in the kernel (`__scalar64_min_max_lsh`: "we know nothing" of the
                // bounds). Emitters rely on that loss: the protochain walk widens its offset
                // with `add 2^17; lsh 47; rsh 47` so that the states at its loop head prune.
                let drops_bits = op == AluOp::Lsh
                    && src.var.as_const().is_some_and(|k| {
                        let umax =
                            if bits == 32 { u64::from(dst.var.u32max) } else { dst.var.umax };
                        k < bits && umax > 1u64 << (bits - 1 - k)
                    });
                let value = if opaque {
                    Scalar::unknown()
                } else if drops_bits {
                    Scalar::alu(op, width, &Scalar::from_tnum(dst.var.var), &src.var)
                } else {
                    Scalar::alu(op, width, &dst.var, &src.var)
                };
                let mut reg = Reg::scalar(value);
                // `r += const` keeps the link to the copies, with the constant recorded.
                if let (Some(c), AluOp::Add | AluOp::Sub, Width::W64, Some(Operands::DstImm)) =
                    (src.var.as_const(), op, width, spec_src)
                {
                    let c = if op == AluOp::Sub { (c as i64).wrapping_neg() } else { c as i64 };
                    if dst.id != 0
                        && (-MAX_VAR_OFF..MAX_VAR_OFF).contains(&dst.off.saturating_add(c))
                    {
                        reg.id = dst.id;
                        reg.off = dst.off + c;
                    }
                }
                *st.reg_mut(r) = reg;
                Ok(())
            }
            (false, true) => {
                let reg = self.pointer_arith(pc, r, op, width, dst, src, false)?;
                *st.reg_mut(r) = reg;
                Ok(())
            }
            (true, false) => {
                if op == AluOp::Sub && width == Width::W64 {
                    return err(
                        pc,
                        Rule::PointerArithmetic,
                        format!("R{r} tried to subtract pointer from scalar"),
                    );
                }
                let reg = self.pointer_arith(pc, r, op, width, src, dst, true)?;
                *st.reg_mut(r) = reg;
                Ok(())
            }
            (false, false) => {
                if op == AluOp::Sub && !self.opts.unprivileged {
                    // Privileged: the distance between two pointers is an unknown scalar.
                    *st.reg_mut(r) = Reg::unknown();
                    return Ok(());
                }
                err(
                    pc,
                    Rule::PointerArithmetic,
                    format!("R{r} pointer {} pointer prohibited", op_name(op)),
                )
            }
        }
    }

    /// `ptr op scalar` (or `scalar + ptr` when `swapped`).
    #[allow(clippy::too_many_arguments)]
    fn pointer_arith(
        &mut self,
        pc: usize,
        r: u8,
        op: AluOp,
        width: Width,
        ptr: Reg,
        scalar: Reg,
        swapped: bool,
    ) -> Result<Reg> {
        if width == Width::W32 {
            // Privileged, a 32-bit subtraction involving a pointer is an unknown scalar.
            if op == AluOp::Sub && !self.opts.unprivileged {
                return Ok(Reg::unknown());
            }
            return err(
                pc,
                Rule::PointerArithmetic,
                format!("R{r} 32-bit pointer arithmetic prohibited"),
            );
        }
        match ptr.kind {
            Kind::MapValueOrNull | Kind::MemOrNull => {
                return err(
                    pc,
                    Rule::PointerArithmetic,
                    format!(
                        "R{r} pointer arithmetic on {} prohibited, null-check it first",
                        ptr.kind.name()
                    ),
                )
            }
            Kind::PacketEnd | Kind::MapPtr | Kind::Func => {
                return err(
                    pc,
                    Rule::PointerArithmetic,
                    format!("R{r} pointer arithmetic on {} prohibited", ptr.kind.name()),
                )
            }
            _ => {}
        }
        let sub = match op {
            AluOp::Add => false,
            // The kernel refuses any subtraction from the frame pointer's copies.
            AluOp::Sub if !swapped && ptr.kind == Kind::Stack => {
                return err(
                    pc,
                    Rule::PointerArithmetic,
                    format!("R{r} subtraction from stack pointer prohibited"),
                );
            }
            AluOp::Sub if !swapped => true,
            AluOp::And | AluOp::Or | AluOp::Xor => {
                return err(
                    pc,
                    Rule::PointerArithmetic,
                    format!("R{r} bitwise operator {} on pointer prohibited", op_name(op)),
                )
            }
            _ => {
                return err(
                    pc,
                    Rule::PointerArithmetic,
                    format!("R{r} pointer arithmetic with {} operator prohibited", op_name(op)),
                )
            }
        };
        let s = scalar.var;
        let mut out = ptr;
        if let Some(c) = s.as_const() {
            let c = c as i64;
            if !(-MAX_VAR_OFF..MAX_VAR_OFF).contains(&c) {
                return err(
                    pc,
                    Rule::PointerArithmetic,
                    format!("math between {} pointer and {c} is not allowed", ptr.kind.name()),
                );
            }
            out.off = if sub { ptr.off - c } else { ptr.off + c };
        } else {
            if s.smin == i64::MIN {
                return err(
                    pc,
                    Rule::PointerArithmetic,
                    format!("math between {} pointer and register with unbounded min value is not allowed", ptr.kind.name()),
                );
            }
            if s.smin >= MAX_VAR_OFF || s.smin <= -MAX_VAR_OFF {
                return err(
                    pc,
                    Rule::PointerArithmetic,
                    format!("value {} makes {} pointer be out of bounds", s.smin, ptr.kind.name()),
                );
            }
            let aop = if sub { AluOp::Sub } else { AluOp::Add };
            out.var = Scalar::alu(aop, Width::W64, &ptr.var, &s);
            if matches!(ptr.kind, Kind::Packet | Kind::PacketMeta) {
                // A new variable part: a new group, with nothing proven about it yet.
                out.id = self.new_id();
                out.aux = 0;
            }
        }
        if !(-MAX_VAR_OFF..MAX_VAR_OFF).contains(&out.off) {
            return err(
                pc,
                Rule::PointerArithmetic,
                format!("{} pointer offset {} is not allowed", ptr.kind.name(), out.off),
            );
        }
        Ok(out)
    }

    // ----- jumps -----

    fn cond_jump(
        &mut self,
        path: &mut Path,
        work: &mut Vec<Path>,
        pc: usize,
        insn: &Insn,
    ) -> Result<Step> {
        let Some((cond, width)) = jmp_of(insn.op) else {
            return err(pc, Rule::Unsupported, format!("unknown jump {:?}", insn.op));
        };
        let target = self.target(pc, insn)?;
        let by_reg = insn.op.spec().is_some_and(|s| s.operands == Operands::DstSrcOff);
        let st = &path.state;
        let dst = self.read_reg(st, insn.dst, pc)?;
        let src = if by_reg {
            self.read_reg(st, insn.src, pc)?
        } else {
            Reg::scalar(Scalar::constant(insn.imm as u64))
        };
        // The states of the two edges (None: the edge cannot happen).
        let (taken, fall) = self.edges(st, cond, width, insn, by_reg, dst, src);
        match (taken, fall) {
            (Some(t), Some(f)) => {
                self.branch(path, work, target, t, pc)?;
                path.state = f;
                Ok(Step::Next(pc + 1))
            }
            (Some(t), None) => {
                path.state = t;
                Ok(Step::Next(target))
            }
            (None, Some(f)) => {
                path.state = f;
                Ok(Step::Next(pc + 1))
            }
            (None, None) => Ok(Step::End),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn edges(
        &mut self,
        st: &State,
        cond: JmpCond,
        width: Width,
        insn: &Insn,
        by_reg: bool,
        dst: Reg,
        src: Reg,
    ) -> (Option<State>, Option<State>) {
        if dst.is_scalar() && src.is_scalar() {
            if let Some(t) = Scalar::branch_taken(cond, width, &dst.var, &src.var) {
                return if t { (Some(st.clone()), None) } else { (None, Some(st.clone())) };
            }
            let edge = |taken: bool| {
                let (d, s) = Scalar::refine(cond, width, &dst.var, &src.var, taken)?;
                let mut state = st.clone();
                set_scalar(&mut state, insn.dst, dst.id, d);
                if by_reg {
                    set_scalar(&mut state, insn.src, src.id, s);
                }
                Some(state)
            };
            return (edge(true), edge(false));
        }
        let is_zero = |r: &Reg| r.is_scalar() && r.var.as_const() == Some(0);
        // Null checks.
        if matches!(cond, JmpCond::Eq | JmpCond::Ne) {
            let (ptr, other) = if dst.kind.is_pointer() { (dst, src) } else { (src, dst) };
            if is_zero(&other) {
                if matches!(ptr.kind, Kind::MapValueOrNull | Kind::MemOrNull) && width == Width::W64
                {
                    let mut null = st.clone();
                    mark_null(&mut null, ptr.id, true);
                    let mut nonnull = st.clone();
                    mark_null(&mut nonnull, ptr.id, false);
                    return if cond == JmpCond::Eq {
                        (Some(null), Some(nonnull))
                    } else {
                        (Some(nonnull), Some(null))
                    };
                }
                let maybe_null = ptr.kind == Kind::Mem && ptr.aux == 0 && ptr.ref_id == 0;
                if ptr.kind.is_pointer() && width == Width::W64 && !maybe_null {
                    // A pointer that is never null.
                    return if cond == JmpCond::Eq {
                        (None, Some(st.clone()))
                    } else {
                        (Some(st.clone()), None)
                    };
                }
            }
        }
        // Packet bounds: `pkt OP pkt_end` (and `meta OP data`).
        if width == Width::W64 {
            if let Some((on_taken, strict, pkt)) = packet_compare(cond, &dst, &src) {
                let mut proven = st.clone();
                // `pkt < end` proves one byte more than `pkt <= end`. A variable part that
                // may exceed the largest packet proves nothing (the kernel's rule).
                let span = pkt.off + i64::from(strict);
                let small = pkt.var.umax <= MAX_PACKET_OFF
                    && pkt.var.umax.saturating_add(span.max(0) as u64) <= MAX_PACKET_OFF;
                if span > 0 && pkt.off >= 0 && small {
                    let range = span.min(MAX_PACKET_OFF as i64) as u32;
                    proven.for_each_reg(|r| {
                        if r.kind == pkt.kind && r.id == pkt.id && r.aux < range {
                            r.aux = range;
                        }
                    });
                }
                return if on_taken {
                    (Some(proven), Some(st.clone()))
                } else {
                    (Some(st.clone()), Some(proven))
                };
            }
        }
        (Some(st.clone()), Some(st.clone()))
    }

    // ----- memory -----

    fn atomic(
        &mut self,
        st: &mut State,
        pc: usize,
        insn: &Insn,
        ptr: Reg,
        size: u64,
        name: &str,
    ) -> Result<()> {
        let cmp = name.contains("cmpxchg");
        if cmp {
            self.read_reg(st, 0, pc)?;
        }
        self.access(st, pc, insn.dst, ptr, i64::from(insn.off), size, Access::Atomic)?;
        let fetched = sized_unknown(size);
        if cmp {
            *st.reg_mut(0) = fetched;
        } else if name.contains("fetch") || name.contains("xchg") {
            *st.reg_mut(insn.src) = fetched;
        }
        Ok(())
    }

    /// Checks an access of `size` bytes at `ptr + off` and applies it; returns the loaded
    /// value (an unknown scalar for stores).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn access(
        &mut self,
        st: &mut State,
        pc: usize,
        regno: u8,
        ptr: Reg,
        off: i64,
        size: u64,
        acc: Access,
    ) -> Result<Reg> {
        let value = match ptr.kind {
            Kind::NotInit => return err(pc, Rule::UninitRegister, format!("R{regno} !read_ok")),
            Kind::Stack => self.stack_access(st, pc, regno, ptr, off, size, acc)?,
            Kind::Ctx => self.ctx_access(pc, regno, ptr, off, size, acc)?,
            Kind::Packet | Kind::PacketMeta => {
                if acc == Access::Atomic {
                    return err(
                        pc,
                        Rule::InvalidMemAccess,
                        format!("BPF_ATOMIC stores into R{regno} packet is not allowed"),
                    );
                }
                if acc.writes() && self.prog_type == Some(ProgType::SocketFilter) {
                    return err(pc, Rule::ReadOnly, format!("cannot write into packet (R{regno})"));
                }
                let o = ptr.off + off;
                if ptr.var.smin < 0 {
                    return err(pc, Rule::OutOfBounds, format!("R{regno} min value is negative, either use unsigned index or do a if (index >=0) check."));
                }
                if o < 0 || o.saturating_add(size as i64) > i64::from(ptr.aux) {
                    return err(
                        pc,
                        Rule::OutOfBounds,
                        format!(
                            "invalid access to packet, off={o} size={size}, R{regno}(id={},off={},r={})\nR{regno} offset is outside of the packet",
                            ptr.id, ptr.off, ptr.aux
                        ),
                    );
                }
                sized_unknown(size)
            }
            Kind::MapValue | Kind::Mem => {
                if ptr.kind == Kind::MapValue || ptr.ref_id != 0 {
                    self.mark_stop(st);
                }
                let (limit, what) = if ptr.kind == Kind::MapValue {
                    let spec = self.maps.get(ptr.aux as usize);
                    if acc.writes()
                        && spec.is_some_and(|m| {
                            m.name.starts_with(".rodata") || m.flags & (1 << 7) != 0
                        })
                    {
                        return err(
                            pc,
                            Rule::ReadOnly,
                            format!(
                                "write into map forbidden, value_size={} off={} size={size}",
                                spec.map_or(0, |m| m.value_size),
                                ptr.off + off
                            ),
                        );
                    }
                    (spec.map_or(0, |m| u64::from(m.value_size)), "map value")
                } else {
                    (u64::from(ptr.aux), "memory")
                };
                let o = ptr.off + off;
                let lo = i128::from(o) + i128::from(ptr.var.smin);
                let hi = i128::from(o) + i128::from(ptr.var.umax) + i128::from(size);
                if ptr.var.umax >= MAX_VAR_OFF as u64 && ptr.var.as_const().is_none() {
                    return err(pc, Rule::OutOfBounds, format!("R{regno} unbounded memory access, make sure to bounds check any such access"));
                }
                if lo < 0 || hi > i128::from(limit) {
                    let kind = if ptr.kind == Kind::MapValue { "value_size" } else { "mem_size" };
                    let msg = if ptr.var.as_const().is_some() {
                        format!(
                            "invalid access to {what}, {kind}={limit} off={} size={size}",
                            i128::from(o) + i128::from(ptr.var.smin)
                        )
                    } else if lo < 0 {
                        format!("R{regno} min value is outside of the allowed memory range")
                    } else {
                        format!("R{regno} max value is outside of the allowed memory range")
                    };
                    return err(pc, Rule::OutOfBounds, msg);
                }
                sized_unknown(size)
            }
            kind => {
                return err(
                    pc,
                    Rule::InvalidMemAccess,
                    format!("R{regno} invalid mem access '{}'", kind.name()),
                );
            }
        };
        if matches!(acc, Access::Load { .. } | Access::Store { .. } | Access::Atomic) {
            // Which window the access reaches: the engines translate a proven access with
            // that region's base alone. The input memory of an untyped program is the one
            // `Mem` without a reference; a ring buffer sample lives among the map values.
            let region = match ptr.kind {
                Kind::Stack => Region::Stack,
                Kind::Ctx => Region::Context,
                Kind::Packet | Kind::PacketMeta => Region::Packet,
                Kind::Mem if ptr.ref_id == 0 && self.prog_type.is_none() => Region::Memory,
                _ => Region::MapValue,
            };
            let fact = &mut self.facts[pc];
            if fact.access_in_bounds.is_some() && fact.region != Some(region) {
                self.mixed_regions[pc] = true;
            }
            fact.access_in_bounds = Some(true);
            fact.region = Some(region);
        }
        Ok(match acc {
            Access::Load { sign_extend: true } if value.is_scalar() => {
                let op = match size {
                    1 => AluOp::MovSx8,
                    2 => AluOp::MovSx16,
                    _ => AluOp::MovSx32,
                };
                Reg::scalar(Scalar::alu(op, Width::W64, &Scalar::unknown(), &value.var))
            }
            _ => value,
        })
    }

    fn ctx_access(
        &self,
        pc: usize,
        regno: u8,
        ptr: Reg,
        off: i64,
        size: u64,
        acc: Access,
    ) -> Result<Reg> {
        let layout =
            self.layout.ok_or_else(|| Rejection::new(pc, Rule::ContextAccess, "no context"))?;
        if ptr.off != 0 {
            return err(
                pc,
                Rule::ContextAccess,
                format!("dereference of modified ctx ptr R{regno} off={} disallowed", ptr.off),
            );
        }
        if ptr.var.as_const() != Some(0) {
            return err(
                pc,
                Rule::VariableOffset,
                format!("variable ctx access var_off={} disallowed", ptr.var),
            );
        }
        match acc {
            Access::Atomic => {
                return err(
                    pc,
                    Rule::ContextAccess,
                    format!("BPF_ATOMIC stores into R{regno} ctx is not allowed"),
                )
            }
            Access::HelperRead | Access::HelperWrite => {
                return err(
                    pc,
                    Rule::HelperArgument,
                    format!(
                        "R{regno} type=ctx expected=fp, pkt, pkt_meta, map_key, map_value, mem"
                    ),
                )
            }
            _ => {}
        }
        let bad = || {
            err(
                pc,
                Rule::ContextAccess,
                format!("invalid bpf_context access off={off} size={size}"),
            )
        };
        let Some(field) = layout.fields.iter().find(|f| {
            off >= i64::from(f.offset) && off + size as i64 <= i64::from(f.offset + f.size)
        }) else {
            return bad();
        };
        // Fields the layout has but the kernel does not offer this program type (XDP's
        // egress_ifindex is for devmap programs only).
        let withheld = match self.prog_type {
            Some(ProgType::SocketFilter) => {
                matches!(field.name, "tc_classid" | "data" | "data_end" | "data_meta")
            }
            Some(ProgType::Xdp) => field.name == "egress_ifindex",
            _ => false,
        };
        if withheld {
            return bad();
        }
        let within = off - i64::from(field.offset);
        if acc.writes() {
            // Writes are whole fields, except into `cb` (any width inside one of its words).
            let whole = if field.name == "cb" {
                within % 4 + size as i64 <= 4
            } else {
                within == 0 && size == u64::from(field.size)
            };
            if !field.writable || field.kind != FieldKind::Plain || !whole {
                return bad();
            }
            return Ok(Reg::unknown());
        }
        // XDP reads whole fields; `__sk_buff` narrower ones too. Both sign-extend plain
        // fields on request.
        let sign_extend = matches!(acc, Access::Load { sign_extend: true });
        if self.prog_type == Some(ProgType::Xdp) && (within != 0 || u64::from(field.size) != size) {
            return bad();
        }
        if sign_extend && field.kind != FieldKind::Plain {
            return bad();
        }
        let kind = match field.kind {
            FieldKind::Plain => return Ok(sized_unknown(size)),
            FieldKind::PacketStart => Kind::Packet,
            FieldKind::PacketEnd => Kind::PacketEnd,
            FieldKind::MetaStart => Kind::PacketMeta,
        };
        // The kernel offers direct packet access to XDP and tc, not to socket filters, and
        // only as whole 32-bit loads of the field.
        if self.prog_type == Some(ProgType::SocketFilter)
            || off != i64::from(field.offset)
            || size != 4
        {
            return bad();
        }
        Ok(Reg::pointer(kind, 0))
    }

    #[allow(clippy::too_many_arguments)]
    fn stack_access(
        &mut self,
        st: &mut State,
        pc: usize,
        regno: u8,
        ptr: Reg,
        off: i64,
        size: u64,
        acc: Access,
    ) -> Result<Reg> {
        let size_i = size as i64;
        let direct = matches!(acc, Access::Load { .. } | Access::Store { .. } | Access::Atomic);
        // The bytes the access may touch: [lo, hi + size).
        let (lo, hi) = match ptr.var.as_const() {
            Some(v) => {
                let o = ptr.off.saturating_add(v as i64).saturating_add(off);
                (o, o)
            }
            None => {
                if self.opts.unprivileged {
                    return err(
                        pc,
                        Rule::VariableOffset,
                        format!(
                            "variable stack access var_off={} off={off} size={size} (R{regno})",
                            ptr.var
                        ),
                    );
                }
                let base = ptr.off.saturating_add(off);
                (base.saturating_add(ptr.var.smin), base.saturating_add(ptr.var.smax))
            }
        };
        if lo < -STACK_SIZE || hi.saturating_add(size_i) > 0 || size == 0 && acc.reads() && hi >= 0
        {
            let message = if lo == hi {
                format!("invalid {} stack R{regno} off={lo} size={size}", acc.word())
            } else {
                format!(
                    "invalid variable-offset {} stack R{regno} var_off={} off={} size={size}",
                    acc.word(),
                    ptr.var.var,
                    ptr.off + off
                )
            };
            return err(pc, Rule::OutOfBounds, message);
        }
        // The kernel aligns stack accesses strictly, whatever the program's flags.
        if direct && lo == hi && size > 1 && lo.rem_euclid(size_i) != 0 {
            return err(
                pc,
                Rule::Misaligned,
                format!("misaligned stack access off {lo}+0 size {size}"),
            );
        }
        if size == 0 {
            return Ok(Reg::unknown());
        }
        let frame_index = ptr.aux as usize;
        let Some(func) = st.frames.get(frame_index).map(|f| f.func) else {
            return err(
                pc,
                Rule::InvalidMemAccess,
                format!("R{regno} points into a returned frame"),
            );
        };
        if -lo > self.depth[func] {
            self.depth[func] = -lo;
            let total: i64 =
                st.frames.iter().map(|f| (self.depth[f.func].max(1) + 31) / 32 * 32).sum();
            if st.frames.len() > 1 && total > STACK_SIZE {
                return err(
                    pc,
                    Rule::StackDepth,
                    format!(
                        "combined stack size of {} calls is {total}. Too large",
                        st.frames.len()
                    ),
                );
            }
        }
        let unprivileged = self.opts.unprivileged;
        let frame = &mut st.frames[frame_index];
        // Byte b (negative) is in slot (-b - 1) / 8, at index b + 8(slot + 1).
        let slot_of = |b: i64| ((-b - 1) / 8) as usize;
        let index_of = |b: i64| (b + 8 * (((-b - 1) / 8) + 1)) as usize;
        let end = hi + size_i;
        if frame_index == 0 {
            // What a run may observe of the stack it starts with (`Facts::stack_observed`).
            // A read of an unwritten byte observes it (a helper's read of its memory
            // argument too); so may a write that can miss it (a variable offset: "each
            // keeps what it had"), an atomic (it reads first) and a helper's write (it may
            // fail, or write less, before it returns).
            let exact_write =
                acc.writes() && lo == hi && !matches!(acc, Access::Atomic | Access::HelperWrite);
            for b in lo..end {
                let byte = (-b - 1) as usize;
                let Some(marks) = self.stack_written.get_mut(byte) else { continue };
                *marks |= acc.writes();
                let unwritten = frame
                    .slot(slot_of(b))
                    .bytes()
                    .is_some_and(|bytes| bytes[index_of(b)] == Byte::Invalid);
                if unwritten && !exact_write {
                    self.stack_observed[byte] = true;
                }
            }
        }
        if acc.writes() {
            let value = match acc {
                Access::Store { value, .. } => value,
                _ => None,
            };
            if let Some(v) = value.filter(|v| v.kind.is_pointer()) {
                if size != 8 {
                    let _ = v;
                    return err(pc, Rule::InvalidMemAccess, "invalid size of register spill");
                }
            }
            if lo == hi && size == 8 && lo % 8 == 0 && acc != Access::Atomic {
                if let Some(value) = value {
                    *frame.slot_mut(slot_of(lo)) = Slot::Spill(value);
                    return Ok(Reg::unknown());
                }
            }
            // The kernel (privileged) keeps a scalar stored narrow at an aligned offset as
            // a spill of that size; the slot's other bytes keep what they were.
            if lo == hi && size < 8 && lo % 8 == 0 && !unprivileged {
                if let Some(reg) =
                    value.filter(|v| v.is_scalar() && matches!(acc, Access::Store { .. }))
                {
                    let slot = frame.slot_mut(slot_of(lo));
                    let mut bytes = slot.bytes().unwrap_or([Byte::Misc; 8]);
                    let byte = if reg.var.as_const() == Some(0) { Byte::Zero } else { Byte::Misc };
                    bytes[..size as usize].fill(byte);
                    *slot = Slot::Part { reg, size: size as u8, bytes };
                    return Ok(Reg::unknown());
                }
            }
            if acc == Access::Atomic && unprivileged {
                check_initialized(frame, lo, size, pc, regno)?;
            }
            let byte = match value {
                Some(v) if lo == hi && v.is_scalar() && v.var.as_const() == Some(0) => Byte::Zero,
                _ => Byte::Misc,
            };
            for b in lo..end {
                let slot = frame.slot_mut(slot_of(b));
                let mut bytes = slot.bytes().unwrap_or([Byte::Misc; 8]);
                // A write at a variable offset may miss any byte: each keeps what it had or
                // gets the new value, which only `Misc` covers (an unwritten byte reads as
                // unknown for the privileged verifier either way).
                bytes[index_of(b)] = byte;
                *slot = Slot::Bytes(bytes);
            }
            return Ok(Reg::unknown());
        }
        // Reads.
        if lo == hi && size == 8 && lo % 8 == 0 {
            if let Slot::Spill(r) = frame.slot(slot_of(lo)) {
                if acc == Access::HelperRead {
                    return Ok(Reg::unknown());
                }
                return Ok(r);
            }
        }
        let uninit = |b: i64| {
            err(
                pc,
                Rule::UninitStack,
                format!("invalid read from stack R{regno} off {lo}+{} size {size}", b - lo),
            )
        };
        if acc == Access::HelperRead || lo != hi {
            // A helper may read spilled registers, pointers included (privileged); so may
            // a read at a variable offset, which yields an unknown scalar.
            for b in lo..end {
                if let Some(bytes) = frame.slot(slot_of(b)).bytes() {
                    if unprivileged && bytes[index_of(b)] == Byte::Invalid {
                        return uninit(b);
                    }
                }
            }
            return Ok(if lo == hi { Reg::unknown() } else { sized_unknown(size) });
        }
        // A narrow read of a spilled constant: its bytes.
        if slot_of(lo) == slot_of(end - 1) {
            if let Slot::Spill(r) = frame.slot(slot_of(lo)) {
                if !r.is_scalar() {
                    return err(pc, Rule::InvalidMemAccess, "invalid size of register fill");
                }
                if let Some(c) = r.var.as_const() {
                    let shift = index_of(lo) * 8;
                    return Ok(Reg::scalar(Scalar::constant(truncate(c >> shift, size))));
                }
                // The low bytes of a spilled scalar keep what is known of them.
                if index_of(lo) == 0 {
                    return Ok(Reg::scalar(r.var.truncated(size as u32)));
                }
                return Ok(sized_unknown(size));
            }
            // A fill from a narrow spill's offset at its size or less.
            if let Slot::Part { reg, size: n, .. } = frame.slot(slot_of(lo)) {
                if index_of(lo) == 0 && size == u64::from(n) {
                    return Ok(reg);
                }
                if index_of(lo) == 0 && size < u64::from(n) {
                    return Ok(Reg::scalar(reg.var.truncated(size as u32)));
                }
            }
        }
        let mut all_zero = true;
        for b in lo..end {
            let slot = frame.slot(slot_of(b));
            let Some(bytes) = slot.bytes() else {
                return err(pc, Rule::InvalidMemAccess, "invalid size of register fill");
            };
            match bytes[index_of(b)] {
                // Privileged: reading stack never written gives an unknown value.
                Byte::Invalid if unprivileged => return uninit(b),
                Byte::Invalid | Byte::Misc => all_zero = false,
                Byte::Zero => {}
            }
        }
        Ok(if all_zero { Reg::scalar(Scalar::constant(0)) } else { sized_unknown(size) })
    }

    // ----- calls and exits -----

    fn call_local(&mut self, st: &mut State, pc: usize, insn: &Insn) -> Result<Step> {
        let target = function_target(pc, insn)
            .and_then(|t| usize::try_from(t).ok())
            .filter(|&t| t < self.insns.len())
            .map_or_else(|| err(pc, Rule::Structure, "call out of range"), Ok)?;
        room_for_frame(st, pc, target)?;
        let caller = st.top();
        let mut regs = [Reg::NOT_INIT; 11];
        regs[1..=5].copy_from_slice(&caller.regs[1..=5]);
        regs[10] = Reg::pointer(Kind::Stack, st.frames.len() as u32);
        st.frames.push(Frame {
            regs,
            stack: Vec::new(),
            callsite: pc,
            func: target,
            callback: false,
        });
        Ok(Step::Next(target))
    }

    fn exit(&mut self, st: &mut State, pc: usize) -> Result<Step> {
        let r0 = self.read_reg(st, 0, pc)?;
        if st.frames.len() > 1 && st.top().callback {
            // The kernel's `callback_ret_range` for bpf_loop: 0 (go on) or 1 (stop).
            if !r0.is_scalar() {
                return err(pc, Rule::Callback, "At callback return R0 not a scalar value");
            }
            if r0.var.umax > 1 {
                return err(
                    pc,
                    Rule::Callback,
                    format!(
                        "At callback return the register R0 has {} should have been in [0, 1]",
                        r0.var
                    ),
                );
            }
            let callee = st.frames.pop().expect("more than one frame");
            let depth = st.frames.len() as u32;
            st.for_each_reg(|r| {
                if r.kind == Kind::Stack && r.aux >= depth {
                    *r = Reg::unknown();
                }
            });
            // Back to the `call`: its arguments are still in place, and it may run the
            // callback again (the walk stops when a state stored there covers this one).
            return Ok(Step::Next(callee.callsite));
        }
        if st.frames.len() > 1 {
            let callee = st.frames.pop().expect("more than one frame");
            if r0.kind == Kind::Stack && r0.aux as usize >= st.frames.len() {
                return err(
                    pc,
                    Rule::InvalidMemAccess,
                    "cannot return stack pointer to the caller frame",
                );
            }
            let depth = st.frames.len() as u32;
            st.for_each_reg(|r| {
                if r.kind == Kind::Stack && r.aux >= depth {
                    *r = Reg::unknown();
                }
            });
            let caller = st.top_mut();
            caller.regs[0] = r0;
            for r in 1..=5 {
                caller.regs[r] = Reg::NOT_INIT;
            }
            return Ok(Step::Next(callee.callsite + 1));
        }
        if let Some(&(id, at)) = st.refs.first() {
            return err(
                pc,
                Rule::UnreleasedReference,
                format!("Unreleased reference id={id} alloc_insn={at}"),
            );
        }
        self.mark_stop(st);
        Ok(Step::End)
    }
}

impl Verifier<'_> {
    /// Frame 0's bytes unwritten in `st` where a run may end with the stack shown: at an
    /// exit, and where a run may stop before one: a helper call (a helper may fail or stop
    /// the run, as `bpf_tail_call` does), a legacy packet load (its miss exits with r0 = 0)
    /// and an access to a map value or a ring buffer sample (an engine translates those
    /// through the maps and may refuse one). Accesses to the stack, context, packet and an
    /// untyped program's memory the proof bounds, so a run meeting the proof's assumptions
    /// does not stop there; nor does it run out of a budget the proof's bound on a run's
    /// length fits (`Facts::max_executed`).
    pub(crate) fn mark_stop(&mut self, st: &State) {
        if let Some(frame) = st.frames.first() {
            for (slot, marks) in self.stack_unwritten_at_exit.chunks_exact_mut(8).enumerate() {
                // A spilled pointer (`bytes` is `None`) is written. A slot's bytes run from
                // its lowest address, fp-8(slot+1), the marks from fp-(8 slot + 1) down.
                if let Some(bytes) = frame.slot(slot).bytes() {
                    for (mark, byte) in marks.iter_mut().zip(bytes.iter().rev()) {
                        *mark |= *byte == Byte::Invalid;
                    }
                }
            }
        }
    }

    /// `Facts::stack_observed`: the bytes read while unwritten or hit by a write that may
    /// miss them, and the bytes some path writes and some exit or stop (`mark_stop`)
    /// leaves unwritten. `None` when the program calls a function or runs a callback
    /// (other frames, and a callback's view of frame 0, are not tracked here).
    fn stack_observed(&self) -> Option<Vec<u64>> {
        let calls = self.insns.iter().any(|i| {
            matches!(i.op.spec().map(|s| s.operands), Some(Operands::CallLocal | Operands::CallReg))
        });
        if calls || self.calls_back {
            return None;
        }
        let mut bits = vec![0u64; STACK_BYTES.div_ceil(64)];
        for byte in 0..STACK_BYTES {
            let left = self.stack_unwritten_at_exit[byte] && self.stack_written[byte];
            if self.stack_observed[byte] || left {
                bits[byte / 64] |= 1 << (byte % 64);
            }
        }
        Some(bits)
    }
}

/// Every byte of `[o, o + size)` in `frame` written (spilled registers count).
fn check_initialized(frame: &Frame, o: i64, size: u64, pc: usize, regno: u8) -> Result<()> {
    for b in o..o + size as i64 {
        let slot = frame.slot(((-b - 1) / 8) as usize);
        if let Slot::Bytes(bytes) = slot {
            if bytes[(b + 8 * (((-b - 1) / 8) + 1)) as usize] == Byte::Invalid {
                return err(
                    pc,
                    Rule::UninitStack,
                    format!("invalid read from stack R{regno} off {o}+{} size {size}", b - o),
                );
            }
        }
    }
    Ok(())
}

fn truncate(v: u64, size: u64) -> u64 {
    if size >= 8 {
        v
    } else {
        v & ((1u64 << (size * 8)) - 1)
    }
}

/// Sets register `r` (a scalar) to `value`, and every copy that shares its id.
/// Linked copies may differ by a constant (`off`, from `r5 = r4; r5 += 14`): each gets
/// `value` shifted by the difference, exact in wrapping arithmetic.
fn set_scalar(st: &mut State, r: u8, id: u32, value: Scalar) {
    let delta = st.reg(r).off;
    if id != 0 {
        st.for_each_reg(|reg| {
            if reg.is_scalar() && reg.id == id {
                reg.var = if reg.off == delta {
                    value
                } else {
                    let shift = Scalar::constant(reg.off.wrapping_sub(delta) as u64);
                    Scalar::alu(AluOp::Add, Width::W64, &value, &shift)
                };
            }
        });
    }
    st.reg_mut(r).var = value;
}

/// Resolves a null check of the pointers with `id`.
fn mark_null(st: &mut State, id: u32, null: bool) {
    let mut released = Vec::new();
    st.for_each_reg(|r| {
        if r.id == id && matches!(r.kind, Kind::MapValueOrNull | Kind::MemOrNull) {
            if null {
                if r.ref_id != 0 {
                    released.push(r.ref_id);
                }
                *r = Reg::scalar(Scalar::constant(0));
            } else {
                r.kind = if r.kind == Kind::MapValueOrNull { Kind::MapValue } else { Kind::Mem };
                r.id = 0;
            }
        }
    });
    // A null reservation holds nothing to release.
    st.refs.retain(|(rid, _)| !released.contains(rid));
}

/// For a comparison of a packet pointer with the packet's end (or a metadata pointer with
/// the packet's start): on which edge (`true`: taken) the pointer is proven `<= end` (or
/// `< end`: `strict`), and the pointer.
fn packet_compare(cond: JmpCond, dst: &Reg, src: &Reg) -> Option<(bool, bool, Reg)> {
    let end_of = |p: &Reg, e: &Reg| match (p.kind, e.kind) {
        (Kind::Packet, Kind::PacketEnd) => true,
        (Kind::PacketMeta, Kind::Packet) => e.at_base() && e.id == 0,
        _ => false,
    };
    if end_of(dst, src) {
        // pkt OP end: `pkt > end` fails as `pkt <= end`, `pkt >= end` as `pkt < end`.
        let (on_taken, strict) = match cond {
            JmpCond::Gt => (false, false),
            JmpCond::Ge => (false, true),
            JmpCond::Lt => (true, true),
            JmpCond::Le => (true, false),
            _ => return None,
        };
        return Some((on_taken, strict, *dst));
    }
    if end_of(src, dst) {
        // end OP pkt: `end > pkt` holds as `pkt < end`, `end < pkt` fails as `pkt <= end`.
        let (on_taken, strict) = match cond {
            JmpCond::Gt => (true, true),
            JmpCond::Ge => (true, false),
            JmpCond::Lt => (false, false),
            JmpCond::Le => (false, true),
            _ => return None,
        };
        return Some((on_taken, strict, *src));
    }
    None
}

fn op_name(op: AluOp) -> &'static str {
    match op {
        AluOp::Add => "+=",
        AluOp::Sub => "-=",
        AluOp::Mul => "*=",
        AluOp::Div | AluOp::SDiv => "/=",
        AluOp::Mod | AluOp::SMod => "%=",
        AluOp::Or => "|=",
        AluOp::And => "&=",
        AluOp::Lsh => "<<=",
        AluOp::Rsh => ">>=",
        AluOp::Arsh => "s>>=",
        AluOp::Xor => "^=",
        _ => "?=",
    }
}

fn alu_of(op: Op) -> Option<(AluOp, Width)> {
    use AluOp as A;
    use Op::*;
    use Width::{W32, W64};
    Some(match op {
        Add64Imm | Add64Reg => (A::Add, W64),
        Sub64Imm | Sub64Reg => (A::Sub, W64),
        Mul64Imm | Mul64Reg => (A::Mul, W64),
        Div64Imm | Div64Reg => (A::Div, W64),
        Sdiv64Imm | Sdiv64Reg => (A::SDiv, W64),
        Or64Imm | Or64Reg => (A::Or, W64),
        And64Imm | And64Reg => (A::And, W64),
        Lsh64Imm | Lsh64Reg => (A::Lsh, W64),
        Rsh64Imm | Rsh64Reg => (A::Rsh, W64),
        Mod64Imm | Mod64Reg => (A::Mod, W64),
        Smod64Imm | Smod64Reg => (A::SMod, W64),
        Xor64Imm | Xor64Reg => (A::Xor, W64),
        Mov64Imm | Mov64Reg => (A::Mov, W64),
        Arsh64Imm | Arsh64Reg => (A::Arsh, W64),
        Neg64 => (A::Neg, W64),
        MovSx8To64 => (A::MovSx8, W64),
        MovSx16To64 => (A::MovSx16, W64),
        MovSx32To64 => (A::MovSx32, W64),
        Add32Imm | Add32Reg => (A::Add, W32),
        Sub32Imm | Sub32Reg => (A::Sub, W32),
        Mul32Imm | Mul32Reg => (A::Mul, W32),
        Div32Imm | Div32Reg => (A::Div, W32),
        Sdiv32Imm | Sdiv32Reg => (A::SDiv, W32),
        Or32Imm | Or32Reg => (A::Or, W32),
        And32Imm | And32Reg => (A::And, W32),
        Lsh32Imm | Lsh32Reg => (A::Lsh, W32),
        Rsh32Imm | Rsh32Reg => (A::Rsh, W32),
        Mod32Imm | Mod32Reg => (A::Mod, W32),
        Smod32Imm | Smod32Reg => (A::SMod, W32),
        Xor32Imm | Xor32Reg => (A::Xor, W32),
        Mov32Imm | Mov32Reg => (A::Mov, W32),
        Arsh32Imm | Arsh32Reg => (A::Arsh, W32),
        Neg32 => (A::Neg, W32),
        MovSx8To32 => (A::MovSx8, W32),
        MovSx16To32 => (A::MovSx16, W32),
        Le16 => (A::ToLe(16), W64),
        Le32 => (A::ToLe(32), W64),
        Le64 => (A::ToLe(64), W64),
        Be16 => (A::ToBe(16), W64),
        Be32 => (A::ToBe(32), W64),
        Be64 => (A::ToBe(64), W64),
        Bswap16 => (A::Bswap(16), W64),
        Bswap32 => (A::Bswap(32), W64),
        Bswap64 => (A::Bswap(64), W64),
        _ => return None,
    })
}

fn jmp_of(op: Op) -> Option<(JmpCond, Width)> {
    use JmpCond as J;
    use Op::*;
    use Width::{W32, W64};
    Some(match op {
        Jeq64Imm | Jeq64Reg => (J::Eq, W64),
        Jgt64Imm | Jgt64Reg => (J::Gt, W64),
        Jge64Imm | Jge64Reg => (J::Ge, W64),
        Jset64Imm | Jset64Reg => (J::Set, W64),
        Jne64Imm | Jne64Reg => (J::Ne, W64),
        Jsgt64Imm | Jsgt64Reg => (J::Sgt, W64),
        Jsge64Imm | Jsge64Reg => (J::Sge, W64),
        Jlt64Imm | Jlt64Reg => (J::Lt, W64),
        Jle64Imm | Jle64Reg => (J::Le, W64),
        Jslt64Imm | Jslt64Reg => (J::Slt, W64),
        Jsle64Imm | Jsle64Reg => (J::Sle, W64),
        Jeq32Imm | Jeq32Reg => (J::Eq, W32),
        Jgt32Imm | Jgt32Reg => (J::Gt, W32),
        Jge32Imm | Jge32Reg => (J::Ge, W32),
        Jset32Imm | Jset32Reg => (J::Set, W32),
        Jne32Imm | Jne32Reg => (J::Ne, W32),
        Jsgt32Imm | Jsgt32Reg => (J::Sgt, W32),
        Jsge32Imm | Jsge32Reg => (J::Sge, W32),
        Jlt32Imm | Jlt32Reg => (J::Lt, W32),
        Jle32Imm | Jle32Reg => (J::Le, W32),
        Jslt32Imm | Jslt32Reg => (J::Slt, W32),
        Jsle32Imm | Jsle32Reg => (J::Sle, W32),
        _ => return None,
    })
}
