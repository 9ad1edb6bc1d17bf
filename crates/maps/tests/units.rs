//! Behaviours named one by one: stable value locations, in-place writes seen across
//! threads, per-CPU copies, program/dev/cpu maps, errors on malformed input.

use std::sync::Arc;
use std::thread;

use weir_maps::{Map, MapError, MapType, BPF_ANY, BPF_EXIST, BPF_F_NO_PREALLOC, BPF_NOEXIST};

use crate::model::spec;

fn k(i: u32) -> [u8; 4] {
    i.to_ne_bytes()
}

#[test]
fn an_array_value_is_written_in_place_and_seen_by_other_threads() {
    let map = Arc::new(Map::create(&spec(MapType::Array, 4, 8, 4, 0), 1).unwrap());
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let map = Arc::clone(&map);
            thread::spawn(move || {
                let v = map.lookup(&k(1), 0).unwrap();
                for _ in 0..10_000 {
                    v.fetch_update(0, 8, |x| x + 1).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(map.lookup_all(&k(1)).unwrap(), 40_000u64.to_ne_bytes());
    let a = map.lookup(&k(1), 0).unwrap();
    let b = map.lookup(&k(1), 0).unwrap();
    assert!(a.same_location(&b));
    assert_eq!(a.as_ptr() as usize % 8, 0);
    assert!(map.lookup(&k(4), 0).is_none());
    assert!(map.lookup(&[1, 2, 3], 0).is_none());
}

#[test]
fn a_value_pointer_is_the_value_in_place() {
    // `value_ptr` (what a JIT's environment hands out) names the bytes `value_at` does,
    // with the value's length, for arrays, per-CPU arrays and hashes alike.
    for (map_type, cpu) in [(MapType::Array, 0), (MapType::PercpuArray, 1), (MapType::Hash, 1)] {
        let map = Map::create(&spec(map_type, 4, 12, 4, 0), 2).unwrap();
        if map_type == MapType::Hash {
            map.update(&k(3), &[7; 12], BPF_ANY, cpu).unwrap();
        }
        let loc = map.lookup_loc(&k(3), cpu).unwrap();
        let (ptr, len) = map.value_ptr(loc).unwrap();
        let value = map.value_at(loc).unwrap();
        assert_eq!((ptr, len), (value.as_ptr(), 12), "{map_type:?}");
        let other = map.lookup_loc(&k(2), cpu).map(|loc| map.value_ptr(loc).unwrap().0);
        assert_ne!(other, Some(ptr), "{map_type:?}");
    }
    let queue = Map::create(&spec(MapType::Queue, 0, 8, 4, 0), 1).unwrap();
    assert!(queue.lookup_loc(&[], 0).is_none());
}

#[test]
fn a_hash_value_outlives_its_deletion_for_the_holder() {
    let map = Map::create(&spec(MapType::Hash, 4, 4, 4, 0), 1).unwrap();
    map.update(&k(9), &[1, 2, 3, 4], BPF_ANY, 0).unwrap();
    let held = map.lookup(&k(9), 0).unwrap();
    assert!(held.store(0, 4, 0xdead_beef));
    map.delete(&k(9)).unwrap();
    assert!(map.lookup(&k(9), 0).is_none());
    // Still readable and writable by its holder, no longer reachable from the map.
    assert_eq!(held.load(0, 4), Some(0xdead_beef));
    map.update(&k(9), &[0; 4], BPF_NOEXIST, 0).unwrap();
    assert!(!held.same_location(&map.lookup(&k(9), 0).unwrap()));
    assert_eq!(map.lookup_all(&k(9)).unwrap(), [0; 4]);
    // Out-of-bounds accesses are refused, not performed.
    assert!(!held.write(2, &[0; 3]));
    assert_eq!(held.load(4, 1), None);
    assert_eq!(held.fetch_update(2, 4, |x| x), None);
}

#[test]
fn per_cpu_values_are_per_worker_and_the_syscall_sees_them_all() {
    for t in [MapType::PercpuArray, MapType::PercpuHash, MapType::LruPercpuHash] {
        let map = Map::create(&spec(t, 4, 4, 4, 0), 3).unwrap();
        map.update(&k(2), &[7; 4], BPF_ANY, 1).unwrap();
        assert_eq!(map.lookup(&k(2), 1).unwrap().to_vec(), [7; 4], "{t:?}");
        assert_eq!(map.lookup(&k(2), 0).unwrap().to_vec(), [0; 4], "{t:?}");
        assert!(map.lookup(&k(2), 3).is_none(), "{t:?}: no worker 3");
        assert_eq!(map.syscall_value_size(), 24);
        let mut all = vec![0u8; 24];
        all[8..12].copy_from_slice(&[7; 4]);
        assert_eq!(map.lookup_all(&k(2)).unwrap(), all, "{t:?}");
        let new: Vec<u8> = (0..24).collect();
        map.update_all(&k(2), &new, BPF_EXIST).unwrap();
        assert_eq!(map.lookup(&k(2), 2).unwrap().to_vec(), [16, 17, 18, 19], "{t:?}");
        assert_eq!(map.update_all(&k(2), &new[..20], BPF_ANY), Err(MapError::Invalid));
    }
}

/// A program's array lookup (`Map::lookup`) at the first and last index, past the last,
/// and of keys of other lengths, on a shared and a per-CPU array: the value the syscall
/// wrote, in place where `lookup_ptr` puts it, or nothing.
#[test]
fn array_lookups_end_at_the_last_index_and_take_four_byte_keys_only() {
    for (t, value_size, cpus) in
        [(MapType::Array, 8, 1), (MapType::Array, 12, 2), (MapType::PercpuArray, 12, 3)]
    {
        let map = Map::create(&spec(t, 4, value_size, 5, 0), cpus).unwrap();
        let copies = if t == MapType::PercpuArray { cpus } else { 1 };
        let pitch = (value_size as usize).next_multiple_of(8);
        for i in 0..5u32 {
            let all: Vec<u8> = (0..pitch * copies).map(|b| (i as usize * 40 + b) as u8).collect();
            let all = if copies == 1 { all[..value_size as usize].to_vec() } else { all };
            map.update_all(&k(i), &all, BPF_ANY).unwrap();
        }
        for cpu in 0..cpus {
            for i in [0u32, 4] {
                let what = format!("{t:?} of {value_size}-byte values: index {i}, worker {cpu}");
                let v = map.lookup(&k(i), cpu).expect(&what);
                let copy = if copies == 1 { 0 } else { cpu };
                let want: Vec<u8> = (0..value_size as usize)
                    .map(|b| (i as usize * 40 + copy * pitch + b) as u8)
                    .collect();
                assert_eq!(v.to_vec(), want, "{what}");
                let (_, at) = map.lookup_ptr(&k(i), cpu).expect(&what);
                assert_eq!(v.as_ptr(), at, "{what}: in place");
            }
            for i in [5u32, 6, 1 << 16, u32::MAX] {
                assert!(map.lookup(&k(i), cpu).is_none(), "{t:?}: index {i}, worker {cpu}");
            }
            for key in [&[][..], &[4], &[4, 0, 0], &[4, 0, 0, 0, 0], &[4, 0, 0, 0, 0, 0, 0, 0]] {
                assert!(map.lookup(key, cpu).is_none(), "{t:?}: a {}-byte key", key.len());
            }
        }
        let past = map.lookup(&k(1), cpus);
        assert_eq!(past.is_none(), t == MapType::PercpuArray, "{t:?}: worker {cpus}");
    }
}

/// `Map::one_word_table` is a table for the hash maps of one-word keys (1 to 8 bytes)
/// neither per-CPU nor LRU, and none for other maps; its probe answers as
/// `Map::lookup_key_words` does (found, missing, after a delete and an update).
#[test]
fn one_word_tables_are_the_shared_hash_maps_of_one_word_keys() {
    let cases = [
        (MapType::Hash, 1, true),
        (MapType::Hash, 4, true),
        (MapType::Hash, 8, true),
        (MapType::Hash, 12, false),
        (MapType::Hash, 16, false),
        (MapType::PercpuHash, 4, false),
        (MapType::LruHash, 4, false),
        (MapType::LruPercpuHash, 8, false),
        (MapType::Array, 4, false),
        (MapType::PercpuArray, 4, false),
    ];
    for (t, key_size, one_word) in cases {
        let map = Map::create(&spec(t, key_size, 8, 64, 0), 2).unwrap();
        let table = map.one_word_table();
        assert_eq!(table.is_some(), one_word, "{t:?}, {key_size}-byte keys");
        let Some(table) = table else { continue };
        let key = |i: u8| vec![i; key_size as usize];
        let w0 = |i: u8| {
            let mut w = [0u8; 8];
            w[..key_size as usize].copy_from_slice(&key(i));
            u64::from_ne_bytes(w)
        };
        for i in 0..40 {
            map.update(&key(i), &[i; 8], BPF_ANY, 0).unwrap();
        }
        map.delete(&key(7)).unwrap();
        map.update(&key(9), &[90; 8], BPF_EXIST, 1).unwrap();
        for i in 0..50 {
            let probed = table.probe_one_word(w0(i));
            assert_eq!(probed, map.lookup_key_words(w0(i), 0, 1), "{t:?}/{key_size}: key {i}");
            let want = map.lookup_ptr(&key(i), 1).map(|(loc, host)| (loc.elem(), host));
            let got = (!probed.host.is_null()).then_some((probed.elem as u32, probed.host));
            assert_eq!(got, want, "{t:?}/{key_size}: key {i}");
        }
    }
}

#[test]
fn shared_maps_have_one_value_for_every_worker() {
    // Created for 4 workers (as `weir run --cpus 4` creates them): a shared map's value is
    // the same whichever worker looks it up or writes it.
    for t in [MapType::Array, MapType::Hash, MapType::LruHash] {
        let map = Map::create(&spec(t, 4, 8, 16, 0), 4).unwrap();
        map.update(&k(3), &[1; 8], BPF_ANY, 2).unwrap();
        for cpu in 0..4 {
            let v = map.lookup(&k(3), cpu).unwrap_or_else(|| panic!("{t:?}: worker {cpu}"));
            assert_eq!(v.to_vec(), [1; 8], "{t:?}: worker {cpu}");
        }
        assert_eq!(map.lookup_all(&k(3)).unwrap(), [1; 8], "{t:?}");
    }
}

#[test]
fn program_arrays_hold_program_indices() {
    let map = Map::create(&spec(MapType::ProgArray, 4, 4, 4, 0), 1).unwrap();
    assert_eq!(map.prog_at(1), None);
    map.update_all(&k(1), &5u32.to_ne_bytes(), BPF_ANY).unwrap();
    assert_eq!(map.prog_at(1), Some(5));
    assert_eq!(map.update_all(&k(1), &[0; 4], BPF_NOEXIST), Err(MapError::Invalid));
    assert_eq!(map.update_all(&k(4), &[0; 4], BPF_ANY), Err(MapError::TooBig));
    assert_eq!(map.lookup_all(&k(1)), Ok(5u32.to_ne_bytes().to_vec()));
    assert!(map.lookup(&k(1), 0).is_none(), "programs do not look up program arrays");
    map.delete(&k(1)).unwrap();
    assert_eq!(map.delete(&k(1)), Err(MapError::NoEntry));
    assert_eq!(map.prog_at(1), None);
    assert_eq!(map.prog_at(u32::MAX), None);
}

#[test]
fn devmaps_and_cpumaps_store_the_kernels_value_formats() {
    for t in [MapType::DevMap, MapType::CpuMap] {
        let map = Map::create(&spec(t, 4, 8, 4, 0), 1).unwrap();
        let mut v = [0u8; 8];
        v[..4].copy_from_slice(&3u32.to_ne_bytes());
        map.update_all(&k(0), &v, BPF_ANY).unwrap();
        assert_eq!(map.lookup(&k(0), 0).unwrap().to_vec(), v);
        assert_eq!(map.update_all(&k(0), &v, BPF_NOEXIST), Err(MapError::Exists));
        assert_eq!(map.lookup_all(&k(1)), Err(MapError::NoEntry));
        // ifindex (qsize) 0 empties the slot.
        map.update_all(&k(0), &[0; 8], BPF_ANY).unwrap();
        assert!(map.lookup(&k(0), 0).is_none());
        assert_eq!(map.delete(&k(9)), Err(MapError::Invalid));
        assert_eq!(map.get_next_key(None), Ok(k(0).to_vec()));
    }
    assert_eq!(Map::create(&spec(MapType::DevMap, 4, 6, 4, 0), 1).err(), Some(MapError::Invalid));
    let h = Map::create(&spec(MapType::DevMapHash, 4, 4, 2, 0), 1).unwrap();
    h.update_all(&k(10), &1u32.to_ne_bytes(), BPF_EXIST).unwrap();
    h.update_all(&k(11), &2u32.to_ne_bytes(), BPF_ANY).unwrap();
    assert_eq!(h.update_all(&k(12), &2u32.to_ne_bytes(), BPF_ANY), Err(MapError::TooBig));
    assert_eq!(h.lookup(&k(11), 0).unwrap().to_vec(), 2u32.to_ne_bytes());
}

#[test]
fn malformed_specs_and_arguments_are_errors_not_panics() {
    for t in (0..40).map(MapType::from_kernel_id) {
        for (ks, vs, max) in
            [(0, 0, 0), (u32::MAX, u32::MAX, u32::MAX), (4, 1 << 30, 1 << 30), (4, 8, u32::MAX)]
        {
            for flags in [0, BPF_F_NO_PREALLOC, u32::MAX] {
                // Huge specs: refused (or ENOMEM), never an abort.
                let s = spec(t, ks, vs, max, flags);
                if let Ok(m) = Map::create(&s, 2) {
                    let _ = m.lookup(&[0; 4], 5);
                    let _ = m.update(&[0; 4], &[0; 8], u64::MAX, 9);
                    let _ = m.get_next_key(Some(&[1]));
                }
            }
        }
    }
    assert_eq!(Map::create(&spec(MapType::Array, 4, 4, 4, 0), 0).err(), Some(MapError::Invalid));
    let lpm = Map::create(&spec(MapType::LpmTrie, 8, 4, 4, BPF_F_NO_PREALLOC), 1).unwrap();
    assert_eq!(
        lpm.update_all(&[33, 0, 0, 0, 1, 2, 3, 4], &[0; 4], BPF_ANY),
        Err(MapError::Invalid)
    );
    assert_eq!(lpm.update_all(&[1, 2], &[0; 4], BPF_ANY), Err(MapError::Invalid));
    assert!(lpm.lookup(&[], 0).is_none());
}

#[test]
fn lpm_lookup_takes_the_longest_prefix() {
    let map = Map::create(&spec(MapType::LpmTrie, 8, 4, 16, BPF_F_NO_PREALLOC), 1).unwrap();
    let key = |len: u32, ip: [u8; 4]| {
        let mut k = len.to_ne_bytes().to_vec();
        k.extend_from_slice(&ip);
        k
    };
    map.update_all(&key(8, [10, 0, 0, 0]), &[8; 4], BPF_ANY).unwrap();
    map.update_all(&key(24, [10, 1, 2, 0]), &[24; 4], BPF_ANY).unwrap();
    map.update_all(&key(0, [0; 4]), &[0; 4], BPF_ANY).unwrap();
    assert_eq!(map.lookup(&key(32, [10, 1, 2, 3]), 0).unwrap().to_vec(), [24; 4]);
    assert_eq!(map.lookup(&key(32, [10, 1, 3, 3]), 0).unwrap().to_vec(), [8; 4]);
    assert_eq!(map.lookup(&key(32, [11, 1, 3, 3]), 0).unwrap().to_vec(), [0; 4]);
    // The key's own prefix length bounds the match.
    assert_eq!(map.lookup(&key(16, [10, 1, 2, 3]), 0).unwrap().to_vec(), [8; 4]);
    assert_eq!(map.delete(&key(16, [10, 1, 0, 0])), Err(MapError::NoEntry));
    map.delete(&key(24, [10, 1, 2, 99])).unwrap();
    assert_eq!(map.lookup(&key(32, [10, 1, 2, 3]), 0).unwrap().to_vec(), [8; 4]);
}

#[test]
fn a_reservation_dropped_unsubmitted_is_discarded() {
    let map = Map::create(&spec(MapType::RingBuf, 0, 0, 4096, 0), 1).unwrap();
    let rb = map.ring_buf().unwrap();
    assert!(rb.reserve(8, 1).is_none(), "flags must be 0");
    assert!(rb.reserve(4096, 0).is_none(), "larger than the ring");
    drop(rb.reserve(16, 0).unwrap());
    rb.output(b"hello", 0).unwrap();
    assert_eq!(rb.output(b"x", 4), Err(MapError::Invalid));
    assert_eq!(rb.read_record().as_deref(), Some(&b"hello"[..]));
    assert_eq!(rb.read_record(), None);
    assert_eq!(rb.query(weir_maps::BPF_RB_RING_SIZE), 4096);
    // A record that crosses the end of the ring reads back whole.
    for _ in 0..20 {
        let data: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        rb.output(&data, 0).unwrap();
        assert_eq!(rb.read_record(), Some(data));
    }
    assert!(rb.query(weir_maps::BPF_RB_PROD_POS) > 4096);
    assert_eq!(map.lookup_all(&[]), Err(MapError::NotSupported));
}

/// Lock-free hash lookups while a writer inserts, replaces and deletes in the same
/// buckets: a lookup finds exactly its key's value (never another key's, never a value
/// half written) and never misses a key that stays in the map. Fewer operations than the
/// map has elements, so no element is reused during the test (reuse is the kernel's
/// preallocated-map behaviour, not checked here).
#[test]
fn hash_lookups_without_locks_see_whole_elements_under_concurrent_writes() {
    let map = Map::create(&spec(MapType::Hash, 8, 16, 4096, 0), 1).unwrap();
    let key = |i: u64| i.to_ne_bytes();
    let value = |i: u64, version: u64| {
        let mut v = [0u8; 16];
        v[..8].copy_from_slice(&(i * 1_000_003).to_ne_bytes());
        v[8..].copy_from_slice(&version.to_ne_bytes());
        v
    };
    // Keys that stay: 1000..1100.
    for i in 1000..1100 {
        map.update(&key(i), &value(i, 0), BPF_ANY, 0).unwrap();
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    let lookups = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (map, stop, lookups) = (&map, &stop, &lookups);
                s.spawn(move || {
                    let (mut found, mut mine) = (0u64, 0u64);
                    let mut x = r as u64 + 1;
                    // At least 2,000 lookups each, however the threads are scheduled: on a
                    // busy machine one reader may not run before the writes end.
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) || mine < 2000 {
                        mine += 1;
                        lookups.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let i = (x >> 33) % 1100;
                        match map.lookup(&key(i), 0) {
                            Some(v) => {
                                found += 1;
                                assert_eq!(v.load(0, 8), Some(i * 1_000_003), "key {i}");
                            }
                            None => assert!(i < 1000, "key {i} stays in the map"),
                        }
                        // The program's lookup (`find_hash_elem`'s, the key as its element
                        // word): the element's value where its answer points, for every
                        // key that stays, whatever the writers do to other chains.
                        let elem = map.lookup_key_words(i, 0, r);
                        if i >= 1000 {
                            let loc = map.elem_loc(elem.elem as u32, 0).expect("an element");
                            let (at, _) = map.value_ptr(loc).unwrap();
                            assert_eq!(at, elem.host, "key {i}: its value's address");
                            let v = map.value_at(loc).unwrap();
                            assert_eq!(v.load(0, 8), Some(i * 1_000_003), "key {i}: words");
                        }
                    }
                    found
                })
            })
            .collect();
        // The readers run before and during every write.
        while lookups.load(std::sync::atomic::Ordering::Relaxed) < 2000 {
            thread::yield_now();
        }
        for op in 0..3000u64 {
            if op % 64 == 0 {
                thread::yield_now();
            }
            let i = op * 7 % 256;
            match op % 3 {
                0 | 1 => map.update(&key(i), &value(i, op), BPF_ANY, 0).unwrap(),
                _ => {
                    let _ = map.delete(&key(i));
                }
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
    });
    for i in 1000..1100 {
        assert_eq!(map.lookup_all(&key(i)).unwrap(), value(i, 0));
    }
}

/// A deleted element is reused only after every never-used element (and before it the
/// elements freed earlier): a holder's pointer stays map memory either way.
#[test]
fn hash_elements_are_reused_last_freed_last() {
    let map = Map::create(&spec(MapType::Hash, 4, 8, 2, 0), 1).unwrap();
    map.update(&k(1), &[1; 8], BPF_ANY, 0).unwrap();
    let held = map.lookup(&k(1), 0).unwrap();
    map.delete(&k(1)).unwrap();
    let mut seen_reuse = false;
    for round in 0..200u32 {
        map.update(&k(round + 10), &[2; 8], BPF_ANY, 0).unwrap();
        let v = map.lookup(&k(round + 10), 0).unwrap();
        seen_reuse |= v.same_location(&held);
        map.delete(&k(round + 10)).unwrap();
    }
    // The pool is small (2 elements and a spare per stripe): the held element came back.
    assert!(seen_reuse);
    assert_eq!(held.len(), 8);
}

/// A map past its eagerly allocated elements (the first 1,024) and over several grown
/// chunks: every key found, iterated once, deleted, and the elements reused.
#[test]
fn hash_maps_grow_past_their_first_elements_and_reuse_them() {
    let map = Map::create(&spec(MapType::Hash, 4, 8, 5000, 0), 1).unwrap();
    for round in 0..2u64 {
        for i in 0..5000u32 {
            map.update(&k(i), &(u64::from(i) + round).to_ne_bytes(), BPF_NOEXIST, 0).unwrap();
        }
        assert_eq!(map.update(&k(5000), &[0; 8], BPF_ANY, 0), Err(MapError::TooBig));
        for i in 0..5000u32 {
            assert_eq!(map.lookup(&k(i), 0).unwrap().load(0, 8), Some(u64::from(i) + round));
        }
        let (mut key, mut seen) = (None, std::collections::BTreeSet::new());
        while let Ok(next) = map.get_next_key(key.as_deref()) {
            assert!(seen.insert(next.clone()), "key {next:?} twice");
            key = Some(next);
        }
        assert_eq!(seen.len(), 5000);
        for i in 0..5000u32 {
            map.delete(&k(i)).unwrap();
        }
        assert!(map.is_empty());
        assert_eq!(map.get_next_key(None), Err(MapError::NoEntry));
    }
}
