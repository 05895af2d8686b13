#!/usr/bin/env bash
# Fuzzing on stable Rust (no sanitizer): needs `cargo install cargo-fuzz`.
# Usage: fuzz/run-smoke.sh [--accumulate] [seconds per target] [target...]
#        (default: 60 s, every target)
#        fuzz/run-smoke.sh --build
#        (only builds every target, as the runs below build them; `make test` runs this in the
#        background while the other stages run, so that its fuzz-smoke stage only fuzzes)
# Every run starts from the committed corpus fuzz/corpus/<target> and the seeds fuzz/make-seeds
# writes into the ignored fuzz/seeds/; what it finds goes to a scratch folder, so the tree stays
# as it was (`make fuzz-smoke`, CI). With --accumulate (`make fuzz`) the scratch finds are
# merged afterwards: libFuzzer's -merge=1 into a copy of the seeds keeps the entries that add
# coverage beyond the seeds, fuzz/keep-corpus stores those that may be kept (no seed, nothing
# of ../shared, at most 256 KiB a target) as the new fuzz/corpus/<target>, and the run's
# executions are appended to fuzz/stats.tsv (docs/fuzzing.md sums them per target).
# The build is optimised (cargo fuzz's release profile) with debug assertions (`-a`: overflow
# checks and debug_assert! stay on, as in the unoptimised build) and 16 codegen units
# (FUZZ_CODEGEN_UNITS; cargo fuzz's own default of 1 runs faster but took 25 minutes to build
# on 2 busy cores). FUZZ_DEV=1 builds unoptimised instead.
# Targets: check (CEL parse + check), k8s_expr (an expression in every site of a policy checked
# against real kinds in the Kubernetes environment, and kube-apiserver's create validation),
# policy (VAP and MAP documents through `vapcheck check`),
# schema (OpenAPI v3 documents and CRD manifests through the schema conversion), manifests
# (static-manifest files through the loader, documents through the CI position mapping).
set -euo pipefail
cd "$(dirname "$0")/.."
accumulate=0
build_only=0
if [[ "${1:-}" == --build ]]; then
	build_only=1
	shift
elif [[ "${1:-}" == --accumulate ]]; then
	accumulate=1
	shift
