//! `weir.Program` and `weir.Map`: clang-built BPF objects from Python, through the facade's
//! `weir::Object` (the object's programs and live maps) and `weir::Loaded` (the entry program
//! on an engine), as `weir run` runs them. Messages are `weir run`'s, word for word.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pyo3::create_exception;
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use weir::maps::{Map, MapError};
use weir::object::{passes, verdict_name};
use weir::{Engine, Loaded, Object, ProgType};
use weir_runtime::capture::CaptureWriter;
use weir_runtime::source::{Packet, PacketSource};

use crate::{open_capture, Failure};

create_exception!(
    weir,
    ProgramError,
    PyValueError,
    "A BPF object weir cannot load or run (bad ELF, no such program, refused by the \
     verifier, a trap), or a map operation that failed."
);

/// Most workers a `Program` keeps (as `weir run --cpus`).
const MAX_CPUS: usize = 256;

/// Why a program call failed, kept apart from Python so the work can run without the GIL.
enum Fault {
    Program(String),
    Other(Failure),
}

impl From<Failure> for Fault {
    fn from(failure: Failure) -> Fault {
        Fault::Other(failure)
    }
}

impl From<Fault> for PyErr {
    fn from(fault: Fault) -> PyErr {
        match fault {
            Fault::Program(message) => ProgramError::new_err(message),
            Fault::Other(failure) => failure.into(),
        }
    }
}

/// What a capture gave: the summary `weir run` prints (a count per verdict name, or a socket
/// filter's accepted/dropped/bytes kept) and, when asked, every packet's return value.
type CaptureRun = (Vec<(String, u64)>, Option<Vec<i64>>);

/// [`CaptureRun`] for Python: the return values as little-endian i64 bytes.
type Summary<'py> = (Vec<(String, u64)>, Option<Bound<'py, PyBytes>>);

/// A BPF object's entry program, loaded, with the object's maps.
#[pyclass(module = "weir._weir", name = "Program", subclass)]
pub(crate) struct PyProgram {
    object: Arc<Object>,
    entry: usize,
    engine: Option<Engine>,
    proven: bool,
    /// The verifier's line of `weir run --explain` (when verified).
    verified: Option<String>,
    /// One loaded program per worker (`cpu`): loaded at once for worker 0, on first use for
    /// the others. Each behind its own lock: Python threads running different workers run
    /// at the same time, the GIL released.
    workers: Vec<Mutex<Option<Loaded>>>,
}

impl PyProgram {
    /// Runs `f` on worker `cpu`'s loaded program (loading it first if needed). Called
    /// without the GIL.
    fn with_worker<T>(
        &self,
        cpu: usize,
        f: impl FnOnce(&mut Loaded) -> Result<T, Fault>,
    ) -> Result<T, Fault> {
        let slot = self.workers.get(cpu).ok_or_else(|| {
            Fault::Program(format!("cpu {cpu}: the program has {} workers", self.workers.len()))
        })?;
        let mut guard = slot
            .lock()
            .map_err(|_| Fault::Program("the program was poisoned by a panic".into()))?;
        if guard.is_none() {
            let loaded = self
                .object
                .load_with(self.entry, self.engine, cpu, self.proven)
                .map_err(Fault::Program)?;
            *guard = Some(loaded);
        }
        match guard.as_mut() {
            Some(loaded) => f(loaded),
            None => Err(Fault::Program("internal: worker not loaded".into())),
        }
    }

    fn prog_type(&self) -> ProgType {
        self.object.programs()[self.entry].prog_type
    }

