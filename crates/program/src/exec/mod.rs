//! The one engine contract: what every engine that runs a [`Program`](crate::Program)
//! agrees on, so that engines are interchangeable and the facade, the conformance runner and
//! the benchmarks go through one table of them.
//!
//! - [`Input`]: what a run sees (context, packet, plain memory) and the entry registers;
//! - [`RunOutcome`]: `r0` and the instructions executed; failures are [`Trap`]s;
//! - [`Limits`]: stack per frame, call depth, instruction budget, and the [`StackShape`]
//!   every engine derives from them;
//! - [`guest`]: the guest address map;
//! - [`alu`]: eBPF's concrete arithmetic where it differs from Rust's operators (division
//!   by zero, signed overflow, masked shifts), shared by the engines and the verifier;
//! - [`Engine`] / [`Prepared`]: a typed engine (its own program and cache types, no dynamic
//!   dispatch on the hot path), and [`DynEngine`] / [`Session`], the same behind `dyn`, for
//!   tables of engines.
//!
//! Engines accept only a [`Verified`] program (see [`crate::verified`]); the helpers a
//! program calls reach them as plain data through [`crate::abi::Bindings`].
//!
//! ```
//! use weir_program::exec::{Input, StackShape, Limits, guest};
//! let shape = StackShape::fit(&Limits::default());
//! // Frame 0's r10 is the top of the stack region.
//! assert_eq!(shape.frame_top(0), guest::STACK_BASE + shape.bytes());
//! let mut mem = [0u8; 8];
//! let input = Input::new().mem(&mut mem);
//! assert_eq!(input.entry_args(), (guest::MEM_BASE, 8));
//! ```

pub mod alu;
pub mod guest;

use crate::abi::{Bindings, ContextLayout, FieldKind, RunEnv};
use crate::{Trap, TrapCode, Verified};

/// Limits that hold on every engine, with the kernel's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of stack per frame (512, as in the kernel). The whole stack, `stack_size *
    /// max_call_depth`, is fitted into the stack's window ([`guest::REGION_WINDOW`]) by
    /// lowering the frame size, then the frame count, if it does not fit ([`StackShape`]).
    pub stack_size: usize,
    /// Most frames alive at once, the entry frame included (8, as in the kernel). A local
    /// call that would exceed it traps with [`TrapCode::CallDepth`]; 0 is taken as 1.
    pub max_call_depth: usize,
    /// Most instructions one run may execute before it traps with
    /// [`TrapCode::InstructionBudget`].
    pub instruction_budget: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { stack_size: 512, max_call_depth: 8, instruction_budget: 1 << 26 }
    }
}

/// The stack as an engine lays it out: `frames` frames of `stack_size` bytes, frame 0 (the
/// entry function) at the top of the stack region, each call one frame lower.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackShape {
    pub stack_size: u64,
    pub frames: u64,
}

impl StackShape {
    /// Fits [`Limits`] into the stack's window: the frame size first, then the frame count.
    pub fn fit(limits: &Limits) -> StackShape {
        let window = usize::try_from(guest::REGION_WINDOW).unwrap_or(usize::MAX);
        let stack_size = limits.stack_size.min(window);
        let frames =
            limits.max_call_depth.clamp(1, window.checked_div(stack_size).unwrap_or(window));
        StackShape { stack_size: stack_size as u64, frames: frames as u64 }
    }

    /// Bytes of the whole stack (it fits the window, so this does not overflow).
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.stack_size.saturating_mul(self.frames)
    }

    /// `r10` of frame `depth`: one past the frame's highest byte.
    #[inline]
    pub fn frame_top(&self, depth: u64) -> u64 {
        guest::STACK_BASE
            .wrapping_add(self.frames.wrapping_sub(depth).wrapping_mul(self.stack_size))
    }

    /// Offset in the stack region of the lowest byte frame `depth` may touch (frames of
    /// calls not, or no longer, made lie below it).
    #[inline]
    pub fn frame_floor(&self, depth: u64) -> u64 {
        self.frames.wrapping_sub(depth).wrapping_sub(1).wrapping_mul(self.stack_size)
    }
}

/// What a run sees. `r1` at entry is the context's address if there is a context, else
/// the memory's (0 when that is absent or empty); `r2` is the length of what `r1` points at
/// ([`Input::entry_args`]).
#[derive(Default)]
pub struct Input<'a> {
    /// The context (`struct __sk_buff`, `struct xdp_md`, ...). If the bindings carry a
    /// context layout, its packet fields are filled in before the run
    /// ([`fill_packet_fields`]).
    pub ctx: Option<&'a mut [u8]>,
    /// The packet, reachable through the context's packet fields and by the legacy
    /// `ldabs`/`ldind` loads.
    pub packet: Option<&'a mut [u8]>,
    /// Plain memory, the conformance suites' one buffer. When there is no packet, the
    /// legacy packet loads read it.
    pub mem: Option<&'a mut [u8]>,
    /// Where in `packet` the context's packet fields point (XDP's headroom and tailroom lie
    /// outside it); `None`: the whole packet.
    pub span: Option<PacketSpan>,
    /// The run's environment: map values and what helpers keep between calls.
    pub env: Option<&'a mut dyn RunEnv>,
}

