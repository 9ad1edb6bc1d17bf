//! A classic BPF program bound to an engine: its eBPF translation on the JIT (native code)
//! or the interpreter, or weir's classic interpreter (libpcap's semantics).

use weir_cbpf::translate;
use weir_cbpf::{CbpfFilter, Rules};
use weir_isa::cbpf::CbpfInsn;
use weir_program::ProgType;

use crate::engine::{choose, Choice, ChoiceError, Engine, Subject};
use crate::filter::SocketFilterRun;

/// A classic program ready to run on packets.
pub struct PreparedClassic {
    runner: Runner,
    choice: Choice,
}

enum Runner {
    Jit(Box<SocketFilterRun<weir_jit::JitProgram>>),
    Interp(Box<SocketFilterRun<weir_interp::Interpreter>>),
    Cbpf(CbpfFilter),
}

/// Whether a load reads outside the packet (ancillary data, `SKF_NET_OFF`...): capture
/// files carry no such data, and libpcap's semantics (a failed load) are what the classic
/// interpreter gives; the translation would read an empty context instead.
fn reads_outside_packet(insns: &[CbpfInsn]) -> bool {
    insns.iter().any(|insn| {
        let code = insn.to_raw().code;
        let is_load = code & 0x07 == 0x00 || code & 0x07 == 0x01;
        let mode = code & 0xe0;
        is_load && (mode == 0x20 || mode == 0x40) && insn.k >= 0x8000_0000
    })
}

impl PreparedClassic {
    /// Prepares `insns` (already in the caller's hands; validated here under `rules`).
    pub fn new(
        insns: &[CbpfInsn],
        rules: Rules,
        forced: Option<Engine>,
    ) -> Result<PreparedClassic, ChoiceError> {
        let (runner, choice) = choose(Subject::Classic, forced, |engine| {
            let translated = || -> Result<weir_program::Program, String> {
                if reads_outside_packet(insns) {
                    return Err("the program reads ancillary or header-relative data, which \
                                only the classic interpreter gives libpcap's meaning"
                        .into());
                }
                translate::translate(insns, ProgType::SocketFilter)
                    .map_err(|e| format!("translation to eBPF: {e}"))
            };
            match engine {
                Engine::Jit => Ok(Runner::Jit(Box::new(SocketFilterRun::prepare(
                    &weir_jit::Jit,
                    translated()?,
                    translate::bindings(ProgType::SocketFilter),
                    "translation",
                )?))),
                Engine::Interp => Ok(Runner::Interp(Box::new(SocketFilterRun::prepare(
                    &weir_interp::Interp,
                    translated()?,
                    translate::bindings(ProgType::SocketFilter),
                    "translation",
                )?))),
                Engine::Cbpf => Ok(Runner::Cbpf(
                    CbpfFilter::with_rules(insns, rules).map_err(|e| e.to_string())?,
                )),
                other => Err(format!("`{other}` runs filters compiled from expressions only")),
            }
        })?;
        Ok(PreparedClassic { runner, choice })
    }

    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    /// The program's return value for one packet (0: reject).
    pub fn run(&mut self, packet: &[u8], wire_len: u32) -> u32 {
        match &mut self.runner {
            // A socket filter's verdict is the low 32 bits of r0, as in the kernel.
            Runner::Jit(run) => run.run(packet, wire_len) as u32,
            Runner::Interp(run) => run.run(packet, wire_len) as u32,
            Runner::Cbpf(filter) => filter.run(packet, wire_len),
        }
    }
}