    /// `weir run -r path [-w write]` on worker `cpu`.
    fn run_file(
        &self,
        path: &Path,
        write: Option<&Path>,
        cpu: usize,
        verdicts: bool,
    ) -> Result<CaptureRun, Fault> {
        if let Some(out) = write {
            if weir_runtime::output::same_file(out, path) {
                return Err(Fault::Other(Failure::Os(
                    std::io::Error::from_raw_os_error(17),
                    format!(
                        "{}: is the input file ({}); refusing to overwrite it",
                        out.display(),
                        path.display()
                    ),
                )));
            }
        }
        let mut reader = open_capture(path)?;
        let source = path.display().to_string();
        let prog_type = self.prog_type();
        self.with_worker(cpu, |loaded| {
            let mut writer = match write {
                Some(out) => Some(
                    CaptureWriter::pcap(out, reader.linktype(), reader.snaplen().max(65535))
                        .map_err(|e| Failure::Os(e, out.display().to_string()))?,
                ),
                None => None,
            };
            let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
            let mut kept_bytes = 0u64;
            let mut each = verdicts.then(Vec::new);
            let ran = (|| -> Result<(), Fault> {
                while let Some(packet) = reader.next_packet() {
                    let packet = packet.map_err(|e| Failure::Capture(format!("{source}: {e}")))?;
                    // Lent, not copied: the packet as the program left it is only read
                    // (by the writer) before the next run reuses the buffer.
                    let verdict = loaded.run_view(packet.data).map_err(|t| {
                        Fault::Program(format!("packet {}: the program trapped: {t}", packet.index))
                    })?;
                    *counts.entry(verdict.ret).or_default() += 1;
                    if prog_type == ProgType::SocketFilter {
                        kept_bytes += verdict.ret.min(packet.data.len().saturating_sub(14) as u64);
                    }
                    if let Some(each) = &mut each {
                        each.push(verdict.ret as i64);
                    }
                    if let Some(w) = &mut writer {
                        if passes(prog_type, verdict.ret) {
                            let out = Packet {
                                data: verdict.packet,
                                wire_len: verdict.packet.len() as u32,
                                stored: None,
                                ..packet
                            };
                            w.write(&out).map_err(|e| Failure::Os(e, source.clone()))?;
                        }
                    }
                }
                Ok(())
            })();
            if let Some(w) = writer {
                let name = write.map(|p| p.display().to_string()).unwrap_or_default();
                let finished = w.finish().map_err(|e| Failure::Os(e, name));
                ran?;
                finished?;
            } else {
                ran?;
            }
            let summary = if prog_type == ProgType::SocketFilter {
                let dropped = counts.get(&0).copied().unwrap_or(0);
                let accepted = counts.values().sum::<u64>() - dropped;
                vec![
                    ("accepted".to_owned(), accepted),
                    ("dropped".to_owned(), dropped),
                    ("bytes kept".to_owned(), kept_bytes),
                ]
            } else {
                counts.into_iter().map(|(ret, n)| (verdict_name(prog_type, ret), n)).collect()
            };
            Ok((summary, each))
        })
    }
}

/// The object's bytes: a path's contents, or the bytes given; and the name errors use.
fn object_bytes(obj: &Bound<'_, PyAny>) -> PyResult<(Vec<u8>, Option<String>)> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return Ok((bytes.as_bytes().to_vec(), None));
    }
    if let Ok(bytes) = obj.extract::<Vec<u8>>() {
        if !obj.is_instance_of::<pyo3::types::PyString>() {
            return Ok((bytes, None));
        }
    }
    let path: PathBuf = obj.extract().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(
            "obj: a path to a BPF object (str or os.PathLike) or its bytes is needed",
        )
    })?;
    let name = path.display().to_string();
    let bytes = std::fs::read(&path).map_err(|e| {
        let message = format!("{name}: {e}");
        PyErr::from(Failure::Os(e, message))
    })?;
    Ok((bytes, Some(name)))
}

#[pymethods]
impl PyProgram {
    #[new]
    #[pyo3(signature = (obj, prog = None, section = None, engine = None, verify = true, cpus = 1))]
    fn new(
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        prog: Option<&str>,
        section: Option<&str>,
        engine: Option<&str>,
        verify: bool,
        cpus: usize,
    ) -> PyResult<PyProgram> {
        if cpus == 0 || cpus > MAX_CPUS {
            return Err(ProgramError::new_err(format!("cpus: 1 to {MAX_CPUS} workers")));
        }
        if prog.is_some() && section.is_some() {
            return Err(ProgramError::new_err(
                "give the program by name (prog) or by section, not both",
            ));
        }
        let engine = match engine {
            Some(name) => Some(name.parse::<Engine>().map_err(ProgramError::new_err)?),
            None => None,
        };
        let (bytes, name) = object_bytes(obj)?;
        let named = |e: String| match &name {
            Some(name) => format!("{name}: {e}"),
            None => e,
        };
        let (prog, section) = (prog.map(str::to_owned), section.map(str::to_owned));
        let built = py.detach(move || -> Result<PyProgram, String> {
            let object = Object::open_with_cpus(&bytes, cpus).map_err(named)?;
            let entry = object.entry(prog.as_deref(), section.as_deref())?;
            let verified = if verify {
                let proof = object
                    .verify(entry, false)
                    .map_err(|r| format!("verify: {r} (run with --no-verify to run it anyway)"))?;
                Some(format!("weir: verified: {}\n", proof.summary()))
            } else {
                None
            };
            let object = Arc::new(object);
            let loaded = object.load_with(entry, engine, 0, verify)?;
            let mut workers: Vec<Mutex<Option<Loaded>>> =
                (0..cpus).map(|_| Mutex::new(None)).collect();
            workers[0] = Mutex::new(Some(loaded));
            Ok(PyProgram { object, entry, engine, proven: verify, verified, workers })
        });
        built.map_err(ProgramError::new_err)
    }

