#!/bin/sh
# Short fuzzing smoke run on stable Rust (no sanitizer): needs `cargo install cargo-fuzz`.
set -eu
cd "$(dirname "$0")/.."
exec cargo fuzz run check -s none -- -max_total_time="${1:-60}" -max_len=512
