//! A header split as one indirect jump: an `or` whose leading parts each test one header
//! field for their own, disjoint values (pfmatch's dispatch on the EtherType and on the IP
//! protocol, `weir_pfmatch`'s `split`) goes straight to the part whose values hold the
//! field's value, instead of through a chain of compares.
//!
//! Why: on traffic whose protocols come in no learnable order, each compare of the chain is
//! a branch the predictor guesses wrong about as often as the protocols mix, and a packet
//! meets several of them (TCP, then UDP, then ICMP...); one indirect jump is one guess
//! (bench/records/2026-11-29-pfmatch-13.txt, reading 3; -14 measures it).
//!
//! The shape, for each leading part: `try(guard(G)) and FIELD <test> and REST...`, the
//! same `G` and the same `FIELD` (a load at a constant offset ending within `G`), the
//! tests' value sets pairwise disjoint. The parts after them (the tail) are lowered as
//! the `or` would have lowered them. Exactness: with fewer than `G` bytes every leading
//! part is false (its `try` is; in a hot half the guard leaves the packet to the whole
//! function, as the chain's first guard would), so the tail decides; with `G` bytes the
//! field's load cannot abort, and for its value `v` every leading part but the one whose
//! values hold `v` is false, so that part's `REST` decides, and on false the tail does.
//! Stores `REST` made before it turned false stay, as they do in the chain.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, BlockCall, InstBuilder, JumpTableData};
use weir_filter::{CmpOp, Expr, Pred, Size};

use super::lower::Lowering;
use super::CompileError;

/// Fewer leading parts than this stay a compare chain (two are one or two branches).
pub(super) const SWITCH_MIN_PARTS: usize = 3;

/// A field wider than a byte is switched on only when its parts test at most this many
/// values in all (each value one compare and one select into the index, no branch).
const WIDE_MAX_VALUES: usize = 8;

/// One leading part: the values it takes and what must hold after its field test.
struct Arm<'p> {
    values: Vec<(u32, u32)>,
    rest: &'p [Pred],
}

/// A header split found in an `or`'s parts (see the module documentation).
pub(super) struct Split<'p> {
    guard: &'p Pred,
    field: &'p Expr,
    size: Size,
    arms: Vec<Arm<'p>>,
    tail: &'p [Pred],
}

/// `try(guard(G))`'s `G`.
fn tried_guard(p: &Pred) -> Option<u32> {
    match p {
        Pred::Try(inner) => match **inner {
            Pred::Guard(g) => Some(g),
            _ => None,
        },
        _ => None,
    }
}

/// The field a test reads (a load at a constant offset) and the values it holds for.
fn field_test(p: &Pred) -> Option<(&Expr, Vec<(u32, u32)>)> {
    match p {
        Pred::Cmp { op: CmpOp::Eq, lhs, rhs: Expr::Const(c) } => Some((lhs, vec![(*c, *c)])),
        Pred::In { value, set } => Some((value, set.ranges().to_vec())),
        _ => None,
    }
}

/// The field's load: its constant offset's end and size.
fn constant_load(e: &Expr) -> Option<(u64, Size)> {
    match e {
        Expr::Load { offset, size } => match **offset {
            Expr::Const(at) => Some((u64::from(at) + u64::from(size.bytes()), *size)),
            _ => None,
        },
        _ => None,
    }
}

/// The header split at the head of `parts`, when it has [`SWITCH_MIN_PARTS`] parts or more
/// and a field narrow enough to switch on.
pub(super) fn split(parts: &[Pred]) -> Option<Split<'_>> {
    let mut arms: Vec<Arm<'_>> = Vec::new();
    let mut head: Option<(&Pred, u32, &Expr, Size)> = None;
    for part in parts {
        let Pred::And(all) = part else { break };
        let [guard, test, rest @ ..] = all.as_slice() else { break };
        let (Some(g), Some((field, values))) = (tried_guard(guard), field_test(test)) else {
            break;
        };
        let Some((end, size)) = constant_load(field) else { break };
        if end > u64::from(g) {
            break;
        }
        match head {
            None => head = Some((guard, g, field, size)),
            Some((_, g0, f0, _)) if g0 == g && f0 == field => {}
            Some(_) => break,
        }
        // Disjoint from every earlier arm's values (else two parts could hold for one value
        // and the first would have to be tried first).
        let overlaps = arms.iter().any(|arm| {
            arm.values.iter().any(|&(lo, hi)| values.iter().any(|&(l, h)| l <= hi && lo <= h))
        });
        if overlaps {
            break;
        }
        arms.push(Arm { values, rest });
    }
    let (guard, _, field, size) = head?;
    if arms.len() < SWITCH_MIN_PARTS {
        return None;
    }
    if size != Size::Byte {
        let values: u64 =
            arms.iter().flat_map(|a| &a.values).map(|&(lo, hi)| u64::from(hi - lo) + 1).sum();
        if values > WIDE_MAX_VALUES as u64 {
            return None;
        }
    }
    let tail = parts.get(arms.len()..).unwrap_or(&[]);
    Some(Split { guard, field, size, arms, tail })
}

