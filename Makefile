# upgradelab — see README.md. Every target installs what it needs itself.

# bash for pipefail in the recipes that keep their output with tee.
SHELL := /bin/bash

KUBE_VERSION ?= v1.36.3
ETCD_VERSION ?= v3.6.16
export UPGRADELAB_CACHE ?= $(HOME)/.cache/upgradelab
export KUBEBUILDER_ASSETS := $(UPGRADELAB_CACHE)/assets/kube-$(KUBE_VERSION)-etcd-$(ETCD_VERSION)

# One folder per e2e run; the run prints it at the end. Expanded once, so
# every use in a run names the same folder.
ifeq ($(origin ARTIFACTS), undefined)
ARTIFACTS := $(CURDIR)/_artifacts/e2e-$(shell date +%Y%m%d-%H%M%S)
endif
# Where the management cluster runs: embedded, kubeconfig=PATH or
# kind[=NAME] (managers as Pods; needs KIND_NODE_IMAGE, or use e2e-kind).
MANAGEMENT ?= embedded
# CAPI's per-object reconcile rate limit (ReconcilerRateLimiting, CAPI's
# default, with its stale-cache guard): on, as CAPI ships; false trades
# CAPI as users run it for speed, and every result says which
# (docs/ARCHITECTURE.md, "Time").
CAPI_RATE_LIMITING ?= true
# Each suite process keeps its management plane for its next run that can
# share it (runs without faults on the reference provider's lab): false
# starts a plane for every run.
KEEP_PLANE ?= true

# The integration tests (make test-integration, and the nightly
# workflow): CAPI's managers, the provider and the extension as processes
# on a plane and lab of their own (e2e/integration), Debian's Ironic
# against the lab's BMCs (e2e/ironic), the A/B table on real VMs under
# TCG (sim/vm), and the tests on a real plane built with the integration
# tag: a scenario end to end (e2e/runner), the fleet (e2e/fleet), the
# commands (cmd/upgradelab); and the plane itself (e2e/mgmt, under the
# race detector as in make test).
INTEGRATION_PKGS = ./e2e/integration/ ./e2e/ironic/ ./sim/vm/ ./e2e/runner/ ./e2e/fleet/ ./cmd/upgradelab/
# make test's packages: every one but those whose tests all need a plane,
# Ironic or real VMs.
TEST_PKGS = $(shell go list ./... | grep -v -E '/e2e/(integration|ironic)$$|/sim/vm$$')

GO_TEST ?= go test

GOLANGCI_LINT_VERSION ?= v2.15.0

.PHONY: all deps deps-metal3 tools suite-tools test test-integration test-vm test-metal3 e2e-metal3 e2e-timescale bench-report bench-vm bench-fleet bench-fleet-curve e2e e2e-vm e2e-kind e2e-faults e2e-upstream bench fuzz lint build generate clean-cache

all: build

deps:
	@scripts/install-deps.sh

# deps and Ironic (e2e/ironic), for the tests and targets that run it.
deps-metal3:
	@scripts/install-deps.sh metal3

# The two builds overlap (each waits on downloads and links while the
# other compiles); either failing fails the target.
BUILD_KUBE = KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) scripts/build-kube-binaries.sh >/dev/null
BUILD_CAPI = scripts/build-capi-managers.sh >/dev/null
tools: deps
	@$(BUILD_KUBE) & kube=$$!; $(BUILD_CAPI) & capi=$$!; \
	wait $$kube; k=$$?; wait $$capi; c=$$?; [ $$k -eq 0 ] && [ $$c -eq 0 ]

# Regenerates the provider's deepcopy code, CRDs and webhook manifests, the
# provider's, its inventory half's and the extension's RBAC
# (config/rbac/role.yaml, from their +kubebuilder:rbac markers), and
# the BareMetalHost CRDs from the baremetal-operator API module (the
# operator's own manifests are not in any served module). The results are
# committed; `make test` does not need controller-gen.
BAREMETAL := providers/baremetal
generate:
	@cg=$$(scripts/build-controller-gen.sh) && \
	$$cg object paths=./$(BAREMETAL)/api/... && \
	$$cg crd paths=./$(BAREMETAL)/api/... output:crd:dir=$(BAREMETAL)/config/crd/bases && \
	$$cg webhook paths=./$(BAREMETAL)/webhooks/... output:webhook:dir=$(BAREMETAL)/config/webhook && \
	$$cg rbac:roleName=manager-role paths=./$(BAREMETAL)/... output:rbac:dir=$(BAREMETAL)/config/rbac && \
	$$cg rbac:roleName=manager-role paths="./$(BAREMETAL)/host/...;./$(BAREMETAL)/callback/..." output:rbac:dir=$(BAREMETAL)/inventory-config/rbac && \
	$$cg rbac:roleName=manager-role paths=./providers/inplace/... output:rbac:dir=providers/inplace/config/rbac && \
	$$cg crd:allowDangerousTypes=true paths=github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1 output:crd:dir=$(BAREMETAL)/config/metal3/bases

