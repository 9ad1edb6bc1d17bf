//! Hash maps: `BPF_MAP_TYPE_HASH`, `PERCPU_HASH`, `LRU_HASH`, `LRU_PERCPU_HASH` and
//! `DEVMAP_HASH`.
//!
//! The table has the kernel's shape: `roundup_pow_of_two(max_entries)` buckets (at most
//! 2^20; past that, chains grow), each a chain of elements linked by index. Elements live
//! in a pool of atomic words that is never freed while the map lives (`Pool`), as the
//! kernel preallocates a hash map's elements; a deleted or replaced element goes back to
//! the pool and is reused later (FIFO, after every never-used element), so a value
//! pointer a program holds always points into the map's memory, and may see a later
//! element's words, exactly as with the kernel's preallocated maps.
//!
//! Lookups take no lock and no reference count (the kernel's RCU read side): buckets are
//! grouped in stripes (bucket `b` in stripe `b % STRIPES`), each with a writers' mutex and
//! a sequence number a writer makes odd while it relinks a chain; a lookup walks the chain
//! with plain atomic loads and keeps the answer only if the sequence number was even and
//! unchanged across the walk (a seqlock). Updates, deletes and the syscall side take the
//! stripe's mutex. A reader never blocks a writer, and on x86 a lookup executes no locked
//! instruction.

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::Ordering::{self, Acquire, Relaxed, Release};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Mutex, OnceLock};

use weir_program::abi::FoundElem;

use crate::value::{load_bytes, store_bytes, words_for, zeroed_words, ValueRef};
use crate::{check_update_flags, MapError, BPF_EXIST, BPF_NOEXIST};

const STRIPES: usize = 64;
const MAX_BUCKETS: usize = 1 << 20;

// The multiply-xorshift constants of weir's key hash.
const K1: u64 = 0x9E37_79B9_7F4A_7C15;
const K2: u64 = 0xD6E8_FEB8_6659_FD93;

#[inline]
fn finish(h: u64) -> u64 {
    let h = (h ^ (h >> 32)).wrapping_mul(K2);
    h ^ (h >> 29)
}

/// weir's hash of a key (seeded per map as the kernel seeds `jhash` with `hashrnd`;
/// `BPF_F_ZERO_SEED` makes the seed 0): keys of at most 16 bytes (a u32 index or
/// address, a u64, an IPv6 address) through `hash_small` over their words, longer ones
/// through `hash_general`.
#[inline]
pub(crate) fn hash_key(seed: u64, key: &[u8]) -> u64 {
    match SmallKey::of(key) {
        Some(k) => hash_small(seed, k),
        None => hash_general(seed, key),
    }
}

/// A key of at most 16 bytes as an element stores it: two words, zero-padded. Such keys
/// are hashed and compared as integers (`HashMap::find_small`): no byte loop, no
/// variable-length copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SmallKey {
    w0: u64,
    w1: u64,
}

impl SmallKey {
    /// The common sizes at a fixed size (a run-time length is a `memcpy` call), the rest
    /// up to 16 bytes word by word; `None` for longer keys.
    #[inline]
    fn of(key: &[u8]) -> Option<SmallKey> {
        if let Ok(b) = <[u8; 4]>::try_from(key) {
            return Some(SmallKey { w0: u64::from(u32::from_ne_bytes(b)), w1: 0 });
        }
        if let Ok(b) = <[u8; 8]>::try_from(key) {
            return Some(SmallKey { w0: u64::from_ne_bytes(b), w1: 0 });
        }
        if let Ok(b) = <[u8; 16]>::try_from(key) {
            let (lo, hi) = b.split_at(8);
            return Some(SmallKey { w0: key_word(lo), w1: key_word(hi) });
        }
        if key.len() > 16 {
            return None;
        }
        Some(SmallKey::of_other(key))
    }

    /// The other sizes up to 16 bytes, out of line (copies of a run-time length). Not an
    /// `Option`: two words come back in registers, where an `Option` came through the
    /// stack, and every size's path with it.
    #[inline(never)]
    fn of_other(key: &[u8]) -> SmallKey {
        let (lo, hi) = key.split_at(key.len().min(8));
        SmallKey { w0: key_word(lo), w1: key_word(hi) }
    }
}

/// The hash of a small key: a multiply per word and the multiply-xorshift finish (the
/// low bits, which pick the bucket, depend on every bit of the key).
#[inline]
fn hash_small(seed: u64, k: SmallKey) -> u64 {
    let mut h = (seed ^ k.w0).wrapping_mul(K1);
    if k.w1 != 0 {
        h = (h ^ (h >> 29) ^ k.w1).wrapping_mul(K1);
    }
    finish(h)
}

/// weir's hash of any key: 8-byte words, the last one zero-padded.
fn hash_general(seed: u64, key: &[u8]) -> u64 {
    let mut h = seed ^ (key.len() as u64).wrapping_mul(K2);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K1);
        h ^= h >> 29;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        if let Some(d) = w.get_mut(..rest.len()) {
            d.copy_from_slice(rest);
        }
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K1);
    }
    finish(h)
}

/// A fresh random seed (the standard library's per-process random keys).
pub(crate) fn random_seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x5eed);
    h.finish()
}

/// No element: the end of a chain.
const NIL: u32 = u32::MAX;

/// `lookup_key_words`'s answer for element `idx`, its value's words `value` (at least
/// one: `value_size` > 0): the value's first byte is their start.
#[inline(always)]
fn found_elem(idx: u32, value: &[AtomicU64]) -> FoundElem {
    FoundElem { elem: u64::from(idx), host: value.as_ptr().cast_mut().cast() }
}
/// An element's words: a header (the hash; the link: the next element of the chain in the
/// low 32 bits and the element's generation above them, bumped when it is freed so that
/// a stale LRU queue entry is recognized; the LRU reference bit), the key, zero-padded to
/// whole words, then the value (one copy per CPU for per-CPU maps).
const H_HASH: usize = 0;
const H_LINK: usize = 1;
const H_REF: usize = 2;
const HEADER: usize = 3;
/// The words a chain walk reads of an element: the header and two key words. Every
/// element has them (at least one key word and one value word follow the header); with
/// a one-word key the fifth is the value's, and a walk does not read it.
const HEAD: usize = HEADER + 2;
/// Elements allocated with the map (all of a small map's): found with one compare.
const EAGER: usize = 1024;
/// Elements in the pool's first chunk past the eager ones; chunk `k` holds
/// `FIRST_CHUNK << k`.
const FIRST_CHUNK: usize = 1024;
/// Times a lookup retries while writers change its stripe before it takes the lock.
const OPTIMISTIC_TRIES: usize = 64;

fn link(next: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(next)
}

fn next_of(link: u64) -> u32 {
    link as u32
}

