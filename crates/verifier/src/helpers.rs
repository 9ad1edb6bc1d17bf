//! Helper calls, checked against the kernel's prototypes
//! (`weir_program::abi::KERNEL_HELPERS`): availability for the program type, each
//! argument's type and memory bounds, the map types a helper takes, reference tracking
//! (ring buffer reservations), and what the call does to the registers.

use weir_program::abi::{kernel_helper, HelperSig, ValueKind};
use weir_program::MapType;

use crate::analyze::{sized_unknown, Access, Result, Verifier};
use crate::state::{Byte, Frame, Kind, Reg, Slot, State};
use crate::{Rejection, Rule};

/// Largest size a helper's memory argument may have (the kernel's `BPF_MAX_VAR_SIZ`).
const MAX_VAR_SIZE: u64 = 1 << 29;

fn err<T>(pc: usize, rule: Rule, message: impl Into<String>) -> Result<T> {
    Err(Rejection::new(pc, rule, message))
}

/// Whether helper `id` takes a map of type `t` (the kernel's
/// `check_map_func_compatibility`, both directions, for the helpers weir knows).
fn map_compatible(id: u32, t: MapType) -> bool {
    use MapType::*;
    let by_map = match t {
        RingBuf => matches!(id, 130 | 131 | 134),
        ProgArray => id == 12,
        Queue | Stack => matches!(id, 87..=89),
        PerfEventArray => false,
        _ => true,
    };
    let by_helper = match id {
        12 => t == ProgArray,
        51 => matches!(t, DevMap | DevMapHash | CpuMap | Other(17)),
        87..=89 => matches!(t, Queue | Stack),
        130 | 131 | 134 => t == RingBuf,
        _ => true,
    };
    by_map && by_helper
}

/// The value of a 4-byte map key on the stack, when it is a known constant (zeroed bytes,
/// or a spilled constant): an array lookup with a key below its size cannot fail.
fn const_key(st: &State, key: &Reg) -> Option<u64> {
    if key.kind != Kind::Stack {
        return None;
    }
    let o = key.off.checked_add(key.var.as_const()? as i64)?;
    if !(-(crate::analyze::STACK_SIZE)..=-4).contains(&o) {
        return None;
    }
    let frame = st.frames.get(key.aux as usize)?;
    let slot = ((-o - 1) / 8) as usize;
    let index = (o + 8 * (slot as i64 + 1)) as usize;
    if index > 4 {
        return None;
    }
    match frame.slot(slot) {
        Slot::Bytes(b) if b[index..index + 4].iter().all(|b| *b == Byte::Zero) => Some(0),
        Slot::Spill(r) if r.is_scalar() => {
            r.var.as_const().map(|c| (c >> (index * 8)) & 0xffff_ffff)
        }
        Slot::Part { reg, size: 4, .. } if index == 0 => reg.var.as_const(),
        _ => None,
    }
}

