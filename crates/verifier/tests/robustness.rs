//! Bad input: any byte sequence, decoded and verified as any program type, ends in accept
//! or reject, quickly, never a panic.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use weir_isa::ebpf::decode_bytes;
use weir_program::{MapSpec, MapType, ProgType, Program};
use weir_verifier::{verify, Options};

fn verify_every_way(bytes: &[u8]) {
    let Ok(insns) = decode_bytes(bytes) else { return };
    let mut program = Program::from_insns(insns);
    program.add_map(MapSpec {
        name: "m".into(),
        map_type: MapType::Hash,
        key_size: 4,
        value_size: 8,
        max_entries: 4,
        flags: 0,
    });
    program.add_map(MapSpec {
        name: "r".into(),
        map_type: MapType::RingBuf,
        key_size: 0,
        value_size: 0,
        max_entries: 4096,
        flags: 0,
    });
    let types = [None, Some(ProgType::Xdp), Some(ProgType::SchedCls), Some(ProgType::SocketFilter)];
    for prog_type in types {
        let options =
            Options { prog_type, memory_len: Some(16), budget: 100_000, ..Options::default() };
        let start = Instant::now();
        let _ = verify(&program, &options);
        assert!(start.elapsed() < Duration::from_secs(5), "{:?}: {:?}", prog_type, start.elapsed());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(words in prop::collection::vec(any::<u64>(), 1..64)) {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        verify_every_way(&bytes);
    }

    /// Valid-looking programs: opcodes from the table, fields small.
    #[test]
    fn generated_programs_never_panic(slots in weir_testkit::ebpf_gen::EbpfGen { helper_ids: vec![1, 2, 6, 7, 12, 26, 28, 44, 131, 132, 133], ..Default::default() }.slots()) {
        let bytes = Program::from_insns(slots).to_bytes();
        verify_every_way(&bytes);
    }
}

/// Mutations of the conformance corpus's raw programs: flipped bytes, never a panic.
#[test]
fn mutated_programs_never_panic() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/conformance");
    let mut rng = weir_testkit::SplitMix64::new(11);
    let mut programs = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let Some(asm) =
            text.split("-- asm\n").nth(1).map(|s| s.split("\n-- ").next().unwrap_or(""))
        else {
            continue;
        };
        let Ok((insns, _)) = weir_isa::asm::assemble_suite(asm) else { continue };
        let bytes = Program::from_insns(insns).to_bytes();
        if bytes.is_empty() {
            continue;
        }
        programs += 1;
        for _ in 0..8 {
            let mut mutated = bytes.clone();
            for _ in 0..1 + rng.next_u64() % 3 {
                let at = (rng.next_u64() as usize) % mutated.len();
                mutated[at] ^= 1 << (rng.next_u64() % 8);
            }
            verify_every_way(&mutated);
        }
    }
    assert!(programs > 300, "{programs}");
}
