//! What happens once a rule matched: its actions on the packet, tc's controls between
//! them, chains, counters. One driver for every classifier, so that the classifiers differ
//! only in how they find the rule.
//!
//! tc's semantics (net/sched/cls_api.c `__tcf_classify`, act_api.c `tcf_action_exec`):
//! actions run in order while each says `pipe`; the last one's control decides. `pass`
//! accepts, `drop` drops, `continue` goes on with the next rule of the chain, `goto chain
//! N` classifies again from chain N and `reclassify` from chain 0 (the packet as the
//! actions left it); the 17th such restart drops the packet (the kernel's
//! `max_reclassify_loop`). A packet no rule matches passes; so does one whose last action
//! says `pipe`. `mirred egress redirect` sends the packet to the device and ends it there;
//! `mirror` sends a copy as it is at that point and goes on.

use crate::classifier::BATCH;
use crate::key::{extract, field, Key, Need, Offsets};
use crate::rule::{csum, Action, ActionKind, Compiled, Control, Munge, PeditHeader, Ranges, Rule};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// The kernel's `max_reclassify_loop`.
pub const MAX_RESTARTS: u32 = 16;

/// The unit `last_used` is kept in: the last packet's time stamp cut to it (1 ms).
pub const LAST_USED_GRAIN: u64 = 1_000_000;

/// Counter shards a rule has, one per worker thread that owns one (the first threads to
/// count); threads beyond them share one more shard through atomic adds. Two: `weir flow
/// run --workers 2` gives its 2 classifying threads (the reading thread one of them) one
/// each; a process whose own thread counted before it starts workers gives its shard back
/// first ([`release_shard`]).
pub const COUNTER_SHARDS: usize = 2;

/// Every rule's packets and bytes (the frames' wire lengths) of one classifier, always on;
/// the time stamp of a rule's last packet is the rule's own ([`Installed::last_used`]).
///
/// Why shards: a locked add on a counter every worker shares cost more than the rest of a
/// one-mask lookup (weir-bench flow: 80% of `process` was the `lock add`) and makes the
/// workers' cores pass the line between them. Each of the first [`COUNTER_SHARDS`] counting
/// threads owns a shard and adds with a plain load and store (no other thread writes it,
/// so nothing is lost); later threads share the last shard with atomic adds. A read sums
/// the shards.
///
/// Why tables outside the rule: each shard is a table of its own, a rule's counts at the
/// rule's cell number ([`Installed::cell`]) in every table, so no line is written by two
/// workers and the rule's own line (rank, verdict, line, last used) is read-only but for
/// the last-used stamp once a millisecond. The shards had sat side by side in the rule:
/// two workers on 1k rules then reached only 1.0-1.4x one worker, with 1.1-1.9x the CPU,
/// and without the counter stores 1.7x at 1.0x the CPU
/// (bench/records/2026-12-02-flow-scale-1.txt); shards padded to lines of their own in the
/// rule scaled but made 1M rules 655 MB. The tables cost a second line a matched packet
/// (a miss once the rules are out of cache: measured 73 to 113 ns/packet at 1M rules and
/// one mask when first tried); once the cells pass the first chunk the multi-subtable batch
/// path touches the matched rules' cells before their actions (`ShardCells::touch`), meant
/// to overlap those misses (not timed against a build without it: flow-counters-2 §6). In instructions one thread pays for it: callgrind's
/// process_batch a packet at 1k rules, 149.47 to 153.59 at one mask and 211.80 to 216.85
/// at 16, a batch finding its cells in the first chunk's slice (`ShardCells`; through the
/// directory of chunks on every packet it was 170.59 and 250.29), and 1M rules fit in
/// 210 MB, not 208 (bench/records/2026-12-02-flow-counters-2.txt).
///
/// A table is chunks of cells that never move: chunk `k` holds `FIRST_CHUNK << k` cells,
/// made (zero) by the writer before it hands out a cell in it, so a rule that lookups can
/// find has its cells in every owned table whatever version a worker holds (an in-place
/// insert publishes no version); the shared shard's chunks are made by the first thread
/// that counts there. Cells of deleted rules are reused once no version, store or flow
/// cache holds the rule ([`CellAlloc`]), zeroed before the new rule is published.
#[derive(Debug, Default)]
pub struct Counters {
    tables: [Table; COUNTER_SHARDS + 1],
}

/// One shard's cells by chunk. 32 chunks, of which [`MAX_CHUNKS`] are used: a chunk number
/// is a cell's top 5 bits, so indexing the array needs no bounds check.
#[derive(Debug, Default)]
struct Table {
    chunks: [std::sync::OnceLock<Box<[Cell]>>; 32],
}

/// One rule's packets and bytes in one shard: 16 bytes, four rules a line.
#[derive(Debug, Default)]
struct Cell {
    packets: AtomicU64,
    bytes: AtomicU64,
}

/// Cells in a table's first chunk (64 KiB), each next chunk twice as many: a batch finds
/// a cell of the first chunk by one compare ([`ShardCells`]), so rule sets this size
/// never look a cell up in the directory; made with the first rule.
const FIRST_CHUNK: u32 = 4096;
/// A cell number: its chunk in the top bits, its place in the chunk in the low `OFF_BITS`.
const OFF_BITS: u32 = 27;
/// Chunks a table uses: the last one's cells still fit in `OFF_BITS`.
const MAX_CHUNKS: u32 = OFF_BITS - FIRST_CHUNK.trailing_zeros() + 1;

/// The cell number of the `n`th cell handed out (0, 1, ...), or `None` past the last.
fn cell_number(n: u32) -> Option<u32> {
    let x = n.checked_add(FIRST_CHUNK)?;
    let k = x.ilog2() - FIRST_CHUNK.trailing_zeros();
    (k < MAX_CHUNKS).then(|| (k << OFF_BITS) | (x - (FIRST_CHUNK << k)))
}

impl Table {
    /// Chunk `k`, made (zero) if it is not yet.
    fn chunk(&self, k: usize) -> &[Cell] {
        self.chunks[k].get_or_init(|| (0..FIRST_CHUNK << k).map(|_| Cell::default()).collect())
    }

    /// The first chunk if it was made, else nothing: a batch takes it once, and its cells
    /// need no directory.
    fn first(&self) -> &[Cell] {
        self.chunks[0].get().map_or(&[], |c| c)
    }

    /// The cell `cell` found through the directory, its chunk made if it is not yet (only
    /// the shared shard's are not: the writer makes the owned shards' before it hands a
    /// cell out). Out of line: the batches find their cells in the first chunk.
    #[cold]
    #[inline(never)]
    fn cell_past_first(&self, cell: u32) -> &Cell {
        &self.chunk((cell >> OFF_BITS) as usize)[(cell & ((1 << OFF_BITS) - 1)) as usize]
    }

    /// The cell `cell` if its chunk was made.
    fn cell_if_made(&self, cell: u32) -> Option<&Cell> {
        let chunk = self.chunks[(cell >> OFF_BITS) as usize].get()?;
        chunk.get((cell & ((1 << OFF_BITS) - 1)) as usize)
    }

