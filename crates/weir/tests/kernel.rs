//! The kernel as the oracle of `weir::Object` (what `weir run` runs): each object's entry
//! program is loaded into the kernel with its maps (`weir_testkit::kernel_object`) and run
//! packet by packet with `BPF_PROG_TEST_RUN`, and the same object runs through
//! `weir::Object` on the interpreter and on the JIT. Per packet the return value and the
//! packet as the program left it (`data_out`) must agree; at the end, every map's contents
//! (the kernel's read back with `get_next_key` and lookups; ring buffers excepted). Two
//! cases start from preloaded maps (`--maps-in` JSON read by weir, the same contents put
//! into the kernel's maps).
//!
//! Frames the kernel's test run refuses (`EINVAL`: shorter than an Ethernet header; for the
//! skb types an IPv4 or IPv6 EtherType without the fixed IP header behind it) are run by
//! neither side and counted. Per-CPU maps: weir runs one worker (CPU 0) and the kernel's
//! test run runs on whatever CPU the test's thread is on, so a per-CPU value is compared as
//! the sum over the kernel's CPUs (64-bit words) against weir's CPU 0 value (ringbuf.o's
//! `counts`).
//!
//! As root only; elsewhere each test prints `SKIPPED:` and returns.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use weir::maps::Map;
use weir::{Engine, Loaded, Object, ProgType};
use weir_elf::ObjectSpec;
use weir_program::MapType;
use weir_sys::kernel::{self, KernelMap, LoadedProgram};
use weir_testkit::kernel_object::{self, Entries};

/// An object, its entry program, and the program array slot to fill (map, key, target
/// program) when it tail-calls.
struct Case {
    file: &'static str,
    entry: &'static str,
    tail: Option<(&'static str, u32, &'static str)>,
    /// Preloaded maps (`weir run --maps-in` JSON): weir reads it with
    /// `Object::load_maps_json`, and the kernel's maps get what weir's then hold.
    maps_in: Option<&'static str>,
}

/// tc_knob with its `.rodata` knobs changed (`min_len` 100, `verdict` TC_ACT_SHOT),
/// `.data`'s `seen` at 1000 and a count already in `lengths`.
const TC_KNOB_MAPS: &str = r#"{
  ".rodata": [{"key": [0, 0, 0, 0], "value": ["0x64", 0, 0, 0, "0x02", 0, 0, 0]}],
  ".data": [{"key": [0, 0, 0, 0], "value": ["0xe8", "0x03", 0, 0, 0, 0, 0, 0]}],
  "lengths": [{"key": ["0x01", 0, 0, 0], "value": [5, 0, 0, 0, 0, 0, 0, 0]}]
}"#;

/// lpm_ringbuf's trie: IPv4 source prefixes (`prefixlen` then the address bytes) of
/// lengths 1 to 32, nested and disjoint.
const LPM_MAPS: &str = r#"{
  "prefixes": [
    {"key": [1, 0, 0, 0, 0, 0, 0, 0], "value": [1, 0, 0, 0]},
    {"key": [8, 0, 0, 0, 10, 0, 0, 0], "value": [2, 0, 0, 0]},
    {"key": [16, 0, 0, 0, 192, 168, 0, 0], "value": [3, 0, 0, 0]},
    {"key": [24, 0, 0, 0, 192, 168, 1, 0], "value": [4, 0, 0, 0]},
    {"key": [32, 0, 0, 0, 192, 168, 1, 1], "value": [5, 0, 0, 0]},
    {"key": [3, 0, 0, 0, "0xe0", 0, 0, 0], "value": [6, 0, 0, 0]}
  ]
}"#;

/// legacy_maps' `legacy_flows` with the key its program looks up for IPv4 frames
/// (`skb->protocol`, big-endian in its field, as a u64): those return -1.
const LEGACY_MAPS: &str = r#"{
  "legacy_flows": [{"key": [8, 0, 0, 0, 0, 0, 0, 0], "value": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]}]
}"#;

