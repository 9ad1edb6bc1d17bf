//! Unit tests of the translation's shape: which checks and guards it emits where, on small
//! hand-written programs. Verdict agreement over many programs is in `tests/translate.rs`.

use weir_isa::cbpf::CbpfOp::*;
use weir_isa::ebpf::{Insn, Op};

use super::*;

fn stmt(op: weir_isa::cbpf::CbpfOp, k: u32) -> CbpfInsn {
    CbpfInsn::stmt(op, k)
}

fn insns(prog: &[CbpfInsn], target: PacketAccess) -> Vec<Insn> {
    let prog_type = match target {
        PacketAccess::SkBuff => ProgType::SocketFilter,
        PacketAccess::Xdp => ProgType::Xdp,
    };
    translate(prog, prog_type).expect("translates").into_insns()
}

/// The byte counts of the XDP constant-offset bounds checks, in program order: each check is
/// `r2 = data; r2 += n; if r2 <= data_end goto ok`.
fn xdp_checks(code: &[Insn]) -> Vec<i64> {
    code.windows(3)
        .filter(|w| {
            w[0].op == Op::Mov64Reg
                && (w[0].dst, w[0].src) == (2, 8)
                && w[1].op == Op::Add64Imm
                && w[1].dst == 2
                && w[2].op == Op::Jle64Reg
                && (w[2].dst, w[2].src) == (2, 9)
        })
        .map(|w| w[1].imm)
        .collect()
}

fn count(code: &[Insn], op: Op) -> usize {
    code.iter().filter(|i| i.op == op).count()
}

#[test]
fn straight_line_loads_share_one_check_for_the_largest_offset() {
    let prog = [
        stmt(LdAbsH, 12),
        stmt(St, 0),
        stmt(LdAbsB, 23),
        stmt(LdAbsW, 26),
        stmt(LdxMsh, 14),
        stmt(RetA, 0),
    ];
    assert_eq!(xdp_checks(&insns(&prog, PacketAccess::Xdp)), [30]);
}

#[test]
fn a_check_before_a_branch_covers_what_both_sides_read() {
    let prog = [
        stmt(LdAbsH, 12),                  // 0: needs 14; both sides read >= 22
        CbpfInsn::jump(JeqK, 0x800, 0, 2), // 1
        stmt(LdAbsB, 23),                  // 2: needs 24 > 22: checks again
        stmt(RetA, 0),                     // 3
        stmt(LdAbsH, 20),                  // 4: needs 22: covered
        stmt(RetA, 0),                     // 5
    ];
    assert_eq!(xdp_checks(&insns(&prog, PacketAccess::Xdp)), [22, 24]);
}

#[test]
fn a_branch_that_reads_nothing_keeps_the_check_small() {
    let prog = [
        stmt(LdAbsH, 12),
        CbpfInsn::jump(JeqK, 0x800, 0, 2),
        stmt(LdAbsB, 23),
        stmt(RetA, 0),
        stmt(RetK, 0), // reads nothing: the first check may not demand 24 bytes
    ];
    assert_eq!(xdp_checks(&insns(&prog, PacketAccess::Xdp)), [14, 24]);
}

#[test]
fn loads_past_offset_65535_return_zero_on_xdp_and_end_their_path() {
    let prog = [stmt(LdAbsB, 0xffff), stmt(LdImm, 0x1234_5678), stmt(RetA, 0)];
    let code = insns(&prog, PacketAccess::Xdp);
    assert!(xdp_checks(&code).is_empty());
    // What follows the load is unreachable and left out.
    assert!(code.iter().all(|i| i.imm != 0x1234_5678), "{code:?}");
    // The largest offset that can succeed still loads.
    let prog = [stmt(LdAbsB, 0xfffe), stmt(RetA, 0)];
    assert_eq!(xdp_checks(&insns(&prog, PacketAccess::Xdp)), [0xffff]);
}

#[test]
fn unreachable_instructions_are_left_out() {
    let prog = [stmt(RetK, 1), stmt(RetK, 0x7777), stmt(RetK, 0x8888)];
    for target in [PacketAccess::SkBuff, PacketAccess::Xdp] {
        let code = insns(&prog, target);
        assert!(code.iter().any(|i| i.op == Op::Mov32Imm && i.imm == 1));
        assert!(code.iter().all(|i| i.imm != 0x7777 && i.imm != 0x8888), "{code:?}");
        assert_eq!(count(&code, Op::Exit), 1);
    }
}

