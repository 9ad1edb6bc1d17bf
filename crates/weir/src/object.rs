//! Running clang-built BPF objects: [`Object`] (an ELF object's programs with their maps
//! created and their `lddw map` relocations resolved) and [`Loaded`] (one entry program
//! prepared on an engine, with every program of the object for tail calls, run packet by
//! packet with maps persisting between packets).

use std::sync::Arc;

use weir_elf::ObjectSpec;
use weir_helpers::{Env, PacketBounds};
use weir_isa::ebpf::{Insn, Op};
use weir_maps::Map;
use weir_program::abi::RunEnv;
use weir_program::exec::{guest, Batch, Input, LentRun, PacketSpan, RunOutcome, Session};
use weir_program::{MapType, ProgType, Program, RelocTarget, Trap, Verified};

pub use crate::engine::Engine;
use crate::engine::{choose, Choice, Subject};
use crate::tiered::{JitSession, Tiered, BACKGROUND_JIT_SLOTS};
pub use weir_program::exec::Limits;

/// XDP: the kernel test run's headroom (`XDP_PACKET_HEADROOM`).
pub const XDP_HEADROOM: usize = 256;
/// XDP: the test run's frame (a page) and the tailroom it keeps for `skb_shared_info`.
pub const XDP_FRAME: usize = 4096;
pub const XDP_TAILROOM: usize = 320;
/// The bytes of `xdp_md` and of `__sk_buff` as the runner lays them out.
const XDP_CTX: usize = 24;
const SKB_CTX: usize = 192;

/// One program of an object.
#[derive(Clone, Debug)]
pub struct ObjectProgram {
    pub name: String,
    pub section: String,
    pub prog_type: ProgType,
    program: Program,
    /// The object described its functions in BTF (`.BTF.ext` func_info), as the kernel
    /// wants before a program takes a function's address (`bpf_loop`).
    func_info: bool,
}

/// An ELF object ready to load: its programs and its live maps.
pub struct Object {
    programs: Vec<ObjectProgram>,
    maps: Vec<Arc<Map>>,
}

impl ObjectProgram {
    /// The program as the object holds it (map references as `lddw map_idx`, before
    /// loading resolves them): what the verifier checks.
    pub fn program(&self) -> &Program {
        &self.program
    }
}

impl Object {
    /// Verifies program `entry` as the kernel would load it (its program type, the helpers
    /// weir runs for it).
    pub fn verify(
        &self,
        entry: usize,
        log: bool,
    ) -> Result<weir_verifier::Proof, weir_verifier::Rejection> {
        let p = self.programs.get(entry).ok_or_else(|| weir_verifier::Rejection {
            pc: 0,
            rule: weir_verifier::Rule::Structure,
            message: "no such program".into(),
            trace: Vec::new(),
        })?;
        let options = weir_verifier::Options {
            prog_type: Some(p.prog_type),
            helpers: Some(crate::runtime_helpers(p.prog_type)),
            log,
            func_info: p.func_info,
            ..weir_verifier::Options::default()
        };
        weir_verifier::verify(&p.program, &options)
    }

    /// Parses `bytes`, creates every map (global data with its initial contents), for one
    /// worker.
    pub fn open(bytes: &[u8]) -> Result<Object, String> {
        Object::open_with_cpus(bytes, 1)
    }

    /// [`Object::open`] for `cpus` workers: per-CPU maps get a copy per worker (load each
    /// worker's program with its index as `cpu`); the other maps are shared.
    pub fn open_with_cpus(bytes: &[u8], cpus: usize) -> Result<Object, String> {
        let spec = ObjectSpec::parse(bytes).map_err(|e| e.to_string())?;
        let mut maps = Vec::new();
        for m in &spec.maps {
            let map = Map::create(&m.spec, cpus)
                .map_err(|e| format!("map `{}`: cannot create it: {e}", m.spec.name))?;
            if let Some(initial) = &m.initial {
                let mut value = initial.clone();
                value.resize(m.spec.value_size as usize, 0);
                map.update_all(&0u32.to_ne_bytes(), &value, 0)
                    .map_err(|e| format!("map `{}`: initial contents: {e}", m.spec.name))?;
            }
            // Entries an emitter carried in the object (weir-elf's `.weir.entries`: the
            // flow datapath's tables), which the kernel's loaders leave to `weir flow update`.
            for (key, value) in &m.entries {
                map.update_all(key, value, 0)
                    .map_err(|e| format!("map `{}`: initial entry: {e}", m.spec.name))?;
            }
            maps.push(Arc::new(map));
        }
        let mut programs = Vec::new();
        for p in &spec.programs {
            let Some(prog_type) = p.program.prog_type() else {
                return Err(format!(
                    "program `{}` (section {}): no program type",
                    p.name, p.section
                ));
            };
            programs.push(ObjectProgram {
                name: p.name.clone(),
                section: p.section.clone(),
                prog_type,
                program: p.program.clone(),
                func_info: !p.functions.is_empty(),
            });
        }
        if programs.is_empty() {
            return Err("the object has no program weir can run".into());
        }
        Ok(Object { programs, maps })
    }

    pub fn programs(&self) -> &[ObjectProgram] {
        &self.programs
    }

    /// The live maps, in the object's order.
    pub fn maps(&self) -> &[Arc<Map>] {
        &self.maps
    }

    /// The entry: by function name, else by section, else the only program.
    pub fn entry(&self, name: Option<&str>, section: Option<&str>) -> Result<usize, String> {
        let list = || {
            self.programs
                .iter()
                .map(|p| format!("{} (section {})", p.name, p.section))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let found: Vec<usize> = self
            .programs
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                name.is_none_or(|n| p.name == n) && section.is_none_or(|s| p.section == s)
            })
            .map(|(i, _)| i)
            .collect();
        match found.as_slice() {
            [one] => Ok(*one),
            [] => Err(format!("no such program; the object has: {}", list())),
            _ => Err(format!("the object has several programs, pick one with --prog: {}", list())),
        }
    }

    /// Loads program `entry` (and every program of the object of the same type, for tail
    /// calls) on `engine` (or the chosen one), for worker `cpu`.
    pub fn load(&self, entry: usize, engine: Option<Engine>, cpu: usize) -> Result<Loaded, String> {
        self.load_with(entry, engine, cpu, false)
    }

    /// [`Object::load`], with `proven`: each program loaded is verified first and runs
    /// with its proof (the JIT then drops the checks the verifier's facts cover); the
    /// entry program must be accepted, another one the verifier refuses runs fully checked.
    pub fn load_with(
        &self,
        entry: usize,
        engine: Option<Engine>,
        cpu: usize,
        proven: bool,
    ) -> Result<Loaded, String> {
        let env = Env::new(self.maps.clone(), cpu);
        let entry_type = self.programs.get(entry).ok_or("no such program")?.prog_type;
        let mut sessions = Vec::new();
        let mut choice = None;
        let mut checks = None;
        // Whether every program a packet can reach is proven and none moves the packet's
        // span: then no run reads or writes the XDP buffer outside `[data, data_end)`.
        let mut packet_in_span = true;
        // Whether every such program also leaves the packet's bytes alone and makes no
        // tail call: then a batch runs over the source's frames in place (`Batch::lend`).
        let mut lends = true;
        for (index, p) in self.programs.iter().enumerate() {
            if p.prog_type != entry_type {
                sessions.push(None);
                continue;
            }
            let resolved =
                resolve(&p.program, &env).map_err(|e| format!("program `{}`: {e}", p.name))?;
            check_helpers(&resolved).map_err(|e| format!("program `{}`: {e}", p.name))?;
            // Verified only when the proof is used: on big.o (10,505 slots) the verifier
            // takes longer than everything else loading does.
            let proof = match proven.then(|| self.verify(index, false)) {
                Some(Ok(proof)) => Some(proof),
                Some(Err(e)) if index == entry => {
                    return Err(format!("program `{}`: verify: {e}", p.name))
                }
                _ => None,
            };
            packet_in_span &= proof.is_some() && !moves_span(&resolved);
            lends &= proof.as_ref().is_some_and(|proof| leaves_packet(&resolved, proof.facts()));
            let verified = match proof {
                // The proof is of the program before map references were resolved, which
                // `into_verified` admits.
                Some(proof) => proof.into_verified(resolved),
                None => Verified::structural(resolved),
            }
            .map_err(|e| format!("program `{}`: {e}", p.name))?;
            let bindings = weir_helpers::bindings(p.prog_type);
            let slots = verified.len();
            let background = engine.is_none()
                && slots > BACKGROUND_JIT_SLOTS
                && slots <= weir_jit::DEFAULT_MAX_SLOTS;
            let (session, mut how) = choose(Subject::Program, engine, |e| {
                if background && e == Engine::Jit {
                    let tiered = Tiered::start(&verified, &bindings, Limits::default())?;
                    return Ok(Runner::Tiered(Box::new(tiered)));
                }
                if e == Engine::Jit {
                    // Held by its type, not as a `dyn Session` (`Runner::run_batch`).
                    let config = weir_jit::Config::with_limits(Limits::default());
                    return weir_jit::Jit::compile(&verified, bindings.clone(), config)
                        .map(|program| Runner::Jit(Box::new(JitSession::new(program))))
                        .map_err(|e| e.to_string());
                }
                let Some(runner) = e.program_engine() else {
                    return Err(format!("`{e}` runs filters only"));
                };
                runner
                    .load(&verified, bindings.clone(), Limits::default())
                    .map(Runner::Session)
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| format!("program `{}`: {e}", p.name))?;
            if matches!(session, Runner::Tiered(_)) {
                // Replaces the generic line `choose` wrote for the JIT.
                how.reasons.pop();
                how.reasons.push(format!(
                    "jit: the program has {slots} slots (more than {BACKGROUND_JIT_SLOTS}): its \
                     native code compiles on a background thread, and the interpreter runs \
                     packets until it is ready (same results)"
                ));
            }
            if index == entry {
                if how.engine == Engine::Jit {
                    checks = Some(weir_jit::checks(&verified, &bindings, &Limits::default()));
                }
                choice = Some(how);
            }
            sessions.push(Some(session));
        }
        let choice = choice.ok_or("the entry program was not loaded")?;
        Ok(Loaded {
            sessions,
            entry,
            prog_type: entry_type,
            env,
            choice,
            checks,
            xdp_buffer: Vec::new(),
            xdp_ctx: [0; XDP_CTX],
            skb_buffer: Vec::new(),
            skb_ctx: [0; SKB_CTX],
            xdp_dirty: 0,
            xdp_head_dirty: XDP_HEADROOM,
            packet_in_span,
            lends,
            keep_packets: true,
        })
    }
}

