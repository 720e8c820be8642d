# metricscale — build, test and demo targets.
GO ?= go
PKGS := ./...
# The release version, and its only source: the images' tag, the binaries'
# --version; manifests/ must name the same (cmd/internal/version's test).
VERSION ?= v0.1.0

.PHONY: all build test unit e2e e2e-keda bench-keda race vet fmt-check bench fuzz demo generate chart images soak
# Nested modules with their own go.mod (kept out of the main one): the chart's
# tools and tests, and the image builder.
NESTED := hack/helm hack/images

all: build

build:
	$(GO) build ./...

# The project's test command: the unit tests, and the end-to-end suite on a local
# cluster. The suite leaves the 2 cores about 80% idle (hack/README.md), so the
# unit tests run beside it at a low priority (hack/lowprio.sh) instead of before
# it; their output follows the suite's. Either failing fails the target.
test:
	@unit_log=$$(mktemp); \
	bash hack/lowprio.sh -n 10 $(MAKE) --no-print-directory unit >"$$unit_log" 2>&1 & unit=$$!; \
	trap 'kill -TERM -- -'$$unit' 2>/dev/null; exit 130' INT TERM; \
	e2e_rc=0; $(MAKE) --no-print-directory e2e || e2e_rc=$$?; \
	unit_rc=0; wait $$unit || unit_rc=$$?; \
	echo "== make unit (ran beside the e2e suite, at a low priority): exit $$unit_rc"; \
	cat "$$unit_log"; rm -f "$$unit_log"; \
	echo "== make test: unit tests exit $$unit_rc, e2e suite exit $$e2e_rc"; \
	[ "$$unit_rc" -eq 0 ] && [ "$$e2e_rc" -eq 0 ]

unit:
	$(GO) test -count=1 $(PKGS)
	@set -e; for m in $(NESTED); do echo "cd $$m && $(GO) test -count=1 ./..."; (cd $$m && $(GO) test -count=1 ./...); done

# The e2e suite brings up hack/cluster.sh's local cluster when none runs.
e2e:
	@if [ -d hack/e2e ]; then $(GO) test -count=1 -tags e2e -timeout 45m -v ./hack/e2e/...; \
	else echo "e2e: no suite in hack/e2e yet"; fi

# TestKEDACoexistence, apart from make test: KEDA's cold build (hack/cluster.sh
# build --keda) takes about an hour on 2 cores, more than .ci/run's budget.
# It brings up the cluster with --keda when none runs (the build is cached).
e2e-keda:
	$(GO) test -count=1 -tags 'e2e keda' -timeout 90m -v -run 'TestKEDACoexistence' ./hack/e2e/

# Issue 29's benchmark, apart from make test and .ci/run (minutes, KEDA's
# build): N ScaledObjects against N MetricAutoscalers, each on its own Redis
# list, one side after the other (hack/README.md). It brings up the cluster it
# needs when none runs (KEDA, the HPA controller alone, its sync period 15s);
# a cluster started otherwise fails it with a message saying so.
# KEDA_API_QPS=N departs from KEDA's defaults: up --keda-api-qps N (its client
# rate limit N, burst 2N, 20 ScaledObject reconciles; kedacore/keda#3810).
N ?= 100
KEDA_API_QPS ?=
BENCH_KEDA_UP_ARGS ?= --keda --separate-hpa-controller --hpa-sync-period 15s --nodes 3 --backends redis --no-record --no-pod-stages
bench-keda:
	METRICSCALE_BENCH_N=$(N) METRICSCALE_BENCH_KEDA_API_QPS=$(KEDA_API_QPS) \
	  METRICSCALE_E2E_UP_ARGS="$(BENCH_KEDA_UP_ARGS)$(if $(KEDA_API_QPS), --keda-api-qps $(KEDA_API_QPS))" \
	  $(GO) test -count=1 -tags 'e2e keda kedabench' -timeout 90m -v -run '^TestKEDABenchmark$$' ./hack/e2e/

# The race detector on the config reload's concurrency: the registry's atomic
# swap and drains, the reloader, the informer set it updates (needs cgo).
race:
	CGO_ENABLED=1 $(GO) test -race -count=1 ./providers/registry/ ./adapter/app/ ./adapter/objects/

