# metricscale — build, test and demo targets.
GO ?= go
PKGS := ./...

.PHONY: all build test unit e2e vet fmt-check bench fuzz demo generate

all: build

build:
	$(GO) build ./...

# The project's test command: unit tests, then the end-to-end suite on a local cluster.
test: unit e2e

unit:
	$(GO) test -count=1 $(PKGS)

# The e2e suite brings up hack/cluster.sh's local cluster when none runs.
e2e:
	@if [ -d hack/e2e ]; then $(GO) test -count=1 -tags e2e -timeout 45m -v ./hack/e2e/...; \
	else echo "e2e: no suite in hack/e2e yet"; fi

vet:
	$(GO) vet $(PKGS)
	@if [ -d hack/e2e ]; then $(GO) vet -tags e2e ./hack/e2e/...; fi

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./autoscaler/...
	$(GO) test -run '^$$' -bench . -benchtime 20000x ./adapter/bench/

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 3m ./autoscaler/scenario
	$(GO) test -run '^$$' -fuzz FuzzParseText -fuzztime 2m ./providers/memory/pushformat
	$(GO) test -run '^$$' -fuzz FuzzParseJSON -fuzztime 2m ./providers/memory/pushformat

# The main job in one command: a queue autoscaled end to end on the local cluster.
# DEMO_ARGS=--keep leaves it running; --fast shortens the traffic pattern.
demo:
	$(GO) run ./hack/demo $(DEMO_ARGS)

CONTROLLER_GEN := go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0

# Regenerates deep-copy code and the MetricAutoscaler CRD from the Go types.
generate:
	$(CONTROLLER_GEN) object paths=./autoscaler/api/...
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=./autoscaler/api/... output:crd:stdout > manifests/autoscaler/crd.yaml
