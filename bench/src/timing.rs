//! Samples and what is reported of them: the median, and the interquartile range as a
//! share of the median, which says how much to trust a difference.

use std::time::{Duration, Instant};

/// Per-round figures (nanoseconds per packet, or per call).
#[derive(Debug, Clone, Default)]
pub struct Samples(pub Vec<f64>);

impl Samples {
    pub fn median(&self) -> f64 {
        quantile(&self.0, 0.5)
    }

    /// (q3 - q1) / median, in percent.
    pub fn spread_percent(&self) -> f64 {
        let m = self.median();
        if m <= 0.0 {
            return 0.0;
        }
        (quantile(&self.0, 0.75) - quantile(&self.0, 0.25)) / m * 100.0
    }

    /// The first and third quartiles.
    pub fn quartiles(&self) -> (f64, f64) {
        (quantile(&self.0, 0.25), quantile(&self.0, 0.75))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// Linear-interpolated quantile of unsorted values (NaN for none).
fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        1 => v[0],
        n => {
            let pos = q * (n - 1) as f64;
            let lo = pos.floor() as usize;
            let hi = pos.ceil() as usize;
            v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
        }
    }
}

/// How long a round of the hot workload should last, and how long to warm up: long enough
/// that the clock's resolution and one interrupt do not matter.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub rounds: usize,
    pub round_target: Duration,
    pub warm_up: Duration,
    /// Whether a round is one pass over the workload (stream) or as many passes as fill
    /// `round_target` (hot).
    pub single_pass: bool,
    /// No further round starts once one measurement has taken this long (a slow engine on
    /// a large filter would otherwise take many minutes); at least one round always runs.
    pub budget: Duration,
}

/// Runs `pass` (one pass over `packets` packets, returning the matches) for warm-up and
/// `plan.rounds` rounds; every pass must report `expected` matches. Returns ns per packet.
pub fn time_passes(
    plan: &Plan,
    packets: usize,
    expected: usize,
    mut pass: impl FnMut() -> usize,
) -> Result<Samples, String> {
    let check = |n: usize| {
        if n == expected {
            Ok(())
        } else {
            Err(format!("a pass matched {n} packets, not {expected}: the verdicts are unstable"))
        }
    };
    // Warm-up, also telling how long one pass takes.
    let start = Instant::now();
    let mut passes = 0u32;
    loop {
        check(pass())?;
        passes += 1;
        if start.elapsed() >= plan.warm_up || plan.single_pass {
            break;
        }
    }
    let per_pass = start.elapsed() / passes.max(1);
    let per_round = if plan.single_pass {
        1
    } else {
        (plan.round_target.as_nanos() / per_pass.as_nanos().max(1)).clamp(1, 1 << 20) as u32
    };
    let mut samples = Vec::with_capacity(plan.rounds);
    for _ in 0..plan.rounds {
        if !samples.is_empty() && start.elapsed() >= plan.budget {
            break;
        }
        let start = Instant::now();
        for _ in 0..per_round {
            check(std::hint::black_box(pass()))?;
        }
        let ns = start.elapsed().as_nanos() as f64;
        samples.push(ns / (f64::from(per_round) * packets.max(1) as f64));
    }
    Ok(Samples(samples))
}

pub use weir_sys::clock::thread_cpu;

/// One row of [`time_interleaved`]: a pass over a slice of packets (`T`: a packet, or a
/// packet with its wire length for a batch call), returning its matches.
pub type ChunkRow<'a, T = &'a [u8]> = &'a mut dyn FnMut(&[T]) -> usize;

