"""examples/packets_per_second.py runs and says what weir counts."""

import subprocess
import sys

import pytest

import weir

from conftest import ROOT, SAMPLE


def test_notebook_example_runs(tmp_path):
    pytest.importorskip("pandas", reason="the example needs pandas")
    example = ROOT / "examples" / "packets_per_second.py"
    done = subprocess.run([sys.executable, str(example), str(SAMPLE), "udp"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{SAMPLE.name}: {weir.Filter('udp').count(SAMPLE)} packets match 'udp'" in done.stdout
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib is not installed" in done.stdout
    else:
        assert (tmp_path / "packets_per_second.png").stat().st_size > 1000
