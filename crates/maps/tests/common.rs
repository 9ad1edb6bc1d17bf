//! What the model and kernel tests share: random operations, three implementations of one
//! interface (weir's map, a model, the kernel), and the comparison.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use proptest::prelude::*;
use weir_maps::{Map, MapError};

/// An errno-style result.
pub type R<T> = Result<T, i32>;

/// The syscall side of a map, as weir, a model or the kernel answers it.
pub trait Oracle {
    fn update(&mut self, key: &[u8], value: &[u8], flags: u64) -> R<()>;
    fn lookup(&mut self, key: &[u8]) -> R<Vec<u8>>;
    fn delete(&mut self, key: &[u8]) -> R<()>;
    fn next_key(&mut self, key: Option<&[u8]>) -> R<Vec<u8>>;
    fn push(&mut self, _value: &[u8], _flags: u64) -> R<()> {
        Err(libc::EINVAL)
    }
    fn pop(&mut self) -> R<Vec<u8>> {
        Err(libc::EINVAL)
    }
    fn peek(&mut self) -> R<Vec<u8>> {
        Err(libc::EINVAL)
    }
}

fn e(err: MapError) -> i32 {
    err.errno()
}

/// weir's map through its syscall-side methods (and, for plain maps, a program's lookup
/// checked against the syscall's).
pub struct Weir(pub Map);

impl Oracle for Weir {
    fn update(&mut self, key: &[u8], value: &[u8], flags: u64) -> R<()> {
        self.0.update_all(key, value, flags).map_err(e)
    }
    fn lookup(&mut self, key: &[u8]) -> R<Vec<u8>> {
        let copy = self.0.lookup_all(key).map_err(e);
        if self.0.syscall_value_size() == self.0.spec().value_size as usize {
            // A program's lookup sees the same value, in place.
            let in_place = self.0.lookup(key, 0).map(|v| v.to_vec());
            assert_eq!(in_place, copy.clone().ok(), "program lookup vs syscall lookup");
        } else if self.0.is_percpu() {
            // Each worker's program lookup sees its own copy: the syscall's value cut per
            // worker (each rounded up to 8 bytes); a worker the map has not sees nothing.
            let len = self.0.spec().value_size as usize;
            let pitch = len.next_multiple_of(8);
            for cpu in 0..=self.0.cpus() {
                let in_place = self.0.lookup(key, cpu).map(|v| v.to_vec());
                let own = copy.as_ref().ok().and_then(|c| c.get(cpu * pitch..cpu * pitch + len));
                assert_eq!(in_place.as_deref(), own, "worker {cpu}'s program lookup");
            }
        }
        copy
    }
    fn delete(&mut self, key: &[u8]) -> R<()> {
        self.0.delete(key).map_err(e)
    }
    fn next_key(&mut self, key: Option<&[u8]>) -> R<Vec<u8>> {
        self.0.get_next_key(key).map_err(e)
    }
    fn push(&mut self, value: &[u8], flags: u64) -> R<()> {
        self.0.push(value, flags).map_err(e)
    }
    fn pop(&mut self) -> R<Vec<u8>> {
        self.0.lookup_and_delete(&[]).map_err(e)
    }
    fn peek(&mut self) -> R<Vec<u8>> {
        self.0.lookup_all(&[]).map_err(e)
    }
}

fn flags_ok(flags: u64) -> R<()> {
    if flags & 4 != 0 || flags > 2 {
        Err(libc::EINVAL)
    } else {
        Ok(())
    }
}

/// The array: `max_entries` slots, every one present.
pub struct ArrayModel {
    pub vals: Vec<Vec<u8>>,
}

fn index(key: &[u8]) -> u32 {
    u32::from_ne_bytes(key.try_into().unwrap())
}

