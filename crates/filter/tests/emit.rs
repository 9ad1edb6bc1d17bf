//! The emitters against the IR's meaning: thousands of random filters (every IR variant,
//! constants at the emitters' edges, nested and/or/not, scratch slots, guards, sets) are
//! emitted and run over random and corpus packets, and every run must give
//! [`Filter::run`]'s verdict:
//!
//! - classic BPF on weir's classic interpreter (`CbpfFilter`, which also validates it under
//!   the kernel's rules), on libpcap's `bpf_filter` (after libpcap's `bpf_validate`), and
//!   on [`kernel_classic`], which runs it the way Linux runs a classic socket filter where
//!   that differs from libpcap (shift amounts masked to 5 bits; offsets above `i32::MAX`
//!   taken as negative, header-relative ones, which no emitted program may reach);
//! - eBPF for both targets on weir's interpreter, after `weir_program::validate`: the
//!   socket filter with the wire length in `__sk_buff.len`, XDP on whole frames.
//!
//! Hand-written cases pin the IR rules each emitter has to add code for: division by zero,
//! shifts by 32 and more, guards, far jumps, big sets, scratch slots and register spills.

use crate::emit_common::{hex, ipv4_header_length, packets, FilterGen};
use weir_cbpf::translate::sk_buff_context;
use weir_cbpf::{CbpfFilter, PacketMeta};
use weir_filter::emit::{cbpf, ebpf, EmitError};
use weir_filter::{BinOp, CmpOp, Expr, Filter, Pred, Size, ValueSet};
use weir_interp::{Config, Input, Interpreter};
use weir_isa::cbpf::{format_listing, CbpfInsn, CbpfOp};
use weir_program::abi::{xdp_action, Bindings};
use weir_program::ProgType;
use weir_sys::libpcap::{self, BpfInsn};
use weir_testkit::Packet;

/// A filter emitted for every backend, ready to run.
struct Emitted {
    classic: Vec<CbpfInsn>,
    reference: CbpfFilter,
    raw: Vec<BpfInsn>,
    socket: Interpreter,
    xdp: Interpreter,
    /// The classic program through weir-cbpf's translation, its repeated legacy loads
    /// taken from registers (`ebpf::reuse_legacy_loads`, what `weir::emit_ebpf` gives).
    reused: Interpreter,
    /// Whether the reuse changed the translation.
    reuse_changed: bool,
}

fn on_interpreter(program: weir_program::Program, target: ProgType) -> Result<Interpreter, String> {
    let program = weir_program::Verified::structural(program)
        .map_err(|e| format!("{target}: invalid program: {e}"))?;
    let mut bindings = Bindings::new();
    bindings.context = Some(target.context_layout());
    Ok(Interpreter::new(&program, bindings, Config::default()))
}

fn interpreter(filter: &Filter, target: ProgType) -> Result<Interpreter, String> {
    on_interpreter(ebpf::emit(filter, target).map_err(|e| format!("{target}: {e}"))?, target)
}

impl Emitted {
    fn new(filter: &Filter) -> Result<Self, String> {
        let classic = cbpf::emit(filter).map_err(|e| format!("cbpf: {e}"))?;
        let reference = CbpfFilter::new(&classic)
            .map_err(|e| format!("cbpf: kernel rules: {e}\n{}", format_listing(&classic)))?;
        let raw = classic
            .iter()
            .map(|i| {
                let r = i.to_raw();
                BpfInsn { code: r.code, jt: r.jt, jf: r.jf, k: r.k }
            })
            .collect::<Vec<_>>();
        if libpcap::required().validate(&raw).is_err() {
            return Err(format!("libpcap's bpf_validate refuses:\n{}", format_listing(&classic)));
        }
        let translated = weir_cbpf::translate::translate(&classic, ProgType::SocketFilter)
            .map_err(|e| format!("translation: {e}"))?;
        let reused = ebpf::reuse_legacy_loads(translated.clone());
        let reuse_changed = reused.insns() != translated.insns();
        Ok(Emitted {
            reused: on_interpreter(reused, ProgType::SocketFilter)?,
            reuse_changed,
            classic,
            reference,
            raw,
            socket: interpreter(filter, ProgType::SocketFilter)?,
            xdp: interpreter(filter, ProgType::Xdp)?,
        })
    }

    /// Every backend's verdict on one packet, each compared with the IR's.
    fn check(&self, filter: &Filter, packet: &Packet) -> Result<bool, String> {
        let (data, wire_len) = (&packet.data[..], packet.wire_len);
        let want = filter.run(data, wire_len);
        let mut fail = Vec::new();
        let classic = self.reference.run(data, wire_len);
        if classic != want {
            fail.push(format!("weir cbpf {classic}"));
        }
        match kernel_classic(&self.classic, data, wire_len) {
            Ok(v) if v == want => {}
            other => fail.push(format!("kernel-style cbpf {other:?}")),
        }
        match libpcap::required().run(&self.raw, data, wire_len) {
            Some(v) if v == want => {}
            other => fail.push(format!("libpcap {other:?}")),
        }
        let mut ctx = sk_buff_context(wire_len, &PacketMeta::default());
        let mut copy = data.to_vec();
        match self
            .socket
            .run(&mut self.socket.cache(), Input::new().ctx(&mut ctx).packet(&mut copy))
        {
            Ok(v) if v == u64::from(want) => {}
            other => fail.push(format!("ebpf socket filter {other:?}")),
        }
        let mut copy = data.to_vec();
        match self
            .reused
            .run(&mut self.reused.cache(), Input::new().ctx(&mut ctx).packet(&mut copy))
        {
            Ok(v) if v == u64::from(want) => {}
            other => fail.push(format!("translation with loads reused {other:?}")),
        }
        if data.len() == wire_len as usize && data.len() <= 0xffff {
            let expect =
                if filter.matches(data, wire_len) { xdp_action::PASS } else { xdp_action::DROP };
            let mut ctx = vec![0u8; ProgType::Xdp.context_layout().size as usize];
            let mut copy = data.to_vec();
            match self.xdp.run(&mut self.xdp.cache(), Input::new().ctx(&mut ctx).packet(&mut copy))
            {
                Ok(v) if v == u64::from(expect) => {}
                other => fail.push(format!("ebpf XDP {other:?} (want {expect})")),
            }
        }
        if fail.is_empty() {
            Ok(want != 0)
        } else {
            Err(format!(
                "packet {} ({} of {} bytes) {}: IR {want}, {}\nclassic:\n{}",
                packet.description,
                data.len(),
                wire_len,
                hex(data),
                fail.join(", "),
                format_listing(&self.classic)
            ))
        }
    }
}

