//! Memory: loads and stores of every width, unaligned access, both ends of every region,
//! context write rules, packet pointers through context fields, atomics, legacy packet
//! loads, and the stack as a run leaves it.

use crate::common::*;
use weir_interp::guest::{CTX_BASE, MEM_BASE, PACKET_BASE, STACK_BASE};
use weir_interp::{Config, Input, Interpreter};
use weir_isa::ebpf::Op;
use weir_program::abi::{self, Bindings};
use weir_program::{Trap, TrapCode};

fn oob(pc: usize, addr: u64, size: u32) -> Result<u64, Trap> {
    Err(Trap::memory(TrapCode::OutOfBounds, pc, addr, size))
}

fn read_only(pc: usize, addr: u64, size: u32) -> Result<u64, Trap> {
    Err(Trap::memory(TrapCode::ReadOnly, pc, addr, size))
}

const BYTES: [u8; 10] = [0x81, 0x92, 0xa3, 0xb4, 0xc5, 0xd6, 0xe7, 0xf8, 0x09, 0x1a];

#[test]
fn loads_are_little_endian_and_zero_extend() {
    let load = |op, off| run_mem(&[mem(op, 0, 1, off), exit()], &mut BYTES.clone()).unwrap();
    assert_eq!(load(Op::LdxB, 0), 0x81);
    assert_eq!(load(Op::LdxH, 0), 0x9281);
    assert_eq!(load(Op::LdxW, 0), 0xb4a3_9281);
    assert_eq!(load(Op::LdxDw, 0), 0xf8e7_d6c5_b4a3_9281);
}

#[test]
fn sign_extending_loads() {
    let load = |op, off| run_mem(&[mem(op, 0, 1, off), exit()], &mut BYTES.clone()).unwrap();
    assert_eq!(load(Op::LdxBSx, 0), 0xffff_ffff_ffff_ff81);
    assert_eq!(load(Op::LdxBSx, 8), 0x09);
    assert_eq!(load(Op::LdxHSx, 0), 0xffff_ffff_ffff_9281);
    assert_eq!(load(Op::LdxHSx, 8), 0x1a09);
    assert_eq!(load(Op::LdxWSx, 0), 0xffff_ffff_b4a3_9281);
    assert_eq!(load(Op::LdxWSx, 6), 0x1a09_f8e7);
}

#[test]
fn unaligned_loads_and_stores() {
    let load = |op, off| run_mem(&[mem(op, 0, 1, off), exit()], &mut BYTES.clone()).unwrap();
    assert_eq!(load(Op::LdxH, 1), 0xa392);
    assert_eq!(load(Op::LdxW, 3), 0xe7d6_c5b4);
    assert_eq!(load(Op::LdxDw, 1), 0x09f8_e7d6_c5b4_a392);
    assert_eq!(load(Op::LdxDw, 2), 0x1a09_f8e7_d6c5_b4a3);
    let mut m = [0u8; 12];
    let insns = [lddw(2, 0x1122_3344_5566_7788), mem(Op::StxDw, 1, 2, 3), mov(0, 0), exit()];
    run_mem(&insns, &mut m).unwrap();
    assert_eq!(m, [0, 0, 0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0]);
}

#[test]
fn stores_of_every_width() {
    let mut m = [0xeeu8; 24];
    let insns = [
        st(Op::StB, 1, 0, 0x1ff),   // truncated to 0xff
        st(Op::StH, 1, 1, 0x12345), // truncated to 0x2345
        st(Op::StW, 1, 3, -2),      // 0xffff_fffe
        st(Op::StDw, 1, 7, -2),     // sign-extended to 64 bits
        lddw(2, 0x0102_0304_0506_0708),
        mem(Op::StxB, 1, 2, 15),
        mem(Op::StxH, 1, 2, 16),
        mem(Op::StxW, 1, 2, 18),
        mov(0, 0),
        exit(),
    ];
    run_mem(&insns, &mut m).unwrap();
    let want = [
        0xff, 0x45, 0x23, 0xfe, 0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0x08, 0x08, 0x07, 0x08, 0x07, 0x06, 0x05, 0xee, 0xee,
    ];
    assert_eq!(m, want);
    let mut m = [0u8; 8];
    run_mem(&[lddw(2, u64::MAX - 1), mem(Op::StxDw, 1, 2, 0), mov(0, 0), exit()], &mut m).unwrap();
    assert_eq!(m, (u64::MAX - 1).to_le_bytes());
}

