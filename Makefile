# metricscale — build, test and demo targets.
GO ?= go
PKGS := ./...

.PHONY: all build test unit e2e vet fmt-check bench fuzz demo

all: build

build:
	$(GO) build ./...

# The project's test command: unit tests, then the end-to-end suite on a local cluster.
test: unit e2e

unit:
	$(GO) test -count=1 $(PKGS)

e2e:
	$(GO) test -count=1 -tags e2e -timeout 45m -v ./hack/e2e/...

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags e2e ./hack/e2e/...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./autoscaler/...

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 3m ./autoscaler/scenario

demo:
	@echo "make demo is not built yet (issue #6): it will bring up the local stack and autoscale a queue end to end."; exit 1
