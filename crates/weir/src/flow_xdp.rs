//! The flow datapath for the kernel (`weir flow compile`, `weir flow update`): weir-flow's
//! XDP program written as an ELF object by weir-elf, with its layout and its first table
//! in weir's own sections, and the tables of a datapath running in the kernel rewritten
//! through its pinned maps (weir-sys).

use std::path::Path;
use std::time::Instant;

use weir_elf::write::{write_program, ObjectOptions};
use weir_elf::ObjectSpec;
use weir_flow::xdp::{self, Layout, XdpDatapath};
use weir_flow::{RuleError, RuleSet};
use weir_sys::kernel::{Kernel, KernelMap};

/// The program's function name (what `bpftool prog show` lists).
pub const FUNCTION: &str = "weir_flow";
/// The note that carries the layout.
pub const LAYOUT_NOTE: &str = "flow";

/// The object of a compiled datapath: BTF-defined maps pinned by name, the first table
/// as initial entries, the layout as a note.
pub fn object(datapath: &XdpDatapath) -> Result<Vec<u8>, String> {
    let options = ObjectOptions {
        pin_maps: true,
        entries: datapath.entries.clone(),
        notes: vec![(LAYOUT_NOTE.into(), datapath.layout.to_text().into_bytes())],
        ..ObjectOptions::new(FUNCTION)
    };
    write_program(&datapath.program, &options).map_err(|e| e.to_string())
}

/// The layout a `weir flow compile` object carries.
pub fn layout(bytes: &[u8]) -> Result<Layout, String> {
    let spec = ObjectSpec::parse(bytes).map_err(|e| e.to_string())?;
    let (_, note) = spec
        .notes
        .iter()
        .find(|(n, _)| n == LAYOUT_NOTE)
        .ok_or("not an object of `weir flow compile` (no flow layout note)")?;
    Layout::from_text(std::str::from_utf8(note).map_err(|_| "the flow layout is not text")?)
}

/// A map's (key, value) pairs.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// What an update did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpdateReport {
    /// The generation now in use.
    pub generation: u32,
    /// Table entries written.
    pub entries: usize,
    /// Mean time of one entry's `BPF_MAP_UPDATE_ELEM`, nanoseconds.
    pub per_entry_ns: u64,
}

#[derive(Debug)]
pub enum UpdateError {
    /// The rules do not fit the program (a refused rule, a new mask or chain or device).
    Rules(RuleError),
    /// A map could not be opened, read or written (the tables in use are untouched).
    Kernel(String),
}

impl From<RuleError> for UpdateError {
    fn from(e: RuleError) -> Self {
        UpdateError::Rules(e)
    }
}

/// The maps of a datapath in the kernel, pinned by name in one directory.
pub struct PinnedMaps {
    pub config: KernelMap,
    pub counters: KernelMap,
    pub devs: KernelMap,
    /// `tables[g][s]`.
    pub tables: [Vec<KernelMap>; 2],
}

impl PinnedMaps {
    pub fn open(layout: &Layout, dir: &Path) -> Result<PinnedMaps, String> {
        let kernel = Kernel::new();
        let specs = layout.maps();
        let open = |name: &str| -> Result<KernelMap, String> {
            let spec = specs.iter().find(|m| m.name == name).ok_or(format!("no map {name}"))?;
            let path = dir.join(name);
            kernel
                .map_open_pinned(&path, spec.map_type, spec.key_size, spec.value_size)
                .map_err(|e| format!("{}: {e}", path.display()))
        };
        let n = layout.subtables.len();
        let tables = [
            (0..n).map(|s| open(&xdp::table_map_name(0, s))).collect::<Result<Vec<_>, _>>()?,
            (0..n).map(|s| open(&xdp::table_map_name(1, s))).collect::<Result<Vec<_>, _>>()?,
        ];
        Ok(PinnedMaps {
            config: open(xdp::CONFIG_MAP)?,
            counters: open(xdp::COUNTERS_MAP)?,
            devs: open(xdp::DEVS_MAP)?,
            tables,
        })
    }

    /// The generation the program reads.
    pub fn generation(&self) -> Result<u32, String> {
        let mut v = [0u8; 4];
        self.config
            .lookup(Some(&0u32.to_ne_bytes()), &mut v)
            .map_err(|e| format!("{}: {e}", xdp::CONFIG_MAP))?;
        Ok(u32::from_ne_bytes(v) & 1)
    }

    /// Every (key, value) of a map.
    fn dump(map: &KernelMap, key_size: usize, value_size: usize) -> Result<Entries, String> {
        let mut out = Vec::new();
        let mut key: Option<Vec<u8>> = None;
        loop {
            let next = match map.get_next_key(key.as_deref()) {
                Ok(k) => k,
                Err(e) if e.raw_os_error() == Some(2) => break,
                Err(e) => return Err(e.to_string()),
            };
            let mut v = vec![0u8; value_size];
            if map.lookup(Some(&next), &mut v).is_ok() {
                out.push((next[..key_size].to_vec(), v));
            }
            key = Some(next);
        }
        Ok(out)
    }
}

/// The current table's entries as `(subtable, map key, counter slot)`.
fn current_slots(
    layout: &Layout,
    maps: &PinnedMaps,
    gen: usize,
) -> Result<Vec<(usize, Vec<u8>, u32)>, String> {
    let specs = layout.maps();
    let mut keep = Vec::new();
    for (s, map) in maps.tables[gen].iter().enumerate() {
        let key_size = specs
            .iter()
            .find(|m| m.name == xdp::table_map_name(gen, s))
            .map_or(8, |m| m.key_size as usize);
        for (key, value) in PinnedMaps::dump(map, key_size, xdp::VALUE_SIZE as usize)? {
            let slot = u32::from_ne_bytes([value[8], value[9], value[10], value[11]]);
            keep.push((s, key, slot));
        }
    }
    Ok(keep)
}

