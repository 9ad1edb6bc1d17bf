//! `weir run --cpus N`: N workers give the verdicts, `-w` output and shared maps of one
//! worker, in record order; a per-CPU array's counters, summed over the workers, count
//! every packet once; the flow hash puts work on more than one worker.

use std::path::Path;

use weir::Object;
use weir_testkit::Scratch;

use crate::common::{repo, weir};

struct Run {
    verdicts: String,
    summary: String,
    written: Vec<u8>,
    maps: String,
}

fn run(dir: &Scratch, object: &str, capture: &str, cpus: usize) -> Run {
    let tag = format!("{}-{cpus}", Path::new(object).file_stem().unwrap().to_str().unwrap());
    let (w, m) = (dir.join(&format!("{tag}.pcap")), dir.join(&format!("{tag}.json")));
    let (w, m) = (w.to_str().unwrap(), m.to_str().unwrap());
    let n = cpus.to_string();
    let common = ["run", object, "-r", capture, "--cpus", &n];
    let out = weir(&[&common[..], &["--verdicts", "-w", w, "--maps-out", m]].concat());
    assert!(out.status.success(), "{common:?}: {}", String::from_utf8_lossy(&out.stderr));
    let summary = weir(&common);
    assert!(summary.status.success());
    Run {
        verdicts: String::from_utf8(out.stdout).unwrap(),
        summary: String::from_utf8(summary.stdout).unwrap(),
        written: std::fs::read(w).unwrap(),
        maps: std::fs::read_to_string(m).unwrap(),
    }
}

/// Every entry of map `name` after `--maps-in` of `json` into an object for `cpus`
/// workers: (key, value bytes of every CPU).
fn entries(object: &str, cpus: usize, json: &str, name: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let o = Object::open_with_cpus(&std::fs::read(object).unwrap(), cpus).unwrap();
    o.load_maps_json(json).unwrap();
    let map = o.maps().iter().find(|m| m.spec().name == name).unwrap();
    let mut out = Vec::new();
    let mut key: Option<Vec<u8>> = None;
    while let Ok(next) = map.get_next_key(key.as_deref()) {
        out.push((next.clone(), map.lookup_all(&next).unwrap()));
        key = Some(next);
    }
    out.sort();
    out
}

fn words(bytes: &[u8]) -> Vec<u64> {
    bytes.chunks(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).collect()
}

/// The first differing line of two outputs (the whole outputs are thousands of lines).
fn first_difference(a: &str, b: &str) -> Option<(usize, String, String)> {
    let (mut la, mut lb) = (a.lines(), b.lines());
    for i in 0.. {
        match (la.next(), lb.next()) {
            (None, None) => return None,
            (x, y) if x == y => continue,
            (x, y) => return Some((i, x.unwrap_or("<end>").into(), y.unwrap_or("<end>").into())),
        }
    }
    None
}