impl Oracle for ArrayModel {
    fn update(&mut self, key: &[u8], value: &[u8], flags: u64) -> R<()> {
        flags_ok(flags)?;
        let i = index(key) as usize;
        if i >= self.vals.len() {
            return Err(libc::E2BIG);
        }
        if flags == 1 {
            return Err(libc::EEXIST);
        }
        self.vals[i] = value.to_vec();
        Ok(())
    }
    fn lookup(&mut self, key: &[u8]) -> R<Vec<u8>> {
        self.vals.get(index(key) as usize).cloned().ok_or(libc::ENOENT)
    }
    fn delete(&mut self, _key: &[u8]) -> R<()> {
        Err(libc::EINVAL)
    }
    fn next_key(&mut self, key: Option<&[u8]>) -> R<Vec<u8>> {
        let n = self.vals.len() as u32;
        let next = match key.map(index) {
            Some(i) if i < n && i + 1 == n => return Err(libc::ENOENT),
            Some(i) if i < n => i + 1,
            _ => 0,
        };
        Ok(next.to_ne_bytes().to_vec())
    }
}

/// The hash map (no eviction: an LRU map's model while it is not full).
pub struct HashModel {
    pub map: BTreeMap<Vec<u8>, Vec<u8>>,
    pub max: usize,
}

impl Oracle for HashModel {
    fn update(&mut self, key: &[u8], value: &[u8], flags: u64) -> R<()> {
        flags_ok(flags)?;
        let exists = self.map.contains_key(key);
        if exists && flags == 1 {
            return Err(libc::EEXIST);
        }
        if !exists && flags == 2 {
            return Err(libc::ENOENT);
        }
        if !exists && self.map.len() >= self.max {
            return Err(libc::E2BIG);
        }
        self.map.insert(key.to_vec(), value.to_vec());
        Ok(())
    }
    fn lookup(&mut self, key: &[u8]) -> R<Vec<u8>> {
        self.map.get(key).cloned().ok_or(libc::ENOENT)
    }
    fn delete(&mut self, key: &[u8]) -> R<()> {
        self.map.remove(key).map(|_| ()).ok_or(libc::ENOENT)
    }
    fn next_key(&mut self, key: Option<&[u8]>) -> R<Vec<u8>> {
        let mut it = self.map.keys();
        match key.filter(|k| self.map.contains_key(*k)) {
            None => it.next().cloned().ok_or(libc::ENOENT),
            Some(k) => {
                self.map.range(k.to_vec()..).nth(1).map(|(k, _)| k.clone()).ok_or(libc::ENOENT)
            }
        }
    }
}

/// An LPM entry: the key as last written and the value.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// The LPM trie: exact entries by (prefix length, masked data), longest-prefix lookups.
pub struct LpmModel {
    /// (prefixlen, masked data) -> (the key as last written, value)
    pub map: BTreeMap<(u32, Vec<u8>), KeyValue>,
    pub max: usize,
    pub max_prefixlen: u32,
}

pub fn mask(data: &[u8], len: u32) -> Vec<u8> {
    data.iter()
        .enumerate()
        .map(|(i, &b)| {
            let bits = (len as i64 - 8 * i as i64).clamp(0, 8) as u32;
            if bits == 0 {
                0
            } else {
                b & (0xffu8 << (8 - bits))
            }
        })
        .collect()
}

fn split(key: &[u8]) -> (u32, &[u8]) {
    (u32::from_ne_bytes(key[..4].try_into().unwrap()), &key[4..])
}