/// Per rule of `set` (the rules installed), in file order: (line, packets, bytes) from
/// the counters of the datapath pinned under `dir`, summed over CPUs (a rule another
/// shadows, or not in the table, counts 0).
pub fn stats_pinned(
    layout: &Layout,
    set: &RuleSet,
    dir: &Path,
) -> Result<Vec<(usize, u64, u64)>, UpdateError> {
    let maps = PinnedMaps::open(layout, dir).map_err(UpdateError::Kernel)?;
    let gen = maps.generation().map_err(UpdateError::Kernel)? as usize;
    let keep = current_slots(layout, &maps, gen).map_err(UpdateError::Kernel)?;
    let table = layout.entries(set, gen, &keep, &xdp::system_ifindex)?;
    let kept: std::collections::HashSet<u32> = keep.iter().map(|k| k.2).collect();
    let mut out = Vec::new();
    for (rule, slot) in set.rules.iter().zip(&table.slots) {
        let (mut p, mut b) = (0u64, 0u64);
        if let Some(slot) = slot.filter(|s| kept.contains(s)) {
            let mut v = vec![0u8; maps.counters.value_len()];
            maps.counters
                .lookup(Some(&slot.to_ne_bytes()), &mut v)
                .map_err(|e| UpdateError::Kernel(format!("{}: {e}", xdp::COUNTERS_MAP)))?;
            // Each possible CPU's 16 bytes, one after the other.
            for cpu in v.chunks_exact(xdp::COUNTER_SIZE as usize) {
                p += u64::from_ne_bytes(cpu[0..8].try_into().unwrap_or_default());
                b += u64::from_ne_bytes(cpu[8..16].try_into().unwrap_or_default());
            }
        }
        out.push((rule.line, p, b));
    }
    Ok(out)
}

/// Installs `set` in the datapath pinned under `dir`: the table is written into the
/// generation not in use, the devices' ifindexes into the devmap, then the program is
/// switched to it with one write of `wf_config[0]`. Rules whose (subtable, key) were in
/// the table keep their counters.
pub fn update_pinned(
    layout: &Layout,
    set: &RuleSet,
    dir: &Path,
) -> Result<UpdateReport, UpdateError> {
    let maps = PinnedMaps::open(layout, dir).map_err(UpdateError::Kernel)?;
    update_maps(layout, set, &maps)
}

/// [`update_pinned`] on maps already open (the datapath's, in [`Layout::maps`] order).
pub fn update_maps(
    layout: &Layout,
    set: &RuleSet,
    maps: &PinnedMaps,
) -> Result<UpdateReport, UpdateError> {
    let gen = maps.generation().map_err(UpdateError::Kernel)? as usize;
    let next = 1 - gen;
    let specs = layout.maps();
    let key_size = |g: usize, s: usize| {
        specs
            .iter()
            .find(|m| m.name == xdp::table_map_name(g, s))
            .map_or(8, |m| m.key_size as usize)
    };
    let keep = current_slots(layout, maps, gen).map_err(UpdateError::Kernel)?;
    let entries = layout.entries(set, next, &keep, &xdp::system_ifindex)?.entries;
    // Devices first: a redirect of the new table must find its device.
    for (i, dev) in layout.devices.iter().enumerate() {
        let path = format!("/sys/class/net/{dev}/ifindex");
        let ifindex: u32 = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| UpdateError::Kernel(format!("device {dev}: no such interface here")))?;
        maps.devs
            .update(Some(&(i as u32).to_ne_bytes()), &ifindex.to_ne_bytes(), 0)
            .map_err(|e| UpdateError::Kernel(format!("{}[{i}] = {dev}: {e}", xdp::DEVS_MAP)))?;
    }
    // Empty the generation not in use (it holds the table before the last update).
    for (s, map) in maps.tables[next].iter().enumerate() {
        for (key, _) in PinnedMaps::dump(map, key_size(next, s), xdp::VALUE_SIZE as usize)
            .map_err(UpdateError::Kernel)?
        {
            map.delete(&key).map_err(|e| UpdateError::Kernel(e.to_string()))?;
        }
    }
    // New counter slots start at zero.
    let kept: std::collections::HashSet<u32> = keep.iter().map(|(_, _, s)| *s).collect();
    let zero = vec![0u8; maps.counters.value_len()];
    let start = Instant::now();
    for (name, key, value) in &entries {
        let s = layout
            .subtables
            .iter()
            .enumerate()
            .position(|(s, _)| xdp::table_map_name(next, s) == *name)
            .unwrap_or(0);
        maps.tables[next][s].update(Some(key), value, 0).map_err(|e| {
            UpdateError::Kernel(format!("{name}: {e} (the table in use is unchanged)"))
        })?;
    }
    let elapsed = start.elapsed();
    for (_, _, value) in &entries {
        let slot = u32::from_ne_bytes([value[8], value[9], value[10], value[11]]);
        if !kept.contains(&slot) {
            maps.counters
                .update(Some(&slot.to_ne_bytes()), &zero, 0)
                .map_err(|e| UpdateError::Kernel(format!("{}: {e}", xdp::COUNTERS_MAP)))?;
        }
    }
    maps.config
        .update(Some(&0u32.to_ne_bytes()), &(next as u32).to_ne_bytes(), 0)
        .map_err(|e| UpdateError::Kernel(format!("{}: {e}", xdp::CONFIG_MAP)))?;
    Ok(UpdateReport {
        generation: next as u32,
        entries: entries.len(),
        per_entry_ns: elapsed.as_nanos() as u64 / entries.len().max(1) as u64,
    })
}
