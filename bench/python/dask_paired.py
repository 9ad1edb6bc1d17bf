#!/usr/bin/env python3
"""weir.dask, 2 workers against 1, measured in pairs for a machine others share.

    bench/python/dask_paired.py [--files F] [--packets N] [--repeat K] [--rounds R] [--work count,read,spin]
                                [--files-per-partition P]

dask_scaling.py runs its 1-worker cluster, then its 2-worker cluster, minutes apart: when
other jobs come and go on the machine, the ratio measures them. Here both clusters live at
once (the idle one's worker waits on a socket), and each round times, back to back (which
goes first alternates from round to round), the same work on the 1-worker cluster and on
the 2-worker cluster, and the same work in 1 and in 2 independent Python processes without
Dask (the scaling two processes get on this machine at that moment). A round's ratio is
taken within the round; the report gives the median of the rounds' ratios. The work, over
F generated captures of N packets, the list repeated K times (a K times longer job over the
same page-cached files, so Dask's fixed cost per call weighs less):
  count:  weir.dask.count(files, "tcp port 443")
  read:   weir.dask.read_captures(files, filter="tcp", columns=10 columns)
          .groupby("ip_src").size().compute()
  spin:   pure-Python busy-loop tasks, 2,000,000 iterations a file (Dask's and the
          machine's scaling without weir).
The machine's anchors, as 1 and 2 plain processes only: `pagecache` reads the files with
read(2) into a 1 MiB buffer as weir's reader does (the copy out of the page cache without
the parsing), `memcpy` copies as many bytes RAM to RAM. CPU seconds are reported beside the
wall times: the workers' (or processes') CPU summed, for 2 against 1 (above 1.0: the work
itself grew, from contention for memory or caches; near 1.0 with a wall ratio below 2: time
lost waiting for a core), and the client's and scheduler's CPU per call (LocalCluster runs
the scheduler and the nannies in this process, on the workers' cores). The idle clusters'
own CPU (heartbeats, monitors) is measured once before the rounds.
Results are compared with single-process weir before any time is reported.
"""

import argparse
import os
import statistics
import subprocess
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
import psutil  # noqa: E402  (a dependency of distributed)


def wall_cpu(fn):
    c, w = time.process_time(), time.perf_counter()
    result = fn()
    return time.perf_counter() - w, time.process_time() - c, result


def workers_cpu(client):
    """CPU seconds the cluster's worker processes have used so far, summed."""
    return sum(client.run(time.process_time).values())


def idle_cpu(seconds=5.0):
    """Each process of this process tree (the clusters: this one holds the schedulers and
    nannies, the others are workers): its CPU over `seconds` of idling, as % of a core."""
    procs = [psutil.Process()] + psutil.Process().children(recursive=True)
    before = {}
    for p in procs:
        try:
            t = p.cpu_times()
            before[p] = t.user + t.system
        except psutil.Error:
            pass
    time.sleep(seconds)
    out = []
    for p, b in before.items():
        try:
            t = p.cpu_times()
            out.append((p.pid == os.getpid(), 100 * (t.user + t.system - b) / seconds))
        except psutil.Error:
            pass
    return out


def loadavg():
    return os.getloadavg()[0]


