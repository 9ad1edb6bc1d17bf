//! The case parser refuses malformed files and says on which line, so a typo in the corpus
//! fails loudly instead of turning into a case that checks nothing.

use weir_conformance::parse_case;

fn line_of(text: &str) -> (usize, String) {
    match parse_case("bad", text) {
        Ok(case) => panic!("accepted a malformed case: {case:?}"),
        Err(e) => (e.line, e.to_string()),
    }
}

#[test]
fn unknown_section() {
    // A section the suite's runner does not know (its `-- map`): the file is skipped, as the
    // runner skips it, and the message says why.
    let (line, msg) = line_of("-- asm\nexit\n-- map\nx\n-- result\n0x0\n");
    assert_eq!(line, 3, "{msg}");
    assert!(msg.contains("unknown section"), "{msg}");
    // `-- results` is a result section by the suite's substring rule.
    let case = parse_case("ok", "-- asm\nexit\n-- results\n0x0\n").unwrap();
    assert_eq!(case.expect, weir_conformance::Expect::Result(0));
}

#[test]
fn duplicate_section() {
    let (line, msg) = line_of("-- asm\nexit\n-- result\n0x0\n-- asm\nexit\n");
    assert_eq!(line, 5, "{msg}");
    assert!(msg.contains("twice"), "{msg}");
}

#[test]
fn text_before_first_section() {
    let (line, msg) = line_of("# fine\n\nexit\n-- asm\nexit\n-- result\n0x0\n");
    assert_eq!(line, 3, "{msg}");
}

#[test]
fn bad_mem_byte() {
    let (line, msg) = line_of("-- asm\nexit\n-- mem\naa bb\ncc 1\n-- result\n0x0\n");
    assert_eq!(line, 5, "{msg}");
    assert!(msg.contains("`1`"), "{msg}");
    let (line, _) = line_of("-- asm\nexit\n-- mem\nabc\n-- result\n0x0\n");
    assert_eq!(line, 4);
    let (line, _) = line_of("-- asm\nexit\n-- mem\nzz\n-- result\n0x0\n");
    assert_eq!(line, 4);
}

#[test]
fn bad_raw_word() {
    let (line, msg) = line_of("-- raw\n0x95\n\n0xZZ\n-- result\n0x0\n");
    assert_eq!(line, 4, "{msg}");
    let (line, _) = line_of("-- raw\n0x10000000000000000\n-- result\n0x0\n");
    assert_eq!(line, 2);
}

#[test]
fn bad_result() {
    // Decimal results are the suite's too.
    let case = parse_case("ok", "-- asm\nexit\n-- result\n42\n").unwrap();
    assert_eq!(case.expect, weir_conformance::Expect::Result(42));
    let (line, _) = line_of("-- asm\nexit\n-- result\n0x1 0x2\n");
    assert_eq!(line, 4);
    let (line, _) = line_of("-- asm\nexit\n-- result\n# nothing\n");
    assert_eq!(line, 3);
    let (line, _) = line_of("-- asm\nexit\n-- result\n0x1ffffffffffffffff\n");
    assert_eq!(line, 4);
}

#[test]
fn empty_error_text() {
    let (line, _) = line_of("-- asm\nexit\n-- error\n\n");
    assert_eq!(line, 3);
}

#[test]
fn missing_or_conflicting_sections() {
    let (line, msg) = line_of("-- asm\nexit\n");
    assert_eq!(line, 2, "{msg}");
    assert!(msg.contains("expectation"), "{msg}");
    let (line, msg) = line_of("-- result\n0x0\n");
    assert!(msg.contains("no program"), "{msg} (line {line})");
    // Both programs: `-- raw` wins, as in the suite's runner.
    let case = parse_case("ok", "-- asm\nexit\n-- raw\n0x95\n-- result\n0x0\n").unwrap();
    assert!(matches!(case.source, weir_conformance::Source::Raw(_)), "{:?}", case.source);
    let (line, _) = line_of("-- asm\nexit\n-- result\n0x0\n-- error\nx\n");
    assert_eq!(line, 5);
}

#[test]
fn garbage_never_panics() {
    let samples =
        ["", "--", "-- \n", "\u{0}\u{ff}", "-- asm\n\u{1F600}\n-- result\n0x", "-- mem\n-- mem"];
    for s in samples {
        let _ = parse_case("x", s);
    }
    for len in 0..200 {
        let text: String = (0..len)
            .map(|i| {
                ["-- asm\n", "0x", "#", "\n", "ff ", "-- result\n", "-- error\n"][(i * 7 + len) % 7]
            })
            .collect();
        let _ = parse_case("x", &text);
    }
}