    /// The bytes of the chunks made.
    fn bytes(&self) -> usize {
        self.chunks.iter().filter_map(|c| c.get()).map(|c| std::mem::size_of_val(&**c)).sum()
    }
}

/// Hands out the cells of one [`Counters`] (its owner's writer, under the owner's lock):
/// new ones in order, and those of deleted rules again once nothing can count into them.
#[derive(Default)]
pub struct CellAlloc {
    /// Cells handed out new.
    next: u32,
    /// Cells free again (zeroed when handed out).
    free: Vec<u32>,
    /// Deleted rules that a version, a store or a flow cache may still hold: their cells
    /// free once this is the rule's last reference (no thread can reach the rule to count).
    buried: Vec<Arc<Installed>>,
    /// `buried`'s length after its last sweep: the next one waits until it doubled, so a
    /// sweep costs O(1) a delete.
    swept: usize,
}

impl CellAlloc {
    /// A cell for a new rule, zero in every table.
    pub fn take(&mut self, counters: &Counters) -> u32 {
        if self.free.is_empty() && self.buried.len() >= (2 * self.swept).max(64) {
            self.sweep();
        }
        if let Some(cell) = self.free.pop() {
            // No thread counts into it (its rule is gone): the stores reach a thread that
            // finds the new rule through the release store that publishes it.
            for t in &counters.tables {
                if let Some(c) = t.cell_if_made(cell) {
                    c.packets.store(0, Ordering::Relaxed);
                    c.bytes.store(0, Ordering::Relaxed);
                }
            }
            return cell;
        }
        let cell = cell_number(self.next).expect("at most 2^28 counter cells");
        self.next += 1;
        let k = (cell >> OFF_BITS) as usize;
        for t in &counters.tables[..COUNTER_SHARDS] {
            t.chunk(k);
        }
        cell
    }

    /// A deleted rule's cell, free once the rule's other references are gone.
    pub fn bury(&mut self, rule: Arc<Installed>) {
        self.buried.push(rule);
    }

    /// Frees the cells of the buried rules that nothing else holds.
    fn sweep(&mut self) {
        let mut kept = Vec::new();
        for r in self.buried.drain(..) {
            // `try_unwrap` takes the last reference with an acquire fence: every count a
            // thread made through the rule happened before it.
            match Arc::try_unwrap(r) {
                Ok(r) => self.free.push(r.cell),
                Err(r) => kept.push(r),
            }
        }
        self.buried = kept;
        self.swept = self.buried.len();
    }
}

/// Which shards are free for a new thread to own (`true`: free).
static FREE_SHARDS: std::sync::Mutex<[bool; COUNTER_SHARDS]> =
    std::sync::Mutex::new([true; COUNTER_SHARDS]);

/// A thread's shard before it counted (or after it gave its shard back).
const UNCLAIMED: usize = usize::MAX;

fn free_shards() -> std::sync::MutexGuard<'static, [bool; COUNTER_SHARDS]> {
    match FREE_SHARDS.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn claim_shard() -> usize {
    let mut free = free_shards();
    match free.iter().position(|f| *f) {
        Some(i) => {
            free[i] = false;
            i
        }
        None => COUNTER_SHARDS,
    }
}

fn give_back(i: usize) {
    if i < COUNTER_SHARDS {
        free_shards()[i] = true;
    }
}

/// Gives the thread's shard back when the thread ends, so that a later thread can own it.
struct ShardGuard;

impl Drop for ShardGuard {
    fn drop(&mut self) {
        // `SHARD` has no destructor: readable while this one runs.
        let _ = SHARD.try_with(|s| give_back(s.replace(COUNTER_SHARDS)));
    }
}

thread_local! {
    static SHARD: std::cell::Cell<usize> = const { std::cell::Cell::new(UNCLAIMED) };
    static GUARD: ShardGuard = const { ShardGuard };
}

/// This thread's shard (the shared one while the thread is being torn down).
#[inline]
pub(crate) fn my_shard() -> usize {
    match SHARD.try_with(|s| s.get()) {
        Ok(UNCLAIMED) => {
            let i = claim_shard();
            let _ = SHARD.try_with(|s| s.set(i));
            // Registers the guard's destructor.
            if GUARD.try_with(|_| ()).is_err() {
                give_back(i);
                return COUNTER_SHARDS;
            }
            i
        }
        Ok(i) => i,
        Err(_) => COUNTER_SHARDS,
    }
}

/// Gives this thread's counter shard back (its counts stay in the tables): for a thread
/// that counted and now leaves the counting to workers it starts (a benchmark's main
/// thread). Counting again later claims a shard again.
pub fn release_shard() {
    let _ = SHARD.try_with(|s| give_back(s.replace(UNCLAIMED)));
}

impl Counters {
    /// Count a packet of `bytes` at `now` for `rule`, on this thread's shard (the packet
    /// paths count through [`Counters::shard`]'s cells, once a batch).
    #[cfg(test)]
    pub fn hit(&self, rule: &Installed, bytes: u64, now: u64) {
        self.hit_on(my_shard(), rule, bytes, now);
    }
    /// [`Counters::hit`] on shard `i`.
    #[cfg(test)]
    pub(crate) fn hit_on(&self, i: usize, rule: &Installed, bytes: u64, now: u64) {
        self.shard(i).hit(rule, bytes, now);
    }
    /// Shard `i`'s cells as a batch counts into them ([`my_shard`], looked up once a batch
    /// by the batch paths: a thread-local access a packet was measurable at one mask).
    #[inline]
    pub(crate) fn shard(&self, i: usize) -> ShardCells<'_> {
        let i = i.min(COUNTER_SHARDS);
        ShardCells { counters: self, first: self.tables[i].first(), shard: i }
    }
    /// (packets, bytes, last used) of `rule`: the shards summed.
    pub fn read(&self, rule: &Installed) -> (u64, u64, u64) {
        let (mut p, mut b) = (0u64, 0u64);
        for c in self.tables.iter().filter_map(|t| t.cell_if_made(rule.cell)) {
            p = p.wrapping_add(c.packets.load(Ordering::Relaxed));
            b = b.wrapping_add(c.bytes.load(Ordering::Relaxed));
        }
        (p, b, rule.last_used.load(Ordering::Relaxed))
    }
    /// The bytes of the tables' chunks.
    pub fn bytes(&self) -> usize {
        self.tables.iter().map(Table::bytes).sum()
    }
}

/// One shard of a [`Counters`] as a thread counts into it, taken once a batch: the shard's
/// first chunk held as a slice, so a matched rule's cell is one compare and an index from
/// the rule's cell number (the directory of chunks, a `OnceLock`'s state and length a
/// chunk, only past it).
#[derive(Clone, Copy)]
pub(crate) struct ShardCells<'c> {
    counters: &'c Counters,
    /// The shard's first chunk, or nothing if it was not made when the batch began (a
    /// cell made since is found through the directory).
    first: &'c [Cell],
    /// The shard (at most [`COUNTER_SHARDS`], the shared one).
    shard: usize,
}