# Every binary into bin/: upgradelab (run, report, lab, mgmt), the
# provider, the extension and the host agent; `bin/upgradelab run` finds
# the provider and extension beside it.
build: deps
	go build ./...
	go build -o bin/ ./cmd/...

# golangci-lint as .golangci.yml sets it (vet, gofmt and goimports,
# gocritic, errorlint, misspell, funlen), the e2e suite's tagged files
# included; scripts/build-golangci-lint.sh builds it once per version.
# It type-checks against the dependencies' export data, which `go list`
# compiles into Go's build cache; with -race that is the build make
# test's race detector uses, so a fresh machine compiles the dependencies
# once, not twice.
lint: deps
	@gcl=$$(GOLANGCI_LINT_VERSION=$(GOLANGCI_LINT_VERSION) scripts/build-golangci-lint.sh) && GOFLAGS="$(GOFLAGS) -race" $$gcl run ./...

# The unit tests, each package's on the lab's real parts (BMCs, disks,
# the workload API, the provider's and extension's controllers) without
# a management plane: nothing to build first, so a fresh clone runs
# them in minutes. All under the race detector, in the one build lint
# compiled. What CI runs (.ci/run); the tests on a real plane are in
# test-integration.
test: lint
	$(GO_TEST) -count=1 -race -timeout 25m -parallel 2 $(TEST_PKGS)

# The integration tests (INTEGRATION_PKGS), two at a time; the nightly
# workflow runs them.
test-integration: tools deps-metal3
	@status=0; \
	$(GO_TEST) -tags integration -count=1 -timeout 60m -parallel 2 $(INTEGRATION_PKGS) || status=1; \
	$(GO_TEST) -tags integration -count=1 -race -timeout 20m ./e2e/mgmt/ || status=1; \
	exit $$status

# The Metal3 stack on the lab: real Ironic (e2e/ironic, also in `make
# test-integration`) and baremetal-operator built from its upstream release source
# (e2e/bmo; METAL3_SOURCES names the folder of release archives, default
# ../shared/third_party), alone and under the reference provider's
# machines (e2e/integration, the tests named OnBMO); a CAPM3 checkout
# (CAPM3_SOURCE) built in place of the release (e2e/metal3src).
test-metal3: tools deps-metal3
	$(GO_TEST) -tags metal3 -count=1 -timeout 20m ./e2e/ironic/ ./e2e/bmo/ ./e2e/metal3src/
	$(GO_TEST) -tags metal3 -count=1 -timeout 20m -run OnBMO ./e2e/integration/

# The qemu backend's tests alone: the A/B table on sim/disk's model and on
# real VMs (GRUB, Debian's cloud kernel, the guest as init; TCG), the
# libvirt daemon and its reaper, the disk builder and the guest. The A/B
# table on VMs is part of `make test-integration`, the rest of `make test`.
test-vm: deps
	$(GO_TEST) -count=1 -timeout 20m ./sim/vm/... ./sim/abcases/

# The real VMs' figures: boot to the guest's API, six at once, QEMU's RSS,
# image writes into a slot by size.
bench-vm: deps
	go run ./cmd/upgradelab bench env --target bench-vm $(ARTIFACTS)
	set -o pipefail; $(GO_TEST) -run '^$$' -bench . -benchtime 2x -timeout 30m ./sim/vm/ 2>&1 | tee $(ARTIFACTS)/bench.txt
	go run ./cmd/upgradelab bench report $(ARTIFACTS)

