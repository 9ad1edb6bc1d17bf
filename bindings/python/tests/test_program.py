"""weir.Program against `weir run` (the CLI) on the repository's clang-built objects: the same
verdicts, the same summaries, the same packets written, the same map contents; maps read and
written from Python; errors with the CLI's words."""

import json
import threading
from pathlib import Path

import numpy as np
import pytest

import weir
from conftest import ROOT, read_pcap, run_cli, write_pcap

BPF = ROOT / "testdata" / "bpf"

# (object, entry program): every object of testdata/bpf whose programs weir runs.
OBJECTS = [
    ("xdp_counter.o", None),
    ("tc_knob.o", None),
    ("socket_filter.o", None),
    ("tc_fields.o", None),
    ("ringbuf.o", None),
    ("two_funcs.o", "xdp_drop_short"),
    ("calls.o", "xdp_calls"),
    ("calls.o", "tc_calls"),
    ("legacy_maps.o", None),
]


def prog_args(prog):
    return [] if prog is None else ["--prog", prog]


def cli_summary(text):
    """`weir run`'s summary lines as a dict (`XDP_PASS 12`, `bytes kept 40`)."""
    out = {}
    for line in text.splitlines():
        name, count = line.rsplit(" ", 1)
        out[name] = int(count)
    return out


def hexbytes(items):
    return bytes(int(b, 16) for b in items)


def cli_maps(text):
    """--maps-out JSON as {map: {key: value or [per-CPU values]}} (iterable maps only)."""
    out = {}
    for name, entries in json.loads(text).items():
        table = {}
        for e in entries:
            if "values" in e:
                table[hexbytes(e["key"])] = [hexbytes(v["value"]) for v in e["values"]]
            elif isinstance(e.get("value"), list):
                table[hexbytes(e["key"])] = hexbytes(e["value"])
        out[name] = table
    return out


def same_maps(program, cli_text):
    """The Python view of every keyed map equals the CLI's dump of it."""
    mine = python_maps(program)
    theirs = cli_maps(cli_text)
    assert set(mine) <= set(theirs)
    assert mine == {name: theirs[name] for name in mine}


def python_maps(program):
    return {
        name: dict(m.items())
        for name, m in program.maps.items()
        if m.type not in ("ringbuf", "queue", "stack", "prog_array")
    }


@pytest.mark.parametrize("obj,prog", OBJECTS)
def test_verdicts_summary_and_maps_are_weir_runs(cli, generated, tmp_path, obj, prog):
    path = BPF / obj
    lines = run_cli(cli, "run", str(path), "-r", str(generated), "--verdicts", *prog_args(prog))
    assert lines.returncode == 0, lines.stderr
    expected = [int(line.split()[1]) for line in lines.stdout.splitlines()]
    assert len(expected) == 3000

    program = weir.Program.load(path, prog=prog)
    summary, verdicts = program.run_capture(generated, verdicts=True)
    assert verdicts.dtype == np.int64
    assert verdicts.tolist() == expected

    maps_out = tmp_path / "maps.json"
    cli_run = run_cli(cli, "run", str(path), "-r", str(generated), "--maps-out", str(maps_out), *prog_args(prog))
    assert cli_run.returncode == 0, cli_run.stderr
    assert summary == cli_summary(cli_run.stdout)
    cli_text = maps_out.read_text()
    same_maps(program, cli_text)
    assert program.maps_json() == cli_text


@pytest.mark.parametrize("obj", ["xdp_counter.o", "tc_knob.o", "socket_filter.o"])
def test_packets_written_are_weir_runs(cli, generated, tmp_path, obj):
    mine, theirs = tmp_path / "py.pcap", tmp_path / "cli.pcap"
    done = run_cli(cli, "run", str(BPF / obj), "-r", str(generated), "-w", str(theirs))
    assert done.returncode == 0, done.stderr
    weir.Program.load(BPF / obj).run_capture(generated, write=mine)
    assert mine.read_bytes() == theirs.read_bytes()
    assert len(read_pcap(mine)) > 0 or obj == "socket_filter.o"


def test_one_packet_at_a_time_is_the_capture_run(generated):
    records = read_pcap(generated)[:300]
    for obj in ["xdp_counter.o", "tc_fields.o"]:
        whole = weir.Program.load(BPF / obj)
        _, expected = whole.run_capture(generated, verdicts=True)
        single = weir.Program.load(BPF / obj)
        got = [single.run(data)[0] for _, _, _, data in records]
        assert got == expected[: len(records)].tolist()
    # XDP: the packet comes back as the program left it (xdp_counter leaves it alone).
    ret, packet = weir.Program.load(BPF / "xdp_counter.o").run(records[0][3])
    assert (ret, packet) == (2, records[0][3])


