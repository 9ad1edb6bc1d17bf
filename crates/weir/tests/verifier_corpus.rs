//! The verifier corpus (`testdata/verifier/*.s`, [`weir::listing`]) against the Linux
//! verifier: every case is loaded with its program type and maps, and the kernel's verdict
//! (and, for a refusal, a substring of the last error line of its log, or of the two lines
//! before it when the log ends with a state dump) must be the one its
//! `#! kernel` header records. Every header was written from an actual load on Linux 6.18.
//!
//! The kernel test needs root (it prints `SKIPPED:` elsewhere); the shape checks (every file
//! parses, names match headers, enough cases and rules) run everywhere.
//!
//! `WEIR_VCORPUS_SHOW=1` prints every case's verdict and the kernel's reason, for writing
//! new cases.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use weir::isa::ebpf::Op;
use weir::listing::{corpus, Listing};
use weir_sys::kernel::{self, Kernel};
use weir_testkit::kernel_object;

/// The least number of cases and of distinct rules the corpus must hold.
const MIN_CASES: usize = 150;
const MIN_RULES: usize = 40;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/verifier")
}

fn cases() -> Vec<(PathBuf, Listing)> {
    corpus(&dir()).unwrap_or_else(|e| panic!("{e}"))
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

#[test]
fn every_case_parses_and_names_its_rule_and_verdict() {
    let cases = cases();
    let mut problems = Vec::new();
    let mut rules = BTreeMap::<String, (usize, usize)>::new();
    for (path, l) in &cases {
        let name = file_name(path);
        let (Some(rule), Some(kernel), Some(_)) = (&l.rule, &l.kernel, l.program.prog_type())
        else {
            problems.push(format!("{name}: needs `#! type`, `#! kernel` and `#! rule`"));
            continue;
        };
        // `<rule>-<nn>-<ok|bad>.s`, the rule's first word.
        let rule_name = rule.split_whitespace().next().unwrap_or_default();
        let stem = name.trim_end_matches(".s");
        let mut parts = stem.rsplitn(3, '-');
        let (verdict, nn, prefix) = (parts.next(), parts.next(), parts.next());
        let want = if kernel.accept { "ok" } else { "bad" };
        if verdict != Some(want)
            || prefix != Some(rule_name)
            || !nn.is_some_and(|n| n.len() == 2 && n.bytes().all(|b| b.is_ascii_digit()))
        {
            problems.push(format!("{name}: should be named {rule_name}-NN-{want}.s"));
        }
        // Cases the kernel accepts are the ones weir must also run: only helpers it has.
        if kernel.accept {
            for insn in l.program.insns().iter().filter(|i| i.op == Op::Call) {
                if !weir_helpers::SUPPORTED.iter().any(|&(id, _, _)| i64::from(id) == insn.imm) {
                    problems.push(format!("{name}: helper {} is not one weir runs", insn.imm));
                }
            }
        }
        let e = rules.entry(rule_name.to_string()).or_default();
        if kernel.accept {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(cases.len() >= MIN_CASES, "{} cases, want at least {MIN_CASES}", cases.len());
    assert!(rules.len() >= MIN_RULES, "{} rules, want at least {MIN_RULES}", rules.len());
    let accepted: usize = rules.values().map(|r| r.0).sum();
    let rejected = cases.len() - accepted;
    // Roughly half and half: neither side below a third.
    assert!(accepted * 3 >= cases.len() && rejected * 3 >= cases.len(), "{accepted}/{rejected}");
}

/// The log's last three lines that are not statistics: the error line, and the lines
/// before it when the kernel ends with a state dump (`infinite loop detected at insn 1`
/// is followed by `cur state:` and `old state:` lines).
fn last_lines(log: &str) -> Vec<&str> {
    let stat = |l: &str| {
        l.is_empty()
            || l.starts_with("processed ")
            || l.starts_with("verification time")
            || l.starts_with("stack depth")
    };
    log.lines().map(str::trim).filter(|l| !stat(l)).rev().take(3).collect()
}

#[test]
fn the_kernel_gives_every_case_its_recorded_verdict() {
    if let Err(reason) = kernel::available() {
        println!("SKIPPED: the_kernel_gives_every_case_its_recorded_verdict: {reason}");
        return;
    }
    let show = std::env::var_os("WEIR_VCORPUS_SHOW").is_some();
    let cases = cases();
    let mut disagreements = Vec::new();
    let mut by_rule = BTreeMap::<String, (usize, usize)>::new();
    for (path, l) in &cases {
        let name = file_name(path);
        let (Some(prog_type), Some(want)) = (l.program.prog_type(), &l.kernel) else {
            disagreements.push(format!("{name}: no `#! type` or `#! kernel`"));
            continue;
        };
        let maps = match kernel_object::create_maps(l.program.maps().iter().map(|m| (m, None))) {
            Ok(maps) => maps,
            Err(e) => {
                disagreements.push(format!("{name}: creating its maps: {e}"));
                continue;
            }
        };
        let code = match kernel_object::bind(&l.program, &maps) {
            Ok(code) => code,
            Err(e) => {
                disagreements.push(format!("{name}: binding its maps: {e}"));
                continue;
            }
        };
        let got = Kernel::new().load(prog_type, &code);
        let (reason, last) = match &got {
            Ok(_) => (String::new(), Vec::new()),
            Err(e) => (e.reason(), last_lines(&e.log)),
        };
        if show {
            let verdict = if got.is_ok() { "accept" } else { "reject" };
            println!("{name}: {verdict} {reason:?}");
        }
        let agrees = match (&got, want.accept, &want.message) {
            (Ok(_), true, _) => true,
            (Err(_), false, None) => true,
            (Err(_), false, Some(m)) => {
                reason.contains(m.as_str()) || last.iter().any(|l| l.contains(m.as_str()))
            }
            _ => false,
        };
        if !agrees {
            let said = match &got {
                Ok(_) => "accepted it".to_string(),
                Err(e) => format!("refused it: {e}"),
            };
            disagreements.push(format!("{name}: header says {want:?}; the kernel {said}"));
        }
        let rule = l.rule.clone().unwrap_or_default();
        let e = by_rule.entry(rule.split_whitespace().next().unwrap_or("").into()).or_default();
        if got.is_ok() {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
    }
    let accepted: usize = by_rule.values().map(|r| r.0).sum();
    println!(
        "verifier corpus: {} cases, {accepted} accepted, {} rejected by the kernel, {} rules",
        cases.len(),
        cases.len() - accepted,
        by_rule.len()
    );
    for (rule, (ok, bad)) in &by_rule {
        println!("  {rule:<28} {ok:>3} accepted {bad:>3} rejected");
    }
    assert!(
        disagreements.is_empty(),
        "{} case(s) disagree with the kernel:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}

/// A listing is the program `weir-elf` makes of an object: for every program of the
/// committed objects (`testdata/bpf`), its disassembly with its type and maps as directives
/// parses back to the same `Program` (instructions, type, map specs, relocations).
#[test]
fn listings_of_the_objects_programs_are_the_same_programs() {
    let objects = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/bpf");
    let mut checked = 0;
    let mut relocated = 0;
    for entry in std::fs::read_dir(&objects).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "o") {
            continue;
        }
        let spec = weir::elf::ObjectSpec::parse(&std::fs::read(&path).unwrap()).unwrap();
        for p in &spec.programs {
            let mut text = String::new();
            if let Some(t) = p.program.prog_type() {
                text.push_str(&format!("#! type {}\n", t.name()));
            }
            for m in p.program.maps() {
                let ty = m.map_type.name().expect("a named map type");
                let (k, v, n, f) = (m.key_size, m.value_size, m.max_entries, m.flags);
                text.push_str(&format!(
                    "#! map {} {ty} key={k} value={v} entries={n} flags={f}\n",
                    m.name
                ));
            }
            text.push_str(&weir::isa::asm::disassemble(p.program.insns()));
            let listing = weir::listing::parse(&text)
                .unwrap_or_else(|e| panic!("{} {}: {e}\n{text}", path.display(), p.name));
            assert_eq!(listing.program, p.program, "{} {}", path.display(), p.name);
            checked += 1;
            relocated += p.program.relocations().len();
        }
    }
    assert!(checked >= 10 && relocated >= 10, "{checked} programs, {relocated} relocations");
    println!("{checked} programs of testdata/bpf, {relocated} relocations: listings agree");
}
