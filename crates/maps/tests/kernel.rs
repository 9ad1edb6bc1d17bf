//! The same random operation sequences on a kernel map (through `bpf()`) and on weir's:
//! every result (errno) and the final contents (as sets) must agree. Needs root; prints
//! `SKIPPED: <name>: <reason>` otherwise.

use std::collections::BTreeSet;
use std::io;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use weir_maps::{Map, MapSpec, MapType, BPF_F_NO_PREALLOC};
use weir_sys::kernel::{self, Kernel, KernelMap};

use crate::common::*;
use crate::model::spec;

struct K(KernelMap);

fn errno(e: io::Error) -> i32 {
    e.raw_os_error().unwrap_or(-1)
}

impl Oracle for K {
    fn update(&mut self, key: &[u8], value: &[u8], flags: u64) -> R<()> {
        self.0.update(Some(key), value, flags).map_err(errno)
    }
    fn lookup(&mut self, key: &[u8]) -> R<Vec<u8>> {
        let mut v = vec![0u8; self.0.value_len()];
        self.0.lookup(Some(key), &mut v).map_err(errno).map(|()| v)
    }
    fn delete(&mut self, key: &[u8]) -> R<()> {
        self.0.delete(key).map_err(errno)
    }
    fn next_key(&mut self, key: Option<&[u8]>) -> R<Vec<u8>> {
        self.0.get_next_key(key).map_err(errno)
    }
    fn push(&mut self, value: &[u8], flags: u64) -> R<()> {
        self.0.update(None, value, flags).map_err(errno)
    }
    fn pop(&mut self) -> R<Vec<u8>> {
        let mut v = vec![0u8; self.0.value_len()];
        self.0.lookup_and_delete(None, &mut v).map_err(errno).map(|()| v)
    }
    fn peek(&mut self) -> R<Vec<u8>> {
        let mut v = vec![0u8; self.0.value_len()];
        self.0.lookup(None, &mut v).map_err(errno).map(|()| v)
    }
}

fn skip(name: &str) -> bool {
    match kernel::available() {
        Ok(()) => false,
        Err(reason) => {
            println!("SKIPPED: {name}: {reason}");
            true
        }
    }
}

/// Runs `cases` random sequences on a fresh kernel map and a fresh weir map of `s`.
fn differential(
    name: &str,
    s: &MapSpec,
    cpus: usize,
    shape: Shape,
    keys: u16,
    cases: u32,
    ordered: bool,
) {
    if skip(name) {
        return;
    }
    let value_len = if matches!(
        s.map_type,
        MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash
    ) {
        (s.value_size as usize).next_multiple_of(8) * cpus
    } else {
        s.value_size as usize
    };
    let queue = matches!(shape, Shape::None);
    let mut runner = TestRunner::new(Config { cases, ..Config::default() });
    let ran = std::cell::Cell::new(0u32);
    runner
        .run(&ops(keys, queue, 60), |ops| {
            let km = Kernel::new()
                .map_create(s.map_type, s.key_size, s.value_size, s.max_entries, s.flags)
                .map_err(|e| TestCaseError::fail(format!("kernel map_create: {e}")))?;
            prop_assert_eq!(km.value_len(), value_len);
            let mut k = K(km);
            let mut w = Weir(Map::create(s, cpus).map_err(|e| TestCaseError::fail(e.to_string()))?);
            ran.set(ran.get() + 1);
            compare(&mut k, &mut w, shape, value_len, &ops, ordered)
        })
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    println!("{name}: {} sequences agree with the kernel", ran.get());
}

#[test]
fn array_agrees_with_the_kernel() {
    differential(
        "array_agrees_with_the_kernel",
        &spec(MapType::Array, 4, 12, 8, 0),
        1,
        Shape::U32,
        12,
        64,
        true,
    );
}

