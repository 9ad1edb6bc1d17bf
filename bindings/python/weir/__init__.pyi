import os
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt
import pyarrow as pa

PathLike = Union[str, "os.PathLike[str]"]

COLUMNS: List[str]

class FilterError(ValueError):
    """A tcpdump expression weir cannot compile; the message is the CLI's, with a caret."""

class CaptureError(ValueError):
    """A capture weir cannot read; the message is the CLI's (file, record, byte)."""

class Filter:
    def __init__(self, expr: str, linktype: str = "EN10MB", optimize: bool = True) -> None: ...
    @property
    def expr(self) -> str: ...
    @property
    def linktype(self) -> str: ...
    def matches(self, packet: bytes, wire_len: Optional[int] = None) -> bool: ...
    def matches_batch(
        self, offsets: Union[Sequence[int], npt.NDArray[np.integer]], data: Union[bytes, bytearray, memoryview, npt.NDArray[np.uint8]]
    ) -> npt.NDArray[np.bool_]: ...
    def count(self, path: PathLike) -> int: ...
    def filter(self, path_in: PathLike, path_out: PathLike) -> int: ...
    def bpf(self) -> List[Tuple[int, int, int, int]]: ...
    def ebpf(self) -> bytes: ...
    def explain(self) -> str: ...

def read(
    path: PathLike,
    filter: Optional[str] = None,
    columns: Optional[Sequence[str]] = None,
    optimize: bool = True,
) -> pa.Table: ...
