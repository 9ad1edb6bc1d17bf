//! `weir match`: per-packet lines, counts and per-handler captures agree with the
//! library's reference dispatch; a bad program is refused with a caret.

use weir::pfmatch::parse;
use weir::{LinkType, NameDb};
use weir_testkit::{read_pcap, write_pcap, Scratch, LINKTYPE_ETHERNET};

use crate::common::weir;

const PROGRAM: &str = "# dispatch\n\
match {\n\
   not ip => forward\n\
   tcp => {\n\
      port 80 or port 443 => web(&tcp[0], tcp[2:2])\n\
      otherwise => tcp_other(&ip[0])\n\
   }\n\
   udp => udp_len(udp[4:2])\n\
}\n";

#[test]
fn counts_lines_and_files_agree_with_the_reference() {
    let dir = Scratch::new("match-counts");
    let prog = dir.join("prog.txt");
    std::fs::write(&prog, PROGRAM).unwrap();
    let cap = dir.join("in.pcap");
    let packets = weir_testkit::corpus(15, 500);
    write_pcap(&cap, LINKTYPE_ETHERNET, &packets).unwrap();
    let (prog, cap) = (prog.display().to_string(), cap.display().to_string());

    let program = parse(PROGRAM, LinkType::Ethernet, &NameDb::system()).unwrap();
    let mut expected = vec![0u64; program.handlers.len()];
    let mut none = 0u64;
    let mut lines = Vec::new();
    for (i, p) in packets.iter().enumerate() {
        let o = program.reference(&p.data, p.wire_len);
        match o.handler {
            Some(h) => {
                expected[h] += 1;
                let name = &program.handlers[h];
                let args: Vec<String> = o.args.iter().map(u32::to_string).collect();
                lines.push(if args.is_empty() {
                    format!("{i} {name}")
                } else {
                    format!("{i} {name}({})", args.join(", "))
                });
            }
            None => {
                none += 1;
                lines.push(format!("{i} -"));
            }
        }
    }
    assert!(none > 0 && expected.iter().all(|&n| n > 0), "{expected:?} {none}");

    // The default engine (native code) and the IR's evaluator, each forced.
    for engine in [None, Some("native"), Some("reference")] {
        let mut argv = vec!["match", prog.as_str(), "-r", cap.as_str()];
        argv.extend(engine.iter().flat_map(|e| ["--engine", e]));
        let o = weir(&argv);
        assert!(o.status.success(), "{engine:?}: {}", String::from_utf8_lossy(&o.stderr));
        let got: Vec<String> =
            String::from_utf8_lossy(&o.stdout).lines().map(String::from).collect();
        assert_eq!(got, lines, "{engine:?}");
    }
    let o = weir(&["match", &prog, "-r", &cap, "--engine", "jit"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not run pfmatch dispatch"));

    let out = dir.join("out");
    let o = weir(&["match", &prog, "-r", &cap, "--out-dir", &out.display().to_string()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    for (name, n) in program.handlers.iter().zip(&expected) {
        assert!(text.contains(&format!("{name} {n}\n")), "{name}: {text}");
        let written = read_pcap(out.join(format!("{name}.pcap"))).unwrap();
        assert_eq!(written.len() as u64, *n, "{name}.pcap");
    }
    assert!(text.contains(&format!("(no handler) {none}\n")), "{text}");

    let o = weir(&["match", &prog, "-r", &cap, "--count"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), text);

    let o = weir(&["match", &prog, "--explain"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success() && text.contains(" = web(M[") && text.contains("try("), "{text}");
    let why = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(why.starts_with("engine: native\n"), "{why}");
    let o = weir(&["match", &prog, "--explain", "--engine", "reference"]);
    let why = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(why.starts_with("engine: reference\n") && why.contains("forced"), "{why}");
}

#[test]
fn a_bad_program_is_refused_with_a_caret() {
    let dir = Scratch::new("match-bad");
    let prog = dir.join("prog.txt");
    std::fs::write(&prog, "match {\n  tcp => a\n  otherwise => b\n  otherwise => c\n}\n").unwrap();
    let o = weir(&["match", &prog.display().to_string(), "--explain"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("line 4: error at column 3: a second `otherwise`"), "{err}");
    assert!(err.contains("  otherwise => c\n    ^^^^^^^^^"), "{err}");
    let o = weir(&["match", "/nonexistent/prog.txt", "--explain"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/prog.txt"));
}

/// `weir compile --match`: the listing names the XDP type and the maps and reads back as a
/// listing (the same instructions the object holds); `-o` writes an XDP object with the
/// counters map; a handler `redirect:` without a slot is refused.
#[test]
fn compile_match_writes_a_listing_and_an_xdp_object() {
    let dir = Scratch::new("match-compile");
    let prog = dir.join("prog.txt");
    std::fs::write(
        &prog,
        "match {\n  arp => pass\n  tcp => drop\n  udp => redirect:3\n  otherwise => count_me\n}\n",
    )
    .unwrap();
    let prog = prog.display().to_string();
    let out = weir(&["compile", "--match", &prog]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("#! type xdp\n"), "{text}");
    assert!(text.contains("#! map pfm_counts percpu_array key=4 value=8 entries=5"), "{text}");
    assert!(text.contains("#! map pfm_devs devmap key=4 value=4 entries=4"), "{text}");
    let listing = weir::listing::parse(&text).unwrap();
    let obj = dir.join("m.o");
    let o = weir(&["compile", "--match", &prog, "-o", obj.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let spec = weir::elf::ObjectSpec::parse(&std::fs::read(&obj).unwrap()).unwrap();
    let p = &spec.programs[0];
    assert_eq!(p.program.prog_type(), Some(weir::ProgType::Xdp));
    assert_eq!(p.program.insns(), listing.program.insns());
    let names: Vec<&str> = p.program.maps().iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["pfm_counts", "pfm_devs"]);

    std::fs::write(dir.join("bad.txt"), "match {\n  tcp => redirect:\n}\n").unwrap();
    let bad = weir(&["compile", "--match", dir.join("bad.txt").to_str().unwrap()]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("redirect:"));
    // --match is XDP only.
    let tc = weir(&["compile", "--match", &prog, "--target", "tc"]);
    assert!(!tc.status.success());
}
