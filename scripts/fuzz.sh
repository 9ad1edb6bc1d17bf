#!/usr/bin/env bash
# Long offline fuzz campaigns (issue 18: hours per target, not CI).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Runs each fuzz target of fuzz/ (default: every one cargo fuzz lists) for
# SECONDS_PER_TARGET (default 3600) with -max_total_time and -rss_limit_mb=2048, on a
# persistent corpus in fuzz/corpus/<target> (gitignored; it grows across campaigns and
# starts from the target's saved regressions). At the end it prints, per target, the
# executions, the corpus size and the crashes; each crash file (crash-*, leak-*, oom-*,
# timeout-* in fuzz/artifacts/<target>) is copied into fuzz/regressions/<target>/, where
# `cargo test -p weir-conformance` replays it: fix the bug, then commit the file.
#
# CI does not run this: scripts/test.sh runs every target for FUZZ_SECONDS (20 s) as a
# smoke run. Needs cargo-fuzz and a nightly-capable toolchain (RUSTC_BOOTSTRAP=1 here).
# The exit status is 1 when any target crashed.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

seconds=${1:-3600}
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
  echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]" >&2
  exit 2
fi
shift || true
export RUSTC_BOOTSTRAP=1
if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo fuzz list)
fi

echo "=== building the fuzz targets"
cargo fuzz build

names=()
execs=()
corpora=()
crashes=()
new_files=()
for target in "${targets[@]}"; do
  corpus="corpus/$target"
  artifacts="artifacts/$target"
  mkdir -p "$corpus" "$artifacts"
  log="$artifacts/campaign-$(date -u +%Y%m%dT%H%M%SZ).log"
  before=$(find "$artifacts" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' -o -name 'timeout-*' \) | sort)
  printf '\n=== %s: %d s (log: fuzz/%s)\n' "$target" "$seconds" "$log"
  seeds=()
  [ -d "regressions/$target" ] && seeds=("regressions/$target")
  # A crash stops libFuzzer with a non-zero status; go on with the next target.
  set +e
  cargo fuzz run "$target" "$corpus" "${seeds[@]}" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1
  status=$?
  set -e
  # libFuzzer's last word: "Done N runs in S second(s)", or the crash it found.
  grep -E '^(Done [0-9]+ runs|SUMMARY|==[0-9]+== ?ERROR|artifact_prefix|Test unit written)' "$log" | tail -n 4 || tail -n 3 "$log"
  after=$(find "$artifacts" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' -o -name 'timeout-*' \) | sort)
  found=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | sed '/^$/d')
  count=0
  if [ -n "$found" ]; then
    while IFS= read -r file; do
      cp "$file" "regressions/$target/"
      new_files+=("fuzz/regressions/$target/$(basename "$file")")
      count=$((count + 1))
    done <<<"$found"
  elif [ "$status" -ne 0 ]; then
    # Failed without leaving an artifact (a build error, a killed run): count it.
    count=1
  fi
  executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{print $2}' | tail -n 1)
  names+=("$target")
  execs+=("${executions:-?}")
  corpora+=("$(find "$corpus" -type f | wc -l)")
  crashes+=("$count")
done

printf '\n=== fuzz campaign: %d s per target\n' "$seconds"
printf '%-10s %14s %8s %8s\n' target executions corpus crashes
failed=0
for i in "${!names[@]}"; do
  printf '%-10s %14s %8s %8s\n' "${names[$i]}" "${execs[$i]}" "${corpora[$i]}" "${crashes[$i]}"
  [ "${crashes[$i]}" -eq 0 ] || failed=1
done
if [ ${#new_files[@]} -gt 0 ]; then
  printf '\nCrash inputs copied into fuzz/regressions (cargo test replays them): fix the\n'
  printf 'bug, then commit each file:\n'
  printf '  %s\n' "${new_files[@]}"
fi
exit "$failed"