fn generation_of(link: u64) -> u32 {
    (link >> 32) as u32
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The key's `i`-th word, zero-padded, as the element stores it.
#[inline]
fn key_word(chunk: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    if let Some(d) = w.get_mut(..chunk.len()) {
        d.copy_from_slice(chunk);
    }
    u64::from_ne_bytes(w)
}

/// Whether the key words hold `key` (every word of it: a key words slice too short for
/// the key holds none). Whole words as fixed-size loads, the zero-padded rest (if any)
/// last: a run-time-length copy per word was a `memcpy` call each, for every key longer
/// than 16 bytes (what a flow table's 24- to 64-byte keys compare).
#[inline]
fn key_matches(words: &[AtomicU64], key: &[u8]) -> bool {
    if let Ok(b) = <[u8; 4]>::try_from(key) {
        return words.first().is_some_and(|w| w.load(Relaxed) == key_word(&b));
    }
    let mut chunks = key.chunks_exact(8);
    let mut words = words.iter();
    for c in &mut chunks {
        let Ok(b) = <[u8; 8]>::try_from(c) else { return false };
        if words.next().is_none_or(|w| w.load(Relaxed) != u64::from_ne_bytes(b)) {
            return false;
        }
    }
    let rest = chunks.remainder();
    rest.is_empty() || words.next().is_some_and(|w| w.load(Relaxed) == key_word(rest))
}

/// The elements of a hash map: words that are never freed while the map lives, handed out
/// and taken back by index. The first `EAGER` come with the map (one compare finds them);
/// the rest in chunks allocated as the map first grows (chunk `k` holds `FIRST_CHUNK << k`
/// elements), so a big, mostly empty map costs little. A freed element
/// goes to the back of a FIFO queue and is reused only when every never-used element is
/// taken and the elements freed before it were reused: the longest delay possible before
/// a program still holding a pointer into it sees its words rewritten (the kernel's
/// preallocated hash maps reuse an element at once).
#[derive(Debug)]
struct Pool {
    elem_words: usize,
    capacity: usize,
    /// The first `EAGER` elements (or all, if fewer), allocated with the map.
    eager: Box<[AtomicU64]>,
    eager_len: usize,
    /// The rest, allocated as the map grows.
    chunks: Box<[OnceLock<Box<[AtomicU64]>>]>,
    free: Mutex<Free>,
}

#[derive(Debug, Default)]
struct Free {
    /// Elements handed out at least once: `0..grown`.
    grown: usize,
    queue: VecDeque<u32>,
}

impl Pool {
    fn new(elem_words: usize, capacity: usize) -> Result<Pool, MapError> {
        let eager_len = capacity.min(EAGER);
        let rest = capacity - eager_len;
        let (mut chunks, mut covered) = (0, 0usize);
        while covered < rest {
            covered = covered.saturating_add(FIRST_CHUNK << chunks);
            chunks += 1;
        }
        let eager = zeroed_words(eager_len.checked_mul(elem_words).ok_or(MapError::NoMemory)?)?;
        Ok(Pool {
            elem_words,
            capacity,
            eager: eager.into_boxed_slice(),
            eager_len,
            chunks: (0..chunks).map(|_| OnceLock::new()).collect(),
            free: Mutex::new(Free::default()),
        })
    }

    /// (chunk, index within the chunk) of element `idx`.
    #[inline]
    fn chunk_of(idx: usize) -> (usize, usize) {
        let q = idx / FIRST_CHUNK + 1;
        let k = (usize::BITS - 1 - q.leading_zeros()) as usize;
        (k, idx - FIRST_CHUNK * ((1 << k) - 1))
    }

    fn chunk_len(&self, k: usize) -> usize {
        let start = self.eager_len + FIRST_CHUNK * ((1 << k) - 1);
        (FIRST_CHUNK << k).min(self.capacity.saturating_sub(start))
    }

    /// Element `idx`'s words (`None` for an index never handed out).
    #[inline]
    fn elem(&self, idx: u32) -> Option<&[AtomicU64]> {
        let idx = idx as usize;
        if idx < self.eager_len {
            let start = idx * self.elem_words;
            return self.eager.get(start..start + self.elem_words);
        }
        self.elem_past_eager(idx)
    }

    /// Element `idx`'s first `HEAD` words (its header and first two key words): what a
    /// chain walk reads, with one bounds check (`elem` checks the whole element). An
    /// index past the eager elements starts at or past the eager words' end, so their
    /// `get` fails and the chunks are looked at.
    #[inline(always)]
    fn head(&self, idx: u32) -> Option<&[AtomicU64; HEAD]> {
        match self.eager_head(idx) {
            Some(h) => Some(h),
            None => self.elem_past_eager(idx as usize)?.first_chunk(),
        }
    }

    /// `head` among the eager elements only (`None` past them): no call.
    #[inline(always)]
    fn eager_head(&self, idx: u32) -> Option<&[AtomicU64; HEAD]> {
        let start = idx as usize * self.elem_words;
        self.eager.get(start..start + HEAD).and_then(|e| e.try_into().ok())
    }

    /// Words `at..at + n` of element `idx` (which must lie within an element: `None`
    /// otherwise only where they pass the end of the pool's words).
    #[inline(always)]
    fn words(&self, idx: u32, at: usize, n: usize) -> Option<&[AtomicU64]> {
        let idx = idx as usize;
        if idx < self.eager_len {
            return self.eager_words(idx, at, n);
        }
        self.elem_past_eager(idx)?.get(at..at + n)
    }

    /// `words` of an eager element (`idx` below `eager_len`).
    #[inline(always)]
    fn eager_words(&self, idx: usize, at: usize, n: usize) -> Option<&[AtomicU64]> {
        let start = idx * self.elem_words + at;
        self.eager.get(start..start + n)
    }

    #[inline(never)]
    fn elem_past_eager(&self, idx: usize) -> Option<&[AtomicU64]> {
        let (k, at) = Self::chunk_of(idx.checked_sub(self.eager_len)?);
        let chunk = self.chunks.get(k)?.get()?;
        let start = at * self.elem_words;
        chunk.get(start..start + self.elem_words)
    }

    /// An element to fill: a never-used one while there are any, else the longest freed.
    fn alloc(&self) -> Result<u32, MapError> {
        let mut free = lock(&self.free);
        if free.grown < self.capacity {
            let idx = free.grown;
            if idx >= self.eager_len {
                let (k, _) = Self::chunk_of(idx - self.eager_len);
                let slot = self.chunks.get(k).ok_or(MapError::NoMemory)?;
                if slot.get().is_none() {
                    let words = zeroed_words(self.chunk_len(k) * self.elem_words)?;
                    let _ = slot.set(words.into_boxed_slice());
                }
            }
            free.grown += 1;
            return u32::try_from(idx).map_err(|_| MapError::NoMemory);
        }
        free.queue.pop_front().ok_or(MapError::NoMemory)
    }

    fn release(&self, idx: u32) {
        lock(&self.free).queue.push_back(idx);
    }
}

/// A stripe of buckets: its writers' lock and the sequence number lock-free readers check
/// (odd while a writer relinks one of its chains). Alone on its cache line.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Stripe {
    seq: AtomicU64,
    lock: Mutex<()>,
}

impl Stripe {
    /// Runs `relink`, the stores that change this stripe's chains, so that a reader that
    /// overlaps them retries. The caller holds `self.lock`; `relink` only stores words.
    fn publish(&self, relink: impl FnOnce()) {
        let s = self.seq.load(Relaxed);
        self.seq.store(s.wrapping_add(1), Relaxed);
        fence(Release);
        relink();
        self.seq.store(s.wrapping_add(2), Release);
    }

    /// The readers' side of `publish`: `walk`'s answer when no writer relinked one of
    /// this stripe's chains while it ran (the sequence number even before, and the same
    /// after), else `None`: try again, or take the lock. `walk` only loads words, each
    /// step bounded and checked, so an answer thrown away did no harm.
    #[inline(always)]
    fn try_read<T>(&self, walk: impl FnOnce() -> T) -> Option<T> {
        let before = self.read_begin()?;
        let found = walk();
        self.read_end(before).then_some(found)
    }

    /// `try_read`'s first half, for a walk that goes on in another function: the
    /// sequence number to give `read_end`, `None` while a writer relinks.
    #[inline(always)]
    fn read_begin(&self) -> Option<u64> {
        let before = self.seq.load(Acquire);
        (before & 1 == 0).then_some(before)
    }

    /// `try_read`'s second half: whether no writer relinked since `read_begin` gave
    /// `before` (what was read in between may be kept).
    #[inline(always)]
    fn read_end(&self, before: u64) -> bool {
        fence(Acquire);
        self.seq.load(Relaxed) == before
    }
}

/// How the hash map's values and eviction behave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HashKind {
    pub percpu: bool,
    pub lru: bool,
    /// `DEVMAP_HASH`: `BPF_EXIST` on a missing key inserts; ifindex 0 is refused.
    pub devmap: bool,
}

/// A hash map's table. Public as [`crate::OneWordTable`] only through
/// [`crate::Map::one_word_table`], for its one-word probe (`probe_one_word`).
#[derive(Debug)]
pub struct HashMap {
    kind: HashKind,
    stripes: Box<[Stripe]>,
    /// Bucket `b`'s stripe is `b & stripe_mask`.
    stripe_mask: usize,
    /// The first element of each bucket's chain (`NIL`: empty).
    heads: Box<[AtomicU32]>,
    bucket_mask: u64,
    seed: u64,
    count: AtomicUsize,
    max_entries: usize,
    key_size: usize,
    key_words: usize,
    /// `key_words == 1` and not LRU: the maps whose program lookups `lookup_key_words`
    /// answers without the general path's walk (one flag tested per lookup instead of two
    /// fields).
    one_word_inline: bool,
    /// `one_word_inline` and not per-CPU: the maps whose program lookups
    /// `lookup_key_words` answers inline, an element's value starting right after the
    /// header and the key (one CPU's copy): inside the words a chain walk reads (`HEAD`).
    one_word_shared: bool,
    value_size: usize,
    /// Words per CPU copy of the value.
    stride: usize,
    cpus: usize,
    pool: Pool,
    /// LRU: (element, generation) in insertion order; stale ones are skipped.
    lru: Mutex<VecDeque<(u32, u32)>>,
}

