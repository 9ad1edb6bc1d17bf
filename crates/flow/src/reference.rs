//! The linear reference classifier: every rule of the chain in priority order (ties in
//! file order), the first that matches wins. Slow and obviously right; the oracle the
//! tuple-space classifier is tested against.

use crate::engine::{self, CellAlloc, Counters, Installed, Interner, Outcome, Work};
use crate::key::{extract, Key, Need};
use crate::rule::{Compiled, RuleSet};

pub struct Reference {
    /// Sorted by (chain, prio, seq).
    rules: Vec<(Installed, Compiled)>,
    counters: Counters,
    devices: Vec<String>,
    indevs: Vec<String>,
}

impl Reference {
    pub fn new(set: &RuleSet) -> Reference {
        let devices = set.devices();
        let compiled = set.compile();
        let mut interner = Interner::default();
        let counters = Counters::default();
        let mut cells = CellAlloc::default();
        let mut rules: Vec<(Installed, Compiled)> = set
            .rules
            .iter()
            .zip(compiled)
            .enumerate()
            .map(|(i, (r, c))| {
                let mask = interner.mask_id(&c.mask);
                let cell = cells.take(&counters);
                (interner.install(r, set.prios[i], i as u64, &c, &devices, mask, cell), c)
            })
            .collect();
        rules.sort_by_key(|(r, _)| (r.chain, r.prio, r.seq));
        Reference { rules, counters, devices, indevs: set.indevs() }
    }

    pub fn devices(&self) -> &[String] {
        &self.devices
    }

    /// The id `indev` matches give the named interface (0: none of the rules').
    pub fn indev_id(&self, name: &str) -> u32 {
        self.indevs.iter().position(|d| d == name).map_or(0, |i| i as u32 + 1)
    }

    pub fn lookup(&self, chain: u32, key: &Key, after: Option<(u32, u64)>) -> Option<&Installed> {
        self.rules
            .iter()
            .find(|(r, c)| r.chain == chain && after.is_none_or(|a| r.rank() > a) && c.matches(key))
            .map(|(r, _)| r)
    }

    /// Classify one packet and run its actions.
    pub fn process(&self, w: &mut Work<'_>) -> Outcome {
        let key = extract(w.data, w.indev, Need::ALL).0;
        let lookup = &mut |c, k: &Key, a| self.lookup(c, k, a);
        engine::process(w, &key, Need::ALL, None, lookup, &self.counters)
    }

    /// Per rule in file order: (line, packets, bytes, last used).
    pub fn counters(&self) -> Vec<(usize, u64, u64, u64)> {
        let mut v: Vec<(u64, usize, u64, u64, u64)> = self
            .rules
            .iter()
            .map(|(r, _)| {
                let (p, b, t) = self.counters.read(r);
                (r.seq, r.line(), p, b, t)
            })
            .collect();
        v.sort();
        v.into_iter().map(|(_, l, p, b, t)| (l, p, b, t)).collect()
    }
}