/// A classic program run as the Linux kernel runs a socket filter, where that differs from
/// libpcap: `lsh x`/`rsh x` shift by X & 31, and a load whose offset (or X + k) is above
/// `i32::MAX` reads the kernel's negative, header-relative areas, which an emitted
/// program must never reach (`Err`). Everything else is libpcap's: failed loads and
/// division by 0 return 0. Programs are kernel-validated, so jumps go forward and cells
/// are written before they are read.
fn kernel_classic(prog: &[CbpfInsn], packet: &[u8], wire_len: u32) -> Result<u32, String> {
    use weir_isa::cbpf::CbpfOp::*;
    let (mut a, mut x, mut mem) = (0u32, 0u32, [0u32; 16]);
    let mut pc = 0usize;
    let load = |offset: u64, size: usize| -> Result<Option<u32>, String> {
        if offset > i32::MAX as u64 {
            return Err(format!("load at {offset:#x}: a header-relative area in the kernel"));
        }
        let start = offset as usize;
        Ok(packet
            .get(start..start + size)
            .map(|b| b.iter().fold(0u32, |v, &byte| (v << 8) | u32::from(byte))))
    };
    loop {
        let insn = prog.get(pc).ok_or("ran off the program")?;
        pc += 1;
        let k = insn.k;
        let size = match insn.op {
            LdAbsW | LdIndW => 4,
            LdAbsH | LdIndH => 2,
            _ => 1,
        };
        macro_rules! or_zero {
            ($e:expr) => {
                match $e {
                    Some(v) => v,
                    None => return Ok(0),
                }
            };
        }
        match insn.op {
            RetK => return Ok(k),
            RetA => return Ok(a),
            LdAbsW | LdAbsH | LdAbsB => a = or_zero!(load(u64::from(k), size)?),
            LdIndW | LdIndH | LdIndB => a = or_zero!(load(u64::from(x) + u64::from(k), size)?),
            LdxMsh => x = (or_zero!(load(u64::from(k), 1)?) & 0xf) << 2,
            LdLen => a = wire_len,
            LdxLen => x = wire_len,
            LdImm => a = k,
            LdxImm => x = k,
            LdMem => a = mem[k as usize],
            LdxMem => x = mem[k as usize],
            St => mem[k as usize] = a,
            Stx => mem[k as usize] = x,
            Ja => pc += k as usize,
            JeqK | JgtK | JgeK | JsetK | JeqX | JgtX | JgeX | JsetX => {
                let b = if matches!(insn.op, JeqX | JgtX | JgeX | JsetX) { x } else { k };
                let taken = match insn.op {
                    JeqK | JeqX => a == b,
                    JgtK | JgtX => a > b,
                    JgeK | JgeX => a >= b,
                    _ => a & b != 0,
                };
                pc += usize::from(if taken { insn.jt } else { insn.jf });
            }
            AddK | SubK | MulK | DivK | ModK | AndK | OrK | XorK | LshK | RshK | AddX | SubX
            | MulX | DivX | ModX | AndX | OrX | XorX | LshX | RshX => {
                let b = if matches!(
                    insn.op,
                    AddK | SubK | MulK | DivK | ModK | AndK | OrK | XorK | LshK | RshK
                ) {
                    k
                } else {
                    x
                };
                a = match insn.op {
                    AddK | AddX => a.wrapping_add(b),
                    SubK | SubX => a.wrapping_sub(b),
                    MulK | MulX => a.wrapping_mul(b),
                    DivK | DivX => or_zero!(a.checked_div(b)),
                    ModK | ModX => or_zero!(a.checked_rem(b)),
                    AndK | AndX => a & b,
                    OrK | OrX => a | b,
                    XorK | XorX => a ^ b,
                    LshK | LshX => a << (b & 31),
                    _ => a >> (b & 31),
                };
            }
            Neg => a = a.wrapping_neg(),
            Tax => x = a,
            Txa => a = x,
        }
    }
}

/// Runs `filter`'s programs over `packets`; returns the accepted runs, the runs, and
/// whether the load reuse changed its translation.
fn check_all(filter: &Filter, packets: &[Packet]) -> (usize, usize, bool) {
    let emitted = Emitted::new(filter).unwrap_or_else(|e| panic!("{filter:?}:\n{e}"));
    let mut accepted = 0;
    for packet in packets {
        match emitted.check(filter, packet) {
            Ok(true) => accepted += 1,
            Ok(false) => {}
            Err(e) => panic!("{filter:?}\n{e}"),
        }
    }
    (accepted, packets.len(), emitted.reuse_changed)
}

fn random_filters(seed: u64, count: usize) {
    let packets = packets(seed, 40, 12);
    let mut gen = FilterGen::new(seed);
    let (mut accepted, mut runs, mut classic_len, mut refused, mut reused) = (0, 0, 0, 0, 0);
    for _ in 0..count {
        let filter = gen.filter();
        match cbpf::emit(&filter) {
            Ok(prog) => classic_len += prog.len(),
            // Only the classic emitter can run out of scratch cells; the filter uses 8.
            Err(e) => panic!("{filter:?}: {e}"),
        }
        if filter.accept == 0 {
            refused += 1;
        }
        let (a, n, changed) = check_all(&filter, &packets);
        accepted += a;
        runs += n;
        reused += usize::from(changed);
    }
    println!(
        "{count} random filters (seed {seed:#x}) x {} packets: {runs} runs, {accepted} accepted, \
         {} classic instructions on average, {refused} with accept value 0, {reused} \
         translations with loads reused",
        packets.len(),
        classic_len / count
    );
    // Few random filters load a word twice (reloading ones are generated by
    // `translations_with_reused_loads_agree_on_cut_packets`), but some must.
    assert!(reused > 0, "no translation had a load to reuse");
    // The generator must produce both outcomes often, or the comparison proves little.
    assert!(accepted * 10 > runs && accepted * 10 < runs * 9, "{accepted} of {runs} accepted");
}

#[test]
fn random_filters_agree_on_every_backend_1() {
    random_filters(0xe317_0001, 1500);
}

#[test]
fn random_filters_agree_on_every_backend_2() {
    random_filters(0xe317_0002, 1500);
}

// -------------------------------------------------------------------------------------
// The IR rules each emitter adds code for

