//! Legacy packet loads that read again what an earlier load read, kept in a register
//! instead.
//!
//! In the kernel every `ldabs`/`ldind` is a helper call (the verifier rewrites it into one),
//! so a path that loads the same packet word twice pays for two calls where a register move
//! would do. Classic BPF has only A and X to keep values in, and a filter whose meaning
//! orders the loads (`host A or host B` on a cut packet rejects before it tests the second
//! host, so the source address is read, then the destination, then the source again) reloads
//! in its classic program and in that program's eBPF translation. This pass rewrites such
//! an eBPF program: a load of a word that every path to it has loaded already, at the same
//! offset (and, for `ldind`, through an index register not written since), becomes a move
//! from a callee-saved register the program does not use, which each of those earlier loads
//! fills. The packet does not change during a run, and a load that succeeded once succeeds
//! again (a failed one ended the program), so the verdicts are the same on every packet;
//! the program gains a move per filling load (and a shift or mask where a load takes its
//! bytes out of a wider value) and loses one call per reload on a path.
//!
//! A reload need not read the same bytes: a load whose bytes lie inside a word held in a
//! register is that word shifted and masked. And a byte or half-word load at a constant
//! offset may be made the word load that ends where it ends (`ldabsb 23` is `ldabsw 20`
//! masked): a legacy load fails exactly when its end passes the packet, so the word fails
//! on the same packets, and holds the bytes before it for a later load (the IPv4 fragment
//! field `ldabsh 20` after the protocol byte `ldabsb 23`). Such a wider value is kept only
//! where it adds a reload.

use weir_isa::ebpf::{Insn, Op};
use weir_program::{jump_target, Program};

/// The callee-saved registers a legacy load's helper call leaves alone, that the pass may
/// take when the program touches none of them.
const SPARE: [u8; 2] = [8, 9];

/// Wider keys tried, each a planning of the whole program: bounds the pass's time on long
/// programs with many narrow loads.
const MAX_WIDER_TRIED: usize = 16;

/// What a legacy load reads: its index register (indexed loads only), its constant offset
/// and its width in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    index: Option<u8>,
    start: i64,
    size: i64,
}

impl Key {
    fn end(self) -> i64 {
        self.start + self.size
    }

    /// Whether this key's value holds `inner`'s: the same load, or an absolute load whose
    /// packet bytes include `inner`'s (offsets from 0: a negative offset names the
    /// kernel's special areas, not bytes in a row).
    fn covers(self, inner: Key) -> bool {
        self == inner
            || (self.index.is_none()
                && inner.index.is_none()
                && self.start >= 0
                && self.start <= inner.start
                && inner.end() <= self.end())
    }

    /// The absolute word load that ends where this narrower absolute load ends: it fails on
    /// the same packets and holds this load's bytes in its low bits.
    fn widened(self) -> Option<Key> {
        let start = self.end() - 4;
        let fits = self.index.is_none() && self.size < 4 && start >= 0;
        (fits && self.end() <= i64::from(i32::MAX)).then_some(Key { index: None, start, size: 4 })
    }
}

fn legacy_key(insn: &Insn) -> Option<Key> {
    let (index, size) = match insn.op {
        Op::LdAbsB => (None, 1),
        Op::LdAbsH => (None, 2),
        Op::LdAbsW => (None, 4),
        Op::LdIndB => (Some(insn.src), 1),
        Op::LdIndH => (Some(insn.src), 2),
        Op::LdIndW => (Some(insn.src), 4),
        _ => return None,
    };
    Some(Key { index, start: insn.imm, size })
}

/// `program` with its repeated legacy loads taken from registers (see the module
/// documentation), or `program` itself when it has none to take, no spare register, a
/// construct the pass does not follow (calls, `lddw`, `ja32`), or maps and relocations (the
/// rewritten program would have to carry them over at moved instruction indices).
pub fn reuse_legacy_loads(program: Program) -> Program {
    if !program.maps().is_empty() || !program.relocations().is_empty() {
        return program;
    }
    match rewrite(program.insns()) {
        Some(insns) => {
            let mut out = Program::from_insns(insns);
            if let Some(prog_type) = program.prog_type() {
                out = out.with_prog_type(prog_type);
            }
            out
        }
        None => program,
    }
}