/// Rewrites every `lddw map_idx`/`lddw map_idx_value` to a plain `lddw` of the map's handle
/// or its global data's guest address.
fn resolve(program: &Program, env: &Env) -> Result<Program, String> {
    let mut insns = program.insns().to_vec();
    for r in program.relocations() {
        let value = match r.target {
            RelocTarget::Map { map } => {
                guest::map_handle(map).ok_or_else(|| format!("map index {map} out of range"))?
            }
            RelocTarget::MapValue { map, offset } => {
                let base = env.static_addr(map).ok_or_else(|| {
                    format!("slot {}: map {map} has no global data value", r.slot)
                })?;
                base + u64::from(offset)
            }
        };
        let insn = insns.get_mut(r.slot).ok_or_else(|| format!("relocation at slot {}", r.slot))?;
        *insn = Insn::new(Op::Lddw, insn.dst, 0, 0, value as i64);
    }
    let mut out = Program::from_insns(insns);
    if let Some(t) = program.prog_type() {
        out = out.with_prog_type(t);
    }
    Ok(out)
}

/// Whether a program calls a helper that moves an XDP packet's `data_meta`, `data` or
/// `data_end` (after which it may reach bytes past the frame it was given).
fn moves_span(program: &Program) -> bool {
    use weir_program::abi::helper_id::{XDP_ADJUST_HEAD, XDP_ADJUST_META, XDP_ADJUST_TAIL};
    program.insns().iter().any(|i| {
        i.op == Op::Call
            && matches!(i.imm as u32, XDP_ADJUST_HEAD | XDP_ADJUST_META | XDP_ADJUST_TAIL)
    })
}

/// Whether a proven program leaves its packet's bytes and bounds alone: every store or
/// atomic it can reach is proven to land in one region that is not the packet, and it
/// calls only helpers that neither write packet bytes nor move the packet's bounds nor
/// tail-call (helper calls by number; `call %reg` may be any). Its packet can then be the
/// source's own frame, read-only, for a whole batch (`Batch::lend`). The JIT refuses a
/// store into a lent frame (memory safety); this keeps the results those of a copy: every
/// helper listed reads guest memory at most (a key, a value, a format, `csum_diff`'s
/// buffers).
fn leaves_packet(program: &Program, facts: &weir_program::Facts) -> bool {
    use weir_isa::ebpf::Operands;
    use weir_program::Region;
    let stores_elsewhere = program.insns().iter().enumerate().all(|(pc, insn)| {
        let fact = facts.get(pc);
        match insn.op.spec().map(|s| s.operands) {
            Some(Operands::StoreImm | Operands::StoreReg) if fact.reached => {
                fact.access_in_bounds == Some(true)
                    && fact.region.is_some_and(|r| r != Region::Packet)
            }
            _ => true,
        }
    });
    stores_elsewhere && calls_leave_packet(program)
}

/// The helper side of [`leaves_packet`].
fn calls_leave_packet(program: &Program) -> bool {
    use weir_program::abi::helper_id::*;
    const KTIME_GET_BOOT_NS: u32 = 125;
    const KTIME_GET_COARSE_NS: u32 = 160;
    const REDIRECT: u32 = 23;
    program.insns().iter().all(|i| match i.op {
        Op::Call => matches!(
            i.imm as u32,
            MAP_LOOKUP_ELEM
                | MAP_UPDATE_ELEM
                | MAP_DELETE_ELEM
                | KTIME_GET_NS
                | TRACE_PRINTK
                | GET_PRANDOM_U32
                | GET_SMP_PROCESSOR_ID
                | CSUM_DIFF
                | REDIRECT
                | REDIRECT_MAP
                | KTIME_GET_BOOT_NS
                | KTIME_GET_COARSE_NS
        ),
        Op::CallReg => false,
        _ => true,
    })
}

/// Refuses, naming them, helpers weir does not run.
fn check_helpers(program: &Program) -> Result<(), String> {
    let called = program.insns().iter().filter(|i| i.op == Op::Call).map(|i| i.imm as u32);
    let missing = weir_helpers::unsupported_helpers(called);
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = missing
        .iter()
        .map(|&id| match weir_helpers::helper_name(id) {
            Some(name) => format!("{name} (helper {id})"),
            None => format!("helper {id}"),
        })
        .collect();
    Err(format!("calls helpers weir does not run: {}", names.join(", ")))
}

/// What one packet gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The last program's return value (after tail calls).
    pub ret: u64,
    /// The packet as the program left it (XDP: `[data, data_end)`).
    pub packet: Vec<u8>,
}

/// What one packet gave, the packet lent from the runner's buffer ([`Loaded::run_view`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerdictView<'a> {
    /// The last program's return value (after tail calls).
    pub ret: u64,
    /// The packet as the program left it (XDP: `[data, data_end)`).
    pub packet: &'a [u8],
}

/// The name of a return value, as `weir run`'s summary and the Python package print it
/// (`XDP_PASS`, `TC_ACT_SHOT`, ...; a number where the program type has no name for it).
pub fn verdict_name(prog_type: ProgType, ret: u64) -> String {
    let names: &[&str] = match prog_type {
        ProgType::Xdp => &["XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX", "XDP_REDIRECT"],
        ProgType::SchedCls | ProgType::SchedAct => &[
            "TC_ACT_OK",
            "TC_ACT_RECLASSIFY",
            "TC_ACT_SHOT",
            "TC_ACT_PIPE",
            "TC_ACT_STOLEN",
            "TC_ACT_QUEUED",
            "TC_ACT_REPEAT",
            "TC_ACT_REDIRECT",
        ],
        ProgType::SocketFilter => &[],
    };
    if matches!(prog_type, ProgType::SchedCls | ProgType::SchedAct) && ret as i32 == -1 {
        return "TC_ACT_UNSPEC".into();
    }
    names.get(ret as usize).map_or_else(|| format!("{}", ret as i64), |n| n.to_string())
}

/// Whether a return value lets the packet through (XDP_PASS and XDP_TX; tc: TC_ACT_OK; a
/// socket filter: any length but 0): the packets `weir run -w` writes.
pub fn passes(prog_type: ProgType, ret: u64) -> bool {
    match prog_type {
        ProgType::Xdp => ret == 2 || ret == 3,
        ProgType::SchedCls | ProgType::SchedAct => ret == 0,
        ProgType::SocketFilter => ret != 0,
    }
}