/// Rows (each a pass over a slice of packets, returning its matches) timed side by side,
/// for ratios between them on a loaded machine: the packets are cut into `chunk`-packet
/// chunks and the rows take turns chunk by chunk (their order reversed every other turn),
/// so a burst of load lands on all rows alike instead of on whichever row's round it hit,
/// and each turn is timed by the thread's CPU time (time the thread spends preempted, which
/// on a loaded machine is most of the noise, is not counted).
/// Row `r` starts `r / rows` of the way into the packets, so that on a set larger than the
/// caches no row finds a chunk another row has just read (each chunk is read again only
/// after a whole set's worth of reads, as in a plain pass). A round covers the set once
/// per row, or as many times as fill `round_target` (of CPU time) when one cover is shorter. Every
/// round of every row must match `expected[r]` packets. Returns, per round, each row's
/// ns per packet.
pub fn time_interleaved<T>(
    rounds: usize,
    round_target: Duration,
    packets: &[T],
    chunk: usize,
    expected: &[usize],
    rows: &mut [ChunkRow<'_, T>],
) -> Result<Vec<Vec<f64>>, String> {
    // What reading the clock twice costs by itself (a system call), taken off every chunk's
    // time so that it does not shrink the ratios towards 1.
    let mut calls: Vec<f64> = (0..201)
        .map(|_| {
            let t = thread_cpu();
            (thread_cpu() - t).as_nanos() as f64
        })
        .collect();
    calls.sort_by(f64::total_cmp);
    let clock = calls[calls.len() / 2] as u128;
    let chunks: Vec<&[T]> = packets.chunks(chunk.max(1)).collect();
    let n = chunks.len().max(1);
    let k = rows.len().max(1);
    let mut cover = |repeat: usize, ns: &mut [u128], hits: &mut [usize]| {
        for step in 0..n * repeat {
            for turn in 0..k {
                let r = if step % 2 == 0 { turn } else { k - 1 - turn };
                let Some(c) = chunks.get((step + r * n / k) % n) else { continue };
                let t = thread_cpu();
                hits[r] += std::hint::black_box(rows[r](c));
                ns[r] += (thread_cpu() - t).as_nanos().saturating_sub(clock);
            }
        }
    };
    // Warm-up: one cover, which also tells how many covers fill a round.
    let (mut ns, mut hits) = (vec![0u128; k], vec![0usize; k]);
    cover(1, &mut ns, &mut hits);
    let once: u128 = ns.iter().sum::<u128>().max(1);
    let repeat = (round_target.as_nanos() / once).clamp(1, 1 << 16) as usize;
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (mut ns, mut hits) = (vec![0u128; k], vec![0usize; k]);
        cover(repeat, &mut ns, &mut hits);
        for (r, (&h, &e)) in hits.iter().zip(expected).enumerate() {
            if h != e * repeat {
                return Err(format!(
                    "row {r} matched {h} packets in {repeat} covers, not {} x {repeat}: the \
                     verdicts are unstable",
                    e
                ));
            }
        }
        let per = (repeat * packets.len()).max(1) as f64;
        out.push(ns.iter().map(|&t| t as f64 / per).collect());
    }
    Ok(out)
}

/// One figure per round of [`time_interleaved`]'s output: `f` of that round's rows (a row's
/// ns, or a ratio of two rows of the same round), to read as a median with quartiles.
pub fn per_round(rounds: &[Vec<f64>], f: impl Fn(&[f64]) -> f64) -> Samples {
    Samples(rounds.iter().map(|r| f(r)).collect())
}

/// What the per-round ratios of a row against its reference say, read against the A/A
/// row (the reference timed against a second copy of itself in the same rounds), which is
/// the ratio's noise floor on this machine at this moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The ratio's first quartile is above both 1.0 and the A/A row's third quartile.
    Slower,
    /// The ratio's third quartile is below both 1.0 and the A/A row's first quartile.
    Faster,
    /// Not told apart from the reference.
    Unresolved,
}

impl Verdict {
    /// `ratio`: per-round row / reference; `aa`: per-round reference-again / reference.
    pub fn of(ratio: &Samples, aa: &Samples) -> Verdict {
        Verdict::of_all(&[ratio], &[aa])
    }

