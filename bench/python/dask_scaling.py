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
Anchors in the same run, for each number of workers:
  - F pure-Python busy-loop tasks on the same cluster (Dask's overhead included);
  - the machine without Dask: the same weir count work split over 1 or 2 independent
    Python processes (started and imported first, then released at once; timed from the
    release to the last answer), and the same for the busy loop: the scaling two processes
    get on this machine at that moment, which a Dask cluster cannot beat;
  - Dask's own cost per call: F no-op tasks through dask.compute.
Results are compared with single-process weir before any time is reported.
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


# An independent process of the anchor: imports, says it is ready, waits for the go line,
# does its share, prints the answer.
# Besides the answer it prints its own CPU seconds for the share, so a caller can tell work
# that grew (contention: memory bandwidth, caches) from work that waited (scheduling).
# "pagecache" and "memcpy" are the machine's memory anchors without weir: the files read
# with read(2) into one 1 MiB buffer, as weir's reader reads them (the copy out of the page
# cache, no parsing), and as many bytes copied RAM to RAM by numpy (64 MiB blocks, beyond
# the caches).
WORKER = """
import sys, time, weir
files = sys.argv[2:]
if sys.argv[1] == "read":
    import pandas as pd
if sys.argv[1] == "memcpy":
    import os, numpy as np
    src = np.ones(64 << 20, dtype=np.uint8)
    dst = np.ones(64 << 20, dtype=np.uint8)  # touched: no page faults in the timed copies
    total = sum(os.path.getsize(p) for p in files)
print("ready", flush=True)
sys.stdin.readline()
cpu = time.process_time()
if sys.argv[1] == "spin":
    def spin(n):  # a function, as the Dask task is: locals, not module globals
        x = 0
        for i in range(n):
            x += i
        return x
    for _ in files:
        spin(2_000_000)
    answer = len(files)
elif sys.argv[1] == "pagecache":
    buf = bytearray(1 << 20)
    answer = 0
    for p in files:
        with open(p, "rb", buffering=0) as f:
            while True:
                n = f.readinto(buf)
                if not n:
                    break
                answer += n
elif sys.argv[1] == "memcpy":
    answer = 0
    while answer < total:
        k = min(len(dst), total - answer)
        np.copyto(dst[:k], src[:k])
        answer += k
elif sys.argv[1] == "read":
    # What a read_captures partition does (weir.dask._read_part, one file a partition) and its groupby.
    cols = ["COLUMNS"]
    rows = 0
    for p in files:
        df = weir.read(p, filter="tcp", columns=cols).to_pandas(types_mapper=pd.ArrowDtype)
        rows += int(df.groupby("ip_src").size().sum())
    answer = rows
else:
    f = weir.Filter(sys.argv[1])
    answer = sum(f.count(p) for p in files)
print(answer, time.process_time() - cpu, flush=True)
"""


def processes(n, what, files):
    """`what` (an expression to count, "read", "spin", "pagecache" or "memcpy") over `files`
    split over `n` independent processes: (seconds from the release to the last answer, the
    answers' sum, the processes' CPU seconds summed)."""
    import subprocess

    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER.replace('"COLUMNS"', ", ".join(map(repr, COLUMNS))), what, *files[i::n]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for i in range(n)
    ]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    start = time.perf_counter()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    answers = [p.stdout.readline().split() for p in procs]
    elapsed = time.perf_counter() - start
    for p in procs:
        p.stdin.close()
        p.wait()
    return elapsed, sum(int(a) for a, _ in answers), sum(float(c) for _, c in answers)


def noop(i):
    return i


