#!/usr/bin/env bash
# Sets up a fresh machine and runs every test weir has: style, lints, the test suite in
# release mode (unit, property, conformance corpus, kernel oracle when root), a smoke run
# of each fuzz target and of the benchmark, and the README's Quick start.
# Each step prints its wall time when it ends; a table of them closes the run (or says
# which step failed).
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-20}
FUZZ_TARGETS=(decode assemble interp jit_diff capture pflang cbpf elf flow pfmatch verify)

# Step bookkeeping: the step running now, when it started, and the finished ones.
current=""
started=$SECONDS
step_names=()
step_seconds=()

# Ends the running step, if any, and prints how long it took.
finish_step() {
  if [ -n "$current" ]; then
    local took=$((SECONDS - started))
    step_names+=("$current")
    step_seconds+=("$took")
    printf '=== %s (%d s)\n' "$current" "$took"
    current=""
  fi
}

# Ends the running step and starts the next.
step() {
  finish_step
  current="$*"
  started=$SECONDS
  printf '\n=== %s\n' "$current"
}

print_durations() {
  printf '\nstep durations (wall seconds):\n'
  local i
  for i in "${!step_names[@]}"; do
    printf '%6d  %s\n' "${step_seconds[$i]}" "${step_names[$i]}"
  done
  printf '%6d  %s\n' "$SECONDS" "total"
}

# On a failure, the durations so far and the step that failed (the exit status stays).
on_exit() {
  local status=$?
  if [ "$status" -ne 0 ]; then
    if [ -n "$current" ]; then
      step_names+=("$current (FAILED)")
      step_seconds+=("$((SECONDS - started))")
    fi
    print_durations
    printf '\nFAILED in step "%s" (exit status %d)\n' "$current" "$status"
  fi
  exit "$status"
}
trap on_exit EXIT

step setup
bash scripts/setup.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "every test file is in a test binary"
# A crate with `autotests = false` builds its integration tests as one binary from
# tests/main.rs; a tests/*.rs file that main.rs does not declare as a module (and no
# [[test]] names) would never be compiled, let alone run.
orphans=()
for manifest in crates/*/Cargo.toml tools/*/Cargo.toml bench/Cargo.toml; do
  grep -q '^autotests = false' "$manifest" || continue
  dir=$(dirname "$manifest")
  for file in "$dir"/tests/*.rs; do
    [ -e "$file" ] || continue
    name=$(basename "$file" .rs)
    [ "$name" != main ] || continue
    if grep -Eq "^(pub(\(crate\))? )?mod $name;" "$dir/tests/main.rs"; then continue; fi
    if grep -q "^path = \"tests/$name.rs\"" "$manifest"; then continue; fi
    orphans+=("$file")
  done
done
if [ ${#orphans[@]} -gt 0 ]; then
  echo "not in any test binary (declare them in tests/main.rs): ${orphans[*]}" >&2
  exit 1
fi
echo "ok"

step "cargo clippy"
cargo clippy --workspace --all-targets --release --quiet -- -D warnings

step "cargo test (release): build"
cargo test --workspace --release --no-run

step "cargo test (release): run"
# `--show-output`: the harness swallows what a passing test prints, and a test that returns
# early where it cannot run says so only by printing `SKIPPED: <name>: <reason>`. The whole
# output goes to target/test-output-full.txt; the log keeps the harness's own lines, each
# failure whole, and every SKIPPED line (listed again in the summary).
cargo test --workspace --release -- --show-output 2>&1 | tee target/test-output-full.txt |
  awk '/^successes:$/ { quiet = 1; next }
       /^failures:$/ || /^test result:/ { quiet = 0 }
       quiet { if (/SKIPPED: /) { print; fflush() } next }
       { print; fflush() }' | tee target/test-output.txt
# A runner that ran nothing is a failure, not a pass.
grep -q "test result: ok" target/test-output.txt

step "python package (wheel build, pytest)"
bash bindings/python/run-tests.sh 2>&1 | tee target/python-test-output.txt

step "quick start"
cargo run --release --quiet -p weir-cli -- filter --explain -r testdata/captures/sample.pcap 'tcp or udp port 53' | tail -n 3
cargo run --release --quiet -p weir-cli -- exec --check testdata/samples/ipv4-header-checksum.data

step "benchmark smoke runs"
cargo run --release --quiet -p weir-bench -- interp --rounds 3
cargo run --release --quiet -p weir-bench -- filters --rounds 3 --quick --hot
cargo run --release --quiet -p weir-bench -- compile --quick
cargo run --release --quiet -p weir-bench -- e2e --quick

step "fuzz build (cargo fuzz build: every target, with the address sanitizer)"
(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build)

step "fuzz smoke runs (${FUZZ_SECONDS}s each)"
for target in "${FUZZ_TARGETS[@]}"; do
  printf -- '--- fuzz target: %s\n' "$target"
  target_started=$SECONDS
  (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" -- -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 2>&1 | tail -n 3)
  printf -- '--- fuzz target: %s (%d s)\n' "$target" "$((SECONDS - target_started))"
done
finish_step

printf '\n=== summary\n'
passed=$(grep -o '[0-9]* passed' target/test-output.txt | awk '{s+=$1} END {print s+0}')
failed=$(grep -o '[0-9]* failed' target/test-output.txt | awk '{s+=$1} END {print s+0}')
echo "all steps green"
echo "tests: ${passed} passed, ${failed} failed"
skipped=$(grep -c 'SKIPPED: ' target/test-output.txt || true)
echo "tests that could not run here (SKIPPED lines): ${skipped}"
grep 'SKIPPED: ' target/test-output.txt | sed 's/^/  /' || true
py_passed=$(grep -o '[0-9]* passed' target/python-test-output.txt | awk '{s+=$1} END {print s+0}')
echo "python tests: ${py_passed} passed"
print_durations