    /// The same over several readings of one row (e.g. each program loaded twice): slower
    /// (faster) only when every ratio's quartiles lie above (below) 1.0 and every floor's.
    pub fn of_all(ratios: &[&Samples], floors: &[&Samples]) -> Verdict {
        let quartiles = |s: &&Samples| s.quartiles();
        let above = floors.iter().map(quartiles).fold(1.0f64, |m, (_, q3)| m.max(q3));
        let below = floors.iter().map(quartiles).fold(1.0f64, |m, (q1, _)| m.min(q1));
        if ratios.iter().map(quartiles).all(|(q1, _)| q1 > above) {
            Verdict::Slower
        } else if ratios.iter().map(quartiles).all(|(_, q3)| q3 < below) {
            Verdict::Faster
        } else {
            Verdict::Unresolved
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Verdict::Slower => "slower",
            Verdict::Faster => "faster",
            Verdict::Unresolved => "~",
        }
    }
}

/// The geometric mean of positive figures (ratios); the others are left out, NaN for none.
pub fn geomean(values: &[f64]) -> f64 {
    let logs: Vec<f64> = values.iter().filter(|v| **v > 0.0).map(|v| v.ln()).collect();
    if logs.is_empty() {
        return f64::NAN;
    }
    (logs.iter().sum::<f64>() / logs.len() as f64).exp()
}

