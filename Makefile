# The two commands of the README, and their parts. Everything else lives in scripts/ and
# e2e/cluster/ so that it can also be run by hand.
SHELL := /bin/bash

.PHONY: test demo build cluster-binaries image lint lint-go lint-fmt fuzz-smoke fuzz-build fuzz bench-smoke bench pre-commit-rust dist ci-cold

## make test: lint, the oracle (its Go tests, golden files regenerated and compared), unit,
## integration and cluster (e2e) tests; the e2e tests start their own control plane (built from
## the pinned Kubernetes release on first use, then cached). Each stage prints its time
## (scripts/stage). kubectl (tests/it/manifests.rs): see scripts/kubectl-path (under CI the one built
## from the pinned release with the control plane); the cel-go differential test uses the
## oracle built by the golden stage. The Helm chart (charts/vapcheck): helm lint of its test
## matrix (scripts/check-chart), its alerts checked and unit-tested by promtool
## (scripts/promtool-rules); Neovim (Debian's package, installed under CI by scripts/nvim-path)
## drives `vapcheck lsp` in tests/it/lsp.rs; helm and Prometheus are pinned in scripts/tools.version and cached
## under $VAPCHECK_CACHE by scripts/helm-path and scripts/prometheus-path. The container image
## (`make image`, the Dockerfile's scratch target) is built before the cargo tests, whose
## e2e group `image` unpacks and runs it (VAPCHECK_IMAGE_OCI). The cargo tests are the executables
## `cargo test --workspace --all-targets` builds, run by scripts/test-binaries: the e2e
## executable (e2e/tests/main.rs) first, whose runner runs its groups three at a time (each waits
## on a control plane of its own most of the time), and the other executables beside it. After the cargo tests, the pre-commit
## stage runs the `vapcheck-system` hook of .pre-commit-hooks.yaml with the real pre-commit (pinned,
## scripts/pre-commit-path) on a scratch git repository, with the debug binary the cargo tests
## built (scripts/test-pre-commit; the language: rust hook is `make pre-commit-rust`); the krew
## stage validates plugins/vapcheck.yaml as `make dist` fills it in and installs it with krew
## (scripts/test-krew); the vscode-extension stage builds, tests (against the debug binary) and
## packages editors/vscode with its pinned npm packages (scripts/test-vscode-extension); the action stage runs the GitHub action's script (action.yml,
## scripts/action-run) with the GitHub Actions variables faked (scripts/test-action).
# One Go build configuration for every Go command of the run (the control plane's build sets
# CGO_ENABLED=0, e2e/cluster/lib.sh): with cgo on, the standard library's `net` and every
# package above it get other build IDs, so go vet, go test and the oracles' builds compiled
# again what the control plane's build had compiled. Measured after a cold run with cgo on
# (`go list -deps -f '{{.Stale}}'`, 2026-12-02): with CGO_ENABLED=0, 608 of e2e/oracle's 1,268
# packages and 592 of e2e/gatekeeper-oracle's 1,260 were already in Go's cache from the
# control plane's build, and all 551 of clustertool's (which go vet had compiled again with cgo).
test: export CGO_ENABLED = 0
# Clippy's lints run inside the test builds instead of a check build of their own: cargo runs
# clippy-driver (scripts/clippy-driver-path) in place of rustc for the workspace's crates, with
# `-D warnings`, as `cargo clippy` does, so a lint fails the build of the first stage that
# compiles (oracle-replays), and the dependencies are compiled once (a `cargo clippy` would
# check all of them again, in check mode, from cold). Every cargo command of the run sees the
# same wrapper, so none rebuilds what another built. `make lint` still runs `cargo clippy`.
test: export RUSTC_WORKSPACE_WRAPPER = $(shell scripts/clippy-driver-path)
test: export CLIPPY_ARGS = -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
test: export CELCHECK = $(CURDIR)/e2e/oracle/bin/celcheck
test: export GKCHECK = $(CURDIR)/e2e/gatekeeper-oracle/bin/gkcheck
test: export KVCHECK = $(CURDIR)/e2e/kyverno-oracle/bin/kvcheck
# The comparisons with the oracle run in their own stage with --nocapture, so that the log shows
# their exact counts ("oracle diff: 12054 comparisons ...", "compared 571 cases ...",
# "cost: 2280/2280 identical ...", "typed cost: .../... identical ..."); the main
# cargo run skips these tests (exact names) instead of running them twice.
ORACLE_REPLAY_TESTS := cel_oracle_diff::same_as_cel_go \
	k8s_env_golden_exprs::extension_library_cases_match_cel_go \
	k8s_env_golden_vap::schema_independent_vap_cases_match_kcm \
	k8s_env_golden_vap_typed::typed_vap_cases_match_kcm \
	k8s_env_golden_corpus::corpus_per_gvk_warnings_match_kcm \
	k8s_env_golden_cost::cost_estimates_match_cel_go \
	k8s_env_golden_cost_typed::typed_cost_estimates_match_cel_go \
	gatekeeper_oracle::corpus_verdicts_equal_gatekeepers \
	gatekeeper_oracle::fixture_verdicts_equal_gatekeepers \
	kyverno_oracle::corpus_verdicts_equal_kyvernos \
	kyverno_oracle::fixture_verdicts_equal_kyvernos \
	kyverno_oracle::declarations_equal_kyvernos