/// Every program of testdata/bpf's objects that the kernel's test run runs (each one's
/// entry: `two_funcs.o`'s `xdp/devmap` program as a plain XDP program, which the kernel
/// then runs too).
const CASES: &[Case] = &[
    Case { file: "xdp_counter.o", entry: "xdp_count", tail: None, maps_in: None },
    Case { file: "two_funcs.o", entry: "xdp_pass", tail: None, maps_in: None },
    Case { file: "two_funcs.o", entry: "xdp_drop_short", tail: None, maps_in: None },
    Case { file: "two_funcs.o", entry: "xdp_devmap_pass", tail: None, maps_in: None },
    Case { file: "calls.o", entry: "xdp_calls", tail: None, maps_in: None },
    Case { file: "calls.o", entry: "tc_calls", tail: None, maps_in: None },
    Case { file: "legacy_maps.o", entry: "legacy_prog", tail: None, maps_in: None },
    Case { file: "legacy_maps.o", entry: "legacy_prog", tail: None, maps_in: Some(LEGACY_MAPS) },
    Case { file: "big.o", entry: "xdp_big", tail: None, maps_in: None },
    Case { file: "tc_knob.o", entry: "tc_filter", tail: None, maps_in: None },
    Case { file: "socket_filter.o", entry: "tcp_only", tail: None, maps_in: None },
    Case {
        file: "tail_call.o",
        entry: "xdp_dispatch",
        tail: Some(("jump_table", 0, "xdp_target")),
        maps_in: None,
    },
    Case { file: "tc_fields.o", entry: "tc_fields", tail: None, maps_in: None },
    Case { file: "ringbuf.o", entry: "xdp_ringbuf", tail: None, maps_in: None },
    Case { file: "tc_knob.o", entry: "tc_filter", tail: None, maps_in: Some(TC_KNOB_MAPS) },
    Case { file: "lpm_ringbuf.o", entry: "xdp_lpm", tail: None, maps_in: Some(LPM_MAPS) },
];

