//! The helpers, by the kernel's numbers, and the table a program runs with.

use std::io::Write;
use std::sync::Arc;

use weir_program::abi::{Bindings, Helper, HelperCtx, HelperOutcome};
use weir_program::exec::guest::CTX_BASE;
use weir_program::{MapType, ProgType};

use crate::csum;
use crate::env::{Env, Redirect};

const EINVAL: i64 = 22;
const EFAULT: i64 = 14;
const ENOENT: i64 = 2;
const EACCES: i64 = 13;

/// `XDP_PACKET_HEADROOM`'s `sizeof(struct xdp_frame)`: `adjust_head`/`adjust_meta` keep
/// this much of the headroom.
const XDP_FRAME_SIZE: u64 = 40;
const ETH_HLEN: u64 = 14;

fn err(errno: i64) -> HelperOutcome {
    HelperOutcome::Return((-errno) as u64)
}

fn ok(value: u64) -> HelperOutcome {
    HelperOutcome::Return(value)
}

fn env<'c>(ctx: &'c mut HelperCtx<'_>) -> Option<&'c mut Env> {
    ctx.env()?.as_any().downcast_mut::<Env>()
}

/// Reads `len` bytes of guest memory, or `None` (the helper then fails, as the verifier
/// would have refused the program).
fn read(ctx: &HelperCtx<'_>, addr: u64, len: u64) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; usize::try_from(len).ok().filter(|&n| n <= 1 << 20)?];
    ctx.read(addr, &mut buf).ok()?;
    Some(buf)
}

fn read_u32(ctx: &HelperCtx<'_>, addr: u64) -> Option<u32> {
    let mut b = [0u8; 4];
    ctx.read(addr, &mut b).ok()?;
    Some(u32::from_le_bytes(b))
}

/// The key (and value) sizes of the map a handle names.
fn map_sizes(ctx: &mut HelperCtx<'_>, handle: u64) -> Option<(u32, u32)> {
    let env = env(ctx)?;
    let (_, map) = env.map(handle)?;
    Some((map.spec().key_size, map.spec().value_size))
}

macro_rules! try_or_fail {
    ($e:expr) => {
        match $e {
            Some(v) => v,
            None => return HelperOutcome::Fail,
        }
    };
}

/// A key or value read from guest memory: up to 64 bytes (every key and value of the
/// test corpus) on the stack, longer ones on the heap.
enum Bytes {
    Small([u8; 64], usize),
    Heap(Vec<u8>),
}

impl Bytes {
    /// `len` bytes at `addr`, or `None` (unreadable: the helper fails, as the verifier
    /// would have refused the program).
    fn read(ctx: &HelperCtx<'_>, addr: u64, len: u32) -> Option<Bytes> {
        let mut small = [0u8; 64];
        match small.get_mut(..len as usize) {
            Some(buf) => {
                ctx.read(addr, buf).ok()?;
                Some(Bytes::Small(small, len as usize))
            }
            None => read(ctx, addr, u64::from(len)).map(Bytes::Heap),
        }
    }

    fn get(&self) -> &[u8] {
        match self {
            Bytes::Small(bytes, len) => bytes.get(..*len).unwrap_or_default(),
            Bytes::Heap(bytes) => bytes,
        }
    }
}

fn map_lookup_elem(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let (key_size, _) = try_or_fail!(map_sizes(ctx, a[0]));
    let key = try_or_fail!(Bytes::read(ctx, a[1], key_size));
    let env = try_or_fail!(env(ctx));
    ok(env.lookup_elem(a[0], key.get()).unwrap_or(0))
}

fn map_update_elem(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let (key_size, value_size) = try_or_fail!(map_sizes(ctx, a[0]));
    let key = try_or_fail!(Bytes::read(ctx, a[1], key_size));
    let value = try_or_fail!(Bytes::read(ctx, a[2], value_size));
    let env = try_or_fail!(env(ctx));
    let cpu = env.cpu();
    let (_, map) = try_or_fail!(env.map(a[0]));
    match map.update(key.get(), value.get(), a[3], cpu) {
        Ok(()) => ok(0),
        Err(e) => err(i64::from(e.errno())),
    }
}

