#!/bin/sh
# Short fuzzing smoke run on stable Rust (no sanitizer): needs `cargo install cargo-fuzz`.
# Usage: fuzz/run-smoke.sh [seconds per target] [target...]   (default: 60 s, every target)
# The build is optimised (cargo fuzz's release profile) with debug assertions (`-a`: overflow
# checks and debug_assert! stay on, as in the unoptimised build) and 16 codegen units
# (FUZZ_CODEGEN_UNITS; cargo fuzz's own default of 1 runs faster but took 25 minutes to build
# on 2 busy cores). FUZZ_DEV=1 builds unoptimised instead.
# Targets: check (CEL parse + check), k8s_expr (an expression in every site of a policy checked
# against real kinds in the Kubernetes environment, and kube-apiserver's create validation),
# policy (VAP and MAP documents through `vapcheck check`),
# schema (OpenAPI v3 documents and CRD manifests through the schema conversion), manifests
# (static-manifest files through the loader, documents through the CI position mapping).
set -eu
cd "$(dirname "$0")/.."
secs="${1:-60}"
[ $# -gt 0 ] && shift
targets="${*:-check k8s_expr policy schema manifests}"
build="-a --codegen-units ${FUZZ_CODEGEN_UNITS:-16}"
if [ "${FUZZ_DEV:-}" = "1" ]; then build="--dev"; fi
# A stable build folder (the CI cache) when one is set, so a fresh clone does not rebuild.
target_dir=""
if [ -n "${VAPCHECK_CACHE:-}" ]; then target_dir="--target-dir=$VAPCHECK_CACHE/fuzz-target"; fi
# The seeds are made from ../shared (the policy corpus, never copied into the repository)
# and the repository's own golden cases and fixtures, into the ignored fuzz/seeds/.
fuzz/make-seeds
for t in $targets; do
	case "$t" in
	check) max_len=4096 ;;
	k8s_expr) max_len=4096 ;;
	policy) max_len=32768 ;;
	schema) max_len=131072 ;;
	manifests) max_len=16384 ;;
	*) echo "fuzz/run-smoke.sh: unknown target $t" >&2; exit 2 ;;
	esac
	echo "fuzz/run-smoke.sh: target $t for ${secs}s"
	# fuzz/corpus/<t> (not committed) collects what the run finds; fuzz/seeds/<t> is the
	# seed corpus fuzz/make-seeds wrote above, read only.
	mkdir -p "fuzz/corpus/$t"
	# k8s_expr reads expressions, like check: the same seeds.
	seeds="fuzz/seeds/$t"
	if [ "$t" = k8s_expr ]; then seeds=fuzz/seeds/check; fi
	cargo fuzz run "$t" -s none $build $target_dir "fuzz/corpus/$t" "$seeds" -- \
		-max_total_time="$secs" -max_len="$max_len" -print_final_stats=1
done
