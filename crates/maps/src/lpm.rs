//! `BPF_MAP_TYPE_LPM_TRIE`: keys are the kernel's `struct bpf_lpm_trie_key`
//! (`u32 prefixlen` in host order, then `key_size - 4` bytes of data, most significant
//! first). Update and delete match exactly (the prefix length and its bits); lookup returns
//! the longest stored prefix of the key's first `prefixlen` bits (nothing for a `prefixlen`
//! past the trie's maximum, as the kernel).
//!
//! weir keeps one ordered table keyed by (prefix length, masked data) and a count per
//! prefix length, not a trie: a lookup probes only the lengths in use, longest first, so its
//! cost grows with the number of distinct prefix lengths (at most 33 for IPv4). As in the
//! kernel, an entry remembers the whole data of the key that last wrote it (bits past the
//! prefix included): `get_next_key` returns it.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock};

use crate::value::{load_bytes, store_bytes, words_for, zeroed_words, ValueRef};
use crate::{check_update_flags, MapError, BPF_EXIST, BPF_NOEXIST};

#[derive(Debug)]
struct Entry {
    key: Box<[u8]>,
    value: Arc<[AtomicU64]>,
}

#[derive(Debug, Default)]
struct Table {
    /// (prefixlen big-endian, masked data) -> entry: ordered by length, then data.
    entries: BTreeMap<Vec<u8>, Entry>,
    /// Entries per prefix length.
    per_len: Vec<u32>,
}

#[derive(Debug)]
pub(crate) struct LpmTrie {
    table: RwLock<Table>,
    key_size: usize,
    value_size: usize,
    max_entries: usize,
    max_prefixlen: u32,
}

/// The table key of `data`'s first `len` bits.
fn table_key(data: &[u8], len: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + data.len());
    k.extend_from_slice(&len.to_be_bytes());
    let full = (len / 8) as usize;
    let bits = len % 8;
    for (i, &b) in data.iter().enumerate() {
        let m = if i < full {
            b
        } else if i == full && bits > 0 {
            b & (0xffu8 << (8 - bits))
        } else {
            0
        };
        k.push(m);
    }
    k
}

fn split(key: &[u8]) -> Option<(u32, &[u8])> {
    let (len, data) = key.split_at_checked(4)?;
    Some((u32::from_ne_bytes(len.try_into().ok()?), data))
}

impl LpmTrie {
    pub(crate) fn new(key_size: u32, value_size: u32, max_entries: u32) -> LpmTrie {
        let max_prefixlen = (key_size - 4) * 8;
        let table =
            Table { entries: BTreeMap::new(), per_len: vec![0; max_prefixlen as usize + 1] };
        LpmTrie {
            table: RwLock::new(table),
            key_size: key_size as usize,
            value_size: value_size as usize,
            max_entries: max_entries as usize,
            max_prefixlen,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(|e| e.into_inner())
    }

    fn longest(&self, key: &[u8]) -> Option<Arc<[AtomicU64]>> {
        if key.len() != self.key_size {
            return None;
        }
        let (len, data) = split(key)?;
        if len > self.max_prefixlen {
            return None;
        }
        let table = self.read();
        (0..=len)
            .rev()
            .filter(|&l| table.per_len.get(l as usize).is_some_and(|&n| n > 0))
            .find_map(|l| table.entries.get(&table_key(data, l)).map(|e| Arc::clone(&e.value)))
    }

    pub(crate) fn lookup(&self, key: &[u8]) -> Option<ValueRef<'_>> {
        self.longest(key).map(|v| ValueRef::in_elem(v, 0, self.value_size))
    }

    pub(crate) fn lookup_all(&self, key: &[u8]) -> Result<Vec<u8>, MapError> {
        if key.len() != self.key_size {
            return Err(MapError::Invalid);
        }
        let v = self.longest(key).ok_or(MapError::NoEntry)?;
        let mut out = vec![0u8; self.value_size];
        load_bytes(&v, 0, &mut out);
        Ok(out)
    }

    /// `trie_update_elem`: flags and prefix length (EINVAL), an exact match replaced
    /// (EEXIST with `BPF_NOEXIST`), a new prefix added (ENOENT with `BPF_EXIST`, ENOSPC when
    /// full).
    pub(crate) fn update(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        if key.len() != self.key_size || value.len() != self.value_size {
            return Err(MapError::Invalid);
        }
        check_update_flags(flags)?;
        let (len, data) = split(key).ok_or(MapError::Invalid)?;
        if len > self.max_prefixlen {
            return Err(MapError::Invalid);
        }
        let words: Arc<[AtomicU64]> = zeroed_words(words_for(self.value_size))?.into();
        store_bytes(&words, 0, value);
        let tk = table_key(data, len);
        let mut table = self.write();
        match table.entries.get_mut(&tk) {
            Some(e) => {
                if flags & BPF_NOEXIST != 0 {
                    return Err(MapError::Exists);
                }
                *e = Entry { key: key.into(), value: words };
            }
            None => {
                if flags & BPF_EXIST != 0 {
                    return Err(MapError::NoEntry);
                }
                if table.entries.len() >= self.max_entries {
                    return Err(MapError::NoSpace);
                }
                table.entries.insert(tk, Entry { key: key.into(), value: words });
                if let Some(n) = table.per_len.get_mut(len as usize) {
                    *n += 1;
                }
            }
        }
        Ok(())
    }

    pub(crate) fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        if key.len() != self.key_size {
            return Err(MapError::Invalid);
        }
        let (len, data) = split(key).ok_or(MapError::Invalid)?;
        if len > self.max_prefixlen {
            return Err(MapError::Invalid);
        }
        let mut table = self.write();
        table.entries.remove(&table_key(data, len)).ok_or(MapError::NoEntry)?;
        if let Some(n) = table.per_len.get_mut(len as usize) {
            *n = n.saturating_sub(1);
        }
        Ok(())
    }

    pub(crate) fn len(&self) -> usize {
        self.read().entries.len()
    }

    /// The entry after `key` (exact match) in weir's order; a missing, malformed or too
    /// long key starts over at the first entry.
    pub(crate) fn get_next_key(&self, key: Option<&[u8]>) -> Result<Vec<u8>, MapError> {
        let table = self.read();
        let after = key.and_then(|k| {
            let (len, data) = split(k).filter(|_| k.len() == self.key_size)?;
            let tk = table_key(data, len);
            (len <= self.max_prefixlen && table.entries.contains_key(&tk)).then_some(tk)
        });
        let next = match after {
            Some(tk) => table
                .entries
                .range((std::ops::Bound::Excluded(tk), std::ops::Bound::Unbounded))
                .next(),
            None => table.entries.iter().next(),
        };
        next.map(|(_, e)| e.key.to_vec()).ok_or(MapError::NoEntry)
    }
}