def ratio_line(label, one, two):
    """`one` and `two`: per-round wall seconds for 1 and 2; the median of the rounds' ratios."""
    ratios = [a / b for a, b in zip(one, two)]
    return (f"{label} {statistics.median(one):.3f}/{statistics.median(two):.3f} s, "
            f"{statistics.median(ratios):.2f}x (rounds: {', '.join(f'{x:.2f}' for x in ratios)})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--packets", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--files-per-partition", type=int, default=1, help="read_captures' files_per_partition")
    parser.add_argument("--work", default="count,read,spin", help="which of count, read, spin (the memory "
                        "anchors always run)")
    args = parser.parse_args()
    chosen = args.work.split(",")
    if not chosen or any(w not in ("count", "read", "spin") for w in chosen):
        parser.error(f"--work {args.work}: a comma-separated list of count, read, spin is needed")
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = "?"
    print(f"# {' '.join(['bench/python/dask_paired.py'] + sys.argv[1:])}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; tree {commit}; {os.cpu_count()} CPUs; "
          f"load average {loadavg():.2f} at the start; dask {dask.__version__}, distributed {distributed.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        generated = []
        for i in range(args.files):
            path = Path(tmp) / f"part-{i:02d}.pcap"
            generate(path, args.packets, seed=10 + i)
            generated.append(str(path))
        for f in generated:
            Path(f).read_bytes()
        files = generated * args.repeat
        want_count = sum(weir.Filter(EXPR).count(f) for f in generated) * args.repeat
        import pyarrow as pa

        want_sizes = (
            pa.concat_tables([weir.read(f, filter="tcp", columns=COLUMNS) for f in generated])
            .to_pandas()
            .groupby("ip_src")
            .size()
            .sort_index()
            * args.repeat
        )
        size = sum(Path(f).stat().st_size for f in files)
        print(f"{args.files} captures of {args.packets} packets, the list {args.repeat} time(s): {len(files)} files, "
              f"{len(files) * args.packets} packets, {size / 1e6:.0f} MB read per job; {args.rounds} rounds")
        clusters = {
            n: distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
            for n in (1, 2)
        }
        clients = {n: distributed.Client(c, set_as_default=False) for n, c in clusters.items()}

        def count():
            return weir.dask.count(files, EXPR)

        def read():
            df = weir.dask.read_captures(files, filter="tcp", columns=COLUMNS,
                                         files_per_partition=args.files_per_partition)
            return df.groupby("ip_src").size().compute().sort_index()

        def spins():
            return dask.compute(*[dask.delayed(spin, pure=False)(2_000_000) for _ in files])

        def check(what, result):
            if what == "count":
                assert result == want_count, (result, want_count)
            elif what == "read":
                assert list(result.items()) == list(want_sizes.items())

        work = {w: {"count": count, "read": read, "spin": spins}[w] for w in chosen}
        for n, client in clients.items():
            with client.as_current():
                # Warm the workers (imports: weir, pandas; first compile), and check.
                for what, fn in work.items():
                    check(what, fn())
        # After the warm-up every pool a task uses exists: weir's Rust adds no thread on this
        # path (a capture is read with next_packet on the task's own thread, never relayed).
        threads = [t for c in clients.values() for t in c.run(lambda: len(os.listdir("/proc/self/task"))).values()]
        print(f"threads per worker process after the warm-up: {', '.join(map(str, threads))}")
        idle = idle_cpu()
        here = sum(p for me, p in idle if me)
        workers = [p for me, p in idle if not me]
        print(f"idle clusters' own CPU over 5 s: this process (client, 2 schedulers, 3 nannies) {here:.1f}% of a core, "
              f"the other processes (3 workers, multiprocessing's resource tracker) {', '.join(f'{p:.1f}' for p in workers)}%")
        # (what, n) -> per round: Dask wall, client CPU, workers' CPU; processes wall, CPU.
        dask_rows = {(what, n): [] for what in work for n in (1, 2)}
        proc_rows = {(what, n): [] for what in list(work) + ["pagecache", "memcpy"] for n in (1, 2)}
        for r in range(args.rounds):
            order = (1, 2) if r % 2 == 0 else (2, 1)
            load = loadavg()
            for what, fn in work.items():
                for n in order:
                    with clients[n].as_current():
                        before = workers_cpu(clients[n])
                        wall, cpu, result = wall_cpu(fn)
                        wcpu = workers_cpu(clients[n]) - before
                    check(what, result)
                    dask_rows[what, n].append((wall, cpu, wcpu))
            for what in list(work) + ["pagecache", "memcpy"]:
                for n in order:
                    elapsed, answer, pcpu = processes(n, EXPR if what == "count" else what, files)
                    if what == "count":
                        assert answer == want_count
                    elif what == "read":
                        assert answer == int(want_sizes.sum())
                    elif what in ("pagecache", "memcpy"):
                        assert answer == size
                    proc_rows[what, n].append((elapsed, pcpu))
            print(f"round {r + 1} (load {load:.1f}, {order[0]} first): " + "; ".join(
                [f"{what} {dask_rows[what, 1][-1][0]:.3f}/{dask_rows[what, 2][-1][0]:.3f} s "
                 f"(processes {proc_rows[what, 1][-1][0]:.3f}/{proc_rows[what, 2][-1][0]:.3f} s)" for what in work]
                + [f"{what} processes {proc_rows[what, 1][-1][0]:.3f}/{proc_rows[what, 2][-1][0]:.3f} s"
                   for what in ("pagecache", "memcpy")]))
        print("2 against 1, walls as 1/2 medians, ratio = median of the rounds' ratios; CPU = seconds summed "
              "over the workers or processes, 2 against 1:")
        for what in work:
            d1, d2 = dask_rows[what, 1], dask_rows[what, 2]
            p1, p2 = proc_rows[what, 1], proc_rows[what, 2]
            med = statistics.median
            print(f"{what}: " + ratio_line("Dask", [x[0] for x in d1], [x[0] for x in d2])
                  + f"; workers' CPU {med(x[2] for x in d1):.3f}/{med(x[2] for x in d2):.3f} s; "
                  f"client and scheduler CPU {med(x[1] for x in d1) * 1e3:.0f}/{med(x[1] for x in d2) * 1e3:.0f} ms "
                  f"per call; " + ratio_line("without Dask", [x[0] for x in p1], [x[0] for x in p2])
                  + f"; processes' CPU {med(x[1] for x in p1):.3f}/{med(x[1] for x in p2):.3f} s")
        for what in ("pagecache", "memcpy"):
            p1, p2 = proc_rows[what, 1], proc_rows[what, 2]
            med = statistics.median
            print(f"{what} ({size / 1e6:.0f} MB): " + ratio_line("processes", [x[0] for x in p1], [x[0] for x in p2])
                  + f"; processes' CPU {med(x[1] for x in p1):.3f}/{med(x[1] for x in p2):.3f} s "
                  f"({size / 1e9 / med(x[1] for x in p1):.1f} GB/s of CPU for 1)")
        for c in clients.values():
            c.close()
        for c in clusters.values():
            c.close()
        print(f"results identical to single-process weir: count {want_count}, "
              f"{len(want_sizes)} source addresses with {int(want_sizes.sum())} tcp rows")


if __name__ == "__main__":
    main()
