//! Filters straight to native code: [`weir_filter`]'s IR compiled by Cranelift into one
//! function, without going through eBPF.
//!
//! A filter is a tree of tests over packet bytes; its meaning is the reference evaluator's
//! ([`weir_filter::Filter::run`]), which this code must give on every packet: loads are
//! big-endian, any load past the captured bytes or division by zero rejects the packet,
//! shifts by 32 or more give 0, scratch slots start at 0. The native code reads nothing
//! outside the packet (every load is checked, once per path, unless a guard or an earlier
//! check on the same path covers it; see [`lower`]) and the tables of its own large sets,
//! so [`NativeFilter`] is a safe API over any packet.
//!
//! Compiling costs a few hundred microseconds for everyday filters (one Cranelift function,
//! optimized for speed; the host ISA is built once per process); sets become a binary
//! search over a table ([`set`]), so large host lists compile as fast as small ones, and a
//! firewall's `host A and port P` list, fused by the lowering into one `Pred::Pairs`, is
//! code the size of one term plus a call to its table probe (module `pairs`). Other long
//! lists of distinct alternatives are split over several functions ([`SPLIT_NODES`]), so
//! that compile time and memory grow with the list.
//!
//! ```
//! use weir_filter::{Expr, Filter, Pred, Size};
//! // "ether proto 0x0800": the Ethernet type field is the 2 bytes at offset 12.
//! let ipv4 = Filter::new(Pred::eq(Expr::load_at(12, Size::Half), 0x0800));
//! let native = weir_jit::filter::compile(&ipv4).unwrap();
//! let mut pkt = vec![0u8; 14];
//! pkt[12] = 0x08;
//! assert!(native.matches(&pkt, 14));
//! assert_eq!(native.run(&pkt, 14), ipv4.accept);
//! assert!(!native.matches(&pkt[..13], 14)); // too short: the load aborts, the packet is rejected
//! ```

mod code;
mod lower;
mod pairs;
mod set;

use weir_filter::opt::{has_store, node_count};
use weir_filter::{Filter, Pred, SCRATCH_SLOTS};

use self::code::{Code, Piece, ResultsCode};
use self::lower::Root;
use self::set::SetTables;

/// Why a filter did not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// Predicates and expressions nest deeper than the compiler follows.
    #[error("the filter nests deeper than {limit} levels")]
    TooDeep { limit: u32 },
    /// A set with more ranges than a table's 32-bit offsets reach.
    #[error("a set of {ranges} ranges is too large to compile")]
    SetTooLarge { ranges: usize },
    /// The host is not one Cranelift can generate code for (or not 64-bit).
    #[error("unsupported host: {0}")]
    Host(String),
    /// Cranelift refused the generated function or could not map the code.
    #[error("code generation failed: {0}")]
    Backend(String),
    /// A bug in the compiler (an assumption it relies on did not hold).
    #[error("internal filter compiler error: {0}")]
    Internal(&'static str),
    /// A construct the native compiler does not support yet (names it).
    #[error("not supported by the native compiler yet: {0}")]
    Unsupported(&'static str),
}

/// The largest function (in IR nodes, [`weir_filter::opt::node_count`]) compiled with
/// Cranelift's optimizations; larger ones are compiled with `opt_level = none`, as the eBPF
/// JIT does above [`crate::OPTIMIZE_MAX_SLOTS`]. A filter's code is compares and branches
/// whose loads the lowering already shares along each path, so the optimizations gain
/// little on it, while on a large function (a long list of distinct host and port pairs)
/// the e-graph pass and the register allocator grow faster than the code: measured here
/// (bench/records/2026-11-25-compile.txt), optimized and not, a 10,000-pair firewall list
/// in one function took 14.8 s and 6.0 s; up to a few thousand nodes the two take about the
/// same time. Filters that can be split ([`SPLIT_NODES`]) never reach it.
pub const OPTIMIZE_MAX_NODES: usize = 20_000;

/// Filters larger than this many IR nodes whose predicate is a long `or` (or an `and` ending
/// in one), writing no scratch slot, are compiled as several functions of about this size:
/// the `and`'s other parts in one, then the `or`'s parts, a run of them per function, each
/// function answering true, false or aborted and the next one run on false. Cranelift's time
/// and memory then grow with the filter, not faster, and no function exceeds what its code
/// buffer can hold (one function of a 100,000-pair firewall list does). Each piece checks
/// its own loads again from scratch (a few compares per piece).
pub const SPLIT_NODES: usize = 20_000;

/// A filter compiled to native code: immutable, shareable between threads, and each run
/// allocates nothing and touches nothing but the packet and the stack.
pub struct NativeFilter {
    body: Body,
    /// The range tables the code searches; the code holds their addresses.
    tables: SetTables,
    accept: u32,
}

enum Body {
    /// The whole filter, one function.
    One(Code),
    /// `head` (the `and`'s other parts, if any) must hold, then the first of `pieces` that
    /// does not answer false decides.
    Split { head: Option<Piece>, pieces: Vec<Piece> },
}

impl std::fmt::Debug for NativeFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let functions = match &self.body {
            Body::One(_) => 1,
            Body::Split { head, pieces } => pieces.len() + usize::from(head.is_some()),
        };
        f.debug_struct("NativeFilter")
            .field("code_bytes", &self.machine_code().len())
            .field("functions", &functions)
            .field("set_tables", &self.tables.len())
            .field("accept", &self.accept)
            .finish()
    }
}

/// Compiles `filter` to native code for this host (with Cranelift's optimizations for
/// functions up to [`OPTIMIZE_MAX_NODES`], split above [`SPLIT_NODES`]).
pub fn compile(filter: &Filter) -> Result<NativeFilter, CompileError> {
    compile_split(filter, None, SPLIT_NODES)
}

/// [`compile`] with Cranelift's optimizations chosen by the caller rather than by size
/// (benchmarks and tests compare the two; the code means the same either way).
pub fn compile_with(filter: &Filter, optimize: bool) -> Result<NativeFilter, CompileError> {
    compile_split(filter, Some(optimize), SPLIT_NODES)
}

/// The parts of a splittable predicate: the `and`'s other parts (possibly none) and the
/// `or`'s parts; `None` when `pred` is small, writes scratch (values would have to pass
/// between functions) or has another shape.
fn split(pred: &Pred, limit: usize) -> Option<(&[Pred], &[Pred])> {
    let (head, parts): (&[Pred], &[Pred]) = match pred {
        Pred::Or(parts) => (&[], parts),
        Pred::And(parts) => match parts.split_last() {
            Some((Pred::Or(or), head)) => (head, or),
            _ => return None,
        },
        _ => return None,
    };
    if parts.len() < 2 || node_count(pred) <= limit || has_store(pred) {
        return None;
    }
    Some((head, parts))
}