/// Where an XDP program left its packet: `xdp_md`'s data, data_end and data_meta, as
/// offsets into the buffer.
fn xdp_span(ctx: &[u8]) -> PacketSpan {
    let field = |o: usize| {
        let bytes = ctx.get(o..o + 4).and_then(|b| b.try_into().ok()).unwrap_or([0; 4]);
        u32::from_le_bytes(bytes)
    };
    let off = |a: u32| (u64::from(a).saturating_sub(guest::PACKET_BASE)) as usize;
    PacketSpan { data: off(field(0)), end: off(field(4)), meta: off(field(8)) }
}

/// How a loaded program runs: one engine's session, the JIT's by its type (`Jit`), or the
/// interpreter until the JIT's code arrives (`tiered`).
enum Runner {
    Session(Box<dyn Session>),
    Jit(Box<JitSession>),
    Tiered(Box<Tiered>),
}

impl Runner {
    fn session(&mut self) -> &mut dyn Session {
        match self {
            Runner::Session(session) => session.as_mut(),
            Runner::Jit(jit) => jit.as_mut(),
            Runner::Tiered(tiered) => tiered.as_mut(),
        }
    }

    /// [`Session::run_batch`] with the batch's own type: on the JIT, the batch's per-frame
    /// loop (`XdpBatch::lend`) and the engine's per-frame run compiled as one, no call
    /// through `dyn` between them a frame (issue 11, bench/records/2026-12-01-runtime-33.txt).
    fn run_batch<B: Batch>(&mut self, input: Input<'_>, batch: &mut B) {
        match self {
            Runner::Session(session) => session.run_batch(input, batch),
            Runner::Jit(jit) => jit.run_batch_of(input, batch),
            Runner::Tiered(tiered) => tiered.run_batch_of(input, batch),
        }
    }
}

/// A loaded entry program with its environment.
pub struct Loaded {
    sessions: Vec<Option<Runner>>,
    entry: usize,
    prog_type: ProgType,
    env: Env,
    choice: Choice,
    /// On the JIT: the entry program's checks kept and dropped.
    checks: Option<weir_jit::Checks>,
    /// The XDP buffer, kept between packets.
    xdp_buffer: Vec<u8>,
    /// `xdp_md`, kept between packets (a fixed address for the engine's region entry).
    xdp_ctx: [u8; XDP_CTX],
    /// The packet and `__sk_buff` of tc and socket filter programs, kept likewise.
    skb_buffer: Vec<u8>,
    skb_ctx: [u8; SKB_CTX],
    /// The end of the bytes past the headroom the last packet may have left non-zero.
    xdp_dirty: usize,
    /// The start of the headroom bytes the last packet may have left non-zero (the
    /// headroom's end when it never moved `data_meta` or `data` below it).
    xdp_head_dirty: usize,
    /// Every program is proven and none calls a helper that moves the packet's span
    /// (`moves_span`): the XDP buffer's bytes outside the frame are never read, so they
    /// are not re-zeroed between packets.
    packet_in_span: bool,
    /// Every program is proven and leaves the packet alone (`leaves_packet`): an XDP batch
    /// may run over the source's frames in place, no copy (when the engine can:
    /// `Batch::lend`).
    lends: bool,
    /// Whether XDP verdicts carry the packet out (a copy per packet; see
    /// [`Loaded::keep_packets`]).
    keep_packets: bool,
}

impl Loaded {
    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    /// The engine choice and why, then (on the JIT) the run-time checks it kept and dropped:
    /// what `weir run --explain` prints after the verifier's line.
    pub fn explain(&self) -> String {
        let mut text = self.choice.to_string();
        match self.checks {
            Some(checks) => text.push_str(&format!("jit: {}", checks.summary())),
            None => text.push_str(&format!(
                "{}: every memory access and division checked at run time (only the JIT uses \
                 the verifier's facts)",
                self.choice.engine
            )),
        }
        text
    }

    /// On the JIT, the entry program's run-time checks kept and dropped (`--explain`).
    pub fn checks(&self) -> Option<weir_jit::Checks> {
        self.checks
    }

    /// Blocks until the programs compiling in the background (longer than
    /// [`BACKGROUND_JIT_SLOTS`]) have their native code; true when every loaded program now
    /// runs on the engine [`Loaded::choice`] names. Results never depend on it: tests and
    /// benchmarks call it to time or check the native code.
    pub fn wait_for_native(&mut self) -> bool {
        let mut all = true;
        for runner in self.sessions.iter_mut().flatten() {
            if let Runner::Tiered(tiered) = runner {
                all &= tiered.wait();
            }
        }
        all
    }

    /// Whether a program still runs on the interpreter while its native code compiles.
    pub fn compiling(&self) -> bool {
        self.sessions
            .iter()
            .flatten()
            .any(|runner| matches!(runner, Runner::Tiered(t) if !t.is_native()))
    }

    pub fn prog_type(&self) -> ProgType {
        self.prog_type
    }

    /// Whether an XDP batch ([`Loaded::run_batch`]) may run over the source's frames in
    /// place, no copy: every program is proven and leaves the packet alone (no packet
    /// store, no helper that writes or moves it, no tail call). The engine decides too:
    /// the JIT lends when its code for the program has no unchecked packet store; the
    /// interpreter always copies.
    pub fn lends(&self) -> bool {
        self.lends
    }

    pub fn env_mut(&mut self) -> &mut Env {
        &mut self.env
    }

    /// Whether [`Verdict::packet`] is filled for XDP programs (on by default). A caller that
    /// only wants return values (`weir run` without `-w`) turns it off and saves a copy of
    /// every packet; the packet is then empty.
    pub fn keep_packets(&mut self, keep: bool) {
        self.keep_packets = keep;
    }

    /// Runs the entry over one Ethernet frame (tail calls followed). The packet comes back
    /// as an owned copy (XDP: only with [`Loaded::keep_packets`]); [`Loaded::run_view`]
    /// lends it instead.
    pub fn run(&mut self, frame: &[u8]) -> Result<Verdict, Trap> {
        let keep = self.keep_packets || self.prog_type != ProgType::Xdp;
        let view = self.run_view(frame)?;
        Ok(Verdict { ret: view.ret, packet: if keep { view.packet.to_vec() } else { Vec::new() } })
    }

