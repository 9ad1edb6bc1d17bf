"""weir.Filter against the CLI, tcpdump and itself."""

import socket
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

import weir

from conftest import SAMPLE, read_pcap, run_cli, write_pcap

EXPRESSIONS = [
    "",
    "tcp",
    "udp",
    "ip6",
    "arp",
    "vlan",
    "tcp port 443",
    "port 53 or port 22",
    "tcp[tcpflags] & tcp-syn != 0",
    "host 10.0.0.2 and not udp",
    "ip[8] = 64",
    "greater 100",
    "ether src 00:11:22:33:44:03",
    "icmp or icmp6",
]


def captures(generated):
    return [SAMPLE, generated]


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_count_equals_cli(cli, generated, expr):
    for path in captures(generated):
        result = run_cli(cli, "filter", "--count", "-r", str(path), expr)
        assert result.returncode == 0, result.stderr
        assert weir.Filter(expr).count(path) == int(result.stdout), (path, expr)


@pytest.mark.parametrize("expr", ["tcp port 443", "udp or arp", "vlan and tcp", "ip6"])
def test_filter_writes_what_the_cli_writes(cli, generated, tmp_path, expr):
    for path in captures(generated):
        ours, theirs = tmp_path / "ours.pcap", tmp_path / "cli.pcap"
        n = weir.Filter(expr).filter(path, ours)
        result = run_cli(cli, "filter", "-r", str(path), "-w", str(theirs), expr)
        assert result.returncode == 0, result.stderr
        assert ours.read_bytes() == theirs.read_bytes()
        assert n == len(read_pcap(ours))


