//! pfmatch dispatch, prepared on an engine, and the handler-table API.
//!
//! [`Dispatch`] is a match program compiled ([`weir_pfmatch::Dispatch`]: one filter IR
//! predicate) and prepared on the engine [`choose`] picks for [`Subject::Dispatch`]:
//! native code (weir-jit's filter compiler, returning the handler index and arguments) or
//! the IR's evaluator. Both give [`Program::reference`]'s outcome on every packet.
//!
//! [`Handlers`] is a table of closures by handler name; [`Dispatch::bind`] checks it
//! against the program's handlers (a handler the table lacks, or a name the program never
//! uses, is an error then, not when a packet first reaches it) and gives a [`Router`] that
//! calls the chosen handler with the packet and its arguments.
//!
//! ```
//! use weir::{Dispatch, Handlers, LinkType};
//! let src = "match {\n  tcp => web(tcp[2:2])\n  otherwise => rest\n}\n";
//! let dispatch = Dispatch::compile(src, LinkType::Ethernet).unwrap();
//! let table = Handlers::new()
//!     .on("web", |_packet: &[u8], args: &[u32]| format!("tcp to port {}", args[0]))
//!     .on("rest", |packet: &[u8], _: &[u32]| format!("{} other bytes", packet.len()));
//! let mut router = dispatch.bind(table).unwrap();
//! assert_eq!(router.run(&[0u8; 20], 20).as_deref(), Some("20 other bytes"));
//! // A table without `rest` is refused when it is bound.
//! let partial = Handlers::new().on("web", |_: &[u8], _: &[u32]| String::new());
//! let dispatch = Dispatch::compile(src, LinkType::Ethernet).unwrap();
//! let refused = dispatch.bind(partial).err().expect("refused");
//! assert_eq!(refused.to_string(), "the table has no handler for rest");
//! ```

use std::fmt;

use weir_filter::SCRATCH_SLOTS;
use weir_pflang::names::NameDb;
use weir_pflang::LinkType;
use weir_pfmatch::{MatchError, Outcome, Program, Warning};

use crate::engine::{choose, Choice, ChoiceError, Engine, Subject};

/// Why a match program did not become a [`Dispatch`] or a [`Router`].
#[derive(Debug)]
pub enum DispatchError {
    /// The program text (a line and a caret: [`MatchError::render`]).
    Parse(MatchError),
    /// Lowering (too few free scratch slots) or no engine could take it.
    Compile(String),
    /// [`Dispatch::bind`]: handlers the program names and the table lacks, and names in
    /// the table the program never uses.
    Handlers { missing: Vec<String>, unknown: Vec<String> },
}

impl fmt::Display for DispatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DispatchError::Parse(e) => write!(f, "{}", e.render()),
            DispatchError::Compile(e) => f.write_str(e),
            DispatchError::Handlers { missing, unknown } => {
                let mut parts = Vec::new();
                if !missing.is_empty() {
                    parts.push(format!("the table has no handler for {}", missing.join(", ")));
                }
                if !unknown.is_empty() {
                    parts.push(format!("the program has no handler named {}", unknown.join(", ")));
                }
                f.write_str(&parts.join("; "))
            }
        }
    }
}

impl std::error::Error for DispatchError {}

enum Runner {
    Native(Box<weir_jit::filter::NativeResults>),
    Reference,
}

/// A match program compiled and prepared on an engine (see the module documentation).
pub struct Dispatch {
    program: Program,
    compiled: weir_pfmatch::Dispatch,
    runner: Runner,
    choice: Choice,
}

impl Dispatch {
    /// Parses and compiles a match program for a link type (names from the system's files,
    /// as [`crate::compile_filter`]), on the fastest engine that takes it.
    pub fn compile(source: &str, linktype: LinkType) -> Result<Dispatch, DispatchError> {
        let program = weir_pfmatch::parse_with(
            source,
            &weir_pflang::Options::new(linktype),
            &NameDb::system(),
        )
        .map_err(DispatchError::Parse)?;
        Dispatch::prepare(program, None).map_err(|e| DispatchError::Compile(e.to_string()))
    }

