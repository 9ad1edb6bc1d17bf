//! Classic BPF after layout: the whole-program passes libpcap's optimizer makes on its
//! flow graph, done on the emitted program itself.
//!
//! The IR optimizer works on a tree, so it cannot see that two tests on different branches
//! of an `or` are the same test (the port checks behind `ip6 and (sctp or tcp or udp)`), or
//! that a test after a join is already decided on some of the edges into the join (the
//! `udp` test after the ARP and RARP branches of `host X`). Once the program is laid out
//! those are plain facts about edges, and this pass uses them, round after round until
//! nothing changes:
//!
//! 1. **Values and facts.** Every register and scratch cell holds a numbered value (a packet
//!    field `[k:size]`, `4*([k]&0xf)`, a constant, an operation on values; equal numbers
//!    mean equal values), and along each edge the facts the tests on the way established
//!    (a known value, a range, values ruled out, known bits) and how many bytes the packet
//!    is known to have. A join keeps what holds on every edge into it.
//! 2. **Jump threading.** An edge whose target is a run of loads and tests the edge's facts
//!    decide (`ldh [12]; jeq #0x800` after a test that found the type to be ARP) goes
//!    straight to where the run ends, when the registers the skipped loads would have set
//!    are dead there.
//! 3. **Redundant loads.** A load of a value a register already holds on every edge into it
//!    goes.
//! 4. **Dead code.** An instruction from which no path accepts becomes `ret #0`; a load
//!    whose result nobody reads goes, when it cannot abort or when every path from it to an
//!    accept loads at least as far into the packet (so the packet it would have rejected as
//!    too short is rejected anyway); stores nobody reads and tests whose two edges meet go.
//! 5. **Shared tails.** Instructions that do the same thing and go to the same places are
//!    one: every jump goes to the last copy within its reach, and the others fall away.
//!
//! Only accept and reject are observable in a classic program (an aborting load rejects), so
//! every step keeps the packets the program accepts, and the bytes it accepts them with.
//! Positions only shrink (removal), and a jump is only moved where its `jt`/`jf` still
//! reach, so the 255-instruction limit of conditional jumps holds throughout. A program
//! with a backward jump (libpcap's `protochain` loop) is returned as it is.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use crate::opt::FastHasher;

use weir_isa::cbpf::{CbpfInsn, CbpfOp, MEM_WORDS};

/// Rounds of all passes; each round that changes something shrinks the program.
const MAX_ROUNDS: usize = 12;
/// Values ruled out per fact (`jeq` chains longer than this keep the first ones).
const MAX_NE: usize = 8;
/// The largest offset an absolute load may name before it is an ancillary one (the
/// kernel's negative offsets), which this pass leaves alone.
const MAX_PLAIN_OFFSET: u32 = i32::MAX as u32;
/// Register slots: A, X, then the scratch cells.
const SLOTS: usize = 2 + MEM_WORDS as usize;
const A: usize = 0;
const X: usize = 1;

/// The tightened program: accepts the same packets, never longer.
pub fn tighten(program: &[CbpfInsn]) -> Vec<CbpfInsn> {
    tighten_rounds(program, true).0
}

/// [`tighten`] with the confirming round always run (never stopping on a round
/// [`Round::settles`] vouches for): the oracle for the settled stop's tests.
#[doc(hidden)]
pub fn tighten_with_confirming_round(program: &[CbpfInsn]) -> Vec<CbpfInsn> {
    tighten_rounds(program, false).0
}

/// [`tighten`], and the round [`Round::settles`] vouched for if it stopped on one (the
/// confirming round not run). With `may_settle` false every tightening ends with a
/// confirming round: the oracle the tests hold the settled stop to.
fn tighten_rounds(program: &[CbpfInsn], may_settle: bool) -> (Vec<CbpfInsn>, Option<Round>) {
    let mut p = program.to_vec();
    if !well_formed(&p) {
        return (p, None);
    }
    let mut ws = Workspace::take();
    let settled = tighten_in(&mut p, may_settle, &mut ws);
    ws.keep(program.len());
    let p = if p.len() <= program.len() { p } else { program.to_vec() };
    (p, settled)
}

/// The rounds of [`tighten_rounds`] on `p`, in the buffers of `ws`.
fn tighten_in(p: &mut Vec<CbpfInsn>, may_settle: bool, ws: &mut Workspace) -> Option<Round> {
    let Workspace { cur, sc, before } = ws;
    sc.reserve(p.len());
    let mut settled = None;
    // Each step is a function of the program alone, so once STEPS steps in a row (a whole
    // round's worth, wherever it starts) left the program as it was, every later step would
    // too, and the rounds that remain would end on this program: the loop stops there. (The
    // last round, which only confirms, stops after the step that changed something last in
    // the round before: port 22's skips and_tests and merge_tails.) A round whose changes
    // [`Round::settles`] proves could enable no further one stops the loop without the
    // confirming round.
    let mut unchanged_steps = 0;
    'rounds: for _ in 0..MAX_ROUNDS {
        let mut round = Round::default();
        for step in 0..STEPS {
            before.clear();
            before.extend_from_slice(p);
            let thread_settled = tighten_pass(step, p, cur, sc);
            let only_loads_dropped = may_settle && Round::only_loads_dropped(step, before, p);
            compact(p, sc);
            if p == before {
                unchanged_steps += 1;
                if unchanged_steps == STEPS {
                    break 'rounds;
                }
            } else {
                unchanged_steps = 0;
                round.changed[step] = true;
                // (compact making a test a `ja` is a change Round::settles does not cover)
                round.other |= step > 0
                    && !(only_loads_dropped && conditional_jumps(p) == conditional_jumps(before));
            }
            if may_settle {
                round.after_step(step, thread_settled, cur, before);
            }
        }
        if may_settle && round.settles(cur, sc) {
            settled = Some(round);
            break;
        }
    }
    settled
}

/// Everything a tightening writes besides the program: the analysis, the passes' buffers
/// and the copy of the program before each step.
struct Workspace {
    cur: Current,
    sc: Scratch,
    before: Vec<CbpfInsn>,
}

/// The longest program whose tightening leaves its [`Workspace`] to the thread: an analysis
/// holds a state of ~0.4 KB per instruction (compile-39), so a workspace kept for a
/// 4,096-instruction program would hold MBs for good; everyday filters are a few dozen
/// instructions.
const KEEP_WORKSPACE_UP_TO: usize = 256;

thread_local! {
    /// This thread's workspace from its last tightening (of at most
    /// [`KEEP_WORKSPACE_UP_TO`] instructions). Each tightening made ~22 allocations for its
    /// buffers (and the first analysis filled a new state vector): a tenth of tightening
    /// `host X and udp`. Only memory is kept here, never an answer ([`Workspace::take`]
    /// forgets what the buffers remember of the last program).
    static SPARE: RefCell<Option<Workspace>> = const { RefCell::new(None) };
}

impl Workspace {
    fn new() -> Workspace {
        Workspace { cur: Current::new(), sc: Scratch::default(), before: Vec::new() }
    }

    /// The thread's spare workspace, made to remember no program, or a new one.
    fn take() -> Workspace {
        let spare = SPARE.try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.take()));
        let Some(mut ws) = spare.ok().flatten() else { return Workspace::new() };
        // What the memos hold is another program's: [`Current::is_of`] and [`Live::of`]
        // answer false until they hold this one's, and [`compact`] checks again.
        ws.cur.made = 0;
        ws.sc.live.valid = false;
        ws.sc.known_compact.clear();
        ws
    }

    /// Leaves the workspace to the thread's next tightening, when the program was small.
    fn keep(self, len: usize) {
        if len <= KEEP_WORKSPACE_UP_TO {
            // (while the thread is torn down the workspace is freed, as it would be without this)
            let _ = SPARE.try_with(|s| {
                if let Ok(mut s) = s.try_borrow_mut() {
                    *s = Some(self);
                }
            });
        }
    }
}

/// The steps of a round, in order: thread, drop_redundant, drop_dead, and_tests,
/// merge_tails, each followed by [`compact`].
const STEPS: usize = 5;

/// Step `step` of a round on `p`: its pass, then [`compact`].
#[cfg(test)]
fn tighten_step(step: usize, p: &mut Vec<CbpfInsn>, cur: &mut Current, sc: &mut Scratch) {
    tighten_pass(step, p, cur, sc);
    compact(p, sc);
}

/// The pass of step `step` (without [`compact`]); for step 0, [`thread`]'s answers whether
/// the program was settled for threading (both true for the other steps).
fn tighten_pass(step: usize, p: &mut [CbpfInsn], cur: &mut Current, sc: &mut Scratch) -> Settled {
    match step {
        0 => {
            let an = current(cur, p);
            return thread(p, an, &mut sc.live, None);
        }
        1 => {
            if may_repeat_a_value(p) {
                let an = current(cur, p);
                drop_redundant(p, an);
            }
        }
        2 => {
            // Only indirect loads need the analysis (X's value, for how far they read).
            // drop_dead with indirect loads vouching for nothing drops a subset of the
            // loads it drops with their ends known (a larger end only raises what the paths
            // load): when that subset is every dead load it could drop, knowing the ends
            // would change nothing, so an analysis not at hand is made only when it keeps
            // one.
            let indirect =
                p.iter().any(|i| matches!(i.op, CbpfOp::LdIndW | CbpfOp::LdIndH | CbpfOp::LdIndB));
            let mut with_analysis = indirect && cur.is_of(p);
            let cautious = indirect && !with_analysis;
            if cautious {
                sc.copy.clear();
                sc.copy.extend_from_slice(p);
            }
            // The analysis held, when it is of the program drop_redundant was given and this
            // one is that program with the loads it dropped removed, answers for this one
            // through the positions kept ([`read_through_removals`]), in place of the
            // analysis the second try would make (tighten_rounds -9.2k instructions on `udp
            // and (port 67 or port 68)`, -6.4k on `tcp and not port 22`, bench/records/
            // 2026-12-02-compile-45.txt, measured before analyses resumed from a shared
            // prefix, compile-48; asked only then: when the first try keeps nothing,
            // the check would cost without saving).
            let mut through = false;
            // (one call site each: drop_dead stays inlined)
            loop {
                let an = if with_analysis {
                    Some((&*current(cur, p), None))
                } else if through {
                    Some((&cur.an, Some(sc.origin.as_slice())))
                } else {
                    None
                };
                load_ends(p, an, &mut sc.ends);
                let kept = drop_dead(p, &sc.ends, &mut sc.live, &mut sc.need);
                if !(cautious && kept) || with_analysis || through {
                    break;
                }
                p.copy_from_slice(&sc.copy);
                through = cur.made > 0
                    && read_through_removals(
                        &cur.of,
                        p,
                        &mut cur.an,
                        &mut sc.origin,
                        &mut sc.kept_at,
                    );
                with_analysis = !through;
            }
        }
        3 => and_tests(p, &mut sc.live, &mut sc.reach),
        _ => merge_tails(p, sc),
    }
    Settled { fully: true, for_the_check: true }
}

/// What a round of [`tighten`] changed, to tell whether the next round could change anything
/// (which otherwise takes that round, run to find nothing: ~12% of compiling `port 22` to
/// classic BPF, compile-36).
#[derive(Default)]
struct Round {
    /// The steps after which the program differed (pass and compact).
    changed: [bool; STEPS],
    /// [`thread`]'s answers on the round's first program.
    thread_settled: Settled,
    /// When the analysis held after drop_redundant was of the program thread left (P1 of
    /// [`Round::settles`]): [`Current::made`] then.
    threaded_analysis: Option<u32>,
    /// A change other than the ones [`Round::settles`] vouches for: drop_redundant's or
    /// drop_dead's other than [`Round::only_loads_dropped`], a `ja` made of a test by the
    /// compaction after one, any by and_tests or merge_tails.
    other: bool,
}

impl Round {
    /// Notes what step `step` left that [`Round::settles`] asks about; `before` is the
    /// program the step was given.
    fn after_step(
        &mut self,
        step: usize,
        thread_settled: Settled,
        cur: &Current,
        before: &[CbpfInsn],
    ) {
        match step {
            0 => self.thread_settled = thread_settled,
            1 if cur.is_of(before) => self.threaded_analysis = Some(cur.made),
            _ => {}
        }
    }

    /// True when pass `step` (before [`compact`]) took `before` to `after` by turning loads
    /// that read no register or cell ([`uses_defs`]) into `nop`s, at least one, and nothing
    /// else (a compaction alone changing the program is not vouched for): for
    /// drop_redundant anywhere, for drop_dead only the first instruction (no jump lands
    /// there, and what it held before is the entry value, which no load yields).
    fn only_loads_dropped(step: usize, before: &[CbpfInsn], after: &[CbpfInsn]) -> bool {
        let anywhere = match step {
            1 => true,
            2 => false,
            _ => return false,
        };
        before.len() == after.len()
            && before != after
            && before.iter().zip(after).enumerate().all(|(i, (b, a))| {
                let use_free_load = !b.op.is_jump() && !b.op.is_return() && uses_defs(b).0 == 0;
                a == b || (*a == nop() && use_free_load && (anywhere || i == 0))
            })
    }

    /// True when the round that ended on P3 proves that a next round would change nothing,
    /// so [`tighten`] may stop without running it. The round took P0 by thread (and
    /// compact) to P1, by drop_redundant to P2, by drop_dead to P3; and_tests and
    /// merge_tails left P3 as it was (so they would again). Required: every change after P1
    /// only dropped use-free loads ([`Round::only_loads_dropped`]: drop_redundant's anywhere,
    /// drop_dead's only at the head) and compact made no test a `ja`; and threading P1 is
    /// settled (no walk passes a place other than its edge's target where the slots it
    /// changed are dead, however it ends; no test decided): [`thread`]'s own
    /// answer when P1 is P0, else asked of the analysis of P1, when the one held is P1's
    /// (drop_redundant made it, and none was made since). The check ([`thread`] with
    /// `check`) also passes a walk that passes such a place and then ends on a test it does
    /// not decide (it threads nothing), unless drop_dead dropped the head and the walk
    /// passed a load that may stop the P3 walk sooner ([`Passed::fragile`]). When P1 is
    /// P0 and drop_dead dropped nothing, the check's answer is the one thread gave as it
    /// threaded P0 ([`Settled::for_the_check`]: thread changed nothing, so its walks on P0
    /// were the check's on P1, and with no head dropped no load is fragile), so the round
    /// that only drops repeated loads stops: the last round of `udp and (port 67 or port
    /// 68)` and `tcp and not port 22`, the second of `icmp6` (compile-41). Then thread,
    /// drop_redundant and drop_dead each leave P3 as it is, because:
    ///
    /// - **P1 to P2.** A load drop_redundant drops sets a slot to the value it holds on every
    ///   edge in; a packet value is only made by such a load, so every run to it already
    ///   proved its bytes: the analysis steps through it unchanged, and the analysis of P2 is
    ///   P1's without it (value numbers are compared only for equality). No jump lands on it
    ///   in a settled P1: a walk from that edge passes it (same value) to its successor,
    ///   where nothing changed. A walk passing it mid-run holds the same value too (a slot
    ///   differing from the analysis's is one a join made anew, and a packet value is not),
    ///   so P2's walks take P1's paths and end as they did. Dropping a load that reads
    ///   nothing only widens liveness, so a P2 walk passes no place with its changed slots
    ///   dead that the P1 walk did not: only its target, and it threads nothing. The tests
    ///   decided are the same (the same facts). drop_redundant on P2 finds the same slots at
    ///   every load it kept: none repeats a value.
    /// - **P2 to P3.** drop_dead dropped the head load, whose register is dead on every path:
    ///   wherever P2 holds that value in it, P3 holds the entry value (or a join of it), never
    ///   read and equal to no value a load makes. States differ only there and in fewer
    ///   proven bytes, facts not at all: the same tests are decided, and each walk in P3
    ///   takes a part of the P2 walk's path from its start (it may stop sooner at a load that
    ///   may now abort, and no longer passes a load giving the value the register held; the
    ///   P2 walk might have ended on an undecided test, where it threads nothing, and the P3
    ///   walk ends where it last passed a place with its changed slots dead: why settled asks
    ///   of every place passed, not only of the end) and finds no more of its changed slots
    ///   dead: again only its target. drop_redundant finds no load repeating the entry value.
    ///   drop_dead on P3: liveness, the packet ends and each instruction's need are P2's
    ///   without the head (nothing reads what it set), so it keeps what it kept.
    fn settles(&self, cur: &mut Current, sc: &mut Scratch) -> bool {
        if self.other || self.changed[3] || self.changed[4] {
            return false;
        }
        if !self.changed[0] {
            return if self.changed[2] {
                self.thread_settled.fully
            } else {
                self.thread_settled.for_the_check
            };
        }
        // (no analysis made since drop_redundant: the one held is still P1's, whose head is
        // P2's: drop_redundant never drops the first instruction, nothing being held yet)
        if self.threaded_analysis != Some(cur.made) {
            return false;
        }
        // (`None`: no head dropped; a dropped head that set no slot would be a change
        // [`Round::only_loads_dropped`] does not vouch for)
        let head = match cur.of.first() {
            Some(insn) if self.changed[2] => {
                let entry = State::entry();
                match effect(insn, &entry, &mut cur.an.values).set {
                    Some((_, v)) => Some(v),
                    None => return false,
                }
            }
            _ => None,
        };
        thread(&mut cur.of, &mut cur.an, &mut sc.live, Some(head)).for_the_check
    }
}

fn conditional_jumps(p: &[CbpfInsn]) -> usize {
    p.iter().filter(|i| i.op.is_conditional_jump()).count()
}

/// Buffers the passes reuse across a tightening: on a small program the passes' own work is
/// a few hundred instructions, and a fresh vector per pass per round cost as much again.
#[derive(Default)]
struct Scratch {
    live: Live,
    /// The last program [`is_compact`] found compact: [`compact`] on it again has nothing
    /// to check (a pass that changed nothing leaves it so).
    known_compact: Vec<CbpfInsn>,
    ends: Vec<u32>,
    need: Vec<u32>,
    reach: Vec<bool>,
    reach_after: Vec<bool>,
    copy: Vec<CbpfInsn>,
    at: Vec<usize>,
    /// [`read_through_removals`]' positions: of each instruction after the removals in the
    /// program before them, and the other way (a removed one's: the next kept one's).
    origin: Vec<usize>,
    kept_at: Vec<usize>,
    class: Vec<usize>,
    /// [`merge_tails`]'s classes: the instructions of class `c` from last to first are
    /// `first_member[c]`, then `next_member` of each in turn (`usize::MAX` ends a list).
    first_member: Vec<usize>,
    next_member: Vec<usize>,
    last_member: Vec<usize>,
    class_ids: HashMap<(CbpfOp, u32, usize, usize), usize, BuildHasherDefault<FastHasher>>,
}