#[test]
fn workers_agree_with_one_and_per_cpu_counters_sum_to_the_packets() {
    let dir = Scratch::new("run-cpus");
    let generated = dir.join("generated.pcap");
    let packets: Vec<_> =
        weir_testkit::corpus(0xc905, 3000).into_iter().filter(|p| p.data.len() >= 14).collect();
    weir_testkit::write_pcap(&generated, 1, &packets).unwrap();
    let sample = repo("testdata/captures/sample.pcap");
    let ringbuf = repo("testdata/bpf/ringbuf.o");
    let captures = [(sample.as_str(), 200usize), (generated.to_str().unwrap(), packets.len())];
    // Verdicts, `-w` and shared maps: programs whose verdicts depend on the packet alone
    // (or on shared counters that only add up) give the one worker's, in record order.
    for name in ["xdp_counter.o", "tc_fields.o", "socket_filter.o", "tc_knob.o", "lpm_ringbuf.o"] {
        let object = repo(&format!("testdata/bpf/{name}"));
        for (capture, count) in captures {
            let one = run(&dir, &object, capture, 1);
            assert_eq!(one.verdicts.lines().count(), count, "{name}");
            for cpus in [2, 4] {
                let many = run(&dir, &object, capture, cpus);
                let diff = first_difference(&one.verdicts, &many.verdicts);
                assert!(diff.is_none(), "{name} --cpus {cpus}: verdict lines {diff:?}");
                assert_eq!(many.summary, one.summary, "{name} --cpus {cpus}: summary");
                assert!(many.written == one.written, "{name} --cpus {cpus}: -w output differs");
            }
        }
    }
    // A shared hash counts the same with 4 workers once every key exists. xdp_counter.o
    // inserts a missing key with `BPF_NOEXIST` and does not retry when that fails, so two
    // workers meeting a new protocol at once lose one count, as two of the kernel's CPUs
    // would; the map is seeded with every key at 0 to compare only the atomic adds.
    let counter = repo("testdata/bpf/xdp_counter.o");
    let zeros: Vec<String> = (0..=255u8)
        .map(|k| {
            let key = format!(r#"["0x{k:02x}","0x00","0x00","0x00"]"#);
            format!(
                r#"{{"key":{key},"value":{}}}"#,
                r#"["0x00","0x00","0x00","0x00","0x00","0x00","0x00","0x00"]"#
            )
        })
        .collect();
    let seed = dir.join("seed.json");
    std::fs::write(&seed, format!(r#"{{"proto_count":[{}]}}"#, zeros.join(","))).unwrap();
    let seeded = |cpus: usize, engine: &str| {
        let out = dir.join(&format!("seeded-{cpus}-{engine}.json"));
        let n = cpus.to_string();
        let args =
            ["run", &counter, "-r", captures[1].0, "--engine", engine, "--cpus", &n, "--maps-in"];
        let run = weir(
            &[&args[..], &[seed.to_str().unwrap(), "--maps-out"], &[out.to_str().unwrap()]]
                .concat(),
        );
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        entries(&counter, cpus, &std::fs::read_to_string(out).unwrap(), "proto_count")
    };
    let one = seeded(1, "interp");
    let total: u64 = one.iter().map(|(_, v)| words(v)[0]).sum();
    assert_eq!(total, packets.len() as u64, "one worker counts every packet");
    for engine in ["interp", "jit"] {
        for _ in 0..3 {
            let four = seeded(4, engine);
            assert_eq!(one, four, "a shared hash counts the same with 4 workers on {engine}");
        }
    }
    // ringbuf.o counts submits, discards and failed reservations in a per-CPU array. Per
    // key, the workers' values sum to the one worker's, and over the keys to the packets.
    // Its verdicts are compared on the sample only: on the large capture its shared ring
    // fills, and which packet then finds it full depends on how the workers interleave (as
    // on the kernel's CPUs).
    for (capture, count) in captures {
        let one = run(&dir, &ringbuf, capture, 1);
        for cpus in [2, 4] {
            let many = run(&dir, &ringbuf, capture, cpus);
            if count == 200 {
                let diff = first_difference(&one.verdicts, &many.verdicts);
                assert!(diff.is_none(), "ringbuf.o --cpus {cpus}: verdict lines {diff:?}");
                assert!(many.written == one.written, "ringbuf.o --cpus {cpus}: -w differs");
            }
            let a = entries(&ringbuf, 1, &one.maps, "counts");
            let b = entries(&ringbuf, cpus, &many.maps, "counts");
            assert_eq!(a.len(), b.len());
            let mut total = 0;
            let mut busy_cpus = vec![false; cpus];
            for ((ka, va), (kb, vb)) in a.iter().zip(&b) {
                assert_eq!(ka, kb);
                let per_cpu = words(vb);
                assert_eq!(per_cpu.len(), cpus);
                for (c, v) in per_cpu.iter().enumerate() {
                    busy_cpus[c] |= *v > 0;
                }
                if count == 200 {
                    assert_eq!(per_cpu.iter().sum::<u64>(), words(va)[0], "key {ka:?}");
                }
                total += per_cpu.iter().sum::<u64>();
            }
            assert_eq!(total, count as u64, "--cpus {cpus}: the counters sum to the packets");
            let busy = busy_cpus.iter().filter(|b| **b).count();
            assert!(busy == cpus, "--cpus {cpus}: only {busy} worker(s) saw packets");
        }
    }
}
