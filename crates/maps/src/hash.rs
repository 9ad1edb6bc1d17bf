//! Hash maps: `BPF_MAP_TYPE_HASH`, `PERCPU_HASH`, `LRU_HASH`, `LRU_PERCPU_HASH` and
//! `DEVMAP_HASH`.
//!
//! The table has the kernel's shape: `roundup_pow_of_two(max_entries)` buckets (at most
//! 2^20; past that, chains grow), each a short chain. Buckets are guarded by striped
//! reader-writer locks (bucket `b` by lock `b % STRIPES`), so lookups on different buckets
//! never contend on a write and lookups never block each other. An element's value is an
//! `Arc` of atomic words: a lookup hands out a clone, so an element deleted or replaced
//! while a program holds its value stays allocated until that program lets it go (the
//! kernel's RCU grace period, without reuse: weir never recycles an element a reader holds).

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

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

/// weir's hash of a key (a multiply-xorshift over 8-byte words, seeded per map as the
/// kernel seeds `jhash` with `hashrnd`; `BPF_F_ZERO_SEED` makes it 0).
#[inline]
pub(crate) fn hash_key(seed: u64, key: &[u8]) -> u64 {
    let h = seed ^ (key.len() as u64).wrapping_mul(K2);
    // The common key sizes (a u32 index or address, a u64) without the general loop's
    // variable-length copy (a memcpy call): the same values as `hash_general`.
    if let Ok(b) = <[u8; 4]>::try_from(key) {
        return finish((h ^ u64::from(u32::from_le_bytes(b))).wrapping_mul(K1));
    }
    if let Ok(b) = <[u8; 8]>::try_from(key) {
        let h = (h ^ u64::from_le_bytes(b)).wrapping_mul(K1);
        return finish(h ^ (h >> 29));
    }
    hash_general(seed, key)
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

#[derive(Debug)]
struct Entry {
    hash: u64,
    key: Box<[u8]>,
    value: Arc<[AtomicU64]>,
    /// LRU: set by lookups, cleared by the eviction sweep (a second chance).
    referenced: AtomicBool,
}

type Bucket = Vec<Entry>;

/// An LRU queue entry: the key and the element's value (weak: deleted ones are skipped).
type LruEntry = (Box<[u8]>, Weak<[AtomicU64]>);

/// How the hash map's values and eviction behave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HashKind {
    pub percpu: bool,
    pub lru: bool,
    /// `DEVMAP_HASH`: `BPF_EXIST` on a missing key inserts; ifindex 0 is refused.
    pub devmap: bool,
}

