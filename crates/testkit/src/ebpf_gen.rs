//! Random eBPF programs for the engines' property tests: the one generator the
//! interpreter's robustness properties and the JIT-vs-interpreter differential tests draw
//! from (proptest strategies, so failures shrink).
//!
//! Instructions come from the opcode table with fields biased towards small values (so that
//! jumps land inside the program and memory offsets near their base), now and then anything,
//! registers mostly real (r0-r10) and sometimes not, and immediates that name the helpers the
//! caller binds. [`EbpfGen`] says what else a test wants: stray `lddw` second halves, fields
//! the operation does not use zeroed (more programs validate), a final `exit`.
//!
//! ```
//! use proptest::strategy::{Strategy, ValueTree};
//! use proptest::test_runner::TestRunner;
//! use weir_testkit::ebpf_gen::EbpfGen;
//!
//! let gen = EbpfGen { end_with_exit: true, ..EbpfGen::default() };
//! let mut runner = TestRunner::deterministic();
//! let slots = gen.slots().new_tree(&mut runner).unwrap().current();
//! assert_eq!(slots.last().map(|i| i.op), Some(weir_isa::ebpf::Op::Exit));
//! ```

use std::ops::Range;

use proptest::prelude::*;
use weir_isa::ebpf::{Insn, Op, UsedFields, OPCODES};

/// What the generated programs look like; [`EbpfGen::default`] is the interpreter's
/// robustness mix.
#[derive(Debug, Clone, PartialEq)]
pub struct EbpfGen {
    /// Now and then (1 in 21) a stray second half of `lddw` instead of a table operation.
    pub stray_lddw_high: bool,
    /// Helper numbers immediates are sometimes drawn from.
    pub helper_ids: Vec<i64>,
    /// The relative weight of a helper number among the immediates (small constants 4,
    /// any `i32` 2, any `i64` 1).
    pub helper_weight: u32,
    /// Zero the fields the operation does not use, so that more programs validate.
    pub zero_unused: bool,
    /// How many instructions (before `lddw` fillers and the final `exit`).
    pub len: Range<usize>,
    /// The chance that an `lddw` gets its second half (a missing one is a fault worth
    /// running too); 1.0 for always.
    pub lddw_filler: f64,
    /// End every program with `exit`.
    pub end_with_exit: bool,
}

impl Default for EbpfGen {
    fn default() -> Self {
        EbpfGen {
            stray_lddw_high: true,
            helper_ids: vec![5, 100, 101],
            helper_weight: 3,
            zero_unused: false,
            len: 1..40,
            lddw_filler: 0.9,
            end_with_exit: false,
        }
    }
}

impl EbpfGen {
    /// One instruction.
    pub fn insn(&self) -> BoxedStrategy<Insn> {
        let table = (0..OPCODES.len()).prop_map(|k| OPCODES[k].op);
        let op = if self.stray_lddw_high {
            prop_oneof![20 => table, 1 => Just(Op::LddwHigh)].boxed()
        } else {
            table.boxed()
        };
        let register = prop_oneof![20 => 0u8..=10, 1 => 11u8..=15];
        let off = prop_oneof![4 => -6i16..6, 1 => any::<i16>()];
        let imm = prop_oneof![
            4 => -6i64..6,
            2 => any::<i32>().prop_map(i64::from),
            1 => any::<i64>(),
            self.helper_weight => prop::sample::select(self.helper_ids.clone()),
        ];
        let zero_unused = self.zero_unused;
        (op, register.clone(), register, off, imm)
            .prop_map(move |(op, dst, src, off, imm)| {
                if !zero_unused {
                    return Insn::new(op, dst, src, off, imm);
                }
                let none = UsedFields { dst: false, src: false, off: false, imm: false };
                let used = op.spec().map_or(none, |s| s.operands.used_fields());
                Insn::new(
                    op,
                    if used.dst { dst } else { 0 },
                    if used.src { src } else { 0 },
                    if used.off { off } else { 0 },
                    if used.imm { imm } else { 0 },
                )
            })
            .boxed()
    }

    /// A program as slots: [`EbpfGen::insn`]s, with a filler after `lddw`s (as
    /// [`EbpfGen::lddw_filler`] says) and, when asked, a final `exit`.
    pub fn slots(&self) -> BoxedStrategy<Vec<Insn>> {
        let end_with_exit = self.end_with_exit;
        let filler = prop::bool::weighted(self.lddw_filler);
        prop::collection::vec((self.insn(), filler), self.len.clone())
            .prop_map(move |v| {
                let mut out = Vec::new();
                for (insn, filler) in v {
                    out.push(insn);
                    if insn.op.is_lddw() && filler {
                        out.push(Insn::new(Op::LddwHigh, 0, 0, 0, 0));
                    }
                }
                if end_with_exit {
                    out.push(Insn::new(Op::Exit, 0, 0, 0, 0));
                }
                out
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    fn draw(gen: &EbpfGen, n: usize) -> Vec<Vec<Insn>> {
        let mut runner = TestRunner::deterministic();
        (0..n).map(|_| gen.slots().new_tree(&mut runner).unwrap().current()).collect()
    }

    #[test]
    fn the_options_shape_the_programs() {
        let plain = draw(&EbpfGen::default(), 300);
        assert!(plain.iter().flatten().any(|i| i.op == Op::LddwHigh));
        assert!(plain.iter().all(|p| (1..80).contains(&p.len())));

        let strict = EbpfGen {
            stray_lddw_high: false,
            zero_unused: true,
            lddw_filler: 1.0,
            end_with_exit: true,
            len: 1..24,
            ..EbpfGen::default()
        };
        for p in draw(&strict, 300) {
            assert_eq!(p.last().map(|i| i.op), Some(Op::Exit));
            for (k, insn) in p.iter().enumerate() {
                // Every second half follows an lddw, and every lddw has one.
                if insn.op == Op::LddwHigh {
                    assert!(k > 0 && p[k - 1].op.is_lddw(), "{p:?}");
                } else if insn.op.is_lddw() {
                    assert_eq!(p.get(k + 1).map(|i| i.op), Some(Op::LddwHigh));
                }
                if let Some(spec) = insn.op.spec() {
                    let used = spec.operands.used_fields();
                    assert!(used.dst || insn.dst == 0);
                    assert!(used.src || insn.src == 0);
                    assert!(used.off || insn.off == 0);
                    assert!(used.imm || insn.imm == 0);
                }
            }
        }
    }
}
