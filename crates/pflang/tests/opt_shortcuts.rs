//! The optimizer's fixed-point shortcuts on real filters: every filter of the bench lists
//! (bench/filters.txt, bench/everyday.txt) and the golden cases' kind of everyday
//! expressions, lowered as the facade lowers them, optimizes to the same tree with and
//! without the shortcuts (`optimize_without_shortcuts` runs every pass in every round), and
//! optimizing the result again gives it back (the loop's fixed point is one).

use std::path::PathBuf;

use weir_filter::opt;
use weir_pflang::names::NameDb;
use weir_pflang::{LinkType, Options};

/// The expressions of a bench list (`#` comments and `@hosts N` lines skipped: a host set
/// is one `In` test after the first round, and the list's small filters are the point).
fn bench_list(name: &str) -> Vec<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('@'))
        .map(String::from)
        .collect()
}

#[test]
fn shortcuts_change_no_result_and_optimize_is_a_fixed_point() {
    let names = NameDb::builtin();
    let mut exprs = bench_list("filters.txt");
    exprs.extend(bench_list("everyday.txt"));
    exprs.push(
        (1..=40).map(|i| format!("host 10.0.{}.{}", i / 7, i)).collect::<Vec<_>>().join(" or "),
    );
    let mut checked = 0;
    for link in [LinkType::Ethernet, LinkType::LinuxSll, LinkType::Raw] {
        let options = Options::new(link);
        for expr in &exprs {
            // Some filters do not apply to some links (`ether host` on raw IP): skipped.
            let Ok(f) = weir_pflang::compile(expr, &options, &names) else { continue };
            let fast = opt::optimize(&f);
            let full = opt::optimize_without_shortcuts(&f);
            assert_eq!(fast, full, "{} `{expr}`: the shortcuts changed the result", link.name());
            let again = opt::optimize(&fast);
            assert_eq!(again, fast, "{} `{expr}`: optimizing twice changed it", link.name());
            checked += 1;
        }
    }
    println!("{checked} (link, filter) pairs: same tree with and without shortcuts, idempotent");
    assert!(checked >= 100, "only {checked} filters compiled");
}

/// How often `optimize` can skip a round's second `decide` on real filters (the first walk
/// left its input unchanged and reported no choice a guard could turn), and that where it
/// can, walking the guarded tree again gives it back (bench/records/2026-11-30-compile-11.txt).
#[test]
fn the_second_walk_skip_is_sound_and_fires_on_real_filters() {
    let names = NameDb::builtin();
    let mut exprs = bench_list("filters.txt");
    exprs.extend(bench_list("everyday.txt"));
    let mut tally = opt::SkipTally::default();
    let mut pairs = 0;
    for link in [LinkType::Ethernet, LinkType::LinuxSll, LinkType::Raw] {
        let options = Options::new(link);
        for expr in &exprs {
            let Ok(f) = weir_pflang::compile(expr, &options, &names) else { continue };
            pairs += 1;
            if let Err(e) = tally.add(&f) {
                panic!("{} `{expr}`: the skipped walk changes it\n  {e}", link.name());
            }
        }
    }
    println!("{pairs} (link, filter) pairs: {tally}");
    assert!(pairs >= 100, "only {pairs} filters compiled");
    // The skip is for these filters: most people write small ones the first walk leaves as
    // they are (88 of 184 pairs skip when this was written).
    assert!(tally.skipped * 4 > pairs, "the skip fired on only {} of {pairs} pairs", tally.skipped);
    // The optimizer's pre-test (`decide::likely_changes`: not worth recording) must not cost
    // these filters their skip.
    assert!(tally.missed * 20 <= tally.skipped, "the pre-test lost {} skips", tally.missed);
}
