# depwatch: the commands a developer and CI use. `make help` lists them.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

GO      ?= go
# The one version: `depwatch version`, the image's tag and the chart's appVersion all come
# from the VERSION file (TestVersionIsOneSource in manifests/ checks the chart and manifests).
VERSION ?= $(shell cat VERSION)
# The image users run; manifests/base/kustomization.yaml and the chart's values name it.
IMAGE_REPO ?= ghcr.io/depwatch/depwatch
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     := _output/bin/depwatch
FUZZTIME ?= 20000x
export KUBECONFIG_LOCAL := $(CURDIR)/_output/cluster/kubeconfig
# One set of build flags for everything but the race detector and fuzzing: static and
# -trimpath, as the images need and as hack/build-k8s.sh builds the local cluster's Kubernetes
# binaries. The binary, the images, the e2e test binary and Kubernetes then share one compiled
# client-go in the build cache: a fresh machine compiles it once, not once per set of flags.
# The race-enabled unit tests need cgo; vet type-checks with the same flags as they do
# (`lint` and `unit` below), so that set is compiled once too.
export CGO_ENABLED := 0
export GOFLAGS := $(filter-out -trimpath,$(GOFLAGS)) -trimpath
RACE := CGO_ENABLED=1 $(GO)
# kubectl: the machine's own, else the one hack/build-k8s.sh builds when there is none, in
# the bin directory of the Kubernetes version hack/lib.sh names (hack/k8s/go.mod's, or K8S_VERSION).
export PATH := $(PATH):$(shell ROOT='$(CURDIR)' bash -c '. '\''$(CURDIR)/hack/lib.sh'\'' && echo "$$K8S_BIN"')

.PHONY: help build test unit lint fuzz bench image image-local release helm cluster-up cluster-down test-k8s e2e demo bench-recovery bench-probe bench-scale clean

help: ## List the targets.
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-15s %s\n", $$1, $$2}'

build: ## Build the static depwatch binary into _output/bin.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/depwatch

test: ## Everything CI runs: lint, unit tests, then e2e on a fresh local cluster (torn down after) with fuzz beside it.
	./hack/test.sh

# The unit test packages mostly wait (timers, test servers), not compute: four at a time
# instead of one per core takes about two thirds of the time.
unit: helm ## Unit tests (race detector on).
	DEPWATCH_HELM=$(HELM) $(RACE) test -race -count=1 -p 4 ./...

# helm, built from its Go module at the version hack/helm/go.mod pins (cached per user in
# ~/.cache/depwatch, like the local cluster's Kubernetes binaries).
HELM := _output/bin/helm
CHART := manifests/charts/depwatch
helm: ## Build the pinned helm CLI into _output/bin/helm (reused; a copy per user in ~/.cache/depwatch).
	@./hack/build-helm.sh >/dev/null

lint: helm ## gofmt check, go vet, the Kubernetes module's versions kept equal to go.mod's, promtool on the alert rules, helm lint and render of the chart (defaults, and every monitoring extra on).
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './_output/*'))"; \
	  if [[ -n "$$out" ]]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(RACE) vet -race ./...
	$(RACE) vet -race -tags e2e ./test/...
	./hack/check-k8s-modules.sh
	./hack/check-rules.sh
	$(HELM) lint --strict $(CHART)
	$(HELM) template depwatch $(CHART) --namespace depwatch >/dev/null
	$(HELM) template depwatch $(CHART) --namespace depwatch --set service.enabled=true \
	  --set serviceMonitor.enabled=true --api-versions monitoring.coreos.com/v1/ServiceMonitor \
	  --set prometheusRule.enabled=true --api-versions monitoring.coreos.com/v1/PrometheusRule --set dashboard.enabled=true >/dev/null

fuzz: ## Run every fuzz target for FUZZTIME (default 20000x: executions, not seconds) each.
	./hack/fuzz.sh $(FUZZTIME)

bench: ## Go benchmarks (selection over 10,000 pods, ...).
	$(GO) test -run '^$$' -bench . -benchmem ./...

image: ## Write the release image _output/images/depwatch-<VERSION>.tar, tagged ghcr.io/depwatch/depwatch:<VERSION>, without Docker, and say how to load it.
	VERSION=$(VERSION) IMAGE_REPO=$(IMAGE_REPO) ./hack/image.sh release

# What a maintainer publishes for VERSION, in _output/release/ (emptied first): the image
# archive (as make image writes it), the chart package, and SHA256SUMS over both. Nothing is
# pushed or signed; docs/development.md ("Releasing") says what to do with them.
RELEASE_DIR := _output/release
release: helm ## Write the release to _output/release/: the image archive depwatch-<VERSION>.tar, the chart package depwatch-<X.Y.Z>.tgz and SHA256SUMS (offline; pushes nothing).
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	VERSION=$(VERSION) IMAGE_REPO=$(IMAGE_REPO) IMAGE_OUT=$(CURDIR)/$(RELEASE_DIR)/depwatch-$(VERSION).tar ./hack/image.sh release
	$(HELM) package $(CHART) -d $(RELEASE_DIR)
	cd $(RELEASE_DIR) && sha256sum depwatch-$(VERSION).tar depwatch-$(patsubst v%,%,$(VERSION)).tgz > SHA256SUMS && sha256sum -c SHA256SUMS
	@ls -l $(RELEASE_DIR)

