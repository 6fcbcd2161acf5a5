# magnum-capi-bridge — the two commands a newcomer needs are `make up` and `make test`.
SHELL := /bin/bash
GO ?= go
# Releases are the tags vX.Y.Z (RELEASING.md); between them the version names the commits since.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
BIN := bin
# Tests that talk to the local stack take minutes; the whole suite runs within CI's budget.
TEST_TIMEOUT ?= 60m
# How many end-to-end tests run at once (they mostly wait on clusters; see deploy/local/test-all.sh).
E2E_PARALLEL ?= 5
PKGS ?= ./...

IMAGE_DIR ?= $(BIN)/image

.PHONY: all build image up down kubeconfig test test-unit test-integration test-faults soak churn upgrade-test lint staticcheck shellcheck bench bench-scale bench-scale-smoke bench-peer bench-peer-smoke test-adoption fuzz generate clean

all: build

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/magnum-capi-bridge ./cmd/magnum-capi-bridge
	$(GO) build -trimpath -o $(BIN)/fake-openstack ./cmd/fake-openstack

## image: the container image without a container engine (internal/image): an OCI layout and a
## tarball in $(IMAGE_DIR); prints the digest. Same commit, same digest (SOURCE_DATE_EPOCH = commit time).
image:
	@dpkg -s ca-certificates >/dev/null 2>&1 || { echo "make image needs Debian's ca-certificates package (apt-get install ca-certificates)"; exit 1; }
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags "-s -w $(LDFLAGS)" -o $(IMAGE_DIR)/magnum-capi-bridge ./cmd/magnum-capi-bridge
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) $(GO) run ./cmd/mkimage --binary $(IMAGE_DIR)/magnum-capi-bridge \
	  --version $(VERSION) --layout $(IMAGE_DIR)/oci --tarball $(IMAGE_DIR)/magnum-capi-bridge.tar

## up: bring up the whole local stack (OpenStack side, management cluster, the bridge). Idempotent.
up: build
	deploy/local/up.sh

## down: stop exactly what `make up` started (data is kept).
down:
	deploy/local/down.sh

## kubeconfig: print the path of the management cluster's admin kubeconfig.
kubeconfig:
	@deploy/local/mgmt-kubeconfig.sh

## test: every tier (docs/testing.md) — lint, the stack (`make up`), unit, integration against the real
## services and end to end against the stack (with the race detector), the fault matrix (a rotating part
## seeded by the commit, once the others have ended: it restarts services they use), then a small run of
## the three-replica churn test and of the side by side with the peer conductor; ends with a time table
## (deploy/local/test-all.sh).
test: build
	GO=$(GO) PKGS="$(PKGS)" TEST_TIMEOUT=$(TEST_TIMEOUT) E2E_PARALLEL=$(E2E_PARALLEL) deploy/local/test-all.sh

## test-unit: the unit tier — no service at all; what `go test ./...` runs.
test-unit:
	$(GO) test -count=1 -timeout 20m $(PKGS)

## test-integration: the unit and integration tiers — real RabbitMQ, MariaDB and PostgreSQL (started here).
test-integration:
	deploy/local/services.sh
	$(GO) test -count=1 -timeout 30m -tags integration $(PKGS)

## test-e2e: the end-to-end tier on `make up`'s stack (the fault matrix, churn and peer runs excepted:
## `make test-faults`, `make churn`, `make bench-peer`).
test-e2e: up
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -tags integration,e2e -parallel $(E2E_PARALLEL) $(PKGS)

## test-faults: the fault matrix (operation × real fault); needs `make up`. FAULT_MATRIX=full runs
## every operation in every round; rotating (what `make test` runs) each operation in one round, dealt
## by FAULT_SEED. FAULTS_START_AFTER: a file whose existence the first fault waits for.
FAULT_SEED ?= 1
FAULT_MATRIX ?= full
FAULTS_START_AFTER ?=
test-faults:
	MCB_FAULTS=1 MCB_FAULT_SEED=$(FAULT_SEED) MCB_FAULT_MATRIX=$(FAULT_MATRIX) MCB_FAULTS_START_AFTER=$(FAULTS_START_AFTER) \
	  $(GO) test -tags integration,e2e -count=1 -timeout 45m -run '^TestFaultMatrix$$' -v ./test/e2e \
	  | tee /var/log/magnum-capi-bridge/fault-matrix-$(FAULT_SEED).log | grep -E 'FAULT MATRIX|: \| |round [0-9]|TIMING|get_ca_certificate|^\s*(---|ok|FAIL|PASS)'; \
	  exit $${PIPESTATUS[0]}

## soak: the fault matrix with SEEDS (default 1..5), one table per seed.
SEEDS ?= 1 2 3 4 5
soak: up
	@for s in $(SEEDS); do $(MAKE) --no-print-directory test-faults FAULT_SEED=$$s || exit 1; done

