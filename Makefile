# The two commands of the README, and their parts. Everything else lives in scripts/ and
# e2e/cluster/ so that it can also be run by hand.
SHELL := /bin/bash

.PHONY: test demo build cluster-binaries lint fuzz-smoke

## make test: unit, integration and cluster (e2e) tests; the e2e tests start their own control
## plane (built from the pinned Kubernetes release on first use, then cached).
test:
	@scripts/check-tools
	cd e2e/cluster && go test ./cmd/clustertool
	e2e/cluster/build
	cargo test --all-targets --no-fail-fast
	cargo test --doc
	$(MAKE) fuzz-smoke

## A 30-second fuzzing smoke run of parse + check (cargo-fuzz on stable, no sanitizer; a
## longer run: fuzz/run-smoke.sh 3600, see docs/cel-checker.md).
fuzz-smoke:
	@command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
	FUZZ_DEV=1 fuzz/run-smoke.sh 30

## make demo: build, start a local control plane with the upstream status controller, apply the
## sample policies from config/samples/, show their status with kubectl, stop the control plane.
demo:
	@scripts/check-tools
	scripts/demo

build:
	cargo build

## Only the Kubernetes binaries (kube-apiserver, kube-controller-manager, etcd).
cluster-binaries:
	e2e/cluster/build

lint:
	cd e2e/cluster && test -z "$$(gofmt -l cmd)" && go vet ./cmd/clustertool
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings
