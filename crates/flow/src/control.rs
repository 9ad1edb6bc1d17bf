//! The rules of a running [`Classifier`] as tc names them: each rule's chain, priority
//! and handle, `add` and `del` as `tc filter add|del` take them (checked against the
//! installed rules with tc's words before anything changes), and the stats rows
//! (`weir flow run --stats`, `weir flow stats`) in their one format.
//!
//! The classifier numbers the rules of the set it is built from 0, 1, … in file order
//! ([`RuleId`]); a [`Table`] starts from that and records the ids `insert` returns.

use crate::classifier::{Classifier, RuleId};
use crate::rule::{ActionKind, RuleSet, AUTO_PRIO_FIRST};
use std::collections::{BTreeMap, HashMap, HashSet};

/// One installed rule: what tc's checks and the stats rows read of it (the rule's text is
/// not kept: at 1M rules it was ~450 bytes a rule beside the classifier's).
#[derive(Debug, Clone)]
pub struct Entry {
    /// The line it was read from (or added as).
    pub line: usize,
    pub chain: u32,
    /// Its EtherType (tc's filters of one priority share one protocol).
    pub protocol: u16,
    /// The priority in effect (as written, or as the kernel picked it).
    pub prio: u32,
    /// As written, or as the kernel gives one: the lowest free handle from 1 among the
    /// filters of the same (chain, priority).
    pub handle: u32,
}

/// A stats row: one rule's identity and counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub line: usize,
    pub chain: u32,
    pub prio: u32,
    pub handle: u32,
    pub packets: u64,
    pub bytes: u64,
    /// Last used, in the packets' clock (ns): `Some(0)` never, `None` unknown (the XDP
    /// datapath's counters keep no time).
    pub last_used: Option<u64>,
}

impl std::fmt::Display for Row {
    /// `line L packets P bytes B used T prio P chain C handle 0xH`: the counters first
    /// (what scripts read since `--stats` printed `line L packets P bytes B`), then what
    /// tc shows. `used` is the last packet's time in seconds (`-` never, `?` unknown).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {} packets {} bytes {} used ", self.line, self.packets, self.bytes)?;
        match self.last_used {
            None => write!(f, "?")?,
            Some(0) => write!(f, "-")?,
            Some(t) => write!(f, "{}.{:03}", t / 1_000_000_000, t % 1_000_000_000 / 1_000_000)?,
        }
        write!(f, " prio {} chain {} handle 0x{:x}", self.prio, self.chain, self.handle)
    }
}

/// Which rules `del` removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// The rule read from (or added as) this line.
    Line(usize),
    /// tc's `[chain C] [prio P] [protocol X] [handle H]`: a priority alone takes all its
    /// filters, with a handle one of them; neither flushes the chain. weir also takes a
    /// handle without a priority when one rule has it.
    Tc { chain: u32, prio: Option<u32>, protocol: Option<u16>, handle: Option<u32> },
}

impl Selector {
    /// `line N`, or tc's words after `tc filter del dev D ingress` (`pref` for `prio`,
    /// a trailing `flower` allowed).
    pub fn parse(words: &[&str]) -> Result<Selector, String> {
        if let ["line", n] = words {
            return n
                .parse()
                .ok()
                .filter(|&n: &usize| n > 0)
                .map(Selector::Line)
                .ok_or(format!("Error: argument \"{n}\" is wrong: invalid line number"));
        }
        let (mut chain, mut prio, mut protocol, mut handle) = (0, None, None, None);
        let mut it = words.iter();
        while let Some(&w) = it.next() {
            let mut value = |what: &str| {
                it.next().copied().ok_or(format!("Error: argument \"{what}\" needs a value"))
            };
            match w {
                "chain" => {
                    let v = value(w)?;
                    chain = v
                        .parse()
                        .map_err(|_| format!("Error: argument \"{v}\" is wrong: Illegal \"chain\""))?;
                }
                "prio" | "pref" | "priority" | "preference" => {
                    let v = value(w)?;
                    prio = Some(v.parse().ok().filter(|&p| p > 0 && p <= 0xffff).ok_or(
                        format!("Error: argument \"{v}\" is wrong: invalid priority value"),
                    )?);
                }
                "protocol" => {
                    let v = value(w)?;
                    protocol = Some(crate::rule::parse_protocol(v).ok_or(format!(
                        "Error: argument \"{v}\" is wrong: invalid protocol"
                    ))?);
                }
                "handle" => {
                    let v = value(w)?;
                    let h = v.strip_prefix("0x").map_or_else(|| v.parse(), |x| u32::from_str_radix(x, 16));
                    handle = Some(h.map_err(|_| "Illegal \"handle\"".to_string())?);
                }
                "flower" => {}
                _ => return Err(format!("What is \"{w}\"? (del takes line N, or [chain C] [prio P] [protocol P] [handle H])")),
            }
        }
        if prio.is_none() && protocol.is_some() {
            return Err("Error: Cannot flush filters with protocol, handle or kind set.".into());
        }
        Ok(Selector::Tc { chain, prio, protocol, handle })
    }
}

