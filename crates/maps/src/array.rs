//! Arrays: `BPF_MAP_TYPE_ARRAY`, `PERCPU_ARRAY`, `PROG_ARRAY`, `DEVMAP` and `CPUMAP`.
//! Every slot exists from creation (zeroed), values never move: a lookup is an index.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::value::{load_bytes, store_bytes, words_for, zeroed_words, ValueRef};
use crate::{check_update_flags, MapError, BPF_NOEXIST};

/// An array of `max_entries` values, one copy per CPU when per-CPU.
#[derive(Debug)]
pub(crate) struct Array {
    words: Box<[AtomicU64]>,
    value_size: usize,
    /// Words per value (the value rounded up to 8 bytes). A `u32` (a value is at most
    /// `u32::MAX` bytes): an index times it, plus it, cannot wrap 64 bits, so a lookup's
    /// range of words needs no overflow test (`lookup_shared`).
    stride: u32,
    max_entries: u32,
    cpus: usize,
    percpu: bool,
}

pub(crate) fn index_of(key: &[u8]) -> Result<u32, MapError> {
    let k: [u8; 4] = key.try_into().map_err(|_| MapError::Invalid)?;
    Ok(u32::from_ne_bytes(k))
}

impl Array {
    pub(crate) fn new(
        value_size: u32,
        max_entries: u32,
        cpus: usize,
        percpu: bool,
    ) -> Result<Array, MapError> {
        let stride = words_for(value_size as usize);
        let n = stride
            .checked_mul(max_entries as usize)
            .and_then(|n| n.checked_mul(cpus))
            .ok_or(MapError::NoMemory)?;
        let words = zeroed_words(n)?.into_boxed_slice();
        let stride = u32::try_from(stride).map_err(|_| MapError::NoMemory)?;
        Ok(Array { words, value_size: value_size as usize, stride, max_entries, cpus, percpu })
    }

    fn slot(&self, index: u32, cpu: usize) -> Option<&[AtomicU64]> {
        if index >= self.max_entries || cpu >= self.cpus {
            return None;
        }
        let start = (cpu * self.max_entries as usize + index as usize) * self.stride();
        self.words.get(start..start + self.stride())
    }

    /// A shared (not per-CPU) array's lookup: the index check and the slice, nothing else
    /// (the hot path of every array-counting program).
    #[inline]
    pub(crate) fn lookup_shared(&self, key: &[u8]) -> Option<&[AtomicU64]> {
        let index = u32::from_ne_bytes(key.try_into().ok()?);
        // A shared array holds exactly `max_entries` values: the slice's own bound check
        // is the index check (one compare, not two). Two 32-bit factors and a 32-bit
        // addend in 64 bits: the range's end cannot wrap, so no overflow test either.
        let stride = u64::from(self.stride);
        let start = u64::from(index) * stride;
        self.words.get(usize::try_from(start).ok()?..usize::try_from(start + stride).ok()?)
    }

    /// The first word of the value `key` names on `cpu` (a shared array has one copy).
    #[inline]
    pub(crate) fn lookup_start(&self, key: &[u8], cpu: usize) -> Option<usize> {
        let index = u32::from_ne_bytes(key.try_into().ok()?);
        let cpu = if self.percpu { cpu } else { 0 };
        if index >= self.max_entries || cpu >= self.cpus {
            return None;
        }
        Some((cpu * self.max_entries as usize + index as usize) * self.stride())
    }

