#!/usr/bin/env bash
# Rebuilds the BPF objects under testdata/bpf/ (and testdata/bpf/refused/: objects weir-elf
# refuses, in whole or in part) from their C sources (the weir-elf tests read
# the committed .o files; crates/elf/tests/objects.rs checks that they match what this
# script builds when clang is present).
#
#   scripts/build-bpf-objects.sh [OUT_DIR]     (default: testdata/bpf, in place; the
#                                               refused ones go to OUT_DIR/refused)
#
# The flags are `clang -O2 -g -target bpf -c` plus the multiarch include directory (for
# <asm/types.h>) and a debug prefix map, so that the DWARF does not record the checkout's
# absolute path and the output does not depend on where the tree lives.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/testdata/bpf"
out="${1:-$src}"
mkdir -p "$out/refused"
out="$(cd "$out" && pwd)"
clang="${CLANG:-clang}"
multiarch="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
cd "$src"
for c in *.c refused/*.c; do
    "$clang" -O2 -g -target bpf -c \
        -I"/usr/include/$multiarch" \
        -fdebug-prefix-map="$src=." -fdebug-compilation-dir=. \
        "$c" -o "$out/${c%.c}.o"
done