#[test]
fn mem_region_bounds_at_both_ends() {
    let mut m = [7u8; 16];
    assert_eq!(run_mem(&[mem(Op::LdxB, 0, 1, -1), exit()], &mut m), oob(0, MEM_BASE - 1, 1));
    assert_eq!(run_mem(&[mem(Op::LdxB, 0, 1, 0), exit()], &mut m), Ok(7));
    assert_eq!(run_mem(&[mem(Op::LdxDw, 0, 1, 8), exit()], &mut m), Ok(0x0707_0707_0707_0707));
    assert_eq!(run_mem(&[mem(Op::LdxDw, 0, 1, 9), exit()], &mut m), oob(0, MEM_BASE + 9, 8));
    assert_eq!(run_mem(&[mem(Op::LdxB, 0, 1, 16), exit()], &mut m), oob(0, MEM_BASE + 16, 1));
    let store = [st(Op::StW, 1, 13, 1), exit()];
    assert_eq!(run_mem(&store, &mut m), oob(0, MEM_BASE + 13, 4));
    // Empty memory: r1 = 0, r2 = 0, and nothing is addressable.
    let regs = [reg(Op::Mov64Reg, 0, 1), reg(Op::Add64Reg, 0, 2), exit()];
    assert_eq!(run_mem(&regs, &mut []), Ok(0));
    assert_eq!(
        run_mem(&[lddw(1, MEM_BASE), mem(Op::LdxB, 0, 1, 0), exit()], &mut []),
        oob(2, MEM_BASE, 1)
    );
}

#[test]
fn entry_registers_in_the_conformance_convention() {
    let mut m = [0u8; 5];
    assert_eq!(run_mem(&[reg(Op::Mov64Reg, 0, 1), exit()], &mut m), Ok(MEM_BASE));
    assert_eq!(run_mem(&[reg(Op::Mov64Reg, 0, 2), exit()], &mut m), Ok(5));
    let i = interp(&[reg(Op::Mov64Reg, 0, 10), exit()]);
    let mut cache = i.cache();
    // Frame 0 is the top of the 8-frame stack region.
    assert_eq!(i.run_mem(&mut cache, &mut m), Ok(STACK_BASE + 8 * 512));
    assert_eq!(i.stack_top(), STACK_BASE + 8 * 512);
}

#[test]
fn stack_bounds_at_both_ends() {
    // Frame 0 is the top 512 bytes of the stack region; below it lie the frames of calls
    // not made, which it may not touch, and above r10 there is nothing.
    let top = STACK_BASE + 8 * 512;
    let load = |off| run(&[mem(Op::LdxB, 0, 10, off), exit()]);
    assert_eq!(load(-512), Ok(0));
    assert_eq!(load(-513), oob(0, top - 513, 1));
    assert_eq!(load(-1), Ok(0));
    assert_eq!(load(0), oob(0, top, 1));
    let store = |op, off| run(&[st(op, 10, off, 1), mov(0, 0), exit()]);
    assert_eq!(store(Op::StDw, -8), Ok(0));
    assert_eq!(store(Op::StDw, -516), oob(0, top - 516, 8));
    assert_eq!(store(Op::StDw, -4), oob(0, top - 4, 8));
}

#[test]
fn stack_size_and_depth_come_from_the_config() {
    let config = Config { stack_size: 64, max_call_depth: 2, ..Config::default() };
    // Two frames of 64 bytes: frame 0's r10 is the region's end, its frame the 64 below.
    let i = interp_with(&[mem(Op::LdxB, 0, 10, -64), exit()], Bindings::new(), config);
    let mut cache = i.cache();
    assert_eq!(cache.stack().len(), 128);
    assert_eq!(i.run_mem(&mut cache, &mut []), Ok(0));
    let i = interp_with(&[mem(Op::LdxB, 0, 10, 0), exit()], Bindings::new(), config);
    assert_eq!(i.run_mem(&mut cache, &mut []), oob(0, STACK_BASE + 128, 1));
    let i = interp_with(&[mem(Op::LdxB, 0, 10, -65), exit()], Bindings::new(), config);
    assert_eq!(i.run_mem(&mut cache, &mut []), oob(0, STACK_BASE + 63, 1));
}

