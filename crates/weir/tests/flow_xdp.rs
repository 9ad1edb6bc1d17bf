//! The flow datapath's XDP program (`weir_flow::xdp`, written by `weir::flow_xdp`) against
//! the linear reference: random rule sets (those of weir-flow's generator the XDP
//! datapath takes) × the corpus, the object run by weir's runtime on the interpreter and
//! the JIT and, as root, in the kernel under `BPF_PROG_TEST_RUN`; verdicts per packet and
//! every rule's counters (packets, bytes) at the end.

#[allow(dead_code)]
#[path = "../../flow/tests/gen.rs"]
mod gen;

use gen::{keys_of, Gen};
use weir::flow::xdp::{self, XdpOptions};
use weir::flow::{Reference, RuleSet, Verdict as FlowVerdict, Work};
use weir::{Engine, Object};
use weir_testkit::{corpus, kernel_object, SplitMix64};

fn frames(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut rng = SplitMix64::new(seed ^ 0xf10f);
    let mut out: Vec<Vec<u8>> = corpus(seed, n).into_iter().map(|p| p.data).collect();
    for i in 0..n / 4 {
        let cut = rng.below_usize(out[i].len() + 1);
        let c = out[i][..cut].to_vec();
        out.push(c);
    }
    out
}

/// The XDP action the reference's outcome stands for (a redirect finds its device).
fn xdp_of(v: FlowVerdict) -> u64 {
    match v {
        FlowVerdict::Pass => 2,
        FlowVerdict::Drop => 1,
        FlowVerdict::Redirect(_) => 4,
    }
}

/// Per packet the XDP action and the bytes the actions left, and per rule (file order)
/// (packets, bytes).
type Expected = (Vec<(u64, Vec<u8>)>, Vec<(u64, u64)>);

fn reference(set: &RuleSet, frames: &[Vec<u8>]) -> Expected {
    let r = Reference::new(set);
    // Packets come in on `lo` (the reference numbers `indev` names as the set lists them).
    let lo = set.indevs().iter().position(|d| d == "lo").map_or(0, |i| i as u32 + 1);
    let verdicts = frames
        .iter()
        .map(|f| {
            let mut data = f.clone();
            let mut mirrored = Vec::new();
            let mut w = Work::new(&mut data, f.len() as u32, lo, 0, &mut mirrored);
            let v = xdp_of(r.process(&mut w).verdict());
            (v, data)
        })
        .collect();
    (verdicts, r.counters().into_iter().map(|(_, p, b, _)| (p, b)).collect())
}

/// The devices of the test's `indev` rules: `lo` is the interface weir's runtime and the
/// kernel's test run both give the program (`ingress_ifindex` 1), `wfx9` one packets
/// never come in on.
fn test_ifindex(name: &str) -> Option<u32> {
    match name {
        "lo" => Some(1),
        "wfx9" => Some(9),
        _ => None,
    }
}

fn compile(set: &RuleSet) -> Result<xdp::XdpDatapath, weir::flow::RuleError> {
    xdp::compile_with(set, XdpOptions::default(), &test_ifindex)
}

/// The rules of `text` the XDP datapath takes, as one rule set.
fn xdp_rules(text: &str) -> RuleSet {
    let kept: Vec<&str> =
        text.lines().filter(|l| RuleSet::parse(l).is_ok_and(|one| compile(&one).is_ok())).collect();
    RuleSet::parse(&kept.join("\n")).expect("kept rules parse together")
}

/// (packets, bytes) of each rule from a counters map's per-rule slots; `value` reads a
/// slot's 16-byte counters summed over CPUs.
fn counters_of(slots: &[Option<u32>], value: impl Fn(u32) -> (u64, u64)) -> Vec<(u64, u64)> {
    slots.iter().map(|s| s.map_or((0, 0), &value)).collect()
}

fn sum_cpus(bytes: &[u8], stride: usize) -> (u64, u64) {
    let word = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap());
    (0..bytes.len() / stride)
        .fold((0, 0), |(p, b), c| (p + word(c * stride), b + word(c * stride + 8)))
}