    /// The entry program's function name.
    #[getter]
    fn name(&self) -> &str {
        &self.object.programs()[self.entry].name
    }

    /// The entry program's ELF section.
    #[getter]
    fn section(&self) -> &str {
        &self.object.programs()[self.entry].section
    }

    /// The program type as the command line names it (`xdp`, `sched_cls`, `socket`, ...).
    #[getter]
    fn prog_type_name(&self) -> &'static str {
        self.prog_type().name()
    }

    /// The engine worker 0 runs on (`jit`, `interp`).
    #[getter]
    fn engine(&self) -> PyResult<String> {
        Ok(self.with_worker(0, |l| Ok(l.choice().engine.to_string()))?)
    }

    /// How many workers (per-CPU map values) the program has.
    #[getter]
    fn cpus(&self) -> usize {
        self.workers.len()
    }

    /// Every program of the object: `(name, section, type)`.
    fn programs(&self) -> Vec<(String, String, &'static str)> {
        self.object
            .programs()
            .iter()
            .map(|p| (p.name.clone(), p.section.clone(), p.prog_type.name()))
            .collect()
    }

    /// Runs the entry over one Ethernet frame on worker `cpu`: `(return value, the packet as
    /// the program left it)`.
    #[pyo3(signature = (packet, cpu = 0))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        packet: &[u8],
        cpu: usize,
    ) -> PyResult<(i64, Bound<'py, PyBytes>)> {
        // The lent packet is copied once here, inside the worker's lock: the bytes object
        // needs the GIL, which is not taken while the lock is held (a thread holding the GIL
        // may be waiting for the lock).
        let (ret, frame) = py.detach(|| {
            self.with_worker(cpu, |loaded| {
                let view = loaded
                    .run_view(packet)
                    .map_err(|t| Fault::Program(format!("the program trapped: {t}")))?;
                Ok((view.ret, view.packet.to_vec()))
            })
        })?;
        Ok((ret as i64, PyBytes::new(py, &frame)))
    }

    /// `weir run -r path [-w write]`: `(summary, verdicts)`, the summary as a list of
    /// `(name, count)` (the lines `weir run` prints), verdicts every packet's return value
    /// as little-endian i64 bytes when asked, else None.
    #[pyo3(signature = (path, write = None, cpu = 0, verdicts = false))]
    fn _run_capture<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        write: Option<PathBuf>,
        cpu: usize,
        verdicts: bool,
    ) -> PyResult<Summary<'py>> {
        let (summary, each) =
            py.detach(|| self.run_file(&path, write.as_deref(), cpu, verdicts))?;
        let each = each.map(|each| {
            let raw: Vec<u8> = each.iter().flat_map(|v| v.to_le_bytes()).collect();
            PyBytes::new(py, &raw)
        });
        Ok((summary, each))
    }

    /// The object's maps by name, in the object's order.
    #[getter]
    fn maps<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for map in self.object.maps() {
            dict.set_item(map.spec().name.clone(), PyMap { map: map.clone() })?;
        }
        Ok(dict)
    }

    /// Every map's contents as JSON, as `weir run --maps-out` writes them.
    fn maps_json(&self) -> String {
        self.object.maps_json()
    }

    /// Preloads maps from JSON of the `maps_json` form, as `weir run --maps-in`.
    fn load_maps_json(&self, text: &str) -> PyResult<()> {
        self.object.load_maps_json(text).map_err(ProgramError::new_err)
    }

    /// What `weir run --explain` prints: the verifier's line (when verified), which engine
    /// runs the program and why, the run-time checks kept.
    fn explain(&self) -> PyResult<String> {
        let how = self.with_worker(0, |l| Ok(l.explain()))?;
        Ok(format!("{}{how}\n", self.verified.as_deref().unwrap_or("")))
    }

    fn __repr__(&self) -> String {
        let p = &self.object.programs()[self.entry];
        format!(
            "weir.Program({:?}, section={:?}, type={:?})",
            p.name,
            p.section,
            p.prog_type.name()
        )
    }
}