impl Oracle for LpmModel {
    fn update(&mut self, key: &[u8], value: &[u8], flags: u64) -> R<()> {
        flags_ok(flags)?;
        let (len, data) = split(key);
        if len > self.max_prefixlen {
            return Err(libc::EINVAL);
        }
        let k = (len, mask(data, len));
        let exists = self.map.contains_key(&k);
        if exists && flags == 1 {
            return Err(libc::EEXIST);
        }
        if !exists && flags == 2 {
            return Err(libc::ENOENT);
        }
        if !exists && self.map.len() >= self.max {
            return Err(libc::ENOSPC);
        }
        self.map.insert(k, (key.to_vec(), value.to_vec()));
        Ok(())
    }
    fn lookup(&mut self, key: &[u8]) -> R<Vec<u8>> {
        let (len, data) = split(key);
        if len > self.max_prefixlen {
            return Err(libc::ENOENT);
        }
        (0..=len)
            .rev()
            .find_map(|l| self.map.get(&(l, mask(data, l))).map(|(_, v)| v.clone()))
            .ok_or(libc::ENOENT)
    }
    fn delete(&mut self, key: &[u8]) -> R<()> {
        let (len, data) = split(key);
        if len > self.max_prefixlen {
            return Err(libc::EINVAL);
        }
        self.map.remove(&(len, mask(data, len))).map(|_| ()).ok_or(libc::ENOENT)
    }
    fn next_key(&mut self, key: Option<&[u8]>) -> R<Vec<u8>> {
        use std::ops::Bound::{Excluded, Unbounded};
        let after = key.and_then(|k| {
            let (len, data) = split(k);
            let mk = (len, mask(data, len));
            (len <= self.max_prefixlen && self.map.contains_key(&mk)).then_some(mk)
        });
        let next = match after {
            None => self.map.values().next(),
            Some(mk) => self.map.range((Excluded(mk), Unbounded)).next().map(|(_, v)| v),
        };
        next.map(|(k, _)| k.clone()).ok_or(libc::ENOENT)
    }
}

/// Queue and stack: oldest first.
pub struct QueueModel {
    pub items: VecDeque<Vec<u8>>,
    pub max: usize,
    pub stack: bool,
}

impl Oracle for QueueModel {
    fn update(&mut self, _: &[u8], _: &[u8], _: u64) -> R<()> {
        Err(libc::EINVAL)
    }
    fn lookup(&mut self, _: &[u8]) -> R<Vec<u8>> {
        Err(libc::EINVAL)
    }
    fn delete(&mut self, _: &[u8]) -> R<()> {
        Err(libc::EINVAL)
    }
    fn next_key(&mut self, _: Option<&[u8]>) -> R<Vec<u8>> {
        Err(libc::EINVAL)
    }
    fn push(&mut self, value: &[u8], flags: u64) -> R<()> {
        if flags & 1 != 0 || flags > 2 {
            return Err(libc::EINVAL);
        }
        if self.items.len() >= self.max {
            if flags != 2 {
                return Err(libc::E2BIG);
            }
            self.items.pop_front();
        }
        self.items.push_back(value.to_vec());
        Ok(())
    }
    fn pop(&mut self) -> R<Vec<u8>> {
        let v = if self.stack { self.items.pop_back() } else { self.items.pop_front() };
        v.ok_or(libc::ENOENT)
    }
    fn peek(&mut self) -> R<Vec<u8>> {
        let v = if self.stack { self.items.back() } else { self.items.front() };
        v.cloned().ok_or(libc::ENOENT)
    }
}

/// One operation; keys and values are made by the map's [`Shape`].
#[derive(Clone, Debug)]
pub enum Op {
    Update { key: u16, value: u8, flags: u64 },
    Lookup { key: u16 },
    Delete { key: u16 },
    NextKey { key: Option<u16> },
    Push { value: u8, flags: u64 },
    Pop,
    Peek,
}

/// How a map's keys and values are made from the small numbers in [`Op`].
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// A 4-byte index or hash key.
    U32,
    /// An LPM key of 2 data bytes: `key` = prefixlen (low 5 bits, up to 18) and data.
    Lpm,
    /// No key (queue, stack).
    None,
}

pub fn key_bytes(shape: Shape, key: u16) -> Vec<u8> {
    match shape {
        Shape::U32 => u32::from(key).to_ne_bytes().to_vec(),
        Shape::Lpm => {
            let len = u32::from(key & 0x1f).min(18);
            // Few distinct data values, so prefixes nest and collide.
            let data =
                [[0x0a, 0x00], [0x0a, 0x80], [0x0b, 0x01], [0xff, 0xff]][usize::from(key >> 5) % 4];
            let mut k = len.to_ne_bytes().to_vec();
            k.extend_from_slice(&data);
            k
        }
        Shape::None => Vec::new(),
    }
}

pub fn value_bytes(len: usize, v: u8) -> Vec<u8> {
    (0..len).map(|i| v.wrapping_add((i as u8).wrapping_mul(31))).collect()
}