/// Byte offsets in the packet buffer of what the context's packet fields hold:
/// `meta <= data <= end <= packet.len()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketSpan {
    pub meta: usize,
    pub data: usize,
    pub end: usize,
}

impl std::fmt::Debug for Input<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input")
            .field("ctx", &self.ctx)
            .field("packet", &self.packet)
            .field("mem", &self.mem)
            .field("span", &self.span)
            .field("env", &self.env.is_some())
            .finish()
    }
}

impl<'a> Input<'a> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn ctx(mut self, ctx: &'a mut [u8]) -> Self {
        self.ctx = Some(ctx);
        self
    }

    pub fn packet(mut self, packet: &'a mut [u8]) -> Self {
        self.packet = Some(packet);
        self
    }

    pub fn mem(mut self, mem: &'a mut [u8]) -> Self {
        self.mem = Some(mem);
        self
    }

    pub fn span(mut self, span: PacketSpan) -> Self {
        self.span = Some(span);
        self
    }

    pub fn env(mut self, env: &'a mut dyn RunEnv) -> Self {
        self.env = Some(env);
        self
    }

    /// `r1` and `r2` at entry.
    #[inline]
    pub fn entry_args(&self) -> (u64, u64) {
        match (&self.ctx, &self.mem) {
            (Some(ctx), _) => (guest::CTX_BASE, ctx.len() as u64),
            (None, Some(mem)) if !mem.is_empty() => (guest::MEM_BASE, mem.len() as u64),
            _ => (0, 0),
        }
    }

    /// Refuses, before anything runs, a region longer than its window (it could not be
    /// addressed whole).
    #[inline]
    pub fn check_sizes(&self) -> Result<(), Trap> {
        // One compare for the usual case (every region far below its window); the
        // region-by-region checks name the one that is too long.
        let len = |r: &Option<&mut [u8]>| r.as_deref().map_or(0, <[u8]>::len);
        if (len(&self.ctx) | len(&self.packet) | len(&self.mem)) as u64 <= guest::REGION_WINDOW {
            return Ok(());
        }
        refuse_oversized(self.ctx.as_deref(), guest::CTX_BASE)?;
        refuse_oversized(self.packet.as_deref(), guest::PACKET_BASE)?;
        refuse_oversized(self.mem.as_deref(), guest::MEM_BASE)
    }
}

fn refuse_oversized(bytes: Option<&[u8]>, base: u64) -> Result<(), Trap> {
    match bytes {
        Some(bytes) if bytes.len() as u64 > guest::REGION_WINDOW => {
            let size = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
            Err(Trap::memory(TrapCode::OutOfBounds, 0, base, size))
        }
        _ => Ok(()),
    }
}

/// Writes the packet fields of a context (`data`, `data_end`, `data_meta` in `layout`)
/// for a packet of `packet_len` bytes at [`guest::PACKET_BASE`]: `span` places them
/// inside it (XDP headroom, a moved packet), else data and meta are its start and end
/// its end. A span outside the packet or a field outside `ctx` traps. Engines that run
/// often keep the [`PacketFields`] of their layout instead of walking it per run.
pub fn fill_packet_fields(
    layout: Option<&ContextLayout>,
    ctx: &mut [u8],
    packet_len: usize,
    span: Option<PacketSpan>,
) -> Result<(), Trap> {
    PacketFields::of(layout).fill(ctx, packet_len, span)
}

/// A packet field of [`PacketFields::fill_whole`]: its offset in the context and the mask
/// of the packet's length its value adds to the packet's base. The offset is a `u32`, so
/// `offset + 4` cannot wrap and the word's range is one compare against the context's
/// length (as [`DataEndWord`]'s).
type WholeWord = (u32, u32);