# The builds that only later stages need run in the background from the start (scripts/stage
# --background), beside lint and the oracle stages, so that their serial parts (a link, the
# front end of one large crate) leave no core idle: the control plane and kubectl (Go), helm
# (Go), the image's static release binary and the fuzz targets (cargo; unoptimised under make test,
# FUZZ_DEV=1, which builds in a fraction of the optimised build's CPU time). Each is waited
# for where its stage stood; all of them before cargo-test, whose e2e tests then have the cores.
# The fuzz build and smoke run as cargo-fuzz builds them (no clippy wrapper), unoptimised:
FUZZ_UNDER_TEST = env -u RUSTC_WORKSPACE_WRAPPER FUZZ_DEV=1 $(MAKE) --no-print-directory
test:
	@scripts/check-tools
	@[ -x "$$RUSTC_WORKSPACE_WRAPPER" ] || { echo "make test: clippy-driver not found (rustup component add clippy)" >&2; exit 1; }
	@scripts/stage --background kubectl scripts/kubectl-path
	@scripts/stage --background helm scripts/helm-path
	@scripts/stage --background image env -u RUSTC_WORKSPACE_WRAPPER scripts/build-image
	@scripts/stage --background fuzz-build $(FUZZ_UNDER_TEST) fuzz-build
	@scripts/stage lint $(MAKE) --no-print-directory lint-go lint-fmt
	@scripts/stage clustertool-go-test sh -c 'cd e2e/cluster && go test ./cmd/clustertool'
	@scripts/stage oracle-go-test e2e/oracle/test -count=1 -v
	@scripts/stage oracle-golden e2e/oracle/golden --check
	@scripts/stage gatekeeper-oracle e2e/gatekeeper-oracle/build >/dev/null
	@scripts/stage kyverno-oracle e2e/kyverno-oracle/build >/dev/null
	@scripts/stage embedded-openapi scripts/gen-embedded-openapi --check
	@helm="$$(scripts/stage --wait helm)" && \
		VAPCHECK_HELM="$$helm" scripts/stage chart-lint scripts/check-chart
	@scripts/stage prometheus scripts/prometheus-path >/dev/null && \
		scripts/stage alert-rules scripts/promtool-rules
	@kubectl="$$(scripts/stage --wait kubectl)" && \
		nvim="$$(scripts/stage nvim scripts/nvim-path)" && \
		helm="$$(scripts/helm-path)" && \
		scripts/stage cluster-binaries e2e/cluster/build && \
		image="$$(scripts/stage --wait image)" && \
		VAPCHECK_KUBECTL="$$kubectl" scripts/stage oracle-replays \
			cargo test --test it -- --exact --nocapture $(ORACLE_REPLAY_TESTS) && \
		scripts/stage --wait fuzz-build && \
		VAPCHECK_KUBECTL="$$kubectl" VAPCHECK_HELM="$$helm" VAPCHECK_IMAGE_OCI="$$image" \
			VAPCHECK_NVIM="$$nvim" scripts/stage cargo-test \
			scripts/test-binaries --workspace --all-targets -- --exact $(addprefix --skip ,$(ORACLE_REPLAY_TESTS))
	@scripts/stage pre-commit scripts/test-pre-commit
	@scripts/stage krew scripts/test-krew
	@scripts/stage vscode-extension scripts/test-vscode-extension
	@scripts/stage action scripts/test-action
	@scripts/stage doc-test cargo test --workspace --doc
	@scripts/stage bench-smoke $(MAKE) --no-print-directory bench-smoke
	@scripts/stage fuzz-smoke $(FUZZ_UNDER_TEST) fuzz-smoke

