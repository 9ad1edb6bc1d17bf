//! `weir._weir`: the Rust half of the Python package `weir` (PyO3). It sits at the end of the
//! pipeline beside the command line: a tcpdump expression is compiled by the facade
//! (`weir::compile_filter_with`), run on the engine the facade picks (`PreparedFilter`),
//! and captures stream through `weir_runtime::capture` with the GIL released. The Python
//! package (`weir/__init__.py`) wraps it: numpy and pyarrow objects are made there from the
//! plain buffers built here, so this crate needs neither the numpy nor the arrow crate.
//!
//! ```python
//! import weir
//! f = weir.Filter("tcp port 443")
//! f.count("capture.pcap")   # the number `weir filter -c -r capture.pcap` prints
//! ```
//!
//! Messages are the command line's, word for word: a bad expression raises `FilterError`
//! with the caret message, a damaged capture `CaptureError` with `FILE: record N at byte B:
//! ...`, a file that cannot be opened `OSError`, a BPF object weir cannot load or run
//! `ProgramError` (`src/program.rs`: `weir.Program`, as `weir run`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use weir::pflang::LinkType;
use weir::{FilterOptions, NameDb, PreparedFilter};
use weir_runtime::capture::{CaptureReader, CaptureWriter};
use weir_runtime::source::{Packet, PacketSource};

mod columns;
mod program;

create_exception!(weir, FilterError, PyValueError, "A tcpdump expression weir cannot compile.");
create_exception!(
    weir,
    CaptureError,
    PyValueError,
    "A capture file weir cannot read (damaged, truncated, or not a capture)."
);

/// Why a call failed, kept apart from Python so the work can run without the GIL.
pub(crate) enum Failure {
    Filter(String),
    Capture(String),
    Os(std::io::Error, String),
}

impl From<Failure> for PyErr {
    fn from(failure: Failure) -> PyErr {
        match failure {
            Failure::Filter(message) => FilterError::new_err(message),
            Failure::Capture(message) => CaptureError::new_err(message),
            Failure::Os(e, message) => match e.raw_os_error() {
                Some(errno) => PyOSError::new_err((errno, message)),
                None => PyOSError::new_err(message),
            },
        }
    }
}

/// The names of the link types filters compile for, for error messages.
fn linktype_names() -> String {
    weir::pflang::LINK_TYPES.map(LinkType::name).join(", ")
}

/// The command line's message for a capture link type filters do not compile for (without
/// its `-y` hint, which has no meaning here).
fn unsupported(dlt: u32) -> String {
    format!(
        "link type {dlt} is not one weir compiles filters for (supported: {})",
        linktype_names()
    )
}

/// Compiler options as tcpdump sets them when it reads a file: netmask unknown, taken as 0.
fn options(linktype: LinkType, optimize: bool) -> FilterOptions {
    let mut options = FilterOptions::new(linktype);
    options.netmask = Some(0);
    options.optimize = optimize;
    options
}

/// Compiles `expr` as `weir filter` does, the error rendered as the command line renders it.
pub(crate) fn compile(
    expr: &str,
    linktype: LinkType,
    optimize: bool,
    names: &NameDb,
) -> Result<weir::Filter, Failure> {
    weir::compile_filter_with(expr, &options(linktype, optimize), names).map_err(|e| {
        if e.message == weir::REJECTS_ALL {
            Failure::Filter(e.message)
        } else {
            Failure::Filter(e.render(expr))
        }
    })
}

fn prepare(filter: &weir::Filter) -> Result<PreparedFilter, Failure> {
    PreparedFilter::new(filter, None).map_err(|e| {
        let mut message = e.message;
        for reason in e.reasons {
            message.push_str("\n  ");
            message.push_str(&reason);
        }
        Failure::Filter(message)
    })
}

