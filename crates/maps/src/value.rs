//! Value storage: every map value lives in 8-byte atomic words, so a program can write a
//! value in place while another thread reads it (both see whole bytes, never a torn word
//! that Rust calls undefined behaviour), and every value starts 8-byte aligned, as the
//! kernel rounds map elements to 8 bytes.

use std::sync::atomic::{
    AtomicU64,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::Arc;

use crate::MapError;

/// Words for `bytes` bytes (rounded up to 8).
pub(crate) fn words_for(bytes: usize) -> usize {
    bytes.div_ceil(8)
}

/// A zeroed run of `n` words, or `ENOMEM` when it cannot be allocated (never an abort).
pub(crate) fn zeroed_words(n: usize) -> Result<Vec<AtomicU64>, MapError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| MapError::NoMemory)?;
    v.resize_with(n, || AtomicU64::new(0));
    Ok(v)
}

/// Writes `src` at byte `offset` of `words` (which must hold it).
pub(crate) fn store_bytes(words: &[AtomicU64], offset: usize, src: &[u8]) {
    let mut at = offset;
    let mut rest = src;
    while !rest.is_empty() {
        let (w, b) = (at / 8, at % 8);
        let n = (8 - b).min(rest.len());
        let Some(word) = words.get(w) else { return };
        let (head, tail) = rest.split_at(n);
        if n == 8 {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(head);
            word.store(u64::from_ne_bytes(bytes), Relaxed);
        } else {
            let mut mask = [0u8; 8];
            let mut bits = [0u8; 8];
            for (k, &v) in head.iter().enumerate() {
                if let (Some(m), Some(x)) = (mask.get_mut(b + k), bits.get_mut(b + k)) {
                    *m = 0xff;
                    *x = v;
                }
            }
            let (mask, bits) = (u64::from_ne_bytes(mask), u64::from_ne_bytes(bits));
            let _ = word.fetch_update(Relaxed, Relaxed, |old| Some((old & !mask) | bits));
        }
        at += n;
        rest = tail;
    }
}

/// Reads `dst.len()` bytes at byte `offset` of `words` (which must hold them).
pub(crate) fn load_bytes(words: &[AtomicU64], offset: usize, dst: &mut [u8]) {
    let mut at = offset;
    let mut done = 0;
    while done < dst.len() {
        let (w, b) = (at / 8, at % 8);
        let n = (8 - b).min(dst.len() - done);
        let Some(word) = words.get(w) else { return };
        let bytes = word.load(Relaxed).to_ne_bytes();
        if let (Some(d), Some(s)) = (dst.get_mut(done..done + n), bytes.get(b..b + n)) {
            d.copy_from_slice(s);
        }
        at += n;
        done += n;
    }
}

/// Where the words of a value live: inside the map (arrays: stable until the map is
/// dropped) or in a shared element (hashes, tries: kept alive by this reference even after
/// the element is deleted or replaced, as RCU keeps a kernel element alive for a reader).
#[derive(Clone, Debug)]
enum Words<'a> {
    Map(&'a [AtomicU64]),
    Elem(Arc<[AtomicU64]>, usize),
}

/// A map value in place: what `bpf_map_lookup_elem` returns to a program. Reads and writes
/// go straight to the map's storage (no copy), so a program's store is seen by every later
/// lookup, from any thread; [`ValueRef::as_ptr`] is the stable address for native code.
///
/// The location stays valid as long as the `ValueRef` lives: array values never move, a
/// hash element's words belong to the map until it is dropped (a deleted element is reused
/// by a later insert, as the kernel's preallocated elements are), and a trie element
/// deleted or replaced meanwhile stays allocated, no longer reachable from the map, until
/// the last `ValueRef` to it is dropped.
#[derive(Clone, Debug)]
pub struct ValueRef<'a> {
    words: Words<'a>,
    len: usize,
}

impl<'a> ValueRef<'a> {
    pub(crate) fn in_map(words: &'a [AtomicU64], len: usize) -> ValueRef<'a> {
        ValueRef { words: Words::Map(words), len }
    }

    pub(crate) fn in_elem(elem: Arc<[AtomicU64]>, start: usize, len: usize) -> ValueRef<'a> {
        ValueRef { words: Words::Elem(elem, start), len }
    }