fn byte(k: u32) -> Expr {
    Expr::load_at(k, Size::Byte)
}

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::binary(op, a, b)
}

/// Packets whose first bytes are `prefix`, then zeros, of several lengths.
fn packets_with(prefix: &[u8]) -> Vec<Packet> {
    [0usize, 1, 2, 4, 8, 16, 64]
        .iter()
        .map(|&extra| {
            let mut data = prefix.to_vec();
            data.resize(prefix.len() + extra, 0);
            let len = data.len() as u32;
            Packet { data, wire_len: len, ts_sec: 0, ts_usec: 0, description: format!("+{extra}") }
        })
        .collect()
}

#[test]
fn division_by_zero_aborts_even_under_not() {
    for op in [BinOp::Div, BinOp::Mod] {
        for divisor in [Expr::Const(0), byte(1), bin(BinOp::And, byte(0), Expr::Const(0))] {
            let q = bin(op, byte(0), divisor.clone());
            let filter = Filter::new(Pred::not(Pred::eq(q, 12345)));
            for packet in packets_with(&[7, 0]) {
                // The divisor is 0 on every packet: always an abort, never "not equal".
                assert!(!filter.matches(&packet.data, packet.wire_len));
            }
            check_all(&filter, &packets_with(&[7, 0]));
            check_all(&filter, &packets_with(&[7, 3]));
        }
    }
}

#[test]
fn shifts_of_32_and_more_give_zero() {
    for op in [BinOp::Shl, BinOp::Shr] {
        for amount in [31u8, 32, 33, 63, 64, 0xff] {
            // The amount from the packet, and as a constant.
            let by_packet = bin(op, Expr::Const(0xffff_ffff), byte(0));
            let by_const = bin(op, byte(1), Expr::Const(u32::from(amount)));
            let wide =
                bin(op, Expr::load_at(0, Size::Word), bin(BinOp::Add, byte(0), Expr::WireLen));
            for e in [by_packet, by_const, wide] {
                for want in [0, 1, 0x8000_0000] {
                    let filter = Filter::new(Pred::eq(e.clone(), want));
                    check_all(&filter, &packets_with(&[amount, 0xff, 0x80, 1]));
                }
            }
        }
    }
}

#[test]
fn guards_abort_short_packets_and_nothing_else() {
    for n in [0u32, 1, 14, 15, 64, 65, 0xffff, 0x1_0000, 0x8000_0000, u32::MAX] {
        let filter = Filter::new(Pred::not(Pred::and([Pred::Guard(n), Pred::eq(byte(0), 1)])));
        let (accepted, ..) = check_all(&filter, &packets_with(&[0; 14]));
        // Not(guard and false): true wherever the guard does not abort.
        let want = packets_with(&[0; 14]).iter().filter(|p| p.data.len() >= n as usize).count();
        assert_eq!(accepted, want, "guard {n}");
    }
}

#[test]
fn far_jumps_and_long_programs() {
    // 400 byte tests: the first ones jump to the end through trampolines.
    let all = Pred::and((0..400).map(|i| Pred::cmp(CmpOp::Le, byte(i % 60), Expr::Const(0xfe))));
    let any = Pred::or((0..400).map(|i| Pred::eq(byte(i % 70), 0x45 + i)));
    let nested = Pred::or([
        Pred::and([all.clone(), Pred::eq(byte(3), 1)]),
        Pred::not(any.clone()),
        Pred::and([Pred::not(all.clone()), any.clone()]),
    ]);
    let packets = packets(0xfa2, 60, 20);
    for pred in [all, any, nested] {
        let filter = Filter::new(pred);
        // The layout as emitted (cbpf::emit's passes fold the repeated byte tests, and
        // check_all runs that program).
        let prog = cbpf::emit_unoptimized(&filter).unwrap();
        assert!(prog.len() > 400, "{}", prog.len());
        assert!(cbpf::emit(&filter).unwrap().len() <= prog.len());
        check_all(&filter, &packets);
    }
}

#[test]
fn big_sets_are_searched_not_chained() {
    let set = ValueSet::from_ranges((0..1500u32).map(|i| (i * 7, i * 7 + (i % 3))));
    let value = Expr::load_at(0, Size::Half);
    let filter = Filter::new(Pred::In { value: value.clone(), set: set.clone() });
    let classic = cbpf::emit(&filter).unwrap();
    // A chain would test each of the 1500 ranges in turn; the search is a tree of about
    // two tests per range, with landings for the jumps that reach far.
    assert!(classic.len() < 1500 * 5 / 2, "{}", classic.len());
    let reference = CbpfFilter::new(&classic).unwrap();
    for v in (0..11_000u16).step_by(3).chain([0, 1, 2, 3, 7, 8, 9, 10, 10_493, 10_494, 65_535]) {
        let want = if set.contains(u32::from(v)) { filter.accept } else { 0 };
        assert_eq!(reference.run(&v.to_be_bytes(), 2), want, "{v}");
    }
    let mut packets = Vec::new();
    for v in [0u16, 2, 3, 6, 7, 8, 9, 10, 14, 15, 16, 17, 10_493, 10_494, 10_495, 65_535] {
        packets.extend(packets_with(&v.to_be_bytes()));
    }
    check_all(&filter, &packets);
    // Every value of a byte is below 0x100: a byte against a set covering 0..=300 is
    // decided without a test.
    let everything =
        Filter::new(Pred::In { value: byte(0), set: ValueSet::from_ranges([(0, 300)]) });
    let prog = cbpf::emit(&everything).unwrap();
    assert_eq!(format_listing(&prog), "(000) ldb      [0]\n(001) ret      #262144\n");
}

#[test]
fn scratch_slots_start_at_zero_and_carry_values() {
    let store = |slot, value| Pred::Store { slot, value };
    let filter = Filter::new(Pred::and([
        Pred::eq(Expr::Scratch(5), 0),
        store(5, ipv4_header_length(0)),
        Pred::or([Pred::eq(byte(1), 9), store(6, Expr::Const(1))]),
        Pred::eq(Expr::load(bin(BinOp::Add, Expr::Scratch(5), Expr::Scratch(6)), Size::Byte), 0x77),
    ]));
    // 4 * 5 + 1: the byte after a 20-byte header, found through both slots.
    let mut hit = vec![0x45, 0];
    hit.resize(22, 0);
    hit[21] = 0x77;
    let (accepted, ..) = check_all(&filter, &packets_with(&hit));
    assert!(accepted > 0);
}

