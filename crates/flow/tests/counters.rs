//! Rule counters with two classifying threads while rules come and go: every live rule's
//! packets and bytes, summed over the counter shards, against what the packets' own
//! outcomes say (exact whatever version each batch saw), and against the linear
//! reference once the rules stand still. Rules are inserted with new line numbers, so a
//! rule whose cell held a deleted rule's counts shows them here.

use crate::gen::{keys_of, Gen, Template};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use weir_flow::{Classifier, FlowCache, Reference, Rule, RuleId, RuleSet, Work, BATCH};
use weir_testkit::corpus;

/// Per line: (packets, bytes).
type Hits = HashMap<usize, (u64, u64)>;

/// A rule of one of `templates` at `line`, its one action `pass` or `drop`: a packet it
/// matches is counted on it and on no other rule, the one its outcome names.
fn simple_rule(gen: &mut Gen<'_>, templates: &[Template], line: usize) -> Rule {
    let t = &templates[gen.rng.below_usize(templates.len())];
    let r = gen.rule(t, 0, 0, &["d0"], false);
    let action = if line % 2 == 0 { "drop" } else { "pass" };
    let text = format!("{} action {action}", &r[..r.find(" action ").unwrap()]);
    weir_flow::rule::parse_rule(&text, line).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// One pass over `frames` in batches, each batch on the snapshot of its start (with
/// `cache`, through it), each matched packet added to `hits` under its outcome's line.
fn pass(c: &Classifier, frames: &[Vec<u8>], mut cache: Option<&mut FlowCache>, hits: &mut Hits) {
    let mut out = Vec::with_capacity(BATCH);
    let mut bufs: Vec<Vec<u8>> = frames.to_vec();
    let mut mirrored: Vec<Vec<(u16, Vec<u8>)>> = vec![Vec::new(); BATCH];
    for (chunk, bchunk) in frames.chunks(BATCH).zip(bufs.chunks_mut(BATCH)) {
        out.clear();
        let mut works: Vec<Work<'_>> = bchunk
            .iter_mut()
            .zip(chunk)
            .zip(mirrored.iter_mut())
            .map(|((b, f), m)| {
                b.clone_from(f);
                Work::new(b, f.len() as u32, 0, 0, m)
            })
            .collect();
        let v = c.snapshot();
        match cache.as_deref_mut() {
            Some(cache) => c.process_batch_cached(&v, cache, &mut works, &mut out),
            None => c.process_batch(&v, &mut works, &mut out),
        }
        for (o, f) in out.iter().zip(chunk) {
            if let Some(line) = o.line() {
                let e = hits.entry(line).or_default();
                e.0 += 1;
                e.1 += f.len() as u64;
            }
        }
    }
}

/// The linear reference for `set`, after one pass over `frames` (its counters hold them).
fn reference_pass(set: &RuleSet, frames: &[Vec<u8>]) -> Reference {
    let reference = Reference::new(set);
    let mut mirrored = Vec::new();
    for f in frames {
        let mut data = f.clone();
        let mut w = Work::new(&mut data, f.len() as u32, 0, 0, &mut mirrored);
        reference.process(&mut w);
    }
    reference
}

/// The classifier's counters of its live rules, by line: (packets, bytes).
fn counted(c: &Classifier) -> Hits {
    c.counters().into_iter().map(|(line, p, b, _)| (line, (p, b))).collect()
}

#[test]
fn counters_summed_over_shards_agree_with_outcomes_and_the_reference_while_rules_change() {
    let frames: Vec<Vec<u8>> = corpus(0xc0c0, 400).into_iter().map(|p| p.data).collect();
    let keys = keys_of(&frames);
    let mut gen = Gen::new(0xce11, &keys);
    let templates: Vec<Template> = (0..6).map(|_| gen.template()).collect();
    let classifier = Classifier::new(&RuleSet::new());
    let (left, right) = frames.split_at(frames.len() / 2);
    let stop = AtomicBool::new(false);
    let mut live: Vec<(RuleId, Rule)> = Vec::new();
    let (mut inserted, mut deleted) = (0usize, 0usize);
    // Two classifying threads over their halves, one through a flow cache, while rules
    // go in (6,000: the counter tables grow past their first chunk, so cells are found both
    // ways, and the multi-subtable batch touches them first) and out (a third).
    let (seen, passes) = std::thread::scope(|s| {
        let worker = |half: &'static str| {
            let (c, stop) = (&classifier, &stop);
            let frames = if half == "left" { left } else { right };
            move || {
                let mut hits = Hits::new();
                let mut cache = FlowCache::new(256);
                let mut passes = 0;
                while !stop.load(Ordering::Relaxed) || passes < 2 {
                    let cache = (half == "right").then_some(&mut cache);
                    pass(c, frames, cache, &mut hits);
                    passes += 1;
                }
                (hits, passes)
            }
        };
        let a = s.spawn(worker("left"));
        let b = s.spawn(worker("right"));
        for line in 1_000..7_000 {
            let r = simple_rule(&mut gen, &templates, line);
            live.push((classifier.insert(&r).unwrap(), r));
            inserted += 1;
            if gen.rng.chance(35) {
                let (id, _) = live.remove(gen.rng.below_usize(live.len()));
                assert!(classifier.delete(id));
                deleted += 1;
            }
            if line % 1_500 == 0 {
                classifier.rerank();
            }
        }
        stop.store(true, Ordering::Relaxed);
        let (mut seen, pa) = a.join().unwrap();
        let (hb, pb) = b.join().unwrap();
        for (line, (p, bytes)) in hb {
            let e = seen.entry(line).or_default();
            e.0 += p;
            e.1 += bytes;
        }
        (seen, pa + pb)
    });
    let now = counted(&classifier);
    assert_eq!(now.len(), live.len());
    let bytes = classifier.footprint().counter_bytes;
    assert!(bytes >= 2 * 3 * FIRST_CHUNK * 16, "{bytes} counter bytes: not past the first chunk");
    let mut matched = 0;
    for (line, got) in &now {
        let want = seen.get(line).copied().unwrap_or_default();
        assert_eq!(*got, want, "line {line}: counters (packets, bytes) against the outcomes");
        matched += want.0;
    }
    assert!(matched > 1_000, "{matched} packets counted on live rules over {passes} passes");

    // The rules standing still: one more pass on each half against the reference over the
    // live rules (in insertion order, their priorities as given).
    let before = now;
    std::thread::scope(|s| {
        s.spawn(|| pass(&classifier, left, None, &mut Hits::new()));
        s.spawn(|| pass(&classifier, right, None, &mut Hits::new()));
    });
    let after = counted(&classifier);
    let mut set = RuleSet::new();
    for (_, r) in &live {
        set.push(r.clone()).unwrap();
    }
    let reference = reference_pass(&set, &frames);
    let mut quiet = 0;
    for (line, p, b, _) in reference.counters() {
        let (a, z) = (before[&line], after[&line]);
        assert_eq!((z.0 - a.0, z.1 - a.1), (p, b), "line {line}: one pass against the reference");
        quiet += p;
    }
    assert!(quiet > 50, "{quiet} packets matched in the quiet pass");
    println!(
        "{inserted} inserted, {deleted} deleted, {passes} passes while they changed, {matched} counted on live rules, {quiet} in the quiet pass"
    );
}