## The benchmarks on a real control plane at their smoke size (e2e/bench/README.md), with the
## debug build the cargo-test stage compiled: cold start with 500 policies, kube-controller-manager
## alone vs vapcheck alone on fresh control planes (the ratios are printed; both must converge,
## and vapcheck's peak RSS must stay under 64 MiB), then 30 s of steady state with 100 policies
## re-checked every 5 s (no status write and no OpenAPI download allowed), then recovery after 2
## kube-apiserver restarts with 100 policies, KCM alone vs vapcheck alone (vapcheck within 10 s).
## Then the whole-command cost comparison (e2e/bench/cost-command) once, on the same debug
## binary: it proves the script still runs and that both sides give the same findings; its
## numbers are not measurements (`make bench` measures on a release build); and the one-file
## check bench (e2e/bench/single-file) for one round on 3 files, its target not enforced; and the
## CRD-axis bench with 100 CRDs created while 100 policies are watched (every affected status
## must become current). The in-process
## cost bench (benches/cost_estimation.rs) runs as a smoke test in the cargo-test stage; the
## runtime-safety bench (benches/runtime_safety.rs) runs here for one round on the debug build
## (it must find runtime errors with the analysis and none without; no timing bound).
## Full size, release build: e2e/bench/cold 5000, e2e/bench/steady 500 600,
## e2e/bench/recovery 5000 10, e2e/bench/crds 2000 500.
bench-smoke:
	VAPCHECK_BENCH_N=500 cargo test --test e2e_bench_cold -- \
		--ignored --exact cold_start_kcm_vs_vapcheck --nocapture
	VAPCHECK_BENCH_N=100 VAPCHECK_BENCH_STEADY_SECONDS=30 cargo test --test e2e_bench_steady -- \
		--ignored --exact steady_state_writes_and_downloads_nothing --nocapture
	VAPCHECK_BENCH_N=100 VAPCHECK_BENCH_RESTARTS=2 VAPCHECK_BENCH_DOWN_SECONDS=4 \
		cargo test --test e2e_bench_recovery -- --ignored --exact recovery_kcm_vs_vapcheck --nocapture
	cargo build --bin vapcheck
	VAPCHECK_BENCH_BIN="$${CARGO_TARGET_DIR:-target}/debug/vapcheck" e2e/bench/cost-command 1
	VAPCHECK_BENCH_NO_TARGET=1 VAPCHECK_BENCH_BIN="$${CARGO_TARGET_DIR:-target}/debug/vapcheck" \
		e2e/bench/single-file 1 3
	VAPCHECK_BENCH_CRDS=100 VAPCHECK_BENCH_POLICIES=100 VAPCHECK_BENCH_CRD_POLICIES=10 \
		VAPCHECK_BENCH_POLL=5s cargo test --test e2e_bench_crds -- \
		--ignored --exact crd_burst_while_policies_are_watched --nocapture
	cargo test --bench runtime_safety

## make bench: the measuring runs, on a release build (not part of `make test`, whose
## bench-smoke proves they run): what the CEL cost estimates add to a corpus check
## (docs/cost.md): check_policy in paired rounds (the median ratio, target under 1.10, is
## printed with its verdict), and the whole `vapcheck check` of the corpus with and without
## --no-cost-estimates; and `vapcheck check` on one policy file, as a pre-commit hook runs it
## (e2e/bench/single-file: target at most 50 ms wall, beside the corpus check and --version);
## and what the runtime-safety analysis adds to checking the policy, mutating and binding
## corpora (docs/runtime-safety.md, paired rounds, target at most 1.05).
bench:
	cargo bench --bench cost_estimation -- 7
	cargo bench --bench runtime_safety -- 11
	e2e/bench/cost-command 9
	e2e/bench/single-file 11 20

