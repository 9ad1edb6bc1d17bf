#!/usr/bin/env python3
"""The Python package against the CLI on a large generated capture (issue 16's goals).

    bench/python/bench.py [--packets N] [--rounds R] [--cli target/release/weir]

Measures `Filter.count` against `weir filter --count -r` (the same filter, the same file,
best of R runs each, the CLI's time including its process start) and `weir.read` with 10
columns in packets per second. Needs the wheel installed (bindings/python/run-tests.sh).
"""

import argparse
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bindings" / "python" / "tests"))

import weir  # noqa: E402
from conftest import make_packet  # noqa: E402  (the tests' generator: one source of frames)

FILTERS = ["tcp port 443", "udp and not port 53", "ip6 or vlan"]
COLUMNS = ["ts", "caplen", "len", "eth_src", "ethertype", "ip_src", "ip_dst", "ip_proto", "src_port", "dst_port"]


def generate(path: Path, count: int, seed: int = 1):
    rng = random.Random(seed)
    distinct = [make_packet(rng) for _ in range(4096)]
    with open(path, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        chunk = []
        for i in range(count):
            p = distinct[rng.randrange(len(distinct))]
            chunk.append(struct.pack("<IIII", 1_700_000_000 + i // 1000, i % 1000, len(p), len(p)))
            chunk.append(p)
            if len(chunk) >= 20000:
                out.write(b"".join(chunk))
                chunk.clear()
        out.write(b"".join(chunk))


def best(rounds, fn):
    return best_cpu(rounds, fn)[::2]


def best_cpu(rounds, fn):
    """(best wall time, best CPU time of this process, result): on a machine shared with
    other work the CPU time is the steadier measure of a single-threaded task."""
    times, cpu, result = [], [], None
    for _ in range(rounds):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(times), min(cpu), result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--packets", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cli", default=str(Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / "weir"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "large.pcap"
        generate(path, args.packets)
        size = path.stat().st_size
        print(f"capture: {args.packets} packets, {size / 1e6:.1f} MB (generated, fixed seed)")
        path.read_bytes()  # in the page cache for both sides
        print(f"{'filter':24} {'CLI s':>8} {'Filter.count s':>15} {'ratio':>7} {'Mpkt/s':>7}")
        for expr in FILTERS:
            cli_t, cli_out = best(args.rounds, lambda: subprocess.run([args.cli, "filter", "--count", "-r", str(path), expr], check=True, capture_output=True, text=True).stdout)
            f = weir.Filter(expr)
            py_t, py_n = best(args.rounds, lambda: f.count(path))
            assert py_n == int(cli_out), (expr, py_n, cli_out)
            print(f"{expr:24} {cli_t:8.3f} {py_t:15.3f} {py_t / cli_t:7.2f} {args.packets / py_t / 1e6:7.1f}")
        f = weir.Filter(FILTERS[0])
        _, count_cpu, _ = best_cpu(args.rounds, lambda: f.count(path))
        read_t, read_cpu, table = best_cpu(args.rounds, lambda: weir.read(path, columns=COLUMNS))
        assert table.num_rows == args.packets
        print(f"weir.read, {len(COLUMNS)} columns: {read_t:.3f} s, {args.packets / read_t / 1e6:.2f} M packets/s ({', '.join(COLUMNS)})")
        print(f"  CPU time: {read_cpu:.3f} s, {args.packets / read_cpu / 1e6:.2f} M packets/s per core; "
              f"{read_cpu / count_cpu:.1f}x the CPU time of Filter.count({FILTERS[0]!r}) ({count_cpu:.3f} s)")
        read_f, table = best(args.rounds, lambda: weir.read(path, filter="tcp", columns=COLUMNS))
        print(f"weir.read, filter 'tcp', {len(COLUMNS)} columns: {read_f:.3f} s, {args.packets / read_f / 1e6:.2f} M packets/s read ({table.num_rows} rows)")
        num = ["ts", "caplen", "len", "ethertype", "ip_proto", "src_port", "dst_port", "ttl", "tcp_flags", "payload_offset"]
        read_n, read_n_cpu, _ = best_cpu(args.rounds, lambda: weir.read(path, columns=num))
        print(f"weir.read, 10 numeric columns: {read_n:.3f} s, {args.packets / read_n / 1e6:.2f} M packets/s; "
              f"CPU {read_n_cpu:.3f} s, {args.packets / read_n_cpu / 1e6:.2f} M packets/s per core")


if __name__ == "__main__":
    main()