#[test]
fn slots_the_filter_cannot_name_or_the_emitter_cannot_lend() {
    let bad = Filter::new(Pred::eq(Expr::Scratch(16), 0));
    assert_eq!(cbpf::emit(&bad), Err(EmitError::ScratchSlot(16)));
    assert_eq!(ebpf::emit(&bad, ProgType::Xdp), Err(EmitError::ScratchSlot(16)));
    // Every cell is the filter's, and `(a + b) - (c + d)` needs one for a temporary.
    let stores = (0..16).map(|slot| Pred::Store { slot, value: Expr::Const(u32::from(slot)) });
    let sum = |i| bin(BinOp::Add, byte(i), byte(i + 1));
    let nested = bin(BinOp::Sub, sum(0), sum(2));
    let full = Filter::new(Pred::and(stores.chain([Pred::eq(nested, 1)])));
    assert!(matches!(cbpf::emit(&full), Err(EmitError::OutOfScratch { used_by_filter: 16, .. })));
    // eBPF keeps temporaries in registers and is unaffected.
    assert!(ebpf::emit(&full, ProgType::SocketFilter).is_ok());
}

#[test]
fn deep_expressions_spill_and_stay_right() {
    // A balanced tree of sums and differences of 64 loads needs 7 registers at once; the
    // socket target has 3 (r7-r9), so it spills.
    fn tree(lo: u32, n: u32) -> Expr {
        if n == 1 {
            return Expr::load_at(lo % 50, Size::Byte);
        }
        let op = if lo % 2 == 0 { BinOp::Add } else { BinOp::Sub };
        bin(op, tree(lo, n / 2), tree(lo + n / 2, n - n / 2))
    }
    let e = tree(0, 64);
    let mut gen = FilterGen::new(0xdee9);
    let packets = packets(0xdee9, 30, 10);
    for _ in 0..20 {
        let k = gen.constant();
        for op in [CmpOp::Eq, CmpOp::Gt, CmpOp::Set] {
            check_all(&Filter::new(Pred::cmp(op, e.clone(), Expr::Const(k))), &packets);
        }
    }
    // The values themselves: compare the tree with its own value on each packet.
    for p in &packets {
        if p.data.len() < 50 {
            continue;
        }
        let mut ev = weir_filter::Evaluator::new(&p.data, p.wire_len);
        let v = ev.expr(&e).unwrap();
        let filter = Filter::new(Pred::eq(e.clone(), v));
        check_all(&filter, std::slice::from_ref(p));
        assert!(filter.matches(&p.data, p.wire_len));
    }
}

#[test]
fn offsets_past_the_signed_limit_abort() {
    // Offsets the kernel would take as negative (header-relative) ones, computed and
    // constant: the IR aborts on them, so every backend must reject.
    for base in [0x7fff_fff0u32, 0x8000_0000, 0xfff0_0000, 0xffe0_0000, 0xffff_f000, u32::MAX - 3] {
        let computed = Expr::load(bin(BinOp::Add, Expr::Scratch(0), Expr::Const(9)), Size::Byte);
        let filter = Filter::new(Pred::not(Pred::and([
            Pred::Store { slot: 0, value: Expr::Const(base) },
            Pred::eq(computed, 1),
        ])));
        check_all(&filter, &packets_with(&[1; 20]));
        let constant = Filter::new(Pred::not(Pred::eq(Expr::load_at(base, Size::Half), 0)));
        check_all(&constant, &packets_with(&[1; 20]));
    }
}

#[test]
fn emitted_programs_print_and_validate() {
    let mut gen = FilterGen::new(0x9121);
    for _ in 0..200 {
        let filter = gen.filter();
        let prog = cbpf::emit(&filter).unwrap();
        let listing = format_listing(&prog);
        assert_eq!(listing.lines().count(), prog.len());
        for target in [ProgType::SocketFilter, ProgType::Xdp] {
            let program = ebpf::emit(&filter, target).unwrap();
            weir_program::validate(&program).unwrap_or_else(|e| panic!("{filter:?}: {e}"));
        }
    }
}

/// `host a or host b or ...` as lowering writes it for Ethernet (per host: IPv4 source and
/// destination, then ARP and RARP sender and target, each behind its ethertype test),
/// optimized: what `weir compile` hands the emitters for a large address list.
fn host_set_filter(hosts: &[u32]) -> Filter {
    let ethertype = || Expr::load_at(12, Size::Half);
    let side = |etype: u32, at: u32, host: u32| {
        Pred::and([Pred::eq(ethertype(), etype), Pred::eq(Expr::load_at(at, Size::Word), host)])
    };
    let terms = hosts.iter().flat_map(|&h| {
        [
            side(0x0800, 26, h),
            side(0x0800, 30, h),
            side(0x0806, 28, h),
            side(0x0806, 38, h),
            side(0x8035, 28, h),
            side(0x8035, 38, h),
        ]
    });
    weir_filter::opt::optimize_owned(Filter::new(Pred::or(terms)))
}

/// An Ethernet frame of `etype` with `addr` at frame offset `at`, cut to `len` bytes (the
/// wire length stays the full 42).
fn frame_with(etype: u16, at: usize, addr: u32, len: usize) -> Packet {
    let mut data = vec![0x11u8; 42];
    data[12..14].copy_from_slice(&etype.to_be_bytes());
    data[at..at + 4].copy_from_slice(&addr.to_be_bytes());
    data.truncate(len);
    let description = format!("ethertype {etype:#06x}, {addr:#010x} at {at}, {len} bytes");
    Packet { data, wire_len: 42, ts_sec: 0, ts_usec: 0, description }
}

