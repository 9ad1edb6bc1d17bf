//! The abstract state: per register a [`Kind`] and a value ([`Scalar`]: the value of a
//! scalar, the variable offset of a pointer), per 8-byte stack slot a spilled register or
//! per-byte initialization, call frames, and the references the path holds. Also the
//! subsumption test that state pruning rests on.

use std::fmt;

use crate::domain::Scalar;

/// What a register holds (the kernel's `enum bpf_reg_type`, the ones weir's program
/// types reach).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    NotInit,
    Scalar,
    /// The context (`r1` at entry).
    Ctx,
    /// Into the packet; `aux` is the proven range (bytes readable from `off` 0 of the
    /// pointers with the same `id`).
    Packet,
    PacketEnd,
    /// Into the XDP metadata; `aux` is the proven range below `data`.
    PacketMeta,
    /// Into the stack of frame `aux`.
    Stack,
    /// A map (`aux` = index in the program's maps).
    MapPtr,
    /// Into a value of map `aux`.
    MapValue,
    /// A map lookup's result before its null check (`id` links the copies).
    MapValueOrNull,
    /// Memory of `aux` bytes: a ring buffer sample (`ref_id` != 0) or the conformance
    /// memory of an untyped program.
    Mem,
    /// A ring buffer reservation before its null check.
    MemOrNull,
    /// A static function (`aux` = its first slot), for callbacks.
    Func,
}

impl Kind {
    pub fn is_pointer(self) -> bool {
        !matches!(self, Kind::NotInit | Kind::Scalar)
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::NotInit => "?",
            Kind::Scalar => "scalar",
            Kind::Ctx => "ctx",
            Kind::Packet => "pkt",
            Kind::PacketEnd => "pkt_end",
            Kind::PacketMeta => "pkt_meta",
            Kind::Stack => "fp",
            Kind::MapPtr => "map_ptr",
            Kind::MapValue => "map_value",
            Kind::MapValueOrNull => "map_value_or_null",
            Kind::Mem => "mem",
            Kind::MemOrNull => "mem_or_null",
            Kind::Func => "func",
        }
    }
}

/// One register (or spilled register).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reg {
    pub kind: Kind,
    /// Fixed offset of a pointer; for a linked scalar, its difference from the copies
    /// with the same `id` at offset 0.
    pub off: i64,
    /// The value of a scalar; the variable offset of a pointer.
    pub var: Scalar,
    /// Scalars: copies share an id (a bound learnt on one holds for all). Packet pointers:
    /// pointers with the same variable part share an id (and a range). `*_or_null`: the
    /// copies a null check resolves together.
    pub id: u32,
    /// Kind-specific: see [`Kind`].
    pub aux: u32,
    /// The reference (acquired by a helper) this pointer is, 0 for none.
    pub ref_id: u32,
}

impl Reg {
    pub const NOT_INIT: Reg =
        Reg { kind: Kind::NotInit, off: 0, var: ZERO, id: 0, aux: 0, ref_id: 0 };

    pub fn scalar(var: Scalar) -> Reg {
        Reg { kind: Kind::Scalar, var, ..Reg::NOT_INIT }
    }

    pub fn unknown() -> Reg {
        Reg::scalar(Scalar::unknown())
    }

    pub fn pointer(kind: Kind, aux: u32) -> Reg {
        Reg { kind, aux, ..Reg::NOT_INIT }
    }

    pub fn is_init(&self) -> bool {
        self.kind != Kind::NotInit
    }

    pub fn is_scalar(&self) -> bool {
        self.kind == Kind::Scalar
    }

    /// Whether the pointer is at its base (no offset, no variable part).
    pub fn at_base(&self) -> bool {
        self.off == 0 && self.var.as_const() == Some(0)
    }
}

