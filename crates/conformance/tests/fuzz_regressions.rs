//! Replays every saved fuzz input (`fuzz/regressions/<target>/*`) through the same checks
//! the fuzz targets run. A crasher found by `cargo fuzz` is copied there and stays fixed.
//! The seeds below make sure each check runs on something even before any crasher exists.

use std::path::PathBuf;
use weir_conformance::fuzz_checks::TARGETS;

fn regressions_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions")
}

#[test]
fn saved_fuzz_inputs_still_pass() {
    let mut replayed = 0;
    for (name, check) in TARGETS {
        let dir = regressions_dir().join(name);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e} (the folder must exist)", dir.display()));
        for entry in entries {
            let path = entry.expect("readable directory entry").path();
            if path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
                continue;
            }
            let data = std::fs::read(&path).expect("readable regression file");
            check(&data);
            replayed += 1;
        }
    }
    println!("fuzz regressions: {replayed} inputs replayed");
}

#[test]
fn verify_seeds_are_accepted_and_refused_as_named() {
    use weir_conformance::fuzz_checks::verify_runs;
    let dir = regressions_dir().join("verify");
    for (name, accepted) in [
        ("seed-xdp-packet-load", true),
        ("seed-untyped-loop", true),
        ("seed-refused", false),
        // 428,000 iterations: past the 100,000 instructions the check lets it process.
        ("slow-loop-to-the-budget", false),
    ] {
        let data = std::fs::read(dir.join(name)).expect("the seed exists");
        assert_eq!(verify_runs(&data), accepted, "{name}");
    }
}

#[test]
fn checks_accept_ordinary_inputs() {
    // A real program through each check: `mov32 r0, 42; exit`.
    let code = [0xb4, 0, 0, 0, 42, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
    weir_conformance::fuzz_checks::decode(&code);
    weir_conformance::fuzz_checks::assemble(b"mov32 %r0, 42\nexit\n");
    weir_conformance::fuzz_checks::assemble(b"mov32 %r11, 42\n");
    let mut with_mem = vec![2, 0xaa, 0xbb];
    with_mem.extend_from_slice(&code);
    weir_conformance::fuzz_checks::interp(&with_mem);
    let mut with_options = vec![2, 1, 0xaa, 0xbb];
    with_options.extend_from_slice(&code);
    weir_conformance::fuzz_checks::jit_diff(&with_options);
    // A whole capture, a filter, and a classic program (`tcpdump -ddd 'ip'`).
    let sample = regressions_dir().join("../../testdata/captures/sample.pcap");
    weir_conformance::fuzz_checks::capture(&std::fs::read(sample).expect("sample.pcap"));
    weir_conformance::fuzz_checks::pflang(b"tcp or udp port 53");
    weir_conformance::fuzz_checks::cbpf(b"4\n40 0 0 12\n21 0 1 2048\n6 0 0 262144\n6 0 0 0\n");
}