fn compile_split(
    filter: &Filter,
    optimize: Option<bool>,
    limit: usize,
) -> Result<NativeFilter, CompileError> {
    let mut tables = SetTables::new();
    let isa_for = |nodes: usize| {
        if optimize.unwrap_or(nodes <= OPTIMIZE_MAX_NODES) {
            code::host_isa()
        } else {
            code::host_isa_unoptimized()
        }
    };
    let Some((head, parts)) = split(&filter.pred, limit) else {
        let isa = isa_for(node_count(&filter.pred))?;
        let root = Root::Pred(&filter.pred);
        let code =
            Code::compile(isa, |func| lower::lower(func, root, 0, &mut tables, &[], &[], false))?;
        return Ok(NativeFilter { body: Body::One(code), tables, accept: filter.accept });
    };
    let piece = |parts: &[Pred], all: bool, tables: &mut SetTables| {
        let nodes = parts.iter().map(node_count).sum();
        let root = Root::Junction(parts, all);
        Piece::compile(isa_for(nodes)?, |func| lower::lower(func, root, 2, tables, &[], &[], false))
    };
    let head = if head.is_empty() { None } else { Some(piece(head, true, &mut tables)?) };
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut nodes = 0;
    for (i, part) in parts.iter().enumerate() {
        nodes += node_count(part);
        if nodes >= limit || i + 1 == parts.len() {
            pieces.push(piece(parts.get(start..=i).unwrap_or(&[]), false, &mut tables)?);
            start = i + 1;
            nodes = 0;
        }
    }
    Ok(NativeFilter { body: Body::Split { head, pieces }, tables, accept: filter.accept })
}

/// A filter whose scratch slots are results (pfmatch's dispatch: a [`Pred::Try`] per
/// clause, the handler index and arguments stored to slots), compiled to native code that
/// reports, on a match, the final values of the chosen slots.
///
/// Two functions of the same signature, which write the same results: `hot`, the whole
/// predicate except that a failed bounds check or a protocol chain walk returns at once
/// with "not mine" (`lower::BAIL`), and `whole`, the predicate as it is, which the call then
/// runs from the start. The hot function thus holds no code for short packets (the clauses'
/// copies behind a failed length test, which pfmatch's header split builds for every
/// level) nor for chain loops: its register pressure is the common path's, and on a
/// 16-clause dispatch it needs no callee-saved register, so it has no prologue or epilogue
/// at all (bench/records/2026-11-29-pfmatch-5.txt). A packet the hot function leaves pays
/// for both; every answer is the whole function's, so the split cannot change one.
pub struct NativeResults {
    hot: ResultsCode,
    whole: ResultsCode,
    /// The range tables the code searches; the code holds their addresses.
    _tables: SetTables,
    slots: Vec<u8>,
}

impl std::fmt::Debug for NativeResults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeResults")
            .field("hot_code_bytes", &self.hot.bytes().len())
            .field("whole_code_bytes", &self.whole.bytes().len())
            .field("slots", &self.slots)
            .finish()
    }
}

/// Compiles `filter` to one native function that, when the filter matches, also returns
/// the final values of scratch slots `slots` (at most [`SCRATCH_SLOTS`], each below it),
/// as the reference evaluator leaves them. Never split over functions by size (the slots'
/// values would have to pass between them); compiled twice, hot and whole (see
/// [`NativeResults`]).
pub fn compile_results(filter: &Filter, slots: &[u8]) -> Result<NativeResults, CompileError> {
    compile_results_read(filter, slots, &[])
}

/// [`compile_results`] for a caller that reads fewer slots by the first one's value: after
/// a match where the first slot holds `v` and `reads[v]` is given, `results[0]` to
/// `results[reads[v]]` hold their slots' final values, and each later one may hold anything
/// (it is left as it was, or written: a path that picks the first slot's value among
/// constants by data, without a branch per constant, writes what any of them reads, and
/// a slot's value there is the one of the arms whose handlers read it); for a value
/// `reads` does not cover, all of them are written. On no match `results[0]` is 0 and
/// the rest are left as they were. pfmatch's dispatch: the handler slot (its index plus
/// one, so 0 is no handler), then that handler's arguments
/// (`weir_pfmatch::Dispatch::result_reads`).
pub fn compile_results_read(
    filter: &Filter,
    slots: &[u8],
    reads: &[u8],
) -> Result<NativeResults, CompileError> {
    if slots.len() > usize::from(SCRATCH_SLOTS) || slots.iter().any(|&s| s >= SCRATCH_SLOTS) {
        return Err(CompileError::Internal("result slots out of range"));
    }
    let mut tables = SetTables::new();
    let isa = || {
        if node_count(&filter.pred) <= OPTIMIZE_MAX_NODES {
            code::host_isa()
        } else {
            code::host_isa_unoptimized()
        }
    };
    let root = Root::Pred(&filter.pred);
    let mut half = |hot: bool| {
        ResultsCode::compile(isa()?, |func| {
            lower::lower(func, root, 0, &mut tables, slots, reads, hot)
        })
    };
    let (hot, whole) = (half(true)?, half(false)?);
    Ok(NativeResults { hot, whole, _tables: tables, slots: slots.to_vec() })
}

impl NativeResults {
    /// Runs on one packet: true when the filter matches, and then `results[i]` holds the
    /// value of scratch slot `slots[i]` (those the compile's `reads` says are read: see
    /// [`compile_results_read`]); on no match `results[0]` is 0 and the rest are left as
    /// they were.
    #[inline]
    pub fn run(
        &self,
        packet: &[u8],
        wire_len: u32,
        results: &mut [u32; SCRATCH_SLOTS as usize],
    ) -> bool {
        // 0 or 1 is the answer as it is: no branch on it here (a `match` on 0 and 1 was a
        // branch on match or not, which the single filter's call does not pay; traffic
        // that mixes both mispredicts it). `BAIL` is rare: the whole function, out of line.
        let verdict = self.hot.call(packet, wire_len, results);
        if verdict <= 1 {
            verdict != 0
        } else {
            self.run_whole(packet, wire_len, results)
        }
    }