impl Verifier<'_> {
    /// The state a callback starts in (the kernel's `set_loop_callback_state`): a new
    /// frame over the caller's state at the call, r1 the loop index, r2 the caller's r3
    /// (the context the program passed), r3-r5 unset.
    fn callback_entry(&self, st: &State, pc: usize, target: usize) -> Result<State> {
        if target >= self.insns.len() {
            return err(pc, Rule::Structure, "callback out of range");
        }
        crate::analyze::room_for_frame(st, pc, target)?;
        let mut state = st.clone();
        let mut regs = [Reg::NOT_INIT; 11];
        regs[1] = Reg::unknown();
        regs[2] = *st.reg(3);
        regs[10] = Reg::pointer(Kind::Stack, st.frames.len() as u32);
        state.frames.push(Frame {
            regs,
            stack: Vec::new(),
            callsite: pc,
            func: target,
            callback: true,
        });
        Ok(state)
    }

    fn sig(&self, pc: usize, id: i64) -> Result<&'static HelperSig> {
        let Some(sig) = u32::try_from(id).ok().and_then(kernel_helper) else {
            return err(pc, Rule::UnknownHelper, format!("invalid func unknown#{id}"));
        };
        if !self.helpers.iter().any(|h| h.id == sig.id) {
            return err(
                pc,
                Rule::UnknownHelper,
                format!("program of this type cannot use helper {}#{}", sig.name, sig.id),
            );
        }
        Ok(sig)
    }

    /// A memory argument: `size_min..=size_max` bytes at register `regno`.
    #[allow(clippy::too_many_arguments)]
    fn helper_mem(
        &mut self,
        st: &mut State,
        pc: usize,
        sig: &HelperSig,
        regno: u8,
        size_max: u64,
        write: bool,
        null_ok: bool,
    ) -> Result<()> {
        let reg = *st.reg(regno);
        if reg.is_scalar() && reg.var.as_const() == Some(0) && null_ok && size_max == 0 {
            return Ok(());
        }
        match reg.kind {
            Kind::Packet | Kind::PacketMeta if !sig.pkt_access => {
                return err(
                    pc,
                    Rule::HelperArgument,
                    format!("helper access to the packet is not allowed (R{regno})"),
                );
            }
            Kind::Stack | Kind::Packet | Kind::PacketMeta | Kind::MapValue | Kind::Mem => {}
            kind => {
                return err(
                    pc,
                    Rule::HelperArgument,
                    format!(
                        "R{regno} type={} expected=fp, pkt, pkt_meta, map_value, mem",
                        kind.name()
                    ),
                );
            }
        }
        if size_max == 0 {
            return Ok(());
        }
        let acc = if write { Access::HelperWrite } else { Access::HelperRead };
        self.access(st, pc, regno, reg, 0, size_max, acc)?;
        Ok(())
    }

    pub(crate) fn call_helper(&mut self, st: &mut State, pc: usize, id: i64) -> Result<()> {
        let sig = self.sig(pc, id)?;
        // The stack as the call finds it is what a run that fails or stops here shows.
        self.mark_stop(st);
        let mut map: Option<usize> = None;
        let mut alloc_size: u64 = 0;
        let mut release: Option<u32> = None;
        let mut callback: Option<usize> = None;
        let mut key: Option<u64> = None;
        for (i, kind) in sig.args.iter().enumerate() {
            let regno = i as u8 + 1;
            let reg = self.read_reg(st, regno, pc)?;
            let expected = |what: &str| {
                err::<()>(
                    pc,
                    Rule::HelperArgument,
                    format!("R{regno} type={} expected={what}", reg.kind.name()),
                )
            };
            match kind {
                ValueKind::Scalar => {}
                ValueKind::Context => {
                    if reg.kind != Kind::Ctx {
                        expected("ctx")?;
                    }
                    if !reg.at_base() {
                        return err(
                            pc,
                            Rule::HelperArgument,
                            format!(
                                "dereference of modified ctx ptr R{regno} off={} disallowed",
                                reg.off
                            ),
                        );
                    }
                }
                ValueKind::MapPtr => {
                    if reg.kind != Kind::MapPtr {
                        expected("map_ptr")?;
                    }
                    map = Some(reg.aux as usize);
                }
                ValueKind::MapKey | ValueKind::MapValue | ValueKind::UninitMapValue => {
                    let Some(spec) = map.and_then(|m| self.maps.get(m)) else {
                        return err(
                            pc,
                            Rule::HelperArgument,
                            format!("invalid map_ptr to access map->key (R{regno})"),
                        );
                    };
                    let size =
                        if *kind == ValueKind::MapKey { spec.key_size } else { spec.value_size };
                    if *kind == ValueKind::MapKey && size == 4 {
                        key = const_key(st, &reg);
                    }
                    let write = *kind == ValueKind::UninitMapValue;
                    self.helper_mem(st, pc, sig, regno, u64::from(size), write, false)?;
                }
                ValueKind::PtrToMem | ValueKind::PtrToMemOrNull | ValueKind::PtrToUninitMem => {
                    // Checked with the size that follows.
                    let followed = matches!(
                        sig.args.get(i + 1),
                        Some(ValueKind::ConstSize | ValueKind::ConstSizeOrZero)
                    );
                    if !followed {
                        return err(
                            pc,
                            Rule::HelperArgument,
                            format!("R{regno}: a memory argument without a size"),
                        );
                    }
                }
                ValueKind::ConstSize | ValueKind::ConstSizeOrZero => {
                    if !reg.is_scalar() {
                        expected("scalar")?;
                    }
                    let v = reg.var;
                    if v.smin < 0 {
                        return err(pc, Rule::HelperArgument, format!("R{regno} min value is negative, either use unsigned or 'var &= const'"));
                    }
                    if v.umin == 0 && *kind == ValueKind::ConstSize {
                        return err(
                            pc,
                            Rule::HelperArgument,
                            format!(
                                "R{regno} invalid zero-sized read: u64=[{},{}]",
                                v.umin, v.umax
                            ),
                        );
                    }
                    if v.umax >= MAX_VAR_SIZE {
                        return err(pc, Rule::HelperArgument, format!("R{regno} unbounded memory access, use 'var &= const' or 'if (var < const)'"));
                    }
                    let mem = regno - 1;
                    let mem_kind = sig.args[i - 1];
                    let write = mem_kind == ValueKind::PtrToUninitMem;
                    let null_ok = mem_kind == ValueKind::PtrToMemOrNull
                        || *kind == ValueKind::ConstSizeOrZero;
                    self.helper_mem(st, pc, sig, mem, v.umax, write, null_ok)?;
                }
                ValueKind::ConstAllocSize => {
                    let Some(c) = reg.var.as_const().filter(|_| reg.is_scalar()) else {
                        return err(
                            pc,
                            Rule::HelperArgument,
                            format!("R{regno} is not a known constant'"),
                        );
                    };
                    alloc_size = c;
                }
                ValueKind::ReleaseAllocMem => {
                    if reg.kind != Kind::Mem || reg.ref_id == 0 {
                        if reg.kind == Kind::MemOrNull {
                            return err(
                                pc,
                                Rule::HelperArgument,
                                format!("R{regno} type=mem_or_null expected=alloc_mem"),
                            );
                        }
                        return err(
                            pc,
                            Rule::InvalidRelease,
                            format!("R{regno} must be referenced when passed to release function"),
                        );
                    }
                    if !reg.at_base() {
                        return err(
                            pc,
                            Rule::InvalidRelease,
                            format!(
                                "R{regno} must have zero fixed offset when passed to release func"
                            ),
                        );
                    }
                    release = Some(reg.ref_id);
                }
                ValueKind::Func => {
                    if reg.kind != Kind::Func || !reg.at_base() {
                        return err(
                            pc,
                            Rule::HelperArgument,
                            format!("R{regno} type={} expected=func", reg.kind.name()),
                        );
                    }
                    callback = Some(reg.aux as usize);
                }
                ValueKind::PtrToStackOrNull => {
                    let null = reg.is_scalar() && reg.var.as_const() == Some(0);
                    if reg.kind != Kind::Stack && !null {
                        return err(
                            pc,
                            Rule::HelperArgument,
                            format!("R{regno} type={} expected=fp", reg.kind.name()),
                        );
                    }
                }
                ValueKind::Void | ValueKind::PtrToMapValueOrNull | ValueKind::AllocMemOrNull => {}
            }
        }
        if let Some(target) = callback {
            self.callback = Some((target, self.callback_entry(st, pc, target)?));
        }
        if let Some(m) = map.and_then(|m| self.maps.get(m)) {
            if !map_compatible(sig.id, m.map_type) {
                return err(
                    pc,
                    Rule::MapHelperMismatch,
                    format!(
                        "cannot pass map_type {} into func {}#{}",
                        m.map_type.kernel_id(),
                        sig.name,
                        sig.id
                    ),
                );
            }
        }
        if let Some(id) = release {
            let Some(at) = st.refs.iter().position(|(r, _)| *r == id) else {
                return err(
                    pc,
                    Rule::InvalidRelease,
                    format!("release of an unacquired reference id={id}"),
                );
            };
            st.refs.remove(at);
            // Privileged: what pointed at the released memory becomes an unknown scalar.
            st.for_each_reg(|r| {
                if r.ref_id == id {
                    *r = Reg::unknown();
                }
            });
        }
        if sig.changes_pkt_data {
            st.for_each_reg(|r| {
                if matches!(r.kind, Kind::Packet | Kind::PacketEnd | Kind::PacketMeta) {
                    *r = Reg::unknown();
                }
            });
        }
        for r in 1..=5 {
            *st.reg_mut(r) = Reg::NOT_INIT;
        }
        let r0 = match sig.ret {
            ValueKind::Void => Reg::NOT_INIT,
            ValueKind::PtrToMapValueOrNull => {
                let index = map.unwrap_or(0);
                let in_array = self.maps.get(index).is_some_and(|m| {
                    matches!(m.map_type, MapType::Array | MapType::PercpuArray)
                        && key.is_some_and(|k| k < u64::from(m.max_entries))
                });
                if in_array {
                    // A constant key inside an array: the lookup cannot fail.
                    Reg::pointer(Kind::MapValue, index as u32)
                } else {
                    let id = self.new_id();
                    Reg { id, ..Reg::pointer(Kind::MapValueOrNull, index as u32) }
                }
            }
            ValueKind::AllocMemOrNull => {
                let id = self.new_id();
                let ref_id = self.new_id();
                st.refs.push((ref_id, pc));
                let size = u32::try_from(alloc_size).unwrap_or(u32::MAX);
                Reg { id, ref_id, ..Reg::pointer(Kind::MemOrNull, size) }
            }
            // `RET_INTEGER`: any 64-bit value, as the kernel sees it (even where the helper
            // returns 32 bits, like bpf_get_prandom_u32).
            _ => sized_unknown(8),
        };
        *st.reg_mut(0) = r0;
        Ok(())
    }
}
