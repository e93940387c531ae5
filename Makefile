# Stackwright. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

ROOT := $(abspath .)
BIN := $(ROOT)/bin
export PATH := $(BIN):$(PATH)
# envtest reads the control-plane binaries (kube-apiserver, etcd, kubectl) from here.
export KUBEBUILDER_ASSETS ?= $(BIN)

GO_TEST_FLAGS ?= -timeout 25m
CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT := $(BIN)/golangci-lint

##@ General
.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ { printf "  %-14s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Toolchain
.PHONY: tools
tools: ## Build the pinned toolchain (kube-apiserver, etcd, kubectl, pulumi, YAML host, test provider, linters) into ./bin.
	@hack/tools.sh

##@ Development
.PHONY: generate
generate: ## Generate deepcopy code for api/.
	@hack/tools.sh controller-gen
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: ## Generate CRDs and RBAC into config/.
	@hack/tools.sh controller-gen
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=stackwright-manager paths=./internal/... output:rbac:artifacts:config=config/rbac

.PHONY: verify-generated
verify-generated: ## Fail when committed generated code or CRDs are stale.
	@hack/verify-generated.sh

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet every module.
	go vet ./...
	cd test/provider && go vet ./...

.PHONY: lint
lint: ## golangci-lint every module.
	@hack/tools.sh golangci-lint
	$(GOLANGCI_LINT) run ./...
	cd test/provider && $(GOLANGCI_LINT) run --config $(ROOT)/.golangci.yml ./...

.PHONY: build
build: ## Build bin/stackwright.
	go build -o $(BIN)/stackwright ./cmd/stackwright

.PHONY: demo
demo: tools build ## Local demo: control plane + operator + the sample Stack reaching Ready (DEMO_ONCE=1 to exit).
	@hack/demo.sh

##@ Testing
.PHONY: test
test: tools verify-generated vet lint unit fuzz ## Everything CI runs: vet, lint, unit, envtest and engine tests, a short fuzz.

.PHONY: unit
unit: ## go test every module (envtest and engine suites included; needs `make tools`).
	go test $(GO_TEST_FLAGS) ./...
	cd test/provider && go test $(GO_TEST_FLAGS) ./...

FUZZ_TIME ?= 15s
.PHONY: fuzz
fuzz: ## Fuzz the artifact extractor for FUZZ_TIME (CI's short budget; use 60s or more by hand).
	go test ./internal/artifact -run '^$$' -fuzz '^FuzzExtract$$' -fuzztime $(FUZZ_TIME) -fuzzminimizetime 5s

##@ Benchmarks
.PHONY: bench
bench: tools build ## Benchmark: engine floor, apply→Ready latency, a fleet of BENCH_N (100) Stacks, BENCH_IDLE (5m) idle, git fleet; results in bench/results/.
	go run ./bench/cmd/fleet