# The main job: the e2e suite (every scenario of scenarios/ in each of its
# forms, against each provider of PROVIDERS that supports its strategy, on
# its own plane). GINKGO_LABELS selects, e.g. GINKGO_LABELS=in-place or
# GINKGO_LABELS='scenario && clusterclass' or GINKGO_LABELS=inmemory.
# PROVIDERS are provider configs (docs/PROVIDERS.md): the reference
# provider and CAPI's own in-memory provider by default.
# PARALLEL runs that many scenario runs at once, each in its own Ginkgo
# process with its own plane and lab (scripts/e2e-parallel.sh picks what
# this machine holds; PARALLEL=1 runs them one after another). REPEAT
# makes each run that many times (each repeat a spec of its own).
# BATCH_AT_ONCE: how many runs of a fixed-port provider's batch (one
# process, one plane: docs/PROVIDERS.md) go at a time.
GINKGO_LABELS ?=
PROVIDERS ?= fixtures/providers/baremetal.yaml fixtures/providers/inmemory.yaml
PARALLEL ?= $(shell scripts/e2e-parallel.sh)
BATCH_AT_ONCE ?= 2
REPEAT ?= 1
export UPGRADELAB_PROVIDERS = $(PROVIDERS)
# The target a suite runs for, recorded in its artifacts (environment.json).
export UPGRADELAB_SUITE ?= $(or $(firstword $(filter e2e%,$(MAKECMDGOALS))),e2e)
export UPGRADELAB_REPEAT = $(REPEAT)
# The Ginkgo CLI at the version go.mod pins (parallel processes need it);
# a serial run is verbose, a parallel one prints each run's progress lines
# as they come and a spec's whole output only when it fails.
GINKGO := go run github.com/onsi/ginkgo/v2/ginkgo
# TIME_SCALE is real time per lab time (0.01: a lab minute in 0.6 s);
# every duration of the lab and of a scenario follows it.
TIME_SCALE ?= 0.01
GINKGO_TIMEOUT ?= 90m
GINKGO_RUN = $(GINKGO) run --tags=e2e --procs=$(PARALLEL) $(if $(filter 1,$(PARALLEL)),-v,) \
	--timeout=$(GINKGO_TIMEOUT) --output-dir=$(ARTIFACTS) --junit-report=junit.xml
E2E_ARGS = -artifacts=$(ARTIFACTS) -management=$(MANAGEMENT) -capi-rate-limiting=$(CAPI_RATE_LIMITING) -keep-plane=$(KEEP_PLANE) -batch-at-once=$(BATCH_AT_ONCE) -time-scale=$(TIME_SCALE)
e2e: suite-tools
	@mkdir -p $(ARTIFACTS)
	$(GINKGO_RUN) --label-filter='$(GINKGO_LABELS)' ./e2e/ -- $(E2E_ARGS)

# tools, and beside them the suite's own compile (every package the e2e
# test binary and the Ginkgo CLI import, into Go's build cache, so `ginkgo
# run` compiles the suite's own files and links): on a fresh machine each
# build leaves a core idle while it downloads or links. Warm, it takes a
# second. The recipe holds no $(MAKE), so `make -n` prints it rather than
# running it.
SUITE_PKGS = {{if and (not .ForTest) (not .Standard) .GoFiles}}{{.ImportPath}}{{end}}
suite-tools: deps
	@$(BUILD_KUBE) & kube=$$!; $(BUILD_CAPI) & capi=$$!; \
	pkgs=$$(go list -tags=e2e -deps -test -f '$(SUITE_PKGS)' ./e2e/) && \
	ginkgo=$$(go list -deps -f '$(SUITE_PKGS)' github.com/onsi/ginkgo/v2/ginkgo) && \
	go build -tags=e2e $$(echo "$$pkgs $$ginkgo" | tr ' ' '\n' | grep -v '\.test$$' | sort -u); suite=$$?; \
	wait $$kube; k=$$?; wait $$capi; c=$$?; [ $$k -eq 0 ] && [ $$c -eq 0 ] && [ $$suite -eq 0 ]