#[test]
fn ten_thousand_hosts_emit_as_ebpf_with_long_jumps() {
    // Every third address from 10.1.0.1 on, as the compile benchmark writes the set.
    let hosts: Vec<u32> = (0..10_000u32).map(|i| 0x0a01_0000 + 3 * i + 1).collect();
    let filter = host_set_filter(&hosts);
    // Far too long for classic BPF, and the refusal says so.
    match cbpf::emit(&filter) {
        Err(e @ EmitError::TooLong { max: 4096, .. }) => {
            let message = e.to_string();
            assert!(message.contains("classic BPF's limit of 4096"), "{message}");
            assert!(message.contains("eBPF or native"), "{message}");
        }
        other => panic!("classic BPF of 10,000 hosts: {:?}", other.map(|p| p.len())),
    }
    let mut addrs = vec![0, 0x0a01_0000, u32::MAX];
    for i in (0..10_000usize).step_by(997).chain([1, 9_998, 9_999]) {
        let h = hosts[i];
        addrs.extend([h, h - 1, h + 1]);
    }
    let mut packets = Vec::new();
    for etype in [0x0800u16, 0x0806, 0x8035, 0x86dd] {
        for at in [26usize, 28, 30, 38] {
            for &addr in &addrs {
                for len in [42, at + 4, at + 3] {
                    packets.push(frame_with(etype, at, addr, len));
                }
            }
        }
    }
    let accepted = packets.iter().filter(|p| filter.matches(&p.data, p.wire_len)).count();
    assert!(accepted > 50 && accepted < packets.len() / 2, "{accepted} of {}", packets.len());
    for target in [ProgType::SocketFilter, ProgType::Xdp] {
        let program = ebpf::emit(&filter, target).unwrap_or_else(|e| panic!("{target}: {e}"));
        // Longer than a 16-bit jump reaches, so some tests take the long way.
        assert!(program.len() > 40_000, "{target}: {} slots", program.len());
        assert!(
            program.insns().iter().any(|i| i.op == weir_isa::ebpf::Op::Ja32),
            "{target}: no ja32"
        );
        let vm = interpreter(&filter, target).unwrap();
        for p in &packets {
            let got = if target == ProgType::Xdp {
                let mut ctx = vec![0u8; target.context_layout().size as usize];
                let mut copy = p.data.clone();
                let v = vm.run(&mut vm.cache(), Input::new().ctx(&mut ctx).packet(&mut copy));
                // XDP sees whole frames: the cut ones are frames of their own length.
                let whole = filter.matches(&p.data, p.data.len() as u32);
                let want = if whole { xdp_action::PASS } else { xdp_action::DROP };
                (v, u64::from(want))
            } else {
                let mut ctx = sk_buff_context(p.wire_len, &PacketMeta::default());
                let mut copy = p.data.clone();
                let v = vm.run(&mut vm.cache(), Input::new().ctx(&mut ctx).packet(&mut copy));
                (v, u64::from(filter.run(&p.data, p.wire_len)))
            };
            assert_eq!(got.0, Ok(got.1), "{target}: {}", p.description);
        }
    }
}

/// A random filter of tests behind the IPv4 header length of one of two bytes, so that the
/// `ldxb` one needs is often what X holds already on every path in, mixed with guards and
/// any random predicate (which may write X in between: spills, computed offsets).
fn header_length_filter(gen: &mut FilterGen, depth: u32) -> Pred {
    let k = if gen.rng().chance(50) { 14 } else { 16 };
    let op = gen.rng().one_of(&[CmpOp::Eq, CmpOp::Gt, CmpOp::Le]);
    match gen.rng().below(12) {
        0..=3 => {
            let at = ipv4_header_length(k).plus(gen.rng().below(6) as u32);
            Pred::cmp(op, Expr::load(at, Size::Half), Expr::Const(0x8000))
        }
        // The length itself into A (`ldxb` then `txa`).
        4 => Pred::cmp(op, ipv4_header_length(k), Expr::Const(24)),
        5 => Pred::Guard(gen.rng().below(70) as u32),
        6 => gen.pred(1),
        _ if depth == 0 => Pred::Guard(gen.rng().below(70) as u32),
        7 | 8 => Pred::and((0..3).map(|_| header_length_filter(gen, depth - 1))),
        9 | 10 => Pred::or((0..3).map(|_| header_length_filter(gen, depth - 1))),
        _ => Pred::not(header_length_filter(gen, depth - 1)),
    }
}

/// Whether some indirect load or `txa` in `prog` reads an X that the instruction before it
/// did not write: X carried over from an earlier load.
fn reuses_x(prog: &[CbpfInsn]) -> bool {
    use weir_isa::cbpf::CbpfOp::*;
    prog.windows(2).any(|w| {
        matches!(w[1].op, LdIndB | LdIndH | LdIndW | Txa)
            && !matches!(w[0].op, LdxMsh | LdxImm | LdxLen | LdxMem | Tax)
    })
}

#[test]
fn unoptimized_programs_agree_with_the_ir() {
    // The program as laid out (what -O0 prints), before tightening: its X loads left out
    // where X holds the value already, its guards left out where the paths load as far.
    let packets = packets(0xe317_0012, 40, 12);
    let mut gen = FilterGen::new(0xe317_0012);
    let (mut runs, mut accepted, mut reusing) = (0, 0, 0);
    for i in 0..3000 {
        let pred = if i % 3 == 0 { gen.pred(3) } else { header_length_filter(&mut gen, 3) };
        let filter = Filter::new(pred);
        let prog = cbpf::emit_unoptimized(&filter).unwrap_or_else(|e| panic!("{filter:?}: {e}"));
        reusing += usize::from(reuses_x(&prog));
        let (r, a) = classic_runs_as_the_filter(&filter, &prog, &packets);
        runs += r;
        accepted += a;
    }
    println!("{runs} runs, {accepted} accepted, {reusing} programs reuse X");
    assert!(accepted * 20 > runs && accepted * 20 < runs * 19, "{accepted} of {runs} accepted");
    assert!(reusing > 250, "{reusing} programs reuse X");
}

/// `prog`, checked under the kernel's rules, run over `packets` as `filter` runs them:
/// the runs and how many were accepted.
fn classic_runs_as_the_filter(
    filter: &Filter,
    prog: &[CbpfInsn],
    packets: &[Packet],
) -> (usize, usize) {
    let classic = CbpfFilter::new(prog)
        .unwrap_or_else(|e| panic!("{filter:?}: kernel rules: {e}\n{}", format_listing(prog)));
    let mut accepted = 0;
    for packet in packets {
        let want = filter.run(&packet.data, packet.wire_len);
        let got = classic.run(&packet.data, packet.wire_len);
        assert_eq!(
            got,
            want,
            "{filter:?}\npacket {}: {}\n{}",
            packet.description,
            hex(&packet.data),
            format_listing(prog)
        );
        accepted += usize::from(want != 0);
    }
    (packets.len(), accepted)
}

