//! Workloads: the packets a filter benchmark runs over, held the way a capture buffer holds
//! them, one contiguous byte vector with the records back to back.
//!
//! Two shapes: *hot*, a few hundred packets that stay in the caches and are run over many
//! times (the engine's own cost), and *stream*, 100,000 packets, tens of MB, run over once
//! per round (the engine as the reader of a capture sees it: every packet comes from
//! memory). Packets come from the benchmark's generator ([`crate::traffic`]) or from a
//! capture file, cycled to the wanted count.

use std::path::Path;

use weir_runtime::capture::CaptureReader;
use weir_runtime::source::PacketSource;

use crate::traffic;

/// Packets in the hot workload.
pub const HOT_PACKETS: usize = 256;
/// Packets in the stream workload (and in `--quick` mode).
pub const STREAM_PACKETS: usize = 100_000;
pub const QUICK_STREAM_PACKETS: usize = 5_000;

/// Where the packets come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// The benchmark's generator with its fixed seed.
    Generated,
    /// A capture file (pcap or pcapng), read once.
    Capture(std::path::PathBuf),
}

/// Records back to back in one buffer.
pub struct Workload {
    /// "hot" or "stream".
    pub kind: &'static str,
    /// Where the packets came from, for the report.
    pub origin: String,
    /// The capture's LINKTYPE_ value.
    pub linktype: u32,
    buf: Vec<u8>,
    /// Captured and wire length of each record, in buffer order.
    lens: Vec<(u32, u32)>,
}

/// The records of a source: (captured bytes, wire length), and the link type.
pub struct Packets {
    pub linktype: u32,
    pub origin: String,
    pub records: Vec<(Vec<u8>, u32)>,
}

impl Source {
    /// At least `min` records (fewer only when a capture has fewer).
    pub fn load(&self, min: usize) -> Result<Packets, String> {
        match self {
            Source::Generated => Ok(Packets {
                linktype: 1,
                origin: format!("generated traffic, seed {:#x}", traffic::SEED),
                records: traffic::frames(traffic::SEED, min)
                    .into_iter()
                    .map(|f| {
                        let len = f.len() as u32;
                        (f, len)
                    })
                    .collect(),
            }),
            Source::Capture(path) => read_capture(path),
        }
    }
}

fn read_capture(path: &Path) -> Result<Packets, String> {
    let mut capture =
        CaptureReader::open(path).map_err(|e| format!("{}: {e}", path.display()))?.without_blocks();
    let mut records = Vec::new();
    let mut linktype = None;
    while let Some(record) = capture.next_packet() {
        let record = record.map_err(|e| format!("{}: {e}", path.display()))?;
        match linktype {
            None => linktype = Some(record.linktype),
            Some(l) if l != record.linktype => {
                return Err(format!(
                    "{}: mixes link types {l} and {} (one filter cannot serve both)",
                    path.display(),
                    record.linktype
                ))
            }
            Some(_) => {}
        }
        records.push((record.data.to_vec(), record.wire_len));
    }
    let linktype = linktype.ok_or_else(|| format!("{}: no packets", path.display()))?;
    Ok(Packets { linktype, origin: path.display().to_string(), records })
}

impl Workload {
    /// `count` records from `packets`, cycling through them when there are fewer.
    pub fn new(kind: &'static str, packets: &Packets, count: usize) -> Workload {
        let n = if packets.records.is_empty() { 0 } else { count };
        let picked = packets.records.iter().cycle().take(n);
        let bytes: usize = picked.clone().map(|(d, _)| d.len()).sum();
        let mut buf = Vec::with_capacity(bytes);
        let mut lens = Vec::with_capacity(n);
        for (data, wire_len) in picked {
            buf.extend_from_slice(data);
            lens.push((data.len() as u32, *wire_len));
        }
        let cycled = if n > packets.records.len() {
            format!(", {} records cycled", packets.records.len())
        } else {
            String::new()
        };
        Workload {
            kind,
            origin: format!("{}{cycled}", packets.origin),
            linktype: packets.linktype,
            buf,
            lens,
        }
    }

    pub fn len(&self) -> usize {
        self.lens.len()
    }

    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Records whose captured bytes are fewer than their wire length.
    pub fn truncated(&self) -> usize {
        self.lens.iter().filter(|(cap, wire)| cap < wire).count()
    }

    /// Calls `f` on every record in order, with its wire length. The packet is writable
    /// because weir's interpreter takes writable packet memory; no engine here writes it.
    #[inline]
    pub fn for_each(&mut self, mut f: impl FnMut(&mut [u8], u32)) {
        let mut rest: &mut [u8] = &mut self.buf;
        for &(cap, wire) in &self.lens {
            let Some((pkt, tail)) = std::mem::take(&mut rest).split_at_mut_checked(cap as usize)
            else {
                return;
            };
            rest = tail;
            f(pkt, wire);
        }
    }

    /// The records, read-only.
    pub fn packets(&self) -> impl Iterator<Item = (&[u8], u32)> + '_ {
        let mut start = 0usize;
        self.lens.iter().map(move |&(cap, wire)| {
            let end = start + cap as usize;
            let pkt = &self.buf[start..end];
            start = end;
            (pkt, wire)
        })
    }

    /// One line saying what this is.
    pub fn describe(&self) -> String {
        let mib = self.bytes() as f64 / (1024.0 * 1024.0);
        let size = if mib >= 1.0 {
            format!("{mib:.1} MiB")
        } else {
            format!("{:.1} KiB", self.bytes() as f64 / 1024.0)
        };
        let cut = match self.truncated() {
            0 => String::new(),
            n => format!(", {n} cut short"),
        };
        format!(
            "{} workload: {} packets{cut}, {size} contiguous, mean {:.0} bytes ({})",
            self.kind,
            self.len(),
            self.bytes() as f64 / self.len().max(1) as f64,
            self.origin
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_back_in_order_and_cycle() {
        let packets = Packets {
            linktype: 1,
            origin: "test".into(),
            records: vec![(vec![1, 2, 3], 3), (vec![4], 10)],
        };
        let mut w = Workload::new("hot", &packets, 5);
        assert_eq!(w.len(), 5);
        assert_eq!(w.bytes(), 3 + 1 + 3 + 1 + 3);
        assert_eq!(w.truncated(), 2);
        let mut seen = Vec::new();
        w.for_each(|p, wire| seen.push((p.to_vec(), wire)));
        let read: Vec<_> = w.packets().map(|(p, wire)| (p.to_vec(), wire)).collect();
        assert_eq!(seen, read);
        assert_eq!(seen[3], (vec![4], 10));
        assert_eq!(seen[4], (vec![1, 2, 3], 3));
    }
}