fn map_delete_elem(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let (key_size, _) = try_or_fail!(map_sizes(ctx, a[0]));
    let key = try_or_fail!(Bytes::read(ctx, a[1], key_size));
    let env = try_or_fail!(env(ctx));
    let (_, map) = try_or_fail!(env.map(a[0]));
    match map.delete(key.get()) {
        Ok(()) => ok(0),
        Err(e) => err(i64::from(e.errno())),
    }
}

fn map_push_elem(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let (_, value_size) = try_or_fail!(map_sizes(ctx, a[0]));
    let value = try_or_fail!(read(ctx, a[1], u64::from(value_size)));
    let env = try_or_fail!(env(ctx));
    let (_, map) = try_or_fail!(env.map(a[0]));
    match map.push(&value, a[2]) {
        Ok(()) => ok(0),
        Err(e) => err(i64::from(e.errno())),
    }
}

fn pop_or_peek(ctx: &mut HelperCtx<'_>, a: &[u64; 5], peek: bool) -> HelperOutcome {
    let env = try_or_fail!(env(ctx));
    let (_, map) = try_or_fail!(env.map(a[0]));
    let got = if peek { map.peek() } else { map.pop() };
    match got {
        Ok(value) => match ctx.write(a[1], &value) {
            Ok(()) => ok(0),
            Err(_) => HelperOutcome::Fail,
        },
        Err(e) => err(i64::from(e.errno())),
    }
}

fn map_pop_elem(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    pop_or_peek(ctx, a, false)
}

fn map_peek_elem(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    pop_or_peek(ctx, a, true)
}

fn ktime_get_ns(ctx: &mut HelperCtx<'_>, _: &[u64; 5]) -> HelperOutcome {
    ok(try_or_fail!(env(ctx)).now_ns())
}

fn ktime_get_coarse_ns(ctx: &mut HelperCtx<'_>, _: &[u64; 5]) -> HelperOutcome {
    // A jiffy-grained clock: 4 ms ticks (HZ=250).
    let ns = try_or_fail!(env(ctx)).now_ns();
    ok(ns - ns % 4_000_000)
}

fn get_prandom_u32(ctx: &mut HelperCtx<'_>, _: &[u64; 5]) -> HelperOutcome {
    ok(u64::from(try_or_fail!(env(ctx)).next_random()))
}

fn get_smp_processor_id(ctx: &mut HelperCtx<'_>, _: &[u64; 5]) -> HelperOutcome {
    ok(try_or_fail!(env(ctx)).cpu() as u64)
}

/// `bpf_trace_printk(fmt, fmt_size, a, b, c)`: `%d %i %u %x %ld %lu %lx %lld %llu %llx %%`
/// and `%p`, as bpf_trace_printk formats them; the line goes to standard error.
fn trace_printk(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let fmt = try_or_fail!(read(ctx, a[0], a[1]));
    let fmt = fmt.split(|&b| b == 0).next().unwrap_or_default();
    let Ok(fmt) = std::str::from_utf8(fmt) else {
        return err(EINVAL);
    };
    let mut out = String::new();
    let mut args = [a[2], a[3], a[4]].into_iter();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut longs = 0;
        while chars.peek() == Some(&'l') {
            chars.next();
            longs += 1;
        }
        let Some(conv) = chars.next() else { return err(EINVAL) };
        if conv == '%' {
            out.push('%');
            continue;
        }
        let Some(v) = args.next() else { return err(EINVAL) };
        let v = if longs == 0 && conv != 'p' { v & 0xffff_ffff } else { v };
        match conv {
            'd' | 'i' if longs == 0 => out.push_str(&(v as u32 as i32).to_string()),
            'd' | 'i' => out.push_str(&(v as i64).to_string()),
            'u' => out.push_str(&v.to_string()),
            'x' => out.push_str(&format!("{v:x}")),
            'p' => out.push_str(&format!("{v:#x}")),
            _ => return err(EINVAL),
        }
    }
    let len = out.len() as u64;
    let env = try_or_fail!(env(ctx));
    match &mut env.trace {
        Some(kept) => kept.push(out),
        None => {
            let _ = writeln!(std::io::stderr(), "{}", out.trim_end_matches('\n'));
        }
    }
    ok(len)
}