/// A random predicate rich in bit tests: `x & m` (or `m & x`) compared with 0, with `m` or
/// with another constant, the masked value stored or searched, among FilterGen's predicates.
fn bit_test_filter(gen: &mut FilterGen, depth: u32) -> Pred {
    let masked = |gen: &mut FilterGen| {
        let x = match gen.rng().below(3) {
            0 => Expr::load_at(gen.rng().below(40) as u32, Size::Byte),
            1 => Expr::load(ipv4_header_length(14).plus(13), Size::Byte),
            _ => gen.expr(2),
        };
        let m = gen.rng().one_of(&[0, 1, 2, 0x12, 0x80, 0x1fff, 0xffff_ffff, 0x8000_0000]);
        if gen.rng().chance(20) {
            (bin(BinOp::And, Expr::Const(m), x), m)
        } else {
            (x.and_mask(m), m)
        }
    };
    match gen.rng().below(12) {
        0..=4 => {
            let (value, m) = masked(gen);
            let op = gen.rng().one_of(&[
                CmpOp::Eq,
                CmpOp::Ne,
                CmpOp::Gt,
                CmpOp::Le,
                CmpOp::Ge,
                CmpOp::Lt,
                CmpOp::Set,
            ]);
            let k = gen.rng().one_of(&[0, 0, m, m, 1, 2]);
            if gen.rng().chance(15) {
                Pred::cmp(op, Expr::Const(k), value)
            } else {
                Pred::cmp(op, value, Expr::Const(k))
            }
        }
        5 => Pred::Store { slot: gen.rng().below(4) as u8, value: masked(gen).0 },
        6 => Pred::In { value: masked(gen).0, set: ValueSet::from_ranges([(0, 0), (2, 4)]) },
        7 => gen.pred(1),
        _ if depth == 0 => Pred::eq(Expr::load_at(gen.rng().below(30) as u32, Size::Byte), 2),
        8 | 9 => Pred::and((0..3).map(|_| bit_test_filter(gen, depth - 1))),
        10 => Pred::or((0..3).map(|_| bit_test_filter(gen, depth - 1))),
        _ => Pred::not(bit_test_filter(gen, depth - 1)),
    }
}

#[test]
fn bit_tests_written_as_jset_agree_with_the_ir_and_tighten_as_before() {
    // The laid-out program writes `jset #m` where it wrote `and #m` and a compare that
    // tighten's and_tests turned into that jset: it must mean the filter, and tighten must
    // give what it gave from the and and the compare, on the filter as written and as
    // optimized (guards, decided tests).
    let packets = packets(0xe317_0013, 40, 12);
    let mut gen = FilterGen::new(0xe317_0013);
    let (mut runs, mut accepted, mut direct, mut tightened) = (0, 0, 0, 0);
    let mut other = Vec::new();
    for i in 0..4000 {
        let pred = bit_test_filter(&mut gen, 3);
        let written = Filter::new(pred);
        let filter = if i % 2 == 0 { weir_filter::opt::optimize(&written) } else { written };
        let prog = cbpf::emit_unoptimized(&filter).unwrap_or_else(|e| panic!("{filter:?}: {e}"));
        let masked = cbpf::emit_unoptimized_with_masked_compares(&filter).unwrap();
        let jsets = |p: &[CbpfInsn]| p.iter().filter(|i| i.op == CbpfOp::JsetK).count();
        direct += usize::from(jsets(&prog) > jsets(&masked));
        let (tight, tight_masked) = (cbpf::tighten(&prog), cbpf::tighten(&masked));
        tightened += usize::from(tight != prog);
        if tight != tight_masked {
            // tighten's rounds need not meet in one program from two starts: both must
            // still mean the filter (checked below), and this must stay rare.
            other.push(format!(
                "{filter:?}\n{}\nfrom the ands:\n{}",
                format_listing(&tight),
                format_listing(&tight_masked)
            ));
        }
        for prog in [&prog, &tight, &tight_masked] {
            let (r, a) = classic_runs_as_the_filter(&filter, prog, &packets);
            runs += r;
            accepted += a;
        }
    }
    println!(
        "{runs} runs, {accepted} accepted, {direct} programs with a jset written for a compare, \
         {tightened} tightened, {} otherwise than from the ands",
        other.len()
    );
    assert!(accepted * 20 > runs && accepted * 20 < runs * 19, "{accepted} of {runs} accepted");
    assert!(direct > 500, "{direct} programs with a jset written for a compare");
    // (5 of 4,000 here, on tests such as a byte masked with 0x80000000 or 0xffffffff; of
    // 6,780 pflang listings, 8 differ, each shorter by a `ret` or a load left behind)
    assert!(other.len() <= 8, "{} tighten otherwise:\n{}", other.len(), other.join("\n"));
}

/// A classic instruction as `-dd` prints it: code, jt, jf, k.
type RawInsn = (u16, u8, u8, u32);