    /// The value whose first word is `start` (from `lookup_start`).
    #[inline]
    pub(crate) fn value_at(&self, start: usize) -> Option<ValueRef<'_>> {
        let words = self.words.get(start..start.checked_add(self.stride())?)?;
        Some(ValueRef::in_map(words, self.value_size))
    }

    /// The words of the value whose first word is `start` (from `lookup_start`).
    #[inline]
    pub(crate) fn value_words(&self, start: usize) -> Option<&[AtomicU64]> {
        self.words.get(start..start.checked_add(self.stride())?)
    }

    /// The bytes of one value.
    #[inline]
    pub(crate) fn value_size(&self) -> usize {
        self.value_size
    }

    /// Words per value (the value rounded up to 8 bytes).
    pub(crate) fn stride(&self) -> usize {
        self.stride as usize
    }

    /// A per-CPU array's lookup on `cpu`: the value's words.
    #[inline]
    pub(crate) fn lookup_words(&self, key: &[u8], cpu: usize) -> Option<&[AtomicU64]> {
        self.slot(index_of(key).ok()?, cpu)
    }

    /// `array_map_update_elem`: flags first, then the index (E2BIG), then `BPF_NOEXIST`
    /// (every slot exists: EEXIST).
    pub(crate) fn update(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u64,
        cpu: Option<usize>,
    ) -> Result<(), MapError> {
        let index = index_of(key)?;
        check_update_flags(flags)?;
        if index >= self.max_entries {
            return Err(MapError::TooBig);
        }
        if flags & BPF_NOEXIST != 0 {
            return Err(MapError::Exists);
        }
        match cpu {
            Some(cpu) => {
                if value.len() != self.value_size {
                    return Err(MapError::Invalid);
                }
                let slot = self.slot(index, cpu).ok_or(MapError::Invalid)?;
                store_bytes(slot, 0, value);
            }
            None => {
                let rounded = self.stride() * 8;
                if value.len() != rounded * self.cpus {
                    return Err(MapError::Invalid);
                }
                for (cpu, chunk) in value.chunks(rounded).enumerate() {
                    let slot = self.slot(index, cpu).ok_or(MapError::Invalid)?;
                    // The kernel copies whole 8-byte words (`copy_map_value_long`): padding too.
                    store_bytes(slot, 0, chunk);
                }
            }
        }
        Ok(())
    }

    /// Every CPU's copy, each rounded up to 8 bytes (the syscall's per-CPU format; a
    /// plain array's value is `value_size` bytes).
    pub(crate) fn lookup_all(&self, key: &[u8]) -> Result<Vec<u8>, MapError> {
        let index = index_of(key)?;
        if index >= self.max_entries {
            return Err(MapError::NoEntry);
        }
        if self.cpus == 1 && !self.percpu {
            let mut out = vec![0u8; self.value_size];
            load_bytes(self.slot(index, 0).ok_or(MapError::NoEntry)?, 0, &mut out);
            return Ok(out);
        }
        let rounded = self.stride() * 8;
        let mut out = vec![0u8; rounded * self.cpus];
        for (cpu, chunk) in out.chunks_mut(rounded).enumerate() {
            let slot = self.slot(index, cpu).ok_or(MapError::NoEntry)?;
            load_bytes(slot, 0, chunk);
        }
        Ok(out)
    }

    pub(crate) fn get_next_key(&self, key: Option<&[u8]>) -> Result<Vec<u8>, MapError> {
        array_next_key(key, self.max_entries)
    }
}

/// `array_map_get_next_key`: a missing or out-of-range key starts over at 0; the last
/// index has no next (ENOENT).
pub(crate) fn array_next_key(key: Option<&[u8]>, max_entries: u32) -> Result<Vec<u8>, MapError> {
    let next = match key {
        None => 0,
        Some(k) => {
            let index = index_of(k)?;
            if index >= max_entries {
                0
            } else if index + 1 == max_entries {
                return Err(MapError::NoEntry);
            } else {
                index + 1
            }
        }
    };
    Ok(next.to_ne_bytes().to_vec())
}

/// What the slots of a [`SlotArray`] follow: the flags and emptying rules differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotKind {
    /// `PROG_ARRAY`: a program index per slot; updates take `BPF_ANY` only.
    Prog,
    /// `DEVMAP`: `struct bpf_devmap_val` (ifindex, program); ifindex 0 empties the slot.
    Dev,
    /// `CPUMAP`: `struct bpf_cpumap_val` (qsize, program); qsize 0 empties the slot.
    Cpu,
}

/// An array whose slots may be empty: program arrays, devmaps and cpumaps. Values are
/// 4 or 8 bytes; the first 4 are the field whose zero means "no entry" (for the program
/// array, presence is its own bit).
#[derive(Debug)]
pub(crate) struct SlotArray {
    kind: SlotKind,
    words: Box<[AtomicU64]>,
    present: Box<[AtomicBool]>,
    value_size: usize,
}