/// A context layout's packet fields, listed once (at load) so that a run writes the two
/// or three words without walking the layout: what [`fill_packet_fields`] does.
///
/// Laid out for the run (issue 13: a short filter's whole run is a few hundred machine
/// instructions, and the field-by-field writes, each matching its kind and its width and
/// checking its range, were about 120 of them): each field holds the index of the value it
/// takes, the 4-byte fields (every layout's) are one list, and the end of the furthest
/// field is known, so a context long enough for all of them (every caller's) is checked
/// once.
#[derive(Clone, Copy, Debug)]
pub struct PacketFields {
    /// Whether there is a layout at all (without one, nothing is written or checked).
    layout: bool,
    /// Offset, size (at most 8) and value (an index into `[data, meta, end, 0]`) of each
    /// packet field in layout order, the first `count` used.
    fields: [(usize, usize, usize); 4],
    count: usize,
    /// Whether every packet field is 4 bytes wide (the fast path of [`PacketFields::fill`]).
    all_words: bool,
    /// One past the last byte any packet field covers.
    end: usize,
    /// Every layout's shape, two or three 4-byte fields: their offsets and value indices, written
    /// by straight-line code (issue 13: the general loop, a branch per field on its kind and
    /// width, was about 60 machine instructions of a short filter's ~290 per run).
    words: Option<[(usize, usize); 3]>,
    /// The same words for a run over the whole packet (no span): each field's offset and
    /// a mask, the value being `PACKET_BASE + (packet length & mask)` (`!0` for the end,
    /// `0` for data and meta), so the lean entry computes it without a table (issue 13).
    /// The third word only for a layout that has one (a socket filter's has two: writing
    /// the first again, as `words` does, cost a checked store per run).
    whole: Option<([WholeWord; 2], Option<WholeWord>)>,
    /// Of `whole`'s words, the offset of the one whose value depends on the packet's length
    /// (`data_end`; data and meta are `PACKET_BASE` for every whole packet), when exactly
    /// one does: [`PacketFields::data_end_word`].
    whole_end: Option<DataEndWord>,
}

/// The context word that holds a whole packet's `data_end` ([`PacketFields::data_end_word`]):
/// a lent batch checks its context against [`PacketFields::context_end`] once and then
/// writes only this word per frame, with one compare (issue 11: a per-frame layout test and
/// two-compare range check were ~7 of a lent xdp_counter frame's instructions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataEndWord {
    /// A `u32` (layouts are static tables of small offsets): `offset + 4` cannot wrap, so
    /// the range `offset..offset + 4` is one compare against the context's length.
    offset: u32,
}

impl DataEndWord {
    /// The word's offset in the context.
    #[inline]
    pub fn offset(self) -> usize {
        self.offset as usize
    }

    /// Writes `PACKET_BASE + packet_len` (as `fill_whole` does) into the word; nothing into
    /// a context too short to hold it (the caller checked it against `context_end`, so a
    /// short one is a caller's bug, never a write out of the slice).
    #[inline(always)]
    pub fn write(self, ctx: &mut [u8], packet_len: usize) {
        let offset = self.offset();
        // Fits: the caller checked the packet against its window (below 4 GiB).
        let end = (guest::PACKET_BASE as u32).wrapping_add(packet_len as u32);
        if let Some(bytes) = ctx.get_mut(offset..offset + 4) {
            bytes.copy_from_slice(&end.to_le_bytes());
        }
    }
}

impl PacketFields {
    /// The packet fields of `layout` (at most four: every layout has three).
    pub fn of(layout: Option<&ContextLayout>) -> PacketFields {
        let mut out = PacketFields {
            layout: layout.is_some(),
            fields: [(0, 0, 3); 4],
            count: 0,
            all_words: true,
            end: 0,
            words: None,
            whole: None,
            whole_end: None,
        };
        let packet =
            layout.map_or(&[][..], |l| l.fields).iter().filter(|f| f.kind != FieldKind::Plain);
        for (slot, field) in out.fields.iter_mut().zip(packet) {
            let value = match field.kind {
                FieldKind::PacketStart => 0,
                FieldKind::MetaStart => 1,
                FieldKind::PacketEnd => 2,
                FieldKind::Plain => 3,
            };
            // Fits: layouts are static tables of small offsets.
            let (offset, size) = (field.offset as usize, field.size.min(8) as usize);
            *slot = (offset, size, value);
            out.count += 1;
            out.all_words &= size == 4;
            out.end = out.end.max(offset.saturating_add(size));
        }
        // Two fields (a socket filter's `__sk_buff`: data and data_end, no meta) take the
        // same straight-line path with the first field written twice, the same value both
        // times (issue 13: they went through the loop, a count compare per field).
        if out.all_words && (out.count == 2 || out.count == 3) {
            let [(a, _, va), (b, _, vb), (c, _, vc), _] = out.fields;
            let third = if out.count == 3 { (c, vc) } else { (a, va) };
            out.words = Some([(a, va), (b, vb), third]);
            let mask = |which: usize| if which == 2 { u32::MAX } else { 0 };
            let word =
                |offset: usize, which: usize| Some((u32::try_from(offset).ok()?, mask(which)));
            out.whole = match (word(a, va), word(b, vb), word(c, vc)) {
                (Some(first), Some(second), third) if out.count == 2 || third.is_some() => {
                    Some(([first, second], third.filter(|_| out.count == 3)))
                }
                _ => None,
            };
            let words = [(a, va), (b, vb), (c, vc)];
            let mut ends = words.iter().take(out.count).filter(|&&(_, which)| which == 2);
            out.whole_end = match (ends.next(), ends.next()) {
                (Some(&(offset, _)), None) => {
                    u32::try_from(offset).ok().map(|offset| DataEndWord { offset })
                }
                _ => None,
            };
        }
        out
    }