    /// Compiles a parsed program on the forced engine, or on the best one that takes it.
    pub fn prepare(program: Program, forced: Option<Engine>) -> Result<Dispatch, ChoiceError> {
        let compiled = weir_pfmatch::Dispatch::compile(&program)
            .map_err(|message| ChoiceError { message, reasons: Vec::new() })?;
        let (runner, choice) = choose(Subject::Dispatch, forced, |engine| match engine {
            Engine::Native => {
                let slots = compiled.result_slots();
                weir_jit::filter::compile_results_read(
                    compiled.filter(),
                    &slots,
                    &compiled.result_reads(),
                )
                .map(|n| Runner::Native(Box::new(n)))
                .map_err(|e| e.to_string())
            }
            Engine::Reference => Ok(Runner::Reference),
            other => Err(format!("`{other}` does not run pfmatch dispatch")),
        })?;
        Ok(Dispatch { program, compiled, runner, choice })
    }

    /// The handler and arguments for one packet (`wire_len`: its length on the wire).
    #[inline]
    pub fn run(&self, packet: &[u8], wire_len: u32) -> Outcome {
        match &self.runner {
            Runner::Native(native) => {
                let mut results = [0u32; SCRATCH_SLOTS as usize];
                let hit = native.run(packet, wire_len, &mut results);
                self.compiled.outcome(hit, &results[..native.slots().len()])
            }
            Runner::Reference => self.compiled.run(packet, wire_len),
        }
    }

    /// The handler index only (no allocation): what counting needs.
    #[inline]
    pub fn handler(&self, packet: &[u8], wire_len: u32) -> Option<usize> {
        match &self.runner {
            Runner::Native(native) => {
                let mut results = [0u32; SCRATCH_SLOTS as usize];
                native.run(packet, wire_len, &mut results);
                self.native_handler(&results)
            }
            Runner::Reference => self.compiled.run(packet, wire_len).handler,
        }
    }

    /// The handler the native code chose: its first result slot holds the handler's index
    /// plus one on a match and 0 on no match ([`weir_jit::filter::compile_results_read`]),
    /// so the answer is the slot's alone, without a branch on whether it matched: less one,
    /// wrapping, it is below the handler count exactly when it names a handler (0 wraps to
    /// `u32::MAX`). The caller's Some/None then need not be a branch either, which the 8%
    /// of the benchmark's packets that no clause takes mispredicted
    /// (bench/records/2026-12-01-pfmatch-22.txt).
    #[inline]
    fn native_handler(&self, results: &[u32; SCRATCH_SLOTS as usize]) -> Option<usize> {
        let h = results[0].wrapping_sub(1) as usize;
        (h < self.program.handlers.len()).then_some(h)
    }

    /// [`Self::handler`] on each `(packet, wire length)` of `packets` in order, `each` told
    /// the packet's index and its handler. On native code this is
    /// [`weir_jit::filter::NativeResults::run_each`], which asks the CPU for each packet a few
    /// places ahead, so a stream of packets not yet in cache waits less on each one
    /// (bench/records/2026-11-29-pfmatch-13.txt: 53 -> 29 ns a packet); the answers are
    /// `handler`'s.
    #[inline]
    pub fn handler_each(
        &self,
        packets: &[(&[u8], u32)],
        mut each: impl FnMut(usize, Option<usize>),
    ) {
        match &self.runner {
            Runner::Native(native) => native.run_each(packets, |i, _, results| {
                each(i, self.native_handler(results));
            }),
            Runner::Reference => {
                for (i, &(packet, wire_len)) in packets.iter().enumerate() {
                    each(i, self.compiled.run(packet, wire_len).handler);
                }
            }
        }
    }

    /// [`Self::run`] on each `(packet, wire length)` of `packets` in order (prefetching as
    /// [`Self::handler_each`] does), `each` told the packet's index and its outcome.
    pub fn run_each(&self, packets: &[(&[u8], u32)], mut each: impl FnMut(usize, Outcome)) {
        match &self.runner {
            Runner::Native(native) => native.run_each(packets, |i, hit, results| {
                each(i, self.compiled.outcome(hit, &results[..native.slots().len()]));
            }),
            Runner::Reference => {
                for (i, &(packet, wire_len)) in packets.iter().enumerate() {
                    each(i, self.compiled.run(packet, wire_len));
                }
            }
        }
    }

    /// Handler names; [`Outcome::handler`] indexes this.
    pub fn handlers(&self) -> &[String] {
        &self.program.handlers
    }

    /// Unreachable clauses and the like, found when parsing.
    pub fn warnings(&self) -> &[Warning] {
        &self.program.warnings
    }

    /// The engine and why (`--explain`).
    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    /// The compiled decision structure (`--explain`).
    pub fn compiled(&self) -> &weir_pfmatch::Dispatch {
        &self.compiled
    }

