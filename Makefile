# The two commands of the README, and their parts. Everything else lives in scripts/ and
# e2e/cluster/ so that it can also be run by hand.
SHELL := /bin/bash

.PHONY: test demo build cluster-binaries lint

## make test: unit, integration and cluster (e2e) tests; the e2e tests start their own control
## plane (built from the pinned Kubernetes release on first use, then cached).
test:
	@scripts/check-tools
	cd e2e/cluster && go test ./cmd/clustertool
	e2e/cluster/build
	cargo test --all-targets --no-fail-fast
	cargo test --doc

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
