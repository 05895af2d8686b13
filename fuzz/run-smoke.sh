#!/bin/sh
# Short fuzzing smoke run on stable Rust (no sanitizer): needs `cargo install cargo-fuzz`.
# Usage: fuzz/run-smoke.sh [seconds]   (FUZZ_DEV=1 builds unoptimised: much faster to build)
set -eu
cd "$(dirname "$0")/.."
dev=""
if [ "${FUZZ_DEV:-}" = "1" ]; then dev="--dev"; fi
# A stable build folder (the CI cache) when one is set, so a fresh clone does not rebuild.
target=""
if [ -n "${VAPCHECK_CACHE:-}" ]; then target="--target-dir=$VAPCHECK_CACHE/fuzz-target"; fi
# fuzz/corpus/check (not committed) collects what the run finds; fuzz/seeds/check is the committed
# seed corpus (fuzz/make-seeds), read only.
mkdir -p fuzz/corpus/check
exec cargo fuzz run check -s none $dev $target fuzz/corpus/check fuzz/seeds/check -- \
	-max_total_time="${1:-60}" -max_len=4096