## churn: failover under load on `make up`'s stack — three replicas of this tree's bridge, CHURN_CLUSTERS
## creates and CHURN_DELETES deletes through the CLI while the leader and another replica are SIGKILLed
## (CHURN_SEED); prints the CHURN summary line and restores one bridge. Hold the stack lock when shared.
## CHURN_PREVIOUS=1: the first replica runs the previous release (a rolling upgrade half-way);
## CHURN_INSTANCE=newest: the Magnum 23 instance's bridges (make test runs it so, next to the e2e package).
CHURN_SEED ?= 1
CHURN_CLUSTERS ?= 20
CHURN_DELETES ?= 10
CHURN_PREVIOUS ?= 0
CHURN_INSTANCE ?= zed
churn: build
	MCB_CHURN=1 MCB_CHURN_INSTANCE=$(CHURN_INSTANCE) MCB_CHURN_SEED=$(CHURN_SEED) MCB_CHURN_CLUSTERS=$(CHURN_CLUSTERS) MCB_CHURN_DELETES=$(CHURN_DELETES) MCB_CHURN_PREVIOUS=$(CHURN_PREVIOUS) \
	  $(GO) test -tags integration,e2e -count=1 -timeout 45m -run '^TestChurnWithReplicas$$' -v ./test/e2e \
	  | tee /var/log/magnum-capi-bridge/churn-$(CHURN_SEED).log | grep -E 'churn|CHURN|Error|^(---|ok|FAIL|PASS)'; \
	  exit $${PIPESTATUS[0]}

## upgrade-test: the previous release builds clusters on `make up`'s stack, this tree's bridge (rendering
## differently: -tags renderingvariant) takes over; no machine is replaced until `rendering apply` or an
## upgrade (docs/upgrades.md). Replaces the Magnum 23 instance's bridge (UPGRADE_INSTANCE=zed: the
## other's), restored at the end.
UPGRADE_INSTANCE ?= newest
upgrade-test: build
	MCB_UPGRADE=1 MCB_UPGRADE_INSTANCE=$(UPGRADE_INSTANCE) $(GO) test -tags integration,e2e -count=1 -timeout 45m -run '^TestBridgeUpgradeFromThePreviousRelease$$' -v ./test/e2e \
	  | tee /var/log/magnum-capi-bridge/upgrade.log | grep -E 'UPGRADE|TIMING|Error|^(---|ok|FAIL|PASS)'; \
	  exit $${PIPESTATUS[0]}

## lint: gofmt, go vet, staticcheck (with the test tiers' build tags, both modules) and shellcheck (every
## tracked shell script). staticcheck is built from the Go module proxy into a cache outside the work
## tree, so a clean clone reuses it; shellcheck is Debian's, installed here when missing (as root).
# Build tags of the test tiers (docs/testing.md): files behind them are checked too.
LINT_TAGS := integration,e2e
# staticcheck 2026.2.2: a release that supports go.mod's Go 1.26.
STATICCHECK_VERSION ?= v0.8.2
TOOLS_DIR ?= $(or $(MCB_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/magnum-capi-bridge)/tools
STATICCHECK := $(TOOLS_DIR)/staticcheck-$(STATICCHECK_VERSION)
# Tracked shell scripts: *.sh and the files whose first line is a sh or bash shebang ("^.!": a hash
# sign would start a make comment).
SHELL_SCRIPTS = $(shell { git ls-files '*.sh'; git ls-files -z | xargs -0 awk 'FNR == 1 && /^.!.*(\/|env )(ba)?sh( |$$)/ { print FILENAME } { nextfile }'; } | sort -u)

lint: shellcheck staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^tools/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd test/caposim && $(GO) vet ./...

# Any finding fails. A finding that has to stay is silenced where it is, with its reason:
# //lint:ignore CHECK reason (the next line) or //lint:file-ignore CHECK reason.
staticcheck: $(STATICCHECK)
	$(STATICCHECK) -tags $(LINT_TAGS) ./...
	cd test/caposim && $(STATICCHECK) -tags $(LINT_TAGS) ./...

# One binary per version: a version bump installs the new one next to the old.
$(STATICCHECK):
	@mkdir -p $(TOOLS_DIR)
	cd / && GOBIN=$(TOOLS_DIR)/.gobin-$(STATICCHECK_VERSION) GOFLAGS=-trimpath $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLS_DIR)/.gobin-$(STATICCHECK_VERSION)/staticcheck $@ && rmdir $(TOOLS_DIR)/.gobin-$(STATICCHECK_VERSION)

shellcheck:
	@command -v shellcheck >/dev/null || { [ "$$(id -u)" = 0 ] || { echo "make lint needs shellcheck (apt-get install shellcheck)"; exit 1; }; \
	  echo "installing shellcheck"; export DEBIAN_FRONTEND=noninteractive; \
	  apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends shellcheck >/dev/null || \
	  { apt-get -o DPkg::Lock::Timeout=900 update -qq && apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends shellcheck >/dev/null; }; }
	shellcheck $(SHELL_SCRIPTS)

## bench: benchmarks with their figures (latency percentiles, throughput, memory).
bench:
	deploy/local/bench.sh

