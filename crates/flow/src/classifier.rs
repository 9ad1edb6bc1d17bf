//! The tuple-space classifier: per chain, one subtable per (mask, which ports have
//! ranges), each an open-addressing hash table of masked keys.
//!
//! - **Key width.** Only the 64-bit words of the flow key that some rule's mask touches
//!   are kept (gathered into `[u64; W]`), and the lookup code is monomorphized for W in
//!   {1, 2, 4, 8, 14} (const generics; [`Classifier::width`]). Two words whose touched
//!   bytes are disjoint share one gathered word when that lowers the width (`plan`:
//!   protocol, addresses and destination port, 3 words, are 2). Extraction parses only
//!   the layers the masks read ([`Need`]).
//! - **Early stop and ranking.** Each subtable knows the best (priority, order) it holds.
//!   Subtables are visited in order of their best priority, then of hits
//!   ([`Classifier::rerank`]); the minimum of the
//!   best ranks of the subtables still to visit is kept beside the order, so the lookup
//!   stops as soon as none of them can beat what was found. A packet that matched in the
//!   first subtable of a rule set whose subtables hold one priority each stops there.
//! - **Batches.** [`Classifier::process_batch`] takes up to 32 packets: for each subtable,
//!   the masked keys and hashes of every packet still looking are computed first, then the
//!   table is probed for all of them, so the hash work and the probes' cache misses of
//!   different packets overlap. Only the packets that can still improve are hashed (a
//!   bitmask of the batch), and the hash and filter pass has no branch on
//!   the filter (which packets pass is data): weir-bench flow, 1k rules, 16 masks, hot,
//!   ~128 -> ~88 ns/packet.
//! - **Tables.** A subtable's table (`Store`) is an array of `AtomicU64` slots, each the
//!   key's 32-bit hash (its signature) and the index of an entry (the masked key and its
//!   rules) in an append-only store of write-once cells; probes compare signatures and
//!   read an entry only when one agrees. A one-hash Bloom filter (8 bits a slot) answers
//!   most misses without the slots; the slots of the packets that pass are touched for the
//!   whole batch before any is probed (independent loads the CPU overlaps).
//! - **Exact-match cache** ([`FlowCache`], [`Classifier::process_batch_cached`]): whole
//!   keys (the words the rules read) to their first lookup's rule, per worker, valid for
//!   one published version and count of in-place updates; 4-way buckets. A hit costs
//!   about one subtable's probe, so it pays with many subtables and hot flows only
//!   (weir-bench flow: 1k rules, 16 masks, hot ~124 -> ~45 ns/packet; streaming, every
//!   packet a new flow, it only adds its misses' cost).
//! - **Port ranges** are kept as a check per entry (`Compiled::ranges_hold`) in a
//!   subtable whose mask leaves the ranged port out, not expanded into masks: a range
//!   expands into up to 30 prefix masks per port (900 for a source and destination range),
//!   each a subtable probe; a range check costs two compares on the entries that hash
//!   equal. Entries with equal masked keys share a slot, in rank order.
//! - **Updates** (`insert`, `delete`) are written in place, in safe code, while lookups
//!   go on: a new entry, then one atomic store of its slot (a delete stores a tombstone, or
//!   points the slot at an entry with the shorter rule list). No version is published and
//!   nothing is copied (issue 14's goal: 0.2 µs an update; the copy-on-write segments
//!   published by `Arc` swap that came before took 1.8 µs at 1k rules and 20 µs at 1M).
//!   A new version is published (RCU-style: lookups in flight finish on the version they
//!   took, one lock-protected `Arc` clone per batch) only when the shape changes: a new
//!   subtable or chain, a rule better than its subtable's best rank, a store out of slots
//!   or entries (rebuilt at twice the size: amortized; replaced entries and tombstones
//!   are dropped then), an emptied subtable, new devices or layers. A rule whose mask
//!   touches a word no rule touched before (or a new byte of a packed word) rebuilds the
//!   table at the new width. A flow
//!   cache keys its entries on the version and a count of in-place updates.