image-local: ## Pack localhost/depwatch:dev, the release image and the test images, and import them into the running local cluster.
	./hack/image.sh

cluster-up: ## Install, build and start the local single-node cluster (kubeconfig: _output/cluster/kubeconfig).
	./hack/cluster-up.sh

# The e2e suite on another Kubernetes release of the local cluster (not part of make test):
# its binaries are built from the Go module proxy like the pinned ones (a cold build of a
# version nobody built here before took 11 minutes on 2 cores); the cluster is always
# torn down after. docs/development.md records which releases the suite has passed on.
K8S_VERSION ?=
test-k8s: helm ## The e2e suite on the local cluster at another Kubernetes release: make test-k8s K8S_VERSION=v1.35.4.
	@[[ -n "$(K8S_VERSION)" ]] || { echo "test-k8s: name the release, e.g. make test-k8s K8S_VERSION=v1.35.4" >&2; exit 2; }
	trap './hack/cluster-down.sh' EXIT; K8S_VERSION=$(K8S_VERSION) ./hack/cluster-up.sh && \
	  $(MAKE) --no-print-directory e2e

cluster-down: ## Stop every process cluster-up started and remove its state (safe to call twice).
	./hack/cluster-down.sh

# Most e2e tests wait on the cluster, not the CPU: E2E_PARALLEL of them run at once, the
# longest first (test/e2e/sharing_test.go hands out these slots; 8 kept both cores saturated
# for minutes, and with 6 beside fuzzing on a fresh clone pods took up to a minute to start).
# Tests that load the whole cluster or count the lab coordinator as a whole run first,
# in small groups that do not disturb each other; the API-server restart sets up beside the
# rest and restarts it after them.
E2E_PARALLEL ?= 4

e2e: helm ## End-to-end tests against the running local cluster (make cluster-up first).
	./hack/image.sh
	./hack/install-prometheus.sh
	KUBECONFIG=$(KUBECONFIG_LOCAL) DEPWATCH_HELM=$(CURDIR)/$(HELM) $(GO) test -tags e2e -count=1 -timeout 60m -parallel $(E2E_PARALLEL) -v ./test/e2e

OUTAGES ?= 5
bench-recovery: ## Recovery benchmark on the local cluster (started if needed): floor, unarmed weeder, no watchdog, armed weeder.
	./hack/cluster-up.sh
	KUBECONFIG=$(KUBECONFIG_LOCAL) DEPWATCH_BENCH_RECOVERY=$(OUTAGES) $(GO) test -tags e2e -count=1 -timeout 30m \
	  -run '^TestBenchRecovery$$' -v ./test/e2e

PROBES ?= 12
bench-probe: ## Probe Job benchmark on the local cluster: create → complete, and Job churn per hour.
	./hack/cluster-up.sh
	KUBECONFIG=$(KUBECONFIG_LOCAL) DEPWATCH_BENCH_PROBE=$(PROBES) $(GO) test -tags e2e -count=1 -timeout 30m \
	  -run '^TestBenchProbe$$' -v ./test/e2e

SCALE ?= 250,1000
EXECUTOR ?= job
ANNOTATED ?= 0
bench-scale: ## Seed-scale benchmark on the local cluster (API objects only): weeder storm (arming, then recovery with real weeder Jobs) and probe shards at SCALE namespaces.
	./hack/cluster-up.sh
	KUBECONFIG=$(KUBECONFIG_LOCAL) DEPWATCH_BENCH_SCALE=$(SCALE) DEPWATCH_BENCH_EXECUTOR=$(EXECUTOR) DEPWATCH_BENCH_ANNOTATED=$(ANNOTATED) $(GO) test -tags e2e -count=1 -timeout 80m \
	  -run '^TestBenchScale(Weeder|WeederRecovery|Probe)$$' -v ./test/e2e

# The demo's cluster is the local one unless DEMO_KUBECONFIG names another (an exported
# KUBECONFIG does not): there it installs the chart, never the lab overlay, and removes it after.
DEMO_KUBECONFIG ?=
demo: ## Watch depwatch work on the local cluster; DEMO_KUBECONFIG=<file>: on that cluster, with the chart, removed after.
	DEMO_KUBECONFIG=$(DEMO_KUBECONFIG) ./hack/demo.sh

clean: cluster-down ## Remove build output (keeps nothing).
	rm -rf _output
