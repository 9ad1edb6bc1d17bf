//! A compiled filter bound to the engine chosen for it.

use weir_cbpf::CbpfFilter;
use weir_filter::emit::{cbpf, ebpf};
use weir_filter::Filter;
use weir_program::abi::Bindings;
use weir_program::exec::{Engine as ExecEngine, Input, Limits, Prepared};
use weir_program::{ProgType, Program, Verified};

use crate::engine::{choose, Choice, ChoiceError, Engine, Subject};

/// A filter ready to run on packets, on one engine.
pub struct PreparedFilter {
    runner: Runner,
    choice: Choice,
}

enum Runner {
    Native(Box<weir_jit::filter::NativeFilter>),
    Jit(Box<SocketFilterRun<weir_jit::JitProgram>>),
    Interp(Box<SocketFilterRun<weir_interp::Interpreter>>),
    Cbpf(CbpfFilter),
    Reference(Filter),
}

/// An eBPF socket-filter program on one engine, with its context and a packet buffer: eBPF
/// engines take the packet as writable memory, so each packet is copied into `packet`
/// first. The context is all zeros but `len` (no ancillary data: capture files carry none).
pub(crate) struct SocketFilterRun<P: Prepared> {
    program: P,
    cache: P::Cache,
    ctx: Vec<u8>,
    len_field: usize,
    packet: Vec<u8>,
}

impl<P: Prepared> SocketFilterRun<P> {
    /// Prepares a socket-filter `program` on `engine` (`what` names the program in errors).
    pub(crate) fn prepare<E: ExecEngine<Prepared = P>>(
        engine: &E,
        program: Program,
        bindings: Bindings,
        what: &str,
    ) -> Result<Self, String> {
        let layout = ProgType::SocketFilter.context_layout();
        let program = Verified::structural(program)
            .map_err(|e| format!("the {what} is not a valid program: {e}"))?;
        let program = engine
            .prepare(&program, bindings, Limits::default())
            .map_err(|e| format!("the {} engine cannot take the {what}: {e}", engine.name()))?;
        let cache = program.cache();
        let len_field = layout.field("len").map_or(0, |f| f.offset as usize);
        Ok(SocketFilterRun {
            program,
            cache,
            ctx: vec![0; layout.size as usize],
            len_field,
            packet: Vec::new(),
        })
    }

    /// r0 for one packet; a trap rejects (0), as an aborted filter does.
    pub(crate) fn run(&mut self, packet: &[u8], wire_len: u32) -> u64 {
        if let Some(field) = self.ctx.get_mut(self.len_field..self.len_field + 4) {
            field.copy_from_slice(&wire_len.to_le_bytes());
        }
        self.packet.clear();
        self.packet.extend_from_slice(packet);
        let input = Input::new().ctx(&mut self.ctx).packet(&mut self.packet);
        self.program.run(&mut self.cache, input).map_or(0, |outcome| outcome.r0)
    }
}

impl PreparedFilter {
    /// Prepares `filter` on the forced engine, or on the best one that can take it.
    pub fn new(filter: &Filter, forced: Option<Engine>) -> Result<PreparedFilter, ChoiceError> {
        let (runner, choice) = choose(Subject::Filter, forced, |engine| prepare(filter, engine))?;
        Ok(PreparedFilter { runner, choice })
    }

    /// Which engine runs the filter and why.
    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    pub fn engine(&self) -> Engine {
        self.choice.engine
    }

    /// Whether the filter accepts the packet (`wire_len` is its length on the wire).
    pub fn matches(&mut self, packet: &[u8], wire_len: u32) -> bool {
        match &mut self.runner {
            Runner::Native(native) => native.matches(packet, wire_len),
            Runner::Jit(run) => run.run(packet, wire_len) != 0,
            Runner::Interp(run) => run.run(packet, wire_len) != 0,
            Runner::Cbpf(program) => program.run(packet, wire_len) != 0,
            Runner::Reference(filter) => filter.matches(packet, wire_len),
        }
    }
}