fn tail_call(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let env = try_or_fail!(env(ctx));
    let Some((_, map)) = env.map(a[1]) else { return HelperOutcome::Fail };
    if map.map_type() != MapType::ProgArray {
        return HelperOutcome::Fail;
    }
    let Some(target) = u32::try_from(a[2]).ok().and_then(|i| map.prog_at(i)) else {
        return err(ENOENT);
    };
    if env.tail_calls >= crate::MAX_TAIL_CALLS {
        return err(ENOENT);
    }
    env.tail_calls += 1;
    env.tail_call = Some(target);
    HelperOutcome::Stop(0)
}

fn is_xdp(ctx: &HelperCtx<'_>) -> bool {
    ctx.prog_type() == Some(ProgType::Xdp)
}

fn redirect(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let xdp = is_xdp(ctx);
    let env = try_or_fail!(env(ctx));
    let (ifindex, flags) = (a[0] as u32, a[1]);
    if xdp {
        if flags != 0 {
            return ok(u64::from(weir_program::abi::xdp_action::ABORTED));
        }
        env.redirect = Some(Redirect::Ifindex { ifindex, flags });
        return ok(u64::from(weir_program::abi::xdp_action::REDIRECT));
    }
    // tc: BPF_F_INGRESS is the one flag; TC_ACT_SHOT for others, TC_ACT_REDIRECT.
    if flags & !1 != 0 {
        return ok(2);
    }
    env.redirect = Some(Redirect::Ifindex { ifindex, flags });
    ok(7)
}

fn redirect_map(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let env = try_or_fail!(env(ctx));
    let Some((index, map)) = env.map(a[0]) else { return HelperOutcome::Fail };
    let key = a[1] as u32;
    let flags = a[2];
    // The low bits of flags are the action when the key has no entry.
    if flags & !0x3 & !(1 << 3 | 1 << 4) != 0 {
        return ok(u64::from(weir_program::abi::xdp_action::ABORTED));
    }
    if map.lookup(&key.to_ne_bytes(), env.cpu()).is_none() {
        return ok(flags & 0x3);
    }
    env.redirect = Some(Redirect::Map { map: index, key });
    ok(u64::from(weir_program::abi::xdp_action::REDIRECT))
}

fn csum_diff(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let (from_size, to_size) = (a[1], a[3]);
    if (from_size | to_size) & 3 != 0 || from_size.saturating_add(to_size) > 512 {
        return err(EINVAL);
    }
    let from = try_or_fail!(read(ctx, a[0], from_size));
    let to = try_or_fail!(read(ctx, a[2], to_size));
    let mut diff: Vec<u8> = from.iter().map(|b| !b).collect();
    diff.extend_from_slice(&to);
    ok(u64::from(csum::partial(&diff, a[4] as u32)))
}

/// The `data` and `data_end` context fields' offsets for the program type.
fn data_fields(ctx: &HelperCtx<'_>) -> (u64, u64) {
    if is_xdp(ctx) {
        (0, 4)
    } else {
        (76, 80)
    }
}

/// The packet's `[data, data_end)` guest addresses.
fn packet(ctx: &HelperCtx<'_>) -> Option<(u64, u64)> {
    let (d, e) = data_fields(ctx);
    Some((u64::from(read_u32(ctx, CTX_BASE + d)?), u64::from(read_u32(ctx, CTX_BASE + e)?)))
}

/// The guest address of `len` bytes at packet offset `offset`, if inside the packet.
fn packet_at(ctx: &HelperCtx<'_>, offset: u64, len: u64) -> Option<u64> {
    let (data, end) = packet(ctx)?;
    let at = data.checked_add(offset)?;
    (at.checked_add(len)? <= end).then_some(at)
}