/// One live map of a program's object: dict-like, keys and values as bytes (ints accepted
/// on the way in); per-CPU maps' values as a list of one value per worker.
#[pyclass(module = "weir._weir", name = "Map")]
pub(crate) struct PyMap {
    map: Arc<Map>,
}

impl PyMap {
    fn name(&self) -> &str {
        &self.map.spec().name
    }

    fn failed(&self, e: MapError) -> PyErr {
        ProgramError::new_err(format!("map `{}`: {e}", self.name()))
    }

    /// A key or value from Python: bytes-like of exactly `size` bytes, or a non-negative int
    /// stored in `size` bytes in the machine's byte order (as a C program's `__u32` key).
    fn bytes_of(&self, value: &Bound<'_, PyAny>, size: u32, what: &str) -> PyResult<Vec<u8>> {
        let size = size as usize;
        let bytes = if let Ok(n) = value.extract::<u128>() {
            let all = n.to_ne_bytes();
            let fits = if cfg!(target_endian = "little") {
                all[size.min(16)..].iter().all(|&b| b == 0) && size <= 16
            } else {
                all[..16 - size.min(16)].iter().all(|&b| b == 0) && size <= 16
            };
            if !fits {
                return Err(ProgramError::new_err(format!(
                    "map `{}`: {what} {n} does not fit in {size} bytes",
                    self.name()
                )));
            }
            if cfg!(target_endian = "little") {
                all[..size].to_vec()
            } else {
                all[16 - size..].to_vec()
            }
        } else if value.is_instance_of::<pyo3::types::PyString>() {
            return Err(ProgramError::new_err(format!(
                "map `{}`: a {what} is bytes or an int, not a str",
                self.name()
            )));
        } else {
            value.extract::<Vec<u8>>().map_err(|_| {
                ProgramError::new_err(format!(
                    "map `{}`: a {what} is bytes or an int, not {}",
                    self.name(),
                    value.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                ))
            })?
        };
        if bytes.len() != size {
            return Err(ProgramError::new_err(format!(
                "map `{}`: `{what}` has {} bytes, the map's {what}s {size}",
                self.name(),
                bytes.len()
            )));
        }
        Ok(bytes)
    }

    fn key(&self, key: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        self.bytes_of(key, self.map.spec().key_size, "key")
    }

    /// A value from Python; per-CPU maps take a list of one value per worker, or one value
    /// for every worker. The result is the syscall's layout (per-CPU values 8-byte aligned).
    fn value(&self, value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        let size = self.map.spec().value_size;
        if !self.map.is_percpu() {
            return self.bytes_of(value, size, "value");
        }
        let stride = (size as usize).next_multiple_of(8);
        let cpus = self.map.cpus();
        let each: Vec<Vec<u8>> = if let Ok(list) = value.cast::<PyList>() {
            if list.len() != cpus {
                return Err(ProgramError::new_err(format!(
                    "map `{}`: {} per-CPU values for {cpus} workers",
                    self.name(),
                    list.len()
                )));
            }
            list.iter().map(|v| self.bytes_of(&v, size, "value")).collect::<PyResult<_>>()?
        } else {
            vec![self.bytes_of(value, size, "value")?; cpus]
        };
        let mut all = vec![0u8; stride * cpus];
        for (slot, v) in all.chunks_mut(stride).zip(&each) {
            slot[..v.len()].copy_from_slice(v);
        }
        Ok(all)
    }

    fn to_python<'py>(&self, py: Python<'py>, raw: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        if !self.map.is_percpu() {
            return Ok(PyBytes::new(py, raw).into_any());
        }
        let size = self.map.spec().value_size as usize;
        let stride = size.next_multiple_of(8);
        let values: Vec<Bound<'py, PyBytes>> =
            raw.chunks(stride).map(|v| PyBytes::new(py, v.get(..size).unwrap_or(v))).collect();
        Ok(PyList::new(py, values)?.into_any())
    }

    fn iterable(&self) -> PyResult<()> {
        if self.map.ring_buf().is_some()
            || matches!(self.map.map_type().name(), Some("queue" | "stack"))
        {
            return Err(ProgramError::new_err(format!(
                "map `{}`: a {} has no keys",
                self.name(),
                self.map.map_type().name().unwrap_or("map")
            )));
        }
        Ok(())
    }

    fn keys_vec(&self) -> PyResult<Vec<Vec<u8>>> {
        self.iterable()?;
        let mut keys = Vec::new();
        let mut key: Option<Vec<u8>> = None;
        while let Ok(next) = self.map.get_next_key(key.as_deref()) {
            keys.push(next.clone());
            // A map with more keys than it can hold was changed under us: stop.
            if keys.len() > self.map.spec().max_entries as usize {
                break;
            }
            key = Some(next);
        }
        Ok(keys)
    }
}