#[test]
fn the_stack_is_visible_after_a_run_and_zeroed_before_the_next() {
    let insns = [
        mem(Op::LdxDw, 0, 10, -8), // what the previous run left
        lddw(1, 0x1122_3344_5566_7788),
        mem(Op::StxDw, 10, 1, -8),
        exit(),
    ];
    let i = interp(&insns);
    let mut cache = i.cache();
    assert_eq!(i.run_mem(&mut cache, &mut []), Ok(0));
    assert_eq!(cache.stack()[4088..4096], 0x1122_3344_5566_7788u64.to_le_bytes());
    assert_eq!(i.run_mem(&mut cache, &mut []), Ok(0));
    // A cache from another interpreter (other stack size) is resized, not trusted.
    let small =
        interp_with(&insns, Bindings::new(), Config { stack_size: 16, ..Config::default() });
    let mut other = small.cache();
    assert_eq!(i.run_mem(&mut other, &mut []), Ok(0));
    assert_eq!(other.stack().len(), 8 * 512);
}

#[test]
fn context_without_layout_is_read_only() {
    let mut ctx = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let insns = [mem(Op::LdxW, 0, 1, 4), exit()];
    assert_eq!(run_input(&insns, Bindings::new(), Input::new().ctx(&mut ctx)), Ok(0x0807_0605));
    let insns = [st(Op::StB, 1, 0, 9), mov(0, 0), exit()];
    assert_eq!(
        run_input(&insns, Bindings::new(), Input::new().ctx(&mut ctx)),
        read_only(0, CTX_BASE, 1)
    );
    let insns = [mov(2, 1), mem(Op::AtomicAdd32, 1, 2, 0), mov(0, 0), exit()];
    assert_eq!(
        run_input(&insns, Bindings::new(), Input::new().ctx(&mut ctx)),
        read_only(1, CTX_BASE, 4)
    );
    assert_eq!(ctx, [1, 2, 3, 4, 5, 6, 7, 8]);
}

#[test]
fn context_bounds_at_both_ends() {
    let mut ctx = [0xabu8; 16];
    let load = |ctx: &mut [u8], op, off| {
        run_input(&[mem(op, 0, 1, off), exit()], Bindings::new(), Input::new().ctx(ctx))
    };
    assert_eq!(load(&mut ctx, Op::LdxB, -1), oob(0, CTX_BASE - 1, 1));
    assert_eq!(load(&mut ctx, Op::LdxB, 15), Ok(0xab));
    assert_eq!(load(&mut ctx, Op::LdxW, 13), oob(0, CTX_BASE + 13, 4));
    // Out-of-bounds wins over read-only: the access is checked first.
    let insns = [st(Op::StW, 1, 14, 0), exit()];
    assert_eq!(
        run_input(&insns, Bindings::new(), Input::new().ctx(&mut ctx)),
        oob(0, CTX_BASE + 14, 4)
    );
}

#[test]
fn context_writes_only_inside_writable_fields() {
    let mut bindings = Bindings::new();
    bindings.context = Some(&abi::SOCKET_FILTER);
    let cb = abi::SOCKET_FILTER.field("cb").unwrap();
    assert!(cb.writable);
    let (start, end) = (cb.offset as i16, (cb.offset + cb.size) as i16);
    let store = |off: i16, op| {
        let mut ctx = [0u8; 192];
        let r = run_input(
            &[st(op, 1, off, -1), mov(0, 0), exit()],
            bindings.clone(),
            Input::new().ctx(&mut ctx),
        );
        (r, ctx)
    };
    let (r, ctx) = store(start, Op::StW);
    assert_eq!(r, Ok(0));
    assert_eq!(ctx[start as usize..start as usize + 4], [0xff; 4]);
    assert_eq!(store(end - 8, Op::StDw).0, Ok(0));
    assert_eq!(store(end - 4, Op::StDw).0, read_only(0, CTX_BASE + (end - 4) as u64, 8));
    assert_eq!(store(start - 1, Op::StH).0, read_only(0, CTX_BASE + (start - 1) as u64, 2));
    assert_eq!(store(0, Op::StW).0, read_only(0, CTX_BASE, 4)); // `len` is not writable
}