/// The installed rules by the classifier's id.
#[derive(Debug, Clone, Default)]
pub struct Table {
    entries: BTreeMap<u64, Entry>,
    /// The line the next added rule gets (after the file's last).
    next_line: usize,
}

impl Table {
    /// The table of a classifier built from `set` (`Classifier::new(set)`).
    pub fn new(set: &RuleSet) -> Table {
        let mut t = Table::default();
        // Each (chain, priority)'s handles so far and its lowest free one: handles are only
        // taken here, so the lowest free handle never falls and a cursor finds it (what
        // `free_handle` answers, without a walk over every entry a rule: a file of 100,000
        // rules of one priority took 27.8 s to start that way, 2026-12-02-flow-start-1.txt).
        let mut groups: HashMap<(u32, u32), (HashSet<u32>, u32)> = HashMap::new();
        for (i, (r, &prio)) in set.rules.iter().zip(&set.prios).enumerate() {
            let (used, lowest) =
                groups.entry((r.chain, prio)).or_insert_with(|| (HashSet::new(), 1));
            let handle = r.handle.unwrap_or_else(|| {
                while used.contains(lowest) {
                    *lowest += 1;
                }
                *lowest
            });
            used.insert(handle);
            t.entries.insert(
                i as u64,
                Entry { line: r.line, chain: r.chain, protocol: r.protocol, prio, handle },
            );
        }
        t.next_line = set.rules.iter().map(|r| r.line).max().unwrap_or(0) + 1;
        t
    }

    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values()
    }

    fn free_handle(&self, chain: u32, prio: u32) -> u32 {
        let mut used: Vec<u32> = self
            .entries
            .values()
            .filter(|e| e.chain == chain && e.prio == prio)
            .map(|e| e.handle)
            .collect();
        used.sort_unstable();
        let mut h = 1;
        for u in used {
            if u == h {
                h += 1;
            } else if u > h {
                break;
            }
        }
        h
    }

    /// Check `text` (one rule, tc's arguments) against the installed rules as tc would and
    /// insert it: the entry, or tc's words with nothing changed.
    pub fn add(&mut self, classifier: &Classifier, text: &str) -> Result<Entry, String> {
        let mut one = RuleSet::parse(text).map_err(|e| {
            if e.column > 0 {
                format!("column {}: {}", e.column, e.message)
            } else {
                e.message
            }
        })?;
        let mut rule = match one.rules.pop() {
            Some(r) if one.rules.is_empty() => r,
            _ => return Err("one rule to add, on one line".into()),
        };
        for a in &rule.actions {
            if let ActionKind::Mirred { dev, .. } = &a.kind {
                crate::rule::check_dev(dev)?;
            }
        }
        let chain = rule.chain;
        let in_chain = || self.entries.values().filter(move |e| e.chain == chain);
        let prio = match rule.prio {
            Some(p) => p,
            None => match in_chain().map(|e| e.prio).min() {
                None => AUTO_PRIO_FIRST,
                Some(p) if p > 1 => p - 1,
                Some(_) => {
                    return Err("no priority left below 1 for a rule without \"prio\"".into())
                }
            },
        };
        // One protocol per (chain, priority): tc's filter of that priority is one
        // classifier instance, created with the first rule's protocol.
        if in_chain().any(|e| e.prio == prio && e.protocol != rule.protocol) {
            return Err("Error: Filter with specified priority/protocol not found.".into());
        }
        let handle = match rule.handle {
            Some(h) => {
                if in_chain().any(|e| e.prio == prio && e.handle == h) {
                    return Err("Error: Filter already exists.".into());
                }
                h
            }
            None => self.free_handle(chain, prio),
        };
        rule.line = self.next_line;
        let (line, protocol) = (rule.line, rule.protocol);
        // The priority as decided here, so the classifier's own pick cannot differ.
        rule.prio = Some(prio);
        let id = classifier.insert(&rule).map_err(|e| e.message)?;
        self.next_line += 1;
        let entry = Entry { line, chain, protocol, prio, handle };
        self.entries.insert(id.0, entry.clone());
        Ok(entry)
    }

    /// Remove the rules `sel` names (each published as removed in turn, as the kernel's
    /// flush removes filters one by one): how many, or tc's words with nothing changed.
    pub fn delete(&mut self, classifier: &Classifier, sel: &Selector) -> Result<usize, String> {
        let ids: Vec<u64> = match *sel {
            Selector::Line(n) => {
                let ids: Vec<u64> =
                    self.entries.iter().filter(|(_, e)| e.line == n).map(|(&i, _)| i).collect();
                if ids.is_empty() {
                    return Err(format!("no rule from line {n}"));
                }
                ids
            }
            Selector::Tc { chain, prio, protocol, handle } => {
                let in_chain = self.entries.iter().filter(|(_, e)| e.chain == chain);
                match (prio, handle) {
                    (None, None) => in_chain.map(|(&i, _)| i).collect(),
                    (None, Some(h)) => {
                        let ids: Vec<u64> =
                            in_chain.filter(|(_, e)| e.handle == h).map(|(&i, _)| i).collect();
                        match ids.len() {
                            0 => return Err("Error: Specified filter handle not found.".into()),
                            1 => ids,
                            n => {
                                return Err(format!(
                                    "handle 0x{h:x} is in {n} priorities of chain {chain}: give prio too"
                                ))
                            }
                        }
                    }
                    (Some(p), h) => {
                        let at: Vec<(u64, &Entry)> =
                            in_chain.filter(|(_, e)| e.prio == p).map(|(&i, e)| (i, e)).collect();
                        if at.is_empty()
                            || protocol.is_some_and(|x| at.iter().any(|(_, e)| e.protocol != x))
                        {
                            return Err(
                                "Error: Filter with specified priority/protocol not found.".into(),
                            );
                        }
                        match h {
                            None => at.iter().map(|(i, _)| *i).collect(),
                            Some(h) => {
                                let ids: Vec<u64> = at
                                    .iter()
                                    .filter(|(_, e)| e.handle == h)
                                    .map(|(i, _)| *i)
                                    .collect();
                                if ids.is_empty() {
                                    return Err("Error: Specified filter handle not found.".into());
                                }
                                ids
                            }
                        }
                    }
                }
            }
        };
        for id in &ids {
            classifier.delete(RuleId(*id));
            self.entries.remove(id);
        }
        Ok(ids.len())
    }

    /// Every installed rule's row, in the classifier's order (file order, then as added).
    pub fn rows(&self, classifier: &Classifier) -> Vec<Row> {
        let counters = classifier.counters();
        self.entries
            .values()
            .enumerate()
            .map(|(i, e)| {
                // The classifier lists its rules by id as this table does; a line that
                // disagrees (never expected) counts nothing rather than another's counts.
                let (p, b, t) = match counters.get(i) {
                    Some(&(line, p, b, t)) if line == e.line => (p, b, t),
                    _ => (0, 0, 0),
                };
                Row {
                    line: e.line,
                    chain: e.chain,
                    prio: e.prio,
                    handle: e.handle,
                    packets: p,
                    bytes: b,
                    last_used: Some(t),
                }
            })
            .collect()
    }
}

/// Each rule's handle as [`Table::new`] gives it (for the kernel datapath's stats).
pub fn handles(set: &RuleSet) -> Vec<u32> {
    Table::new(set).entries.into_values().map(|e| e.handle).collect()
}
