//! The JIT with the checks the verifier's facts drop, on the objects in `testdata/bpf`
//! (maps, helpers, tail calls, ring buffers, context fields): `Object::load_with(.., true)`
//! on the JIT against the interpreter, over the sample capture and the packet corpus,
//! must agree on every verdict (return value and packet) and on every map afterwards.

use weir::{Engine, Object};

fn repo(path: &str) -> String {
    format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn proven_objects_on_the_jit_agree_with_the_interpreter() {
    let mut packets: Vec<Vec<u8>> = weir_testkit::read_pcap(weir_testkit::sample_capture_path())
        .unwrap()
        .into_iter()
        .map(|p| p.data)
        .collect();
    packets.extend(weir_testkit::corpus(3, 300).into_iter().map(|p| p.data));
    packets.extend(weir_testkit::edge_cases().into_iter().map(|p| p.data));
    let mut compared = 0;
    let mut dropped = 0;
    for name in [
        "calls",
        "legacy_maps",
        "lpm_ringbuf",
        "ringbuf",
        "socket_filter",
        "tail_call",
        "tc_fields",
        "tc_knob",
        "two_funcs",
        "xdp_counter",
    ] {
        let bytes = std::fs::read(repo(&format!("testdata/bpf/{name}.o"))).unwrap();
        let count = Object::open(&bytes).unwrap().programs().len();
        for entry in 0..count {
            let (jit_object, interp_object) =
                (Object::open(&bytes).unwrap(), Object::open(&bytes).unwrap());
            if jit_object.verify(entry, false).is_err() {
                continue;
            }
            let mut jit = jit_object.load_with(entry, Some(Engine::Jit), 0, true).unwrap();
            let mut interp = interp_object.load(entry, Some(Engine::Interp), 0).unwrap();
            let checks = jit.checks().expect("on the JIT");
            dropped += checks.accesses_dropped;
            for (i, packet) in packets.iter().enumerate() {
                let (j, e) = (jit.run(packet), interp.run(packet));
                assert_eq!(
                    j.as_ref().map(|v| (v.ret, &v.packet)),
                    e.as_ref().map(|v| (v.ret, &v.packet)),
                    "{name} program {entry}, packet {i}"
                );
            }
            assert_eq!(jit_object.maps_json(), interp_object.maps_json(), "{name} program {entry}");
            compared += 1;
        }
    }
    eprintln!(
        "{compared} programs compared over {} packets, {dropped} checks dropped",
        packets.len()
    );
    assert!(compared >= 10, "{compared} programs compared");
    assert!(dropped >= 20, "{dropped} checks dropped");
}