    /// Runs the entry over one Ethernet frame (tail calls followed) and lends the packet as
    /// the program left it, in the runner's own buffer (XDP: `[data, data_end)`): no copy
    /// out and no allocation per packet. The buffer is reused by the next run.
    pub fn run_view(&mut self, frame: &[u8]) -> Result<VerdictView<'_>, Trap> {
        match self.prog_type {
            ProgType::Xdp => self.run_xdp(frame),
            _ => self.run_skb(frame),
        }
    }

    fn run_xdp(&mut self, frame: &[u8]) -> Result<VerdictView<'_>, Trap> {
        self.xdp_buffer.resize(XDP_FRAME - XDP_TAILROOM, 0);
        let mut marks = self.xdp_marks();
        xdp_ctx_fixed(&mut self.xdp_ctx);
        let span = marks.begin(&mut self.xdp_buffer, &mut self.env, frame);
        let (ret, packet) = self.chain_xdp(self.entry, span, marks);
        Ok(VerdictView { ret: ret?, packet })
    }

    /// Runs `entry` and the tail calls it makes over the XDP buffer from `span`, then keeps
    /// what the run left dirty (`marks`): the verdict and the packet as the program left it.
    fn chain_xdp(
        &mut self,
        entry: usize,
        span: PacketSpan,
        mut marks: XdpMarks,
    ) -> (Result<u64, Trap>, &[u8]) {
        let ret = chain(
            &mut self.sessions,
            &mut self.env,
            entry,
            &mut self.xdp_ctx,
            &mut self.xdp_buffer,
            span,
            Some(xdp_span),
        );
        let last = marks.end(&self.xdp_ctx, &self.env);
        self.keep_marks(marks);
        (ret, self.xdp_buffer.get(last.data..last.end).unwrap_or_default())
    }

    fn xdp_marks(&self) -> XdpMarks {
        XdpMarks {
            dirty: self.xdp_dirty,
            head_dirty: self.xdp_head_dirty,
            in_span: self.packet_in_span,
            frame_end: XDP_HEADROOM,
        }
    }

    fn keep_marks(&mut self, marks: XdpMarks) {
        (self.xdp_dirty, self.xdp_head_dirty) = (marks.dirty, marks.head_dirty);
    }

    /// Runs the entry over many frames, one batch: `next` hands the next frame to the
    /// function it is given (and returns `Ok(true)`), or returns `Ok(false)` at the end;
    /// `each` takes each packet's verdict (as [`Loaded::run_view`] gives it) in order. An
    /// error of either ends the batch and is returned. The results are exactly those of
    /// [`Loaded::run_view`] packet by packet; on XDP, the engine sets its run state up once
    /// per batch, not per packet (as the kernel's test run loops `repeat` runs inside one
    /// call), and the frame is copied straight from `next`'s view into the buffer.
    pub fn run_batch<E>(
        &mut self,
        next: impl FnMut(&mut dyn FnMut(&[u8])) -> Result<bool, E>,
        each: impl FnMut(Result<VerdictView<'_>, Trap>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.run_frames(Given(next), each)
    }

    /// [`Loaded::run_batch`] over an iterator of frames (they borrow their source, not the
    /// iterator: a capture reader's buffered records): no callback a frame, so that on the
    /// JIT the caller's record walk, the engine's run and `each` compile as one loop (issue
    /// 11: `weir run`'s source reached the loop through a `dyn FnMut` a frame,
    /// bench/records/2026-12-01-runtime-34.txt). The results are [`Loaded::run_batch`]'s.
    pub fn run_batch_frames<'f, E>(
        &mut self,
        frames: impl Iterator<Item = &'f [u8]>,
        each: impl FnMut(Result<VerdictView<'_>, Trap>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.run_frames(Iterated(frames), each)
    }

    /// [`Loaded::run_batch`] over a source of the caller's own type, whose frames may
    /// borrow it until its next frame (a capture reader's `next_packet`, which an iterator
    /// of frames cannot give): its `put` is called directly, not through `dyn` a frame, so
    /// that on the JIT the source, the engine's run and `each` compile as one loop as
    /// [`Loaded::run_batch_frames`]'s do (issue 11, bench/records/2026-12-01-runtime-35.txt).
    /// The results are [`Loaded::run_batch`]'s.
    pub fn run_batch_from<E>(
        &mut self,
        frames: impl FrameSource<E>,
        each: impl FnMut(Result<VerdictView<'_>, Trap>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.run_frames(frames, each)
    }

    fn run_frames<E>(
        &mut self,
        mut next: impl FrameSource<E>,
        mut each: impl FnMut(Result<VerdictView<'_>, Trap>) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.prog_type != ProgType::Xdp {
            loop {
                let mut result = Ok(());
                let more = next.next_frame(|frame: &[u8]| result = each(self.run_view(frame)))?;
                result?;
                if !more {
                    return Ok(());
                }
            }
        }
        self.xdp_buffer.resize(XDP_FRAME - XDP_TAILROOM, 0);
        // Hoisted out of the per-packet step: the context's fields that are the same for
        // every packet (a tail-called program cannot change them either).
        xdp_ctx_fixed(&mut self.xdp_ctx);
        loop {
            let marks = self.xdp_marks();
            let mut batch = XdpBatch {
                env: &mut self.env,
                next: &mut next,
                each: &mut each,
                marks,
                error: None,
                tail: None,
                lends: self.lends,
            };
            let Some(Some(runner)) = self.sessions.get_mut(self.entry) else {
                return Ok(());
            };
            let input = Input::new().ctx(&mut self.xdp_ctx).packet(&mut self.xdp_buffer);
            runner.run_batch(input, &mut batch);
            let XdpBatch { marks, error, tail, .. } = batch;
            self.keep_marks(marks);
            if let Some(e) = error {
                return Err(e);
            }
            let Some(tail) = tail else {
                return Ok(());
            };
            // The packet's tail calls, as `chain` follows them; then a new batch.
            self.env.begin_run();
            let span = xdp_span(&self.xdp_ctx);
            let (ret, packet) = self.chain_xdp(tail, span, marks);
            each(ret.map(|ret| VerdictView { ret, packet }))?;
        }
    }

    fn run_skb(&mut self, frame: &[u8]) -> Result<VerdictView<'_>, Trap> {
        // A socket filter sees the frame without its Ethernet header (as the kernel's test
        // run gives it); tc programs the whole frame. One buffer for every packet.
        let socket = self.prog_type == ProgType::SocketFilter;
        let buffer = &mut self.skb_buffer;
        buffer.clear();
        buffer.extend_from_slice(if socket { frame.get(14..).unwrap_or_default() } else { frame });
        let ctx = &mut self.skb_ctx;
        *ctx = [0; SKB_CTX];
        let put = |ctx: &mut [u8; SKB_CTX], o: usize, v: u32| {
            ctx[o..o + 4].copy_from_slice(&v.to_le_bytes())
        };
        put(ctx, 0, buffer.len() as u32);
        // skb->protocol is big-endian in its 32-bit field.
        put(ctx, 16, u32::from(eth_type_trans(frame).to_be()));
        // pkt_type as eth_type_trans gives it on the test run's loopback device, whose
        // address and broadcast address are all zeros: a multicast destination (also
        // ff:ff:ff:ff:ff:ff) is PACKET_MULTICAST, 00:00:00:00:00:00 PACKET_HOST, any other
        // PACKET_OTHERHOST.
        let pkt_type = match frame.first() {
            Some(b) if b & 1 == 1 => 2,
            Some(_) if frame.get(..6) == Some(&[0; 6][..]) => 0,
            _ => 3,
        };
        put(ctx, 4, pkt_type);
        // ifindex: the loopback's; ingress_ifindex (skb_iif) stays 0 without a ctx_in, as
        // do the other fields weir leaves zero (mark, priority, hash, vlan_*, tc_index,
        // tc_classid, napi_id, tstamp, wire_len, gso_*, hwtstamp).
        put(ctx, 40, 1);
        self.env.begin_packet(PacketBounds::default());
        let span = PacketSpan { meta: 0, data: 0, end: buffer.len() };
        let ret = chain(&mut self.sessions, &mut self.env, self.entry, ctx, buffer, span, None)?;
        Ok(VerdictView { ret, packet: &self.skb_buffer })
    }
}

/// Writes the `xdp_md` fields that do not depend on the packet: ingress_ifindex 1 (the
/// test run's loopback), rx_queue_index and egress_ifindex 0. The packet fields (the first
/// three words) are the engine's to write per run.
fn xdp_ctx_fixed(ctx: &mut [u8; XDP_CTX]) {
    ctx[12..16].copy_from_slice(&1u32.to_le_bytes());
    ctx[16..XDP_CTX].fill(0);
}

/// What the XDP buffer's last packet may have left non-zero, and where the current frame
/// ends (see `Loaded::xdp_dirty`).
#[derive(Clone, Copy, Debug)]
struct XdpMarks {
    dirty: usize,
    head_dirty: usize,
    in_span: bool,
    frame_end: usize,
}

impl XdpMarks {
    /// Copies `frame` into `buffer` (a usable page: headroom, frame, tailroom), zeroes what
    /// the last packet may have left around it (unless no run can reach there) and begins
    /// the packet in `env`: the frame's span, from which the engine writes the context's
    /// packet fields.
    #[inline]
    fn begin(&mut self, buffer: &mut [u8], env: &mut Env, frame: &[u8]) -> PacketSpan {
        let usable = buffer.len();
        let len = frame.len().min(usable.saturating_sub(XDP_HEADROOM));
        let end = XDP_HEADROOM + len;
        // One buffer for every packet (no allocation, no freeing of a page-sized block per
        // packet): the frame copied in, the rest zeroed as a fresh buffer would be.
        if let (Some(to), Some(from)) = (buffer.get_mut(XDP_HEADROOM..end), frame.get(..len)) {
            to.copy_from_slice(from);
        }
        if !self.in_span {
            // In the headroom, likewise, only what the last packet may have written: from
            // the lowest `data_meta` it reached (adjust_head/adjust_meta) or left.
            if let Some(head) = buffer.get_mut(self.head_dirty.min(XDP_HEADROOM)..XDP_HEADROOM) {
                head.fill(0);
            }
            // Past the frame, only what the last packet may have left there: its frame,
            // and its data_end's furthest reach (a program the kernel's verifier accepts
            // writes nowhere else; the rest of the page is still zero). Zeroing the whole
            // page per packet cost a fifth of a small program's run.
            let dirty = self.dirty.clamp(end, usable);
            if let Some(tail) = buffer.get_mut(end..dirty) {
                tail.fill(0);
            }
        }
        // The context: the packet fields (data, data_end, data_meta) are the engine's to
        // write, once, from the span returned here (`PacketFields::fill`); the others are
        // the same for every packet and no program can write them (no `xdp_md` field is
        // writable, as in the kernel), so they are written by `xdp_ctx_fixed` once per
        // batch or single run, not here per packet.
        let base = guest::PACKET_BASE;
        env.begin_packet(PacketBounds { hard_start: base, hard_end: base + usable as u64 });
        self.frame_end = end;
        PacketSpan { meta: XDP_HEADROOM, data: XDP_HEADROOM, end }
    }

