//! A dispatch as an XDP program (`weir compile --match FILE --ebpf`): the one predicate
//! emitted by weir-filter's eBPF emitter ([`weir_filter::emit::ebpf::emit_xdp_head`]: each
//! clause's Try confines its aborts, so a clause fails alone as it does on every other
//! engine), then a tail that counts the packet and applies its handler's action.
//!
//! Handler names that are XDP actions act ([`Action::of`]): `pass`, `drop`, `tx`, and
//! `redirect:N` (`bpf_redirect_map` through the devmap [`DEVS_MAP`], slot `N`, which the
//! loader fills with an interface index; an empty slot aborts, as the helper does).
//! Every other handler passes the packet. Every handler is counted, whatever its action,
//! in the per-CPU array [`COUNTS_MAP`] (key: the handler's index in
//! [`crate::Program::handlers`], value: a `u64` packet count; key `handlers.len()` counts
//! the packets no clause took, which pass). Counting them all costs one lookup per packet
//! and makes the object observable: a test run's counters say which handler took a packet.
//! Arguments are computed (the clause fails when one cannot be) but not passed on.

use weir_filter::emit::ebpf::{emit_xdp_head, scratch_offset};
use weir_isa::ebpf::Op;
use weir_program::abi::{helper_id, xdp_action};
use weir_program::{MapSpec, MapType, ProgType, Program, ProgramBuilder, RelocTarget, Relocation};

use crate::Dispatch;

/// The per-handler counters: a per-CPU array of `u64`, one slot per handler and one for
/// no handler.
pub const COUNTS_MAP: &str = "pfm_counts";
/// The devmap `redirect:N` handlers send through.
pub const DEVS_MAP: &str = "pfm_devs";

// Helper ids as `call` immediates (the ids have one home: weir-program's `helper_id`).
const HELPER_MAP_LOOKUP: i32 = helper_id::MAP_LOOKUP_ELEM as i32;
const HELPER_REDIRECT_MAP: i32 = helper_id::REDIRECT_MAP as i32;

/// What a handler does to the packet in the XDP program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Pass,
    Drop,
    Tx,
    /// Through [`DEVS_MAP`]'s slot `N`.
    Redirect(u32),
}

impl Action {
    /// The action a handler name stands for: `pass`, `drop`, `tx`, `redirect:N`
    /// (N a decimal slot of the devmap, below 65,536); any other name passes.
    pub fn of(name: &str) -> Result<Action, String> {
        Ok(match name {
            "drop" => Action::Drop,
            "tx" => Action::Tx,
            _ => match name.strip_prefix("redirect:") {
                Some(n) => match n.parse::<u32>() {
                    Ok(slot) if slot < 65_536 && !n.starts_with('+') => Action::Redirect(slot),
                    _ => {
                        return Err(format!(
                            "handler `{name}`: `redirect:N` takes a devmap slot N from 0 to \
                             65535"
                        ))
                    }
                },
                None => Action::Pass,
            },
        })
    }
}

/// The XDP program of a dispatch: its instructions, maps ([`COUNTS_MAP`], then
/// [`DEVS_MAP`] when a handler redirects) and map relocations, ready for weir-elf's writer
/// or the kernel.
#[derive(Debug, Clone)]
pub struct XdpDispatch {
    pub program: Program,
    /// Per handler, its action.
    pub actions: Vec<Action>,
}

impl XdpDispatch {
    /// The counters map's key for a handler (`None`: no handler).
    pub fn count_key(&self, handler: Option<usize>) -> u32 {
        handler.unwrap_or(self.actions.len()) as u32
    }

    /// The XDP action the program returns for a packet that went to `handler`
    /// (`REDIRECT` for a redirect whose devmap slot holds a device).
    pub fn action_value(&self, handler: Option<usize>) -> u32 {
        match handler.and_then(|h| self.actions.get(h)) {
            Some(Action::Drop) => xdp_action::DROP,
            Some(Action::Tx) => xdp_action::TX,
            Some(Action::Redirect(_)) => xdp_action::REDIRECT,
            Some(Action::Pass) | None => xdp_action::PASS,
        }
    }
}