fn object_bytes(file: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/bpf").join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The generated frames: 600 of the seeded corpus (Ethernet with IPv4, IPv6, ARP, TCP, UDP,
/// ICMP, tunnels, some cut short, some noise) and the first of them cut to every length
/// from 0 to 60 bytes.
fn generated() -> Vec<Vec<u8>> {
    let corpus = weir_testkit::corpus(11, 600);
    let mut frames: Vec<Vec<u8>> = corpus.iter().map(|p| p.data.clone()).collect();
    let first = corpus.iter().find(|p| p.data.len() > 60).map(|p| p.data.clone());
    let first = first.unwrap_or_default();
    for len in 0..=60.min(first.len()) {
        frames.push(first[..len].to_vec());
    }
    frames
}

fn sample() -> Vec<Vec<u8>> {
    let path: PathBuf = weir_testkit::sample_capture_path();
    let packets = weir_testkit::read_pcap(&path).unwrap_or_else(|e| panic!("{e}"));
    packets.into_iter().map(|p| p.data).collect()
}

/// The kernel side: the entry loaded with the object's maps, the prog array filled with the
/// target's descriptor (the target is returned too: it must outlive the runs).
fn kernel_side(
    spec: &ObjectSpec,
    case: &Case,
) -> (LoadedProgram, Vec<KernelMap>, Vec<LoadedProgram>) {
    let maps =
        kernel_object::create_maps(spec.maps.iter().map(|m| (&m.spec, m.initial.as_deref())))
            .unwrap();
    let load = |name: &str| {
        let prog = spec.program(name).unwrap_or_else(|e| panic!("{}: {e}", case.file));
        kernel_object::load(&prog.program, &maps).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let mut keep = Vec::new();
    if let Some((map, key, target)) = case.tail {
        let target = load(target);
        let index = spec.maps.iter().position(|m| m.spec.name == map).unwrap();
        let fd = target.as_fd().as_raw_fd() as u32;
        maps[index].update(Some(&key.to_ne_bytes()), &fd.to_ne_bytes(), 0).unwrap();
        keep.push(target);
    }
    if let Some(json) = case.maps_in {
        let object = Object::open(&object_bytes(case.file)).unwrap();
        object.load_maps_json(json).unwrap();
        for (map, kmap) in object.maps().iter().zip(&maps) {
            if matches!(map.map_type(), MapType::RingBuf | MapType::ProgArray) {
                continue;
            }
            for (key, value) in weir_dump(map) {
                kmap.update(Some(&key), &value, 0).unwrap();
            }
        }
    }
    (load(case.entry), maps, keep)
}

/// weir's side: the object opened, the prog array filled with the target's index.
fn weir_side(bytes: &[u8], case: &Case, engine: Engine) -> (Object, Loaded) {
    let object = Object::open(bytes).unwrap();
    if let Some(json) = case.maps_in {
        object.load_maps_json(json).unwrap();
    }
    if let Some((map, key, target)) = case.tail {
        let target = object.entry(Some(target), None).unwrap() as u32;
        let map = object.maps().iter().find(|m| m.spec().name == map).unwrap();
        map.update_all(&key.to_ne_bytes(), &target.to_ne_bytes(), 0).unwrap();
    }
    let entry = object.entry(Some(case.entry), None).unwrap();
    let loaded = object.load(entry, Some(engine), 0).unwrap();
    (object, loaded)
}

fn weir_dump(map: &Map) -> Entries {
    let mut out = Vec::new();
    let mut key: Option<Vec<u8>> = None;
    while let Ok(next) = map.get_next_key(key.as_deref()) {
        if let Ok(value) = map.lookup_all(&next) {
            out.push((next.clone(), value));
        }
        key = Some(next);
    }
    out.sort();
    out
}

/// 64-bit words summed over the CPUs of a per-CPU value (`stride` bytes per CPU).
fn sum_cpus(value: &[u8], stride: usize, size: usize) -> Vec<u8> {
    let mut sum = vec![0u64; size / 8];
    for cpu in value.chunks(stride.max(1)) {
        for (s, w) in sum.iter_mut().zip(cpu.chunks_exact(8)) {
            let word = u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            *s = s.wrapping_add(word);
        }
    }
    sum.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

/// Differences between the kernel's maps and weir's, one line each.
fn compare_maps(
    spec: &ObjectSpec,
    kernel: &[KernelMap],
    object: &Object,
    entries: &mut usize,
) -> Vec<String> {
    let mut diffs = Vec::new();
    for ((m, kmap), wmap) in spec.maps.iter().zip(kernel).zip(object.maps()) {
        let s = &m.spec;
        // The kernel does not iterate a ring buffer (ENOTSUPP); what a program did with
        // one shows in its other maps (ringbuf.o counts its reservations).
        if s.map_type == MapType::RingBuf {
            continue;
        }
        let theirs = kernel_object::dump(kmap, s.key_size as usize).unwrap();
        let ours = weir_dump(wmap);
        *entries += theirs.len();
        let (theirs, ours): (Vec<_>, Vec<_>) = match s.map_type {
            // The kernel reads back a program's id, weir its index: compare the keys.
            MapType::ProgArray => (
                theirs.into_iter().map(|(k, _)| (k, Vec::new())).collect(),
                ours.into_iter().map(|(k, _)| (k, Vec::new())).collect(),
            ),
            MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash => {
                let size = s.value_size as usize;
                let stride = size.next_multiple_of(8);
                let sum = |v: Entries| {
                    v.into_iter().map(|(k, v)| (k, sum_cpus(&v, stride, size))).collect()
                };
                (sum(theirs), sum(ours))
            }
            _ => (theirs, ours),
        };
        if theirs != ours {
            diffs.push(format!("map {}: kernel {theirs:02x?}\n   weir {ours:02x?}", s.name));
        }
    }
    diffs
}

/// What one run over a packet set gave.
#[derive(Default)]
struct Tally {
    compared: usize,
    agreed: usize,
    refused: usize,
    /// The kernel's return values and how often each came.
    verdicts: std::collections::BTreeMap<i32, usize>,
    /// Map entries compared at the end (the kernel's, per engine).
    entries: usize,
    /// The object's maps.
    maps: usize,
    diffs: Vec<String>,
}

fn run_case(case: &Case, set: &str, frames: &[Vec<u8>]) -> Tally {
    let bytes = object_bytes(case.file);
    let spec = ObjectSpec::parse(&bytes).unwrap();
    let (prog, kmaps, _keep) = kernel_side(&spec, case);
    let (interp_obj, mut interp) = weir_side(&bytes, case, Engine::Interp);
    let (jit_obj, mut jit) = weir_side(&bytes, case, Engine::Jit);
    let socket = interp.prog_type() == ProgType::SocketFilter;
    let mut tally = Tally { maps: spec.maps.len(), ..Tally::default() };
    for (i, frame) in frames.iter().enumerate() {
        let (run, out) = match prog.test_run_out(frame, 8192) {
            Ok(r) => r,
            Err(e) if e.raw_os_error() == Some(22) => {
                tally.refused += 1;
                continue;
            }
            Err(e) => panic!("{} {set} packet {i}: test run: {e}", case.file),
        };
        // A socket filter's data_out has the Ethernet header put back, zeroed.
        let theirs = if socket { out.get(14..).unwrap_or_default() } else { &out[..] };
        tally.compared += 1;
        *tally.verdicts.entry(run.retval as i32).or_default() += 1;
        let mut same = true;
        for (name, loaded) in [("interp", &mut interp), ("jit", &mut jit)] {
            match loaded.run(frame) {
                Ok(v) if v.ret as u32 == run.retval && v.packet == theirs => {}
                Ok(v) => {
                    same = false;
                    tally.diffs.push(format!(
                        "{} {set} packet {i} ({} bytes) {name}: weir returned {} ({} bytes out), \
                         the kernel {} ({} bytes out)",
                        case.file,
                        frame.len(),
                        v.ret as i64,
                        v.packet.len(),
                        run.retval as i32,
                        theirs.len()
                    ));
                }
                Err(t) => {
                    same = false;
                    tally.diffs.push(format!("{} {set} packet {i} {name}: trap {t}", case.file));
                }
            }
        }
        tally.agreed += usize::from(same);
    }
    for (name, object) in [("interp", &interp_obj), ("jit", &jit_obj)] {
        for d in compare_maps(&spec, &kmaps, object, &mut tally.entries) {
            tally.diffs.push(format!("{} {set} {name}: {d}", case.file));
        }
    }
    tally
}

#[test]
fn weir_objects_agree_with_the_kernel_test_run() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: weir_objects_agree_with_the_kernel_test_run: {reason}");
        return;
    }
    let sets = [("generated", generated()), ("sample", sample())];
    assert!(sets[0].1.len() >= 500);
    let mut diffs = Vec::new();
    let mut total = 0;
    for case in CASES {
        for (set, frames) in &sets {
            let tally = run_case(case, set, frames);
            let preloaded = if case.maps_in.is_some() { " (maps preloaded)" } else { "" };
            println!(
                "{}{preloaded} on {set}: {} packets compared, {} agreed (return value and packet, \
                 interpreter and JIT), {} refused by the kernel's test run; kernel verdicts \
                 {:?}; {} map entries compared",
                case.file,
                tally.compared,
                tally.agreed,
                tally.refused,
                tally.verdicts,
                tally.entries
            );
            // An object with maps has entries in them by the end (arrays always, the
            // counter's hash from the first packet, the filled prog array slot).
            assert!(
                tally.maps == 0 || tally.entries > 0,
                "{} {set}: no map entries compared",
                case.file
            );
            // Most frames are well-formed: the kernel ran the program on them.
            assert!(tally.compared * 2 > frames.len(), "{} {set}", case.file);
            total += tally.compared;
            diffs.extend(tally.diffs);
        }
    }
    println!("{total} packets compared in all, {} differences", diffs.len());
    for d in diffs.iter().take(30) {
        println!("{d}");
    }
    assert!(diffs.is_empty(), "{} differences with the kernel", diffs.len());
}
