#!/usr/bin/env bash
# Sets up a fresh machine and runs every test weir has: style, lints, the test suite in
# release mode (unit, property, conformance corpus, kernel oracle when root), a smoke run
# of each fuzz target and of the benchmark, and the README's Quick start.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-20}

step() { printf '\n=== %s\n' "$*"; }

step setup
bash scripts/setup.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets --release --quiet -- -D warnings

step "cargo test (release)"
cargo test --workspace --release 2>&1 | tee target/test-output.txt
# A runner that ran nothing is a failure, not a pass.
grep -q "test result: ok" target/test-output.txt

step "quick start"
cargo run --release --quiet -p weir-cli -- filter --explain -r testdata/captures/sample.pcap 'tcp or udp port 53' | tail -n 3
cargo run --release --quiet -p weir-cli -- exec --check testdata/samples/ipv4-header-checksum.data

step "benchmark smoke runs"
cargo run --release --quiet -p weir-bench -- interp --rounds 3
cargo run --release --quiet -p weir-bench -- filters --rounds 3 --quick --hot
cargo run --release --quiet -p weir-bench -- compile --quick

step "fuzz smoke runs (${FUZZ_SECONDS}s each)"
for target in decode assemble interp jit_diff; do
  (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" -- -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 2>&1 | tail -n 3)
done

step "summary"
passed=$(grep -o '[0-9]* passed' target/test-output.txt | awk '{s+=$1} END {print s+0}')
failed=$(grep -o '[0-9]* failed' target/test-output.txt | awk '{s+=$1} END {print s+0}')
echo "all steps green"
echo "tests: ${passed} passed, ${failed} failed"
