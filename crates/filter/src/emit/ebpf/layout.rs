//! Layout of the eBPF emitter's flow into instructions, through a [`ProgramBuilder`].
//!
//! A test falls through to its false target when that comes next, else is inverted to fall
//! through to its true target, else is followed by a `ja` to the false target. An
//! unconditional jump reaches anywhere (`ja32` has a 32-bit offset), but a conditional
//! jump has only a 16-bit one: in a program of more than 32,767 instructions
//! (a set of thousands of addresses searched in line) a test may be too far from its
//! target. Such a test jumps instead over a `ja32` (`gotol`, Linux 6.6 and later) that
//! goes the long way:
//!
//! ```text
//!   near                        far
//!   jeq r, k, t                 jne r, k, +1   ; the inverse skips the long jump
//!   (false falls through)       ja32 t
//! ```
//!
//! Reach is measured in the program the kernel will run, not in the one written here: the
//! verifier rewrites each legacy packet load (`ldabs*`, `ldind*`) into a call of up to
//! seven instructions and then stretches the jumps across it, refusing the program when a
//! stretched offset no longer fits 16 bits. So a jump's distance counts [`KERNEL_GROWTH`]
//! extra slots for each legacy load it crosses, and an unconditional jump is written as
//! `ja32` already when only that count takes it out of reach.
//!
//! Which tests are far depends on the layout, which depends on which tests are far; marking
//! only ever adds instructions, so marking the tests out of reach and measuring again
//! reaches a fixed point (in two or three rounds in practice).

use weir_isa::ebpf::{Insn, Op};
use weir_program::{Program, ProgramBuilder};

use super::{Jump, Operand};
use crate::emit::flow::{Flow, Item, Label};
use crate::emit::EmitError;

/// How a test is laid out, from what follows it.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// The false target comes next: `cond -> t`.
    FallToFalse,
    /// The true target comes next: `inverse -> f`.
    FallToTrue(Jump),
    /// Neither comes next: `cond -> t; ja f`.
    Neither,
}

impl Shape {
    fn of(items: &[Item<Insn, Jump>], index: usize, cond: Jump, t: Label, f: Label) -> Shape {
        let follows = |target: Label| {
            items
                .iter()
                .skip(index.wrapping_add(1))
                .map_while(|i| match i {
                    Item::Label(l) => Some(*l),
                    _ => None,
                })
                .any(|l| l == target)
        };
        if follows(f) {
            Shape::FallToFalse
        } else if let (true, Some(inverse)) = (follows(t), cond.inverse()) {
            Shape::FallToTrue(inverse)
        } else {
            Shape::Neither
        }
    }

    /// Where the conditional jump itself goes when it is near.
    fn near_target(self, t: Label, f: Label) -> Label {
        match self {
            Shape::FallToFalse | Shape::Neither => t,
            Shape::FallToTrue(_) => f,
        }
    }

    /// Slots of the laid-out test.
    fn slots(self, cond: Jump, far: bool) -> usize {
        match (self, far) {
            (Shape::FallToFalse | Shape::FallToTrue(_), false) => 1,
            (Shape::Neither, false) => 2,
            // `inverse -> +1; ja32 t`, or with no inverse `cond -> +1; ja +1; ja32 t`.
            (Shape::FallToFalse, true) => {
                if cond.inverse().is_some() {
                    2
                } else {
                    3
                }
            }
            // `cond -> +1; ja32 f`.
            (Shape::FallToTrue(_), true) => 2,
            // `cond -> +1; ja f; ja32 t`.
            (Shape::Neither, true) => 3,
        }
    }
}

/// Slots the kernel adds when it rewrites a legacy packet load (`ldind` with an offset
/// becomes `mov r2, src; add r2, imm; mov r1, r6; call; jsge r0, 0, +2; xor32 r0, r0;
/// exit`). Every other instruction this emitter writes stays one instruction.
const KERNEL_GROWTH: i64 = 6;

fn kernel_growth(item: &Item<Insn, Jump>) -> i64 {
    match item {
        Item::Stmt(insn) | Item::End(insn) => match insn.op {
            Op::LdAbsB | Op::LdAbsH | Op::LdAbsW | Op::LdIndB | Op::LdIndH | Op::LdIndW => {
                KERNEL_GROWTH
            }
            _ => 0,
        },
        _ => 0,
    }
}

