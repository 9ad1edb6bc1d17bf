//! Each rule: a program the kernel accepts and weir accepts, and its broken twin that both
//! refuse, with the rule and (a piece of) the kernel's wording.

use weir_isa::asm::assemble;
use weir_program::{MapSpec, MapType, ProgType, Program};
use weir_verifier::{verify, Options, Rule};

fn program(src: &str, prog_type: Option<ProgType>) -> Program {
    let insns = assemble(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let p = Program::from_insns(insns);
    match prog_type {
        Some(t) => p.with_prog_type(t),
        None => p,
    }
}

fn with_map(mut p: Program, map_type: MapType, key: u32, value: u32) -> Program {
    p.add_map(MapSpec {
        name: "m".into(),
        map_type,
        key_size: key,
        value_size: value,
        max_entries: 4,
        flags: 0,
    });
    p
}

fn accept(p: &Program) {
    if let Err(e) = verify(p, &Options::default()) {
        panic!("refused: {e}\n{}", e.trace.join("\n"));
    }
}

fn refuse(p: &Program, rule: Rule, wording: &str) -> usize {
    refuse_with(p, &Options::default(), rule, wording)
}

fn unprivileged() -> Options {
    Options { unprivileged: true, ..Options::default() }
}

fn refuse_with(p: &Program, options: &Options, rule: Rule, wording: &str) -> usize {
    match verify(p, options) {
        Ok(proof) => panic!("accepted: {}", proof.summary()),
        Err(e) => {
            assert_eq!(e.rule, rule, "{e}");
            assert!(e.message.contains(wording), "`{}` does not say `{wording}`", e.message);
            // Found by the walk: the trace shows the path.
            if !matches!(rule, Rule::Structure | Rule::Unreachable) {
                assert!(!e.trace.is_empty());
            }
            e.pc
        }
    }
}

const XDP: Option<ProgType> = Some(ProgType::Xdp);
const TC: Option<ProgType> = Some(ProgType::SchedCls);
const SOCKET: Option<ProgType> = Some(ProgType::SocketFilter);

/// data, data_end in r2, r3; r4 = data + n.
fn xdp_bounds(n: u32, cmp: &str, load: &str) -> String {
    format!(
        "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 2\nmov %r4, %r2\nadd %r4, {n}\n{cmp}\n{load}\nexit"
    )
}

#[test]
fn packet_access_needs_a_proven_range() {
    accept(&program(&xdp_bounds(14, "jgt %r4, %r3, +1", "ldxb %r0, [%r2+13]"), XDP));
    accept(&program(&xdp_bounds(14, "jle %r4, %r3, +1\nja +1", "ldxh %r0, [%r2+12]"), XDP));
    // The reversed comparison proves the same.
    accept(&program(&xdp_bounds(8, "jlt %r3, %r4, +1", "ldxdw %r0, [%r2+0]"), XDP));
    let pc = refuse(
        &program(&xdp_bounds(14, "jgt %r4, %r3, +1", "ldxb %r0, [%r2+14]"), XDP),
        Rule::OutOfBounds,
        "invalid access to packet",
    );
    assert_eq!(pc, 6);
    // On the taken edge nothing is proven.
    refuse(
        &program(&xdp_bounds(14, "jgt %r4, %r3, +1\nexit", "ldxb %r0, [%r2+0]"), XDP),
        Rule::OutOfBounds,
        "outside of the packet",
    );
}

#[test]
fn variable_packet_offsets_get_their_own_range() {
    // r5 = data + (byte & 15): proven only through a comparison of r5 itself.
    let ok = "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 0\nmov %r4, %r2\nadd %r4, 1\n\
              jgt %r4, %r3, +7\nldxb %r5, [%r2+0]\nand %r5, 15\nadd %r5, %r2\nmov %r6, %r5\n\
              add %r6, 2\njgt %r6, %r3, +1\nldxh %r0, [%r5+0]\nexit";
    accept(&program(ok, XDP));
    let bad = ok.replace("ldxh %r0, [%r5+0]", "ldxh %r0, [%r5+1]");
    refuse(&program(&bad, XDP), Rule::OutOfBounds, "invalid access to packet");
}

#[test]
fn scalars_are_not_pointers() {
    refuse(
        &program("mov %r2, 0\nldxw %r0, [%r2+0]\nexit", XDP),
        Rule::InvalidMemAccess,
        "R2 invalid mem access 'scalar'",
    );
    refuse(
        &program("ldxw %r3, [%r1+4]\nldxb %r0, [%r3+0]\nexit", XDP),
        Rule::InvalidMemAccess,
        "'pkt_end'",
    );
}

#[test]
fn registers_must_be_written_before_they_are_read() {
    accept(&program("mov %r0, 0\nexit", XDP));
    refuse(&program("exit", XDP), Rule::UninitRegister, "R0 !read_ok");
    refuse(&program("mov %r0, %r5\nexit", XDP), Rule::UninitRegister, "R5 !read_ok");
    // r1-r5 do not survive a helper call.
    refuse(
        &program("mov %r6, %r1\ncall 7\nmov %r0, %r1\nexit", XDP),
        Rule::UninitRegister,
        "R1 !read_ok",
    );
    accept(&program("mov %r6, %r1\ncall 7\nmov %r0, %r6\nmov %r0, 0\nexit", XDP));
}

#[test]
fn stack_reads_need_writes() {
    accept(&program("stdw [%r10-8], 1\nldxdw %r0, [%r10-8]\nexit", XDP));
    accept(&program("stb [%r10-1], 0\nldxb %r0, [%r10-1]\nexit", XDP));
    // Privileged, stack never written reads as unknown; unprivileged, it is refused.
    let half = program("stw [%r10-8], 1\nldxdw %r0, [%r10-8]\nexit", XDP);
    accept(&half);
    refuse_with(&half, &unprivileged(), Rule::UninitStack, "invalid read from stack");
    refuse(&program("stdw [%r10-520], 1\nmov %r0, 0\nexit", XDP), Rule::OutOfBounds, "stack");
    refuse(&program("stdw [%r10+0], 1\nmov %r0, 0\nexit", XDP), Rule::OutOfBounds, "stack");
    // The stack is aligned strictly.
    let misaligned = program("stdw [%r10-12], 1\nmov %r0, 0\nexit", XDP);
    refuse(&misaligned, Rule::Misaligned, "misaligned stack access");
    // A pointer is spilled whole or not at all.
    let narrow = program("stxw [%r10-8], %r1\nmov %r0, 0\nexit", XDP);
    refuse(&narrow, Rule::InvalidMemAccess, "invalid size of register spill");
}

#[test]
fn spills_keep_pointers_and_partial_overwrites_lose_them() {
    let spill = "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r4, %r2\nadd %r4, 4\nmov %r0, 0\n\
                 jgt %r4, %r3, +4\nstxdw [%r10-8], %r2\nldxdw %r5, [%r10-8]\nldxw %r0, [%r5+0]\nexit\nexit";
    accept(&program(spill, XDP));
    let clobbered = spill
        .replace("ldxdw %r5, [%r10-8]", "stb [%r10-8], 0\nldxdw %r5, [%r10-8]")
        .replace("jgt %r4, %r3, +4", "jgt %r4, %r3, +5");
    refuse(&program(&clobbered, XDP), Rule::InvalidMemAccess, "invalid mem access 'scalar'");
}

#[test]
fn variable_stack_offsets_stay_in_the_frame() {
    let p = "stdw [%r10-8], 0\ncall 7\nand %r0, 7\nmov %r1, %r10\nadd %r1, -8\nadd %r1, %r0\n\
             ldxb %r0, [%r1+0]\nexit";
    accept(&program(p, XDP));
    refuse_with(&program(p, XDP), &unprivileged(), Rule::VariableOffset, "variable stack access");
    let past = p.replace("and %r0, 7", "and %r0, 15");
    refuse(&program(&past, XDP), Rule::OutOfBounds, "invalid variable-offset read from stack");
    // Subtracting from a stack pointer is refused outright.
    let sub = program("mov %r1, %r10\nsub %r1, 8\nmov %r0, 0\nexit", XDP);
    refuse(&sub, Rule::PointerArithmetic, "subtraction from stack pointer");
}

#[test]
fn context_fields_follow_the_layout() {
    accept(&program("ldxw %r0, [%r1+12]\nexit", XDP)); // ingress_ifindex
    accept(&program("ldxw %r0, [%r1+8]\nstxw [%r1+8], %r0\nexit", TC)); // mark (writable in tc)
    let bad = program("ldxw %r0, [%r1+24]\nexit", XDP);
    refuse(&bad, Rule::ContextAccess, "invalid bpf_context access off=24 size=4");
    let ro = program("mov %r0, 1\nstxw [%r1+8], %r0\nexit", SOCKET);
    refuse(&ro, Rule::ContextAccess, "invalid bpf_context access");
    accept(&program("stw [%r1+8], 1\nmov %r0, 0\nexit", TC));
    // Writes are whole fields, except in cb.
    let narrow = program("mov %r2, 1\nstxb [%r1+8], %r2\nmov %r0, 0\nexit", TC);
    refuse(&narrow, Rule::ContextAccess, "invalid bpf_context access off=8 size=1");
    accept(&program("mov %r2, 1\nstxb [%r1+49], %r2\nmov %r0, 0\nexit", TC));
    // XDP reads whole fields; __sk_buff narrower ones too.
    let narrow = program("ldxb %r0, [%r1+12]\nexit", XDP);
    refuse(&narrow, Rule::ContextAccess, "invalid bpf_context access off=12 size=1");
    accept(&program("ldxhsx %r0, [%r1+16]\nexit", TC));
    // tc_classid is tc's, not a socket filter's; nor is direct packet access.
    refuse(&program("ldxw %r0, [%r1+72]\nexit", SOCKET), Rule::ContextAccess, "bpf_context");
    refuse(&program("ldxw %r0, [%r1+76]\nexit", SOCKET), Rule::ContextAccess, "bpf_context");
    let moved = program("add %r1, 4\nldxw %r0, [%r1+0]\nexit", XDP);
    refuse(&moved, Rule::ContextAccess, "dereference of modified ctx ptr");
}

#[test]
fn pointer_arithmetic_follows_the_kernel() {
    refuse(
        &program("ldxw %r3, [%r1+4]\nadd %r3, 1\nmov %r0, 0\nexit", XDP),
        Rule::PointerArithmetic,
        "pointer arithmetic on pkt_end prohibited",
    );
    refuse(
        &program("mov %r2, %r10\nadd32 %r2, 1\nmov %r0, 0\nexit", XDP),
        Rule::PointerArithmetic,
        "32-bit pointer arithmetic prohibited",
    );
    refuse(
        &program("mov %r2, %r10\nmul %r2, 2\nmov %r0, 0\nexit", XDP),
        Rule::PointerArithmetic,
        "pointer arithmetic with *= operator",
    );
    refuse(
        &program("mov %r2, %r10\nand %r2, 2\nmov %r0, 0\nexit", XDP),
        Rule::PointerArithmetic,
        "bitwise operator",
    );
    refuse(
        &program("mov %r2, 1\nsub %r2, %r10\nmov %r0, 0\nexit", XDP),
        Rule::PointerArithmetic,
        "subtract pointer from scalar",
    );
    // Privileged: pointer - pointer is a scalar.
    accept(&program("ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nsub %r3, %r2\nmov %r0, %r3\nexit", XDP));
}

#[test]
fn division_by_a_constant_zero_is_refused() {
    refuse(&program("mov %r0, 1\ndiv %r0, 0\nexit", None), Rule::DivisionByZero, "div by zero");
    refuse(&program("mov %r0, 1\nmod32 %r0, 0\nexit", None), Rule::DivisionByZero, "div by zero");
    // A register divisor is the run time's business (0 gives 0).
    let p = program("mov %r0, 1\nmov %r1, 0\ndiv %r0, %r1\nexit", None);
    let proof = verify(&p, &Options::default()).unwrap();
    assert_eq!(proof.facts().get(2).divisor_nonzero, Some(false));
    let p = program("mov %r0, 1\nmov %r1, 3\ndiv %r0, %r1\nexit", None);
    assert_eq!(verify(&p, &Options::default()).unwrap().facts().get(2).divisor_nonzero, Some(true));
}

#[test]
fn helpers_must_exist_and_be_offered_to_the_type() {
    refuse(&program("call 999\nexit", XDP), Rule::UnknownHelper, "invalid func unknown#999");
    // bpf_skb_load_bytes is not an XDP helper; bpf_xdp_adjust_head not a tc one.
    refuse(
        &program("mov %r2, 0\nmov %r3, %r10\nadd %r3, -8\nmov %r4, 8\ncall 26\nexit", XDP),
        Rule::UnknownHelper,
        "cannot use helper bpf_skb_load_bytes#26",
    );
    refuse(
        &program("mov %r2, 0\ncall 44\nexit", TC),
        Rule::UnknownHelper,
        "bpf_xdp_adjust_head#44",
    );
    accept(&program(
        "mov %r2, 0\nmov %r3, %r10\nadd %r3, -8\nmov %r4, 8\ncall 26\nldxdw %r0, [%r10-8]\nexit",
        TC,
    ));
    // The runtime's list of helpers narrows it further.
    let p = program("call 7\nexit", XDP);
    let options = Options { helpers: Some(vec![1]), ..Options::default() };
    assert_eq!(verify(&p, &options).unwrap_err().rule, Rule::UnknownHelper);
    // ... but never widens what the program type is offered.
    let p = program("mov %r2, 0\ncall 44\nexit", TC);
    let options = Options { helpers: Some(vec![44]), ..Options::default() };
    assert_eq!(verify(&p, &options).unwrap_err().rule, Rule::UnknownHelper);
}

#[test]
fn helper_arguments_are_checked_against_the_prototype() {
    let lookup = "stw [%r10-4], 0\nlddw %r1, map_idx(0)\nmov %r2, %r10\nadd %r2, -4\ncall 1\nmov %r0, 0\nexit";
    accept(&with_map(program(lookup, XDP), MapType::Array, 4, 8));
    // The key is 8 bytes: past the frame at fp-4; half unwritten at fp-8 (refused only
    // unprivileged).
    refuse(&with_map(program(lookup, XDP), MapType::Hash, 8, 8), Rule::OutOfBounds, "stack");
    let half =
        with_map(program(&lookup.replace("add %r2, -4", "add %r2, -8"), XDP), MapType::Hash, 8, 8);
    accept(&half);
    refuse_with(&half, &unprivileged(), Rule::UninitStack, "invalid read from stack");
    // r1 must be a map.
    let bad = lookup.replace("lddw %r1, map_idx(0)", "mov %r1, 0");
    refuse(
        &with_map(program(&bad, XDP), MapType::Array, 4, 8),
        Rule::HelperArgument,
        "R1 type=scalar expected=map_ptr",
    );
    // A size must be bounded.
    let p = "call 7\nmov %r2, %r0\nmov %r1, %r10\nadd %r1, -8\nstdw [%r10-8], 0\ncall 6\nmov %r0, 0\nexit";
    refuse(&program(p, XDP), Rule::HelperArgument, "R2");
    let p = "call 7\nmov %r2, %r0\nand %r2, 7\nadd %r2, 1\nmov %r1, %r10\nadd %r1, -8\nstdw [%r10-8], 0\ncall 6\nmov %r0, 0\nexit";
    accept(&program(p, XDP));
    refuse(
        &with_map(program("lddw %r1, map_idx(1)\nmov %r0, 0\nexit", XDP), MapType::Array, 4, 4),
        Rule::InvalidMap,
        "not pointing to valid bpf_map",
    );
}

#[test]
fn map_values_need_a_null_check_and_stay_in_bounds() {
    let base =
        "stw [%r10-4], 0\nlddw %r1, map_idx(0)\nmov %r2, %r10\nadd %r2, -4\ncall 1\nmov %r6, %r0\n";
    let checked = format!("{base}mov %r0, 0\njeq %r6, 0, +1\nldxdw %r0, [%r6+0]\nexit");
    let hash = |src: &str| with_map(program(src, XDP), MapType::Hash, 4, 8);
    accept(&hash(&checked));
    let unchecked = format!("{base}ldxdw %r0, [%r6+0]\nexit");
    refuse(&hash(&unchecked), Rule::InvalidMemAccess, "'map_value_or_null'");
    // An array looked up with a constant key inside it cannot miss (key 0 of 4 entries).
    accept(&with_map(program(&unchecked, XDP), MapType::Array, 4, 8));
    let past = checked.replace("[%r6+0]", "[%r6+4]");
    refuse(
        &hash(&past),
        Rule::OutOfBounds,
        "invalid access to map value, value_size=8 off=4 size=8",
    );
    let arith = format!("{base}add %r6, 1\nmov %r0, 0\nexit");
    refuse(&hash(&arith), Rule::PointerArithmetic, "null-check it first");
    // A ring buffer is not a map to look up in.
    let rb = with_map(program(&checked, XDP), MapType::RingBuf, 0, 0);
    refuse(&rb, Rule::MapHelperMismatch, "cannot pass map_type 27 into func bpf_map_lookup_elem#1");
}

#[test]
fn ring_buffer_references_must_be_released() {
    let reserve = "lddw %r1, map_idx(0)\nmov %r2, 8\nmov %r3, 0\ncall 131\nmov %r6, %r0\n";
    let ok = format!("{reserve}jeq %r6, 0, +5\nstdw [%r6+0], 1\nmov %r1, %r6\nmov %r2, 0\ncall 132\nmov %r0, 0\nexit");
    let rb = |src: &str| with_map(program(src, XDP), MapType::RingBuf, 0, 0);
    accept(&rb(&ok));
    let leak = format!("{reserve}jeq %r6, 0, +1\nstdw [%r6+0], 1\nmov %r0, 0\nexit");
    refuse(&rb(&leak), Rule::UnreleasedReference, "Unreleased reference");
    let twice =
        ok.replace("mov %r0, 0\nexit", "mov %r1, %r6\nmov %r2, 0\ncall 133\nmov %r0, 0\nexit");
    refuse(&rb(&twice), Rule::InvalidRelease, "");
    let past = ok.replace("stdw [%r6+0], 1", "stdw [%r6+4], 1");
    refuse(&rb(&past), Rule::OutOfBounds, "mem_size=8");
}

#[test]
fn bounded_loops_are_explored_and_endless_ones_refused() {
    accept(&program(
        "mov %r0, 0\nmov %r1, 0\nloop:\nadd %r0, %r1\nadd %r1, 1\njlt %r1, 50, loop\nexit",
        XDP,
    ));
    refuse(
        &program("mov %r0, 0\nloop:\nja loop\n", XDP),
        Rule::InfiniteLoop,
        "infinite loop detected",
    );
    refuse(
        &program("mov %r0, 0\nloop:\nadd %r0, 1\nja loop\n", XDP),
        Rule::TooComplex,
        "too large",
    );
}

#[test]
fn calls_have_frames_and_limits() {
    let ok = "mov %r1, 3\ncall local f\nexit\nf:\nmov %r0, %r1\nadd %r0, 1\nexit";
    accept(&program(ok, XDP));
    // The callee's stack is its own; a caller's pointer may be passed down.
    let pass = "stdw [%r10-8], 5\nmov %r1, %r10\nadd %r1, -8\ncall local f\nexit\nf:\nldxdw %r0, [%r1+0]\nexit";
    accept(&program(pass, XDP));
    refuse(
        &program("call local f\nexit\nf:\ncall local f\nexit", XDP),
        Rule::CallDepth,
        "recursive call",
    );
    // r6-r9 are the callee's own: not initialized on entry.
    refuse(
        &program("mov %r6, 1\ncall local f\nexit\nf:\nmov %r0, %r6\nexit", XDP),
        Rule::UninitRegister,
        "R6 !read_ok",
    );
    let deep = "stdw [%r10-400], 0\ncall local f\nexit\nf:\nstdw [%r10-400], 0\nmov %r0, 0\nexit";
    refuse(&program(deep, XDP), Rule::StackDepth, "combined stack size");
}

#[test]
fn legacy_packet_loads_only_for_skb_programs() {
    let p = "mov %r6, %r1\nldabsb 12\nexit";
    let proof = verify(&program(p, SOCKET), &Options::default()).unwrap();
    assert_eq!(proof.facts().get(1).access_in_bounds, Some(false));
    accept(&program(p, TC));
    refuse(&program(p, XDP), Rule::LegacyPacketAccess, "not allowed for this program type");
    refuse(&program("ldabsb 12\nexit", SOCKET), Rule::LegacyPacketAccess, "R6 != pointer to skb");
}

#[test]
fn unreachable_and_unsupported_instructions() {
    let pc = refuse(
        &program("mov %r0, 0\nexit\nmov %r0, 1\nexit", XDP),
        Rule::Unreachable,
        "unreachable insn 2",
    );
    assert_eq!(pc, 2);
    refuse(&program("mov %r0, 0\ncallx %r0\nexit", XDP), Rule::Unsupported, "CALLX");
    use weir_isa::ebpf::{Insn, Op};
    let bad = Program::from_insns(vec![
        Insn::new(Op::Mov64Imm, 0, 0, 0, 0),
        Insn::new(Op::Add64Imm, 11, 0, 0, 1),
        Insn::new(Op::Exit, 0, 0, 0, 0),
    ]);
    refuse(&bad, Rule::Structure, "r11");
}

#[test]
fn read_only_maps_refuse_writes() {
    let p = "lddw %r1, map_idx_value(0, 0)\nstw [%r1+0], 1\nmov %r0, 0\nexit";
    let mut prog = program(p, XDP);
    prog.add_map(MapSpec {
        name: ".rodata".into(),
        map_type: MapType::Array,
        key_size: 4,
        value_size: 8,
        max_entries: 1,
        flags: 0,
    });
    refuse(&prog, Rule::ReadOnly, "write into map forbidden");
    let p = "lddw %r1, map_idx_value(0, 0)\nldxw %r0, [%r1+4]\nexit";
    let mut prog = program(p, XDP);
    prog.add_map(MapSpec {
        name: ".rodata".into(),
        map_type: MapType::Array,
        key_size: 4,
        value_size: 8,
        max_entries: 1,
        flags: 0,
    });
    accept(&prog);
}

#[test]
fn untyped_programs_see_memory_of_the_given_size() {
    let p = program("ldxw %r0, [%r1+4]\nexit", None);
    let options = Options { memory_len: Some(8), ..Options::default() };
    let proof = verify(&p, &options).unwrap();
    assert_eq!(proof.facts().get(0).access_in_bounds, Some(true));
    let options = Options { memory_len: Some(7), ..Options::default() };
    assert_eq!(verify(&p, &options).unwrap_err().rule, Rule::OutOfBounds);
}

#[test]
fn proofs_become_verified_programs() {
    let p = program("mov %r0, 0\nexit", XDP);
    let proof = verify(&p, &Options::default()).unwrap();
    assert!(proof.summary().starts_with("accepted as xdp"));
    let verified = proof.into_verified(p).unwrap();
    assert_eq!(verified.assurance(), weir_program::Assurance::Proven);
    assert!(verified.facts().unwrap().get(0).reached);
}

#[test]
fn every_rule_has_a_distinct_short_name() {
    use std::collections::HashSet;
    let all = [
        Rule::Structure,
        Rule::Unreachable,
        Rule::TooComplex,
        Rule::InfiniteLoop,
        Rule::UninitRegister,
        Rule::InvalidMemAccess,
        Rule::OutOfBounds,
        Rule::UninitStack,
        Rule::Misaligned,
        Rule::VariableOffset,
        Rule::ContextAccess,
        Rule::ReadOnly,
        Rule::PointerArithmetic,
        Rule::DivisionByZero,
        Rule::InvalidShift,
        Rule::UnknownHelper,
        Rule::HelperArgument,
        Rule::MapHelperMismatch,
        Rule::InvalidMap,
        Rule::UnreleasedReference,
        Rule::InvalidRelease,
        Rule::CallDepth,
        Rule::StackDepth,
        Rule::LegacyPacketAccess,
        Rule::Unsupported,
    ];
    let names: HashSet<_> = all.iter().map(|r| r.name()).collect();
    assert_eq!(names.len(), all.len());
}

#[test]
fn bounds_learnt_on_a_copy_hold_for_the_original() {
    // r5 = r4 + 14 is compared; r4's bound follows (the kernel's linked scalars).
    let p = "ldxb %r4, [%r1+0]\nmov %r5, %r4\nadd %r5, 14\nmov %r0, 0\njgt %r5, 20, +1\nldxb %r0, [%r1+%r4]\nexit";
    // Untyped memory of 8 bytes: r1 + r4 with r4 <= 6 stays inside.
    let p = p.replace("ldxb %r0, [%r1+%r4]", "add %r1, %r4\nldxb %r0, [%r1+0]");
    let options = Options { memory_len: Some(8), ..Options::default() };
    verify(&program(&p, None), &options).unwrap();
    let unlinked = p.replace("mov %r5, %r4\nadd %r5, 14", "ldxb %r5, [%r1+1]\nadd %r5, 14");
    assert_eq!(verify(&program(&unlinked, None), &options).unwrap_err().rule, Rule::OutOfBounds);
}

#[test]
fn shifts_by_an_immediate_stay_inside_the_width() {
    accept(&program("mov %r0, 1\nlsh %r0, 63\nrsh32 %r0, 31\nexit", XDP));
    refuse(&program("mov %r0, 1\nlsh %r0, 64\nexit", XDP), Rule::InvalidShift, "invalid shift 64");
    refuse(
        &program("mov %r0, 1\narsh32 %r0, 32\nexit", XDP),
        Rule::InvalidShift,
        "invalid shift 32",
    );
    refuse(&program("mov %r0, 1\nrsh %r0, -1\nexit", XDP), Rule::InvalidShift, "invalid shift -1");
    // By a register: masked at run time, not the verifier's business.
    accept(&program("mov %r0, 1\nmov %r1, 70\nlsh %r0, %r1\nexit", XDP));
}

#[test]
fn a_32_bit_subtraction_involving_a_pointer_is_a_scalar_when_privileged() {
    let p = program("mov %r2, %r1\nsub32 %r2, 3\nmov %r0, %r2\nexit", XDP);
    accept(&p);
    refuse_with(
        &p,
        &unprivileged(),
        Rule::PointerArithmetic,
        "32-bit pointer arithmetic prohibited",
    );
    let add = program("mov %r2, %r1\nadd32 %r2, 3\nmov %r0, 0\nexit", XDP);
    refuse(&add, Rule::PointerArithmetic, "32-bit pointer arithmetic prohibited");
}

#[test]
fn rejections_trace_the_path_with_its_states() {
    let p = program("ldxw %r2, [%r1+0]\nmov %r3, %r2\nadd %r3, 2\nldxb %r0, [%r2+0]\nexit", XDP);
    let e = verify(&p, &Options::default()).unwrap_err();
    assert_eq!(e.pc, 3);
    assert_eq!(e.trace[0], "0: ldxw %r2, [%r1+0] ; R1=ctx() R10=fp0");
    assert_eq!(e.trace[2], "2: add %r3, 2 ; R1=ctx() R2=pkt(r=0) R3=pkt(r=0) R10=fp0");
    assert_eq!(
        e.trace.last().unwrap(),
        "state at 3: R1=ctx() R2=pkt(r=0) R3=pkt(r=0,off=2) R10=fp0"
    );
    assert_eq!(e.to_string(), format!("3: {} [out-of-bounds]", e.message));
}

#[test]
fn too_many_pending_branches_are_too_complex() {
    // 8,200 unknown bytes compared one after the other: every comparison leaves a branch
    // pending, as the kernel counts them.
    let mut src = String::from("mov %r0, 0\nstdw [%r10-8], 0\n");
    for _ in 0..8200 {
        src.push_str("ldxb %r2, [%r1+0]\njeq %r2, 0, +1\nmov %r0, 1\n");
    }
    src.push_str("exit\n");
    let p = program(&src, None);
    let options = Options { memory_len: Some(1), ..Options::default() };
    let e = verify(&p, &options).unwrap_err();
    assert_eq!(e.rule, Rule::TooComplex, "{e}");
    assert!(e.message.contains("jumps is too complex"), "{e}");
}

/// Each proven access names the region it reaches, which engines translate it with.
#[test]
fn proven_accesses_name_their_region() {
    use weir_program::Region;
    // XDP: context, packet, stack and a map value.
    let src = "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r4, %r2\nadd %r4, 4\n\
               jgt %r4, %r3, +1\nldxw %r5, [%r2+0]\nstw [%r10-8], 1\nmov %r6, %r10\n\
               add %r6, -8\nldxw %r5, [%r6+0]\nstw [%r10-4], 0\nlddw %r1, map_idx(0)\n\
               mov %r2, %r10\nadd %r2, -4\ncall 1\njeq %r0, 0, +1\nldxw %r5, [%r0+0]\n\
               mov %r0, 0\nexit";
    let p = with_map(program(src, XDP), MapType::Array, 4, 4);
    let proof = verify(&p, &Options::default()).unwrap();
    let facts = proof.facts();
    let region = |pc: usize| facts.get(pc).region;
    assert_eq!(region(0), Some(Region::Context));
    assert_eq!(region(5), Some(Region::Packet));
    assert_eq!(region(6), Some(Region::Stack));
    assert_eq!(region(9), Some(Region::Stack));
    assert_eq!(region(17), Some(Region::MapValue));
    assert_eq!(region(3), None, "not an access");
    assert_eq!((facts.prog_type, facts.memory_len, facts.stack_size), (XDP, None, 512));

    // Untyped: r1's memory, of the size the options give.
    let p = program("ldxb %r0, [%r1+7]\nexit", None);
    let options = Options { memory_len: Some(8), ..Options::default() };
    let proof = verify(&p, &options).unwrap();
    assert_eq!(proof.facts().get(0).region, Some(Region::Memory));
    assert_eq!(proof.facts().memory_len, Some(8));
}

/// One access reached through the stack on one path and the memory on another names no
/// region (it is still in bounds).
#[test]
fn an_access_reaching_two_regions_names_none() {
    let p = program(
        "mov %r3, %r1\njeq %r2, 8, +2\nmov %r3, %r10\nadd %r3, -8\nldxb %r0, [%r3+0]\nexit",
        None,
    );
    let options = Options { memory_len: Some(8), ..Options::default() };
    let proof = verify(&p, &options).unwrap();
    assert_eq!(proof.facts().get(4).access_in_bounds, Some(true));
    // r2 is the constant 8, so only the memory path is taken; make both reachable:
    let p = program(
        "mov %r3, %r1\nldxb %r4, [%r1+0]\njeq %r4, 8, +2\nmov %r3, %r10\nadd %r3, -8\n\
         ldxb %r0, [%r3+0]\nexit",
        None,
    );
    let proof = verify(&p, &options).unwrap();
    assert_eq!(proof.facts().get(5).access_in_bounds, Some(true));
    assert_eq!(proof.facts().get(5).region, None);
}

/// A proof becomes a `Verified` only for the program it proved (resolved map references
/// aside).
#[test]
fn a_proof_is_bound_to_its_program() {
    use weir_isa::ebpf::{Insn, Op};
    let p = program("ldxb %r0, [%r1+0]\nexit", None);
    let options = Options { memory_len: Some(1), ..Options::default() };
    let proof = verify(&p, &options).unwrap();
    let other = program("ldxb %r0, [%r1+100]\nexit", None);
    let e = proof.clone().into_verified(other).unwrap_err();
    assert_eq!((e.index, e.kind), (0, weir_program::ValidateErrorKind::NotProven));
    assert!(proof.into_verified(p).is_ok());

    // `lddw map_idx(0)` resolved to the map's handle, as loading does: still the program.
    let src = "lddw %r1, map_idx(0)\nmov %r0, 0\nexit";
    let p = with_map(program(src, XDP), MapType::Array, 4, 4);
    let proof = verify(&p, &Options::default()).unwrap();
    let mut insns = p.insns().to_vec();
    insns[0] = Insn::new(Op::Lddw, 1, 0, 0, 0x7000_0000);
    insns[1] = Insn::new(Op::LddwHigh, 0, 0, 0, 0);
    let resolved = Program::from_insns(insns).with_prog_type(ProgType::Xdp);
    assert!(proof.clone().into_verified(resolved).is_ok());
    let mut insns = p.insns().to_vec();
    insns[2] = Insn::new(Op::Mov64Imm, 0, 0, 0, 1);
    let changed = Program::from_insns(insns).with_prog_type(ProgType::Xdp);
    assert_eq!(proof.into_verified(changed).unwrap_err().index, 2);
}

/// `bpf_loop(10, cb, &counter, 0)` with `cb` counting in the caller's stack through its
/// context; `cb_body` is the callback (after the `cb:` label).
fn bpf_loop(ctx: &str, cb_body: &str) -> Program {
    let src = format!(
        "stw [%r10-8], 0\nmov %r1, 10\nlddw %r2, func(cb)\n{ctx}\nmov %r4, 0\ncall 181\n\
         ldxw %r0, [%r10-8]\nexit\ncb:\n{cb_body}"
    );
    program(&src, XDP)
}

fn with_func_info() -> Options {
    Options { func_info: true, ..Options::default() }
}

#[test]
fn bpf_loop_callbacks_are_checked_as_a_loop() {
    let counting = "ldxw %r3, [%r2+0]\nadd32 %r3, 1\nstxw [%r2+0], %r3\nmov %r0, 0\nexit";
    let good = bpf_loop("mov %r3, %r10\nadd %r3, -8", counting);
    match verify(&good, &with_func_info()) {
        // The callback may run any number of times: no bound on a run's length.
        Ok(proof) => assert_eq!(proof.facts().max_executed, u64::MAX, "{}", proof.summary()),
        Err(e) => panic!("refused: {e}\n{}", e.trace.join("\n")),
    }
    // A callback that stops at an index: the same state recurs in the next call (the
    // kernel tells calls apart by their unroll depth), which is no infinite loop.
    let stopping = "mov %r9, %r1\nmov %r6, %r1\nadd %r6, 1\nldxw %r7, [%r2+0]\n\
                    add %r7, %r6\nstxw [%r2+0], %r7\nmov %r0, 0\njne %r9, 99, go\n\
                    mov %r0, 1\ngo:\nexit";
    let stops = bpf_loop("mov %r3, %r10\nadd %r3, -8", stopping);
    if let Err(e) = verify(&stops, &with_func_info()) {
        panic!("refused: {e}\n{}", e.trace.join("\n"));
    }
    // A null context is allowed, and the callback may stop the loop with 1.
    let null_ctx = bpf_loop("mov %r3, 0", "mov %r0, 1\nexit");
    assert!(verify(&null_ctx, &with_func_info()).is_ok());
    // Without BTF func_info the kernel refuses to take a function's address.
    refuse(&good, Rule::Callback, "missing btf func_info");
    // The callback returns 0 or 1.
    let two = bpf_loop("mov %r3, 0", "mov %r0, 2\nexit");
    refuse_with(&two, &with_func_info(), Rule::Callback, "should have been in [0, 1]");
    let unknown = bpf_loop("mov %r3, 0", "call 7\nexit");
    refuse_with(&unknown, &with_func_info(), Rule::Callback, "should have been in [0, 1]");
    // The callback's context is the caller's stack or null, nothing else.
    let ctx_arg = bpf_loop("mov %r3, %r1", "mov %r0, 0\nexit");
    refuse_with(&ctx_arg, &with_func_info(), Rule::HelperArgument, "expected=fp");
    // Its second argument must be a function.
    let scalar = program("mov %r1, 1\nmov %r2, 0\nmov %r3, 0\nmov %r4, 0\ncall 181\nexit", XDP);
    refuse_with(&scalar, &with_func_info(), Rule::HelperArgument, "expected=func");
    // The callback's accesses are checked in its own frame: past the caller's counter.
    let past = "ldxw %r3, [%r2+8]\nmov %r0, 0\nexit";
    let bad = bpf_loop("mov %r3, %r10\nadd %r3, -8", past);
    refuse_with(&bad, &with_func_info(), Rule::OutOfBounds, "stack");
}

/// `Facts::stack_observed` of a program that calls helpers: a helper's memory argument
/// counts as a read of those stack bytes, a helper's written argument as a write that may
/// miss, and a helper call as a place a run may end (it may fail or stop the run), so a
/// byte written only after the call is observed; a byte no path writes is not.
#[test]
fn a_helpers_stack_arguments_and_calls_count_in_the_observed_slots() {
    let observed = |src: &str, map_type: MapType, key: u32| {
        let p = with_map(program(src, XDP), map_type, key, 8);
        let proof = verify(&p, &Options::default()).unwrap_or_else(|e| panic!("{e}\n{src}"));
        proof.facts().stack_observed.clone()
    };
    // By byte (bit i: fp-(i+1)); only the first word's 64 bytes are used here.
    let bytes = |first: u64| Some([vec![first], vec![0; 7]].concat());
    // xdp_counter's shape: key (fp-4) and value (fp-16) written before any call, read by
    // the helpers: none. The key's slot's other half (fp-8..fp-5) no path writes, so no
    // run shows it changed (marks by slot listed slot 0).
    let counter = "stw [%r10-4], 0\nstdw [%r10-16], 1
        lddw %r1, map_idx(0)\nmov %r2, %r10\nadd %r2, -4\ncall 1
        jeq %r0, 0, +3\nmov %r1, 1\nlock add [%r0+0], %r1\nja +8
        lddw %r1, map_idx(0)\nmov %r2, %r10\nadd %r2, -4\nmov %r3, %r10\nadd %r3, -16
        mov %r4, 0\ncall 2\nmov %r0, 2\nexit";
    assert_eq!(observed(counter, MapType::Hash, 4), bytes(0));
    // The key read by the lookup though no path writes it (privileged: accepted): its 8
    // bytes, by the read alone (never written, it is not "left unwritten" at any end).
    let unwritten_key = "lddw %r1, map_idx(0)\nmov %r2, %r10\nadd %r2, -8\ncall 1
        mov %r0, 2\nexit";
    assert_eq!(observed(unwritten_key, MapType::Hash, 8), bytes(0xff));
    // The value written after the lookup on every path: a run that ends at the call (a
    // failed helper) shows fp-16..fp-9 as they started (fp-8..fp-1 as in xdp_counter's).
    let value_after = "stw [%r10-4], 0
        lddw %r1, map_idx(0)\nmov %r2, %r10\nadd %r2, -4\ncall 1\nstdw [%r10-16], 1
        lddw %r1, map_idx(0)\nmov %r2, %r10\nadd %r2, -4\nmov %r3, %r10\nadd %r3, -16
        mov %r4, 0\ncall 2\nmov %r0, 2\nexit";
    assert_eq!(observed(value_after, MapType::Hash, 4), bytes(0xff00));
    // A peek writes its value argument only when the queue holds one: the slot read after
    // it may be the one the run started with (its 8 bytes).
    let peek = "lddw %r1, map_idx(0)\nmov %r2, %r10\nadd %r2, -8\ncall 89
        ldxdw %r0, [%r10-8]\nexit";
    assert_eq!(observed(peek, MapType::Queue, 0), bytes(0xff));
}