impl Dispatch {
    /// The dispatch as an XDP program (see the module documentation); fails on a bad
    /// `redirect:N` name or a predicate the emitter cannot write.
    pub fn xdp(&self) -> Result<XdpDispatch, String> {
        let actions =
            self.handlers().iter().map(|h| Action::of(h)).collect::<Result<Vec<_>, _>>()?;
        let head = emit_xdp_head(self.filter()).map_err(|e| format!("eBPF emitter: {e}"))?;
        let handlers = u32::try_from(actions.len()).map_err(|_| "too many handlers")?;
        let redirects: Vec<u32> = actions
            .iter()
            .filter_map(|a| if let Action::Redirect(n) = a { Some(*n) } else { None })
            .collect();

        // The tail. r0: 1 when the predicate held. r6: the counters key.
        let mut b = ProgramBuilder::new();
        let none = b.new_label();
        let keyed = b.new_label();
        b.alu_imm(Op::Mov64Imm, 6, 0);
        b.jump_imm(Op::Jeq64Imm, 0, 0, none);
        b.load(Op::LdxW, 6, 10, scratch_offset(self.handler_slot));
        b.bind(none);
        // handler + 1, or 0 -> the key: handler, or `handlers` for none.
        b.jump_imm(Op::Jne64Imm, 6, 0, keyed);
        b.alu_imm(Op::Mov64Imm, 6, handlers as i32 + 1);
        b.bind(keyed);
        b.alu_imm(Op::Sub64Imm, 6, 1);
        // counts[r6] += 1 (per CPU: no atomic needed). The key goes below the scratch
        // slots the head used; the results are in r6 already.
        const KEY: i16 = -8;
        b.store_reg(Op::StxW, 10, KEY, 6);
        let mut relocations = vec![(b.lddw_map_idx(1, 0), 0usize)];
        b.alu_reg(Op::Mov64Reg, 2, 10);
        b.alu_imm(Op::Add64Imm, 2, i32::from(KEY));
        b.call_helper(HELPER_MAP_LOOKUP);
        let counted = b.new_label();
        b.jump_imm(Op::Jeq64Imm, 0, 0, counted);
        b.load(Op::LdxDw, 1, 0, 0);
        b.alu_imm(Op::Add64Imm, 1, 1);
        b.store_reg(Op::StxDw, 0, 0, 1);
        b.bind(counted);
        // The action: one test per handler that does not pass.
        let mut targets = Vec::new();
        for (h, a) in actions.iter().enumerate() {
            if *a != Action::Pass {
                let l = b.new_label();
                b.jump_imm(Op::Jeq64Imm, 6, h as i32, l);
                targets.push((l, *a));
            }
        }
        b.alu_imm(Op::Mov64Imm, 0, xdp_action::PASS as i32);
        b.exit();
        for (l, a) in targets {
            b.bind(l);
            match a {
                Action::Redirect(slot) => {
                    relocations.push((b.lddw_map_idx(1, 1), 1));
                    b.alu_imm(Op::Mov64Imm, 2, slot as i32);
                    b.alu_imm(Op::Mov64Imm, 3, 0);
                    b.call_helper(HELPER_REDIRECT_MAP);
                }
                Action::Drop => _ = b.alu_imm(Op::Mov64Imm, 0, xdp_action::DROP as i32),
                Action::Tx => _ = b.alu_imm(Op::Mov64Imm, 0, xdp_action::TX as i32),
                Action::Pass => _ = b.alu_imm(Op::Mov64Imm, 0, xdp_action::PASS as i32),
            }
            b.exit();
        }
        let tail = b.link().map_err(|e| format!("dispatch tail: {e:?}"))?;

        let at = head.len();
        let mut insns = head.into_insns();
        insns.extend(tail.into_insns());
        let mut program = Program::from_insns(insns).with_prog_type(ProgType::Xdp);
        program.add_map(MapSpec {
            name: COUNTS_MAP.into(),
            map_type: MapType::PercpuArray,
            key_size: 4,
            value_size: 8,
            max_entries: handlers + 1,
            flags: 0,
        });
        if let Some(&top) = redirects.iter().max() {
            program.add_map(MapSpec {
                name: DEVS_MAP.into(),
                map_type: MapType::DevMap,
                key_size: 4,
                value_size: 4,
                max_entries: top + 1,
                flags: 0,
            });
        }
        for (slot, map) in relocations {
            program
                .add_relocation(Relocation { slot: at + slot, target: RelocTarget::Map { map } });
        }
        Ok(XdpDispatch { program, actions })
    }
}