fn insn_slots(insn: &Insn) -> usize {
    if insn.op.is_lddw() {
        2
    } else {
        1
    }
}

/// Where everything lands, and which tests take the long way.
struct Layout {
    /// Per item: a test that jumps over a `ja32`.
    far: Vec<bool>,
    /// Per item and per label: its slot.
    item_at: Vec<usize>,
    label_at: Vec<usize>,
    /// Per item: the slots the kernel adds before it; per label: the item it stands before.
    grown_before: Vec<i64>,
    label_item: Vec<usize>,
}

/// What the last placing counted, to size the program's builder.
struct Sizes {
    /// The program's slots, its jumps to labels and the labels its far tests add.
    slots: usize,
    jumps: usize,
    far_labels: usize,
}

impl Layout {
    /// Marks the tests out of 16-bit reach until none is left; with the sizes of that layout.
    fn new(items: &[Item<Insn, Jump>], shapes: &[Option<Shape>], labels: usize) -> (Layout, Sizes) {
        let mut grown_before = Vec::with_capacity(items.len().wrapping_add(1));
        let mut label_item = vec![0usize; labels];
        let mut grown = 0i64;
        for (index, item) in items.iter().enumerate() {
            grown_before.push(grown);
            grown = grown.saturating_add(kernel_growth(item));
            if let Item::Label(l) = item {
                if let Some(at) = label_item.get_mut(l.index()) {
                    *at = index;
                }
            }
        }
        grown_before.push(grown);
        let mut layout = Layout {
            far: vec![false; items.len()],
            item_at: vec![0; items.len()],
            label_at: vec![0; labels],
            grown_before,
            label_item,
        };
        loop {
            let sizes = layout.place(items, shapes);
            let mut marked = false;
            for (index, item) in items.iter().enumerate() {
                let Item::Cond { t, f, .. } = item else { continue };
                let Some(Some(shape)) = shapes.get(index) else { continue };
                if layout.is_far(index) || layout.reaches(index, 0, shape.near_target(*t, *f)) {
                    continue;
                }
                if let Some(mark) = layout.far.get_mut(index) {
                    *mark = true;
                    marked = true;
                }
            }
            if !marked {
                return (layout, sizes);
            }
        }
    }

    /// Slots of every item and label, for the tests marked so far.
    fn place(&mut self, items: &[Item<Insn, Jump>], shapes: &[Option<Shape>]) -> Sizes {
        let mut slot = 0usize;
        let (mut jumps, mut far_labels) = (0usize, 0usize);
        for (index, item) in items.iter().enumerate() {
            if let Some(at) = self.item_at.get_mut(index) {
                *at = slot;
            }
            let size = match item {
                Item::Label(l) => {
                    if let Some(at) = self.label_at.get_mut(l.index()) {
                        *at = slot;
                    }
                    0
                }
                Item::Stmt(insn) | Item::End(insn) => insn_slots(insn),
                Item::Goto(_) | Item::Back(_) => {
                    jumps = jumps.wrapping_add(1);
                    1
                }
                Item::Cond { cond, .. } => {
                    let shape = shapes.get(index).copied().flatten().unwrap_or(Shape::Neither);
                    let far = self.is_far(index);
                    // Every slot of a test is a jump; a far one binds at most two labels (counted as two).
                    let slots = shape.slots(*cond, far);
                    jumps = jumps.wrapping_add(slots);
                    far_labels = far_labels.wrapping_add(if far { 2 } else { 0 });
                    slots
                }
            };
            slot = slot.wrapping_add(size);
        }
        Sizes { slots: slot, jumps, far_labels }
    }

    fn is_far(&self, index: usize) -> bool {
        self.far.get(index).copied().unwrap_or(false)
    }