/// Opens a capture: a file that cannot be opened is an `OSError` (with its errno), anything
/// wrong inside it a `CaptureError`, both worded as the command line words them.
pub(crate) fn open_capture(path: &Path) -> Result<CaptureReader, Failure> {
    let source = path.display().to_string();
    if let Err(e) = std::fs::File::open(path) {
        let message = format!("{source}: {e}");
        return Err(Failure::Os(e, message));
    }
    CaptureReader::open(path).map_err(|e| Failure::Capture(format!("{source}: {e}")))
}

/// One compiled filter per link type a capture uses (pcapng interfaces may differ), as the
/// command line keeps them: the first is the one the `Filter` was made for.
pub(crate) struct Matchers<'a> {
    expr: &'a str,
    optimize: bool,
    names: NameDb,
    by_dlt: Vec<(u32, PreparedFilter)>,
}

impl<'a> Matchers<'a> {
    pub(crate) fn new(expr: &'a str, optimize: bool) -> Matchers<'a> {
        Matchers { expr, optimize, names: NameDb::system(), by_dlt: Vec::new() }
    }

    pub(crate) fn matches(&mut self, packet: &Packet<'_>) -> Result<bool, Failure> {
        let found = match self.by_dlt.iter().position(|(dlt, _)| *dlt == packet.linktype) {
            Some(found) => found,
            None => {
                let linktype = LinkType::from_number(packet.linktype)
                    .filter(|&link| weir::pflang::compiles_for(link))
                    .ok_or_else(|| Failure::Filter(unsupported(packet.linktype)))?;
                let filter = compile(self.expr, linktype, self.optimize, &self.names)?;
                self.by_dlt.push((packet.linktype, prepare(&filter)?));
                self.by_dlt.len() - 1
            }
        };
        match self.by_dlt.get_mut(found) {
            Some((_, prepared)) => Ok(prepared.matches(packet.data, packet.wire_len)),
            None => Err(Failure::Filter("internal: filter cache".into())),
        }
    }
}

/// The command line's message when a capture is damaged part-way.
fn damage_message(source: &str, damage: &dyn std::fmt::Display, seen: u64, matched: u64) -> String {
    format!(
        "{source}: {damage}\nweir: stopped there: {seen} packets read before the damage, {matched} matched"
    )
}

/// Streams a capture through the filter; `keep` gets each packet and whether it matched.
fn pump(
    capture: &mut CaptureReader,
    source: &str,
    matchers: &mut Matchers<'_>,
    mut keep: impl FnMut(&Packet<'_>, bool) -> Result<(), Failure>,
) -> Result<u64, Failure> {
    let (mut seen, mut matched) = (0u64, 0u64);
    while let Some(packet) = capture.next_packet() {
        let packet = match packet {
            Ok(packet) => packet,
            Err(e) => return Err(Failure::Capture(damage_message(source, &e, seen, matched))),
        };
        seen += 1;
        let hit = matchers.matches(&packet).map_err(|e| match e {
            Failure::Filter(m) => {
                Failure::Filter(format!("{source}: record {}: {m}", packet.index + 1))
            }
            other => other,
        })?;
        keep(&packet, hit)?;
        matched += u64::from(hit);
    }
    Ok(matched)
}

/// A tcpdump expression compiled for a link type.
#[pyclass(module = "weir._weir", name = "Filter", subclass)]
struct PyFilter {
    expr: String,
    linktype: LinkType,
    optimize: bool,
    filter: weir::Filter,
    /// For `matches` and `matches_batch`; a lock because Python may share the object
    /// between threads.
    prepared: Mutex<PreparedFilter>,
}

impl PyFilter {
    fn with_prepared<T>(&self, f: impl FnOnce(&mut PreparedFilter) -> T) -> PyResult<T> {
        let mut guard = self
            .prepared
            .lock()
            .map_err(|_| PyValueError::new_err("the filter was poisoned by a panic"))?;
        Ok(f(&mut guard))
    }

    fn classic(&self) -> Result<Vec<weir::isa::cbpf::CbpfInsn>, Failure> {
        let insns = if self.optimize {
            weir::emit::cbpf::emit(&self.filter)
        } else {
            weir::emit::cbpf::emit_unoptimized(&self.filter)
        };
        insns.map_err(|e| Failure::Filter(format!("classic BPF emitter: {e}")))
    }
}

#[pymethods]
impl PyFilter {
    #[new]
    #[pyo3(signature = (expr, linktype = "EN10MB", optimize = true))]
    fn new(py: Python<'_>, expr: &str, linktype: &str, optimize: bool) -> PyResult<PyFilter> {
        let link = LinkType::from_name(linktype)
            .filter(|&link| weir::pflang::compiles_for(link))
            .ok_or_else(|| {
            FilterError::new_err(format!(
                "-y {linktype}: unknown or unsupported link type (known: {})",
                linktype_names()
            ))
        })?;
        // Compiling (and preparing the JIT's code) without the GIL: a long expression, or
        // a Dask worker's other threads compiling theirs, need not wait on each other.
        let (filter, prepared) = py.detach(|| -> Result<_, Failure> {
            let filter = compile(expr, link, optimize, &NameDb::system())?;
            let prepared = prepare(&filter)?;
            Ok((filter, prepared))
        })?;
        Ok(PyFilter {
            expr: expr.to_owned(),
            linktype: link,
            optimize,
            filter,
            prepared: Mutex::new(prepared),
        })
    }

    #[getter]
    fn expr(&self) -> &str {
        &self.expr
    }

    #[getter]
    fn linktype(&self) -> &'static str {
        self.linktype.name()
    }

    /// Whether one packet (its captured bytes; the wire length taken as their length unless
    /// given) matches.
    #[pyo3(signature = (packet, wire_len = None))]
    fn matches(&self, packet: &[u8], wire_len: Option<u32>) -> PyResult<bool> {
        let wire_len = wire_len.unwrap_or(u32::try_from(packet.len()).unwrap_or(u32::MAX));
        self.with_prepared(|p| p.matches(packet, wire_len))
    }

    /// Packet `i` is `data[offsets[i]..offsets[i+1]]`; `offsets` holds little-endian u64s
    /// (the Python wrapper passes a numpy array's bytes). One byte per packet, 0 or 1.
    fn _matches_batch<'py>(
        &self,
        py: Python<'py>,
        offsets: &[u8],
        data: &[u8],
    ) -> PyResult<Bound<'py, PyBytes>> {
        if offsets.len() % 8 != 0 {
            return Err(PyValueError::new_err("offsets: not a whole number of 64-bit integers"));
        }
        let bounds: Vec<u64> = offsets
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        let count = bounds.len().saturating_sub(1);
        for (i, pair) in bounds.windows(2).enumerate() {
            if pair[0] > pair[1] || pair[1] > data.len() as u64 {
                return Err(PyValueError::new_err(format!(
                    "offsets[{i}..{}] = {}..{}: not a range within data ({} bytes)",
                    i + 1,
                    pair[0],
                    pair[1],
                    data.len()
                )));
            }
        }
        let shared = &self.prepared;
        // The lock is taken without the GIL: a thread holding it while it waits for the GIL
        // and another holding the GIL while it waits for the lock would deadlock.
        let out = py.detach(|| {
            let mut guard = shared.lock().ok()?;
            let mut out = vec![0u8; count];
            for (slot, pair) in out.iter_mut().zip(bounds.windows(2)) {
                let packet = &data[pair[0] as usize..pair[1] as usize];
                *slot = u8::from(guard.matches(packet, packet.len() as u32));
            }
            Some(out)
        });
        let out = out.ok_or_else(|| PyValueError::new_err("the filter was poisoned by a panic"))?;
        Ok(PyBytes::new(py, &out))
    }

    /// The number of packets of the capture at `path` that match, as `weir filter -c`.
    fn count(&self, py: Python<'_>, path: PathBuf) -> PyResult<u64> {
        let (expr, optimize) = (self.expr.as_str(), self.optimize);
        let counted = py.detach(|| -> Result<u64, Failure> {
            let mut capture = open_capture(&path)?.without_blocks();
            let source = path.display().to_string();
            let mut matchers = Matchers::new(expr, optimize);
            pump(&mut capture, &source, &mut matchers, |_, _| Ok(()))
        })?;
        Ok(counted)
    }

    /// Writes the matching packets of `path_in` to `path_out` in the input's format (as
    /// `weir filter -r IN -w OUT`) and returns how many.
    fn filter(&self, py: Python<'_>, path_in: PathBuf, path_out: PathBuf) -> PyResult<u64> {
        let (expr, optimize) = (self.expr.as_str(), self.optimize);
        let written = py.detach(|| -> Result<u64, Failure> {
            if weir_runtime::output::same_file(&path_out, &path_in) {
                return Err(Failure::Os(
                    std::io::Error::from_raw_os_error(17),
                    format!(
                        "{}: is the input file ({}); refusing to overwrite it",
                        path_out.display(),
                        path_in.display()
                    ),
                ));
            }
            let mut capture = open_capture(&path_in)?;
            let source = path_in.display().to_string();
            let out_name = path_out.display().to_string();
            let mut matchers = Matchers::new(expr, optimize);
            // Compile before the output exists, so a bad expression writes nothing.
            let mut writer = CaptureWriter::like(&path_out, &capture)
                .map_err(|e| Failure::Os(e, out_name.clone()))?;
            let matched = pump(&mut capture, &source, &mut matchers, |packet, hit| {
                let done = if hit { writer.write(packet) } else { writer.skip(packet) };
                done.map_err(|e| Failure::Os(e, out_name.clone()))
            });
            // The output is complete as a capture up to the damage, as the command line's.
            let finished = writer.finish().map_err(|e| Failure::Os(e, out_name.clone()));
            let matched = matched?;
            finished?;
            Ok(matched)
        })?;
        Ok(written)
    }

    /// The classic BPF program, `(code, jt, jf, k)` per instruction: what
    /// `weir filter -dd` prints, and what `SO_ATTACH_FILTER` takes.
    fn bpf(&self) -> PyResult<Vec<(u16, u8, u8, u32)>> {
        let insns = self.classic()?;
        Ok(weir::isa::cbpf::encode(&insns).iter().map(|s| (s.code, s.jt, s.jf, s.k)).collect())
    }

    /// The eBPF socket filter program as raw bytecode (8 bytes per slot, little-endian).
    fn ebpf<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let program =
            weir::emit_ebpf(&self.filter, weir::ProgType::SocketFilter).map_err(Failure::Filter)?;
        Ok(PyBytes::new(py, &program.to_bytes()))
    }

    /// Which engine runs the filter and why, then the classic program's listing.
    fn explain(&self) -> PyResult<String> {
        let choice = self.with_prepared(|p| p.choice().to_string())?;
        let listing = weir::isa::cbpf::format_listing(&self.classic()?);
        Ok(format!(
            "expression: {}\nlink type: {}\n{choice}classic BPF:\n{listing}",
            self.expr,
            self.linktype.name()
        ))
    }

    fn __repr__(&self) -> String {
        format!("weir.Filter({:?}, linktype={:?})", self.expr, self.linktype.name())
    }
}

#[pymodule]
fn _weir(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFilter>()?;
    m.add_class::<columns::Buffer>()?;
    m.add("FilterError", m.py().get_type::<FilterError>())?;
    m.add("CaptureError", m.py().get_type::<CaptureError>())?;
    m.add_class::<program::PyProgram>()?;
    m.add_class::<program::PyMap>()?;
    m.add("ProgramError", m.py().get_type::<program::ProgramError>())?;
    m.add_function(wrap_pyfunction!(columns::read_columns, m)?)?;
    m.add("COLUMNS", columns::NAMES.to_vec())?;
    Ok(())
}