    /// One past the last context byte a packet field covers: a context at least this long
    /// takes every field's write.
    #[inline]
    pub fn context_end(&self) -> usize {
        self.end
    }

    /// [`PacketFields::fill`] for the usual run, the whole packet (no span) under a layout
    /// of two or three 4-byte fields (every layout's shape), into a context at least
    /// [`PacketFields::context_end`] bytes long and a packet that fits its window: `false`
    /// (nothing written) when the layout is not of that shape, and the caller takes `fill`.
    /// Issue 13: a socket filter's run writes its two fields with no span test, no value
    /// table and no layout walk.
    #[inline(always)]
    pub fn fill_whole(&self, ctx: &mut [u8], packet_len: usize) -> bool {
        let Some((words, third)) = &self.whole else {
            return false;
        };
        // Fits: the caller checked the packet against its window (below 4 GiB).
        let len = packet_len as u32;
        let base = guest::PACKET_BASE as u32;
        let mut write = |&(offset, mask): &WholeWord| {
            let offset = offset as usize;
            if let Some(bytes) = ctx.get_mut(offset..offset + 4) {
                bytes.copy_from_slice(&base.wrapping_add(len & mask).to_le_bytes());
            }
        };
        words.iter().for_each(&mut write);
        if let Some(third) = third {
            write(third);
        }
        true
    }

    /// Of [`PacketFields::fill_whole`]'s words, the one that depends on the packet's
    /// length (`data_end`; data and meta are `PACKET_BASE` for every whole packet), when
    /// exactly one does: for a caller that writes it frame after frame into one context
    /// whose other packet fields only the engine writes ([`DataEndWord::write`]).
    #[inline]
    pub fn data_end_word(&self) -> Option<DataEndWord> {
        self.whole_end
    }

    /// Writes the fields into `ctx` (see [`fill_packet_fields`]).
    #[inline]
    pub fn fill(
        &self,
        ctx: &mut [u8],
        packet_len: usize,
        span: Option<PacketSpan>,
    ) -> Result<(), Trap> {
        if !self.layout {
            return Ok(());
        }
        // Without a span (the usual run) there is nothing to check: the whole packet.
        let span = match span {
            None => PacketSpan { meta: 0, data: 0, end: packet_len },
            Some(span) => {
                if !(span.meta <= span.data && span.data <= span.end && span.end <= packet_len) {
                    let size = u32::try_from(span.end).unwrap_or(u32::MAX);
                    return Err(Trap::memory(TrapCode::OutOfBounds, 0, guest::PACKET_BASE, size));
                }
                span
            }
        };
        if ctx.len() < self.end {
            return self.short_context(ctx.len());
        }
        // Fits: the packet was checked against its window.
        let at = |offset: usize| guest::PACKET_BASE.wrapping_add(offset as u64);
        let values = [at(span.data), at(span.meta), at(span.end), 0];
        if let Some(words) = &self.words {
            for &(offset, which) in words {
                let value = values[which & 3] as u32;
                if let Some(bytes) = ctx.get_mut(offset..).and_then(|b| b.first_chunk_mut::<4>()) {
                    *bytes = value.to_le_bytes();
                }
            }
            return Ok(());
        }
        let fields = self.fields.get(..self.count).unwrap_or_default();
        if self.all_words {
            for &(offset, _, which) in fields {
                let value = values[which & 3] as u32;
                if let Some(bytes) = ctx.get_mut(offset..).and_then(|b| b.first_chunk_mut::<4>()) {
                    *bytes = value.to_le_bytes();
                }
            }
            return Ok(());
        }
        for &(offset, size, which) in fields {
            let value = values[which & 3].to_le_bytes();
            let bytes = ctx.get_mut(offset..offset.saturating_add(size));
            if let (Some(bytes), Some(value)) = (bytes, value.get(..size)) {
                bytes.copy_from_slice(value);
            }
        }
        Ok(())
    }

    /// The trap for a context shorter than the packet fields: the first field (in layout
    /// order) that does not fit, as the field-by-field writes always reported it.
    #[cold]
    fn short_context(&self, len: usize) -> Result<(), Trap> {
        let fields = self.fields.get(..self.count).unwrap_or_default();
        match fields.iter().find(|&&(offset, size, _)| offset.saturating_add(size) > len) {
            Some(&(offset, size, _)) => {
                let addr = guest::CTX_BASE.saturating_add(offset as u64);
                Err(Trap::memory(TrapCode::OutOfBounds, 0, addr, size as u32))
            }
            None => Ok(()),
        }
    }
}

