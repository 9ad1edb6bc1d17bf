"""weir from Python: tcpdump filters compiled to native code, and captures as Arrow tables.

    >>> import weir
    >>> f = weir.Filter("tcp port 443")
    >>> f.count("capture.pcap")          # as `weir filter -c -r capture.pcap 'tcp port 443'`
    >>> weir.read("capture.pcap", filter="tcp", columns=["ts", "ip_src", "dst_port"])
    >>> p = weir.Program.load("xdp_counter.o")  # a clang-built BPF object, as `weir run`
    >>> p.run_capture("capture.pcap")          # {'XDP_PASS': 3000}
    >>> dict(p.maps["counts"].items())

The work is done in Rust (``weir._weir``) with the GIL released; this module only turns
its buffers into numpy and pyarrow objects.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union
import os

import numpy as np

from ._weir import COLUMNS, CaptureError, FilterError, Map, ProgramError
from ._weir import Filter as _Filter
from ._weir import Program as _Program
from ._weir import read_columns as _read_columns

__all__ = [
    "Filter",
    "FilterError",
    "CaptureError",
    "COLUMNS",
    "read",
    "Program",
    "ProgramError",
    "Map",
]

PathLike = Union[str, "os.PathLike[str]"]


class Filter(_Filter):
    """A tcpdump expression compiled for a link type (``EN10MB`` unless given).

    ``matches``, ``matches_batch``, ``bpf``, ``ebpf`` and ``explain`` use that link type;
    ``count`` and ``filter`` compile the expression again for each link type a capture
    holds, as ``weir filter -r`` does without ``-y``.
    """

    def matches_batch(self, offsets, data) -> np.ndarray:
        """Matches many packets in one call: packet ``i`` is ``data[offsets[i]:offsets[i+1]]``.

        ``offsets`` is any integer sequence or array of ``n + 1`` boundaries; ``data`` any
        bytes-like object (bytes, bytearray, memoryview, a numpy uint8 array). Returns a
        numpy bool array of ``n`` answers; no Python code runs per packet.
        """
        bounds = np.asarray(offsets)
        if bounds.ndim != 1 or not np.issubdtype(bounds.dtype, np.integer):
            raise TypeError("offsets: a one-dimensional array of integers is needed")
        if bounds.size and int(bounds.min()) < 0:
            raise ValueError("offsets: negative offset")
        raw = np.ascontiguousarray(bounds, dtype="<u8").tobytes()
        if isinstance(data, np.ndarray):
            data = np.ascontiguousarray(data).view(np.uint8).tobytes()
        elif not isinstance(data, bytes):
            data = bytes(memoryview(data))
        answers = self._matches_batch(raw, data)
        return np.frombuffer(answers, dtype=np.bool_).copy()


def _arrow_type(name: str):
    import pyarrow as pa

    return {
        "ts": pa.timestamp("ns"),
        "caplen": pa.uint32(),
        "len": pa.uint32(),
        "linktype": pa.uint32(),
        "payload_offset": pa.uint32(),
        "ethertype": pa.uint16(),
        "vlan": pa.uint16(),
        "src_port": pa.uint16(),
        "dst_port": pa.uint16(),
        "ip_version": pa.uint8(),
        "ip_proto": pa.uint8(),
        "ttl": pa.uint8(),
        "tcp_flags": pa.uint8(),
    }.get(name, pa.string())


def read(
    path: PathLike,
    filter: Optional[str] = None,
    columns: Optional[Sequence[str]] = None,
    optimize: bool = True,
):
    """One row per packet of the capture at ``path`` (those matching ``filter`` if given).

    Only the ``columns`` asked for are computed (all of ``COLUMNS`` when None). Fields a
    packet lacks (ports of an ARP packet, ...) are null.
    """
    import pyarrow as pa

    if isinstance(columns, str):
        raise TypeError("columns: a list of column names is needed, not a string")
    names = list(COLUMNS if columns is None else columns)
    built = _read_columns(os.fspath(path), names, filter, optimize)
    arrays = []
    for name in names:
        rows, nulls, valid, values, offsets = built[name]
        kind = _arrow_type(name)
        # Rust's own vectors, not copies: each Buffer stays alive as the pyarrow buffer's base.
        own = lambda b: pa.foreign_buffer(b.address, b.size, base=b)  # noqa: E731
        buffers = [own(valid) if nulls else None]
        if offsets is not None:
            buffers.append(own(offsets))
        buffers.append(own(values))
        arrays.append(pa.Array.from_buffers(kind, rows, buffers, null_count=nulls))
    return pa.Table.from_arrays(arrays, names=names)


class Program(_Program):
    """A clang-built BPF object's program, loaded as ``weir run`` loads it.

    ``Program.load(obj)`` (or ``Program(obj)``) takes a path or the object's bytes;
    ``prog`` (function name) or ``section`` picks the entry when the object has several.
    The program is verified first unless ``verify=False``; ``engine`` forces ``"jit"`` or
    ``"interp"``; ``cpus`` is the number of workers per-CPU maps keep a value for (``run``
    and ``run_capture`` take the worker as ``cpu``). Maps persist between runs and are
    read and written through ``maps`` (name -> ``weir.Map``, dict-like).
    """

    @classmethod
    def load(cls, obj, prog=None, section=None, engine=None, verify=True, cpus=1) -> "Program":
        return cls(obj, prog=prog, section=section, engine=engine, verify=verify, cpus=cpus)

    @property
    def prog_type(self) -> str:
        return self.prog_type_name

    def run_capture(self, path: PathLike, write: Optional[PathLike] = None, cpu: int = 0, verdicts: bool = False):
        """Runs the program over every packet of a capture, as ``weir run -r path [-w write]``.

        Returns the summary ``weir run`` prints as a dict: a count per verdict name
        (``{"XDP_PASS": 2, "XDP_DROP": 1}``), for a socket filter ``accepted``, ``dropped``
        and ``bytes kept``. ``write`` gets the packets the program passes, as it left them.
        With ``verdicts=True`` returns ``(summary, numpy int64 array)``: every packet's
        return value in record order.
        """
        out = None if write is None else os.fspath(write)
        summary, each = self._run_capture(os.fspath(path), out, cpu, verdicts)
        summary = dict(summary)
        if verdicts:
            return summary, np.frombuffer(each, dtype="<i8").copy()
        return summary