/// The kept keys, and per instruction the key a reload reads (which key a load fills is
/// `fill_key`'s answer, its register `rewrite`'s).
struct Plan {
    keys: Vec<Key>,
    /// Per instruction: the key a reload takes its value from.
    source: Vec<Option<Key>>,
}

impl Plan {
    fn new(insns: &[Insn], keys: Vec<Key>, slots: usize) -> Option<Plan> {
        let slot_of = |key: Key| keys.iter().position(|&k| k == key).map(|at| at % slots);
        let fill = |key: Key| fill_key(&keys, key);
        let held = held_on_entry(insns, slots, slot_of, fill)?;
        // A load is a reload when every path to it leaves in a register a key whose value
        // holds the one it fills (its own, or the word it was widened to).
        let source = insns
            .iter()
            .enumerate()
            .map(|(pc, insn)| {
                let wanted = fill(legacy_key(insn)?);
                let state = held[pc].as_ref()?;
                keys.iter().copied().find(|&k| {
                    k.covers(wanted) && slot_of(k).is_some_and(|slot| state[slot] == Some(k))
                })
            })
            .collect();
        Some(Plan { keys, source })
    }

    /// Whether some reload reads `key`'s register.
    fn read(&self, key: Key) -> bool {
        self.source.contains(&Some(key))
    }

    /// The loads made reloads.
    fn reloads(&self) -> usize {
        self.source.iter().filter(|s| s.is_some()).count()
    }
}

/// The key a load of `key` is made: its widened word when that is kept, else itself.
fn fill_key(keys: &[Key], key: Key) -> Key {
    key.widened().filter(|w| keys.contains(w)).unwrap_or(key)
}