/// Measurement only (removed before the branch's last commit): `WEIR_NO_SWITCH=1` keeps
/// the compare chains, `WEIR_SWITCH_BYTE=1` switches on byte fields only, so one binary
/// measures all three.
pub(super) fn enabled(split: &Split<'_>) -> bool {
    static ON: std::sync::OnceLock<(bool, bool)> = std::sync::OnceLock::new();
    let (on, byte_only) = *ON.get_or_init(|| {
        (
            std::env::var_os("WEIR_NO_SWITCH").is_none(),
            std::env::var_os("WEIR_SWITCH_BYTE").is_some(),
        )
    });
    on && (!byte_only || split.size == Size::Byte)
}

impl Lowering<'_, '_> {
    /// Lowers a header split's `or` (see the module documentation) to `t` / `f`.
    pub(super) fn switch(
        &mut self,
        split: &Split<'_>,
        t: Block,
        f: Block,
        depth: u32,
    ) -> Result<(), CompileError> {
        let (on, tail) = (self.new_block(), self.new_block());
        self.pred(split.guard, on, tail, depth)?;
        self.switch_to(on);
        self.need_loads(&[split.field]);
        let v = self.expr(split.field, depth)?;
        let blocks: Vec<Block> = split.arms.iter().map(|_| self.new_block()).collect();
        // The jump table's targets: entry i for the field's value i (a byte), or for arm
        // i - 1 (a wider field, whose index is computed below; 0 is no arm).
        let targets: Vec<Block> = if split.size == Size::Byte {
            (0u32..256)
                .map(|value| {
                    let arm = split.arms.iter().position(|arm| {
                        arm.values.iter().any(|&(lo, hi)| lo <= value && value <= hi)
                    });
                    arm.map_or(tail, |i| blocks[i])
                })
                .collect()
        } else {
            std::iter::once(tail).chain(blocks.iter().copied()).collect()
        };
        let index = if split.size == Size::Byte {
            v
        } else {
            let mut index = self.b.ins().iconst(types::I32, 0);
            for (i, arm) in split.arms.iter().enumerate() {
                let arm_index = self.b.ins().iconst(types::I32, i as i64 + 1);
                for &(lo, hi) in &arm.values {
                    for value in lo..=hi {
                        let hit = self.b.ins().icmp_imm(IntCC::Equal, v, i64::from(value));
                        index = self.b.ins().select(hit, arm_index, index);
                    }
                }
            }
            index
        };
        let mut seen: Vec<Block> = Vec::new();
        for &block in targets.iter().chain([&tail]) {
            if !seen.contains(&block) {
                seen.push(block);
                self.record(block);
            }
        }
        let default = self.b.func.dfg.block_call(tail, &[]);
        let calls: Vec<BlockCall> =
            targets.iter().map(|&block| self.b.func.dfg.block_call(block, &[])).collect();
        let table = self.b.create_jump_table(JumpTableData::new(default, &calls));
        self.b.ins().br_table(index, table);
        for (arm, &block) in split.arms.iter().zip(&blocks) {
            self.switch_to(block);
            self.sequence(arm.rest, t, tail, depth, true)?;
        }
        self.switch_to(tail);
        self.sequence(split.tail, t, f, depth, false)
    }
}

#[cfg(test)]
mod tests {
    use super::super::compile_results;
    use super::split;
    use weir_filter::{Evaluator, Expr, Filter, Pred, Size, ValueSet, SCRATCH_SLOTS};
    use weir_testkit::SplitMix64;