const ZERO: Scalar = Scalar {
    var: crate::domain::Tnum { value: 0, mask: 0 },
    smin: 0,
    smax: 0,
    umin: 0,
    umax: 0,
    s32min: 0,
    s32max: 0,
    u32min: 0,
    u32max: 0,
};

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::NotInit => f.write_str("?"),
            Kind::Scalar => {
                if self.id != 0 && self.off != 0 {
                    write!(f, "scalar(id={}{:+},{})", self.id, self.off, self.var)
                } else if self.id != 0 {
                    write!(f, "scalar(id={},{})", self.id, self.var)
                } else {
                    write!(f, "scalar({})", self.var)
                }
            }
            Kind::Stack if self.var.as_const() == Some(0) => {
                write!(f, "fp{}", self.off)?;
                if self.aux != 0 {
                    write!(f, "(frame={})", self.aux)?;
                }
                Ok(())
            }
            kind => {
                write!(f, "{}(", kind.name())?;
                let mut parts = Vec::new();
                if self.id != 0 {
                    parts.push(format!("id={}", self.id));
                }
                if self.ref_id != 0 {
                    parts.push(format!("ref_obj_id={}", self.ref_id));
                }
                match kind {
                    Kind::MapPtr | Kind::MapValue | Kind::MapValueOrNull => {
                        parts.push(format!("map={}", self.aux))
                    }
                    Kind::Packet | Kind::PacketMeta => parts.push(format!("r={}", self.aux)),
                    Kind::Mem | Kind::MemOrNull => parts.push(format!("sz={}", self.aux)),
                    Kind::Stack => parts.push(format!("frame={}", self.aux)),
                    Kind::Func => parts.push(format!("insn={}", self.aux)),
                    _ => {}
                }
                if self.off != 0 {
                    parts.push(format!("off={}", self.off));
                }
                if self.var.as_const() != Some(0) {
                    parts.push(format!("var={}", self.var));
                }
                write!(f, "{})", parts.join(","))
            }
        }
    }
}

/// What one stack byte holds when no register is spilled over it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Byte {
    /// Never written: reading it is refused.
    Invalid,
    /// Written with something the verifier does not track.
    Misc,
    /// Written with zero.
    Zero,
}

/// One 8-byte stack slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    Bytes([Byte; 8]),
    /// A whole register stored with an aligned 8-byte store: its type survives the round
    /// trip through memory.
    Spill(Reg),
    /// A scalar stored with an aligned 1-, 2- or 4-byte store (the kernel's narrow spill):
    /// the register (its value truncated to `size` bytes) fills back from the same
    /// offset at `size` bytes or fewer, so a loop counter kept in a 32-bit stack word
    /// stays exact, as the kernel's bounded-loop exploration needs. `bytes` is the whole
    /// slot as bytes, the spilled ones `Zero` if the value is 0, else `Misc`.
    Part {
        reg: Reg,
        size: u8,
        bytes: [Byte; 8],
    },
}

impl Slot {
    pub const EMPTY: Slot = Slot::Bytes([Byte::Invalid; 8]);

    /// The slot as bytes (a spilled scalar becomes `Misc`, or `Zero` if it was 0).
    pub fn bytes(&self) -> Option<[Byte; 8]> {
        match self {
            Slot::Bytes(b) => Some(*b),
            Slot::Spill(r) if r.is_scalar() => {
                Some([if r.var.as_const() == Some(0) { Byte::Zero } else { Byte::Misc }; 8])
            }
            Slot::Spill(_) => None,
            Slot::Part { bytes, .. } => Some(*bytes),
        }
    }
}

/// One call frame.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub regs: [Reg; 11],
    /// Slot `i` holds bytes `fp-8(i+1) .. fp-8i`; missing slots are empty.
    pub stack: Vec<Slot>,
    /// The `call` that made this frame (`usize::MAX` for the main function).
    pub callsite: usize,
    /// The first slot of the function this frame runs.
    pub func: usize,
    /// A callback's frame (`bpf_loop`): its exit checks r0 in [0, 1] and returns to the
    /// `call` itself, which may run the callback again.
    pub callback: bool,
}

impl Frame {
    pub fn slot(&self, index: usize) -> Slot {
        self.stack.get(index).copied().unwrap_or(Slot::EMPTY)
    }

    pub fn slot_mut(&mut self, index: usize) -> &mut Slot {
        if self.stack.len() <= index {
            self.stack.resize(index + 1, Slot::EMPTY);
        }
        &mut self.stack[index]
    }
}

/// The whole abstract state of one path at one instruction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub frames: Vec<Frame>,
    /// References held: (id, slot of the helper call that acquired it).
    pub refs: Vec<(u32, usize)>,
}

impl State {
    pub fn top(&self) -> &Frame {
        // A state always has its main frame.
        &self.frames[self.frames.len() - 1]
    }

