//! Pair lists (`host A and port P or ...`, and the firewall's `not (not (..) and not (..)
//! ...)`) lowered to one `Pred::Pairs` (`lower::fuse`) against the same lists lowered term
//! by term: random lists drawn from small pools (repeated hosts, repeated ports, hosts in
//! several pairs; `src`/`dst`/`ip` hosts, `tcp`/`udp`/`src`/`dst` ports, nets), random
//! packets built to hit them (IPv4 with options and fragments, IPv6, ARP, RARP, other
//! EtherTypes; TCP, UDP, SCTP and other protocols), each cut at every length. The verdict
//! must be the term-by-term filter's on the reference evaluator (the node, before and after
//! the optimizer), the native code (`weir_jit::filter`, which calls out to the node's
//! probe) and the classic BPF emitted from it (the node's expansion).

use weir_cbpf::CbpfFilter;
use weir_filter::emit::cbpf;
use weir_filter::opt::optimize;
use weir_filter::{Filter, Pred};
use weir_pflang::lower::fuse::MIN_TERMS;
use weir_pflang::names::NameDb;
use weir_pflang::{LinkType, Options};
use weir_testkit::SplitMix64;

const SEED: u64 = 0x9a17_0013;
const LISTS: usize = 90;
const PACKETS_PER_LIST: usize = 16;

struct Pool {
    hosts: Vec<[u8; 4]>,
    ports: Vec<u16>,
}

impl Pool {
    fn new(rng: &mut SplitMix64) -> Pool {
        // Few values: lists repeat hosts and ports, and packets hit them.
        let hosts = (0..rng.range_usize(2, 12)).map(|_| [10, 0, rng.u8() % 2, rng.u8()]).collect();
        let ports = (0..rng.range_usize(2, 12)).map(|_| rng.range(1, 300) as u16).collect();
        Pool { hosts, ports }
    }
}