impl Scratch {
    /// A fresh workspace with [`Scratch::reserve`]'s room, for tests.
    #[cfg(test)]
    fn with_room(len: usize) -> Scratch {
        let mut sc = Scratch::default();
        sc.reserve(len);
        sc
    }

    /// Room for a program of `len` instructions (programs only shrink; a spare workspace's
    /// buffers have it already, unless its last program was shorter). The buffers filled by
    /// a push or an insert per instruction would otherwise grow from empty by doubling in
    /// every tightening: [`merge_tails`]'s class map rehashed three times and its member
    /// lists and [`rewrite_compact`]'s positions reallocated four, ~8k of the ~139k
    /// instructions of tightening `port 22` (compile-emit-11).
    fn reserve(&mut self, len: usize) {
        // (emptied first, their users empty them anyway: `reserve` counts from the length, so
        // a spare one's leftovers would make it reallocate)
        self.at.clear();
        self.first_member.clear();
        self.last_member.clear();
        self.class_ids.clear();
        self.at.reserve(len + 1);
        self.first_member.reserve(len);
        self.last_member.reserve(len);
        self.class_ids.reserve(len);
    }
}

/// The analysis of a program, kept while the passes leave the program as it is: the round
/// that finds nothing more to do (every tightening ends with one) would otherwise analyze
/// the same program three times; and what the next program's analysis resumes from where
/// the two share a prefix ([`shared_prefix`]).
struct Current {
    of: Vec<CbpfInsn>,
    an: Analysis,
    /// Analyses made so far (0: none held): the same count later means the same analysis
    /// still held, of `of`.
    made: u32,
}

impl Current {
    fn new() -> Current {
        Current { of: Vec::new(), an: Analysis::new(), made: 0 }
    }

    /// True when the analysis held is `p`'s.
    fn is_of(&self, p: &[CbpfInsn]) -> bool {
        self.made > 0 && self.of == p
    }
}

/// The analysis of `p`, computed again only when `p` is not the program last analyzed, and
/// then only from where `p` and that program part ([`shared_prefix`]).
fn current<'a>(cur: &'a mut Current, p: &[CbpfInsn]) -> &'a mut Analysis {
    if !cur.is_of(p) {
        let keep = if cur.made > 0 { shared_prefix(&cur.of, p) } else { 0 };
        cur.of.clear();
        cur.of.extend_from_slice(p);
        cur.an.redo_from(p, keep);
        cur.made += 1;
    }
    &mut cur.an
}

/// Whether two instructions are the same to the analysis: a jump the same test (its
/// offsets are the caller's to compare: positions move), anything else the same exactly.
fn same_to_analysis(a: &CbpfInsn, b: &CbpfInsn) -> bool {
    if a.op.is_jump() {
        a.op == b.op && (a.op == CbpfOp::Ja || a.k == b.k)
    } else {
        a == b
    }
}

/// How many of its first instructions `new` shares with `old` as the analysis sees them: the
/// largest `k` such that each instruction before `k` is the same in both (a jump: the same
/// test, going to the same positions wherever either goes to one before `k`). The analysis
/// of `old` then holds the analysis of `new` before `k` ([`Analysis::redo_from`]).
fn shared_prefix(old: &[CbpfInsn], new: &[CbpfInsn]) -> usize {
    let mut k = old.len().min(new.len());
    let mut i = 0;
    while i < k {
        let (a, b) = (old[i], new[i]);
        if !same_to_analysis(&a, &b) {
            return i;
        }
        let (to_old, to_new) = (successors(old, i), successors(new, i));
        for n in 0..2 {
            if let (Some(t0), Some(t1)) = (to_old[n], to_new[n]) {
                if t0 != t1 {
                    k = k.min(t0.min(t1));
                }
            }
        }
        i += 1;
    }
    k
}

/// Forward jumps that stay inside, a return at the end, memory cells in range.
fn well_formed(p: &[CbpfInsn]) -> bool {
    if !p.last().is_some_and(|i| i.op.is_return()) {
        return false;
    }
    p.iter().enumerate().all(|(i, insn)| {
        let in_range = successors(p, i).iter().flatten().all(|&s| s < p.len());
        let cell_ok = !matches!(insn.op, CbpfOp::LdMem | CbpfOp::LdxMem | CbpfOp::St | CbpfOp::Stx)
            || insn.k < MEM_WORDS;
        let forward = insn.op != CbpfOp::Ja || insn.k < (1 << 30);
        in_range && cell_ok && forward
    })
}

/// Where instruction `i` may go next. Always inlined: every pass asks it of every
/// instruction, and `#[inline]` alone left it out of line in rewrite_compact, is_compact,
/// reachable and the analysis (several hundred calls a tightening of a small filter; inlined,
/// tighten of `host X and udp` is 4% cheaper).
#[inline(always)]
fn successors(p: &[CbpfInsn], i: usize) -> [Option<usize>; 2] {
    let insn = p[i];
    let next = i + 1;
    if insn.op.is_return() {
        [None, None]
    } else if insn.op == CbpfOp::Ja {
        [usize::try_from(insn.k).ok().and_then(|k| next.checked_add(k)), None]
    } else if insn.op.is_conditional_jump() {
        [Some(next + usize::from(insn.jt)), Some(next + usize::from(insn.jf))]
    } else {
        [Some(next), None]
    }
}

