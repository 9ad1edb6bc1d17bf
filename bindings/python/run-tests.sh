#!/usr/bin/env bash
# Builds the weir wheel (maturin, release, abi3) in the virtual environment scripts/setup.sh
# made, installs it there and runs the Python tests with pytest. Called by scripts/test.sh;
# run it alone after `bash scripts/setup.sh`. The CLI the tests compare against is
# target/release/weir (built by `cargo test --workspace --release`, or built here if absent).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
venv=${WEIR_PYTHON_VENV:-$root/target/python-venv}
if [ ! -x "$venv/bin/python" ]; then
  echo "SKIPPED: python: no virtual environment at $venv (scripts/setup.sh makes it; python3 -m venv was unavailable)"
  exit 0
fi
# One target directory with the workspace: the facade and its dependencies are built once.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
# Outside the workspace, so the workspace's fmt and clippy steps do not see it: checked here.
cargo fmt --manifest-path bindings/python/Cargo.toml -- --check
cargo clippy --release --quiet --manifest-path bindings/python/Cargo.toml -- -D warnings
[ -x "$CARGO_TARGET_DIR/release/weir" ] || cargo build --release --quiet -p weir-cli
rm -rf "$CARGO_TARGET_DIR/wheels"
"$venv/bin/maturin" build --release --quiet --manifest-path bindings/python/Cargo.toml \
  --out "$CARGO_TARGET_DIR/wheels" --interpreter "$venv/bin/python"
"$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps "$CARGO_TARGET_DIR"/wheels/weir-*.whl
# Run from the tests' folder so `import weir` is the installed wheel, not the source tree.
cd bindings/python/tests
# A deadlock (GIL against a lock) would hang, not fail: bounded.
timeout 600 "$venv/bin/python" -m pytest -q -rs "$@"