/// A finished run: `r0` and how many instructions it took.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RunOutcome {
    pub r0: u64,
    pub executed: u64,
}

/// Why an engine could not prepare a program (the message names the instruction when the
/// failure is about one).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PrepareError {
    pub message: String,
}

impl PrepareError {
    pub fn new(message: impl Into<String>) -> Self {
        PrepareError { message: message.into() }
    }
}

/// An engine: turns a verified program into a [`Prepared`] one. Implemented by the
/// interpreter and the JIT; a new engine implements this and is added to the facade's one
/// engine table (`weir::Engine`).
pub trait Engine {
    type Prepared: Prepared;
    /// The engine's name as the command line spells it (`interp`, `jit`).
    fn name(&self) -> &'static str;
    fn prepare(
        &self,
        program: &Verified,
        bindings: Bindings,
        limits: Limits,
    ) -> Result<Self::Prepared, PrepareError>;
}

/// A program prepared by an engine: immutable, shareable between threads; each thread runs
/// it with its own cache.
pub trait Prepared {
    /// Scratch space of runs (stack, saved frames).
    type Cache;
    fn cache(&self) -> Self::Cache;
    /// Runs once. Every run starts from a zeroed stack, whatever the last one left.
    fn run(&self, cache: &mut Self::Cache, input: Input<'_>) -> Result<RunOutcome, Trap>;
    /// Runs over a batch of packets ([`Batch`]): by default, one [`Prepared::run`] each.
    fn run_batch(&self, cache: &mut Self::Cache, input: Input<'_>, batch: &mut dyn Batch) {
        run_each(|input| self.run(cache, input), input, batch);
    }
    /// The stack after the last run in `cache`, all frames, lowest address first: frame 0
    /// is the last `stack_size` bytes.
    fn stack<'c>(&self, cache: &'c Self::Cache) -> &'c [u8];
    /// `r10` at entry.
    fn stack_top(&self) -> u64;
}

/// The per-packet side of a batch ([`Prepared::run_batch`], [`Session::run_batch`]): one
/// program over many packets in the same context and packet buffers, what stays the same
/// between packets (the run state, the region entries) set up once per batch, as the
/// kernel's `BPF_PROG_TEST_RUN` loops `repeat` runs inside one call. The batch owns the
/// runs' environment (the input's is not used), so that it reaches its own between runs
/// without a downcast.
pub trait Batch {
    /// Readies the next packet in `packet` (and what else changes per packet in `ctx` and
    /// the environment) and returns where it lies, or `None` to end the batch.
    fn next(&mut self, ctx: &mut [u8], packet: &mut [u8]) -> Option<PacketSpan>;
    /// The environment of the packet's run.
    fn env(&mut self) -> Option<&mut dyn RunEnv>;
    /// Takes what the packet's run gave; `false` ends the batch after it.
    fn done(
        &mut self,
        outcome: Result<RunOutcome, Trap>,
        ctx: &mut [u8],
        packet: &mut [u8],
    ) -> bool;
    /// Whether the batch can lend its frames in place ([`Batch::lend`]): it says so only
    /// when it knows the program writes no packet byte and moves no packet bound (the
    /// engine must agree: see [`Batch::lend`]). By default, no.
    fn lends(&self) -> bool {
        false
    }
    /// Runs the next packet, or several, over the source's own bytes, read-only, instead
    /// of a copy in the batch's packet buffer: for each, the batch hands `run` the frame
    /// (the packet region is then exactly the frame: `data` at its first byte) and the
    /// run's environment, then takes the outcome as [`Batch::done`] does, the frame being
    /// the packet as left. The context is the input's, the same slice for every lent frame
    /// of the batch and the engine's alone while it lends (the batch does not see it: the
    /// engine writes its packet fields and checks it once a batch, not per frame). A batch
    /// may run all its packets in one call (a call through `dyn Batch` per batch, not per
    /// packet). `false` ends the batch (after these packets, or with none). An engine
    /// calls it only when [`Batch::lends`] says so and its code for the program cannot
    /// write the packet region without a check that refuses it (a store into a lent frame
    /// must fault, never land). By default: none, the batch ends.
    fn lend(&mut self, run: &mut LentRun<'_>) -> bool {
        let _ = run;
        false
    }
    /// [`Batch::lend`] with the engine's run by its type, for an engine that knows the
    /// batch's type too (`weir_jit::JitProgram::run_batch` is generic over it): a batch
    /// that overrides it calls `run` directly, so that its per-frame loop and the engine's
    /// run compile as one, no call through `dyn` a frame (issue 11: the lent run's call,
    /// entry and exit were ~30 of a lent xdp_counter frame's ~268 instructions,
    /// bench/records/2026-12-01-runtime-33.txt). Its contract is [`Batch::lend`]'s, which
    /// it calls by default.
    fn lend_with<R>(&mut self, run: &mut R) -> bool
    where
        Self: Sized,
        R: FnMut(&[u8], Option<&mut dyn RunEnv>) -> Result<RunOutcome, Trap>,
    {
        self.lend(run)
    }
}