#[derive(Debug)]
pub(crate) struct HashMap {
    kind: HashKind,
    stripes: Box<[RwLock<Vec<Bucket>>]>,
    /// log2 of the stripe count (a power of two).
    stripe_bits: u32,
    bucket_mask: u64,
    seed: u64,
    count: AtomicUsize,
    max_entries: usize,
    key_size: usize,
    value_size: usize,
    /// Words per CPU copy of the value.
    stride: usize,
    cpus: usize,
    /// LRU: elements in insertion order (weak: deleted ones are skipped).
    lru: Mutex<VecDeque<LruEntry>>,
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

fn lock_read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn lock_write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
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
        let per_stripe = n_buckets / n_stripes;
        let mut stripes = Vec::new();
        stripes.try_reserve_exact(n_stripes).map_err(|_| MapError::NoMemory)?;
        for _ in 0..n_stripes {
            let mut buckets = Vec::new();
            buckets.try_reserve_exact(per_stripe).map_err(|_| MapError::NoMemory)?;
            buckets.resize_with(per_stripe, Vec::new);
            stripes.push(RwLock::new(buckets));
        }
        let stride = words_for(value_size as usize);
        Ok(HashMap {
            kind,
            stripe_bits: n_stripes.trailing_zeros(),
            stripes: stripes.into_boxed_slice(),
            bucket_mask: n_buckets as u64 - 1,
            seed,
            count: AtomicUsize::new(0),
            max_entries: max_entries as usize,
            key_size: key_size as usize,
            value_size: value_size as usize,
            stride,
            cpus: if kind.percpu { cpus } else { 1 },
            lru: Mutex::new(VecDeque::new()),
        })
    }

    fn n_buckets(&self) -> usize {
        self.bucket_mask as usize + 1
    }

    /// (stripe, bucket within the stripe) of global bucket `b`: `(b % n, b / n)` for the
    /// power-of-two stripe count `n`, as a mask and a shift (two divisions cost more than
    /// the rest of a lookup).
    #[inline]
    fn place(&self, b: usize) -> (usize, usize) {
        (b & (self.stripes.len() - 1), b >> self.stripe_bits)
    }

    fn bucket_of(&self, hash: u64) -> usize {
        (hash & self.bucket_mask) as usize
    }

    fn find<'b>(bucket: &'b Bucket, hash: u64, key: &[u8]) -> Option<(usize, &'b Entry)> {
        bucket.iter().enumerate().find(|(_, e)| e.hash == hash && *e.key == *key)
    }

    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn lookup(&self, key: &[u8], cpu: usize) -> Option<ValueRef<'_>> {
        if key.len() != self.key_size || cpu >= self.cpus {
            return None;
        }
        let hash = hash_key(self.seed, key);
        let (s, i) = self.place(self.bucket_of(hash));
        let stripe = lock_read(self.stripes.get(s)?);
        let (_, e) = Self::find(stripe.get(i)?, hash, key)?;
        if self.kind.lru && !e.referenced.load(Ordering::Relaxed) {
            e.referenced.store(true, Ordering::Relaxed);
        }
        Some(ValueRef::in_elem(Arc::clone(&e.value), cpu * self.stride, self.value_size))
    }

    pub(crate) fn lookup_all(&self, key: &[u8]) -> Result<Vec<u8>, MapError> {
        if key.len() != self.key_size {
            return Err(MapError::Invalid);
        }
        let hash = hash_key(self.seed, key);
        let (s, i) = self.place(self.bucket_of(hash));
        let stripe = lock_read(self.stripes.get(s).ok_or(MapError::NoEntry)?);
        let bucket = stripe.get(i).ok_or(MapError::NoEntry)?;
        let (_, e) = Self::find(bucket, hash, key).ok_or(MapError::NoEntry)?;
        Ok(self.copy_out(&e.value))
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

    /// Writes `src` into an element's words; a new element's other CPUs stay zero.
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

    fn new_value(&self, src: Src<'_>) -> Result<Arc<[AtomicU64]>, MapError> {
        let words: Arc<[AtomicU64]> = zeroed_words(self.stride * self.cpus)?.into();
        self.fill(&words, src);
        Ok(words)
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
        let (s, i) = self.place(self.bucket_of(hash));
        let stripe_lock = self.stripes.get(s).ok_or(MapError::Invalid)?;
        // An LRU map makes room before it takes the bucket's lock (the eviction takes other
        // buckets' locks), as the kernel pops a free node before locking the bucket.
        let mut attempts = 0;
        loop {
            let exists = {
                let stripe = lock_read(stripe_lock);
                stripe.get(i).is_some_and(|b| Self::find(b, hash, key).is_some())
            };
            if self.kind.lru && !exists && self.len() >= self.max_entries {
                self.evict_one();
            }
            let mut stripe = lock_write(stripe_lock);
            let bucket = stripe.get_mut(i).ok_or(MapError::Invalid)?;
            let old = Self::find(bucket, hash, key).map(|(pos, _)| pos);
            if old.is_some() && flags & BPF_NOEXIST != 0 {
                return Err(MapError::Exists);
            }
            if old.is_none() && flags & BPF_EXIST != 0 && !self.kind.devmap {
                return Err(MapError::NoEntry);
            }
            if let Some(pos) = old {
                let e = bucket.get_mut(pos).ok_or(MapError::Invalid)?;
                if self.kind.percpu {
                    // In place, as pcpu_copy_value writes into the existing element.
                    self.fill(&e.value, src);
                } else {
                    // A new element replaces the old one; a reader of the old keeps it.
                    e.value = self.new_value(src)?;
                }
                e.referenced.store(true, Ordering::Relaxed);
                if self.kind.lru && !self.kind.percpu {
                    let entry = (e.key.clone(), Arc::downgrade(&e.value));
                    drop(stripe);
                    self.lru_push(entry);
                }
                return Ok(());
            }
            if self.count.fetch_add(1, Ordering::AcqRel) >= self.max_entries {
                self.count.fetch_sub(1, Ordering::AcqRel);
                attempts += 1;
                if self.kind.lru && attempts < 8 {
                    continue;
                }
                return Err(if self.kind.lru { MapError::NoMemory } else { MapError::TooBig });
            }
            let value = match self.new_value(src) {
                Ok(v) => v,
                Err(e) => {
                    self.count.fetch_sub(1, Ordering::AcqRel);
                    return Err(e);
                }
            };
            let weak = Arc::downgrade(&value);
            bucket.push(Entry { hash, key: key.into(), value, referenced: AtomicBool::new(false) });
            drop(stripe);
            if self.kind.lru {
                self.lru_push((key.into(), weak));
            }
            return Ok(());
        }
    }

    fn lru_push(&self, entry: LruEntry) {
        let mut q = self.lru.lock().unwrap_or_else(|e| e.into_inner());
        q.push_back(entry);
        if q.len() > 2 * self.max_entries + 64 {
            // Forget elements nobody holds any more (deleted or replaced).
            q.retain(|(_, w)| w.strong_count() > 0);
        }
    }

    /// Evicts one element: the oldest inserted that no lookup touched since the sweep last
    /// passed it (a CLOCK second chance over insertion order). Returns whether one went.
    fn evict_one(&self) -> bool {
        let mut q = self.lru.lock().unwrap_or_else(|e| e.into_inner());
        let mut budget = 2 * q.len() + 1;
        while budget > 0 {
            budget -= 1;
            let Some((key, weak)) = q.pop_front() else { return false };
            let hash = hash_key(self.seed, &key);
            let (s, i) = self.place(self.bucket_of(hash));
            let Some(lock) = self.stripes.get(s) else { continue };
            let mut stripe = lock_write(lock);
            let Some(bucket) = stripe.get_mut(i) else { continue };
            let Some(pos) =
                bucket.iter().position(|e| std::ptr::addr_eq(Arc::as_ptr(&e.value), weak.as_ptr()))
            else {
                continue; // deleted or replaced since: a stale entry
            };
            let referenced =
                bucket.get(pos).is_some_and(|e| e.referenced.swap(false, Ordering::Relaxed));
            if referenced {
                drop(stripe);
                q.push_back((key, weak));
                continue;
            }
            bucket.remove(pos);
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
        let (s, i) = self.place(self.bucket_of(hash));
        let mut stripe = lock_write(self.stripes.get(s).ok_or(MapError::NoEntry)?);
        let bucket = stripe.get_mut(i).ok_or(MapError::NoEntry)?;
        let (pos, _) = Self::find(bucket, hash, key).ok_or(MapError::NoEntry)?;
        bucket.remove(pos);
        self.count.fetch_sub(1, Ordering::AcqRel);
        Ok(())
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
            let (s, i) = self.place(b);
            let stripe = lock_read(self.stripes.get(s).ok_or(MapError::Invalid)?);
            if let Some(bucket) = stripe.get(i) {
                if let Some((pos, _)) = Self::find(bucket, hash, key) {
                    if let Some(next) = bucket.get(pos + 1) {
                        return Ok(next.key.to_vec());
                    }
                    from = b + 1;
                }
            }
        }
        for b in from..self.n_buckets() {
            let (s, i) = self.place(b);
            let Some(lock) = self.stripes.get(s) else { continue };
            let stripe = lock_read(lock);
            if let Some(first) = stripe.get(i).and_then(|bucket| bucket.first()) {
                return Ok(first.key.to_vec());
            }
        }
        Err(MapError::NoEntry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_paths_hash_as_the_general_loop() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..10_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let bytes = x.to_le_bytes();
            for seed in [0, x.rotate_left(17)] {
                for len in [4, 8] {
                    let key = &bytes[..len];
                    assert_eq!(hash_key(seed, key), hash_general(seed, key));
                }
            }
        }
    }
}
