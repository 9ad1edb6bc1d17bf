//! Unit tests of the assembler and disassembler: every operand shape in both directions,
//! aliases, labels, number formats, every kind of error with its line and column, the
//! listing and the raw-word format. Random round-trip properties live in
//! `crates/isa/tests/asm_props.rs`.

use super::*;
use crate::ebpf::{decode, encode, Disc, Insn, Op, OpSpec, Operands, RawInsn, OPCODES};

fn insn(op: Op, dst: u8, src: u8, off: i16, imm: i64) -> Insn {
    Insn::new(op, dst, src, off, imm)
}

fn high() -> Insn {
    insn(Op::LddwHigh, 0, 0, 0, 0)
}

/// Assembles one line that must give exactly `expected` and print back as `canonical`.
#[track_caller]
fn check(text: &str, expected: &[Insn], canonical: &str) {
    let got = assemble(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    assert_eq!(got, expected, "{text:?}");
    assert_eq!(disassemble(&got), format!("{canonical}\n"), "{text:?}");
}

#[track_caller]
fn error(text: &str) -> AsmError {
    match assemble(text) {
        Ok(insns) => panic!("{text:?} assembled to {insns:?}"),
        Err(e) => e,
    }
}

/// Asserts the place of an error and that its message mentions `needle`.
#[track_caller]
fn check_error(text: &str, line: usize, column: usize, needle: &str) {
    let e = error(text);
    assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
    assert!(e.message.contains(needle), "{text:?}: {e:?} should mention {needle:?}");
}

/// The decoded form of a row with the given fields: unused fields zero, discriminator set.
fn normalized(spec: &OpSpec, dst: u8, src: u8, off: i16, imm: i64) -> Insn {
    let slots = encode(&[Insn::new(spec.op, dst, src, off, imm)]);
    decode(&slots).unwrap_or_else(|e| panic!("{:?}: {e}", spec.op))[0]
}

#[test]
fn every_table_row_prints_and_assembles_back() {
    for spec in OPCODES {
        for (dst, src, off, imm) in
            [(1, 2, 3, -7), (10, 0, -32768, 0x7fff_ffff), (0, 9, 32767, -0x1_0000)]
        {
            let want = normalized(spec, dst, src, off, imm);
            let text = disassemble_insn(&want);
            assert!(text.starts_with(spec.mnemonic), "{text}");
            let got = assemble(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(got[0], want, "{text}");
            assert_eq!(got.len(), want.slots(), "{text}");
        }
    }
}

#[test]
fn alu_shapes() {
    check("add %r1, -5", &[insn(Op::Add64Imm, 1, 0, 0, -5)], "add %r1, -5");
    check("add32 %r2, %r3", &[insn(Op::Add32Reg, 2, 3, 0, 0)], "add32 %r2, %r3");
    check("mov32 %r0, 0xffffffff", &[insn(Op::Mov32Imm, 0, 0, 0, -1)], "mov32 %r0, -1");
    check("mov %r0, 65535", &[insn(Op::Mov64Imm, 0, 0, 0, 0xffff)], "mov %r0, 65535");
    check("mov %r0, 65536", &[insn(Op::Mov64Imm, 0, 0, 0, 0x10000)], "mov %r0, 0x10000");
    check("mov %r0, -65536", &[insn(Op::Mov64Imm, 0, 0, 0, -0x10000)], "mov %r0, -0x10000");
    check(
        "mov %r0, -0x80000000",
        &[insn(Op::Mov64Imm, 0, 0, 0, -0x8000_0000)],
        "mov %r0, -0x80000000",
    );
    check("sdiv %r1, 3", &[insn(Op::Sdiv64Imm, 1, 0, 1, 3)], "sdiv %r1, 3");
    check("smod32 %r1, %r2", &[insn(Op::Smod32Reg, 1, 2, 1, 0)], "smod32 %r1, %r2");
    check("movsx1632 %r0, %r1", &[insn(Op::MovSx16To32, 0, 1, 16, 0)], "movsx1632 %r0, %r1");
    check("movsx3264 %r0, %r1", &[insn(Op::MovSx32To64, 0, 1, 32, 0)], "movsx3264 %r0, %r1");
    check("neg %r1", &[insn(Op::Neg64, 1, 0, 0, 0)], "neg %r1");
    check("neg32 %r1", &[insn(Op::Neg32, 1, 0, 0, 0)], "neg32 %r1");
    check("be16 %r2", &[insn(Op::Be16, 2, 0, 0, 16)], "be16 %r2");
    check("bswap64 %r2", &[insn(Op::Bswap64, 2, 0, 0, 64)], "bswap64 %r2");
    check("le32 %r9", &[insn(Op::Le32, 9, 0, 0, 32)], "le32 %r9");
}

#[test]
fn jump_and_call_shapes() {
    check("ja +3", &[insn(Op::Ja, 0, 0, 3, 0)], "ja +3");
    check("ja -1", &[insn(Op::Ja, 0, 0, -1, 0)], "ja -1");
    check("ja 2", &[insn(Op::Ja, 0, 0, 2, 0)], "ja +2");
    check("ja +0", &[insn(Op::Ja, 0, 0, 0, 0)], "ja +0");
    check("ja32 +70000", &[insn(Op::Ja32, 0, 0, 0, 70000)], "ja32 +70000");
    check("jeq %r1, 5, +2", &[insn(Op::Jeq64Imm, 1, 0, 2, 5)], "jeq %r1, 5, +2");
    check("jsgt32 %r1, %r2, -1", &[insn(Op::Jsgt32Reg, 1, 2, -1, 0)], "jsgt32 %r1, %r2, -1");
    check(
        "jset %r3, 0x80000000, +1",
        &[insn(Op::Jset64Imm, 3, 0, 1, i64::from(i32::MIN))],
        "jset %r3, -0x80000000, +1",
    );
    check("call 5", &[insn(Op::Call, 0, 0, 0, 5)], "call 5");
    check("call kfunc 1234", &[insn(Op::CallKfunc, 0, 2, 0, 1234)], "call kfunc 1234");
    check("call local +4", &[insn(Op::CallLocal, 0, 1, 0, 4)], "call local +4");
    check("call local -2", &[insn(Op::CallLocal, 0, 1, 0, -2)], "call local -2");
    check("call %r2", &[insn(Op::CallReg, 2, 0, 0, 0)], "call %r2");
    check("exit", &[insn(Op::Exit, 0, 0, 0, 0)], "exit");
}

#[test]
fn memory_shapes() {
    check("ldxw %r0, [%r1+4]", &[insn(Op::LdxW, 0, 1, 4, 0)], "ldxw %r0, [%r1+4]");
    check("ldxdw %r0, [%r10-8]", &[insn(Op::LdxDw, 0, 10, -8, 0)], "ldxdw %r0, [%r10-8]");
    check("ldxb %r0, [%r1]", &[insn(Op::LdxB, 0, 1, 0, 0)], "ldxb %r0, [%r1+0]");
    check("ldxhsx %r0, [ %r1 + 0x10 ]", &[insn(Op::LdxHSx, 0, 1, 16, 0)], "ldxhsx %r0, [%r1+16]");
    check("stw [%r1+4], 7", &[insn(Op::StW, 1, 0, 4, 7)], "stw [%r1+4], 7");
    check("stdw [%r10-8], -1", &[insn(Op::StDw, 10, 0, -8, -1)], "stdw [%r10-8], -1");
    check("stxdw [%r10-8], %r1", &[insn(Op::StxDw, 10, 1, -8, 0)], "stxdw [%r10-8], %r1");
    check("lock add [%r1+0], %r2", &[insn(Op::AtomicAdd64, 1, 2, 0, 0)], "lock add [%r1+0], %r2");
    check(
        "lock fetch add32 [%r1+8], %r2",
        &[insn(Op::AtomicFetchAdd32, 1, 2, 8, 1)],
        "lock fetch add32 [%r1+8], %r2",
    );
    check(
        "lock  cmpxchg [%r1-4], %r3",
        &[insn(Op::AtomicCmpXchg64, 1, 3, -4, 0xf1)],
        "lock cmpxchg [%r1-4], %r3",
    );
    check(
        "lock xchg32 [%r1+0], %r3",
        &[insn(Op::AtomicXchg32, 1, 3, 0, 0xe1)],
        "lock xchg32 [%r1+0], %r3",
    );
    check("ldabsw 12", &[insn(Op::LdAbsW, 0, 0, 0, 12)], "ldabsw 12");
    check("ldindh %r1, 4", &[insn(Op::LdIndH, 0, 1, 0, 4)], "ldindh %r1, 4");
}

#[test]
fn lddw_shapes() {
    check(
        "lddw %r0, 0x1122334455667788",
        &[insn(Op::Lddw, 0, 0, 0, 0x1122_3344_5566_7788), high()],
        "lddw %r0, 0x1122334455667788",
    );
    check("lddw %r0, -1", &[insn(Op::Lddw, 0, 0, 0, -1), high()], "lddw %r0, 0xffffffffffffffff");
    check("lddw %r0, 5", &[insn(Op::Lddw, 0, 0, 0, 5), high()], "lddw %r0, 0x5");
    check(
        "lddw %r0, -0x8000000000000000",
        &[insn(Op::Lddw, 0, 0, 0, i64::MIN), high()],
        "lddw %r0, 0x8000000000000000",
    );
    check("lddw %r1, map_fd(3)", &[insn(Op::LddwMapFd, 1, 1, 0, 3), high()], "lddw %r1, map_fd(3)");
    check(
        "lddw %r1, map_fd(0xffffffff)",
        &[insn(Op::LddwMapFd, 1, 1, 0, 0xffff_ffff), high()],
        "lddw %r1, map_fd(0xffffffff)",
    );
    check(
        "lddw %r1, map_fd(0x100000003)",
        &[insn(Op::LddwMapFd, 1, 1, 0, 0x1_0000_0003), high()],
        "lddw %r1, map_fd(0x100000003)",
    );
    check(
        "lddw %r1, map_value(3, 8)",
        &[insn(Op::LddwMapValue, 1, 2, 0, (8 << 32) | 3), high()],
        "lddw %r1, map_value(3, 8)",
    );
    check("lddw %r2, btf_id(7)", &[insn(Op::LddwBtfId, 2, 3, 0, 7), high()], "lddw %r2, btf_id(7)");
    check(
        "lddw %r2, map_idx(2)",
        &[insn(Op::LddwMapIdx, 2, 5, 0, 2), high()],
        "lddw %r2, map_idx(2)",
    );
    check(
        "lddw %r2, map_idx_value(2, -4)",
        &[insn(Op::LddwMapIdxValue, 2, 6, 0, (-4i64 << 32) | 2), high()],
        "lddw %r2, map_idx_value(2, -4)",
    );
    check("lddw %r3, func(+5)", &[insn(Op::LddwFunc, 3, 4, 0, 5), high()], "lddw %r3, func(+5)");
    check(
        "lddw %r3, func(-3)",
        &[insn(Op::LddwFunc, 3, 4, 0, 0xffff_fffd), high()],
        "lddw %r3, func(-3)",
    );
    check(
        "lddw %r3, func(0xfffffffffffffffd)",
        &[insn(Op::LddwFunc, 3, 4, 0, -3), high()],
        "lddw %r3, func(0xfffffffffffffffd)",
    );
}

#[test]
fn aliases_are_accepted() {
    assert_eq!(assemble("add64 %r1, 2").unwrap(), assemble("add %r1, 2").unwrap());
    assert_eq!(assemble("mov64 r1, r2").unwrap(), assemble("mov %r1, %r2").unwrap());
    assert_eq!(assemble("neg64 r3").unwrap(), assemble("neg %r3").unwrap());
    assert_eq!(assemble("arsh64 %r3, 1").unwrap(), assemble("arsh %r3, 1").unwrap());
    assert_eq!(assemble("gotol +70000").unwrap(), assemble("ja32 +70000").unwrap());
    assert_eq!(assemble("ldxw r0, [r1+4]").unwrap(), assemble("ldxw %r0, [%r1+4]").unwrap());
    // Only ALU64 mnemonics take the 64 suffix.
    check_error("jeq64 %r1, 1, +1", 1, 1, "unknown mnemonic `jeq64`");
    check_error("ldxw64 %r1, [%r1]", 1, 1, "unknown mnemonic");
    check_error("bswap1664 %r1", 1, 1, "unknown mnemonic");
    check_error("movsx86464 %r1, %r2", 1, 1, "unknown mnemonic");
}

#[test]
fn labels_resolve_to_slot_offsets() {
    let text = "\
start:
    mov %r0, 0          # comment
    jeq %r1, 5, done
    lddw %r2, 0x100000000
back: ja32 start
    call local sub
    lddw %r4, func(sub)
done:
    exit
sub: exit
end:
";
    let insns = assemble(text).unwrap();
    assert_eq!(insns.len(), 10);
    // jeq at slot 1 -> done at slot 8: 8 - 2.
    assert_eq!(insns[1], insn(Op::Jeq64Imm, 1, 0, 6, 5));
    assert_eq!(insns[3], high());
    // ja32 at slot 4 -> start at 0.
    assert_eq!(insns[4], insn(Op::Ja32, 0, 0, 0, -5));
    // call local at slot 5 -> sub at slot 9.
    assert_eq!(insns[5], insn(Op::CallLocal, 0, 1, 0, 3));
    // lddw func at slot 6 -> sub at 9, relative to slot 7.
    assert_eq!(insns[6], insn(Op::LddwFunc, 4, 4, 0, 2));
    assert_eq!(insns[7], high());
    let printed = disassemble(&insns);
    assert_eq!(assemble(&printed).unwrap(), insns);
    // A label may stand at the end of the program and may share a slot with others.
    let insns = assemble("a: b:\nja a\nja b\nja end\nend:").unwrap();
    assert_eq!(insns.iter().map(|i| i.off).collect::<Vec<_>>(), [-1, -2, 0]);
}

#[test]
fn canonical_text_prints_back_unchanged() {
    let text = "\
mov32 %r0, 0
lddw %r1, 0xdeadbeefcafe
ldxb %r2, [%r1+14]
jne %r2, 34525, +3
and32 %r2, 240
rsh %r2, -4
jslt32 %r2, %r3, -4
stxw [%r10-4], %r2
lock fetch or [%r10-8], %r2
lddw %r1, map_value(0x10000, -0x10000)
call 1
call local -11
call %r1
ldindb %r2, 23
exit
";
    let insns = assemble(text).unwrap();
    assert_eq!(disassemble(&insns), text);
    assert_eq!(assemble("").unwrap(), []);
    assert_eq!(disassemble(&[]), "");
}

#[test]
fn program_errors_name_line_and_column() {
    check_error("exit\nfoo %r1", 2, 1, "unknown mnemonic `foo`");
    check_error("  lock [%r1+0], %r2", 1, 3, "incomplete mnemonic `lock`");
    check_error("lock fetch [%r1+0], %r2", 1, 1, "continue with one of add, or, and, xor");
    check_error("add %r1", 1, 8, "missing an operand");
    check_error("add %r1,", 1, 9, "an operand after `,`");
    check_error("jeq %r1, 5", 1, 11, "expected a jump target");
    check_error("call local", 1, 11, "missing an operand");
    check_error("lddw %r1", 1, 9, "missing an operand");
    check_error("exit %r0", 1, 6, "`exit` takes no operands");
    check_error("neg %r1, %r2", 1, 10, "too many operands: `neg` takes 1");
    check_error("call 1, 2", 1, 9, "too many operands");
    check_error("add %r0 1", 1, 9, "`,` between operands");
    check_error(
        "add %r0, [%r1]",
        1,
        10,
        "a 32-bit immediate or a register here, found a memory operand",
    );
    check_error("ldxw %r0, %r1", 1, 11, "a memory operand like [%r1+4] here, found register %r1");
    check_error("mov %r0, foo", 1, 10, "found label `foo`");
    check_error("lddw %r0, foo", 1, 11, "64-bit immediate or map_fd(N)");
    check_error("stw [%r1+0], %r2", 1, 14, "32-bit immediate here");
    check_error("call local %r1", 1, 12, "jump target");
}

#[test]
fn register_errors() {
    check_error("mov %r11, 1", 1, 5, "bad register `%r11`");
    check_error("mov r11, 1", 1, 5, "bad register `r11`");
    check_error("mov %r-1, 1", 1, 5, "bad register `%r`");
    check_error("mov %x1, 1", 1, 5, "bad register `%x1`");
    check_error("mov %r01, 1", 1, 5, "bad register");
    check_error("mov %, 1", 1, 5, "register name after `%`");
    check_error("ldxw %r0, [%r1+%r2]", 1, 16, "a number after `+`");
    check_error("ldxw %r0, [5]", 1, 12, "base register");
    check_error("ldxw %r0, [%r99]", 1, 12, "bad register");
    check_error("ldxw %r0, [%r1+4", 1, 17, "expected `]` before end of line");
    check_error("ldxw %r0, [%r1 4]", 1, 16, "`]` or an offset like +4, found `4`");
    check_error("ja r3", 1, 4, "jump target");
}

#[test]
fn number_errors() {
    check_error("mov %r0, 0x100000000", 1, 10, "out of range");
    check_error("mov %r0, 4294967296", 1, 10, "out of range");
    check_error("mov %r0, -2147483649", 1, 10, "out of range");
    assert_eq!(assemble("mov %r0, 4294967295").unwrap()[0].imm, -1);
    // The 64-bit sign extension of a 32-bit value is that value (the suite writes -1 so).
    assert_eq!(assemble("jne %r1, 0xffffffffffffffff, +1").unwrap()[0].imm, -1);
    assert_eq!(assemble("mov32 %r0, 0xffffffff80000000").unwrap()[0].imm, -0x8000_0000);
    check_error("mov %r0, 0xffffffff7fffffff", 1, 10, "out of range");
    check_error("mov32 %r1, 0x876543210", 1, 12, "out of range");
    assert_eq!(assemble("mov %r0, -2147483648").unwrap()[0].imm, -0x8000_0000);
    check_error("lddw %r0, 0x10000000000000000", 1, 11, "does not fit in 64 bits");
    check_error("lddw %r0, -0x8000000000000001", 1, 11, "out of range");
    check_error("mov %r0, 5x", 1, 10, "bad number `5x`");
    check_error("mov %r0, 0x", 1, 10, "bad number");
    check_error("mov %r0, 1.5", 1, 10, "bad number");
    check_error("mov %r0, -", 1, 11, "a number after `-`");
    check_error("mov %r0, - foo", 1, 12, "a number after `-`");
    check_error("ldxw %r0, [%r1+32768]", 1, 15, "memory offset 32768 is out of range");
    check_error("stw [%r1-32769], 1", 1, 9, "memory offset -32769");
    assert_eq!(assemble("ldxw %r0, [%r1-32768]").unwrap()[0].off, -32768);
    check_error("ja +32768", 1, 4, "use ja32");
    check_error("jeq %r1, 1, -32769", 1, 13, "use ja32");
    check_error("ja32 +2147483648", 1, 6, "out of range");
    check_error("call local -2147483649", 1, 12, "out of range");
}

#[test]
fn label_errors() {
    check_error("ja nowhere\nexit", 1, 4, "undefined label `nowhere`");
    check_error("exit\n  jeq %r1, %r2, missing", 2, 17, "undefined label `missing`");
    check_error("lddw %r1, func(gone)", 1, 16, "undefined label `gone`");
    check_error("a:\nexit\n a: exit", 3, 2, "label `a` is already defined on line 1");
    check_error("r1: exit", 1, 1, "looks like a register");
    check_error("ja +x", 1, 5, "a number after `+`");
}

#[test]
fn long_jumps_through_labels_need_ja32() {
    let far = format!("ja end\n{}end: exit\n", "mov %r0, 0\n".repeat(40_000));
    let e = error(&far);
    assert_eq!((e.line, e.column), (1, 4));
    assert!(e.message.contains("40000 slots away") && e.message.contains("ja32"), "{e}");
    let far32 = far.replacen("ja end", "ja32 end", 1);
    let insns = assemble(&far32).unwrap();
    assert_eq!(insns[0], insn(Op::Ja32, 0, 0, 0, 40_000));
    let near = format!("ja end\n{}end: exit\n", "mov %r0, 0\n".repeat(32_767));
    assert_eq!(assemble(&near).unwrap()[0].off, 32_767);
}

#[test]
fn pseudo_source_errors() {
    check_error("lddw %r1, map(3)", 1, 11, "unknown lddw source `map(...)`");
    check_error("lddw %r1, map_value(3)", 1, 22, "missing argument: write map_value(N, OFF)");
    check_error("lddw %r1, map_fd()", 1, 18, "missing argument");
    check_error("lddw %r1, map_fd(1, 2)", 1, 21, "too many arguments");
    check_error("lddw %r1, map_fd(x)", 1, 18, "map_fd takes numbers, found label `x`");
    check_error("lddw %r1, map_value(1, 0x100000000)", 1, 24, "offset 4294967296 is out of range");
    check_error("lddw %r1, map_fd(1", 1, 19, "`,` or `)`");
    check_error("lddw %r1, func(%r1)", 1, 16, "a number or a label");
    check_error("mov %r1, map_fd(1)", 1, 10, "found map_fd(...)");
}

#[test]
fn lexical_errors_count_characters() {
    check_error("mov %r0, $1", 1, 10, "unexpected character `$`");
    check_error("é", 1, 1, "unexpected character `é`");
    check_error("# é\nmov %r0, 1 ; x", 2, 12, "unexpected character `;`");
    check_error("\tmov %r0, é", 1, 11, "unexpected character");
    check_error("mov %r0, 1 # é trailing comment is fine\nmov r0, @", 2, 9, "`@`");
    check_error("add %r1, 1\r\nsub %r1, %r12\r\n", 2, 10, "bad register");
    check_error(":", 1, 1, "expected an instruction or a label");
    check_error("5: exit", 1, 1, "expected an instruction or a label");
}

#[test]
fn error_display_and_render() {
    let source = "mov %r0, 1\n\tadd %r11, 1\nexit\n";
    let e = error(source);
    assert_eq!(e.to_string(), "line 2, column 6: bad register `%r11`: registers are %r0 to %r10");
    assert_eq!(e.render(source), " 2 | \tadd %r11, 1\n   | \t    ^");
    let e = error("add %r1");
    assert_eq!(e.render("add %r1"), " 1 | add %r1\n   |        ^");
    // A source that does not hold the line still renders, without panicking.
    assert_eq!(AsmError::new(12, 3, "x").render(""), " 12 | \n    |   ^");
    assert_eq!(AsmError::new(0, 0, "x").render("abc"), " 0 | abc\n   | ^");
    let as_error: &dyn std::error::Error = &e;
    assert!(as_error.to_string().starts_with("line 1, column 8: "));
}

#[test]
fn listing_shows_bytes_targets_and_labels() {
    let insns =
        assemble("lddw %r1, 0x1122334455667788\njeq %r1, 5, out\ncall local f\nout: exit\nf: exit")
            .unwrap();
    let expected = "   0: 18 01 00 00 88 77 66 55   lddw %r1, 0x1122334455667788
   1: 00 00 00 00 44 33 22 11
   2: 15 01 01 00 05 00 00 00   jeq %r1, 5, +1   ; -> 4
   3: 85 10 00 00 01 00 00 00   call local +1   ; -> 5
L4:
   4: 95 00 00 00 00 00 00 00   exit
L5:
   5: 95 00 00 00 00 00 00 00   exit
";
    assert_eq!(listing(&insns), expected);
    // Targets outside the program are shown but get no label line.
    let out = listing(&[insn(Op::Ja, 0, 0, -5, 0)]);
    assert_eq!(out, "   0: 05 00 fb ff 00 00 00 00   ja -5   ; -> -4\n");
    assert_eq!(listing(&[]), "");
    // A filler without its lddw (not a decodable program) still lists.
    assert!(listing(&[high()]).starts_with("   0: 00 00"));
    assert_eq!(disassemble_insn(&high()), "# second slot of lddw");
    assert_eq!(disassemble(&[high()]), "");
}

#[test]
fn raw_words() {
    // Each word is the little-endian u64 of its slot: the opcode is the low byte.
    let text = "0x00000001000000b4 # mov32 r0, 1\n\n  0x0000000000000095\t# exit\n";
    let raw = parse_raw_words(text).unwrap();
    assert_eq!(raw, [RawInsn::from_u64(0x0000_0001_0000_00b4), RawInsn::from_u64(0x95)]);
    assert_eq!(raw[0], RawInsn { opcode: 0xb4, dst: 0, src: 0, off: 0, imm: 1 });
    assert_eq!(decode(&raw).unwrap()[0], insn(Op::Mov32Imm, 0, 0, 0, 1));
    assert_eq!(parse_raw_words("0x18 0x0 0x95 149").unwrap().len(), 4);
    assert_eq!(parse_raw_words("# only a comment\n").unwrap(), []);
    let e = parse_raw_words("0x95\n  0x95 mov").unwrap_err();
    assert_eq!((e.line, e.column), (2, 8), "{e}");
    let e = parse_raw_words("0x95 0x10000000000000000").unwrap_err();
    assert_eq!((e.line, e.column), (1, 6));
    assert!(e.message.contains("64 bits"), "{e}");
    let e = parse_raw_words("é 0xzz").unwrap_err();
    assert_eq!((e.line, e.column), (1, 1));
    let e = parse_raw_words("0x95 0xzz").unwrap_err();
    assert!(e.message.contains("bad number"), "{e}");
}

#[test]
fn discriminators_come_from_the_table() {
    // Every row with a discriminator gets it from the table, never from the text.
    for spec in OPCODES {
        let want = normalized(spec, 1, 2, 3, 4);
        match spec.disc {
            Disc::Off(v) => assert_eq!(want.off, v),
            Disc::Imm(v) => assert_eq!(want.imm, i64::from(v)),
            Disc::Src(v) => assert_eq!(want.src, v),
            Disc::None => {}
        }
        let got = assemble(&disassemble_insn(&want)).unwrap();
        assert_eq!(got[0], want);
        if spec.operands == Operands::Nothing {
            assert_eq!(disassemble_insn(&want), spec.mnemonic);
        }
    }
}

#[test]
fn odd_inputs_do_not_panic() {
    for text in [
        "",
        "\n\n",
        "#",
        ":",
        "a:",
        "[",
        "]",
        "(",
        ")",
        "%",
        "+",
        "-",
        ",",
        "lddw",
        "lddw %r1,",
        "lddw %r1, func(",
        "lddw %r1, func()",
        "lddw %r1, func(,)",
        "ldxw %r0, [",
        "ldxw %r0, [%r1",
        "ldxw %r0, [%r1-",
        "call",
        "call kfunc",
        "call kfunc x",
        "lock",
        "lock fetch add",
        "jeq %r1, %r2, 99999999999999999999",
        "ja 18446744073709551615",
        "ja -18446744073709551615",
        "mov %r0, -18446744073709551615",
        "\u{0}",
        "a:b:c:",
        "a: b: exit\nja a",
        "\r",
        "mov\t%r0,\t1",
        "lddw %r1, map_value(,)",
    ] {
        if let Ok(insns) = assemble(text) {
            assert_eq!(assemble(&disassemble(&insns)).unwrap(), insns, "{text:?}");
        }
        let _ = parse_raw_words(text);
    }
}

#[test]
fn conformance_suite_aliases() {
    let same = |a: &str, b: &str| {
        assert_eq!(assemble(a).unwrap_or_else(|e| panic!("{a}: {e}")), assemble(b).unwrap(), "{a}")
    };
    same("swap16 %r1", "bswap16 %r1");
    same("swap32 r1", "bswap32 %r1");
    same("swap64 %r1", "bswap64 %r1");
    same("ldxsb %r0, [%r1+2]", "ldxbsx %r0, [%r1+2]");
    same("ldxsh %r0, [%r1-2]", "ldxhsx %r0, [%r1-2]");
    same("ldxsw %r0, [%r1]", "ldxwsx %r0, [%r1+0]");
    same("callx %r2", "call %r2");
    same("call helper 5", "call 5");
    same("call helper %r3", "call %r3");
    same("call runtime 7", "call kfunc 7");
    same("lock fetch xchg [%r1+8], %r2", "lock xchg [%r1+8], %r2");
    same("lock fetch cmpxchg32 [%r1], %r2", "lock cmpxchg32 [%r1+0], %r2");
    same("call local f\nf: exit", "call local +0\nexit");
    // The disassembler prints the table's names.
    assert_eq!(
        disassemble(&assemble("swap16 %r1\nldxsb %r0, [%r1+2]").unwrap()),
        "bswap16 %r1\nldxbsx %r0, [%r1+2]\n"
    );
    // `callx` is only the register call; its errors name the alias as written.
    check_error("callx 5", 1, 7, "`callx` expects a register here");
    check_error("call helper", 1, 12, "`call helper` is missing an operand");
    check_error("swap8 %r1", 1, 1, "unknown mnemonic `swap8`");
    check_error("lock fetch %r1", 1, 1, "incomplete mnemonic `lock fetch`");
}

#[test]
fn exit_names_the_first_exit_instruction() {
    // The suite's convention: with no `exit:` label, `exit` is the first `exit` instruction.
    let text = "mov %r0, 1\njeq %r1, 0, exit\nlddw %r0, 2\nexit\nja exit\nexit\n";
    let insns = assemble(text).unwrap();
    assert_eq!(insns[1], insn(Op::Jeq64Imm, 1, 0, 2, 0));
    assert_eq!(insns[5], insn(Op::Ja, 0, 0, -2, 0));
    // A backward jump to it too, and the first exit even when a later one exists.
    let insns = assemble("exit\njne %r0, 0, exit\nexit").unwrap();
    assert_eq!(insns[1], insn(Op::Jne64Imm, 0, 0, -2, 0));
    // A written `exit:` label wins.
    let insns = assemble("ja exit\nexit\nexit: mov %r0, 2\nexit").unwrap();
    assert_eq!(insns[0], insn(Op::Ja, 0, 0, 1, 0));
    // Without any exit instruction, the error says what `exit` would have meant.
    check_error("ja exit\nmov %r0, 1", 1, 4, "the program has none");
}
