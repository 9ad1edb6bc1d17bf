//! A compiled filter bound to the engine chosen for it.

use weir_cbpf::CbpfFilter;
use weir_filter::emit::{cbpf, ebpf};
use weir_filter::Filter;
use weir_program::abi::{Bindings, ContextLayout};

use crate::engine::{choose, Choice, ChoiceError, Engine, Subject};

/// A filter ready to run on packets, on one engine.
pub struct PreparedFilter {
    runner: Runner,
    choice: Choice,
}

enum Runner {
    Native(Box<weir_jit::filter::NativeFilter>),
    Jit(Box<SocketFilterRun<weir_jit::JitProgram, weir_jit::Cache>>),
    Interp(Box<SocketFilterRun<weir_interp::Interpreter, weir_interp::Cache>>),
    Cbpf(CbpfFilter),
    Reference(Filter),
}

/// An eBPF socket-filter program with its context and a packet buffer: eBPF engines take
/// the packet as writable memory, so each packet is copied into `packet` first. The
/// context is all zeros but `len` (no ancillary data: capture files carry none).
pub(crate) struct SocketFilterRun<P, C> {
    program: P,
    cache: C,
    ctx: Vec<u8>,
    len_field: usize,
    packet: Vec<u8>,
}

impl<P, C> SocketFilterRun<P, C> {
    pub(crate) fn new(program: P, cache: C, layout: &ContextLayout) -> Self {
        let len_field = layout.field("len").map_or(0, |f| f.offset as usize);
        SocketFilterRun {
            program,
            cache,
            ctx: vec![0; layout.size as usize],
            len_field,
            packet: Vec::new(),
        }
    }

    /// Fills the context and the packet buffer for one run.
    fn load(&mut self, packet: &[u8], wire_len: u32) {
        if let Some(field) = self.ctx.get_mut(self.len_field..self.len_field + 4) {
            field.copy_from_slice(&wire_len.to_le_bytes());
        }
        self.packet.clear();
        self.packet.extend_from_slice(packet);
    }
}

impl SocketFilterRun<weir_jit::JitProgram, weir_jit::Cache> {
    /// r0 for one packet; a trap rejects (0), as an aborted filter does.
    pub(crate) fn run(&mut self, packet: &[u8], wire_len: u32) -> u64 {
        self.load(packet, wire_len);
        let input = weir_jit::Input::new().ctx(&mut self.ctx).packet(&mut self.packet);
        self.program.run(&mut self.cache, input).unwrap_or(0)
    }
}

impl SocketFilterRun<weir_interp::Interpreter, weir_interp::Cache> {
    /// r0 for one packet; a trap rejects (0), as an aborted filter does.
    pub(crate) fn run(&mut self, packet: &[u8], wire_len: u32) -> u64 {
        self.load(packet, wire_len);
        let input = weir_interp::Input::new().ctx(&mut self.ctx).packet(&mut self.packet);
        self.program.run(&mut self.cache, input).unwrap_or(0)
    }
}

fn socket_bindings() -> (Bindings, &'static ContextLayout) {
    let layout = ebpf::Target::SocketFilter.context_layout();
    let mut bindings = Bindings::new();
    bindings.context = Some(layout);
    (bindings, layout)
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
        Engine::Jit => {
            let program = emit_socket_filter(filter)?;
            let (bindings, layout) = socket_bindings();
            let jit = weir_jit::Jit::compile(&program, bindings, weir_jit::Config::default())
                .map_err(|e| format!("the eBPF JIT cannot compile the emitted program: {e}"))?;
            let cache = jit.cache();
            Runner::Jit(Box::new(SocketFilterRun::new(jit, cache, layout)))
        }
        Engine::Interp => {
            let program = emit_socket_filter(filter)?;
            let (bindings, layout) = socket_bindings();
            let interp =
                weir_interp::Interpreter::new(&program, bindings, weir_interp::Config::default())
                    .map_err(|e| format!("the interpreter refuses the emitted program: {e}"))?;
            let cache = interp.cache();
            Runner::Interp(Box::new(SocketFilterRun::new(interp, cache, layout)))
        }
        Engine::Cbpf => {
            let insns = cbpf::emit(filter).map_err(|e| format!("classic BPF: {e}"))?;
            Runner::Cbpf(CbpfFilter::new(&insns).map_err(|e| format!("classic BPF: {e}"))?)
        }
        Engine::Reference => Runner::Reference(filter.clone()),
    })
}

fn emit_socket_filter(filter: &Filter) -> Result<weir_program::Program, String> {
    ebpf::emit(filter, ebpf::Target::SocketFilter).map_err(|e| format!("eBPF emission: {e}"))
}
