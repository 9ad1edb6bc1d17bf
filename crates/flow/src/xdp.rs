//! The flow datapath as an XDP program for the kernel (issue 14 item 4, xdp_flow's idea):
//! a program generated here from the rule set's shape, with the rules themselves in maps.
//!
//! What the program does, per packet:
//! 1. extract the flow key into the stack, as [`crate::key::extract`] does, but only the
//!    layers the rule set reads (`Need`) and only the fields in the key words some rule's
//!    mask covers;
//! 2. read the active table generation from `wf_config` (see "Updates");
//! 3. tuple space search of the current chain: one hash map per (chain, mask) subtable,
//!    keyed by the masked key words that mask covers (xdp_flow's per-mask maps, narrowed to
//!    the words used); each hit's value carries the rule's rank (priority, file order) and
//!    the lowest rank wins;
//! 4. count the winner in `wf_counters` (per-CPU array by rule slot: packets, bytes) and
//!    apply its action: `XDP_PASS`, `XDP_DROP`, `XDP_REDIRECT` through the `wf_devs` devmap
//!    (its index is the device's place in [`RuleSet::devices`]; an empty slot gives
//!    `XDP_ABORTED`), or `goto chain N` (another search: a jump ahead when every goto of
//!    the rule set goes to a later chain, else a dispatch loop where the 17th restart
//!    drops, as the kernel's `max_reclassify_loop`). No match passes.
//!
//! Tables and updates: each subtable has two maps, one per generation, and `wf_config[0]`
//! says which generation the program reads. An update writes the whole new table into the
//! generation not in use, then flips `wf_config[0]` (one 4-byte array write, atomic for
//! the packets): a packet sees the old table or the new one, never a mix. A rule keeps
//! its counter slot across updates when its (subtable, masked key) was there before.
//!
//! Packet edits: `vlan pop`, `push` and `modify` before the verdict are generated as code,
//! one block per distinct list of edits in the rule set ([`Layout::edits`]); the table
//! value's action word names the list; the lists are one block of code every chain's and
//! generation's tail jumps to ([`edits_block`]). Pop and push move the packet's start with
//! `bpf_xdp_adjust_head` and the MAC addresses with it. `pedit ex munge … set|add` is
//! such an edit too, for every field weir parses: the header is found again for each munge
//! (eth at the start; ip/ip6 after Ethernet and up to two tags; tcp/udp at the transport
//! header as the action engine finds it, [`transport_header`]), `add` adds per 32-bit
//! header word ([`munge`]), IPv6's traffic class and flow label are a masked write of the
//! header's first word. `csum` recomputes whole checksums as act_csum does: the IPv4
//! header's in line, TCP/UDP/ICMP/ICMPv6 over the pseudo-header and the whole segment by
//! `bpf_csum_diff` 64 bytes a round and a half-word loop for the rest
//! ([`csum_transport`], segments up to [`MAX_CSUM_SEGMENT`] bytes). The bytes come out as
//! the user-space action engine leaves them (the differential test compares them).
//!
//! `indev NAME` is resolved to the device's ifindex when the table is written (at compile
//! and at each update, as tc resolves it when the rule is added: `Cannot find device
//! "NAME"` otherwise) and matched against `xdp_md.ingress_ifindex`.
//!
//! Refused at compile time, naming the rule's line and keyword: what XDP cannot do or
//! what the hash tables cannot hold: a port range of more than [`MAX_RANGE_ENTRIES`]
//! ports (a range is exact entries, see [`expand`]), `continue`, `mirred … mirror` and a
//! redirect given a control (both need a copy of the packet), `skbedit`, and a `goto` or
//! `reclassify` after an edit (the program parses the packet once, before the search).
//!
//! Known difference from the user-space extraction: IPv6 extension headers are followed
//! up to [`IPV6_EXT_HEADERS`] deep (the kernel's verifier wants a bounded walk); a packet
//! with more takes the next header's number as its protocol.

use crate::key::{field, Field, Key, Need, BYTES, FLAG_FIRSTFRAG, FLAG_FRAG, WORDS};
use crate::rule::{
    csum, Action, ActionKind, Control, Munge, PeditHeader, RuleError, RuleSet, ADDR_V4, ADDR_V6,
};
use weir_isa::ebpf::Op;
use weir_program::{
    abi::{helper_id, xdp_action},
    MapSpec, MapType, ProgType, Program, ProgramBuilder, RelocTarget, Relocation,
};

/// IPv6 extension headers (hop-by-hop, routing, destination options) stepped over.
pub const IPV6_EXT_HEADERS: usize = 8;

/// Bytes of a table value: rank (u64), counter slot (u32), action (u32).
pub const VALUE_SIZE: u32 = 16;
/// Bytes of a counter: packets (u64), bytes (u64).
pub const COUNTER_SIZE: u32 = 16;

/// Map names (the kernel keeps 15 bytes; these are what bpftool shows and what pinning
/// by name uses).
pub const CONFIG_MAP: &str = "wf_config";
pub const COUNTERS_MAP: &str = "wf_counters";
pub const DEVS_MAP: &str = "wf_devs";

/// The table map of subtable `s` in generation `g`.
pub fn table_map_name(g: usize, s: usize) -> String {
    format!("wf_t{g}_{s}")
}

/// Action kinds in a table value's action word: kind in the top byte, the edit list
/// (index + 1, 0: none) in the next, the argument (device or chain index) in the low 16 bits.
mod act {
    pub const PASS: u32 = 0;
    pub const DROP: u32 = 1;
    pub const REDIRECT: u32 = 2;
    pub const GOTO: u32 = 3;
}

/// Edit lists a program can carry (one byte of the action word, 0 being none).
pub const MAX_EDIT_LISTS: usize = 255;

/// The kernel's `max_reclassify_loop`, as [`crate::engine::MAX_RESTARTS`].
const MAX_RESTARTS: i32 = crate::engine::MAX_RESTARTS as i32;

/// One subtable: the rules of one chain with one mask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subtable {
    pub chain: u32,
    pub mask: Key,
}

impl Subtable {
    /// The key words the mask covers (the map's key: those words of the masked key).
    pub fn words(&self) -> Vec<usize> {
        (0..WORDS).filter(|&w| self.mask.word(w) != 0).collect()
    }
    /// The map key of a packet key (or an already masked rule key).
    pub fn map_key(&self, key: &Key) -> Vec<u8> {
        let masked = key.and(&self.mask);
        let mut out = Vec::new();
        for w in self.words() {
            out.extend_from_slice(&masked.0[w * 8..w * 8 + 8]);
        }
        if out.is_empty() {
            // A rule matching everything: the kernel's hash maps need a key of 1 byte or
            // more, so the empty key is one zero word.
            out.extend_from_slice(&[0; 8]);
        }
        out
    }
}

/// The program's shape: what it was generated for. Rules can change in the maps as long
/// as their (chain, mask) pairs are among these subtables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub subtables: Vec<Subtable>,
    /// Chains a rule lives in or jumps to, by index (a `goto` carries the index).
    pub chains: Vec<u32>,
    /// `mirred` devices: the devmap's indices.
    pub devices: Vec<String>,
    /// Entries each table map (and the counters) hold.
    pub capacity: u32,
    /// What the parser reads.
    pub need: Need,
    /// Every goto goes to a later chain of `chains` (and there are at most 17 chains, so
    /// tc's restart limit cannot be reached): the program has no loop.
    pub forward: bool,
    /// The distinct lists of packet edits rules make before their verdict (`vlan pop`,
    /// `push`, `modify`), each generated as code; a table value names one by its index + 1
    /// (0: none). A rule set with another list needs the program compiled again.
    pub edits: Vec<Vec<ActionKind>>,
}

/// One map entry to write: (map name, key, value).
pub type Entry = (String, Vec<u8>, Vec<u8>);

/// A compiled datapath: the program (with its map specs and relocations), its layout and
/// the table of generation 0 for the rule set it was compiled from.
#[derive(Debug, Clone)]
pub struct XdpDatapath {
    pub program: Program,
    pub layout: Layout,
    pub entries: Vec<Entry>,
    /// Each rule's counter slot (file order); `None` for a rule another rule of better
    /// rank shadows (same chain, mask and key: it can never win).
    pub slots: Vec<Option<u32>>,
}

/// A rule set as table entries of one generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub entries: Vec<Entry>,
    /// Each rule's counter slot, as [`XdpDatapath::slots`].
    pub slots: Vec<Option<u32>>,
}

/// What a rule does once it won, as the table value says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    Pass,
    Drop,
    Redirect(u16),
    Goto(u32),
}

fn refuse(line: usize, keyword: &str, why: &str) -> RuleError {
    RuleError {
        line,
        column: 0,
        message: format!("\"{keyword}\" is not supported by the XDP datapath: {why}"),
    }
}

/// The rule's outcome and the packet edits it makes first (its `vlan` actions, in order),
/// or the refusal naming what XDP cannot do.
fn rule_act(
    rule: &crate::rule::Rule,
    devices: &[String],
) -> Result<(Act, Vec<ActionKind>), RuleError> {
    let line = rule.line;
    let mut edits = Vec::new();
    for a in &rule.actions {
        let control = a.effective_control();
        match &a.kind {
            ActionKind::Gact => {}
            ActionKind::Mirred { redirect: true, dev } if a.control.is_none() => {
                let i = devices.iter().position(|d| d == dev).unwrap_or(0);
                return Ok((Act::Redirect(i as u16), edits));
            }
            ActionKind::Mirred { .. } => {
                return Err(refuse(line, "mirror", "XDP cannot send a copy and go on"))
            }
            ActionKind::VlanPop | ActionKind::VlanPush { .. } | ActionKind::VlanModify { .. } => {
                edits.push(a.kind.clone())
            }
            // Every pedit field and csum target weir parses is generated: the headers
            // found again for each edit as the action engine finds them.
            ActionKind::Pedit(_) | ActionKind::Csum(_) => edits.push(a.kind.clone()),
            ActionKind::SkbeditMark { .. } => {
                return Err(refuse(line, "skbedit", "an XDP frame has no skb mark"))
            }
        }
        // A restart after an edit classifies the edited packet: the program parses once,
        // before the search, so it would search with the old packet's key.
        let restart = |keyword: &str| {
            refuse(
                line,
                keyword,
                "after a packet edit the packet would have to be parsed again; not generated yet",
            )
        };
        match control {
            Control::Pipe => continue,
            Control::Ok => return Ok((Act::Pass, edits)),
            Control::Drop => return Ok((Act::Drop, edits)),
            Control::Goto(_) if !edits.is_empty() => return Err(restart("goto")),
            Control::Reclassify if !edits.is_empty() => return Err(restart("reclassify")),
            Control::Goto(n) => return Ok((Act::Goto(n), edits)),
            Control::Reclassify => return Ok((Act::Goto(0), edits)),
            Control::Continue => {
                return Err(refuse(line, "continue", "a table keeps the best rule of a key only"))
            }
        }
    }
    Ok((Act::Pass, edits))
}

/// Exact entries a rule's port ranges may expand to (ports, or port pairs when both
/// ports have a range).
pub const MAX_RANGE_ENTRIES: usize = 4096;