def tcp_frame():
    frame = bytearray(60)
    frame[12:14] = b"\x08\x00"
    frame[14] = 0x45
    frame[23] = 6
    return bytes(frame)


def test_maps_read_and_written_from_python(cli, generated, tmp_path):
    program = weir.Program.load(BPF / "xdp_counter.o", engine="interp")
    counts = program.maps["proto_count"]
    assert (counts.type, counts.key_size, counts.value_size, counts.percpu) == ("hash", 4, 8, False)
    assert len(counts) == 0 and 6 not in counts
    counts[6] = 100  # ints in the machine's byte order, as the C program's __u32 and __u64
    assert program.run(tcp_frame())[0] == 2
    assert counts[6] == (101).to_bytes(8, "little")
    assert counts[b"\x06\0\0\0"] == counts[6]
    with pytest.raises(weir.ProgramError, match=r"map `proto_count`: element exists \(EEXIST\)"):
        counts.update(6, 1, flags=1)
    counts.update(7, b"\x05" + b"\0" * 7, flags=1)
    assert set(counts.keys()) == {b"\x06\0\0\0", b"\x07\0\0\0"}
    assert set(counts) == set(counts.keys()) and dict(counts) == dict(counts.items())
    assert sorted(counts.values()) == sorted(v for _, v in counts.items())
    assert counts.get(7) == b"\x05" + b"\0" * 7 and counts.get(8) is None and counts.get(8, b"") == b""
    del counts[7]
    with pytest.raises(KeyError):
        counts[7]
    with pytest.raises(KeyError):
        del counts[7]
    with pytest.raises(weir.ProgramError, match=r"map `proto_count`: `key` has 2 bytes, the map's keys 4"):
        counts[b"\x01\x02"]
    with pytest.raises(weir.ProgramError, match=r"does not fit in 4 bytes"):
        counts[1 << 40] = 1
    with pytest.raises(weir.ProgramError, match=r"not a str"):
        counts["6"]

    # What Python wrote, the CLI reads (--maps-in), and both runs end with the same maps.
    maps_in, maps_out = tmp_path / "in.json", tmp_path / "out.json"
    maps_in.write_text(program.maps_json())
    done = run_cli(cli, "run", str(BPF / "xdp_counter.o"), "-r", str(generated), "--maps-in", str(maps_in), "--maps-out", str(maps_out))
    assert done.returncode == 0, done.stderr
    program.run_capture(generated)
    same_maps(program, maps_out.read_text())
    assert int.from_bytes(counts[6], "little") > 101

    # An array: every index is a key, none can be deleted.
    knob = weir.Program.load(BPF / "tc_knob.o")
    arrays = [m for m in knob.maps.values() if m.type == "array"]
    assert arrays, list(knob.maps)
    array = arrays[0]
    assert len(array) == array.max_entries
    with pytest.raises(weir.ProgramError, match=r"invalid argument \(EINVAL\)"):
        del array[0]


