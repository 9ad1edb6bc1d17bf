//! Round-trip properties of the eBPF text assembler, disassembler, decoder and encoder, on
//! random programs built from every row of the opcode table, on random and mutated raw slots,
//! and on random text (which must never make the assembler panic).

use proptest::prelude::*;
use weir_isa::asm::{assemble, disassemble, disassemble_insn, listing, parse_raw_words};
use weir_isa::ebpf::{decode, encode, Disc, Insn, Op, OpSpec, Operands, RawInsn, OPCODES};

/// Which fields a shape gives meaning to (dst, src, off, imm), written from the operand
/// syntax rather than taken from the codec, so that the codec is checked against it.
fn used_fields(shape: Operands) -> (bool, bool, bool, bool) {
    use Operands::*;
    match shape {
        DstImm | DstImm64 | Pseudo(_) => (true, false, false, true),
        DstSrc => (true, true, false, false),
        Dst | CallReg => (true, false, false, false),
        JmpOff => (false, false, true, false),
        JmpImm | CallImm | CallLocal | Abs => (false, false, false, true),
        DstImmOff | StoreImm => (true, false, true, true),
        DstSrcOff | Load | StoreReg => (true, true, true, false),
        Nothing => (false, false, false, false),
        Ind => (false, true, false, true),
    }
}

/// The decoded form of a row with these field values.
fn normalized(spec: &OpSpec, dst: u8, src: u8, off: i16, imm32: i32, imm64: i64) -> Insn {
    let (use_dst, use_src, use_off, use_imm) = used_fields(spec.operands);
    let wide = matches!(spec.operands, Operands::DstImm64 | Operands::Pseudo(_));
    let mut insn = Insn {
        op: spec.op,
        dst: if use_dst { dst } else { 0 },
        src: if use_src { src } else { 0 },
        off: if use_off { off } else { 0 },
        imm: match (use_imm, wide) {
            (false, _) => 0,
            (true, false) => i64::from(imm32),
            (true, true) => imm64,
        },
    };
    match spec.disc {
        Disc::None => {}
        Disc::Off(v) => insn.off = v,
        Disc::Imm(v) => insn.imm = i64::from(v),
        Disc::Src(v) => insn.src = v,
    }
    insn
}

fn arb_imm32() -> impl Strategy<Value = i32> {
    prop_oneof![any::<i32>(), -70_000..70_000i32, Just(i32::MIN), Just(i32::MAX)]
}

fn arb_imm64() -> impl Strategy<Value = i64> {
    prop_oneof![
        any::<i64>(),
        -70_000..70_000i64,
        (0..=u32::MAX).prop_map(i64::from),
        any::<i32>().prop_map(|v| i64::from(v as u32)),
        Just(i64::MIN),
    ]
}

fn arb_off() -> impl Strategy<Value = i16> {
    prop_oneof![any::<i16>(), -5..5i16]
}

fn arb_insn() -> impl Strategy<Value = Insn> {
    (prop::sample::select(OPCODES), 0u8..=10, 0u8..=10, arb_off(), arb_imm32(), arb_imm64())
        .prop_map(|(spec, dst, src, off, imm32, imm64)| {
            normalized(&spec, dst, src, off, imm32, imm64)
        })
}

/// A slot-indexed program ending in `exit`.
fn arb_program() -> impl Strategy<Value = Vec<Insn>> {
    prop::collection::vec(arb_insn(), 0..24).prop_map(|body| {
        let mut insns = Vec::new();
        for insn in body {
            insns.push(insn);
            if insn.op.is_lddw() {
                insns.push(Insn::new(Op::LddwHigh, 0, 0, 0, 0));
            }
        }
        insns.push(Insn::new(Op::Exit, 0, 0, 0, 0));
        insns
    })
}

fn arb_slot() -> impl Strategy<Value = RawInsn> {
    let opcodes: Vec<u8> = OPCODES.iter().map(|s| s.opcode).chain([0]).collect();
    (
        prop_oneof![4 => prop::sample::select(opcodes), 1 => any::<u8>()],
        prop_oneof![2 => Just(0u8), 2 => 0u8..=10, 1 => 0u8..16],
        prop_oneof![2 => Just(0u8), 2 => 0u8..=10, 1 => 0u8..16],
        prop_oneof![
            3 => Just(0i16),
            1 => prop::sample::select(vec![1i16, 8, 16, 32]),
            1 => any::<i16>()
        ],
        prop_oneof![
            3 => Just(0i32),
            1 => prop::sample::select(vec![
                1i32, 16, 32, 64, 0x40, 0x41, 0x50, 0x51, 0xa0, 0xa1, 0xe1, 0xf1
            ]),
            1 => any::<i32>()
        ],
    )
        .prop_map(|(opcode, dst, src, off, imm)| RawInsn { opcode, dst, src, off, imm })
}

/// One change to a field of an encoded program: (slot, field, value).
fn arb_mutation() -> impl Strategy<Value = (usize, u8, i64)> {
    (any::<usize>(), 0u8..5, prop_oneof![-2..70i64, any::<i32>().prop_map(i64::from)])
}

fn mutate(slots: &mut [RawInsn], (index, field, value): (usize, u8, i64)) {
    let len = slots.len();
    if len == 0 {
        return;
    }
    let Some(slot) = slots.get_mut(index % len) else { return };
    match field {
        0 => slot.opcode = value as u8,
        1 => slot.dst = (value as u8) & 0x0f,
        2 => slot.src = (value as u8) & 0x0f,
        3 => slot.off = value as i16,
        _ => slot.imm = value as i32,
    }
}