/// A rule's subtable mask and its map keys. A port range becomes one exact entry per
/// port (per pair with both), the port's bytes added to the mask: the tables stay hash
/// tables probed once a subtable, a range's entries are written with the rest of the
/// generation (atomic as any update), and they count into the rule's one counter slot.
/// Chosen over a range check after the probe (a subtable keyed without the port, its
/// candidates' ranges walked in rank order) because a hash entry holds one rule: rules
/// differing only in their ranges would need a list per entry, and the walk a loop the
/// verifier must bound. The price is entries: [`MAX_RANGE_ENTRIES`] a rule at most.
fn expand(
    rule: &crate::rule::Rule,
    c: &crate::rule::Compiled,
) -> Result<(Key, Vec<Key>), RuleError> {
    let ports = |r: Option<(u16, u16)>| -> Vec<Option<u16>> {
        match r {
            None => vec![None],
            Some((lo, hi)) => (lo..=hi).map(Some).collect(),
        }
    };
    let span =
        |r: Option<(u16, u16)>| r.map_or(1, |(lo, hi)| usize::from(hi.saturating_sub(lo)) + 1);
    let n = span(c.src_range) * span(c.dst_range);
    if n > MAX_RANGE_ENTRIES {
        let keyword = if span(c.dst_range) > span(c.src_range) { "dst_port" } else { "src_port" };
        return Err(refuse(
            rule.line,
            keyword,
            &format!("a range of {n} ports (pairs) would be {n} exact entries, {MAX_RANGE_ENTRIES} a rule at most"),
        ));
    }
    let mut mask = c.mask;
    if c.src_range.is_some() {
        mask.set_u16(field::SRC_PORT, 0xffff);
    }
    if c.dst_range.is_some() {
        mask.set_u16(field::DST_PORT, 0xffff);
    }
    let mut keys = Vec::with_capacity(n);
    for sp in ports(c.src_range) {
        for dp in ports(c.dst_range) {
            let mut k = c.key;
            if let Some(p) = sp {
                k.set_u16(field::SRC_PORT, p);
            }
            if let Some(p) = dp {
                k.set_u16(field::DST_PORT, p);
            }
            keys.push(k);
        }
    }
    Ok((mask, keys))
}

/// Options of [`compile`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct XdpOptions {
    /// Entries per table map and counter slots (0: twice the rules, at least 1,024).
    pub capacity: u32,
}

/// The ifindex of the network device `name` on this machine (`/sys/class/net`), as tc
/// resolves `indev` when it adds a rule.
pub fn system_ifindex(name: &str) -> Option<u32> {
    // A name with a path separator or a dot entry is no device (and must not walk /sys).
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return None;
    }
    std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex")).ok()?.trim().parse().ok()
}

/// Every rule of `set` compiled with its `indev` names as `ifindex` resolves them (tc's
/// words for a name it does not know, with the rule's line).
fn compile_rules(
    set: &RuleSet,
    ifindex: &dyn Fn(&str) -> Option<u32>,
) -> Result<Vec<crate::rule::Compiled>, RuleError> {
    set.rules
        .iter()
        .map(|rule| {
            let mut missing = None;
            let c = rule.compile(&mut |name| {
                ifindex(name).unwrap_or_else(|| {
                    missing.get_or_insert_with(|| name.to_string());
                    0
                })
            });
            match missing {
                Some(name) => Err(RuleError {
                    line: rule.line,
                    column: 0,
                    message: format!("Cannot find device \"{name}\""),
                }),
                None => Ok(c),
            }
        })
        .collect()
}

/// Compile `set` into an XDP datapath, `indev` names resolved on this machine
/// ([`system_ifindex`]).
pub fn compile(set: &RuleSet, options: XdpOptions) -> Result<XdpDatapath, RuleError> {
    compile_with(set, options, &system_ifindex)
}

/// [`compile`] with `indev` names resolved by `ifindex`.
pub fn compile_with(
    set: &RuleSet,
    options: XdpOptions,
    ifindex: &dyn Fn(&str) -> Option<u32>,
) -> Result<XdpDatapath, RuleError> {
    let devices = set.devices();
    let compiled = compile_rules(set, ifindex)?;
    let mut subtables: Vec<Subtable> = Vec::new();
    let mut chains: Vec<u32> = vec![0];
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut need = Need::default();
    let mut edits: Vec<Vec<ActionKind>> = Vec::new();
    let mut entry_count = 0usize;
    for (rule, c) in set.rules.iter().zip(&compiled) {
        let (a, e) = rule_act(rule, &devices)?;
        if !e.is_empty() && !edits.contains(&e) {
            if edits.len() == MAX_EDIT_LISTS {
                return Err(RuleError {
                    line: rule.line,
                    column: 0,
                    message: format!(
                        "more than {MAX_EDIT_LISTS} distinct lists of packet edits: the XDP datapath's action word has room for {MAX_EDIT_LISTS}"
                    ),
                });
            }
            edits.push(e);
        }
        if let Act::Goto(n) = a {
            edges.push((rule.chain, n));
        }
        need = need.union(c.need);
        let (mask, keys) = expand(rule, c)?;
        entry_count += keys.len();
        let st = Subtable { chain: rule.chain, mask };
        if !subtables.contains(&st) {
            subtables.push(st);
        }
        for ch in [Some(rule.chain), if let Act::Goto(n) = a { Some(n) } else { None }]
            .into_iter()
            .flatten()
        {
            if !chains.contains(&ch) {
                chains.push(ch);
            }
        }
    }
    let rules = set.rules.len() as u32;
    let most = u32::try_from(entry_count).unwrap_or(u32::MAX).max(rules);
    let capacity =
        if options.capacity == 0 { most.saturating_mul(2).max(1024) } else { options.capacity };
    if rules > capacity {
        return Err(RuleError {
            line: set.rules.get(capacity as usize).map_or(0, |r| r.line),
            column: 0,
            message: format!("{rules} rules do not fit a capacity of {capacity}"),
        });
    }
    // Two maps per subtable plus three: the kernel takes 64 maps a program.
    if subtables.len() > 30 {
        return Err(RuleError {
            line: 0,
            column: 0,
            message: format!(
                "{} (chain, mask) subtables: the XDP datapath takes 30 (two maps each, 64 a program)",
                subtables.len()
            ),
        });
    }
    let (chains, forward) = order_chains(chains, &edges);
    if chains.len() > 0xffff {
        return Err(RuleError {
            line: 0,
            column: 0,
            message: format!("{} chains: the XDP datapath takes 65,535", chains.len()),
        });
    }
    let layout = Layout { subtables, chains, devices, capacity, need, forward, edits };
    let program = emit(&layout);
    let mut table = layout.entries(set, 0, &[], ifindex)?;
    // Devices as weir's runtime sees them: device i of the rule file is ifindex i + 1
    // (a kernel's loader skips these; `weir flow update` writes the real ifindexes).
    for i in 0..layout.devices.len() as u32 {
        table.entries.push((
            DEVS_MAP.into(),
            i.to_ne_bytes().to_vec(),
            (i + 1).to_ne_bytes().to_vec(),
        ));
    }
    Ok(XdpDatapath { program, layout, entries: table.entries, slots: table.slots })
}

/// The chains in an order where every goto goes forward, chain 0 first, if there is one
/// (and 17 chains or fewer): `(order, true)`; else `(chains, false)`.
fn order_chains(chains: Vec<u32>, edges: &[(u32, u32)]) -> (Vec<u32>, bool) {
    if chains.len() > MAX_RESTARTS as usize + 1 || edges.iter().any(|&(_, to)| to == 0) {
        return (chains, false);
    }
    // Kahn's algorithm, taking chains in their first-mention order among the ready ones.
    let mut order = Vec::new();
    let mut left = chains.clone();
    while !left.is_empty() {
        let ready = left.iter().position(|&c| {
            !edges.iter().any(|&(from, to)| to == c && from != c && left.contains(&from))
                && !edges.contains(&(c, c))
        });
        let Some(i) = ready else { return (chains, false) };
        order.push(left.remove(i));
    }
    (order, true)
}