## bench-scale: the scale harness (test/scale) — the bridge against its own etcd + kube-apiserver
## (the binaries make up builds), its own MariaDB database and RabbitMQ vhost, and a CAPI simulation;
## prints one table of figures with the command. SCALE_CLUSTERS live clusters at the end (1000, 5000: a
## longer run); it does not touch the running stack, but takes both cores: hold the stack lock when shared.
SCALE_CLUSTERS ?= 100
SCALE_SEQUENTIAL ?= 20
# The sequential creates arrive one at a time, SCALE_GAP after the previous one's Cluster appeared.
SCALE_GAP ?= 1s
SCALE_BURST ?= 200
SCALE_IDLE ?= 60s
SCALE_LAG_SAMPLES ?= 100
SCALE_TIMEOUT ?= 4h
# SCALE_SOAK=30m ends the run with a soak: one create and one delete every 2 s, memory sampled.
SCALE_SOAK ?= 0
# SCALE_KEYS sets the bridge's [bridge] pregenerated_keys (empty: its default, 32); the burst starts
# once that many are ready (e.g. 800 for a burst of 200).
SCALE_KEYS ?=
bench-scale:
	MCB_SCALE=1 MCB_SCALE_CLUSTERS=$(SCALE_CLUSTERS) MCB_SCALE_SEQUENTIAL=$(SCALE_SEQUENTIAL) MCB_SCALE_GAP=$(SCALE_GAP) MCB_SCALE_BURST=$(SCALE_BURST) \
	  MCB_SCALE_IDLE=$(SCALE_IDLE) MCB_SCALE_LAG_SAMPLES=$(SCALE_LAG_SAMPLES) MCB_SCALE_SOAK=$(SCALE_SOAK) MCB_SCALE_PREGENERATED_KEYS=$(SCALE_KEYS) \
	  $(GO) test -tags integration,e2e -count=1 -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -timeout $(SCALE_TIMEOUT) ./test/scale

## bench-scale-smoke: the harness with a handful of clusters, so that it cannot rot (CI).
bench-scale-smoke:
	$(MAKE) --no-print-directory bench-scale SCALE_CLUSTERS=6 SCALE_SEQUENTIAL=3 SCALE_GAP=200ms SCALE_BURST=3 SCALE_IDLE=10s SCALE_LAG_SAMPLES=4 SCALE_SOAK=20s SCALE_KEYS=12 SCALE_TIMEOUT=15m

## bench-peer: the side by side with the peer conductor — the same creates, over the real RPC path,
## through the bridge and through the peer (the real magnum-conductor 23.0.0 with magnum-capi-helm, in the
## forky chroot), one after the other on the local stack's management cluster (test/peer); prints one
## table. Needs `make up`.
PEER_CLUSTERS ?= 5
PEER_IDLE ?= 60s
bench-peer: build
	deploy/local/peer-up.sh
	MCB_PEER=1 MCB_PEER_CLUSTERS=$(PEER_CLUSTERS) MCB_PEER_IDLE=$(PEER_IDLE) \
	  $(GO) test -tags integration,e2e -count=1 -run '^$$' -bench '^BenchmarkPeer$$' -benchtime 1x -timeout 90m ./test/peer

## bench-peer-smoke: the side by side with two clusters each, so that it cannot rot (make test).
bench-peer-smoke:
	MCB_PEER_SMOKE=1 $(MAKE) --no-print-directory bench-peer PEER_CLUSTERS=2 PEER_IDLE=15s

## test-adoption: the peer conductor (as in bench-peer) makes two clusters and stops; this tree's bridge
## takes over its database, is killed in the middle of adopting them and finishes; no machine is
## replaced, then resize, node groups, upgrade and delete go through the bridge (docs/other-drivers.md).
## Needs `make up`; run by `make test`.
test-adoption: build
	deploy/local/peer-up.sh
	MCB_PEER=1 $(GO) test -tags integration,e2e -count=1 -timeout 45m -run '^TestAdoptCAPIHelmClusters$$' -v ./test/peer \
	  | tee /var/log/magnum-capi-bridge/adoption.log | grep -E '^# |TIMING|Error|^\s*(---|ok|FAIL|PASS)'; \
	  exit $${PIPESTATUS[0]}

## fuzz: run each fuzz target for FUZZTIME (default 1m).
FUZZTIME ?= 1m
fuzz:
	@for t in $$(grep -rhoE '^func (Fuzz[A-Za-z0-9_]+)' --include='*_test.go' internal | sed 's/func //'); do \
	  pkg=$$(grep -rlE "^func $$t\(" --include='*_test.go' internal | xargs dirname); \
	  echo "== $$t ($$pkg)"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./$$pkg || exit 1; done

## generate: regenerate docs/labels.md (label registry), deploy/kubernetes (from the Helm chart; tests fail when stale) and the MagnumCluster CRD and deep copies (controller-gen).
generate:
	$(GO) generate ./internal/templates/... ./internal/chart/... ./internal/tenantapi/...

clean:
	rm -rf $(BIN)