    /// [`Self::run`] on each `(packet, wire length)` of `packets` in order, `each` told its
    /// index, whether it matched and the results (as `run` leaves them). Before each packet
    /// it asks the CPU to start fetching the packet [`PREFETCH_AHEAD`] places on (its first
    /// 64 bytes, every offset the dispatch's hot function reads), so that a stream of
    /// packets not in cache waits less on each one's first load: a single `run` cannot,
    /// not knowing the next packet.
    // Always inlined, so that what `each` keeps across packets (a count) is the caller's
    // local in a register: out of line it sat behind the closure's pointer, and LLVM made
    // `n += usize::from(handler.is_some())` on it a branch, which the packets no clause
    // takes mispredicted (bench/records/2026-12-01-pfmatch-22.txt).
    #[inline(always)]
    pub fn run_each(
        &self,
        packets: &[(&[u8], u32)],
        mut each: impl FnMut(usize, bool, &[u32; SCRATCH_SLOTS as usize]),
    ) {
        let mut results = [0u32; SCRATCH_SLOTS as usize];
        // `run` inlined, its rare `BAIL` reading the packet again (`run_whole_at`): the
        // packet's pointer, length and wire length are then dead after the hot call, not
        // kept in callee-saved registers across it; and one loop while a packet lies
        // `PREFETCH_AHEAD` on, one without (no bound test a packet for the prefetch).
        // bench/records/2026-12-01-pfmatch-19.txt: the loop's own instructions.
        let mut one = |i: usize, packet: &[u8], wire_len: u32| {
            let verdict = self.hot.call(packet, wire_len, &mut results);
            let matched = if verdict <= 1 {
                verdict != 0
            } else {
                self.run_whole_at(packets, i, &mut results)
            };
            each(i, matched, &results);
        };
        let ahead = packets.get(PREFETCH_AHEAD..).unwrap_or_default();
        for (i, (&(packet, wire_len), &(next, _))) in packets.iter().zip(ahead).enumerate() {
            prefetch(next);
            one(i, packet, wire_len);
        }
        for (i, &(packet, wire_len)) in packets.iter().enumerate().skip(ahead.len()) {
            one(i, packet, wire_len);
        }
    }

    /// [`Self::run_whole`] on `packets[i]`, read again here so that the batch loop need
    /// not keep the packet's arguments live across the hot call.
    #[cold]
    #[inline(never)]
    fn run_whole_at(
        &self,
        packets: &[(&[u8], u32)],
        i: usize,
        results: &mut [u32; SCRATCH_SLOTS as usize],
    ) -> bool {
        packets.get(i).is_some_and(|&(packet, wire_len)| self.run_whole(packet, wire_len, results))
    }

    /// The whole predicate's function, for a packet the hot one left (see [`Self::run`]).
    #[cold]
    #[inline(never)]
    fn run_whole(
        &self,
        packet: &[u8],
        wire_len: u32,
        results: &mut [u32; SCRATCH_SLOTS as usize],
    ) -> bool {
        self.whole.call(packet, wire_len, results) == 1
    }

    /// The slots reported, in order.
    pub fn slots(&self) -> &[u8] {
        &self.slots
    }

    /// The generated machine code of the hot function, as mapped for execution (the
    /// function every run calls first).
    pub fn machine_code(&self) -> &[u8] {
        self.hot.bytes()
    }

    /// The machine code of the whole predicate's function (run when the hot one leaves a
    /// packet to it).
    pub fn whole_machine_code(&self) -> &[u8] {
        self.whole.bytes()
    }
}

/// How many packets ahead [`NativeResults::run_each`] prefetches: a memory miss takes
/// about ten packets' work of a hot dispatch (bench/records/2026-11-29-pfmatch-13.txt).
pub const PREFETCH_AHEAD: usize = 8;