#[test]
fn packet_pointers_reach_the_packet_through_the_context() {
    let mut bindings = Bindings::new();
    bindings.context = Some(&abi::XDP);
    let mut packet = [0x10u8, 0x20, 0x30, 0x40, 0x50];
    let mut ctx = [0u8; 24];
    // r2 = data, r3 = data_end; r0 = (data_end - data) << 8 | last byte
    let insns = [
        mem(Op::LdxW, 2, 1, 0),
        mem(Op::LdxW, 3, 1, 4),
        reg(Op::Mov64Reg, 0, 3),
        reg(Op::Sub64Reg, 0, 2),
        imm(Op::Lsh64Imm, 0, 8),
        mem(Op::LdxB, 4, 3, -1),
        reg(Op::Or64Reg, 0, 4),
        exit(),
    ];
    let r = run_input(&insns, bindings.clone(), Input::new().ctx(&mut ctx).packet(&mut packet));
    assert_eq!(r, Ok(0x550));
    assert_eq!(ctx[0..4], (PACKET_BASE as u32).to_le_bytes());
    assert_eq!(ctx[4..8], (PACKET_BASE as u32 + 5).to_le_bytes());
    assert_eq!(ctx[8..12], (PACKET_BASE as u32).to_le_bytes(), "data_meta = data");

    // Packet bounds at both ends, and packet writes.
    let at = |off: i16| [mem(Op::LdxW, 2, 1, 0), mem(Op::LdxB, 0, 2, off), exit()];
    let go = |insns: &[weir_isa::ebpf::Insn], packet: &mut [u8]| {
        let mut ctx = [0u8; 24];
        run_input(insns, bindings.clone(), Input::new().ctx(&mut ctx).packet(packet))
    };
    assert_eq!(go(&at(-1), &mut packet), oob(1, PACKET_BASE - 1, 1));
    assert_eq!(go(&at(4), &mut packet), Ok(0x50));
    assert_eq!(go(&at(5), &mut packet), oob(1, PACKET_BASE + 5, 1));
    let write = [mem(Op::LdxW, 2, 1, 0), st(Op::StH, 2, 3, 0x0102), mov(0, 0), exit()];
    assert_eq!(go(&write, &mut packet), Ok(0));
    assert_eq!(packet, [0x10, 0x20, 0x30, 0x02, 0x01]);
    // Without a packet the fields still hold an empty range.
    let mut ctx = [0u8; 24];
    let insns = [mem(Op::LdxW, 2, 1, 0), mem(Op::LdxW, 0, 1, 4), reg(Op::Sub64Reg, 0, 2), exit()];
    assert_eq!(run_input(&insns, bindings.clone(), Input::new().ctx(&mut ctx)), Ok(0));
}

#[test]
fn a_context_too_short_for_its_layout_is_refused() {
    let mut bindings = Bindings::new();
    bindings.context = Some(&abi::XDP);
    let mut ctx = [0u8; 6]; // data_end at offset 4 needs 8 bytes
    let r = run_input(&[mov(0, 0), exit()], bindings, Input::new().ctx(&mut ctx));
    assert_eq!(r, oob(0, CTX_BASE + 4, 4));
}

#[test]
fn context_entry_registers() {
    let mut ctx = [0u8; 12];
    let mut m = [0u8; 3];
    let insns = [reg(Op::Mov64Reg, 0, 1), imm(Op::Lsh64Imm, 0, 8), reg(Op::Or64Reg, 0, 2), exit()];
    let r = run_input(&insns, Bindings::new(), Input::new().ctx(&mut ctx).mem(&mut m));
    assert_eq!(r, Ok((CTX_BASE << 8) | 12));
    let r = run_input(&insns, Bindings::new(), Input::new().mem(&mut m));
    assert_eq!(r, Ok((MEM_BASE << 8) | 3));
    // Memory is still reachable at its base when a context is given.
    let insns = [lddw(3, MEM_BASE), st(Op::StB, 3, 2, 0x77), mov(0, 0), exit()];
    run_input(&insns, Bindings::new(), Input::new().ctx(&mut ctx).mem(&mut m)).unwrap();
    assert_eq!(m, [0, 0, 0x77]);
}