impl SlotArray {
    pub(crate) fn new(
        kind: SlotKind,
        value_size: u32,
        max_entries: u32,
    ) -> Result<SlotArray, MapError> {
        let words = zeroed_words(max_entries as usize)?.into_boxed_slice();
        let mut present = Vec::new();
        present.try_reserve_exact(max_entries as usize).map_err(|_| MapError::NoMemory)?;
        present.resize_with(max_entries as usize, || AtomicBool::new(false));
        Ok(SlotArray {
            kind,
            words,
            present: present.into_boxed_slice(),
            value_size: value_size as usize,
        })
    }

    fn max_entries(&self) -> u32 {
        self.present.len() as u32
    }

    pub(crate) fn lookup(&self, key: &[u8]) -> Option<ValueRef<'_>> {
        let index = index_of(key).ok()? as usize;
        if self.kind == SlotKind::Prog || !self.present.get(index)?.load(Ordering::Acquire) {
            return None;
        }
        self.words.get(index..index + 1).map(|w| ValueRef::in_map(w, self.value_size))
    }

    pub(crate) fn lookup_all(&self, key: &[u8]) -> Result<Vec<u8>, MapError> {
        let index = index_of(key)? as usize;
        if index >= self.present.len() {
            return Err(MapError::NoEntry);
        }
        if !self.present.get(index).is_some_and(|p| p.load(Ordering::Acquire)) {
            return Err(MapError::NoEntry);
        }
        let mut out = vec![0u8; self.value_size];
        load_bytes(self.words.get(index..index + 1).unwrap_or_default(), 0, &mut out);
        Ok(out)
    }

    /// The program index in slot `index` of a program array (for the runtime's tail call).
    pub(crate) fn prog_at(&self, index: u32) -> Option<u32> {
        let i = index as usize;
        if !self.present.get(i)?.load(Ordering::Acquire) {
            return None;
        }
        let mut b = [0u8; 4];
        load_bytes(self.words.get(i..i + 1)?, 0, &mut b);
        Some(u32::from_ne_bytes(b))
    }

    pub(crate) fn update(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        let index = index_of(key)?;
        if value.len() != self.value_size {
            return Err(MapError::Invalid);
        }
        match self.kind {
            // bpf_fd_array_map_update_elem: BPF_ANY only, then the index.
            SlotKind::Prog if flags != crate::BPF_ANY => return Err(MapError::Invalid),
            SlotKind::Prog => {}
            SlotKind::Dev | SlotKind::Cpu => {
                check_update_flags(flags)?;
            }
        }
        if index >= self.max_entries() {
            return Err(MapError::TooBig);
        }
        if self.kind != SlotKind::Prog && flags & BPF_NOEXIST != 0 {
            return Err(MapError::Exists);
        }
        let i = index as usize;
        let (Some(word), Some(present)) = (self.words.get(i..i + 1), self.present.get(i)) else {
            return Err(MapError::TooBig);
        };
        let first = value.get(..4).map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
        if self.kind != SlotKind::Prog && first == 0 {
            // ifindex 0 (devmap) or qsize 0 (cpumap): the slot is emptied.
            if self.kind == SlotKind::Dev
                && self.value_size == 8
                && value.get(4..8) != Some(&[0; 4][..])
            {
                return Err(MapError::Invalid);
            }
            present.store(false, Ordering::Release);
            return Ok(());
        }
        store_bytes(word, 0, value);
        present.store(true, Ordering::Release);
        Ok(())
    }

    pub(crate) fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        let index = index_of(key)? as usize;
        let Some(present) = self.present.get(index) else {
            return Err(if self.kind == SlotKind::Prog {
                MapError::TooBig
            } else {
                MapError::Invalid
            });
        };
        let was = present.swap(false, Ordering::AcqRel);
        match self.kind {
            SlotKind::Prog if !was => Err(MapError::NoEntry),
            _ => Ok(()),
        }
    }

    pub(crate) fn get_next_key(&self, key: Option<&[u8]>) -> Result<Vec<u8>, MapError> {
        array_next_key(key, self.max_entries())
    }
}