pub fn ops(keys: u16, queue: bool, len: usize) -> impl Strategy<Value = Vec<Op>> {
    let flags = prop_oneof![8 => 0u64..=2, 1 => Just(3u64), 1 => Just(4u64)];
    let op = if queue {
        prop_oneof![
            4 => (any::<u8>(), flags).prop_map(|(value, flags)| Op::Push { value, flags }),
            2 => Just(Op::Pop),
            1 => Just(Op::Peek),
        ]
        .boxed()
    } else {
        prop_oneof![
            4 => (0..keys, any::<u8>(), flags).prop_map(|(key, value, flags)| Op::Update { key, value, flags }),
            3 => (0..keys).prop_map(|key| Op::Lookup { key }),
            2 => (0..keys).prop_map(|key| Op::Delete { key }),
            1 => proptest::option::of(0..keys).prop_map(|key| Op::NextKey { key }),
        ]
        .boxed()
    };
    proptest::collection::vec(op, 1..len)
}

/// Every key, following `next_key` from the start (at most `limit`, against loops).
pub fn all_keys(o: &mut dyn Oracle, limit: usize) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    let mut cur: Option<Vec<u8>> = None;
    while let Ok(k) = o.next_key(cur.as_deref()) {
        keys.push(k.clone());
        cur = Some(k);
        if keys.len() > limit {
            break;
        }
    }
    keys
}

/// Applies `ops` to both and compares every result; `ordered`: `next_key` orders agree
/// (arrays), else only whether one exists. Then compares the final contents as sets.
pub fn compare(
    a: &mut dyn Oracle,
    b: &mut dyn Oracle,
    shape: Shape,
    value_len: usize,
    ops: &[Op],
    ordered: bool,
) -> Result<(), TestCaseError> {
    for (n, op) in ops.iter().enumerate() {
        let k = |key: u16| key_bytes(shape, key);
        match *op {
            Op::Update { key, value, flags } => {
                let v = value_bytes(value_len, value);
                prop_assert_eq!(
                    a.update(&k(key), &v, flags),
                    b.update(&k(key), &v, flags),
                    "op {}: {:?}",
                    n,
                    op
                );
            }
            Op::Lookup { key } => {
                prop_assert_eq!(a.lookup(&k(key)), b.lookup(&k(key)), "op {}: {:?}", n, op)
            }
            Op::Delete { key } => {
                prop_assert_eq!(a.delete(&k(key)), b.delete(&k(key)), "op {}: {:?}", n, op)
            }
            Op::NextKey { key } => {
                let key = key.map(k);
                let (x, y) = (a.next_key(key.as_deref()), b.next_key(key.as_deref()));
                if ordered {
                    prop_assert_eq!(x, y, "op {}: {:?}", n, op);
                } else if key.is_none() {
                    prop_assert_eq!(x.is_ok(), y.is_ok(), "op {}: {:?}", n, op);
                }
            }
            Op::Push { value, flags } => {
                let v = value_bytes(value_len, value);
                prop_assert_eq!(a.push(&v, flags), b.push(&v, flags), "op {}: {:?}", n, op);
            }
            Op::Pop => prop_assert_eq!(a.pop(), b.pop(), "op {}: {:?}", n, op),
            Op::Peek => prop_assert_eq!(a.peek(), b.peek(), "op {}: {:?}", n, op),
        }
    }
    if matches!(shape, Shape::None) {
        loop {
            let (x, y) = (a.pop(), b.pop());
            prop_assert_eq!(&x, &y, "draining");
            if x.is_err() {
                break;
            }
        }
        return Ok(());
    }
    let ka = all_keys(a, 1 << 12);
    let kb = all_keys(b, 1 << 12);
    let sa: BTreeSet<_> = ka.iter().cloned().collect();
    let sb: BTreeSet<_> = kb.iter().cloned().collect();
    prop_assert_eq!(sa.len(), ka.len(), "a key visited twice");
    prop_assert_eq!(sb.len(), kb.len(), "a key visited twice");
    prop_assert_eq!(&sa, &sb, "final keys");
    for key in &sa {
        prop_assert_eq!(a.lookup(key), b.lookup(key), "final value of {:?}", key);
    }
    Ok(())
}