fi
secs="${1:-60}"
[[ $# -gt 0 ]] && shift
targets="${*:-check k8s_expr policy schema manifests}"
read -r -a build <<<"-a --codegen-units ${FUZZ_CODEGEN_UNITS:-16}"
if [[ "${FUZZ_DEV:-}" == 1 ]]; then build=(--dev); fi
# A stable build folder (the CI cache) when one is set, so a fresh clone does not rebuild.
target_dir=()
if [[ -n "${VAPCHECK_CACHE:-}" ]]; then target_dir=("--target-dir=$VAPCHECK_CACHE/fuzz-target"); fi
if [[ $build_only == 1 ]]; then
	[[ $# -eq 0 ]] || { echo "fuzz/run-smoke.sh: --build takes no other argument" >&2; exit 2; }
	exec cargo fuzz build -s none "${build[@]}" "${target_dir[@]}"
fi
# The seeds are made from ../shared (the policy corpus, never copied into the repository)
# and the repository's own golden cases and fixtures, into the ignored fuzz/seeds/.
fuzz/make-seeds
# The committed corpus holds nothing it may not (fuzz/keep-corpus): checked before it is read.
# shellcheck disable=SC2086 # one word per target
fuzz/keep-corpus check $targets
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
commit="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain -- src fuzz/fuzz_targets fuzz/Cargo.toml Cargo.toml 2>/dev/null)" ]]; then
	commit="$commit+changes"
fi
max_len_of() {
	case "$1" in
	check) echo 4096 ;;
	k8s_expr) echo 4096 ;;
	policy) echo 32768 ;;
	schema) echo 131072 ;;
	manifests) echo 16384 ;;
	*) echo "fuzz/run-smoke.sh: unknown target $1" >&2; return 2 ;;
	esac
}
seeds_of() {
	# k8s_expr reads expressions, like check: the same seeds.
	if [[ "$1" == k8s_expr ]]; then echo fuzz/seeds/check; else echo "fuzz/seeds/$1"; fi
}
for t in $targets; do max_len_of "$t" >/dev/null || exit 2; done
# One fuzzer a core (FUZZ_JOBS), each libFuzzer process being single-threaded; every target still
# gets its whole ${secs}s.
jobs="${FUZZ_JOBS:-$(nproc)}"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz/run-smoke.sh: FUZZ_JOBS must be a positive number, not $jobs" >&2; exit 2; }
run_target() {
	local t="$1"
	# libFuzzer writes what it finds to the first folder only: the scratch one.
	mkdir -p "$scratch/$t" "fuzz/corpus/$t"
	date -u +%FT%TZ >"$scratch/$t.started"
	cargo fuzz run "$t" -s none "${build[@]}" "${target_dir[@]}" "$scratch/$t" "fuzz/corpus/$t" "$(seeds_of "$t")" -- \
		-max_total_time="$secs" -max_len="$(max_len_of "$t")" -print_final_stats=1 >"$scratch/$t.log" 2>&1
}
finish_target() {
	local t="$1" runs merged seeds max_len
	runs="$(sed -n 's/^stat::number_of_executed_units: *\([0-9][0-9]*\).*/\1/p' "$scratch/$t.log" | tail -n 1)"
	if [[ -z "$runs" ]]; then
		echo "fuzz/run-smoke.sh: $t printed no stat::number_of_executed_units" >&2
		return 1
	fi
	echo "fuzz/run-smoke.sh: $t: $runs executions ($(find "$scratch/$t" -type f | wc -l) new corpus entries)"
	if [[ $accumulate == 1 ]]; then
		seeds="$(seeds_of "$t")"
		max_len="$(max_len_of "$t")"
		merged="$scratch/$t.merged"
		mkdir -p "$merged"
		cp "$seeds"/* "$merged"/
		cargo fuzz run "$t" -s none "${build[@]}" "${target_dir[@]}" "$merged" "fuzz/corpus/$t" "$scratch/$t" -- \
			-merge=1 -max_len="$max_len" 2>&1 | tail -n 3
		# The merged folder without the seeds themselves (named by their SHA-1, as libFuzzer's).
		(cd "$seeds" && find . -type f -printf '%f\0') | (cd "$merged" && xargs -0 rm -f)
		fuzz/keep-corpus store "$t" "$merged"
		printf '%s\t%s\t%s\t%s\t%s\n' "$(cat "$scratch/$t.started")" "$commit" "$t" "$secs" "$runs" >>fuzz/stats.tsv
	fi
}
# shellcheck disable=SC2086 # one word per target
set -- $targets
failed=()
while [[ $# -gt 0 ]]; do
	batch=()
	while [[ $# -gt 0 && ${#batch[@]} -lt $jobs ]]; do
		batch+=("$1")
		shift
	done
	pids=()
	for t in "${batch[@]}"; do
		echo "fuzz/run-smoke.sh: target $t for ${secs}s"
		run_target "$t" &
		pids+=("$!")
	done
	# Each target's whole log, in order, once the batch is done.
	for i in "${!batch[@]}"; do
		t="${batch[$i]}"
		status=0
		wait "${pids[$i]}" || status=$?
		echo "fuzz/run-smoke.sh: ---- $t ----"
		cat "$scratch/$t.log"
		if [[ $status != 0 ]]; then
			echo "fuzz/run-smoke.sh: $t: cargo fuzz run failed with exit status $status" >&2
			failed+=("$t")
		elif ! finish_target "$t"; then
			failed+=("$t")
		fi
	done
done
if [[ ${#failed[@]} -gt 0 ]]; then
	echo "fuzz/run-smoke.sh: failed: ${failed[*]}" >&2
	exit 1
fi