/// A batch behind `&mut` is a batch: what lets an engine's generic batch path (which needs
/// a sized batch type, for [`Batch::lend_with`]) take a `&mut dyn Batch` too.
impl<B: Batch + ?Sized> Batch for &mut B {
    fn next(&mut self, ctx: &mut [u8], packet: &mut [u8]) -> Option<PacketSpan> {
        (**self).next(ctx, packet)
    }

    fn env(&mut self) -> Option<&mut dyn RunEnv> {
        (**self).env()
    }

    fn done(
        &mut self,
        outcome: Result<RunOutcome, Trap>,
        ctx: &mut [u8],
        packet: &mut [u8],
    ) -> bool {
        (**self).done(outcome, ctx, packet)
    }

    fn lends(&self) -> bool {
        (**self).lends()
    }

    fn lend(&mut self, run: &mut LentRun<'_>) -> bool {
        (**self).lend(run)
    }
}

/// One run of [`Batch::lend`]: the frame lent read-only (the whole packet region) and the
/// environment; the engine holds the context and writes its packet fields. Two slices'
/// worth of arguments, all in registers (issue 11: the context's slice beside them put
/// two on the stack at every frame's call, bench/records/2026-12-01-runtime-31.txt).
pub type LentRun<'r> = dyn FnMut(&[u8], Option<&mut dyn RunEnv>) -> Result<RunOutcome, Trap> + 'r;