impl<'c> ShardCells<'c> {
    /// Whether cells past the first chunk were handed out: rule sets that large are out of
    /// the CPU's caches, and a batch touches its cells before it counts.
    #[inline]
    pub(crate) fn past_first_chunk(&self) -> bool {
        self.counters.tables[0].chunks[1].get().is_some()
    }
    /// The cell of `rule` in this shard.
    #[inline(always)]
    fn cell(&self, rule: &Installed) -> &'c Cell {
        // A first chunk's cell number is its place; every later chunk's is 2^27 or more,
        // past the slice.
        match self.first.get(rule.cell as usize) {
            Some(c) => c,
            None => self.counters.tables[self.shard.min(COUNTER_SHARDS)].cell_past_first(rule.cell),
        }
    }
    /// Count a packet of `bytes` at `now` for `rule`.
    #[inline]
    pub(crate) fn hit(&self, rule: &Installed, bytes: u64, now: u64) {
        if self.shard < COUNTER_SHARDS {
            self.hit_owned(rule, bytes, now);
            return;
        }
        let c = self.cell(rule);
        c.packets.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(bytes, Ordering::Relaxed);
        rule.stamp(now);
    }
    /// [`ShardCells::hit`] on a shard this thread owns (below [`COUNTER_SHARDS`], tested by
    /// the caller once a batch: `Tables::process_one` runs a loop of its own for an owned
    /// shard, without hit's test a packet).
    #[inline]
    pub(crate) fn hit_owned(&self, rule: &Installed, bytes: u64, now: u64) {
        debug_assert!(self.shard < COUNTER_SHARDS);
        let c = self.cell(rule);
        // This thread is the cell's only writer: a load and a store lose nothing.
        c.packets.store(c.packets.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        c.bytes.store(c.bytes.load(Ordering::Relaxed) + bytes, Ordering::Relaxed);
        rule.stamp(now);
    }
    /// Loads `rule`'s cell and gives a word of it: a batch over rules out of the caches
    /// touches its matched rules' cells before it counts, so that their cache misses
    /// overlap (a prefetch without `unsafe`).
    #[inline(always)]
    pub(crate) fn touch(&self, rule: &Installed) -> u64 {
        self.cell(rule).packets.load(Ordering::Relaxed)
    }
}

/// A rule's action list as the classifiers run it: the actions, their mirred targets as
/// device indices, and what the list decides without running it. Shared by every rule
/// with an equal list ([`Interner`]): most rule sets repeat a few lists (`drop`, a
/// redirect to a port), and a list of its own was ~60 bytes a rule.
#[derive(Debug)]
pub struct Actions {
    pub list: Vec<Action>,
    /// Each mirred target's index in the classifier's device list, in action order.
    pub devs: Vec<u16>,
    /// Whether an action may change the packet's bytes.
    pub modifies: bool,
    /// The verdict when the actions are one `pass` or `drop` (the common case, decided
    /// without walking the actions).
    pub simple: Option<Verdict>,
}

impl Actions {
    pub fn new(list: Vec<Action>, devs: Vec<u16>) -> Actions {
        let modifies = list.iter().any(|a| {
            matches!(
                a.kind,
                ActionKind::VlanPop
                    | ActionKind::VlanPush { .. }
                    | ActionKind::VlanModify { .. }
                    | ActionKind::Pedit(_)
                    | ActionKind::Csum(_)
            )
        });
        let simple = match list.as_slice() {
            [Action { kind: ActionKind::Gact, control: Some(Control::Ok) }] => Some(Verdict::Pass),
            [Action { kind: ActionKind::Gact, control: Some(Control::Drop) }] => {
                Some(Verdict::Drop)
            }
            [] => Some(Verdict::Pass),
            _ => None,
        };
        Actions { list, devs, modifies, simple }
    }
}

/// Shares equal action lists and equal masks between the rules of one classifier (the
/// writer's, under its lock). Devices are only ever appended to a classifier's list, so
/// a list's device indices never change once interned. Masks are numbered: a rule keeps
/// its mask's number (4 bytes), not the 112-byte mask.
#[derive(Default)]
pub struct Interner {
    actions: std::collections::HashMap<Vec<Action>, Arc<Actions>>,
    /// The list interned last: rule sets repeat one list, and an equal slice is cheaper
    /// to compare than to hash.
    last: Option<Arc<Actions>>,
    masks: Vec<Key>,
    mask_ids: std::collections::HashMap<Key, u32, KeyHasher>,
}

/// A hasher for whole keys: their 14 words mixed, no SipHash rounds over 112 bytes (an
/// insert interns its rule's mask).
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // 16 bytes at a time, each pair of words one 128-bit multiply, the products
        // xored: independent multiplies, not a chain of 14 (an insert's mask lookup).
        let mut h = self.0 ^ 0x9e37_79b9_7f4a_7c15;
        for c in bytes.chunks(16) {
            let mut w = [0u8; 16];
            w[..c.len()].copy_from_slice(c);
            let a = u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            let b = u64::from_ne_bytes([w[8], w[9], w[10], w[11], w[12], w[13], w[14], w[15]]);
            let p = u128::from(a ^ 0x243f_6a88_85a3_08d3) * u128::from(b ^ 0x1319_8a2e_0370_7344);
            h = h.rotate_left(23) ^ (p as u64) ^ ((p >> 64) as u64);
        }
        self.0 = h ^ (h >> 29);
    }
}

impl std::hash::BuildHasher for KeyHasher {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(0)
    }
}

impl Interner {
    /// The shared list equal to `list` (its mirred targets as indices into `devices`).
    pub fn actions(&mut self, list: &[Action], devices: &[String]) -> Arc<Actions> {
        if let Some(l) = &self.last {
            if l.list == list {
                return l.clone();
            }
        }
        let a = match self.actions.get(list) {
            Some(a) => a.clone(),
            None => {
                let a = Arc::new(Actions::new(list.to_vec(), device_indices(list, devices)));
                self.actions.insert(list.to_vec(), a.clone());
                a
            }
        };
        self.last = Some(a.clone());
        a
    }

    /// The number of `mask` (the same for equal masks).
    pub fn mask_id(&mut self, mask: &Key) -> u32 {
        if let Some(&i) = self.mask_ids.get(mask) {
            return i;
        }
        let i = self.masks.len() as u32;
        self.masks.push(*mask);
        self.mask_ids.insert(*mask, i);
        i
    }

    /// Distinct action lists interned.
    pub fn action_lists(&self) -> usize {
        self.actions.len()
    }

    /// Distinct masks numbered.
    pub fn masks(&self) -> usize {
        self.masks.len()
    }

    /// The mask of a number [`Interner::mask_id`] gave.
    pub fn mask(&self, id: u32) -> &Key {
        &self.masks[id as usize]
    }