# Time-scale invariance: the four main scenarios (plain) at each of
# TIMESCALE_SCALES (the suite's scale and ten times it), each suite in
# ARTIFACTS/scale-S, then `upgradelab report diff --verdicts` of the
# first against each other: a rule judged otherwise at another scale
# fails the target, as a failed run does. A verdict that changes with the scale is
# about the harness, not the upgrade.
MAIN_SCENARIOS := single-node-in-place || three-node-scale-in || cold-spare-rolling || reset-reprovisioning
TIMESCALE_SCALES ?= 0.01 0.1
e2e-timescale: tools
	@mkdir -p $(ARTIFACTS)
	@status=0; for s in $(TIMESCALE_SCALES); do \
	  $(MAKE) --no-print-directory e2e ARTIFACTS=$(ARTIFACTS)/scale-$$s TIME_SCALE=$$s PROVIDERS=fixtures/providers/baremetal.yaml \
	    GINKGO_LABELS='plain && ($(MAIN_SCENARIOS))$(if $(GINKGO_LABELS), && ($(GINKGO_LABELS)))' || status=1; \
	done; \
	for s in $(wordlist 2,99,$(TIMESCALE_SCALES)); do \
	  go run ./cmd/upgradelab report diff --verdicts $(ARTIFACTS)/scale-$(firstword $(TIMESCALE_SCALES)) $(ARTIFACTS)/scale-$$s || status=1; \
	done; \
	echo "upgradelab artifacts: $(ARTIFACTS) (one folder per time scale)"; exit $$status

# The four main scenarios (plain) on real VMs: every lab host a QEMU VM
# under TCG that boots OVMF, GRUB's A/B choice, Debian's cloud kernel and
# the guest from a real disk (UPGRADELAB_BACKEND=qemu; A/B hosts only), its
# BMCs acting on the VM, its deploy ramdisk a real ISO, its image writes
# real; every check as in `make e2e`. VM_PARALLEL runs at once (each VM
# wants most of a core while it boots).
VM_PARALLEL ?= 2
e2e-vm: tools
	@mkdir -p $(ARTIFACTS)
	UPGRADELAB_BACKEND=qemu $(MAKE) --no-print-directory e2e PARALLEL=$(VM_PARALLEL) ARTIFACTS=$(ARTIFACTS) \
		GINKGO_LABELS='baremetal && plain && qemu && ($(MAIN_SCENARIOS))$(if $(GINKGO_LABELS), && ($(GINKGO_LABELS)))'


# One scenario of each strategy with the management cluster on kind
# (MANAGEMENT=kind): a one-node kind cluster created through kind's Go
# library from a node image built offline (scripts/build-kind-node-image.sh,
# cached by what it is built from), every manager a Pod with its own
# ServiceAccount and RBAC, the lab on the host (docs/ARCHITECTURE.md); then
# a one-cluster fleet on the same kind cluster (TestAFleetRunsOnKind). Needs
# root (Docker, iptables); the runs share the cluster, so one at a time.
# `upgradelab mgmt down --management kind` deletes the cluster.
KIND_SCENARIOS := single-node-in-place || three-node-scale-in || cold-spare-rolling || reset-reprovisioning
e2e-kind: tools
	@mkdir -p $(ARTIFACTS)
	image=$$(scripts/build-kind-node-image.sh) && \
	$(GINKGO) run --tags=e2e --procs=1 -v --timeout=90m --output-dir=$(ARTIFACTS) --junit-report=junit.xml \
		--label-filter='baremetal && plain && !qemu && !ostree && ($(KIND_SCENARIOS))$(if $(GINKGO_LABELS), && ($(GINKGO_LABELS)))' ./e2e/ -- \
		-artifacts=$(ARTIFACTS) -management=kind -kind-node-image=$$image -capi-rate-limiting=$(CAPI_RATE_LIMITING) && \
	KIND_NODE_IMAGE=$$image $(GO_TEST) -tags kind,integration -count=1 -timeout 30m -run TestAFleetRunsOnKind ./e2e/fleet/

# The fault variants (scenarios/faults/): each scenario with a failure
# injected mid-run, judged by the same checks. `make e2e-faults REPEAT=5`
# runs each variant five times.
e2e-faults: suite-tools
	@mkdir -p $(ARTIFACTS)
	UPGRADELAB_SCENARIOS='../scenarios/faults/*.yaml' $(GINKGO_RUN) --label-filter='scenario$(if $(GINKGO_LABELS), && ($(GINKGO_LABELS)))' ./e2e/ -- $(E2E_ARGS)