    /// Checks `table` against the program's handlers and gives the router that calls them.
    pub fn bind<'a, R>(self, table: Handlers<'a, R>) -> Result<Router<'a, R>, DispatchError> {
        let mut entries: Vec<Option<HandlerFn<'a, R>>> =
            self.program.handlers.iter().map(|_| None).collect();
        let mut unknown = Vec::new();
        for (name, f) in table.entries {
            match self.program.handlers.iter().position(|h| *h == name) {
                Some(i) => entries[i] = Some(f),
                None => unknown.push(name),
            }
        }
        let missing: Vec<String> = self
            .program
            .handlers
            .iter()
            .zip(&entries)
            .filter(|(_, f)| f.is_none())
            .map(|(name, _)| name.clone())
            .collect();
        if !missing.is_empty() || !unknown.is_empty() {
            return Err(DispatchError::Handlers { missing, unknown });
        }
        Ok(Router { dispatch: self, handlers: entries.into_iter().flatten().collect() })
    }
}

/// The program's function name in an XDP object of a dispatch.
pub const XDP_FUNCTION: &str = "weir_match";

/// A dispatch as an XDP object (`weir compile --match FILE -o x.o`): weir-pfmatch's XDP
/// program ([`weir_pfmatch::Dispatch::xdp`]: handler names that are XDP actions act,
/// every handler counted in [`weir_pfmatch::xdp::COUNTS_MAP`]) written by weir-elf with
/// BTF-defined maps pinned by name, so that `bpftool map dump pinned
/// /sys/fs/bpf/pfm_counts` reads the counts and `bpftool map update` fills the devmap of
/// `redirect:N`.
pub fn xdp_object(dispatch: &weir_pfmatch::Dispatch, function: &str) -> Result<Vec<u8>, String> {
    let xdp = dispatch.xdp()?;
    let options = weir_elf::write::ObjectOptions {
        pin_maps: true,
        ..weir_elf::write::ObjectOptions::new(function)
    };
    weir_elf::write::write_program(&xdp.program, &options).map_err(|e| e.to_string())
}

type HandlerFn<'a, R> = Box<dyn FnMut(&[u8], &[u32]) -> R + 'a>;

/// A table of handlers by name: closures taking the packet and the handler's arguments.
pub struct Handlers<'a, R> {
    entries: Vec<(String, HandlerFn<'a, R>)>,
}

impl<R> Default for Handlers<'_, R> {
    fn default() -> Self {
        Handlers { entries: Vec::new() }
    }
}

impl<'a, R> Handlers<'a, R> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the handler called `name`.
    pub fn on(mut self, name: &str, f: impl FnMut(&[u8], &[u32]) -> R + 'a) -> Self {
        self.entries.retain(|(n, _)| n != name);
        self.entries.push((name.to_string(), Box::new(f)));
        self
    }
}

/// A [`Dispatch`] bound to a complete handler table.
pub struct Router<'a, R> {
    dispatch: Dispatch,
    /// Indexed as [`Dispatch::handlers`].
    handlers: Vec<HandlerFn<'a, R>>,
}