/// Asks the CPU to bring the cache lines of `packet`'s first 64 bytes (whichever lines they
/// straddle) towards the core. A hint: it reads nothing into the program and never faults.
/// Public so that a caller's own loop over single filters can do as
/// [`NativeResults::run_each`] does (the benchmark's like-for-like rows).
#[inline(always)]
pub fn prefetch(packet: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let first = packet.as_ptr();
        // The 64th byte's line whatever the packet's length (no length read, no select: a
        // short packet's second line is fetched in vain, which the hint allows).
        let last = first.wrapping_add(63);
        // SAFETY: `_mm_prefetch` is a hint that never faults and dereferences nothing the
        // program sees (the lead allows it in this batch loop, issue 15); both addresses lie
        // within or one line of `packet`, whose slice is live here.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(first.cast());
            _mm_prefetch::<_MM_HINT_T0>(last.cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = packet;
}

impl NativeFilter {
    /// What the filter returns for one packet (captured bytes, length on the wire): its
    /// accept value when it matches, else 0; [`Filter::run`]'s result.
    #[inline]
    pub fn run(&self, packet: &[u8], wire_len: u32) -> u32 {
        if self.matches(packet, wire_len) {
            self.accept
        } else {
            0
        }
    }

    /// True when the filter matches the packet; [`Filter::matches`]'s result.
    #[inline]
    pub fn matches(&self, packet: &[u8], wire_len: u32) -> bool {
        match &self.body {
            Body::One(code) => code.call(packet, wire_len),
            Body::Split { head, pieces } => {
                // 0 false, 1 true, 2 aborted (which rejects the packet).
                if head.as_ref().is_some_and(|h| h.call(packet, wire_len) != 1) {
                    return false;
                }
                for piece in pieces {
                    match piece.call(packet, wire_len) {
                        0 => {}
                        verdict => return verdict == 1,
                    }
                }
                false
            }
        }
    }

    /// What [`NativeFilter::run`] returns on a match.
    pub fn accept(&self) -> u32 {
        self.accept
    }

    /// The generated machine code, as mapped for execution (read-only, executable); of a
    /// filter split over several functions, the first function's.
    pub fn machine_code(&self) -> &[u8] {
        match &self.body {
            Body::One(code) => code.bytes(),
            Body::Split { head: Some(head), .. } => head.bytes(),
            Body::Split { head: None, pieces } => pieces.first().map_or(&[], |p| p.bytes()),
        }
    }
}

#[cfg(test)]
mod split_tests {
    use super::{compile, compile_split, Body};
    use weir_filter::{Expr, Filter, Pred, Size, ValueSet};
    use weir_testkit::SplitMix64;

    /// Alternatives that read ever further into the packet (so short packets abort in the
    /// middle of the list, after earlier alternatives were false), some as set tests.
    fn alternatives(n: u32) -> Vec<Pred> {
        (0..n)
            .map(|i| {
                let at = Expr::load_at(i % 50, Size::Byte);
                match i % 3 {
                    0 => Pred::eq(at, (i * 7) % 256),
                    1 => Pred::and([
                        Pred::eq(Expr::load_at(2 * i % 64, Size::Half), i),
                        Pred::eq(at, 1),
                    ]),
                    _ => Pred::In { value: at, set: ValueSet::from_values([i % 256, 3, 200]) },
                }
            })
            .collect()
    }

    #[test]
    fn split_filters_answer_as_the_evaluator() {
        let head = Pred::eq(Expr::load_at(0, Size::Byte), 7);
        let filters = [
            Filter::new(Pred::Or(alternatives(300))),
            Filter::new(Pred::And(vec![head.clone(), Pred::Or(alternatives(300))])),
            Filter::new(Pred::And(vec![Pred::Guard(20), head, Pred::Or(alternatives(120))])),
        ];
        let mut rng = SplitMix64::new(7);
        for filter in &filters {
            // Pieces of about 100 nodes: several per filter.
            let split = compile_split(filter, None, 100).unwrap();
            match &split.body {
                Body::Split { pieces, .. } => assert!(pieces.len() > 3, "{}", pieces.len()),
                Body::One(_) => panic!("not split"),
            }
            // The default leaves a filter this small in one function.
            assert!(matches!(compile(filter).unwrap().body, Body::One(_)));
            let (mut yes, mut no) = (0, 0);
            for _ in 0..3_000 {
                let len = rng.below_usize(80);
                let mut packet: Vec<u8> = (0..len).map(|_| rng.below(4) as u8).collect();
                if let Some(b) = packet.first_mut() {
                    *b = if rng.below(4) == 0 { 9 } else { 7 };
                }
                let want = filter.matches(&packet, 80);
                assert_eq!(split.matches(&packet, 80), want, "{packet:02x?}");
                if want {
                    yes += 1;
                } else {
                    no += 1;
                }
            }
            assert!(yes > 100 && no > 100, "{yes} / {no}");
        }
    }

    #[test]
    fn filters_that_store_stay_whole() {
        let store = Pred::Store { slot: 1, value: Expr::Const(5) };
        let mut parts = alternatives(300);
        parts.push(Pred::And(vec![store, Pred::eq(Expr::Scratch(1), 5)]));
        let filter = Filter::new(Pred::Or(parts));
        assert!(matches!(compile_split(&filter, None, 100).unwrap().body, Body::One(_)));
    }
}

#[cfg(test)]
mod deep_tests {
    use super::{compile, CompileError};
    use weir_filter::{Expr, Filter, Pred, Size};

    /// `depth` levels (the comparison and its load included) of mixed junctions and `not`s.
    fn nested(depth: u32) -> Filter {
        let mut p = Pred::eq(Expr::load_at(3, Size::Byte), 1);
        for i in 2..depth {
            p = match i % 3 {
                0 => Pred::Not(Box::new(p)),
                1 => Pred::And(vec![Pred::eq(Expr::load_at(i % 40, Size::Byte), 1), p]),
                _ => Pred::Or(vec![p, Pred::eq(Expr::load_at(i % 30, Size::Byte), 9)]),
            };
        }
        Filter::new(p)
    }

    /// The limit compiles and one more level is refused, on a 2 MiB thread stack (a spawned
    /// thread's default), whatever the build.
    #[test]
    fn the_depth_limit_on_a_small_stack() {
        let limit = super::lower::MAX_DEPTH;
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let at = nested(limit);
                let native = compile(&at).expect("at the limit");
                for len in [0usize, 4, 40] {
                    let packet = vec![1u8; len];
                    assert_eq!(native.run(&packet, 64), at.run(&packet, 64));
                }
                match compile(&nested(limit + 1)) {
                    Err(CompileError::TooDeep { limit: l }) => assert_eq!(l, limit),
                    other => panic!("expected TooDeep, got {other:?}"),
                }
            })
            .expect("spawn")
            .join()
            .expect("the compiler panicked");
    }
}

#[cfg(test)]
mod results_tests {
    use super::{compile_results, compile_results_read, lower::BAIL, NativeResults};
    use weir_filter::{
        BinOp, Chain, CmpOp, Evaluator, Expr, Filter, Pred, Size, ValueSet, SCRATCH_SLOTS,
    };
    use weir_testkit::SplitMix64;

    /// A clause: `test` (in a Try) then the handler `h` stored to slot 15.
    fn clause(test: Pred, h: u32) -> Pred {
        Pred::Try(Box::new(Pred::and([test, Pred::Store { slot: 15, value: Expr::Const(h) }])))
    }

    /// The split results code gives the evaluator's answer and slots on every packet, and
    /// the hot half both answers and leaves packets to the whole function (short ones, and
    /// those that reach the chain walk), so both paths are exercised.
    #[test]
    fn the_hot_half_answers_or_leaves_the_packet_to_the_whole_function() {
        // A header length from byte 0, and fields behind it, read by two clauses (the
        // second's check is covered by the first's on the path).
        let hlen =
            Expr::binary(BinOp::Shl, Expr::load_at(0, Size::Byte).and_mask(3), Expr::Const(2));
        let at = |k: u32| Expr::load(hlen.clone().plus(k), Size::Half);
        let walk = Pred::Chain(Box::new(Chain {
            target: 6,
            ipv6: true,
            base: 4,
            next: Expr::load_at(1, Size::Byte),
            offset: Expr::Const(2),
        }));
        let filter = Filter::new(Pred::or([
            clause(Pred::eq(at(8), 7), 1),
            clause(Pred::and([Pred::eq(at(6), 1), Pred::eq(at(8), 2)]), 2),
            clause(Pred::and([Pred::eq(Expr::load_at(2, Size::Byte), 3), walk]), 3),
            clause(Pred::eq(Expr::load_at(20, Size::Byte), 1), 4),
        ]));
        let native = compile_results(&filter, &[15]).unwrap();
        let mut rng = SplitMix64::new(15);
        let (mut answered, mut left) = (0, 0);
        for _ in 0..20_000 {
            let len = rng.below_usize(40);
            let packet: Vec<u8> = (0..len).map(|_| rng.below(4) as u8).collect();
            let mut e = Evaluator::new(&packet, 64);
            let want = (e.pred(&filter.pred) == Ok(true)).then(|| e.expr(&Expr::Scratch(15)));
            let mut r = [0u32; SCRATCH_SLOTS as usize];
            let got = native.run(&packet, 64, &mut r).then_some(Ok(r[0]));
            assert_eq!(got, want, "{packet:02x?}");
            let mut scratch = [0u32; SCRATCH_SLOTS as usize];
            match i64::from(native.hot.call(&packet, 64, &mut scratch)) {
                BAIL => left += 1,
                _ => answered += 1,
            }
        }
        assert!(answered > 1_000 && left > 1_000, "{answered} answered, {left} left");
    }

