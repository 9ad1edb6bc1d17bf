//! Runs every case of `testdata/conformance` on every engine and lists all failures at once,
//! so one run shows the whole picture. An empty or tiny corpus is itself a failure: a runner
//! that matches nothing must not pass.

use weir_conformance::{check_case, corpus_dir, engines, load_corpus, Expect};

/// The corpus is meant to cover every opcode and its edge cases; far fewer cases means files
/// went missing.
const MIN_CASES: usize = 300;

#[test]
fn every_case_on_every_engine() {
    let dir = corpus_dir();
    let cases = load_corpus(&dir).unwrap_or_else(|e| panic!("cannot load the corpus: {e}"));
    assert!(!cases.is_empty(), "no *.data file matched in {}", dir.display());
    assert!(
        cases.len() >= MIN_CASES,
        "only {} cases in {}, expected at least {MIN_CASES}",
        cases.len(),
        dir.display()
    );

    let mut failures = Vec::new();
    for engine in engines() {
        let mut ran = 0usize;
        let mut errors = 0usize;
        for case in &cases {
            ran += 1;
            if matches!(case.expect, Expect::Error(_)) {
                errors += 1;
            }
            if let Err(failure) = check_case(engine, case) {
                failures.push(failure);
            }
        }
        println!("conformance: {}: {ran} cases ran ({errors} expect an error)", engine.name());
        assert!(ran >= MIN_CASES, "{}: only {ran} cases ran", engine.name());
    }
    if !failures.is_empty() {
        let list: Vec<String> = failures.iter().map(|f| format!("  {f}")).collect();
        panic!("{} conformance failures:\n{}", failures.len(), list.join("\n"));
    }
}

#[test]
fn case_names_are_grouped_by_prefix() {
    let cases =
        load_corpus(&corpus_dir()).unwrap_or_else(|e| panic!("cannot load the corpus: {e}"));
    for case in &cases {
        let prefix = case.name.split('-').next().unwrap_or("");
        assert!(
            case.name.contains('-')
                && case
                    .name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{}: names are lowercase words joined by '-', starting with a group prefix ({prefix})",
            case.name
        );
    }
}

#[test]
fn every_opcode_is_covered() {
    use std::collections::BTreeSet;
    use weir_isa::ebpf::{Insn, OPCODES};
    let cases =
        load_corpus(&corpus_dir()).unwrap_or_else(|e| panic!("cannot load the corpus: {e}"));
    let mut seen = BTreeSet::new();
    for case in &cases {
        // Programs that decode, whether or not they validate or run to the end.
        let insns: Vec<Insn> = match &case.source {
            weir_conformance::Source::Asm(text) => {
                weir_isa::asm::assemble(text).unwrap_or_default()
            }
            weir_conformance::Source::Raw(words) => {
                let slots: Vec<_> =
                    words.iter().map(|w| weir_isa::ebpf::RawInsn::from_u64(*w)).collect();
                weir_isa::ebpf::decode(&slots).unwrap_or_default()
            }
        };
        seen.extend(insns.iter().map(|i| i.op));
    }
    let missing: Vec<String> =
        OPCODES.iter().filter(|s| !seen.contains(&s.op)).map(|s| format!("{:?}", s.op)).collect();
    assert!(missing.is_empty(), "opcodes no case exercises: {}", missing.join(", "));
}