/// `[r10-8] = init; r1 = operand; r0 = comparand; atomic [r10-8], r1; [r10-16] = r1`:
/// returns (memory word, r1, r0) after the atomic.
fn atomic_with(op: Op, init: u64, operand: u64, comparand: u64) -> (u64, u64, u64) {
    let insns = [
        lddw(1, init),
        mem(Op::StxDw, 10, 1, -8),
        lddw(1, operand),
        lddw(0, comparand),
        mem(op, 10, 1, -8),
        mem(Op::StxDw, 10, 1, -16),
        exit(),
    ];
    let i = interp(&insns);
    let mut cache = i.cache();
    let r0 = i.run_mem(&mut cache, &mut []).unwrap();
    let word = |at: usize| u64::from_le_bytes(cache.stack()[at..at + 8].try_into().unwrap());
    (word(4088), word(4080), r0)
}

#[test]
fn atomics_64() {
    let (a, b) = (0xf0f0_0000_0000_00ffu64, 0x0ff0_0000_0000_0f01u64);
    let r0 = 0x5555;
    // (op, memory after, r1 after)
    let cases = [
        (Op::AtomicAdd64, a.wrapping_add(b), b),
        (Op::AtomicOr64, a | b, b),
        (Op::AtomicAnd64, a & b, b),
        (Op::AtomicXor64, a ^ b, b),
        (Op::AtomicFetchAdd64, a.wrapping_add(b), a),
        (Op::AtomicFetchOr64, a | b, a),
        (Op::AtomicFetchAnd64, a & b, a),
        (Op::AtomicFetchXor64, a ^ b, a),
        (Op::AtomicXchg64, b, a),
    ];
    for (op, want_mem, want_r1) in cases {
        assert_eq!(atomic_with(op, a, b, r0), (want_mem, want_r1, r0), "{op:?}");
    }
    // cmpxchg: r0 gets the old value; memory changes only when r0 matched.
    assert_eq!(atomic_with(Op::AtomicCmpXchg64, a, b, a), (b, b, a));
    assert_eq!(atomic_with(Op::AtomicCmpXchg64, a, b, a ^ 1), (a, b, a));
}

#[test]
fn atomics_32() {
    let high = 0xaaaa_bbbb_0000_0000u64; // upper half of the 8-byte slot: untouched
    let (a, b) = (0xf000_00ffu64, 0x1_0ff0_0f01u64); // b's bit 32 is ignored
    let (a32, b32) = (a as u32, b as u32);
    let r0 = 0x5555;
    let cases = [
        (Op::AtomicAdd32, a32.wrapping_add(b32), b),
        (Op::AtomicOr32, a32 | b32, b),
        (Op::AtomicAnd32, a32 & b32, b),
        (Op::AtomicXor32, a32 ^ b32, b),
        // Fetch forms zero-extend the old 32-bit value into src.
        (Op::AtomicFetchAdd32, a32.wrapping_add(b32), a),
        (Op::AtomicFetchOr32, a32 | b32, a),
        (Op::AtomicFetchAnd32, a32 & b32, a),
        (Op::AtomicFetchXor32, a32 ^ b32, a),
        (Op::AtomicXchg32, b32, a),
    ];
    for (op, want_low, want_r1) in cases {
        let got = atomic_with(op, high | a, b, r0);
        assert_eq!(got, (high | u64::from(want_low), want_r1, r0), "{op:?}");
    }
    // cmpxchg32 compares the low halves and zero-extends the old value into r0.
    let got = atomic_with(Op::AtomicCmpXchg32, high | a, b, 0xdead_0000_0000_0000 | a);
    assert_eq!(got, (high | u64::from(b32), b, a));
    let got = atomic_with(Op::AtomicCmpXchg32, high | a, b, a + 1);
    assert_eq!(got, (high | a, b, a));
}

