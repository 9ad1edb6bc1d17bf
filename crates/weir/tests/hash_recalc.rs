//! `bpf_get_hash_recalc` (helper 34, tc programs): weir's flow hash has the kernel's shape,
//! not its values (the kernel's is siphash with a key drawn at boot). A tc program calls
//! the helper and returns the hash when `skb->hash` holds it afterwards (0 otherwise).
//! weir, on both engines: never 0, stored in `skb->hash`, both directions of a TCP/UDP
//! flow alike, payload and MAC addresses not counted. As root, the kernel's test run of the
//! same program must show the same relations (equal where weir's are equal, different
//! where weir's differ), which is what weir's choice of keys claims.

use weir::{Engine, Object};
use weir_elf::write::{write_program, ObjectOptions};
use weir_program::{ProgType, Program};
use weir_sys::kernel;

fn program() -> Program {
    let insns = weir_isa::asm::assemble(
        "mov r6, r1
         call 34
         mov r7, r0
         ldxw r1, [r6+68]
         jne r1, r7, +2
         mov r0, r7
         exit
         mov r0, 0
         exit",
    )
    .unwrap();
    Program::from_insns(insns).with_prog_type(ProgType::SchedCls)
}

fn frame(proto: u8, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload: u8) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 20 + 8];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, payload]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    let n = f.len();
    f[16..18].copy_from_slice(&((n - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = proto;
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&dst);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    if proto == 6 {
        f[46] = 0x50;
    }
    if proto == 17 {
        f[38..40].copy_from_slice(&((n - 34) as u16).to_be_bytes());
    }
    f[54..].fill(payload);
    f
}

/// (frame, its reply, the same flow with another payload, another flow).
fn cases() -> Vec<[Vec<u8>; 4]> {
    let mut out = Vec::new();
    for (i, proto) in [6u8, 17, 6, 17, 6, 17].into_iter().enumerate() {
        let i = i as u8;
        let (a, b) = ([10, 0, i, 1], [192, 168, 1, i + 2]);
        let (sp, dp) = (1000 + u16::from(i), 80 + u16::from(i));
        out.push([
            frame(proto, a, b, sp, dp, 1),
            frame(proto, b, a, dp, sp, 2),
            frame(proto, a, b, sp, dp, 3),
            frame(proto, a, b, sp + 1, dp, 1),
        ]);
    }
    out
}

fn relations(hashes: &[u32; 4]) -> [bool; 3] {
    [hashes[0] == hashes[1], hashes[0] == hashes[2], hashes[0] == hashes[3]]
}

#[test]
fn get_hash_recalc_has_the_kernels_shape() {
    let code = program();
    let bytes = write_program(&code, &ObjectOptions::new("hash")).unwrap();
    let object = Object::open(&bytes).unwrap();
    let kernel_prog = match kernel::available() {
        Ok(()) => Some(kernel::load(kernel::ProgType::SchedCls, &code.to_bytes()).unwrap()),
        Err(reason) => {
            println!("SKIPPED: get_hash_recalc_has_the_kernels_shape (kernel part): {reason}");
            None
        }
    };
    for engine in [Engine::Interp, Engine::Jit] {
        let mut loaded = object.load(0, Some(engine), 0).unwrap();
        for case in cases() {
            let weir: Vec<u32> = case.iter().map(|f| loaded.run(f).unwrap().ret as u32).collect();
            let weir: [u32; 4] = weir.try_into().unwrap();
            assert!(weir.iter().all(|&h| h != 0), "{engine}: {weir:?}");
            assert_eq!(relations(&weir), [true, true, false], "{engine}: {weir:?}");
            if let Some(k) = &kernel_prog {
                let theirs: Vec<u32> =
                    case.iter().map(|f| k.test_run(f, 1).unwrap().retval).collect();
                let theirs: [u32; 4] = theirs.try_into().unwrap();
                assert!(theirs.iter().all(|&h| h != 0), "kernel: {theirs:?}");
                assert_eq!(
                    relations(&theirs),
                    relations(&weir),
                    "kernel {theirs:?}, weir {weir:?}"
                );
            }
        }
    }
}