#[pymethods]
impl PyMap {
    #[getter(name)]
    fn py_name(&self) -> &str {
        self.name()
    }

    /// The map type as bpftool prints it (`hash`, `array`, `percpu_array`, `ringbuf`, ...).
    #[getter(r#type)]
    fn map_type(&self) -> String {
        let t = self.map.map_type();
        t.name().map_or_else(|| format!("{t:?}"), str::to_owned)
    }

    #[getter]
    fn key_size(&self) -> u32 {
        self.map.spec().key_size
    }

    #[getter]
    fn value_size(&self) -> u32 {
        self.map.spec().value_size
    }

    #[getter]
    fn max_entries(&self) -> u32 {
        self.map.spec().max_entries
    }

    /// Whether values are per worker (a list of `cpus` values).
    #[getter]
    fn percpu(&self) -> bool {
        self.map.is_percpu()
    }

    #[getter]
    fn cpus(&self) -> usize {
        self.map.cpus()
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let raw = self.key(key)?;
        match self.map.lookup_all(&raw) {
            Ok(value) => self.to_python(py, &value),
            Err(MapError::NoEntry) => Err(PyKeyError::new_err(key.clone().unbind())),
            Err(e) => Err(self.failed(e)),
        }
    }

    fn __setitem__(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.update(key, value, 0)
    }

    fn __delitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let raw = self.key(key)?;
        match self.map.delete(&raw) {
            Ok(()) => Ok(()),
            Err(MapError::NoEntry) => Err(PyKeyError::new_err(key.clone().unbind())),
            Err(e) => Err(self.failed(e)),
        }
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let raw = self.key(key)?;
        match self.map.lookup_all(&raw) {
            Ok(_) => Ok(true),
            Err(MapError::NoEntry) => Ok(false),
            Err(e) => Err(self.failed(e)),
        }
    }

    /// The number of keys iteration gives (arrays: every index).
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.keys_vec()?.len())
    }

    /// `bpf_map_update_elem` with the syscall's flags: 0 (BPF_ANY), 1 (BPF_NOEXIST), 2
    /// (BPF_EXIST).
    #[pyo3(signature = (key, value, flags = 0))]
    fn update(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, flags: u64) -> PyResult<()> {
        let (key, value) = (self.key(key)?, self.value(value)?);
        self.map.update_all(&key, &value, flags).map_err(|e| self.failed(e))
    }

    /// The keys, a snapshot (the map's own order: arrays by index).
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        Ok(self.keys_vec()?.iter().map(|k| PyBytes::new(py, k)).collect())
    }

    /// Iterates over a snapshot of the keys, as a dict does.
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyIterator>> {
        PyList::new(py, self.keys(py)?)?.try_iter()
    }

    /// The value at `key`, or `default` when the map has no such key.
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let raw = self.key(key)?;
        match self.map.lookup_all(&raw) {
            Ok(value) => Ok(Some(self.to_python(py, &value)?)),
            Err(MapError::NoEntry) => Ok(default),
            Err(e) => Err(self.failed(e)),
        }
    }

    /// The values, a snapshot (in the keys' order).
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        Ok(self.items(py)?.into_iter().map(|(_, v)| v).collect())
    }

    /// `(key, value)` pairs, a snapshot; keys deleted meanwhile are left out.
    fn items<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Vec<(Bound<'py, PyBytes>, Bound<'py, PyAny>)>> {
        let mut out = Vec::new();
        for key in self.keys_vec()? {
            if let Ok(value) = self.map.lookup_all(&key) {
                out.push((PyBytes::new(py, &key), self.to_python(py, &value)?));
            }
        }
        Ok(out)
    }

    /// A ring buffer's records submitted since the last call, oldest first, consumed.
    fn consume<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let ring = self.map.ring_buf().ok_or_else(|| {
            ProgramError::new_err(format!("map `{}`: not a ring buffer", self.name()))
        })?;
        let mut records = Vec::new();
        ring.consume(|r| records.push(r.to_vec()));
        Ok(records.iter().map(|r| PyBytes::new(py, r)).collect())
    }

    fn __repr__(&self) -> String {
        format!("weir.Map({:?}, type={:?})", self.name(), self.map_type())
    }
}