    fn words(&self) -> &[AtomicU64] {
        match &self.words {
            Words::Map(w) => w,
            Words::Elem(e, start) => e.get(*start..).unwrap_or_default(),
        }
    }

    /// The value size in bytes (the map's `value_size`).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the value is empty (never, for a map weir creates).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the value's first byte (8-byte aligned), stable while `self` lives:
    /// for native code that accesses the value as the kernel's JIT would.
    pub fn as_ptr(&self) -> *mut u8 {
        self.words().first().map_or(std::ptr::null_mut(), |w| w.as_ptr().cast())
    }

    /// A copy of the whole value.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len];
        load_bytes(self.words(), 0, &mut v);
        v
    }

    /// Reads `dst.len()` bytes at `offset`; `false` (nothing read) when out of bounds.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> bool {
        if offset.checked_add(dst.len()).is_none_or(|end| end > self.len) {
            return false;
        }
        load_bytes(self.words(), offset, dst);
        true
    }

    /// Writes `src` at `offset`; `false` (nothing written) when out of bounds.
    pub fn write(&self, offset: usize, src: &[u8]) -> bool {
        if offset.checked_add(src.len()).is_none_or(|end| end > self.len) {
            return false;
        }
        store_bytes(self.words(), offset, src);
        true
    }

    /// Loads a 1-, 2-, 4- or 8-byte native-endian integer at `offset`.
    #[inline]
    pub fn load(&self, offset: usize, size: usize) -> Option<u64> {
        if !matches!(size, 1 | 2 | 4 | 8) || offset.checked_add(size)? > self.len {
            return None;
        }
        let b = offset % 8;
        if cfg!(target_endian = "little") && b + size <= 8 {
            // Within one word: one atomic load, then the field's bytes.
            let word = self.words().get(offset / 8)?.load(Relaxed) >> (8 * b);
            return Some(if size == 8 { word } else { word & ((1u64 << (8 * size)) - 1) });
        }
        let mut bytes = [0u8; 8];
        load_bytes(self.words(), offset, bytes.get_mut(..size)?);
        Some(native_to_u64(&bytes, size))
    }

    /// Stores the low `size` (1, 2, 4 or 8) bytes of `value` at `offset`, native-endian.
    #[inline]
    pub fn store(&self, offset: usize, size: usize, value: u64) -> bool {
        if !matches!(size, 1 | 2 | 4 | 8) {
            return false;
        }
        if size == 8
            && offset.is_multiple_of(8)
            && offset.checked_add(8).is_some_and(|end| end <= self.len)
        {
            // A whole word: one atomic store.
            return self.words().get(offset / 8).is_some_and(|w| {
                w.store(value, Relaxed);
                true
            });
        }
        let bytes = u64_to_native(value, size);
        bytes.get(..size).is_some_and(|src| self.write(offset, src))
    }

    /// An atomic read-modify-write of the 4- or 8-byte integer at `offset` (which must be
    /// aligned to `size`, as the kernel requires of `BPF_ATOMIC`): stores `f(old)` and
    /// returns `old`, fully ordered (as the kernel orders `BPF_ATOMIC`; `f` may run more
    /// than once under contention). What `lock xadd` and `BPF_ATOMIC` instructions on a
    /// map value do.
    pub fn fetch_update(
        &self,
        offset: usize,
        size: usize,
        mut f: impl FnMut(u64) -> u64,
    ) -> Option<u64> {
        if !matches!(size, 4 | 8)
            || !offset.is_multiple_of(size)
            || offset.checked_add(size)? > self.len
        {
            return None;
        }
        let word = self.words().get(offset / 8)?;
        if size == 8 {
            return word.fetch_update(SeqCst, SeqCst, |old| Some(f(old))).ok();
        }
        // A 4-byte field inside the word: its bytes are at byte offset `offset % 8` in
        // memory order, whatever the host's endianness.
        let at = offset % 8;
        let mut old32 = 0;
        word.fetch_update(SeqCst, SeqCst, |old| {
            let mut bytes = old.to_ne_bytes();
            let field = bytes.get_mut(at..at + 4)?;
            let mut cur = [0u8; 4];
            cur.copy_from_slice(field);
            old32 = u32::from_ne_bytes(cur);
            field.copy_from_slice(&(f(u64::from(old32)) as u32).to_ne_bytes());
            Some(u64::from_ne_bytes(bytes))
        })
        .ok()
        .map(|_| u64::from(old32))
    }

    /// Whether two references name the same storage.
    pub fn same_location(&self, other: &ValueRef<'_>) -> bool {
        self.as_ptr() == other.as_ptr()
    }
}

