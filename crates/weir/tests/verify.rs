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
                    assert!(proof.facts.insns.iter().any(|f| f.reached));
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