    /// After the packet's runs: the marks moved to what they may have reached, and where
    /// the packet now lies.
    fn end(&mut self, ctx: &[u8], env: &Env) -> PacketSpan {
        let usable = XDP_FRAME - XDP_TAILROOM;
        let base = guest::PACKET_BASE;
        let last = xdp_span(ctx);
        let reach = env.packet_reach().saturating_sub(base) as usize;
        self.dirty = self.frame_end.max(last.end).max(reach).min(usable);
        let floor = env.packet_floor().map_or(XDP_HEADROOM, |f| {
            usize::try_from(f.saturating_sub(base)).unwrap_or(XDP_HEADROOM)
        });
        self.head_dirty = floor.min(last.meta).min(last.data);
        last
    }
}

/// Where a batch's frames come from: [`Loaded::run_batch_from`]'s source, or (wrapped)
/// [`Loaded::run_batch`]'s callback or [`Loaded::run_batch_frames`]'s iterator.
pub trait FrameSource<E> {
    /// Hands the next frame to `put`, once, and returns `Ok(true)`; or returns `Ok(false)`
    /// at the end (an error ends the batch and is returned).
    fn next_frame(&mut self, put: impl FnMut(&[u8])) -> Result<bool, E>;
}

/// A source that hands each frame to the function it is given ([`Loaded::run_batch`]).
struct Given<N>(N);

impl<N, E> FrameSource<E> for Given<N>
where
    N: FnMut(&mut dyn FnMut(&[u8])) -> Result<bool, E>,
{
    #[inline(always)]
    fn next_frame(&mut self, mut put: impl FnMut(&[u8])) -> Result<bool, E> {
        (self.0)(&mut put)
    }
}

/// An iterator of frames ([`Loaded::run_batch_frames`]): `put` called directly.
struct Iterated<I>(I);

impl<'f, I, E> FrameSource<E> for Iterated<I>
where
    I: Iterator<Item = &'f [u8]>,
{
    #[inline(always)]
    fn next_frame(&mut self, mut put: impl FnMut(&[u8])) -> Result<bool, E> {
        let Some(frame) = self.0.next() else { return Ok(false) };
        put(frame);
        Ok(true)
    }
}

/// [`Loaded::run_batch`] on XDP: the frames from `next` through the engine's batch, each
/// verdict to `each`; a tail call ends the batch for the loader to follow.
struct XdpBatch<'c, N, F, E> {
    env: &'c mut Env,
    next: &'c mut N,
    each: &'c mut F,
    marks: XdpMarks,
    error: Option<E>,
    /// The program the last packet tail-called (its verdict not yet given).
    tail: Option<usize>,
    /// `Loaded::lends`: frames may run in place.
    lends: bool,
}

