"""Without dask installed, weir imports and weir.dask says what to install."""

import subprocess
import sys


def test_weir_dask_without_dask_names_the_extra(generated):
    # None in sys.modules makes `import dask` fail as if dask were not installed.
    code = (
        "import sys; sys.modules['dask'] = None; import weir, weir.dask\n"
        f"weir.Filter('tcp').count({str(generated)!r})\n"
        "try:\n"
        f"    weir.dask.count({str(generated)!r}, 'tcp')\n"
        "except ImportError as e:\n"
        "    print(e)\n"
        "else:\n"
        "    print('no error')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'weir[dask]'" in done.stdout, done.stdout + done.stderr