    /// A rule installed with shared parts. `mask` must be what [`Interner::mask_id`] gives
    /// `compiled.mask` (a classifier's insert takes it from the subtable the rule goes to,
    /// without hashing the mask); `cell` is its counters' ([`CellAlloc::take`]).
    #[allow(clippy::too_many_arguments)]
    pub fn install(
        &mut self,
        rule: &Rule,
        prio: u32,
        seq: u64,
        compiled: &Compiled,
        devices: &[String],
        mask: u32,
        cell: u32,
    ) -> Installed {
        debug_assert_eq!(self.mask_ids.get(&compiled.mask), Some(&mask));
        let actions = self.actions(&rule.actions, devices);
        Installed::new(rule, prio, seq, compiled, actions, mask, cell)
    }
}

/// A port range kept in 4 bytes; `NO_RANGE` (low above high, which no rule has) is none.
type PortRange = (u16, u16);
const NO_RANGE: PortRange = (1, 0);

/// A rule as a classifier holds it: what lookups, counters, stats rows and deletes need,
/// nothing more (issue 14: 1M rules in 256 MB). The rule's text is not kept: its masked
/// key lives in the classifier's tables, its mask is a number ([`Interner::mask`]), its
/// actions a shared list; a stats row needs the line, chain and priority.
///
/// `repr(C)`, what a matched packet reads first: rank, verdict and line in the first 24
/// bytes, the last-used stamp and the counter cell right after; 64 bytes (the counts are
/// in [`Counters`]' tables: 104 bytes when they were in the rule). The chain, read by
/// stats rows and the writer only, sits after the mask, so that the 8-byte `simple`
/// leaves the order at 16 bytes.
/// Rust's own order had put the priority and the order 112 bytes apart, each load a miss
/// of its own in `perf` of a 1k-rule lookup (1k rules, one mask: 34.0 to 32.8 ns/packet).
#[derive(Debug)]
#[repr(C)]
pub struct Installed {
    pub prio: u32,
    /// `actions.simple` with the rule's line, beside the rank (most matched packets read
    /// nothing else): their outcome's verdict and line as the outcome holds them.
    pub simple: Option<Decided>,
    /// `rule.line` (every matched packet reports it).
    pub line: u32,
    /// Order among rules of equal priority (file order, then insertion order).
    pub seq: u64,
    /// The time stamp of the rule's last packet (nanoseconds, the packets' own clock, cut
    /// to [`LAST_USED_GRAIN`]): written by any counting thread, at most once a grain.
    pub last_used: AtomicU64,
    /// The rule's cell in each of [`Counters`]' tables.
    pub(crate) cell: u32,
    /// The hash of the rule's masked key as the classifier's tables hash it now (the
    /// writer's: a delete finds the rule's slot by it; rewritten when the tables' width
    /// changes).
    pub(crate) hash: AtomicU32,
    /// The rule's mask, numbered by the classifier's [`Interner`].
    pub mask: u32,
    pub chain: u32,
    src_range: PortRange,
    dst_range: PortRange,
    pub actions: Arc<Actions>,
}

impl Installed {
    pub fn new(
        rule: &Rule,
        prio: u32,
        seq: u64,
        compiled: &Compiled,
        actions: Arc<Actions>,
        mask: u32,
        cell: u32,
    ) -> Installed {
        Installed {
            prio,
            simple: actions.simple.map(|verdict| Decided { verdict, line: rule.line as u32 }),
            line: rule.line as u32,
            chain: rule.chain,
            seq,
            last_used: AtomicU64::new(0),
            cell,
            hash: AtomicU32::new(0),
            mask,
            src_range: compiled.src_range.unwrap_or(NO_RANGE),
            dst_range: compiled.dst_range.unwrap_or(NO_RANGE),
            actions,
        }
    }

    /// The last-used stamp's update for a packet at `now`.
    #[inline]
    fn stamp(&self, now: u64) {
        // Last used to the millisecond (tc keeps it in jiffies): a plain load on most
        // packets instead of a locked read-modify-write. The stamp is cut to the grain
        // first, so the value kept is the latest packet's, cut, whatever order threads
        // count in (kept unrounded, it was the first stamp past the grain, which
        // depended on the order: `weir flow run --stats` printed another `used` with
        // another --workers).
        // `last_used` only ever holds a cut stamp (a multiple of the grain: only this
        // writes it), so `now`'s cut is past it exactly when `now` is a grain or more past
        // it: an add and a compare a packet, the cut (a multiply, a shift and a multiply)
        // only when it moves (issue 14: the one-mask row's action stage). The add wraps
        // only for the last grain below 2^64, where the test then always passes and
        // `fetch_max` keeps the larger (a saturating add's extra register spilled the
        // 16-mask loop's pointer: 2-4% slower there).
        let last = self.last_used.load(Ordering::Relaxed);
        if now >= last.wrapping_add(LAST_USED_GRAIN) {
            self.last_used.fetch_max(now - now % LAST_USED_GRAIN, Ordering::Relaxed);
        }
    }

    /// The sort key: lower wins.
    #[inline]
    pub fn rank(&self) -> (u32, u64) {
        (self.prio, self.seq)
    }

    /// The rule's line in its file.
    #[inline]
    pub fn line(&self) -> usize {
        self.line as usize
    }

    /// The port ranges checked apart from the mask.
    pub fn ranges(&self) -> Ranges {
        let r = |x: PortRange| (x != NO_RANGE).then_some(x);
        Ranges { src: r(self.src_range), dst: r(self.dst_range) }
    }

    /// Whether the key's ports are in the rule's ranges (true without ranges).
    #[inline]
    pub fn ranges_hold(&self, key: &Key) -> bool {
        let ok = |(lo, hi): PortRange, fl| {
            (lo, hi) == NO_RANGE || {
                let v = key.get_u16(fl);
                lo <= v && v <= hi
            }
        };
        ok(self.src_range, field::SRC_PORT) && ok(self.dst_range, field::DST_PORT)
    }

    /// Whether each port has a range (a subtable's identity with the mask): the same as
    /// its [`Compiled::range_flags`].
    #[inline]
    pub fn range_flags(&self) -> (bool, bool) {
        (self.src_range != NO_RANGE, self.dst_range != NO_RANGE)
    }
}

/// Where a packet ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Drop,
    /// To the device of this index in the device list.
    Redirect(u16),
}

/// A verdict and the line of the rule that gave it, 8 bytes: a rule whose actions are
/// one `pass` or `drop` holds its outcome's pair this way ([`Installed::simple`]) and an
/// [`Outcome`] the same, so that a matched packet's outcome takes both with one load and
/// one store (issue 14: held apart, in another order, they were three loads and four
/// stores a packet at one mask).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Decided {
    pub verdict: Verdict,
    pub line: u32,
}

