//! weir's own sections in the objects it writes, which libbpf skips ("skipping
//! unrecognized data section") and the reader keeps:
//!
//! - `.weir.entries`: initial entries of hash and array maps, which libbpf has no way
//!   to carry (its `.maps` `values` are for map-in-map and program arrays only), so that
//!   `weir run` starts with the tables an emitter filled (a loader of the kernel starts
//!   empty, and weir fills the pinned maps). Records: `u16` name length, the map's name,
//!   `u32` key length, `u32` value length, key, value (little-endian), after the magic.
//! - `.weir.note.NAME`: bytes an emitter keeps with its object (the flow datapath keeps
//!   its layout), given back as [`crate::ObjectSpec::notes`] under `NAME`.

use crate::error::ElfError;

pub const ENTRIES_SECTION: &str = ".weir.entries";
pub const NOTE_PREFIX: &str = ".weir.note.";
const MAGIC: &[u8; 8] = b"WEIRENT1";

/// One initial entry: (map name, key, value).
pub type MapEntry = (String, Vec<u8>, Vec<u8>);

pub(crate) fn encode_entries(entries: &[MapEntry]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    for (name, key, value) in entries {
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        out.extend_from_slice(key);
        out.extend_from_slice(value);
    }
    out
}

pub(crate) fn decode_entries(data: &[u8]) -> Result<Vec<MapEntry>, ElfError> {
    let bad = |at: usize, what: &str| {
        ElfError::malformed(Some(ENTRIES_SECTION), Some(at as u64), what.to_owned())
    };
    if data.get(..8) != Some(&MAGIC[..]) {
        return Err(bad(0, "no WEIRENT1 magic"));
    }
    let mut at = 8;
    let mut out = Vec::new();
    let take = |at: &mut usize, n: usize| -> Result<&[u8], ElfError> {
        let s = data.get(*at..at.saturating_add(n)).ok_or_else(|| bad(*at, "record cut short"))?;
        *at += n;
        Ok(s)
    };
    while at < data.len() {
        let start = at;
        let n = u16::from_le_bytes(take(&mut at, 2)?.try_into().unwrap_or_default());
        let name = std::str::from_utf8(take(&mut at, usize::from(n))?)
            .map_err(|_| bad(start, "map name is not UTF-8"))?
            .to_owned();
        let k = u32::from_le_bytes(take(&mut at, 4)?.try_into().unwrap_or_default());
        let v = u32::from_le_bytes(take(&mut at, 4)?.try_into().unwrap_or_default());
        let key = take(&mut at, k as usize)?.to_vec();
        let value = take(&mut at, v as usize)?.to_vec();
        out.push((name, key, value));
    }
    Ok(out)
}