/// `bpf_get_hash_recalc(skb)`: the packet's flow hash ([`crate::flow_hash`]: the kernel's
/// keys and symmetry, not its per-boot siphash key), also stored in `skb->hash` as the
/// kernel stores it. tc programs only (the kernel offers it to no socket filter or XDP
/// program).
fn get_hash_recalc(ctx: &mut HelperCtx<'_>, _: &[u64; 5]) -> HelperOutcome {
    if !matches!(ctx.prog_type(), Some(ProgType::SchedCls | ProgType::SchedAct)) {
        return HelperOutcome::Fail;
    }
    let (data, end) = try_or_fail!(packet(ctx));
    let frame = try_or_fail!(read(ctx, data, end.saturating_sub(data)));
    let hash = crate::flow_hash(&frame);
    // `__sk_buff.hash`, at 68.
    try_or_fail!(ctx.write_context(68, &hash.to_le_bytes()).ok());
    ok(u64::from(hash))
}

fn skb_load_bytes(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let (offset, to, len) = (a[1] as u32, a[2], a[3]);
    let zeros = vec![0u8; usize::try_from(len).unwrap_or(0).min(1 << 16)];
    let Some(at) = packet_at(ctx, u64::from(offset), len) else {
        // The kernel clears the destination on failure.
        return match ctx.write(to, &zeros) {
            Ok(()) => err(EFAULT),
            Err(_) => HelperOutcome::Fail,
        };
    };
    let bytes = try_or_fail!(read(ctx, at, len));
    match ctx.write(to, &bytes) {
        Ok(()) => ok(0),
        Err(_) => HelperOutcome::Fail,
    }
}

fn skb_store_bytes(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let (offset, len, flags) = (a[1] as u32, a[3], a[4]);
    // BPF_F_RECOMPUTE_CSUM | BPF_F_INVALIDATE_HASH.
    if flags & !(1 | 2) != 0 {
        return err(EINVAL);
    }
    let bytes = try_or_fail!(read(ctx, a[2], len));
    let Some(at) = packet_at(ctx, u64::from(offset), len) else { return err(EFAULT) };
    match ctx.write(at, &bytes) {
        Ok(()) => ok(0),
        Err(_) => HelperOutcome::Fail,
    }
}

fn csum_replace(ctx: &mut HelperCtx<'_>, a: &[u64; 5], l4: bool) -> HelperOutcome {
    let (offset, from, to, flags) = (a[1] as u32, a[2], a[3], a[4]);
    // Header size in the low 4 bits; l4 adds BPF_F_PSEUDO_HDR and BPF_F_MARK_MANGLED_0 and
    // BPF_F_MARK_ENFORCE.
    let allowed = if l4 { 0xf | 0x10 | 0x20 | 0x40 } else { 0xf };
    if flags & !allowed != 0 {
        return err(EINVAL);
    }
    let Some(at) = packet_at(ctx, u64::from(offset), 2) else { return err(EFAULT) };
    let field = try_or_fail!(read(ctx, at, 2));
    let field = u16::from_ne_bytes([field[0], field[1]]);
    let mangled_zero = l4 && flags & 0x20 != 0;
    if mangled_zero && field == 0 {
        return ok(0);
    }
    let new = match flags & 0xf {
        0 => csum::replace_by_diff(field, to as u32),
        2 => csum::replace(field, u32::from(from as u16), u32::from(to as u16)),
        4 => csum::replace(field, from as u32, to as u32),
        _ => return err(EINVAL),
    };
    let new = if mangled_zero && new == 0 { 0xffff } else { new };
    match ctx.write(at, &new.to_ne_bytes()) {
        Ok(()) => ok(0),
        Err(_) => HelperOutcome::Fail,
    }
}

fn l3_csum_replace(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    csum_replace(ctx, a, false)
}

fn l4_csum_replace(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    csum_replace(ctx, a, true)
}