/// What one packet did. `Copy`: [`outcome_slots`] fills a batch's slots with one copy.
/// 16 bytes: the line a `u32` as `Installed` holds it, beside a flag for whether a rule
/// matched (issue 14: an `Option<usize>` line made it 32 bytes, its two words stored a
/// packet and the batch's fill twice as long).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Outcome {
    /// The verdict, and the line of the last rule that matched when `matched` (0 when
    /// not): [`Outcome::verdict`], [`Outcome::line`].
    decided: Decided,
    pub mark: u32,
    /// Whether a rule matched.
    matched: bool,
    /// Whether the actions changed the packet's bytes.
    pub modified: bool,
}

// The size the doc comment above states.
const _: () = assert!(std::mem::size_of::<Outcome>() == 16);
const _: () = assert!(std::mem::size_of::<Installed>() == 64);
const _: () = assert!(std::mem::size_of::<Option<Decided>>() == 8);

impl Outcome {
    /// The outcome of a packet that `line`'s rule (or none) ended with `verdict`.
    pub(crate) fn new(line: Option<usize>, verdict: Verdict, mark: u32, modified: bool) -> Outcome {
        Outcome {
            decided: Decided { verdict, line: line.map_or(0, |l| l as u32) },
            mark,
            matched: line.is_some(),
            modified,
        }
    }

    /// The line of the last rule that matched (the one whose actions ended it).
    #[inline]
    pub fn line(&self) -> Option<usize> {
        self.matched.then_some(self.decided.line as usize)
    }

    /// Where the packet ends.
    #[inline]
    pub fn verdict(&self) -> Verdict {
        self.decided.verdict
    }
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outcome")
            .field("line", &self.line())
            .field("verdict", &self.verdict())
            .field("mark", &self.mark)
            .field("modified", &self.modified)
            .finish()
    }
}

/// A packet on its way through: bytes (changed in place by actions), metadata.
pub struct Work<'a> {
    pub data: &'a mut Vec<u8>,
    pub wire_len: u32,
    pub indev: u32,
    pub now: u64,
    pub mark: u32,
    /// Copies sent by `mirror`: (device index, bytes).
    pub mirrored: &'a mut Vec<(u16, Vec<u8>)>,
}

impl<'a> Work<'a> {
    /// A packet as it arrives: `data`'s bytes, `wire_len` on the wire, from device `indev`
    /// at `now` (nanoseconds), no mark yet; `mirrored` takes the copies `mirror` sends.
    #[inline]
    pub fn new(
        data: &'a mut Vec<u8>,
        wire_len: u32,
        indev: u32,
        now: u64,
        mirrored: &'a mut Vec<(u16, Vec<u8>)>,
    ) -> Work<'a> {
        Work { data, wire_len, indev, now, mark: 0, mirrored }
    }
}

/// What a rule's actions said.
enum Step {
    Done(Verdict),
    Continue,
    Restart(u32),
}

/// A rank: (priority, order); lower wins.
pub type Rank = (u32, u64);

/// `lookup(chain, key, after)`: see [`process`].
pub type Lookup<'f, 'r> = dyn FnMut(u32, &Key, Option<Rank>) -> Option<&'r Installed> + 'f;

/// Classify and act on one packet. `lookup(chain, key, after)` finds the best rule of
/// `chain` matching `key` ranked after `after` (all when `None`); `first` is the answer
/// to the first lookup when the caller already has it (the batch path). Matched rules
/// are counted in `counters`, the classifier's.
#[inline]
pub fn process<'r>(
    w: &mut Work<'_>,
    key: &Key,
    need: Need,
    first: Option<Option<&'r Installed>>,
    lookup: &mut Lookup<'_, 'r>,
    counters: &Counters,
) -> Outcome {
    process_slow(w, key, need, first, lookup, counters.shard(my_shard()))
}

/// The outcome's pair when no rule matched.
const MISSED: Decided = Decided { verdict: Verdict::Pass, line: 0 };

/// `out` grown by `n` (at most [`BATCH`]) outcomes for a batch's packets to be written by index
/// ([`process_into`]): one length update and one capacity test a batch instead of a
/// push's a packet (issue 14: the push loaded and stored the length, tested the capacity
/// and reloaded the buffer's pointer, ~8 instructions a packet at one mask). The filler
/// is overwritten: every slot gets its packet's outcome.
#[inline(always)]
pub(crate) fn outcome_slots(out: &mut Vec<Outcome>, n: usize) -> &mut [Outcome] {
    const FILLER: Outcome = Outcome { decided: MISSED, mark: 0, matched: false, modified: false };
    let start = out.len();
    // A copy of a constant array (a memcpy): `Vec::resize` was a call with a loop.
    out.extend_from_slice(&[FILLER; BATCH][..n.min(BATCH)]);
    &mut out[start..]
}

/// [`process`] for the batch paths, the outcome written into `out` (the packet's slot of
/// [`outcome_slots`]). Most packets meet no rule, or one rule whose one action is `pass`
/// or `drop`: decided here, inlined into the batch loop, each path with its own write so
/// that the outcome is stored field by field into `out` (an outcome returned by a call,
/// or merged from several paths, went through the stack, and the wide copy out of it
/// waited on the narrow field stores: measured 4 ns a packet in weir-bench flow).
///
/// `cells` is this thread's counter shard ([`Counters::shard`] of [`my_shard`], once a
/// batch). `key` gives the
/// packet's key, asked only on the actions' path (the plain batch path keeps only the
/// words its tables read, and extracts the key there); generic, so that each batch path
/// inlines its own (an `Option<&Key>` tested a packet cost the cached path ~2 ns).
/// Always inlined: `#[inline]` left it a call in a loop the one-mask path has three copies
/// of (`Tables::process_one`), ~25 instructions a packet more. `OWNED`: `cells` is a shard
/// this thread owns (below [`COUNTER_SHARDS`]), tested by the caller once a batch, so the
/// counts take [`ShardCells::hit_owned`] with no test a packet.
#[inline(always)]
pub(crate) fn process_into<'r, const OWNED: bool>(
    w: &mut Work<'_>,
    key: impl FnOnce(&Work<'_>) -> Key,
    need: Need,
    first: Option<&'r Installed>,
    lookup: &mut Lookup<'_, 'r>,
    cells: ShardCells<'_>,
    out: &mut Outcome,
) {
    match first {
        None => *out = Outcome { decided: MISSED, mark: w.mark, matched: false, modified: false },
        Some(rule) => match rule.simple {
            Some(decided) => {
                // The outcome before the counts: written after them, the verdict's halves
                // were loaded before and kept on the stack across the counters' atomics
                // (issue 14: 3 instructions a matched packet at one mask).
                *out = Outcome { decided, mark: w.mark, matched: true, modified: false };
                if OWNED {
                    cells.hit_owned(rule, u64::from(w.wire_len), w.now);
                } else {
                    cells.hit(rule, u64::from(w.wire_len), w.now);
                }
            }
            None => {
                let key = key(w);
                *out = process_slow(w, &key, need, Some(first), lookup, cells)
            }
        },
    }
}

