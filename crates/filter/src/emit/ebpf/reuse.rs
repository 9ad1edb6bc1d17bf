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
//! the program gains one move per filling load and loses one call per reload on a path.

use weir_isa::ebpf::{Insn, Op};
use weir_program::{jump_target, Program};

/// The callee-saved registers a legacy load's helper call leaves alone, that the pass may
/// take when the program touches none of them.
const SPARE: [u8; 2] = [8, 9];

/// What a legacy load reads: its operation (width, absolute or indexed), its index register
/// (indexed loads only) and its constant offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    op: Op,
    index: Option<u8>,
    imm: i64,
}

fn legacy_key(insn: &Insn) -> Option<Key> {
    match insn.op {
        Op::LdAbsB | Op::LdAbsH | Op::LdAbsW => {
            Some(Key { op: insn.op, index: None, imm: insn.imm })
        }
        Op::LdIndB | Op::LdIndH | Op::LdIndW => {
            Some(Key { op: insn.op, index: Some(insn.src), imm: insn.imm })
        }
        _ => None,
    }
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
    let keys: Vec<Key> = seen.into_iter().filter(|&(_, times)| times > 1).map(|(k, _)| k).collect();
    if spare.is_empty() || keys.is_empty() {
        return None;
    }
    let slot_of = |key: Key| keys.iter().position(|&k| k == key).map(|at| at % spare.len());
    let held = held_on_entry(insns, spare.len(), slot_of)?;
    // A load is a reload when every path to it leaves its key in its register.
    let reload: Vec<bool> = insns
        .iter()
        .enumerate()
        .map(|(pc, insn)| {
            legacy_key(insn).and_then(|key| {
                let slot = slot_of(key)?;
                Some(held[pc].as_ref()?[slot] == Some(key))
            }) == Some(true)
        })
        .collect();
    // Per key (its index in `keys`): whether some load of it is a reload.
    let mut reused = vec![false; keys.len()];
    for (pc, insn) in insns.iter().enumerate() {
        if let Some(at) = legacy_key(insn)
            .filter(|_| reload[pc])
            .and_then(|key| keys.iter().position(|&k| k == key))
        {
            reused[at] = true;
        }
    }
    let reused_count = reused.iter().filter(|&&r| r).count();
    if reused_count == 0 {
        return None;
    }
    // The new program: reloads become moves from the register, the loads of a reused key
    // that stay are followed by a move into it.
    let mut out = Vec::with_capacity(insns.len() + reused_count);
    let mut new_pc = Vec::with_capacity(insns.len() + 1);
    for (pc, insn) in insns.iter().enumerate() {
        new_pc.push(out.len());
        let key = legacy_key(insn);
        let register = |key: Key| spare[slot_of(key).unwrap_or(0)];
        match key {
            Some(key) if reload[pc] => out.push(move_reg(0, register(key))),
            Some(key) if keys.iter().position(|&k| k == key).is_some_and(|at| reused[at]) => {
                out.push(*insn);
                out.push(move_reg(register(key), 0));
            }
            _ => out.push(*insn),
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

fn move_reg(dst: u8, src: u8) -> Insn {
    Insn { op: Op::Mov64Reg, dst, src, off: 0, imm: 0 }
}

/// Which key each spare register holds on entry to every instruction, on every path (`None`
/// for an instruction no path reaches), with every load of a key in `keys` taken to fill
/// its register; `None` overall for a jump out of the program.
fn held_on_entry(
    insns: &[Insn],
    slots: usize,
    slot_of: impl Fn(Key) -> Option<usize>,
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
