"""weir over many captures on a Dask cluster: one task per capture file.

    >>> from distributed import Client
    >>> import weir.dask
    >>> client = Client("scheduler:8786")            # or none: Dask's default scheduler
    >>> weir.dask.count("s3://archive/2026-11-*.pcap", "tcp port 443 and host 10.1.2.3")
    >>> df = weir.dask.read_captures("/data/*.pcap", filter="tcp", columns=["ts", "ip_src"])
    >>> df.groupby("ip_src").size().compute()

The work runs wherever Dask runs tasks (the active ``distributed.Client``, else Dask's
default scheduler); each task is one capture through weir's Rust code with the GIL
released, so threads and processes both scale.

Partitioning: **one partition per capture file** (``read_captures``, or ``files_per_partition``
consecutive files per partition: Dask handles each partition at a cost of tens of
milliseconds of the workers' CPU, bench/records/2026-11-29-python-dask-4.txt, which small
files repay badly; ``count`` and ``filter``, which have no partitions, run a group of files
per task once there are more than ``TASKS_PER_THREAD`` files per worker thread: each task
costs the scheduler about as much as counting a few megabytes, so an archive of many small
files would otherwise be mostly scheduling). A pcap has no sync marks: a record
header is 16 bytes any payload can imitate, so cutting a file at byte offsets needs a
resynchronizing scan that guesses where records start (plausible lengths and timestamps
chained over several records), and a wrong guess silently changes the answer. Archives are
written as many rotated files (``tcpdump -C/-G``, one file per interval), which already
gives the parallelism; a single huge file is one task (split it with ``editcap -c`` first
if it must be spread). Measured in bench/records/2026-11-28-python.txt.

Paths: a local path, a glob, a list of them, or any fsspec URL (``s3://``, ``gcs://``,
``http://``, ``file://``...). Local files are read in place by the worker; any other URL is
copied by the worker to a local temporary file first (weir's reader streams from a file
descriptor), which is deleted afterwards.

dask and distributed are optional: ``pip install 'weir[dask]'``.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import Dict, List, Optional, Sequence, Union

__all__ = ["read_captures", "count", "filter", "expand"]

Paths = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]


def _dask():
    try:
        import dask
        import dask.dataframe
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "weir.dask needs dask (with dask.dataframe): pip install 'weir[dask]' "
            f"(or pip install 'dask[dataframe,distributed]'); import failed: {e}"
        ) from e
    return dask


def _is_local(url: str) -> bool:
    return "://" not in url or url.startswith("file://")


def _local_path(url: str) -> str:
    return url[len("file://") :] if url.startswith("file://") else url


def expand(paths: Paths) -> List[str]:
    """The capture files ``paths`` names, sorted within each glob: local paths and globs
    directly, fsspec URLs through fsspec. A name that matches nothing is an error
    (FileNotFoundError), never an empty result."""
    import glob as globmod

    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    out: List[str] = []
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"paths: a path, URL or glob is needed, not {type(item).__name__}")
        text = os.fspath(item)
        if _is_local(text):
            local = _local_path(text)
            if globmod.has_magic(local):
                found = sorted(globmod.glob(local))
                if not found:
                    raise FileNotFoundError(f"{text}: no capture file matches")
                out.extend(found)
            elif os.path.isdir(local):
                found = sorted(
                    os.path.join(local, n) for n in os.listdir(local) if os.path.isfile(os.path.join(local, n))
                )
                if not found:
                    raise FileNotFoundError(f"{text}: directory holds no file")
                out.extend(found)
            elif os.path.exists(local):
                out.append(local)
            else:
                raise FileNotFoundError(2, f"{text}: No such file or directory")
        else:
            import fsspec

            fs, _, found = fsspec.get_fs_token_paths(text)
            if not found:
                raise FileNotFoundError(f"{text}: no capture file matches")
            if len(found) == 1 and not any(c in text for c in "*?["):
                if not fs.exists(found[0]):
                    raise FileNotFoundError(2, f"{text}: No such file or directory")
                out.append(text)  # as given: the workers open the same URL
            else:
                out.extend(fs.unstrip_protocol(p) for p in sorted(found))
    return out


class _Local:
    """A local path for ``url`` for the length of a ``with``: the file itself, or a
    temporary copy of a remote one."""

    def __init__(self, url: str):
        self.url = url
        self.tmp: Optional[str] = None

    def __enter__(self) -> str:
        if _is_local(self.url):
            return _local_path(self.url)
        import fsspec

        fd, self.tmp = tempfile.mkstemp(prefix="weir-", suffix=os.path.splitext(self.url)[1])
        with os.fdopen(fd, "wb") as out, fsspec.open(self.url, "rb") as src:
            while True:
                chunk = src.read(1 << 22)
                if not chunk:
                    break
                out.write(chunk)
        return self.tmp

    def __exit__(self, *exc):
        if self.tmp is not None:
            os.unlink(self.tmp)


# Tasks per worker thread when `count` and `filter` group files: enough for the scheduler to
# even out files of different sizes, few enough that its cost per task (about 1.3 ms of the
# client's and scheduler's CPU per task, measured in bench/records/2026-11-28-python-2.txt,
# on the same cores as the workers on a small machine) stays small against the files'.
TASKS_PER_THREAD = 4


def _client():
    """The ``distributed`` client ``dask.compute`` would use (``distributed.get_client``: the
    one of ``Client.as_current``, a worker's, else the latest; unless the ``scheduler``
    setting names another scheduler), else None. An asynchronous client is left to
    ``dask.compute``, which says what to do instead."""
    import dask

    if dask.config.get("scheduler", None) not in (None, "dask.distributed", "distributed"):
        return None
    try:
        from distributed import get_client

        client = get_client()
    except (ImportError, ValueError):
        return None
    return None if getattr(client, "asynchronous", False) else client


def _threads(client) -> int:
    """Worker threads of ``client``'s cluster, else this machine's cores."""
    if client is not None:
        return max(1, sum(client.nthreads().values()))
    return os.cpu_count() or 1


def _run(fn, groups: list, *args) -> list:
    """``fn(group, *args)`` for each group as one task each, the results in order.

    With a ``distributed`` client the tasks go through ``Client.map`` (one graph message,
    one gather): ``dask.compute`` over ``dask.delayed`` calls builds, converts and optimizes
    a task graph on the client first, CPU taken from the cores the workers count on when the
    client shares their machine (bench/records/2026-11-29-python-dask-2.txt). Dask's own
    schedulers (no client) still get ``dask.compute``."""
    client = _client()
    if client is None:
        dask = _dask()
        return list(dask.compute(*[dask.delayed(fn, pure=False)(g, *args) for g in groups]))
    # Not pure: a file's result is only as current as the file (the same arguments must not
    # be answered from a result the scheduler still holds).
    futures = client.map(fn, groups, *[[a] * len(groups) for a in args], pure=False)
    return client.gather(futures)


def _groups(urls: List[str], tasks: Optional[int]) -> List[List[str]]:
    """The files split into ``tasks`` groups (default: one per file, up to
    ``TASKS_PER_THREAD`` per worker thread), the largest files first, each to the group with
    the fewest bytes so far (local files by size; other URLs counted alike)."""
    if tasks is None:
        tasks = TASKS_PER_THREAD * _threads(_client())
    elif isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 1:
        raise ValueError(f"tasks: a positive number of tasks is needed, not {tasks!r}")
    tasks = min(tasks, len(urls))
    sizes = [os.path.getsize(_local_path(u)) if _is_local(u) else 1 for u in urls]
    groups: List[List[str]] = [[] for _ in range(tasks)]
    loads = [0] * tasks
    for i in sorted(range(len(urls)), key=lambda i: -sizes[i]):
        j = loads.index(min(loads))
        groups[j].append(urls[i])
        loads[j] += sizes[i]
    return groups


def _count_many(urls: List[str], expr: str, optimize: bool) -> int:
    return sum(_count_one(u, expr, optimize) for u in urls)


def _filter_many(pairs: List[List[str]], expr: str, optimize: bool) -> List[int]:
    return [_filter_one(u, expr, optimize, out) for u, out in pairs]


def _count_one(url: str, expr: str, optimize: bool) -> int:
    import weir

    with _Local(url) as path:
        return weir.Filter(expr, optimize=optimize).count(path)


def _read_part(urls: List[str], names: List[str], expr: Optional[str], optimize: bool, call: str = ""):
    """One partition: the rows of ``urls`` in order (their tables' buffers chunked together,
    not copied)."""
    import pandas as pd
    import pyarrow as pa

    import weir

    tables = []
    for url in urls:
        with _Local(url) as path:
            tables.append(weir.read(path, filter=expr, columns=names, optimize=optimize))
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    # One thread: the worker's threads are the parallelism, and Arrow's pool (a thread per
    # core in every worker process) would wake threads on cores another worker is using for
    # a conversion that takes well under a millisecond on one (0.16 ms against 0.26 ms of
    # CPU with the pool for 300,000 rows of 10 columns).
    return table.to_pandas(types_mapper=pd.ArrowDtype, use_threads=False)


def _filter_one(url: str, expr: str, optimize: bool, out_url: str) -> int:
    import weir

    f = weir.Filter(expr, optimize=optimize)
    with _Local(url) as path:
        if _is_local(out_url):
            return f.filter(path, _local_path(out_url))
        import fsspec

        fd, tmp = tempfile.mkstemp(prefix="weir-out-")
        os.close(fd)
        try:
            written = f.filter(path, tmp)
            with open(tmp, "rb") as src, fsspec.open(out_url, "wb") as out:
                while True:
                    chunk = src.read(1 << 22)
                    if not chunk:
                        break
                    out.write(chunk)
            return written
        finally:
            os.unlink(tmp)


def _checked(expr: str, optimize: bool) -> None:
    """Compiles ``expr`` here, so a bad expression raises FilterError before any task runs."""
    import weir

    weir.Filter(expr, optimize=optimize)


def count(paths: Paths, expr: str, optimize: bool = True, tasks: Optional[int] = None) -> int:
    """The number of packets matching ``expr`` over every capture ``paths`` names: the sum of
    ``weir filter --count -r FILE EXPR`` over the files. One Dask task per file, or per
    group of files when there are more than ``TASKS_PER_THREAD`` per worker thread
    (``tasks`` sets the number of tasks)."""
    _dask()
    _checked(expr, optimize)
    urls = expand(paths)
    return int(sum(_run(_count_many, _groups(urls, tasks), expr, optimize)))


def filter(
    paths: Paths, expr: str, out_dir: str, optimize: bool = True, tasks: Optional[int] = None
) -> Dict[str, int]:
    """Writes the packets of each capture that match ``expr`` to ``out_dir`` (a local
    directory or fsspec URL), one output per input under the input's file name, in the
    input's format (as ``weir filter -r IN -w OUT``). Returns ``{output: packets written}``.
    Two inputs with the same file name are refused (their outputs would collide). Tasks
    as :func:`count`'s."""
    _dask()
    _checked(expr, optimize)
    urls = expand(paths)
    out_dir = os.fspath(out_dir)
    outputs = {}
    for url in urls:
        name = url.rstrip("/").rsplit("/", 1)[-1]
        target = out_dir.rstrip("/") + "/" + name
        if target in outputs.values():
            raise ValueError(f"{url}: another input has the file name {name!r}; outputs in {out_dir} would collide")
        outputs[url] = target
    if _is_local(out_dir):
        os.makedirs(_local_path(out_dir), exist_ok=True)
    else:
        import fsspec

        fs, _, (root,) = fsspec.get_fs_token_paths(out_dir)
        fs.makedirs(root, exist_ok=True)
    groups = _groups(urls, tasks)
    done = _run(_filter_many, [[[u, outputs[u]] for u in g] for g in groups], expr, optimize)
    written = {outputs[u]: int(n) for g, ns in zip(groups, done) for u, n in zip(g, ns)}
    return {outputs[u]: written[outputs[u]] for u in urls}


