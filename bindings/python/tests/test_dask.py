"""weir.dask on a distributed.LocalCluster of 2 worker processes, checked against
single-process weir and against tcpdump."""

import os
import random
import subprocess

import pytest

import weir

from conftest import make_packet, read_pcap, write_pcap

dask = pytest.importorskip("dask", reason="dask not installed (pip install 'weir[dask]')")
distributed = pytest.importorskip("distributed", reason="distributed not installed")
import weir.dask  # noqa: E402

FILTERS = ["tcp port 443", "udp and not port 53", "ip6 or vlan", ""]


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    """Five captures of 1,500 frames each (different seeds), timestamps apart per file."""
    folder = tmp_path_factory.mktemp("archive")
    paths = []
    for n in range(5):
        rng = random.Random(100 + n)
        path = folder / f"part-{n}.pcap"
        write_pcap(path, [make_packet(rng) for _ in range(1500)])
        paths.append(path)
    return paths


def tcpdump_records(tcpdump, path, expr, tmp_path):
    out = tmp_path / "tcpdump.pcap"
    subprocess.run([tcpdump, "-r", str(path), "-w", str(out), expr], check=True, capture_output=True)
    return read_pcap(out)


def test_count_matches_one_process_and_tcpdump(client, captures, tcpdump, tmp_path):
    folder = captures[0].parent
    for expr in FILTERS:
        total = weir.dask.count(str(folder / "*.pcap"), expr)
        single = sum(weir.Filter(expr).count(p) for p in captures)
        assert total == single, expr
        by_tcpdump = sum(len(tcpdump_records(tcpdump, p, expr, tmp_path)) for p in captures)
        assert total == by_tcpdump, expr
        assert total > 0, expr


def test_filter_outputs_equal_one_process_and_tcpdump(client, captures, tcpdump, tmp_path):
    expr = "tcp port 443 or icmp6"
    written = weir.dask.filter([str(p) for p in captures], expr, str(tmp_path / "out"))
    assert sorted(written) == sorted(str(tmp_path / "out" / p.name) for p in captures)
    for p in captures:
        out = tmp_path / "out" / p.name
        alone = tmp_path / "alone.pcap"
        n = weir.Filter(expr).filter(p, alone)
        assert written[str(out)] == n > 0
        assert out.read_bytes() == alone.read_bytes()
        theirs = tcpdump_records(tcpdump, p, expr, tmp_path)
        assert [(ts, c, w, d) for ts, c, w, d in read_pcap(out)] == theirs


def test_read_captures_equals_weir_read(client, captures):
    import pandas as pd
    import pyarrow as pa

    columns = ["ts", "len", "ip_src", "ip_dst", "src_port", "dst_port", "tcp_flags"]
    df = weir.dask.read_captures([str(p) for p in captures], filter="tcp", columns=columns)
    assert df.npartitions == len(captures)
    assert list(df.columns) == columns
    got = df.compute()
    want = pa.concat_tables([weir.read(p, filter="tcp", columns=columns) for p in captures])
    assert pa.Table.from_pandas(got.reset_index(drop=True), preserve_index=False).cast(want.schema).equals(want)
    # A computation that runs on the workers: rows per source address.
    sizes = df.groupby("ip_src").size().compute().sort_index()
    expect = want.to_pandas().groupby("ip_src").size().sort_index()
    assert list(sizes.items()) == list(expect.items())
    assert isinstance(got["src_port"].dtype, pd.ArrowDtype)


