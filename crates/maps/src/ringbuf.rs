//! `BPF_MAP_TYPE_RINGBUF`: one producer position, one consumer position, records of an
//! 8-byte header (`u32 len` with `BPF_RINGBUF_BUSY_BIT` while reserved and
//! `BPF_RINGBUF_DISCARD_BIT` when discarded, `u32 pg_off`) and the sample, padded to 8 bytes.
//! The space rule is the kernel's: a reservation fails when the producer would get more
//! than `size - 1` bytes ahead of the consumer. Positions and `query` answers match it.
//!
//! The kernel maps the data pages twice so that a record crossing the end is contiguous;
//! weir allocates twice the size instead and writes a record that crosses the end into the
//! second half, where the consumer reads it (the bytes it shadows at the start of the ring
//! are, by the space rule, free until the consumer passes that record).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::value::{load_bytes, words_for, zeroed_words, ValueRef};
use crate::MapError;

/// The record header's size.
pub const RINGBUF_HDR_SZ: u32 = 8;
/// Set in a header's `len` while the record is reserved.
pub const RINGBUF_BUSY_BIT: u32 = 1 << 31;
/// Set in a header's `len` when the record was discarded.
pub const RINGBUF_DISCARD_BIT: u32 = 1 << 30;
/// `bpf_ringbuf_output`/`submit`/`discard` flags.
pub const BPF_RB_NO_WAKEUP: u64 = 1;
pub const BPF_RB_FORCE_WAKEUP: u64 = 2;
/// `bpf_ringbuf_query` flags.
pub const BPF_RB_AVAIL_DATA: u64 = 0;
pub const BPF_RB_RING_SIZE: u64 = 1;
pub const BPF_RB_CONS_POS: u64 = 2;
pub const BPF_RB_PROD_POS: u64 = 3;

/// A ring buffer map.
#[derive(Debug)]
pub struct RingBuf {
    data: Box<[AtomicU64]>,
    mask: u64,
    producer: AtomicU64,
    consumer: AtomicU64,
    /// Serializes producers (the kernel's spinlock); the consumer is lock-free.
    lock: Mutex<()>,
}

fn header(len: u32, pg_off: u32) -> u64 {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&len.to_ne_bytes());
    b[4..].copy_from_slice(&pg_off.to_ne_bytes());
    u64::from_ne_bytes(b)
}

fn header_len(word: u64) -> u32 {
    let b = word.to_ne_bytes();
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

/// A record reserved by [`RingBuf::reserve`]: write the sample through [`value`](Self::value),
/// then [`submit`](Self::submit) or [`discard`](Self::discard) it. Dropped without either,
/// it is discarded (so that a program that trapped never blocks the consumer).
#[derive(Debug)]
pub struct Reservation<'a> {
    ring: &'a RingBuf,
    pos: u64,
    size: u32,
    done: bool,
}

impl<'a> Reservation<'a> {
    /// The sample in place (`size` bytes, 8-byte aligned).
    pub fn value(&self) -> ValueRef<'a> {
        let start = (self.ring.phys(self.pos) / 8 + 1) as usize;
        let words =
            self.ring.data.get(start..start + words_for(self.size as usize)).unwrap_or_default();
        ValueRef::in_map(words, self.size as usize)
    }

    /// The record's position (the producer position at its header).
    pub fn position(&self) -> u64 {
        self.pos
    }

    fn finish(&mut self, discard: bool) {
        if self.done {
            return;
        }
        self.done = true;
        self.ring.finish_at(self.pos, discard);
    }

    /// `bpf_ringbuf_submit`: the record becomes visible to the consumer.
    pub fn submit(mut self, _flags: u64) {
        self.finish(false);
    }

    /// `bpf_ringbuf_discard`: the consumer skips the record.
    pub fn discard(mut self, _flags: u64) {
        self.finish(true);
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.finish(true);
    }
}

impl RingBuf {
    pub(crate) fn new(size: u32) -> Result<RingBuf, MapError> {
        let data = zeroed_words(2 * words_for(size as usize))?.into_boxed_slice();
        Ok(RingBuf {
            data,
            mask: u64::from(size) - 1,
            producer: AtomicU64::new(0),
            consumer: AtomicU64::new(0),
            lock: Mutex::new(()),
        })
    }

    fn phys(&self, pos: u64) -> u64 {
        pos & self.mask
    }

    /// The data area's size in bytes (`max_entries`).
    pub fn size(&self) -> u64 {
        self.mask + 1
    }