/// Times `op` (one call) for up to `rounds` samples within `budget`; each sample repeats
/// the call enough to last ~200 µs. Returns per-call nanoseconds, and the first result.
pub fn time_calls<T>(rounds: usize, budget: Duration, mut op: impl FnMut() -> T) -> (Samples, T) {
    let start = Instant::now();
    let first = op();
    let once = start.elapsed().max(Duration::from_nanos(1));
    let inner = (200_000 / once.as_nanos()).clamp(1, 10_000) as u32;
    let mut samples = vec![once.as_nanos() as f64];
    // `rounds` warm samples besides the cold first one, while the budget lasts.
    while samples.len() <= rounds && start.elapsed() + once * inner < budget {
        let t = Instant::now();
        for _ in 0..inner {
            std::hint::black_box(op());
        }
        samples.push(t.elapsed().as_nanos() as f64 / f64::from(inner));
    }
    // The first, cold call stays only when it is all there is.
    if samples.len() > 1 {
        samples.remove(0);
    }
    (Samples(samples), first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_spreads() {
        let s = Samples(vec![5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(s.median(), 3.0);
        assert_eq!(s.spread_percent(), (4.0 - 2.0) / 3.0 * 100.0);
        assert_eq!(Samples(vec![1.0, 2.0]).median(), 1.5);
        assert!(Samples(vec![]).median().is_nan());
    }

    #[test]
    fn interleaved_rows_each_cover_every_packet_once_a_round() {
        // 10 packets in chunks of 3 (4 chunks, the last short), three rows, each recording
        // the packets it is given: every row sees each packet once per cover (a warm-up
        // cover, then two rounds of one), starting its own share of the way in.
        let data: Vec<[u8; 1]> = (0..10u8).map(|i| [i]).collect();
        let packets: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let seen: Vec<std::cell::RefCell<Vec<u8>>> = (0..3).map(|_| Default::default()).collect();
        let row = |r: usize| {
            let seen = &seen[r];
            move |p: &[&[u8]]| {
                seen.borrow_mut().extend(p.iter().map(|q| q[0]));
                p.iter().filter(|q| q[0] % 2 == 0).count()
            }
        };
        let run = |rounds: usize, expected: &[usize]| {
            let (mut a, mut b, mut c) = (row(0), row(1), row(2));
            time_interleaved(
                rounds,
                Duration::ZERO,
                &packets,
                3,
                expected,
                &mut [&mut a, &mut b, &mut c],
            )
        };
        let out = run(2, &[5, 5, 5]).unwrap();
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|r| r.len() == 3));
        for (r, s) in seen.iter().enumerate() {
            let s = s.borrow();
            let mut sorted = s.clone();
            sorted.sort_unstable();
            let want: Vec<u8> = (0..10u8).flat_map(|i| [i; 3]).collect();
            assert_eq!(sorted, want, "row {r}");
            // 4 chunks, 3 rows: rows start at chunks 0, 1 (4/3) and 2 (8/3).
            assert_eq!(s[0], [0, 3, 6][r], "row {r} starts at its own chunk");
        }
        let bad = run(1, &[5, 5, 4]);
        assert!(bad.unwrap_err().contains("unstable"));
    }

    #[test]
    fn per_round_figures_pair_rows_of_the_same_round() {
        // Row 0 is twice row 1 in every round while both move 4x between rounds: the
        // per-round ratio is 2 with no spread, the ratio of the two medians is not.
        let rounds = vec![vec![20.0, 10.0], vec![80.0, 40.0], vec![22.0, 11.0], vec![84.0, 42.0]];
        let ratio = per_round(&rounds, |r| r[0] / r[1]);
        assert_eq!(ratio.len(), 4);
        assert_eq!(ratio.median(), 2.0);
        assert_eq!(ratio.quartiles(), (2.0, 2.0));
        assert_eq!(per_round(&rounds, |r| r[1]).median(), (11.0 + 40.0) / 2.0);
    }

    #[test]
    fn verdicts_need_the_quartiles_past_one_and_past_the_floor() {
        let s = |v: &[f64]| Samples(v.to_vec());
        let floor = s(&[0.95, 0.98, 1.0, 1.02, 1.05]);
        // Every round 10% slower, the floor 5% wide: slower; and the mirror image.
        assert_eq!(Verdict::of(&s(&[1.08, 1.09, 1.1, 1.11, 1.12]), &floor), Verdict::Slower);
        assert_eq!(Verdict::of(&s(&[0.88, 0.89, 0.9, 0.91, 0.92]), &floor), Verdict::Faster);
        // The same ratios on a floor twice as wide are not told apart.
        let wide = s(&[0.8, 0.85, 1.0, 1.15, 1.2]);
        assert_eq!(Verdict::of(&s(&[1.08, 1.09, 1.1, 1.11, 1.12]), &wide), Verdict::Unresolved);
        assert_eq!(Verdict::of(&s(&[0.88, 0.89, 0.9, 0.91, 0.92]), &wide), Verdict::Unresolved);
        // A floor all below 1.0 does not make a ratio just over 1.0 slower, nor one above 1.0
        // faster.
        let low = s(&[0.7, 0.72, 0.74, 0.76, 0.78]);
        assert_eq!(Verdict::of(&s(&[0.99, 0.995, 1.0, 1.005, 1.01]), &low), Verdict::Unresolved);
        assert_eq!(Verdict::of(&s(&[1.01, 1.02, 1.03, 1.04, 1.05]), &low), Verdict::Slower);
        let high = s(&[1.3, 1.32, 1.34, 1.36, 1.38]);
        assert_eq!(Verdict::of(&s(&[0.95, 0.96, 0.97, 0.98, 0.99]), &high), Verdict::Faster);
        assert_eq!(Verdict::of(&s(&[1.01, 1.02, 1.03, 1.04, 1.05]), &high), Verdict::Unresolved);
        assert_eq!(Verdict::Slower.word(), "slower");
        assert_eq!(Verdict::Unresolved.word(), "~");
    }

    #[test]
    fn geomeans_leave_out_what_has_no_logarithm() {
        assert!((geomean(&[0.5, 2.0]) - 1.0).abs() < 1e-12);
        assert!((geomean(&[0.25, 1.0, f64::NAN, 0.0]) - 0.5).abs() < 1e-12);
        assert!(geomean(&[]).is_nan());
    }

    #[test]
    fn unstable_verdicts_are_an_error() {
        let plan = Plan {
            rounds: 3,
            round_target: Duration::from_micros(10),
            warm_up: Duration::from_micros(10),
            single_pass: false,
            budget: Duration::from_secs(10),
        };
        let mut flip = 0;
        let err = time_passes(&plan, 4, 2, || {
            flip += 1;
            if flip > 5 {
                1
            } else {
                2
            }
        })
        .unwrap_err();
        assert!(err.contains("unstable"));
        let ok = time_passes(&plan, 4, 2, || 2).unwrap();
        assert_eq!(ok.len(), 3);
        let tight = Plan { budget: Duration::ZERO, ..plan };
        assert_eq!(time_passes(&tight, 4, 2, || 2).unwrap().len(), 1, "one round at least");
    }
}