use crate::engine::{self, CellAlloc, Counters, Installed, Interner, Outcome, ShardCells, Work};
use crate::key::{
    extract, extract_into_zeroed, ipv4_plain_words, Key, Need, PlainRead, TUPLE_WORDS, WORDS,
};
use crate::rule::{Compiled, Rule, RuleError, RuleSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// Packets per batch.
pub const BATCH: usize = 32;

/// What [`Classifier::footprint`] counts.
#[derive(Debug, Clone, Copy)]
pub struct Footprint {
    pub rules: usize,
    /// One installed rule's bytes (its `Arc`'s counts included, the allocator's not).
    pub rule_bytes: usize,
    /// Distinct action lists and masks the rules share.
    pub action_lists: usize,
    pub masks: usize,
    /// The subtables' tables: slots, filters, entry chunks.
    pub table_bytes: usize,
    /// The counters' tables (every shard's chunks made).
    pub counter_bytes: usize,
}

/// A handle to an installed rule (for `delete`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleId(pub u64);

/// The classifier. Cheap to share between worker threads (`&Classifier` is `Sync`).
pub struct Classifier {
    current: RwLock<Arc<Version>>,
    /// Serializes writers; readers never take it.
    writer: Mutex<Writer>,
    /// When set, the full key width is used whatever the rules read (for measurement).
    full_width: bool,
    /// Every rule's counts, by the rule's cell (`Writer::cells` hands them out).
    counters: Counters,
}

struct Writer {
    next_seq: u64,
    devices: Vec<String>,
    indevs: Vec<String>,
    /// Every installed rule, by seq.
    rules: Installs,
    /// The rules' shared action lists and numbered masks.
    interner: Interner,
    /// The rules' counter cells.
    cells: CellAlloc,
    /// The published version (only writers publish, under the writer's lock): the writer
    /// reads it without the `RwLock` and the `Arc` clone a snapshot costs (four locked
    /// operations an update).
    current: Arc<Version>,
    /// Per key word, the bits `current`'s lanes gather (`cover`), set when it is published:
    /// an insert tests its mask against it (`Writer::covers`) instead of walking every lane
    /// for every word (~160 instructions of ~2,300 an insert in callgrind: flow-insert-1).
    /// Kept here, not in the tables: 112 more bytes there moved what lookups read (the
    /// 16-mask row 4% slower per pair).
    cover: [u64; WORDS],
}

/// The installed rules in seq order: a vector with holes, not a `BTreeMap`. Seqs only
/// grow, so an insert is a push (the map's search down to its last leaf and node insert
/// were ~10% of an insert in `perf`); a delete finds its seq by binary search and leaves a
/// hole, and the holes go once they are half the vector (amortized: each compaction
/// follows as many deletes as it keeps rules).
#[derive(Default)]
struct Installs {
    v: Vec<(u64, Option<Arc<Installed>>)>,
    live: usize,
}

impl Installs {
    /// Add the rule `seq`, above every seq held.
    fn push(&mut self, seq: u64, r: Arc<Installed>) {
        debug_assert!(self.v.last().is_none_or(|l| l.0 < seq));
        self.v.push((seq, Some(r)));
        self.live += 1;
    }

    fn remove(&mut self, seq: u64) -> Option<Arc<Installed>> {
        // Seqs are distinct and ascending, so `seq` sits at most `seq - first` places in,
        // exactly there until a compaction: tried first, the binary search over the places
        // before it after (~110 instructions of a delete's ~500 over 100k rules).
        let first = self.v.first()?.0;
        let at = usize::try_from(seq.checked_sub(first)?).unwrap_or(usize::MAX);
        let i = match self.v.get(at) {
            Some(e) if e.0 == seq => at,
            _ => self.v[..at.min(self.v.len())].binary_search_by_key(&seq, |e| e.0).ok()?,
        };
        let r = self.v[i].1.take()?;
        self.live -= 1;
        if self.v.len() >= 64 && self.live * 2 < self.v.len() {
            self.v.retain(|e| e.1.is_some());
        }
        Some(r)
    }

    fn len(&self) -> usize {
        self.live
    }

    /// The rules in seq order.
    fn values(&self) -> impl Iterator<Item = &Arc<Installed>> {
        self.v.iter().filter_map(|e| e.1.as_ref())
    }
}

impl Writer {
    /// Whether every word `mask` touches is gathered by the published version's lanes,
    /// whole (within its lanes' bytes). The uncovered bits of every word ORed, no branch a
    /// word: the short-circuit test a word was 50 instructions of every insert
    /// (flow-insert-5).
    #[inline]
    fn covers(&self, mask: &Key) -> bool {
        (0..WORDS).fold(0, |acc, i| acc | (mask.word(i) & !self.cover[i])) == 0
    }

    /// A rule's masked key and mask, again (rules keep no copy: `indev` ids are stable).
    fn compile(&self, rule: &Rule) -> Compiled {
        let indevs = &self.indevs;
        let mut id = |name: &str| indevs.iter().position(|d| d == name).map_or(0, |i| i as u32 + 1);
        rule.compile(&mut id)
    }
}

/// One published version of the tables.
pub struct Version {
    /// Unique among versions (a flow cache's entries belong to one).
    id: u64,
    /// Updates made in place since (shared by every version of a classifier): a flow
    /// cache's entries belong to one count too.
    edits: Arc<AtomicU64>,
    /// The key words a flow cache keys on (the first `nwords`: see `words_of`).
    words: [usize; WORDS],
    nwords: usize,
    tables: AnyTables,
    need: Need,
    devices: Arc<Vec<String>>,
    indevs: Arc<Vec<String>>,
}

enum AnyTables {
    W1(Tables<1>),
    W2(Tables<2>),
    W4(Tables<4>),
    W8(Tables<8>),
    W14(Tables<14>),
}

macro_rules! dispatch {
    ($t:expr, $x:ident => $body:expr) => {
        match $t {
            AnyTables::W1($x) => $body,
            AnyTables::W2($x) => $body,
            AnyTables::W4($x) => $body,
            AnyTables::W8($x) => $body,
            AnyTables::W14($x) => $body,
        }
    };
}

#[derive(Clone)]
struct Tables<const W: usize> {
    /// Where each gathered word comes from (unused trailing lanes read nothing: zero).
    lanes: [Lane; W],
    /// Per lane, its masks of key words 0, 4 and 9 (`key::TUPLE_WORDS`), when the lanes
    /// read those words only and of the common frame's optional fields the ports only (IPv4
    /// 5-tuple rules): the batch paths then extract only those words
    /// (`ipv4_plain_words::<PORTS>`) and take each lane as three ANDs of them. From the
    /// lanes (`tuple_masks`), so a rule reading another field, which needs another plan
    /// (`covers`), gets the full extraction with the new tables. Boxed: read once a batch,
    /// and none at the widths over 4 (every lane a word or two of its own: 5 lanes or
    /// more read more than 3 words), whose tables it would make 40% bigger.
    tuple: Option<Box<[[u64; 3]; W]>>,
    chains: Vec<(u32, ChainT<W>)>,
}

#[derive(Clone)]
struct ChainT<const W: usize> {
    subtables: Vec<Arc<Subtable<W>>>,
    suffix_best: Vec<(u32, u64)>,
    /// The word pairs of `hash_words` whose mask differs between subtables (bit p: pair
    /// p), and the mask of the others (the first subtable's): a lookup hashes the others
    /// once a packet and only these once a subtable visit (issue 14: the 16 masks of
    /// weir-bench flow differ only in the addresses' pair).
    vary: u32,
    common: [u64; W],
    /// The chain's prefilters (at most 64) and, per subtable, the bits of those it needs
    /// (`needs[i]` bit f: subtable i's mask has `pre[f]`'s mask at its half-word). None
    /// while the candidate tables answer (`cand_on`): neither kept nor written then.
    pre: Vec<Arc<PreFilter>>,
    needs: Vec<u64>,
    /// The candidate tables (chains of 2 to 64 subtables), which the lookup reads in place
    /// of the prefilters when they are selective (`CandTables::selective`).
    cand: Option<Arc<CandTables>>,
    /// `cand`'s `selective`, here: an insert into a chain whose tables are not read (100k
    /// rules over 16 masks) tests it without a load of the tables' own line.
    cand_on: bool,
}

/// A chain's Bloom filter over one half-word of the gathered key under one mask of it, as
/// OVS skips subtables with its prefix tries (issue 14): every live entry of every subtable
/// whose mask has `mask` at half-word `half` has its masked half's bit set, so a packet whose
/// bit is clear matches no such subtable, and the lookup skips them without hashing the
/// packet's key for each. A chain's prefilters are on the half-words whose mask differs
/// between its subtables (weir-bench flow's 16 masks: the source and the destination address
/// under /32, /24, /16 and /8); a packet visits every subtable of better priority than its
/// match (8.5 of 16 there), and most of them hold no rule with the packet's prefixes.
/// Shared by the versions that keep it; the writer sets an entry's bit before the entry's
/// slot is stored; deletes leave bits set (false positives only) until it is rebuilt.
struct PreFilter {
    /// Gathered word * 2, + 1 for its high 32 bits.
    half: u8,
    mask: u32,
    /// A power of two words.
    bits: Box<[AtomicU64]>,
    /// Values added (the writer's): `ChainT::refresh` rebuilds a filter once it is twice as
    /// full as it was sized for.
    added: AtomicUsize,
}

impl PreFilter {
    /// Bits a value, at the size: ~6% false positives with one hash.
    const BITS_PER_VALUE: usize = 16;

    fn new(half: u8, mask: u32, values: usize) -> PreFilter {
        let n = (values.max(1) * Self::BITS_PER_VALUE).next_power_of_two().clamp(1 << 11, 1 << 24);
        PreFilter {
            half,
            mask,
            bits: (0..n / 64).map(|_| AtomicU64::new(0)).collect(),
            added: AtomicUsize::new(0),
        }
    }

    /// Whether it is twice as full as it was sized for (the writer's).
    fn overfull(&self) -> bool {
        self.added.load(Ordering::Relaxed) * Self::BITS_PER_VALUE > self.bits.len() * 64 * 2
    }

    /// A key's word and bit in the filter (`bit_of`).
    #[inline(always)]
    fn bit<const W: usize>(&self, k: &[u64; W]) -> (usize, u32) {
        let w = k.get(usize::from(self.half / 2)).copied().unwrap_or(0);
        let words = self.bits.len().wrapping_sub(1);
        Self::bit_of(w >> (32 * u32::from(self.half & 1)), self.mask, words)
    }

    /// The word and the bit in it of a half-word `v` (in the low 32 bits) under `mask`, in
    /// a filter of `words + 1` words (a power of two): one multiply, the word from the
    /// product's bits 32 up and the bit from its top 6, both by constant shifts (the bit
    /// number taken from the top bits by the filter's size was a shift by a run-time
    /// count, through `cl`, a packet and filter, besides the one testing the bit).
    #[inline(always)]
    fn bit_of(v: u64, mask: u32, words: usize) -> (usize, u32) {
        let v = v as u32 & mask;
        let h = (u64::from(v) ^ u64::from(mask) << 32).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        ((h >> 32) as usize & words, (h >> 58) as u32)
    }

    /// Whether each of a batch's half-words `v` (at most 32: the answers of packets past
    /// 32 would be shifted out; the filter's half of each
    /// packet's key: `halves_of`) may be in the filter, packet `i`'s answer as bit `i`: the
    /// filter's shape read once, not once a packet, and no branch on a packet (issue 14:
    /// packet after packet, the 8 filters' shapes and a scatter loop of data-dependent
    /// length were a quarter of a 16-mask lookup in perf). A packet's bits per filter, not
    /// a filter's bits per packet: a subtable's packets are then the AND of its filters'
    /// words (a compare a packet a subtable was ~15% of a 16-mask lookup_batch in perf,
    /// bench/records/2026-11-30-flow-speed-17.txt). The half-words come in as one array a
    /// half for all the filters on it, and the answers are shifted in from the last packet
    /// down: no half-word picked out of the key and no variable shift to place a bit, per
    /// filter and packet (28 instructions a packet and filter were 230 of a 16-mask
    /// packet's 607 in callgrind, bench/records/2026-12-01-flow-speed-21.txt).
    #[inline(always)]
    fn test_halves(&self, v: &[u32]) -> u32 {
        let (mask, bits) = (self.mask, &self.bits[..]);
        // A power of two (`new`): every word index `bit_of` gives is in range; the test
        // only spares the compiler a bounds check a packet.
        let Some(words) = bits.len().checked_sub(1) else { return 0 };
        let mut present = 0u32;
        for &x in v.iter().rev() {
            let (at, bit) = Self::bit_of(u64::from(x), mask, words);
            let w = bits.get(at).map_or(0, |w| w.load(Ordering::Relaxed));
            present = present << 1 | (w >> bit) as u32 & 1;
        }
        present
    }

    /// Add a key's half (the writer only).
    fn add<const W: usize>(&self, k: &[u64; W]) {
        let (at, bit) = self.bit(k);
        if let Some(w) = self.bits.get(at) {
            set_bits(w, 1 << bit);
        }
        add(&self.added, 1);
    }
}

/// Half-word `h` of gathered words `k` (see `PreFilter::half`).
#[inline]
fn half_of<const W: usize>(k: &[u64; W], h: usize) -> u32 {
    (k[h / 2] >> (32 * (h & 1))) as u32
}

/// Half-word `h` (see `PreFilter::half`) of each of a batch's gathered keys `g`, into
/// `out` (read by `PreFilter::test_halves`; the rest of `out` is left as it was).
#[inline(always)]
fn halves_of<const W: usize>(g: &[[u64; W]], h: u8, out: &mut [u32; BATCH]) {
    let (word, odd) = (usize::from(h / 2), 32 * u32::from(h & 1));
    for (o, k) in out.iter_mut().zip(g) {
        *o = (k.get(word).copied().unwrap_or(0) >> odd) as u32;
    }
}

/// Index bits of a candidate table ([`CandTables`]): 1,024 words a half, 8 KB.
const CAND_BITS: u32 = 10;

/// A subtable whose mask fixes fewer of a half's index bits than this is a candidate for
/// every value of that half (its prefix would set 2^(CAND_BITS - fixed) words an insert,
/// over 128, and filter little).
const CAND_MIN_FIXED: u32 = 3;

/// Past this many expected false candidates a packet (the tables' fill at their build), a
/// chain's lookup uses its prefilters instead: the tables' index bits are the prefixes'
/// first 10, which many rules a subtable fill (weir-bench flow at 100k rules: every word).
const CAND_MAX_EXPECTED: f64 = 2.0;

/// A chain's candidate tables (chains of 2 to 64 subtables): for each half-word where the
/// subtables' masks differ (at most 4), a table of u64 words indexed by the half's first
/// `CAND_BITS` bits (the top bits, or the top bits of its bytes swapped: key fields are
/// big-endian bytes in a little-endian word, so an address prefix is the low bytes), bit
/// s of a word set when subtable s holds a key whose half agrees with the index on the
/// bits its mask fixes. A packet's candidate subtables are the AND of its words over the
/// halves: two loads and an AND a packet where the prefilters were a Bloom test a
/// (half, mask) and an AND of them a subtable (issue 14, flow-speed-26 section 7). A
/// subtable that fixes fewer than `CAND_MIN_FIXED` index bits of a half has its bit in
/// every word of it. Shared by the versions whose chain lists the same subtables (`ids`);
/// an insert sets its key's bits before the key's slot is stored (as `note_pre`), so a
/// lookup that finds the slot finds the bits; deletes leave bits set (false candidates
/// only) until the chain's list changes or its keys double, when `ChainT::refresh`
/// builds the tables again. A chain keeps one of the two states its lookups read: these
/// tables when selective, else the prefilters (`ChainT::refresh`).
struct CandTables {
    /// Per subtable, in the chain's order, its (mask number, range flags): bit s's.
    ids: Vec<(u32, bool, bool)>,
    /// None when not selective (dropped at the build: only the verdict is kept).
    halves: Vec<CandHalf>,
    /// Live keys in the chain at the build.
    keys: usize,
    /// Whether the lookup uses the tables (`CAND_MAX_EXPECTED`; copied to
    /// `ChainT::cand_on`); otherwise the prefilters answer, the tables hold no words and
    /// inserts write none, until the next build judges them again.
    selective: bool,
}

struct CandHalf {
    /// Gathered word * 2, + 1 for its high 32 bits (as `PreFilter::half`).
    half: u8,
    /// The index is the top bits of the half's bytes swapped.
    swap: bool,
    /// Per subtable, the index bits its mask fixes (`None`: fewer than `CAND_MIN_FIXED`,
    /// set in every word).
    fixed: Vec<Option<u32>>,
    words: Box<[AtomicU64; 1 << CAND_BITS]>,
}

impl CandHalf {
    /// The index of half value `v`.
    #[inline(always)]
    fn index(&self, v: u32) -> usize {
        let v = if self.swap { v.swap_bytes() } else { v };
        (v >> (32 - CAND_BITS)) as usize
    }

    /// `out[i] &=` the word of packet `g[i]`'s half (word `w < W`, bits `shift..`), the
    /// index's byte order (`swap`) a constant of the loop.
    #[inline(always)]
    fn and_into<const W: usize, const SWAP: bool>(
        &self,
        g: &[[u64; W]],
        w: usize,
        shift: u32,
        out: &mut [u64],
    ) {
        for (o, k) in out.iter_mut().zip(g) {
            let v = (k[w] >> shift) as u32;
            let v = if SWAP { v.swap_bytes() } else { v };
            *o &= self.words[(v >> (32 - CAND_BITS)) as usize].load(Ordering::Relaxed);
        }
    }

    /// Set subtable `s`'s bit in the words of masked key `k` (the writer only).
    fn add<const W: usize>(&self, s: usize, k: &[u64; W]) {
        let Some(top) = self.fixed.get(s).copied().flatten() else { return };
        let kt = self.index(half_of(k, usize::from(self.half))) as u32 & top;
        let free = !top & ((1 << CAND_BITS) - 1);
        // Every index that agrees with `kt` on `top`: the subsets of `free`, in order.
        let mut sub = 0u32;
        loop {
            if let Some(w) = self.words.get((kt | sub) as usize) {
                set_bits(w, 1 << s);
            }
            if sub == free {
                break;
            }
            sub = ((sub | !free).wrapping_add(1)) & free;
        }
    }
}

impl CandTables {
    /// The tables of `subtables` (`None`: more than 64 or fewer than 2, or no half where
    /// their masks differ and some mask fixes index bits).
    fn build<const W: usize>(subtables: &[Arc<Subtable<W>>]) -> Option<CandTables> {
        if !(2..=64).contains(&subtables.len()) {
            return None;
        }
        let first = subtables.first()?;
        let mut halves = Vec::new();
        for h in 0..2 * W {
            if halves.len() == 4 {
                break;
            }
            let m0 = half_of(&first.gmask, h);
            if subtables.iter().all(|s| half_of(&s.gmask, h) == m0) {
                continue;
            }
            let top = |m: u32, swap: bool| {
                let m = if swap { m.swap_bytes() } else { m };
                m >> (32 - CAND_BITS)
            };
            let score = |swap: bool| -> u32 {
                subtables.iter().map(|s| top(half_of(&s.gmask, h), swap).count_ones()).sum()
            };
            let swap = score(true) > score(false);
            let fixed: Vec<Option<u32>> = subtables
                .iter()
                .map(|s| {
                    let t = top(half_of(&s.gmask, h), swap);
                    (t.count_ones() >= CAND_MIN_FIXED).then_some(t)
                })
                .collect();
            if fixed.iter().all(Option::is_none) {
                continue;
            }
            let always: u64 = fixed
                .iter()
                .enumerate()
                .filter(|(_, f)| f.is_none())
                .fold(0, |a, (s, _)| a | 1 << s);
            let words = Box::new(std::array::from_fn(|_| AtomicU64::new(always)));
            halves.push(CandHalf { half: h as u8, swap, fixed, words });
        }
        if halves.is_empty() {
            return None;
        }
        // Subtable by subtable: its keys' bits, then its expected false candidates a packet
        // of uniform halves (the product over the halves of the share of words with its
        // bit, final once its own keys are in: no other subtable sets it), summed. Past
        // `CAND_MAX_EXPECTED` the sum can only grow: the build stops there and the words
        // are dropped, only the verdict kept (weir-bench flow at 100k rules over 16 masks:
        // each subtable's keys set nearly every word, so the build stops after the third
        // one's; it used to set all 100k keys' bits and keep 16 KB of words nothing read).
        let mut expected = 0.0f64;
        for (s, st) in subtables.iter().enumerate() {
            for e in st.store.live_entries() {
                let k = and(&e.key, &st.gmask);
                for t in &halves {
                    t.add(s, &k);
                }
            }
            let share: f64 = halves
                .iter()
                .map(|t| {
                    let set = t.words.iter().filter(|w| w.load(Ordering::Relaxed) >> s & 1 != 0);
                    set.count() as f64 / f64::from(1u32 << CAND_BITS)
                })
                .product();
            expected += share;
            if expected > CAND_MAX_EXPECTED {
                halves = Vec::new();
                break;
            }
        }
        Some(CandTables {
            ids: subtables.iter().map(|s| (s.mask, s.src_range, s.dst_range)).collect(),
            selective: !halves.is_empty(),
            halves,
            keys: subtables.iter().map(|s| s.store.live.load(Ordering::Relaxed)).sum(),
        })
    }

    /// Set the bits of masked key `k` of subtable `s` (`st`; the writer only, before the
    /// key's slot is stored). Nothing when `s` is not the tables' subtable `s` (a chain
    /// whose list changed since: its refresh builds new tables), or when the tables are not
    /// selective.
    fn add<const W: usize>(&self, s: usize, st: &Subtable<W>, k: &[u64; W]) {
        // Tables the lookup does not read are not kept either: their next build judges
        // them again from the stores (weir-bench flow --updates 100000: 1,931 -> 1,836
        // instructions an insert, base 1,829).
        if !self.selective || self.ids.get(s) != Some(&(st.mask, st.src_range, st.dst_range)) {
            return;
        }
        let k = and(k, &st.gmask);
        for t in &self.halves {
            t.add(s, &k);
        }
    }

    /// Packet `k`'s candidate subtables (gathered words), bit s for the chain's subtable s:
    /// the AND of its words over the halves. The lookups take them a batch at a time
    /// (`batch_words`); this is the definition the tests hold that to.
    #[cfg(test)]
    fn word_of<const W: usize>(&self, k: &[u64; W]) -> u64 {
        let mut c = !0u64;
        for t in &self.halves {
            let v = (k.get(usize::from(t.half / 2)).copied().unwrap_or(0)
                >> (32 * u32::from(t.half & 1))) as u32;
            c &= t.words[t.index(v)].load(Ordering::Relaxed);
        }
        c
    }

    /// `word_of` of each of `g`'s packets ANDed into `out` (all ones: the words
    /// themselves), half by half over the batch: the half's word, shift and byte order
    /// are the loop's constants, not loaded and tested again a packet (issue 14: the
    /// per-packet loop over the halves was 34 of 1000:16's ~196 lookup instructions a
    /// packet).
    #[inline(always)]
    fn batch_words<const W: usize>(&self, g: &[[u64; W]], out: &mut [u64]) {
        for t in &self.halves {
            let w = usize::from(t.half / 2);
            if w >= W {
                // A half past the key's words reads 0 (`build` makes none).
                let c = t.words[t.index(0)].load(Ordering::Relaxed);
                out.iter_mut().for_each(|o| *o &= c);
                continue;
            }
            let shift = 32 * u32::from(t.half & 1);
            if t.swap {
                t.and_into::<W, true>(g, w, shift, out);
            } else {
                t.and_into::<W, false>(g, w, shift, out);
            }
        }
    }
}

/// A subtable's hit count, per counting thread (the counters' shards, see
/// [`engine::Counters`]), each shard on a cache line of its own: the workers write it once
/// a batch, and a shared count made each worker's write evict the line from the other's
/// cache (on the line of the table's slot and filter pointers, every read of those too). Only a
/// ranking heuristic, so a load and a store even on the shared shard (an add lost to a
/// race costs nothing).
#[derive(Default)]
struct Hits([Line; engine::COUNTER_SHARDS + 1]);

#[repr(align(64))]
#[derive(Default)]
struct Line(AtomicU64);

impl Hits {
    #[inline]
    fn add(&self, shard: usize, n: u64) {
        let l = &self.0[shard.min(engine::COUNTER_SHARDS)].0;
        l.store(l.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }
    fn get(&self) -> u64 {
        self.0.iter().fold(0u64, |a, l| a.wrapping_add(l.0.load(Ordering::Relaxed)))
    }
}

struct Subtable<const W: usize> {
    /// The mask, gathered (the subtable's identity with the range flags).
    gmask: [u64; W],
    src_range: bool,
    dst_range: bool,
    /// The number of the mask every rule here has ([`Interner::mask_id`]): an insert that
    /// finds its subtable by the gathered mask takes the number from it, and does not
    /// hash its 112-byte mask into the interner (flow-insert-3).
    mask: u32,
    /// No rule here ranks better (a lower bound: a delete leaves it as it was, which
    /// only visits the subtable where a fresh bound would skip it).
    best: (u32, u64),
    /// The hash table, shared between versions and written in place by updates.
    store: Arc<Store<W>>,
}

/// A slot: `EMPTY`, `TOMB` (a deleted key; probes go on past it), or the key's hash
/// (its signature: the top bit always set) in the low half and its entry's index in the
/// high half (`slot_value`): a probe compares the signature with one 32-bit compare of
/// the slot's value, no shift first (issue 14: 1.48 compares a packet at 1000:1). The
/// signature's top bit keeps a live slot apart from both markers whatever its index, so
/// the index is stored as it is (an index + 1 cost a decrement a match).
const EMPTY: u64 = 0;
const TOMB: u64 = 1;

/// A slot's value for entry `i` of a key that hashes to `hash`.
#[inline(always)]
fn slot_value(hash: u32, i: usize) -> u64 {
    (i as u64) << 32 | u64::from(hash)
}

/// The entry a live slot's value points to.
#[inline(always)]
fn slot_entry(v: u64) -> usize {
    (v >> 32) as usize
}

/// Slots in use (live and tombstones) at most this fraction of the table (1/2): a miss
/// probes ~2.5 slots, in one cache line of 8.
const MAX_USED_SHIFT: u32 = 1;

/// One masked key and its rules, best rank first. Written once, never changed: an
/// update writes a new entry and points the slot at it.
struct Entry<const W: usize> {
    key: [u64; W],
    rules: SlotRules,
}

/// A subtable's open-addressing table, updated in place while lookups read it, in safe
/// code: the slots are `AtomicU64`s (one store publishes an insert or a delete), the
/// entries they point to an append-only store of write-once cells (`OnceLock`) in chunks
/// allocated on first use. Only the classifier's writer (under its lock) writes; an
/// update that finds no free slot or entry builds a bigger store and publishes it with a
/// new version (amortized: the size doubles). Replaced entries stay until that rebuild.
struct Store<const W: usize> {
    /// Power-of-two slots.
    slots: Box<[AtomicU64]>,
    /// A one-hash Bloom filter of the slots' hashes (8 bits a slot, from hash bits the
    /// slot index does not use): most probes of a subtable miss, and this answers them
    /// without the slots. Deletes leave bits set (false positives only) until a rebuild.
    filter: Box<[AtomicU64]>,
    chunks: Box<[OnceLock<Chunk<W>>]>,
    /// The ranking heuristic's hit count (shared by the versions sharing the store).
    hits: Hits,
    /// Writer-only bookkeeping (atomics only so that the store is `Sync`): entries
    /// written, slots not empty, live keys, rules.
    next: AtomicUsize,
    used: AtomicUsize,
    live: AtomicUsize,
    rules: AtomicUsize,
    /// Holds entries written in place whose bits its chain's prefilters may lack: a
    /// lookup visits it whatever they say, until `ChainT::refresh_pre` sets the bits (an
    /// in-place insert writes no prefilter: their two words were 15-25% of an insert at
    /// 100k rules, bench/records/2026-11-30-flow-speed-13.txt).
    unfiltered: AtomicBool,
}

/// A chunk of entry cells, allocated when its first entry is written. A fixed size, so a
/// lookup finds an entry's cell with a constant shift and mask and no bounds check within
/// the chunk, through a thin pointer (a chunk of the store's own size, up to 1,024 cells,
/// was a fat one: ~6 instructions a lookup more, issue 14). 64 cells (2.5 KB at width 2):
/// a small store allocates little, and 1M keys need 16k chunks (a 16-byte cell each in
/// the chunk table).
type Chunk<const W: usize> = Box<[OnceLock<Entry<W>>; CHUNK]>;

/// Entry cells a chunk.
const CHUNK: usize = 64;

/// A new chunk of empty cells.
fn new_chunk<const W: usize>() -> Chunk<W> {
    Box::new(std::array::from_fn(|_| OnceLock::new()))
}

/// What a delete did.
enum Removed {
    NotHere,
    Done,
    /// No entry left for the slot's shorter rule list: rebuild.
    NoRoom,
}

impl<const W: usize> Store<W> {
    /// A store with room for `keys` live keys before it must grow.
    fn new(keys: usize) -> Store<W> {
        let n = (keys.max(2) << (MAX_USED_SHIFT + 1)).next_power_of_two();
        let cap = n - n / 4;
        let chunks = cap.div_ceil(CHUNK);
        Store {
            slots: (0..n).map(|_| AtomicU64::new(EMPTY)).collect(),
            filter: (0..(n / 8).max(1)).map(|_| AtomicU64::new(0)).collect(),
            chunks: (0..chunks).map(|_| OnceLock::new()).collect(),
            hits: Hits::default(),
            next: AtomicUsize::new(0),
            used: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            rules: AtomicUsize::new(0),
            unfiltered: AtomicBool::new(false),
        }
    }

    fn capacity(&self) -> usize {
        self.chunks.len() * CHUNK
    }

    fn rule_count(&self) -> usize {
        self.rules.load(Ordering::Relaxed)
    }

    #[inline(always)]
    fn entry(&self, i: usize) -> Option<&Entry<W>> {
        self.probe_view().entry(i)
    }

    #[inline]
    fn filter_bit(&self, hash: u32) -> (usize, u64) {
        let bits = self.filter.len() * 64;
        // The top bit is always set and the low bits pick the slot: mix the middle ones.
        let b = (hash.wrapping_mul(0x9e37_79b1) >> 7) as usize & (bits - 1);
        (b / 64, 1u64 << (b % 64))
    }

    /// The filter's bit-index mask and words, read once per subtable visit.
    #[inline]
    fn filter_shape(&self) -> (usize, &[AtomicU64]) {
        (self.filter.len() * 64 - 1, &self.filter)
    }

    /// `may_hold` with the filter's shape read ahead (a batch tests 32 hashes).
    #[inline]
    fn filter_test(&self, hash: u32, bits: usize, words: &[AtomicU64]) -> bool {
        let b = (hash.wrapping_mul(0x9e37_79b1) >> 7) as usize & bits;
        words.get(b / 64).is_some_and(|w| w.load(Ordering::Relaxed) >> (b % 64) & 1 != 0)
    }

    #[inline]
    fn may_hold(&self, hash: u32) -> bool {
        let (w, m) = self.filter_bit(hash);
        self.filter[w].load(Ordering::Relaxed) & m != 0
    }

    /// The entry holding `key` (a lookup's probe; see [`Probe::find`]).
    #[inline(always)]
    fn find(&self, key: &[u64; W], hash: u32) -> Option<&Entry<W>> {
        self.probe_view().find(key, hash)
    }

    /// The store's shape as lookups read it ([`Probe`]).
    #[inline(always)]
    fn probe_view(&self) -> Probe<'_, W> {
        Probe { slots: &self.slots, chunks: &self.chunks }
    }

    /// The first slot on `hash`'s probe sequence whose entry `wanted` accepts (among the
    /// entries whose key hashes to `hash`), and that entry.
    #[inline]
    fn probe(&self, hash: u32, wanted: impl Fn(&Entry<W>) -> bool) -> Option<(usize, &Entry<W>)> {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        // At most half the slots are in use: the loop meets an empty one.
        loop {
            let v = self.slots[i].load(Ordering::Acquire);
            if v == EMPTY {
                return None;
            }
            if v as u32 == hash {
                if let Some(e) = self.entry(slot_entry(v)) {
                    if wanted(e) {
                        return Some((i, e));
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Write an entry; its slot value, or `None` when the store is full.
    fn push(&self, key: [u64; W], hash: u32, rules: SlotRules) -> Option<u64> {
        let i = self.room()?;
        Some(self.write(i, key, hash, rules))
    }

    /// Write an entry at `i`, the index `room` gave (its checks not made twice: an
    /// insert asks `room` before its probe, flow-insert-4); its slot value. Inlined into
    /// `try_insert`: the call (the key and the rules moved into it, its frame) was 19 of an
    /// insert's ~1,900 instructions (flow-insert-5; a plain `#[inline]` was not taken).
    #[inline(always)]
    fn write(&self, i: usize, key: [u64; W], hash: u32, rules: SlotRules) -> u64 {
        let chunk = self.chunks[i / CHUNK].get_or_init(new_chunk);
        // A fresh index: the cell is empty, this sets it.
        let _ = chunk[i % CHUNK].set(Entry { key, rules });
        self.next.store(i + 1, Ordering::Relaxed);
        slot_value(hash, i)
    }

    /// The index of the next entry, or `None` when the store has no room for one.
    #[inline]
    fn room(&self) -> Option<usize> {
        let i = self.next.load(Ordering::Relaxed);
        (i < self.capacity() && i < u32::MAX as usize - 1).then_some(i)
    }

    /// Add a rule in place (the writer only); the rule back when there is no room
    /// (rebuild). The rule is moved in, not cloned: an `Arc` clone and the caller's drop
    /// were two locked operations an insert.
    fn try_insert(
        &self,
        key: [u64; W],
        hash: u32,
        rule: Arc<Installed>,
    ) -> Result<(), Arc<Installed>> {
        let Some(fresh) = self.room() else { return Err(rule) };
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        let mut free = None;
        loop {
            let v = self.slots[i].load(Ordering::Relaxed);
            if v == EMPTY {
                break;
            }
            if v == TOMB {
                free.get_or_insert(i);
            } else if v as u32 == hash {
                if let Some(e) = self.entry(slot_entry(v)) {
                    if same(&e.key, &key) {
                        // More rules for a known key: a new entry with the longer list.
                        let mut list: Vec<_> = e.rules.iter().cloned().collect();
                        let at = list.partition_point(|r| r.rank() < rule.rank());
                        list.insert(at, rule);
                        let nv = self.write(fresh, key, hash, SlotRules::of(list));
                        self.slots[i].store(nv, Ordering::Release);
                        add(&self.rules, 1);
                        return Ok(());
                    }
                }
            }
            i = (i + 1) & mask;
        }
        let reuse = free.is_some();
        if !reuse && (self.used.load(Ordering::Relaxed) + 1) << MAX_USED_SHIFT > self.slots.len() {
            return Err(rule);
        }
        let nv = self.write(fresh, key, hash, SlotRules::one(rule));
        let (w, m) = self.filter_bit(hash);
        set_bits(&self.filter[w], m);
        self.slots[free.unwrap_or(i)].store(nv, Ordering::Release);
        if !reuse {
            add(&self.used, 1);
        }
        add(&self.live, 1);
        add(&self.rules, 1);
        Ok(())
    }

    /// The slot holding the rule `seq` whose key hashes to `hash`, and its entry (a
    /// delete's search: rules keep their key's hash, not the key).
    fn find_rule(&self, hash: u32, seq: u64) -> Option<(usize, &Entry<W>)> {
        self.probe(hash, |e| e.rules.iter().any(|r| r.seq == seq))
    }

    /// Remove a rule in place (the writer only).
    fn remove(&self, hash: u32, seq: u64) -> Removed {
        let Some((i, e)) = self.find_rule(hash, seq) else { return Removed::NotHere };
        let key = &e.key;
        let Some(at) = e.rules.iter().position(|r| r.seq == seq) else { return Removed::NotHere };
        if e.rules.len() == 1 {
            // A tombstone, not a backward shift: a lookup probing past this slot while it
            // changes must still find the keys after it.
            self.slots[i].store(TOMB, Ordering::Release);
            sub(&self.live, 1);
        } else {
            let mut list: Vec<_> = e.rules.iter().cloned().collect();
            list.remove(at);
            let Some(nv) = self.push(*key, hash, SlotRules::of(list)) else {
                return Removed::NoRoom;
            };
            self.slots[i].store(nv, Ordering::Release);
        }
        sub(&self.rules, 1);
        Removed::Done
    }

    /// The live entries.
    fn live_entries(&self) -> impl Iterator<Item = &Entry<W>> {
        self.slots.iter().filter_map(|s| {
            let v = s.load(Ordering::Acquire);
            if v == EMPTY || v == TOMB {
                return None;
            }
            self.entry(slot_entry(v))
        })
    }

    /// A new store of the live entries, sized for `extra` more keys, with the hit count
    /// carried over.
    fn rebuilt(&self, extra: usize) -> Store<W> {
        let live = self.live.load(Ordering::Relaxed);
        let s = Store::new(live + extra);
        s.hits.0[0].0.store(self.hits.get(), Ordering::Relaxed);
        for e in self.live_entries() {
            s.put(e.key, e.rules.clone());
        }
        // The same entries: the prefilters lack the same bits.
        s.unfiltered.store(self.unfiltered.load(Ordering::Relaxed), Ordering::Relaxed);
        s
    }

    /// Put a whole entry into a fresh store (a rebuild: the key is not there yet).
    fn put(&self, key: [u64; W], rules: SlotRules) {
        let hash = hash_words(&key);
        let n = rules.len();
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        while self.slots[i].load(Ordering::Relaxed) != EMPTY {
            i = (i + 1) & mask;
        }
        // Sized for every live key: room for each.
        if let Some(nv) = self.push(key, hash, rules) {
            let (w, m) = self.filter_bit(hash);
            set_bits(&self.filter[w], m);
            self.slots[i].store(nv, Ordering::Release);
            add(&self.used, 1);
            add(&self.live, 1);
            add(&self.rules, n);
        }
    }

    /// The best rank held.
    fn best(&self) -> (u32, u64) {
        self.live_entries().map(|e| e.rules.first.rank()).min().unwrap_or((u32::MAX, u64::MAX))
    }

    /// Bytes of the slots, filter and entry chunks.
    fn bytes(&self) -> usize {
        let chunks = self.chunks.iter().filter(|c| c.get().is_some()).count();
        self.slots.len() * 8
            + self.filter.len() * 8
            + chunks * CHUNK * std::mem::size_of::<OnceLock<Entry<W>>>()
            + self
                .live_entries()
                .map(|e| match &e.rules.rest {
                    Some(v) => 16 + v.len() * 8,
                    None => 0,
                })
                .sum::<usize>()
    }
}

/// A store's shape as a lookup reads it, taken once per subtable visit: the slot and
/// chunk arrays' addresses and lengths and the chunk geometry, copied out of the store so
/// they stay in registers (the store holds atomics, so the compiler reloaded each of them
/// after every slot's and cell's atomic load: ~8 instructions a probe, issue 14).
#[derive(Clone, Copy)]
struct Probe<'a, const W: usize> {
    slots: &'a [AtomicU64],
    chunks: &'a [OnceLock<Chunk<W>>],
}

impl<'a, const W: usize> Probe<'a, W> {
    /// The same probe with slots never none (a store has at least 8; were it to have none,
    /// one empty slot stands in), so that a home slot, the hash under the slots' length - 1,
    /// is known in bounds: no bounds check a probe (issue 14: two instructions a packet at
    /// one mask, where it is taken once a batch; not per subtable visit, where its own
    /// test would cost more).
    #[inline(always)]
    fn never_empty(self) -> Probe<'a, W> {
        static NO_SLOTS: [AtomicU64; 1] = [AtomicU64::new(EMPTY)];
        let slots = if self.slots.is_empty() { &NO_SLOTS[..] } else { self.slots };
        Probe { slots, chunks: self.chunks }
    }

    #[inline(always)]
    fn entry(self, i: usize) -> Option<&'a Entry<W>> {
        self.chunks.get(i / CHUNK)?.get()?[i % CHUNK].get()
    }

    /// The home slot's value (loaded ahead of the probes: see `lookup_batch`).
    #[inline(always)]
    fn touch(self, hash: u32) -> u64 {
        let mask = self.slots.len().wrapping_sub(1);
        self.slots.get(hash as usize & mask).map_or(EMPTY, |s| s.load(Ordering::Relaxed))
    }

    /// The entry holding `key`: `Store::probe`'s walk with the store's shape in
    /// registers, and no bounds check on a slot (the mask is the slots' length - 1).
    #[inline(always)]
    fn find(self, key: &[u64; W], hash: u32) -> Option<&'a Entry<W>> {
        let slots = self.slots;
        let mask = slots.len().wrapping_sub(1);
        let mut i = hash as usize & mask;
        // At most half the slots are in use: the loop meets an empty one.
        loop {
            let v = slots.get(i).map_or(EMPTY, |s| s.load(Ordering::Acquire));
            if v == EMPTY {
                return None;
            }
            if v as u32 == hash {
                if let Some(e) = self.entry(slot_entry(v)) {
                    if same(&e.key, key) {
                        return Some(e);
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// [`Probe::find`] for a path whose packets mostly match (one mask: `process_one`).
    /// The home slot and the next are loaded together and the one whose signature agrees
    /// is picked by data, not by a branch (the home slot's when both do): at the store's
    /// fullest (slots half used) about half the hits sit one slot past their home, and
    /// `find`'s loop exit there was a branch the CPU could not predict (1.48 signature
    /// compares a packet at 1000:1). A picked entry whose key is the key is the answer;
    /// anything else (neither signature agrees, or the key differs) walks from the home
    /// slot as `find` does, so no answer depends on the pick. The one difference: a
    /// lookup that loads an empty home slot and then, the slot filled meanwhile by an
    /// insert, the key's entry one slot on, finds it (`find` would stop at the empty
    /// slot): only while that key is being inserted, which a lookup may see or not.
    #[inline(always)]
    fn find_near(self, key: &[u64; W], hash: u32) -> Option<&'a Entry<W>> {
        let slots = self.slots;
        let mask = slots.len().wrapping_sub(1);
        let i = hash as usize & mask;
        let at = |i: usize| slots.get(i).map_or(EMPTY, |s| s.load(Ordering::Acquire));
        let (home, next) = (at(i), at((i + 1) & mask));
        let v = if home as u32 == hash { home } else { next };
        if v as u32 == hash {
            if let Some(e) = self.entry(slot_entry(v)) {
                if same(&e.key, key) {
                    return Some(e);
                }
            }
        }
        self.find(key, hash)
    }
}

/// A key's rules, best rank first: most masked keys have one rule, held without a list of
/// its own (a list was a 32-byte allocation a rule and one more dependent load a match).
/// The best rule is a field of its own whatever the count, so that a lookup that wants
/// only it (the one-mask batch, most lookups) loads it with no test of which form the list
/// has (issue 14: the enum's tag test and the pointer's address, bench/records/
/// 2026-12-02-flow-speed-38.txt); the same 16 bytes as the enum it replaced (asserted
/// below).
#[derive(Clone)]
struct SlotRules {
    first: Arc<Installed>,
    /// The rules after `first`, best first, when there are any.
    rest: Option<Arc<Vec<Arc<Installed>>>>,
}

impl SlotRules {
    fn one(r: Arc<Installed>) -> SlotRules {
        SlotRules { first: r, rest: None }
    }
    /// The rules after `first`.
    #[inline(always)]
    fn rest(&self) -> &[Arc<Installed>] {
        self.rest.as_deref().map_or(&[], Vec::as_slice)
    }
    /// Every rule, best first.
    fn iter(&self) -> impl Iterator<Item = &Arc<Installed>> {
        std::iter::once(&self.first).chain(self.rest())
    }
    fn len(&self) -> usize {
        1 + self.rest().len()
    }
    /// The rules of `v`, never empty (an insert into a key's list makes two or more, a
    /// delete from one leaves one or more).
    fn of(mut v: Vec<Arc<Installed>>) -> SlotRules {
        let first = v.remove(0);
        // (the list shifted, one slot spare: `Store::bytes` counts its length)
        v.shrink_to_fit();
        SlotRules { first, rest: (!v.is_empty()).then(|| Arc::new(v)) }
    }
    /// The first rule (best first) that `holds`, among those `before` accepts, which are a
    /// prefix of the list (a lookup's bound: the rank to beat). The one walk of every
    /// lookup that wants more than `first`: `first` is tested before the list's form is
    /// (most keys have one rule, and without port ranges it is the answer). The candidate
    /// visit (`Tables::visit`, on the 16-mask row) writes the same walk out.
    #[inline(always)]
    fn first_holding(
        &self,
        before: impl Fn(&Installed) -> bool,
        holds: impl Fn(&Installed) -> bool,
    ) -> Option<&Arc<Installed>> {
        if !before(&self.first) {
            return None;
        }
        if holds(&self.first) {
            return Some(&self.first);
        }
        self.rest().iter().take_while(|r| before(r)).find(|r| holds(r))
    }
}

const _: () = assert!(std::mem::size_of::<SlotRules>() == 16);

/// Constants (the hex digits of pi) the words are xored with before a multiply.
const SALT: [u64; 4] =
    [0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344, 0xa409_3822_299f_31d0, 0x082e_fa98_ec4e_6c89];

/// The 128-bit product of two words folded to 64 bits.
#[inline]
fn mum(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// A masked key's hash: words taken in pairs, each pair one 128-bit multiply, the pairs'
/// products xored (independent multiplies the CPU runs side by side: a lookup hashes a
/// key once per subtable it visits). The chained multiply per word before it (a
/// 4-deep chain of dependent multiplies and shifts) was slower at every width.
#[inline]
fn hash_words<const W: usize>(k: &[u64; W]) -> u32 {
    let mut h = HASH_SEED;
    for p in 0..W.div_ceil(2) {
        h ^= pair_term(k, p);
    }
    hash_finish(h)
}

/// What `hash_words` starts from: zero, so the xor with it compiles to nothing (issue 14:
/// two instructions a hash). A constant xored into every hash only renames the home slots:
/// keys that shared one still do.
const HASH_SEED: u64 = 0;

/// Word pair `p`'s term of `hash_words` (words 2p and 2p + 1; the last word alone when W
/// is odd): it reads those two words only, so the terms of the pairs that every subtable
/// of a chain masks alike are computed once a packet (`ChainT::vary`).
#[inline(always)]
fn pair_term<const W: usize>(k: &[u64; W], p: usize) -> u64 {
    let i = 2 * p;
    if i + 1 < W {
        mum(k[i] ^ SALT[i % 4], k[i + 1] ^ SALT[(i + 1) % 4])
    } else {
        mum(k[W - 1] ^ SALT[(W - 1) % 4], SALT[W % 4] ^ 0x9e37_79b9_7f4a_7c15)
    }
}

/// The hash from its terms xored. Both halves folded: either alone piles up some keys
/// that differ in few bits (the low half: keys counting up in one word's low bits, 1.2
/// slots past home on average at half full against 0.4; the high half: a count in the
/// third of four words from bit 8, 17; `hashes_spread_structured_keys_over_the_slots`).
#[inline(always)]
fn hash_finish(h: u64) -> u32 {
    let h = (h ^ (h >> 32)) as u32;
    // Never 0 (an empty slot); the top bit, not the bottom one, so that every slot can be
    // a home (slots are picked by the low bits).
    h | 0x8000_0000
}

/// A subtable visit's hash of masked key `mk`: `base` (the packet's terms of the pairs its
/// chain's subtables mask alike, from `HASH_SEED`) with the terms of the pairs in `vary`;
/// `ALL_VARY`: every pair is in `vary`, so the base is the seed.
#[inline(always)]
fn visit_hash<const W: usize, const ALL_VARY: bool>(base: u64, vary: u32, mk: &[u64; W]) -> u32 {
    let mut h = if ALL_VARY { HASH_SEED } else { base };
    for p in 0..W.div_ceil(2) {
        if ALL_VARY || vary >> p & 1 != 0 {
            h ^= pair_term(mk, p);
        }
    }
    hash_finish(h)
}

/// The rank no rule has (no match yet: every rule ranks before it).
const NO_RANK: (u32, u64) = (u32::MAX, u64::MAX);

impl<const W: usize> Subtable<W> {
    /// Whether its rules test a port range, which its key's slot cannot hold alone.
    #[inline(always)]
    fn ranged(&self) -> bool {
        self.src_range || self.dst_range
    }
    fn new(
        gmask: [u64; W],
        (src_range, dst_range): (bool, bool),
        mask: u32,
        store: Store<W>,
    ) -> Subtable<W> {
        Subtable { gmask, src_range, dst_range, mask, best: store.best(), store: Arc::new(store) }
    }

    /// Whether a rule belongs here, given its gathered mask: for a rule whose mask
    /// touches only the gathered words (every rule the tables take), equal gathered masks
    /// are equal masks, compared in W words (the 112-byte masks' `memcmp`, once per
    /// subtable, was most of an insert's search for its subtable).
    #[inline]
    fn fits(&self, gmask: &[u64; W], (src_range, dst_range): (bool, bool)) -> bool {
        same(&self.gmask, gmask) && self.src_range == src_range && self.dst_range == dst_range
    }

    /// Whether a rule belongs here, given its mask's number: the same answer as `fits`
    /// (a subtable's rules all have its mask), one compare a subtable and no gather (a
    /// delete's search).
    #[inline]
    fn numbered(&self, mask: u32, (src_range, dst_range): (bool, bool)) -> bool {
        self.mask == mask && self.src_range == src_range && self.dst_range == dst_range
    }

    /// The same subtable with another best rank or store (a new version's).
    fn with(&self, best: (u32, u64), store: Arc<Store<W>>) -> Subtable<W> {
        Subtable {
            gmask: self.gmask,
            src_range: self.src_range,
            dst_range: self.dst_range,
            mask: self.mask,
            best,
            store,
        }
    }

    #[inline(always)]
    fn find(&self, key: &[u64; W], hash: u32) -> Option<&Entry<W>> {
        self.store.find(key, hash)
    }
}

/// The writer's updates of a store's bookkeeping and filter words: only the writer (under
/// its lock) writes them, so a load and a store lose nothing, and neither is a locked
/// read-modify-write (~20-40 cycles each on this machine; an insert made five of them).
#[inline]
fn add(a: &AtomicUsize, n: usize) {
    a.store(a.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

#[inline]
fn sub(a: &AtomicUsize, n: usize) {
    a.store(a.load(Ordering::Relaxed) - n, Ordering::Relaxed);
}

/// Set filter bits (the writer only). The bit is set before the key's slot is stored, so a
/// lookup that finds the slot finds the bit set.
#[inline]
fn set_bits(a: &AtomicU64, m: u64) {
    a.store(a.load(Ordering::Relaxed) | m, Ordering::Release);
}

/// Key equality without a call to `memcmp` (which `==` on arrays becomes).
#[inline]
fn same<const W: usize>(a: &[u64; W], b: &[u64; W]) -> bool {
    let mut diff = 0;
    for i in 0..W {
        diff |= a[i] ^ b[i];
    }
    diff == 0
}

/// One gathered word: key word `a` under `ma`, or'ed with key word `b` under `mb`. A word
/// alone is `ma` all ones, `mb` zero; two words are packed into one when the bytes the rule
/// set's masks touch in them are disjoint (`ma`, `mb`: those bytes), so that a rule set of
/// few fields hashes and compares fewer words (issue 14: protocol, addresses and destination
/// port are key words 0, 4 and 9, three words in a width of 4; packed, 2). A rule whose mask
/// reaches outside its words' lanes rebuilds the tables with a new plan (`Writer::covers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lane {
    a: usize,
    ma: u64,
    b: usize,
    mb: u64,
}

impl Lane {
    const NONE: Lane = Lane { a: 0, ma: 0, b: 0, mb: 0 };

    fn alone(w: usize) -> Lane {
        Lane { a: w, ma: !0, b: w, mb: 0 }
    }

    /// The lane's value from the key's words (`word(i)`: key word i).
    #[inline(always)]
    fn take(&self, word: impl Fn(usize) -> u64) -> u64 {
        word(self.a) & self.ma | word(self.b) & self.mb
    }
}

/// Per key word, the bits `lanes` gather (a mask is covered when it has none outside).
fn cover(lanes: &[Lane]) -> [u64; WORDS] {
    let mut c = [0u64; WORDS];
    for l in lanes {
        c[l.a] |= l.ma;
        c[l.b] |= l.mb;
    }
    c
}

#[inline]
fn gather<const W: usize>(key: &Key, lanes: &[Lane; W]) -> [u64; W] {
    let mut out = [0u64; W];
    for (o, l) in out.iter_mut().zip(lanes.iter()) {
        *o = l.take(|i| key.word(i));
    }
    out
}

/// A key from gathered words (the rest zero).
fn scatter<const W: usize>(g: &[u64; W], lanes: &[Lane; W]) -> Key {
    let mut k = Key::default();
    for (v, l) in g.iter().zip(lanes.iter()) {
        for (w, m) in [(l.a, l.ma), (l.b, l.mb)] {
            if m != 0 {
                let old = k.word(w);
                k.0[w * 8..w * 8 + 8].copy_from_slice(&(old | v & m).to_ne_bytes());
            }
        }
    }
    k
}

#[inline]
fn and<const W: usize>(a: &[u64; W], b: &[u64; W]) -> [u64; W] {
    let mut out = [0u64; W];
    for i in 0..W {
        out[i] = a[i] & b[i];
    }
    out
}

impl<const W: usize> ChainT<W> {
    fn refresh(&mut self) {
        self.subtables.retain(|s| s.store.rule_count() > 0);
        let mut best = (u32::MAX, u64::MAX);
        self.suffix_best = vec![best; self.subtables.len()];
        for i in (0..self.subtables.len()).rev() {
            best = best.min(self.subtables[i].best);
            self.suffix_best[i] = best;
        }
        self.common = self.subtables.first().map_or([0; W], |s| s.gmask);
        self.vary = 0;
        for p in 0..W.div_ceil(2) {
            let words = 2 * p..(2 * p + 2).min(W);
            let alike =
                self.subtables.iter().all(|s| s.gmask[words.clone()] == self.common[words.clone()]);
            if !alike {
                self.vary |= 1 << p;
            }
        }
        // One of the two states a lookup reads, kept and written by inserts: the candidate
        // tables where they are selective, else the prefilters (a chain falling back to them
        // has none: `refresh_pre` makes and fills each from the stores).
        self.refresh_cand();
        if self.cand_on {
            self.pre = Vec::new();
            self.needs = Vec::new();
        } else {
            self.refresh_pre();
        }
    }

    /// The candidate tables for the subtables as they are now: kept while the chain lists
    /// the same subtables (the writer keeps them filled) and its live keys have not
    /// doubled (stale bits dropped, the selectivity judged again), else built afresh.
    fn refresh_cand(&mut self) {
        let keys: usize = self.subtables.iter().map(|s| s.store.live.load(Ordering::Relaxed)).sum();
        if let Some(c) = &self.cand {
            let same = c.ids.len() == self.subtables.len()
                && c.ids
                    .iter()
                    .zip(&self.subtables)
                    .all(|(&id, s)| id == (s.mask, s.src_range, s.dst_range));
            if same && keys <= 2 * c.keys.max(32) {
                return;
            }
        }
        self.cand = CandTables::build(&self.subtables).map(Arc::new);
        self.cand_on = self.cand.as_ref().is_some_and(|c| c.selective);
    }

    /// The prefilters for the subtables as they are now: kept where a (half-word, mask)
    /// stays (the writer keeps them filled), made and filled from the subtables' entries
    /// where it is new or its filter overfull.
    fn refresh_pre(&mut self) {
        let old = std::mem::take(&mut self.pre);
        self.needs = vec![0; self.subtables.len()];
        let Some(first) = self.subtables.first() else { return };
        for h in 0..2 * W {
            let m0 = half_of(&first.gmask, h);
            if self.subtables.iter().all(|s| half_of(&s.gmask, h) == m0) {
                // Alike in every subtable: a filter here would skip all or none.
                continue;
            }
            for si in 0..self.subtables.len() {
                let m = half_of(&self.subtables[si].gmask, h);
                if m == 0 {
                    continue;
                }
                let same = |f: &Arc<PreFilter>| usize::from(f.half) == h && f.mask == m;
                let f = match self.pre.iter().position(same) {
                    Some(f) => f,
                    None if self.pre.len() < 64 => {
                        let f = match old.iter().find(|f| same(f) && !f.overfull()) {
                            Some(f) => f.clone(),
                            None => self.filled(h, m),
                        };
                        self.pre.push(f);
                        self.pre.len() - 1
                    }
                    None => continue,
                };
                self.needs[si] |= 1 << f;
            }
        }
        // The bits of the entries written in place, set in these prefilters and in the
        // ones they replace (the published version's, which lookups may still use), then
        // the stores' marks cleared: a lookup reads the marks before the prefilters.
        for st in &self.subtables {
            if !st.store.unfiltered.load(Ordering::Relaxed) {
                continue;
            }
            for e in st.store.live_entries() {
                let k = and(&e.key, &st.gmask);
                for f in self
                    .pre
                    .iter()
                    .chain(old.iter().filter(|o| !self.pre.iter().any(|p| Arc::ptr_eq(o, p))))
                {
                    if half_of(&st.gmask, usize::from(f.half)) == f.mask {
                        f.add(&k);
                    }
                }
            }
            st.store.unfiltered.store(false, Ordering::Release);
        }
    }

    /// A new prefilter for half-word `h` under `m`, holding every entry of the subtables with
    /// that mask there.
    fn filled(&self, h: usize, m: u32) -> Arc<PreFilter> {
        let mine = || self.subtables.iter().filter(move |s| half_of(&s.gmask, h) == m);
        let values = mine().map(|s| s.store.live.load(Ordering::Relaxed)).sum();
        let f = PreFilter::new(h as u8, m, values);
        for s in mine() {
            for e in s.store.live_entries() {
                f.add(&and(&e.key, &s.gmask));
            }
        }
        Arc::new(f)
    }

    /// Set a new entry's bits in the prefilters on its mask (the writer, before the entry's
    /// slot is stored: a lookup that finds the slot finds the bits).
    fn note_pre(&self, gk: &[u64; W], gm: &[u64; W]) {
        for f in &self.pre {
            if half_of(gm, usize::from(f.half)) == f.mask {
                f.add(&and(gk, gm));
            }
        }
    }

    /// The best rule in this chain matching `g` (the gathered full key), ranked after
    /// `after`.
    fn lookup<'a>(
        &'a self,
        key: &Key,
        g: &[u64; W],
        after: Option<(u32, u64)>,
    ) -> Option<&'a Installed> {
        let mut cand: Option<&Installed> = None;
        for (i, st) in self.subtables.iter().enumerate() {
            let bound = cand.map_or((u32::MAX, u64::MAX), |c| c.rank());
            if self.suffix_best[i] >= bound {
                break;
            }
            if st.best >= bound {
                continue;
            }
            let mk = and(g, &st.gmask);
            let h = hash_words(&mk);
            if !st.store.may_hold(h) {
                continue;
            }
            let Some(slot) = st.find(&mk, h) else { continue };
            let ranged = st.ranged();
            let found = slot.rules.first_holding(
                |r| r.rank() < bound,
                |r| after.is_none_or(|a| r.rank() > a) && (!ranged || r.ranges_hold(key)),
            );
            cand = found.map(|r| &**r).or(cand);
        }
        cand
    }
}

impl<const W: usize> Tables<W> {
    /// The mask that keeps every bit (`extract_words` for a caller that masks nothing).
    const NO_MASK: [u64; W] = [u64::MAX; W];

    fn build(
        lanes: [Lane; W],
        rules: impl Iterator<Item = (Arc<Installed>, Key, Key)>,
    ) -> Tables<W> {
        let mut t = Tables { lanes, tuple: tuple_masks(&lanes), chains: Vec::new() };
        for (r, key, mask) in rules {
            // Not published yet: nothing reads the stores.
            t.insert_in_place(r, &key, &mask, true);
        }
        for (_, c) in &mut t.chains {
            c.refresh();
        }
        t
    }

    fn chain(&self, chain: u32) -> Option<&ChainT<W>> {
        self.chains.iter().find(|(c, _)| *c == chain).map(|(_, c)| c)
    }

    fn chain_mut(&mut self, chain: u32) -> &mut ChainT<W> {
        let at = match self.chains.binary_search_by_key(&chain, |(c, _)| *c) {
            Ok(i) => i,
            Err(i) => {
                let empty = ChainT {
                    subtables: Vec::new(),
                    suffix_best: Vec::new(),
                    vary: 0,
                    common: [0; W],
                    pre: Vec::new(),
                    needs: Vec::new(),
                    cand: None,
                    cand_on: false,
                };
                self.chains.insert(i, (chain, empty));
                i
            }
        };
        &mut self.chains[at].1
    }

    /// Insert (the writer only): in place in the subtable's store when it has room and
    /// the rule does not better the subtable's best rank; otherwise the subtable changes
    /// (a new best, or a bigger store) and the caller must publish. Returns whether the
    /// tables changed (a new version is needed). Without `share` the rule goes into a copy
    /// of its subtable's store, never into one a published version reads: for a rule the
    /// published version must not see before its own publication (its mirred device or
    /// the layers it reads are not in that version yet).
    fn insert_in_place(&mut self, r: Arc<Installed>, key: &Key, mask: &Key, share: bool) -> bool {
        let lanes = self.lanes;
        let ch = self.chain_mut(r.chain);
        let gk = gather(key, &lanes);
        let gm = gather(mask, &lanes);
        let h = hash_words(&gk);
        // The writer's record of where the rule is (a delete's search).
        r.hash.store(h, Ordering::Relaxed);
        // Before the store below (which may be a published one).
        ch.note_pre(&gk, &gm);
        match ch.subtables.iter().position(|s| s.fits(&gm, r.range_flags())) {
            Some(i) => {
                let st = &ch.subtables[i];
                if let Some(c) = ch.cand.as_ref().filter(|_| ch.cand_on) {
                    c.add(i, st, &gk);
                }
                let stored = share && st.store.try_insert(gk, h, r.clone()).is_ok();
                if stored && r.rank() >= st.best {
                    return false;
                }
                let store = if stored {
                    st.store.clone()
                } else {
                    // Sized for one key more than it holds: the insert finds room (the key
                    // may be there already, with other rules: not `put`).
                    let s = st.store.rebuilt(1);
                    let _room = s.try_insert(gk, h, r.clone());
                    debug_assert!(_room.is_ok());
                    Arc::new(s)
                };
                let best = st.best.min(r.rank());
                ch.subtables[i] = Arc::new(st.with(best, store));
            }
            None => {
                let store = Store::new(1);
                let (flags, id) = (r.range_flags(), r.mask);
                store.put(gk, SlotRules::one(r));
                ch.subtables.push(Arc::new(Subtable::new(gm, flags, id, store)));
            }
        }
        true
    }

    /// The insert the current version can take without a new one (the common case):
    /// its chain and subtable exist and the rule, of `chain` and `rank`, does not better
    /// the subtable's best. The rule is made by `install` from its mask's number, which
    /// the subtable gives (its rules' masks are the rule's: `fits`), only once its place
    /// is found. `Err(None)`: no such place, nothing installed; `Err(Some(r))`: installed,
    /// but the store has no room.
    fn insert_shared(
        &self,
        c: &Compiled,
        chain: u32,
        rank: (u32, u64),
        install: impl FnOnce(u32) -> Arc<Installed>,
    ) -> Result<(), Option<Arc<Installed>>> {
        let ch = self.chain(chain).ok_or(None)?;
        let (gm, flags) = (gather(&c.mask, &self.lanes), c.range_flags());
        let si = ch.subtables.iter().position(|s| s.fits(&gm, flags)).ok_or(None)?;
        let st = &ch.subtables[si];
        if rank < st.best {
            return Err(None);
        }
        let r = install(st.mask);
        let gk = gather(&c.key, &self.lanes);
        let h = hash_words(&gk);
        r.hash.store(h, Ordering::Relaxed);
        // Before the slot's store: a lookup that finds the slot has it as a candidate.
        if let Some(cand) = ch.cand.as_ref().filter(|_| ch.cand_on) {
            cand.add(si, st, &gk);
        }
        // Before the slot's store: a lookup that finds the slot visits the subtable. Also
        // where the candidate tables answer (no prefilters here): a version published
        // before, which may still read its prefilters over this shared store, must too.
        if (ch.cand_on || !ch.pre.is_empty()) && !st.store.unfiltered.load(Ordering::Relaxed) {
            st.store.unfiltered.store(true, Ordering::Release);
        }
        st.store.try_insert(gk, h, r).map_err(Some)
    }

    /// Remove a rule in place. `None`: not here; `Some(false)`: done, no new version
    /// needed; `Some(true)`: done in `next`, the version to publish (a subtable emptied,
    /// or its store rebuilt).
    fn remove_shared(&self, r: &Installed) -> Option<Option<Tables<W>>> {
        let ch = self.chain(r.chain)?;
        let flags = r.range_flags();
        let i = ch.subtables.iter().position(|s| s.numbered(r.mask, flags))?;
        let st = &ch.subtables[i];
        let h = r.hash.load(Ordering::Relaxed);
        let replace = match st.store.remove(h, r.seq) {
            Removed::NotHere => return None,
            Removed::Done if st.store.rule_count() > 0 => return Some(None),
            Removed::Done => None,
            Removed::NoRoom => {
                let s = st.store.rebuilt(0);
                // The rebuilt store still holds the rule (its entry was not replaced).
                if !matches!(s.remove(h, r.seq), Removed::Done) {
                    return None;
                }
                let best = s.best();
                Some(Arc::new(st.with(best, Arc::new(s))))
            }
        };
        let mut t = self.clone();
        let (_, ch) = t.chains.iter_mut().find(|(n, _)| *n == r.chain)?;
        if let Some(new) = replace {
            ch.subtables[i] = new;
        }
        ch.refresh();
        Some(Some(t))
    }

    fn lookup(&self, chain: u32, key: &Key, after: Option<(u32, u64)>) -> Option<&Installed> {
        let ch = self.chain(chain)?;
        ch.lookup(key, &gather(key, &self.lanes), after)
    }

    /// The words these tables read of a frame's key: for the common frame straight from
    /// its headers (`key::ipv4_plain_words`: no full key zeroed, written and gathered),
    /// for any other frame from its full key.
    /// `plain` is the caller's scratch array, zero but for the words `PlainWords::put`
    /// writes. Inlined into the batch loop: called, its words came back through memory and
    /// the load after the call was half of `process_batch`'s samples (issue 14).
    /// `SHAPE` ([`shape`]): how the words are taken; with `TUPLE` or `SPLIT` the tables'
    /// `tuple` masks are `tm` (with `FULL` `tm` is not read).
    /// The words come back ANDed with `gm`; `tm` must already be within `gm` (a caller
    /// that masks, [`Tables::process_one`], folds its subtable's mask into `tm` once a
    /// batch: two ANDs a packet fewer; one that does not passes [`Tables::NO_MASK`], and the
    /// ANDs with it compile to nothing).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn extract_words<const SHAPE: u8>(
        &self,
        p: &[u8],
        indev: u32,
        need: Need,
        plain: &mut [u64; 16],
        tm: &[[u64; 3]; W],
        gm: &[u64; W],
    ) -> [u64; W] {
        if SHAPE != shape::FULL {
            return match ipv4_plain_words::<{ PlainRead::PORTS }>(p, indev, need) {
                Some(pw) => {
                    let [a, b, c] = pw.tuple();
                    let mut g = [0u64; W];
                    match &mut g[..] {
                        // `shape::SPLIT`'s two lanes: three ANDs and an OR, not six and four.
                        [g0, g1] if SHAPE == shape::SPLIT => {
                            *g0 = a & tm[0][0] | c & tm[0][2];
                            *g1 = b & tm[1][1];
                        }
                        _ => {
                            for (o, m) in g.iter_mut().zip(tm) {
                                *o = a & m[0] | b & m[1] | c & m[2];
                            }
                        }
                    }
                    g
                }
                None => and(&gather(&extract(p, indev, need).0, &self.lanes), gm),
            };
        }
        match ipv4_plain_words::<{ PlainRead::ALL }>(p, indev, need) {
            Some(pw) => {
                pw.put(plain);
                let mut g = [0u64; W];
                for ((o, l), m) in g.iter_mut().zip(self.lanes.iter()).zip(gm) {
                    *o = l.take(|i| plain[i & 15]) & m;
                }
                g
            }
            None => and(&gather(&extract(p, indev, need).0, &self.lanes), gm),
        }
    }

    /// [`Classifier::process_batch`] at this width: the words the tables read extracted
    /// for the batch, the first lookup, then each packet's actions (a full key built only
    /// for a packet whose rule runs actions, or a range check).
    fn process_batch<'r>(
        &'r self,
        need: Need,
        works: &mut [Work<'_>],
        shard: usize,
        cells: ShardCells<'_>,
        lookup: &mut engine::Lookup<'_, 'r>,
        out: &mut Vec<Outcome>,
    ) {
        match &self.tuple {
            Some(tm) if shape::split(tm) => self
                .process_batch_in::<{ shape::SPLIT }>(tm, need, works, shard, cells, lookup, out),
            Some(tm) => self
                .process_batch_in::<{ shape::TUPLE }>(tm, need, works, shard, cells, lookup, out),
            None => self.process_batch_in::<{ shape::FULL }>(
                &[[0; 3]; W],
                need,
                works,
                shard,
                cells,
                lookup,
                out,
            ),
        }
    }

    /// [`Tables::process_batch`] with extraction's flavour chosen (`extract_words`).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn process_batch_in<'r, const SHAPE: u8>(
        &'r self,
        tm: &[[u64; 3]; W],
        need: Need,
        works: &mut [Work<'_>],
        shard: usize,
        cells: ShardCells<'_>,
        lookup: &mut engine::Lookup<'_, 'r>,
        out: &mut Vec<Outcome>,
    ) {
        let n = works.len().min(BATCH);
        if let Some(st) = self.one_subtable() {
            self.process_one::<SHAPE>(tm, st, need, &mut works[..n], shard, cells, lookup, out);
            return;
        }
        let mut g = [[0u64; W]; BATCH];
        // As in `process_one`: rule sets that read ports (most) get an extraction loop with
        // `need` a constant (its two tests a packet gone), and a thread that owns its
        // counter shard an action loop with no test of it a packet (issue 14).
        if need == Need::ALL {
            self.extract_batch::<SHAPE>(tm, Need::ALL, &works[..n], &mut g);
        } else {
            self.extract_batch::<SHAPE>(tm, need, &works[..n], &mut g);
        }
        let mut first: [Option<&Arc<Installed>>; BATCH] = [None; BATCH];
        {
            let works = &*works;
            let full = |i: usize| extract(works[i].data, works[i].indev, need).0;
            self.lookup_batch(&g, n, &full, &mut first[..n], shard);
        }
        let slots = engine::outcome_slots(out, n);
        // The matched rules' counter cells touched before any is counted once the rules
        // are past the first chunk's: at 1M rules each is a cache miss, meant to overlap
        // here rather than one by one in the counts' loop (not timed apart); a rule set within the first
        // chunk is small enough to stay in the caches, so it skips the loop.
        if cells.past_first_chunk() {
            let mut touch = 0u64;
            for f in first[..n].iter().flatten() {
                touch ^= cells.touch(f);
            }
            std::hint::black_box(touch);
        }
        if shard < engine::COUNTER_SHARDS {
            act_on_batch::<true>(need, works, &first, cells, lookup, slots);
        } else {
            act_on_batch::<false>(need, works, &first, cells, lookup, slots);
        }
    }

    /// The words the tables read of each of `works`' frames into `g` (`extract_words`).
    #[inline(always)]
    fn extract_batch<const SHAPE: u8>(
        &self,
        tm: &[[u64; 3]; W],
        need: Need,
        works: &[Work<'_>],
        g: &mut [[u64; W]; BATCH],
    ) {
        let mut plain = [0u64; 16];
        for (gi, w) in g.iter_mut().zip(works) {
            *gi =
                self.extract_words::<SHAPE>(w.data, w.indev, need, &mut plain, tm, &Self::NO_MASK);
        }
    }

    /// Chain 0's subtable when it is its only one and has no port ranges (a rule set of
    /// one mask): the first rule of a matching entry is the answer.
    #[inline]
    fn one_subtable(&self) -> Option<&Subtable<W>> {
        match &self.chain(0)?.subtables[..] {
            [st] if !st.src_range && !st.dst_range => Some(st),
            _ => None,
        }
    }

    /// [`Tables::process_batch`] for a chain 0 of one subtable without ranges, in two
    /// loops over the batch instead of five: each packet's words extracted, masked, hashed
    /// and its home slot touched in one; then each one probed and its actions run (issue
    /// 14: the one-mask row's time beyond the lookup was the batch's passes between them,
    /// each storing what the next loaded).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn process_one<'r, const SHAPE: u8>(
        &'r self,
        tm: &[[u64; 3]; W],
        st: &'r Subtable<W>,
        need: Need,
        works: &mut [Work<'_>],
        shard: usize,
        cells: ShardCells<'_>,
        lookup: &mut engine::Lookup<'_, 'r>,
        out: &mut Vec<Outcome>,
    ) {
        // Rule sets that read ports (most) get a loop with `need` a constant: extraction's
        // two tests of it a packet, which the compiler does not hoist, are gone (issue 14).
        // Whether this thread owns its counter shard, tested once a batch (`process_into`'s
        // `OWNED`): with `need` constant, the loop the benches and `weir flow run` take.
        macro_rules! with {
            ($need:expr, $owned:literal) => {
                self.process_one_in::<SHAPE, $owned>(
                    tm, st, $need, works, shard, cells, lookup, out,
                )
            };
        }
        match (need == Need::ALL, shard < engine::COUNTER_SHARDS) {
            (true, true) => with!(Need::ALL, true),
            (true, false) => with!(Need::ALL, false),
            (false, _) => with!(need, false),
        }
    }

    /// [`Tables::process_one`] for one `need`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn process_one_in<'r, const SHAPE: u8, const OWNED: bool>(
        &'r self,
        tm: &[[u64; 3]; W],
        st: &'r Subtable<W>,
        need: Need,
        works: &mut [Work<'_>],
        shard: usize,
        cells: ShardCells<'_>,
        lookup: &mut engine::Lookup<'_, 'r>,
        out: &mut Vec<Outcome>,
    ) {
        let store = &*st.store;
        let probe = store.probe_view().never_empty();
        let mut plain = [0u64; 16];
        let mut touch = 0u64;
        // The subtable's mask folded into the tuple masks (`extract_words`).
        let tm: [[u64; 3]; W] = std::array::from_fn(|o| tm[o].map(|m| m & st.gmask[o]));
        // Each packet's words beside their hash, one array (issue 14: the next loop's walk
        // over four arrays computed an address for each a packet).
        let mut keyed = [([0u64; W], 0u32); BATCH];
        for ((g, h), w) in keyed.iter_mut().zip(works.iter()) {
            *g = self.extract_words::<SHAPE>(w.data, w.indev, need, &mut plain, &tm, &st.gmask);
            *h = hash_words(g);
            touch ^= probe.touch(*h);
        }
        std::hint::black_box(touch);
        // Misses counted, not hits: most packets match, and the count's add on their path
        // was a load and a store of a spilled register a packet.
        let mut misses = 0usize;
        let slots = engine::outcome_slots(out, works.len().min(BATCH));
        for ((w, (k, h)), o) in works.iter_mut().zip(keyed.iter()).zip(slots) {
            let f = probe.find_near(k, *h).map(|e| &*e.rules.first);
            if f.is_none() {
                misses += 1;
            }
            let key = |w: &Work<'_>| extract(w.data, w.indev, need).0;
            engine::process_into::<OWNED>(w, key, need, f, lookup, cells, o);
        }
        let hits = works.len().min(BATCH) - misses;
        if hits > 0 {
            store.hits.add(shard, hits as u64);
        }
    }

    /// The first lookup (chain 0) of `keys[pick[j]]` into `out[j]` (a flow cache's misses
    /// picked out of the batch's keys, not copied).
    fn lookup_picked<'a>(
        &'a self,
        keys: &[Key],
        pick: &[u8],
        out: &mut [Option<&'a Arc<Installed>>],
        shard: usize,
    ) {
        let mut g = [[0u64; W]; BATCH];
        for (gj, &i) in g.iter_mut().zip(pick) {
            *gj = gather(&keys[usize::from(i)], &self.lanes);
        }
        let full = |j: usize| keys[usize::from(pick[j])];
        self.lookup_batch(&g, pick.len(), &full, out, shard);
    }

    /// The first lookup (chain 0) of up to [`BATCH`] packets, the words the tables read
    /// `g[..n]`, into `out[..n]`, subtable by subtable; `full(i)` is packet i's whole key
    /// (read only by a port-range check).
    fn lookup_batch<'a>(
        &'a self,
        g: &[[u64; W]; BATCH],
        n: usize,
        full: &dyn Fn(usize) -> Key,
        out: &mut [Option<&'a Arc<Installed>>],
        shard: usize,
    ) {
        let n = n.min(BATCH).min(out.len());
        let Some(ch) = self.chain(0) else {
            out.iter_mut().take(n).for_each(|o| *o = None);
            return;
        };
        if let [st] = &ch.subtables[..] {
            if !st.src_range && !st.dst_range {
                Self::lookup_one(st, g, n, out, shard);
                return;
            }
        }
        // The pairs every subtable masks alike, hashed once a packet.
        let vary = ch.vary;
        let mut base = [HASH_SEED; BATCH];
        for (b, k) in base.iter_mut().zip(g.iter()).take(n) {
            let mk = and(k, &ch.common);
            for p in 0..W.div_ceil(2) {
                if vary >> p & 1 == 0 {
                    *b ^= pair_term(&mk, p);
                }
            }
        }
        // The candidate tables, when they are read: packet by packet (below). Both this
        // and `lookup_one` write every packet's answer; the pass below only its matches.
        if let Some(c) = ch.cand.as_deref().filter(|_| ch.cand_on) {
            Self::walk_candidates(ch, c, g, n, &base, full, out, shard);
            return;
        }
        out.iter_mut().take(n).for_each(|o| *o = None);
        let mut bound = [(u32::MAX, u64::MAX); BATCH];
        let mut hs = [0u32; BATCH];
        let mut live = [0u8; BATCH];
        let single = ch.subtables.len() == 1;
        // The packets still looking, a bit each: one whose match no later subtable can
        // beat leaves (without a branch), so a subtable costs only the packets that can
        // still improve (16 masks of one priority each: a packet visits 8.5 subtables on
        // average, the batch all 16). `found`: the packets with a match, the only ones
        // whose bound a subtable's best rank is compared with.
        let all = ((1u64 << n) - 1) as u32;
        let mut looking = all;
        let mut found = 0u32;
        // The prefilters' answers, a bit a filter a packet (none in a chain whose
        // subtables' masks differ nowhere).
        // With prefilters (and at most 64 subtables): each packet's subtables, those whose
        // prefilters all let it in, as a bit per packet in `of[si]`, so a subtable costs only
        // the packets it may hold (a list of still-looking packets walked per subtable was
        // most of a 16-mask lookup once the prefilters skipped the hashing).
        let pre = &ch.pre[..];
        let by_pre = !pre.is_empty() && ch.subtables.len() <= 64;
        let mut of = [0u32; 64];
        if by_pre {
            // The subtables written in place since their prefilters were filled, read
            // before the prefilters (Acquire: a mark seen cleared, its bits are seen).
            let mut open = 0u64;
            for (si, st) in ch.subtables.iter().enumerate() {
                open |= u64::from(st.store.unfiltered.load(Ordering::Acquire)) << si;
            }
            // Filter by filter over the batch, then subtable by subtable over it: each
            // loop's trip count is fixed by the batch, not by a packet's answers.
            let mut present = [0u32; 64];
            // The filters of a half-word are next to each other (`refresh_pre`): the
            // batch's half-words taken out once for them all.
            let mut vals = [0u32; BATCH];
            let mut half = None;
            for (p, pf) in present.iter_mut().zip(pre) {
                if half != Some(pf.half) {
                    halves_of(&g[..n], pf.half, &mut vals);
                    half = Some(pf.half);
                }
                *p = pf.test_halves(&vals[..n]);
            }
            for (o, &need) in of.iter_mut().zip(&ch.needs) {
                let mut m = all;
                let mut fs = need;
                while fs != 0 {
                    m &= present[fs.trailing_zeros() as usize];
                    fs &= fs - 1;
                }
                *o = m;
            }
            for (si, o) in of.iter_mut().enumerate().take(ch.subtables.len()) {
                if open >> si & 1 != 0 {
                    *o = all;
                }
            }
        }
        for (si, st) in ch.subtables.iter().enumerate() {
            // Two passes: the packets this subtable may improve (still looking, let in by
            // its prefilters, and its best rank above their match), a bitmask; then each
            // one's masked key hashed and tested against the subtable's filter. Neither
            // branches on a packet (which packets still look and which pass a filter is
            // data: branches on them mispredicted a visit in ~8); the masked keys are not
            // kept (the probes and-mask again: 4 ands beat 32-byte copies). A chain of one
            // subtable skips the filter: there the packets that are not misses of the whole
            // rule set all hit, and the filter is a load and a test each that answers
            // "maybe". A bitmask, not a list of packets compacted after each subtable and
            // one built from it: a packet listed cost ~19 instructions (46 of a 16-mask
            // packet's 527 in callgrind, bench/records/2026-12-01-flow-speed-21.txt).
            if looking == 0 {
                break;
            }
            let mut here = looking & if by_pre { of[si] } else { all };
            let mut m = here & found;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                here &= !(u32::from(st.best >= bound[i]) << i);
            }
            if here == 0 {
                continue;
            }
            let store = &*st.store;
            let (fmask, fwords) = store.filter_shape();
            // The subtable's mask and range flags in registers: read through `st`, they
            // were loaded again after every atomic load of the probes (~6 instructions a
            // probe, issue 14).
            let gmask = st.gmask;
            let ranged = st.ranged();
            let mut nl = 0;
            while here != 0 {
                let i = here.trailing_zeros() as usize;
                here &= here - 1;
                let h = visit_hash::<W, false>(base[i], vary, &and(&g[i], &gmask));
                let pass = single || store.filter_test(h, fmask, fwords);
                hs[nl] = h;
                live[nl] = i as u8;
                nl += usize::from(pass);
            }
            // Touch every remaining packet's home slot before probing any: independent
            // loads the CPU overlaps, so a large table's cache misses are paid once per
            // batch rather than once per packet (a prefetch without `unsafe`).
            let probe = store.probe_view();
            let mut touch = 0u64;
            for &h in &hs[..nl] {
                touch ^= probe.touch(h);
            }
            std::hint::black_box(touch);
            let later = ch.suffix_best.get(si + 1).copied().unwrap_or((u32::MAX, u64::MAX));
            let mut hits = 0u64;
            for j in 0..nl {
                let i = usize::from(live[j]);
                let Some(slot) = probe.find(&and(&g[i], &gmask), hs[j]) else { continue };
                let bound_i = bound[i];
                let holding = slot
                    .rules
                    .first_holding(|r| r.rank() < bound_i, |r| !ranged || r.ranges_hold(&full(i)));
                if let Some(r) = holding {
                    out[i] = Some(r);
                    bound[i] = r.rank();
                    found |= 1 << i;
                    // Done when no later subtable can beat it.
                    looking &= !(u32::from(later >= r.rank()) << i);
                    hits += 1;
                }
            }
            if hits > 0 {
                store.hits.add(shard, hits);
            }
        }
    }

    /// `lookup_batch` over a chain whose candidate tables are read: each packet walks the
    /// set bits of its candidate word (`CandTables::batch_words`, taken for the batch
    /// first) in the chain's order, with no per-subtable pass over the batch and no word
    /// scattered into per-subtable packet
    /// bits (flow-speed-27 section 7: with ~1.1 candidates a packet the per-subtable pass
    /// cost a setup a visit for ~2 packets). The store's Bloom filter is not tested: the
    /// tables already keep a packet out of all but ~1.1 subtables a packet at 1000:16, of
    /// which ~0.1 false, and the filter cost a test a visit to save a probe a false one
    /// (it only ever answers "maybe"; the probe decides). Same matches, same per-subtable
    /// hit counts as the pass by subtable: a packet's visits and their order are its own.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn walk_candidates<'a>(
        ch: &'a ChainT<W>,
        cand: &CandTables,
        g: &[[u64; W]; BATCH],
        n: usize,
        base: &[u64; BATCH],
        full: &dyn Fn(usize) -> Key,
        out: &mut [Option<&'a Arc<Installed>>],
        shard: usize,
    ) {
        let n = n.min(BATCH).min(out.len());
        let mut cands = [!0u64; BATCH];
        cand.batch_words(&g[..n], &mut cands[..n]);
        // Chains whose subtables' masks differ in every pair of words (weir-bench's 16
        // masks: W = 2, one pair) hash no term once a packet: their walk takes the seed as
        // its base and tests no `vary` bit a visit.
        let (g, base, cands, out) = (&g[..n], &base[..n], &cands[..n], &mut out[..n]);
        if ch.vary == (1 << W.div_ceil(2)) - 1 {
            Self::walk::<true>(ch, g, base, cands, full, out, shard);
        } else {
            Self::walk::<false>(ch, g, base, cands, full, out, shard);
        }
    }

    /// The walk of `walk_candidates`, for batches of `out.len()` packets (`g`, `base` and
    /// `cands` as long), `ALL_VARY` when every pair of words varies (`ch.vary`). Each
    /// packet's candidates are visited in two loops: until its first match, with no rank
    /// to beat, so no subtable's `best` and no rule's rank is compared (a slot's first rule
    /// whose ranges hold is the match); then, only when candidates remain (~0.08 a packet
    /// at 1000:16), those whose subtable may hold a better rule (issue 14: the rank
    /// compares and the bound kept in registers were ~15 instructions of a hit's path).
    #[inline(always)]
    fn walk<'a, const ALL_VARY: bool>(
        ch: &'a ChainT<W>,
        g: &[[u64; W]],
        base: &[u64],
        cands: &[u64],
        full: &dyn Fn(usize) -> Key,
        out: &mut [Option<&'a Arc<Installed>>],
        shard: usize,
    ) {
        let subs = &ch.subtables[..];
        let vary = ch.vary;
        // Hits per subtable, added to the stores' counters once a batch.
        let mut hits = [0u32; 64];
        let mut hit_in = 0u64;
        let n = out.len().min(g.len()).min(base.len()).min(cands.len());
        for i in 0..n {
            let (k, b) = (&g[i], base[i]);
            let mut c = cands[i];
            let mut found = None;
            while c != 0 {
                let s = c.trailing_zeros() as usize;
                c &= c - 1;
                let Some(st) = subs.get(s) else {
                    c = 0;
                    break;
                };
                if let Some(r) = Self::visit::<ALL_VARY, true>(st, k, b, vary, i, full, NO_RANK) {
                    found = Some(r);
                    hits[s] += 1;
                    hit_in |= 1 << s;
                    break;
                }
            }
            // No stop test at a hit: a later candidate whose subtable cannot beat it fails
            // the `best` test below (every later `best` is at least the chain's
            // `suffix_best` after the hit's).
            if let Some(hit) = found.filter(|_| c != 0) {
                let mut bound = hit.rank();
                while c != 0 {
                    let s = c.trailing_zeros() as usize;
                    c &= c - 1;
                    let Some(st) = subs.get(s) else { break };
                    if st.best >= bound {
                        continue;
                    }
                    if let Some(r) = Self::visit::<ALL_VARY, false>(st, k, b, vary, i, full, bound)
                    {
                        found = Some(r);
                        bound = r.rank();
                        hits[s] += 1;
                        hit_in |= 1 << s;
                    }
                }
            }
            out[i] = found;
        }
        while hit_in != 0 {
            let s = hit_in.trailing_zeros() as usize;
            hit_in &= hit_in - 1;
            if let Some(st) = subs.get(s) {
                st.store.hits.add(shard, u64::from(hits[s]));
            }
        }
    }

    /// A candidate visit of packet `i` (gathered words `k`, hash base `b`): the first rule
    /// of `k`'s slot in `st` that ranks before `bound` and whose port ranges hold. `FIRST`:
    /// nothing matched yet, `bound` is `NO_RANK`, which every rule ranks before (a rule's
    /// seq is below `u64::MAX`: the writer counts them from 0), so no rank is compared.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn visit<'a, const ALL_VARY: bool, const FIRST: bool>(
        st: &'a Subtable<W>,
        k: &[u64; W],
        b: u64,
        vary: u32,
        i: usize,
        full: &dyn Fn(usize) -> Key,
        bound: (u32, u64),
    ) -> Option<&'a Arc<Installed>> {
        let mk = and(k, &st.gmask);
        let h = visit_hash::<W, ALL_VARY>(b, vary, &mk);
        let slot = st.store.probe_view().find(&mk, h)?;
        let ranged = st.ranged();
        // `SlotRules::first_holding` written out: through it the visit loaded `first`'s
        // address ahead of the range test, which most visits do not need (issue 14: one
        // instruction a packet at 1000:16, bench/records/2026-12-02-flow-speed-39.txt).
        let best = &slot.rules.first;
        if !FIRST && best.rank() >= bound {
            return None;
        }
        if !ranged || best.ranges_hold(&full(i)) {
            return Some(best);
        }
        let rest = slot.rules.rest().iter();
        rest.take_while(|r| FIRST || r.rank() < bound).find(|r| r.ranges_hold(&full(i)))
    }

    /// The floor of a one-subtable lookup, stage by stage (`Classifier::floor`).
    fn floor<const STAGE: u8>(&self, need: Need, frames: &[Vec<u8>]) -> u64 {
        match &self.tuple {
            Some(tm) if shape::split(tm) => {
                self.floor_in::<STAGE, { shape::SPLIT }>(tm, need, frames)
            }
            Some(tm) => self.floor_in::<STAGE, { shape::TUPLE }>(tm, need, frames),
            None => self.floor_in::<STAGE, { shape::FULL }>(&[[0; 3]; W], need, frames),
        }
    }

    fn floor_in<const STAGE: u8, const SHAPE: u8>(
        &self,
        tm: &[[u64; 3]; W],
        need: Need,
        frames: &[Vec<u8>],
    ) -> u64 {
        let Some(st) = self.chain(0).and_then(|c| c.subtables.first()) else { return 0 };
        let probe = st.store.probe_view();
        let mut acc = 0u64;
        let mut plain = [0u64; 16];
        for f in frames {
            let g = self.extract_words::<SHAPE>(f, 0, need, &mut plain, tm, &Self::NO_MASK);
            if STAGE == 0 {
                acc ^= g[0] ^ g[W - 1];
                continue;
            }
            let mk = and(&g, &st.gmask);
            let h = hash_words(&mk);
            if STAGE == 1 {
                acc ^= u64::from(h);
                continue;
            }
            let Some(e) = probe.find(&mk, h) else { continue };
            acc += match STAGE {
                2 => 1,
                _ => u64::from(e.rules.first.line),
            };
        }
        acc
    }

    /// [`Tables::lookup_batch`] for a chain of one subtable without port ranges (a rule
    /// set of one mask): nothing was found before it, so the first rule of a matching
    /// entry is the answer, with no ranks compared, no list of packets still looking and
    /// no filter (issue 14: the one-mask row's fixed cost).
    #[inline]
    fn lookup_one<'a>(
        st: &'a Subtable<W>,
        g: &[[u64; W]; BATCH],
        n: usize,
        out: &mut [Option<&'a Arc<Installed>>],
        shard: usize,
    ) {
        let store = &*st.store;
        let probe = store.probe_view();
        let mut hs = [0u32; BATCH];
        for (h, k) in hs.iter_mut().zip(g.iter()).take(n) {
            *h = hash_words(&and(k, &st.gmask));
        }
        // The home slots touched first, as in `lookup_batch`.
        let mut touch = 0u64;
        for &h in hs.iter().take(n) {
            touch ^= probe.touch(h);
        }
        std::hint::black_box(touch);
        let mut hits = 0u64;
        for ((o, k), &h) in out.iter_mut().zip(g.iter()).zip(hs.iter()).take(n) {
            *o = probe.find(&and(k, &st.gmask), h).map(|e| &e.rules.first);
            hits += u64::from(o.is_some());
        }
        if hits > 0 {
            store.hits.add(shard, hits);
        }
    }

    /// Every rule in the tables with its masked key (the gathered words put back in
    /// place: the words not gathered are zero in every rule's key), one at a time.
    fn rules_with_keys(&self) -> impl Iterator<Item = (Arc<Installed>, Key)> + '_ {
        self.chains.iter().flat_map(|(_, c)| c.subtables.iter()).flat_map(move |st| {
            st.store.live_entries().flat_map(move |e| {
                let key = scatter(&e.key, &self.lanes);
                e.rules.iter().map(move |r| (r.clone(), key))
            })
        })
    }

    fn reranked(&self) -> Tables<W> {
        let mut t = self.clone();
        for (_, c) in &mut t.chains {
            // Best priority first, hits among equals. Hits alone (OVS's order: its megaflows
            // do not overlap) put a one-priority subtable that many packets match before
            // better-priority ones that every such packet must still visit, so no lookup
            // stopped early: with 16 masks of one priority each and matches spread evenly,
            // a packet visits 14.4 subtables on average in a random order, 8.5 in priority
            // order. Rules of one priority (OVS's case) are ordered by hits as before.
            c.subtables.sort_by_key(|s| (s.best.0, std::cmp::Reverse(s.store.hits.get())));
            c.refresh();
        }
        t
    }

    fn stats(&self) -> (usize, usize) {
        let subtables = self.chains.iter().map(|(_, c)| c.subtables.len()).sum();
        let bytes =
            self.chains.iter().flat_map(|(_, c)| c.subtables.iter()).map(|s| s.store.bytes()).sum();
        (subtables, bytes)
    }
}

impl Version {
    /// The next version of the same shape with other tables (a rerank, a rebuilt table).
    fn with_tables(&self, tables: AnyTables) -> Version {
        Version {
            id: next_version_id(),
            edits: self.edits.clone(),
            words: self.words,
            nwords: self.nwords,
            tables,
            need: self.need,
            devices: self.devices.clone(),
            indevs: self.indevs.clone(),
        }
    }

    /// Lookup in one chain after a rank (the slow path: goto, continue).
    pub fn lookup(&self, chain: u32, key: &Key, after: Option<(u32, u64)>) -> Option<&Installed> {
        dispatch!(&self.tables, t => t.lookup(chain, key, after))
    }
}

/// The words a flow cache keys on, as a fixed array and a count: those the tables gather,
/// and the ports' word, which port ranges read without a mask.
fn words_of(t: &AnyTables) -> ([usize; WORDS], usize) {
    let mut v = tables_words(t);
    let ports = crate::key::field::SRC_PORT.offset / 8;
    if !v.contains(&ports) {
        v.push(ports);
    }
    let mut a = [0usize; WORDS];
    for (o, w) in a.iter_mut().zip(&v) {
        *o = *w;
    }
    (a, v.len().min(WORDS))
}

/// One more in-place update (the writer only: a load and a Release store, no locked add).
/// After the update's slot store: a flow cache that sees the new count sees the update.
#[inline]
fn bump_edits(e: &AtomicU64) {
    e.store(e.load(Ordering::Relaxed) + 1, Ordering::Release);
}

fn next_version_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The width class the lookups are compiled for that holds `n` gathered words.
fn width_class(n: usize) -> usize {
    match n {
        0..=1 => 1,
        2 => 2,
        3..=4 => 4,
        5..=8 => 8,
        _ => WORDS,
    }
}

/// The lanes for a set of masks: the words they touch, each alone, or packed two to a lane
/// where the bytes they touch are disjoint, when that makes the width class smaller (a
/// packed lane costs two loads and ands a packet more, and a rule touching a new byte of
/// its words rebuilds the tables).
fn plan(masks: &[Key], full: bool) -> Vec<Lane> {
    if full {
        return (0..WORDS).map(Lane::alone).collect();
    }
    let words: Vec<usize> = (0..WORDS).filter(|&w| masks.iter().any(|m| m.word(w) != 0)).collect();
    // Per word, its touched bytes as a mask of whole bytes.
    let bytes = |w: usize| {
        let mut b = [0u8; 8];
        for m in masks {
            for (o, &x) in b.iter_mut().zip(m.word(w).to_ne_bytes().iter()) {
                *o |= if x != 0 { 0xff } else { 0 };
            }
        }
        u64::from_ne_bytes(b)
    };
    let touched: Vec<u64> = words.iter().map(|&w| bytes(w)).collect();
    let mut taken = vec![false; words.len()];
    let mut packed = Vec::new();
    for i in 0..words.len() {
        if taken[i] {
            continue;
        }
        taken[i] = true;
        let mate = (i + 1..words.len()).find(|&j| !taken[j] && touched[i] & touched[j] == 0);
        packed.push(match mate {
            Some(j) => {
                taken[j] = true;
                Lane { a: words[i], ma: touched[i], b: words[j], mb: touched[j] }
            }
            None => Lane::alone(words[i]),
        });
    }
    if width_class(packed.len()) < width_class(words.len()) {
        packed
    } else {
        words.into_iter().map(Lane::alone).collect()
    }
}

/// `Tables::tuple` for `lanes`: per lane, its masks of key words 0, 4 and 9, when the
/// lanes read no other word and of those words' optional fields the ports only.
fn tuple_masks<const W: usize>(lanes: &[Lane; W]) -> Option<Box<[[u64; 3]; W]>> {
    if !PlainRead::of(&scatter(&[!0; W], lanes)).within(PlainRead::PORTS) {
        return None;
    }
    let mut out = [[0u64; 3]; W];
    for (o, l) in out.iter_mut().zip(lanes) {
        for (w, m) in [(l.a, l.ma), (l.b, l.mb)] {
            if m != 0 {
                o[TUPLE_WORDS.iter().position(|&t| t == w)?] |= m;
            }
        }
    }
    Some(Box::new(out))
}

/// Each packet's actions after its first lookup (`first`), its outcome into its slot
/// (`engine::process_into`; `OWNED`: `cells` is a shard this thread owns, tested by the
/// caller once a batch).
#[inline(always)]
fn act_on_batch<'r, const OWNED: bool>(
    need: Need,
    works: &mut [Work<'_>],
    first: &[Option<&'r Arc<Installed>>],
    cells: ShardCells<'_>,
    lookup: &mut engine::Lookup<'_, 'r>,
    slots: &mut [Outcome],
) {
    for ((w, f), o) in works.iter_mut().zip(first).zip(slots) {
        let f = f.map(|a| &**a);
        let key = |w: &Work<'_>| extract(w.data, w.indev, need).0;
        engine::process_into::<OWNED>(w, key, need, f, lookup, cells, o);
    }
}

/// How the batch paths take a frame's gathered words (`Tables::extract_words`'s `SHAPE`),
/// chosen once a batch from the tables' `tuple` masks, each flavour compiled apart.
mod shape {
    /// From the full key (`Tables::tuple` is `None`).
    pub(super) const FULL: u8 = 0;
    /// Each lane from key words 0, 4 and 9 under its three `tuple` masks.
    pub(super) const TUPLE: u8 = 1;
    /// Two lanes, the first key words 0 and 9, the second word 4 alone: the plan of every
    /// IPv4 5-tuple rule set that matches both addresses and a port (word 4 holds both
    /// addresses, so it packs with nothing; the EtherType, protocol and address-type bytes
    /// of word 0 and the port bytes of word 9 are disjoint). Its lanes skip the zero masks'
    /// ANDs (issue 14: the general flavour's combine was 16 instructions a packet there).
    pub(super) const SPLIT: u8 = 2;

    /// Whether `tm` is [`SPLIT`]'s: two lanes, each reading no tuple word the shape leaves
    /// out of it.
    pub(super) fn split<const W: usize>(tm: &[[u64; 3]; W]) -> bool {
        matches!(tm[..], [[_, 0, _], [0, _, 0]])
    }
}

/// Tables for `rules`, compiled one at a time (no list of every compiled rule: 238 bytes
/// a rule at the peak of a build).
fn build_tables(
    lanes: &[Lane],
    rules: impl Iterator<Item = (Arc<Installed>, Key, Key)>,
) -> AnyTables {
    fn arr<const W: usize>(lanes: &[Lane]) -> [Lane; W] {
        let mut a = [Lane::NONE; W];
        for (o, &l) in a.iter_mut().zip(lanes) {
            *o = l;
        }
        a
    }
    match width_class(lanes.len()) {
        1 => AnyTables::W1(Tables::build(arr(lanes), rules)),
        2 => AnyTables::W2(Tables::build(arr(lanes), rules)),
        4 => AnyTables::W4(Tables::build(arr(lanes), rules)),
        8 => AnyTables::W8(Tables::build(arr(lanes), rules)),
        _ => AnyTables::W14(Tables::build(arr(lanes), rules)),
    }
}

/// The key words the tables read, each once.
fn tables_words(t: &AnyTables) -> Vec<usize> {
    let mut v = Vec::new();
    dispatch!(t, x => for l in &x.lanes {
        for (w, m) in [(l.a, l.ma), (l.b, l.mb)] {
            if m != 0 && !v.contains(&w) {
                v.push(w);
            }
        }
    });
    v
}

impl Classifier {
    /// A classifier holding a rule set.
    pub fn new(set: &RuleSet) -> Classifier {
        Classifier::build(set, false)
    }

    /// The same, with lookups at the full key width (14 words) whatever the rules read:
    /// the baseline the width selection is measured against.
    pub fn new_full_width(set: &RuleSet) -> Classifier {
        Classifier::build(set, true)
    }

    fn build(set: &RuleSet, full_width: bool) -> Classifier {
        let devices = set.devices();
        let indevs = set.indevs();
        let mut id = |name: &str| indevs.iter().position(|d| d == name).map_or(0, |i| i as u32 + 1);
        // Pass 1: the key words and layers the rules read.
        let mut union = Key::default();
        let mut need = Need::default();
        for r in &set.rules {
            let c = r.compile(&mut id);
            for (u, m) in union.0.iter_mut().zip(c.mask.0.iter()) {
                *u |= m;
            }
            need = need.union(c.need);
        }
        let lanes = plan(&[union], full_width);
        // Pass 2: install, compiling again rule by rule.
        let mut rules = Installs::default();
        let mut interner = Interner::default();
        let counters = Counters::default();
        let mut cells = CellAlloc::default();
        let all = set.rules.iter().enumerate().map(|(i, r)| {
            let c = r.compile(&mut id);
            let mask = interner.mask_id(&c.mask);
            let cell = cells.take(&counters);
            let installed =
                Arc::new(interner.install(r, set.prios[i], i as u64, &c, &devices, mask, cell));
            rules.push(i as u64, installed.clone());
            (installed, c.key, c.mask)
        });
        let tables = build_tables(&lanes, all);
        let version = Version {
            id: next_version_id(),
            edits: Arc::new(AtomicU64::new(0)),
            words: words_of(&tables).0,
            nwords: words_of(&tables).1,
            tables,
            need,
            devices: Arc::new(devices.clone()),
            indevs: Arc::new(indevs.clone()),
        };
        let version = Arc::new(version);
        Classifier {
            current: RwLock::new(version.clone()),
            writer: Mutex::new(Writer {
                next_seq: set.rules.len() as u64,
                devices,
                indevs,
                rules,
                interner,
                cells,
                cover: dispatch!(&version.tables, t => cover(&t.lanes)),
                current: version,
            }),
            full_width,
            counters,
        }
    }

    /// The version lookups use now (hold it for a batch).
    pub fn snapshot(&self) -> Arc<Version> {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Publish a version (the writer, under its lock).
    fn publish(&self, w: &mut Writer, v: Version) {
        w.cover = dispatch!(&v.tables, t => cover(&t.lanes));
        let v = Arc::new(v);
        w.current = v.clone();
        match self.current.write() {
            Ok(mut g) => *g = v,
            Err(p) => *p.into_inner() = v,
        }
    }

    /// Words of the key the lookups gather.
    pub fn width(&self) -> usize {
        dispatch!(&self.snapshot().tables, t => t.lanes.len())
    }

    /// Subtables and the bytes of their slot arrays.
    pub fn stats(&self) -> (usize, usize) {
        dispatch!(&self.snapshot().tables, t => t.stats())
    }

    /// Where the memory goes: rules, the bytes of one installed rule with its `Arc`'s
    /// counts, the shared action lists and masks, and the subtables' tables in bytes.
    pub fn footprint(&self) -> Footprint {
        let w = match self.writer.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        Footprint {
            rules: w.rules.len(),
            rule_bytes: std::mem::size_of::<Installed>() + 16,
            action_lists: w.interner.action_lists(),
            masks: w.interner.masks(),
            table_bytes: self.stats().1,
            counter_bytes: self.counters.bytes(),
        }
    }

    /// Add a rule while lookups go on. Its priority: as written, or as the kernel picks
    /// it among the installed rules of its chain. Devices of new `mirred` targets and new
    /// `indev` names join the lists (ids are kept). The rule is borrowed: the classifier
    /// keeps nothing of it (its key and mask go into the tables, its actions into a shared
    /// list), so the caller frees it when it likes, or keeps it; an owned rule's two
    /// vectors freed inside the call were 415 of an insert's 1,827 instructions
    /// (bench/records/2026-12-01-flow-speed-33.txt).
    pub fn insert(&self, rule: &Rule) -> Result<RuleId, RuleError> {
        let mut w = match self.writer.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let w = &mut *w;
        if let Err((_, message)) = rule.check() {
            return Err(RuleError { line: rule.line, column: 0, message });
        }
        let prio = match rule.prio {
            Some(p) => p,
            None => {
                let lowest =
                    w.rules.values().filter(|r| r.chain == rule.chain).map(|r| r.prio).min();
                match lowest {
                    None => crate::rule::AUTO_PRIO_FIRST,
                    Some(p) if p > 1 => p - 1,
                    Some(_) => {
                        return Err(RuleError {
                            line: rule.line,
                            column: 0,
                            message: "no priority left below 1 for a rule without \"prio\"".into(),
                        })
                    }
                }
            }
        };
        let mut devices_changed = false;
        for a in &rule.actions {
            if let crate::rule::ActionKind::Mirred { dev, .. } = &a.kind {
                if !w.devices.contains(dev) {
                    w.devices.push(dev.clone());
                    devices_changed = true;
                }
            }
        }
        let mut indevs_changed = false;
        for m in &rule.matches {
            if let crate::rule::Match::Indev(d) = m {
                if !w.indevs.contains(d) {
                    w.indevs.push(d.clone());
                    indevs_changed = true;
                }
            }
        }
        let compiled = w.compile(rule);
        let seq = w.next_seq;
        w.next_seq += 1;
        let fits = self.full_width || w.covers(&compiled.mask);
        let (cur, interner, rules, devices, cells) =
            (&*w.current, &mut w.interner, &mut w.rules, &w.devices, &mut w.cells);
        let counters = &self.counters;
        // Whether the published version may see the rule before the new one is out (it
        // knows the rule's devices, indevs and layers).
        let share =
            !devices_changed && !indevs_changed && cur.need.union(compiled.need) == cur.need;
        // The rule installed and listed, its mask numbered by the interner unless given.
        let mut install = |mask: Option<u32>| {
            let mask = mask.unwrap_or_else(|| interner.mask_id(&compiled.mask));
            let cell = cells.take(counters);
            let r = Arc::new(interner.install(rule, prio, seq, &compiled, devices, mask, cell));
            rules.push(seq, r.clone());
            r
        };
        // Most inserts: in place in the current version's tables, no new version.
        let placed = if fits && share {
            let rank = (prio, seq);
            dispatch!(&cur.tables, x => x.insert_shared(&compiled, rule.chain, rank, |m| install(Some(m))))
        } else {
            Err(None)
        };
        let installed = match placed {
            Ok(()) => {
                // After the slot's store: a flow cache that sees the new count sees the rule.
                bump_edits(&cur.edits);
                return Ok(RuleId(seq));
            }
            Err(Some(r)) => r,
            Err(None) => install(None),
        };
        let tables = if fits {
            let mut t = clone_tables(&cur.tables);
            dispatch!(&mut t, x => {
                x.insert_in_place(installed.clone(), &compiled.key, &compiled.mask, share);
                let ch = x.chain_mut(installed.chain);
                ch.refresh();
            });
            t
        } else {
            // A new width: every rule again, its key from the tables (rules keep none).
            let mut ids: Vec<u32> = w.rules.values().map(|r| r.mask).collect();
            ids.sort_unstable();
            ids.dedup();
            let masks: Vec<Key> = ids.iter().map(|&i| *w.interner.mask(i)).collect();
            let lanes = plan(&masks, false);
            let interner = &w.interner;
            let new = std::iter::once((installed.clone(), compiled.key));
            let with_mask = |(r, k): (Arc<Installed>, Key)| {
                let m = *interner.mask(r.mask);
                (r, k, m)
            };
            dispatch!(&cur.tables, x => build_tables(
                &lanes,
                x.rules_with_keys().chain(new).map(with_mask),
            ))
        };
        let devices =
            if devices_changed { Arc::new(w.devices.clone()) } else { cur.devices.clone() };
        let next = Version {
            id: next_version_id(),
            edits: cur.edits.clone(),
            words: words_of(&tables).0,
            nwords: words_of(&tables).1,
            tables,
            need: cur.need.union(compiled.need),
            devices,
            indevs: Arc::new(w.indevs.clone()),
        };
        self.publish(w, next);
        Ok(RuleId(seq))
    }

    /// Remove a rule while lookups go on; its counters go with it. False when unknown.
    pub fn delete(&self, id: RuleId) -> bool {
        let mut w = match self.writer.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let w = &mut *w;
        let Some(r) = w.rules.remove(id.0) else { return false };
        let cur = &*w.current;
        // Its cell is free once the versions and flow caches that hold it are gone.
        w.cells.bury(r.clone());
        let next = match &cur.tables {
            AnyTables::W1(x) => x.remove_shared(&r).map(|o| o.map(AnyTables::W1)),
            AnyTables::W2(x) => x.remove_shared(&r).map(|o| o.map(AnyTables::W2)),
            AnyTables::W4(x) => x.remove_shared(&r).map(|o| o.map(AnyTables::W4)),
            AnyTables::W8(x) => x.remove_shared(&r).map(|o| o.map(AnyTables::W8)),
            AnyTables::W14(x) => x.remove_shared(&r).map(|o| o.map(AnyTables::W14)),
        };
        match next {
            None => false,
            Some(None) => {
                bump_edits(&cur.edits);
                true
            }
            Some(Some(tables)) => {
                let next = cur.with_tables(tables);
                self.publish(w, next);
                true
            }
        }
    }

    /// Order each chain's subtables by their best priority, then by hits so far (most
    /// first), and publish.
    pub fn rerank(&self) {
        let mut w = match self.writer.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let cur = w.current.clone();
        let tables = match &cur.tables {
            AnyTables::W1(t) => AnyTables::W1(t.reranked()),
            AnyTables::W2(t) => AnyTables::W2(t.reranked()),
            AnyTables::W4(t) => AnyTables::W4(t.reranked()),
            AnyTables::W8(t) => AnyTables::W8(t.reranked()),
            AnyTables::W14(t) => AnyTables::W14(t.reranked()),
        };
        self.publish(&mut w, cur.with_tables(tables));
    }

    /// Mirred devices (index = `Verdict::Redirect` and mirror numbers).
    pub fn devices(&self) -> Vec<String> {
        self.snapshot().devices.to_vec()
    }

    /// The id `indev` matches give the named interface (0: none of the rules').
    pub fn indev_id(&self, name: &str) -> u32 {
        self.snapshot().indevs.iter().position(|d| d == name).map_or(0, |i| i as u32 + 1)
    }

    /// Per installed rule in order: (line, packets, bytes, last used).
    pub fn counters(&self) -> Vec<(usize, u64, u64, u64)> {
        let w = match self.writer.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        w.rules
            .values()
            .map(|r| {
                let (p, b, t) = self.counters.read(r);
                (r.line(), p, b, t)
            })
            .collect()
    }

    /// The rule a key matches first in chain 0 (no actions run, no counters).
    pub fn classify(&self, key: &Key) -> Option<usize> {
        self.snapshot().lookup(0, key, None).map(|r| r.line())
    }

    /// Classify and act on a batch of up to [`BATCH`] packets.
    pub fn process_batch(&self, v: &Version, works: &mut [Work<'_>], out: &mut Vec<Outcome>) {
        let n = works.len().min(BATCH);
        let shard = engine::my_shard();
        let lookup = &mut |c, k: &Key, a| v.lookup(c, k, a);
        let cells = self.counters.shard(shard);
        dispatch!(&v.tables, t => t.process_batch(v.need, &mut works[..n], shard, cells, lookup, out));
    }

    /// [`Classifier::process_batch`] with an exact-match cache in front: a packet whose
    /// whole key was seen under this version skips the tuple space. One cache per worker.
    pub fn process_batch_cached(
        &self,
        v: &Version,
        cache: &mut FlowCache,
        works: &mut [Work<'_>],
        out: &mut Vec<Outcome>,
    ) {
        let n = works.len().min(BATCH);
        let shard = engine::my_shard();
        let edits = v.edits.load(Ordering::Acquire);
        if cache.version != v.id || cache.edits != edits || cache.stride != v.nwords {
            cache.clear(v.id, edits, v.nwords);
        }
        let mut keys = [Key::default(); BATCH];
        // Where extraction puts the headers' offsets (only the actions' path needs them).
        let mut offs = crate::key::Offsets::default();
        // Only the words the rules read: the rest of every key is zero.
        let used = &v.words[..v.nwords];
        let mut hash = [0u64; BATCH];
        // The cache entry a packet hit, or `NONE`.
        const NONE: u32 = u32::MAX;
        let mut at = [NONE; BATCH];
        // Extraction for the whole batch first, then the hashes and every packet's bucket
        // touched, then the compares: independent loads the CPU overlaps (a hit is a
        // bucket, its key words and its rule: three loads in a row a packet).
        for i in 0..n {
            // Fresh keys from the array above: zero already.
            extract_into_zeroed(works[i].data, works[i].indev, v.need, &mut keys[i], &mut offs);
        }
        let mut touch = 0u32;
        for i in 0..n {
            hash[i] = cache.hash(&keys[i], used);
            touch ^= cache.touch(hash[i]);
        }
        std::hint::black_box(touch);
        for i in 0..n {
            if let Some(e) = cache.find(hash[i], &keys[i], used) {
                at[i] = e as u32;
            }
        }
        // The misses through the tuple space, all at once.
        let mut miss_at = [0u8; BATCH];
        let mut m = 0;
        for i in (0..n).filter(|&i| at[i] == NONE) {
            miss_at[m] = i as u8;
            m += 1;
        }
        let insert_all = cache.note(n - m, m);
        let mut found: [Option<&Arc<Installed>>; BATCH] = [None; BATCH];
        dispatch!(&v.tables, t => t.lookup_picked(&keys, &miss_at[..m], &mut found[..m], shard));
        {
            let mut first: [Option<&Installed>; BATCH] = [None; BATCH];
            for j in 0..m {
                first[usize::from(miss_at[j])] = found[j].map(|a| &**a);
            }
            for i in (0..n).filter(|&i| at[i] != NONE) {
                first[i] = cache.rules[at[i] as usize].as_deref();
            }
            let slots = engine::outcome_slots(out, n);
            let cells = self.counters.shard(shard);
            for i in 0..n {
                engine::process_into::<false>(
                    &mut works[i],
                    |_: &Work<'_>| keys[i],
                    v.need,
                    first[i],
                    &mut |c, k, a| v.lookup(c, k, a),
                    cells,
                    &mut slots[i],
                );
            }
        }
        // Remember the misses (after the hits were read: a miss may take a hit's way).
        for j in 0..m {
            let i = usize::from(miss_at[j]);
            if insert_all || (hash[i] >> 40) & 15 == 0 {
                cache.put(hash[i], &keys[i], used, found[j]);
            }
        }
    }

    /// Issue 14's floor: what a one-subtable lookup cannot do without, per frame, up to
    /// `stage` (0: the words the tables read, from the common frame; 1: and the masked
    /// key's hash; 2: and the probe of chain 0's first subtable; 3: and the matched rule's
    /// line), one frame after the other: no batch, ranks, counters or outcomes. For
    /// weir-bench flow's accounting of the per-packet cost (a sum, to keep the work).
    #[doc(hidden)]
    pub fn floor(v: &Version, frames: &[Vec<u8>], stage: u8) -> u64 {
        match stage {
            0 => dispatch!(&v.tables, t => t.floor::<0>(v.need, frames)),
            1 => dispatch!(&v.tables, t => t.floor::<1>(v.need, frames)),
            2 => dispatch!(&v.tables, t => t.floor::<2>(v.need, frames)),
            _ => dispatch!(&v.tables, t => t.floor::<3>(v.need, frames)),
        }
    }

    /// Classify and act on one packet.
    pub fn process(&self, w: &mut Work<'_>) -> Outcome {
        let v = self.snapshot();
        let key = extract(w.data, w.indev, v.need).0;
        let lookup = &mut |c, k: &Key, a| v.lookup(c, k, a);
        engine::process(w, &key, v.need, None, lookup, &self.counters)
    }
}

/// Ways a flow cache bucket has.
const WAYS: usize = 4;

/// An exact-match cache of first lookups (chain 0), per worker: whole flow keys (the words
/// the rules read) to the rule they matched (or none), valid for one published version
/// and count of in-place updates (cleared when either changes).
///
/// Set-associative, 4 ways a bucket, as OVS's EMC probes two places: a direct-mapped cache
/// holding 4,096 flows in 8,192 entries lost the ~39% of flows that share their slot with
/// another one to each other on every pass (weir-bench flow, hot, 16 masks: 118 ns/packet
/// with the cache against 124 without). A bucket's 4 signatures (32 bits of the key's
/// hash, never 0) are one 16-byte load; the key words, `stride` a way, are read only when
/// a signature agrees, and only the words the rules read are stored (3 for IPv4 5-tuple
/// rules: 24 bytes an entry, not 112).
pub struct FlowCache {
    version: u64,
    edits: u64,
    /// Words a key has (the version's count), fixed until the next clear.
    stride: usize,
    /// Buckets - 1 (a power of two).
    mask: usize,
    sigs: Vec<[u32; WAYS]>,
    /// The key words, `stride` an entry, entry `bucket * WAYS + way`.
    keys: Vec<u64>,
    rules: Vec<Option<Arc<Installed>>>,
    /// Entries written since the last clear (a clear of an unused cache is free).
    filled: usize,
    /// Packets that hit and missed, since the cache was made.
    hits: u64,
    misses: u64,
    /// Hits and misses of the last few thousand packets (halved as they pass 4,096).
    recent_hits: u32,
    recent_misses: u32,
}

impl FlowCache {
    /// A cache of `entries` (rounded up to a power of two, at least 64) flows.
    pub fn new(entries: usize) -> FlowCache {
        let n = entries.next_power_of_two().max(64);
        FlowCache {
            version: 0,
            edits: 0,
            stride: 0,
            mask: n / WAYS - 1,
            sigs: vec![[0; WAYS]; n / WAYS],
            keys: Vec::new(),
            rules: vec![None; n],
            filled: 0,
            hits: 0,
            misses: 0,
            recent_hits: 0,
            recent_misses: 0,
        }
    }

    /// Count a batch's hits and misses; whether its misses should all go in. Once the
    /// cache has been filled over and most lookups miss (streaming traffic, or more flows
    /// than entries), only the misses whose hash picks them go in (1 in 16, always the
    /// same flows): each insert is an `Arc` clone and drop and a line of key words
    /// written for a flow that likely never comes back (weir-bench flow, streaming, 1k
    /// rules: +60-90 ns a packet over no cache when every miss went in). OVS's EMC
    /// inserts 1 miss in 100 always; here a hot set that fits keeps warming at full rate.
    fn note(&mut self, hits: usize, misses: usize) -> bool {
        self.hits += hits as u64;
        self.misses += misses as u64;
        self.recent_hits += hits as u32;
        self.recent_misses += misses as u32;
        if self.recent_hits + self.recent_misses >= 4096 {
            self.recent_hits /= 2;
            self.recent_misses /= 2;
        }
        self.filled < self.rules.len() || self.recent_hits * 4 >= self.recent_misses
    }

    /// Packets that hit and that missed the cache so far.
    pub fn hits_misses(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    fn clear(&mut self, version: u64, edits: u64, stride: usize) {
        self.version = version;
        self.edits = edits;
        if self.stride != stride {
            self.stride = stride;
            self.keys = vec![0; self.rules.len() * stride];
        }
        if self.filled > 0 {
            self.filled = 0;
            self.sigs.iter_mut().for_each(|s| *s = [0; WAYS]);
            self.rules.iter_mut().for_each(|r| *r = None);
        }
    }

    #[inline]
    fn sig(hash: u64) -> u32 {
        ((hash >> 32) as u32) | 1
    }

    /// The hash of a key's words `used`.
    #[inline]
    fn hash(&self, key: &Key, used: &[usize]) -> u64 {
        let mut w = [0u64; WORDS];
        for (o, &x) in w.iter_mut().zip(used) {
            *o = key.word(x);
        }
        hash_slice(&w[..used.len()])
    }

    /// A bucket's first signature (loaded ahead of the compares).
    #[inline]
    fn touch(&self, hash: u64) -> u32 {
        self.sigs[hash as usize & self.mask][0]
    }

    /// The entry holding the key's words `used`.
    #[inline]
    fn find(&self, hash: u64, key: &Key, used: &[usize]) -> Option<usize> {
        let b = hash as usize & self.mask;
        let sig = Self::sig(hash);
        let sigs = &self.sigs[b];
        for (way, &s) in sigs.iter().enumerate() {
            if s == sig {
                let e = b * WAYS + way;
                let at = e * self.stride;
                if let Some(k) = self.keys.get(at..at + used.len()) {
                    // Word by word, no `memcmp` call.
                    let diff = k.iter().zip(used).fold(0, |d, (a, &x)| d | (a ^ key.word(x)));
                    if diff == 0 {
                        return Some(e);
                    }
                }
            }
        }
        None
    }

    /// Remember a lookup: an empty way, else the way the hash picks.
    fn put(&mut self, hash: u64, key: &Key, used: &[usize], rule: Option<&Arc<Installed>>) {
        if self.find(hash, key, used).is_some() {
            // An earlier packet of the same batch put it.
            return;
        }
        let b = hash as usize & self.mask;
        let sig = Self::sig(hash);
        let way = self.sigs[b].iter().position(|&s| s == 0).unwrap_or((hash >> 24) as usize % WAYS);
        let e = b * WAYS + way;
        let at = e * self.stride;
        if let Some(k) = self.keys.get_mut(at..at + used.len()) {
            for (o, &x) in k.iter_mut().zip(used) {
                *o = key.word(x);
            }
            self.sigs[b][way] = sig;
            self.rules[e] = rule.cloned();
            self.filled += 1;
        }
    }
}

/// A flow cache key's hash: its words in pairs, one 128-bit multiply a pair (as
/// `hash_words`, for a run-time count of words).
#[inline]
fn hash_slice(w: &[u64]) -> u64 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15 ^ w.len() as u64;
    let mut pairs = w.chunks_exact(2);
    for (k, p) in pairs.by_ref().enumerate() {
        h ^= mum(p[0] ^ SALT[(2 * k) % 4], p[1] ^ SALT[(2 * k + 1) % 4]);
    }
    if let [last] = pairs.remainder() {
        h ^= mum(*last ^ SALT[3], 0x9e37_79b9_7f4a_7c15);
    }
    h ^ (h >> 29)
}

fn clone_tables(t: &AnyTables) -> AnyTables {
    match t {
        AnyTables::W1(x) => AnyTables::W1(x.clone()),
        AnyTables::W2(x) => AnyTables::W2(x.clone()),
        AnyTables::W4(x) => AnyTables::W4(x.clone()),
        AnyTables::W8(x) => AnyTables::W8(x.clone()),
        AnyTables::W14(x) => AnyTables::W14(x.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Interner, Verdict};
    use crate::rule::Rule;

    /// An installed rule known by its seq (what it matches is not read here).
    fn rule(int: &mut Interner, seq: u64) -> Arc<Installed> {
        let r = Rule::new(0x0800);
        let c = r.compile(&mut |_| 0);
        let m = int.mask_id(&c.mask);
        Arc::new(int.install(&r, 1, seq, &c, &[], m, 0))
    }

    /// A key's rules: `first` held once (the list keeps only the rules after it), every
    /// rule walked best first, and `first_holding` the first rule that holds among those
    /// before the bound, `first` tested before the list, the bound stopping the walk.
    #[test]
    fn slot_rules_keep_first_once_and_walk_in_rank_order() {
        let mut int = Interner::default();
        let rules: Vec<_> = (0..3).map(|s| rule(&mut int, s)).collect();
        let seqs = |r: &SlotRules| r.iter().map(|r| r.seq).collect::<Vec<_>>();
        let one = SlotRules::of(rules[..1].to_vec());
        assert!(one.rest.is_none());
        assert_eq!((seqs(&one), one.len()), (vec![0], 1));
        let three = SlotRules::of(rules.clone());
        assert_eq!(three.rest().len(), 2, "first is not in the list");
        assert_eq!((seqs(&three), three.len()), (vec![0, 1, 2], 3));
        let found = |bound: u64, holds: &dyn Fn(u64) -> bool| {
            three.first_holding(|r| r.rank() < (1, bound), |r| holds(r.seq)).map(|r| r.seq)
        };
        assert_eq!(found(9, &|_| true), Some(0));
        assert_eq!(found(9, &|s| s != 0), Some(1), "past first when it does not hold");
        assert_eq!(found(9, &|s| s == 2), Some(2));
        assert_eq!(found(2, &|s| s == 2), None, "the bound stops the list");
        assert_eq!(found(1, &|s| s != 0), None);
        assert_eq!(found(0, &|_| true), None, "first ranks at the bound");
    }

    /// How far from their home slots `keys` sit in a store of 2,048 slots they fill about
    /// half (the fullest a store gets before it grows): the mean and the largest distance.
    fn spread<const W: usize>(keys: &[[u64; W]]) -> (f64, usize) {
        let mut int = Interner::default();
        let store = Store::<W>::new(keys.len() / 2);
        assert_eq!(store.slots.len(), 2048);
        for (i, k) in keys.iter().enumerate() {
            assert!(store.try_insert(*k, hash_words(k), rule(&mut int, i as u64)).is_ok());
        }
        let mask = store.slots.len() - 1;
        let far: Vec<usize> = keys
            .iter()
            .map(|k| {
                let h = hash_words(k);
                let (at, _) = store.probe(h, |e| same(&e.key, k)).expect("inserted");
                at.wrapping_sub(h as usize) & mask
            })
            .collect();
        (
            far.iter().sum::<usize>() as f64 / far.len() as f64,
            far.iter().copied().max().unwrap_or(0),
        )
    }

    /// `hash_words` spreads keys that differ in few bits, as rule sets' masked keys do
    /// (addresses and ports counting up, one byte, one high bit pattern), over the slots as
    /// a random hash would: 1,000 keys in 2,048 slots sit on average ~0.5 slots past their
    /// home under linear probing, rarely more than ~15. A hash keeping too few of its
    /// product's bits, or mixing too few of the key's into the slot's index, piles them up.
    #[test]
    fn hashes_spread_structured_keys_over_the_slots() {
        let n = 1000u64;
        let check = |what: &str, (mean, max): (f64, usize)| {
            assert!(mean < 1.0 && max <= 40, "{what}: mean {mean:.2}, max {max} slots past home");
        };
        // The bench's rule sets: protocol and destination port in one lane, both addresses
        // in the other (`shape::SPLIT`).
        let tuple: Vec<[u64; 2]> = (0..n)
            .map(|i| {
                let port = (1000 + i % 50) << 16;
                [0x0400_0600_0800_0000 | port, (0x0a00_0000 + i) | (0xc0a8_0000 + i / 7) << 32]
            })
            .collect();
        check("5-tuple", spread(&tuple));
        check("low bits", spread(&(0..n).map(|i| [i, 0]).collect::<Vec<_>>()));
        check("middle bits", spread(&(0..n).map(|i| [0, i << 24]).collect::<Vec<_>>()));
        check("high bits", spread(&(0..n).map(|i| [0, i << 54]).collect::<Vec<_>>()));
        check("third word", spread(&(0..n).map(|i| [0, 0, i << 8, 0]).collect::<Vec<_>>()));
        check("third word high", spread(&(0..n).map(|i| [0, 0, i << 40, 0]).collect::<Vec<_>>()));
        check(
            "second byte",
            spread(&(0..n).map(|i| [(i % 256) << 8, i / 256]).collect::<Vec<_>>()),
        );
        check("one word", spread(&(0..n).map(|i| [i << 32]).collect::<Vec<_>>()));
        check("four words", spread(&(0..n).map(|i| [0, i << 16, 0, !i]).collect::<Vec<_>>()));
    }

    /// The lookups' probe (`Probe::find`) against the tables' hard cases, with hashes the
    /// test picks (a store takes the hash it is given): 40 distinct keys sharing one
    /// signature and one home slot, the table's last, so their run wraps to slot 0 and a
    /// probe passes signature matches whose key differs; 100 keys of their own hashes, so
    /// entries span several chunks; deletes in the run (tombstones the probe must pass),
    /// the deleted keys re-added (a tombstone's slot reused, a new entry) and a second rule
    /// on a key (its entry replaced). Each answer is also the writer's walk's
    /// (`Store::probe`).
    #[test]
    fn probe_finds_keys_past_shared_signatures_tombstones_and_the_end() {
        let mut int = Interner::default();
        let store = Store::<2>::new(200);
        let last = store.slots.len() - 1;
        let shared = 0x8000_0000 | last as u32;
        let run: Vec<[u64; 2]> = (0..40u64).map(|i| [i, !i]).collect();
        for (i, k) in run.iter().enumerate() {
            assert!(store.try_insert(*k, shared, rule(&mut int, i as u64)).is_ok());
        }
        let own: Vec<([u64; 2], u32)> = (0..100u64)
            .map(|i| {
                let k = [1000 + i, 7];
                (k, hash_words(&k))
            })
            .collect();
        for (j, (k, h)) in own.iter().enumerate() {
            assert!(store.try_insert(*k, *h, rule(&mut int, 100 + j as u64)).is_ok());
        }
        assert!(store.next.load(Ordering::Relaxed) > 2 * CHUNK, "entries span chunks");
        let seqs =
            |e: Option<&Entry<2>>| e.map(|e| e.rules.iter().map(|r| r.seq).collect::<Vec<_>>());
        let check = |k: &[u64; 2], h: u32, want: Option<Vec<u64>>| {
            let p = store.probe_view();
            assert_eq!(seqs(p.find(k, h)), want, "key {k:?}");
            assert_eq!(seqs(p.find_near(k, h)), want, "key {k:?}, the one-mask probe");
            let walked = store.probe(h, |e| same(&e.key, k)).map(|(_, e)| e);
            assert_eq!(seqs(walked), want, "key {k:?}, the writer's walk");
        };
        // The run wrapped: its first key sits in the last slot, the others from slot 0 on.
        assert_eq!(store.slots[last].load(Ordering::Relaxed) as u32, shared);
        assert_eq!(store.slots[0].load(Ordering::Relaxed) as u32, shared);
        for (i, k) in run.iter().enumerate() {
            check(k, shared, Some(vec![i as u64]));
        }
        for (j, (k, h)) in own.iter().enumerate() {
            check(k, *h, Some(vec![100 + j as u64]));
        }
        // `find_near`'s pick by data: keys one slot past a home slot of another signature
        // (the pick's second slot), and keys further on (its walk), are among those checked.
        let mask = last;
        let displaced = |d: usize| {
            own.iter()
                .filter(|(k, h)| {
                    let home = *h as usize & mask;
                    let at = store.probe(*h, |e| same(&e.key, k)).map(|(i, _)| i);
                    at == Some((home + d) & mask)
                        && store.slots[home].load(Ordering::Relaxed) as u32 != *h
                })
                .count()
        };
        assert!(displaced(1) > 0, "no key one slot past a home of another signature");
        assert!(displaced(2) + displaced(3) > 0, "no key two or three slots past its home");
        // Not there, with the run's signature: the probe walks the whole run and misses.
        check(&[999, 999], shared, None);
        for i in (0..40).step_by(3) {
            assert!(matches!(store.remove(shared, i as u64), Removed::Done));
        }
        for (i, k) in run.iter().enumerate() {
            check(k, shared, (i % 3 != 0).then(|| vec![i as u64]));
        }
        for i in (0..40).step_by(3) {
            assert!(store.try_insert(run[i], shared, rule(&mut int, 200 + i as u64)).is_ok());
        }
        assert!(store.try_insert(run[5], shared, rule(&mut int, 300)).is_ok());
        for (i, k) in run.iter().enumerate() {
            let want = match i {
                5 => vec![5, 300],
                _ if i % 3 == 0 => vec![200 + i as u64],
                _ => vec![i as u64],
            };
            check(k, shared, Some(want));
        }
        check(&[999, 999], shared, None);
    }

    /// Rules `dst_ip 10.0.0.D dst_port 53` (D = 1, 2, 3; lines 1-3): one mask, read
    /// through ports (`Need::ALL`: the one-mask path's loop for it, whose counter shard is
    /// tested once a batch).
    fn one_mask_classifier() -> Classifier {
        let mut set = RuleSet::new();
        for (i, d) in [1u8, 2, 3].iter().enumerate() {
            let text = format!(
                "prio 1 protocol ip flower ip_proto udp dst_ip 10.0.0.{d} dst_port 53 action drop"
            );
            set.push(crate::rule::parse_rule(&text, i + 1).unwrap()).unwrap();
        }
        let c = Classifier::new(&set);
        assert_eq!(c.snapshot().need, Need::ALL);
        c
    }

    /// A 42-byte IPv4 UDP frame to 10.0.0.d port 53 (TTL 64, every other byte 0).
    fn dns_frame_to(d: u8) -> Vec<u8> {
        let mut f = vec![0u8; 42];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[22] = 64;
        f[23] = 17;
        f[30..34].copy_from_slice(&[10, 0, 0, d]);
        f[36..38].copy_from_slice(&53u16.to_be_bytes());
        f
    }

    /// UDP frames to 10.0.0.d port 53 for each d of `dsts`, through `process_batch` in batches.
    fn run_to(c: &Classifier, v: &Version, dsts: &[u8]) -> Vec<Outcome> {
        let frames: Vec<Vec<u8>> = dsts.iter().map(|&d| dns_frame_to(d)).collect();
        process_in_batches(c, v, &frames, 42, |_| {})
    }

    /// `frames` (34-byte frames) through `process_batch` on version `v` in batches, each
    /// packet's matched line asserted equal to `reference`'s (`what` names the case): the
    /// reference's lines.
    fn lines_as_the_reference(
        c: &Classifier,
        v: &Version,
        reference: &crate::reference::Reference,
        frames: &[Vec<u8>],
        what: &str,
    ) -> Vec<Option<usize>> {
        let mut want = Vec::new();
        let outs = process_in_batches(c, v, frames, 34, |works| {
            for w in works {
                want.push(reference.process(w).line());
            }
        });
        let got: Vec<Option<usize>> = outs.iter().map(|o| o.line()).collect();
        assert_eq!(got, want, "{what}");
        want
    }

    /// `frames` (each `wire_len` bytes on the wire) through `process_batch` in batches of
    /// `BATCH`, as the datapath hands them over; `after` sees each batch's works once it ran.
    fn process_in_batches(
        c: &Classifier,
        v: &Version,
        frames: &[Vec<u8>],
        wire_len: u32,
        mut after: impl FnMut(&mut [Work<'_>]),
    ) -> Vec<Outcome> {
        let mut outs = Vec::new();
        for chunk in frames.chunks(BATCH) {
            let mut datas: Vec<Vec<u8>> = chunk.to_vec();
            let mut mirrored: Vec<Vec<(u16, Vec<u8>)>> = vec![Vec::new(); chunk.len()];
            let mut works: Vec<Work<'_>> = datas
                .iter_mut()
                .zip(mirrored.iter_mut())
                .map(|(data, mirrored)| Work::new(data, wire_len, 0, 0, mirrored))
                .collect();
            c.process_batch(v, &mut works, &mut outs);
            after(&mut works);
        }
        outs
    }

    /// The one-mask path (`process_one`) counts its batch's matches into the store's
    /// ranking count (`Hits`), as the other paths do: from its misses, so a batch of
    /// matches, misses and a short last batch checks the subtraction.
    #[test]
    fn one_mask_batches_count_their_hits() {
        let c = one_mask_classifier();
        // 70 packets (batches of 32, 32 and 6), every fifth to 10.0.0.9 (no rule).
        let dsts: Vec<u8> = (0..70).map(|i| if i % 5 == 0 { 9 } else { 1 + i % 3 }).collect();
        let v = c.snapshot();
        let outs = run_to(&c, &v, &dsts);
        let matched = outs.iter().filter(|o| o.line().is_some()).count();
        assert_eq!((outs.len(), matched), (70, 56));
        let hits = dispatch!(&v.tables, t => t.one_subtable().map(|st| st.store.hits.get()));
        assert_eq!(hits, Some(56), "one subtable, its matches counted");
    }

    /// The one-mask path's outcomes whole (line, verdict, mark, modified) for rules the
    /// outcome writes from `Installed::simple` (`drop`, `pass`), rules whose actions
    /// run (a mark set then `drop`, a redirect), a rule of line 0 (its line is `Some(0)`:
    /// whether a rule matched is not read from the line) and packets no rule matches, each
    /// packet's own mark kept where no action sets it; equal to `Classifier::process`'s,
    /// packet by packet, and to the outcomes written out here.
    #[test]
    fn one_mask_outcomes_are_written_whole() {
        let rule = |d: u8, action: &str, line: usize| {
            let text = format!(
                "prio 1 protocol ip flower ip_proto udp dst_ip 10.0.0.{d} dst_port 53 action {action}"
            );
            crate::rule::parse_rule(&text, line).unwrap()
        };
        let mut set = RuleSet::new();
        set.push(rule(2, "pass", 2)).unwrap();
        set.push(rule(3, "skbedit mark 0x12 pipe action drop", 3)).unwrap();
        set.push(rule(4, "mirred egress redirect dev b", 4)).unwrap();
        let c = Classifier::new(&set);
        c.insert(&rule(1, "drop", 0)).unwrap();
        let v = c.snapshot();
        assert_eq!(v.need, Need::ALL);
        assert!(dispatch!(&v.tables, t => t.one_subtable().is_some()), "one mask");
        // 70 packets (batches of 32, 32 and 6) to 10.0.0.1-4 and 10.0.0.9 (no rule).
        let dsts: Vec<u8> = (0..70u32).map(|i| [1, 2, 3, 4, 9][i as usize % 5]).collect();
        let mark = |i: usize| 0x100 + i as u32;
        let want = |i: usize, d: u8| match d {
            1 => Outcome::new(Some(0), Verdict::Drop, mark(i), false),
            2 => Outcome::new(Some(2), Verdict::Pass, mark(i), false),
            3 => Outcome::new(Some(3), Verdict::Drop, 0x12, false),
            4 => Outcome::new(Some(4), Verdict::Redirect(0), mark(i), false),
            _ => Outcome::new(None, Verdict::Pass, mark(i), false),
        };
        let mut outs = Vec::new();
        for (b, chunk) in dsts.chunks(BATCH).enumerate() {
            let mut datas: Vec<Vec<u8>> = chunk.iter().map(|&d| dns_frame_to(d)).collect();
            let mut mirrored: Vec<Vec<(u16, Vec<u8>)>> = vec![Vec::new(); chunk.len()];
            let mut works: Vec<Work<'_>> = datas
                .iter_mut()
                .zip(mirrored.iter_mut())
                .enumerate()
                .map(|(j, (data, mirrored))| Work {
                    mark: mark(b * BATCH + j),
                    ..Work::new(data, 42, 0, 0, mirrored)
                })
                .collect();
            c.process_batch(&v, &mut works, &mut outs);
        }
        for (i, (&d, o)) in dsts.iter().zip(&outs).enumerate() {
            assert_eq!(*o, want(i, d), "packet {i} to 10.0.0.{d}");
            let line = match d {
                1 => Some(0),
                2..=4 => Some(usize::from(d)),
                _ => None,
            };
            assert_eq!(o.line(), line, "packet {i}'s line");
            let (mut data, mut mirrored) = (dns_frame_to(d), Vec::new());
            let mut w = Work { mark: mark(i), ..Work::new(&mut data, 42, 0, 0, &mut mirrored) };
            assert_eq!(*o, c.process(&mut w), "packet {i} alone");
        }
        assert_eq!(outs.len(), 70);
    }

    /// `shape::SPLIT`'s words are the full key's: IPv4 5-tuple rules over both addresses
    /// and ports (one mask and four; a source port too) plan the split shape, and for
    /// frames on and off the common frame's path (TCP, UDP, SCTP, ICMP, ports cut short, a
    /// fragment, a VLAN tag, IPv6, a longer IPv4 header) `extract_words` gives the same
    /// words in each flavour, unmasked and (as the one-subtable path calls it) under its
    /// subtable's mask folded into the tuple masks; so does a rule set that reads one byte of
    /// word 4 (its lane's tuple mask all ones, its subtable's one byte). Rule sets of
    /// other layouts (one lane; two, words 4 and 9 sharing one) do not take the split shape.
    #[test]
    fn split_shape_takes_the_full_keys_words() {
        let mut rng = weir_testkit::SplitMix64::new(0x5917);
        let set_of = |lines: &[String]| {
            let mut set = RuleSet::new();
            for (i, t) in lines.iter().enumerate() {
                set.push(crate::rule::parse_rule(t, i + 1).unwrap()).unwrap();
            }
            set
        };
        let ip = |a: u32| std::net::Ipv4Addr::from(a);
        let mut frames: Vec<Vec<u8>> = Vec::new();
        for i in 0..400u32 {
            let proto = [6u8, 17, 132, 1][(i % 4) as usize];
            let mut f = vec![0u8; 14 + 20 + 20];
            f[0..12].copy_from_slice(&rng.next_u64().to_le_bytes().repeat(2)[..12]);
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[15] = rng.u32() as u8;
            f[22] = rng.u32() as u8;
            f[23] = proto;
            f[26..34].copy_from_slice(&rng.next_u64().to_le_bytes());
            f[34..38].copy_from_slice(&rng.u32().to_le_bytes());
            f[46] = 0x50;
            f[47] = rng.u32() as u8;
            match i % 10 {
                1 => f.truncate(36),
                2 => f[20] = 0x20,
                3 => f.splice(12..12, [0x81, 0x00, 0x00, 0x05]).for_each(drop),
                4 => f[12..14].copy_from_slice(&[0x86, 0xdd]),
                5 => f[14] = 0x46,
                _ => {}
            }
            frames.push(f);
        }
        let five = |masks: u32, sport: bool| -> Vec<String> {
            (0..40u32)
                .map(|i| {
                    let proto = if i % 2 == 0 { "tcp" } else { "udp" };
                    let sp = if sport { format!(" src_port {}", 1 + i) } else { String::new() };
                    format!(
                        "prio 1 protocol ip flower ip_proto {proto} src_ip {}/{} dst_ip {} dst_port {}{sp} action drop",
                        ip(i << 8),
                        32 - 8 * (i % masks),
                        ip(i),
                        1000 + i
                    )
                })
                .collect()
        };
        let mut compared = 0;
        for (lines, split) in [
            (five(1, false), true),
            (five(4, false), true),
            (five(4, true), true),
            // Word 4 read in its destination's first byte only (its lane's mask not all ones).
            (vec!["prio 1 protocol ip flower ip_proto udp dst_ip 10.0.0.0/8 dst_port 53 action drop".to_string()], true),
            (vec!["prio 1 protocol ip flower src_ip 10.0.0.0/8 action drop".to_string()], false),
            // Two lanes of another layout: word 0 alone (the device fills its first half),
            // words 4 (the destination address) and 9 share one.
            (vec!["prio 1 protocol ip flower indev eth1 ip_proto tcp dst_ip 10.0.0.0/8 dst_port 80 action drop".to_string()], false),
        ] {
            let c = Classifier::new(&set_of(&lines));
            let v = c.snapshot();
            dispatch!(&v.tables, t => {
                let Some(tm) = t.tuple.as_deref() else { panic!("no tuple plan: {lines:?} {:?}", t.lanes) };
                assert_eq!(shape::split(tm), split, "{lines:?}");
                let mut plain = [0u64; 16];
                for f in &frames {
                    let no = &Tables::NO_MASK;
                    let full = t.extract_words::<{ shape::FULL }>(f, 0, Need::ALL, &mut plain, tm, no);
                    let tuple = t.extract_words::<{ shape::TUPLE }>(f, 0, Need::ALL, &mut plain, tm, no);
                    assert_eq!(tuple, full, "{f:02x?}");
                    if split {
                        let s = t.extract_words::<{ shape::SPLIT }>(f, 0, Need::ALL, &mut plain, tm, no);
                        assert_eq!(s, full, "{f:02x?}");
                        // As `process_one` calls it: its subtable's mask folded into `tm`.
                        let gm = &t.chain(0).unwrap().subtables[0].gmask;
                        let tmf: [[u64; 3]; _] = std::array::from_fn(|o| tm[o].map(|m| m & gm[o]));
                        let s = t.extract_words::<{ shape::SPLIT }>(f, 0, Need::ALL, &mut plain, &tmf, gm);
                        let full = t.extract_words::<{ shape::FULL }>(f, 0, Need::ALL, &mut plain, tm, gm);
                        assert_eq!(s, full, "{f:02x?}");
                        compared += 1;
                    }
                }
            });
        }
        assert_eq!(compared, 4 * frames.len());
    }

    /// `c`'s rule counters from more threads than there are counter shards, each running
    /// `dsts` (`run_to`) `rounds` times: the threads that own a shard count with a plain
    /// load and store (`hit_owned`, the shard tested once a batch), the others with atomic
    /// adds on the shared one; no hit is lost, and each packet's line is `line(d)`.
    fn counts_lose_no_hit_across_threads(c: &Classifier, dsts: &[u8], line: fn(u8) -> usize) {
        let (threads, rounds) = (engine::COUNTER_SHARDS + 2, 20_000);
        let start = std::sync::Barrier::new(threads);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let v = c.snapshot();
                    start.wait();
                    for _ in 0..rounds {
                        let outs = run_to(c, &v, dsts);
                        assert!(outs.iter().zip(dsts).all(|(o, &d)| o.line() == Some(line(d))));
                    }
                });
            }
        });
        let packets: u64 = c.counters().iter().map(|x| x.1).sum();
        assert_eq!(packets, (threads * rounds * dsts.len()) as u64);
    }

    /// The one-mask path's (`process_one`).
    #[test]
    fn one_mask_counts_lose_no_hit_across_threads() {
        let dsts: Vec<u8> = (0..BATCH as u8).map(|i| 1 + i % 3).collect();
        counts_lose_no_hit_across_threads(&one_mask_classifier(), &dsts, usize::from);
    }

    /// The multi-subtable path's (`act_on_batch`): `one_mask_classifier`'s rules and one
    /// of another mask (`dst_ip 10.0.0.0/24`, line 4, a lower priority), which the packets
    /// to 10.0.0.9 match.
    #[test]
    fn two_mask_counts_lose_no_hit_across_threads() {
        let c = one_mask_classifier();
        let wide =
            "prio 2 protocol ip flower ip_proto udp dst_ip 10.0.0.0/24 dst_port 53 action drop";
        c.insert(&crate::rule::parse_rule(wide, 4).unwrap()).unwrap();
        let v = c.snapshot();
        assert!(dispatch!(&v.tables, t => t.one_subtable().is_none()), "two subtables");
        let dsts: Vec<u8> = (0..BATCH as u8).map(|i| [1, 2, 3, 9][usize::from(i % 4)]).collect();
        counts_lose_no_hit_across_threads(&c, &dsts, |d| if d == 9 { 4 } else { usize::from(d) });
    }

    /// `CandTables::batch_words` (half by half over a batch) is `word_of` packet by
    /// packet: tables of random words over halves 0-5 of two-word keys (halves 4 and 5
    /// past the key: they read 0), either byte order, in twos and threes (the AND of
    /// halves), over batches of 32, 7 and 1 random keys, the words past the batch left
    /// as they were.
    #[test]
    fn batch_words_are_each_packets_word() {
        let mut rng = weir_testkit::SplitMix64::new(0xca4d_0034);
        let mut half = |h: u8, swap: bool| CandHalf {
            half: h,
            swap,
            fixed: Vec::new(),
            words: Box::new(std::array::from_fn(|_| AtomicU64::new(rng.next_u64()))),
        };
        let sets: Vec<Vec<CandHalf>> = vec![
            vec![half(2, true), half(3, true)],
            vec![half(0, false), half(1, true), half(3, false)],
            vec![half(1, false), half(4, true)],
            vec![half(5, false), half(2, false)],
        ];
        let mut rng = weir_testkit::SplitMix64::new(0x34);
        for halves in sets {
            let t = CandTables { ids: Vec::new(), halves, keys: 0, selective: true };
            for n in [BATCH, 7, 1] {
                let g: Vec<[u64; 2]> = (0..n).map(|_| [rng.next_u64(), rng.next_u64()]).collect();
                let mut out = [!0u64; BATCH];
                t.batch_words(&g, &mut out[..n]);
                let want: Vec<u64> = g.iter().map(|k| t.word_of(k)).collect();
                assert_eq!(
                    out[..n],
                    want[..],
                    "halves {:?}, {n} keys",
                    t.halves.iter().map(|h| (h.half, h.swap)).collect::<Vec<_>>()
                );
                assert!(out[n..].iter().all(|&w| w == !0), "past the batch");
            }
        }
    }

    /// The candidate walk (`walk_candidates`) answers each packet with its best rule and
    /// counts each match once, in its rule's subtable (`Hits`, the ranking count):
    /// weir-bench's 16 masks (source and destination /32, /24, /16, /8), 16 rules each of
    /// the mask's priority (the tables answer), their prefixes drawn under 4 addresses so
    /// that a packet in a /32 rule's prefixes is also in wider ones: candidates after its
    /// hit, which the walk passes over. Packets on each rule's prefixes and random ones, in
    /// batches of 32, against the reference; each subtable's count is the number of packets
    /// the reference matched to rules of its mask.
    #[test]
    fn candidate_walk_counts_each_match_in_its_subtable() {
        let bases = [0x0a00_0000u32, 0x0a01_0000, 0xc0a8_0000, 0xac10_0000];
        let mut rng = weir_testkit::SplitMix64::new(0x34_cafe);
        let (set, specs, frames) = sixteen_mask_rules(256, &mut rng, |rng| {
            bases[rng.below_usize(4)] | ((rng.u32() & 0xff) << (8 * rng.below(2) as u32))
        });
        let c = Classifier::new(&set);
        assert_eq!(lookup_state(&c), (true, 0, 2), "the tables answer");
        let reference = crate::reference::Reference::new(&set);
        let v = c.snapshot();
        let want = lines_as_the_reference(&c, &v, &reference, &frames, "");
        // Matches per mask (the rule's line - 1 is its index in `specs`).
        let mut per_mask = std::collections::BTreeMap::new();
        for l in want.iter().flatten() {
            let (_, sl, _, dl) = specs[l - 1];
            *per_mask.entry((sl, dl)).or_insert(0u64) += 1;
        }
        let widest = per_mask.get(&(8, 8)).copied().unwrap_or(0);
        assert!(per_mask.len() >= 12 && widest > 0, "matches spread over the masks: {per_mask:?}");
        let mut counted = std::collections::BTreeMap::new();
        dispatch!(&v.tables, t => {
            for st in &t.chain(0).expect("chain 0").subtables {
                let k = scatter(&st.gmask, &t.lanes);
                let len = |b: &[u8]| b.iter().map(|x| x.count_ones()).sum::<u32>();
                let (sl, dl) = (len(&k.0[32..36]), len(&k.0[36..40]));
                counted.insert((sl, dl), st.store.hits.get());
            }
        });
        counted.retain(|_, n| *n > 0);
        assert_eq!(counted, per_mask);
    }

    /// The candidate walk's second loop (`walk`: the candidates left after a packet's first
    /// match): a /32 subtable before a /24 one in the chain (their best priorities 2 and 3),
    /// then /24 rules of priority 1 inserted in place over half the /32 rules' hosts (the
    /// /24 subtable's best becomes 1; the chain keeps its order), so that a packet's first
    /// match is beaten by a later candidate, or its later candidate's slot holds only a
    /// worse rule (priority 3: its rank compared and refused), or it has no first match in
    /// the /32 subtable. Answers against the reference, and each subtable's count
    /// (`Hits`): a match counted in its subtable each time it is the packet's best so far
    /// (the pass by subtable counts the same).
    #[test]
    fn the_walk_counts_a_later_better_match_in_its_subtable() {
        let rule = |text: String, line: usize| crate::rule::parse_rule(&text, line).unwrap();
        let mut set = RuleSet::new();
        let mut texts = Vec::new();
        for b in 0..8 {
            texts.push(format!("prio 2 protocol ip flower src_ip 10.1.{b}.5/32 action drop"));
            texts.push(format!("prio 2 protocol ip flower src_ip 10.2.{b}.7/32 action drop"));
            texts.push(format!("prio 3 protocol ip flower src_ip 10.2.{b}.0/24 action drop"));
        }
        for (i, t) in texts.iter().enumerate() {
            set.push(rule(t.clone(), i + 1)).unwrap();
        }
        let c = Classifier::new(&set);
        for b in 0..4 {
            let t = format!("prio 1 protocol ip flower src_ip 10.1.{b}.0/24 action drop");
            texts.push(t.clone());
            let r = rule(t, texts.len());
            c.insert(&r).unwrap();
            set.push(r).unwrap();
        }
        assert!(lookup_state(&c).0, "the tables answer");
        let v = c.snapshot();
        let len = |b: &[u8]| b.iter().map(|x| x.count_ones()).sum::<u32>();
        let order: Vec<(u32, u32)> = dispatch!(&v.tables, t => {
            let ch = t.chain(0).expect("chain 0");
            let src_len = |st: &Subtable<_>| len(&scatter(&st.gmask, &t.lanes).0[32..36]);
            ch.subtables.iter().map(|st| (src_len(st), st.best.0)).collect()
        });
        assert_eq!(order, [(32, 2), (24, 1)], "the /32 subtable first, the /24 one's best 1");
        let frame = |src: [u8; 4]| {
            let mut f = vec![0u8; 34];
            f[12] = 0x08;
            f[14] = 0x45;
            f[23] = 0xfd;
            f[26..30].copy_from_slice(&src);
            f[30..34].copy_from_slice(&[192, 0, 2, 1]);
            f
        };
        let mut frames = Vec::new();
        for b in 0..8u8 {
            frames.extend([[10, 1, b, 5], [10, 2, b, 7], [10, 2, b, 9], [10, 1, b, 6]].map(frame));
        }
        let reference = crate::reference::Reference::new(&set);
        let want = lines_as_the_reference(&c, &v, &reference, &frames, "");
        // 10.1.b.5: the /32 rule, then for b < 4 the /24 rule of priority 1 (line 25 + b);
        // 10.2.b.7: the /32 rule (the /24 slot's priority 3 refused); 10.2.b.9: the /24
        // rule of priority 3; 10.1.b.6 for b < 4: the priority 1 rule, else nothing.
        let b = |i: usize| i / 4;
        for (i, l) in want.iter().enumerate() {
            let expect = match i % 4 {
                0 if b(i) < 4 => Some(25 + b(i)),
                0 => Some(3 * b(i) + 1),
                1 => Some(3 * b(i) + 2),
                2 => Some(3 * b(i) + 3),
                _ => (b(i) < 4).then_some(25 + b(i)),
            };
            assert_eq!(*l, expect, "packet {i}");
        }
        let counts: Vec<u64> = dispatch!(&v.tables, t => {
            t.chain(0).expect("chain 0").subtables.iter().map(|st| st.store.hits.get()).collect()
        });
        // /32: 10.1.b.5 and 10.2.b.7 (16); /24: 10.1.b.5 and 10.1.b.6 for b < 4 (8) and
        // 10.2.b.9 (8).
        assert_eq!(counts, [16, 16]);
    }

    /// The walk for a chain whose subtables mask some pairs of words alike (`walk::<false>`:
    /// those pairs hashed once a packet into its base, the varying ones a visit): the
    /// bench's 16 masks (source and destination /32, /24, /16, /8, one priority each), 8
    /// rules a mask, at full width (14 words: only the addresses' pair varies) and packed
    /// (2 words, one pair: `walk::<true>`), both answered by the candidate tables; packets on
    /// each rule's prefixes and random ones, against the reference.
    #[test]
    fn the_walk_hashes_pairs_masked_alike_once_a_packet() {
        let mut rng = weir_testkit::SplitMix64::new(0x35_a11e);
        let (set, _, frames) = sixteen_mask_rules(128, &mut rng, |rng| rng.u32());
        let reference = crate::reference::Reference::new(&set);
        for (c, all_vary) in
            [(Classifier::new_full_width(&set), false), (Classifier::new(&set), true)]
        {
            let v = c.snapshot();
            let (on, vary, pairs) = dispatch!(&v.tables, t => {
                let ch = t.chain(0).expect("chain 0");
                (ch.cand_on, ch.vary, t.lanes.len().div_ceil(2))
            });
            assert!(on, "the tables answer");
            assert_eq!(vary == (1 << pairs) - 1, all_vary, "vary {vary:#b} of {pairs} pairs");
            let want =
                lines_as_the_reference(&c, &v, &reference, &frames, &format!("{pairs} pairs"));
            let hits = want.iter().filter(|l| l.is_some()).count();
            assert!(hits * 2 >= frames.len(), "{hits} of {} matched", frames.len());
        }
    }

    /// weir-bench's 16 masks (source and destination /32, /24, /16, /8): `n` rules, rule i
    /// of mask i % 16 with the mask's priority, its two addresses drawn by `draw` (source
    /// first) and cut to the mask's prefixes; and two frames a rule, a host in its prefixes
    /// and one of random addresses. The rules' (source, its length, destination, its
    /// length), rule i's at i.
    #[allow(clippy::type_complexity)]
    fn sixteen_mask_rules(
        n: usize,
        rng: &mut weir_testkit::SplitMix64,
        mut draw: impl FnMut(&mut weir_testkit::SplitMix64) -> u32,
    ) -> (RuleSet, Vec<(u32, u32, u32, u32)>, Vec<Vec<u8>>) {
        let lens = [32u32, 24, 16, 8];
        let prefix = |a: u32, len: u32| a & (u32::MAX << (32 - len));
        let mut set = RuleSet::new();
        let mut specs = Vec::new();
        for i in 0..n {
            let m = i % 16;
            let (sl, dl) = (lens[m % 4], lens[m / 4]);
            let src = prefix(draw(rng), sl);
            let dst = prefix(draw(rng), dl);
            let text = format!(
                "prio {} protocol ip flower src_ip {}/{sl} dst_ip {}/{dl} action drop",
                m + 1,
                std::net::Ipv4Addr::from(src),
                std::net::Ipv4Addr::from(dst)
            );
            set.push(crate::rule::parse_rule(&text, i + 1).unwrap()).unwrap();
            specs.push((src, sl, dst, dl));
        }
        let frame = |src: u32, dst: u32| {
            let mut f = vec![0u8; 34];
            f[12] = 0x08;
            f[14] = 0x45;
            f[23] = 0xfd;
            f[26..30].copy_from_slice(&src.to_be_bytes());
            f[30..34].copy_from_slice(&dst.to_be_bytes());
            f
        };
        let host = |a: u32, len: u32, r: u32| a | (r >> len.min(31) >> u32::from(len == 32));
        let mut frames = Vec::new();
        for &(src, sl, dst, dl) in &specs {
            frames.push(frame(host(src, sl, rng.u32()), host(dst, dl, rng.u32())));
            frames.push(frame(rng.u32(), rng.u32()));
        }
        (set, specs, frames)
    }

    /// Chain 0's lookup state: whether its candidate tables answer, its prefilters, and
    /// the halves of candidate words it keeps.
    fn lookup_state(c: &Classifier) -> (bool, usize, usize) {
        let v = c.snapshot();
        dispatch!(&v.tables, t => {
            let ch = t.chain(0).expect("chain 0");
            (ch.cand_on, ch.pre.len(), ch.cand.as_ref().map_or(0, |x| x.halves.len()))
        })
    }

    /// Every `step`th live rule's packet (a host in its source and destination prefixes)
    /// and the last 64 rules', and as many of random addresses, through `process_batch` on
    /// version `v`, against the reference built from the live rules in insertion order
    /// (the same ranks).
    fn agrees_with_reference(
        c: &Classifier,
        v: &Version,
        live: &[(RuleId, Rule, [u32; 4])],
        step: usize,
        seed: u64,
    ) {
        let mut x = seed;
        let mut next = move || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let z = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb) as u32
        };
        let frame = |src: u32, dst: u32| {
            let mut f = vec![0u8; 34];
            f[12] = 0x08;
            f[14] = 0x45;
            f[17] = 20;
            f[23] = 0xfd;
            f[26..30].copy_from_slice(&src.to_be_bytes());
            f[30..34].copy_from_slice(&dst.to_be_bytes());
            f
        };
        let mut frames = Vec::new();
        let sampled =
            live.iter().enumerate().filter(|(i, _)| i % step == 0 || i + 64 >= live.len());
        for (_, (_, _, [src, sl, dst, dl])) in sampled {
            let host = |a: u32, len: u32, r: u32| a | (r >> len.min(31) >> u32::from(len == 32));
            frames.push(frame(host(*src, *sl, next()), host(*dst, *dl, next())));
            frames.push(frame(next(), next()));
        }
        let mut set = RuleSet::new();
        for (_, r, _) in live {
            set.push(r.clone()).unwrap();
        }
        let reference = crate::reference::Reference::new(&set);
        let mut want = Vec::new();
        let outs = process_in_batches(c, v, &frames, 34, |works| {
            for w in works {
                want.push(reference.process(w).line());
            }
        });
        let got: Vec<Option<usize>> = outs.iter().map(|o| o.line()).collect();
        assert_eq!(got, want);
        let hits = want.iter().filter(|l| l.is_some()).count();
        assert!(hits >= frames.len() / 2, "{hits} of {} packets matched", frames.len());
    }

    /// A chain keeps and writes only the lookup state its lookups read (`ChainT::refresh`):
    /// weir-bench's 16 masks (source and destination /32, /24, /16, /8, one priority each)
    /// with 8 rules a mask, where the candidate tables answer and there are no prefilters;
    /// grown to 1,024 rules a mask (every candidate word set: not selective), where the 8
    /// prefilters answer, made and filled from the stores, and the tables keep no words;
    /// then 14 masks' rules deleted (their subtables gone: the list changed), where the
    /// tables tell the two left apart again and the prefilters go. Each stage against
    /// the reference, in-place inserts and deletes between.
    #[test]
    fn a_chain_keeps_only_the_lookup_state_it_reads() {
        let lens = [32u32, 24, 16, 8];
        let prefix = |a: u32, len: u32| a & (u32::MAX << (32 - len));
        let c = Classifier::new(&RuleSet::new());
        let mut live: Vec<(RuleId, Rule, [u32; 4])> = Vec::new();
        let mut x = 0x51ab_u64;
        let mut add = |c: &Classifier, live: &mut Vec<_>, n: usize| {
            for _ in 0..n {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let m = live.len() % 16;
                let (sl, dl) = (lens[m % 4], lens[m / 4]);
                let (src, dst) = (prefix((x >> 32) as u32, sl), prefix(x as u32, dl));
                let text = format!(
                    "prio {} protocol ip flower src_ip {}/{sl} dst_ip {}/{dl} action drop",
                    m + 1,
                    std::net::Ipv4Addr::from(src),
                    std::net::Ipv4Addr::from(dst)
                );
                let r = crate::rule::parse_rule(&text, live.len() + 1).unwrap();
                live.push((c.insert(&r).unwrap(), r, [src, sl, dst, dl]));
            }
        };
        add(&c, &mut live, 128);
        c.rerank();
        assert_eq!(lookup_state(&c), (true, 0, 2), "8 rules a mask: the tables answer");
        add(&c, &mut live, 64);
        agrees_with_reference(&c, &c.snapshot(), &live, 1, 1);
        let more = 16 * 1024 - live.len();
        add(&c, &mut live, more);
        c.rerank();
        assert_eq!(lookup_state(&c), (false, 8, 0), "1,024 a mask: the prefilters answer");
        agrees_with_reference(&c, &c.snapshot(), &live, 37, 2);
        // In place (no new version): the stores' marks let the new keys' subtables in.
        add(&c, &mut live, 64);
        agrees_with_reference(&c, &c.snapshot(), &live, 37, 3);
        // The version of the prefilters, its stores' marks cleared (a refresh sets the
        // marked entries' bits): only its prefilters let a key in.
        c.rerank();
        let before = c.snapshot();
        // The two masks of source /32 and destination /32 or /24 kept.
        let kept = |e: &(RuleId, Rule, [u32; 4])| e.2[1] == 32 && e.2[3] >= 24;
        let gone: Vec<RuleId> = live.iter().filter(|e| !kept(e)).map(|e| e.0).collect();
        for id in gone {
            assert!(c.delete(id));
        }
        live.retain(kept);
        assert_eq!(c.stats().0, 2, "two masks left");
        // One half of words: the two masks differ in the destination only.
        assert_eq!(lookup_state(&c), (true, 0, 1), "two masks: the tables answer again");
        agrees_with_reference(&c, &c.snapshot(), &live, 7, 4);
        // In place into the two stores, which the version of the prefilters (`before`)
        // shares: its lookups let the new keys' subtables in by the stores' marks, which
        // in-place inserts set where the tables answer too.
        for _ in 0..8 {
            // One rule a mask (16 in a row cycle through them), the others' deleted again.
            let at = live.len();
            add(&c, &mut live, 16);
            for e in live.drain(at..).collect::<Vec<_>>() {
                if kept(&e) {
                    live.push(e);
                } else {
                    assert!(c.delete(e.0));
                }
            }
        }
        assert_eq!(lookup_state(&c), (true, 0, 1));
        agrees_with_reference(&c, &c.snapshot(), &live, 7, 5);
        agrees_with_reference(&c, &before, &live, 7, 6);
    }

    /// An insert whose subtable exists, has room and whose rank does not better the
    /// subtable's best goes in place (`Tables::insert_shared`): no version is published,
    /// and the published one finds the rule. Masks differing only in a port range (equal gathered masks,
    /// other range flags) are subtables of their own; the same after a rerank and after a
    /// delete that empties a subtable.
    #[test]
    fn inserts_into_known_subtables_publish_no_version() {
        // Eight shapes: (source /8 or /24) x (destination /16 or /32) x (a destination
        // port range or none), priority 10 + shape; first octets of their own, so that
        // each rule's key matches that rule only.
        let text = |shape: usize, n: usize| {
            let o = 1 + n * 8 + shape;
            let src = if shape & 1 == 0 { "8" } else { "24" };
            let dst = if shape & 2 == 0 { "16" } else { "32" };
            let range = if shape & 4 == 0 { "" } else { " dst_port 100-200" };
            let prio = 10 + shape;
            let t = format!(
                "prio {prio} protocol ip flower ip_proto tcp src_ip {o}.1.2.3/{src} dst_ip 172.{o}.5.6/{dst}{range} action drop"
            );
            crate::rule::parse_rule(&t, 1).unwrap()
        };
        let mut set = RuleSet::new();
        let mut live = Vec::new();
        for shape in 0..8 {
            for n in 0..4 {
                set.push(text(shape, n)).unwrap();
                live.push((RuleId(live.len() as u64), shape, text(shape, n)));
            }
        }
        let c = Classifier::new(&set);
        // The build sizes each store for its keys: a first insert each grows its store
        // (a new version, amortized), after which the store has room.
        for shape in 0..8 {
            let r = text(shape, 4);
            live.push((c.insert(&r).unwrap(), shape, r));
        }
        for round in 0..3 {
            // Shape 0's subtable is gone in the last round: its insert makes a new one.
            for shape in (round / 2)..8 {
                let r = text(shape, 5 + round);
                let before = c.snapshot();
                let id = c.insert(&r).unwrap();
                assert!(
                    Arc::ptr_eq(&before, &c.snapshot()),
                    "round {round} shape {shape}: published"
                );
                live.push((id, shape, r));
            }
            let v = c.snapshot();
            for (id, _, r) in &live {
                let mut key = r.compile(&mut |_| 0).key;
                key.set_u16(crate::key::field::DST_PORT, 150);
                assert_eq!(
                    v.lookup(0, &key, None).map(|i| i.seq),
                    Some(id.0),
                    "round {round}: {r:?}"
                );
            }
            if round == 0 {
                c.rerank();
            } else if round == 1 {
                for (id, _, _) in live.iter().filter(|l| l.1 == 0) {
                    assert!(c.delete(*id));
                }
                live.retain(|l| l.1 != 0);
            }
        }
    }
}

#[cfg(test)]
mod prefilter_tests {
    use super::*;

    /// The filter spreads its values (`bit_of`: the word from the product's bits 32 up, the
    /// bit from its top 6): 1,000 values of one mask (/24, /32) added to a filter sized for
    /// them (16 bits a value, one hash: ~6% false positives expected), then 20,000 others
    /// tested: false positives under 9%, on a low and a high half of either word. And a /8
    /// filter holding all 256 of its values lets every value in.
    #[test]
    fn prefilter_false_positives_are_near_the_sizing() {
        for (half, mask) in [(0u8, 0xffff_ff00u32), (1, 0xffff_ffff), (3, 0xffff_ff00)] {
            let key = |x: u64| {
                let v = u64::from((x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 16) as u32);
                let mut k = [0u64; 2];
                k[usize::from(half / 2)] = v << (32 * u64::from(half & 1));
                k
            };
            let f = PreFilter::new(half, mask, 1000);
            let mut added = std::collections::HashSet::new();
            for x in 0..1000u64 {
                let k = key(x);
                f.add(&k);
                added.insert(half_of(&k, usize::from(half)) & mask);
            }
            let mut tested = 0;
            let mut present = 0;
            for x in 1000..21_000u64 {
                let k = key(x);
                if added.contains(&(half_of(&k, usize::from(half)) & mask)) {
                    continue;
                }
                tested += 1;
                present += usize::from(has(&f, &k));
            }
            assert!(tested > 15_000, "{tested}");
            assert!(
                present * 100 < tested * 9,
                "half {half} mask {mask:#x}: {present} of {tested}"
            );
        }
        // A /8: its 256 values all in, every packet passes.
        let f = PreFilter::new(0, 0xff00_0000, 256);
        for b in 0..256u64 {
            f.add(&[b << 24, 0]);
        }
        assert!((0..256u64).all(|b| has(&f, &[b << 24 | 0x12_3456, 0])));
    }

    /// A filter's bit for a key, read the writer's way (`PreFilter::bit`, one key at a time).
    fn has<const W: usize>(f: &PreFilter, k: &[u64; W]) -> bool {
        let (at, bit) = f.bit(k);
        f.bits[at].load(Ordering::Relaxed) >> bit & 1 != 0
    }

    /// The batch test (`halves_of`, then `PreFilter::test_halves`) answers, packet by packet
    /// and in packet order, what the writer's one-key bit says: on each of the four
    /// half-words of a width-2 key (the high halves read by a shift), under a /24 and a /32
    /// mask, for batches of 1, 7, 31 and 32 keys of which every third was added (a filter
    /// small enough that some of the others read as present too: they must agree as well).
    #[test]
    fn batch_test_is_the_writers_bit_per_packet() {
        let keys: Vec<[u64; 2]> = (0..32u64)
            .map(|i| {
                let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x0123_4567_89ab_cdef;
                [x, x.rotate_left(23) ^ i]
            })
            .collect();
        for half in 0..4u8 {
            for mask in [0xffff_ff00u32, 0xffff_ffff] {
                let f = PreFilter::new(half, mask, 8);
                for k in keys.iter().step_by(3) {
                    f.add(k);
                }
                let mut vals = [0u32; BATCH];
                for n in [1, 7, 31, 32] {
                    halves_of(&keys[..n], half, &mut vals);
                    let got = f.test_halves(&vals[..n]);
                    let mut want = 0u32;
                    for (i, k) in keys[..n].iter().enumerate() {
                        want |= u32::from(has(&f, k)) << i;
                    }
                    assert_eq!(got, want, "half {half} mask {mask:#x} n {n}");
                    assert_ne!(want, 0);
                    if n == 32 {
                        // Added keys are present; not every key is (the answers differ).
                        assert_ne!(want, u32::MAX, "half {half} mask {mask:#x}");
                    }
                }
            }
        }
    }
}