def test_several_files_per_partition_give_the_same_rows(client, captures):
    import pyarrow as pa

    columns = ["ts", "len", "ip_src", "src_port"]
    urls = [str(p) for p in captures]
    want = pa.concat_tables([weir.read(p, filter="tcp", columns=columns) for p in captures])
    for k in (2, 3, len(urls), len(urls) + 1):
        df = weir.dask.read_captures(urls, filter="tcp", columns=columns, files_per_partition=k)
        assert df.npartitions == -(-len(urls) // k), k
        got = df.compute()
        # Rows in the files' order, as with one partition per file.
        assert pa.Table.from_pandas(got.reset_index(drop=True), preserve_index=False).cast(want.schema).equals(want), k
        sizes = df.groupby("ip_src").size().compute().sort_index()
        assert list(sizes.items()) == list(want.to_pandas().groupby("ip_src").size().sort_index().items()), k
    for bad in (0, -2, 1.5, True, "2"):
        with pytest.raises(ValueError, match="files_per_partition: a positive number"):
            weir.dask.read_captures(urls, files_per_partition=bad)


def test_fsspec_urls_are_copied_to_workers(client, captures):
    urls = [f"local://{p}" for p in captures[:2]]
    assert weir.dask.expand(urls) == urls
    assert weir.dask.count(urls, "udp") == sum(weir.Filter("udp").count(p) for p in captures[:2])
    assert weir.dask.count(f"file://{captures[0].parent}/part-[01].pcap", "udp") == weir.dask.count(urls, "udp")


def test_bad_input_raises_before_any_task(client, captures, tmp_path):
    with pytest.raises(weir.FilterError, match=r"\^"):
        weir.dask.count([str(captures[0])], "tcp port")
    with pytest.raises(FileNotFoundError, match="no capture file matches"):
        weir.dask.count(str(tmp_path / "none-*.pcap"), "tcp")
    with pytest.raises(FileNotFoundError):
        weir.dask.count(str(tmp_path / "missing.pcap"), "tcp")
    with pytest.raises(ValueError, match="unknown column"):
        weir.dask.read_captures([str(captures[0])], columns=["nope"])
    with pytest.raises(ValueError, match="would collide"):
        weir.dask.filter([str(captures[0]), f"local://{captures[0]}"], "tcp", str(tmp_path / "o"))
    broken = tmp_path / "broken.pcap"
    broken.write_bytes(captures[0].read_bytes()[:5000])
    # Raised on a worker, pickled back to this process: the same class, the same message.
    with pytest.raises(weir.CaptureError, match="broken.pcap: record 58 at byte 4918"):
        weir.dask.count([str(captures[0]), str(broken)], "tcp")


def test_a_changed_file_is_read_again(client, tmp_path):
    # Results are never taken from a previous call: the file may have changed since.
    path = tmp_path / "changing.pcap"
    rng = random.Random(7)
    packets = [make_packet(rng) for _ in range(800)]
    write_pcap(path, packets)
    before = weir.dask.count([str(path)], "ip")
    rows_before = len(weir.dask.read_captures([str(path)], columns=["len"]).compute())
    write_pcap(path, packets[:300])
    assert weir.dask.count([str(path)], "ip") == weir.Filter("ip").count(path) < before
    assert len(weir.dask.read_captures([str(path)], columns=["len"]).compute()) == 300 < rows_before


def test_filter_to_an_fsspec_url_writes_the_same_files(client, captures, tmp_path):
    # local:// goes through fsspec (the path any remote store takes): written locally by
    # the worker, then copied to the URL.
    local = weir.dask.filter([str(p) for p in captures[:2]], "udp", str(tmp_path / "plain"))
    remote = weir.dask.filter([f"local://{p}" for p in captures[:2]], "udp", f"local://{tmp_path}/remote")
    assert sorted(local.values()) == sorted(remote.values())
    for p in captures[:2]:
        assert (tmp_path / "remote" / p.name).read_bytes() == (tmp_path / "plain" / p.name).read_bytes()
    assert sorted(remote) == sorted(f"local://{tmp_path}/remote/{p.name}" for p in captures[:2])


def test_files_grouped_into_fewer_tasks_give_the_same_answers(client, captures, tmp_path):
    from weir.dask import _groups

    urls = [str(p) for p in captures]
    # Every file in exactly one group, as many groups as asked (at most one per file), the
    # bytes spread: no group holds more than the smallest one plus the largest file.
    for tasks in (1, 2, 3, len(urls), len(urls) + 5):
        groups = _groups(urls, tasks)
        assert len(groups) == min(tasks, len(urls))
        assert sorted(u for g in groups for u in g) == sorted(urls)
        loads = [sum(os.path.getsize(u) for u in g) for g in groups]
        assert max(loads) - min(loads) <= max(os.path.getsize(u) for u in urls)
    expr = "tcp port 443 or icmp6"
    single = sum(weir.Filter(expr).count(p) for p in captures)
    for tasks in (None, 1, 2, len(urls)):
        assert weir.dask.count(urls, expr, tasks=tasks) == single, tasks
        out = tmp_path / f"out-{tasks}"
        written = weir.dask.filter(urls, expr, str(out), tasks=tasks)
        assert list(written) == [str(out / p.name) for p in captures]
        for p in captures:
            alone = tmp_path / "alone.pcap"
            assert written[str(out / p.name)] == weir.Filter(expr).filter(p, alone)
            assert (out / p.name).read_bytes() == alone.read_bytes()
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="tasks: a positive number"):
            weir.dask.count(urls, expr, tasks=bad)
