#!/usr/bin/env bash
# Run the public eBPF conformance suite's `.data` files through `weir exec`.
#
#   scripts/conformance-suite.sh DIR [ENGINE...]
#
# DIR is a checkout's tests directory (bpf_conformance/tests); every `*.data` file under it,
# subdirectories included (tests/rfc9669/), runs as `weir exec --check --no-verify --engine E FILE` on
# each ENGINE (default: interp jit). Exit status 0 is a pass, 77 a file the suite's runner
# skips (an unknown section such as `-- map`, or no expectation), anything else a failure.
# Prints one line per failing file and engine (with weir's message), then the counts per
# engine. The exit status is 1 when any file failed.
# (--no-verify: the suite tests semantics, as uBPF's plugin does, not what a verifier accepts).
#
# The suite is not in this repository, so CI does not run this; the engine-independent
# corpus in testdata/conformance is what CI runs. WEIR overrides the binary
# (default: target/release/weir, built with `cargo build --release -p weir-cli`).
set -uo pipefail

if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: scripts/conformance-suite.sh DIR [ENGINE...]" >&2
  exit 2
fi
dir=$1
shift
engines=("$@")
[ ${#engines[@]} -gt 0 ] || engines=(interp jit)

root="$(cd "$(dirname "$0")/.." && pwd)"
weir=${WEIR:-$root/target/release/weir}
if [ ! -x "$weir" ]; then
  echo "conformance-suite: $weir not found; build it with: cargo build --release -p weir-cli" >&2
  exit 2
fi

mapfile -t files < <(find "$dir" -type f -name '*.data' | LC_ALL=C sort)
if [ ${#files[@]} -eq 0 ]; then
  echo "conformance-suite: no .data file under $dir" >&2
  exit 2
fi

status=0
summary=()
for engine in "${engines[@]}"; do
  pass=0 fail=0 skip=0
  for f in "${files[@]}"; do
    out=$("$weir" exec --check --no-verify --engine "$engine" "$f" 2>&1 </dev/null)
    rc=$?
    case $rc in
      0) pass=$((pass + 1)) ;;
      77) skip=$((skip + 1)) ;;
      *)
        fail=$((fail + 1))
        status=1
        msg=$(printf '%s' "$out" | tr '\n' ' ' | cut -c1-200)
        echo "FAIL $engine ${f#"$dir"/} (exit $rc): $msg"
        ;;
    esac
  done
  summary+=("$(printf '%-7s %d files: %d pass, %d fail, %d skip' "$engine" "${#files[@]}" "$pass" "$fail" "$skip")")
done
printf '%s\n' "${summary[@]}"
exit $status