impl Layout {
    /// The table entries of generation `g` for `set` (every rule's (chain, mask) must be a
    /// subtable of this layout), with counter slots: a rule whose (subtable, key) is in
    /// `keep` (`(subtable, map key, slot)`, what the tables held before) keeps that slot,
    /// the others take the lowest free ones. `indev` names are resolved by `ifindex`
    /// ([`system_ifindex`] for a program running here).
    pub fn entries(
        &self,
        set: &RuleSet,
        g: usize,
        keep: &[(usize, Vec<u8>, u32)],
        ifindex: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<Table, RuleError> {
        let devices = &self.devices;
        let compiled = compile_rules(set, ifindex)?;
        if set.rules.len() as u64 > u64::from(self.capacity) {
            return Err(RuleError {
                line: 0,
                column: 0,
                message: format!(
                    "{} rules do not fit the program's capacity of {}",
                    set.rules.len(),
                    self.capacity
                ),
            });
        }
        // (subtable, map key, rank, action, rule), the best rank kept.
        let mut best: Vec<(usize, Vec<u8>, u64, u32, usize)> = Vec::new();
        let mut index: std::collections::HashMap<(usize, Vec<u8>), usize> =
            std::collections::HashMap::new();
        for d in set.devices() {
            if !devices.contains(&d) {
                return Err(RuleError {
                    line: 0,
                    column: 0,
                    message: format!(
                        "device \"{d}\" is not among the program's devices; compile again"
                    ),
                });
            }
        }
        for (i, (rule, c)) in set.rules.iter().zip(&compiled).enumerate() {
            let (a, e) = rule_act(rule, devices)?;
            let edit = if e.is_empty() {
                0
            } else {
                match self.edits.iter().position(|x| *x == e) {
                    Some(i) => (i as u32 + 1) << 16,
                    None => return Err(RuleError {
                        line: rule.line,
                        column: 0,
                        message:
                            "this rule's packet edits are not among the program's; compile again"
                                .into(),
                    }),
                }
            };
            let (mask, keys) = expand(rule, c)?;
            let st = Subtable { chain: rule.chain, mask };
            let Some(s) = self.subtables.iter().position(|x| *x == st) else {
                return Err(RuleError {
                    line: rule.line,
                    column: 0,
                    message: "this rule's chain and mask are not among the program's subtables; compile again".into(),
                });
            };
            let action = match a {
                Act::Pass => act::PASS << 24,
                Act::Drop => act::DROP << 24,
                Act::Redirect(d) => (act::REDIRECT << 24) | u32::from(d),
                Act::Goto(n) => {
                    let Some(ci) = self.chains.iter().position(|&x| x == n) else {
                        return Err(RuleError {
                            line: rule.line,
                            column: 0,
                            message: format!(
                                "chain {n} is not among the program's chains; compile again"
                            ),
                        });
                    };
                    let from = self.chains.iter().position(|&x| x == rule.chain).unwrap_or(0);
                    if self.forward && ci <= from {
                        return Err(RuleError {
                            line: rule.line,
                            column: 0,
                            message: format!("goto chain {n} goes back from chain {}: the program was compiled without a loop; compile again", rule.chain),
                        });
                    }
                    (act::GOTO << 24) | ci as u32
                }
            } | edit;
            let rank = (u64::from(set.prios[i]) << 32) | i as u64;
            for k in &keys {
                let key = st.map_key(k);
                match index.get(&(s, key.clone())) {
                    Some(&j) if best[j].2 <= rank => {}
                    Some(&j) => {
                        best[j].2 = rank;
                        best[j].3 = action;
                        best[j].4 = i;
                    }
                    None => {
                        index.insert((s, key.clone()), best.len());
                        best.push((s, key, rank, action, i));
                    }
                }
            }
        }
        let mut per_table = vec![0u32; self.subtables.len()];
        for e in &best {
            per_table[e.0] += 1;
            if per_table[e.0] > self.capacity {
                return Err(RuleError {
                    line: set.rules[e.4].line,
                    column: 0,
                    message: format!(
                        "subtable {} takes more than the program's capacity of {} entries (port ranges count a port each)",
                        e.0, self.capacity
                    ),
                });
            }
        }
        // Counter slots, one a rule (every entry of a rule's port range counts into its
        // rule's): a rule one of whose entries was there keeps that entry's slot, the
        // others take the lowest free ones.
        let kept: std::collections::HashMap<(usize, &[u8]), u32> =
            keep.iter().map(|(s, k, slot)| ((*s, k.as_slice()), *slot)).collect();
        let mut used = vec![false; self.capacity as usize];
        let mut rule_slots: Vec<Option<u32>> = vec![None; set.rules.len()];
        for (s, key, _, _, r) in &best {
            if rule_slots[*r].is_some() {
                continue;
            }
            if let Some(&slot) = kept.get(&(*s, key.as_slice())) {
                if let Some(u) = used.get_mut(slot as usize) {
                    if !*u {
                        *u = true;
                        rule_slots[*r] = Some(slot);
                    }
                }
            }
        }
        let mut next_free = 0usize;
        for (_, _, _, _, r) in &best {
            if rule_slots[*r].is_some() {
                continue;
            }
            while used.get(next_free) == Some(&true) {
                next_free += 1;
            }
            if next_free >= used.len() {
                return Err(RuleError {
                    line: set.rules[*r].line,
                    column: 0,
                    message: format!("no counter slot left of {}", self.capacity),
                });
            }
            used[next_free] = true;
            rule_slots[*r] = Some(next_free as u32);
        }
        let entries = best
            .into_iter()
            .map(|(s, key, rank, action, rule)| {
                let slot = rule_slots[rule].unwrap_or(0);
                let mut value = Vec::with_capacity(VALUE_SIZE as usize);
                value.extend_from_slice(&rank.to_ne_bytes());
                value.extend_from_slice(&slot.to_ne_bytes());
                value.extend_from_slice(&action.to_ne_bytes());
                (table_map_name(g, s), key, value)
            })
            .collect();
        Ok(Table { entries, slots: rule_slots })
    }

    /// The maps, in the program's order: config, counters, devices, then the table maps
    /// of generation 0 and of generation 1.
    pub fn maps(&self) -> Vec<MapSpec> {
        let mut maps = vec![
            MapSpec {
                name: CONFIG_MAP.into(),
                map_type: MapType::Array,
                key_size: 4,
                value_size: 4,
                max_entries: 1,
                flags: 0,
            },
            MapSpec {
                name: COUNTERS_MAP.into(),
                map_type: MapType::PercpuArray,
                key_size: 4,
                value_size: COUNTER_SIZE,
                max_entries: self.capacity,
                flags: 0,
            },
            MapSpec {
                name: DEVS_MAP.into(),
                map_type: MapType::DevMap,
                key_size: 4,
                value_size: 4,
                max_entries: (self.devices.len() as u32).max(1),
                flags: 0,
            },
        ];
        for g in 0..2 {
            for (s, st) in self.subtables.iter().enumerate() {
                maps.push(MapSpec {
                    name: table_map_name(g, s),
                    map_type: MapType::Hash,
                    key_size: (st.words().len().max(1) * 8) as u32,
                    value_size: VALUE_SIZE,
                    max_entries: self.capacity,
                    // BPF_F_NO_PREALLOC would save memory but costs an allocation per
                    // insert; the tables are preallocated as xdp_flow's were.
                    flags: 0,
                });
            }
        }
        maps
    }

    /// The layout as text (carried in the object so that `weir flow update` knows the
    /// program's subtables): `capacity N`, `need L3 L4`, `chains ...`, `devices ...`,
    /// then `subtable CHAIN MASKHEX` lines.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "weir-flow-xdp 2\ncapacity {}\nneed {} {}\nforward {}\nchains",
            self.capacity, self.need.l3 as u8, self.need.l4 as u8, self.forward as u8
        );
        for c in &self.chains {
            s.push_str(&format!(" {c}"));
        }
        s.push_str("\ndevices");
        for d in &self.devices {
            s.push_str(&format!(" {d}"));
        }
        s.push('\n');
        for st in &self.subtables {
            let hex: String = st.mask.0.iter().map(|b| format!("{b:02x}")).collect();
            s.push_str(&format!("subtable {} {hex}\n", st.chain));
        }
        for e in &self.edits {
            let text: Vec<String> = e
                .iter()
                .map(|k| Action { kind: k.clone(), control: Some(Control::Pipe) }.to_string())
                .collect();
            s.push_str(&format!("edit {}\n", text.join(" action ")));
        }
        s
    }

    /// [`Layout::to_text`] read back.
    pub fn from_text(text: &str) -> Result<Layout, String> {
        let mut lines = text.lines();
        if !matches!(lines.next(), Some("weir-flow-xdp 1" | "weir-flow-xdp 2")) {
            return Err("not a weir flow XDP layout (version 1 or 2)".into());
        }
        let mut layout = Layout {
            subtables: Vec::new(),
            chains: Vec::new(),
            devices: Vec::new(),
            capacity: 0,
            need: Need::default(),
            forward: false,
            edits: Vec::new(),
        };
        for (n, line) in lines.enumerate() {
            let bad = || format!("layout line {}: cannot read `{line}`", n + 2);
            let mut words = line.split(' ');
            match words.next() {
                Some("capacity") => {
                    layout.capacity = words.next().and_then(|w| w.parse().ok()).ok_or_else(bad)?
                }
                Some("need") => {
                    let l3 = words.next() == Some("1");
                    let l4 = words.next() == Some("1");
                    layout.need = Need { l3, l4 };
                }
                Some("forward") => layout.forward = words.next() == Some("1"),
                Some("chains") => {
                    for w in words {
                        layout.chains.push(w.parse().map_err(|_| bad())?);
                    }
                }
                Some("devices") => layout.devices = words.map(str::to_owned).collect(),
                Some("subtable") => {
                    let chain = words.next().and_then(|w| w.parse().ok()).ok_or_else(bad)?;
                    let hex = words.next().ok_or_else(bad)?;
                    if hex.len() != BYTES * 2 {
                        return Err(bad());
                    }
                    let mut mask = Key::default();
                    for (i, b) in mask.0.iter_mut().enumerate() {
                        *b = u8::from_str_radix(&hex[i * 2..i * 2 + 2], 16).map_err(|_| bad())?;
                    }
                    layout.subtables.push(Subtable { chain, mask });
                }
                Some("edit") => {
                    let text = line.strip_prefix("edit ").ok_or_else(bad)?;
                    let set = RuleSet::parse(&format!("protocol all flower action {text}"))
                        .map_err(|e| format!("{}: {e}", bad()))?;
                    let edits = set.rules.first().ok_or_else(bad)?.actions.iter();
                    layout.edits.push(edits.map(|a| a.kind.clone()).collect());
                }
                _ => return Err(bad()),
            }
        }
        Ok(layout)
    }
}

// ------------------------------------------------------------------ code generation

/// Stack layout (offsets from r10).
const KEY: i16 = -(BYTES as i16);
const LKEY: i16 = KEY - BYTES as i16;
const SCRATCH: i16 = LKEY - 8;
const LEN: i16 = SCRATCH - 8;
/// The context pointer, kept for the edits (helpers and reloads of the packet pointers).
const CTX: i16 = LEN - 8;
/// The 12 bytes of MAC addresses while an edit moves the packet's start.
const MACS: i16 = CTX - 16;

// Helper ids as `call` immediates (the ids have one home: weir-program's `helper_id`).
const HELPER_MAP_LOOKUP: i32 = helper_id::MAP_LOOKUP_ELEM as i32;
const HELPER_REDIRECT_MAP: i32 = helper_id::REDIRECT_MAP as i32;
const HELPER_ADJUST_HEAD: i32 = helper_id::XDP_ADJUST_HEAD as i32;
const HELPER_CSUM_DIFF: i32 = helper_id::CSUM_DIFF as i32;

struct Gen<'a> {
    b: ProgramBuilder,
    layout: &'a Layout,
    /// Key bytes some mask reads.
    used: [bool; BYTES],
    /// Map references: (slot, map index).
    relocs: Vec<(usize, usize)>,
    /// The packet edits' one block ([`edits_block`]), which every chain's and every
    /// generation's tail jumps to.
    edits: weir_program::Label,
}

impl Gen<'_> {
    fn want(&self, f: Field) -> bool {
        // A field is written when it shares a word with a byte some mask reads: the
        // words the lookups read must be whole.
        let first = f.offset / 8;
        let last = (f.offset + f.len - 1) / 8;
        (first..=last).any(|w| self.used[w * 8..w * 8 + 8].iter().any(|&u| u))
    }

    fn map(&mut self, dst: u8, map: usize) {
        let slot = self.b.lddw_map_idx(dst, map as i32);
        self.relocs.push((slot, map));
    }

    /// `if ptr + n > data_end (r3) goto fail` (r0 scratch).
    fn check(&mut self, ptr: u8, n: i32, fail: weir_program::Label) {
        self.b.alu_reg(Op::Mov64Reg, 0, ptr);
        self.b.alu_imm(Op::Add64Imm, 0, n);
        self.b.jump_reg(Op::Jgt64Reg, 0, 3, fail);
    }

    /// Copy `len` (1, 2, 4, 6, 16) packet bytes at `ptr + off` into key field `f` as they are.
    fn copy(&mut self, f: Field, ptr: u8, off: i16) {
        if !self.want(f) {
            return;
        }
        let at = KEY + f.offset as i16;
        let mut done = 0usize;
        while done < f.len {
            let left = f.len - done;
            let dst = f.offset + done;
            // The widest aligned store that fits (the verifier wants aligned stack stores).
            let (ld, st, n) = if left >= 4 && dst % 4 == 0 {
                (Op::LdxW, Op::StxW, 4)
            } else if left >= 2 && dst % 2 == 0 {
                (Op::LdxH, Op::StxH, 2)
            } else {
                (Op::LdxB, Op::StxB, 1)
            };
            self.b.load(ld, 0, ptr, off + done as i16);
            self.b.store_reg(st, 10, at + done as i16, 0);
            done += n;
        }
    }

    /// Store register `r` (host order, value in the low bits) into key field `f`
    /// big-endian (1, 2 or 4 bytes). Clobbers `r`.
    fn put(&mut self, f: Field, r: u8) {
        if !self.want(f) {
            return;
        }
        let at = KEY + f.offset as i16;
        match f.len {
            1 => self.b.store_reg(Op::StxB, 10, at, r),
            2 => {
                self.b.byte_swap(Op::Be16, r);
                self.b.store_reg(Op::StxH, 10, at, r)
            }
            _ => {
                self.b.byte_swap(Op::Be32, r);
                self.b.store_reg(Op::StxW, 10, at, r)
            }
        };
    }

    fn put_imm(&mut self, f: Field, v: u32) {
        if !self.want(f) {
            return;
        }
        let at = KEY + f.offset as i16;
        match f.len {
            1 => self.b.store_imm(Op::StB, 10, at, v as i32),
            2 => self.b.store_imm(Op::StH, 10, at, (v as u16).to_be() as i32),
            _ => self.b.store_imm(Op::StW, 10, at, v.to_be() as i32),
        };
    }

    /// The flags of a fragment, then `done`: r0 holds the fragment field, and `later` bits
    /// set in it mark a fragment after the first (the IPv4 offset, the IPv6 offset).
    fn fragment_flags(&mut self, address: u8, later_bits: i32, done: weir_program::Label) {
        let later = self.b.new_label();
        self.b.jump_imm(Op::Jset64Imm, 0, later_bits, later);
        self.put_imm(field::FLAGS, u32::from(address | FLAG_FRAG | FLAG_FIRSTFRAG));
        self.b.jump(done);
        self.b.bind(later);
        self.put_imm(field::FLAGS, u32::from(address | FLAG_FRAG));
        self.b.jump(done);
    }

    /// `dst = be16(*(u16 *)(ptr + off))` in host order.
    fn load16(&mut self, dst: u8, ptr: u8, off: i16) {
        self.b.load(Op::LdxH, dst, ptr, off);
        self.b.byte_swap(Op::Be16, dst);
    }
}