## A fuzzing smoke run, 20 seconds per target (seeds and the committed corpus included): check
## (CEL parse + check), k8s_expr (an expression in every site of a policy, checked against real
## kinds and by the API server's create validation), policy (VAP and MAP documents through the
## `vapcheck check` pipeline), schema (OpenAPI documents and CRDs through the schema conversion)
## and manifests (static-manifest folders, CI positions); cargo-fuzz on stable, no sanitizer, an
## optimised build with debug assertions (under make test an unoptimised one, FUZZ_DEV=1: the
## smoke proves the targets run, `make fuzz` measures); each target prints its executions (`Done N runs`,
## `stat::number_of_executed_units`). It proves every target builds, loads every seed and
## committed corpus entry (fuzz/corpus/, checked by fuzz/keep-corpus first) and fuzzes; its
## finds go to a scratch folder. `make fuzz` (FUZZ_SECONDS per target, default 600) is the run
## that accumulates: its finds are merged into fuzz/corpus/ and its executions appended to
## fuzz/stats.tsv (docs/fuzzing.md).
fuzz-smoke:
	@command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
	fuzz/run-smoke.sh 20

## The fuzz targets' optimised build alone (cargo-fuzz installed first when missing), as
## fuzz-smoke builds them; `make test` runs it in the background from its start.
fuzz-build:
	@command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
	fuzz/run-smoke.sh --build

FUZZ_SECONDS ?= 600
fuzz:
	@command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
	fuzz/run-smoke.sh --accumulate $(FUZZ_SECONDS)

## The `vapcheck` pre-commit hook (language: rust) end to end: pre-commit clones this repository at
## HEAD and builds it with `cargo install --path .` (a release build: minutes), then the same
## cases as the pre-commit stage. A measuring run, not part of `make test` (docs/adoption.md).
pre-commit-rust:
	scripts/test-pre-commit --rust

## make ci-cold: a CI run from empty caches, as on a new machine (scripts/ci-cold: `.ci/run` on a
## fresh clone of HEAD with empty cargo, Go, pip, npm and vapcheck caches under
## /tmp/vapcheck-ci-cold; docs/ci.md). A measuring run of issue 30's budget, not part of make test.
ci-cold:
	scripts/ci-cold

## make dist: the release artefacts in dist/ (scripts/dist; docs/adoption.md): the static musl
## release binary (x86_64 Linux, the image's build), a .tar.gz of it for krew and the GitHub
## action, a CycloneDX SBOM (cargo-cyclonedx, pinned), the krew manifest and SHA256SUMS. Not
## part of `make test` (a release build); its packing is tested there by the krew stage.
dist:
	scripts/dist

## make demo: build, start a local control plane with the upstream status controller, apply the
## sample policies from config/samples/, show their status with kubectl, stop the control plane.
demo:
	@scripts/check-tools
	scripts/demo

build:
	cargo build

## make image: the Dockerfile's `scratch` target built with buildah from a static musl release
## binary, without pulling anything (scripts/build-image; docs/image.md); prints the OCI layout.
image:
	@scripts/build-image

## Only the Kubernetes binaries (kube-apiserver, kube-controller-manager, etcd).
cluster-binaries:
	e2e/cluster/build

## gofmt and go vet on the Go modules (e2e/cluster, e2e/oracle, e2e/gatekeeper-oracle,
## e2e/kyverno-oracle), rustfmt, clippy. (`make test` runs lint-go and lint-fmt as its lint
## stage and clippy's lints in its test builds, above.)
lint: lint-go lint-fmt
	cargo clippy --workspace --all-targets -- -D warnings

lint-go:
	@unformatted="$$(gofmt -l e2e/cluster/cmd e2e/oracle e2e/gatekeeper-oracle e2e/kyverno-oracle)"; \
		if [ -n "$$unformatted" ]; then echo "gofmt: not formatted: $$unformatted" >&2; exit 1; fi
	cd e2e/cluster && go vet ./cmd/...
	cd e2e/oracle && go vet ./...
	cd e2e/gatekeeper-oracle && go vet ./...
	cd e2e/kyverno-oracle && go vet ./...

lint-fmt:
	cargo fmt --all --check