fn rewrite(insns: &[Insn]) -> Option<Vec<Insn>> {
    let followed = insns.iter().all(|i| {
        !matches!(i.op, Op::Call | Op::CallLocal | Op::CallKfunc | Op::CallReg | Op::Ja32)
            && !i.op.is_lddw()
    });
    if !followed {
        return None;
    }
    let spare: Vec<u8> =
        SPARE.into_iter().filter(|&r| insns.iter().all(|i| i.dst != r && i.src != r)).collect();
    if spare.is_empty() {
        return None;
    }
    // Keys loaded at more than one place, each given a spare register (shared round-robin
    // when there are more keys than registers: the flow below knows which key a register
    // holds, so sharing costs reuse, never correctness), dealt out in the order of their
    // first loads.
    let mut seen: Vec<(Key, usize)> = Vec::new();
    for key in insns.iter().filter_map(legacy_key) {
        match seen.iter_mut().find(|(k, _)| *k == key) {
            Some((_, times)) => *times += 1,
            None => seen.push((key, 1)),
        }
    }
    let loaded: Vec<Key> = seen.iter().map(|&(k, _)| k).collect();
    let repeated: Vec<Key> =
        seen.iter().filter(|&&(_, times)| times > 1).map(|&(k, _)| k).collect();
    // Then, after them (their registers stay as they were), the keys whose value would
    // hold another load's, each kept only if it adds a reload (in a register another key
    // also holds, it could take the place of a reload rather than add one): a load that
    // holds another load's bytes, and a narrow load's widened word that holds bytes of a
    // load the narrow one does not.
    let mut wider: Vec<Key> = Vec::new();
    for &key in &loaded {
        let wide = loaded.iter().any(|&o| o != key && key.covers(o));
        let word = key.widened().filter(|&w| loaded.iter().any(|&o| w.covers(o) && !key.covers(o)));
        for outer in [Some(key).filter(|_| wide), word].into_iter().flatten() {
            if !repeated.contains(&outer) && !wider.contains(&outer) {
                wider.push(outer);
            }
        }
    }
    if repeated.is_empty() && wider.is_empty() {
        return None;
    }
    let mut plan = Plan::new(insns, repeated, spare.len())?;
    for &outer in wider.iter().take(MAX_WIDER_TRIED) {
        let keys = plan.keys.iter().copied().chain([outer]).collect();
        let tried = Plan::new(insns, keys, spare.len())?;
        if tried.reloads() > plan.reloads() {
            plan = tried;
        }
    }
    if plan.reloads() == 0 {
        return None;
    }
    let keys = &plan.keys;
    let register = |key: Key| {
        let at = keys.iter().position(|&k| k == key).unwrap_or(0);
        spare[at % spare.len()]
    };
    // A reload's source is one of the kept keys, so a key some reload reads is kept.
    let reused = |key: Key| plan.read(key);
    // The new program, by two rules for each legacy load. (1) r0 takes the value of
    // `from`: the register a reload reads; else, for a load whose `fill` key some reload
    // reads, that key from the packet (its widened word, when not the load's own key); else
    // the load as it was. (2) `fill`'s register, when some reload reads it and this load
    // did not read it from there, takes `fill`'s value once r0 holds it; r0 then keeps the
    // load's bytes alone (`take_bytes`). A reload whose `fill` is a widened word reads that
    // word (no key is wider than a word), so fills nothing.
    let mut out = Vec::with_capacity(insns.len() + 2 * keys.len());
    let mut new_pc = Vec::with_capacity(insns.len() + 1);
    for (pc, insn) in insns.iter().enumerate() {
        new_pc.push(out.len());
        let Some(key) = legacy_key(insn) else {
            out.push(*insn);
            continue;
        };
        let fill = fill_key(keys, key);
        let source = plan.source[pc];
        let fills = reused(fill) && source != Some(fill);
        let from = source.unwrap_or(if fills { fill } else { key });
        out.push(match source {
            Some(source) => move_reg(0, register(source)),
            None if from == key => *insn,
            None => Insn { op: Op::LdAbsW, dst: 0, src: 0, off: 0, imm: from.start },
        });
        if fills {
            take_bytes(&mut out, from, fill);
            out.push(move_reg(register(fill), 0));
            take_bytes(&mut out, fill, key);
        } else {
            take_bytes(&mut out, from, key);
        }
    }
    new_pc.push(out.len());
    for (pc, insn) in insns.iter().enumerate() {
        let Some(target) = jump_target(pc, insn) else { continue };
        let target = usize::try_from(target).ok().filter(|&t| t < insns.len())?;
        let from = new_pc[pc];
        let off = i64::try_from(new_pc[target]).ok()? - i64::try_from(from).ok()? - 1;
        out[from].off = i16::try_from(off).ok()?;
    }
    Some(out)
}

/// r0 holds `outer`'s value: leaves `inner`'s (bytes inside it) there. Big-endian, so the
/// bytes after `inner` are shifted out and those before it masked off.
fn take_bytes(out: &mut Vec<Insn>, outer: Key, inner: Key) {
    let shift = 8 * (outer.end() - inner.end());
    if shift > 0 {
        out.push(Insn { op: Op::Rsh32Imm, dst: 0, src: 0, off: 0, imm: shift });
    }
    if inner.start > outer.start {
        let mask = (1i64 << (8 * inner.size)) - 1;
        out.push(Insn { op: Op::And32Imm, dst: 0, src: 0, off: 0, imm: mask });
    }
}

fn move_reg(dst: u8, src: u8) -> Insn {
    Insn { op: Op::Mov64Reg, dst, src, off: 0, imm: 0 }
}