impl<N, F, E> Batch for XdpBatch<'_, N, F, E>
where
    N: FrameSource<E>,
    F: FnMut(Result<VerdictView<'_>, Trap>) -> Result<(), E>,
{
    fn next(&mut self, _ctx: &mut [u8], packet: &mut [u8]) -> Option<PacketSpan> {
        let mut span = None;
        let (marks, env) = (&mut self.marks, &mut *self.env);
        match self.next.next_frame(|frame: &[u8]| span = Some(marks.begin(packet, env, frame))) {
            Ok(true) => span,
            Ok(false) => None,
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }

    fn env(&mut self) -> Option<&mut dyn RunEnv> {
        Some(&mut *self.env)
    }

    fn lends(&self) -> bool {
        self.lends
    }

    /// The frame as the copy would hold it (cut to the page's usable part), in place: the
    /// packet left is the frame itself (nothing moves its bounds: `leaves_packet`). The
    /// XDP buffer is not touched, so its marks stay as they are.
    ///
    /// Every frame of the source in one call (issue 11: one call of this through `dyn
    /// Batch` per batch, not per packet; the source's callback, the run and the verdict's
    /// `each` in one loop here). The environment begins the batch as a packet once
    /// (`begin_packet`: bounds of the largest frame lent, no headroom), then each frame
    /// with only what a run of a program that leaves the packet can change
    /// (`Env::begin_lent_frame`: its values and redirect). No `Env::end_run` per frame: a
    /// lent program calls no ring buffer helper (`calls_leave_packet`), so no lent run
    /// leaves a record reserved, and the batch's `begin_packet` began with none (issue 11:
    /// its test was 2 instructions a lent frame, bench/records/2026-12-01-runtime-32.txt).
    fn lend(&mut self, run: &mut LentRun<'_>) -> bool {
        self.lend_with(&mut { run })
    }

    /// [`Batch::lend`] with the engine's run by its type: on the JIT (`Runner::run_batch`)
    /// the loop below and the engine's per-frame run compile as one (issue 11,
    /// bench/records/2026-12-01-runtime-33.txt).
    fn lend_with<R>(&mut self, run: &mut R) -> bool
    where
        R: FnMut(&[u8], Option<&mut dyn RunEnv>) -> Result<RunOutcome, Trap>,
    {
        const USABLE: usize = XDP_FRAME - XDP_TAILROOM - XDP_HEADROOM;
        let (env, each, next) = (&mut *self.env, &mut *self.each, &mut *self.next);
        let base = guest::PACKET_BASE;
        env.begin_packet(PacketBounds { hard_start: base, hard_end: base + USABLE as u64 });
        loop {
            let mut given = None;
            let fed = next.next_frame(|frame: &[u8]| {
                let frame = frame.get(..USABLE).unwrap_or(frame);
                env.begin_lent_frame();
                let outcome = run(frame, Some(&mut *env));
                // No tail call to follow: `leaves_packet` admits no program that makes one.
                given = Some(each(outcome.map(|o| VerdictView { ret: o.r0, packet: frame })));
            });
            match (fed, given) {
                (Ok(true), Some(Ok(()))) => {}
                (Ok(_), Some(Err(e))) | (Err(e), _) => {
                    self.error = Some(e);
                    return false;
                }
                (Ok(_), _) => return false,
            }
        }
    }

    fn done(
        &mut self,
        outcome: Result<RunOutcome, Trap>,
        ctx: &mut [u8],
        packet: &mut [u8],
    ) -> bool {
        self.env.end_run();
        if outcome.is_ok() {
            if let Some(next) = self.env.take_tail_call() {
                self.tail = Some(next as usize);
                return false;
            }
        }
        let last = self.marks.end(ctx, self.env);
        let packet = packet.get(last.data..last.end).unwrap_or_default();
        match (self.each)(outcome.map(|o| VerdictView { ret: o.r0, packet })) {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }
}

/// Runs the entry and the tail calls it makes, each on the same context and buffer.
/// XDP programs may have moved the packet (adjust_head/tail/meta): the next program's
/// span is read back from `xdp_md` (`respan`); other types keep theirs. `begin_packet`,
/// just called, began the first run.
fn chain(
    sessions: &mut [Option<Runner>],
    env: &mut Env,
    entry: usize,
    ctx: &mut [u8],
    buffer: &mut [u8],
    mut span: PacketSpan,
    respan: Option<fn(&[u8]) -> PacketSpan>,
) -> Result<u64, Trap> {
    let mut current = entry;
    loop {
        let Some(Some(runner)) = sessions.get_mut(current) else {
            return Ok(0);
        };
        let input = Input::new().ctx(ctx).packet(buffer).span(span).env(env);
        let outcome = runner.session().run(input);
        env.end_run();
        let outcome = outcome?;
        let Some(next) = env.take_tail_call() else {
            return Ok(outcome.r0);
        };
        current = next as usize;
        env.begin_run();
        if let Some(respan) = respan {
            span = respan(ctx);
        }
    }
}

/// `skb->protocol` as the kernel's `eth_type_trans` gives it: the EtherType, or for an
/// 802.3 length field `ETH_P_802_3` (raw IPX, `ff ff` after the header) or `ETH_P_802_2`.
fn eth_type_trans(frame: &[u8]) -> u16 {
    let proto = frame.get(12..14).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    if proto >= 0x0600 {
        return proto;
    }
    if frame.get(14..16) == Some(&[0xff, 0xff][..]) {
        0x0001
    } else {
        0x0004
    }
}

fn hex_list(bytes: &[u8]) -> String {
    let items: Vec<String> = bytes.iter().map(|b| format!("\"{b:#04x}\"")).collect();
    format!("[{}]", items.join(","))
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl Object {
    /// Every map's contents as JSON, `{"<map name>": [entries]}`, entries as `bpftool -j
    /// map dump` prints them (per-CPU maps with `values`, program arrays with program
    /// names; queues, stacks and ring buffers as empty lists).
    pub fn maps_json(&self) -> String {
        let mut out = Vec::new();
        for map in &self.maps {
            let mut entries = Vec::new();
            let iterable =
                !matches!(map.map_type(), MapType::Queue | MapType::Stack | MapType::RingBuf);
            let mut key: Option<Vec<u8>> = None;
            let mut found = Vec::new();
            while let Some(next) = iterable.then(|| map.get_next_key(key.as_deref()).ok()).flatten()
            {
                if let Ok(value) = map.lookup_all(&next) {
                    found.push((next.clone(), value));
                }
                key = Some(next);
            }
            // Keys in byte order: the same dump whatever the hash seed.
            found.sort();
            for (key, value) in &found {
                entries.push(self.entry_json(map, key, value));
            }
            out.push(format!("{}:[{}]", json_string(&map.spec().name), entries.join(",")));
        }
        format!("{{{}}}\n", out.join(","))
    }

    fn entry_json(&self, map: &Map, key: &[u8], value: &[u8]) -> String {
        let percpu = matches!(
            map.map_type(),
            MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash
        );
        if percpu {
            let size = map.spec().value_size as usize;
            let stride = size.next_multiple_of(8);
            let values: Vec<String> = value
                .chunks(stride)
                .enumerate()
                .map(|(cpu, v)| {
                    format!("{{\"cpu\":{cpu},\"value\":{}}}", hex_list(v.get(..size).unwrap_or(v)))
                })
                .collect();
            return format!("{{\"key\":{},\"values\":[{}]}}", hex_list(key), values.join(","));
        }
        if map.map_type() == MapType::ProgArray {
            let index = u32::from_ne_bytes([value[0], value[1], value[2], value[3]]);
            let name = self.programs.get(index as usize).map_or("?", |p| p.name.as_str());
            return format!("{{\"key\":{},\"value\":{}}}", hex_list(key), json_string(name));
        }
        format!("{{\"key\":{},\"value\":{}}}", hex_list(key), hex_list(value))
    }
}

/// A byte list of the `maps_json` form: `"0x1f"` strings (or decimal ones) or numbers, each
/// 0 to 255.
fn json_bytes(value: Option<&serde_json::Value>, what: &str) -> Result<Vec<u8>, String> {
    let list = value
        .and_then(|v| v.as_array())
        .ok_or_else(|| format!("`{what}` must be a list of bytes"))?;
    list.iter()
        .enumerate()
        .map(|(i, item)| {
            let n = match item {
                serde_json::Value::Number(n) => n.as_u64(),
                serde_json::Value::String(t) => match t.strip_prefix("0x") {
                    Some(hex) => u64::from_str_radix(hex, 16).ok(),
                    None => t.parse().ok(),
                },
                _ => None,
            };
            n.and_then(|n| u8::try_from(n).ok())
                .ok_or_else(|| format!("`{what}` byte {i}: {item} is not a byte"))
        })
        .collect()
}

fn check_len(bytes: &[u8], size: u32, what: &str) -> Result<(), String> {
    if bytes.len() == size as usize {
        Ok(())
    } else {
        Err(format!("`{what}` has {} bytes, the map's {what}s {size}", bytes.len()))
    }
}

impl Object {
    /// Preloads maps from JSON of the [`maps_json`](Self::maps_json) form (`bpftool -j map
    /// dump`'s): `{"<map name>": [entries]}`, each entry `{"key": [bytes], "value":
    /// [bytes]}`; per-CPU maps `"values": [{"cpu": N, "value": [bytes]}]` (CPUs weir does
    /// not run are ignored, missing ones zero); program arrays the program's name as the
    /// value; queues and stacks a value each, pushed in order; LPM keys the kernel's
    /// `prefixlen` and data bytes. Maps the file does not name keep their contents; a ring
    /// buffer takes no entries. Errors name the map and the entry.
    pub fn load_maps_json(&self, text: &str) -> Result<(), String> {
        let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let maps = doc.as_object().ok_or("expected an object of map names")?;
        for (name, entries) in maps {
            let map = self
                .maps
                .iter()
                .find(|m| m.spec().name == *name)
                .ok_or_else(|| format!("map `{name}`: the object has no such map"))?;
            let entries = entries
                .as_array()
                .ok_or_else(|| format!("map `{name}`: expected a list of entries"))?;
            for (i, entry) in entries.iter().enumerate() {
                self.load_entry(map, entry).map_err(|e| format!("map `{name}` entry {i}: {e}"))?;
            }
        }
        Ok(())
    }

    fn load_entry(&self, map: &Map, entry: &serde_json::Value) -> Result<(), String> {
        let spec = map.spec();
        let field = |name: &str| entry.get(name);
        let update = |key: &[u8], value: &[u8]| {
            map.update_all(key, value, 0).map_err(|e| format!("cannot store it: {e}"))
        };
        match map.map_type() {
            MapType::RingBuf => Err("a ring buffer cannot be preloaded".into()),
            MapType::Queue | MapType::Stack => {
                let value = json_bytes(field("value"), "value")?;
                check_len(&value, spec.value_size, "value")?;
                update(&[], &value)
            }
            MapType::ProgArray => {
                let key = json_bytes(field("key"), "key")?;
                check_len(&key, spec.key_size, "key")?;
                let name = field("value")
                    .and_then(|v| v.as_str())
                    .ok_or("`value` must be a program's name")?;
                let index = self
                    .programs
                    .iter()
                    .position(|p| p.name == name)
                    .ok_or_else(|| format!("the object has no program `{name}`"))?;
                update(&key, &(index as u32).to_ne_bytes())
            }
            MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash => {
                let key = json_bytes(field("key"), "key")?;
                check_len(&key, spec.key_size, "key")?;
                let size = spec.value_size as usize;
                let stride = size.next_multiple_of(8);
                let mut all = vec![0u8; stride * map.cpus()];
                let values = field("values")
                    .and_then(|v| v.as_array())
                    .ok_or("`values` must be a list of {\"cpu\", \"value\"}")?;
                for v in values {
                    let cpu = v
                        .get("cpu")
                        .and_then(|c| c.as_u64())
                        .ok_or("each of `values` needs a `cpu` number")?;
                    let value = json_bytes(v.get("value"), "value")?;
                    check_len(&value, spec.value_size, "value")?;
                    let Some(slot) = usize::try_from(cpu)
                        .ok()
                        .and_then(|c| all.get_mut(c * stride..c * stride + size))
                    else {
                        continue;
                    };
                    slot.copy_from_slice(&value);
                }
                update(&key, &all)
            }
            _ => {
                let key = json_bytes(field("key"), "key")?;
                check_len(&key, spec.key_size, "key")?;
                let value = json_bytes(field("value"), "value")?;
                check_len(&value, spec.value_size, "value")?;
                update(&key, &value)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames() -> Vec<Vec<u8>> {
        (0..64u8)
            .map(|i| {
                let mut f = vec![0u8; 14 + 20 + usize::from(i)];
                f[12] = 0x08;
                f[14] = 0x45;
                f[23] = i % 7;
                f
            })
            .collect()
    }

    fn run_all(path: &str, prog: Option<&str>, engine: Engine) -> (Vec<Verdict>, String) {
        let bytes = std::fs::read(format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let object = Object::open(&bytes).unwrap();
        let entry = object.entry(prog, None).unwrap();
        let mut loaded = object.load(entry, Some(engine), 0).unwrap();
        let verdicts = frames().iter().map(|f| loaded.run(f).unwrap()).collect();
        (verdicts, object.maps_json())
    }

    #[test]
    fn a_loaded_program_moves_to_another_thread() {
        // The Python package keeps a `Loaded` in its object and runs captures with the GIL
        // released, on whichever thread calls: `Loaded` must be `Send`.
        let object = std::sync::Arc::new(open("xdp_counter.o"));
        let mut loaded = object.load(0, Some(Engine::Jit), 0).unwrap();
        let frames = frames();
        let here = loaded.run(&frames[0]).unwrap();
        let there = std::thread::spawn(move || loaded.run(&frames[0]).unwrap()).join().unwrap();
        assert_eq!(here, there);
        assert_eq!(verdict_name(ProgType::Xdp, here.ret), "XDP_PASS");
        assert!(passes(ProgType::Xdp, here.ret));
    }

    #[test]
    fn a_lent_packet_is_the_copied_one_and_a_proven_run_skips_no_visible_zeroing() {
        // xdp_counter proven (as `weir run` loads it) re-zeroes nothing around the frame
        // (`packet_in_span`); its verdicts and packets must still be the interpreter's,
        // which re-zeroes, over frames that shrink and grow.
        let object = open("xdp_counter.o");
        let mut proven = object.load_with(0, Some(Engine::Jit), 0, true).unwrap();
        assert!(proven.packet_in_span);
        let mut interp = open("xdp_counter.o").load(0, Some(Engine::Interp), 0).unwrap();
        assert!(!interp.packet_in_span);
        let mut frames = frames();
        frames.reverse();
        frames.extend(self::frames());
        for frame in &frames {
            let copied = interp.run(frame).unwrap();
            let lent = proven.run_view(frame).unwrap();
            assert_eq!((lent.ret, lent.packet), (copied.ret, &copied.packet[..]));
            assert_eq!(lent.packet, &frame[..]);
        }
        // Without `keep_packets` only the copy goes; the lent packet stays.
        proven.keep_packets(false);
        assert!(proven.run(&frames[0]).unwrap().packet.is_empty());
        assert_eq!(proven.run_view(&frames[0]).unwrap().packet, &frames[0][..]);
    }

    /// Every frame through `run_batch`: the verdicts and packets in order.
    fn batch_all(loaded: &mut Loaded, frames: &[Vec<u8>]) -> Vec<Result<Verdict, Trap>> {
        let mut out = Vec::new();
        let mut at = 0;
        loaded
            .run_batch::<()>(
                |put| {
                    let Some(frame) = frames.get(at) else { return Ok(false) };
                    at += 1;
                    put(frame);
                    Ok(true)
                },
                |v| {
                    out.push(v.map(|v| Verdict { ret: v.ret, packet: v.packet.to_vec() }));
                    Ok(())
                },
            )
            .unwrap();
        out
    }

    #[test]
    fn a_batch_gives_what_runs_packet_by_packet_give() {
        // Tail calls (the batch stops for the loader to follow them), packets that grow
        // and shrink (adjust_head/tail), a proven program, a tc program (no XDP batch),
        // on both engines: verdicts, packets and maps as `run` gives them.
        let mut frames = frames();
        frames.reverse();
        frames.extend(self::frames());
        let jump = r#"{"jump_table": [{"key": [0, 0, 0, 0], "value": "xdp_target"}]}"#;
        let bytes = |name: &str| {
            std::fs::read(format!("{}/../../testdata/bpf/{name}", env!("CARGO_MANIFEST_DIR")))
                .unwrap()
        };
        let leaky = super::xdp_buffer_tests::leaky_object();
        let head_leaky = super::xdp_buffer_tests::head_leaky_object();
        for (name, prog, maps) in [
            (bytes("xdp_counter.o"), None, None),
            (bytes("tail_call.o"), Some("xdp_dispatch"), Some(jump)),
            (bytes("tail_call.o"), Some("xdp_dispatch"), None),
            (leaky, None, None),
            (head_leaky, None, None),
            (bytes("tc_fields.o"), None, None),
            (bytes("ringbuf.o"), None, None),
        ] {
            let open = |bytes: &[u8]| Object::open(bytes).unwrap();
            for (engine, proven) in
                [(Engine::Interp, false), (Engine::Jit, false), (Engine::Jit, true)]
            {
                let (one, many) = (open(&name), open(&name));
                for object in [&one, &many] {
                    if let Some(json) = maps {
                        object.load_maps_json(json).unwrap();
                    }
                }
                let entry = one.entry(prog, None).unwrap();
                let Ok(mut single) = one.load_with(entry, Some(engine), 0, proven) else {
                    continue; // the verifier refuses it: nothing to prove
                };
                let mut batched = many.load_with(entry, Some(engine), 0, proven).unwrap();
                let expected: Vec<_> = frames.iter().map(|f| single.run(f)).collect();
                let got = batch_all(&mut batched, &frames);
                let name = one.programs()[entry].name.clone();
                let what = format!("{name} {engine} proven {proven}");
                assert!(got == expected, "{what}: the batch's verdicts differ");
                assert!(many.maps_json() == one.maps_json(), "{what}: the maps differ");
                // Then the other way round on the same two: a batch after single runs and
                // single runs after a batch (the buffer's marks carry over).
                let again = batch_all(&mut single, &frames);
                let expected: Vec<_> = frames.iter().map(|f| batched.run(f)).collect();
                assert!(again == expected, "{what}: the second round's verdicts differ");
                assert!(many.maps_json() == one.maps_json(), "{what}: the maps differ later");
            }
        }
        // An error of `next` or `each` ends the batch and comes back.
        let object = open("xdp_counter.o");
        let mut loaded = object.load(0, Some(Engine::Jit), 0).unwrap();
        let mut seen = 0;
        let result = loaded.run_batch(
            |put| {
                put(&frames[0]);
                Ok(true)
            },
            |_| {
                seen += 1;
                if seen == 3 {
                    Err("stop")
                } else {
                    Ok(())
                }
            },
        );
        assert_eq!((result, seen), (Err("stop"), 3));
        let result = loaded.run_batch(|_| Err::<bool, _>("source"), |_| Ok(()));
        assert_eq!(result, Err("source"));
    }

    #[test]
    fn helpers_that_move_the_packet_keep_the_buffer_zeroed() {
        let program = |text: &str| {
            Program::from_insns(weir_isa::asm::assemble(text).unwrap())
                .with_prog_type(ProgType::Xdp)
        };
        assert!(!moves_span(&program("mov r0, 2\nexit")));
        for id in [44, 54, 65] {
            let text = format!("mov r2, -4\ncall {id}\nmov r0, 2\nexit");
            assert!(moves_span(&program(&text)), "helper {id}");
        }
        assert!(!moves_span(&program("call 1\nmov r0, 2\nexit")));
    }

    #[test]
    fn a_long_program_runs_at_once_and_switches_to_its_native_code() {
        let object = open("big.o");
        let slots = object.programs[0].program.len();
        assert!(slots > BACKGROUND_JIT_SLOTS, "big.o has {slots} slots");
        let mut interp = object.load(0, Some(Engine::Interp), 0).unwrap();
        let mut tiered = object.load(0, None, 0).unwrap();
        assert_eq!(tiered.choice().engine, Engine::Jit);
        let why = tiered.choice().reasons.join("\n");
        assert!(why.contains("background thread"), "{why}");
        let frames = frames();
        let (early, late) = frames.split_at(32);
        for frame in early {
            assert_eq!(tiered.run(frame), interp.run(frame));
        }
        assert!(tiered.wait_for_native());
        assert!(!tiered.compiling());
        for frame in late {
            assert_eq!(tiered.run(frame), interp.run(frame));
        }
        // A short program compiles before the load returns.
        let short = open("xdp_counter.o").load(0, None, 0).unwrap();
        assert!(!short.compiling());
    }

    fn open(name: &str) -> Object {
        let path = format!("{}/../../testdata/bpf/{name}", env!("CARGO_MANIFEST_DIR"));
        Object::open(&std::fs::read(path).unwrap()).unwrap()
    }

    #[test]
    fn maps_json_preloads_program_arrays_and_lpm_tries() {
        // The jump table filled by program name: the dispatcher tail-calls the target,
        // which drops; the dump names it again.
        let object = open("tail_call.o");
        let json =
            r#"{"jump_table": [{"key": ["0x00", "0x00", "0x00", "0x00"], "value": "xdp_target"}]}"#;
        object.load_maps_json(json).unwrap();
        let entry = object.entry(Some("xdp_dispatch"), None).unwrap();
        let mut loaded = object.load(entry, Some(Engine::Interp), 0).unwrap();
        assert!(frames().iter().all(|f| loaded.run(f).unwrap().ret == 1));
        assert!(object.maps_json().contains(r#""value":"xdp_target""#), "{}", object.maps_json());
        let bad = r#"{"jump_table": [{"key": [0, 0, 0, 0], "value": "nope"}]}"#;
        assert_eq!(
            object.load_maps_json(bad).unwrap_err(),
            "map `jump_table` entry 0: the object has no program `nope`"
        );
        // An LPM key as the kernel's prefixlen and data: 0.0.0.0/32, the frames' source.
        let object = open("lpm_ringbuf.o");
        let json = r#"{"prefixes": [{"key": [32, 0, 0, 0, 0, 0, 0, 0], "value": [7, 0, 0, 0]}]}"#;
        object.load_maps_json(json).unwrap();
        let mut loaded = object.load(0, Some(Engine::Jit), 0).unwrap();
        assert!(frames().iter().all(|f| loaded.run(f).unwrap().ret == 1));
        let ring = object.maps().iter().find(|m| m.spec().name == "events").unwrap();
        let mut records = Vec::new();
        ring.ring_buf().unwrap().consume(|r| records.push(r.to_vec()));
        assert_eq!(records, vec![vec![7, 0, 0, 0]; frames().len()]);
        let ring_entry = r#"{"events": [{"key": [], "value": [1]}]}"#;
        assert_eq!(
            object.load_maps_json(ring_entry).unwrap_err(),
            "map `events` entry 0: a ring buffer cannot be preloaded"
        );
    }

    #[test]
    fn maps_json_reads_back_what_it_wrote_and_per_cpu_values() {
        // A run's dump, loaded into a fresh object, dumps the same (ringbuf.o: a per-CPU
        // array and a ring buffer, written as an empty list and read back as one).
        let object = open("ringbuf.o");
        let mut loaded = object.load(0, Some(Engine::Interp), 0).unwrap();
        for f in frames() {
            loaded.run(&f).unwrap();
        }
        let dump = object.maps_json();
        assert!(dump.contains(r#""values":[{"cpu":0,"value":["#), "{dump}");
        let fresh = open("ringbuf.o");
        assert_ne!(fresh.maps_json(), dump);
        fresh.load_maps_json(&dump).unwrap();
        assert_eq!(fresh.maps_json(), dump);
        // CPUs weir does not run are ignored; a CPU left out is zero.
        let json = r#"{"counts": [{"key": [2, 0, 0, 0], "values": [
            {"cpu": 1, "value": [9, 0, 0, 0, 0, 0, 0, 0]},
            {"cpu": 0, "value": ["0x05", 0, 0, 0, 0, 0, 0, 0]}]}]}"#;
        fresh.load_maps_json(json).unwrap();
        let counts = fresh.maps().iter().find(|m| m.spec().name == "counts").unwrap();
        assert_eq!(counts.lookup_all(&2u32.to_ne_bytes()).unwrap(), [5, 0, 0, 0, 0, 0, 0, 0]);
        let short = r#"{"counts": [{"key": [2, 0, 0, 0], "values": [{"cpu": 0, "value": [1]}]}]}"#;
        assert_eq!(
            fresh.load_maps_json(short).unwrap_err(),
            "map `counts` entry 0: `value` has 1 bytes, the map's values 8"
        );
    }

    #[test]
    fn interpreter_and_jit_agree_on_objects() {
        for (path, prog) in [
            ("testdata/bpf/xdp_counter.o", None),
            ("testdata/bpf/tc_knob.o", None),
            ("testdata/bpf/socket_filter.o", None),
            ("testdata/bpf/tail_call.o", Some("xdp_dispatch")),
            ("testdata/bpf/tc_fields.o", None),
            ("testdata/bpf/ringbuf.o", None),
        ] {
            let interp = run_all(path, prog, Engine::Interp);
            let jit = run_all(path, prog, Engine::Jit);
            assert_eq!(interp, jit, "{path}");
        }
        // ringbuf.o: every packet reserved a record; the consumer reads the submitted ones
        // (each starts with the frame's length), in order, and skips the discarded.
        let bytes =
            std::fs::read(format!("{}/../../testdata/bpf/ringbuf.o", env!("CARGO_MANIFEST_DIR")))
                .unwrap();
        let object = Object::open(&bytes).unwrap();
        let mut loaded = object.load(0, Some(Engine::Jit), 0).unwrap();
        let frames = frames();
        let verdicts: Vec<u64> = frames.iter().map(|f| loaded.run(f).unwrap().ret).collect();
        let count = |slot: u32| {
            let counts = object.maps().iter().find(|m| m.spec().name == "counts").unwrap();
            let v = counts.lookup_all(&slot.to_ne_bytes()).unwrap();
            u64::from_ne_bytes(v[..8].try_into().unwrap())
        };
        assert_eq!(count(0) + count(1) + count(2), frames.len() as u64);
        assert!(count(0) > 0 && count(1) > 0, "{} {}", count(0), count(1));
        let ring = object.maps().iter().find(|m| m.spec().name == "events").unwrap();
        let mut lens = Vec::new();
        ring.ring_buf()
            .unwrap()
            .consume(|r| lens.push(u64::from_ne_bytes(r[..8].try_into().unwrap())));
        let submitted: Vec<u64> = frames
            .iter()
            .zip(&verdicts)
            .filter(|(_, &v)| v == 3)
            .map(|(f, _)| f.len() as u64)
            .collect();
        assert_eq!(lens, submitted);

        // The counter counted every packet by protocol byte.
        let (verdicts, maps) = run_all("testdata/bpf/xdp_counter.o", None, Engine::Jit);
        assert!(verdicts.iter().all(|v| v.ret == 2));
        assert!(
            maps.contains("\"key\":[\"0x00\",\"0x00\",\"0x00\",\"0x00\"],\"value\":[\"0x0a\""),
            "{maps}"
        );
    }
}

#[cfg(test)]
mod xdp_buffer_tests {
    use weir_program::ProgramBuilder;

    use super::*;

    /// An (unverified) XDP program that returns the byte 8 past `data_end`, then grows the
    /// tail by 16, writes 0x77 there, and shrinks it back.
    pub(super) fn leaky_object() -> Vec<u8> {
        let mut b = ProgramBuilder::new();
        b.alu_reg(Op::Mov64Reg, 6, 1);
        b.load(Op::LdxW, 2, 6, 4);
        b.load(Op::LdxB, 7, 2, 8);
        b.alu_reg(Op::Mov64Reg, 1, 6);
        b.alu_imm(Op::Mov64Imm, 2, 16);
        b.call_helper(65); // bpf_xdp_adjust_tail
        b.load(Op::LdxW, 2, 6, 4);
        b.store_imm(Op::StB, 2, -8, 0x77);
        b.alu_reg(Op::Mov64Reg, 1, 6);
        b.alu_imm(Op::Mov64Imm, 2, -16);
        b.call_helper(65);
        b.alu_reg(Op::Mov64Reg, 0, 7);
        b.exit();
        let program = b.link().unwrap().with_prog_type(ProgType::Xdp);
        weir_elf::write::write_program(&program, &weir_elf::write::ObjectOptions::new("leaky"))
            .unwrap()
    }

    /// An (unverified) XDP program that returns the byte 16 before `data`, then moves
    /// `data` 16 bytes into the headroom, writes 0x77 there, and moves it back.
    pub(super) fn head_leaky_object() -> Vec<u8> {
        let mut b = ProgramBuilder::new();
        b.alu_reg(Op::Mov64Reg, 6, 1);
        b.load(Op::LdxW, 2, 6, 0);
        b.load(Op::LdxB, 7, 2, -16);
        b.alu_reg(Op::Mov64Reg, 1, 6);
        b.alu_imm(Op::Mov64Imm, 2, -16);
        b.call_helper(44); // bpf_xdp_adjust_head
        b.load(Op::LdxW, 2, 6, 0);
        b.store_imm(Op::StB, 2, 0, 0x77);
        b.alu_reg(Op::Mov64Reg, 1, 6);
        b.alu_imm(Op::Mov64Imm, 2, 16);
        b.call_helper(44);
        b.alu_reg(Op::Mov64Reg, 0, 7);
        b.exit();
        let program = b.link().unwrap().with_prog_type(ProgType::Xdp);
        weir_elf::write::write_program(&program, &weir_elf::write::ObjectOptions::new("leaky"))
            .unwrap()
    }

    #[test]
    fn bytes_a_packet_left_in_the_headroom_are_zero_for_the_next() {
        let object = Object::open(&head_leaky_object()).unwrap();
        for engine in [Engine::Interp, Engine::Jit] {
            let mut loaded = object.load(0, Some(engine), 0).unwrap();
            let frame = [0xeeu8; 60];
            // Each packet reads where the one before wrote through its moved head.
            for round in 0..3 {
                assert_eq!(loaded.run(&frame).unwrap().ret, 0, "{engine} packet {round}");
            }
        }
    }

    #[test]
    fn bytes_a_packet_left_past_its_frame_are_zero_for_the_next() {
        let object = Object::open(&leaky_object()).unwrap();
        for engine in [Engine::Interp, Engine::Jit] {
            let mut loaded = object.load(0, Some(engine), 0).unwrap();
            let frame = [0xeeu8; 60];
            // Each packet reads where the one before wrote through its grown tail.
            for round in 0..3 {
                assert_eq!(loaded.run(&frame).unwrap().ret, 0, "{engine} packet {round}");
            }
            // A longer frame's own bytes are gone for the shorter one after it.
            assert_eq!(loaded.run(&[0xeeu8; 200]).unwrap().ret, 0, "{engine}");
            assert_eq!(loaded.run(&frame).unwrap().ret, 0, "{engine}");
        }
    }
}