fn native_to_u64(b: &[u8; 8], size: usize) -> u64 {
    let take = |n: usize| {
        let mut a = [0u8; 8];
        if let (Some(d), Some(s)) = (a.get_mut(..n), b.get(..n)) {
            d.copy_from_slice(s);
        }
        a
    };
    match size {
        1 => u64::from(b[0]),
        2 => {
            let a = take(2);
            u64::from(u16::from_ne_bytes([a[0], a[1]]))
        }
        4 => {
            let a = take(4);
            u64::from(u32::from_ne_bytes([a[0], a[1], a[2], a[3]]))
        }
        _ => u64::from_ne_bytes(*b),
    }
}

fn u64_to_native(v: u64, size: usize) -> [u8; 8] {
    let mut out = [0u8; 8];
    match size {
        1 => out[0] = v as u8,
        2 => out[..2].copy_from_slice(&(v as u16).to_ne_bytes()),
        4 => out[..4].copy_from_slice(&(v as u32).to_ne_bytes()),
        _ => out = v.to_ne_bytes(),
    }
    out
}

/// Where an [`OwnedValue`]'s words live.
#[derive(Clone, Debug)]
enum OwnedWords {
    /// An array's or hash element's value: the map and where the value lies in it.
    Map(Arc<crate::Map>, crate::ValueLoc),
    /// A trie element and the value's first word in it.
    Elem(Arc<[AtomicU64]>, usize),
    /// A ring buffer record's sample: the map, the record's position and size.
    Ring(Arc<crate::Map>, u64, u32),
}

/// A map value in place that owns what keeps it alive (the map, or the element): what a
/// run's environment holds for the values a program reached, across the run, without
/// borrowing the map. [`OwnedValue::get`] gives the [`ValueRef`] to read and write it.
#[derive(Clone, Debug)]
pub struct OwnedValue {
    words: OwnedWords,
    len: usize,
}

impl OwnedValue {
    /// Keeps a trie element's `value` alive on its own (`None` for a value in a map's
    /// storage: see [`OwnedValue::at`]). The element's reference moves over (no second
    /// reference count).
    pub(crate) fn of(value: ValueRef<'_>) -> Option<OwnedValue> {
        let len = value.len;
        match value.words {
            Words::Map(_) => None,
            Words::Elem(e, start) => Some(OwnedValue { words: OwnedWords::Elem(e, start), len }),
        }
    }

    /// The value at `loc` in `map` (arrays and hashes).
    pub(crate) fn at(map: &Arc<crate::Map>, loc: crate::ValueLoc) -> OwnedValue {
        let len = map.spec().value_size as usize;
        OwnedValue { words: OwnedWords::Map(Arc::clone(map), loc), len }
    }

    /// The sample of the ring buffer record reserved at `pos` in `map`.
    pub(crate) fn ring(map: &Arc<crate::Map>, pos: u64, size: u32) -> OwnedValue {
        OwnedValue { words: OwnedWords::Ring(Arc::clone(map), pos, size), len: size as usize }
    }

    /// The value, to read and write in place.
    pub fn get(&self) -> ValueRef<'_> {
        let words = match &self.words {
            OwnedWords::Map(map, loc) => {
                return map.value_at(*loc).unwrap_or(ValueRef::in_map(&[], self.len));
            }
            OwnedWords::Elem(e, start) => e.get(*start..).unwrap_or_default(),
            OwnedWords::Ring(map, pos, size) => {
                map.ring_buf().and_then(|r| r.sample_words(*pos, *size)).unwrap_or_default()
            }
        };
        ValueRef::in_map(words, self.len)
    }

    /// The value size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the value is empty (never, for a map weir creates).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
