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
