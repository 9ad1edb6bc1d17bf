#!/usr/bin/env bash
# Installs what weir's tests need on a fresh Debian machine. Safe to run again.
set -euo pipefail

# System packages: used by tests as oracles (none is a build requirement of weir itself).
# netbase: /etc/services and /etc/protocols, which libpcap (the oracle) resolves names from.
# iproute2 and python3: the live-capture tests make a network namespace with a veth pair
# (ip) and send frames into it from a packet socket (python3).
# nftables: the kernel oracle of `weir flow` (this kernel has no flower; a netdev ingress
# chain with a counter per rule stands in for it, crates/flow/tests/kernel.rs).
# python3-venv, python3-pip, python3-dev: the Python package's tests build its wheel in a
# virtual environment (bindings/python/run-tests.sh).
# wireshark-common: mergecap, the oracle of the merged output of `weir filter --jobs -w`
# (tools/cli/tests/jobs.rs; without it that comparison prints SKIPPED). Its one debconf
# question (setuid dumpcap) takes its default, no, under DEBIAN_FRONTEND=noninteractive.
# clang and libbpf-dev: crates/elf/tests/objects.rs rebuilds testdata/bpf's objects from
# their C sources (scripts/build-bpf-objects.sh, <bpf/bpf_helpers.h>) and checks the committed
# ones are current; bpftool: the kernel-loader oracle of `weir compile -o` and `weir flow
# compile` (tools/cli/tests/compile_object.rs, flow_xdp.rs). Without them those checks say
# SKIPPED (or, with clang but not libbpf-dev, the rebuild fails).
APT_PACKAGES=(ca-certificates libpcap-dev tcpdump netbase iproute2 python3 nftables python3-venv python3-pip python3-dev wireshark-common clang libbpf-dev bpftool)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  else
    echo "setup: missing Debian packages (need root to install): ${missing[*]}" >&2
    exit 1
  fi
fi

# cargo-fuzz drives the fuzz smoke runs (built from crates.io; stable toolchain with
# RUSTC_BOOTSTRAP=1, since the sanitizer runtime ships with the standard library).
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --quiet
fi

# The Python package's build and test tools, in a virtual environment of its own
# (target/python-venv: nothing installed into the system's Python). Without venv the
# Python tests are skipped, with a SKIPPED line, rather than failing the run.
# dask[dataframe] and distributed: weir.dask's tests run a LocalCluster (they say SKIPPED
# without them); pandas comes with dask.dataframe.
PYTHON_VENV=target/python-venv
if [ ! -x "$PYTHON_VENV/bin/pytest" ] \
  || ! "$PYTHON_VENV/bin/python" -c 'import dask.dataframe, distributed' >/dev/null 2>&1; then
  if python3 -m venv "$PYTHON_VENV" >/dev/null 2>&1; then
    "$PYTHON_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
      'maturin>=1.5,<2' pytest pyarrow numpy 'dask[dataframe,distributed]'
  else
    rm -rf "$PYTHON_VENV"
    echo "SKIPPED: python: python3 -m venv is unavailable"
  fi
fi