fn emit(layout: &Layout) -> Program {
    let mut used = [false; BYTES];
    for st in &layout.subtables {
        for (u, m) in used.iter_mut().zip(st.mask.0.iter()) {
            *u |= *m != 0;
        }
    }
    let mut b = ProgramBuilder::new();
    let edits = b.new_label();
    let mut g = Gen { b, layout, used, relocs: Vec::new(), edits };
    let parsed = g.b.new_label();
    if !layout.edits.is_empty() {
        g.b.store_reg(Op::StxDw, 10, CTX, 1);
    }
    extract(&mut g, parsed);
    g.b.bind(parsed);
    // The generation: wf_config[0].
    g.b.store_imm(Op::StW, 10, SCRATCH, 0);
    g.map(1, 0);
    g.b.alu_reg(Op::Mov64Reg, 2, 10);
    g.b.alu_imm(Op::Add64Imm, 2, i32::from(SCRATCH));
    g.b.call_helper(HELPER_MAP_LOOKUP);
    let gen0 = g.b.new_label();
    let gen1 = g.b.new_label();
    g.b.jump_imm(Op::Jeq64Imm, 0, 0, gen0);
    g.b.load(Op::LdxW, 0, 0, 0);
    g.b.jump_imm(Op::Jne64Imm, 0, 0, gen1);
    g.b.bind(gen0);
    search(&mut g, 0);
    g.b.bind(gen1);
    search(&mut g, 1);
    if !layout.edits.is_empty() {
        edits_block(&mut g);
    }
    let mut program = g.b.link().expect("the generator binds every label it uses");
    program = program.with_prog_type(ProgType::Xdp);
    for m in layout.maps() {
        program.add_map(m);
    }
    for (slot, map) in g.relocs {
        program.add_relocation(Relocation { slot, target: RelocTarget::Map { map } });
    }
    program
}

/// The parser: r1 = ctx on entry. Leaves the key on the stack and the frame length at
/// LEN, then jumps to `done`.
fn extract(g: &mut Gen<'_>, done: weir_program::Label) {
    let b = &mut g.b;
    b.load(Op::LdxW, 2, 1, 0); // data
    b.load(Op::LdxW, 3, 1, 4); // data_end
    b.alu_reg(Op::Mov64Reg, 5, 3);
    b.alu_reg(Op::Sub64Reg, 5, 2);
    b.store_reg(Op::StxDw, 10, LEN, 5);
    for w in 0..WORDS {
        if g.used[w * 8..w * 8 + 8].iter().any(|&u| u) {
            g.b.store_imm(Op::StDw, 10, KEY + (w * 8) as i16, 0);
        }
    }
    if g.want(field::INDEV) {
        // xdp_md.ingress_ifindex, big-endian as the rules' keys hold it (any frame, even
        // one too short for Ethernet, as the user-space extraction).
        g.b.load(Op::LdxW, 0, 1, 12);
        g.put(field::INDEV, 0);
    }
    if g.layout.subtables.is_empty() {
        g.b.jump(done);
        return;
    }
    g.check(2, 14, done);
    g.copy(field::DST_MAC, 2, 0);
    g.copy(field::SRC_MAC, 2, 6);
    if !g.layout.need.l3 {
        g.b.jump(done);
        return;
    }
    g.load16(5, 2, 12);
    // 802.3 lengths: Novell raw (0xffff after) or LLC.
    let typed = g.b.new_label();
    g.b.jump_imm(Op::Jge64Imm, 5, 0x0600, typed);
    {
        let llc = g.b.new_label();
        g.check(2, 16, llc);
        g.load16(0, 2, 14);
        g.b.jump_imm(Op::Jne64Imm, 0, 0xffff, llc);
        g.put_imm(field::ETH_TYPE, 1);
        g.b.jump(done);
        g.b.bind(llc);
        g.put_imm(field::ETH_TYPE, 4);
        g.b.jump(done);
    }
    g.b.bind(typed);
    g.b.alu_reg(Op::Mov64Reg, 4, 2);
    g.b.alu_imm(Op::Add64Imm, 4, 14);
    let tags_done = g.b.new_label();
    let short_tag = g.b.new_label();
    for depth in 0..2 {
        let is_tag = g.b.new_label();
        g.b.jump_imm(Op::Jeq64Imm, 5, 0x8100, is_tag);
        g.b.jump_imm(Op::Jne64Imm, 5, 0x88a8, tags_done);
        g.b.bind(is_tag);
        g.check(4, 4, short_tag);
        let (id, prio, tpid) = if depth == 0 {
            (field::VLAN_ID, field::VLAN_PRIO, field::VLAN_TPID)
        } else {
            (field::CVLAN_ID, field::CVLAN_PRIO, field::CVLAN_TPID)
        };
        g.load16(1, 4, 0);
        g.b.alu_reg(Op::Mov64Reg, 0, 1);
        g.b.alu_imm(Op::And64Imm, 0, 0x0fff);
        g.put(id, 0);
        g.b.alu_reg(Op::Mov64Reg, 0, 1);
        g.b.alu_imm(Op::Rsh64Imm, 0, 13);
        g.put(prio, 0);
        g.b.alu_reg(Op::Mov64Reg, 0, 5);
        g.put(tpid, 0);
        g.load16(5, 4, 2);
        g.b.alu_imm(Op::Add64Imm, 4, 4);
    }
    g.b.bind(tags_done);
    g.b.alu_reg(Op::Mov64Reg, 0, 5);
    g.put(field::ETH_TYPE, 0);
    let (v4, v6, arp, mpls) = (g.b.new_label(), g.b.new_label(), g.b.new_label(), g.b.new_label());
    g.b.jump_imm(Op::Jeq64Imm, 5, 0x0800, v4);
    g.b.jump_imm(Op::Jeq64Imm, 5, 0x86dd, v6);
    g.b.jump_imm(Op::Jeq64Imm, 5, 0x0806, arp);
    g.b.jump_imm(Op::Jeq64Imm, 5, 0x8035, arp);
    g.b.jump_imm(Op::Jeq64Imm, 5, 0x8847, mpls);
    g.b.jump_imm(Op::Jeq64Imm, 5, 0x8848, mpls);
    g.b.jump(done);
    g.b.bind(short_tag);
    g.b.alu_reg(Op::Mov64Reg, 0, 5);
    g.put(field::ETH_TYPE, 0);
    g.b.jump(done);

    let transport = g.b.new_label();
    // IPv4.
    g.b.bind(v4);
    g.check(4, 20, done);
    g.b.load(Op::LdxB, 1, 4, 0);
    g.b.alu_imm(Op::And64Imm, 1, 0x0f);
    g.b.alu_imm(Op::Lsh64Imm, 1, 2);
    g.b.jump_imm(Op::Jlt64Imm, 1, 20, done);
    g.b.alu_reg(Op::Mov64Reg, 0, 4);
    g.b.alu_reg(Op::Add64Reg, 0, 1);
    g.b.jump_reg(Op::Jgt64Reg, 0, 3, done);
    g.put_imm(field::FLAGS, u32::from(ADDR_V4));
    g.copy(field::IP_PROTO, 4, 9);
    g.copy(field::IPV4_SRC, 4, 12);
    g.copy(field::IPV4_DST, 4, 16);
    g.copy(field::IP_TOS, 4, 1);
    g.copy(field::IP_TTL, 4, 8);
    g.load16(0, 4, 6);
    let frag = g.b.new_label();
    g.b.jump_imm(Op::Jset64Imm, 0, 0x3fff, frag);
    let whole = g.b.new_label();
    g.b.jump(whole);
    g.b.bind(frag);
    g.fragment_flags(ADDR_V4, 0x1fff, done);
    g.b.bind(whole);
    if g.layout.need.l4 {
        g.b.load(Op::LdxB, 5, 4, 9);
        g.b.alu_reg(Op::Add64Reg, 4, 1);
        g.b.jump(transport);
    } else {
        g.b.jump(done);
    }

    // IPv6.
    g.b.bind(v6);
    g.check(4, 40, done);
    g.put_imm(field::FLAGS, u32::from(ADDR_V6));
    g.copy(field::IPV6_SRC, 4, 8);
    g.copy(field::IPV6_DST, 4, 24);
    g.load16(0, 4, 0);
    g.b.alu_imm(Op::Rsh64Imm, 0, 4);
    g.b.alu_imm(Op::And64Imm, 0, 0xff);
    g.put(field::IP_TOS, 0);
    g.copy(field::IP_TTL, 4, 7);
    g.b.load(Op::LdxB, 5, 4, 6);
    g.b.alu_imm(Op::Add64Imm, 4, 40);
    let set_proto = g.b.new_label();
    let frag6 = g.b.new_label();
    for _ in 0..IPV6_EXT_HEADERS {
        let ext = g.b.new_label();
        let next = g.b.new_label();
        g.b.jump_imm(Op::Jeq64Imm, 5, 0, ext);
        g.b.jump_imm(Op::Jeq64Imm, 5, 43, ext);
        g.b.jump_imm(Op::Jeq64Imm, 5, 60, ext);
        g.b.jump_imm(Op::Jeq64Imm, 5, 44, frag6);
        g.b.jump(set_proto);
        g.b.bind(ext);
        // Cut short: the protocol is the header's own number.
        let short = g.b.new_label();
        g.check(4, 2, short);
        g.b.load(Op::LdxB, 1, 4, 1);
        g.b.load(Op::LdxB, 5, 4, 0);
        g.b.alu_imm(Op::Add64Imm, 1, 1);
        g.b.alu_imm(Op::Lsh64Imm, 1, 3);
        g.b.alu_reg(Op::Add64Reg, 4, 1);
        g.b.jump(next);
        g.b.bind(short);
        g.b.alu_reg(Op::Mov64Reg, 0, 5);
        g.put(field::IP_PROTO, 0);
        g.b.jump(done);
        g.b.bind(next);
    }
    // Deeper than the walk goes: as if the next header were the transport.
    g.b.jump_imm(Op::Jeq64Imm, 5, 44, frag6);
    g.b.jump(set_proto);
    g.b.bind(frag6);
    {
        g.b.alu_reg(Op::Mov64Reg, 0, 5);
        g.put(field::IP_PROTO, 0);
        g.check(4, 8, done);
        g.load16(0, 4, 2);
        g.fragment_flags(ADDR_V6, 0xfff8, done);
    }
    g.b.bind(set_proto);
    g.b.alu_reg(Op::Mov64Reg, 0, 5);
    g.put(field::IP_PROTO, 0);
    if g.layout.need.l4 {
        g.b.jump(transport);
    } else {
        g.b.jump(done);
    }

    // ARP and RARP: Ethernet/IPv4 requests and replies.
    g.b.bind(arp);
    g.check(4, 28, done);
    g.load16(0, 4, 0);
    g.b.jump_imm(Op::Jne64Imm, 0, 1, done);
    g.load16(0, 4, 2);
    g.b.jump_imm(Op::Jne64Imm, 0, 0x0800, done);
    g.b.load(Op::LdxB, 0, 4, 4);
    g.b.jump_imm(Op::Jne64Imm, 0, 6, done);
    g.b.load(Op::LdxB, 0, 4, 5);
    g.b.jump_imm(Op::Jne64Imm, 0, 4, done);
    g.load16(0, 4, 6);
    let op_ok = g.b.new_label();
    g.b.jump_imm(Op::Jeq64Imm, 0, 1, op_ok);
    g.b.jump_imm(Op::Jne64Imm, 0, 2, done);
    g.b.bind(op_ok);
    g.put(field::ARP_OP, 0);
    g.copy(field::ARP_SHA, 4, 8);
    g.copy(field::ARP_SIP, 4, 14);
    g.copy(field::ARP_THA, 4, 18);
    g.copy(field::ARP_TIP, 4, 24);
    g.b.jump(done);

    // MPLS: the first label stack entry.
    g.b.bind(mpls);
    g.check(4, 4, done);
    g.b.load(Op::LdxW, 1, 4, 0);
    g.b.byte_swap(Op::Be32, 1);
    g.b.alu_reg(Op::Mov64Reg, 0, 1);
    g.b.alu_imm(Op::Rsh64Imm, 0, 12);
    g.put(field::MPLS_LABEL, 0);
    g.b.alu_reg(Op::Mov64Reg, 0, 1);
    g.b.alu_imm(Op::Rsh64Imm, 0, 9);
    g.b.alu_imm(Op::And64Imm, 0, 7);
    g.put(field::MPLS_TC, 0);
    g.b.alu_reg(Op::Mov64Reg, 0, 1);
    g.b.alu_imm(Op::Rsh64Imm, 0, 8);
    g.b.alu_imm(Op::And64Imm, 0, 1);
    g.put(field::MPLS_BOS, 0);
    g.b.alu_reg(Op::Mov64Reg, 0, 1);
    g.b.alu_imm(Op::And64Imm, 0, 0xff);
    g.put(field::MPLS_TTL, 0);
    g.b.jump(done);

    // Transport: r4 = its header, r5 = the protocol (jumped to only when the rules read it).
    if g.layout.need.l4 {
        g.b.bind(transport);
        let (ports, icmp) = (g.b.new_label(), g.b.new_label());
        for p in [6, 17, 136, 132, 33, 50] {
            g.b.jump_imm(Op::Jeq64Imm, 5, p, ports);
        }
        let ah = g.b.new_label();
        g.b.jump_imm(Op::Jeq64Imm, 5, 51, ah);
        g.b.jump_imm(Op::Jeq64Imm, 5, 1, icmp);
        g.b.jump_imm(Op::Jeq64Imm, 5, 58, icmp);
        g.b.jump(done);
        g.b.bind(ah);
        g.b.alu_reg(Op::Mov64Reg, 1, 4);
        g.b.alu_imm(Op::Add64Imm, 1, 4);
        let have_ports = g.b.new_label();
        g.b.jump(have_ports);
        g.b.bind(ports);
        g.b.alu_reg(Op::Mov64Reg, 1, 4);
        g.b.bind(have_ports);
        let flags = g.b.new_label();
        g.check(1, 4, flags);
        g.copy(field::SRC_PORT, 1, 0);
        g.copy(field::DST_PORT, 1, 2);
        g.b.bind(flags);
        if g.want(field::TCP_FLAGS) {
            g.b.jump_imm(Op::Jne64Imm, 5, 6, done);
            g.check(4, 20, done);
            g.load16(0, 4, 12);
            g.b.alu_reg(Op::Mov64Reg, 1, 0);
            g.b.alu_imm(Op::Rsh64Imm, 1, 12);
            g.b.jump_imm(Op::Jlt64Imm, 1, 5, done);
            g.b.alu_imm(Op::And64Imm, 0, 0x0fff);
            g.put(field::TCP_FLAGS, 0);
        }
        g.b.jump(done);
        g.b.bind(icmp);
        g.check(4, 2, done);
        g.copy(field::ICMP_TYPE, 4, 0);
        g.copy(field::ICMP_CODE, 4, 1);
        g.b.jump(done);
    }
}