#[test]
fn xdp_datapath_agrees_with_the_reference() {
    let frames = frames(11, 300);
    let long: Vec<Vec<u8>> = frames.iter().filter(|f| f.len() >= 14).cloned().collect();
    let keys = keys_of(&frames);
    let mut gen = Gen::new(0xfd9, &keys);
    let kernel = match weir_sys::kernel::available() {
        Ok(()) => true,
        Err(reason) => {
            println!("SKIPPED: xdp_datapath_agrees_with_the_reference (kernel part): {reason}");
            false
        }
    };
    let (mut sets, mut matched, mut kernel_sets) = (0usize, 0usize, 0usize);
    // Packets the reference passed, dropped and redirected.
    let mut seen = [0usize; 5];
    // Sets with chains emitted with the goto loop and without (all gotos forward).
    let mut modes = [0usize; 2];
    // Packets whose bytes the reference's actions changed, and sets with edit lists.
    let (mut edited, mut edit_sets) = (0usize, 0usize);
    // Rules with a port range (exact entries, one a port).
    let (mut ranged, mut range_hits) = (0usize, 0usize);
    // Rules with `indev`, and their hits (only `lo` ones can hit).
    let (mut indev_rules, mut indev_hits) = (0usize, 0usize);
    // Rules with `pedit` (Ethernet fields), and their hits.
    let (mut pedit_rules, mut pedit_hits) = (0usize, 0usize);
    // Rules with `csum iph` (after IPv4 edits), and their hits.
    let (mut csum_rules, mut csum_hits) = (0usize, 0usize);
    // Rules with pedit of tcp/udp fields or IPv6 bit fields, with csum tcp/udp/icmp.
    let (mut l4_rules, mut l4_hits, mut l4csum_rules, mut l4csum_hits) = (0, 0, 0, 0);
    for round in 0..40u64 {
        let rules = 1 + gen.rng.below_usize(if round % 2 == 0 { 20 } else { 150 });
        let masks = 1 + gen.rng.below_usize(8);
        let chains = if round % 3 == 0 { 0 } else { 1 + gen.rng.below(2) as u32 };
        let mut text = gen.rule_set(rules, masks, chains);
        // A last rule of chain 0 that edits what no other rule took (the generator's
        // edits need a tagged packet or a match; these meet most packets).
        // Wide port ranges (exact entries, hundreds a rule) most TCP/UDP
        // packets of the corpus meet.
        text += "prio 59990 protocol ip flower ip_proto tcp dst_port 1-200 action drop\n\
                 prio 59991 protocol ipv6 flower ip_proto udp src_port 1-300 action pass\n";
        let id = gen.rng.below(4096);
        text += &match round % 4 {
            0 => format!("prio 60000 protocol all flower action vlan push id {id} priority {} protocol 802.1ad pipe action pass\n", gen.rng.below(8)),
            1 => "prio 60000 protocol all flower action vlan pop pipe action vlan pop pipe action pass\n".to_string(),
            2 => format!("prio 60000 protocol all flower action vlan push id {id} pipe action vlan modify id 5 priority 6 pipe action mirred egress redirect dev d0\n"),
            // pedit on Ethernet fields: set, and add with carries inside a word (the
            // source's low bytes + 0x01ff, its top half + 0x0001) across frames of any
            // length (a field past the end is left alone).
            _ => format!("prio 60000 protocol all flower action pedit ex munge eth dst set 02:00:5e:00:53:{:02x} munge eth src add 00:01:00:00:01:ff munge eth type add 0x0101 pipe action pass\n", id % 256),
        };
        // pedit on network-header fields (the header after the tags, found again after
        // each munge), with and without VLAN edits before them.
        text += &match round % 3 {
            0 => "prio 59993 protocol ip flower ip_proto udp action pedit ex munge ip ttl add 0xff munge ip dst set 192.0.2.7 munge ip tos add 3 pipe action csum iph pipe action drop\n".to_string(),
            1 => "prio 59993 protocol ipv6 flower action vlan push id 7 pipe action pedit ex munge ip6 hoplimit set 9 munge ip6 src add ::1:ffff munge ip6 payload_len add 1 pipe action pass\n".to_string(),
            _ => "prio 59993 protocol all flower action pedit ex munge eth type set 0x8100 munge ip ttl set 1 munge ip protocol add 1 pipe action csum ip4h\n".to_string(),
        };
        // pedit of transport fields (at the transport header as the engine finds it,
        // whatever the protocol) and of IPv6's bit fields, and the transport checksums
        // recomputed over the whole segment: before the wide ranges, so that they meet
        // most TCP, UDP and ICMP packets of their IP version.
        text += match round % 4 {
            0 => "prio 59985 protocol ip flower ip_proto tcp action pedit ex munge tcp dport set 8080 munge tcp flags add 0x11 munge tcp sport add 0x0101 pipe action csum iph and tcp pipe action pass\n",
            1 => "prio 59985 protocol ipv6 flower action pedit ex munge udp sport set 53 munge ip6 traffic_class add 0x81 munge ip6 flow_lbl set 0xabcde pipe action csum udp and tcp and icmp pipe action drop\n",
            2 => "prio 59985 protocol ipv6 flower action pedit ex munge ip6 flow_lbl add 0xfffff munge ip6 traffic_class set 0x3c munge tcp dport add 0xffff pipe action csum icmp and udp and tcp pipe action mirred egress redirect dev d0\n",
            _ => "prio 59985 protocol ip flower ip_proto udp action pedit ex munge udp dport set 7 munge udp sport add 0xff01 pipe action csum udp pipe action pass\n\
                  prio 59986 protocol ip flower action pedit ex munge ip ttl set 3 pipe action csum ip4h and icmp and tcp pipe action pass\n",
        };
        // indev: rules on the device packets come in on and on one they do not.
        if round % 2 == 1 {
            text = format!(
                "prio 3 protocol ip flower indev wfx9 action drop\n\
                 prio 4 protocol ipv6 flower indev lo ip_proto icmpv6 action drop\n{text}\
                 prio 59992 protocol all flower indev lo dst_mac 33:33:00:00:00:00/ff:ff:00:00:00:00 action mirred egress redirect dev d1\n"
            );
        }
        let set = xdp_rules(&text);
        let dp = match compile(&set) {
            Ok(dp) => dp,
            Err(e) => panic!("{e}\n{set}"),
        };
        let bytes = weir::flow_xdp::object(&dp).unwrap();
        if dp.layout.chains.len() > 1 {
            modes[usize::from(dp.layout.forward)] += 1;
        }
        let (want, want_counters) = reference(&set, &frames);
        matched += want_counters.iter().map(|c| c.0).sum::<u64>() as usize;
        for (i, (v, out)) in want.iter().enumerate() {
            seen[*v as usize] += 1;
            edited += usize::from(*out != frames[i]);
        }
        edit_sets += usize::from(!dp.layout.edits.is_empty());
        for (rule, hits) in set.rules.iter().zip(&want_counters) {
            if rule.actions.iter().any(|a| matches!(a.kind, weir::flow::rule::ActionKind::Pedit(_)))
            {
                pedit_rules += 1;
                pedit_hits += hits.0 as usize;
            }
            if rule.actions.iter().any(|a| matches!(a.kind, weir::flow::rule::ActionKind::Csum(_)))
            {
                csum_rules += 1;
                csum_hits += hits.0 as usize;
            }
            use weir::flow::rule::{csum, ActionKind, PeditField as F};
            if rule.actions.iter().any(|a| match &a.kind {
                ActionKind::Pedit(ms) => ms.iter().any(|m| {
                    matches!(
                        m.field,
                        F::TcpSport
                            | F::TcpDport
                            | F::TcpFlags
                            | F::UdpSport
                            | F::UdpDport
                            | F::Ip6TrafficClass
                            | F::Ip6FlowLbl
                    )
                }),
                _ => false,
            }) {
                l4_rules += 1;
                l4_hits += hits.0 as usize;
            }
            if rule
                .actions
                .iter()
                .any(|a| matches!(a.kind, ActionKind::Csum(t) if t & !csum::IPV4_HEADER != 0))
            {
                l4csum_rules += 1;
                l4csum_hits += hits.0 as usize;
            }
            if rule.matches.iter().any(|m| matches!(m, weir::flow::Match::Indev(_))) {
                indev_rules += 1;
                indev_hits += hits.0 as usize;
            }
        }
        for (c, hits) in set.compile().iter().zip(&want_counters) {
            if c.src_range.is_some() || c.dst_range.is_some() {
                ranged += 1;
                range_hits += hits.0 as usize;
            }
        }
        for engine in [Engine::Interp, Engine::Jit] {
            let obj = Object::open(&bytes).unwrap();
            // Every device is "there" (weir's devmap takes any ifindex).
            for i in 0..dp.layout.devices.len() as u32 {
                obj.maps()[2].update_all(&i.to_ne_bytes(), &1u32.to_ne_bytes(), 0).unwrap();
            }
            let entry = obj.entry(None, None).unwrap();
            let mut loaded = obj
                .load_with(entry, Some(engine), 0, true)
                .unwrap_or_else(|e| panic!("{engine:?}: {e}\n{set}"));
            loaded.keep_packets(true);
            for (i, f) in frames.iter().enumerate() {
                let got = loaded.run(f).unwrap_or_else(|t| panic!("{engine:?} trap {t:?}"));
                assert_eq!(
                    (got.ret, &got.packet),
                    (want[i].0, &want[i].1),
                    "{engine:?}: packet {i} ({} bytes {:02x?})\nrules:\n{set}",
                    f.len(),
                    f
                );
            }
            let counters = counters_of(&dp.slots, |slot| {
                sum_cpus(&obj.maps()[1].lookup_all(&slot.to_ne_bytes()).unwrap(), 16)
            });
            assert_eq!(counters, want_counters, "{engine:?}: counters\nrules:\n{set}");
        }
        if kernel {
            let (want, want_counters) = reference(&set, &long);
            let specs = dp.program.maps();
            let maps = kernel_object::create_maps(specs.iter().map(|s| (s, None))).unwrap();
            for (name, key, value) in dp.entries.iter().filter(|e| e.0 != xdp::DEVS_MAP) {
                let i = specs.iter().position(|m| &m.name == name).unwrap();
                maps[i].update(Some(key), value, 0).unwrap();
            }
            for i in 0..dp.layout.devices.len() as u32 {
                maps[2].update(Some(&i.to_ne_bytes()), &1u32.to_ne_bytes(), 0).unwrap();
            }
            let prog = kernel_object::load(&dp.program, &maps)
                .unwrap_or_else(|e| panic!("{e}\nrules:\n{set}"));
            for (i, f) in long.iter().enumerate() {
                let (run, out) = prog.test_run_out(f, f.len() + 64).unwrap();
                assert_eq!(
                    (u64::from(run.retval), &out),
                    (want[i].0, &want[i].1),
                    "kernel: packet {i} {f:02x?}\nrules:\n{set}"
                );
            }
            let stride = 16;
            let counters = counters_of(&dp.slots, |slot| {
                let mut v = vec![0u8; maps[1].value_len()];
                maps[1].lookup(Some(&slot.to_ne_bytes()), &mut v).unwrap();
                sum_cpus(&v, stride)
            });
            assert_eq!(counters, want_counters, "kernel: counters\nrules:\n{set}");
            kernel_sets += 1;
        }
        sets += 1;
    }
    // The sets must decide packets every way, or agreeing would test little.
    assert!(matched > sets * 10, "only {matched} rule hits over {sets} sets");
    assert!(seen[1] > 100 && seen[2] > 100 && seen[4] > 20, "pass/drop/redirect: {seen:?}");
    assert!(modes[0] > 0 && modes[1] > 0, "loop / forward sets: {modes:?}");
    assert!(ranged > 20 && range_hits > 20, "{ranged} rules with port ranges, {range_hits} hits");
    assert!(pedit_rules >= 10 && pedit_hits > 500, "{pedit_rules} pedit rules, {pedit_hits} hits");
    assert!(csum_rules >= 20 && csum_hits > 100, "{csum_rules} csum rules, {csum_hits} hits");
    assert!(
        l4_rules >= 30 && l4_hits > 500,
        "{l4_rules} tcp/udp/ip6-bits pedit rules, {l4_hits} hits"
    );
    assert!(
        l4csum_rules >= 30 && l4csum_hits > 500,
        "{l4csum_rules} csum tcp/udp/icmp rules, {l4csum_hits} hits"
    );
    assert!(indev_rules >= 40 && indev_hits > 20, "{indev_rules} indev rules, {indev_hits} hits");
    assert!(
        edit_sets > 20 && edited > 1000,
        "{edit_sets} sets with edits, {edited} packets edited"
    );
    println!(
        "{sets} rule sets x {} packets on interp and JIT ({kernel_sets} in the kernel): {matched} rule hits; chains with a loop {}, forward only {}; {edit_sets} sets with packet edits, {edited} packets edited; {ranged} rules with port ranges ({range_hits} hits); {indev_rules} indev rules ({indev_hits} hits); {pedit_rules} pedit rules ({pedit_hits} hits); {csum_rules} csum rules ({csum_hits} hits); {l4_rules} tcp/udp/ip6-bits pedit rules ({l4_hits} hits); {l4csum_rules} csum tcp/udp/icmp rules ({l4csum_hits} hits)",
        frames.len(),
        modes[0],
        modes[1]
    );
}