pub(super) fn is_accept(insn: &CbpfInsn) -> bool {
    match insn.op {
        CbpfOp::RetK => insn.k != 0,
        CbpfOp::RetA => true,
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------
// Values

type Val = u32;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Node {
    Const(u32),
    Len,
    /// `[off:size]`, an absolute load.
    Pkt(u32, u8),
    /// `[x + off:size]` with `x` the value numbered so.
    Ind(Val, u32, u8),
    /// `4*([off]&0xf)`.
    Msh(u32),
    /// An ALU operation (its `K` form) on two values.
    Alu(CbpfOp, Val, Val),
    Neg(Val),
    /// Whatever slot `slot` held on entry to instruction `at` (edges disagreed there).
    /// Within one run each instruction executes at most once (jumps go forward), so the
    /// name stands for one value.
    Entry(usize, usize),
}

impl Hash for Node {
    /// The variant and fields folded into one word, hashed once: the derived hash fed the
    /// hasher each field (and the variant as a word) in turn, most of a lookup's cost.
    /// Equal nodes give equal words; unequal ones rarely do (the table compares nodes).
    fn hash<H: Hasher>(&self, state: &mut H) {
        let (variant, a, b) = match *self {
            Node::Const(k) => (0, u64::from(k), 0),
            Node::Len => (1, 0, 0),
            Node::Pkt(off, size) => (2, u64::from(off), u64::from(size)),
            Node::Ind(x, off, size) => (3, u64::from(x) << 8 | u64::from(size), u64::from(off)),
            Node::Msh(off) => (4, u64::from(off), 0),
            Node::Alu(op, x, y) => (5 | u64::from(op as u8) << 3, u64::from(x), u64::from(y)),
            Node::Neg(x) => (6, u64::from(x), 0),
            Node::Entry(at, slot) => (7, at as u64, slot as u64),
        };
        state.write_u64(variant ^ a << 11 ^ b << 37);
    }
}

struct Values {
    nodes: Vec<Node>,
    /// The numbers of the nodes past the entry slots, open-addressed by the node's hash
    /// ([`FastHasher`], the IR's), [`NO_VALUE`] where free; its length a power of two, at
    /// least twice the nodes it holds. A lookup is a hash and (nearly always) one
    /// comparison. It replaced a scan of the numbers of the node's kind (a std map past 50
    /// values): `Values::id` ~99 -> ~74 instructions a call, and no per-kind lists and map to
    /// clear for each analysis (hot tighten of `port 22` -3%, compile-emit-9).
    table: Vec<Val>,
    /// 64 less log2 of the table's length: the hash's top bits are the first slot probed.
    shift: u32,
}

/// A free slot of [`Values::table`].
const NO_VALUE: Val = Val::MAX;

/// [`Values::table`]'s length to start with: room for the few dozen values a small
/// program's analysis numbers.
const FIRST_TABLE: usize = 128;

impl Values {
    /// Numbers the program's entry values first: slot `s` on entry is value `s`, so
    /// [`State::entry`] needs no lookups (each analysis starts from it, and drop_redundant
    /// again).
    fn new() -> Values {
        let mut nodes = Vec::with_capacity(4 * SLOTS);
        nodes.extend((0..SLOTS).map(|s| Node::Entry(0, s)));
        Values {
            nodes,
            table: vec![NO_VALUE; FIRST_TABLE],
            shift: 64 - FIRST_TABLE.trailing_zeros(),
        }
    }

    /// Forgets every value but the entry slots, keeping the allocations.
    fn reset(&mut self) {
        self.nodes.truncate(SLOTS);
        self.table.fill(NO_VALUE);
    }

    /// Where `n`'s number is in the table, or the free slot where it would go.
    #[inline(always)]
    fn slot_of(&self, n: &Node) -> usize {
        let mut h = FastHasher::default();
        n.hash(&mut h);
        let mask = self.table.len() - 1;
        let mut at = (h.finish() >> self.shift) as usize;
        loop {
            let v = self.table[at];
            if v == NO_VALUE || self.nodes[v as usize] == *n {
                return at;
            }
            at = (at + 1) & mask;
        }
    }

    fn id(&mut self, n: Node) -> Val {
        // The entry slots are numbered by position and not hashed: each analysis starts
        // with them.
        if let Node::Entry(0, s) = n {
            if s < SLOTS {
                return s as Val;
            }
        }
        let at = self.slot_of(&n);
        if self.table[at] != NO_VALUE {
            return self.table[at];
        }
        let v = self.nodes.len() as Val;
        self.nodes.push(n);
        self.table[at] = v;
        if 2 * (self.nodes.len() - SLOTS) > self.table.len() {
            self.grow();
        }
        v
    }

    /// Doubles the table and enters every number again.
    fn grow(&mut self) {
        let size = 2 * self.table.len();
        self.table.clear();
        self.table.resize(size, NO_VALUE);
        self.shift = 64 - size.trailing_zeros();
        for v in SLOTS..self.nodes.len() {
            let at = self.slot_of(&self.nodes[v]);
            self.table[at] = v as Val;
        }
    }

    fn node(&self, v: Val) -> Node {
        self.nodes[v as usize]
    }

    fn konst(&mut self, k: u32) -> Val {
        self.id(Node::Const(k))
    }

    /// `a op b`, folded when both are constants and the operation cannot abort.
    fn alu(&mut self, op: CbpfOp, a: Val, b: Val) -> Val {
        if let (Node::Const(x), Node::Const(y)) = (self.node(a), self.node(b)) {
            if let Some(r) = fold(op, x, y) {
                return self.konst(r);
            }
        }
        self.id(Node::Alu(op, a, b))
    }
}

fn fold(op: CbpfOp, a: u32, b: u32) -> Option<u32> {
    Some(match op {
        CbpfOp::AddK => a.wrapping_add(b),
        CbpfOp::SubK => a.wrapping_sub(b),
        CbpfOp::MulK => a.wrapping_mul(b),
        CbpfOp::DivK => a.checked_div(b)?,
        CbpfOp::ModK => a.checked_rem(b)?,
        CbpfOp::AndK => a & b,
        CbpfOp::OrK => a | b,
        CbpfOp::XorK => a ^ b,
        // Shifts by 32 or more differ between libpcap and the kernel: leave them.
        CbpfOp::LshK => a.checked_shl(b)?,
        CbpfOp::RshK => a.checked_shr(b)?,
        _ => return None,
    })
}

/// The `K` form of an ALU operation (value numbering treats `add x` as `add` of X's value).
fn alu_k(op: CbpfOp) -> Option<CbpfOp> {
    use CbpfOp::*;
    Some(match op {
        AddK | AddX => AddK,
        SubK | SubX => SubK,
        MulK | MulX => MulK,
        DivK | DivX => DivK,
        ModK | ModX => ModK,
        AndK | AndX => AndK,
        OrK | OrX => OrK,
        XorK | XorX => XorK,
        LshK | LshX => LshK,
        RshK | RshX => RshK,
        _ => return None,
    })
}

fn uses_x_operand(op: CbpfOp) -> bool {
    use CbpfOp::*;
    matches!(
        op,
        AddX | SubX
            | MulX
            | DivX
            | ModX
            | AndX
            | OrX
            | XorX
            | LshX
            | RshX
            | JeqX
            | JgtX
            | JgeX
            | JsetX
    )
}

// ---------------------------------------------------------------------------------------
// Facts

/// What is known about one value on an edge. Plain data (`Copy`): states are cloned on
/// every conditional jump and joined at every join, and a heap-allocated list of ruled-out
/// values made each of those an allocation.
#[derive(Clone, Copy, PartialEq, Debug)]
struct Fact {
    lo: u32,
    hi: u32,
    ne: RuledOut,
    ones: u32,
    zeros: u32,
}

/// Values ruled out by failed `jeq` tests, in the order they were learnt, at most
/// [`MAX_NE`]. Slots past `len` are always 0, so the derived equality compares the sets.
#[derive(Clone, Copy, PartialEq, Debug, Default)]
struct RuledOut {
    len: u8,
    v: [u32; MAX_NE],
}

impl RuledOut {
    const NONE: RuledOut = RuledOut { len: 0, v: [0; MAX_NE] };

    fn as_slice(&self) -> &[u32] {
        &self.v[..usize::from(self.len)]
    }

    fn contains(&self, k: u32) -> bool {
        self.as_slice().contains(&k)
    }

    /// Adds `k` when there is room and it is not there yet.
    fn add(&mut self, k: u32) {
        let len = usize::from(self.len);
        if len < MAX_NE && !self.contains(k) {
            self.v[len] = k;
            self.len += 1;
        }
    }

    /// The values both rule out, in `self`'s order.
    fn common(&self, o: &RuledOut) -> RuledOut {
        let mut out = RuledOut::default();
        for &k in self.as_slice() {
            if o.contains(k) {
                out.v[usize::from(out.len)] = k;
                out.len += 1;
            }
        }
        out
    }
}

impl Fact {
    const fn any() -> Fact {
        Fact { lo: 0, hi: u32::MAX, ne: RuledOut::NONE, ones: 0, zeros: 0 }
    }

    fn exactly(k: u32) -> Fact {
        Fact { lo: k, hi: k, ne: RuledOut::default(), ones: k, zeros: !k }
    }

    fn join(&self, o: &Fact) -> Fact {
        Fact {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
            ne: self.ne.common(&o.ne),
            ones: self.ones & o.ones,
            zeros: self.zeros & o.zeros,
        }
    }

    fn known(&self) -> Option<u32> {
        (self.lo == self.hi).then_some(self.lo)
    }

    /// The outcome of the test `value op k`, when the fact decides it.
    fn decide(&self, op: CbpfOp, k: u32) -> Option<bool> {
        if let Some(v) = self.known() {
            return Some(test(op, v, k));
        }
        match op {
            CbpfOp::JeqK | CbpfOp::JeqX => {
                let impossible = k < self.lo
                    || k > self.hi
                    || self.ne.contains(k)
                    || k & self.zeros != 0
                    || !k & self.ones != 0;
                impossible.then_some(false)
            }
            CbpfOp::JgtK | CbpfOp::JgtX => {
                if self.lo > k {
                    Some(true)
                } else if self.hi <= k {
                    Some(false)
                } else {
                    None
                }
            }
            CbpfOp::JgeK | CbpfOp::JgeX => {
                if self.lo >= k {
                    Some(true)
                } else if self.hi < k {
                    Some(false)
                } else {
                    None
                }
            }
            CbpfOp::JsetK | CbpfOp::JsetX => {
                if k & self.ones != 0 {
                    Some(true)
                } else if k & !self.zeros == 0 || self.hi < (k & k.wrapping_neg()) {
                    Some(false)
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// The fact once `value op k` came out `outcome`.
    fn learn(&mut self, op: CbpfOp, k: u32, outcome: bool) {
        match (op, outcome) {
            (CbpfOp::JeqK | CbpfOp::JeqX, true) => *self = Fact::exactly(k),
            (CbpfOp::JeqK | CbpfOp::JeqX, false) => {
                if k == self.lo && k < self.hi {
                    self.lo = k + 1;
                } else if k == self.hi && k > self.lo {
                    self.hi = k - 1;
                } else {
                    self.ne.add(k);
                }
            }
            (CbpfOp::JgtK | CbpfOp::JgtX, true) => self.lo = self.lo.max(k.saturating_add(1)),
            (CbpfOp::JgtK | CbpfOp::JgtX, false) => self.hi = self.hi.min(k),
            (CbpfOp::JgeK | CbpfOp::JgeX, true) => self.lo = self.lo.max(k),
            (CbpfOp::JgeK | CbpfOp::JgeX, false) => self.hi = self.hi.min(k.saturating_sub(1)),
            (CbpfOp::JsetK | CbpfOp::JsetX, true) if k.is_power_of_two() => self.ones |= k,
            (CbpfOp::JsetK | CbpfOp::JsetX, false) => self.zeros |= k,
            _ => {}
        }
        if self.lo == self.hi {
            let v = self.lo;
            self.ones = v;
            self.zeros = !v;
        }
    }
}

fn test(op: CbpfOp, a: u32, b: u32) -> bool {
    match op {
        CbpfOp::JeqK | CbpfOp::JeqX => a == b,
        CbpfOp::JgtK | CbpfOp::JgtX => a > b,
        CbpfOp::JgeK | CbpfOp::JgeX => a >= b,
        _ => a & b != 0,
    }
}

/// What the kind of a value says about it before any test.
fn base_fact(values: &Values, v: Val) -> Fact {
    match values.node(v) {
        Node::Const(k) => Fact::exactly(k),
        Node::Pkt(_, 1) | Node::Ind(_, _, 1) => Fact { hi: 0xff, zeros: !0xff, ..Fact::any() },
        Node::Pkt(_, 2) | Node::Ind(_, _, 2) => Fact { hi: 0xffff, zeros: !0xffff, ..Fact::any() },
        Node::Msh(_) => Fact { hi: 60, zeros: !0x3c, ..Fact::any() },
        Node::Alu(CbpfOp::AndK, _, m) => match values.node(m) {
            Node::Const(m) => Fact { hi: m, zeros: !m, ..Fact::any() },
            _ => Fact::any(),
        },
        Node::Alu(CbpfOp::RshK, _, s) => match values.node(s) {
            Node::Const(s) if s < 32 => Fact { hi: u32::MAX >> s, ..Fact::any() },
            _ => Fact::any(),
        },
        _ => Fact::any(),
    }
}

/// The facts tests established on an edge, by value, sorted by value number. A handful per
/// edge, so up to [`INLINE_FACTS`] live in the state itself and a copy ([`Facts::clone_from`])
/// moves only the ones there are: the analysis copies a state on every edge, and a heap list
/// made each state's first copy an allocation. More facts than that go to the heap, in the
/// same order.
// The inline variant is large on purpose: boxing it would be the allocation it avoids.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Facts {
    Inline { len: u8, items: [(Val, Fact); INLINE_FACTS] },
    Heap(Vec<(Val, Fact)>),
}

/// Facts a state holds without a heap allocation (a long chain of tests on one path may
/// know more; those states spill).
const INLINE_FACTS: usize = 6;

impl Default for Facts {
    fn default() -> Facts {
        Facts::Inline { len: 0, items: [(0, Fact::any()); INLINE_FACTS] }
    }
}

impl PartialEq for Facts {
    /// The same facts, however they are stored.
    fn eq(&self, o: &Facts) -> bool {
        self.as_slice() == o.as_slice()
    }
}

impl Clone for Facts {
    fn clone(&self) -> Facts {
        let mut copy = Facts::default();
        copy.clone_from(self);
        copy
    }

    /// Copies the facts there are, into the room `self` has (inline, or its heap list's).
    fn clone_from(&mut self, o: &Facts) {
        let from = o.as_slice();
        match self {
            Facts::Inline { len, items } if from.len() <= INLINE_FACTS => {
                items[..from.len()].copy_from_slice(from);
                *len = from.len() as u8;
            }
            Facts::Heap(list) => {
                list.clear();
                list.extend_from_slice(from);
            }
            Facts::Inline { .. } => *self = Facts::Heap(from.to_vec()),
        }
    }
}

impl Facts {
    fn as_slice(&self) -> &[(Val, Fact)] {
        match self {
            Facts::Inline { len, items } => &items[..usize::from(*len)],
            Facts::Heap(list) => list,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [(Val, Fact)] {
        match self {
            Facts::Inline { len, items } => &mut items[..usize::from(*len)],
            Facts::Heap(list) => list,
        }
    }

    fn clear(&mut self) {
        self.truncate(0);
    }

    fn truncate(&mut self, n: usize) {
        match self {
            Facts::Inline { len, .. } => *len = (*len).min(n as u8),
            Facts::Heap(list) => list.truncate(n),
        }
    }

    /// Where the list holds `v`'s fact (`Ok`), or where it would go (`Err`).
    fn find(&self, v: Val) -> Result<usize, usize> {
        self.as_slice().binary_search_by_key(&v, |&(w, _)| w)
    }

    fn get(&self, v: Val) -> Option<&Fact> {
        let list = self.as_slice();
        list.get(self.find(v).ok()?).map(|(_, f)| f)
    }

    #[cfg(test)]
    fn set(&mut self, v: Val, f: Fact) {
        match self.find(v) {
            Ok(at) => self.as_mut_slice()[at].1 = f,
            Err(at) => self.insert(at, (v, f)),
        }
    }

    /// Adds a fact after the others (the caller keeps the order).
    #[cfg(test)]
    fn push(&mut self, item: (Val, Fact)) {
        let at = self.as_slice().len();
        self.insert(at, item);
    }

    fn insert(&mut self, at: usize, item: (Val, Fact)) {
        match self {
            Facts::Inline { len, items } if usize::from(*len) < INLINE_FACTS => {
                let n = usize::from(*len);
                items.copy_within(at..n, at + 1);
                items[at] = item;
                *len += 1;
            }
            Facts::Inline { items, .. } => {
                let mut list = Vec::with_capacity(2 * INLINE_FACTS);
                list.extend_from_slice(&items[..at]);
                list.push(item);
                list.extend_from_slice(&items[at..]);
                *self = Facts::Heap(list);
            }
            Facts::Heap(list) => list.insert(at, item),
        }
    }
}

/// The machine state on an edge.
#[derive(PartialEq, Debug)]
struct State {
    slots: [Val; SLOTS],
    facts: Facts,
    /// The packet has at least this many captured bytes (a load that far succeeded).
    len_ok: u32,
}

impl Clone for State {
    fn clone(&self) -> State {
        State { slots: self.slots, facts: self.facts.clone(), len_ok: self.len_ok }
    }

    /// In place, keeping the fact list's allocation (the derived one would allocate anew).
    fn clone_from(&mut self, o: &State) {
        self.slots = o.slots;
        self.facts.clone_from(&o.facts);
        self.len_ok = o.len_ok;
    }
}

impl State {
    /// Becomes the state on entry, keeping the fact list's allocation.
    fn reset_to_entry(&mut self) {
        self.slots = std::array::from_fn(|s| s as Val);
        self.facts.clear();
        self.len_ok = 0;
    }

    /// What reaches `at` from both `self` and `o`, in place of `self`: the same state as
    /// [`State::join`] (value numbers taken in the same order), without a new fact list.
    fn join_in_place(&mut self, o: &State, at: usize, values: &mut Values) {
        for (s, slot) in self.slots.iter_mut().enumerate() {
            if *slot != o.slots[s] {
                *slot = values.id(Node::Entry(at, s));
            }
        }
        let theirs = o.facts.as_slice();
        let mine = self.facts.as_mut_slice();
        let (mut i, mut k, mut kept) = (0, 0, 0);
        while let (Some(&(v, f)), Some(&(w, g))) = (mine.get(i), theirs.get(k)) {
            if v <= w {
                i += 1;
            }
            if w <= v {
                k += 1;
            }
            if v == w {
                let j = f.join(&g);
                if j != base_fact(values, v) {
                    mine[kept] = (v, j);
                    kept += 1;
                }
            }
        }
        self.facts.truncate(kept);
        self.len_ok = self.len_ok.min(o.len_ok);
    }

    /// The state on entry: slot `s` holds `Entry(0, s)`, which [`Values::new`] numbered `s`.
    fn entry() -> State {
        State { slots: std::array::from_fn(|s| s as Val), facts: Facts::default(), len_ok: 0 }
    }

    fn fact(&self, values: &Values, v: Val) -> Fact {
        self.facts.get(v).copied().unwrap_or_else(|| base_fact(values, v))
    }

    /// The join as a new state: [`State::join_in_place`]'s oracle.
    #[cfg(test)]
    fn join(&self, o: &State, at: usize, values: &mut Values) -> State {
        let mut slots = self.slots;
        for (s, slot) in slots.iter_mut().enumerate() {
            if *slot != o.slots[s] {
                *slot = values.id(Node::Entry(at, s));
            }
        }
        let mut facts = Facts::default();
        // Both lists are sorted by value: one merge finds the values both edges know of.
        let (mut i, mut k) = (0, 0);
        while let (Some(&(v, f)), Some(&(w, g))) =
            (self.facts.as_slice().get(i), o.facts.as_slice().get(k))
        {
            if v <= w {
                i += 1;
            }
            if w <= v {
                k += 1;
            }
            if v == w {
                let j = f.join(&g);
                if j != base_fact(values, v) {
                    facts.push((v, j));
                }
            }
        }
        State { slots, facts, len_ok: self.len_ok.min(o.len_ok) }
    }
}

/// What executing a non-jump instruction does: the slot it sets and the value, whether it
/// may abort here, and the bytes it proves present when it does not.
struct Effect {
    set: Option<(usize, Val)>,
    may_abort: bool,
    proves: u32,
}

fn effect(insn: &CbpfInsn, s: &State, values: &mut Values) -> Effect {
    use CbpfOp::*;
    let k = insn.k;
    let plain = |set, may_abort, proves| Effect { set: Some(set), may_abort, proves };
    let size = |op| match op {
        LdAbsW | LdIndW => 4u8,
        LdAbsH | LdIndH => 2,
        _ => 1,
    };
    match insn.op {
        LdImm => plain((A, values.konst(k)), false, 0),
        LdxImm => plain((X, values.konst(k)), false, 0),
        LdLen => plain((A, values.id(Node::Len)), false, 0),
        LdxLen => plain((X, values.id(Node::Len)), false, 0),
        LdMem => plain((A, s.slots[2 + k as usize]), false, 0),
        LdxMem => plain((X, s.slots[2 + k as usize]), false, 0),
        St => plain((2 + k as usize, s.slots[A]), false, 0),
        Stx => plain((2 + k as usize, s.slots[X]), false, 0),
        Tax => plain((X, s.slots[A]), false, 0),
        Txa => plain((A, s.slots[X]), false, 0),
        LdAbsW | LdAbsH | LdAbsB => {
            let n = size(insn.op);
            if k > MAX_PLAIN_OFFSET {
                // Ancillary data: a value of its own at each place it is read.
                return Effect { set: None, may_abort: true, proves: 0 };
            }
            let end = k.saturating_add(u32::from(n));
            plain((A, values.id(Node::Pkt(k, n))), end > s.len_ok, end)
        }
        LdIndW | LdIndH | LdIndB => {
            let n = size(insn.op);
            let v = values.id(Node::Ind(s.slots[X], k, n));
            plain((A, v), true, k.saturating_add(u32::from(n)))
        }
        LdxMsh => {
            let end = k.saturating_add(1);
            plain((X, values.id(Node::Msh(k))), end > s.len_ok, end)
        }
        Neg => plain((A, values.id(Node::Neg(s.slots[A]))), false, 0),
        op => match alu_k(op) {
            Some(kop) => {
                let b = if uses_x_operand(op) { s.slots[X] } else { values.konst(k) };
                let may_abort =
                    matches!(kop, DivK | ModK) && s.fact(values, b).decide(JeqK, 0) != Some(false);
                plain((A, values.alu(kop, s.slots[A], b)), may_abort, 0)
            }
            None => Effect { set: None, may_abort: true, proves: 0 },
        },
    }
}

/// Applies a non-jump instruction to a state.
fn step(insn: &CbpfInsn, at: usize, s: &mut State, values: &mut Values) {
    let e = effect(insn, s, values);
    match e.set {
        Some((slot, v)) => s.slots[slot] = v,
        None => s.slots[A] = values.id(Node::Entry(at + 1, A)),
    }
    s.len_ok = s.len_ok.max(e.proves);
}

/// What conditional jump `insn` reads from a state: A's value and its fact there, where the
/// state's fact list holds that fact (`Ok`) or would insert it (`Err`), and the operand.
/// [`examine`] looks the fact up once for both the outcome and what each edge learns, and
/// [`teach`] writes at the position found (each edge is a copy of the state examined, so
/// its list is the same). A lookup for the outcome, another for the lesson and one per edge
/// to write were ~4% of tightening `port 22` (compile-emit-9).
#[derive(Clone, Copy)]
struct Lesson {
    a: Val,
    fact: Fact,
    at: Result<usize, usize>,
    k: u32,
}

/// The outcome of conditional jump `insn` in state `s` when `s` decides it, and what the test
/// teaches its edges (`None` when the operand is an X that `s` does not know: the test then
/// teaches nothing).
fn examine(insn: &CbpfInsn, s: &State, values: &Values) -> (Option<bool>, Option<Lesson>) {
    let a = s.slots[A];
    let (k, same) = if uses_x_operand(insn.op) {
        let x = s.slots[X];
        // A tested against itself.
        let same = match insn.op {
            CbpfOp::JeqX | CbpfOp::JgeX if x == a => Some(true),
            CbpfOp::JgtX if x == a => Some(false),
            _ => None,
        };
        (s.fact(values, x).known(), same)
    } else {
        (Some(insn.k), None)
    };
    let Some(k) = k else { return (same, None) };
    let at = s.facts.find(a);
    let fact = match at {
        Ok(i) => s.facts.as_slice()[i].1,
        Err(_) => base_fact(values, a),
    };
    let decided = same.or_else(|| fact.decide(insn.op, k));
    (decided, Some(Lesson { a, fact, at, k }))
}

/// Writes into `s` (a copy of the state the [`Lesson`] was taken from) what the test coming
/// out `outcome` teaches.
fn teach(insn: &CbpfInsn, lesson: &Option<Lesson>, s: &mut State, outcome: bool) {
    if let Some(l) = lesson {
        let mut f = l.fact;
        f.learn(insn.op, l.k, outcome);
        match l.at {
            Ok(i) => s.facts.as_mut_slice()[i].1 = f,
            Err(i) => s.facts.insert(i, (l.a, f)),
        }
    }
}

/// What runs bring to each instruction: the slots on entry (`None` where no run goes; what
/// [`drop_redundant`] and [`load_ends`] read), and for a jump the whole state on entry (the
/// join of the edges into it, [`Analysis::input`]).
///
/// A return gets no state (its slots are `None` whether or not a run goes there): nothing
/// reads one (drop_redundant and load_ends ask about loads, [`thread`] about jumps, and a
/// walk stops at a return with its own state), and the edges into the returns were half
/// of the joins in analyzing `port 22` (its accept and reject each end several paths).
/// Leaving them out leaves out the join values they named, nothing else: the values
/// numbered keep their order, so the fact lists are ordered as before.
///
/// The states live in one vector kept across a tightening's analyses and are written in
/// place (`clone_from`, [`State::join_in_place`]): a state moved or cloned per edge cost an
/// allocation and a free per edge, most of a small program's analysis. The state of a
/// non-jump is stepped in place into its successor's, so only jumps keep their in-state.
struct Analysis {
    values: Values,
    slots: Vec<Option<[Val; SLOTS]>>,
    /// The state on entry to each instruction, meaningful where `reached`; for a non-jump
    /// it is overwritten by the step (only its slots are kept, in `slots`).
    states: Vec<State>,
    reached: Vec<bool>,
    /// A jump's edge being built (a copy of its in-state that learns the outcome).
    edge: State,
}

impl Analysis {
    fn new() -> Analysis {
        Analysis {
            values: Values::new(),
            slots: Vec::new(),
            states: Vec::new(),
            reached: Vec::new(),
            edge: State::entry(),
        }
    }

    /// The state on entry to jump `i`, if a run reaches it.
    fn input(&self, i: usize) -> Option<&State> {
        self.reached.get(i).copied().unwrap_or(false).then(|| &self.states[i])
    }

    /// Analyzes `p` from scratch in place of what this held, in its buffers, from fresh
    /// value numbers: the tests' oracle for [`Analysis::redo_from`].
    #[cfg(test)]
    fn redo(&mut self, p: &[CbpfInsn]) {
        self.redo_from(p, 0);
    }

    /// Analyzes `p` in place of what this held, keeping what it holds of the instructions
    /// before `keep`: `keep` is 0, or [`shared_prefix`] of the program analyzed last and `p`.
    ///
    /// Why the kept part is `p`'s. The analysis goes forward: the state entering `i` is
    /// the join of the edges into `i`, all from instructions before `i`, and once the loop
    /// is past `i` nothing writes `i`'s state, slots or reach again (edges only go forward).
    /// Before `keep` both programs have the same instructions, and each edge between two of
    /// them is in both; so by induction the states entering them are the same in both
    /// analyses, and so are the states stepped through (a non-jump's state is kept after its
    /// step) and the edges they send on. Only the edges from the prefix into `keep` and
    /// past it go elsewhere in `p`: they flow again, in the same order (by instruction, then
    /// taken before not taken) as a new analysis sends them before it comes to `keep`, into
    /// positions forgotten; from `keep` on the analysis runs as a new one would.
    ///
    /// The value numbers are not a new analysis's: the table keeps every value numbered
    /// since the last fresh start (the old program's, and its walks'), and a value met again
    /// keeps its number. But a number still names one value (a node of numbered operands),
    /// and every answer compares numbers for equality or reads their nodes; fact lists are
    /// sorted by number, which orders them otherwise and changes no fact (a join meets the
    /// facts of each value both edges know, a test finds its value's fact by number; the
    /// values a fact rules out keep the order they were learnt in). So the answers are a
    /// new analysis's under a renaming of its numbers.
    fn redo_from(&mut self, p: &[CbpfInsn], keep: usize) {
        if self.states.len() < p.len() {
            self.states.resize_with(p.len(), State::entry);
        }
        self.reached.truncate(keep);
        self.reached.resize(p.len(), false);
        self.slots.truncate(keep);
        self.slots.resize(p.len(), None);
        if keep == 0 {
            self.values.reset();
            if let Some(first) =
                self.states.first_mut().filter(|_| p.first().is_some_and(|i| !i.op.is_return()))
            {
                first.reset_to_entry();
                self.reached[0] = true;
            }
        }
        // The prefix's states and slots are `p`'s already: only its edges past it flow.
        for i in 0..keep {
            if self.reached[i] && successors(p, i).into_iter().flatten().any(|to| to >= keep) {
                self.send_edges::<true>(p, i, keep);
            }
        }
        for i in keep..p.len() {
            if !self.reached[i] {
                continue;
            }
            self.slots[i] = Some(self.states[i].slots);
            let insn = p[i];
            if insn.op.is_return() {
                continue;
            }
            if !insn.op.is_jump() {
                step(&insn, i, &mut self.states[i], &mut self.values);
            }
            // (every edge goes forward, past `i`)
            self.send_edges::<false>(p, i, i + 1);
        }
    }

    /// Sends the edges out of `i` (a non-jump's state already stepped) into their targets:
    /// with `PAST_ONLY`, only those going to `past` or beyond.
    #[inline(always)]
    fn send_edges<const PAST_ONLY: bool>(&mut self, p: &[CbpfInsn], i: usize, past: usize) {
        let insn = p[i];
        let succ = successors(p, i);
        let flows = |to: &usize| (!PAST_ONLY || *to >= past) && !p[*to].op.is_return();
        let values = &mut self.values;
        if !insn.op.is_jump() {
            if let Some(to) = succ[0].filter(flows) {
                flow_into(&mut self.states, &mut self.reached, Some(i), &self.edge, to, values);
            }
            return;
        }
        let (decided, lesson) = if insn.op == CbpfOp::Ja {
            (Some(true), None)
        } else {
            examine(&insn, &self.states[i], values)
        };
        match decided {
            // One edge: it carries the in-state as it is.
            Some(outcome) => {
                if let Some(to) = succ[usize::from(!outcome)].filter(flows) {
                    flow_into(&mut self.states, &mut self.reached, Some(i), &self.edge, to, values);
                }
            }
            // Two edges, each the in-state and what its outcome teaches: built in place
            // where no edge came yet, else in `edge` and joined.
            None => {
                for (n, outcome) in [(0, true), (1, false)] {
                    let Some(to) = succ[n].filter(flows) else {
                        continue;
                    };
                    let (before, after) = self.states.split_at_mut(to);
                    let dst = &mut after[0];
                    if self.reached[to] {
                        self.edge.clone_from(&before[i]);
                        teach(&insn, &lesson, &mut self.edge, outcome);
                        dst.join_in_place(&self.edge, to, values);
                    } else {
                        dst.clone_from(&before[i]);
                        teach(&insn, &lesson, dst, outcome);
                        self.reached[to] = true;
                    }
                }
            }
        }
    }
}

/// Brings the state on an edge into `to` (a copy where no edge came yet, else the join):
/// the state is `states[from]` when `from` is given, else `edge`. Edges go forward (`to >
/// from`), so the two never alias.
fn flow_into(
    states: &mut [State],
    reached: &mut [bool],
    from: Option<usize>,
    edge: &State,
    to: usize,
    values: &mut Values,
) {
    let (before, after) = states.split_at_mut(to);
    let out = match from {
        Some(i) => &before[i],
        None => edge,
    };
    let dst = &mut after[0];
    if reached[to] {
        dst.join_in_place(out, to, values);
    } else {
        dst.clone_from(out);
        reached[to] = true;
    }
}

/// The edges out of jump `insn` entered in state `s`: the outcome `s` decides (a `ja`: the
/// taken one), else what the test teaches each edge.
struct Edges {
    decided: Option<bool>,
    lesson: Option<Lesson>,
}

impl Edges {
    fn of(insn: &CbpfInsn, s: &State, values: &Values) -> Edges {
        let (decided, lesson) =
            if insn.op == CbpfOp::Ja { (Some(true), None) } else { examine(insn, s, values) };
        Edges { decided, lesson }
    }

    /// True when `s` rules the `n`th edge (0: taken or the `ja` target, 1: not taken) out.
    fn rules_out(&self, n: usize) -> bool {
        self.decided.is_some_and(|known| known != (n == 0))
    }

    /// The state on the `n`th edge, one [`Edges::rules_out`] leaves, in `into`.
    fn state(&self, insn: &CbpfInsn, s: &State, n: usize, into: &mut State) {
        into.clone_from(s);
        if self.decided.is_none() {
            teach(insn, &self.lesson, into, n == 0);
        }
    }

    /// True when a [`walk`] along the `n`th edge into `target` would stop at `target` itself,
    /// passing nothing and threading nothing, whatever else the edge's state holds: a return
    /// or a store; a packet load that may abort here and changes its register (the edge's
    /// slots and proven bytes are `s`'s, which its lesson leaves alone); a test of A against
    /// a constant the edge's fact of A does not decide (A holds `s`'s value, whose fact on
    /// the edge is the one [`Edges::state`] teaches). [`thread`] then makes no copy of the
    /// state: a third of `port 22`'s edges, and its walks are half of a thread pass. The
    /// load's value is numbered as the walk would have numbered it, in the same order.
    fn walk_stops_at_once(
        &self,
        insn: &CbpfInsn,
        s: &State,
        n: usize,
        target: &CbpfInsn,
        values: &mut Values,
    ) -> bool {
        use CbpfOp::*;
        match target.op {
            St | Stx => true,
            op if op.is_return() => true,
            LdAbsW | LdAbsH | LdAbsB | LdIndW | LdIndH | LdIndB | LdxMsh => {
                // One within the proven bytes cannot abort: the walk goes on and numbers its
                // value (asking effect here too would look it up twice).
                if load_end(target).is_some_and(|end| end <= s.len_ok) {
                    return false;
                }
                let e = effect(target, s, values);
                e.set.is_none_or(|(slot, v)| e.may_abort && s.slots[slot] != v)
            }
            op if op.is_conditional_jump() && !uses_x_operand(op) => {
                let fact = match (self.decided, &self.lesson) {
                    (None, Some(l)) => {
                        let mut f = l.fact;
                        f.learn(insn.op, l.k, n == 0);
                        f
                    }
                    _ => s.fact(values, s.slots[A]),
                };
                fact.decide(op, target.k).is_none()
            }
            _ => false,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Liveness and reach

/// Slots read before being written on some path from each instruction (bit per slot).
/// [`live_in`] of the program last asked about, kept: the passes of a round that change
/// nothing ask about the same program.
#[derive(Default)]
struct Live {
    of: Vec<CbpfInsn>,
    live: Vec<u32>,
    /// False until the first computation.
    valid: bool,
}

impl Live {
    fn of(&mut self, p: &[CbpfInsn]) -> &[u32] {
        if !self.valid || self.of != p {
            self.of.clear();
            self.of.extend_from_slice(p);
            live_in(p, &mut self.live);
            self.valid = true;
        }
        &self.live
    }
}

fn live_in(p: &[CbpfInsn], live: &mut Vec<u32>) {
    live.clear();
    live.resize(p.len() + 1, 0);
    for i in (0..p.len()).rev() {
        let insn = p[i];
        let mut out = 0;
        for s in successors(p, i).into_iter().flatten() {
            out |= live[s];
        }
        let (uses, defs) = uses_defs(&insn);
        live[i] = (out & !defs) | uses;
    }
}

fn bit(slot: usize) -> u32 {
    1 << slot
}

fn uses_defs(insn: &CbpfInsn) -> (u32, u32) {
    use CbpfOp::*;
    let cell = || bit(2 + (insn.k % MEM_WORDS) as usize);
    match insn.op {
        LdImm | LdLen | LdAbsW | LdAbsH | LdAbsB => (0, bit(A)),
        LdIndW | LdIndH | LdIndB => (bit(X), bit(A)),
        LdMem => (cell(), bit(A)),
        LdxImm | LdxLen | LdxMsh => (0, bit(X)),
        LdxMem => (cell(), bit(X)),
        St => (bit(A), cell()),
        Stx => (bit(X), cell()),
        Tax => (bit(A), bit(X)),
        Txa => (bit(X), bit(A)),
        RetA => (bit(A), 0),
        RetK | Ja => (0, 0),
        Neg => (bit(A), bit(A)),
        op if uses_x_operand(op) => (bit(A) | bit(X), if op.is_jump() { 0 } else { bit(A) }),
        op if op.is_jump() => (bit(A), 0),
        _ => (bit(A), bit(A)),
    }
}

/// How far into the packet each instruction surely loads when it does not abort: absolute
/// loads, and `[x + k]` where X is `4*([j]&0xf)` or a small constant (X is unsigned, so the
/// load reaches at least `k + size`; a huge X could wrap into the kernel's negative
/// offsets, so other X values do not count).
///
/// `an` is the analysis of `p` (with no positions), or of a program `p` was made of by
/// removals, with the position there of each instruction of `p` ([`read_through_removals`]);
/// it may be `None` only when `p` has no indirect loads.
fn load_ends(p: &[CbpfInsn], an: Option<(&Analysis, Option<&[usize]>)>, ends: &mut Vec<u32>) {
    ends.clear();
    ends.extend(p.iter().enumerate().map(|(i, insn)| {
        if let Some(end) = load_end(insn) {
            return end;
        }
        let n = match insn.op {
            CbpfOp::LdIndW => 4,
            CbpfOp::LdIndH => 2,
            CbpfOp::LdIndB => 1,
            _ => return 0,
        };
        // (the caller passes the analysis whenever the program has indirect loads;
        // without it, the cautious answer: no sure end)
        let Some((an, origin)) = an else { return 0 };
        // X on entry is X after: the load sets only A.
        let Some(slots) = an.slots[origin.map_or(i, |o| o[i])] else { return 0 };
        let x = match an.values.node(slots[X]) {
            Node::Msh(_) => 0,
            Node::Const(c) if c <= 0xffff => c,
            _ => return 0,
        };
        if insn.k > MAX_PLAIN_OFFSET / 2 {
            return 0;
        }
        insn.k + n + x
    }));
}

/// True when `after` is `before` with instructions removed that the analysis `an` of `before`
/// finds setting a slot to the value it already holds (what [`drop_redundant`] drops), and
/// `ja +0`s (which a compaction may leave: a `ja` over code it removed), and nothing else
/// changed: every other instruction kept, in order, the same, and each jump
/// going to the same instruction, or where it went to a removed one, to the first kept one
/// after it (what [`compact`] makes of the `nop`s); an instruction falling into a removed
/// one sets a slot. `origin[j]` is then the position in `before` of `after`'s instruction
/// `j`, where `an` answers for it as the analysis of `after` would, up to the names of the
/// values: the same instructions reached, and in each slot the same constant, packet field,
/// `4*([k]&0xf)` or length, or a value of neither kind in both (what [`load_ends`] reads).
///
/// Why, by induction over `after`'s instructions in order (the analysis goes forward). The
/// edges into `j` are those into `origin[j]` and into the run of removed instructions just
/// before it (entered by jumps, or by falling through from the kept instruction before the
/// run): the jumps go where they went, or past the run. A removed instruction takes the
/// state it is entered in on as it is: a `ja` carries its in-state; a load sets a slot to
/// the value it holds already, facts are untouched, and the bytes it proves are proven
/// already (a slot holds `[k:n]`, `[x+k:n]`
/// or `4*([k]&0xf)` only after a load that proved as much on every run to it: a join keeps
/// a value only when every edge brought it, and keeps the fewest bytes proven). So the state
/// entering `origin[j]` is the join of the same edges' states as the state entering `j`,
/// grouped into joins at the run's instructions first, and the edges' states agree by
/// induction. Joins do not depend on the grouping or order: a slot keeps a value exactly
/// when every edge brings it (else it is named `Entry` of the join's position, a name no
/// edge brings: the one instruction naming by position is one setting no slot, which names
/// A `Entry` of the next position, and none falls into a removed one); a fact is the
/// componentwise meet of the edges' facts of the value (bounds, bits, the set of values
/// ruled out; an edge with no fact of it has the value's base fact, which every learnt fact
/// is within), kept when it is more than the base fact; the proven bytes the fewest. An
/// `Entry` name made at a removed instruction reaches `origin[j]` only when no other edge
/// joins on the way, and then `j` names the same slots `Entry(j, s)`: the names match one
/// to one (value numbers may come in another order, e.g. stepping a removed `and #k`
/// numbers `k`, but they are compared only for equality and fact lists are sorted by
/// them). So the same tests are decided, the same facts learnt and the same edges taken.
///
/// (Not covered, so answered false: [`compact`] turning a test whose two edges now meet into
/// a `ja`, which keeps facts the join of the two edges' lessons would lose; a `ja` to a
/// return into the return; a jump to an older `ja` going on to its target; code found
/// unreachable.)
///
/// Not inlined: asked once in a few tightenings, and inlined into the rounds' loop it cost
/// every tightening ~0.4% more instructions (a sweep of the everyday filters).
#[inline(never)]
fn read_through_removals(
    before: &[CbpfInsn],
    after: &[CbpfInsn],
    an: &mut Analysis,
    origin: &mut Vec<usize>,
    kept_at: &mut Vec<usize>,
) -> bool {
    if after.len() >= before.len() || an.slots.len() != before.len() {
        return false;
    }
    origin.clear();
    kept_at.clear();
    // (what a load sets depends on the slots alone, as in drop_redundant)
    let mut s = State::entry();
    for (i, insn) in before.iter().enumerate() {
        // A removed instruction's place is the next kept one's.
        kept_at.push(origin.len());
        // (a `ja +0` is never kept: [`compact`] removes every one it is given)
        let kept =
            *insn != nop() && after.get(origin.len()).is_some_and(|a| same_to_analysis(insn, a));
        if kept {
            origin.push(i);
            continue;
        }
        if i == 0 || (insn.op.is_jump() && *insn != nop()) || insn.op.is_return() {
            return false;
        }
        let falls_in = &before[i - 1];
        if !falls_in.op.is_jump() && !falls_in.op.is_return() {
            let Some(slots_before) = an.slots[i - 1] else { return false };
            s.slots = slots_before;
            if effect(falls_in, &s, &mut an.values).set.is_none() {
                return false;
            }
        }
        if *insn == nop() {
            continue;
        }
        let Some(slots) = an.slots[i] else { return false };
        s.slots = slots;
        match effect(insn, &s, &mut an.values).set {
            Some((slot, v)) if slots[slot] == v => {}
            _ => return false,
        }
    }
    origin.len() == after.len()
        && origin.iter().enumerate().all(|(j, &i)| {
            !before[i].op.is_jump()
                || (0..2).all(|n| {
                    successors(before, i)[n].map(|t| kept_at[t]) == successors(after, j)[n]
                })
        })
}

/// `and #m; jeq #0` (or `jgt #0`) is `jset #m` when nothing reads A afterwards and nothing
/// else jumps to the test.
fn and_tests(p: &mut [CbpfInsn], live: &mut Live, targeted: &mut Vec<bool>) {
    let live = live.of(p);
    targeted.clear();
    targeted.resize(p.len() + 1, false);
    for i in 0..p.len() {
        if p[i].op.is_jump() {
            for s in successors(p, i).into_iter().flatten() {
                targeted[s] = true;
            }
        }
    }
    for i in 0..p.len().saturating_sub(1) {
        let (and, t) = (p[i], p[i + 1]);
        if and.op != CbpfOp::AndK || targeted[i + 1] || !t.op.is_conditional_jump() {
            continue;
        }
        let [Some(a), Some(b)] = successors(p, i + 1) else { continue };
        if (live[a] | live[b]) & bit(A) != 0 {
            continue;
        }
        let m = and.k;
        let (jt, jf) = match (t.op, t.k) {
            (CbpfOp::JeqK, 0) => (t.jf, t.jt),
            (CbpfOp::JgtK, 0) => (t.jt, t.jf),
            (CbpfOp::JeqK, k) if k == m && m.is_power_of_two() => (t.jt, t.jf),
            _ => continue,
        };
        p[i] = nop();
        p[i + 1] = CbpfInsn::new(CbpfOp::JsetK, jt, jf, m);
    }
}

/// The packet end an absolute load (or `4*([k]&0xf)`) reads up to.
pub(super) fn load_end(insn: &CbpfInsn) -> Option<u32> {
    use CbpfOp::*;
    let n = match insn.op {
        LdAbsW => 4,
        LdAbsH => 2,
        LdAbsB | LdxMsh => 1,
        _ => return None,
    };
    (insn.k <= MAX_PLAIN_OFFSET).then(|| insn.k + n)
}

/// Marks the instructions some run reaches; returns how many.
fn reachable(p: &[CbpfInsn], r: &mut Vec<bool>) -> usize {
    r.clear();
    r.resize(p.len(), false);
    let mut count = 0;
    if let Some(first) = r.first_mut() {
        *first = true;
    }
    for i in 0..p.len() {
        if r[i] {
            count += 1;
            for s in successors(p, i).into_iter().flatten() {
                r[s] = true;
            }
        }
    }
    count
}

// ---------------------------------------------------------------------------------------
// Rewriting

/// Points the `n`th edge of `from` (0: `jt` or the `ja` target, 1: `jf`) at `to`, if the
/// encoding reaches it.
fn retarget(p: &mut [CbpfInsn], from: usize, n: usize, to: usize) -> bool {
    let Some(d) = to.checked_sub(from + 1) else { return false };
    let insn = &mut p[from];
    if insn.op == CbpfOp::Ja {
        insn.k = d as u32;
        return true;
    }
    if !insn.op.is_conditional_jump() {
        return false;
    }
    let Ok(d) = u8::try_from(d) else { return false };
    if n == 0 {
        insn.jt = d;
    } else {
        insn.jf = d;
    }
    true
}

/// Step 2: each jump edge whose target's first tests it decides moves past them.
///
/// Answers whether `p` was settled for threading ([`Settled`]): fully when no edge's walk
/// passed a place other than the edge's target where the slots it changed are dead
/// (whatever ended the walk, and whether or not a jump could reach that place) and no
/// reachable test's outcome was known, so nothing changed.
///
/// With `check` nothing is changed, and it answers for [`Round::settles`] whether `p` and
/// the programs the round made of it are settled (`for_the_check`): a walk may pass such a
/// place when it ends on a test it does not decide (threading nothing) and passes, from
/// that place on, no load that a program without its head load might stop at
/// ([`Passed::fragile`]; `check` holds the value of the head load drop_dead dropped, if it
/// did). It answers false at the first edge that is not settled or the first test decided
/// (after that jump's own walks: the walks before are those the full pass makes). Without
/// `check`, `for_the_check` is what the check with no head dropped would answer on `p`
/// when the pass changed nothing (it then made the check's walks).
fn thread(
    p: &mut [CbpfInsn],
    an: &mut Analysis,
    live: &mut Live,
    check: Option<Option<Val>>,
) -> Settled {
    let live = live.of(p);
    let mut settled = Settled { fully: true, for_the_check: true };
    for from in 0..p.len() {
        let insn = p[from];
        if !insn.op.is_jump() {
            continue;
        }
        if an.input(from).is_none() {
            continue;
        }
        let edges = Edges::of(&insn, &an.states[from], &an.values);
        for n in 0..2 {
            let Some(to) = successors(p, from)[n] else { continue };
            if edges.rules_out(n)
                || edges.walk_stops_at_once(&insn, &an.states[from], n, &p[to], &mut an.values)
            {
                continue;
            }
            edges.state(&insn, &an.states[from], n, &mut an.edge);
            let mut passed = Passed { head: check.flatten(), beyond: None, fragile: false };
            let end = walk(p, to, &mut an.edge, live, &mut an.values, &mut passed);
            if passed.beyond.is_some() {
                settled.fully = false;
                if end.is_some() || passed.fragile {
                    if check.is_some() {
                        return Settled { fully: false, for_the_check: false };
                    }
                    settled.for_the_check = false;
                }
            }
            if let Some(end) = end.filter(|&end| end != to) {
                retarget(p, from, n, end);
            }
        }
        // A conditional jump whose outcome is known on every run is a `ja`: made here, after
        // its own edges' walks (no later walk reads it: walks go forward from a later jump),
        // with the outcome [`Edges::of`] found (a second examination of the same state gave
        // the same answer).
        let Some(outcome) = edges.decided.filter(|_| insn.op.is_conditional_jump()) else {
            continue;
        };
        if check.is_some() {
            // (answered after this jump's walks: up to here the walks, and the values they
            // numbered, are the full pass's, which makes the `ja` now and walks on over it)
            return Settled { fully: false, for_the_check: false };
        }
        // Only without a check: with one, every `false` returned above.
        settled = Settled { fully: false, for_the_check: false };
        let target = from + 1 + usize::from(if outcome { p[from].jt } else { p[from].jf });
        p[from] = CbpfInsn::new(CbpfOp::Ja, 0, 0, (target - from - 1) as u32);
    }
    settled
}

/// [`thread`]'s answers whether the program it was given is settled for threading.
#[derive(Clone, Copy, Default)]
struct Settled {
    /// No walk passed a place beyond its edge's target where its changed slots were dead,
    /// no test was decided (so threading changed nothing).
    fully: bool,
    /// The check's answer for [`Round::settles`]: no test decided, and every walk that
    /// passed such a place ended on a test it did not decide and passed no load
    /// [`Passed::fragile`] from there on.
    for_the_check: bool,
}

/// What a [`walk`] passed, for [`Round::settles`].
struct Passed {
    /// The value of the head load drop_dead dropped, if it did (asking about the program
    /// without it).
    head: Option<Val>,
    /// The first place after the start where the slots the walk changed were dead.
    beyond: Option<usize>,
    /// A load passed at or after `beyond` was [`Passed::fragile`].
    fragile: bool,
}

impl Passed {
    /// True when the program without the head load might stop a walk at this load, which
    /// set a slot holding `held` to `v`: one whose abort depends on the bytes proven (the
    /// head's proof gone, it may abort), passed as it could not abort; or one passed as it
    /// gave the value the slot held, when that is the head's value (without the head the
    /// slot holds the entry value there).
    ///
    /// With no head dropped (`head` `None`) no load is fragile: the program the check asks
    /// about stops no walk sooner (the P1 to P2 case of [`Round::settles`]).
    fn fragile(insn: &CbpfInsn, held: Val, v: Val, head: Option<Val>) -> bool {
        let Some(head) = head else { return false };
        if held == v {
            return head == v;
        }
        matches!(insn.op, CbpfOp::LdAbsW | CbpfOp::LdAbsH | CbpfOp::LdAbsB | CbpfOp::LdxMsh)
    }
}

/// Runs from `at` in state `s` through loads that cannot abort and tests `s` decides; the
/// last place reached where the slots the run changed are dead (so an edge may go there
/// instead), or `None` when the run meets a test `s` does not decide. `passed` notes the
/// first such place after `at`, whatever ends the run, and the loads passed from there on.
fn walk(
    p: &[CbpfInsn],
    mut at: usize,
    s: &mut State,
    live: &[u32],
    values: &mut Values,
    passed: &mut Passed,
) -> Option<usize> {
    let first = at;
    let start = s.slots;
    // The slots that differ from `start`, kept as the run sets them (nothing else in the
    // run writes a slot).
    let mut changed = 0;
    let mut best = None;
    for _ in 0..p.len() {
        if changed & live[at] == 0 {
            best = Some(at);
            if at != first && passed.beyond.is_none() {
                passed.beyond = Some(at);
            }
        }
        let insn = p[at];
        if insn.op.is_return() {
            break;
        } else if insn.op == CbpfOp::Ja {
            at = successors(p, at)[0]?;
        } else if insn.op.is_conditional_jump() {
            let (decided, lesson) = examine(&insn, s, values);
            let outcome = decided?;
            teach(&insn, &lesson, s, outcome);
            at = successors(p, at)[usize::from(!outcome)]?;
        } else {
            if matches!(insn.op, CbpfOp::St | CbpfOp::Stx) {
                break;
            }
            let e = effect(&insn, s, values);
            let Some((slot, v)) = e.set else { break };
            if e.may_abort && s.slots[slot] != v {
                break;
            }
            if passed.beyond.is_some() {
                passed.fragile |= Passed::fragile(&insn, s.slots[slot], v, passed.head);
            }
            s.slots[slot] = v;
            if v == start[slot] {
                changed &= !bit(slot);
            } else {
                changed |= bit(slot);
            }
            at += 1;
        }
    }
    best
}

/// Step 3: loads of what the register already holds on every edge into them.
fn drop_redundant(p: &mut [CbpfInsn], an: &mut Analysis) {
    // What a load sets depends on the slots alone (facts only decide whether it may abort):
    // one state with no facts, given each instruction's slots in turn.
    let mut s = State::entry();
    for (insn, slots) in p.iter_mut().zip(&an.slots) {
        if insn.op.is_jump() || insn.op.is_return() {
            continue;
        }
        let Some(slots) = *slots else { continue };
        s.slots = slots;
        let e = effect(insn, &s, &mut an.values);
        if let Some((slot, v)) = e.set {
            if s.slots[slot] == v {
                *insn = nop();
            }
        }
    }
}

/// False when no instruction can set a slot to what it already holds, so
/// [`drop_redundant`] would find nothing and the program need not be analyzed for it: every
/// non-jump is a packet load (absolute, indirect, `4*([k]&0xf)`) and none repeats an
/// earlier one's operation and offset. A packet value is numbered only by a load of that
/// form, jumps go forward, and such loads set nothing else, so a slot holds it only after
/// an earlier copy of the load.
fn may_repeat_a_value(p: &[CbpfInsn]) -> bool {
    use CbpfOp::*;
    let mut loads = Vec::with_capacity(p.len());
    for insn in p {
        match insn.op {
            LdAbsW | LdAbsH | LdAbsB | LdIndW | LdIndH | LdIndB | LdxMsh => {
                loads.push((insn.op, insn.k));
            }
            op if op.is_jump() || op.is_return() => {}
            _ => return true,
        }
    }
    loads.sort_unstable();
    loads.windows(2).any(|w| w[0] == w[1])
}

/// A placeholder [`compact`] removes: `ja +0`.
fn nop() -> CbpfInsn {
    CbpfInsn::new(CbpfOp::Ja, 0, 0, 0)
}

/// Step 4: code no accept depends on. Returns true when it kept a load whose result nobody
/// reads because a path from it to an accept may load less far (larger `ends` could let it
/// go).
fn drop_dead(p: &mut [CbpfInsn], ends: &[u32], live: &mut Live, need: &mut Vec<u32>) -> bool {
    let mut kept_a_dead_load = false;
    let live = live.of(p);
    // `need` as in [`need`], recomputed as instructions go (a load that goes no longer
    // vouches for the ones before it).
    need.clear();
    need.resize(p.len(), u32::MAX);
    for i in (0..p.len()).rev() {
        let insn = p[i];
        if insn.op.is_return() {
            need[i] = if is_accept(&insn) { 0 } else { u32::MAX };
            continue;
        }
        let succ = successors(p, i);
        let after = succ.into_iter().flatten().map(|s| need[s]).min().unwrap_or(u32::MAX);
        if after == u32::MAX {
            // No path from here accepts.
            p[i] = CbpfInsn::new(CbpfOp::RetK, 0, 0, 0);
            need[i] = u32::MAX;
            continue;
        }
        need[i] = after.max(ends[i]);
        if insn.op.is_jump() {
            if let (true, [Some(t), Some(f)]) = (insn.op.is_conditional_jump(), succ) {
                if t == f {
                    // Both ways lead to one place: a `ja` there.
                    p[i] = CbpfInsn::new(CbpfOp::Ja, 0, 0, (t - i - 1) as u32);
                }
            }
            continue;
        }
        let (_, defs) = uses_defs(&insn);
        if defs & live[i + 1] != 0 {
            continue;
        }
        let safe = match insn.op {
            CbpfOp::St | CbpfOp::Stx | CbpfOp::LdImm | CbpfOp::LdxImm | CbpfOp::LdLen => true,
            CbpfOp::LdxLen | CbpfOp::LdMem | CbpfOp::LdxMem | CbpfOp::Tax | CbpfOp::Txa => true,
            CbpfOp::Neg => true,
            CbpfOp::DivK | CbpfOp::ModK => insn.k != 0,
            op if alu_k(op).is_some_and(|k| !matches!(k, CbpfOp::DivK | CbpfOp::ModK)) => true,
            _ => load_end(&insn).is_some_and(|end| end <= after),
        };
        if safe {
            p[i] = nop();
            need[i] = after;
        } else if load_end(&insn).is_some() {
            kept_a_dead_load = true;
        }
    }
    kept_a_dead_load
}

/// Step 5: every jump goes to the last instruction within reach that does what its target
/// does.
fn merge_tails(p: &mut [CbpfInsn], sc: &mut Scratch) {
    merge_tails_trying::<false>(p, sc);
}

/// [`merge_tails`]; with `EVERY_COPY` it also tries the copies it knows a `ja` would drop
/// nothing at (the oracle of the skip's test).
fn merge_tails_trying<const EVERY_COPY: bool>(p: &mut [CbpfInsn], sc: &mut Scratch) {
    const NONE: usize = usize::MAX;
    // Class of each instruction: equal classes behave alike from there on.
    let class = &mut sc.class;
    class.clear();
    class.resize(p.len(), 0);
    let ids = &mut sc.class_ids;
    ids.clear();
    let (first, next_member, last) =
        (&mut sc.first_member, &mut sc.next_member, &mut sc.last_member);
    first.clear();
    last.clear();
    next_member.clear();
    next_member.resize(p.len(), NONE);
    for i in (0..p.len()).rev() {
        let insn = p[i];
        let [a, b] = successors(p, i);
        if insn.op == CbpfOp::Ja {
            class[i] = a.map_or(NONE, |t| class[t]);
            continue;
        }
        let key = (
            insn.op,
            if insn.op.is_conditional_jump() && uses_x_operand(insn.op) { 0 } else { insn.k },
            a.map_or(NONE, |t| class[t]),
            b.map_or(NONE, |t| class[t]),
        );
        let next = ids.len();
        let c = *ids.entry(key).or_insert(next);
        if c == first.len() {
            first.push(i);
        } else {
            next_member[last[c]] = i;
        }
        if c == last.len() {
            last.push(i);
        } else {
            last[c] = i;
        }
        class[i] = c;
    }
    for from in 0..p.len() {
        if !p[from].op.is_jump() {
            continue;
        }
        for n in 0..2 {
            let Some(to) = successors(p, from)[n] else { continue };
            let Some(&head) = first.get(class[to]) else { continue };
            // Members are listed last to first: the farthest one that the jump reaches.
            let limit = if p[from].op == CbpfOp::Ja { usize::MAX } else { from + 1 + 255 };
            let mut m = head;
            while m != NONE && !(m > from && m <= limit) {
                m = next_member[m];
            }
            if m != NONE && m != to {
                retarget(p, from, n, m);
            }
        }
    }
    // A copy some jump could not leave (the last copy is beyond its 255 instructions)
    // becomes a `ja` to the last copy: the rest of it falls away (a 500-host set's ARP and
    // RARP searches are one search, as in libpcap's program).
    // Only where that drops code (a `ja` in place of a test the rest of the program still
    // needs would cost a jump and save nothing); a bounded number of tries per round.
    let mut live = reachable(p, &mut sc.reach);
    let mut tries = 0;
    for &last in first.iter() {
        let mut m = next_member[last];
        while m != NONE {
            let here = m;
            m = next_member[m];
            if !sc.reach[here] || here >= last || p[here].op.is_return() || p[here].op == CbpfOp::Ja
            {
                continue;
            }
            if tries == MAX_FAR_MERGES {
                return;
            }
            tries += 1;
            // (`udp and (port 67 or port 68)` tried three copies a compile, each a walk of
            // the whole program, all of them such)
            if !EVERY_COPY && ja_drops_nothing(p, &sc.reach, here) {
                continue;
            }
            let was = p[here];
            p[here] = CbpfInsn::new(CbpfOp::Ja, 0, 0, (last - here - 1) as u32);
            let count = reachable(p, &mut sc.reach_after);
            if count + 2 <= live {
                std::mem::swap(&mut sc.reach, &mut sc.reach_after);
                live = count;
            } else {
                p[here] = was;
            }
        }
    }
}

/// Copies [`merge_tails`] tries to replace by a `ja` per round (each try walks the program;
/// a try skipped as dropping nothing still counts, so the cap picks the copies it did).
const MAX_FAR_MERGES: usize = 1024;

/// True when a `ja` (anywhere) in place of instruction `here`, which `reach` (what a run of
/// `p` reaches) marks, leaves every instruction reached: each one `here` goes to is also
/// reached from one before `here`. A path to it from there avoids `here` (edges go
/// forward), as does every path on from it, so whatever a path through `here` reached is
/// reached without it.
fn ja_drops_nothing(p: &[CbpfInsn], reach: &[bool], here: usize) -> bool {
    let reached_before =
        |t| (0..here).rev().any(|q| reach[q] && successors(p, q).contains(&Some(t)));
    successors(p, here).into_iter().flatten().all(reached_before)
}

/// Removes unreachable instructions and `ja +0`, and `ja` to a return becomes the return;
/// a program with none of what it rewrites is left as it is, uncopied (most calls: a pass
/// that found nothing).
fn compact(p: &mut Vec<CbpfInsn>, sc: &mut Scratch) {
    if *p == sc.known_compact {
        return;
    }
    if is_compact(p, &mut sc.reach) {
        sc.known_compact.clear();
        sc.known_compact.extend_from_slice(p);
    } else {
        rewrite_compact(p, sc);
    }
}

/// True when [`rewrite_compact`] would leave `p` unchanged: no jump lands on a `ja`, no
/// `ja` lands on a return, no conditional jump has its two edges meet, no `ja +0`, and every
/// instruction is reachable. (Not the same as the rewrite changing nothing: a jump to a
/// `ja` it cannot skip is left, but the whole rewrite runs to find that out.)
fn is_compact(p: &[CbpfInsn], reach: &mut Vec<bool>) -> bool {
    reach.clear();
    reach.resize(p.len(), false);
    if let Some(first) = reach.first_mut() {
        *first = true;
    }
    for (i, insn) in p.iter().enumerate() {
        if !reach[i] {
            return false;
        }
        if insn.op.is_return() {
            continue;
        }
        if insn.op == CbpfOp::Ja && insn.k == 0 {
            return false;
        }
        if insn.op.is_conditional_jump() && insn.jt == insn.jf {
            return false;
        }
        let succ = successors(p, i);
        if insn.op == CbpfOp::Ja && succ[0].is_none() {
            return false;
        }
        for to in succ.into_iter().flatten() {
            let Some(&target) = p.get(to) else { return false };
            let lands_on_ja = insn.op.is_jump() && target.op == CbpfOp::Ja;
            if lands_on_ja || (insn.op == CbpfOp::Ja && target.op.is_return()) {
                return false;
            }
            reach[to] = true;
        }
    }
    true
}

/// [`compact`]'s rewrite, in place (the original is copied into the scratch buffers).
fn rewrite_compact(p: &mut Vec<CbpfInsn>, sc: &mut Scratch) {
    let q = &mut sc.copy;
    q.clear();
    q.extend_from_slice(p);
    // Kept: reachable, and not `ja +0`. Reach is marked in the same pass as the rewrite:
    // the rewrite of `i` changes `q[i]` alone, and every edge into `i` comes from before
    // it, so `i`'s mark is final when the pass comes to it and its edges are sent from the
    // rewritten `q[i]`: the marks are [`reachable`]'s of the rewritten program (the second
    // walk they took cost ~1.3k instructions a call on `udp and (port 67 or port 68)`).
    let keep = &mut sc.reach;
    keep.clear();
    keep.resize(q.len(), false);
    if let Some(first) = keep.first_mut() {
        *first = true;
    }
    // A jump straight to a `ja` goes where the `ja` goes (when it reaches).
    for i in 0..q.len() {
        if !q[i].op.is_jump() {
            if keep[i] {
                if let Some(next) = successors(q, i)[0] {
                    keep[next] = true;
                }
            }
            continue;
        }
        for n in 0..2 {
            for _ in 0..q.len() {
                let Some(to) = successors(q, i)[n] else { break };
                if q[to].op != CbpfOp::Ja || to == i {
                    break;
                }
                let Some(end) = successors(q, to)[0] else { break };
                if end == to || !retarget(q, i, n, end) {
                    break;
                }
            }
        }
        if q[i].op == CbpfOp::Ja {
            if let Some(t) = successors(q, i)[0] {
                if q[t].op.is_return() {
                    q[i] = q[t];
                }
            }
        }
        if q[i].op.is_conditional_jump() && q[i].jt == q[i].jf {
            q[i] = CbpfInsn::new(CbpfOp::Ja, 0, 0, u32::from(q[i].jt));
        }
        if keep[i] {
            for to in successors(q, i).into_iter().flatten() {
                keep[to] = true;
            }
        }
    }
    for (k, insn) in keep.iter_mut().zip(q.iter()) {
        *k = *k && !(insn.op == CbpfOp::Ja && insn.k == 0);
    }
    // New position of each old one: a dropped instruction maps to the next kept one, which
    // is where running on from it leads.
    let at = &mut sc.at;
    at.clear();
    let mut next = 0;
    for &k in keep.iter() {
        at.push(next);
        if k {
            next += 1;
        }
    }
    at.push(next);
    p.clear();
    for i in 0..q.len() {
        if !keep[i] {
            continue;
        }
        let mut insn = q[i];
        let here = at[i];
        let [a, b] = successors(q, i);
        if insn.op == CbpfOp::Ja {
            insn.k = (at[a.unwrap_or(i + 1)] - here - 1) as u32;
        } else if insn.op.is_conditional_jump() {
            insn.jt = (at[a.unwrap_or(i + 1)] - here - 1) as u8;
            insn.jf = (at[b.unwrap_or(i + 1)] - here - 1) as u8;
        }
        p.push(insn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CbpfOp::*;

    fn s(op: CbpfOp, k: u32) -> CbpfInsn {
        CbpfInsn::new(op, 0, 0, k)
    }
    fn j(op: CbpfOp, k: u32, jt: u8, jf: u8) -> CbpfInsn {
        CbpfInsn::new(op, jt, jf, k)
    }

    /// [`tighten`] as it was before it stopped after a cycle of unchanged steps (whole
    /// rounds, until a round changes nothing) and before drop_dead ran without the
    /// analysis first (here the analysis is made whenever the program has indirect loads).
    fn tighten_as_it_was(program: &[CbpfInsn]) -> Vec<CbpfInsn> {
        let mut p = program.to_vec();
        if !well_formed(&p) {
            return p;
        }
        let mut cur = Current::new();
        let mut sc = Scratch::default();
        let mut before = Vec::with_capacity(p.len());
        for _ in 0..MAX_ROUNDS {
            before.clear();
            before.extend_from_slice(&p);
            let an = current(&mut cur, &p);
            thread(&mut p, an, &mut sc.live, None);
            compact(&mut p, &mut sc);
            if may_repeat_a_value(&p) {
                let an = current(&mut cur, &p);
                drop_redundant(&mut p, an);
            }
            compact(&mut p, &mut sc);
            let an = if p
                .iter()
                .any(|i| matches!(i.op, CbpfOp::LdIndW | CbpfOp::LdIndH | CbpfOp::LdIndB))
            {
                Some((&*current(&mut cur, &p), None))
            } else {
                None
            };
            load_ends(&p, an, &mut sc.ends);
            drop_dead(&mut p, &sc.ends, &mut sc.live, &mut sc.need);
            compact(&mut p, &mut sc);
            and_tests(&mut p, &mut sc.live, &mut sc.reach);
            compact(&mut p, &mut sc);
            merge_tails(&mut p, &mut sc);
            compact(&mut p, &mut sc);
            if p == before {
                break;
            }
        }
        if p.len() <= program.len() {
            p
        } else {
            program.to_vec()
        }
    }

    /// [`rewrite_compact`] on a copy, in fresh buffers.
    fn compacted(p: &[CbpfInsn]) -> Vec<CbpfInsn> {
        let mut q = p.to_vec();
        rewrite_compact(&mut q, &mut Scratch::default());
        q
    }

    /// A random well-formed program: loads, stores, ALU operations, forward jumps (some to
    /// `ja`s, some with both edges to one place, some past unreachable code), returns.
    ///
    /// The cells stored and loaded are the first one, two or all [`MEM_WORDS`]: programs
    /// naming few and many cells (an analysis that skipped the cells a program does not name
    /// is wrong on the second kind if it skips one that is named).
    fn random_program(rng: &mut weir_testkit::SplitMix64) -> Vec<CbpfInsn> {
        let cells = [1, 2, MEM_WORDS][rng.below_usize(3)];
        let len = 2 + rng.below_usize(28);
        let mut p = Vec::with_capacity(len);
        for i in 0..len - 1 {
            let left = len - i - 2;
            let reach = |rng: &mut weir_testkit::SplitMix64| rng.below_usize(left.min(255) + 1);
            let insn = match rng.below(14) {
                0 => s(LdAbsH, [12, 14, 20, 23][rng.below_usize(4)]),
                1 => s(LdAbsB, [9, 23, 14][rng.below_usize(3)]),
                2 => s(LdAbsW, 26),
                3 => s(LdxMsh, 14),
                4 => s(LdIndH, [14, 16][rng.below_usize(2)]),
                5 => s(LdImm, rng.below(4) as u32),
                6 => s(Tax, 0),
                7 => s(St, rng.below(u64::from(cells)) as u32),
                8 => s(LdMem, rng.below(u64::from(cells)) as u32),
                9 => s(AndK, 0x1fff),
                10 => s(Ja, reach(rng) as u32),
                11 => s(RetK, rng.below(2) as u32),
                _ => {
                    let op = [JeqK, JgtK, JsetK, JeqX][rng.below_usize(4)];
                    let k = [0, 6, 17, 0x800, 0x806][rng.below_usize(5)];
                    let (jt, jf) = (reach(rng) as u8, reach(rng) as u8);
                    j(op, k, jt, jf)
                }
            };
            p.push(insn);
        }
        p.push(s(RetK, 1));
        p
    }

    /// The analysis as it was when it kept every edge's state (its loop as it was), giving
    /// the in-states that drop_redundant joined from those edges: what the in-state form
    /// must agree with.
    fn edge_analysis(p: &[CbpfInsn]) -> (Values, Vec<Option<State>>) {
        let mut values = Values::new();
        let mut incoming: Vec<Option<State>> = vec![None; p.len()];
        incoming[0] = Some(State::entry());
        let mut seen = incoming.clone();
        for i in 0..p.len() {
            let Some(s) = incoming[i].take() else { continue };
            seen[i] = Some(s.clone());
            let insn = p[i];
            let outs: [Option<State>; 2] = if insn.op.is_return() {
                [None, None]
            } else if insn.op == Ja {
                [Some(s), None]
            } else if insn.op.is_conditional_jump() {
                match decide_as_it_was(&insn, &s, &values) {
                    Some(true) => [Some(s), None],
                    Some(false) => [None, Some(s)],
                    None => {
                        let mut t = s.clone();
                        let mut f = s;
                        learn_as_it_was(&insn, &mut t, &values, true);
                        learn_as_it_was(&insn, &mut f, &values, false);
                        [Some(t), Some(f)]
                    }
                }
            } else {
                let mut s = s;
                step(&insn, i, &mut s, &mut values);
                [Some(s), None]
            };
            for (n, out) in outs.iter().enumerate() {
                let (Some(out), Some(to)) = (out, successors(p, i)[n]) else { continue };
                incoming[to] = Some(match incoming[to].take() {
                    None => out.clone(),
                    Some(prev) => prev.join(out, to, &mut values),
                });
            }
        }
        (values, seen)
    }

    /// [`decide`] as it was before [`examine`] took the outcome and the lesson from one
    /// lookup: the oracle's.
    fn decide_as_it_was(insn: &CbpfInsn, s: &State, values: &Values) -> Option<bool> {
        let a = s.slots[A];
        let k = if uses_x_operand(insn.op) {
            let x = s.slots[X];
            if x == a && matches!(insn.op, CbpfOp::JeqX | CbpfOp::JgeX) {
                return Some(true);
            }
            if x == a && insn.op == CbpfOp::JgtX {
                return Some(false);
            }
            s.fact(values, x).known()?
        } else {
            insn.k
        };
        s.fact(values, a).decide(insn.op, k)
    }

    /// Learning as it was before [`examine`] and [`teach`] split it (the fact looked up
    /// and set by value): the oracle's.
    fn learn_as_it_was(insn: &CbpfInsn, s: &mut State, values: &Values, outcome: bool) {
        let a = s.slots[A];
        let k = if uses_x_operand(insn.op) {
            match s.fact(values, s.slots[X]).known() {
                Some(k) => k,
                None => return,
            }
        } else {
            insn.k
        };
        let mut f = s.fact(values, a);
        f.learn(insn.op, k, outcome);
        s.facts.set(a, f);
    }

    /// [`thread`] as it was before [`Edges`]: each edge decided and learnt on its own, each
    /// run walked by [`walk_as_it_was`].
    fn thread_as_it_was(p: &mut [CbpfInsn], an: &mut Analysis, live: &mut Live) {
        fn edge_state(
            insn: &CbpfInsn,
            s: &State,
            n: usize,
            values: &Values,
            into: &mut State,
        ) -> bool {
            if insn.op == CbpfOp::Ja {
                into.clone_from(s);
                return n == 0;
            }
            let outcome = n == 0;
            match decide_as_it_was(insn, s, values) {
                Some(known) => {
                    into.clone_from(s);
                    known == outcome
                }
                None => {
                    into.clone_from(s);
                    learn_as_it_was(insn, into, values, outcome);
                    true
                }
            }
        }
        let live = live.of(p);
        for from in 0..p.len() {
            let insn = p[from];
            if !insn.op.is_jump() || an.input(from).is_none() {
                continue;
            }
            for n in 0..2 {
                if !edge_state(&insn, &an.states[from], n, &an.values, &mut an.edge) {
                    continue;
                }
                let Some(to) = successors(p, from)[n] else { continue };
                if let Some(end) = walk_as_it_was(p, to, &mut an.edge, live, &mut an.values) {
                    if end != to {
                        retarget(p, from, n, end);
                    }
                }
            }
        }
        for (i, insn) in p.iter_mut().enumerate() {
            if insn.op.is_conditional_jump() {
                let Some(input) = an.input(i) else { continue };
                let target = match decide_as_it_was(insn, input, &an.values) {
                    Some(true) => i + 1 + usize::from(insn.jt),
                    Some(false) => i + 1 + usize::from(insn.jf),
                    None => continue,
                };
                *insn = CbpfInsn::new(CbpfOp::Ja, 0, 0, (target - i - 1) as u32);
            }
        }
    }

    /// [`walk`] as it was before it kept the changed slots as it went: recomputed from the
    /// slots at every step.
    fn walk_as_it_was(
        p: &[CbpfInsn],
        mut at: usize,
        s: &mut State,
        live: &[u32],
        values: &mut Values,
    ) -> Option<usize> {
        let start = s.slots;
        let mut best = None;
        for _ in 0..p.len() {
            let changed = (0..SLOTS).filter(|&k| s.slots[k] != start[k]).fold(0, |m, k| m | bit(k));
            if changed & live[at] == 0 {
                best = Some(at);
            }
            let insn = p[at];
            if insn.op.is_return() {
                break;
            } else if insn.op == CbpfOp::Ja {
                at = successors(p, at)[0]?;
            } else if insn.op.is_conditional_jump() {
                let outcome = decide_as_it_was(&insn, s, values)?;
                learn_as_it_was(&insn, s, values, outcome);
                at = successors(p, at)[usize::from(!outcome)]?;
            } else {
                if matches!(insn.op, CbpfOp::St | CbpfOp::Stx) {
                    break;
                }
                let e = effect(&insn, s, values);
                let Some((slot, v)) = e.set else { break };
                if e.may_abort && s.slots[slot] != v {
                    break;
                }
                s.slots[slot] = v;
                at += 1;
            }
        }
        best
    }

    /// Jump threading with each jump's outcome and lesson taken once for both edges
    /// ([`Edges`]) retargets exactly what it did with each edge deciding and learning on
    /// its own, and leaves the same value numbers behind.
    #[test]
    fn threading_shares_a_jump_s_lesson_between_its_edges_as_if_each_learnt_it() {
        let mut rng = weir_testkit::SplitMix64::new(0x7e55);
        let (mut an, mut old_an) = (Analysis::new(), Analysis::new());
        let (mut live, mut old_live) = (Live::default(), Live::default());
        let mut threaded = 0;
        for _ in 0..4000 {
            let p = random_program(&mut rng);
            let (mut q, mut r) = (p.clone(), p.clone());
            an.redo(&q);
            old_an.redo(&r);
            thread(&mut q, &mut an, &mut live, None);
            thread_as_it_was(&mut r, &mut old_an, &mut old_live);
            assert_eq!(q, r, "{p:?}");
            assert_eq!(an.values.nodes, old_an.values.nodes, "{p:?}");
            threaded += usize::from(q != p);
        }
        assert!(threaded > 500, "{threaded}");
    }

    #[test]
    fn the_analysis_keeps_what_the_edges_said() {
        let mut rng = weir_testkit::SplitMix64::new(0xed6e);
        let mut an = Analysis::new();
        let (mut jumps_seen, mut returns_joined) = (0, 0);
        for _ in 0..2000 {
            let p = random_program(&mut rng);
            // The same buffers for every program, as within a tightening.
            an.redo(&p);
            let (values, want) = edge_analysis(&p);
            // The same values in the same order, but for the joins at returns (a return gets
            // no state): their names are all that goes, and the numbers after them move down.
            let joined_at_return =
                |n: &Node| matches!(*n, Node::Entry(at, _) if at > 0 && p[at].op.is_return());
            let mut renumbered = Vec::with_capacity(values.nodes.len());
            let mut named = Vec::new();
            for n in &values.nodes {
                renumbered.push(named.len() as Val);
                if !joined_at_return(n) {
                    let r = |v: Val| renumbered[v as usize];
                    named.push(match *n {
                        Node::Ind(x, off, size) => Node::Ind(r(x), off, size),
                        Node::Alu(op, a, b) => Node::Alu(op, r(a), r(b)),
                        Node::Neg(a) => Node::Neg(r(a)),
                        other => other,
                    });
                }
            }
            assert_eq!(an.values.nodes, named, "{p:?}");
            returns_joined += usize::from(named.len() < values.nodes.len());
            let renumber = |s: &State| {
                let mut facts = Facts::default();
                for &(v, f) in s.facts.as_slice() {
                    facts.push((renumbered[v as usize], f));
                }
                State { slots: s.slots.map(|v| renumbered[v as usize]), facts, len_ok: s.len_ok }
            };
            for i in 0..p.len() {
                if p[i].op.is_return() {
                    assert_eq!(an.slots[i], None, "a return's slots: {p:?}");
                    continue;
                }
                let want = want[i].as_ref().map(renumber);
                assert_eq!(an.slots[i], want.as_ref().map(|s| s.slots), "slots at {i}: {p:?}");
                if p[i].op.is_jump() {
                    assert_eq!(an.input(i), want.as_ref(), "state at {i}: {p:?}");
                    jumps_seen += usize::from(want.is_some());
                }
            }
        }
        assert!(jumps_seen > 1000 && returns_joined > 100, "{jumps_seen} {returns_joined}");
    }

    /// One lookup for a test's outcome and both edges' lessons ([`examine`], then [`teach`]
    /// at the position found) decides and learns what deciding and learning by value did, on
    /// the states the analysis reaches jumps with, for every kind of test (A against itself
    /// too, and an X the state knows or does not).
    #[test]
    fn a_test_examined_once_decides_and_teaches_as_lookups_by_value_did() {
        let mut rng = weir_testkit::SplitMix64::new(0xe8a1);
        let mut an = Analysis::new();
        let ops = [JeqK, JgtK, JgeK, JsetK, JeqX, JgtX, JgeX, JsetX];
        let ks = [0, 1, 6, 17, 0xff, 0x800, 0x806, 0x1fff, u32::MAX];
        let (mut decided, mut taught, mut inserted, mut replaced) = (0, 0, 0, 0);
        for _ in 0..1500 {
            let p = random_program(&mut rng);
            an.redo(&p);
            for i in 0..p.len() {
                if !p[i].op.is_conditional_jump() {
                    continue;
                }
                let Some(input) = an.input(i).cloned() else { continue };
                let mut same = input.clone();
                same.slots[X] = same.slots[A];
                let mut known_x = input.clone();
                known_x.slots[X] = an.values.konst(ks[rng.below_usize(ks.len())]);
                for s in [input.clone(), same, known_x] {
                    for op in ops {
                        let insn = j(op, ks[rng.below_usize(ks.len())], 0, 0);
                        let (outcome, lesson) = examine(&insn, &s, &an.values);
                        assert_eq!(outcome, decide_as_it_was(&insn, &s, &an.values), "{insn:?}");
                        decided += usize::from(outcome.is_some());
                        for edge in [true, false] {
                            let (mut new, mut old) = (s.clone(), s.clone());
                            teach(&insn, &lesson, &mut new, edge);
                            learn_as_it_was(&insn, &mut old, &an.values, edge);
                            assert_eq!(new, old, "{insn:?} {edge}: {p:?}");
                            taught += usize::from(new != s);
                            match lesson.map(|l| l.at) {
                                Some(Ok(_)) => replaced += 1,
                                Some(Err(_)) => inserted += 1,
                                None => {}
                            }
                        }
                    }
                }
            }
        }
        // Not vacuous: tests decided and not, facts replaced and added.
        assert!(decided > 1000 && taught > 1000, "{decided} {taught}");
        assert!(replaced > 1000 && inserted > 1000, "{replaced} {inserted}");
    }

    /// [`rewrite_compact`] as it was, marking what a run reaches in a walk of its own after
    /// the rewrite of the jumps: the oracle of the marks made during the rewrite.
    fn rewrite_compact_as_it_was(p: &[CbpfInsn]) -> Vec<CbpfInsn> {
        let mut q = p.to_vec();
        for i in 0..q.len() {
            if !q[i].op.is_jump() {
                continue;
            }
            for n in 0..2 {
                for _ in 0..q.len() {
                    let Some(to) = successors(&q, i)[n] else { break };
                    if q[to].op != Ja || to == i {
                        break;
                    }
                    let Some(end) = successors(&q, to)[0] else { break };
                    if end == to || !retarget(&mut q, i, n, end) {
                        break;
                    }
                }
            }
            if q[i].op == Ja {
                if let Some(t) = successors(&q, i)[0] {
                    if q[t].op.is_return() {
                        q[i] = q[t];
                    }
                }
            }
            if q[i].op.is_conditional_jump() && q[i].jt == q[i].jf {
                q[i] = CbpfInsn::new(Ja, 0, 0, u32::from(q[i].jt));
            }
        }
        let mut keep = Vec::new();
        reachable(&q, &mut keep);
        for (k, insn) in keep.iter_mut().zip(q.iter()) {
            *k = *k && !(insn.op == Ja && insn.k == 0);
        }
        let mut at = Vec::new();
        let mut next = 0;
        for &k in &keep {
            at.push(next);
            next += usize::from(k);
        }
        at.push(next);
        let mut out = Vec::new();
        for i in (0..q.len()).filter(|&i| keep[i]) {
            let mut insn = q[i];
            let here = at[i];
            let [a, b] = successors(&q, i);
            if insn.op == Ja {
                insn.k = (at[a.unwrap_or(i + 1)] - here - 1) as u32;
            } else if insn.op.is_conditional_jump() {
                insn.jt = (at[a.unwrap_or(i + 1)] - here - 1) as u8;
                insn.jf = (at[b.unwrap_or(i + 1)] - here - 1) as u8;
            }
            out.push(insn);
        }
        out
    }

    #[test]
    fn compact_marks_reach_while_rewriting_as_a_walk_after_it_did() {
        let mut rng = weir_testkit::SplitMix64::new(0x7eac);
        let mut sc = Scratch::default();
        let (mut dropped, mut unreached_by_rewrite) = (0, 0);
        for case in 0..20_000 {
            let p = random_program_of_kind(&mut rng, case);
            if !well_formed(&p) {
                continue;
            }
            let want = rewrite_compact_as_it_was(&p);
            // Fresh buffers and buffers that held the last program's marks.
            assert_eq!(compacted(&p), want, "{p:?}");
            let mut q = p.clone();
            rewrite_compact(&mut q, &mut sc);
            assert_eq!(q, want, "{p:?}");
            // Not vacuous: programs with code dropped, and with code reached before the
            // rewrite and dropped by it (a jump moved past it, or a `ja +0`).
            dropped += usize::from(want.len() < p.len());
            unreached_by_rewrite += usize::from(want.len() < reachable(&p, &mut Vec::new()));
        }
        eprintln!("code dropped {dropped}, reached before the rewrite {unreached_by_rewrite}");
        assert!(dropped > 5000 && unreached_by_rewrite > 500, "{dropped} {unreached_by_rewrite}");
    }

    #[test]
    fn compact_skips_only_programs_it_would_leave_unchanged() {
        let mut rng = weir_testkit::SplitMix64::new(0xc0c0);
        let (mut skipped, mut rewritten) = (0, 0);
        for _ in 0..3000 {
            let p = random_program(&mut rng);
            for q in [compacted(&p), p] {
                let mut r = q.clone();
                compact(&mut r, &mut Scratch::default());
                assert_eq!(r, compacted(&q), "{q:?}");
                if is_compact(&q, &mut Vec::new()) {
                    skipped += 1;
                } else {
                    rewritten += 1;
                }
            }
        }
        assert!(skipped > 500 && rewritten > 500, "{skipped} {rewritten}");
    }

    /// One set of buffers across programs, as within a tightening: what [`compact`] and
    /// [`Live`] remember of the last program never stands in for another's answer.
    #[test]
    fn reused_buffers_answer_for_the_program_given() {
        let mut rng = weir_testkit::SplitMix64::new(0x5c7a);
        let mut sc = Scratch::default();
        let mut fresh = Vec::new();
        let mut remembered = 0;
        for _ in 0..3000 {
            let p = random_program(&mut rng);
            let c = compacted(&p);
            // The compacted form twice (the second answer may come from memory), the
            // original, and the compacted form again.
            for q in [&c, &c, &p, &c] {
                let mut r = q.clone();
                remembered += usize::from(*q == sc.known_compact);
                compact(&mut r, &mut sc);
                assert_eq!(r, compacted(q), "{q:?}");
                live_in(q, &mut fresh);
                assert_eq!(sc.live.of(q), &fresh[..], "{q:?}");
            }
        }
        assert!(remembered > 1000, "{remembered}");
    }

    /// The buffers [`tighten`] starts with have room for the whole tightening: none that a
    /// pass fills per instruction grows (each growth was a reallocation, and the class map's a
    /// rehash, in every tightening).
    #[test]
    fn scratch_made_with_room_never_grows_while_tightening() {
        let mut rng = weir_testkit::SplitMix64::new(0x9a0e);
        let (mut rewritten, mut classed) = (0, 0);
        for _ in 0..3000 {
            let mut p = random_program(&mut rng);
            if !well_formed(&p) {
                continue;
            }
            let mut sc = Scratch::with_room(p.len());
            let room = |sc: &Scratch| {
                let (a, f, l) =
                    (sc.at.capacity(), sc.first_member.capacity(), sc.last_member.capacity());
                (a, f, l, sc.class_ids.capacity())
            };
            let before = room(&sc);
            let mut cur = Current::new();
            for _ in 0..MAX_ROUNDS {
                (0..STEPS).for_each(|step| tighten_step(step, &mut p, &mut cur, &mut sc));
            }
            assert_eq!(room(&sc), before, "{p:?}");
            rewritten += usize::from(!sc.at.is_empty());
            classed += usize::from(sc.class_ids.len() > 4);
        }
        assert!(rewritten > 1000 && classed > 300, "{rewritten} {classed}");
    }

    /// A random program as the emitter lays them out more often than [`random_program`]
    /// does: a guard load at the head some of the time (drop_dead's head drop), and runs of
    /// loads a test may repeat (drop_redundant's drops), over a random program.
    fn random_laid_out_program(rng: &mut weir_testkit::SplitMix64) -> Vec<CbpfInsn> {
        let mut p = Vec::new();
        if rng.below(3) != 0 {
            p.push(s(
                [LdAbsB, LdAbsH, LdxMsh][rng.below_usize(3)],
                [23, 14, 29][rng.below_usize(3)],
            ));
        }
        let body = random_program(rng);
        let at = p.len();
        p.extend(body);
        // Copies of earlier loads at random later places: jumps past the place reach one
        // further (those that cannot, and those landing on it, now land one short: still a
        // program).
        for _ in 0..rng.below(3) {
            let loads: Vec<usize> = (at..p.len())
                .filter(|&i| matches!(p[i].op, LdAbsH | LdAbsB | LdxMsh | LdImm))
                .collect();
            if loads.is_empty() {
                break;
            }
            let from = loads[rng.below_usize(loads.len())];
            let to = from + 1 + rng.below_usize(p.len() - from - 1);
            let copy = p[from];
            for (i, insn) in p.iter_mut().enumerate().take(to) {
                let past = |d: usize| i + 1 + d > to;
                if insn.op == Ja && past(insn.k as usize) {
                    insn.k += 1;
                } else if insn.op.is_conditional_jump() {
                    if past(usize::from(insn.jt)) && insn.jt < 255 {
                        insn.jt += 1;
                    }
                    if past(usize::from(insn.jf)) && insn.jf < 255 {
                        insn.jf += 1;
                    }
                }
            }
            p.insert(to, copy);
        }
        p
    }

    /// A random program of kind `case % 3`: plain, laid out, dispatch (the random tests'
    /// three shapes, in turn).
    fn random_program_of_kind(rng: &mut weir_testkit::SplitMix64, case: usize) -> Vec<CbpfInsn> {
        match case % 3 {
            0 => random_program(rng),
            1 => random_laid_out_program(rng),
            _ => random_dispatch_program(rng),
        }
    }

    /// A program in the shape of a laid-out protocol dispatch: blocks that each load one of
    /// a few header fields and test it against a few constants, every jump to a later
    /// block's load or to one of the two returns. The same field is loaded again on many
    /// paths (drop_redundant's drops) and tests are decided by earlier ones on some edges
    /// only (walks that pass a place where their changed slots are dead, then end on an
    /// undecided test).
    fn random_dispatch_program(rng: &mut weir_testkit::SplitMix64) -> Vec<CbpfInsn> {
        let blocks = 2 + rng.below_usize(9);
        let mut shape = Vec::with_capacity(blocks);
        for _ in 0..blocks {
            let field = [s(LdAbsH, 12), s(LdAbsB, 23), s(LdAbsB, 20)];
            shape.push((field[rng.below_usize(3)], 1 + rng.below_usize(2)));
        }
        let mut starts = Vec::with_capacity(blocks + 2);
        let mut at = 0;
        for &(_, tests) in &shape {
            starts.push(at);
            at += 1 + tests;
        }
        // The accept, then the reject.
        starts.extend([at, at + 1]);
        let mut p = Vec::with_capacity(at + 2);
        for (b, &(load, tests)) in shape.iter().enumerate() {
            p.push(load);
            for t in 0..tests {
                let here = p.len();
                let target = |rng: &mut weir_testkit::SplitMix64, next: bool| {
                    // The next test of the block, or a later block's load, or a return.
                    let to = if next && t + 1 < tests {
                        here + 1
                    } else {
                        starts[b + 1 + rng.below_usize(starts.len() - b - 1)]
                    };
                    (to - here - 1).min(255) as u8
                };
                let k = [0x800, 0x86dd, 6, 17][rng.below_usize(4)];
                let (jt, jf) = if rng.below(2) == 0 {
                    (target(rng, false), target(rng, true))
                } else {
                    (target(rng, true), target(rng, false))
                };
                p.push(j(JeqK, k, jt, jf));
            }
        }
        p.extend([s(RetK, 262144), s(RetK, 0)]);
        p
    }

    /// What [`read_through_removals`] says of a value without naming it: constants, packet
    /// fields, `4*([k]&0xf)` and the length as they are, any other value by its kind alone
    /// (its number, and the position in an `Entry` name, are another analysis's).
    fn shape(values: &Values, v: Val) -> Node {
        match values.node(v) {
            n @ (Node::Const(_) | Node::Pkt(..) | Node::Msh(_) | Node::Len) => n,
            Node::Ind(_, k, n) => Node::Ind(0, k, n),
            Node::Alu(op, _, _) => Node::Alu(op, 0, 0),
            Node::Neg(_) => Node::Neg(0),
            Node::Entry(_, s) => Node::Entry(0, s),
        }
    }

    /// After drop_redundant's drops and the compaction, the analysis of the program it was
    /// given, read through [`read_through_removals`]' positions, answers as the analysis of
    /// the program made: the same instructions reached, the same kinds of value in every slot
    /// (constants and packet fields the same), and so the same [`load_ends`]; on random and
    /// laid-out-like programs, many with indirect loads whose ends the analysis knows.
    #[test]
    fn an_analysis_read_through_removed_repeated_loads_is_the_analysis_of_what_is_left() {
        let mut rng = weir_testkit::SplitMix64::new(0x7e4d);
        let (mut read_through, mut refused, mut known_indirect_ends) = (0, 0, 0);
        for case in 0..30_000 {
            let mut p = random_program_of_kind(&mut rng, case);
            let mut cur = Current::new();
            let mut sc = Scratch::with_room(p.len());
            // A round's thread first (as tightening runs it), then drop_redundant.
            tighten_step(0, &mut p, &mut cur, &mut sc);
            let given = p.clone();
            let an = current(&mut cur, &p);
            drop_redundant(&mut p, an);
            compact(&mut p, &mut sc);
            if p == given {
                continue;
            }
            let (mut origin, mut kept_at) = (Vec::new(), Vec::new());
            if !read_through_removals(&given, &p, &mut cur.an, &mut origin, &mut kept_at) {
                refused += 1;
                continue;
            }
            read_through += 1;
            let mut fresh = Analysis::new();
            fresh.redo(&p);
            for (j, &i) in origin.iter().enumerate() {
                let (mine, theirs) = (cur.an.slots[i], fresh.slots[j]);
                assert_eq!(mine.is_some(), theirs.is_some(), "{j} {given:?} {p:?}");
                let (Some(mine), Some(theirs)) = (mine, theirs) else { continue };
                for slot in 0..SLOTS {
                    assert_eq!(
                        shape(&cur.an.values, mine[slot]),
                        shape(&fresh.values, theirs[slot]),
                        "{j} {slot} {given:?} {p:?}"
                    );
                }
            }
            let (mut via, mut own) = (Vec::new(), Vec::new());
            load_ends(&p, Some((&cur.an, Some(&origin))), &mut via);
            load_ends(&p, Some((&fresh, None)), &mut own);
            assert_eq!(via, own, "{given:?} {p:?}");
            known_indirect_ends += usize::from(
                p.iter().zip(&own).any(|(i, &e)| e > 0 && matches!(i.op, LdIndW | LdIndH | LdIndB)),
            );
        }
        eprintln!("read through {read_through}, refused {refused}, with indirect ends known {known_indirect_ends}");
        assert!(
            read_through > 2000 && known_indirect_ends > 200,
            "{read_through} {known_indirect_ends}"
        );
    }

    /// [`read_through_removals`] takes a program with a repeated load removed and the jumps
    /// going where they went, and refuses one whose jump goes elsewhere or whose removed
    /// load did not repeat a value.
    #[test]
    fn reading_through_removals_refuses_other_changes() {
        let before =
            vec![s(LdAbsH, 12), j(JeqK, 0x800, 2, 0), s(LdAbsH, 12), s(RetK, 1), s(RetK, 0)];
        let mut an = Analysis::new();
        an.redo(&before);
        let (mut origin, mut kept_at) = (Vec::new(), Vec::new());
        let mut reads = |after: &[CbpfInsn], an: &mut Analysis| {
            read_through_removals(&before, after, an, &mut origin, &mut kept_at)
                .then(|| origin.clone())
        };
        let removed = [s(LdAbsH, 12), j(JeqK, 0x800, 1, 0), s(RetK, 1), s(RetK, 0)];
        assert_eq!(reads(&removed, &mut an), Some(vec![0, 1, 3, 4]));
        let swapped = [s(LdAbsH, 12), j(JeqK, 0x800, 0, 1), s(RetK, 1), s(RetK, 0)];
        assert_eq!(reads(&swapped, &mut an), None);
        // The same shape with a load of another field: not a repeat.
        let before =
            vec![s(LdAbsH, 12), j(JeqK, 0x800, 2, 0), s(LdAbsB, 23), s(RetK, 1), s(RetK, 0)];
        let mut an = Analysis::new();
        an.redo(&before);
        assert!(!read_through_removals(&before, &removed, &mut an, &mut origin, &mut kept_at));
    }

    /// Stopping on a round [`Round::settles`] vouches for gives what running the confirming
    /// round gives, on random programs and laid-out-like ones; the stop is taken on many of
    /// them, through each way it is proven (thread unchanged, thread asked again, with
    /// drop_redundant's and drop_dead's drops; thread unchanged but only settled for the
    /// check, a walk having passed a place with its changed slots dead and ended undecided).
    #[test]
    fn a_settled_round_ends_where_the_confirming_round_would() {
        let cases: usize =
            std::env::var("WEIR_SETTLE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24_000);
        let mut rng = weir_testkit::SplitMix64::new(0x5e77);
        let (mut settled, mut asked, mut dropped_redundant, mut dropped_head) = (0, 0, 0, 0);
        let mut for_the_check = 0;
        for case in 0..cases {
            let p = random_program_of_kind(&mut rng, case);
            assert!(well_formed(&p), "{p:?}");
            let (q, stopped) = tighten_rounds(&p, true);
            let (r, confirmed) = tighten_rounds(&p, false);
            assert!(confirmed.is_none());
            assert_eq!(q, r, "{p:?}");
            if let Some(why) = stopped {
                settled += 1;
                asked += usize::from(why.changed[0]);
                dropped_redundant += usize::from(why.changed[1]);
                dropped_head += usize::from(why.changed[2]);
                for_the_check += usize::from(!why.changed[0] && !why.thread_settled.fully);
            }
        }
        eprintln!("settled {settled} of {cases}: thread asked again {asked}, drop_redundant {dropped_redundant}, drop_dead {dropped_head}, unchanged thread settled only for the check {for_the_check}");
        if cases >= 24_000 {
            assert!(
                settled > cases / 20
                    && asked > 300
                    && dropped_redundant > 100
                    && dropped_head > 300
                    && for_the_check > 20,
                "{settled} {asked} {dropped_redundant} {dropped_head} {for_the_check}"
            );
        }
    }

    /// `icmp6` as the emitter lays it out: thread changes nothing (the walk from `jeq
    /// #0x3a`'s false edge passes the second `ldb [20]`, where it changed no slot, and ends
    /// on the undecided `jeq #0x2c`), drop_redundant drops that load, and the round stops
    /// there, settled for the check only, with what the confirming round gives.
    #[test]
    fn a_round_that_only_dropped_a_repeated_load_after_threading_nothing_settles() {
        let p = vec![
            s(LdAbsH, 12),
            j(JeqK, 0x86dd, 0, 7),
            s(LdAbsB, 20),
            j(JeqK, 0x3a, 4, 0),
            s(LdAbsB, 20),
            j(JeqK, 0x2c, 0, 3),
            s(LdAbsB, 54),
            j(JeqK, 0x3a, 0, 1),
            s(RetK, 262144),
            s(RetK, 0),
        ];
        let (q, stopped) = tighten_rounds(&p, true);
        assert_eq!(q, tighten_with_confirming_round(&p));
        assert_eq!(q.len(), 9, "{q:?}");
        let why = stopped.expect("the first round settles");
        assert!(!why.changed[0] && why.changed[1] && !why.changed[2]);
        assert!(!why.thread_settled.fully && why.thread_settled.for_the_check);
    }

    /// The guard-case program of the two tests below: a head guard `ldb [62]`, then (with
    /// `ja_after_guard`) a `ja +0` that compaction drops in round 0, then a walk from `jgt #19`'s
    /// false edge through `neg` to a second `ldb [62]`. Tightened with and without the confirming
    /// round it must be the same, with the `jgt #19` threaded past the `jge`.
    fn assert_dropped_guard_case_settles_right(ja_after_guard: bool) {
        let mut p = vec![s(LdAbsB, 62)];
        if ja_after_guard {
            p.push(s(Ja, 0));
        }
        p.extend([
            s(LdLen, 0),
            j(JgtK, 19, 0, 2),
            s(LdAbsH, 3),
            j(JgeK, 71, 0, 6),
            s(LdLen, 0),
            s(Neg, 0),
            s(Tax, 0),
            s(LdAbsB, 62),
            j(JgtX, 0, 1, 0),
            s(RetK, 262144),
            s(RetK, 0),
        ]);
        let q = tighten(&p);
        assert_eq!(q, tighten_with_confirming_round(&p));
        assert_eq!(q[1], j(JgtK, 19, 0, 3), "{q:?}");
    }

    /// A head guard dropped makes a later load of its bytes one that may abort, where a walk
    /// that went on to an undecided test (threading nothing) now stops, ending at the last
    /// place it passed with its changed slots dead: the settled stop must see that place
    /// (found by the laid-out-filter oracle; `jgt #19`'s false edge goes to `neg`).
    #[test]
    fn a_dropped_guard_can_end_a_walk_sooner() {
        assert_dropped_guard_case_settles_right(false);
    }

    /// The same program with a `ja +0` after the guard, which compaction drops in round 0:
    /// thread's step changed the program, so the settled stop asks thread again on P1, where
    /// the walk from `jgt #19`'s false edge passes `neg` (its changed slots dead) and then
    /// `ldb [62]`, which only the dropped guard kept from aborting ([`Passed::fragile`]).
    #[test]
    fn a_walk_past_a_load_the_dropped_guard_covered_is_not_settled() {
        assert_dropped_guard_case_settles_right(true);
    }

    /// Tightenings one after another on a thread, each in the buffers the one before left
    /// ([`Workspace::take`]), give what each gives in new buffers: programs of all lengths
    /// (some past [`KEEP_WORKSPACE_UP_TO`], whose buffers are not kept), each followed by
    /// itself and by its tightened form (what the memos of the buffers last held).
    #[test]
    fn a_spare_workspace_tightens_as_a_new_one() {
        let mut rng = weir_testkit::SplitMix64::new(0x5ba4e);
        let (mut kept, mut long) = (0, 0);
        for case in 0..3000 {
            let mut p = random_laid_out_program(&mut rng);
            if case % 50 == 0 {
                // Past the bound: a straight run of loads and tests before the program.
                let mut head: Vec<CbpfInsn> = (0..KEEP_WORKSPACE_UP_TO)
                    .map(|i| if i % 2 == 0 { s(LdAbsH, 12) } else { j(JeqK, 0x800, 0, 0) })
                    .collect();
                head.extend(p);
                p = head;
                long += 1;
            }
            let tightened = tighten(&p);
            for q in [&p, &p, &tightened] {
                let spare = SPARE.with(|s| s.borrow().is_some());
                kept += usize::from(spare);
                let (mut fresh, mut ws) = (q.clone(), Workspace::new());
                let want = if well_formed(q) {
                    let settled = tighten_in(&mut fresh, true, &mut ws).is_some();
                    (if fresh.len() <= q.len() { fresh } else { q.clone() }, settled)
                } else {
                    (fresh, false)
                };
                let (got, settled) = tighten_rounds(q, true);
                assert_eq!((got, settled.is_some()), want, "{q:?}");
            }
        }
        assert!(kept > 5000 && long > 50, "{kept} {long}");
    }

    #[test]
    fn tightening_random_programs_keeps_them_well_formed_and_no_longer() {
        let mut rng = weir_testkit::SplitMix64::new(0x7167);
        for _ in 0..2000 {
            let p = random_program(&mut rng);
            let q = tighten(&p);
            assert!(q.len() <= p.len() && well_formed(&q), "{p:?} -> {q:?}");
        }
    }

    /// Stopping after a round's worth of unchanged steps, wherever they start, and
    /// drop_dead without the analysis where it drops every dead load, give what whole
    /// rounds with the analysis gave: the same program out of every random program,
    /// including those tightened over several rounds.
    #[test]
    fn tightening_stops_after_a_cycle_of_unchanged_steps_as_whole_rounds_would() {
        let mut rng = weir_testkit::SplitMix64::new(0x57e9);
        let (mut shrunk, mut two_rounds) = (0, 0);
        for _ in 0..6000 {
            let p = random_program(&mut rng);
            let q = tighten(&p);
            assert_eq!(q, tighten_as_it_was(&p), "{p:?}");
            shrunk += usize::from(q.len() < p.len());
            // A second tightening of the output from scratch finds nothing more: the
            // stop did not leave a step undone.
            assert_eq!(tighten(&q), q, "{p:?}");
            let mut once = p.clone();
            let (mut cur, mut sc) = (Current::new(), Scratch::default());
            (0..STEPS).for_each(|step| tighten_step(step, &mut once, &mut cur, &mut sc));
            two_rounds += usize::from(well_formed(&p) && once != q);
        }
        assert!(shrunk > 1000 && two_rounds > 100, "{shrunk} {two_rounds}");
    }

    /// drop_dead with indirect loads vouching for nothing, where it says it kept no dead
    /// load it could have dropped, leaves what it leaves with the analysis's ends; and it
    /// never drops a load that those ends keep.
    #[test]
    fn dead_loads_all_dropped_without_indirect_ends_need_no_analysis() {
        let mut rng = weir_testkit::SplitMix64::new(0xdead);
        let (mut skipped, mut needed, mut differ) = (0, 0, 0);
        for _ in 0..6000 {
            let p = random_program(&mut rng);
            if !well_formed(&p) {
                continue;
            }
            let (mut live, mut need, mut ends) = (Live::default(), Vec::new(), Vec::new());
            let mut an = Analysis::new();
            an.redo(&p);
            let mut full = p.clone();
            load_ends(&full, Some((&an, None)), &mut ends);
            drop_dead(&mut full, &ends, &mut live, &mut need);
            let mut cautious = p.clone();
            load_ends(&cautious, None, &mut ends);
            let kept = drop_dead(&mut cautious, &ends, &mut live, &mut need);
            // Whatever it says, the cautious run drops only what the full one drops.
            for (c, f) in cautious.iter().zip(&full) {
                assert!(c == f || *f == nop(), "{p:?}");
            }
            if kept {
                needed += 1;
                differ += usize::from(cautious != full);
            } else {
                skipped += 1;
                assert_eq!(cautious, full, "{p:?}");
            }
        }
        // Both ways are taken, and some programs do need the ends.
        assert!(skipped > 1000 && needed > 100 && differ > 10, "{skipped} {needed} {differ}");
    }

    /// Where the cheap test says drop_redundant finds nothing, it finds nothing.
    #[test]
    fn programs_without_a_repeated_value_keep_their_loads() {
        let mut rng = weir_testkit::SplitMix64::new(0x4e9e);
        let (mut clear, mut repeats) = (0, 0);
        for _ in 0..5000 {
            let p = random_program(&mut rng);
            if may_repeat_a_value(&p) {
                repeats += 1;
                continue;
            }
            clear += 1;
            let mut an = Analysis::new();
            an.redo(&p);
            let mut q = p.clone();
            drop_redundant(&mut q, &mut an);
            assert_eq!(q, p);
        }
        assert!(clear > 100 && repeats > 1000, "{clear} {repeats}");
        // A repeated load, or a register copy, may be redundant.
        assert!(may_repeat_a_value(&[s(LdAbsH, 12), s(LdAbsH, 12), s(RetA, 0)]));
        assert!(may_repeat_a_value(&[s(LdAbsH, 12), s(Tax, 0), s(RetA, 0)]));
        assert!(!may_repeat_a_value(&[s(LdAbsH, 12), s(LdAbsB, 12), s(RetA, 0)]));
    }

    /// Numbering by the open-addressed table, as it grows and is reset, against a plain map: the
    /// same number for the same node, a new one for a new node, across resets.
    #[test]
    fn values_are_numbered_as_a_map_numbers_them() {
        let mut rng = weir_testkit::SplitMix64::new(0x5ca7);
        let mut values = Values::new();
        let mut grown = 0;
        for round in 0..200 {
            values.reset();
            let mut want: HashMap<Node, Val> = HashMap::new();
            // Some rounds stay within the first table, some make it grow (and the next
            // round starts on the grown table, reset).
            let distinct = if round % 2 == 0 { 12 } else { FIRST_TABLE as u64 };
            for _ in 0..400 {
                let n = match rng.below(4) {
                    0 => Node::Const(rng.below(distinct) as u32),
                    1 => Node::Pkt(rng.below(distinct) as u32, 2),
                    2 => Node::Entry(rng.below_usize(3), rng.below_usize(SLOTS)),
                    _ => Node::Alu(AndK, rng.below(distinct) as Val, 0),
                };
                let fresh = SLOTS as Val + want.len() as Val;
                let expect = match n {
                    Node::Entry(0, s) => s as Val,
                    _ => *want.entry(n).or_insert(fresh),
                };
                assert_eq!(values.id(n), expect, "{n:?} in round {round}");
                assert_eq!(values.node(expect), n);
            }
            grown += usize::from(values.nodes.len() - SLOTS > FIRST_TABLE / 2);
        }
        assert!(grown > 50, "{grown}");
    }

    #[test]
    fn entry_values_are_numbered_by_slot() {
        let mut values = Values::new();
        let entry = State::entry();
        for s in 0..SLOTS {
            assert_eq!(values.id(Node::Entry(0, s)), entry.slots[s], "slot {s}");
        }
        // A new node after them gets a number of its own.
        let k = values.konst(7);
        assert!(!entry.slots.contains(&k));
    }

    /// The fact list against the hash map it replaced: lookups, updates and joins give the
    /// same facts for random values and tests.
    #[test]
    fn fact_lists_join_as_maps_do() {
        use std::collections::HashMap;
        let mut values = Values::new();
        let mut rng = weir_testkit::SplitMix64::new(0x7167);
        let mut next = move |n: u32| rng.below(u64::from(n)) as u32;
        let ops = [JeqK, JgtK, JgeK, JsetK];
        let mut spilled = 0;
        for _ in 0..300 {
            let mut lists = [Facts::default(), Facts::default()];
            let mut maps: [HashMap<Val, Fact>; 2] = [HashMap::new(), HashMap::new()];
            for (list, map) in lists.iter_mut().zip(maps.iter_mut()) {
                for _ in 0..next(12) {
                    // Few distinct values, so the two lists share some.
                    let v = values.id(Node::Pkt(next(10), 2));
                    let mut f = map.get(&v).copied().unwrap_or_else(|| base_fact(&values, v));
                    assert_eq!(list.get(v).copied(), map.get(&v).copied());
                    f.learn(ops[next(4) as usize], next(0x1_0000), next(2) == 0);
                    list.set(v, f);
                    map.insert(v, f);
                }
                assert!(list.as_slice().windows(2).all(|w| w[0].0 < w[1].0), "sorted, no repeats");
                assert_eq!(list.as_slice().len(), map.len());
            }
            let a = State { slots: State::entry().slots, facts: lists[0].clone(), len_ok: 0 };
            let b = State { slots: State::entry().slots, facts: lists[1].clone(), len_ok: 0 };
            let joined = a.join(&b, 1, &mut values);
            // In place, into a state whose facts are stored either way, gives the same.
            let mut in_place = a.clone();
            in_place.join_in_place(&b, 1, &mut values);
            assert_eq!(in_place, joined);
            // Copies between inline and spilled lists keep every fact.
            let mut copy = State::entry();
            for from in [&a, &b, &joined, &a] {
                copy.clone_from(from);
                assert_eq!(copy.facts.as_slice(), from.facts.as_slice());
            }
            spilled += usize::from(a.facts.as_slice().len() > INLINE_FACTS);
            let mut expected: Vec<(Val, Fact)> = maps[0]
                .iter()
                .filter_map(|(v, f)| {
                    let j = f.join(maps[1].get(v)?);
                    (j != base_fact(&values, *v)).then_some((*v, j))
                })
                .collect();
            expected.sort_by_key(|&(v, _)| v);
            assert_eq!(joined.facts.as_slice(), expected);
        }
        assert!(spilled > 20, "{spilled}");
    }

    #[test]
    fn ruled_out_values_keep_their_order_and_bound() {
        let mut f = Fact::any();
        for k in [5, 9, 5, 1, 2, 3, 4, 6, 7, 8, 10] {
            f.learn(JeqK, k, false);
        }
        assert_eq!(f.ne.as_slice(), &[5, 9, 1, 2, 3, 4, 6, 7][..]);
        let mut g = Fact::any();
        for k in [7, 2, 11] {
            g.learn(JeqK, k, false);
        }
        assert_eq!(f.join(&g).ne.as_slice(), &[2, 7][..]);
        assert_eq!(f.decide(JeqK, 9), Some(false));
        assert_eq!(f.decide(JeqK, 10), None);
    }

    #[test]
    fn a_test_decided_on_an_edge_is_jumped_over() {
        // ldh [12]; jeq 0x800 -> (ld [26]; jeq 1) -> ldh [12]; jeq 0x800 -> accept
        let p = vec![
            s(LdAbsH, 12),
            j(JeqK, 0x800, 0, 2),
            s(LdAbsW, 26),
            j(JeqK, 1, 0, 3),
            s(LdAbsH, 12),
            j(JeqK, 0x800, 0, 1),
            s(RetK, 65535),
            s(RetK, 0),
        ];
        let q = tighten(&p);
        // Both edges into the second type test know its outcome: the test goes.
        let want = vec![
            s(LdAbsH, 12),
            j(JeqK, 0x800, 0, 3),
            s(LdAbsW, 26),
            j(JeqK, 1, 0, 1),
            s(RetK, 65535),
            s(RetK, 0),
        ];
        assert_eq!(q, want);
    }

    #[test]
    fn a_dead_guard_load_goes_only_when_a_later_load_reaches_as_far() {
        let p = vec![s(LdAbsB, 29), s(LdAbsH, 12), j(JeqK, 0x800, 0, 1), s(RetK, 1), s(RetK, 0)];
        // [12:2] does not reach byte 29: the guard rejects short packets and must stay.
        assert_eq!(tighten(&p), p);
        let p = vec![s(LdAbsB, 9), s(LdAbsH, 12), j(JeqK, 0x800, 0, 1), s(RetK, 1), s(RetK, 0)];
        assert_eq!(tighten(&p), p[1..].to_vec());
    }

    #[test]
    fn equal_tails_are_shared() {
        let p = vec![
            s(LdAbsB, 20),
            j(JeqK, 6, 0, 3),
            s(LdAbsH, 54),
            j(JeqK, 22, 4, 5),
            s(RetK, 0),
            j(JeqK, 17, 0, 3),
            s(LdAbsH, 54),
            j(JeqK, 22, 0, 1),
            s(RetK, 1),
            s(RetK, 0),
        ];
        let q = tighten(&p);
        assert!(q.len() < p.len(), "{q:?}");
        assert_eq!(q.iter().filter(|i| i.op == LdAbsH).count(), 1, "{q:?}");
    }

    #[test]
    fn backward_jumps_leave_the_program_alone() {
        let p = vec![s(LdAbsB, 9), s(LdAbsB, 9), s(Ja, u32::MAX - 1), s(RetK, 0)];
        assert_eq!(tighten(&p), p);
    }
    /// What [`Renaming::pair`] found: the values of a fresh analysis and of another one of
    /// the same program, paired one to one.
    #[derive(Default)]
    struct Renaming {
        to_mine: HashMap<Val, Val>,
        to_fresh: HashMap<Val, Val>,
    }

    impl Renaming {
        /// Pairs `f` (numbered in `fresh`) with `m` (in `mine`): never one with two, and
        /// the same node with operands paired in turn.
        fn pair(&mut self, fresh: &Values, mine: &Values, f: Val, m: Val) {
            if let Some(&known) = self.to_mine.get(&f) {
                assert_eq!(known, m, "{f} paired twice");
                return;
            }
            assert!(self.to_fresh.insert(m, f).is_none(), "{m} paired twice");
            self.to_mine.insert(f, m);
            match (fresh.node(f), mine.node(m)) {
                (Node::Ind(x, k, n), Node::Ind(y, k2, n2)) => {
                    assert_eq!((k, n), (k2, n2));
                    self.pair(fresh, mine, x, y);
                }
                (Node::Alu(op, a, b), Node::Alu(op2, c, d)) => {
                    assert_eq!(op, op2);
                    self.pair(fresh, mine, a, c);
                    self.pair(fresh, mine, b, d);
                }
                (Node::Neg(a), Node::Neg(c)) => self.pair(fresh, mine, a, c),
                (a, b) => assert_eq!(a, b),
            }
        }
    }

    /// `mine` is the analysis `fresh` is (both of `p`) but for the value numbers: the same
    /// instructions reached, slots holding paired values, and at each jump the same bytes
    /// proven and the same facts of paired values (each list sorted by its own numbers).
    fn assert_same_up_to_renaming(p: &[CbpfInsn], mine: &Analysis, fresh: &Analysis) {
        let mut names = Renaming::default();
        for i in 0..p.len() {
            assert_eq!(mine.reached[i], fresh.reached[i], "{i} {p:?}");
            let (Some(m), Some(f)) = (mine.slots[i], fresh.slots[i]) else {
                assert_eq!(mine.slots[i], fresh.slots[i], "{i} {p:?}");
                continue;
            };
            for slot in 0..SLOTS {
                names.pair(&fresh.values, &mine.values, f[slot], m[slot]);
            }
        }
        for i in (0..p.len()).filter(|&i| p[i].op.is_jump()) {
            let (Some(m), Some(f)) = (mine.input(i), fresh.input(i)) else {
                assert_eq!(mine.input(i).is_some(), fresh.input(i).is_some(), "{i} {p:?}");
                continue;
            };
            assert_eq!(m.len_ok, f.len_ok, "{i} {p:?}");
            let (mf, ff) = (m.facts.as_slice(), f.facts.as_slice());
            assert_eq!(mf.len(), ff.len(), "{i} {p:?}");
            assert!(mf.windows(2).all(|w| w[0].0 < w[1].0), "{i} {p:?}");
            for &(v, fact) in ff {
                if let Some(&w) = names.to_mine.get(&v) {
                    assert_eq!(m.facts.get(w), Some(&fact), "{i} {p:?}");
                }
            }
        }
    }

    /// An analysis resumed from the last program's ([`Analysis::redo_from`] past
    /// [`shared_prefix`]) is the fresh analysis of the program, renamed: through the rounds
    /// of random, laid-out and dispatch programs, asked before every step (each step's
    /// program resumes from the last one's analysis, its walks' values in the table too).
    #[test]
    fn a_resumed_analysis_is_a_fresh_one_renamed() {
        let mut rng = weir_testkit::SplitMix64::new(0x4e5a);
        let (mut resumed, mut asked) = (0, 0);
        for case in 0..20_000 {
            let mut p = random_program_of_kind(&mut rng, case);
            if !well_formed(&p) {
                continue;
            }
            let mut cur = Current::new();
            let mut sc = Scratch::with_room(p.len());
            for _ in 0..3 {
                for step in 0..STEPS {
                    let keep =
                        if cur.is_of(&p) || cur.made == 0 { 0 } else { shared_prefix(&cur.of, &p) };
                    current(&mut cur, &p);
                    let mut fresh = Analysis::new();
                    fresh.redo(&p);
                    assert_same_up_to_renaming(&p, &cur.an, &fresh);
                    asked += 1;
                    resumed += usize::from(keep > 0 && keep < p.len());
                    tighten_step(step, &mut p, &mut cur, &mut sc);
                }
            }
        }
        eprintln!("asked {asked}, resumed {resumed}");
        assert!(resumed > 5000, "{resumed}");
    }

    /// [`shared_prefix`] ends before the first instruction that differs and before any
    /// target a jump of the prefix reaches in one program and not the other.
    #[test]
    fn the_shared_prefix_ends_where_an_edge_or_instruction_differs() {
        let old = vec![
            s(LdAbsH, 12),
            j(JeqK, 0x800, 0, 3),
            s(LdAbsB, 23),
            s(LdAbsB, 23),
            j(JeqK, 6, 0, 1),
            s(RetK, 1),
            s(RetK, 0),
        ];
        // The repeated load gone: the test at 1 goes elsewhere past 3.
        let mut new = old.clone();
        new.remove(3);
        new[1].jf = 2;
        assert_eq!(shared_prefix(&old, &new), 3);
        // A jump whose target moved bounds the prefix before any instruction differs.
        let mut moved = old.clone();
        moved[1].jf = 4;
        assert_eq!(shared_prefix(&old, &moved), 5);
        assert_eq!(shared_prefix(&old, &old), old.len());
    }

    /// Where [`ja_drops_nothing`] answers true a `ja` in place of the instruction leaves as
    /// many reached, on random programs; [`merge_tails`] skipping those copies ends where
    /// trying every copy does.
    #[test]
    fn merge_tails_skips_only_copies_whose_ja_would_drop_nothing() {
        let mut rng = weir_testkit::SplitMix64::new(0x3a17);
        let (mut nothing, mut dropped) = (0, 0);
        for case in 0..20_000 {
            let p = random_program_of_kind(&mut rng, case);
            if !well_formed(&p) {
                continue;
            }
            let mut reach = Vec::new();
            let live = reachable(&p, &mut reach);
            for here in 0..p.len() {
                if !reach[here] || p[here].op.is_return() {
                    continue;
                }
                let mut q = p.clone();
                q[here] = CbpfInsn::new(Ja, 0, 0, (p.len() - 1 - here - 1) as u32);
                let count = reachable(&q, &mut Vec::new());
                if ja_drops_nothing(&p, &reach, here) {
                    assert!(count >= live, "{here} {p:?}");
                    nothing += 1;
                } else {
                    dropped += usize::from(count + 2 <= live);
                }
            }
            let (mut a, mut b) = (p.clone(), p.clone());
            merge_tails(&mut a, &mut Scratch::with_room(p.len()));
            merge_tails_trying::<true>(&mut b, &mut Scratch::with_room(p.len()));
            assert_eq!(a, b, "{p:?}");
        }
        eprintln!("a ja dropping nothing {nothing}, dropping code {dropped}");
        assert!(nothing > 10_000 && dropped > 1000, "{nothing} {dropped}");
    }
}