    /// `bpf_ringbuf_reserve`: `None` for non-zero flags, a record larger than the ring, or
    /// no room.
    pub fn reserve(&self, size: u64, flags: u64) -> Option<Reservation<'_>> {
        let (pos, size) = self.reserve_at(size, flags)?;
        Some(Reservation { ring: self, pos, size, done: false })
    }

    /// [`reserve`](Self::reserve) without the borrow: the record's position and size, for a
    /// holder that keeps the map alive itself ([`crate::Map::ring_reserve`]). The record
    /// stays reserved, blocking the consumer, until [`finish_at`](Self::finish_at).
    pub fn reserve_at(&self, size: u64, flags: u64) -> Option<(u64, u32)> {
        if flags != 0 {
            return None;
        }
        let size = u32::try_from(size)
            .ok()
            .filter(|&s| s & (RINGBUF_BUSY_BIT | RINGBUF_DISCARD_BIT) == 0)?;
        let len = (u64::from(size) + u64::from(RINGBUF_HDR_SZ)).next_multiple_of(8);
        if len > self.size() {
            return None;
        }
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let cons = self.consumer.load(Ordering::Acquire);
        let prod = self.producer.load(Ordering::Relaxed);
        let new_prod = prod + len;
        if new_prod - cons > self.mask {
            return None;
        }
        let at = self.phys(prod);
        let pg_off = u32::try_from(at >> 12).unwrap_or(u32::MAX);
        let hdr = self.data.get((at / 8) as usize)?;
        hdr.store(header(size | RINGBUF_BUSY_BIT, pg_off), Ordering::Relaxed);
        // The sample keeps whatever bytes were there (the kernel does not zero it either).
        self.producer.store(new_prod, Ordering::Release);
        Some((prod, size))
    }

    /// Submits (or, with `discard`, discards) the record [`reserve_at`](Self::reserve_at)
    /// reserved at `pos`; a record no longer reserved is left as it is.
    pub fn finish_at(&self, pos: u64, discard: bool) {
        let Some(h) = self.data.get((self.phys(pos) / 8) as usize) else {
            return;
        };
        let _ = h.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
            let len = header_len(old);
            if len & RINGBUF_BUSY_BIT == 0 {
                return None;
            }
            let b = old.to_ne_bytes();
            let len = len & !RINGBUF_BUSY_BIT;
            let len = if discard { len | RINGBUF_DISCARD_BIT } else { len };
            Some(header(len, u32::from_ne_bytes([b[4], b[5], b[6], b[7]])))
        });
    }

    /// The sample words of the record at `pos` (`size` bytes).
    pub(crate) fn sample_words(&self, pos: u64, size: u32) -> Option<&[AtomicU64]> {
        let start = (self.phys(pos) / 8 + 1) as usize;
        self.data.get(start..start.checked_add(words_for(size as usize))?)
    }

    /// `bpf_ringbuf_output`: reserve, copy, submit. EINVAL for unknown flags, EAGAIN when
    /// there is no room.
    pub fn output(&self, data: &[u8], flags: u64) -> Result<(), MapError> {
        if flags & !(BPF_RB_NO_WAKEUP | BPF_RB_FORCE_WAKEUP) != 0 {
            return Err(MapError::Invalid);
        }
        let r = self.reserve(data.len() as u64, 0).ok_or(MapError::Again)?;
        r.value().write(0, data);
        r.submit(flags);
        Ok(())
    }

    /// `bpf_ringbuf_query`: available data, ring size, consumer or producer position; 0 for
    /// an unknown flag.
    pub fn query(&self, flags: u64) -> u64 {
        let cons = self.consumer.load(Ordering::Acquire);
        let prod = self.producer.load(Ordering::Acquire);
        match flags {
            BPF_RB_AVAIL_DATA => prod - cons,
            BPF_RB_RING_SIZE => self.size(),
            BPF_RB_CONS_POS => cons,
            BPF_RB_PROD_POS => prod,
            _ => 0,
        }
    }

    /// Takes the record at the consumer position: `None` when there is none or it is
    /// still reserved, `Some(None)` for a discarded one (skipped), else its sample.
    fn step(&self) -> Option<Option<Vec<u8>>> {
        let cons = self.consumer.load(Ordering::Acquire);
        let prod = self.producer.load(Ordering::Acquire);
        if cons >= prod {
            return None;
        }
        let at = (self.phys(cons) / 8) as usize;
        let len = header_len(self.data.get(at)?.load(Ordering::Acquire));
        if len & RINGBUF_BUSY_BIT != 0 {
            return None;
        }
        let size = len & !RINGBUF_DISCARD_BIT;
        let sample = (len & RINGBUF_DISCARD_BIT == 0).then(|| {
            let mut sample = vec![0u8; size as usize];
            load_bytes(self.data.get(at + 1..).unwrap_or_default(), 0, &mut sample);
            sample
        });
        let rec = (u64::from(size) + u64::from(RINGBUF_HDR_SZ)).next_multiple_of(8);
        self.consumer.store(cons + rec, Ordering::Release);
        Some(sample)
    }

    /// The consumer (user space's side): hands each submitted record, in order, to `f`,
    /// skipping discarded ones, and stops at the first record still reserved. Returns how
    /// many records `f` saw. One consumer at a time (as with the kernel's mapped ring).
    pub fn consume(&self, mut f: impl FnMut(&[u8])) -> usize {
        let mut seen = 0;
        while let Some(sample) = self.step() {
            if let Some(sample) = sample {
                f(&sample);
                seen += 1;
            }
        }
        seen
    }

    /// The next submitted record, if any (see [`consume`](Self::consume)).
    pub fn read_record(&self) -> Option<Vec<u8>> {
        loop {
            if let Some(sample) = self.step()? {
                return Some(sample);
            }
        }
    }
}