    pub fn top_mut(&mut self) -> &mut Frame {
        let n = self.frames.len() - 1;
        &mut self.frames[n]
    }

    pub fn reg(&self, r: u8) -> &Reg {
        &self.top().regs[usize::from(r)]
    }

    pub fn reg_mut(&mut self, r: u8) -> &mut Reg {
        &mut self.top_mut().regs[usize::from(r)]
    }

    /// Every register and spilled register of every frame.
    pub fn for_each_reg(&mut self, mut f: impl FnMut(&mut Reg)) {
        for frame in &mut self.frames {
            for r in &mut frame.regs {
                f(r);
            }
            for slot in &mut frame.stack {
                if let Slot::Spill(r) | Slot::Part { reg: r, .. } = slot {
                    f(r);
                }
            }
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (depth, frame) in self.frames.iter().enumerate() {
            if depth > 0 {
                write!(f, " | frame {depth}:")?;
            }
            for (i, r) in frame.regs.iter().enumerate() {
                if r.is_init() {
                    write!(f, " R{i}={r}")?;
                }
            }
            for (i, slot) in frame.stack.iter().enumerate() {
                let off = -8 * (i as i64 + 1);
                match slot {
                    Slot::Spill(r) => write!(f, " fp{off}={r}")?,
                    Slot::Bytes(b) if b.iter().all(|b| *b == Byte::Invalid) => {}
                    Slot::Bytes(b) => write!(f, " fp{off}={}", byte_text(b))?,
                    Slot::Part { reg, size, bytes } => {
                        write!(f, " fp{off}={}:u{}={reg}", byte_text(bytes), size * 8)?
                    }
                }
            }
        }
        Ok(())
    }
}

/// A slot's bytes as the kernel's log shows them, highest address first.
fn byte_text(bytes: &[Byte; 8]) -> String {
    bytes
        .iter()
        .rev()
        .map(|b| match b {
            Byte::Invalid => '?',
            Byte::Misc => 'm',
            Byte::Zero => '0',
        })
        .collect()
}

/// A partial map between the ids of an explored state and the current one: a pruned
/// path must link the same registers the explored one did.
#[derive(Default)]
pub struct IdMap {
    pairs: Vec<(u32, u32)>,
}

impl IdMap {
    pub fn check(&mut self, old: u32, cur: u32) -> bool {
        if old == 0 {
            return true;
        }
        if cur == 0 {
            return false;
        }
        for &(o, c) in &self.pairs {
            if o == old {
                return c == cur;
            }
            if c == cur {
                return false;
            }
        }
        self.pairs.push((old, cur));
        true
    }
}

/// Whether everything `cur` may do, `old` (already proven safe from here on) covers.
pub fn reg_subsumes(old: &Reg, cur: &Reg, ids: &mut IdMap) -> bool {
    reg_subsumes_as(old, cur, ids, true)
}

/// [`reg_subsumes`]; an imprecise scalar (one whose value cannot matter from here on, see
/// `cfg::precision`) is covered by any scalar.
fn reg_subsumes_as(old: &Reg, cur: &Reg, ids: &mut IdMap, precise: bool) -> bool {
    match old.kind {
        Kind::NotInit => true,
        Kind::Scalar if !precise => cur.is_scalar(),
        Kind::Scalar => {
            cur.is_scalar()
                && old.var.subsumes(&cur.var)
                && ids.check(old.id, cur.id)
                && (old.id == 0 || old.off == cur.off)
        }
        kind => {
            if cur.kind != kind || old.off != cur.off || !old.var.subsumes(&cur.var) {
                return false;
            }
            let aux_ok = match kind {
                // A longer proven range allows more.
                Kind::Packet | Kind::PacketMeta => cur.aux >= old.aux,
                _ => cur.aux == old.aux,
            };
            aux_ok && ids.check(old.id, cur.id) && ids.check(old.ref_id, cur.ref_id)
        }
    }
}

fn slot_subsumes(old: &Slot, cur: &Slot, ids: &mut IdMap) -> bool {
    match (old, cur) {
        (Slot::Bytes(o), _) if o.iter().all(|b| *b == Byte::Invalid) => true,
        (Slot::Spill(o), Slot::Spill(c)) => reg_subsumes(o, c, ids),
        (Slot::Part { reg: o, size: n, bytes: ob }, Slot::Part { reg: c, size: m, bytes: cb }) => {
            n == m && reg_subsumes(o, c, ids) && bytes_subsume(ob, cb)
        }
        // A narrow fill of `old` gives a tracked value that other contents do not match
        // (not subsumed: explored again, which costs time only).
        (Slot::Part { .. }, _) | (Slot::Spill(_), Slot::Part { .. }) => false,
        (Slot::Spill(o), Slot::Bytes(c)) => {
            // A fill of misc bytes gives an unknown scalar: covered by an unknown spill.
            o.is_scalar()
                && o.var == Scalar::unknown()
                && o.id == 0
                && c.iter().all(|b| *b != Byte::Invalid)
        }
        (Slot::Bytes(o), c) => {
            let Some(c) = c.bytes() else { return false };
            bytes_subsume(o, &c)
        }
    }
}

fn bytes_subsume(old: &[Byte; 8], cur: &[Byte; 8]) -> bool {
    old.iter().zip(cur.iter()).all(|(o, c)| match o {
        Byte::Invalid => true,
        Byte::Misc => *c != Byte::Invalid,
        Byte::Zero => *c == Byte::Zero,
    })
}

/// `old` ⊒ `cur` at the same instruction, looking only at the registers live there
/// (`live[f]`: the live mask of frame `f`), and at the values of scalars only where they
/// are precise (`precise[f]`).
pub fn state_subsumes(old: &State, cur: &State, live: &[u16], precise: &[u16]) -> bool {
    if old.frames.len() != cur.frames.len() || old.refs.len() != cur.refs.len() {
        return false;
    }
    let mut ids = IdMap::default();
    for (f, (o, c)) in old.frames.iter().zip(&cur.frames).enumerate() {
        if o.callsite != c.callsite {
            return false;
        }
        let mask = live.get(f).copied().unwrap_or(u16::MAX);
        let exact = precise.get(f).copied().unwrap_or(u16::MAX);
        // A quick look at the live registers' kinds and precise constants before the
        // whole comparison: at the head of an unrolled loop the stored states differ
        // mostly in the loop's counter (the flow datapath's restart count: 136 states at
        // one slot, 17 rounds), and one word tells them apart where the slot-by-slot
        // walk below took a third of a second per thousand states. It refuses only what
        // `reg_subsumes_as` refuses.
        for r in 0..11 {
            if mask & (1 << r) == 0 {
                continue;
            }
            let (o, c) = (&o.regs[r], &c.regs[r]);
            let differs = match o.kind {
                Kind::NotInit => false,
                Kind::Scalar if exact & (1 << r) == 0 => !c.is_scalar(),
                Kind::Scalar => {
                    !c.is_scalar()
                        || matches!((o.var.as_const(), c.var.as_const()), (Some(a), Some(b)) if a != b)
                }
                kind => c.kind != kind || o.off != c.off,
            };
            if differs {
                return false;
            }
        }
        // Stack first, deepest slot first: a loop's counter kept in the frame's last word
        // (the protochain walk's) is what tells apart most states stored at a loop head,
        // so a miss is found after one slot instead of after every register.
        for i in (0..o.stack.len()).rev() {
            if !slot_subsumes(&o.stack[i], &c.slot(i), &mut ids) {
                return false;
            }
        }
        for r in 0..11 {
            if mask & (1 << r) != 0
                && !reg_subsumes_as(&o.regs[r], &c.regs[r], &mut ids, exact & (1 << r) != 0)
            {
                return false;
            }
        }
    }
    old.refs.iter().zip(&cur.refs).all(|(o, c)| ids.check(o.0, c.0))
}

/// Exact equality on what is live: the same state again on one path is an infinite loop.
pub fn state_equal(old: &State, cur: &State, live: &[u16]) -> bool {
    if old.frames.len() != cur.frames.len() || old.refs != cur.refs {
        return false;
    }
    for (f, (o, c)) in old.frames.iter().zip(&cur.frames).enumerate() {
        let mask = live.get(f).copied().unwrap_or(u16::MAX);
        if o.callsite != c.callsite {
            return false;
        }
        for r in 0..11 {
            if mask & (1 << r) != 0 && o.regs[r] != c.regs[r] {
                return false;
            }
        }
        let n = o.stack.len().max(c.stack.len());
        if (0..n).any(|i| o.slot(i) != c.slot(i)) {
            return false;
        }
    }
    true
}