fn prepare(filter: &Filter, engine: Engine) -> Result<Runner, String> {
    Ok(match engine {
        Engine::Native => {
            Runner::Native(Box::new(weir_jit::filter::compile(filter).map_err(|e| e.to_string())?))
        }
        Engine::Jit => Runner::Jit(Box::new(SocketFilterRun::prepare(
            &weir_jit::Jit,
            emit_socket_filter(filter)?,
            Bindings::for_prog_type(ProgType::SocketFilter),
            "emitted program",
        )?)),
        Engine::Interp => Runner::Interp(Box::new(SocketFilterRun::prepare(
            &weir_interp::Interp,
            emit_socket_filter(filter)?,
            Bindings::for_prog_type(ProgType::SocketFilter),
            "emitted program",
        )?)),
        Engine::Cbpf => {
            let insns = cbpf::emit(filter).map_err(|e| format!("classic BPF: {e}"))?;
            // A `protochain` walk loops with a backward `ja`, as libpcap's does: libpcap's
            // rules admit it (and weir-cbpf ends a packet's run at its 65th backward jump).
            let backward =
                insns.iter().any(|i| i.op == weir_isa::cbpf::CbpfOp::Ja && i.k >= 1 << 31);
            let filter =
                if backward { CbpfFilter::new_libpcap(&insns) } else { CbpfFilter::new(&insns) };
            Runner::Cbpf(filter.map_err(|e| format!("classic BPF: {e}"))?)
        }
        Engine::Reference => Runner::Reference(filter.clone()),
    })
}

fn emit_socket_filter(filter: &Filter) -> Result<Program, String> {
    emit_ebpf(filter, ProgType::SocketFilter)
}

/// The eBPF program weir gives for a filter: the shorter of the eBPF emitter's program and
/// the classic program (`cbpf::emit`, tightened as libpcap's optimizer would) translated by
/// weir-cbpf's classic-to-eBPF translation.
///
/// Why both: the classic emitter's flow-graph passes (jump threading, shared tails, dead
/// loads) have no counterpart in the eBPF emitter yet, and the translation turns each
/// classic load into one legacy packet load the kernel's JIT handles in a few
/// instructions, so for everyday filters the translated program is a third of the direct
/// one (`port 22`: 35 instructions against 99, 2026-11-25-emit record). The direct
/// emitter stays for what classic BPF cannot say (more temporaries than 16 cells, more than
/// 4096 instructions) and wherever it is shorter.
pub fn emit_ebpf(filter: &Filter, prog_type: ProgType) -> Result<Program, String> {
    let direct = ebpf::emit(filter, prog_type);
    let translated = cbpf::emit(filter)
        .ok()
        .and_then(|insns| weir_cbpf::translate::translate(&insns, prog_type).ok());
    match (direct, translated) {
        (Ok(d), Some(t)) if t.insns().len() <= d.insns().len() => Ok(t),
        (Ok(d), _) => Ok(d),
        (Err(_), Some(t)) => Ok(t),
        (Err(e), None) => Err(format!("eBPF emission: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compile_filter, LinkType};

    #[test]
    fn emit_ebpf_is_the_shorter_program_and_filters_as_the_ir_does() {
        let hosts: Vec<String> =
            (1..=300).map(|i| format!("host 10.1.{}.{}", i / 200, i % 200)).collect();
        let set = hosts.join(" or ");
        let exprs = ["port 22", "host 10.0.0.1 and udp", "vlan", "ip6 host 2001:db8::1", &set];
        let packets = weir_testkit::edge_cases();
        for expr in exprs {
            let filter = compile_filter(expr, LinkType::Ethernet).unwrap();
            let chosen = emit_ebpf(&filter, ProgType::SocketFilter).unwrap().insns().len();
            let direct = ebpf::emit(&filter, ProgType::SocketFilter).unwrap().insns().len();
            let translated = cbpf::emit(&filter)
                .ok()
                .and_then(|c| weir_cbpf::translate::translate(&c, ProgType::SocketFilter).ok())
                .map_or(usize::MAX, |p| p.insns().len());
            assert_eq!(chosen, direct.min(translated), "{expr}");
            // The eBPF engines run emit_ebpf's program: it must agree with the IR.
            let mut run = PreparedFilter::new(&filter, Some(Engine::Interp)).unwrap();
            for p in &packets {
                let want = filter.matches(&p.data, p.wire_len);
                assert_eq!(run.matches(&p.data, p.wire_len), want, "{expr}: {:02x?}", p.data);
            }
        }
    }
}