    /// Whether a jump in the `nth` slot of item `index` reaches `target` with a 16-bit
    /// offset once the kernel has rewritten the legacy loads in between.
    fn reaches(&self, index: usize, nth: usize, target: Label) -> bool {
        let as_i64 = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        let to = self.label_at.get(target.index()).copied().unwrap_or(0);
        let from = self.item_at.get(index).copied().unwrap_or(0).wrapping_add(nth);
        let slots = as_i64(to).saturating_sub(as_i64(from)).saturating_sub(1);
        let grown_at = |i: usize| self.grown_before.get(i).copied().unwrap_or(i64::MAX);
        let to_item = self.label_item.get(target.index()).copied().unwrap_or(0);
        let crossed = grown_at(to_item).saturating_sub(grown_at(index));
        i16::try_from(slots.saturating_add(crossed)).is_ok()
    }
}

/// Lays the flow out (see the module documentation).
pub(super) fn link(flow: &Flow<Insn, Jump>) -> Result<Program, EmitError> {
    let items = flow.items();
    let shapes: Vec<Option<Shape>> = items
        .iter()
        .enumerate()
        .map(|(index, item)| match item {
            Item::Cond { cond, t, f } => Some(Shape::of(items, index, *cond, *t, *f)),
            _ => None,
        })
        .collect();
    let (layout, sizes) = Layout::new(items, &shapes, flow.label_count());
    let labels = flow.label_count().wrapping_add(sizes.far_labels);
    let mut b = ProgramBuilder::with_capacity(sizes.slots, labels, sizes.jumps);
    let labels: Vec<weir_program::Label> = (0..flow.label_count()).map(|_| b.new_label()).collect();
    let label =
        |l: Label| labels.get(l.index()).copied().ok_or(EmitError::Internal("unknown label"));
    let cond_jump = |b: &mut ProgramBuilder, jump: Jump, target: weir_program::Label| {
        match jump.rhs {
            Operand::Imm(imm) => b.jump_imm(jump.op(), jump.dst, imm, target),
            Operand::Reg(src) => b.jump_reg(jump.op(), jump.dst, src, target),
        };
    };
    // `ja` where the kernel's offsets reach, else `ja32` (one slot either way).
    let goto = |b: &mut ProgramBuilder, index: usize, nth: usize, target: Label| {
        let to = label(target)?;
        if layout.reaches(index, nth, target) {
            b.jump(to);
        } else {
            b.jump32(to);
        }
        Ok::<(), EmitError>(())
    };
    for (index, item) in items.iter().enumerate() {
        match item {
            Item::Label(l) => b.bind(label(*l)?),
            Item::Stmt(insn) | Item::End(insn) => {
                b.push(*insn);
            }
            Item::Goto(target) => goto(&mut b, index, 0, *target)?,
            // A loop's few instructions back: always within a 16-bit offset.
            Item::Back(target) => {
                b.jump(label(*target)?);
            }
            Item::Cond { cond, t: t_flow, f: f_flow } => {
                let shape = shapes.get(index).copied().flatten().unwrap_or(Shape::Neither);
                let (t, f) = (label(*t_flow)?, label(*f_flow)?);
                if !layout.is_far(index) {
                    match shape {
                        Shape::FallToFalse => cond_jump(&mut b, *cond, t),
                        Shape::FallToTrue(inverse) => cond_jump(&mut b, inverse, f),
                        Shape::Neither => {
                            cond_jump(&mut b, *cond, t);
                            goto(&mut b, index, 1, *f_flow)?;
                        }
                    }
                    continue;
                }
                match (shape, cond.inverse()) {
                    (Shape::FallToFalse, Some(inverse)) => {
                        let skip = b.new_label();
                        cond_jump(&mut b, inverse, skip);
                        b.jump32(t);
                        b.bind(skip);
                    }
                    (Shape::FallToFalse, None) => {
                        let (long, skip) = (b.new_label(), b.new_label());
                        cond_jump(&mut b, *cond, long);
                        b.jump(skip);
                        b.bind(long);
                        b.jump32(t);
                        b.bind(skip);
                    }
                    (Shape::FallToTrue(_), _) => {
                        let skip = b.new_label();
                        cond_jump(&mut b, *cond, skip);
                        b.jump32(f);
                        b.bind(skip);
                    }
                    (Shape::Neither, _) => {
                        let long = b.new_label();
                        cond_jump(&mut b, *cond, long);
                        goto(&mut b, index, 1, *f_flow)?;
                        b.bind(long);
                        b.jump32(t);
                    }
                }
            }
        }
    }
    b.link().map_err(EmitError::Link)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit::ebpf::Rel;
    use weir_interp::{Config, Input, Interpreter};
    use weir_program::abi::Bindings;

    /// Statements enough to put a target out of 16-bit reach.
    const FILLER: usize = 40_000;

    fn mov(dst: u8, imm: i32) -> Insn {
        Insn::new(Op::Mov32Imm, dst, 0, 0, i64::from(imm))
    }

    fn ret(flow: &mut Flow<Insn, Jump>, value: i32) {
        flow.stmt(mov(0, value));
        flow.end(Insn::new(Op::Exit, 0, 0, 0, 0));
    }

    /// Runs a test of r2 (holding `value`) against 5, laid out in `arrangement`: which
    /// target comes right after the test (0: the false one, 1: the true one, 2: neither),
    /// with the other one (or both) beyond `FILLER` statements. Returns 1 for true, 2 for
    /// false.
    fn run(rel: Rel, value: i32, arrangement: u8) -> u64 {
        let mut flow: Flow<Insn, Jump> = Flow::new();
        let (t, f) = (flow.label(), flow.label());
        flow.stmt(mov(2, value));
        flow.cond(Jump::value(rel, 2, Operand::Imm(5)), t, f);
        let filler = |flow: &mut Flow<Insn, Jump>| {
            for _ in 0..FILLER {
                flow.stmt(mov(3, 0));
            }
        };
        match arrangement {
            0 => {
                flow.bind(f);
                filler(&mut flow);
                ret(&mut flow, 2);
                flow.bind(t);
                ret(&mut flow, 1);
            }
            1 => {
                flow.bind(t);
                filler(&mut flow);
                ret(&mut flow, 1);
                flow.bind(f);
                ret(&mut flow, 2);
            }
            _ => {
                ret(&mut flow, 3); // not reached: neither target follows the test
                flow.bind(f);
                filler(&mut flow);
                ret(&mut flow, 2);
                flow.bind(t);
                ret(&mut flow, 1);
            }
        }
        let program = link(&flow).unwrap();
        assert!(program.insns().iter().any(|i| i.op == Op::Ja32), "{rel:?} {arrangement}");
        let program = weir_program::Verified::structural(program).unwrap();
        let vm = Interpreter::new(&program, Bindings::new(), Config::default());
        vm.run(&mut vm.cache(), Input::new()).unwrap()
    }

    #[test]
    fn far_tests_take_the_long_way_in_every_arrangement() {
        // `jset` has no inverse, `jeq` and `jgt` do.
        for (rel, holds, fails) in [(Rel::Eq, 5, 6), (Rel::Gt, 9, 5), (Rel::Set, 4, 2)] {
            for arrangement in 0..3 {
                assert_eq!(run(rel, holds, arrangement), 1, "{rel:?} {arrangement}");
                assert_eq!(run(rel, fails, arrangement), 2, "{rel:?} {arrangement}");
            }
        }
    }

    #[test]
    fn legacy_loads_count_as_the_kernel_grows_them() {
        // 5,000 legacy loads of 7 kernel instructions each between a test and its target:
        // 10,000 slots here, 40,000 in the kernel.
        let mut flow: Flow<Insn, Jump> = Flow::new();
        let (t, f) = (flow.label(), flow.label());
        flow.cond(Jump::value(Rel::Eq, 2, Operand::Imm(5)), t, f);
        flow.bind(f);
        for _ in 0..5_000 {
            flow.stmt(Insn::new(Op::LdAbsB, 0, 0, 0, 0));
            flow.stmt(mov(3, 0));
        }
        ret(&mut flow, 2);
        flow.bind(t);
        ret(&mut flow, 1);
        let program = link(&flow).unwrap();
        assert!(program.len() < 10_010, "{}", program.len());
        assert_eq!(program.insns().first().map(|i| i.op), Some(Op::Jne32Imm));
        assert_eq!(program.insns().get(1).map(|i| i.op), Some(Op::Ja32));
    }
}