    /// A hot half's entry check: a packet shorter than the predicate's farthest load at a
    /// constant offset (or guard, up to 60 bytes) goes to the whole function before any
    /// test, and a packet that long never does (no load at a variable offset here), so no
    /// check on its path is left; every answer is still the evaluator's.
    #[test]
    fn the_hot_half_checks_the_constant_reach_once_at_entry() {
        let byte = |k: u32| Expr::load_at(k, Size::Byte);
        let filter = Filter::new(Pred::or([
            clause(Pred::and([Pred::eq(byte(12), 1), Pred::eq(byte(23), 3)]), 1),
            clause(Pred::and([Pred::eq(byte(12), 1), Pred::Guard(30), Pred::eq(byte(33), 2)]), 2),
            clause(Pred::eq(Expr::load_at(40, Size::Half), 3), 3),
            clause(Pred::eq(byte(0), 0), 4),
        ]));
        let reach = 42;
        let native = compile_results(&filter, &[15]).unwrap();
        let mut rng = SplitMix64::new(0x60);
        let mut hits = [0usize; 5];
        for _ in 0..20_000 {
            let len = rng.below_usize(70);
            let packet: Vec<u8> = (0..len).map(|_| rng.below(4) as u8).collect();
            let mut scratch = [0u32; SCRATCH_SLOTS as usize];
            let hot = native.hot.call(&packet, 64, &mut scratch);
            assert_eq!(i64::from(hot) == BAIL, len < reach, "{packet:02x?}");
            let mut e = Evaluator::new(&packet, 64);
            let want = (e.pred(&filter.pred) == Ok(true)).then(|| e.expr(&Expr::Scratch(15)));
            let mut r = [0u32; SCRATCH_SLOTS as usize];
            let got = native.run(&packet, 64, &mut r).then_some(Ok(r[0]));
            assert_eq!(got, want, "{packet:02x?}");
            if let Some(Ok(h)) = want {
                hits[h as usize] += 1;
            }
        }
        assert!(hits[1..].iter().all(|&n| n > 50), "{hits:?}");
    }

    /// A hot half's `pkt[o:2] == k or pkt[o+2:2] == k` (one word load, a zero-half test)
    /// answers as the two compares do, at a constant offset and behind a header length,
    /// in either order of the halves, for constants whose halves borrow into each other
    /// (0, 1, 0x100, 0xffff, 0x8000) and packets made of their bytes and their neighbours'.
    #[test]
    fn either_port_half_is_the_two_compares() {
        let hlen =
            Expr::binary(BinOp::Shl, Expr::load_at(0, Size::Byte).and_mask(3), Expr::Const(2));
        let at = |k: u32| Expr::load(hlen.clone().plus(k), Size::Half);
        let mut rng = SplitMix64::new(0x15);
        let mut hits = 0;
        for k in [0u32, 1, 0x100, 0x1bb, 0x8000, 0x8001, 0xffff, 0x7fff] {
            let bytes = [0u8, 1, 0xff, 0x80, 0x7f, 0xbb, 0x01, 0xfe];
            let filter = Filter::new(Pred::or([
                clause(Pred::or([Pred::eq(at(4), k), Pred::eq(at(6), k)]), 1),
                clause(
                    Pred::or([
                        Pred::eq(Expr::load_at(3, Size::Half), k),
                        Pred::eq(Expr::load_at(1, Size::Half), k),
                    ]),
                    2,
                ),
                clause(Pred::Const(true), 3),
            ]));
            let native = compile_results(&filter, &[15]).unwrap();
            for _ in 0..4_000 {
                let len = 8 + rng.below_usize(16);
                let packet: Vec<u8> = (0..len).map(|_| bytes[rng.below_usize(8)]).collect();
                let mut e = Evaluator::new(&packet, 64);
                let want = (e.pred(&filter.pred) == Ok(true)).then(|| e.expr(&Expr::Scratch(15)));
                let mut r = [0u32; SCRATCH_SLOTS as usize];
                let got = native.run(&packet, 64, &mut r).then_some(Ok(r[0]));
                assert_eq!(got, want, "k {k:#x}: {packet:02x?}");
                hits += usize::from(matches!(want, Some(Ok(1 | 2))));
            }
        }
        assert!(hits > 1_000, "{hits}");
    }

    /// Runs of clauses `try(test and stores)` (a port's either-half test, comparisons) are
    /// each one decision by data in the hot half (`lower::Lowering::choose`): on packets
    /// made of the tests' bytes, the handler and every argument the handler reads are the
    /// evaluator's (the `reads` contract; the slots past those may hold anything, and an
    /// arm whose handler does not read a slot leaves its value to the others), a slot an
    /// arm does not store keeps its earlier value (handler 3 reads M13 and does not store
    /// it), an arm's
    /// later store to a slot wins, and a clause that is no arm (a set test) splits the runs.
    /// The hot code holds conditional moves (the selects) only with the runs, and fewer
    /// where a slot an arm does not store still holds its starting 0 (masks instead).
    #[test]
    fn chosen_clauses_answer_as_the_clauses_in_turn() {
        // M13's value before the arms, which the arms that do not store it keep: a load
        // (selects), then the 0 it starts with (never stored: masks instead of selects,
        // `Lowering::pick`).
        let loaded = chosen_clauses_against_the_evaluator(Some(Expr::load_at(1, Size::Byte)));
        let zeroed = chosen_clauses_against_the_evaluator(None);
        assert!(zeroed < loaded, "cmovs: {zeroed} with M13 never stored, {loaded} with a load");
    }