vet:
	$(GO) vet $(PKGS)
	@if [ -d hack/e2e ]; then $(GO) vet -tags e2e ./hack/e2e/... && $(GO) vet -tags 'e2e keda' ./hack/e2e/...; fi
	@set -e; for m in $(NESTED); do echo "cd $$m && $(GO) vet ./..."; (cd $$m && $(GO) vet ./...); done

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./autoscaler/...
	$(GO) test -run '^$$' -bench 'ExternalQuery|BytesPerSeries' -benchtime 20000x ./adapter/bench/
	$(GO) test -run '^$$' -bench Prometheus -benchtime 2000x ./adapter/bench/
	$(GO) test -run '^$$' -bench PushIngest -benchtime 3s -cpu 1,$$(nproc) ./adapter/bench/

# The push replication's fault-injection harness, as a soak of SOAK: three
# adapter processes behind fault-injecting proxies (adapter/internal/soak);
# it prints pushes acknowledged, values lost, backwards reads, convergence
# and peak connections and heap per replica. `make unit` runs its short profile.
SOAK ?= 5m
soak:
	$(GO) test -count=1 -run '^TestReplicationUnderFaults$$' -timeout 60m -v ./adapter/internal/soak/ -args -soak=$(SOAK)

# Every fuzz target of the module, found in its packages' tests, each for
# FUZZTIME. Minimizing a new input takes up to 60s by default, which left a
# target at a few executions a minute: FUZZMINIMIZETIME bounds it.
FUZZTIME ?= 2m
FUZZMINIMIZETIME ?= 1s
fuzz:
	@set -e; n=0; for dir in $$($(GO) list -f '{{.Dir}}' $(PKGS)); do \
	  for fn in $$(grep -hoE '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | cut -d' ' -f2); do \
	    echo "fuzz: $$fn in $${dir#$(CURDIR)/} for $(FUZZTIME)"; n=$$((n+1)); \
	    $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$dir; \
	  done; \
	done; [ $$n -gt 0 ] || { echo "fuzz: no fuzz targets found"; exit 1; }

# The container images, without a container engine (hack/images/README.md):
# _output/images/{adapter,autoscaler,worker}-$(VERSION).tar and the OCI layout oci/
# (worker: hack/worker, the test and demo queue consumer, not a release image).
images:
	cd hack/images && $(GO) run . --root ../.. --version $(VERSION) --out ../../_output/images --go $(GO)

# The main job in one command: a queue autoscaled end to end on the local cluster.
# DEMO_ARGS=--keep leaves it running; --fast shortens the traffic pattern.
# make demo BACKEND=redis: the queue lives in that broker of the local cluster.
# make demo NODE=real: real worker pods (the worker image, built first) on the local
# cluster's real node (up --real-node) consume from Redis (or BACKEND).
demo: $(if $(filter real,$(NODE)),images)
	$(GO) run ./hack/demo $(if $(BACKEND),--backend $(BACKEND)) $(if $(filter real,$(NODE)),--real-node --worker-image _output/images/worker-$(VERSION).tar --worker-ref ghcr.io/metricscale/worker:$(VERSION)) $(DEMO_ARGS)

CONTROLLER_GEN := go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0

# Regenerates deep-copy code and the MetricAutoscaler CRD from the Go types;
# crdpatch adds the HPA validation of the upstream types the spec embeds.
generate:
	$(CONTROLLER_GEN) object paths=./autoscaler/api/...
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=./autoscaler/api/... output:crd:stdout | $(GO) run ./autoscaler/api/v1alpha1/crdpatch > manifests/autoscaler/crd.yaml.tmp
	mv manifests/autoscaler/crd.yaml.tmp manifests/autoscaler/crd.yaml
	cp manifests/autoscaler/crd.yaml manifests/chart/files/crd-metricautoscalers.yaml
	$(GO) run k8s.io/kube-openapi/cmd/openapi-gen@v0.0.0-20260721132016-d427ff9ee9ad --go-header-file /dev/null --output-dir adapter/resourcemetrics --output-pkg github.com/metricscale/metricscale/adapter/resourcemetrics --output-file zz_generated.openapi.go --readonly-pkg k8s.io/apimachinery/pkg/apis/meta/v1 --readonly-pkg k8s.io/apimachinery/pkg/api/resource --readonly-pkg k8s.io/metrics/pkg/apis/metrics/v1beta1 -r /dev/null k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/api/resource k8s.io/metrics/pkg/apis/metrics/v1beta1

# Lints the Helm chart (manifests/chart) and renders it with its defaults to
# _output/chart.yaml, with the Helm library (hack/helm): no helm binary needed.
chart:
	cd hack/helm && $(GO) run . lint ../../manifests/chart
	mkdir -p _output && cd hack/helm && $(GO) run . template ../../manifests/chart > ../../_output/chart.yaml
