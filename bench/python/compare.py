#!/usr/bin/env python3
"""weir from Python beside scapy, dpkt and pyshark on one task: count the packets of a
capture that match `tcp port 443` (issue 16's comparison).

    bench/python/compare.py [--packets N] [--slow-packets M] [--rounds R]

Each tool runs in a fresh Python process (so peak memory is its own, GNU time's maximum
resident set size); the time is the task alone, after the imports,
the best of R runs in that process for weir, one run for the others (each takes seconds to
minutes). The counts are checked
against tcpdump's before any time is reported.

- weir:    weir.Filter("tcp port 443").count(path)
- scapy:   sniff(offline=path, filter="tcp port 443", store=False, prn=count): scapy hands
           the filter to tcpdump (`tcpdump -r path -w - FILTER`) and dissects what comes back
- dpkt:    dpkt.pcap.Reader, dpkt.ethernet.Ethernet per packet, the same test in Python
           (no VLAN tag, IPv4 or IPv6, TCP, either port 443)
- pyshark: FileCapture(path, display_filter="tcp.port == 443 && !vlan") (tshark dissects
           every packet and sends its decode back as XML), IP reassembly off so first
           fragments count as they do for libpcap

scapy and pyshark run on the first --slow-packets packets (they take minutes on the whole
capture); their rates are per packet of that prefix. Also the whole process, end to end,
beside the tools a user would run instead: `weir filter --count -r` and
`tcpdump -r FILE 'tcp port 443' | wc -l`.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import generate  # noqa: E402  (the capture bench.py measures: one generator)

EXPR = "tcp port 443"

# Each snippet defines task(path) -> count; run in a fresh interpreter.
TASKS = {
    "weir": """
import weir
def task(path):
    return weir.Filter("tcp port 443").count(path)
""",
    "dpkt": """
import dpkt
def task(path):
    n = 0
    with open(path, "rb") as f:
        for ts, buf in dpkt.pcap.Reader(f):
            eth = dpkt.ethernet.Ethernet(buf)
            if eth.type not in (dpkt.ethernet.ETH_TYPE_IP, dpkt.ethernet.ETH_TYPE_IP6):
                continue
            if getattr(eth, "vlan_tags", None):
                continue
            ip = eth.data
            tcp = getattr(ip, "data", None)
            if not isinstance(tcp, dpkt.tcp.TCP):
                continue
            if tcp.sport == 443 or tcp.dport == 443:
                n += 1
    return n
""",
    "scapy": """
import logging
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
from scapy.all import sniff
def task(path):
    seen = [0]
    def count(p):
        seen[0] += 1
    sniff(offline=path, filter="tcp port 443", store=False, prn=count)
    return seen[0]
""",
    "pyshark": """
import pyshark
def task(path):
    cap = pyshark.FileCapture(path, display_filter="tcp.port == 443 && !vlan", keep_packets=False,
                              override_prefs={"ip.defragment": "FALSE", "ipv6.defragment": "FALSE"})
    n = 0
    for _ in cap:
        n += 1
    cap.close()
    return n
""",
}

RUNNER = """
import json, resource, sys, time
{task}
path, rounds = sys.argv[1], int(sys.argv[2])
best, count = None, None
for _ in range(rounds):
    start = time.perf_counter()
    count = task(path)
    took = time.perf_counter() - start
    best = took if best is None else min(best, took)
print(json.dumps({{"count": count, "seconds": best}}))
"""


def run_with_rss(name, path, rounds):
    """The tool's result, and its process's peak resident memory (MiB) as GNU time reports
    it: time forks from a small process, so the figure is the tool's own (a child of this
    Python, which holds the generated capture's making, would start from its size). The
    tcpdump and tshark processes scapy and pyshark start are not in it."""
    code = RUNNER.format(task=TASKS[name])
    done = subprocess.run(
        ["/usr/bin/time", "-f", "WEIR_MAXRSS_KIB %M", sys.executable, "-c", code, str(path), str(rounds)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name}: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    kib = [line.split()[1] for line in done.stderr.splitlines() if line.startswith("WEIR_MAXRSS_KIB ")]
    result["rss_mib"] = int(kib[-1]) / 1024
    return result


def prefix(src: Path, dst: Path, packets: int):
    """The first `packets` records of a microsecond little-endian pcap."""
    import struct

    raw = src.read_bytes()
    at, n = 24, 0
    while at < len(raw) and n < packets:
        caplen = struct.unpack_from("<I", raw, at + 8)[0]
        at += 16 + caplen
        n += 1
    dst.write_bytes(raw[:at])


def wall(cmd, shell=False):
    start = time.perf_counter()
    out = subprocess.run(cmd, shell=shell, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - start, out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--packets", type=int, default=1_000_000)
    parser.add_argument("--slow-packets", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cli", default=str(Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / "weir"))
    parser.add_argument("--tools", default="weir,dpkt,scapy,pyshark")
    args = parser.parse_args()
    tools = args.tools.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "large.pcap"
        small = Path(tmp) / "prefix.pcap"
        generate(big, args.packets)
        prefix(big, small, args.slow_packets)
        big.read_bytes()
        print(f"capture: {args.packets} packets, {big.stat().st_size / 1e6:.1f} MB (bench.py's generator); "
              f"slow tools on its first {args.slow_packets}")
        truth = {}
        for p in (big, small):
            out = subprocess.run(["tcpdump", "-r", str(p), "-w", "-", EXPR], check=True, capture_output=True).stdout
            n, at = 0, 24
            import struct

            while at < len(out):
                at += 16 + struct.unpack_from("<I", out, at + 8)[0]
                n += 1
            truth[p] = n
        print(f"tcpdump's count: {truth[big]} of {args.packets}; {truth[small]} of {args.slow_packets}")
        rows = {}
        for name in tools:
            if name == "pyshark" and shutil.which("tshark") is None:
                print("pyshark: SKIPPED (tshark is not installed: apt install tshark)")
                continue
            slow = name in ("scapy", "pyshark")
            path = small if slow else big
            packets = args.slow_packets if slow else args.packets
            r = run_with_rss(name, path, args.rounds if name == "weir" else 1)
            assert r["count"] == truth[path], (name, r["count"], truth[path])
            r["rate"] = packets / r["seconds"]
            rows[name] = r
        base = rows.get("weir")
        print(f"{'tool':10} {'packets':>9} {'task s':>9} {'pkt/s':>12} {'weir is x faster':>17} {'peak RSS MiB':>13}")
        for name, r in rows.items():
            packets = args.slow_packets if name in ("scapy", "pyshark") else args.packets
            ratio = base["rate"] / r["rate"] if base else float("nan")
            print(f"{name:10} {packets:9d} {r['seconds']:9.3f} {r['rate']:12,.0f} {ratio:17.1f} {r['rss_mib']:13.1f}")
        # End to end: whole processes, as a user runs them.
        runs = []
        for _ in range(args.rounds):
            runs.append(wall([args.cli, "filter", "--count", "-r", str(big), EXPR]))
        cli_t = sorted(t for t, _ in runs)[len(runs) // 2]
        assert int(runs[0][1]) == truth[big]
        tcpdump_t, out = wall(f"tcpdump -r {big} '{EXPR}' 2>/dev/null | wc -l", shell=True)
        print(f"end to end, {args.packets} packets: weir filter --count {cli_t:.3f} s (median of {args.rounds}); "
              f"tcpdump -r | wc -l {tcpdump_t:.3f} s ({tcpdump_t / cli_t:.0f}x); lines {out.strip()}")


if __name__ == "__main__":
    main()