    /// `compile_results_read`'s contract on 20,000 random packets of `lens` bytes drawn from
    /// `bytes` (every packet must match `filter`): the handler slot (`slots[0]`) as the
    /// evaluator gives it, the `reads[h]` slots after it exact, the slots past them left
    /// alone (0xee) or written with their true final value. Returns the hits per handler.
    fn results_read_as_evaluated(
        filter: &Filter,
        native: &NativeResults,
        slots: &[u8],
        reads: &[u8; 10],
        bytes: &[u8],
        lens: std::ops::Range<usize>,
        seed: u64,
    ) -> [usize; 10] {
        let mut rng = SplitMix64::new(seed);
        let mut hits = [0usize; 10];
        for _ in 0..20_000 {
            let len = lens.start + rng.below_usize(lens.len());
            let packet: Vec<u8> = (0..len).map(|_| bytes[rng.below_usize(bytes.len())]).collect();
            let mut e = Evaluator::new(&packet, 64);
            assert_eq!(e.pred(&filter.pred), Ok(true), "{packet:02x?}");
            let want: Vec<u32> =
                slots.iter().map(|&s| e.expr(&Expr::Scratch(s)).unwrap()).collect();
            let mut r = [0xee; SCRATCH_SLOTS as usize];
            assert!(native.run(&packet, 64, &mut r), "{packet:02x?}");
            let h = want[0] as usize;
            assert_eq!(r[0], want[0], "{packet:02x?}");
            // The slots after those the handler reads may hold anything.
            for i in 1..=usize::from(reads[h]).min(slots.len() - 1) {
                assert_eq!(r[i], want[i], "slot {i}: {packet:02x?}");
            }
            hits[h] += 1;
        }
        hits
    }

    /// [`chosen_clauses_answer_as_the_clauses_in_turn`] with M13 := `before` (if any)
    /// ahead of the arms; the hot code's cmovs.
    fn chosen_clauses_against_the_evaluator(before: Option<Expr>) -> usize {
        let hlen =
            Expr::binary(BinOp::Shl, Expr::load_at(0, Size::Byte).and_mask(3), Expr::Const(2));
        let at = |k: u32| Expr::load(hlen.clone().plus(k), Size::Half);
        let either = |k: u32| Pred::or([Pred::eq(at(4), k), Pred::eq(at(6), k)]);
        let store = |slot, value| Pred::Store { slot, value };
        let arm = |parts: Vec<Pred>| Pred::Try(Box::new(Pred::And(parts)));
        let k = Expr::Const;
        let arms = |arm: &dyn Fn(Vec<Pred>) -> Pred| {
            let before = before.iter().map(|e| store(13, e.clone()));
            Filter::new(Pred::and(before.chain([Pred::or([
                arm(vec![either(0x16), store(14, hlen.clone().plus(4)), store(15, k(3))]),
                arm(vec![
                    either(0x50),
                    store(14, hlen.clone().plus(4)),
                    store(13, at(6)),
                    store(15, k(4)),
                ]),
                arm(vec![
                    Pred::cmp(CmpOp::Gt, Expr::load_at(2, Size::Byte), k(0xf0)),
                    store(13, k(1)),
                    store(15, k(5)),
                    store(13, at(4)),
                ]),
                clause(
                    Pred::In {
                        value: Expr::load_at(3, Size::Byte),
                        set: ValueSet::from_values([1, 2]),
                    },
                    6,
                ),
                arm(vec![Pred::eq(Expr::load_at(1, Size::Half), 0x0201), store(15, k(7))]),
                arm(vec![
                    Pred::eq(Expr::load_at(3, Size::Byte), 0x80),
                    store(14, Expr::WireLen),
                    store(13, k(0)),
                    store(15, k(8)),
                ]),
                clause(Pred::Const(true), 9),
            ])])))
        };
        // Handler h's arguments read: reads[h] slots after the handler slot.
        let reads: [u8; 10] = [0, 0, 0, 2, 2, 2, 0, 0, 1, 0];
        let slots = [15, 14, 13];
        let filter = arms(&arm);
        let native = compile_results_read(&filter, &slots, &reads).unwrap();
        let bytes = [0u8, 1, 2, 0x16, 0x50, 0x80, 0xf1, 0xff];
        let hits = results_read_as_evaluated(&filter, &native, &slots, &reads, &bytes, 2..20, 0x17);
        assert!([3, 4, 5, 6, 7, 8, 9].iter().all(|&h| hits[h] > 30), "{hits:?}");
        // The same clauses with each test behind a `not not`: no arms, no selects.
        let unchosen = arms(&|mut parts: Vec<Pred>| {
            parts[0] = Pred::not(Pred::not(parts[0].clone()));
            arm(parts)
        });
        let plain = compile_results_read(&unchosen, &slots, &reads).unwrap();
        let cmovs = |code: &[u8]| {
            code.windows(2).filter(|w| w[0] == 0x0f && (0x40..=0x4f).contains(&w[1])).count()
        };
        assert!(cmovs(native.machine_code()) >= 1, "{}", cmovs(native.machine_code()));
        assert_eq!(cmovs(plain.machine_code()), 0);
        cmovs(native.machine_code())
    }