def test_per_cpu_values_are_lists_and_workers_run_in_threads(generated):
    program = weir.Program.load(BPF / "ringbuf.o", cpus=2)
    counts = program.maps["counts"]
    assert counts.percpu and counts.cpus == 2 and program.cpus == 2
    single = weir.Program.load(BPF / "ringbuf.o")
    alone = single.run_capture(generated)
    # Two Python threads, one worker each, the GIL released while they run.
    results = [None, None]

    def work(cpu):
        results[cpu] = program.run_capture(generated, cpu=cpu)

    threads = [threading.Thread(target=work, args=(cpu,)) for cpu in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Each worker counted every packet in its own per-CPU values (the ring buffer, which
    # fills as nobody consumes it, is shared: its verdicts depend on the interleaving).
    for cpu, result in enumerate(results):
        assert sum(result.values()) == 3000
        per_slot = [int.from_bytes(values[cpu], "little") for _, values in counts.items()]
        assert sum(per_slot) == 3000, per_slot
        assert per_slot[2] == result.get("XDP_DROP", 0)
    submitted_both = sum(r.get("XDP_TX", 0) for r in results)
    assert len(program.maps["events"].consume()) == submitted_both
    one = dict(single.maps["counts"].items())
    assert all(len(values) == 1 for values in one.values())
    assert sum(int.from_bytes(v[0], "little") for v in one.values()) == 3000
    # Written per CPU as a list, or one value for every CPU.
    counts[0] = [1, 2]
    assert counts[0] == [(1).to_bytes(8, "little"), (2).to_bytes(8, "little")]
    counts[0] = 9
    assert counts[0] == [(9).to_bytes(8, "little")] * 2
    with pytest.raises(weir.ProgramError, match=r"3 per-CPU values for 2 workers"):
        counts[0] = [1, 2, 3]
    # The ring buffer: a record per packet the program submitted (XDP_TX), consumed once.
    submitted = alone.get("XDP_TX", 0)
    assert submitted > 0
    assert len(single.maps["events"].consume()) == submitted
    assert single.maps["events"].consume() == []
    with pytest.raises(weir.ProgramError, match="a ringbuf has no keys"):
        single.maps["events"].keys()
    with pytest.raises(weir.ProgramError, match=r"cpu 2: the program has 2 workers"):
        program.run(tcp_frame(), cpu=2)


def test_tail_calls_through_a_program_array_loaded_from_json(cli, generated, tmp_path):
    table = {"jump_table": [{"key": ["0x00", "0x00", "0x00", "0x00"], "value": "xdp_target"}]}
    maps_in = tmp_path / "jump.json"
    maps_in.write_text(json.dumps(table))
    done = run_cli(cli, "run", str(BPF / "tail_call.o"), "--prog", "xdp_dispatch", "-r", str(generated), "--maps-in", str(maps_in))
    assert done.returncode == 0, done.stderr
    program = weir.Program.load((BPF / "tail_call.o").read_bytes(), prog="xdp_dispatch")
    before = program.run_capture(generated)
    program.load_maps_json(json.dumps(table))
    after = program.run_capture(generated)
    assert after == cli_summary(done.stdout)
    assert after != before


def test_explain_is_weir_run_explain(cli, generated):
    for engine in [None, "interp"]:
        args = ["--engine", engine] if engine else []
        done = run_cli(cli, "run", str(BPF / "xdp_counter.o"), "-r", str(generated), "--explain", *args)
        assert done.returncode == 0, done.stderr
        program = weir.Program.load(BPF / "xdp_counter.o", engine=engine)
        # The verifier's line carries its own time: compared without it.
        strip = lambda text: [l.rsplit(",", 1)[0] if l.startswith("weir: verified") else l for l in text.splitlines()]  # noqa: E731
        assert strip(program.explain()) == strip(done.stderr)
    assert "verified" not in weir.Program.load(BPF / "xdp_counter.o", verify=False).explain()


def cli_error(cli, *args):
    done = run_cli(cli, *args)
    assert done.returncode != 0
    assert done.stderr.startswith("weir: "), done.stderr
    return done.stderr[len("weir: ") :].rstrip("\n")


def test_errors_carry_the_clis_words(cli, generated, tmp_path):
    sample = str(generated)
    not_elf = ROOT / "testdata" / "bpf" / "README.md"
    with pytest.raises(weir.ProgramError) as e:
        weir.Program.load(not_elf)
    assert str(e.value) == cli_error(cli, "run", str(not_elf), "-r", sample)
    with pytest.raises(weir.ProgramError) as e:
        weir.Program.load(BPF / "two_funcs.o")
    assert str(e.value) == cli_error(cli, "run", str(BPF / "two_funcs.o"), "-r", sample)
    with pytest.raises(weir.ProgramError) as e:
        weir.Program.load(BPF / "xdp_counter.o", prog="nope")
    assert str(e.value) == cli_error(cli, "run", str(BPF / "xdp_counter.o"), "--prog", "nope", "-r", sample)
    with pytest.raises(weir.ProgramError, match="unknown engine `fast`"):
        weir.Program.load(BPF / "xdp_counter.o", engine="fast")
    missing = tmp_path / "missing.o"
    with pytest.raises(FileNotFoundError) as e:
        weir.Program.load(missing)
    assert str(missing) in str(e.value)
    with pytest.raises(TypeError):
        weir.Program.load(3.5)
    # Bytes that are not an object name no file.
    with pytest.raises(weir.ProgramError, match=r"^malformed object: not an ELF file"):
        weir.Program.load(b"not an object")
    # A damaged capture: CaptureError, with the file and the record.
    damaged = tmp_path / "damaged.pcap"
    damaged.write_bytes(Path(generated).read_bytes()[:1000])
    program = weir.Program.load(BPF / "xdp_counter.o")
    with pytest.raises(weir.CaptureError, match=str(damaged)):
        program.run_capture(damaged)
    with pytest.raises(OSError):
        program.run_capture(generated, write=generated)
