//! Classic BPF listings in tcpdump's three formats, character for character, so that weir's
//! output can be diffed against `tcpdump -d`, `-dd` and `-ddd`:
//!
//! - `-d`: `(003) jeq      #0x800           jt 4\tjf 5`: the index, the mnemonic padded to 8,
//!   the operand (padded to 16 for conditional jumps, whose targets are absolute indexes).
//!   Constants print as C's `%d` of the 32-bit field (signed) or `%x` (unsigned), as the
//!   operand form of the row says.
//! - `-dd`: one C initializer per instruction, `{ 0x15, 0, 1, 0x00000800 },`.
//! - `-ddd`: the instruction count, then `code jt jf k` in decimal.

use std::fmt::Write;

use super::ancillary::ancillary_name;
use super::{CbpfInsn, CbpfOperand, SockFilter};

/// `k` as C's `%d` prints a 32-bit field.
fn signed(k: u32) -> i32 {
    k as i32
}

fn operand_text(index: usize, insn: &CbpfInsn) -> String {
    let k = insn.k;
    match insn.op.operand() {
        CbpfOperand::ImmHex => format!("#{k:#x}"),
        CbpfOperand::ImmDec => format!("#{}", signed(k)),
        CbpfOperand::Abs => match ancillary_name(k) {
            Some(name) => format!("[{name}]"),
            None => format!("[{}]", signed(k)),
        },
        CbpfOperand::Ind => format!("[x + {}]", signed(k)),
        CbpfOperand::Mem => format!("M[{}]", signed(k)),
        CbpfOperand::PktLen => "#pktlen".to_owned(),
        CbpfOperand::Msh => format!("4*([{}]&0xf)", signed(k)),
        CbpfOperand::X => "x".to_owned(),
        // tcpdump prints `ret a` as a bare `ret`.
        CbpfOperand::A | CbpfOperand::Nothing => String::new(),
        // The target is computed in 32 bits, as tcpdump does, so a backward `ja` (k wrapping
        // around) prints the index it lands on.
        CbpfOperand::JumpTarget => {
            let target = (index as u32).wrapping_add(1).wrapping_add(k);
            signed(target).to_string()
        }
    }
}

/// One instruction as `tcpdump -d` prints it at position `index`, without the newline.
/// Jump targets are absolute: `jt`/`jf` are added to `index + 1`.
pub fn format_insn(index: usize, insn: &CbpfInsn) -> String {
    let mnemonic = insn.op.mnemonic();
    let operand = operand_text(index, insn);
    if insn.op.is_conditional_jump() {
        let next = index.wrapping_add(1);
        let jt = next.wrapping_add(usize::from(insn.jt));
        let jf = next.wrapping_add(usize::from(insn.jf));
        format!("({index:03}) {mnemonic:<8} {operand:<16} jt {jt}\tjf {jf}")
    } else {
        format!("({index:03}) {mnemonic:<8} {operand}")
    }
}

/// A whole program as `tcpdump -d` prints it, one line (with newline) per instruction.
pub fn format_listing(insns: &[CbpfInsn]) -> String {
    let mut out = String::new();
    for (index, insn) in insns.iter().enumerate() {
        out.push_str(&format_insn(index, insn));
        out.push('\n');
    }
    out
}

/// A program as `tcpdump -dd` prints it (C initializers for `struct sock_filter`).
pub fn format_dd(raw: &[SockFilter]) -> String {
    let mut out = String::new();
    for r in raw {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "{{ {:#x}, {}, {}, {:#010x} }},", r.code, r.jt, r.jf, r.k);
    }
    out
}