/// The search and the actions for table generation `gen`. Registers: r6 best rank, r7
/// best slot (low half) and action (high half), r8 chain index, r9 restarts.
///
/// When every goto goes to a later chain ([`Layout::forward`]), each chain's code is
/// followed by its own actions and a goto jumps forward to the chain's code: no loop,
/// no restart counter, and verifiers walk each chain once. Otherwise one dispatch loop
/// takes the chain index and counts restarts (tc's limit), which verifiers unroll.
fn search(g: &mut Gen<'_>, gen: usize) {
    let layout = g.layout;
    let n = layout.chains.len();
    if layout.forward {
        let labels: Vec<_> = (0..n).map(|_| g.b.new_label()).collect();
        for (ci, &chain) in layout.chains.iter().enumerate() {
            g.b.bind(labels[ci]);
            probe_chain(g, gen, chain);
            tail(g, &mut |g, pass| {
                for (cj, l) in labels.iter().enumerate().skip(ci + 1) {
                    g.b.jump_imm(Op::Jeq64Imm, 1, cj as i32, *l);
                }
                g.b.jump(pass);
            });
        }
        return;
    }
    let key_words = layout.subtables.iter().map(|st| st.words().len().max(1)).max().unwrap_or(1);
    g.b.alu_imm(Op::Mov64Imm, 8, 0);
    g.b.alu_imm(Op::Mov64Imm, 9, 0);
    let dispatch = g.b.here();
    let decide = g.b.new_label();
    let chain_labels: Vec<_> = layout.chains.iter().map(|_| g.b.new_label()).collect();
    for (ci, l) in chain_labels.iter().enumerate() {
        g.b.jump_imm(Op::Jeq64Imm, 8, ci as i32, *l);
    }
    // (Not reached: the index is always a chain's; r6 says "no match" there.)
    g.b.alu_imm(Op::Mov64Imm, 6, -1);
    g.b.jump(decide);
    for (ci, &chain) in layout.chains.iter().enumerate() {
        g.b.bind(chain_labels[ci]);
        probe_chain(g, gen, chain);
        g.b.jump(decide);
    }
    g.b.bind(decide);
    tail(g, &mut |g, _pass| {
        let drop = g.b.new_label();
        g.b.alu_imm(Op::Add64Imm, 9, 1);
        g.b.jump_imm(Op::Jgt64Imm, 9, MAX_RESTARTS, drop);
        g.b.alu_reg(Op::Mov64Reg, 8, 1);
        // The lookup key's words cleared before the restart: what the last probe left
        // there differs from chain to chain, and verifiers that compare the stack slot by
        // slot (weir's) would otherwise keep one state per leftover at the loop head and
        // again after every probe of the next round (221,000 instructions and 50,000
        // states on one 16-subtable set; the kernel drops dead slots by itself).
        for j in 0..key_words {
            g.b.store_imm(Op::StDw, 10, LKEY + (j * 8) as i16, 0);
        }
        g.b.jump(dispatch);
        g.b.bind(drop);
        g.b.alu_imm(Op::Mov64Imm, 0, xdp_action::DROP as i32);
        g.b.exit();
    });
}

/// The probes of `chain`'s subtables: r6 and r7 the best hit (r6 = -1: none).
fn probe_chain(g: &mut Gen<'_>, gen: usize, chain: u32) {
    let layout = g.layout;
    let n_sub = layout.subtables.len();
    g.b.alu_imm(Op::Mov64Imm, 6, -1);
    g.b.alu_imm(Op::Mov64Imm, 7, 0);
    for (s, st) in layout.subtables.iter().enumerate() {
        if st.chain != chain {
            continue;
        }
        let words = st.words();
        if words.is_empty() {
            g.b.store_imm(Op::StDw, 10, LKEY, 0);
        }
        for (j, &w) in words.iter().enumerate() {
            g.b.load(Op::LdxDw, 1, 10, KEY + (w * 8) as i16);
            let m = st.mask.word(w);
            if m != u64::MAX {
                g.b.lddw(2, m as i64);
                g.b.alu_reg(Op::And64Reg, 1, 2);
            }
            g.b.store_reg(Op::StxDw, 10, LKEY + (j * 8) as i16, 1);
        }
        g.map(1, 3 + gen * n_sub + s);
        g.b.alu_reg(Op::Mov64Reg, 2, 10);
        g.b.alu_imm(Op::Add64Imm, 2, i32::from(LKEY));
        g.b.call_helper(HELPER_MAP_LOOKUP);
        let next = g.b.new_label();
        g.b.jump_imm(Op::Jeq64Imm, 0, 0, next);
        g.b.load(Op::LdxDw, 1, 0, 0);
        g.b.jump_reg(Op::Jge64Reg, 1, 6, next);
        // The rank loaded again rather than copied: the copy would carry the bounds
        // the comparison gave it, a different state after every probe for a verifier
        // to explore (weir's took seconds on 16 subtables); a fresh load is just
        // "any value" and the states after each probe merge.
        g.b.load(Op::LdxDw, 6, 0, 0);
        g.b.load(Op::LdxDw, 7, 0, 8);
        g.b.bind(next);
    }
}

/// After the probes: no hit passes; a hit is counted and its action applied; a goto
/// (r1 = the chain index) is `goto`'s to emit (given the pass label).
fn tail(g: &mut Gen<'_>, goto: &mut dyn FnMut(&mut Gen<'_>, weir_program::Label)) {
    let pass = g.b.new_label();
    g.b.jump_imm(Op::Jeq64Imm, 6, -1, pass);
    // Count: wf_counters[slot] += (1, length).
    g.b.store_reg(Op::StxW, 10, SCRATCH, 7);
    g.map(1, 1);
    g.b.alu_reg(Op::Mov64Reg, 2, 10);
    g.b.alu_imm(Op::Add64Imm, 2, i32::from(SCRATCH));
    g.b.call_helper(HELPER_MAP_LOOKUP);
    let counted = g.b.new_label();
    g.b.jump_imm(Op::Jeq64Imm, 0, 0, counted);
    g.b.load(Op::LdxDw, 1, 0, 0);
    g.b.alu_imm(Op::Add64Imm, 1, 1);
    g.b.store_reg(Op::StxDw, 0, 0, 1);
    g.b.load(Op::LdxDw, 1, 0, 8);
    g.b.load(Op::LdxDw, 2, 10, LEN);
    g.b.alu_reg(Op::Add64Reg, 1, 2);
    g.b.store_reg(Op::StxDw, 0, 8, 1);
    g.b.bind(counted);
    // r1 = the argument, r2 = the kind, from the action word (high half of r7).
    let (drop, redirect, goto_l) = (g.b.new_label(), g.b.new_label(), g.b.new_label());
    // A rule with edits: the edits' block. An edited packet ends there: `rule_act`
    // refuses a goto after an edit.
    if !g.layout.edits.is_empty() {
        g.b.alu_reg(Op::Mov64Reg, 1, 7);
        g.b.alu_imm(Op::Rsh64Imm, 1, 48);
        g.b.alu_imm(Op::And64Imm, 1, 0xff);
        g.b.jump_imm(Op::Jne64Imm, 1, 0, g.edits);
    }
    // The action.
    decode_action(g);
    g.b.jump_imm(Op::Jeq64Imm, 2, act::DROP as i32, drop);
    g.b.jump_imm(Op::Jeq64Imm, 2, act::REDIRECT as i32, redirect);
    g.b.jump_imm(Op::Jeq64Imm, 2, act::GOTO as i32, goto_l);
    verdict_exits(g, pass, drop, redirect);
    g.b.bind(goto_l);
    goto(g, pass);
}

/// The action word in r7 taken apart: r1 = the argument, r2 = the kind.
fn decode_action(g: &mut Gen<'_>) {
    g.b.alu_reg(Op::Mov64Reg, 1, 7);
    g.b.alu_imm(Op::Rsh64Imm, 1, 32);
    g.b.alu_reg(Op::Mov64Reg, 2, 1);
    g.b.alu_imm(Op::Rsh64Imm, 2, 24);
    g.b.alu_imm(Op::And64Imm, 1, 0xffff);
}

/// The three verdicts' exits, bound at `pass`, `drop` and `redirect` (r1 = the redirect's
/// device slot): one shape for the lookup's tail and the edits' block.
fn verdict_exits(
    g: &mut Gen<'_>,
    pass: weir_program::Label,
    drop: weir_program::Label,
    redirect: weir_program::Label,
) {
    g.b.bind(pass);
    g.b.alu_imm(Op::Mov64Imm, 0, xdp_action::PASS as i32);
    g.b.exit();
    g.b.bind(drop);
    g.b.alu_imm(Op::Mov64Imm, 0, xdp_action::DROP as i32);
    g.b.exit();
    g.b.bind(redirect);
    g.b.alu_reg(Op::Mov64Reg, 2, 1);
    g.map(1, 2);
    g.b.alu_imm(Op::Mov64Imm, 3, 0);
    g.b.call_helper(HELPER_REDIRECT_MAP);
    g.b.exit();
}