const TOKENS: &[&str] = &[
    "mov",
    "add32",
    "lddw",
    "ja",
    "ja32",
    "jeq",
    "call",
    "local",
    "kfunc",
    "lock",
    "fetch",
    "exit",
    "ldxw",
    "stw",
    "stxdw",
    "neg",
    "be16",
    "map_fd",
    "map_value",
    "func",
    "%r1",
    "%r10",
    "%r11",
    "r3",
    "%",
    "[",
    "]",
    "(",
    ")",
    ",",
    ":",
    "+",
    "-",
    "0",
    "1",
    "0x7fffffff",
    "0xffffffff",
    "4294967296",
    "99999999999999999999",
    "32768",
    "-32769",
    "L1",
    "L1:",
    "start:",
    "#",
    "\n",
    "\t",
    " ",
    "é",
    "\r\n",
];

fn arb_token_text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..40).prop_map(|t| t.join(" "))
}

/// The text of a random program with one random token spliced in somewhere.
fn arb_near_valid_text() -> impl Strategy<Value = String> {
    (arb_program(), any::<usize>(), prop::sample::select(TOKENS)).prop_map(|(p, at, token)| {
        let text = disassemble(&p);
        let mut cut = at % (text.len() + 1);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}{token}{}", &text[..cut], &text[cut..])
    })
}

/// Assembles any text: an error must carry a real place; a success must survive a text
/// round trip.
fn check_any_text(text: &str) -> Result<(), TestCaseError> {
    match assemble(text) {
        Ok(insns) => {
            let printed = disassemble(&insns);
            let again = assemble(&printed).map_err(|e| TestCaseError::fail(format!("{e}")))?;
            prop_assert_eq!(again, insns);
        }
        Err(e) => {
            prop_assert!(e.line >= 1 && e.column >= 1, "{e:?}");
            prop_assert!(e.line <= text.lines().count().max(1), "{e:?}");
            let _ = e.render(text);
        }
    }
    if let Err(e) = parse_raw_words(text) {
        prop_assert!(e.line >= 1 && e.column >= 1, "{e:?}");
    }
    Ok(())
}

proptest! {
    /// (1) Assembling the disassembly of a decodable program gives the program back.
    #[test]
    fn assemble_inverts_disassemble(p in arb_program()) {
        let text = disassemble(&p);
        let back = assemble(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(back, p);
    }

    /// (2) Disassembly is canonical: printing what was read from it gives the same text.
    #[test]
    fn disassembly_is_a_fixed_point(p in arb_program()) {
        let text = disassemble(&p);
        let back = assemble(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(disassemble(&back), text.clone());
        // Every line is one instruction, the same text disassemble_insn gives.
        let lines: Vec<String> =
            p.iter().filter(|i| i.op != Op::LddwHigh).map(disassemble_insn).collect();
        prop_assert_eq!(text.lines().collect::<Vec<_>>(), lines);
    }

    /// (3a) Decoding the encoding of a program gives the program back.
    #[test]
    fn decode_inverts_encode(p in arb_program()) {
        let slots = encode(&p);
        prop_assert_eq!(slots.len(), p.len());
        let back = decode(&slots).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(back, p);
    }

    /// (3b) Whatever random slots decode to encodes back to the same slots.
    #[test]
    fn encode_inverts_decode_on_random_slots(slots in prop::collection::vec(arb_slot(), 1..5)) {
        if let Ok(insns) = decode(&slots) {
            prop_assert_eq!(encode(&insns), slots);
            let back = assemble(&disassemble(&insns)).map_err(|e| TestCaseError::fail(format!("{e}")))?;
            prop_assert_eq!(back, insns);
        }
    }

    /// (3c) The same on valid programs with a few fields changed, which reach the decoder's
    /// edge cases (discriminators, unused fields, lddw halves) far more often.
    #[test]
    fn encode_inverts_decode_on_mutated_programs(
        p in arb_program(),
        mutations in prop::collection::vec(arb_mutation(), 1..4),
    ) {
        let mut slots = encode(&p);
        for m in mutations {
            mutate(&mut slots, m);
        }
        if let Ok(insns) = decode(&slots) {
            prop_assert_eq!(encode(&insns), slots);
            let back = assemble(&disassemble(&insns)).map_err(|e| TestCaseError::fail(format!("{e}")))?;
            prop_assert_eq!(back, insns);
        }
    }

    /// (4) The assembler never panics, whatever the text.
    #[test]
    fn assemble_never_panics_on_any_string(text in ".{0,200}") {
        check_any_text(&text)?;
    }

    #[test]
    fn assemble_never_panics_on_token_soup(text in arb_token_text()) {
        check_any_text(&text)?;
    }

    #[test]
    fn assemble_never_panics_on_near_valid_text(text in arb_near_valid_text()) {
        check_any_text(&text)?;
    }

    /// The listing has one line per slot plus one per label, on any instructions at all.
    #[test]
    fn listing_covers_every_slot(p in arb_program()) {
        let out = listing(&p);
        let slot_lines = out.lines().filter(|l| !l.starts_with('L')).count();
        prop_assert_eq!(slot_lines, p.len());
        for (pc, line) in out.lines().filter(|l| !l.starts_with('L')).enumerate() {
            let expected_prefix = format!("{pc:>4}: ");
            prop_assert!(line.starts_with(&expected_prefix), "{}", line);
        }
    }

    /// Raw words are the little-endian u64 of each slot.
    #[test]
    fn raw_words_read_back_slots(p in arb_program()) {
        let slots = encode(&p);
        let text: String = slots.iter().map(|s| format!("{:#018x}  # slot\n", s.to_u64())).collect();
        let back = parse_raw_words(&text).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(back, slots);
    }
}