/// The batch as separate runs: what an engine without a batch path of its own does.
/// Generic over the batch, so that a caller that knows its batch's type (`weir`'s XDP
/// batch on the JIT) calls its methods directly.
pub fn run_each<B: Batch + ?Sized>(
    mut run: impl FnMut(Input<'_>) -> Result<RunOutcome, Trap>,
    input: Input<'_>,
    batch: &mut B,
) {
    let Input { mut ctx, mut packet, mut mem, .. } = input;
    loop {
        let Some(span) = batch.next(
            ctx.as_deref_mut().unwrap_or_default(),
            packet.as_deref_mut().unwrap_or_default(),
        ) else {
            return;
        };
        let input = Input {
            ctx: ctx.as_deref_mut(),
            packet: packet.as_deref_mut(),
            mem: mem.as_deref_mut(),
            span: Some(span),
            env: batch.env(),
        };
        let outcome = run(input);
        let more = batch.done(
            outcome,
            ctx.as_deref_mut().unwrap_or_default(),
            packet.as_deref_mut().unwrap_or_default(),
        );
        if !more {
            return;
        }
    }
}

/// An [`Engine`] behind `dyn`: what tables of engines hold.
pub trait DynEngine {
    fn name(&self) -> &'static str;
    fn load(
        &self,
        program: &Verified,
        bindings: Bindings,
        limits: Limits,
    ) -> Result<Box<dyn Session>, PrepareError>;
}

/// A prepared program with its cache, behind `dyn`. `Send`: a loaded program may move to
/// another thread between runs (the Python package runs captures without the GIL).
pub trait Session: Send {
    fn run(&mut self, input: Input<'_>) -> Result<RunOutcome, Trap>;
    /// Runs over a batch of packets ([`Batch`]): by default, one [`Session::run`] each.
    fn run_batch(&mut self, input: Input<'_>, batch: &mut dyn Batch) {
        run_each(|input| self.run(input), input, batch);
    }
    fn stack(&self) -> &[u8];
    fn stack_top(&self) -> u64;
}

struct Bound<P: Prepared> {
    prepared: P,
    cache: P::Cache,
}

impl<P: Prepared + Send> Session for Bound<P>
where
    P::Cache: Send,
{
    fn run(&mut self, input: Input<'_>) -> Result<RunOutcome, Trap> {
        self.prepared.run(&mut self.cache, input)
    }

    fn run_batch(&mut self, input: Input<'_>, batch: &mut dyn Batch) {
        self.prepared.run_batch(&mut self.cache, input, batch)
    }

    fn stack(&self) -> &[u8] {
        self.prepared.stack(&self.cache)
    }

    fn stack_top(&self) -> u64 {
        self.prepared.stack_top()
    }
}

impl<E> DynEngine for E
where
    E: Engine,
    E::Prepared: 'static + Send,
    <E::Prepared as Prepared>::Cache: Send,
{
    fn name(&self) -> &'static str {
        Engine::name(self)
    }

    fn load(
        &self,
        program: &Verified,
        bindings: Bindings,
        limits: Limits,
    ) -> Result<Box<dyn Session>, PrepareError> {
        let prepared = self.prepare(program, bindings, limits)?;
        let cache = prepared.cache();
        Ok(Box::new(Bound { prepared, cache }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::ContextField;

    fn word(ctx: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(ctx[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn packet_fields_take_the_span_values() {
        let layout = crate::ProgType::SocketFilter.context_layout();
        let data = layout.field("data").unwrap().offset as usize;
        let end = layout.field("data_end").unwrap().offset as usize;
        let mut ctx = vec![0xaa; layout.size as usize];
        let fields = PacketFields::of(Some(layout));
        fields.fill(&mut ctx, 60, None).unwrap();
        assert_eq!(word(&ctx, data), guest::PACKET_BASE as u32);
        assert_eq!(word(&ctx, end), (guest::PACKET_BASE + 60) as u32);
        // The plain field before them is left alone.
        assert_eq!(word(&ctx, data - 4), 0xaaaa_aaaa);
        let span = PacketSpan { meta: 2, data: 4, end: 50 };
        fields.fill(&mut ctx, 60, Some(span)).unwrap();
        assert_eq!(word(&ctx, data), (guest::PACKET_BASE + 4) as u32);
        assert_eq!(word(&ctx, end), (guest::PACKET_BASE + 50) as u32);
        let bad = PacketSpan { meta: 0, data: 0, end: 61 };
        assert!(fields.fill(&mut ctx, 60, Some(bad)).is_err());
    }

    /// The straight-line word path writes what the field-by-field rule says, for
    /// every layout weir has, with and without a span.
    #[test]
    fn every_layout_gets_its_packet_fields_by_kind() {
        // The socket filter's two fields (no meta) take the straight-line path too.
        let socket = PacketFields::of(Some(crate::ProgType::SocketFilter.context_layout()));
        assert_eq!(socket.count, 2);
        assert!(socket.words.is_some(), "socket filter: not on the straight-line path");
        for prog_type in crate::ProgType::ALL {
            let layout = prog_type.context_layout();
            let fields = PacketFields::of(Some(layout));
            for span in [None, Some(PacketSpan { meta: 3, data: 5, end: 40 })] {
                let mut ctx = vec![0x5au8; layout.size as usize];
                fields.fill(&mut ctx, 60, span).unwrap();
                let s = span.unwrap_or(PacketSpan { meta: 0, data: 0, end: 60 });
                for field in layout.fields {
                    let (at, size) = (field.offset as usize, field.size.min(8) as usize);
                    let want = match field.kind {
                        FieldKind::PacketStart => guest::PACKET_BASE + s.data as u64,
                        FieldKind::MetaStart => guest::PACKET_BASE + s.meta as u64,
                        FieldKind::PacketEnd => guest::PACKET_BASE + s.end as u64,
                        FieldKind::Plain => {
                            let untouched = ctx[at..at + size].iter().all(|&b| b == 0x5a);
                            assert!(untouched, "{prog_type:?} {}", field.name);
                            continue;
                        }
                    };
                    let got = &ctx[at..at + size];
                    assert_eq!(got, &want.to_le_bytes()[..size], "{prog_type:?} {}", field.name);
                }
            }
        }
    }

    #[test]
    fn fill_whole_writes_what_fill_writes_without_a_span() {
        // Every layout has the shape the lean path takes; its bytes are `fill`'s, byte for
        // byte, for packets of several lengths (the end field's mask must take them all).
        for prog_type in crate::ProgType::ALL {
            let layout = prog_type.context_layout();
            let fields = PacketFields::of(Some(layout));
            assert!(fields.context_end() <= layout.size as usize, "{prog_type:?}");
            for len in [0usize, 1, 60, 1514, 65_535, 0x0fff_ffff] {
                let (mut by_fill, mut by_whole) =
                    (vec![0x5au8; layout.size as usize], vec![0x5au8; layout.size as usize]);
                fields.fill(&mut by_fill, len, None).unwrap();
                assert!(fields.fill_whole(&mut by_whole, len), "{prog_type:?}: not taken");
                assert_eq!(by_fill, by_whole, "{prog_type:?} len {len}");
            }
        }
        // No layout, or a field that is not 4 bytes: not taken, nothing written.
        let mut ctx = [0x5au8; 8];
        assert!(!PacketFields::of(None).fill_whole(&mut ctx, 60));
        assert_eq!(PacketFields::of(None).data_end_word(), None);
        assert_eq!(ctx, [0x5a; 8]);
    }

    /// `data_end_word` is every layout's `data_end` field, inside `context_end`; its write,
    /// frame after frame, leaves the context as `fill` would; into a context too short for
    /// the word it writes nothing (no panic, no byte outside the slice).
    #[test]
    fn data_end_word_is_the_layouts_data_end_and_writes_only_inside_the_context() {
        let lens = [0usize, 1, 60, 1514, 65_535, 0x0fff_ffff];
        for prog_type in crate::ProgType::ALL {
            let layout = prog_type.context_layout();
            let fields = PacketFields::of(Some(layout));
            let word = fields.data_end_word().unwrap_or_else(|| panic!("{prog_type:?}: none"));
            let field = layout.field("data_end").unwrap();
            assert_eq!(word.offset(), field.offset as usize, "{prog_type:?}");
            assert!(word.offset() + 4 <= fields.context_end(), "{prog_type:?}");
            let size = fields.context_end();
            for (first, len) in lens.iter().flat_map(|&a| lens.iter().map(move |&b| (a, b))) {
                let (mut by_fill, mut by_word) = (vec![0x5au8; size], vec![0x5au8; size]);
                fields.fill(&mut by_fill, len, None).unwrap();
                assert!(fields.fill_whole(&mut by_word, first), "{prog_type:?}");
                word.write(&mut by_word, len);
                assert_eq!(by_fill, by_word, "{prog_type:?} len {first} then {len}");
            }
            // A context ending inside the word, or just before it: nothing written.
            for short in word.offset()..word.offset() + 4 {
                let mut ctx = vec![0x5au8; short];
                word.write(&mut ctx, 60);
                assert!(ctx.iter().all(|&b| b == 0x5a), "{prog_type:?}: {short} bytes");
            }
            // One exactly long enough: the word, its last byte the context's last.
            let mut ctx = vec![0x5au8; word.offset() + 4];
            word.write(&mut ctx, 60);
            let want = (guest::PACKET_BASE as u32 + 60).to_le_bytes();
            assert_eq!(ctx[word.offset()..], want, "{prog_type:?}");
            assert!(ctx[..word.offset()].iter().all(|&b| b == 0x5a), "{prog_type:?}");
        }
        assert_eq!(PacketFields::of(None).data_end_word(), None);
    }

    #[test]
    fn a_short_context_traps_at_the_first_field_that_does_not_fit() {
        let layout = crate::ProgType::SocketFilter.context_layout();
        let data = layout.field("data").unwrap().offset;
        let end = layout.field("data_end").unwrap().offset;
        let fields = PacketFields::of(Some(layout));
        let mut ctx = vec![0u8; end as usize + 2];
        let trap = fields.fill(&mut ctx, 60, None).unwrap_err();
        assert_eq!(
            (trap.code, trap.addr, trap.size),
            (TrapCode::OutOfBounds, guest::CTX_BASE + u64::from(end), 4)
        );
        let mut ctx = vec![0u8; data as usize];
        let trap = fields.fill(&mut ctx, 60, None).unwrap_err();
        assert_eq!(trap.addr, guest::CTX_BASE + u64::from(data));
        // Without a layout nothing is written or checked.
        assert!(PacketFields::of(None).fill(&mut [], 60, None).is_ok());
    }

    #[test]
    fn wide_and_narrow_fields_take_their_width() {
        static LAYOUT: ContextLayout = ContextLayout {
            name: "test",
            size: 24,
            fields: &[
                ContextField {
                    name: "data",
                    offset: 0,
                    size: 8,
                    kind: FieldKind::PacketStart,
                    writable: false,
                },
                ContextField {
                    name: "end",
                    offset: 8,
                    size: 2,
                    kind: FieldKind::PacketEnd,
                    writable: false,
                },
                ContextField {
                    name: "meta",
                    offset: 16,
                    size: 4,
                    kind: FieldKind::MetaStart,
                    writable: false,
                },
            ],
        };
        let mut ctx = [0xffu8; 24];
        PacketFields::of(Some(&LAYOUT)).fill(&mut ctx, 0x1234, None).unwrap();
        assert_eq!(u64::from_le_bytes(ctx[..8].try_into().unwrap()), guest::PACKET_BASE);
        let end = (guest::PACKET_BASE + 0x1234).to_le_bytes();
        assert_eq!(ctx[8..10], end[..2]);
        assert_eq!(ctx[10..16], [0xff; 6]);
        assert_eq!(word(&ctx, 16), guest::PACKET_BASE as u32);
        // Not the lean path's shape: `fill_whole` declines and writes nothing.
        let mut untouched = [0xffu8; 24];
        assert!(!PacketFields::of(Some(&LAYOUT)).fill_whole(&mut untouched, 0x1234));
        assert_eq!(PacketFields::of(Some(&LAYOUT)).data_end_word(), None);
        assert_eq!(untouched, [0xff; 24]);
    }
}