/// The packet edits, one block for the whole program (r7 = the winning rule's action
/// word, counted already): the edit list the word names, then its verdict (pass, drop or
/// redirect). Every chain's and generation's tail jumps here, so that the edits' code
/// (a checksum's loop among it) is there once, and verifiers walk it once: the stack is
/// zeroed first (the key is not read again), so the states that come in from the
/// different searches are one. (Each tail had its own copy, and a rule set of 3 chains
/// and 6 edit lists with checksums took weir's verifier past a million instructions.)
fn edits_block(g: &mut Gen<'_>) {
    g.b.bind(g.edits);
    let mut at = -8i16;
    while at >= CSUM_ACT {
        if at != CTX {
            g.b.store_imm(Op::StDw, 10, at, 0);
        }
        at -= 8;
    }
    let (pass, drop, redirect) = (g.b.new_label(), g.b.new_label(), g.b.new_label());
    g.b.alu_reg(Op::Mov64Reg, 1, 7);
    g.b.alu_imm(Op::Rsh64Imm, 1, 48);
    g.b.alu_imm(Op::And64Imm, 1, 0xff);
    let labels: Vec<_> = g.layout.edits.iter().map(|_| g.b.new_label()).collect();
    for (i, l) in labels.iter().enumerate() {
        g.b.jump_imm(Op::Jeq64Imm, 1, i as i32 + 1, *l);
    }
    g.b.jump(pass);
    let edited = g.b.new_label();
    for (i, l) in labels.iter().enumerate() {
        g.b.bind(*l);
        for kind in &g.layout.edits[i] {
            edit(g, kind);
        }
        g.b.jump(edited);
    }
    g.b.bind(edited);
    decode_action(g);
    g.b.jump_imm(Op::Jeq64Imm, 2, act::DROP as i32, drop);
    g.b.jump_imm(Op::Jeq64Imm, 2, act::REDIRECT as i32, redirect);
    verdict_exits(g, pass, drop, redirect);
}

/// r1 = ctx, r2 = data, r3 = data_end, as the context says now (after a helper moved the
/// packet's start, the old pointers are gone).
fn reload(g: &mut Gen<'_>) {
    g.b.load(Op::LdxDw, 1, 10, CTX);
    g.b.load(Op::LdxW, 2, 1, 0);
    g.b.load(Op::LdxW, 3, 1, 4);
}

/// The MAC addresses (r2 + 0..12) to MACS and back (r4 scratch).
fn save_macs(g: &mut Gen<'_>) {
    g.b.load(Op::LdxDw, 4, 2, 0);
    g.b.store_reg(Op::StxDw, 10, MACS, 4);
    g.b.load(Op::LdxW, 4, 2, 8);
    g.b.store_reg(Op::StxW, 10, MACS + 8, 4);
}

fn restore_macs(g: &mut Gen<'_>) {
    g.b.load(Op::LdxDw, 4, 10, MACS);
    g.b.store_reg(Op::StxDw, 2, 0, 4);
    g.b.load(Op::LdxW, 4, 10, MACS + 8);
    g.b.store_reg(Op::StxW, 2, 8, 4);
}

/// `bpf_xdp_adjust_head(ctx, delta)`; a failure goes to `fail`.
fn adjust_head(g: &mut Gen<'_>, delta: i32, fail: weir_program::Label) {
    g.b.load(Op::LdxDw, 1, 10, CTX);
    g.b.alu_imm(Op::Mov64Imm, 2, delta);
    g.b.call_helper(HELPER_ADJUST_HEAD);
    g.b.jump_imm(Op::Jne64Imm, 0, 0, fail);
}

/// `if the packet has no VLAN tag at 12 goto fail` (r0 scratch; r2/r3 the packet, 16
/// bytes or more checked).
fn tagged_or(g: &mut Gen<'_>, fail: weir_program::Label) {
    let ok = g.b.new_label();
    g.load16(0, 2, 12);
    g.b.jump_imm(Op::Jeq64Imm, 0, 0x8100, ok);
    g.b.jump_imm(Op::Jne64Imm, 0, 0x88a8, fail);
    g.b.bind(ok);
}

/// One packet edit, as the user-space action engine (`crate::engine`) makes it to the
/// bytes: `vlan pop` takes the outer tag out (a tagged frame of 18 bytes or more), `push`
/// puts a tag in at 12 (a frame of 12 bytes or more), `modify` rewrites the outer tag's
/// TPID and TCI. A frame the edit does not apply to is left alone. Clobbers r0-r5.
fn edit(g: &mut Gen<'_>, kind: &ActionKind) {
    let skip = g.b.new_label();
    reload(g);
    match *kind {
        ActionKind::VlanPop => {
            g.check(2, 18, skip);
            tagged_or(g, skip);
            save_macs(g);
            adjust_head(g, 4, skip);
            reload(g);
            g.check(2, 12, skip);
            restore_macs(g);
        }
        ActionKind::VlanPush { id, prio, tpid } => {
            let tci = (u16::from(prio.unwrap_or(0)) << 13) | id;
            g.check(2, 12, skip);
            save_macs(g);
            adjust_head(g, -4, skip);
            reload(g);
            g.check(2, 16, skip);
            restore_macs(g);
            let [a, b] = tpid.to_be_bytes();
            let [c, d] = tci.to_be_bytes();
            g.b.alu_imm(Op::Mov64Imm, 4, i32::from_ne_bytes([a, b, c, d]));
            g.b.store_reg(Op::StxW, 2, 12, 4);
        }
        ActionKind::VlanModify { id, prio, tpid } => {
            g.check(2, 16, skip);
            tagged_or(g, skip);
            g.load16(4, 2, 14);
            g.b.alu_imm(Op::And64Imm, 4, 0xf000);
            g.b.alu_imm(Op::Or64Imm, 4, i32::from(id));
            if let Some(p) = prio {
                g.b.alu_imm(Op::And64Imm, 4, 0x1fff);
                g.b.alu_imm(Op::Or64Imm, 4, i32::from(p) << 13);
            }
            g.b.byte_swap(Op::Be16, 4);
            g.b.store_reg(Op::StxH, 2, 14, 4);
            g.b.alu_imm(Op::Mov64Imm, 4, i32::from(u16::from_ne_bytes(tpid.to_be_bytes())));
            g.b.store_reg(Op::StxH, 2, 12, 4);
        }
        ActionKind::Pedit(ref munges) => {
            for m in munges {
                munge(g, m);
            }
        }
        ActionKind::Csum(targets) => {
            if targets & csum::IPV4_HEADER != 0 {
                csum_ipv4_header(g);
            }
            if targets & !csum::IPV4_HEADER != 0 {
                csum_transport(g, targets);
            }
        }
        // `rule_act` lets through only the edits above.
        _ => {}
    }
    g.b.bind(skip);
}

/// r4 = the network header's start as the action engine finds it (after Ethernet and up
/// to two VLAN tags whatever the EtherType; none in an 802.3 frame or a frame cut inside
/// a tag: `none`), r5 = the EtherType after the tags. r2/r3 the packet.
fn network_header(g: &mut Gen<'_>, none: weir_program::Label) {
    g.b.alu_reg(Op::Mov64Reg, 4, 2);
    g.check(2, 14, none);
    g.load16(5, 2, 12);
    g.b.jump_imm(Op::Jlt64Imm, 5, 0x0600, none);
    g.b.alu_imm(Op::Add64Imm, 4, 14);
    let untagged = g.b.new_label();
    for _ in 0..2 {
        let tagged = g.b.new_label();
        g.b.jump_imm(Op::Jeq64Imm, 5, 0x8100, tagged);
        g.b.jump_imm(Op::Jne64Imm, 5, 0x88a8, untagged);
        g.b.bind(tagged);
        g.check(4, 4, none);
        g.load16(5, 4, 2);
        g.b.alu_imm(Op::Add64Imm, 4, 4);
    }
    g.b.bind(untagged);
}

/// The IPv4 header at r4 (r3 = data_end): its length in bytes (IHL * 4) into `dst`, or a
/// jump to `fail` when its fixed 20 bytes, its IHL (under 5) or its options do not fit the
/// frame. Clobbers r0.
fn ipv4_header_len(g: &mut Gen<'_>, dst: u8, fail: weir_program::Label) {
    g.check(4, 20, fail);
    g.b.load(Op::LdxB, dst, 4, 0);
    g.b.alu_imm(Op::And64Imm, dst, 0x0f);
    g.b.alu_imm(Op::Lsh64Imm, dst, 2);
    g.b.jump_imm(Op::Jlt64Imm, dst, 20, fail);
    g.b.alu_reg(Op::Mov64Reg, 0, 4);
    g.b.alu_reg(Op::Add64Reg, 0, dst);
    g.b.jump_reg(Op::Jgt64Reg, 0, 3, fail);
}

/// `csum iph` as act_csum (and the action engine's `fix_checksums`) makes it: the IPv4
/// header's checksum recomputed whole (not updated from the old one, so a packet that
/// came with a wrong checksum leaves with a right one), for an IPv4 packet whose header
/// (IHL of 5 or more) fits in the frame. The header's 20 fixed bytes are summed in
/// line, then up to 40 bytes of options one half-word each behind a test of the IHL.
/// Clobbers r0-r5.
fn csum_ipv4_header(g: &mut Gen<'_>) {
    let skip = g.b.new_label();
    reload(g);
    network_header(g, skip);
    g.b.jump_imm(Op::Jne64Imm, 5, 0x0800, skip);
    // r1 = the header's length in bytes.
    ipv4_header_len(g, 1, skip);
    g.b.store_imm(Op::StH, 4, 10, 0);
    // r5 = the sum of the header's half-words (no overflow in 64 bits).
    g.b.alu_imm(Op::Mov64Imm, 5, 0);
    for k in (0..20).step_by(2) {
        g.load16(0, 4, k);
        g.b.alu_reg(Op::Add64Reg, 5, 0);
    }
    let fold = g.b.new_label();
    for k in (20..60).step_by(2) {
        g.b.jump_imm(Op::Jle64Imm, 1, i32::from(k), fold);
        // Known from the IHL test above; said again for verifiers, which do not carry a
        // bound learnt through a pointer of variable offset back to r4.
        g.check(4, i32::from(k) + 2, skip);
        g.load16(0, 4, k);
        g.b.alu_reg(Op::Add64Reg, 5, 0);
    }
    g.b.bind(fold);
    for _ in 0..2 {
        g.b.alu_reg(Op::Mov64Reg, 0, 5);
        g.b.alu_imm(Op::Rsh64Imm, 0, 16);
        g.b.alu_imm(Op::And64Imm, 5, 0xffff);
        g.b.alu_reg(Op::Add64Reg, 5, 0);
    }
    g.b.alu_imm(Op::Xor64Imm, 5, 0xffff);
    g.b.byte_swap(Op::Be16, 5);
    g.b.store_reg(Op::StxH, 4, 10, 5);
    g.b.bind(skip);
}

/// One `pedit ex munge` as the action engine's `pedit` makes it: the header found again
/// for each munge (an earlier edit may have moved it). Ethernet fields are at the frame's
/// start; ip and ip6 fields after Ethernet and up to two VLAN tags whatever the EtherType
/// (none in an 802.3 frame or a frame cut inside a tag); tcp and udp fields at the
/// transport header as [`transport_header`] finds it, whatever the protocol (the kernel's
/// pedit does not look at it either). A field past the frame's end is left alone; `set`
/// writes the value's bytes; `add` adds per 32-bit word of the header (a carry stays
/// inside the field's bytes of that word). IPv6's traffic class and flow label, not whole
/// bytes, are a masked read-modify-write of the header's first word, as tc's pedit keys
/// (a mask and a value over a 32-bit word) make them. Clobbers r0-r6, r8.
fn munge(g: &mut Gen<'_>, m: &Munge) {
    let (hdr, _, _, _, _) = m.field.layout();
    let next = g.b.new_label();
    reload(g);
    match hdr {
        PeditHeader::Eth => {
            g.b.alu_reg(Op::Mov64Reg, 4, 2);
            munge_at(g, m, next);
        }
        PeditHeader::Ip | PeditHeader::Ip6 => {
            network_header(g, next);
            munge_at(g, m, next);
        }
        PeditHeader::Tcp | PeditHeader::Udp => {
            transport_header(g, next, &mut |g, _| {
                munge_at(g, m, next);
                g.b.jump(next);
            });
        }
    }
    g.b.bind(next);
}