# The scenarios on Metal3's own inventory: baremetal-operator (built from
# its release source, METAL3_SOURCES, default ../shared/third_party) on
# the lab's Ironic, with Metal3's provider CAPM3 (metal3.yaml, also from
# its release source) and with upgradelab's infrastructure controllers
# (baremetal-bmo.yaml) as the provider, so the report puts the two side
# by side (docs/PROVIDERS.md, "Metal3").
METAL3_PROVIDERS ?= fixtures/providers/metal3.yaml fixtures/providers/baremetal-bmo.yaml
e2e-metal3: tools deps-metal3
	@$(MAKE) --no-print-directory e2e PROVIDERS='$(METAL3_PROVIDERS)' ARTIFACTS=$(ARTIFACTS) GINKGO_LABELS='$(GINKGO_LABELS)'

# CAPI's own e2e specs (sigs.k8s.io/cluster-api/test/e2e at go.mod's
# version) against the reference provider on the lab (e2e/upstream,
# docs/PROVIDERS.md): each Ginkgo process starts its own plane and lab
# and runs one spec at a time. GINKGO_LABELS selects, e.g.
# GINKGO_LABELS=quick-start or GINKGO_LABELS='k8s-upgrade && topology'.
# CAPI's managers run as CAPI ships them here (UPSTREAM_CAPI_RATE_LIMITING,
# its per-object reconcile rate limit on): CAPI's specs were written
# against that, and KCPAdoptionSpec's unretried Get-then-Update of the
# Cluster loses the race against the cluster controller without it.
UPSTREAM_PARALLEL ?= 3
UPSTREAM_CAPI_RATE_LIMITING ?= true
# CAPI's test extension (the in-memory provider's in-place run) sleeps
# 15-20 s in each UpdateMachine, about 7 minutes for the spec's five
# updates of four Machines, so the default leaves that one run out;
# GINKGO_LABELS=inmemory (or any filter) runs it. MachineDeploymentRemediation
# cannot pass there: CAPD's in-memory API server serves no nodes/status
# PATCH ("the server could not find the requested resource"), which the
# spec uses to mark a Node unhealthy (the lab's workload API does).
UPSTREAM_LABELS ?= !(inmemory && (in-place || md-remediation))
e2e-upstream: tools
	@mkdir -p $(ARTIFACTS)
	$(GINKGO) run --tags=e2e --procs=$(UPSTREAM_PARALLEL) $(if $(filter 1,$(UPSTREAM_PARALLEL)),-v,) \
		--timeout=40m --output-dir=$(ARTIFACTS) --junit-report=junit.xml --label-filter='$(or $(GINKGO_LABELS),$(UPSTREAM_LABELS))' \
		./e2e/upstream/ -- -artifacts=$(ARTIFACTS) -capi-rate-limiting=$(UPSTREAM_CAPI_RATE_LIMITING)

# Benchmarks print figures (ns/op and custom metrics such as seconds to ready).
# Start-up benchmarks run a few whole iterations; request rates run for time.
# Their output is kept as ARTIFACTS/bench.txt, and their rows of
# docs/BENCHMARKS.md are written anew from it.
bench: tools deps-metal3
	go run ./cmd/upgradelab bench env --target bench $(ARTIFACTS)
	set -o pipefail; { \
	$(GO_TEST) -run '^$$' -bench . -benchtime 3x -timeout 30m ./e2e/mgmt/ ./sim/lab/ && \
	$(GO_TEST) -run '^$$' -bench . -benchtime 2x -timeout 10m ./e2e/ironic/ && \
	$(GO_TEST) -run '^$$' -bench . -benchtime 2s -timeout 30m ./sim/bmc/ && \
	$(GO_TEST) -run '^$$' -bench . -benchtime 5000x -timeout 10m ./sim/ipmi/ && \
	$(GO_TEST) -run '^$$' -bench BenchmarkEviction -benchtime 1000x -timeout 10m ./sim/workload/ && \
	$(GO_TEST) -run '^$$' -bench BenchmarkImportAThousandHosts -benchtime 5x -timeout 10m ./e2e/rehearsal/ && \
	$(GO_TEST) -run '^$$' -bench 'BenchmarkScenario|BenchmarkFourScenariosTogether|BenchmarkMetal3ScaleIn' -benchtime 1x -timeout 80m ./e2e/runner/ && \
	$(GO_TEST) -run '^$$' -bench BenchmarkFleetWave100 -benchtime 1x -timeout 30m ./e2e/fleet/; \
	} 2>&1 | tee $(ARTIFACTS)/bench.txt
	go run ./cmd/upgradelab bench report $(ARTIFACTS)