    /// Runs of 2 to 4 arms that test either half of one word (port clauses) are chosen by
    /// one vector compare (`Lowering::port_lanes`): the handler and its argument as the
    /// clauses in turn give them, the first holding arm winning (a source port of one arm
    /// and a destination port of another, two arms on one port, a port with its bytes
    /// swapped, ports of 0 against lanes past the last arm); 5 arms, or arms at two
    /// offsets, take the scalar tests (no `pmovmskb` in the hot code). The arms' handlers
    /// in steps of 1, 3 and -2 (from 3 arms on: the handler slot from the first holding
    /// arm's index, a `tzcnt`) and in no steps (picks, no `tzcnt`); every handler reading
    /// both arguments, and the odd ones only the first (M13 then matters only where an even
    /// arm holds first).
    #[test]
    fn port_lanes_answer_as_the_clauses_in_turn() {
        let hlen =
            Expr::binary(BinOp::Shl, Expr::load_at(0, Size::Byte).and_mask(3), Expr::Const(2));
        let at = |k: u32| Expr::load(hlen.clone().plus(k), Size::Half);
        let either = |o: u32, k: u32| Pred::or([Pred::eq(at(o), k), Pred::eq(at(o + 2), k)]);
        let store = |slot, value| Pred::Store { slot, value };
        // The arguments: the arm's first half, and 7 or 0 by the handler's parity (the
        // value most arms give is then one an arm after a holding arm may differ from).
        let arm = |o: u32, k: u32, h: u32| {
            Pred::Try(Box::new(Pred::And(vec![
                either(o, k),
                store(15, Expr::Const(h)),
                store(14, at(o)),
                store(13, Expr::Const(7 * (h % 2 == 0) as u32)),
            ])))
        };
        let pmovmskb = |code: &[u8]| {
            code.windows(3).any(|w| {
                (w[0] == 0x66 && w[1] == 0x0f && w[2] == 0xd7)
                    || (w[0] == 0xc5 && w[1] & 3 == 1 && w[2] == 0xd7)
            })
        };
        // `tzcnt` (f3 [rex] 0f bc).
        let tzcnt = |code: &[u8]| {
            code.windows(4).any(|w| {
                w[0] == 0xf3
                    && ((w[1] == 0x0f && w[2] == 0xbc)
                        || (w[1] & 0xf0 == 0x40 && w[2..] == [0x0f, 0xbc]))
            })
        };
        let ports = [0x0016, 0x1600, 0x0050, 0x0016, 0x0101];
        let bytes = [0u8, 0x16, 0x50, 0x01, 0x02];
        let steps: [(&str, [u32; 5]); 4] = [
            ("step 1", [1, 2, 3, 4, 5]),
            ("step 3", [1, 4, 7, 0, 0]),
            ("step -2", [8, 6, 4, 2, 0]),
            ("no step", [2, 1, 3, 5, 4]),
        ];
        let cases = [(2, 0, 0), (3, 0, 0), (4, 0, 0), (5, 0, 0), (3, 1, 0), (3, 0, 1), (4, 0, 2)];
        for (n, offsets, step) in cases.into_iter().chain([(3, 0, 3), (4, 0, 3)]) {
            let (name, handlers) = steps[step];
            // `offsets` 1: the last arm reads the next word.
            let arms: Vec<Pred> = (0..n)
                .map(|i| {
                    let o = if offsets == 1 && i == n - 1 { 8 } else { 4 };
                    arm(o, ports[i], handlers[i])
                })
                .chain([clause(Pred::Const(true), 9)])
                .collect();
            let filter = Filter::new(Pred::or(arms));
            let reads = [0u8, 2, 2, 2, 2, 2, 2, 2, 2, 0];
            let slots = [15, 14, 13];
            let native = compile_results_read(&filter, &slots, &reads).unwrap();
            let vector = n <= 4 && offsets == 0;
            let case = format!("{n} arms, offsets {offsets}, handlers {name}");
            assert_eq!(pmovmskb(native.machine_code()), vector, "{case}");
            assert_eq!(tzcnt(native.machine_code()), vector && n >= 3 && step != 3, "{case}");
            let seed = 0x19 + n as u64 + 16 * step as u64;
            let hits =
                results_read_as_evaluated(&filter, &native, &slots, &reads, &bytes, 4..18, seed);
            // The fourth arm repeats the first one's port: never chosen.
            let reached = (0..n).filter(|&i| i != 3).all(|i| hits[handlers[i] as usize] > 30);
            let never = n < 4 || hits[handlers[3] as usize] == 0;
            assert!(reached && never && hits[9] > 30, "{case}: {hits:?}");
            let odd_read_one = [0u8, 1, 2, 1, 2, 1, 2, 1, 2, 0];
            let native = compile_results_read(&filter, &slots, &odd_read_one).unwrap();
            let hits = results_read_as_evaluated(
                &filter,
                &native,
                &slots,
                &odd_read_one,
                &bytes,
                4..18,
                seed,
            );
            assert!(reached && hits[9] > 30, "{case}, odd handlers reading one: {hits:?}");
        }
    }

    /// A choice whose slots are read after it (here by a test of M13) keeps every arm's
    /// values, whatever `reads` says of the handlers: only a choice that ends the predicate
    /// leaves a slot to the arms whose handlers read it.
    #[test]
    fn a_choice_read_after_it_keeps_every_arms_values() {
        let at = |k: u32| Expr::load(Expr::load_at(0, Size::Byte).and_mask(3).plus(k), Size::Half);
        let either = |k: u32| Pred::or([Pred::eq(at(4), k), Pred::eq(at(6), k)]);
        let arm = |k: u32, h: u32, m13: Expr| {
            Pred::Try(Box::new(Pred::and([
                either(k),
                Pred::Store { slot: 15, value: Expr::Const(h) },
                Pred::Store { slot: 13, value: m13 },
            ])))
        };
        let filter = Filter::new(Pred::and([
            Pred::or([
                arm(0x16, 1, Expr::Const(5)),
                arm(0x50, 2, Expr::Const(5)),
                arm(0x01, 3, Expr::Const(6)),
            ]),
            Pred::eq(Expr::Scratch(13), 5),
        ]));
        // Handler 1 reads no argument: M13 would be the other arms' (6 where no pick) after
        // a choice that ended the predicate; handler 3's 6 fails the test after it.
        let reads = [0u8, 0, 1, 1];
        let native = compile_results_read(&filter, &[15, 13], &reads).unwrap();
        let mut rng = SplitMix64::new(0x5c);
        let bytes = [0u8, 5, 0x16, 0x50, 0x01];
        let mut held = [0usize; 4];
        for _ in 0..20_000 {
            let len = 4 + rng.below_usize(12);
            let packet: Vec<u8> = (0..len).map(|_| bytes[rng.below_usize(bytes.len())]).collect();
            let mut e = Evaluator::new(&packet, 64);
            let want = e.pred(&filter.pred) == Ok(true);
            let mut r = [0xee; SCRATCH_SLOTS as usize];
            assert_eq!(native.run(&packet, 64, &mut r), want, "{packet:02x?}");
            if want {
                let h = e.expr(&Expr::Scratch(15)).unwrap();
                assert_eq!(r[0], h, "{packet:02x?}");
                held[h as usize] += 1;
            }
        }
        assert!(held[1] > 30 && held[2] > 30 && held[3] == 0, "{held:?}");
    }