#[inline(never)]
fn process_slow<'r>(
    w: &mut Work<'_>,
    key: &Key,
    need: Need,
    first: Option<Option<&'r Installed>>,
    lookup: &mut Lookup<'_, 'r>,
    cells: ShardCells<'_>,
) -> Outcome {
    // The packet's own key until an action changes the packet (most packets: no copy).
    let mut changed: Option<Key> = None;
    let mut chain = 0u32;
    let mut after: Option<(u32, u64)> = None;
    let mut restarts = 0u32;
    let mut line = None;
    let mut modified = false;
    let mut first = first;
    loop {
        let found = match first.take() {
            Some(f) => f,
            None => lookup(chain, changed.as_ref().unwrap_or(key), after),
        };
        let Some(rule) = found else {
            return Outcome::new(line, Verdict::Pass, w.mark, modified);
        };
        cells.hit(rule, u64::from(w.wire_len), w.now);
        line = Some(rule.line());
        if let Some(d) = rule.simple {
            return Outcome::new(line, d.verdict, w.mark, modified);
        }
        let before = if rule.actions.modifies { Some(w.data.clone()) } else { None };
        let step = run_actions(rule, w);
        if let Some(b) = before {
            if b != *w.data {
                modified = true;
                // The next lookup sees the packet as the actions left it.
                changed = Some(extract(w.data, w.indev, need).0);
            }
        }
        match step {
            Step::Done(v) => return Outcome::new(line, v, w.mark, modified),
            Step::Continue => after = Some(rule.rank()),
            Step::Restart(c) => {
                restarts += 1;
                if restarts > MAX_RESTARTS {
                    return Outcome::new(line, Verdict::Drop, w.mark, modified);
                }
                chain = c;
                after = None;
            }
        }
    }
}

fn run_actions(rule: &Installed, w: &mut Work<'_>) -> Step {
    let mut dev_i = 0;
    let mut last = Control::Pipe;
    for a in &rule.actions.list {
        match &a.kind {
            ActionKind::Gact => {}
            ActionKind::Mirred { redirect, .. } => {
                let dev = rule.actions.devs.get(dev_i).copied().unwrap_or(0);
                dev_i += 1;
                if *redirect && a.control.is_none() {
                    // tc's default for a redirect is `stolen`: the packet is the device's.
                    return Step::Done(Verdict::Redirect(dev));
                }
                // A mirror, or a redirect given another control: the kernel sends a clone
                // and the packet goes on.
                w.mirrored.push((dev, w.data.clone()));
            }
            ActionKind::VlanPop => vlan_pop(w.data),
            ActionKind::VlanPush { id, prio, tpid } => {
                vlan_push(w.data, *id, prio.unwrap_or(0), *tpid)
            }
            ActionKind::VlanModify { id, prio, tpid } => vlan_modify(w.data, *id, *prio, *tpid),
            ActionKind::Pedit(munges) => pedit(w.data, munges),
            ActionKind::Csum(targets) => fix_checksums(w.data, *targets),
            ActionKind::SkbeditMark { mark, mask } => {
                w.mark = match mask {
                    None => *mark,
                    Some(m) => (w.mark & !m) | (mark & m),
                };
            }
        }
        last = a.effective_control();
        if last != Control::Pipe {
            break;
        }
    }
    match last {
        Control::Ok | Control::Pipe => Step::Done(Verdict::Pass),
        Control::Drop => Step::Done(Verdict::Drop),
        Control::Continue => Step::Continue,
        Control::Reclassify => Step::Restart(0),
        Control::Goto(n) => Step::Restart(n),
    }
}

fn is_vlan_tpid(t: u16) -> bool {
    t == weir_packet::ethertype::VLAN_8021Q || t == weir_packet::ethertype::VLAN_8021AD
}

fn tag_at(data: &[u8]) -> Option<(u16, u16)> {
    let tpid = u16::from_be_bytes([*data.get(12)?, *data.get(13)?]);
    let tci = u16::from_be_bytes([*data.get(14)?, *data.get(15)?]);
    is_vlan_tpid(tpid).then_some((tpid, tci))
}

fn vlan_pop(data: &mut Vec<u8>) {
    if tag_at(data).is_some() && data.len() >= 18 {
        data.drain(12..16);
    }
}

fn vlan_push(data: &mut Vec<u8>, id: u16, prio: u8, tpid: u16) {
    if data.len() < 12 {
        return;
    }
    let tci = (u16::from(prio) << 13) | id;
    let mut tag = [0u8; 4];
    tag[..2].copy_from_slice(&tpid.to_be_bytes());
    tag[2..].copy_from_slice(&tci.to_be_bytes());
    data.splice(12..12, tag);
}

fn vlan_modify(data: &mut [u8], id: u16, prio: Option<u8>, tpid: u16) {
    let Some((_, tci)) = tag_at(data) else { return };
    let mut tci = (tci & !0x0fff) | id;
    if let Some(p) = prio {
        tci = (tci & 0x1fff) | (u16::from(p) << 13);
    }
    data[12..14].copy_from_slice(&tpid.to_be_bytes());
    data[14..16].copy_from_slice(&tci.to_be_bytes());
}

/// The start of a pedit header in the packet as it is now.
fn header_start(offs: &Offsets, h: PeditHeader) -> Option<usize> {
    match h {
        PeditHeader::Eth => Some(0),
        PeditHeader::Ip | PeditHeader::Ip6 => offs.network,
        PeditHeader::Tcp | PeditHeader::Udp => offs.transport,
    }
}

/// `pedit ex munge`: write or add at the field's place. The network header is after the
/// Ethernet header and its VLAN tags whatever the protocol (as the kernel's pedit, which
/// does not look at the protocol); the transport header is found only in IPv4/IPv6
/// packets that are not fragments. A field outside the packet is left alone.
fn pedit(data: &mut [u8], munges: &[Munge]) {
    for m in munges {
        let (_, offs) = extract(data, 0, Need::ALL);
        let (hdr, _, off, len, bits) = m.field.layout();
        let Some(start) = header_start(&offs, hdr) else { continue };
        let at = start + off;
        if at + len > data.len() {
            continue;
        }
        if let Some((shift, width)) = bits {
            // A bit field inside the first 32-bit word (IPv6 traffic class, flow label).
            let mut wb = [0u8; 4];
            wb.copy_from_slice(&data[at..at + 4]);
            let word = u32::from_be_bytes(wb);
            let fmask = ((1u64 << width) - 1) as u32;
            let v = u32::from_be_bytes([m.value[0], m.value[1], m.value[2], m.value[3]]);
            let cur = (word >> shift) & fmask;
            let new = if m.add { cur.wrapping_add(v) & fmask } else { v & fmask };
            let word = (word & !(fmask << shift)) | (new << shift);
            data[at..at + 4].copy_from_slice(&word.to_be_bytes());
            continue;
        }
        let value = &m.value[..len];
        if !m.add {
            data[at..at + len].copy_from_slice(value);
            continue;
        }
        // add: per 32-bit word of the header, as the kernel's keys are words; a carry
        // does not leave the field's bytes of that word.
        let mut i = 0;
        while i < len {
            let word_end = ((off + i) / 4 + 1) * 4 - off;
            let j = word_end.min(len);
            let mut cur: u64 = 0;
            let mut add: u64 = 0;
            for k in i..j {
                cur = (cur << 8) | u64::from(data[at + k]);
                add = (add << 8) | u64::from(value[k]);
            }
            let bits = (j - i) * 8;
            let sum = cur.wrapping_add(add) & ((1u64 << bits) - 1);
            for k in (i..j).rev() {
                let shift = (j - 1 - k) * 8;
                data[at + k] = (sum >> shift) as u8;
            }
            i = j;
        }
    }
}

