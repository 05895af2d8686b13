#!/bin/sh
# Short fuzzing smoke run on stable Rust (no sanitizer): needs `cargo install cargo-fuzz`.
# Usage: fuzz/run-smoke.sh [seconds]   (FUZZ_DEV=1 builds unoptimised: much faster to build)
set -eu
cd "$(dirname "$0")/.."
dev=""
if [ "${FUZZ_DEV:-}" = "1" ]; then dev="--dev"; fi
exec cargo fuzz run check -s none $dev -- -max_total_time="${1:-60}" -max_len=512
