#!/usr/bin/env python3
"""weir.dask, 2 workers against 1, measured in pairs for a machine others share.

    bench/python/dask_paired.py [--files F] [--packets N] [--rounds R]

dask_scaling.py runs its 1-worker cluster, then its 2-worker cluster, minutes apart: when
other jobs come and go on the machine, the ratio measures them. Here both clusters live at
once (the idle one's worker waits on a socket), and each round times, back to back, the
same work on the 1-worker cluster and on the 2-worker cluster, and the same work in 1 and
in 2 independent Python processes without Dask (dask_scaling.py's anchor: the scaling the
machine gives two processes at that moment). A round's ratio is taken within the round;
the report gives the median of the rounds' ratios. The work:
  count:  weir.dask.count(files, "tcp port 443")
  read:   weir.dask.read_captures(files, filter="tcp", columns=10 columns)
          .groupby("ip_src").size().compute()
  spin:   F pure-Python busy-loop tasks (Dask's and the machine's scaling without weir).
The client's and scheduler's CPU per call (LocalCluster runs the scheduler in this process)
is reported for each cluster: on 2 cores, with 2 busy workers, it is time the workers lose.
Results are compared with single-process weir before any time is reported.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import weir  # noqa: E402
import weir.dask  # noqa: E402
from bench import COLUMNS, generate  # noqa: E402
from dask_scaling import EXPR, processes, spin  # noqa: E402

import dask  # noqa: E402
import distributed  # noqa: E402


def wall_cpu(fn):
    c, w = time.process_time(), time.perf_counter()
    result = fn()
    return time.perf_counter() - w, time.process_time() - c, result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--packets", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i in range(args.files):
            path = Path(tmp) / f"part-{i:02d}.pcap"
            generate(path, args.packets, seed=10 + i)
            files.append(str(path))
        for f in files:
            Path(f).read_bytes()
        total = args.files * args.packets
        want_count = sum(weir.Filter(EXPR).count(f) for f in files)
        import pyarrow as pa

        want_sizes = (
            pa.concat_tables([weir.read(f, filter="tcp", columns=COLUMNS) for f in files])
            .to_pandas()
            .groupby("ip_src")
            .size()
            .sort_index()
        )
        print(f"{args.files} captures of {args.packets} packets ({total} in all, "
              f"{sum(Path(f).stat().st_size for f in files) / 1e6:.0f} MB); {args.rounds} rounds, "
              f"each timing 1 and 2 workers (and 1 and 2 processes) back to back")
        clusters = {
            n: distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
            for n in (1, 2)
        }
        clients = {n: distributed.Client(c, set_as_default=False) for n, c in clusters.items()}

        def count():
            return weir.dask.count(files, EXPR)

        def read():
            df = weir.dask.read_captures(files, filter="tcp", columns=COLUMNS)
            return df.groupby("ip_src").size().compute().sort_index()

        def spins():
            return dask.compute(*[dask.delayed(spin, pure=False)(2_000_000) for _ in files])

        work = {"count": count, "read": read, "spin": spins}
        for n, client in clients.items():
            with client.as_current():
                # Warm the workers (imports: weir, pandas; first compile), and check.
                assert count() == want_count
                assert list(read().items()) == list(want_sizes.items())
                spins()
        rows = {(what, n): [] for what in work for n in (1, 2)}
        procs = {(what, n): [] for what in ("count", "read", "spin") for n in (1, 2)}
        for r in range(args.rounds):
            for what, fn in work.items():
                for n in (1, 2):
                    with clients[n].as_current():
                        wall, cpu, result = wall_cpu(fn)
                    if what == "count":
                        assert result == want_count
                    elif what == "read":
                        assert list(result.items()) == list(want_sizes.items())
                    rows[what, n].append((wall, cpu))
                for n in (1, 2):
                    elapsed, answer = processes(n, EXPR if what == "count" else what, files)
                    if what == "count":
                        assert answer == want_count
                    elif what == "read":
                        assert answer == int(want_sizes.sum())
                    procs[what, n].append(elapsed)
            print(f"round {r + 1}: " + "; ".join(
                f"{what} {rows[what, 1][-1][0]:.3f}/{rows[what, 2][-1][0]:.3f} s "
                f"(processes {procs[what, 1][-1]:.3f}/{procs[what, 2][-1]:.3f} s)"
                for what in work))
        for what in work:
            ratios = [a[0] / b[0] for a, b in zip(rows[what, 1], rows[what, 2])]
            pratios = [a / b for a, b in zip(procs[what, 1], procs[what, 2])]
            med = {n: statistics.median(w for w, _ in rows[what, n]) for n in (1, 2)}
            cpu = {n: statistics.median(c for _, c in rows[what, n]) * 1e3 for n in (1, 2)}
            print(f"{what}: 1 worker {med[1]:.3f} s, 2 workers {med[2]:.3f} s (medians; client and scheduler CPU "
                  f"{cpu[1]:.0f} / {cpu[2]:.0f} ms per call); 2 workers / 1, median of the rounds' ratios "
                  f"{statistics.median(ratios):.2f}x (rounds: {', '.join(f'{x:.2f}' for x in ratios)}); "
                  f"without Dask, 2 processes / 1: {statistics.median(pratios):.2f}x "
                  f"(rounds: {', '.join(f'{x:.2f}' for x in pratios)})")
        # The client's and scheduler's CPU per call, Client.map (weir.dask now) against the
        # same groups through dask.delayed + dask.compute (weir.dask before), interleaved call
        # by call on the 2-worker cluster: CPU time, which other jobs on the machine disturb
        # far less than wall time. Tiny captures, so the call is all overhead.
        tiny = [str(Path(tmp) / f"tiny-{i}.pcap") for i in range(args.files)]
        for i, t in enumerate(tiny):
            generate(Path(t), 100, seed=50 + i)
        want_tiny = sum(weir.Filter(EXPR).count(t) for t in tiny)

        def delayed_count():
            groups = weir.dask._groups(tiny, None)
            work = [dask.delayed(weir.dask._count_many, pure=False)(g, EXPR, True) for g in groups]
            return sum(dask.compute(*work))

        cpu = {"Client.map": [], "dask.delayed": []}
        wall = {"Client.map": [], "dask.delayed": []}
        with clients[2].as_current():
            tasks = len(weir.dask._groups(tiny, None))
            for _ in range(3 * args.rounds + 1):
                for name, fn in (("Client.map", lambda: weir.dask.count(tiny, EXPR)), ("dask.delayed", delayed_count)):
                    w, c, got = wall_cpu(fn)
                    assert got == want_tiny
                    cpu[name].append(c)
                    wall[name].append(w)
        print(f"one count call of {tasks} tasks over {args.files} captures of 100 packets, 2 workers, "
              f"{3 * args.rounds + 1} calls each, interleaved: " + "; ".join(
                  f"{name} client and scheduler CPU {statistics.median(cpu[name]) * 1e3:.1f} ms, "
                  f"wall {statistics.median(wall[name]) * 1e3:.1f} ms" for name in cpu))
        for c in clients.values():
            c.close()
        for c in clusters.values():
            c.close()
        print(f"results identical to single-process weir: count {want_count}, "
              f"{len(want_sizes)} source addresses with {int(want_sizes.sum())} tcp rows")


if __name__ == "__main__":
    main()