#[test]
fn shifts_by_x_are_guarded_unless_x_is_known_below_32() {
    let known = [stmt(LdImm, 1), stmt(LdxImm, 31), stmt(LshX, 0), stmt(RetA, 0)];
    let unknown = [stmt(LdImm, 31), stmt(Tax, 0), stmt(LshX, 0), stmt(RetA, 0)];
    for target in [PacketAccess::SkBuff, PacketAccess::Xdp] {
        assert_eq!(count(&insns(&known, target), Op::Jlt64Imm), 0);
        assert_eq!(count(&insns(&unknown, target), Op::Jlt64Imm), 1);
    }
    // msh gives X up to 60: still guarded.
    let msh = [stmt(LdxMsh, 14), stmt(RshX, 0), stmt(RetA, 0)];
    assert_eq!(count(&insns(&msh, PacketAccess::SkBuff), Op::Jlt64Imm), 1);
}

#[test]
fn division_by_x_is_guarded_and_by_k_is_not() {
    let by_x = [stmt(LdxImm, 3), stmt(DivX, 0), stmt(ModX, 0), stmt(RetA, 0)];
    let by_k = [stmt(DivK, 3), stmt(ModK, 3), stmt(RetA, 0)];
    for target in [PacketAccess::SkBuff, PacketAccess::Xdp] {
        let code = insns(&by_x, target);
        assert_eq!(count(&code, Op::Jne64Imm), 2);
        assert_eq!((count(&code, Op::Div32Reg), count(&code, Op::Mod32Reg)), (1, 1));
        let code = insns(&by_k, target);
        assert_eq!(count(&code, Op::Jne64Imm), 0);
        assert_eq!((count(&code, Op::Div32Imm), count(&code, Op::Mod32Imm)), (1, 1));
    }
}

#[test]
fn indexed_loads_after_msh_need_no_overflow_guard() {
    let prog = [stmt(LdxMsh, 14), stmt(LdIndH, 16), stmt(RetA, 0)];
    let code = insns(&prog, PacketAccess::SkBuff);
    let load = code.iter().find(|i| i.op == Op::LdIndH).expect("an ldindh");
    assert_eq!((load.src, load.imm), (7, 16));
    assert_eq!(count(&code, Op::Jle64Imm), 0);
    // XDP: only the bounds check of the load itself, no guard on X + k.
    let code = insns(&prog, PacketAccess::Xdp);
    assert_eq!(count(&code, Op::Jle64Imm), 0);
    assert_eq!(count(&code, Op::Jle64Reg), 2, "msh's byte and the indexed halfword");
}

#[test]
fn indexed_loads_with_unknown_x_check_the_exact_sum() {
    let prog = [stmt(LdxMem, 0), stmt(LdIndW, 2), stmt(RetA, 0)];
    let prog = [stmt(LdImm, 0), stmt(St, 0)].into_iter().chain(prog).collect::<Vec<_>>();
    let code = insns(&prog, PacketAccess::SkBuff);
    let guard = code.iter().find(|i| i.op == Op::Jle64Imm).expect("a guard");
    assert_eq!(guard.imm, i64::from(i32::MAX));
    let load = code.iter().find(|i| i.op == Op::LdIndW).expect("an ldindw");
    assert_eq!((load.src, load.imm), (1, 0));
    let code = insns(&prog, PacketAccess::Xdp);
    let guard = code.iter().find(|i| i.op == Op::Jle64Imm).expect("a guard");
    assert_eq!(guard.imm, 0xffff - 4);
}

#[test]
fn constants_above_i32_max_are_compared_through_a_register() {
    let prog =
        [stmt(LdImm, 5), CbpfInsn::jump(JgtK, 0x8000_0000, 0, 1), stmt(RetK, 1), stmt(RetK, 2)];
    let code = insns(&prog, PacketAccess::SkBuff);
    assert_eq!(count(&code, Op::Jle64Reg), 1, "{code:?}");
    // jset only looks at the low 32 bits, where sign extension changes nothing.
    let prog =
        [stmt(LdImm, 5), CbpfInsn::jump(JsetK, 0x8000_0000, 0, 1), stmt(RetK, 1), stmt(RetK, 2)];
    let code = insns(&prog, PacketAccess::SkBuff);
    assert_eq!(count(&code, Op::Jset64Imm), 1, "{code:?}");
}

#[test]
fn sk_buff_context_is_laid_out_as_the_kernel_does() {
    let meta = PacketMeta { protocol: 0x86dd, vlan_tpid: 0x8100, mark: 7, ..PacketMeta::default() };
    let ctx = sk_buff_context(1514, &meta);
    assert_eq!(ctx.len(), 192);
    assert_eq!(ctx[0..4], 1514u32.to_le_bytes());
    assert_eq!(ctx[8..12], 7u32.to_le_bytes());
    assert_eq!(ctx[16..20], [0x86, 0xdd, 0, 0]);
    assert_eq!(ctx[28..32], [0x81, 0x00, 0, 0]);
    assert_eq!(xdp_context().len(), 24);
    assert_eq!(bindings(ProgType::Xdp).context.map(|l| l.name), Some("xdp_md"));
    assert_eq!(bindings(ProgType::SocketFilter).context.map(|l| l.name), Some("__sk_buff"));
}