/// The XDP context's `data`, `data_end` and `data_meta`.
fn xdp_fields(ctx: &HelperCtx<'_>) -> Option<(u64, u64, u64)> {
    Some((
        u64::from(read_u32(ctx, CTX_BASE)?),
        u64::from(read_u32(ctx, CTX_BASE + 4)?),
        u64::from(read_u32(ctx, CTX_BASE + 8)?),
    ))
}

fn set_xdp_field(ctx: &mut HelperCtx<'_>, offset: usize, value: u64) -> bool {
    ctx.write_context(offset, &(value as u32).to_le_bytes()).is_ok()
}

fn xdp_adjust_head(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let (data, end, meta) = try_or_fail!(xdp_fields(ctx));
    let bounds = try_or_fail!(env(ctx)).packet;
    let delta = a[1] as i32 as i64;
    let new = data.wrapping_add_signed(delta);
    let metalen = data - meta;
    if new < bounds.hard_start + metalen + XDP_FRAME_SIZE || new + ETH_HLEN > end {
        return err(EINVAL);
    }
    let new_meta = new - metalen;
    if metalen > 0 {
        // The metadata moves with the data.
        let bytes = try_or_fail!(read(ctx, meta, metalen));
        if ctx.write(new_meta, &bytes).is_err() {
            return HelperOutcome::Fail;
        }
    }
    if !set_xdp_field(ctx, 0, new) || !set_xdp_field(ctx, 8, new_meta) {
        return HelperOutcome::Fail;
    }
    let env = try_or_fail!(env(ctx));
    env.packet_floor = env.packet_floor.min(new_meta);
    ok(0)
}

fn xdp_adjust_meta(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let (data, _, meta) = try_or_fail!(xdp_fields(ctx));
    let bounds = try_or_fail!(env(ctx)).packet;
    let new = meta.wrapping_add_signed(a[1] as i32 as i64);
    if new > data {
        return err(EINVAL);
    }
    if new < bounds.hard_start + XDP_FRAME_SIZE {
        return err(EACCES);
    }
    let metalen = data - new;
    if metalen & 3 != 0 || metalen > 32 {
        return err(EACCES);
    }
    if !set_xdp_field(ctx, 8, new) {
        return HelperOutcome::Fail;
    }
    let env = try_or_fail!(env(ctx));
    env.packet_floor = env.packet_floor.min(new);
    ok(0)
}

fn xdp_adjust_tail(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let (data, end, _) = try_or_fail!(xdp_fields(ctx));
    let bounds = try_or_fail!(env(ctx)).packet;
    let delta = a[1] as i32 as i64;
    let new = end.wrapping_add_signed(delta);
    if new > bounds.hard_end {
        return err(EINVAL);
    }
    if new < data + ETH_HLEN {
        return err(EINVAL);
    }
    if new > end {
        // Grown bytes are zeroed, as the kernel does.
        let zeros = vec![0u8; (new - end) as usize];
        if ctx.write(end, &zeros).is_err() {
            return HelperOutcome::Fail;
        }
    }
    if !set_xdp_field(ctx, 4, new) {
        return HelperOutcome::Fail;
    }
    let env = try_or_fail!(env(ctx));
    env.packet_reach = env.packet_reach.max(new);
    ok(0)
}

fn ringbuf_output(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let data = try_or_fail!(read(ctx, a[1], a[2]));
    let env = try_or_fail!(env(ctx));
    let (_, map) = try_or_fail!(env.map(a[0]));
    let Some(ring) = map.ring_buf() else { return HelperOutcome::Fail };
    match ring.output(&data, a[3]) {
        Ok(()) => ok(0),
        Err(e) => err(i64::from(e.errno())),
    }
}

fn ringbuf_reserve(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let env = try_or_fail!(env(ctx));
    let (_, map) = try_or_fail!(env.map(a[0]));
    let map = Arc::clone(map);
    if map.ring_buf().is_none() {
        return HelperOutcome::Fail;
    }
    ok(env.ring_reserve(&map, a[1], a[2]).unwrap_or(0))
}

fn ringbuf_submit(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let env = try_or_fail!(env(ctx));
    if env.ring_finish(a[0], false) {
        ok(0)
    } else {
        HelperOutcome::Fail
    }
}