/// Cells in the counter tables' first chunk (engine.rs's `FIRST_CHUNK`): the batches find
/// these by one compare, later ones through the chunks' directory.
const FIRST_CHUNK: usize = 4096;

/// A rule inserted into a classifier whose counter tables have grown (its cell past the
/// first chunk, found through the chunks' directory, and the multi-subtable batch touching
/// the cells first) counts from its first packet (each pass takes the published version; a
/// failure says whether the inserts published a new one), and deleted rules' cells, reused,
/// start at zero: rounds
/// of 100 rules in and out, each rule counted once for each of its packets.
#[test]
fn rules_inserted_after_the_tables_grew_count_from_their_first_packet() {
    let frames: Vec<Vec<u8>> = corpus(0x51de, 200).into_iter().map(|p| p.data).collect();
    let keys = keys_of(&frames);
    let mut gen = Gen::new(0x9e3, &keys);
    let templates: Vec<Template> = (0..3).map(|_| gen.template()).collect();
    // Rules that take the first two chunks' cells (1 and 2 first chunks) but the last 350
    // and match nothing here (an EtherType the corpus does not carry), ranked after every
    // rule the rounds insert: without reuse, the rounds' 1,200 rules would need a third.
    let mut fill = RuleSet::new();
    for i in 0..3 * FIRST_CHUNK - 350 {
        let text = format!(
            "prio 60000 protocol 0x88b5 flower dst_mac 02:00:00:00:{:02x}:{:02x} action drop",
            i >> 8,
            i & 255
        );
        fill.push(weir_flow::rule::parse_rule(&text, i + 1).unwrap()).unwrap();
    }
    let classifier = Classifier::new(&fill);
    let mut line = 100_000;
    let mut cells_made = Vec::new();
    for round in 0..12 {
        let v = classifier.snapshot();
        let mut ids = Vec::new();
        let mut set = RuleSet::new();
        for _ in 0..100 {
            let r = simple_rule(&mut gen, &templates, line);
            line += 1;
            ids.push(classifier.insert(&r).unwrap());
            set.push(r).unwrap();
        }
        // The version from before the inserts, when it still is the published one.
        let same = Arc::ptr_eq(&v, &classifier.snapshot());
        let mut hits = Hits::new();
        pass(&classifier, &frames, None, &mut hits);
        let reference = reference_pass(&set, &frames);
        let want: Hits = reference.counters().into_iter().map(|(l, p, b, _)| (l, (p, b))).collect();
        let got: Hits = counted(&classifier).into_iter().filter(|(l, _)| *l >= 100_000).collect();
        assert_eq!(got, want, "round {round} (old version published: {same})");
        for (l, h) in &hits {
            assert_eq!(want.get(l), Some(h), "round {round}, line {l}: outcomes");
        }
        for id in ids {
            assert!(classifier.delete(id));
        }
        cells_made.push(classifier.footprint().counter_bytes);
    }
    // Cells are reused: the tables stop growing (no third chunk) although 1,200 rules went in.
    assert_eq!(cells_made.first(), cells_made.last(), "counter bytes by round: {cells_made:?}");
    println!("counter bytes by round: {cells_made:?}");
}
