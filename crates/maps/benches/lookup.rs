//! Lookup timings, printed (not asserted): what a program's `bpf_map_lookup_elem` costs on
//! each map type, value read included. `cargo bench -p weir-maps`.

use std::hint::black_box;
use std::time::Instant;

use weir_maps::{Map, MapSpec, MapType, BPF_ANY, BPF_F_NO_PREALLOC};

fn spec(
    map_type: MapType,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    flags: u32,
) -> MapSpec {
    MapSpec { name: "bench".into(), map_type, key_size, value_size, max_entries, flags }
}

/// Best of 5 rounds of `n` lookups over `keys`, in ns per lookup.
fn time(map: &Map, keys: &[Vec<u8>], n: usize) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        let mut sum = 0u64;
        for _ in 0..n / keys.len() {
            for key in keys {
                if let Some(v) = map.lookup(black_box(key), 0) {
                    sum = sum.wrapping_add(v.load(0, 4).unwrap_or(0));
                }
            }
        }
        black_box(sum);
        best = best.min(start.elapsed().as_nanos() as f64 / (n / keys.len() * keys.len()) as f64);
    }
    best
}

fn main() {
    let n = 2_000_000;
    let u32_keys = |count: u32| (0..count).map(|i| i.to_ne_bytes().to_vec()).collect::<Vec<_>>();

    let array = Map::create(&spec(MapType::Array, 4, 8, 1024, 0), 1).unwrap();
    println!("array (1024 x 8 B):          {:6.2} ns/lookup", time(&array, &u32_keys(1024), n));

    let keys = u32_keys(1024);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        let mut found = 0usize;
        for _ in 0..n / 1024 {
            for key in &keys {
                found += usize::from(array.lookup(black_box(key), 0).is_some());
            }
        }
        black_box(found);
        best = best.min(start.elapsed().as_nanos() as f64 / (n / 1024 * 1024) as f64);
    }
    println!("array, lookup only:          {best:6.2} ns/lookup");

    let percpu = Map::create(&spec(MapType::PercpuArray, 4, 8, 1024, 0), 4).unwrap();
    println!("per-CPU array (4 workers):   {:6.2} ns/lookup", time(&percpu, &u32_keys(1024), n));

    for (t, name) in [(MapType::Hash, "hash"), (MapType::LruHash, "LRU hash")] {
        for count in [1_000u32, 100_000] {
            let map = Map::create(&spec(t, 4, 8, count, 0), 1).unwrap();
            let keys = u32_keys(count);
            for k in &keys {
                map.update(k, &[1; 8], BPF_ANY, 0).unwrap();
            }
            println!("{name:8} ({count:6} keys of 4 B): {:6.2} ns/lookup", time(&map, &keys, n));
        }
    }
    let map = Map::create(&spec(MapType::Hash, 16, 8, 10_000, 0), 1).unwrap();
    let keys: Vec<Vec<u8>> = (0..10_000u32).map(|i| [i.to_ne_bytes(); 4].concat()).collect();
    for k in &keys {
        map.update(k, &[1; 8], BPF_ANY, 0).unwrap();
    }
    println!("hash     ( 10000 keys of 16 B): {:6.2} ns/lookup", time(&map, &keys, n));

    let lpm = Map::create(&spec(MapType::LpmTrie, 8, 8, 10_000, BPF_F_NO_PREALLOC), 1).unwrap();
    for i in 0..1000u32 {
        for len in [8u32, 16, 24] {
            let mut k = len.to_ne_bytes().to_vec();
            k.extend_from_slice(&(i << 8).to_be_bytes());
            let _ = lpm.update_all(&k, &[1; 8], BPF_ANY);
        }
    }
    let lookups: Vec<Vec<u8>> = (0..1000u32)
        .map(|i| {
            let mut k = 32u32.to_ne_bytes().to_vec();
            k.extend_from_slice(&((i << 8) | 7).to_be_bytes());
            k
        })
        .collect();
    println!("LPM (3000 prefixes, 3 lengths): {:6.2} ns/lookup", time(&lpm, &lookups, n / 4));
}
