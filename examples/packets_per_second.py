# %% [markdown]
# # Packets per second for a filter, with weir
#
# A notebook-style script (cells marked `# %%`: VS Code, Jupytext and Spyder run them one by
# one; `python examples/packets_per_second.py` runs it whole). It counts the packets of a
# capture that match a tcpdump expression, then plots how many per second, all matching
# packets against those of the filter.
#
#     pip install ./bindings/python matplotlib pandas
#     python examples/packets_per_second.py [CAPTURE] [EXPRESSION]
#
# Without arguments it reads the repository's sample capture with `tcp`.

# %%
import sys
from pathlib import Path

import weir

root = Path(__file__).resolve().parents[1] if "__file__" in globals() else Path.cwd()
capture = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "testdata" / "captures" / "sample.pcap"
expression = " ".join(sys.argv[2:]) or "tcp"

# %% [markdown]
# ## Count
# `Filter.count` is what `weir filter --count -r CAPTURE EXPRESSION` prints, the filter
# compiled to native code and the capture streamed through it in Rust.

# %%
f = weir.Filter(expression)
print(f"{capture.name}: {f.count(capture)} packets match {expression!r}")
print(f.explain().splitlines()[2])  # which engine runs it, and why

# %% [markdown]
# ## Per second
# `weir.read` gives an Arrow table with only the columns asked for; pandas takes it from
# there. One table for every packet, one for those the filter keeps.

# %%
every = weir.read(capture, columns=["ts", "len"]).to_pandas()
kept = weir.read(capture, filter=expression, columns=["ts", "len"]).to_pandas()
per_second = (
    every.set_index("ts").resample("1s")["len"].count().rename("all packets").to_frame()
    .join(kept.set_index("ts").resample("1s")["len"].count().rename(expression), how="left")
    .fillna(0)
    .astype(int)
)
print(per_second.head(10))

# %% [markdown]
# ## Plot
# matplotlib is optional: without it the table above is the result.

# %%
try:
    import matplotlib

    if "ipykernel" not in sys.modules:
        matplotlib.use("Agg")  # a script writes a file; a notebook shows the figure inline
    import matplotlib.pyplot as plt
except ImportError:
    print("matplotlib is not installed: pip install matplotlib to plot")
else:
    ax = per_second.plot(drawstyle="steps-post", figsize=(9, 3.5))
    ax.set_ylabel("packets per second")
    ax.set_title(f"{capture.name}: all packets and {expression!r}")
    plt.tight_layout()
    if "ipykernel" in sys.modules:
        plt.show()
    else:
        out = Path("packets_per_second.png")
        plt.savefig(out, dpi=100)
        print(f"plot written to {out.resolve()}")
