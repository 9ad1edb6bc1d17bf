//! Each map type against a simple model over random operation sequences.

use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;
use weir_maps::{Map, MapSpec, MapType, BPF_F_NO_PREALLOC};

use crate::common::*;

pub fn spec(
    map_type: MapType,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    flags: u32,
) -> MapSpec {
    MapSpec { name: "t".into(), map_type, key_size, value_size, max_entries, flags }
}

fn weir(s: &MapSpec, cpus: usize) -> Weir {
    Weir(Map::create(s, cpus).expect("create"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn array_matches_the_model(ops in ops(12, false, 80)) {
        let mut m = ArrayModel { vals: vec![vec![0; 12]; 8] };
        compare(&mut weir(&spec(MapType::Array, 4, 12, 8, 0), 1), &mut m, Shape::U32, 12, &ops, true)?;
    }

    #[test]
    fn percpu_array_matches_the_model(ops in ops(6, false, 60)) {
        // 3 workers, 4-byte values: the syscall side sees 3 x 8 bytes (padding kept).
        let mut m = ArrayModel { vals: vec![vec![0; 24]; 4] };
        compare(&mut weir(&spec(MapType::PercpuArray, 4, 4, 4, 0), 3), &mut m, Shape::U32, 24, &ops, true)?;
    }

    #[test]
    fn hash_matches_the_model(ops in ops(14, false, 100), prealloc in any::<bool>()) {
        let flags = if prealloc { 0 } else { BPF_F_NO_PREALLOC };
        let mut m = HashModel { map: BTreeMap::new(), max: 8 };
        compare(&mut weir(&spec(MapType::Hash, 4, 12, 8, flags), 1), &mut m, Shape::U32, 12, &ops, false)?;
    }

    #[test]
    fn percpu_hash_matches_the_model(ops in ops(10, false, 80)) {
        let mut m = HashModel { map: BTreeMap::new(), max: 6 };
        compare(&mut weir(&spec(MapType::PercpuHash, 4, 12, 6, 0), 2), &mut m, Shape::U32, 32, &ops, false)?;
    }

    #[test]
    fn lru_hash_without_eviction_matches_the_model(ops in ops(16, false, 80), percpu in any::<bool>()) {
        let (t, len) = if percpu { (MapType::LruPercpuHash, 16) } else { (MapType::LruHash, 8) };
        let mut m = HashModel { map: BTreeMap::new(), max: 64 };
        compare(&mut weir(&spec(t, 4, 8, 64, 0), 2), &mut m, Shape::U32, len, &ops, false)?;
    }

    #[test]
    fn lpm_trie_matches_the_model(ops in ops(128, false, 100)) {
        let mut m = LpmModel { map: BTreeMap::new(), max: 10, max_prefixlen: 16 };
        let s = spec(MapType::LpmTrie, 6, 4, 10, BPF_F_NO_PREALLOC);
        compare(&mut weir(&s, 1), &mut m, Shape::Lpm, 4, &ops, true)?;
    }

    #[test]
    fn queue_and_stack_match_the_model(ops in ops(1, true, 60), stack in any::<bool>()) {
        let t = if stack { MapType::Stack } else { MapType::Queue };
        let mut m = QueueModel { items: VecDeque::new(), max: 5, stack };
        compare(&mut weir(&spec(t, 0, 6, 5, 0), 1), &mut m, Shape::None, 6, &ops, true)?;
    }

    /// An LRU map never holds more than `max_entries`, an update into a full map succeeds
    /// by evicting another key, and the key just written is there with its value.
    #[test]
    fn lru_hash_evicts_to_make_room(ops in proptest::collection::vec((0u32..64, any::<u8>(), any::<bool>()), 1..300)) {
        let map = Map::create(&spec(MapType::LruHash, 4, 8, 8, 0), 1).unwrap();
        for (key, v, look) in ops {
            let k = key.to_ne_bytes();
            if look {
                let _ = map.lookup(&k, 0);
                continue;
            }
            let full = map.len() == 8;
            let had = map.lookup_all(&k).is_ok();
            prop_assert_eq!(map.update_all(&k, &[v; 8], 0), Ok(()));
            prop_assert_eq!(map.lookup_all(&k), Ok(vec![v; 8]));
            prop_assert!(map.len() <= 8);
            if full && !had {
                prop_assert_eq!(map.len(), 8, "evicted one, added one");
            }
        }
        let n = all_keys(&mut Weir(map), 100).len();
        prop_assert!(n <= 8);
    }

    /// The ring buffer against a byte-count model: a record fits while the producer stays
    /// within `size - 1` bytes of the consumer; records come out in order, discarded ones
    /// skipped; positions are the kernel's.
    #[test]
    fn ring_buffer_matches_the_model(steps in proptest::collection::vec((0u32..1500, 0u8..4), 1..200)) {
        let map = Map::create(&spec(MapType::RingBuf, 0, 0, 4096, 0), 1).unwrap();
        let rb = map.ring_buf().unwrap();
        let (mut prod, mut cons) = (0u64, 0u64);
        let mut queued: VecDeque<(u64, Option<Vec<u8>>)> = VecDeque::new();
        for (n, (size, what)) in steps.into_iter().enumerate() {
            let rec = (u64::from(size) + 8).next_multiple_of(8);
            let data = value_bytes(size as usize, n as u8);
            match what {
                0 | 1 => {
                    let fits = prod + rec - cons <= 4095;
                    let r = rb.reserve(u64::from(size), 0);
                    prop_assert_eq!(r.is_some(), fits, "reserve {} at prod {} cons {}", size, prod, cons);
                    if let Some(r) = r {
                        prop_assert!(r.value().write(0, &data));
                        prop_assert_eq!(r.value().as_ptr() as usize % 8, 0);
                        if what == 0 { r.submit(0) } else { r.discard(0) }
                        queued.push_back((rec, (what == 0).then_some(data)));
                        prod += rec;
                    }
                }
                2 => {
                    let fits = prod + rec - cons <= 4095;
                    let got = rb.output(&data, 0);
                    prop_assert_eq!(got.is_ok(), fits);
                    if fits {
                        queued.push_back((rec, Some(data)));
                        prod += rec;
                    }
                }
                _ => {
                    let mut expect = None;
                    while let Some((rec, d)) = queued.pop_front() {
                        cons += rec;
                        if d.is_some() { expect = d; break; }
                    }
                    prop_assert_eq!(rb.read_record(), expect);
                }
            }
            prop_assert_eq!(rb.query(weir_maps::BPF_RB_PROD_POS), prod);
            prop_assert_eq!(rb.query(weir_maps::BPF_RB_CONS_POS), cons);
            prop_assert_eq!(rb.query(weir_maps::BPF_RB_AVAIL_DATA), prod - cons);
        }
        let expect: Vec<Vec<u8>> = queued.into_iter().filter_map(|(_, d)| d).collect();
        let mut got = Vec::new();
        rb.consume(|r| got.push(r.to_vec()));
        prop_assert_eq!(got, expect);
        prop_assert_eq!(rb.query(weir_maps::BPF_RB_AVAIL_DATA), 0);
    }
}
