#!/usr/bin/env python3
"""weir.Program against `weir run` (the CLI), end to end, on a generated capture.

    bench/python/program.py [--packets N] [--rounds R]

For each object: `weir run OBJ -r FILE` (the whole process) against
`weir.Program.load(OBJ).run_capture(FILE)` in this process (load included), alternated,
medians of R; the summaries and the maps (`--maps-out` against `maps_json()`) are checked
equal first. Also the per-packet cost of `Program.run` called from Python.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import weir  # noqa: E402
from bench import generate  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "target" / "release" / "weir"
OBJECTS = ["xdp_counter.o", "tc_knob.o", "socket_filter.o"]


def cli_summary(text):
    return dict((line.rsplit(" ", 1)[0], int(line.rsplit(" ", 1)[1])) for line in text.splitlines())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--packets", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        capture = Path(tmp) / "c.pcap"
        generate(capture, args.packets, seed=7)
        capture.read_bytes()
        print(f"capture: {args.packets} packets, {capture.stat().st_size / 1e6:.1f} MB (bench.py's generator)")
        print(f"{'object':<18}{'weir run s':>12}{'Program s':>12}{'ratio':>8}{'Mpkt/s':>9}")
        for name in OBJECTS:
            obj = ROOT / "testdata" / "bpf" / name
            maps = Path(tmp) / "maps.json"
            done = subprocess.run([str(CLI), "run", str(obj), "-r", str(capture), "--maps-out", str(maps)], capture_output=True, text=True, check=True)
            program = weir.Program.load(obj)
            assert program.run_capture(capture) == cli_summary(done.stdout), name
            assert program.maps_json() == maps.read_text(), name
            cli_t, py_t = [], []
            for _ in range(args.rounds):
                t = time.perf_counter()
                subprocess.run([str(CLI), "run", str(obj), "-r", str(capture)], capture_output=True, check=True)
                cli_t.append(time.perf_counter() - t)
                t = time.perf_counter()
                weir.Program.load(obj).run_capture(capture)
                py_t.append(time.perf_counter() - t)
            c, p = statistics.median(cli_t), statistics.median(py_t)
            print(f"{name:<18}{c:>12.3f}{p:>12.3f}{p / c:>8.2f}{args.packets / p / 1e6:>9.1f}")
        frames = [bytes(60)] * 100_000
        program = weir.Program.load(ROOT / "testdata" / "bpf" / "xdp_counter.o")
        times = []
        for _ in range(args.rounds):
            t = time.perf_counter()
            for f in frames:
                program.run(f)
            times.append(time.perf_counter() - t)
        print(f"Program.run from Python, one call per 60-byte frame: {statistics.median(times) / len(frames) * 1e9:.0f} ns per packet")


if __name__ == "__main__":
    main()