/// The filters whose classic programs reload a packet word because their meaning orders the
/// loads (libpcap's optimizer tests in another order and changes which cut packets abort;
/// weir keeps the unoptimized meaning): weir's classic programs, as `weir compile -dd`
/// prints them.
const RELOADING_ROWS: [(&str, &[RawInsn]); 4] = [
    (
        "host 10.0.0.1 or host 10.0.0.2",
        &[
            (0x28, 0, 0, 0x0c),
            (0x15, 0, 7, 0x800),
            (0x20, 0, 0, 0x1a),
            (0x15, 14, 0, 0x0a00_0001),
            (0x20, 0, 0, 0x1e),
            (0x35, 0, 1, 0x0a00_0001),
            (0x25, 0, 11, 0x0a00_0002),
            (0x20, 0, 0, 0x1a),
            (0x15, 9, 10, 0x0a00_0002),
            (0x15, 1, 0, 0x806),
            (0x15, 0, 8, 0x8035),
            (0x20, 0, 0, 0x1c),
            (0x15, 5, 0, 0x0a00_0001),
            (0x20, 0, 0, 0x26),
            (0x35, 0, 1, 0x0a00_0001),
            (0x25, 0, 2, 0x0a00_0002),
            (0x20, 0, 0, 0x1c),
            (0x15, 0, 1, 0x0a00_0002),
            (0x6, 0, 0, 0x40000),
            (0x6, 0, 0, 0),
        ],
    ),
    (
        "tcp port 80 or tcp port 443",
        &[
            (0x28, 0, 0, 0x0c),
            (0x15, 0, 9, 0x86dd),
            (0x30, 0, 0, 0x14),
            (0x15, 0, 21, 0x06),
            (0x28, 0, 0, 0x36),
            (0x15, 18, 0, 0x50),
            (0x28, 0, 0, 0x38),
            (0x15, 16, 0, 0x50),
            (0x15, 15, 0, 0x1bb),
            (0x28, 0, 0, 0x36),
            (0x15, 13, 14, 0x1bb),
            (0x15, 0, 13, 0x800),
            (0x30, 0, 0, 0x17),
            (0x15, 0, 11, 0x06),
            (0x28, 0, 0, 0x14),
            (0x45, 9, 0, 0x1fff),
            (0xb1, 0, 0, 0x0e),
            (0x48, 0, 0, 0x0e),
            (0x15, 5, 0, 0x50),
            (0x48, 0, 0, 0x10),
            (0x15, 3, 0, 0x50),
            (0x15, 2, 0, 0x1bb),
            (0x48, 0, 0, 0x0e),
            (0x15, 0, 1, 0x1bb),
            (0x6, 0, 0, 0x40000),
            (0x6, 0, 0, 0),
        ],
    ),
    (
        "port 80 or port 443",
        &[
            (0x28, 0, 0, 0x0c),
            (0x15, 0, 11, 0x86dd),
            (0x30, 0, 0, 0x14),
            (0x15, 2, 0, 0x06),
            (0x15, 1, 0, 0x11),
            (0x15, 0, 23, 0x84),
            (0x28, 0, 0, 0x36),
            (0x15, 20, 0, 0x50),
            (0x28, 0, 0, 0x38),
            (0x15, 18, 0, 0x50),
            (0x15, 17, 0, 0x1bb),
            (0x28, 0, 0, 0x36),
            (0x15, 15, 16, 0x1bb),
            (0x15, 0, 15, 0x800),
            (0x30, 0, 0, 0x17),
            (0x15, 2, 0, 0x06),
            (0x15, 1, 0, 0x11),
            (0x15, 0, 11, 0x84),
            (0x28, 0, 0, 0x14),
            (0x45, 9, 0, 0x1fff),
            (0xb1, 0, 0, 0x0e),
            (0x48, 0, 0, 0x0e),
            (0x15, 5, 0, 0x50),
            (0x48, 0, 0, 0x10),
            (0x15, 3, 0, 0x50),
            (0x15, 2, 0, 0x1bb),
            (0x48, 0, 0, 0x0e),
            (0x15, 0, 1, 0x1bb),
            (0x6, 0, 0, 0x40000),
            (0x6, 0, 0, 0),
        ],
    ),
    (
        "udp and (port 67 or port 68)",
        &[
            (0x28, 0, 0, 0x0c),
            (0x15, 0, 2, 0x800),
            (0x30, 0, 0, 0x17),
            (0x15, 10, 21, 0x11),
            (0x15, 0, 20, 0x86dd),
            (0x30, 0, 0, 0x14),
            (0x15, 0, 18, 0x11),
            (0x28, 0, 0, 0x36),
            (0x15, 15, 0, 0x43),
            (0x28, 0, 0, 0x38),
            (0x35, 0, 1, 0x43),
            (0x25, 0, 12, 0x44),
            (0x28, 0, 0, 0x36),
            (0x15, 10, 11, 0x44),
            (0x28, 0, 0, 0x14),
            (0x45, 9, 0, 0x1fff),
            (0xb1, 0, 0, 0x0e),
            (0x48, 0, 0, 0x0e),
            (0x15, 5, 0, 0x43),
            (0x48, 0, 0, 0x10),
            (0x35, 0, 1, 0x43),
            (0x25, 0, 2, 0x44),
            (0x48, 0, 0, 0x0e),
            (0x15, 0, 1, 0x44),
            (0x6, 0, 0, 0x40000),
            (0x6, 0, 0, 0),
        ],
    ),
];

/// Frames for [`RELOADING_ROWS`]: IPv4 and IPv6 over Ethernet, TCP and UDP, each address and
/// port of the filters on either side, and ARP with the addresses in its sender and target.
fn reloading_frames() -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let addrs = [0x0a00_0001u32, 0x0a00_0002, 0x0a00_0003];
    let ports = [80u16, 443, 67, 68, 22];
    for proto in [6u8, 17] {
        for (i, (&src, &dst)) in
            addrs.iter().flat_map(|a| addrs.iter().map(move |b| (a, b))).enumerate()
        {
            let (sport, dport) = (ports[i % 5], ports[(i / 5 + 2) % 5]);
            let mut v4 = vec![0u8; 14 + 20 + 8];
            v4[12..14].copy_from_slice(&[0x08, 0x00]);
            v4[14] = 0x45;
            v4[23] = proto;
            v4[22] = 64;
            v4[26..30].copy_from_slice(&src.to_be_bytes());
            v4[30..34].copy_from_slice(&dst.to_be_bytes());
            v4[34..36].copy_from_slice(&sport.to_be_bytes());
            v4[36..38].copy_from_slice(&dport.to_be_bytes());
            // The fragment field beside the TTL and the protocol in one word: don't
            // fragment, more fragments, a later fragment.
            for flags in [[0x40, 0x00], [0x20, 0x00], [0x00, 0xb9]] {
                let mut fragment = v4.clone();
                fragment[20..22].copy_from_slice(&flags);
                frames.push(fragment);
            }
            frames.push(v4);
            let mut v6 = vec![0u8; 14 + 40 + 8];
            v6[12..14].copy_from_slice(&[0x86, 0xdd]);
            v6[20] = proto;
            v6[54..56].copy_from_slice(&dport.to_be_bytes());
            v6[56..58].copy_from_slice(&sport.to_be_bytes());
            frames.push(v6);
            let mut arp = vec![0u8; 14 + 28];
            arp[12..14].copy_from_slice(&[0x08, 0x06]);
            arp[28..32].copy_from_slice(&src.to_be_bytes());
            arp[38..42].copy_from_slice(&dst.to_be_bytes());
            frames.push(arp);
        }
    }
    frames
}

/// Legacy loads `interp` executes on `packet` (a socket filter run), and its verdict.
fn legacy_loads(program: &weir_program::Program, packet: &[u8]) -> (u64, u64) {
    let interp = on_interpreter(program.clone(), ProgType::SocketFilter).unwrap();
    let insns = program.insns();
    let mut ctx = sk_buff_context(packet.len() as u32, &PacketMeta::default());
    let mut copy = packet.to_vec();
    let mut loads = 0u64;
    let outcome = interp
        .run_observed(&mut interp.cache(), Input::new().ctx(&mut ctx).packet(&mut copy), |pc, _| {
            loads += u64::from(insns[pc].op.is_legacy_load());
        })
        .unwrap();
    (loads, outcome.r0)
}