#[test]
fn percpu_array_agrees_with_the_kernel() {
    let name = "percpu_array_agrees_with_the_kernel";
    let Ok(cpus) = kernel::possible_cpus() else {
        println!("SKIPPED: {name}: /sys/devices/system/cpu/possible unreadable");
        return;
    };
    differential(name, &spec(MapType::PercpuArray, 4, 12, 4, 0), cpus, Shape::U32, 6, 48, true);
}

#[test]
fn hash_agrees_with_the_kernel() {
    let name = "hash_agrees_with_the_kernel";
    differential(name, &spec(MapType::Hash, 4, 12, 8, 0), 1, Shape::U32, 14, 64, false);
    differential(
        name,
        &spec(MapType::Hash, 4, 12, 8, BPF_F_NO_PREALLOC),
        1,
        Shape::U32,
        14,
        32,
        false,
    );
}

#[test]
fn lru_hash_without_eviction_agrees_with_the_kernel() {
    // 16 keys in a 1024-entry map: far from full, and from the per-CPU free lists' batch
    // (the kernel's LRU may evict before the map is full), so nothing is evicted.
    let s = spec(MapType::LruHash, 4, 8, 1024, 0);
    differential(
        "lru_hash_without_eviction_agrees_with_the_kernel",
        &s,
        1,
        Shape::U32,
        16,
        48,
        false,
    );
}

#[test]
fn lpm_trie_agrees_with_the_kernel() {
    let s = spec(MapType::LpmTrie, 6, 4, 10, BPF_F_NO_PREALLOC);
    differential("lpm_trie_agrees_with_the_kernel", &s, 1, Shape::Lpm, 128, 96, false);
}

#[test]
fn queue_agrees_with_the_kernel() {
    differential(
        "queue_agrees_with_the_kernel",
        &spec(MapType::Queue, 0, 6, 5, 0),
        1,
        Shape::None,
        1,
        64,
        true,
    );
}

#[test]
fn stack_agrees_with_the_kernel() {
    differential(
        "stack_agrees_with_the_kernel",
        &spec(MapType::Stack, 0, 6, 5, 0),
        1,
        Shape::None,
        1,
        64,
        true,
    );
}

/// Creation checks: the same specs accepted, the same errno for those refused.
#[test]
fn creation_checks_agree_with_the_kernel() {
    let name = "creation_checks_agree_with_the_kernel";
    if skip(name) {
        return;
    }
    let types = [
        MapType::Array,
        MapType::PercpuArray,
        MapType::Hash,
        MapType::LruHash,
        MapType::LpmTrie,
        MapType::Queue,
        MapType::Stack,
        MapType::RingBuf,
        MapType::DevMap,
        MapType::CpuMap,
        MapType::ProgArray,
    ];
    let mut differ = BTreeSet::new();
    let mut n = 0;
    for t in types {
        for (k, v, max) in [
            (0, 0, 4096),
            (4, 4, 0),
            (4, 8, 4),
            (0, 8, 4),
            (6, 4, 4),
            (4, 0, 4),
            (600, 4, 4),
            (4, 8, 8192),
        ] {
            for flags in [0, BPF_F_NO_PREALLOC, 1 << 6, 1 << 20] {
                if t == MapType::CpuMap && max > 256 {
                    // The kernel's limit is its build's NR_CPUS (256 here); weir's is 8192.
                    continue;
                }
                let s = spec(t, k, v, max, flags);
                let ours = Map::create(&s, 1).map(|_| ()).map_err(|e| e.errno());
                let theirs =
                    Kernel::new().map_create(t, k, v, max, flags).map(|_| ()).map_err(errno);
                n += 1;
                if ours != theirs {
                    differ.insert(format!("{t:?} k{k} v{v} max{max} flags {flags:#x}: weir {ours:?}, kernel {theirs:?}"));
                }
            }
        }
    }
    println!("{name}: {n} specs, {} differ", differ.len());
    assert!(differ.is_empty(), "{differ:#?}");
}