@pytest.mark.parametrize("expr", ["tcp", "tcp port 443", "udp and not port 53", "vlan", "arp or icmp"])
def test_count_and_packets_equal_tcpdump(tcpdump, generated, tmp_path, expr):
    for path in captures(generated):
        out = tmp_path / "tcpdump.pcap"
        result = subprocess.run([tcpdump, "-r", str(path), "-w", str(out), expr], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        ours = tmp_path / "ours.pcap"
        n = weir.Filter(expr).filter(path, ours)
        theirs = read_pcap(out)
        assert n == len(theirs) == weir.Filter(expr).count(path)
        assert [p[3] for p in read_pcap(ours)] == [p[3] for p in theirs]


def test_matches_agrees_with_count(generated):
    f = weir.Filter("tcp port 80 or udp")
    packets = read_pcap(generated)
    assert sum(f.matches(p[3], p[2]) for p in packets) == f.count(generated)


def test_batch_equals_per_packet(generated):
    packets = [p[3] for p in read_pcap(generated)]
    offsets = np.cumsum([0] + [len(p) for p in packets], dtype=np.int64)
    data = b"".join(packets)
    for expr in ["tcp", "port 53", "vlan 200", "greater 80"]:
        f = weir.Filter(expr)
        batch = f.matches_batch(offsets, data)
        assert batch.dtype == np.bool_ and batch.shape == (len(packets),)
        assert batch.tolist() == [f.matches(p) for p in packets]
        assert 0 < batch.sum() < len(packets), expr
    # numpy data and a plain list of offsets give the same answers
    again = weir.Filter("tcp").matches_batch(list(offsets), np.frombuffer(data, dtype=np.uint8))
    assert again.tolist() == weir.Filter("tcp").matches_batch(offsets, data).tolist()


def test_batch_refuses_bad_offsets():
    f = weir.Filter("tcp")
    with pytest.raises(ValueError, match="not a range within data"):
        f.matches_batch([0, 10, 5], b"x" * 10)
    with pytest.raises(ValueError, match="not a range within data"):
        f.matches_batch([0, 11], b"x" * 10)
    with pytest.raises(ValueError, match="negative"):
        f.matches_batch([-1, 3], b"x" * 10)
    with pytest.raises(TypeError):
        f.matches_batch([[0, 1]], b"x")
    assert f.matches_batch([0], b"").shape == (0,)


def test_bpf_equals_cli_dd(cli):
    for expr in ["tcp port 443", "ip6 and udp", "vlan 10"]:
        result = run_cli(cli, "filter", "-dd", "-r", str(SAMPLE), expr)
        assert result.returncode == 0, result.stderr
        expected = [
            tuple(int(x, 0) for x in line.strip().strip("{},").split(","))
            for line in result.stdout.splitlines()
            if line.strip()
        ]
        assert weir.Filter(expr).bpf() == expected


def test_bpf_attaches_with_so_attach_filter():
    program = weir.Filter("udp port 53").bpf()
    blob = b"".join(struct.pack("HBBI", *insn) for insn in program)
    import ctypes

    buffer = ctypes.create_string_buffer(blob)
    fprog = struct.pack("HL", len(program), ctypes.addressof(buffer))
    SO_ATTACH_FILTER = 26
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError as e:
        print(f"SKIPPED: SO_ATTACH_FILTER: no socket: {e}")
        return
    with s:
        s.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


def test_ebpf_is_bytecode():
    code = weir.Filter("tcp").ebpf()
    assert isinstance(code, bytes) and len(code) % 8 == 0 and len(code) >= 16
    # the last instruction is exit (opcode 0x95)
    assert code[-8] == 0x95


def test_explain_names_engine_and_program():
    text = weir.Filter("tcp port 443").explain()
    assert "engine:" in text and "ret" in text and "tcp port 443" in text


def test_optimize_off_accepts_what_libpcap_rejects(generated):
    with pytest.raises(weir.FilterError) as e:
        weir.Filter("tcp and udp")
    assert str(e.value) == "expression rejects all packets"
    assert weir.Filter("tcp and udp", optimize=False).count(generated) == 0


def cli_error(cli, *args):
    result = run_cli(cli, *args)
    assert result.returncode != 0
    assert result.stderr.startswith("weir: ")
    return result.stderr[len("weir: "):].rstrip("\n")


@pytest.mark.parametrize("expr", ["tcp and", "port 99999", "host 1.2.3.4.5", "tcp[tcpflags] & nosuch != 0"])
def test_bad_expression_raises_cli_message(cli, expr):
    with pytest.raises(weir.FilterError) as e:
        weir.Filter(expr)
    assert isinstance(e.value, ValueError)
    assert str(e.value) == cli_error(cli, "filter", "--count", "-r", str(SAMPLE), expr)
    assert "^" in str(e.value)


def test_bad_linktype():
    with pytest.raises(weir.FilterError, match="unknown or unsupported link type"):
        weir.Filter("tcp", linktype="NOSUCH")


def test_damaged_captures_raise_cli_message(cli, generated, tmp_path):
    raw = Path(generated).read_bytes()
    cases = {
        "garbage.pcap": b"garbage garbage garbage garbage",
        "truncated.pcap": raw[: len(raw) // 2],
        "empty.pcap": b"",
    }
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(weir.CaptureError) as e:
            weir.Filter("tcp").count(path)
        assert str(e.value) == cli_error(cli, "filter", "--count", "-r", str(path), "tcp"), name
        with pytest.raises(weir.CaptureError):
            weir.read(path)


def test_missing_file_is_oserror(tmp_path):
    missing = tmp_path / "missing.pcap"
    with pytest.raises(FileNotFoundError):
        weir.Filter("tcp").count(missing)
    with pytest.raises(FileNotFoundError):
        weir.read(missing)
    with pytest.raises(FileNotFoundError):
        weir.Filter("tcp").filter(missing, tmp_path / "out.pcap")


def test_filter_refuses_to_overwrite_its_input(generated, tmp_path):
    copy = tmp_path / "in.pcap"
    copy.write_bytes(Path(generated).read_bytes())
    with pytest.raises(OSError, match="refusing to overwrite"):
        weir.Filter("tcp").filter(copy, copy)
    assert copy.read_bytes() == Path(generated).read_bytes()


def test_wrong_types_raise_typeerror():
    with pytest.raises(TypeError):
        weir.Filter(42)
    with pytest.raises(TypeError):
        weir.Filter("tcp").matches("not bytes")
    with pytest.raises(TypeError):
        weir.read(SAMPLE, columns="ts")


def test_snapped_packets_use_wire_length(tmp_path):
    # `greater 100` looks at the wire length, not the captured bytes.
    packet = b"\x00" * 12 + b"\x08\x00" + b"\x45" + b"\x00" * 150
    path = tmp_path / "snapped.pcap"
    write_pcap(path, [packet], snaplen=64, truncate_to=64)
    assert weir.Filter("greater 100").count(path) == 1
    assert weir.Filter("less 100").count(path) == 0


def test_threads_share_a_filter(generated):
    # count releases the GIL and matches_batch takes the filter's lock: the same object from
    # several threads gives the single-threaded answers.
    from concurrent.futures import ThreadPoolExecutor

    f = weir.Filter("tcp or vlan")
    expected = f.count(generated)
    packets = [p[3] for p in read_pcap(generated)]
    offsets = np.cumsum([0] + [len(p) for p in packets])
    data = b"".join(packets)
    batch = f.matches_batch(offsets, data)
    with ThreadPoolExecutor(4) as pool:
        counts = list(pool.map(lambda _: f.count(generated), range(8)))
        batches = list(pool.map(lambda _: f.matches_batch(offsets, data), range(8)))
    assert counts == [expected] * 8
    assert all((b == batch).all() for b in batches)
    assert int(batch.sum()) == expected