impl<R> Router<'_, R> {
    /// Dispatches one packet: the chosen handler's result, or `None` when no clause matched.
    pub fn run(&mut self, packet: &[u8], wire_len: u32) -> Option<R> {
        let Outcome { handler, args } = self.dispatch.run(packet, wire_len);
        let f = self.handlers.get_mut(handler?)?;
        Some(f(packet, &args))
    }

    /// [`Self::run`] on each `(packet, wire length)` of `packets` in order (through
    /// [`Dispatch::run_each`], which prefetches), `each` told the packet's index and the
    /// chosen handler's result (`None`: no clause matched).
    pub fn run_each(&mut self, packets: &[(&[u8], u32)], mut each: impl FnMut(usize, Option<R>)) {
        let handlers = &mut self.handlers;
        self.dispatch.run_each(packets, |i, Outcome { handler, args }| {
            let packet = packets.get(i).map_or(&[][..], |p| p.0);
            let result = handler.and_then(|h| handlers.get_mut(h)).map(|f| f(packet, &args));
            each(i, result);
        });
    }

    pub fn dispatch(&self) -> &Dispatch {
        &self.dispatch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "match {\n  tcp => web(tcp[2:2], &tcp[0])\n  arp => resolve\n}\n";

    /// A name the program lacks is refused at bind, as is a missing one; a bound router
    /// calls the chosen closure with the packet's arguments, and nothing when no clause
    /// matches; native code and the evaluator agree.
    #[test]
    fn handler_tables_are_checked_at_bind_and_called_by_name() {
        let dispatch = Dispatch::compile(SRC, LinkType::Ethernet).unwrap();
        assert_eq!(dispatch.choice().engine, Engine::Native);
        let table = Handlers::new()
            .on("web", |_: &[u8], _: &[u32]| 0u32)
            .on("resolve", |_: &[u8], _: &[u32]| 0)
            .on("wbe", |_: &[u8], _: &[u32]| 0);
        let e = dispatch.bind(table).err().expect("refused");
        assert_eq!(e.to_string(), "the program has no handler named wbe");

        let mut frame = vec![0u8; 60];
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        frame[14] = 0x45;
        frame[23] = 6;
        frame[36..38].copy_from_slice(&8080u16.to_be_bytes());
        for engine in [Engine::Native, Engine::Reference] {
            let program = weir_pfmatch::parse(SRC, LinkType::Ethernet, &NameDb::builtin()).unwrap();
            let dispatch = Dispatch::prepare(program, Some(engine)).unwrap();
            let mut seen = Vec::new();
            let mut router = dispatch
                .bind(
                    Handlers::new()
                        .on("web", |_: &[u8], a: &[u32]| a.to_vec())
                        .on("resolve", |_: &[u8], _: &[u32]| vec![7]),
                )
                .unwrap();
            seen.push(router.run(&frame, 60));
            frame[12..14].copy_from_slice(&[0x08, 0x06]);
            seen.push(router.run(&frame, 60));
            frame[12..14].copy_from_slice(&[0x86, 0xdd]);
            seen.push(router.run(&frame, 60));
            frame[12..14].copy_from_slice(&[0x08, 0x00]);
            assert_eq!(seen, [Some(vec![8080, 34]), Some(vec![7]), None], "{engine}");
        }
    }

    /// The native code's handler index is the evaluator's, singly and in batches (where the
    /// results of an earlier packet that matched are still in the buffer when one misses):
    /// over matches, misses (UDP, ICMP, IPv6, other EtherTypes) and frames cut short.
    #[test]
    fn native_handlers_are_the_evaluators() {
        let prepare = |engine| {
            let program = weir_pfmatch::parse(SRC, LinkType::Ethernet, &NameDb::builtin());
            Dispatch::prepare(program.unwrap(), Some(engine)).unwrap()
        };
        let (native, reference) = (prepare(Engine::Native), prepare(Engine::Reference));
        let mut rng = weir_testkit::SplitMix64::new(17);
        let mut frames: Vec<(Vec<u8>, u32)> = Vec::new();
        for _ in 0..600 {
            let mut frame = vec![0u8; 60];
            let types: [[u8; 2]; 4] = [[0x08, 0x00], [0x08, 0x06], [0x86, 0xdd], [0x88, 0x47]];
            frame[12..14].copy_from_slice(&types[rng.below(4) as usize]);
            frame[14] = 0x45;
            frame[23] = [6, 17, 1][rng.below(3) as usize];
            let len = if rng.chance(10) { rng.below(60) as usize } else { 60 };
            frame.truncate(len);
            frames.push((frame, 60));
        }
        let want: Vec<Option<usize>> =
            frames.iter().map(|(f, w)| reference.run(f, *w).handler).collect();
        let single: Vec<Option<usize>> =
            frames.iter().map(|(f, w)| native.handler(f, *w)).collect();
        assert_eq!(single, want);
        let batch: Vec<(&[u8], u32)> = frames.iter().map(|(f, w)| (&f[..], *w)).collect();
        let mut each = Vec::new();
        native.handler_each(&batch, |_, h| each.push(h));
        assert_eq!(each, want);
        let misses = want.iter().filter(|h| h.is_none()).count();
        assert!(misses > 100 && misses < 500, "{misses} misses of 600");
    }

    /// What the native code's first slot means, whatever it holds: its value less one when
    /// that is a handler, else no handler (0, which a miss writes, and values past the last
    /// handler, which the compiled program never writes).
    #[test]
    fn native_handler_reads_the_first_slot_in_range() {
        let program = weir_pfmatch::parse(SRC, LinkType::Ethernet, &NameDb::builtin());
        let dispatch = Dispatch::prepare(program.unwrap(), Some(Engine::Native)).unwrap();
        let n = dispatch.handlers().len();
        assert!(n >= 2, "{n} handlers");
        let mut results = [0u32; SCRATCH_SLOTS as usize];
        for first in [0, 1, 2, n as u32 - 1, n as u32, n as u32 + 1, n as u32 + 2, u32::MAX] {
            results[0] = first;
            let want = (1..=n as u32).contains(&first).then(|| first as usize - 1);
            assert_eq!(dispatch.native_handler(&results), want, "slot {first}");
        }
    }

    /// The batch calls answer as the single ones do, packet for packet, on both engines:
    /// handlers, arguments and routed results, over frames of every protocol the program
    /// splits on, cut anywhere (short frames go to the native code's whole function), in
    /// batches of 0 to 40 packets.
    #[test]
    fn batch_calls_answer_as_single_ones() {
        const PROGRAM: &str = "match {\n  tcp port 22 => ssh(&tcp[0])\n  \
            tcp => web(tcp[2:2], &tcp[0])\n  udp => dns(udp[2:2])\n  arp => resolve\n  \
            ip6 => six\n}\n";
        let mut rng = weir_testkit::SplitMix64::new(15);
        let mut frames: Vec<(Vec<u8>, u32)> = Vec::new();
        for _ in 0..400 {
            let mut frame = vec![0u8; 60];
            let kind = rng.below(5);
            frame[12..14].copy_from_slice(match kind {
                0..=2 => &[0x08, 0x00],
                3 => &[0x08, 0x06],
                _ => &[0x86, 0xdd],
            });
            frame[14] = 0x45;
            frame[23] = [6, 17, 1][rng.below(3) as usize];
            let port = [22u16, 80, 53, 443][rng.below(4) as usize];
            frame[34 + rng.below(4) as usize..][..2].copy_from_slice(&port.to_be_bytes());
            let len = if rng.chance(20) { rng.below(60) as usize } else { 60 };
            frame.truncate(len);
            frames.push((frame, 60));
        }
        let mut handled = 0;
        for engine in [Engine::Native, Engine::Reference] {
            let program =
                weir_pfmatch::parse(PROGRAM, LinkType::Ethernet, &NameDb::builtin()).unwrap();
            let dispatch = Dispatch::prepare(program, Some(engine)).unwrap();
            let mut at = 0;
            while at < frames.len() {
                let n = (rng.below(41) as usize).min(frames.len() - at);
                let batch: Vec<(&[u8], u32)> =
                    frames[at..at + n].iter().map(|(f, w)| (&f[..], *w)).collect();
                let mut seen = 0;
                dispatch.handler_each(&batch, |i, h| {
                    assert_eq!(i, seen, "{engine}: order");
                    seen += 1;
                    let (f, w) = batch[i];
                    assert_eq!(h, dispatch.handler(f, w), "{engine}: packet {}", at + i);
                    handled += usize::from(h.is_some());
                });
                assert_eq!(seen, n, "{engine}: every packet");
                let mut outcomes = Vec::new();
                dispatch.run_each(&batch, |_, o| outcomes.push(o));
                let single: Vec<Outcome> = batch.iter().map(|&(f, w)| dispatch.run(f, w)).collect();
                assert_eq!(outcomes, single, "{engine}: outcomes from {at}");
                at += n;
            }
            let route = |dispatch: Dispatch| {
                dispatch
                    .bind(
                        Handlers::new()
                            .on("ssh", |p: &[u8], a: &[u32]| (1, p.len(), a.to_vec()))
                            .on("web", |p: &[u8], a: &[u32]| (2, p.len(), a.to_vec()))
                            .on("dns", |p: &[u8], a: &[u32]| (3, p.len(), a.to_vec()))
                            .on("resolve", |p: &[u8], a: &[u32]| (4, p.len(), a.to_vec()))
                            .on("six", |p: &[u8], a: &[u32]| (5, p.len(), a.to_vec())),
                    )
                    .unwrap()
            };
            let mut router = route(dispatch);
            let batch: Vec<(&[u8], u32)> = frames.iter().map(|(f, w)| (&f[..], *w)).collect();
            let mut routed = Vec::new();
            router.run_each(&batch, |_, r| routed.push(r));
            let single: Vec<_> = batch.iter().map(|&(f, w)| router.run(f, w)).collect();
            assert_eq!(routed, single, "{engine}: routed");
        }
        assert!(handled > 400, "the frames reach the handlers ({handled} of 800)");
    }
}