/// Rules the XDP datapath cannot run are refused with the line and the keyword.
#[test]
fn xdp_refuses_what_it_cannot_do_by_line_and_keyword() {
    for (rule, keyword) in [
        ("protocol ip flower indev wfxnosuchdev action drop", "wfxnosuchdev"),
        ("protocol ip flower ip_proto tcp dst_port 1-65535 action drop", "dst_port"),
        ("protocol ip flower ip_proto udp src_port 1-100 dst_port 1-100 action drop", "src_port"),
        ("protocol all flower action mirred egress mirror dev d0", "mirror"),
        ("protocol all flower action vlan pop pipe action goto chain 1", "goto"),
        ("protocol all flower action vlan push id 5 pipe action reclassify", "reclassify"),
        ("protocol all flower action skbedit mark 1", "skbedit"),
        ("protocol all flower action continue", "continue"),
    ] {
        let text = format!("prio 1 protocol all flower action pass\n\nprio 2 {rule}\n");
        let set = RuleSet::parse(&text).unwrap();
        let e = compile(&set).unwrap_err();
        assert_eq!(e.line, 3, "{rule}: {e}");
        assert!(e.message.contains(&format!("\"{keyword}\"")), "{rule}: {e}");
    }
}

/// An update is atomic for the packets (root; SKIPPED otherwise): while one thread
/// switches the kernel's tables between two rule sets, each of which decides a packet
/// (A drops it through one mask, B redirects it through another), test runs of that
/// packet never see neither rule (a pass: half an update) and see both outcomes.
#[test]
fn updates_never_show_a_half_applied_table() {
    if let Err(reason) = weir_sys::kernel::available() {
        println!("SKIPPED: updates_never_show_a_half_applied_table: {reason}");
        return;
    }
    // Both masks in the program; each set has one of them decide the packet, and no rule
    // of one set decides it in the other: written in place, rule by rule, a table would
    // pass the packet between the delete of one rule and the insert of the other.
    let both = "prio 1 protocol ip flower dst_ip 10.1.2.3/32 action drop\n\
                prio 2 protocol ip flower ip_proto udp action mirred egress redirect dev lo\n";
    let a = RuleSet::parse(
        "prio 1 protocol ip flower dst_ip 10.1.2.3/32 action drop\n\
         prio 3 protocol ip flower ip_proto tcp action mirred egress redirect dev lo\n",
    )
    .unwrap();
    let b = RuleSet::parse(
        "prio 1 protocol ip flower dst_ip 10.9.9.9/32 action drop\n\
         prio 2 protocol ip flower ip_proto udp action mirred egress redirect dev lo\n",
    )
    .unwrap();
    let dp = xdp::compile(&RuleSet::parse(both).unwrap(), XdpOptions::default()).unwrap();
    let specs = dp.program.maps();
    let kmaps = kernel_object::create_maps(specs.iter().map(|s| (s, None))).unwrap();
    let prog = kernel_object::load(&dp.program, &kmaps).unwrap();
    let n = dp.layout.subtables.len();
    let mut it = kmaps.into_iter();
    let (config, counters, devs) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
    let t0: Vec<_> = it.by_ref().take(n).collect();
    let t1: Vec<_> = it.collect();
    let maps = weir::flow_xdp::PinnedMaps { config, counters, devs, tables: [t0, t1] };
    weir::flow_xdp::update_maps(&dp.layout, &a, &maps).unwrap();
    // An IPv4/UDP frame to 10.1.2.3: A drops it (line 1), B redirects it (its line 2).
    let mut frame = vec![0u8; 42];
    frame[12] = 0x08;
    frame[14] = 0x45;
    frame[23] = 17;
    frame[30..34].copy_from_slice(&[10, 1, 2, 3]);
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let stop = AtomicBool::new(false);
    let runs = AtomicUsize::new(0);
    let mut seen = [0usize; 5];
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..300 {
                let set = if i % 2 == 0 { &b } else { &a };
                weir::flow_xdp::update_maps(&dp.layout, set, &maps).unwrap();
                // Let at least one whole test run start and end under this table before
                // the next flip: on a busy machine the flips could otherwise all happen
                // while the test-run thread waits for a CPU (seen in CI: every run saw A).
                // Bounded, so a dead test-run thread cannot hang the test.
                let start = runs.load(Ordering::SeqCst);
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
                while runs.load(Ordering::SeqCst) < start + 2
                    && std::time::Instant::now() < deadline
                {
                    std::thread::yield_now();
                }
            }
            stop.store(true, Ordering::SeqCst);
        });
        while !stop.load(Ordering::SeqCst) {
            let r = prog.test_run(&frame, 1).unwrap().retval as usize;
            seen[r.min(4)] += 1;
            runs.fetch_add(1, Ordering::SeqCst);
        }
    });
    assert_eq!(seen[2] + seen[0] + seen[3], 0, "a half-applied table was seen: {seen:?}");
    assert!(seen[1] > 0 && seen[4] > 0, "both tables should have been seen: {seen:?}");
    println!("test runs during 300 updates: {} drops (A), {} redirects (B)", seen[1], seen[4]);
}