#[test]
fn atomics_check_bounds() {
    let insns = [mov(2, 1), mem(Op::AtomicFetchAdd64, 10, 2, 0), exit()];
    let i = interp_with(&insns, Bindings::new(), Config { max_call_depth: 1, ..Config::default() });
    let mut cache = i.cache();
    assert_eq!(i.run_mem(&mut cache, &mut []), oob(1, STACK_BASE + 512, 8));
    let mut m = [0u8; 6];
    assert_eq!(
        run_mem(&[mov(2, 1), mem(Op::AtomicAdd32, 1, 2, 3), exit()], &mut m),
        oob(1, MEM_BASE + 3, 4)
    );
}

#[test]
fn legacy_packet_loads_read_big_endian() {
    let mut packet = [0x11u8, 0x22, 0x33, 0x44, 0x55];
    let go = |insns: &[weir_isa::ebpf::Insn], packet: &mut [u8]| {
        run_input(insns, Bindings::new(), Input::new().packet(packet))
    };
    assert_eq!(go(&[imm(Op::LdAbsB, 0, 1), exit()], &mut packet), Ok(0x22));
    assert_eq!(go(&[imm(Op::LdAbsH, 0, 1), exit()], &mut packet), Ok(0x2233));
    assert_eq!(go(&[imm(Op::LdAbsW, 0, 1), exit()], &mut packet), Ok(0x2233_4455));
    let ind = |op, base: i64, k: i64| [mov(6, base), Insn2::ind(op, 6, k), exit()];
    assert_eq!(go(&ind(Op::LdIndB, 1, 3), &mut packet), Ok(0x55));
    assert_eq!(go(&ind(Op::LdIndH, 2, -1), &mut packet), Ok(0x2233));
    assert_eq!(go(&ind(Op::LdIndW, 0, 0), &mut packet), Ok(0x1122_3344));
}

struct Insn2;
impl Insn2 {
    fn ind(op: Op, src: u8, k: i64) -> weir_isa::ebpf::Insn {
        insn(op, 0, src, 0, k)
    }
}

#[test]
fn legacy_packet_loads_out_of_bounds_end_the_program_with_zero() {
    let mut packet = [0x11u8, 0x22, 0x33, 0x44, 0x55];
    // After a failed load nothing more runs: r0 would be 99.
    let tail = |load| [mov(0, 7), load, mov(0, 99), exit()];
    let go = |insns: &[weir_isa::ebpf::Insn], packet: &mut [u8]| {
        run_input(insns, Bindings::new(), Input::new().packet(packet))
    };
    assert_eq!(go(&tail(imm(Op::LdAbsW, 0, 2)), &mut packet), Ok(0));
    assert_eq!(go(&tail(imm(Op::LdAbsB, 0, 5)), &mut packet), Ok(0));
    assert_eq!(go(&tail(imm(Op::LdAbsB, 0, 4)), &mut packet), Ok(99));
    assert_eq!(go(&tail(imm(Op::LdAbsB, 0, -1)), &mut packet), Ok(0));
    let ind =
        |base: i64, k| [mov(6, base), mov(0, 7), insn(Op::LdIndB, 0, 6, 0, k), mov(0, 99), exit()];
    assert_eq!(go(&ind(-2, 1), &mut packet), Ok(0));
    assert_eq!(go(&ind(4, 1), &mut packet), Ok(0));
    assert_eq!(go(&ind(5, -1), &mut packet), Ok(99));
    // The sum is taken as a 32-bit int, as the kernel does: 2^32 + 1 is offset 1.
    let wide = [lddw(6, 0x1_0000_0001), insn(Op::LdIndB, 0, 6, 0, 0), exit()];
    assert_eq!(go(&wide, &mut packet), Ok(0x22));
    // Without a packet they read `mem`, the conformance suites' buffer.
    let mut m = [0xaau8, 0xbb];
    assert_eq!(run_mem(&[imm(Op::LdAbsH, 0, 0), exit()], &mut m), Ok(0xaabb));
    assert_eq!(run_mem(&[imm(Op::LdAbsH, 0, 1), exit()], &mut m), Ok(0));
}

#[test]
fn interpreters_are_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Interpreter>();
    assert_send_sync::<weir_interp::Cache>();
}