/// What an update writes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Src<'a> {
    /// A program's update: the value for `cpu` (per-CPU maps: the other CPUs of a new
    /// element start zeroed).
    Cpu(&'a [u8], usize),
    /// The syscall's update: every CPU's value, each rounded up to 8 bytes (per-CPU maps),
    /// or the one value.
    All(&'a [u8]),
}

impl HashMap {
    pub(crate) fn new(
        kind: HashKind,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        cpus: usize,
        seed: u64,
    ) -> Result<HashMap, MapError> {
        let n_buckets = (max_entries as usize).next_power_of_two().min(MAX_BUCKETS);
        let n_stripes = n_buckets.min(STRIPES);
        let mut heads = Vec::new();
        heads.try_reserve_exact(n_buckets).map_err(|_| MapError::NoMemory)?;
        heads.resize_with(n_buckets, || AtomicU32::new(NIL));
        let stride = words_for(value_size as usize);
        let key_words = words_for(key_size as usize);
        let cpus = if kind.percpu { cpus } else { 1 };
        let elem_words = stride
            .checked_mul(cpus)
            .and_then(|v| v.checked_add(HEADER + key_words))
            .ok_or(MapError::NoMemory)?;
        // Room for every element plus one being replaced per stripe (a replacement is
        // filled before the element it replaces is freed), below the `NIL` index.
        let capacity = (max_entries as usize).saturating_add(n_stripes).min(NIL as usize);
        Ok(HashMap {
            kind,
            stripes: (0..n_stripes).map(|_| Stripe::default()).collect(),
            stripe_mask: n_stripes - 1,
            heads: heads.into_boxed_slice(),
            bucket_mask: n_buckets as u64 - 1,
            seed,
            count: AtomicUsize::new(0),
            max_entries: max_entries as usize,
            key_size: key_size as usize,
            key_words,
            one_word_inline: key_words == 1 && !kind.lru,
            one_word_shared: key_words == 1 && !kind.lru && !kind.percpu,
            value_size: value_size as usize,
            stride,
            cpus,
            pool: Pool::new(elem_words, capacity)?,
            lru: Mutex::new(VecDeque::new()),
        })
    }

    fn n_buckets(&self) -> usize {
        self.bucket_mask as usize + 1
    }

    #[inline]
    fn bucket_of(&self, hash: u64) -> usize {
        (hash & self.bucket_mask) as usize
    }

    #[inline]
    fn stripe(&self, b: usize) -> Option<&Stripe> {
        self.stripes.get(b & self.stripe_mask)
    }

    #[inline]
    fn key_of<'e>(&self, e: &'e [AtomicU64]) -> &'e [AtomicU64] {
        e.get(HEADER..HEADER + self.key_words).unwrap_or_default()
    }

    fn value_words<'e>(&self, e: &'e [AtomicU64]) -> &'e [AtomicU64] {
        e.get(HEADER + self.key_words..).unwrap_or_default()
    }

    /// The element holding `key` in bucket `b` and its predecessor in the chain (`NIL`: the
    /// head). Lock-free readers call it too: every step is bounded and checked, so a chain
    /// changing under the walk ends it early or late, never out of bounds (the reader's
    /// sequence check then throws the answer away).
    #[inline]
    fn find(&self, b: usize, hash: u64, key: &[u8]) -> Option<(u32, u32)> {
        let mut prev = NIL;
        let mut idx = self.heads.get(b)?.load(Relaxed);
        for _ in 0..=self.pool.capacity {
            if idx == NIL {
                return None;
            }
            let e = self.pool.elem(idx)?;
            if e.first()?.load(Relaxed) == hash && key_matches(self.key_of(e), key) {
                return Some((prev, idx));
            }
            prev = idx;
            idx = next_of(e.get(H_LINK)?.load(Relaxed));
        }
        None
    }

    /// Element `idx`'s predecessor in bucket `b` (`NIL`: the head), if it is linked there.
    /// Under the stripe's lock.
    fn position(&self, b: usize, idx: u32) -> Option<u32> {
        let mut prev = NIL;
        let mut at = self.heads.get(b)?.load(Relaxed);
        for _ in 0..=self.pool.capacity {
            if at == NIL {
                return None;
            }
            if at == idx {
                return Some(prev);
            }
            prev = at;
            at = next_of(self.pool.elem(at)?.get(H_LINK)?.load(Relaxed));
        }
        None
    }

    /// Points `prev`'s link (or bucket `b`'s head when `prev` is `NIL`) at `to`. Inside a
    /// `publish`.
    fn set_next(&self, b: usize, prev: u32, to: u32) {
        if prev == NIL {
            if let Some(head) = self.heads.get(b) {
                head.store(to, Relaxed);
            }
        } else if let Some(w) = self.pool.elem(prev).and_then(|e| e.get(H_LINK)) {
            w.store(link(to, generation_of(w.load(Relaxed))), Relaxed);
        }
    }

    fn next_after(&self, idx: u32) -> u32 {
        self.pool.elem(idx).and_then(|e| e.get(H_LINK)).map_or(NIL, |w| next_of(w.load(Relaxed)))
    }

    /// Unlinks element `idx` (after `prev` in bucket `b`) and frees it. Under the stripe's
    /// lock.
    fn unlink_and_free(&self, stripe: &Stripe, b: usize, prev: u32, idx: u32) {
        let next = self.next_after(idx);
        stripe.publish(|| self.set_next(b, prev, next));
        self.free_elem(idx);
    }

    /// Returns an unlinked element to the pool, its generation bumped.
    fn free_elem(&self, idx: u32) {
        if let Some(w) = self.pool.elem(idx).and_then(|e| e.get(H_LINK)) {
            w.store(link(NIL, generation_of(w.load(Relaxed)).wrapping_add(1)), Relaxed);
        }
        self.pool.release(idx);
    }

    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// The element holding `key` (its index and words), found without a lock: the
    /// stripe's sequence number read before and after the walk must agree (and be even),
    /// else the walk is retried; after `OPTIMISTIC_TRIES` the stripe's lock is taken. Keys
    /// of at most 16 bytes walk the chain comparing words (`find_small`).
    #[inline]
    fn find_shared(&self, key: &[u8]) -> Option<u32> {
        match SmallKey::of(key) {
            Some(k) => self.find_shared_small(k, self.key_words > 1),
            None => self.find_shared_long(key),
        }
    }

    /// `find_shared` for a key longer than 16 bytes, out of line: the small keys' path
    /// stays short (no registers saved for this one's loop).
    #[inline(never)]
    fn find_shared_long(&self, key: &[u8]) -> Option<u32> {
        // `hash_key`'s answer for a key past 16 bytes, without its small-key tests again.
        let hash = hash_general(self.seed, key);
        let b = self.bucket_of(hash);
        let stripe = self.stripe(b)?;
        for _ in 0..OPTIMISTIC_TRIES {
            if let Some(found) = stripe.try_read(|| self.find(b, hash, key)) {
                return Some(found?.1);
            }
            std::hint::spin_loop();
        }
        let _guard = lock(&stripe.lock);
        Some(self.find(b, hash, key)?.1)
    }

    /// `find_shared` for a key of at most 16 bytes: the first try inline, the retries (a
    /// writer was relinking one of the stripe's chains) out of line, so that the path no
    /// writer crossed keeps no trip count and fewer registers. `two`: the map's keys have a
    /// second word to compare (`key_words > 1`; a constant `false` on the one-word path).
    #[inline(always)]
    fn find_shared_small(&self, k: SmallKey, two: bool) -> Option<u32> {
        let b = self.bucket_of(hash_small(self.seed, k));
        let stripe = self.stripe(b)?;
        // The walk inlined here whatever the callers' count (with several, the closure
        // stayed a call of its own, taking its captures through the stack).
        match stripe.try_read(
            #[inline(always)]
            || self.find_small(b, k, two),
        ) {
            Some(found) => found,
            None => self.find_small_retry(stripe, b, k, two),
        }
    }

    /// `find_shared_small`'s tries after the first (`OPTIMISTIC_TRIES` in all), then the
    /// stripe's lock: the slow way out.
    #[cold]
    #[inline(never)]
    fn find_small_retry(&self, stripe: &Stripe, b: usize, k: SmallKey, two: bool) -> Option<u32> {
        for _ in 1..OPTIMISTIC_TRIES {
            std::hint::spin_loop();
            if let Some(found) = stripe.try_read(|| self.find_small(b, k, two)) {
                return found;
            }
        }
        let _guard = lock(&stripe.lock);
        self.find_small(b, k, two)
    }

    /// The element holding the small key `k` in bucket `b`: its key words compared as
    /// integers (the stored hash is not read: the key words decide). Bounded and checked
    /// as `find` is, for lock-free readers: at most `capacity + 1` elements, each read
    /// through `Pool::head` (one bounds check for the words a step reads, where a whole
    /// element's slice and a check per word cost a third of a lookup).
    #[inline(always)]
    fn find_small(&self, b: usize, k: SmallKey, two: bool) -> Option<u32> {
        self.walk_small(b, k, two, false).flatten()
    }

    /// `find_small`'s walk; with `eager_only`, among the eager elements only and so
    /// without a call: `None` (no answer) when the chain leads past them.
    #[inline(always)]
    fn walk_small(
        &self,
        b: usize,
        k: SmallKey,
        two: bool,
        eager_only: bool,
    ) -> Option<Option<u32>> {
        let Some(head) = self.heads.get(b) else { return Some(None) };
        let mut idx = head.load(Relaxed);
        let mut steps_left = self.pool.capacity;
        while idx != NIL {
            let h = if eager_only { self.pool.eager_head(idx) } else { self.pool.head(idx) };
            let Some([_, link, _, w0, w1]) = h else {
                return if eager_only { None } else { Some(None) };
            };
            if w0.load(Relaxed) == k.w0 && (!two || w1.load(Relaxed) == k.w1) {
                return Some(Some(idx));
            }
            if steps_left == 0 {
                return Some(None);
            }
            steps_left -= 1;
            idx = next_of(link.load(Relaxed));
        }
        Some(None)
    }

    /// Where CPU `cpu`'s copy of element `idx`'s value starts, in words from the element.
    #[inline]
    fn value_offset(&self, cpu: usize) -> usize {
        HEADER + self.key_words + cpu * self.stride
    }

    /// A program's lookup: the value's words on `cpu` (`Map::lookup` makes the
    /// `ValueRef`; two words come back in registers). Not inlined: `Map::lookup` stays
    /// small enough to inline into its callers, so an array lookup there costs no call
    /// and no saved registers.
    ///
    /// A key of one word (4 or 8 bytes: an index, an IPv4 address, a u64, the common
    /// keys) has a path of its own here: one word hashed and compared, and no other
    /// size's path in this function and no call on the way (only the eager elements, no
    /// LRU bit, one try of the seqlock read), so that its entry saves no registers: each
    /// other case, a writer crossing the walk among them, goes on out of line
    /// (`lookup_any`, from the start).
    #[inline(never)]
    pub(crate) fn lookup(&self, key: &[u8], cpu: usize) -> Option<&[AtomicU64]> {
        let w0 = if let Ok(b) = <[u8; 4]>::try_from(key) {
            u64::from(u32::from_ne_bytes(b))
        } else if let Ok(b) = <[u8; 8]>::try_from(key) {
            u64::from_ne_bytes(b)
        } else {
            return self.lookup_any(key, cpu);
        };
        if key.len() != self.key_size {
            return self.lookup_any(key, cpu);
        }
        match self.lookup_one_word(w0, cpu) {
            Some(found) => found.map(|(_, words)| words),
            None => self.lookup_any(key, cpu),
        }
    }

    /// The one-word keys' path of `lookup` and `lookup_key_words` (the key of the map's
    /// size, one element word `w0`): the element and the value's words on `cpu`, walking
    /// the eager elements only with one seqlock try, no call and no LRU bit; `None` (no
    /// answer: take the general path) for an LRU map, a CPU the map has not, a chain that
    /// leads past the eager elements or a writer crossing the walk.
    #[inline(always)]
    fn lookup_one_word(&self, w0: u64, cpu: usize) -> Option<Option<(u32, &[AtomicU64])>> {
        if cpu >= self.cpus || self.kind.lru {
            return None;
        }
        // A key of at most 8 bytes is one element word: no second word to compare.
        let k = SmallKey { w0, w1: 0 };
        let b = self.bucket_of(hash_small(self.seed, k));
        let Some(stripe) = self.stripe(b) else { return Some(None) };
        match stripe.try_read(
            #[inline(always)]
            || self.walk_small(b, k, false, true),
        ) {
            Some(Some(None)) => Some(None),
            Some(Some(Some(idx))) if (idx as usize) < self.pool.eager_len => {
                let at = self.value_offset(cpu);
                Some(self.pool.eager_words(idx as usize, at, self.stride).map(|w| (idx, w)))
            }
            _ => None,
        }
    }

    /// `lookup` of a key of any other size.
    #[inline(never)]
    fn lookup_any(&self, key: &[u8], cpu: usize) -> Option<&[AtomicU64]> {
        let (_, _, words) = self.lookup_words(key, cpu)?;
        Some(words)
    }

    /// A lookup's value as (element, word offset in it): what `value_at` takes back.
    #[inline]
    pub(crate) fn lookup_loc(&self, key: &[u8], cpu: usize) -> Option<(u32, usize)> {
        self.lookup_words(key, cpu).map(|(idx, at, _)| (idx, at))
    }

    /// A lookup's value as (element, word offset in it) and its words: the location and
    /// what `value_words_at` gives for it, from one walk.
    #[inline(always)]
    pub(crate) fn lookup_words(
        &self,
        key: &[u8],
        cpu: usize,
    ) -> Option<(u32, usize, &[AtomicU64])> {
        if key.len() != self.key_size || cpu >= self.cpus {
            return None;
        }
        let idx = self.find_shared(key)?;
        let (at, words) = self.found_value(idx, cpu)?;
        Some((idx, at, words))
    }

    /// The value on `cpu` (below `self.cpus`) of element `idx`, which a lookup found: its
    /// word offset and words, the LRU reference bit set (the kernel's
    /// `bpf_lru_node_set_ref`). The value's words straight from the pool (`Pool::words`),
    /// not through the whole element's slice.
    #[inline(always)]
    fn found_value(&self, idx: u32, cpu: usize) -> Option<(usize, &[AtomicU64])> {
        if self.kind.lru {
            let [_, _, r, ..] = self.pool.head(idx)?;
            if r.load(Relaxed) == 0 {
                r.store(1, Relaxed);
            }
        }
        let at = self.value_offset(cpu);
        Some((at, self.pool.words(idx, at, self.stride)?))
    }

    /// `lookup_words` of a key of at most 16 bytes as its two element words (see
    /// `Map::lookup_key_words`), on worker `cpu` (any `cpu` reads the one value of a map
    /// that is not per-CPU): the element and its value's first byte, as native code takes
    /// it (`FoundElem`, in two registers; a null `host`: no element). What native code
    /// calls for a program's lookup, so the common answer for a one-word key of a map that
    /// is neither per-CPU nor LRU (the first element of the bucket's chain, an eager one,
    /// or an empty bucket) is found here with no loop and no call: the element's first
    /// words (`Pool::eager_head`, one bounds check), the value's first word among them
    /// (issue 11: the value's offset `cpu * stride`, for a CPU that is 0 here, and the
    /// value's own range check were ~15 of this path's ~70 instructions,
    /// bench/records/2026-12-01-runtime-29.txt). A chain that goes on continues out of
    /// line (`lookup_one_word_on`); per-CPU maps take `lookup_key_words_other`, every
    /// other case (longer keys, an LRU map, a writer crossing) the general path
    /// (`lookup_key_words_any`). (Those calls are not compiled as tail calls: the answer
    /// goes through a shared return block, bench/records/2026-11-30-runtime-25.txt.)
    #[inline(always)]
    pub(crate) fn lookup_key_words(&self, w0: u64, w1: u64, cpu: usize) -> FoundElem {
        if !self.one_word_shared || w1 != 0 {
            return self.lookup_key_words_other(w0, w1, cpu);
        }
        self.probe_one_word(w0)
    }

    /// Whether `probe_one_word` answers this map's lookups: one-word keys (1 to 8 bytes),
    /// neither per-CPU nor LRU.
    pub(crate) fn is_one_word_shared(&self) -> bool {
        self.one_word_shared
    }

    /// `lookup_key_words(w0, 0, cpu)` of a table whose lookups it answers
    /// ([`crate::Map::one_word_table`] gives no other): a run environment that chose it
    /// when the map was bound tests nothing per lookup that the binding knew (the map's
    /// type, a key's second word, which is 0 for a key of at most 8 bytes, the per-CPU
    /// and LRU flags; issue 11: those tests and the moves around them were ~9 of a direct
    /// lookup's ~54 instructions, bench/records/2026-12-01-runtime-38.txt).
    #[inline(always)]
    pub fn probe_one_word(&self, w0: u64) -> FoundElem {
        debug_assert!(self.one_word_shared);
        // Not per-CPU: any worker reads the one value, CPU 0's (`cpus` is 1).
        let b = self.bucket_of(hash_small(self.seed, SmallKey { w0, w1: 0 }));
        let (Some(stripe), Some(head)) = (self.stripe(b), self.heads.get(b)) else {
            return self.lookup_key_words_any(w0, 0, 0);
        };
        let Some(before) = stripe.read_begin() else {
            return self.lookup_key_words_any(w0, 0, 0);
        };
        let idx = head.load(Relaxed);
        let found = match self.pool.eager_head(idx) {
            // One key word and one copy of the value: the head's fifth word is the
            // value's first (`HEAD`), which is all `FoundElem` gives.
            Some([_, _, _, kw0, value]) if kw0.load(Relaxed) == w0 => {
                found_elem(idx, std::slice::from_ref(value))
            }
            // A chain that goes on: from the first element's successor.
            Some([_, link, ..]) => {
                let next = next_of(link.load(Relaxed));
                return self.lookup_one_word_on(stripe, before, next, w0, 0);
            }
            // An empty bucket (`NIL` is past every element).
            None if idx == NIL => FoundElem::NONE,
            // A chain that starts past the eager elements.
            None => return self.lookup_key_words_any(w0, 0, 0),
        };
        if stripe.read_end(before) {
            return found;
        }
        self.lookup_key_words_any(w0, 0, 0)
    }

    /// `lookup_key_words` of a map that is per-CPU, LRU or of keys longer than a word, or
    /// of a key with a second word: a per-CPU map's one-word keys as `lookup_key_words`
    /// takes a shared map's (the first element, an eager one, with no loop), on `cpu`'s
    /// copy of the value; every other case the general path (`lookup_key_words_any`).
    #[inline(never)]
    fn lookup_key_words_other(&self, w0: u64, w1: u64, cpu: usize) -> FoundElem {
        // Only a per-CPU map's CPU is tested: any other reads its one value (CPU 0) from
        // any worker, and `cpus` is 1 there.
        let cpu = if self.kind.percpu {
            if cpu >= self.cpus {
                return self.lookup_key_words_any(w0, w1, cpu);
            }
            cpu
        } else {
            0
        };
        if !self.one_word_inline || w1 != 0 {
            return self.lookup_key_words_any(w0, w1, cpu);
        }
        let b = self.bucket_of(hash_small(self.seed, SmallKey { w0, w1: 0 }));
        // From here on `w1` is 0: passed as such, so that it need not be kept.
        let (Some(stripe), Some(head)) = (self.stripe(b), self.heads.get(b)) else {
            return self.lookup_key_words_any(w0, 0, cpu);
        };
        let Some(before) = stripe.read_begin() else {
            return self.lookup_key_words_any(w0, 0, cpu);
        };
        let idx = head.load(Relaxed);
        let found = match self.pool.eager_head(idx) {
            Some([_, _, _, kw0, _]) if kw0.load(Relaxed) == w0 => {
                match self.one_word_value(idx, cpu) {
                    Some(found) => found,
                    None => return self.lookup_key_words_any(w0, 0, cpu),
                }
            }
            // A chain that goes on: from the first element's successor.
            Some([_, link, ..]) => {
                let next = next_of(link.load(Relaxed));
                return self.lookup_one_word_on(stripe, before, next, w0, cpu);
            }
            // An empty bucket (`NIL` is past every element).
            None if idx == NIL => FoundElem::NONE,
            // A chain that starts past the eager elements.
            None => return self.lookup_key_words_any(w0, 0, cpu),
        };
        if stripe.read_end(before) {
            return found;
        }
        self.lookup_key_words_any(w0, 0, cpu)
    }

    /// `lookup_key_words`'s one-word walk of a chain whose first element is not the
    /// answer, from that element's successor `next` (the stripe's read begun with
    /// `before`): the eager elements only; the general path (`lookup_key_words_any`) when
    /// the chain leads past them or a writer crossed. Its own loop, not `walk_small` from
    /// the head (which `lookup` shares, and which read the head and the first element
    /// again: ~60 instructions a call where a key second in its chain now takes ~30,
    /// bench/records/2026-11-30-runtime-26.txt).
    #[inline(never)]
    fn lookup_one_word_on(
        &self,
        stripe: &Stripe,
        before: u64,
        next: u32,
        w0: u64,
        cpu: usize,
    ) -> FoundElem {
        let walked = self.walk_one_word_from(next, w0);
        if stripe.read_end(before) {
            match walked {
                Some(Some(idx)) => {
                    if let Some(found) = self.one_word_value(idx, cpu) {
                        return found;
                    }
                }
                Some(None) => return FoundElem::NONE,
                None => {}
            }
        }
        self.lookup_key_words_any(w0, 0, cpu)
    }

    /// `walk_small(b, {w0, 0}, false, true)` past a chain's first element, which did not
    /// hold `w0`: from its successor `idx` on, at most `capacity` elements more (as many as
    /// `walk_small` would look at after the first), the eager ones only; `None` (no answer)
    /// when the chain leads past them. Bounded and checked as `walk_small` is, for
    /// lock-free readers.
    #[inline(always)]
    fn walk_one_word_from(&self, mut idx: u32, w0: u64) -> Option<Option<u32>> {
        let mut steps_left = self.pool.capacity;
        while idx != NIL {
            if steps_left == 0 {
                return Some(None);
            }
            steps_left -= 1;
            let [_, link, _, kw0, _] = self.pool.eager_head(idx)?;
            if kw0.load(Relaxed) == w0 {
                return Some(Some(idx));
            }
            idx = next_of(link.load(Relaxed));
        }
        Some(None)
    }

    /// Eager element `idx`'s value on `cpu` (below `self.cpus`) as `lookup_key_words`
    /// gives it (`None` past the eager elements), in a map of one-word keys: its offset
    /// `value_offset` with `key_words` the constant 1 (the field is not read again after
    /// the stripe's read began).
    #[inline(always)]
    fn one_word_value(&self, idx: u32, cpu: usize) -> Option<FoundElem> {
        let at = HEADER + 1 + cpu * self.stride;
        let words = self.pool.eager_words(idx as usize, at, self.stride)?;
        Some(found_elem(idx, words))
    }

    /// `lookup_key_words`'s general path: every key of at most 16 bytes, every map, `cpu`
    /// as `lookup_key_words` made it.
    #[inline(never)]
    fn lookup_key_words_any(&self, w0: u64, w1: u64, cpu: usize) -> FoundElem {
        if self.key_size > 16 || cpu >= self.cpus {
            return FoundElem::NONE;
        }
        let found = self
            .find_shared_small(SmallKey { w0, w1 }, self.key_words > 1)
            .and_then(|idx| Some((idx, self.found_value(idx, cpu)?.1)));
        found.map_or(FoundElem::NONE, |(idx, words)| found_elem(idx, words))
    }

    /// Element `idx`'s value on `cpu` as (element, word offset in it), as `lookup_loc`
    /// gives it: `None` for an element not allocated yet or a CPU the map has not. What an
    /// environment that gives each element's value a fixed address translates back with.
    #[inline]
    pub(crate) fn elem_loc(&self, idx: u32, cpu: usize) -> Option<(u32, usize)> {
        if cpu >= self.cpus {
            return None;
        }
        self.pool.elem(idx)?;
        Some((idx, self.value_offset(cpu)))
    }

    /// How many elements the pool may hand out (element indexes are below it).
    pub(crate) fn elem_capacity(&self) -> usize {
        self.pool.capacity
    }

    /// The bytes between the starts of two CPUs' copies of a value (`value_size` rounded
    /// up to 8).
    pub(crate) fn value_pitch(&self) -> usize {
        self.stride * 8
    }

    /// The words of the value at word `at` of element `idx` (from `lookup_loc`).
    #[inline]
    pub(crate) fn value_words_at(&self, idx: u32, at: usize) -> Option<&[AtomicU64]> {
        self.pool.elem(idx)?.get(at..at + self.stride)
    }

    /// The bytes of one value.
    #[inline]
    pub(crate) fn value_size(&self) -> usize {
        self.value_size
    }

    /// The value at word `at` of element `idx` (from `lookup_loc`).
    #[inline]
    pub(crate) fn value_at(&self, idx: u32, at: usize) -> Option<ValueRef<'_>> {
        let words = self.pool.elem(idx)?.get(at..at + self.stride)?;
        Some(ValueRef::in_map(words, self.value_size))
    }

    pub(crate) fn lookup_all(&self, key: &[u8]) -> Result<Vec<u8>, MapError> {
        if key.len() != self.key_size {
            return Err(MapError::Invalid);
        }
        let hash = hash_key(self.seed, key);
        let b = self.bucket_of(hash);
        let stripe = self.stripe(b).ok_or(MapError::NoEntry)?;
        let _guard = lock(&stripe.lock);
        let (_, idx) = self.find(b, hash, key).ok_or(MapError::NoEntry)?;
        let e = self.pool.elem(idx).ok_or(MapError::NoEntry)?;
        Ok(self.copy_out(self.value_words(e)))
    }

    fn copy_out(&self, words: &[AtomicU64]) -> Vec<u8> {
        if !self.kind.percpu {
            let mut out = vec![0u8; self.value_size];
            load_bytes(words, 0, &mut out);
            return out;
        }
        let rounded = self.stride * 8;
        let mut out = vec![0u8; rounded * self.cpus];
        for (cpu, chunk) in out.chunks_mut(rounded).enumerate() {
            let w = words.get(cpu * self.stride..).unwrap_or_default();
            load_bytes(w, 0, chunk);
        }
        out
    }

    fn check_src(&self, src: Src<'_>) -> Result<(), MapError> {
        let ok = match src {
            Src::Cpu(v, cpu) => v.len() == self.value_size && cpu < self.cpus,
            Src::All(v) if self.kind.percpu => v.len() == self.stride * 8 * self.cpus,
            Src::All(v) => v.len() == self.value_size,
        };
        if ok {
            Ok(())
        } else {
            Err(MapError::Invalid)
        }
    }

    /// Writes `src` into an element's value words; a new element's other CPUs stay zero.
    fn fill(&self, words: &[AtomicU64], src: Src<'_>) {
        match src {
            Src::Cpu(v, cpu) => {
                store_bytes(words.get(cpu * self.stride..).unwrap_or_default(), 0, v);
            }
            Src::All(v) if self.kind.percpu => {
                for (cpu, chunk) in v.chunks(self.stride * 8).enumerate() {
                    // Whole 8-byte words, padding too, as `copy_map_value_long`.
                    let w = words.get(cpu * self.stride..).unwrap_or_default();
                    store_bytes(w, 0, chunk);
                }
            }
            Src::All(v) => store_bytes(words, 0, v),
        }
    }

    /// A fresh element holding `key` and `src` (zero elsewhere), linked to `next`, not yet
    /// reachable: no reader sees its words being written.
    fn new_elem(&self, hash: u64, key: &[u8], src: Src<'_>, next: u32) -> Result<u32, MapError> {
        let idx = self.pool.alloc()?;
        let Some(e) = self.pool.elem(idx) else {
            self.pool.release(idx);
            return Err(MapError::NoMemory);
        };
        let generation = e.get(H_LINK).map_or(0, |w| generation_of(w.load(Relaxed)));
        for (i, w) in e.iter().enumerate() {
            let v = match i {
                H_HASH => hash,
                H_LINK => link(next, generation),
                _ => 0,
            };
            w.store(v, Relaxed);
        }
        for (c, w) in key.chunks(8).zip(self.key_of(e)) {
            w.store(key_word(c), Relaxed);
        }
        self.fill(self.value_words(e), src);
        Ok(idx)
    }

    fn set_referenced(&self, idx: u32) {
        if let Some(r) = self.pool.elem(idx).and_then(|e| e.get(H_REF)) {
            r.store(1, Relaxed);
        }
    }

    fn generation(&self, idx: u32) -> u32 {
        self.pool
            .elem(idx)
            .and_then(|e| e.get(H_LINK))
            .map_or(0, |w| generation_of(w.load(Relaxed)))
    }

    /// `htab_map_update_elem` and its per-CPU and LRU variants: flags (EINVAL), then
    /// `check_flags` against the existing element (EEXIST, ENOENT), then room (E2BIG; an
    /// LRU map evicts instead).
    pub(crate) fn update(&self, key: &[u8], src: Src<'_>, flags: u64) -> Result<(), MapError> {
        if key.len() != self.key_size {
            return Err(MapError::Invalid);
        }
        check_update_flags(flags)?;
        self.check_src(src)?;
        if self.kind.devmap {
            let v = match src {
                Src::Cpu(v, _) | Src::All(v) => v,
            };
            if v.get(..4) == Some(&[0; 4][..]) {
                return Err(MapError::Invalid);
            }
        }
        let hash = hash_key(self.seed, key);
        let b = self.bucket_of(hash);
        let stripe = self.stripe(b).ok_or(MapError::Invalid)?;
        // An LRU map makes room before it takes the bucket's lock (the eviction takes other
        // buckets' locks), as the kernel pops a free node before locking the bucket.
        let mut attempts = 0;
        loop {
            if self.kind.lru && self.len() >= self.max_entries {
                let exists = {
                    let _guard = lock(&stripe.lock);
                    self.find(b, hash, key).is_some()
                };
                if !exists {
                    self.evict_one();
                }
            }
            let guard = lock(&stripe.lock);
            let old = self.find(b, hash, key);
            if old.is_some() && flags & BPF_NOEXIST != 0 {
                return Err(MapError::Exists);
            }
            if old.is_none() && flags & BPF_EXIST != 0 && !self.kind.devmap {
                return Err(MapError::NoEntry);
            }
            if let Some((prev, idx)) = old {
                if self.kind.percpu {
                    // In place, as pcpu_copy_value writes into the existing element.
                    let e = self.pool.elem(idx).ok_or(MapError::Invalid)?;
                    self.fill(self.value_words(e), src);
                    self.set_referenced(idx);
                    return Ok(());
                }
                // A new element replaces the old one, whole: a reader sees the old value
                // or the new, never a mix.
                let new = self.new_elem(hash, key, src, self.next_after(idx))?;
                self.set_referenced(new);
                stripe.publish(|| self.set_next(b, prev, new));
                self.free_elem(idx);
                drop(guard);
                if self.kind.lru {
                    self.lru_push(new);
                }
                return Ok(());
            }
            if self.count.fetch_add(1, Ordering::AcqRel) >= self.max_entries {
                self.count.fetch_sub(1, Ordering::AcqRel);
                attempts += 1;
                drop(guard);
                if self.kind.lru && attempts < 8 {
                    continue;
                }
                return Err(if self.kind.lru { MapError::NoMemory } else { MapError::TooBig });
            }
            let head = self.heads.get(b).map_or(NIL, |h| h.load(Relaxed));
            let new = match self.new_elem(hash, key, src, head) {
                Ok(new) => new,
                Err(e) => {
                    self.count.fetch_sub(1, Ordering::AcqRel);
                    return Err(e);
                }
            };
            // At the head of the chain, as the kernel's hlist_nulls_add_head_rcu.
            stripe.publish(|| self.set_next(b, NIL, new));
            drop(guard);
            if self.kind.lru {
                self.lru_push(new);
            }
            return Ok(());
        }
    }

    fn lru_push(&self, idx: u32) {
        let entry = (idx, self.generation(idx));
        let mut q = lock(&self.lru);
        q.push_back(entry);
        if q.len() > 2 * self.max_entries + 64 {
            // Forget elements freed since (deleted or replaced).
            q.retain(|&(i, g)| self.generation(i) == g);
        }
    }

    /// Evicts one element: the oldest inserted that no lookup touched since the sweep last
    /// passed it (a CLOCK second chance over insertion order). Returns whether one went.
    fn evict_one(&self) -> bool {
        let mut q = lock(&self.lru);
        let mut budget = 2 * q.len() + 1;
        while budget > 0 {
            budget -= 1;
            let Some((idx, generation)) = q.pop_front() else { return false };
            let Some(e) = self.pool.elem(idx) else { continue };
            if self.generation(idx) != generation {
                continue; // freed since: a stale entry
            }
            let b = self.bucket_of(e.first().map_or(0, |w| w.load(Relaxed)));
            let Some(stripe) = self.stripe(b) else { continue };
            let guard = lock(&stripe.lock);
            // Still the same element, and linked where its hash says?
            if self.generation(idx) != generation {
                continue;
            }
            let Some(prev) = self.position(b, idx) else { continue };
            if e.get(H_REF).is_some_and(|r| r.swap(0, Relaxed) != 0) {
                drop(guard);
                q.push_back((idx, generation));
                continue;
            }
            self.unlink_and_free(stripe, b, prev, idx);
            self.count.fetch_sub(1, Ordering::AcqRel);
            return true;
        }
        false
    }

    pub(crate) fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        if key.len() != self.key_size {
            return Err(MapError::Invalid);
        }
        let hash = hash_key(self.seed, key);
        let b = self.bucket_of(hash);
        let stripe = self.stripe(b).ok_or(MapError::NoEntry)?;
        let _guard = lock(&stripe.lock);
        let (prev, idx) = self.find(b, hash, key).ok_or(MapError::NoEntry)?;
        self.unlink_and_free(stripe, b, prev, idx);
        self.count.fetch_sub(1, Ordering::AcqRel);
        Ok(())
    }

    fn key_bytes(&self, idx: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.key_size];
        if let Some(e) = self.pool.elem(idx) {
            load_bytes(self.key_of(e), 0, &mut out);
        }
        out
    }

    /// `htab_map_get_next_key`: the element after `key` in bucket order; a missing key
    /// starts over at the first element; after the last, ENOENT.
    pub(crate) fn get_next_key(&self, key: Option<&[u8]>) -> Result<Vec<u8>, MapError> {
        let mut from = 0;
        if let Some(key) = key {
            if key.len() != self.key_size {
                return Err(MapError::Invalid);
            }
            let hash = hash_key(self.seed, key);
            let b = self.bucket_of(hash);
            let stripe = self.stripe(b).ok_or(MapError::Invalid)?;
            let _guard = lock(&stripe.lock);
            if let Some((_, idx)) = self.find(b, hash, key) {
                let next = self.next_after(idx);
                if next != NIL {
                    return Ok(self.key_bytes(next));
                }
                from = b + 1;
            }
        }
        for b in from..self.n_buckets() {
            // An empty bucket is skipped without its lock (most are, in a sparse map).
            if self.heads.get(b).is_none_or(|h| h.load(Relaxed) == NIL) {
                continue;
            }
            let Some(stripe) = self.stripe(b) else { continue };
            let _guard = lock(&stripe.lock);
            let head = self.heads.get(b).map_or(NIL, |h| h.load(Relaxed));
            if head != NIL {
                return Ok(self.key_bytes(head));
            }
        }
        Err(MapError::NoEntry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_keys_hash_by_their_words() {
        // Every key of up to 16 bytes takes the small path, whose words are the element's
        // zero-padded key words; a key differing in any byte differs in its words.
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..5_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let mut bytes = [0u8; 17];
            bytes[..8].copy_from_slice(&x.to_le_bytes());
            bytes[8..16].copy_from_slice(&x.rotate_left(29).to_le_bytes());
            for len in 1..=16 {
                let key = &bytes[..len];
                let k = SmallKey::of(key).unwrap();
                let words: Vec<u64> = key.chunks(8).map(key_word).collect();
                assert_eq!(k.w0, words[0]);
                assert_eq!(k.w1, words.get(1).copied().unwrap_or(0));
                assert_eq!(hash_key(x, key), hash_small(x, k));
            }
            assert!(SmallKey::of(&bytes).is_none());
        }
    }

    #[test]
    fn small_key_hash_spreads_over_buckets() {
        // 256 keys that differ in one byte only, whichever byte of either word, must
        // spread over 256 buckets (a plain multiplicative hash's low bits ignore the
        // key's high bytes: all in one bucket). A random function fills about 162.
        for len in [4usize, 8, 16] {
            for byte in 0..len {
                let mut seen = std::collections::HashSet::new();
                for i in 0..256usize {
                    let mut key = [0x11u8; 16];
                    key[byte] = i as u8;
                    seen.insert(hash_key(0x5eed, &key[..len]) & 255);
                }
                assert!(seen.len() > 128, "len {len} byte {byte}: {} buckets of 256", seen.len());
            }
        }
    }

    #[test]
    fn a_read_that_a_writer_crossed_is_thrown_away() {
        let stripe = Stripe::default();
        assert_eq!(stripe.try_read(|| 7), Some(7));
        // A writer relinked a chain while the walk ran: its answer is not kept.
        let crossed = stripe.try_read(|| {
            let _guard = lock(&stripe.lock);
            stripe.publish(|| {});
            7
        });
        assert_eq!(crossed, None);
        assert_eq!(stripe.try_read(|| 8), Some(8));
        // A writer in the middle of a relink (the sequence odd): no answer either.
        stripe.seq.fetch_add(1, Relaxed);
        assert_eq!(stripe.try_read(|| 9), None);
    }

    #[test]
    fn a_lookup_crossing_a_writer_retries_then_takes_the_lock() {
        // Every stripe's sequence number odd, as while a writer relinks a chain: the
        // first, inline try and every retry see it, so each lookup ends under the
        // stripe's lock (free here) and must still give the key's own value, small keys
        // and long ones alike.
        for key_size in [4u32, 16, 24] {
            let kind = HashKind { percpu: false, lru: false, devmap: false };
            let m = HashMap::new(kind, key_size, 8, 64, 1, 0x77).unwrap();
            let key =
                |i: u64| -> Vec<u8> { (0..u64::from(key_size)).map(|b| (i + b) as u8).collect() };
            for i in 0..40u64 {
                m.update(&key(i), Src::Cpu(&i.to_ne_bytes(), 0), 0).unwrap();
            }
            for s in m.stripes.iter() {
                s.seq.fetch_add(1, Relaxed);
            }
            for i in 0..40u64 {
                let (_, _, words) = m.lookup_words(&key(i), 0).unwrap();
                assert_eq!(words[0].load(Relaxed), i, "key size {key_size}, key {i}");
            }
            assert!(m.lookup_words(&key(200), 0).is_none());
            for s in m.stripes.iter() {
                s.seq.fetch_add(1, Relaxed);
            }
        }
    }

    #[test]
    fn lookups_of_every_small_key_size() {
        for key_size in [1u32, 3, 4, 7, 8, 12, 16, 20] {
            let kind = HashKind { percpu: false, lru: false, devmap: false };
            let m = HashMap::new(kind, key_size, 8, 64, 1, 0x77).unwrap();
            let key = |i: u64| -> Vec<u8> {
                (0..key_size as u64)
                    .map(|b| (i.wrapping_mul(31).wrapping_add(b * 7)) as u8)
                    .collect()
            };
            for i in 0..40u64 {
                m.update(&key(i), Src::Cpu(&i.to_ne_bytes(), 0), 0).unwrap();
            }
            for i in 0..40u64 {
                let (_, _, words) = m.lookup_words(&key(i), 0).unwrap();
                assert_eq!(words[0].load(Relaxed), i, "key size {key_size}, key {i}");
            }
            // A key one byte off anywhere is not found (unless it is another key).
            let mut k = key(5);
            for b in 0..k.len() {
                k[b] ^= 0x80;
                let found = m.lookup_words(&k, 0).map(|(_, _, w)| w[0].load(Relaxed));
                let other = (0..40u64).find(|&j| key(j) == k);
                assert_eq!(found, other, "key size {key_size}, byte {b}");
                k[b] ^= 0x80;
            }
            assert!(m.lookup_words(&key(0)[..key_size as usize - 1], 0).is_none());
        }
    }

    /// `lookup_key_words`'s answer as the element and its value's first word (`None`: no
    /// element, then with element 0 as native code expects).
    fn key_words(m: &HashMap, w0: u64, w1: u64, cpu: usize) -> Option<(u32, *const AtomicU64)> {
        let found = m.lookup_key_words(w0, w1, cpu);
        if found.host.is_null() {
            assert_eq!(found.elem, 0, "a miss's element");
            return None;
        }
        Some((u32::try_from(found.elem).unwrap(), found.host.cast_const().cast()))
    }

    #[test]
    fn the_one_word_keys_path_answers_as_the_general_one() {
        // `lookup`'s own path for 4- and 8-byte keys, and `lookup_key_words` (the
        // program's) on it: each answer the same element and words as `lookup_words` gives, for elements among the eager ones and past them (the
        // second half: 1,500 elements, 1,024 eager), misses, a CPU the map has not, a
        // writer crossing (every stripe odd), and an LRU map (whose reference bit is set).
        for (key_size, lru) in [(4u32, false), (8, false), (4, true)] {
            let kind = HashKind { percpu: false, lru, devmap: false };
            let m = HashMap::new(kind, key_size, 8, 1500, 1, 0x77).unwrap();
            let key = |i: u64| -> Vec<u8> { i.to_ne_bytes()[..key_size as usize].to_vec() };
            for i in 0..1500u64 {
                m.update(&key(i * 3), Src::Cpu(&i.to_ne_bytes(), 0), 0).unwrap();
            }
            for odd in [false, true] {
                for i in 0..1500u64 {
                    let what = format!("key size {key_size}, lru {lru}, odd {odd}, key {i}");
                    let words = m.lookup(&key(i * 3), 0).expect(&what);
                    assert_eq!(words[0].load(Relaxed), i, "{what}");
                    let (idx, _, general) = m.lookup_words(&key(i * 3), 0).unwrap();
                    assert_eq!(words.as_ptr(), general.as_ptr(), "{what}");
                    // The program's entry: the key as its element word.
                    let w0 =
                        u64::from_ne_bytes(key(i * 3).try_into().unwrap_or_else(|k: Vec<u8>| {
                            let mut w = [0u8; 8];
                            w[..k.len()].copy_from_slice(&k);
                            w
                        }));
                    let found = key_words(&m, w0, 0, 0);
                    assert_eq!(found, Some((idx, general.as_ptr())), "{what}: key words");
                    assert_eq!(key_words(&m, w0 + 1, 0, 0), None, "{what}: words, a miss");
                    // Not per-CPU: any worker reads the one value.
                    assert_eq!(key_words(&m, w0, 0, 1), found, "{what}: words, CPU 1");
                    if lru {
                        m.pool.elem(idx).unwrap()[H_REF].store(0, Relaxed);
                        key_words(&m, w0, 0, 0).unwrap();
                        let r = m.pool.elem(idx).unwrap()[H_REF].load(Relaxed);
                        assert_eq!(r, 1, "{what}: reference bit, key words");
                    }
                    if lru {
                        let r = m.pool.elem(idx).unwrap()[H_REF].swap(0, Relaxed);
                        assert_eq!(r, 1, "{what}: reference bit");
                        m.lookup(&key(i * 3), 0).unwrap();
                        assert_eq!(m.pool.elem(idx).unwrap()[H_REF].load(Relaxed), 1, "{what}");
                    }
                    assert!(m.lookup(&key(i * 3 + 1), 0).is_none(), "{what}: a miss");
                    assert!(m.lookup(&key(i * 3), 1).is_none(), "{what}: CPU 1");
                }
                for s in m.stripes.iter() {
                    s.seq.fetch_add(1, Relaxed);
                }
            }
            assert!(m.lookup(&[0; 5], 0).is_none());
        }
    }

    /// `probe_one_word` (a run environment's lookup chosen when it binds a map of one-word
    /// keys) gives `lookup_key_words`'s answer, element and value, for every key of such a
    /// map: first in its chain or later, past the eager elements (1,500 elements, 1,024
    /// eager), misses, keys deleted, replaced by an update and inserted again, a writer
    /// crossing (every stripe odd), on any worker's map; only maps of keys of 1 to 8 bytes,
    /// neither per-CPU nor LRU, are its to answer.
    #[test]
    fn the_one_word_probe_answers_as_the_programs_lookup() {
        let kinds = [(false, false), (true, false), (false, true), (true, true)];
        for (key_size, (percpu, lru)) in
            [1u32, 4, 8, 12, 16].into_iter().flat_map(|size| kinds.map(|kind| (size, kind)))
        {
            let kind = HashKind { percpu, lru, devmap: false };
            let m = HashMap::new(kind, key_size, 8, 1500, 2, 0x51).unwrap();
            let what = format!("key size {key_size}, per-CPU {percpu}, LRU {lru}");
            assert_eq!(m.is_one_word_shared(), key_size <= 8 && !percpu && !lru, "{what}");
            if !m.is_one_word_shared() {
                continue;
            }
            let modulus = 1u64 << (8 * key_size.min(7));
            let key = |i: u64| (i % modulus).to_ne_bytes()[..key_size as usize].to_vec();
            let w0 = |i: u64| {
                let mut w = [0u8; 8];
                w[..key_size as usize].copy_from_slice(&key(i));
                u64::from_ne_bytes(w)
            };
            let keys = 1500.min(modulus / 3);
            for i in 0..keys {
                m.update(&key(i * 3), Src::Cpu(&i.to_ne_bytes(), 0), 0).unwrap();
            }
            let same = |i: u64, what: &str| {
                let probed = m.probe_one_word(w0(i));
                assert_eq!(probed, m.lookup_key_words(w0(i), 0, 0), "{what}: key {i}");
                assert_eq!(probed, m.lookup_key_words(w0(i), 0, 1), "{what}: key {i}, CPU 1");
                probed
            };
            for odd in [false, true] {
                for i in 0..keys {
                    let what = format!("{what}, odd {odd}");
                    let found = same(i * 3, &what);
                    let elem = u32::try_from(found.elem).unwrap();
                    let words = m.value_words_at(elem, m.value_offset(0)).expect(&what);
                    assert_eq!(found.host, words[0].as_ptr().cast(), "{what}: key {i}'s value");
                    assert_eq!(words[0].load(Relaxed), i, "{what}: key {i}'s value");
                    assert!(same(i * 3 + 1, &what).host.is_null(), "{what}: a miss");
                }
                for s in m.stripes.iter() {
                    s.seq.fetch_add(1, Relaxed);
                }
            }
            // Deleted, replaced (a new element) and inserted again.
            for i in (0..keys).step_by(5) {
                m.delete(&key(i * 3)).unwrap();
                assert!(same(i * 3, &what).host.is_null(), "{what}: key {i} deleted");
            }
            for i in (1..keys).step_by(5) {
                let before = same(i * 3, &what);
                m.update(&key(i * 3), Src::Cpu(&(i + 7).to_ne_bytes(), 0), 0).unwrap();
                let after = same(i * 3, &what);
                assert_ne!(before.elem, after.elem, "{what}: key {i} replaced");
            }
            for i in (0..keys).step_by(5) {
                m.update(&key(i * 3), Src::Cpu(&i.to_ne_bytes(), 0), 0).unwrap();
                assert!(!same(i * 3, &what).host.is_null(), "{what}: key {i} again");
            }
        }
    }

    /// `lookup_key_words` (the program's lookup through `find_hash_elem`), its first-element
    /// path and the walk on (`lookup_one_word_on`), against `lookup_words` (the general
    /// walk) and the values written: 12 keys in 16 buckets, four of them in one (a
    /// key found second, third, ...); a miss in a bucket whose chain has elements; deleted
    /// keys (before and after others in their chains) missing and the rest still found; a
    /// writer crossing (every stripe odd); per-CPU values, a CPU the map has not; LRU; keys
    /// of 4 and 8 bytes (the one-word path) and 12 and 16 (two words, the general one).
    /// A chain whose links loop (as a lock-free reader may find it while writers relink
    /// it; here made so by hand, with no writer to send the reader elsewhere) ends the
    /// program's lookup (`lookup_key_words`, past the chain's first element on its own
    /// walk): keys on the loop are found, one of that bucket not on it is not, and the
    /// walk stops after a bounded number of steps instead of going round for ever.
    #[test]
    fn the_programs_lookup_ends_on_a_chain_that_loops() {
        for key_size in [4u32, 8] {
            let kind = HashKind { percpu: false, lru: false, devmap: false };
            let m = HashMap::new(kind, key_size, 8, 16, 1, 0x9e37).unwrap();
            let bucket = |w0: u64| m.bucket_of(hash_small(m.seed, SmallKey { w0, w1: 0 }));
            let key = |w0: u64| w0.to_ne_bytes()[..key_size as usize].to_vec();
            let target = bucket(1);
            let mut same = (1..).filter(|&w| bucket(w) == target);
            let keys: Vec<u64> = same.by_ref().take(3).collect();
            let absent = same.next().unwrap();
            for (i, &w0) in keys.iter().enumerate() {
                m.update(&key(w0), Src::Cpu(&(i as u64).to_ne_bytes(), 0), 0).unwrap();
            }
            // The chain's last element linked back to the first's successor.
            let first = m.heads[target].load(Relaxed);
            let link = |idx: u32| &m.pool.elem(idx).unwrap()[H_LINK];
            let second = next_of(link(first).load(Relaxed));
            let last = next_of(link(second).load(Relaxed));
            assert_eq!(next_of(link(last).load(Relaxed)), NIL, "a chain of three");
            let old = link(last).load(Relaxed);
            link(last).store(old & !u64::from(u32::MAX) | u64::from(second), Relaxed);
            for (i, &w0) in keys.iter().enumerate() {
                let what = format!("key size {key_size}: key {i} on the loop");
                let (elem, first) = key_words(&m, w0, 0, 0).expect(&what);
                let w = m.value_words_at(elem, m.value_offset(0)).unwrap();
                assert_eq!((w.as_ptr(), w[0].load(Relaxed)), (first, i as u64), "{what}");
            }
            assert_eq!(key_words(&m, absent, 0, 0), None, "key size {key_size}: absent");
        }
    }

    /// A chain whose first element is an eager one and whose second is past them (the
    /// pool's later chunks): the program's lookup of the second's key, past the first on
    /// its own walk of the eager elements, gives up there and takes the general path,
    /// which finds it (not a miss).
    #[test]
    fn the_programs_lookup_goes_on_past_the_eager_elements() {
        let kind = HashKind { percpu: false, lru: false, devmap: false };
        let m = HashMap::new(kind, 4, 8, 4096, 1, 0x5eed).unwrap();
        let key = |i: u64| (i as u32).to_ne_bytes();
        let n = m.pool.eager_len as u64 + 200;
        for i in 0..n {
            m.update(&key(i), Src::Cpu(&i.to_ne_bytes(), 0), 0).unwrap();
        }
        let bucket = |i: u64| m.bucket_of(hash_small(m.seed, SmallKey { w0: i, w1: 0 }));
        let (eager, past): (Vec<u64>, Vec<u64>) = (0..n)
            .partition(|&i| (m.lookup_words(&key(i), 0).unwrap().0 as usize) < m.pool.eager_len);
        // A bucket with an eager element and one past them, made the chain `eager -> past`.
        let (e, p) = past
            .iter()
            .find_map(|&p| eager.iter().find(|&&e| bucket(e) == bucket(p)).map(|&e| (e, p)))
            .expect("a bucket holding both");
        let b = bucket(e);
        let (ei, pi) =
            (m.lookup_words(&key(e), 0).unwrap().0, m.lookup_words(&key(p), 0).unwrap().0);
        let link = |idx: u32| &m.pool.elem(idx).unwrap()[H_LINK];
        let relink = |idx: u32, to: u32| {
            let old = link(idx).load(Relaxed);
            link(idx).store(old & !u64::from(u32::MAX) | u64::from(to), Relaxed);
        };
        m.heads[b].store(ei, Relaxed);
        relink(ei, pi);
        relink(pi, NIL);
        for (i, idx) in [(e, ei), (p, pi)] {
            let (elem, first) = key_words(&m, i, 0, 0).expect("found");
            let w = m.value_words_at(elem, m.value_offset(0)).unwrap();
            assert_eq!((elem, w.as_ptr(), w[0].load(Relaxed)), (idx, first, i), "key {i}");
        }
        let absent = (n..).find(|&i| bucket(i) == b).unwrap();
        assert_eq!(key_words(&m, absent, 0, 0), None, "absent");
    }

    /// The program's lookup on maps that are neither per-CPU nor LRU (`lookup_key_words`'s
    /// inline path: an element's value as its words after the header and the one key
    /// word) against the general walk, for values of 1 to 64 bytes (one to eight words
    /// after the key): the same element and value address for every key present, first
    /// in its chain or further on (64 keys in 64 buckets), the value's words those
    /// written, misses as misses; then with every stripe odd (a writer crossing).
    #[test]
    fn the_programs_lookup_finds_every_value_size_where_the_general_one_does() {
        for (key_size, value_size) in [(4u32, 1u32), (4, 8), (8, 12), (4, 24), (8, 64)] {
            let kind = HashKind { percpu: false, lru: false, devmap: false };
            let m = HashMap::new(kind, key_size, value_size, 64, 2, 0xa5a5).unwrap();
            let w0_of = |i: u64| if key_size == 8 { i.wrapping_mul(0x1_0000_0001) } else { i };
            let key = |i: u64| w0_of(i).to_ne_bytes()[..key_size as usize].to_vec();
            let value =
                |i: u64| (0..value_size as u64).map(|b| (i * 31 + b) as u8).collect::<Vec<u8>>();
            for i in (0..64u64).map(|i| i * 5) {
                m.update(&key(i), Src::Cpu(&value(i), 0), 0).unwrap();
            }
            for odd in [false, true] {
                for i in 0..320u64 {
                    let what = format!("key {key_size}, value {value_size}, odd {odd}, key {i}");
                    let general = m.lookup_words(&key(i), 0).map(|(idx, at, words)| {
                        assert_eq!(at, m.value_offset(0), "{what}");
                        let mut bytes = vec![0u8; value_size as usize];
                        load_bytes(words, 0, &mut bytes);
                        assert_eq!(bytes, value(i), "{what}: the value written");
                        (idx, words.as_ptr())
                    });
                    assert_eq!(general.is_some(), i % 5 == 0, "{what}");
                    assert_eq!(key_words(&m, w0_of(i), 0, 0), general, "{what}");
                    // Any worker reads the one value.
                    assert_eq!(key_words(&m, w0_of(i), 0, 1), general, "{what}: CPU 1");
                }
                for s in m.stripes.iter() {
                    s.seq.fetch_add(1, Relaxed);
                }
            }
        }
    }

    #[test]
    fn the_programs_lookup_walks_chains_as_the_general_one() {
        let kinds = [
            (4u32, HashKind { percpu: false, lru: false, devmap: false }),
            (8, HashKind { percpu: false, lru: false, devmap: false }),
            (4, HashKind { percpu: true, lru: false, devmap: false }),
            (8, HashKind { percpu: false, lru: true, devmap: false }),
            (12, HashKind { percpu: false, lru: false, devmap: false }),
            (16, HashKind { percpu: true, lru: false, devmap: false }),
        ];
        for (key_size, kind) in kinds {
            let m = HashMap::new(kind, key_size, 8, 12, 2, 0x1234_5678).unwrap();
            // Keys in both words (the second word's for 12 and 16 bytes).
            let key_of = |i: u64| -> Vec<u8> {
                let mut k = vec![0u8; key_size as usize];
                k[..4].copy_from_slice(&(i as u32 * 7 + 1).to_ne_bytes());
                if key_size > 8 {
                    k[8..12].copy_from_slice(&(i as u32 ^ 0x55).to_ne_bytes());
                }
                k
            };
            let words = |k: &[u8]| {
                let mut w = [0u8; 16];
                w[..k.len()].copy_from_slice(k);
                let (lo, hi) = w.split_at(8);
                (
                    u64::from_ne_bytes(lo.try_into().unwrap()),
                    u64::from_ne_bytes(hi.try_into().unwrap()),
                )
            };
            // Four keys of one bucket (a chain of four at least), eight of any.
            let bucket = |k: &[u8]| {
                let (w0, w1) = words(k);
                m.bucket_of(hash_small(m.seed, SmallKey { w0, w1 }))
            };
            let target = bucket(&key_of(0));
            let same = (0..).filter(|&i| bucket(&key_of(i)) == target).take(4);
            let other = (0..).filter(|&i| bucket(&key_of(i)) != target).take(8);
            let keys: Vec<u64> = same.chain(other).collect();
            let key = |j: u64| key_of(keys[j as usize]);
            for i in 0..12u64 {
                for cpu in 0..m.cpus {
                    let v = (i * 10 + cpu as u64).to_ne_bytes();
                    m.update(&key(i), Src::Cpu(&v, cpu), 0).unwrap();
                }
            }
            let mut deleted = [false; 12];
            let mut deepest = 0;
            for round in 0..3 {
                for odd in [false, true] {
                    for i in 0..12u64 {
                        let what = format!(
                            "key size {key_size}, {kind:?}, round {round}, odd {odd}, key {i}"
                        );
                        let (w0, w1) = words(&key(i));
                        // `usize::MAX`: what `find_hash_elem` makes of a CPU past `usize`.
                        for cpu in [0, 1, 2, usize::MAX] {
                            let got = key_words(&m, w0, w1, cpu);
                            let read = if kind.percpu { cpu } else { 0 };
                            let general =
                                m.lookup_words(&key(i), read).map(|(e, _, w)| (e, w.as_ptr()));
                            assert_eq!(got, general, "{what}, cpu {cpu}");
                            if deleted[i as usize] || read >= m.cpus {
                                assert_eq!(got, None, "{what}, cpu {cpu}");
                                continue;
                            }
                            let (elem, first) = got.expect(&what);
                            // The value's first word as the pool gives it, and what it holds.
                            let at = m.value_offset(read);
                            let w = m.value_words_at(elem, at).unwrap();
                            assert_eq!(w.as_ptr(), first, "{what}, cpu {cpu}");
                            assert_eq!(
                                w[0].load(Relaxed),
                                i * 10 + read as u64,
                                "{what}, cpu {cpu}"
                            );
                            let b = m.bucket_of(hash_small(m.seed, SmallKey { w0, w1 }));
                            let mut at_chain = 0;
                            let mut p = m.position(b, elem).unwrap();
                            while p != NIL {
                                at_chain += 1;
                                p = m.position(b, p).unwrap();
                            }
                            deepest = deepest.max(at_chain);
                        }
                        // Keys not in the map (the first in the chains' bucket).
                        let absent = (0..)
                            .find(|&j| bucket(&key_of(j)) == target && !keys.contains(&j))
                            .unwrap();
                        let (m0, m1) = words(&key_of(absent));
                        assert_eq!(key_words(&m, m0, m1, 0), None, "{what}: a miss");
                        assert_eq!(key_words(&m, w0 ^ 1 << 40, w1, 0), None, "{what}: a miss");
                    }
                    for s in m.stripes.iter() {
                        s.seq.fetch_add(1, Relaxed);
                    }
                }
                // Delete a third of the keys each round: chains lose their heads, middles
                // and tails.
                for i in (round as u64..12).step_by(3) {
                    m.delete(&key(i)).unwrap();
                    deleted[i as usize] = true;
                }
            }
            assert!(deepest >= 3, "key size {key_size}: no key found fourth in its chain");
        }
    }

    #[test]
    fn long_keys_compare_every_word_to_the_last_byte() {
        // `key_matches` for keys past 16 bytes, whole words and a zero-padded rest: a key
        // one bit off in its last byte (last word, or the rest) or its first does not
        // match, nor do key words too few for the key.
        for len in [17usize, 24, 31, 56, 64] {
            let key: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(29) ^ 0xa5).collect();
            let words: Vec<AtomicU64> =
                key.chunks(8).map(|c| AtomicU64::new(key_word(c))).collect();
            assert!(key_matches(&words, &key), "len {len}");
            for at in [0, len - 1] {
                let mut other = key.clone();
                other[at] ^= 1;
                assert!(!key_matches(&words, &other), "len {len}, byte {at}");
            }
            assert!(!key_matches(&words[..words.len() - 1], &key), "len {len}, short words");
        }
    }

    #[test]
    fn long_keys_in_one_chain_answer_as_the_kernel_would() {
        // Keys of 56 bytes (a flow table's) and 20 (a zero-padded rest) that differ only
        // in their last byte, two of them chained in one bucket (of 4), on every hash
        // kind: each finds its own value, a missing neighbour finds nothing,
        // and after a delete or an update the chain still answers for every key.
        for key_size in [56u32, 20] {
            for (percpu, lru) in [(false, false), (true, false), (false, true)] {
                let kind = HashKind { percpu, lru, devmap: false };
                let what = format!("key size {key_size}, percpu {percpu}, lru {lru}");
                let m = HashMap::new(kind, key_size, 8, 4, 2, 0x77).unwrap();
                // A per-CPU map's second CPU (its values start past the first's).
                let cpu = usize::from(percpu);
                assert_eq!(m.n_buckets(), 4, "{what}");
                let key = |last: u8| -> Vec<u8> {
                    let mut k: Vec<u8> = (0..key_size as u8).map(|i| i ^ 0x3c).collect();
                    *k.last_mut().unwrap() = last;
                    k
                };
                // Keys until two share a bucket: a chain of two long keys.
                let mut lasts = Vec::new();
                for last in 0..=255u8 {
                    let b = m.bucket_of(hash_general(0x77, &key(last)));
                    match lasts.first() {
                        None => lasts.push(last),
                        Some(&first) if m.bucket_of(hash_general(0x77, &key(first))) == b => {
                            lasts.push(last);
                            break;
                        }
                        Some(_) => {}
                    }
                }
                let [a, b] = lasts[..] else { panic!("{what}: no two keys in one bucket") };
                let value = |v: u64| v.to_ne_bytes();
                let get =
                    |last: u8| m.lookup_words(&key(last), cpu).map(|(_, _, w)| w[0].load(Relaxed));
                m.update(&key(a), Src::Cpu(&value(10), cpu), 0).unwrap();
                assert_eq!(get(b), None, "{what}: the neighbour before its insert");
                m.update(&key(b), Src::Cpu(&value(11), cpu), 0).unwrap();
                assert_eq!((get(a), get(b)), (Some(10), Some(11)), "{what}");
                assert_eq!(get(a ^ b ^ 0xff), None, "{what}: a third key, missing");
                let all = m.lookup_all(&key(b)).unwrap();
                assert_eq!(all[8 * cpu..8 * cpu + 8], value(11), "{what}");
                m.update(&key(a), Src::Cpu(&value(12), cpu), 0).unwrap();
                assert_eq!((get(a), get(b)), (Some(12), Some(11)), "{what}: updated");
                m.delete(&key(a)).unwrap();
                assert_eq!((get(a), get(b)), (None, Some(11)), "{what}: deleted");
                assert!(m.lookup_words(&key(b)[..key_size as usize - 1], cpu).is_none(), "{what}");
            }
        }
    }
}
