"""Shared fixtures: the repository's sample capture, a generated one, and the CLI."""

import os
import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "testdata" / "captures" / "sample.pcap"


def weir_cli():
    """The `weir` binary the Python results are checked against (WEIR_BIN, else target/)."""
    candidates = [os.environ.get("WEIR_BIN"), os.environ.get("CARGO_TARGET_DIR")]
    paths = [Path(candidates[0])] if candidates[0] else []
    if candidates[1]:
        paths.append(Path(candidates[1]) / "release" / "weir")
    paths.append(ROOT / "target" / "release" / "weir")
    for path in paths:
        if path.is_file():
            return str(path)
    return None


@pytest.fixture(scope="session")
def cli():
    path = weir_cli()
    if path is None:
        print("SKIPPED: weir CLI: not built (cargo build --release -p weir-cli)")
        pytest.skip("weir CLI not built")
    return path


@pytest.fixture(scope="session")
def tcpdump():
    path = shutil.which("tcpdump")
    if path is None:
        print("SKIPPED: tcpdump: not installed")
        pytest.skip("tcpdump not installed")
    return path


def run_cli(cli, *args):
    return subprocess.run([cli, *args], capture_output=True, text=True)


def checksum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def make_packet(rng: random.Random) -> bytes:
    """One Ethernet frame: IPv4 or IPv6 carrying TCP, UDP or ICMP, sometimes VLAN-tagged, or ARP."""
    dst = bytes(rng.choice([[0, 0x11, 0x22, 0x33, 0x44, 1], [0xFF] * 6, [2, 0x42, 0xAC, 0x11, 0, 2]]))
    src = bytes([0, 0x11, 0x22, 0x33, 0x44, rng.randrange(1, 6)])
    kind = rng.choice(["ip4", "ip4", "ip6", "arp"])
    vlan = b""
    if rng.random() < 0.2:
        vlan = struct.pack("!HH", 0x8100, rng.choice([10, 200, 4094]))
    if kind == "arp":
        body = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + src + bytes([10, 0, 0, 1]) + b"\0" * 6 + bytes([10, 0, 0, rng.randrange(1, 5)])
        return dst + src + vlan + struct.pack("!H", 0x0806) + body
    proto = rng.choice([6, 6, 17, 1])
    sport = rng.choice([80, 443, 53, 22, rng.randrange(1024, 65535)])
    dport = rng.choice([80, 443, 53, 22, rng.randrange(1024, 65535)])
    payload = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40)))
    if proto == 6:
        flags = rng.choice([0x02, 0x12, 0x10, 0x18, 0x11, 0x04])
        options = b"\x01\x01\x08\x0a" + b"\0" * 8 if rng.random() < 0.3 else b""
        off = (20 + len(options)) // 4
        l4 = struct.pack("!HHIIBBHHH", sport, dport, rng.getrandbits(32), 0, off << 4, flags, 1024, 0, 0) + options + payload
    elif proto == 17:
        l4 = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    else:
        l4 = struct.pack("!BBHHH", 8, 0, 0, 1, 1) + payload
    if kind == "ip4":
        srcip = bytes([10, 0, 0, rng.randrange(1, 5)])
        dstip = bytes([192, 168, 1, rng.randrange(1, 5)])
        frag = 0x2000 * (rng.random() < 0.05)
        header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), rng.getrandbits(16), frag, rng.choice([1, 64, 128]), proto, 0, srcip, dstip)
        header = header[:10] + struct.pack("!H", checksum16(header)) + header[12:]
        return dst + src + vlan + struct.pack("!H", 0x0800) + header + l4
    next_header = {1: 58, 6: 6, 17: 17}[proto]
    srcip = bytes([0x20, 0x01, 0x0D, 0xB8] + [0] * 11 + [rng.randrange(1, 5)])
    dstip = bytes([0x20, 0x01, 0x0D, 0xB8] + [0] * 11 + [rng.randrange(5, 9)])
    header = struct.pack("!IHBB16s16s", 6 << 28, len(l4), next_header, rng.choice([1, 64, 255]), srcip, dstip)
    return dst + src + vlan + struct.pack("!H", 0x86DD) + header + l4


def write_pcap(path: Path, packets, snaplen=65535, truncate_to=None):
    with open(path, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1))
        for i, packet in enumerate(packets):
            data = packet if truncate_to is None else packet[:truncate_to]
            out.write(struct.pack("<IIII", 1_700_000_000 + i // 10, (i % 10) * 1000, len(data), len(packet)))
            out.write(data)


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    """A capture of 3,000 varied frames, fixed seed."""
    rng = random.Random(16)
    packets = [make_packet(rng) for _ in range(3000)]
    path = tmp_path_factory.mktemp("captures") / "generated.pcap"
    write_pcap(path, packets)
    return path


def read_pcap(path: Path):
    """(ts_ns, caplen, len, data) per record of a little-endian microsecond pcap."""
    raw = Path(path).read_bytes()
    magic, = struct.unpack_from("<I", raw, 0)
    assert magic in (0xA1B2C3D4, 0xA1B23C4D), hex(magic)
    scale = 1000 if magic == 0xA1B2C3D4 else 1
    at, out = 24, []
    while at < len(raw):
        sec, frac, caplen, wire = struct.unpack_from("<IIII", raw, at)
        out.append((sec * 1_000_000_000 + frac * scale, caplen, wire, raw[at + 16 : at + 16 + caplen]))
        at += 16 + caplen
    return out