/// A program as `tcpdump -ddd` prints it (count, then decimal fields).
pub fn format_ddd(raw: &[SockFilter]) -> String {
    let mut out = format!("{}\n", raw.len());
    for r in raw {
        let _ = writeln!(out, "{} {} {} {}", r.code, r.jt, r.jf, r.k);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cbpf::ancillary::*;
    use crate::cbpf::{decode, CbpfOp, CBPF_OPCODES};
    use proptest::prelude::*;

    /// (code, jt, jf, k, index, expected line). The expected lines are libpcap's `bpf_image`
    /// output for these records (libpcap 1.10.3, Linux), except `ldx #pktlen`, which 1.10.3
    /// prints as `unimp 0x81` and later libpcap as below.
    const EVERY_OP: &[(u16, u8, u8, u32, usize, &str)] = &[
        (0x00, 0, 0, 0x85, 3, "(003) ld       #0x85"),
        (0x20, 0, 0, 133, 3, "(003) ld       [133]"),
        (0x28, 0, 0, 12, 0, "(000) ldh      [12]"),
        (0x30, 0, 0, 23, 2, "(002) ldb      [23]"),
        (0x40, 0, 0, 0xffff_ffff, 1, "(001) ld       [x + -1]"),
        (0x48, 0, 0, 14, 7, "(007) ldh      [x + 14]"),
        (0x50, 0, 0, 0, 32, "(032) ldb      [x + 0]"),
        (0x60, 0, 0, 0xffff_ffff, 0, "(000) ld       M[-1]"),
        (0x80, 0, 0, 0xffff_f000, 0, "(000) ld       #pktlen"),
        (0x01, 0, 0, 0x28, 3, "(003) ldx      #0x28"),
        (0x61, 0, 0, 3, 15, "(015) ldx      M[3]"),
        (0x81, 0, 0, 0, 0, "(000) ldx      #pktlen"),
        (0xb1, 0, 0, 0xffff_ffff, 0, "(000) ldxb     4*([-1]&0xf)"),
        (0x02, 0, 0, 0, 11, "(011) st       M[0]"),
        (0x03, 0, 0, 2, 46, "(046) stx      M[2]"),
        (0x04, 0, 0, 0xffff_ffff, 0, "(000) add      #-1"),
        (0x0c, 0, 0, 0, 15, "(015) add      x"),
        (0x14, 0, 0, 1, 5, "(005) sub      #1"),
        (0x1c, 0, 0, 0, 17, "(017) sub      x"),
        (0x24, 0, 0, 8, 14, "(014) mul      #8"),
        (0x2c, 0, 0, 133, 3, "(003) mul      x"),
        (0x34, 0, 0, 2, 8, "(008) div      #2"),
        (0x3c, 0, 0, 133, 3, "(003) div      x"),
        (0x94, 0, 0, 7, 3, "(003) mod      #7"),
        (0x9c, 0, 0, 0, 11, "(011) mod      x"),
        (0x54, 0, 0, 0xfff, 5, "(005) and      #0xfff"),
        (0x5c, 0, 0, 0, 16, "(016) and      x"),
        (0x44, 0, 0, 0x85, 3, "(003) or       #0x85"),
        (0x4c, 0, 0, 0, 3, "(003) or       x"),
        (0xa4, 0, 0, 0x85, 3, "(003) xor      #0x85"),
        (0xac, 0, 0, 0, 3, "(003) xor      x"),
        (0x64, 0, 0, 2, 14, "(014) lsh      #2"),
        (0x6c, 0, 0, 133, 3, "(003) lsh      x"),
        (0x74, 0, 0, 1, 17, "(017) rsh      #1"),
        (0x7c, 0, 0, 133, 3, "(003) rsh      x"),
        (0x84, 0, 0, 0, 23, "(023) neg      "),
        (0x05, 0, 0, 133, 3, "(003) ja       137"),
        (0x05, 0, 0, 0xffff_fff1, 18, "(018) ja       4"),
        (0x05, 0, 0, 0x7fff_ffff, 3, "(003) ja       -2147483645"),
        (0x15, 1, 2, 0x85, 3, "(003) jeq      #0x85            jt 5\tjf 6"),
        (0x15, 255, 255, 0xffff_ffff, 300, "(300) jeq      #0xffffffff      jt 556\tjf 556"),
        (0x1d, 12, 0, 0, 15, "(015) jeq      x                jt 28\tjf 16"),
        (0x25, 1, 2, 0x85, 3, "(003) jgt      #0x85            jt 5\tjf 6"),
        (0x2d, 1, 2, 0x85, 3, "(003) jgt      x                jt 5\tjf 6"),
        (0x35, 1, 2, 0x85, 3, "(003) jge      #0x85            jt 5\tjf 6"),
        (0x3d, 1, 2, 0x85, 3, "(003) jge      x                jt 5\tjf 6"),
        (0x45, 10, 0, 0x1fff, 5, "(005) jset     #0x1fff          jt 16\tjf 6"),
        (0x4d, 1, 2, 0x85, 3, "(003) jset     x                jt 5\tjf 6"),
        (0x06, 0, 0, 262_144, 11, "(011) ret      #262144"),
        (0x06, 0, 0, 0xffff_ffff, 0, "(000) ret      #-1"),
        (0x16, 0, 0, 0x85, 3, "(003) ret      "),
        (0x07, 1, 2, 0x85, 3, "(003) tax      "),
        (0x87, 0, 0, 0, 20, "(020) txa      "),
    ];

    fn insn(code: u16, jt: u8, jf: u8, k: u32) -> CbpfInsn {
        let raw = SockFilter { code, jt, jf, k };
        decode(&[raw]).unwrap_or_else(|e| panic!("{code:#x}: {e}")).remove(0)
    }

    #[test]
    fn every_op_prints_like_tcpdump() {
        for &(code, jt, jf, k, index, want) in EVERY_OP {
            assert_eq!(format_insn(index, &insn(code, jt, jf, k)), want, "code {code:#x}");
        }
    }

    #[test]
    fn the_print_test_covers_every_row() {
        for spec in CBPF_OPCODES {
            assert!(
                EVERY_OP.iter().any(|&(code, ..)| code == spec.code),
                "{:?} is not printed by any test",
                spec.op
            );
        }
    }

    #[test]
    fn ancillary_absolute_loads_print_by_name_other_negatives_as_numbers() {
        let cases: &[(u16, u32, &str)] = &[
            (0x20, SKF_AD_OFF, "(000) ld       [proto]"),
            (0x20, SKF_AD_OFF | SKF_AD_PKTTYPE, "(000) ld       [type]"),
            (0x28, SKF_AD_OFF | SKF_AD_VLAN_TAG, "(000) ldh      [vlan_tci]"),
            (0x30, SKF_AD_OFF | SKF_AD_VLAN_TPID, "(000) ldb      [vlan_tpid]"),
            (0x20, SKF_AD_OFF | 1, "(000) ld       [-4095]"),
            (0x20, SKF_AD_OFF | SKF_AD_MAX, "(000) ld       [-4032]"),
            (0x20, SKF_NET_OFF, "(000) ld       [-1048576]"),
            (0x20, SKF_LL_OFF, "(000) ld       [-2097152]"),
            (0x20, 0x8000_0000, "(000) ld       [-2147483648]"),
            (0x20, 0x7fff_ffff, "(000) ld       [2147483647]"),
            // Only absolute loads are named.
            (0x40, SKF_AD_OFF, "(000) ld       [x + -4096]"),
            (0x00, SKF_AD_OFF, "(000) ld       #0xfffff000"),
        ];
        for &(code, k, want) in cases {
            assert_eq!(format_insn(0, &insn(code, 0, 0, k)), want, "k {k:#x}");
        }
    }

    #[test]
    fn long_indexes_widen_the_index_field() {
        let ret = CbpfInsn::stmt(CbpfOp::RetK, 5);
        assert_eq!(format_insn(1000, &ret), "(1000) ret      #5");
    }

    #[test]
    fn dd_and_ddd_formats() {
        let raw = [SockFilter::stmt(0x80, 0), SockFilter::jump(0x25, 100, 0, 1)];
        assert_eq!(format_dd(&raw), "{ 0x80, 0, 0, 0x00000000 },\n{ 0x25, 0, 1, 0x00000064 },\n");
        assert_eq!(format_ddd(&raw), "2\n128 0 0 0\n37 0 1 100\n");
        assert_eq!(format_dd(&[]), "");
        assert_eq!(format_ddd(&[]), "0\n");
    }

    proptest! {
        #[test]
        fn any_decoded_insn_prints_its_index_and_mnemonic(
            row in 0..CBPF_OPCODES.len(),
            jt in any::<u8>(),
            jf in any::<u8>(),
            k in any::<u32>(),
            index in prop_oneof![0usize..5000, any::<usize>()],
        ) {
            let spec = &CBPF_OPCODES[row];
            let insn = CbpfInsn::new(spec.op, jt, jf, k);
            let line = format_insn(index, &insn);
            let head = format!("({index:03}) {:<8} ", spec.mnemonic);
            prop_assert!(line.starts_with(&head), "{line:?}");
            prop_assert_eq!(line.contains("\tjf "), spec.op.is_conditional_jump());
        }
    }
}