def breakdown(client, rounds, files, threads):
    """Where a weir.dask.count call's time goes, from Dask's task stream (medians over
    `rounds` calls, milliseconds): the call, the tasks' compute summed, from the call to
    the first task starting, from the last task ending to the answer, and the time a
    worker thread was idle between its worker's first task starting and last task ending
    (per thread: the gaps between tasks)."""
    rows = []
    for _ in range(rounds):
        with distributed.get_task_stream(client) as stream:
            t0 = time.time()
            weir.dask.count(files, EXPR)
            t1 = time.time()
        tasks = [
            (rec["worker"], s["start"], s["stop"])
            for rec in stream.data
            for s in rec["startstops"]
            if s["action"] == "compute"
        ]
        workers = {w for w, _, _ in tasks}
        gaps = 0.0
        for w in workers:
            mine = [(a, b) for ww, a, b in tasks if ww == w]
            span = max(b for _, b in mine) - min(a for a, _ in mine)
            gaps += (span * threads - sum(b - a for a, b in mine)) / threads
        rows.append((
            t1 - t0,
            sum(b - a for _, a, b in tasks),
            min(a for _, a, _ in tasks) - t0,
            t1 - max(b for _, _, b in tasks),
            gaps / len(workers),
        ))
    return [statistics.median(r[k] for r in rows) * 1e3 for k in range(5)]


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
    parser.add_argument("--small-files", type=int, default=256)
    parser.add_argument("--small-packets", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i in range(args.files):
            path = Path(tmp) / f"part-{i:02d}.pcap"
            generate(path, args.packets, seed=10 + i)
            files.append(str(path))
        # An archive of many small files (rotated every few seconds): one task per file
        # against weir.dask's grouping (TASKS_PER_THREAD tasks per worker thread).
        small_dir = Path(tmp) / "small"
        small_dir.mkdir()
        generate(small_dir / "seed.pcap", args.small_packets, seed=99)
        seed_bytes = (small_dir / "seed.pcap").read_bytes()
        (small_dir / "seed.pcap").unlink()
        small = []
        for i in range(args.small_files):
            path = small_dir / f"s-{i:04d}.pcap"
            path.write_bytes(seed_bytes)
            small.append(str(path))
        want_small = weir.Filter(EXPR).count(small[0]) * len(small)
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
        small_results = {}
        # (worker processes, threads per worker): weir releases the GIL, so threads of one
        # worker run files in parallel too.
        for workers, threads in ((1, 1), (2, 1), (1, 2)):
            cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=threads, processes=True, dashboard_address=None)
            with distributed.Client(cluster):
                # Warm the workers (imports: weir, pandas; first compile) before timing.
                weir.dask.count(files[:workers], EXPR)
                weir.dask.read_captures(files[:workers], filter="tcp", columns=COLUMNS).groupby("ip_src").size().compute()
                count_t, got = timed(args.rounds, lambda: weir.dask.count(files, EXPR))
                assert got == want_count, (got, want_count)
                import dask

                # A/B in the same minutes: the same groups through dask.delayed and
                # dask.compute, the path weir.dask.count took before it used Client.map.
                def delayed_count():
                    groups = weir.dask._groups(files, None)
                    work = [dask.delayed(weir.dask._count_many, pure=False)(g, EXPR, True) for g in groups]
                    return sum(dask.compute(*work))

                delayed_t, got = timed(args.rounds, delayed_count)
                assert got == want_count, (got, want_count)

                def client_cpu(fn):
                    # The client's and the scheduler's CPU (LocalCluster runs the scheduler
                    # in this process) during one call: what the workers' cores lose.
                    cpus = []
                    for _ in range(args.rounds):
                        c = time.process_time()
                        fn()
                        cpus.append(time.process_time() - c)
                    return statistics.median(cpus) * 1e3

                count_cpu = client_cpu(lambda: weir.dask.count(files, EXPR))
                delayed_cpu = client_cpu(delayed_count)
                print(f"  {workers} worker(s) x {threads} thread(s), {args.files} files: count through Client.map "
                      f"{count_t:.3f} s (client and scheduler CPU {count_cpu:.0f} ms), the same groups through "
                      f"dask.delayed + dask.compute {delayed_t:.3f} s (CPU {delayed_cpu:.0f} ms)")

                def read():
                    df = weir.dask.read_captures(files, filter="tcp", columns=COLUMNS)
                    return df.groupby("ip_src").size().compute().sort_index()

                read_t, sizes = timed(args.rounds, read)
                assert list(sizes.items()) == list(want_sizes.items())
                read_cpu = client_cpu(read)
                whole_t, got = timed(args.rounds, lambda: weir.dask.count([str(whole)], EXPR))
                assert got == want_count

                spin_t, _ = timed(args.rounds, lambda: dask.compute(*[dask.delayed(spin, pure=False)(2_000_000) for _ in files]))
                noop_t, _ = timed(args.rounds, lambda: dask.compute(*[dask.delayed(noop, pure=False)(i) for i in range(len(files))]))
                client = distributed.get_client()
                noop_map_t, _ = timed(args.rounds, lambda: client.gather(client.map(noop, range(len(files)), pure=False)))
                def cpu_timed(fn):
                    walls, cpus = [], []
                    for _ in range(args.rounds):
                        c, w = time.process_time(), time.perf_counter()
                        assert fn() == want_small
                        walls.append(time.perf_counter() - w)
                        cpus.append(time.process_time() - c)
                    return statistics.median(walls), statistics.median(cpus)

                per_file = cpu_timed(lambda: weir.dask.count(small, EXPR, tasks=len(small)))
                grouped = cpu_timed(lambda: weir.dask.count(small, EXPR))
                print(f"  {workers} worker(s) x {threads} thread(s), {len(small)} files of {args.small_packets} packets: "
                      f"a task per file {per_file[0]:.3f} s (client and scheduler CPU {per_file[1] * 1e3:.0f} ms), "
                      f"grouped ({weir.dask.TASKS_PER_THREAD} tasks per thread) {grouped[0]:.3f} s "
                      f"(CPU {grouped[1] * 1e3:.0f} ms): {per_file[0] / grouped[0]:.2f}x")
                small_results[workers, threads] = (per_file[0], grouped[0])
                call, busy, first, last, gaps = breakdown(distributed.get_client(), args.rounds, files, threads)
                print(f"  {workers} worker(s) x {threads} thread(s), one count call: {call:.1f} ms; tasks' compute summed "
                      f"{busy:.1f} ms ({busy / (workers * threads):.1f} per thread); call -> first task {first:.1f} ms; "
                      f"last task -> answer {last:.1f} ms; a thread idle between its worker's first and last task {gaps:.1f} ms")
            cluster.close()
            # The machine without Dask, in the same minutes: as many independent processes
            # as this configuration has workers' threads.
            procs_n = workers * threads
            proc_t = statistics.median([processes(procs_n, EXPR, files)[0] for _ in range(args.rounds)])
            assert processes(procs_n, EXPR, files)[1] == want_count
            pspin_t = statistics.median([processes(procs_n, "spin", files)[0] for _ in range(args.rounds)])
            pread_t = statistics.median([processes(procs_n, "read", files)[0] for _ in range(args.rounds)])
            assert processes(procs_n, "read", files)[1] == int(want_sizes.sum())
            results[workers, threads] = (count_t, read_t, whole_t, spin_t, proc_t, pspin_t, noop_t, delayed_t, pread_t)
            print(f"{workers} worker(s) x {threads} thread(s): count {count_t:.3f} s ({total / count_t / 1e6:.1f} M pkt/s), "
                  f"read+groupby {read_t:.3f} s ({total / read_t / 1e6:.1f} M pkt/s), "
                  f"one {args.files}x file as one partition: count {whole_t:.3f} s; "
                  f"anchor, {args.files} pure-Python busy-loop tasks: {spin_t:.3f} s; "
                  f"{args.files} no-op tasks: {noop_t * 1e3:.1f} ms through dask.compute, {noop_map_t * 1e3:.1f} ms through Client.map; "
                  f"without Dask, {procs_n} independent process(es): weir count {proc_t:.3f} s, busy loop {pspin_t:.3f} s, "
                  f"read+groupby {pread_t:.3f} s; client and scheduler CPU per read+groupby {read_cpu:.0f} ms")
        (c1, r1, w1, s1, p1, q1, n1, d1, pr1) = results[1, 1]
        for key, name in (((2, 1), "2 workers"), ((1, 2), "1 worker x 2 threads")):
            (c2, r2, w2, s2, p2, q2, n2, d2, pr2) = results[key]
            print(f"scaling {name} / 1: count {c1 / c2:.2f}x (through dask.delayed as before: {d1 / d2:.2f}x), "
                  f"read+groupby {r1 / r2:.2f}x, "
                  f"the single large file {w1 / w2:.2f}x (one partition: no parallelism); "
                  f"anchors: busy-loop tasks on the cluster {s1 / s2:.2f}x, "
                  f"2 independent processes / 1 without Dask: weir count {p1 / p2:.2f}x, busy loop {q1 / q2:.2f}x, "
                  f"read+groupby {pr1 / pr2:.2f}x")
        (a1, g1) = small_results[1, 1]
        for key, name in (((2, 1), "2 workers"), ((1, 2), "1 worker x 2 threads")):
            (a2, g2) = small_results[key]
            print(f"scaling {name} / 1, {len(small)} small files: a task per file {a1 / a2:.2f}x, grouped {g1 / g2:.2f}x")
        print(f"results identical to single-process weir: count {want_count}, "
              f"{len(want_sizes)} source addresses with {int(want_sizes.sum())} tcp rows")


if __name__ == "__main__":
    main()