/// The bytes of munge `m` written at r4 + the field's offset (r3 = data_end); a field
/// past the end goes to `next`. Clobbers r0, r5.
fn munge_at(g: &mut Gen<'_>, m: &Munge, next: weir_program::Label) {
    let (_, _, off, len, bits) = m.field.layout();
    g.check(4, (off + len) as i32, next);
    if let Some((shift, width)) = bits {
        // The field's bits of the big-endian word at `off`, the others kept.
        let fmask = ((1u64 << width) - 1) as u32;
        let v = u32::from_be_bytes([m.value[0], m.value[1], m.value[2], m.value[3]]) & fmask;
        let at = off as i16;
        g.b.load(Op::LdxW, 0, 4, at);
        g.b.byte_swap(Op::Be32, 0);
        if m.add {
            g.b.alu_reg(Op::Mov64Reg, 5, 0);
            g.b.alu_imm(Op::Rsh64Imm, 5, shift as i32);
            g.b.alu_imm(Op::Add64Imm, 5, v as i32);
            g.b.lddw(1, i64::from(fmask));
            g.b.alu_reg(Op::And64Reg, 5, 1);
            g.b.alu_imm(Op::Lsh64Imm, 5, shift as i32);
        } else {
            g.b.lddw(5, i64::from(v << shift));
        }
        g.b.lddw(1, i64::from(!(fmask << shift)));
        g.b.alu_reg(Op::And64Reg, 0, 1);
        g.b.alu_reg(Op::Or64Reg, 0, 5);
        g.b.byte_swap(Op::Be32, 0);
        g.b.store_reg(Op::StxW, 4, at, 0);
        return;
    }
    let value = &m.value[..len];
    let mut i = 0;
    while i < len {
        let j = (((off + i) / 4 + 1) * 4 - off).min(len);
        let at = (off + i) as i16;
        let piece = &value[i..j];
        if !m.add {
            for (k, &b) in piece.iter().enumerate() {
                g.b.store_imm(Op::StB, 4, at + k as i16, i32::from(b));
            }
        } else {
            let add = piece.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
            // Every whole-byte field is 1, 2, 4, 6 or 16 bytes at an offset of its size
            // or, for the MACs, of 2: pieces of 1, 2 or 4 bytes (a 1-byte store keeps the
            // sum's low byte).
            let (load, swap, store) = match piece.len() {
                1 => (Op::LdxB, None, Op::StxB),
                2 => (Op::LdxH, Some(Op::Be16), Op::StxH),
                _ => (Op::LdxW, Some(Op::Be32), Op::StxW),
            };
            g.b.load(load, 0, 4, at);
            if let Some(swap) = swap {
                g.b.byte_swap(swap, 0);
            }
            g.b.lddw(5, add as i64);
            g.b.alu_reg(Op::Add64Reg, 0, 5);
            // The word's byte order back; `be` keeps only the piece's low bytes.
            if let Some(swap) = swap {
                g.b.byte_swap(swap, 0);
            }
            g.b.store_reg(store, 4, at, 0);
        }
        i = j;
    }
}

/// The transport header where the action engine finds it (`crate::key::extract`'s
/// `Offsets::transport`): after an IPv4 header of IHL 5 or more that fits in the frame
/// and is not a fragment (MF or an offset), or after the IPv6 header and the hop-by-hop,
/// routing and destination-options headers (up to [`IPV6_EXT_HEADERS`], as the parser;
/// none at a fragment header or an extension header cut short). `found(g, version)` is
/// emitted once per IP version, with r4 = the transport header, r5 = the protocol, r6 =
/// the network header, r8 = the transport header's offset from it (a scalar), r2/r3 the
/// packet; it ends with a jump. No transport header: `none`. Clobbers r0, r1, r4-r6, r8.
fn transport_header(
    g: &mut Gen<'_>,
    none: weir_program::Label,
    found: &mut dyn FnMut(&mut Gen<'_>, u8),
) {
    network_header(g, none);
    g.b.alu_reg(Op::Mov64Reg, 6, 4);
    let v6 = g.b.new_label();
    g.b.jump_imm(Op::Jeq64Imm, 5, 0x86dd, v6);
    g.b.jump_imm(Op::Jne64Imm, 5, 0x0800, none);
    ipv4_header_len(g, 8, none);
    g.load16(0, 4, 6);
    g.b.jump_imm(Op::Jset64Imm, 0, 0x3fff, none);
    g.b.load(Op::LdxB, 5, 4, 9);
    g.b.alu_reg(Op::Add64Reg, 4, 8);
    found(g, 4);

    g.b.bind(v6);
    g.check(4, 40, none);
    g.b.load(Op::LdxB, 5, 4, 6);
    g.b.alu_imm(Op::Mov64Imm, 8, 40);
    g.b.alu_imm(Op::Add64Imm, 4, 40);
    let at = g.b.new_label();
    for _ in 0..IPV6_EXT_HEADERS {
        let ext = g.b.new_label();
        g.b.jump_imm(Op::Jeq64Imm, 5, 0, ext);
        g.b.jump_imm(Op::Jeq64Imm, 5, 43, ext);
        g.b.jump_imm(Op::Jeq64Imm, 5, 60, ext);
        g.b.jump_imm(Op::Jeq64Imm, 5, 44, none);
        g.b.jump(at);
        g.b.bind(ext);
        g.check(4, 2, none);
        g.b.load(Op::LdxB, 1, 4, 1);
        g.b.load(Op::LdxB, 5, 4, 0);
        g.b.alu_imm(Op::Add64Imm, 1, 1);
        g.b.alu_imm(Op::Lsh64Imm, 1, 3);
        g.b.alu_reg(Op::Add64Reg, 4, 1);
        g.b.alu_reg(Op::Add64Reg, 8, 1);
    }
    // Deeper than the walk goes: as if the next header were the transport (the parser's
    // known difference).
    g.b.jump_imm(Op::Jeq64Imm, 5, 44, none);
    g.b.bind(at);
    found(g, 6);
}

/// The longest TCP, UDP or ICMP segment `csum` sums: a frame in one XDP buffer (a page,
/// less the headroom) is shorter. A longer one aborts the program (`XDP_ABORTED`), never
/// a packet sent with a checksum left wrong.
pub const MAX_CSUM_SEGMENT: i32 = 4096;

/// Stack slots of [`csum_transport`]: the UDP flag, the checksum's offset in the frame,
/// the action word while r7 counts rounds.
const CSUM_UDP: i16 = MACS - 8;
const CSUM_AT: i16 = CSUM_UDP - 8;
const CSUM_ACT: i16 = CSUM_AT - 8;

/// `csum tcp|udp|icmp` as act_csum recomputes them (and the action engine's
/// `fix_checksums`): for a packet that is not a fragment, whose transport header
/// [`transport_header`] finds and whose IP length fits in the frame, the checksum of a
/// TCP, UDP, ICMP (IPv4) or ICMPv6 (IPv6) segment the targets name, summed whole over the
/// IP pseudo-header (not for ICMP over IPv4) and the segment; a UDP-over-IPv4 checksum of
/// 0 (none) stays 0; a UDP checksum that sums to 0 is written 0xffff (CSUM_MANGLED_0).
///
/// The segment, up to [`MAX_CSUM_SEGMENT`] bytes, is summed by `bpf_csum_diff` 64 bytes a
/// round, then a half-word a round for the rest: bounded loops, which verifiers unroll
/// (64 and 32 rounds), the rounds' count in r7 (the action word waits on the stack).
/// Every path (IP version, extension headers, protocol) enters the first loop with its
/// positions as plain numbers, not packet pointers of different offsets, and the length
/// as the distance between two pointers (an unknown number), and the second loop the
/// same way whichever round the first one ended: a verifier walks each loop once, and the
/// other paths meet a state it has seen. A half-word loop over the whole segment (2,048
/// rounds) took weir's verifier past a million instructions on one rule set. Clobbers
/// r0-r6, r8, r9.
fn csum_transport(g: &mut Gen<'_>, targets: u8) {
    let skip = g.b.new_label();
    let done = g.b.new_label();
    let sum = g.b.new_label();
    let too_long = g.b.new_label();
    reload(g);
    transport_header(g, skip, &mut |g, version| {
        // r0 = the segment's length: the IP length less the transport header's offset,
        // when the IP length fits in the frame and reaches the transport header.
        if version == 4 {
            g.load16(0, 6, 2);
        } else {
            g.load16(0, 6, 4);
            g.b.alu_imm(Op::Add64Imm, 0, 40);
        }
        g.b.alu_reg(Op::Mov64Reg, 1, 6);
        g.b.alu_reg(Op::Add64Reg, 1, 0);
        g.b.jump_reg(Op::Jgt64Reg, 1, 3, skip);
        g.b.jump_reg(Op::Jlt64Reg, 0, 8, skip);
        g.b.alu_reg(Op::Sub64Reg, 0, 8);
        g.b.jump_imm(Op::Jgt64Imm, 0, MAX_CSUM_SEGMENT, too_long);
        // r8 = the segment's length from here on (r0 is `check`'s).
        g.b.alu_reg(Op::Mov64Reg, 8, 0);
        let icmp = if version == 4 { 1 } else { 58 };
        for (proto, check_at, bit) in
            [(6, 16, csum::TCP), (17, 6, csum::UDP), (icmp, 2, csum::ICMP)]
        {
            if targets & bit == 0 {
                continue;
            }
            let other = g.b.new_label();
            g.b.jump_imm(Op::Jne64Imm, 5, proto, other);
            g.b.jump_imm(Op::Jlt64Imm, 8, check_at + 2, skip);
            g.check(4, check_at + 2, skip);
            if proto == 17 && version == 4 {
                g.b.load(Op::LdxH, 1, 4, 6);
                g.b.jump_imm(Op::Jeq64Imm, 1, 0, skip);
            }
            // r9 = the pseudo-header's sum (the addresses' half-words, the protocol, the
            // length; none for ICMP over IPv4), r1 = the checksum's offset from the
            // segment, the UDP flag (1: UDP) on the stack.
            g.b.alu_imm(Op::Mov64Imm, 9, 0);
            if !(version == 4 && proto == 1) {
                let (from, to) = if version == 4 { (12, 20) } else { (8, 40) };
                for k in (from..to).step_by(2) {
                    g.load16(1, 6, k);
                    g.b.alu_reg(Op::Add64Reg, 9, 1);
                }
                g.b.alu_imm(Op::Add64Imm, 9, proto);
                g.b.alu_reg(Op::Add64Reg, 9, 8);
            }
            g.b.alu_imm(Op::Mov64Imm, 1, i32::from(proto == 17));
            g.b.store_reg(Op::StxDw, 10, CSUM_UDP, 1);
            g.b.store_imm(Op::StH, 4, check_at as i16, 0);
            g.b.alu_imm(Op::Mov64Imm, 1, check_at);
            g.b.jump(sum);
            g.b.bind(other);
        }
        g.b.jump(skip);
    });

    // r8 = the segment's length, r1 = the checksum's offset in it (the field zeroed), r4 =
    // the segment, r9 = the pseudo-header's sum, the UDP flag on the stack. Every path
    // comes here with its own packet pointers, constants and stack; from here on they are
    // made one state for verifiers: numbers as distances between two packet pointers
    // (unknown to them), the stack the edits leave behind zeroed (the key is not read
    // again: an edited packet ends at its rule), the packet pointers loaded again. The
    // sums are kept in the machine's order (`bpf_csum_diff` sums native 32-bit words; one's
    // complement sums in either byte order are each other's byte swap, RFC 1071).
    let launder = |g: &mut Gen<'_>, r: u8| {
        g.b.alu_reg(Op::Mov64Reg, 0, 2);
        g.b.alu_reg(Op::Add64Reg, 0, r);
        g.b.alu_reg(Op::Mov64Reg, r, 0);
        g.b.alu_reg(Op::Sub64Reg, r, 2);
    };
    g.b.bind(sum);
    // The checksum's offset in the frame, on the stack.
    g.b.alu_reg(Op::Mov64Reg, 6, 4);
    g.b.alu_reg(Op::Add64Reg, 6, 1);
    g.b.alu_reg(Op::Sub64Reg, 6, 2);
    g.b.jump_imm(Op::Jgt64Imm, 6, 0x3fff + 16, skip);
    g.b.store_reg(Op::StxDw, 10, CSUM_AT, 6);
    // r6 = the segment's offset, r8 = its length, r9 = the pseudo-header's sum folded and
    // in the machine's order.
    g.b.alu_reg(Op::Mov64Reg, 6, 4);
    g.b.alu_reg(Op::Sub64Reg, 6, 2);
    g.b.jump_imm(Op::Jgt64Imm, 6, 0x3fff, skip);
    g.b.alu_reg(Op::Add64Reg, 8, 4);
    g.b.alu_reg(Op::Sub64Reg, 8, 4);
    fold16(g, 9);
    launder(g, 9);
    g.b.byte_swap(Op::Be16, 9);
    g.b.load(Op::LdxDw, 1, 10, CSUM_UDP);
    launder(g, 1);
    g.b.store_reg(Op::StxDw, 10, CSUM_UDP, 1);
    // The action word (r7) kept aside: r7 counts the loop's rounds.
    g.b.store_reg(Op::StxDw, 10, CSUM_ACT, 7);
    let mut at = -8i16;
    while at >= MACS {
        if at != CTX {
            g.b.store_imm(Op::StDw, 10, at, 0);
        }
        at -= 8;
    }
    reload(g);
    g.b.alu_reg(Op::Add64Reg, 6, 2);
    // 64 bytes a round by `bpf_csum_diff` (r6 the next, r8 the bytes left; r7's bound is
    // what verifiers see end the loop).
    const CHUNK: i32 = 64;
    let rest = g.b.new_label();
    g.b.alu_imm(Op::Mov64Imm, 7, 0);
    let head = g.b.here();
    g.b.jump_imm(Op::Jlt64Imm, 8, CHUNK, rest);
    g.b.jump_imm(Op::Jge64Imm, 7, MAX_CSUM_SEGMENT / CHUNK, too_long);
    g.b.load(Op::LdxDw, 1, 10, CTX);
    g.b.load(Op::LdxW, 3, 1, 4);
    // (Known from the IP length's test; said again for verifiers.)
    g.check(6, CHUNK, skip);
    g.b.alu_imm(Op::Mov64Imm, 1, 0);
    g.b.alu_imm(Op::Mov64Imm, 2, 0);
    g.b.alu_reg(Op::Mov64Reg, 3, 6);
    g.b.alu_imm(Op::Mov64Imm, 4, CHUNK);
    g.b.alu_reg(Op::Mov64Reg, 5, 9);
    g.b.call_helper(HELPER_CSUM_DIFF);
    g.b.alu_reg(Op::Mov64Reg, 9, 0);
    g.b.alu_imm(Op::Add64Imm, 6, CHUNK);
    g.b.alu_imm(Op::Sub64Imm, 8, CHUNK);
    g.b.alu_imm(Op::Add64Imm, 7, 1);
    g.b.jump(head);
    // The rest, under 64 bytes, a half-word a round (r4 the next, r5 the bytes left),
    // from numbers again: one state for verifiers whichever round the first loop ended.
    g.b.bind(rest);
    reload(g);
    g.b.alu_reg(Op::Mov64Reg, 4, 6);
    g.b.alu_reg(Op::Sub64Reg, 4, 2);
    g.b.jump_imm(Op::Jgt64Imm, 4, 0x3fff + MAX_CSUM_SEGMENT, skip);
    g.b.alu_reg(Op::Mov64Reg, 5, 6);
    g.b.alu_reg(Op::Add64Reg, 5, 8);
    g.b.alu_reg(Op::Sub64Reg, 5, 6);
    g.b.jump_imm(Op::Jge64Imm, 5, CHUNK, too_long);
    g.b.alu_reg(Op::Add64Reg, 4, 2);
    let head = g.b.here();
    let odd = g.b.new_label();
    let fold = g.b.new_label();
    g.b.jump_imm(Op::Jlt64Imm, 5, 2, odd);
    g.check(4, 2, odd);
    g.b.load(Op::LdxH, 1, 4, 0);
    g.b.alu_reg(Op::Add64Reg, 9, 1);
    g.b.alu_imm(Op::Add64Imm, 4, 2);
    g.b.alu_imm(Op::Sub64Imm, 5, 2);
    g.b.jump(head);
    g.b.bind(odd);
    g.b.jump_imm(Op::Jeq64Imm, 5, 0, fold);
    g.check(4, 1, fold);
    // The last byte is the high byte of a half-word padded with zero.
    g.b.load(Op::LdxB, 1, 4, 0);
    g.b.alu_imm(Op::Lsh64Imm, 1, 8);
    g.b.byte_swap(Op::Be16, 1);
    g.b.alu_reg(Op::Add64Reg, 9, 1);
    g.b.bind(fold);
    fold16(g, 9);
    g.b.alu_imm(Op::Xor64Imm, 9, 0xffff);
    // 0 becomes 0xffff for UDP, without a branch on the protocol: r0 = 1 when the
    // checksum is 0 and the UDP flag is 1, negated to all ones.
    g.b.alu_reg(Op::Mov64Reg, 0, 9);
    g.b.alu_imm(Op::Sub64Imm, 0, 1);
    g.b.alu_imm(Op::Rsh64Imm, 0, 63);
    g.b.load(Op::LdxDw, 1, 10, CSUM_UDP);
    g.b.alu_reg(Op::And64Reg, 0, 1);
    g.b.neg64(0);
    g.b.alu_imm(Op::And64Imm, 0, 0xffff);
    g.b.alu_reg(Op::Or64Reg, 9, 0);
    g.b.load(Op::LdxDw, 1, 10, CSUM_AT);
    g.b.alu_reg(Op::Add64Reg, 1, 2);
    g.check(1, 2, done);
    g.b.store_reg(Op::StxH, 1, 0, 9);
    g.b.jump(done);
    g.b.bind(too_long);
    g.b.alu_imm(Op::Mov64Imm, 0, xdp_action::ABORTED as i32);
    g.b.exit();
    g.b.bind(done);
    g.b.load(Op::LdxDw, 7, 10, CSUM_ACT);
    g.b.bind(skip);
}