    /// The batch call (which prefetches ahead) answers for each packet, in order, as a
    /// `run` of that packet alone does: short packets (the whole function) and lists
    /// shorter than, as long as and one longer than the prefetch distance included.
    #[test]
    fn run_each_answers_as_run_does() {
        let filter = Filter::new(Pred::or([
            clause(Pred::eq(Expr::load_at(12, Size::Half), 0x0800), 1),
            clause(Pred::eq(Expr::load_at(20, Size::Byte), 3), 2),
            clause(Pred::eq(Expr::load_at(70, Size::Byte), 1), 3),
        ]));
        let native = compile_results(&filter, &[15]).unwrap();
        let mut rng = SplitMix64::new(0xba7c);
        let ahead = super::PREFETCH_AHEAD;
        for n in [0usize, 1, 5, ahead - 1, ahead, ahead + 1, 300] {
            let packets: Vec<Vec<u8>> = (0..n)
                .map(|_| {
                    let len = rng.below_usize(90);
                    (0..len).map(|_| [0u8, 1, 3, 8][rng.below_usize(4)]).collect()
                })
                .collect();
            let batch: Vec<(&[u8], u32)> =
                packets.iter().map(|p| (p.as_slice(), p.len() as u32 + 4)).collect();
            let mut seen = Vec::new();
            native.run_each(&batch, |i, matched, r| seen.push((i, matched.then_some(r[0]))));
            let want: Vec<(usize, Option<u32>)> = batch
                .iter()
                .enumerate()
                .map(|(i, &(p, wire))| {
                    let mut r = [0u32; SCRATCH_SLOTS as usize];
                    (i, native.run(p, wire, &mut r).then_some(r[0]))
                })
                .collect();
            assert_eq!(seen, want, "{n} packets");
            if n == 300 {
                let hits = want.iter().filter(|(_, h)| h.is_some()).count();
                assert!(hits > 30 && hits < 270, "{hits}");
                // The batch loop's own path for a packet the hot half leaves to the whole
                // function is taken, and some of those packets match there.
                let mut r = [0u32; SCRATCH_SLOTS as usize];
                let left: Vec<usize> = (0..n)
                    .filter(|&i| i64::from(native.hot.call(batch[i].0, batch[i].1, &mut r)) == BAIL)
                    .collect();
                assert!(left.len() > 30, "{} packets left to the whole function", left.len());
                assert!(left.iter().any(|&i| want[i].1.is_some()), "none of them matches");
            }
        }
    }

    /// With `reads`, a path whose first slot is a constant writes only the slots read for
    /// it; a value `reads` does not cover, or a first slot that is not a constant on the
    /// path, writes them all.
    #[test]
    fn reads_narrow_the_slots_written_by_the_first_slots_value() {
        let store = |slot, value| Pred::Store { slot, value };
        let byte0 = Expr::load_at(0, Size::Byte);
        let filter = Filter::new(Pred::or([
            // Handler 1 (no argument read), handler 2 (one), handler 3 (not in `reads`).
            Pred::and([
                Pred::eq(byte0.clone(), 1),
                store(14, Expr::Const(7)),
                store(15, Expr::Const(1)),
            ]),
            Pred::and([
                Pred::eq(byte0.clone(), 2),
                store(14, Expr::Const(8)),
                store(15, Expr::Const(2)),
            ]),
            Pred::and([
                Pred::eq(byte0.clone(), 3),
                store(14, Expr::Const(9)),
                store(15, Expr::Const(3)),
            ]),
            // The handler slot computed from the packet: not a constant, all written.
            Pred::and([Pred::eq(byte0.clone(), 4), store(14, Expr::Const(5)), store(15, byte0)]),
        ]));
        let native = compile_results_read(&filter, &[15, 14], &[0, 0, 1]).unwrap();
        for (first, want) in [(1, [1, 0xee]), (2, [2, 8]), (3, [3, 9]), (4, [4, 5])] {
            let mut r = [0xee; SCRATCH_SLOTS as usize];
            assert!(native.run(&[first, 0, 0, 0], 64, &mut r));
            assert_eq!(r[..2], want, "first byte {first}");
        }
        let mut r = [0xee; SCRATCH_SLOTS as usize];
        assert!(!native.run(&[5, 0, 0, 0], 64, &mut r));
        let mut want = [0xee; SCRATCH_SLOTS as usize];
        want[0] = 0;
        assert_eq!(r, want, "a miss writes 0 to the first slot only");
    }

    /// A miss writes 0 to the first reported slot and nothing else, however it misses: a
    /// clause test false, an abort at the root (a division by a zero byte outside every
    /// Try), a packet the hot half leaves to the whole function (too short for the second
    /// clause's byte); singly, and in the batch call after a packet that matched (whose
    /// results are still in the buffer). Matches keep their values.
    #[test]
    fn a_miss_writes_0_to_the_first_slot_only() {
        let store = |slot, value| Pred::Store { slot, value };
        let byte = |at| Expr::load_at(at, Size::Byte);
        let filter = Filter::new(Pred::or([
            clause(Pred::eq(byte(0), 1), 1),
            clause(Pred::and([Pred::eq(byte(40), 2), store(14, byte(41))]), 2),
            Pred::and([
                Pred::eq(Expr::binary(BinOp::Div, Expr::Const(8), byte(1)), 4),
                store(14, Expr::Const(9)),
                store(15, Expr::Const(3)),
            ]),
        ]));
        let native = compile_results(&filter, &[15, 14]).unwrap();
        let mut rng = SplitMix64::new(0x0e57);
        let (mut rejected, mut aborted, mut left, mut matched) = (0, 0, 0, 0);
        let mut packets = Vec::new();
        for _ in 0..3000 {
            let len = rng.below_usize(60);
            let packet: Vec<u8> = (0..len).map(|_| [0u8, 1, 2, 3][rng.below_usize(4)]).collect();
            let want = Evaluator::new(&packet, 64).pred(&filter.pred);
            let mut r = [0xee; SCRATCH_SLOTS as usize];
            let hit = native.run(&packet, 64, &mut r);
            assert_eq!(hit, want == Ok(true), "{packet:02x?}");
            if hit {
                assert_ne!(r[0], 0, "{packet:02x?}");
                matched += 1;
            } else {
                assert_eq!(r[0], 0, "{packet:02x?}");
                assert!(r[1..].iter().all(|&v| v == 0xee), "{packet:02x?}: {r:x?}");
                match want {
                    Ok(_) => rejected += 1,
                    Err(_) => aborted += 1,
                }
                let mut h = [0xee; SCRATCH_SLOTS as usize];
                left += usize::from(i64::from(native.hot.call(&packet, 64, &mut h)) == BAIL);
            }
            packets.push(packet);
        }
        assert!(
            rejected > 100 && aborted > 100 && left > 100 && matched > 300,
            "rejected {rejected}, aborted {aborted}, left to the whole function {left}, \
             matched {matched}"
        );
        let batch: Vec<(&[u8], u32)> = packets.iter().map(|p| (p.as_slice(), 64)).collect();
        let mut seen = 0;
        native.run_each(&batch, |i, hit, r| {
            let mut single = [0u32; SCRATCH_SLOTS as usize];
            assert_eq!(hit, native.run(batch[i].0, 64, &mut single), "packet {i}");
            assert_eq!(r[0], single[0], "packet {i}");
            if hit && r[0] == 2 {
                assert_eq!(r[1], single[1], "packet {i}");
            }
            seen += 1;
        });
        assert_eq!(seen, batch.len());
    }
}