/// A row of [`RELOADING_ROWS`]: its classic program, that program translated, and the
/// translation with its loads reused.
fn reloading_row(raw: &[RawInsn]) -> (Vec<CbpfInsn>, weir_program::Program, weir_program::Program) {
    let raw: Vec<weir_isa::cbpf::SockFilter> = raw
        .iter()
        .map(|&(code, jt, jf, k)| weir_isa::cbpf::SockFilter::new(code, jt, jf, k))
        .collect();
    let classic = weir_isa::cbpf::decode(&raw).unwrap();
    let translated = weir_cbpf::translate::translate(&classic, ProgType::SocketFilter).unwrap();
    let reused = ebpf::reuse_legacy_loads(translated.clone());
    (classic, translated, reused)
}

#[test]
fn reused_loads_keep_the_meaning_on_cut_packets_and_save_calls() {
    for (label, raw) in RELOADING_ROWS {
        let (classic, translated, reused) = reloading_row(raw);
        let reference = CbpfFilter::new(&classic).unwrap();
        let (mut saved, mut runs) = (0u64, 0usize);
        for frame in reloading_frames() {
            // Every cut of the frame, the wire length the whole frame's: where a reload
            // would abort, the first load of that word aborted already.
            for cut in 0..=frame.len() {
                let data = &frame[..cut];
                let want = u64::from(reference.run(data, frame.len() as u32));
                let (before, by_translation) = legacy_loads(&translated, data);
                let (after, by_reuse) = legacy_loads(&reused, data);
                assert_eq!(
                    by_translation,
                    want,
                    "{label}: translation, {cut} of {} bytes",
                    frame.len()
                );
                assert_eq!(by_reuse, want, "{label}: reused loads, {cut} bytes of {}", hex(&frame));
                assert!(after <= before, "{label}: more loads with reuse ({after} > {before})");
                saved += before - after;
                runs += 1;
            }
        }
        println!("{label}: {saved} legacy loads saved over {runs} runs");
        assert!(saved > 0, "{label}: the reuse saved no load");
    }
}

/// The port rows test the IPv4 protocol byte, then the fragment field before it: the
/// reuse loads the word that ends with the protocol once (it fails on the packets the byte
/// load fails on), so a whole IPv4 frame that reaches the fragment test costs one call
/// less, and the port fields' cuts keep their verdicts (the sweep above).
#[test]
fn the_port_rows_take_the_fragment_field_from_the_protocols_word() {
    for (label, raw) in &RELOADING_ROWS[1..] {
        let (_, translated, reused) = reloading_row(raw);
        let loads: Vec<(weir_isa::ebpf::Op, i64)> = reused
            .insns()
            .iter()
            .filter(|i| i.op.is_legacy_load())
            .map(|i| (i.op, i.imm))
            .collect();
        use weir_isa::ebpf::Op::{LdAbsB, LdAbsH, LdAbsW};
        assert!(loads.contains(&(LdAbsW, 20)), "{label}: {loads:?}");
        assert!(!loads.contains(&(LdAbsB, 23)) && !loads.contains(&(LdAbsH, 20)), "{label}");
        // The IPv6 destination port's word would hold the source port, which its own
        // register holds already: widening it would add instructions and save no call.
        assert!(!loads.contains(&(LdAbsW, 54)), "{label}: {loads:?}");
        let protocols: &[u8] = if label.starts_with("tcp") {
            &[6]
        } else if label.starts_with("udp") {
            &[17]
        } else {
            &[6, 17]
        };
        let mut reached = 0;
        for frame in reloading_frames() {
            if frame[12..14] != [0x08, 0x00] || !protocols.contains(&frame[23]) {
                continue;
            }
            let (before, verdict) = legacy_loads(&translated, &frame);
            let (after, by_reuse) = legacy_loads(&reused, &frame);
            assert_eq!(by_reuse, verdict, "{label}: {}", hex(&frame));
            assert!(after < before, "{label}: {after} loads, {before} before: {}", hex(&frame));
            reached += 1;
        }
        assert!(reached > 0, "{label}: no frame reached the fragment test");
    }
}

/// A random predicate over a few packet words, loaded again and again, so that classic
/// programs reload them and the translation's reuse has work on most filters.
fn reloading_pred(rng: &mut weir_testkit::SplitMix64, depth: u32) -> Pred {
    let leaf = depth == 0 || rng.below(4) == 0;
    if leaf && rng.below(3) == 0 {
        // Indexed: the same `ldind` offset through an index that differs between loads.
        // (The header-length form: an index the translation knows is small, kept in X's
        // register; other indexes go through a scratch register the call clobbers.)
        let index = ipv4_header_length(rng.below(2) as u32);
        return Pred::eq(Expr::load(index, Size::Byte), rng.below(3) as u32);
    }
    if leaf {
        let (offset, size) =
            [(0, Size::Byte), (1, Size::Byte), (0, Size::Half), (2, Size::Half), (0, Size::Word)]
                [rng.below_usize(5)];
        let k = [0u32, 1, 2, 0x0101, 0x0102, 0x0001_0203][rng.below_usize(6)];
        return Pred::eq(Expr::load_at(offset, size), k);
    }
    let parts = (0..2 + rng.below_usize(3)).map(|_| reloading_pred(rng, depth - 1)).collect();
    match rng.below(5) {
        0 => Pred::Not(Box::new(reloading_pred(rng, depth - 1))),
        1 | 2 => Pred::Or(parts),
        _ => Pred::And(parts),
    }
}

#[test]
fn translations_with_reused_loads_agree_on_cut_packets() {
    let mut rng = weir_testkit::SplitMix64::new(0x4e05_e001);
    // Short packets over a small alphabet, whole and cut short of their wire length, so
    // that loads hit and miss and aborts land between a load and its reload.
    let packets: Vec<Packet> = (0..120)
        .map(|i| {
            let len = rng.below_usize(13);
            let data: Vec<u8> = (0..len).map(|_| rng.below(3) as u8).collect();
            let wire_len = (len + if i % 3 == 0 { 2 } else { 0 }) as u32;
            Packet { data, wire_len, ts_sec: 0, ts_usec: 0, description: format!("short {i}") }
        })
        .collect();
    let (mut changed, count) = (0, 1000);
    for _ in 0..count {
        let filter = Filter::new(reloading_pred(&mut rng, 3));
        changed += usize::from(check_all(&filter, &packets).2);
    }
    println!("{count} reloading filters: {changed} translations with loads reused");
    assert!(changed * 10 > count, "{changed} of {count} translations had a load to reuse");
}