/// `r` (a sum below 2^33) folded to 16 bits, one's complement (three end-around carries).
fn fold16(g: &mut Gen<'_>, r: u8) {
    for _ in 0..3 {
        g.b.alu_reg(Op::Mov64Reg, 0, r);
        g.b.alu_imm(Op::Rsh64Imm, 0, 16);
        g.b.alu_imm(Op::And64Imm, r, 0xffff);
        g.b.alu_reg(Op::Add64Reg, r, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str) -> RuleSet {
        RuleSet::parse(text).unwrap()
    }

    #[test]
    fn layout_text_round_trips() {
        let s = set("prio 1 protocol ip flower ip_proto tcp dst_port 80 action goto chain 3\n\
                     chain 3 prio 1 protocol all flower dst_mac 02:00:00:00:00:01 action mirred egress redirect dev d0\n");
        let dp = compile(&s, XdpOptions { capacity: 64 }).unwrap();
        assert_eq!(dp.layout.chains, vec![0, 3]);
        assert_eq!(dp.layout.devices, vec!["d0".to_string()]);
        assert_eq!(dp.layout.need, Need { l3: true, l4: true });
        let back = Layout::from_text(&dp.layout.to_text()).unwrap();
        assert_eq!(back, dp.layout);
        assert!(Layout::from_text("weir-flow-xdp 1\nsubtable 0 zz\n").is_err());
        // Edit lists: one per distinct list, shared by equal ones, read back as written.
        let s = set("prio 1 protocol all flower action vlan push id 7 priority 3 protocol 802.1ad pipe action vlan modify id 9 pipe action drop\n\
                     prio 2 protocol ip flower action vlan pop pipe action mirred egress redirect dev d1\n\
                     prio 3 protocol ip flower ip_ttl 3 action vlan pop pipe action drop\n");
        let dp = compile(&s, XdpOptions { capacity: 64 }).unwrap();
        assert_eq!(dp.layout.edits.len(), 2, "{:?}", dp.layout.edits);
        assert!(matches!(
            dp.layout.edits[0][0],
            ActionKind::VlanPush { id: 7, prio: Some(3), tpid: 0x88a8 }
        ));
        let back = Layout::from_text(&dp.layout.to_text()).unwrap();
        assert_eq!(back, dp.layout);
        // The action words name the list: (index + 1) in the second byte.
        let lists: Vec<u32> = dp
            .entries
            .iter()
            .filter(|e| e.0.starts_with("wf_t"))
            .map(|e| (u32::from_ne_bytes(e.2[12..16].try_into().unwrap()) >> 16) & 0xff)
            .collect();
        assert_eq!(lists, vec![1, 2, 2]);
        assert!(Layout::from_text("something else\n").is_err());
    }

    /// A port range is one exact entry a port, all counting into the rule's one slot; a
    /// better exact rule of the same mask takes its port's entry.
    #[test]
    fn port_ranges_are_exact_entries_of_one_slot() {
        let s = set("prio 1 protocol ip flower ip_proto tcp dst_port 11 action drop\n\
                     prio 2 protocol ip flower ip_proto tcp dst_port 10-13 action pass\n");
        let dp = compile(&s, XdpOptions::default()).unwrap();
        assert_eq!(dp.layout.subtables.len(), 1);
        let slots: Vec<u32> =
            dp.entries.iter().map(|e| u32::from_ne_bytes(e.2[8..12].try_into().unwrap())).collect();
        assert_eq!(dp.slots, vec![Some(0), Some(1)]);
        assert_eq!(slots, vec![0, 1, 1, 1], "port 11 is rule 1's, 10, 12, 13 rule 2's");
        let wide = set("prio 1 protocol ip flower ip_proto tcp src_port 1-5000 action drop\n");
        let e = compile(&wide, XdpOptions::default()).unwrap_err();
        assert!(e.message.contains("\"src_port\"") && e.message.contains("5000"), "{e}");
    }

    /// The better of two rules with one (chain, mask, key) holds the entry; a rule whose
    /// entry was there keeps its counter slot across an update, a new one takes a free
    /// slot; a rule of a mask the program lacks is refused.
    #[test]
    fn entries_keep_the_best_rank_and_the_slots() {
        let s = set("prio 5 protocol ip flower ip_proto udp action drop\n\
                     prio 2 protocol ip flower ip_proto udp action pass\n\
                     prio 3 protocol ip flower ip_proto tcp action drop\n");
        let dp = compile(&s, XdpOptions::default()).unwrap();
        assert_eq!(dp.slots, vec![None, Some(0), Some(1)]);
        let udp = dp.entries.iter().find(|e| e.1[6] == 17).unwrap();
        assert_eq!(u64::from_ne_bytes(udp.2[..8].try_into().unwrap()) >> 32, 2);
        // An update: tcp keeps slot 1, icmp takes the free slot 0.
        let keep: Vec<(usize, Vec<u8>, u32)> = dp
            .entries
            .iter()
            .map(|(_, k, v)| (0, k.clone(), u32::from_ne_bytes(v[8..12].try_into().unwrap())))
            .collect();
        let next = set("prio 3 protocol ip flower ip_proto tcp action drop\n\
                        prio 4 protocol ip flower ip_proto icmp action drop\n");
        let t = dp.layout.entries(&next, 1, &keep, &system_ifindex).unwrap();
        assert_eq!(t.slots, vec![Some(1), Some(0)]);
        assert!(t.entries.iter().all(|e| e.0 == table_map_name(1, 0)));
        let other_mask = set("prio 1 protocol ip flower ip_ttl 1 action drop\n");
        let e = dp.layout.entries(&other_mask, 1, &keep, &system_ifindex).unwrap_err();
        assert!(e.message.contains("compile again"), "{e}");
    }
}