fn ringbuf_discard(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let env = try_or_fail!(env(ctx));
    if env.ring_finish(a[0], true) {
        ok(0)
    } else {
        HelperOutcome::Fail
    }
}

fn ringbuf_query(ctx: &mut HelperCtx<'_>, a: &[u64; 5]) -> HelperOutcome {
    let env = try_or_fail!(env(ctx));
    let (_, map) = try_or_fail!(env.map(a[0]));
    let Some(ring) = map.ring_buf() else { return HelperOutcome::Fail };
    ok(ring.query(a[1]))
}

/// Every helper weir runs: (kernel id, kernel name, function).
pub static SUPPORTED: &[(u32, &str, weir_program::abi::HelperFn)] = &[
    (1, "bpf_map_lookup_elem", map_lookup_elem),
    (2, "bpf_map_update_elem", map_update_elem),
    (3, "bpf_map_delete_elem", map_delete_elem),
    (5, "bpf_ktime_get_ns", ktime_get_ns),
    (6, "bpf_trace_printk", trace_printk),
    (7, "bpf_get_prandom_u32", get_prandom_u32),
    (8, "bpf_get_smp_processor_id", get_smp_processor_id),
    (9, "bpf_skb_store_bytes", skb_store_bytes),
    (10, "bpf_l3_csum_replace", l3_csum_replace),
    (11, "bpf_l4_csum_replace", l4_csum_replace),
    (12, "bpf_tail_call", tail_call),
    (23, "bpf_redirect", redirect),
    (26, "bpf_skb_load_bytes", skb_load_bytes),
    (28, "bpf_csum_diff", csum_diff),
    (34, "bpf_get_hash_recalc", get_hash_recalc),
    (44, "bpf_xdp_adjust_head", xdp_adjust_head),
    (51, "bpf_redirect_map", redirect_map),
    (54, "bpf_xdp_adjust_meta", xdp_adjust_meta),
    (65, "bpf_xdp_adjust_tail", xdp_adjust_tail),
    (87, "bpf_map_push_elem", map_push_elem),
    (88, "bpf_map_pop_elem", map_pop_elem),
    (89, "bpf_map_peek_elem", map_peek_elem),
    (125, "bpf_ktime_get_boot_ns", ktime_get_ns),
    (130, "bpf_ringbuf_output", ringbuf_output),
    (131, "bpf_ringbuf_reserve", ringbuf_reserve),
    (132, "bpf_ringbuf_submit", ringbuf_submit),
    (133, "bpf_ringbuf_discard", ringbuf_discard),
    (134, "bpf_ringbuf_query", ringbuf_query),
    (160, "bpf_ktime_get_coarse_ns", ktime_get_coarse_ns),
];

/// Helper names weir knows but does not run, for the load-time error.
static KNOWN: &[(u32, &str)] =
    &[(4, "bpf_probe_read"), (13, "bpf_clone_redirect"), (25, "bpf_perf_event_output")];

/// The kernel's name of helper `id`, if weir knows it.
pub fn helper_name(id: u32) -> Option<&'static str> {
    SUPPORTED
        .iter()
        .map(|&(i, n, _)| (i, n))
        .chain(KNOWN.iter().copied())
        .find(|&(i, _)| i == id)
        .map(|(_, n)| n)
}

/// The bindings a program of `prog_type` runs with: its context layout and every helper.
pub fn bindings(prog_type: ProgType) -> Bindings {
    let mut b = Bindings::for_prog_type(prog_type);
    for &(id, name, func) in SUPPORTED {
        b.add_helper(Helper { id, name, func });
    }
    // `Env::map_lookup` answers exactly as `map_lookup_elem` does (or declines).
    b.lookup_through_env();
    b
}

/// The ids among `called` that weir does not run, sorted, without repeats.
pub fn unsupported_helpers(called: impl IntoIterator<Item = u32>) -> Vec<u32> {
    let mut ids: Vec<u32> =
        called.into_iter().filter(|id| !SUPPORTED.iter().any(|&(i, _, _)| i == *id)).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}