fn ip(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

/// One pair term of kind `kind`.
fn term(kind: usize, rng: &mut SplitMix64, pool: &Pool) -> String {
    let h = pool.hosts[rng.below_usize(pool.hosts.len())];
    let host = ip(h);
    let port = pool.ports[rng.below_usize(pool.ports.len())];
    match kind {
        0 => format!("host {host} and port {port}"),
        1 => format!("src host {host} and tcp port {port}"),
        2 => format!("dst host {host} and udp dst port {port}"),
        3 => format!("ip host {host} and port {port}"),
        4 => format!("host {host} and src port {port}"),
        5 => format!("net {}.{}.{}.0/24 and dst port {port}", h[0], h[1], h[2]),
        6 => format!("port {port} and host {host}"),
        // Not a pair: breaks runs.
        _ => format!("host {host}"),
    }
}

/// A random list: one kind, sometimes interrupted; or-joined, or `not`s and-joined.
fn list(rng: &mut SplitMix64, pool: &Pool) -> (Vec<String>, bool) {
    list_of(rng, pool, (MIN_TERMS, 4 * MIN_TERMS))
}

/// [`list`] with a number of terms in `lo..hi`.
fn list_of(rng: &mut SplitMix64, pool: &Pool, (lo, hi): (usize, usize)) -> (Vec<String>, bool) {
    let n = rng.range_usize(lo, hi);
    let kind = rng.below_usize(7);
    let mixed = rng.chance(20);
    let terms = (0..n)
        .map(|_| {
            let k = if mixed && rng.chance(10) { rng.below_usize(8) } else { kind };
            term(k, rng, pool)
        })
        .collect();
    (terms, rng.chance(50))
}

/// A packet meant to meet the pool.
fn packet(rng: &mut SplitMix64, pool: &Pool) -> Vec<u8> {
    let len = rng.range_usize(44, 100);
    let mut p = rng.bytes(len);
    let host = |rng: &mut SplitMix64| {
        if rng.chance(75) {
            pool.hosts[rng.below_usize(pool.hosts.len())]
        } else {
            rng.u32().to_be_bytes()
        }
    };
    let port = |rng: &mut SplitMix64| {
        if rng.chance(75) {
            pool.ports[rng.below_usize(pool.ports.len())]
        } else {
            rng.u16()
        }
    };
    let ethertype: u16 = match rng.below(12) {
        0 => 0x0806,
        1 => 0x8035,
        2 | 3 => 0x86dd,
        4 => rng.u16(),
        _ => 0x0800,
    };
    p[12..14].copy_from_slice(&ethertype.to_be_bytes());
    let proto = rng.one_of(&[6, 17, 132, 1, 6, 17, 47]);
    let transport = match ethertype {
        0x0800 => {
            let ihl = if rng.chance(70) { 5 } else { rng.below(16) as u8 };
            p[14] = 0x40 | ihl;
            // Fragments: offset and more-fragments bits, sometimes.
            p[20] = if rng.chance(75) { 0 } else { rng.u8() };
            p[21] = if rng.chance(75) { 0 } else { rng.u8() };
            p[23] = proto;
            let (src, dst) = (host(rng), host(rng));
            p[26..30].copy_from_slice(&src);
            p[30..34].copy_from_slice(&dst);
            Some(14 + 4 * usize::from(ihl))
        }
        0x86dd => {
            p[14] = 0x60;
            p[20] = proto;
            Some(54)
        }
        0x0806 | 0x8035 => {
            p[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
            let (spa, tpa) = (host(rng), host(rng));
            p[28..32].copy_from_slice(&spa);
            p[38..42].copy_from_slice(&tpa);
            None
        }
        _ => None,
    };
    if let Some(th) = transport {
        for at in [th, th + 2] {
            if at + 2 <= p.len() {
                let v = port(rng);
                p[at..at + 2].copy_from_slice(&v.to_be_bytes());
            }
        }
    }
    p
}

fn lowered(expr: &str, names: &NameDb) -> Filter {
    let options = Options::new(LinkType::Ethernet);
    weir_pflang::compile(expr, &options, names).unwrap_or_else(|e| panic!("{expr}: {e}"))
}

/// A term lowered as the terms of a long list are (its ports as libpcap's trees, the shapes
/// the fuser reads).
fn lowered_as_list_term(expr: &str, names: &NameDb) -> Filter {
    let options = Options::new(LinkType::Ethernet);
    let ast = weir_pflang::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
    let ast = ast.unwrap_or_else(|| panic!("{expr}: empty"));
    weir_pflang::lower::lower_as_list_term(&ast, &options, names)
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
}

/// The start of a long expression, for messages.
fn short(expr: &str) -> String {
    expr.chars().take(300).collect()
}

fn has_pairs(p: &Pred) -> bool {
    match p {
        Pred::Pairs(_) => true,
        Pred::And(ps) | Pred::Or(ps) => ps.iter().any(has_pairs),
        Pred::Not(q) | Pred::Try(q) => has_pairs(q),
        _ => false,
    }
}

/// The list as one expression: `(t1) or (t2) ...`, or the firewall form
/// `not (not (t1) and not (t2) ...)`.
fn joined(terms: &[String], negated: bool) -> String {
    if negated {
        let and = terms.iter().map(|t| format!("not ({t})")).collect::<Vec<_>>().join(" and ");
        format!("not ({and})")
    } else {
        terms.iter().map(|t| format!("({t})")).collect::<Vec<_>>().join(" or ")
    }
}

#[test]
fn pair_lists_match_their_terms_on_cut_packets() {
    let names = NameDb::builtin();
    let mut rng = SplitMix64::new(SEED);
    let (mut fused, mut cuts, mut natives) = (0usize, 0usize, 0usize);
    for _ in 0..LISTS {
        let pool = Pool::new(&mut rng);
        let (terms, negated) = list(&mut rng, &pool);
        let joined = joined(&terms, negated);
        let node = lowered(&joined, &names);
        fused += usize::from(has_pairs(&node.pred));
        let parts = terms.iter().map(|t| lowered(t, &names).pred);
        let expanded = if negated {
            Filter::new(Pred::not(Pred::And(parts.map(Pred::not).collect())))
        } else {
            Filter::new(Pred::Or(parts.collect()))
        };
        let optimized = optimize(&node);
        let classic = cbpf::emit(&optimized).ok().and_then(|prog| CbpfFilter::new(&prog).ok());
        assert!(classic.is_some(), "`{joined}` did not compile to classic BPF");
        let native = weir_jit::filter::compile(&optimized).ok();
        natives += usize::from(native.is_some());
        for _ in 0..PACKETS_PER_LIST {
            let pkt = packet(&mut rng, &pool);
            let wire = pkt.len() as u32;
            for cut in 0..=pkt.len() {
                let bytes = &pkt[..cut];
                let want = expanded.run(bytes, wire);
                let at = || format!("`{}` on {pkt:02x?} cut at {cut}", short(&joined));
                assert_eq!(node.run(bytes, wire), want, "node: {}", at());
                assert_eq!(optimized.run(bytes, wire), want, "optimized: {}", at());
                if let Some(classic) = &classic {
                    assert_eq!(classic.run(bytes, wire), want, "classic: {}", at());
                }
                if let Some(native) = &native {
                    assert_eq!(native.run(bytes, wire), want, "native: {}", at());
                }
                cuts += 1;
            }
        }
    }
    eprintln!("pairs: {LISTS} lists ({fused} with a pair node), {cuts} cut packets");
    // The generator must exercise the node, and the native code must compile it.
    assert!(fused >= LISTS / 2, "only {fused} of {LISTS} lists fused");
    assert_eq!(natives, LISTS, "some lists did not compile to native code");
}

/// The firewall list lowers to one node whatever its length: a tree of one term's size.
#[test]
fn a_long_pair_list_lowers_to_one_node() {
    let names = NameDb::builtin();
    let terms: Vec<String> = (0..5_000u32)
        .map(|i| format!("not (host 10.{}.{}.1 and port {})", i / 250, i % 250, 1 + i))
        .collect();
    let f = lowered(&format!("not ({})", terms.join(" and ")), &names);
    let one = weir_filter::opt::node_count(&lowered("host 10.0.0.1 and port 1", &names).pred);
    let n = weir_filter::opt::node_count(&f.pred);
    assert!(has_pairs(&f.pred), "5,000 pairs: no pair node");
    assert!(n < 3 * one, "{n} nodes for 5,000 pairs (one pair: {one})");
}

/// The XDP form, which emits a pair node's two walks once and then a few compares a pair
/// (`weir_filter`'s `emit/ebpf/pairs.rs`), against the term-by-term filter on whole frames
/// cut at every length (XDP sees the frame as it is: its `len` is the cut length), on
/// weir's interpreter and JIT, and in the kernel's `BPF_PROG_TEST_RUN` where the kernel
/// can be asked (frames of 14 bytes and more: the kernel refuses shorter ones).
#[test]
fn pair_lists_in_xdp_match_their_terms_on_cut_packets() {
    let (shared, cuts, in_kernel) = xdp_lists(SEED ^ 0x0d9, LISTS / 2, (MIN_TERMS, 4 * MIN_TERMS));
    eprintln!(
        "pairs (XDP): {shared} lists in the shared form, {cuts} cuts, {in_kernel} in the kernel"
    );
    assert!(shared >= LISTS / 5, "only {shared} lists took the shared form");
}

/// The same with lists long enough (1,400 terms and more, times the first walk's registers
/// plus one over 4,096) that the XDP form searches trees instead of scanning in line.
#[test]
fn long_pair_lists_in_xdp_take_the_search_trees() {
    let (shared, cuts, in_kernel) = xdp_lists(SEED ^ 0x7ee, 6, (1_400, 1_800));
    eprintln!(
        "pairs (XDP, trees): {shared} lists in the shared form, {cuts} cuts, {in_kernel} in the kernel"
    );
    assert!(shared >= 3, "only {shared} long lists took the shared form");
}

/// Random lists of `terms` terms in the XDP form on weir's interpreter, JIT and the kernel
/// against the term-by-term filter: (lists in the shared form, cuts, cuts in the kernel).
fn xdp_lists(seed: u64, lists: usize, terms: (usize, usize)) -> (usize, usize, usize) {
    use weir_program::abi::{xdp_action, Bindings};
    use weir_program::exec::{Engine, Input, Limits};
    use weir_program::{ProgType, Verified};

    let names = NameDb::builtin();
    let mut rng = SplitMix64::new(seed);
    let kernel = match weir_sys::kernel::available() {
        Ok(()) => true,
        Err(reason) => {
            println!("SKIPPED: pair_lists_in_xdp (kernel part): {reason}");
            false
        }
    };
    let (mut shared, mut cuts, mut in_kernel) = (0usize, 0usize, 0usize);
    for _ in 0..lists {
        let pool = Pool::new(&mut rng);
        let (terms, negated) = list_of(&mut rng, &pool, terms);
        let joined = joined(&terms, negated);
        let node = optimize(&lowered(&joined, &names));
        let parts = terms.iter().map(|t| lowered(t, &names).pred);
        let expanded = if negated {
            Filter::new(Pred::not(Pred::And(parts.map(Pred::not).collect())))
        } else {
            Filter::new(Pred::Or(parts.collect()))
        };
        let program = weir_filter::emit::ebpf::emit(&node, ProgType::Xdp)
            .unwrap_or_else(|e| panic!("`{}`: {e}", short(&joined)));
        // The shared form is shorter than the expansion's: count the lists it served.
        let plain = weir_filter::emit::ebpf::emit(
            &Filter::new(weir_filter::pairs::expand_pairs(node.pred.clone())),
            ProgType::Xdp,
        )
        .unwrap_or_else(|e| panic!("`{}`: {e}", short(&joined)));
        shared += usize::from(has_pairs(&node.pred) && program.insns().len() < plain.insns().len());
        let mut bindings = Bindings::new();
        bindings.context = Some(ProgType::Xdp.context_layout());
        let verified = Verified::structural(program.clone()).expect("a valid program");
        let interp = weir_interp::Interp
            .prepare(&verified, bindings.clone(), Limits::default())
            .expect("the interpreter takes it");
        let jit = weir_jit::Jit
            .prepare(&verified, bindings, Limits::default())
            .expect("the JIT takes it");
        let loaded = kernel.then(|| {
            weir_sys::kernel::load(weir_sys::kernel::ProgType::Xdp, &program.to_bytes())
                .unwrap_or_else(|e| panic!("`{}`: the kernel refuses it: {e:?}", short(&joined)))
        });
        let mut ctx = vec![0u8; ProgType::Xdp.context_layout().size as usize];
        for _ in 0..PACKETS_PER_LIST / 2 {
            let pkt = packet(&mut rng, &pool);
            for cut in 0..=pkt.len() {
                let bytes = &pkt[..cut];
                let want = if expanded.run(bytes, cut as u32) != 0 {
                    u64::from(xdp_action::PASS)
                } else {
                    u64::from(xdp_action::DROP)
                };
                let at = || format!("`{}` on {pkt:02x?} cut at {cut}", short(&joined));
                let mut frame = bytes.to_vec();
                let input = Input::new().ctx(&mut ctx).packet(&mut frame);
                let got = interp.run(&mut interp.cache(), input);
                assert_eq!(got, Ok(want), "interp: {}", at());
                let mut frame = bytes.to_vec();
                let input = Input::new().ctx(&mut ctx).packet(&mut frame);
                let got = jit.run(&mut jit.cache(), input);
                assert_eq!(got, Ok(want), "jit: {}", at());
                if let Some(loaded) = loaded.as_ref().filter(|_| cut >= 14) {
                    let run = loaded.test_run(bytes, 1).expect("a test run");
                    assert_eq!(u64::from(run.retval), want, "kernel: {}", at());
                    in_kernel += 1;
                }
                cuts += 1;
            }
        }
    }
    (shared, cuts, in_kernel)
}

/// A pair list's lowering is exactly what the fuser makes of its terms lowered one by one (as
/// list terms: ports as libpcap's trees),
/// though the lowering skips the terms whose syntax the run already vouches for: lists
/// whose values meet the tests' own constants (ports 6, 17, 132, 2048, 8191, 34525; a host
/// whose address is a port's number), repeat one value while the other changes, change
/// kind (or stop being pairs) partway, in both list forms.
#[test]
fn pair_lists_skipped_by_syntax_lower_as_their_terms_fuse() {
    use weir_pflang::lower::fuse::{AndFuser, Fuser};
    let names = NameDb::builtin();
    let mut rng = SplitMix64::new(SEED ^ 0x5eed);
    let special = [6u32, 17, 132, 2048, 8191, 34525, 0, 1, 40, 80];
    let kinds: [fn(String, u32) -> String; 5] = [
        |h, p| format!("host {h} and port {p}"),
        |h, p| format!("src host {h} and tcp port {p}"),
        |h, p| format!("port {p} and host {h}"),
        |h, p| format!("ip dst host {h} and udp src port {p}"),
        |h, p| format!("host {h} and port {p} and port 9"),
    ];
    let mut skipped_lists = 0;
    for round in 0..60 {
        let n = rng.range_usize(MIN_TERMS, 6 * MIN_TERMS);
        let kind = rng.below_usize(4);
        let switch_at = rng.chance(30).then(|| rng.below_usize(n));
        let terms: Vec<String> = (0..n)
            .map(|i| {
                let p = if rng.chance(40) {
                    special[rng.below_usize(special.len())]
                } else {
                    rng.range(0, 65536) as u32
                };
                // Sometimes the host is the port's number as an address, or fixed.
                let h = match rng.below_usize(4) {
                    0 => p,
                    1 => 0x0a00_0001,
                    _ => rng.next_u64() as u32,
                };
                let host = ip(h.to_be_bytes());
                let k = match switch_at {
                    Some(at) if i >= at => (kind + 1 + round % 4) % kinds.len(),
                    _ => kind,
                };
                kinds[k](host, p)
            })
            .collect();
        let negated = rng.chance(50);
        let joined = joined(&terms, negated);
        let got = lowered(&joined, &names).pred;
        let each = terms.iter().map(|t| lowered_as_list_term(t, &names).pred);
        let want = if negated {
            let mut fuser = AndFuser::default();
            each.for_each(|t| fuser.push(Pred::not(t)));
            Pred::not(fuser.finish())
        } else {
            let mut fuser = Fuser::default();
            each.for_each(|t| fuser.push(t));
            Pred::or(fuser.finish().0)
        };
        assert_eq!(got, want, "`{}`", short(&joined));
        skipped_lists += usize::from(has_pairs(&got));
    }
    assert!(skipped_lists >= 30, "only {skipped_lists} of 60 lists fused");
}

/// A term the run vouches for by its syntax is refused as lowering would refuse it: the
/// syntax is only trusted for values the lowering takes.
#[test]
fn a_refused_term_in_a_vouched_run_is_still_refused() {
    let names = NameDb::builtin();
    let options = Options::new(LinkType::Ethernet);
    let mut terms: Vec<String> =
        (1..=20u32).map(|i| format!("not (host 10.0.{i}.{i} and port {i})")).collect();
    terms.push("not (host 10.0.99.1 and port 70000)".into());
    let err = weir_pflang::compile(&format!("not ({})", terms.join(" and ")), &options, &names)
        .expect_err("port 70000 is refused");
    assert_eq!(err.message, "illegal port number 70000 > 65535");
    terms.pop();
    terms.push("not (host 10.0.99 and port 7)".into());
    let net = lowered(&format!("not ({})", terms.join(" and ")), &names);
    let mut fuser = weir_pflang::lower::fuse::AndFuser::default();
    for t in &terms {
        fuser.push(lowered_as_list_term(t, &names).pred);
    }
    assert_eq!(net.pred, Pred::not(fuser.finish()), "a three-part address is a network");
}
