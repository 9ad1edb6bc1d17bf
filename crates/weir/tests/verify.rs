//! The verifier through the facade: every program of the object corpus (they all load in
//! the kernel) is accepted, and every helper weir runs has the kernel's prototype.

use weir::Object;
use weir_program::abi::kernel_helper;

#[test]
fn every_object_program_is_accepted() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/bpf");
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "o"))
        .collect();
    paths.sort();
    let mut verified = 0;
    for path in paths {
        let object = Object::open(&std::fs::read(&path).unwrap()).unwrap();
        for (entry, p) in object.programs().iter().enumerate() {
            match object.verify(entry, false) {
                Ok(proof) => {
                    verified += 1;
                    // Every access a program makes outside the legacy loads is proven.
                    assert!(proof.facts().insns.iter().any(|f| f.reached));
                    let verified = proof.into_verified(p.program().clone()).unwrap();
                    assert_eq!(verified.assurance(), weir_program::Assurance::Proven);
                }
                Err(e) => panic!("{}: {}: {e}\n{}", path.display(), p.name, e.trace.join("\n")),
            }
        }
    }
    assert!(verified >= 15, "{verified} programs");
}

#[test]
fn every_helper_weir_runs_has_a_prototype() {
    for &(id, name, _) in weir_helpers::SUPPORTED {
        let sig =
            kernel_helper(id).unwrap_or_else(|| panic!("{name} (helper {id}) has no prototype"));
        assert_eq!(sig.name, name, "helper {id}");
    }
}

/// The verifier corpus (`testdata/verifier`, each case's verdict from Linux 6.18): weir
/// accepts nothing the kernel refuses, and at least 95% of what it accepts. Disagreements
/// are listed (`WEIR_VERIFY_SHOW=1` prints every case).
#[test]
fn the_verifier_corpus_agrees_with_the_kernel() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/verifier");
    let cases = weir::listing::corpus(&dir).unwrap();
    let show = std::env::var_os("WEIR_VERIFY_SHOW").is_some();
    let (mut kernel_ok, mut both_ok, mut unsafe_accepted, mut too_strict) =
        (0, 0, Vec::new(), Vec::new());
    for (path, listing) in &cases {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(kernel) = &listing.kernel else { continue };
        let verdict = weir::verify(&listing.program, &weir::VerifyOptions::default());
        if show {
            match &verdict {
                Ok(_) => println!("{name}: accepted (kernel: {})", kernel.accept),
                Err(e) => println!("{name}: {e} (kernel: {} {:?})", kernel.accept, kernel.message),
            }
        }
        match (kernel.accept, &verdict) {
            (true, Ok(_)) => {
                kernel_ok += 1;
                both_ok += 1;
            }
            (true, Err(e)) => {
                kernel_ok += 1;
                too_strict.push(format!("{name}: {e}"));
            }
            (false, Ok(_)) => unsafe_accepted.push(format!("{name}: kernel: {:?}", kernel.message)),
            (false, Err(_)) => {}
        }
    }
    println!(
        "verifier corpus: {} cases; the kernel accepts {kernel_ok}, weir {both_ok} of them",
        cases.len()
    );
    for line in &too_strict {
        println!("weir stricter: {line}");
    }
    assert!(
        unsafe_accepted.is_empty(),
        "weir accepts what the kernel refuses:\n{}",
        unsafe_accepted.join("\n")
    );
    assert!(
        both_ok * 100 >= kernel_ok * 95,
        "weir accepts {both_ok} of {kernel_ok}:\n{}",
        too_strict.join("\n")
    );
}
