#!/usr/bin/env python3
"""weir.dask on a distributed.LocalCluster: 2 worker processes against 1 (issue 16's goal:
>= 1.8x on a 2-core machine, results identical).

    bench/python/dask_scaling.py [--files F] [--packets N] [--rounds R]

F generated captures of N packets each (bench.py's generator, a different seed per file);
for 1 worker, 2 worker processes, and 1 worker of 2 threads, the median of R runs of
  count:  weir.dask.count(files, "tcp port 443")
  read:   weir.dask.read_captures(files, filter="tcp", columns=10 columns)
          .groupby("ip_src").size().compute()   (the rows stay on the workers)
and one large capture (the F files end to end) as one file: one partition, no parallelism.
The anchor in the same run: F pure-Python busy-loop tasks on the same cluster, the
scaling the machine allows at that moment (on a machine shared with other work, a second
worker process may get no more CPU). Results are compared with single-process weir
before any time is reported.
"""

import argparse
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import weir  # noqa: E402
import weir.dask  # noqa: E402
from bench import COLUMNS, generate  # noqa: E402

import distributed  # noqa: E402

EXPR = "tcp port 443"


def timed(rounds, fn):
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def spin(n):
    """The anchor: a pure-Python busy loop, as a task (what the cluster and the machine's
    share of its cores allow, without weir)."""
    x = 0
    for i in range(n):
        x += i
    return x


def concatenate(parts, dst):
    with open(dst, "wb") as out:
        for i, p in enumerate(parts):
            raw = Path(p).read_bytes()
            out.write(raw if i == 0 else raw[24:])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--packets", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i in range(args.files):
            path = Path(tmp) / f"part-{i:02d}.pcap"
            generate(path, args.packets, seed=10 + i)
            files.append(str(path))
        whole = Path(tmp) / "whole" / "all.pcap"
        whole.parent.mkdir()
        concatenate(files, whole)
        for f in files + [str(whole)]:
            Path(f).read_bytes()
        total = args.files * args.packets
        print(f"{args.files} captures of {args.packets} packets ({total} in all, "
              f"{sum(Path(f).stat().st_size for f in files) / 1e6:.0f} MB); medians of {args.rounds}")
        want_count = sum(weir.Filter(EXPR).count(f) for f in files)
        one = time.perf_counter()
        for f in files:
            weir.Filter(EXPR).count(f)
        one = time.perf_counter() - one
        import pyarrow as pa

        want_sizes = (
            pa.concat_tables([weir.read(f, filter="tcp", columns=COLUMNS) for f in files])
            .to_pandas()
            .groupby("ip_src")
            .size()
            .sort_index()
        )
        print(f"single process, no Dask: count {one:.3f} s")
        results = {}
        # (worker processes, threads per worker): weir releases the GIL, so threads of one
        # worker run files in parallel too.
        for workers, threads in ((1, 1), (2, 1), (1, 2)):
            cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=threads, processes=True, dashboard_address=None)
            with distributed.Client(cluster):
                # Warm the workers (imports, first compile) before timing.
                weir.dask.count(files[:workers], EXPR)
                count_t, got = timed(args.rounds, lambda: weir.dask.count(files, EXPR))
                assert got == want_count, (got, want_count)

                def read():
                    df = weir.dask.read_captures(files, filter="tcp", columns=COLUMNS)
                    return df.groupby("ip_src").size().compute().sort_index()

                read_t, sizes = timed(args.rounds, read)
                assert list(sizes.items()) == list(want_sizes.items())
                whole_t, got = timed(args.rounds, lambda: weir.dask.count([str(whole)], EXPR))
                assert got == want_count
                import dask

                spin_t, _ = timed(args.rounds, lambda: dask.compute(*[dask.delayed(spin, pure=False)(2_000_000) for _ in files]))
            cluster.close()
            results[workers, threads] = (count_t, read_t, whole_t, spin_t)
            print(f"{workers} worker(s) x {threads} thread(s): count {count_t:.3f} s ({total / count_t / 1e6:.1f} M pkt/s), "
                  f"read+groupby {read_t:.3f} s ({total / read_t / 1e6:.1f} M pkt/s), "
                  f"one {args.files}x file as one partition: count {whole_t:.3f} s; "
                  f"anchor, {args.files} pure-Python busy-loop tasks: {spin_t:.3f} s")
        (c1, r1, w1, s1) = results[1, 1]
        for key, name in (((2, 1), "2 workers"), ((1, 2), "1 worker x 2 threads")):
            (c2, r2, w2, s2) = results[key]
            print(f"scaling {name} / 1: count {c1 / c2:.2f}x, read+groupby {r1 / r2:.2f}x, "
                  f"the single large file {w1 / w2:.2f}x (one partition: no parallelism); "
                  f"anchor (busy loop, holds the GIL) {s1 / s2:.2f}x")
        print(f"results identical to single-process weir: count {want_count}, "
              f"{len(want_sizes)} source addresses with {int(want_sizes.sum())} tcp rows")


if __name__ == "__main__":
    main()