fn ones_sum(bytes: &[u8], mut sum: u32) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    for p in &mut chunks {
        sum = sum.wrapping_add(u32::from(u16::from_be_bytes([p[0], p[1]])));
        sum = (sum & 0xffff) + (sum >> 16);
    }
    if let [b] = chunks.remainder() {
        sum = sum.wrapping_add(u32::from(*b) << 8);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum
}

/// `csum`: recompute the checksums the targets name, as act_csum does: the IPv4 header's;
/// TCP, UDP and ICMP (ICMPv6 in IPv6) over their IP pseudo-header, for packets that are
/// not fragments and whose IP length fits in the captured bytes. A UDP-over-IPv4 checksum
/// of 0 (none) stays 0; a computed UDP checksum of 0 is written 0xffff (act_csum's
/// CSUM_MANGLED_0, for UDP only).
fn fix_checksums(data: &mut [u8], targets: u8) {
    let (key, offs) = extract(data, 0, Need::ALL);
    let Some(net) = offs.network else { return };
    let is_frag = key.get(crate::key::field::FLAGS)[0] & crate::key::FLAG_FRAG != 0;
    if offs.ip_version == 4 {
        let ihl = usize::from(data[net] & 0x0f) * 4;
        if targets & csum::IPV4_HEADER != 0 && data.len() >= net + ihl && ihl >= 20 {
            data[net + 10] = 0;
            data[net + 11] = 0;
            let c = !(ones_sum(&data[net..net + ihl], 0) as u16);
            data[net + 10..net + 12].copy_from_slice(&c.to_be_bytes());
        }
    }
    if is_frag {
        return;
    }
    let Some(tr) = offs.transport else { return };
    let end = match offs.ip_version {
        4 => net + usize::from(u16::from_be_bytes([data[net + 2], data[net + 3]])),
        6 => net + 40 + usize::from(u16::from_be_bytes([data[net + 4], data[net + 5]])),
        _ => return,
    };
    if end > data.len() || end < tr {
        return;
    }
    let proto = offs.ip_proto;
    let (check_at, want) = match proto {
        weir_packet::ipproto::TCP => (16, csum::TCP),
        weir_packet::ipproto::UDP => (6, csum::UDP),
        weir_packet::ipproto::ICMP if offs.ip_version == 4 => (2, csum::ICMP),
        weir_packet::ipproto::ICMPV6 if offs.ip_version == 6 => (2, csum::ICMP),
        _ => return,
    };
    if targets & want == 0 || end < tr + check_at + 2 {
        return;
    }
    if proto == weir_packet::ipproto::UDP
        && offs.ip_version == 4
        && data[tr + 6] == 0
        && data[tr + 7] == 0
    {
        return;
    }
    data[tr + check_at] = 0;
    data[tr + check_at + 1] = 0;
    let seg_len = (end - tr) as u32;
    let mut sum = 0u32;
    let pseudo = proto != weir_packet::ipproto::ICMP;
    if pseudo {
        if offs.ip_version == 4 {
            sum = ones_sum(&data[net + 12..net + 20], sum);
        } else {
            sum = ones_sum(&data[net + 8..net + 40], sum);
        }
        sum = ones_sum(&[0, proto], sum);
        sum = ones_sum(&seg_len.to_be_bytes(), sum);
    }
    sum = ones_sum(&data[tr..end], sum);
    let mut c = !(sum as u16);
    // act_csum writes CSUM_MANGLED_0 for UDP only (tcf_csum_ipv4_udp, _ipv6_udp); a TCP or
    // ICMPv6 checksum that sums to 0 is written 0, as tcp_v4_check and csum_ipv6_magic
    // give it.
    if c == 0 && proto == weir_packet::ipproto::UDP {
        c = 0xffff;
    }
    data[tr + check_at..tr + check_at + 2].copy_from_slice(&c.to_be_bytes());
}