/// Which key each spare register holds on entry to every instruction, on every path (`None`
/// for an instruction no path reaches), with every load taken to fill the slot of its
/// `fill` key (`slot_of`); `None` overall for a jump out of the program.
fn held_on_entry(
    insns: &[Insn],
    slots: usize,
    slot_of: impl Fn(Key) -> Option<usize>,
    fill: impl Fn(Key) -> Key,
) -> Option<Vec<Option<Vec<Option<Key>>>>> {
    let mut held: Vec<Option<Vec<Option<Key>>>> = vec![None; insns.len()];
    if insns.is_empty() {
        return Some(held);
    }
    held[0] = Some(vec![None; slots]);
    let mut work = vec![0usize];
    while let Some(pc) = work.pop() {
        let Some(state) = held[pc].clone() else { continue };
        let insn = &insns[pc];
        let mut after = state;
        let clobbers_scratch = legacy_key(insn).is_some();
        for entry in after.iter_mut() {
            let killed = entry.is_some_and(|k| {
                k.index.is_some_and(|index| {
                    (insn.op.writes_dst() && insn.dst == index) || (clobbers_scratch && index <= 5)
                })
            });
            if killed {
                *entry = None;
            }
        }
        // An indexed load through r0-r5 clobbers its own index (the helper call): what it
        // read cannot be named by that register afterwards.
        if let Some(key) = legacy_key(insn).filter(|k| k.index.is_none_or(|index| index > 5)) {
            let key = fill(key);
            if let Some(slot) = slot_of(key) {
                after[slot] = Some(key);
            }
        }
        let mut next = Vec::with_capacity(2);
        if insn.op != Op::Exit {
            if let Some(target) = jump_target(pc, insn) {
                next.push(usize::try_from(target).ok().filter(|&t| t < insns.len())?);
            }
            if insn.op != Op::Ja {
                if pc + 1 >= insns.len() {
                    return None;
                }
                next.push(pc + 1);
            }
        }
        for to in next {
            let merged = match &held[to] {
                None => after.clone(),
                Some(old) => {
                    old.iter().zip(&after).map(|(a, b)| if a == b { *a } else { None }).collect()
                }
            };
            if held[to].as_ref() != Some(&merged) {
                held[to] = Some(merged);
                work.push(to);
            }
        }
    }
    Some(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abs(start: i64, size: i64) -> Key {
        Key { index: None, start, size }
    }

    fn insn(op: Op, dst: u8, off: i16, imm: i64) -> Insn {
        Insn { op, dst, src: 0, off, imm }
    }

    /// A program's instructions as (op, dst, src, off, imm), for comparing whole listings.
    fn listing(program: &[Insn]) -> Vec<(Op, u8, u8, i16, i64)> {
        program.iter().map(|i| (i.op, i.dst, i.src, i.off, i.imm)).collect()
    }

    #[test]
    fn a_narrow_load_widens_to_the_word_ending_where_it_ends() {
        assert_eq!(abs(23, 1).widened(), Some(abs(20, 4)));
        assert_eq!(abs(20, 2).widened(), Some(abs(18, 4)));
        assert_eq!(abs(3, 1).widened(), Some(abs(0, 4)));
        // A word would start before the packet, or is the load itself.
        assert_eq!(abs(1, 2).widened(), None);
        assert_eq!(abs(20, 4).widened(), None);
        // An indexed load's start is not known to be in the packet.
        assert_eq!(Key { index: Some(7), start: 23, size: 1 }.widened(), None);
    }

    #[test]
    fn only_absolute_loads_from_offset_0_on_hold_other_loads() {
        assert!(abs(20, 4).covers(abs(23, 1)));
        assert!(abs(20, 4).covers(abs(20, 2)));
        assert!(abs(20, 4).covers(abs(21, 2)));
        assert!(!abs(20, 4).covers(abs(23, 2)));
        assert!(!abs(20, 4).covers(abs(19, 1)));
        assert!(!abs(20, 2).covers(abs(20, 4)));
        let ind = |start, size| Key { index: Some(7), start, size };
        assert!(ind(14, 2).covers(ind(14, 2)));
        assert!(!ind(14, 4).covers(ind(14, 2)));
        assert!(!abs(-4096, 4).covers(abs(-4095, 1)));
    }

    #[test]
    fn bytes_are_shifted_out_behind_and_masked_off_before() {
        let ops = |outer, inner| {
            let mut out = Vec::new();
            take_bytes(&mut out, outer, inner);
            out.iter().map(|i| (i.op, i.imm)).collect::<Vec<_>>()
        };
        assert_eq!(ops(abs(20, 4), abs(23, 1)), [(Op::And32Imm, 0xff)]);
        assert_eq!(ops(abs(20, 4), abs(20, 2)), [(Op::Rsh32Imm, 16)]);
        assert_eq!(ops(abs(20, 4), abs(21, 2)), [(Op::Rsh32Imm, 8), (Op::And32Imm, 0xffff)]);
        assert_eq!(ops(abs(20, 4), abs(20, 4)), []);
    }

    /// A word loaded twice: the first load fills the register, the reload reads it and
    /// fills nothing (its register holds the word already).
    #[test]
    fn a_reload_reads_its_register_and_fills_nothing() {
        let program = [
            insn(Op::LdAbsW, 0, 0, 26),
            insn(Op::Jne32Imm, 0, 2, 5),
            insn(Op::LdAbsW, 0, 0, 26),
            insn(Op::Exit, 0, 0, 0),
            insn(Op::Mov32Imm, 0, 0, 0),
            insn(Op::Exit, 0, 0, 0),
        ];
        let out = rewrite(&program).expect("rewritten");
        assert_eq!(
            listing(&out),
            [
                (Op::LdAbsW, 0, 0, 0, 26),
                (Op::Mov64Reg, 8, 0, 0, 0),
                (Op::Jne32Imm, 0, 0, 2, 5),
                (Op::Mov64Reg, 0, 8, 0, 0),
                (Op::Exit, 0, 0, 0, 0),
                (Op::Mov32Imm, 0, 0, 0, 0),
                (Op::Exit, 0, 0, 0, 0),
            ]
        );
    }

    /// A word at offset 0, then a byte inside it that no widened word holds (it would
    /// start before the packet): the word is kept for the byte's reload.
    #[test]
    fn a_load_that_holds_another_is_kept_for_it() {
        let program = [
            insn(Op::LdAbsW, 0, 0, 0),
            insn(Op::Jne32Imm, 0, 2, 5),
            insn(Op::LdAbsB, 0, 0, 1),
            insn(Op::Exit, 0, 0, 0),
            insn(Op::Mov32Imm, 0, 0, 0),
            insn(Op::Exit, 0, 0, 0),
        ];
        let out = rewrite(&program).expect("rewritten");
        assert_eq!(
            listing(&out),
            [
                (Op::LdAbsW, 0, 0, 0, 0),
                (Op::Mov64Reg, 8, 0, 0, 0),
                (Op::Jne32Imm, 0, 0, 4, 5),
                (Op::Mov64Reg, 0, 8, 0, 0),
                (Op::Rsh32Imm, 0, 0, 0, 16),
                (Op::And32Imm, 0, 0, 0, 0xff),
                (Op::Exit, 0, 0, 0, 0),
                (Op::Mov32Imm, 0, 0, 0, 0),
                (Op::Exit, 0, 0, 0, 0),
            ]
        );
    }

    /// The IPv4 protocol byte, then the fragment field before it: one word load.
    #[test]
    fn the_fragment_field_is_taken_from_the_protocols_word() {
        let program = [
            insn(Op::LdAbsB, 0, 0, 23),
            insn(Op::Jne32Imm, 0, 3, 6),
            insn(Op::LdAbsH, 0, 0, 20),
            insn(Op::Jset32Imm, 0, 1, 0x1fff),
            insn(Op::Exit, 0, 0, 0),
            insn(Op::Mov32Imm, 0, 0, 0),
            insn(Op::Exit, 0, 0, 0),
        ];
        let out = rewrite(&program).expect("rewritten");
        assert_eq!(
            listing(&out),
            [
                (Op::LdAbsW, 0, 0, 0, 20),
                (Op::Mov64Reg, 8, 0, 0, 0),
                (Op::And32Imm, 0, 0, 0, 0xff),
                (Op::Jne32Imm, 0, 0, 4, 6),
                (Op::Mov64Reg, 0, 8, 0, 0),
                (Op::Rsh32Imm, 0, 0, 0, 16),
                (Op::Jset32Imm, 0, 0, 1, 0x1fff),
                (Op::Exit, 0, 0, 0, 0),
                (Op::Mov32Imm, 0, 0, 0, 0),
                (Op::Exit, 0, 0, 0, 0),
            ]
        );
        // No load after the protocol's: nothing to widen it for.
        let alone = [program[0], insn(Op::Jne32Imm, 0, 1, 6), program[4], program[5], program[6]];
        assert_eq!(rewrite(&alone), None);
    }
}