    fn store(slot: u8, value: Expr) -> Pred {
        Pred::Store { slot, value }
    }

    /// A header split as pfmatch builds one: per arm `try(guard(G)) and FIELD test and
    /// try(clauses)`, then a tail for short packets and a catch-all, on a byte field (a
    /// 256-entry table) and on a half-word one (an index of compares): every packet gets
    /// the evaluator's verdict and slots. The arms' rests can be false (a later clause or
    /// the tail decides), abort (a load past the packet: the Try's false) and store before
    /// turning false (the store stays, as in the chain).
    #[test]
    fn a_header_split_switches_as_the_chain_decides() {
        let mut rng = SplitMix64::new(0x5e1);
        let mut hits = [0usize; 12];
        for (field, values) in [
            (Expr::load_at(3, Size::Byte), vec![6u32, 17, 1, 0x2c]),
            (Expr::load_at(2, Size::Half), vec![0x0800, 0x86dd, 0x0806]),
        ] {
            let g = 8;
            let mut arms: Vec<Pred> = values
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let h = i as u32 + 1;
                    let test = if i == 3 {
                        Pred::In {
                            value: field.clone(),
                            set: ValueSet::from_ranges([(v, v), (200, 255)]),
                        }
                    } else {
                        Pred::eq(field.clone(), v)
                    };
                    // Clause h (byte 5 even), else clause h + 5 (a load that may abort) after
                    // a store that stays when both fail.
                    let rest = Pred::Try(Box::new(Pred::or([
                        Pred::Try(Box::new(Pred::and([
                            Pred::eq(Expr::load_at(5, Size::Byte).and_mask(1), 0),
                            store(15, Expr::Const(h)),
                        ]))),
                        Pred::Try(Box::new(Pred::and([
                            store(14, Expr::Const(7)),
                            Pred::eq(Expr::load_at(12, Size::Byte), 1),
                            store(15, Expr::Const(h + 5)),
                        ]))),
                    ])));
                    Pred::and([Pred::Try(Box::new(Pred::Guard(g))), test, rest])
                })
                .collect();
            arms.push(Pred::and([
                Pred::not(Pred::Try(Box::new(Pred::Guard(g)))),
                store(15, Expr::Const(10)),
            ]));
            arms.push(Pred::Try(Box::new(Pred::and([
                Pred::eq(Expr::load_at(4, Size::Byte), 9),
                store(15, Expr::Const(11)),
            ]))));
            let pred = Pred::or(arms);
            let Pred::Or(parts) = &pred else { panic!("an or") };
            assert_eq!(split(parts).map(|s| s.arms.len()), Some(values.len()), "{field:?}");
            let filter = Filter::new(pred.clone());
            let native = compile_results(&filter, &[15, 14]).unwrap();
            let bytes: Vec<u8> =
                values.iter().flat_map(|v| v.to_be_bytes()).chain([0, 1, 9, 200, 255]).collect();
            for _ in 0..20_000 {
                let len = rng.below_usize(20);
                let mut packet: Vec<u8> =
                    (0..len).map(|_| bytes[rng.below_usize(bytes.len())]).collect();
                if len > 4 && rng.chance(60) {
                    let v = values[rng.below_usize(values.len())];
                    packet[2..4].copy_from_slice(&(v as u16).to_be_bytes());
                    if rng.chance(50) {
                        packet[3] = v as u8;
                    }
                }
                let mut e = Evaluator::new(&packet, 64);
                let want = (e.pred(&filter.pred) == Ok(true))
                    .then(|| (e.expr(&Expr::Scratch(15)), e.expr(&Expr::Scratch(14))));
                let mut r = [0u32; SCRATCH_SLOTS as usize];
                let got = native.run(&packet, 64, &mut r).then_some((Ok(r[0]), Ok(r[1])));
                assert_eq!(got, want, "{field:?}: {packet:02x?}");
                if let Some((Ok(h), _)) = want {
                    hits[h as usize] += 1;
                }
            }
        }
        let chosen = [1, 2, 3, 4, 6, 7, 8, 9, 10, 11];
        assert!(chosen.iter().all(|&h| hits[h] > 20), "every clause chosen: {hits:?}");
    }
}