def read_captures(
    paths: Paths,
    filter: Optional[str] = None,
    columns: Optional[Sequence[str]] = None,
    optimize: bool = True,
    files_per_partition: int = 1,
):
    """A ``dask.dataframe`` with one row per packet (those matching ``filter``) of every
    capture ``paths`` names, in the order of :func:`expand`, one partition per
    ``files_per_partition`` consecutive files (default: one per file), with the ``columns``
    of :func:`weir.read` (all when None) as pandas Arrow-backed dtypes (integers stay
    integers where a field is null)."""
    _dask()
    import dask.dataframe as dd
    import pandas as pd
    import pyarrow as pa

    import weir

    if isinstance(columns, str):
        raise TypeError("columns: a list of column names is needed, not a string")
    names = list(weir.COLUMNS if columns is None else columns)
    unknown = [n for n in names if n not in weir.COLUMNS]
    if unknown:
        raise ValueError(f"unknown column {unknown[0]!r} (known: {', '.join(weir.COLUMNS)})")
    if isinstance(files_per_partition, bool) or not isinstance(files_per_partition, int) or files_per_partition < 1:
        raise ValueError(f"files_per_partition: a positive number of files is needed, not {files_per_partition!r}")
    if filter is not None:
        _checked(filter, optimize)
    urls = expand(paths)
    parts = [urls[i : i + files_per_partition] for i in range(0, len(urls), files_per_partition)]
    schema = pa.schema([(n, weir._arrow_type(n)) for n in names])
    meta = schema.empty_table().to_pandas(types_mapper=pd.ArrowDtype)
    return dd.from_map(
        _read_part,
        parts,
        names=names,
        expr=filter,
        optimize=optimize,
        meta=meta,
        enforce_metadata=False,
        label="weir-read",
        # A fresh name per call (the partitions' names hash the arguments): the files may
        # have changed since the last one, and a scheduler that still holds a partition
        # under the same name would hand it back.
        call=uuid.uuid4().hex,
    )