/// The mirred targets of a rule as indices into `devices`.
pub fn device_indices(actions: &[Action], devices: &[String]) -> Vec<u16> {
    actions
        .iter()
        .filter_map(|a| match &a.kind {
            ActionKind::Mirred { dev, .. } => {
                Some(devices.iter().position(|d| d == dev).map_or(0, |i| i as u16))
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rule with the counters' cell `cell` (what it matches is not read here).
    fn rule_at(cell: u32) -> Installed {
        let r = Rule::new(0x0800);
        let c = r.compile(&mut |_| 0);
        let mut int = Interner::default();
        let m = int.mask_id(&c.mask);
        int.install(&r, 1, 0, &c, &[], m, cell)
    }

    /// More counting threads than owned shards, twice over (the second round reuses the
    /// shards the first round's threads gave back): nothing is lost.
    #[test]
    fn sharded_counters_lose_no_hit() {
        let c = Counters::default();
        let cell = CellAlloc::default().take(&c);
        let r = rule_at(cell);
        for round in 0..2u64 {
            std::thread::scope(|s| {
                for t in 0..(COUNTER_SHARDS as u64 * 2) {
                    let (c, r) = (&c, &r);
                    s.spawn(move || {
                        for i in 0..20_000u64 {
                            c.hit(r, t + 1, round * 1_000_000_000 + i);
                        }
                    });
                }
            });
        }
        let threads = COUNTER_SHARDS as u64 * 2;
        let (p, b, last) = c.read(&r);
        assert_eq!(p, 2 * threads * 20_000);
        assert_eq!(b, 2 * 20_000 * (1..=threads).sum::<u64>());
        // To the grain: the last stamp is within a millisecond of the last packet's.
        assert!(last + LAST_USED_GRAIN > 1_000_000_000 + 19_999, "last used {last}");
    }

    /// The last-used stamp advances to each later packet's stamp cut to the grain (at the
    /// grain's first nanosecond, too), and neither an earlier packet nor one within the
    /// same grain moves it (a guard for any shortcut taken on this per-packet path).
    #[test]
    fn last_used_follows_the_latest_stamp_cut() {
        let g = LAST_USED_GRAIN;
        let c = Counters::default();
        let r = rule_at(CellAlloc::default().take(&c));
        let last = |c: &Counters| c.read(&r).2;
        c.hit_on(0, &r, 1, g - 1);
        assert_eq!(last(&c), 0);
        c.hit_on(0, &r, 1, g);
        assert_eq!(last(&c), g);
        c.hit_on(0, &r, 1, 2 * g - 1);
        assert_eq!(last(&c), g);
        c.hit_on(COUNTER_SHARDS, &r, 1, 5 * g + 7);
        assert_eq!(last(&c), 5 * g);
        c.hit_on(0, &r, 1, 3 * g);
        assert_eq!(last(&c), 5 * g);
        c.hit_on(1, &r, 1, 6 * g);
        assert_eq!(last(&c), 6 * g);
        // The largest stamp: the cut stays the largest multiple of the grain.
        c.hit_on(0, &r, 1, u64::MAX);
        assert_eq!(last(&c), u64::MAX - u64::MAX % g);
        c.hit_on(0, &r, 1, u64::MAX);
        assert_eq!(last(&c), u64::MAX - u64::MAX % g);
        assert_eq!(c.read(&r).0, 8);
    }

    /// Each owned shard counts in its own table and no other (two owners writing one
    /// table with plain stores would lose counts, too rarely for a race to show it), a cell
    /// of the first chunk (the batch's slice) and one past it (the directory) alike.
    #[test]
    fn owned_shards_count_in_their_own_tables() {
        let c = Counters::default();
        let mut alloc = CellAlloc::default();
        let cells: Vec<u32> = (0..=FIRST_CHUNK).map(|_| alloc.take(&c)).collect();
        for cell in [cells[0], cells[FIRST_CHUNK as usize]] {
            let r = rule_at(cell);
            for i in 0..COUNTER_SHARDS {
                c.shard(i).hit_owned(&r, 10 * (i as u64 + 1), 0);
            }
            for i in 0..COUNTER_SHARDS {
                let cell =
                    c.tables[i].cell_if_made(r.cell).expect("an owned table's chunk is made");
                let counts =
                    (cell.packets.load(Ordering::Relaxed), cell.bytes.load(Ordering::Relaxed));
                assert_eq!(counts, (1, 10 * (i as u64 + 1)), "shard {i}, cell {:#x}", r.cell);
            }
            assert_eq!(c.read(&r), (COUNTER_SHARDS as u64, 30, 0));
        }
    }

    /// Cell numbers: the `n`th cell is chunk `k`'s place `n + F - (F << k)` where
    /// `F << k <= n + F` (`F` the first chunk's cells), every one distinct and within its
    /// chunk, up to the last.
    #[test]
    fn cell_numbers_fill_each_chunk_then_the_next() {
        let split = |c: u32| (c >> OFF_BITS, c & ((1 << OFF_BITS) - 1));
        let f = FIRST_CHUNK;
        assert_eq!(cell_number(0).map(split), Some((0, 0)));
        assert_eq!(cell_number(f - 1).map(split), Some((0, f - 1)));
        assert_eq!(cell_number(f).map(split), Some((1, 0)));
        assert_eq!(cell_number(3 * f - 1).map(split), Some((1, 2 * f - 1)));
        assert_eq!(cell_number(3 * f).map(split), Some((2, 0)));
        // A first chunk's cell number is its place, which `ShardCells` indexes with.
        assert!((0..f).all(|n| cell_number(n) == Some(n)));
        let last = FIRST_CHUNK * ((1 << MAX_CHUNKS) - 1) - 1;
        let (k, off) = split(cell_number(last).unwrap());
        assert_eq!((k, off), (MAX_CHUNKS - 1, (FIRST_CHUNK << k) - 1));
        assert!(off < 1 << OFF_BITS);
        assert_eq!(cell_number(last + 1), None);
        assert_eq!(cell_number(u32::MAX), None);
    }

    /// Every cell handed out has its counts apart from every other's in every shard, the
    /// tables grown chunk by chunk as cells are taken; counts read back exactly, whether
    /// they went through the first chunk's slice or the directory (a shard taken before
    /// any chunk was made finds every cell through the directory).
    #[test]
    fn cells_across_chunks_count_apart() {
        let c = Counters::default();
        let early = c.shard(1);
        let mut alloc = CellAlloc::default();
        let n_cells = 3 * FIRST_CHUNK as usize + 10;
        let rules: Vec<Installed> = (0..n_cells).map(|_| rule_at(alloc.take(&c))).collect();
        let cells: std::collections::HashSet<u32> = rules.iter().map(|r| r.cell).collect();
        assert_eq!(cells.len(), rules.len());
        for (i, r) in rules.iter().enumerate() {
            for shard in 0..=COUNTER_SHARDS {
                for _ in 0..=(i % 3) {
                    c.hit_on(shard, r, i as u64 + 1, 0);
                }
            }
            early.hit(r, 1, 0);
        }
        for (i, r) in rules.iter().enumerate() {
            let n = (i % 3) as u64 + 1;
            let shards = COUNTER_SHARDS as u64 + 1;
            assert_eq!(c.read(r), (n * shards + 1, n * shards * (i as u64 + 1) + 1, 0), "rule {i}");
        }
        // Three first chunks' worth and ten take chunks of 1, 2 and 4 first chunks: three
        // chunks an owned table, and the shared shard's made as it counted there.
        assert_eq!(c.bytes(), 3 * 7 * FIRST_CHUNK as usize * 16);
    }

    /// A deleted rule's cell goes to a new rule only once nothing else holds the deleted
    /// one (a version or a worker could still count into it), and then it starts at zero
    /// in every shard.
    #[test]
    fn a_reused_cell_starts_at_zero() {
        let c = Counters::default();
        let mut alloc = CellAlloc::default();
        let old = Arc::new(rule_at(alloc.take(&c)));
        for shard in 0..=COUNTER_SHARDS {
            c.hit_on(shard, &old, 100, 0);
        }
        assert_eq!(c.read(&old).0, 3);
        let held = old.clone();
        alloc.bury(old);
        // 64 more deletes make a sweep due; the held rule keeps its cell.
        let mut more = Vec::new();
        for _ in 0..64 {
            let r = Arc::new(rule_at(alloc.take(&c)));
            c.hit_on(0, &r, 1, 0);
            more.push(r);
        }
        let cells_before: Vec<u32> = more.iter().map(|r| r.cell).collect();
        for r in more {
            alloc.bury(r);
        }
        let fresh = rule_at(alloc.take(&c));
        assert_ne!(fresh.cell, held.cell, "a cell still reachable was handed out again");
        assert!(cells_before.contains(&fresh.cell), "a freed cell is reused");
        assert_eq!(c.read(&fresh), (0, 0, 0));
        // Counts through the held rule still land in its own cell.
        c.hit_on(1, &held, 100, 0);
        assert_eq!(c.read(&held).0, 4);
        assert_eq!(c.read(&fresh).0, 0);
        // Once the last other reference goes, the next sweep frees it too, zeroed.
        drop(held);
        let mut n = 0;
        let reused = loop {
            let r = rule_at(alloc.take(&c));
            if r.cell == 0 {
                break r;
            }
            n += 1;
            assert!(n < 1000, "the held rule's cell was never reused");
            alloc.bury(Arc::new(r));
        };
        assert_eq!(c.read(&reused), (0, 0, 0));
    }
}