# docs/BENCHMARKS.md from measurements: FROM is folders holding an e2e
# run's artifacts, a bench.txt, or *.timing.json files of scripts/timed,
# e.g. scripts/timed _artifacts/t/e2e.timing.json "make e2e, warm" make e2e
# and then make bench-report FROM=_artifacts/t.
FROM ?=
bench-report:
	@[ -n "$(FROM)" ] || { echo "bench-report: say FROM=FOLDER (an e2e artifacts folder, a bench.txt's folder, *.timing.json)"; exit 2; }
	go run ./cmd/upgradelab bench report $(FROM)

# A fleet's wave (docs/FLEET.md): FLEET's clusters on one plane and one
# lab, provisioned, upgraded in one wave, judged, and what it cost; then
# its point of the cost curve (curve/), drawn whatever the verdicts, and
# the run's exit status kept.
FLEET ?= fixtures/fleets/small.yaml
bench-fleet: tools
	go run ./cmd/upgradelab fleet --fleet $(FLEET) --artifacts $(ARTIFACTS)/fleet; status=$$?; \
	go run ./cmd/upgradelab fleet curve --with $(ARTIFACTS)/fleet/fleet.json --artifacts $(ARTIFACTS)/fleet/curve && exit $$status

# The cost curve: hundred.yaml's mix scaled to each of CURVE_HOSTS, one
# plane each, one after another; curve.txt and curve.svg in the artifacts.
CURVE_HOSTS ?= 10,100,300,1000
bench-fleet-curve: tools
	go run ./cmd/upgradelab fleet curve --fleet fixtures/fleets/hundred.yaml --hosts $(CURVE_HOSTS) --artifacts $(ARTIFACTS)/curve

# Each parser's fuzzer for FUZZTIME (the seeds also run in `make test`).
FUZZTIME ?= 30s
fuzz: deps
	go test -run '^$$' -fuzz FuzzParseSpec -fuzztime $(FUZZTIME) ./sim/lab/
	go test -run '^$$' -fuzz FuzzContract -fuzztime $(FUZZTIME) ./sim/disk/
	go test -run '^$$' -fuzz FuzzParseCatalog -fuzztime $(FUZZTIME) ./sim/image/
	go test -run '^$$' -fuzz FuzzParseRules -fuzztime $(FUZZTIME) ./sim/nic/
	go test -run '^$$' -fuzz FuzzRedfishRequests -fuzztime $(FUZZTIME) ./sim/bmc/
	go test -run '^$$' -fuzz FuzzIPMIDatagrams -fuzztime $(FUZZTIME) ./sim/ipmi/
	go test -run '^$$' -fuzz FuzzRunScript -fuzztime $(FUZZTIME) ./sim/ipxe/
	go test -run '^$$' -fuzz FuzzReadFile -fuzztime $(FUZZTIME) ./sim/iso9660/
	go test -run '^$$' -fuzz FuzzParseEnv -fuzztime $(FUZZTIME) ./sim/vm/diskimage/
	go test -run '^$$' -fuzz FuzzReadGPT -fuzztime $(FUZZTIME) ./sim/vm/diskimage/
	go test -run '^$$' -fuzz FuzzParseBootstrap -fuzztime $(FUZZTIME) ./sim/agent/
	go test -run '^$$' -fuzz FuzzParseRegistration -fuzztime $(FUZZTIME) ./providers/baremetal/callback/
	go test -run '^$$' -fuzz FuzzRenderBytes -fuzztime $(FUZZTIME) ./e2e/clustertemplate/
	go test -run '^$$' -fuzz FuzzParseScenario -fuzztime $(FUZZTIME) ./e2e/scenario/
	go test -run '^$$' -fuzz FuzzParseProvider -fuzztime $(FUZZTIME) ./e2e/provider/
	go test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./e2e/fleet/
	go test -run '^$$' -fuzz FuzzReadTable -fuzztime $(FUZZTIME) ./e2e/benchtable/
	go test -run '^$$' -fuzz FuzzRead -fuzztime $(FUZZTIME) ./e2e/rehearsal/
	go test -run '^$$' -fuzz FuzzParsePlan -fuzztime $(FUZZTIME) ./e2e/rehearsal/

clean-cache:
	rm -rf $(UPGRADELAB_CACHE)
