# The two commands a newcomer needs:
#   make demo   boots the end-to-end VM and replays the seed tutorial (no cluster needed)
#   make test   everything CI runs: unit and namespace tests, IPVS tests in the VM, end to end
# Both install what they need (Debian packages) on first use; run them as root.

GO        ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
# The version of the binary, the image, the chart and the docs: the VERSION file
# (deploy/version_test.go checks that the chart and the CHANGELOG agree with it).
VERSION   ?= $(shell cat VERSION)
COMMIT    := $(shell git rev-parse HEAD 2>/dev/null)
# The commit's time: the image's creation time and every file time in it.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct HEAD 2>/dev/null || echo 0)
COMMIT_TIME := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
# dirty when git sees any change, untracked files included, as Go's own VCS stamp does.
TREE_STATE := $(shell test -z "$$(git status --porcelain 2>/dev/null)" && echo clean || echo dirty)
LDFLAGS   := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.commitTime=$(COMMIT_TIME) -X main.treeState=$(TREE_STATE)
# urfave/cli's man-page writer (and the Markdown parser under it) is never used; left out, it
# leaves half a MB of heap and 250 KB of binary off every node. Also in
# deploy/rootfs/build-rootfs.sh (cmd/ipvsproxy/deps_test.go checks both).
BUILDTAGS := urfave_cli_no_docs
BIN       := bin/ipvsproxy
# Every Go command run from here builds as the control plane, the conformance cluster and the e2e
# suite are built: static and -trimpath (e2e/controlplane/build.sh). Built alike, the packages
# the tests share with kube-apiserver and kube-proxy (client-go, api, apimachinery: half of their
# source) are compiled once on a cold machine, and the builds prebuild starts in the background
# find them in the Go cache; built apart, they were compiled twice (e2e/controlplane/build_test.go
# keeps these two lines).
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)
# Packages whose real-kernel half needs IPVS, the dummy driver or SCTP: they run in the VM.
VM_PKGS   := ./internal/kernel/ipvs ./internal/kernel/netif ./ipvsproxy ./internal/proxier ./internal/inspect ./internal/kernel/listeners

.PHONY: all build test unit vm-test e2e demo deps fuzz bench clean fresh-check

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(BUILDTAGS)' -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/ipvsproxy

deps:
	e2e/install-deps.sh

# Unit tests on the fakes, plus the real-kernel halves that this machine's
# kernel supports (ipset, iptables, conntrack in fresh network namespaces).
unit: deps
	$(GO) vet ./...
	# -vet=off: go test's own vet pass is a subset of the one above.
	$(GO) test -count=1 -vet=off ./...
	cd e2e/controlplane && $(GO) test -count=1 . ./pki/ ./cluster/ ./kubeproxydefaults/ ./cmd/e2ectl/
	cd e2e/conformance && $(GO) test -count=1 ./cmd/junitsummary/ ./ledger/
	# The image builder, the SBOM, the release bundle, and two image builds of this commit (one digest).
	cd release && $(GO) vet ./... && $(GO) test -count=1 ./...
	# The Go end-to-end scenarios run only in the VM (make e2e); here they are vetted, which compiles them,
	# their helpers without the e2e tag (the silence of a stream, gap.go) are tested, and so is their
	# table (each step a verdict of its scenario, every name in docs/testing.md's table).
	cd e2e/suite && $(GO) vet -tags e2e ./... && $(GO) test -count=1 . && $(GO) test -count=1 -tags e2e -run '^TestScenarioTable' .

# The adapters' and the proxier's kernel halves inside the VM (IPVS, dummy), then a boot that
# checks the start-up on a kernel without ip_vs, without the dummy driver and without twos.
vm-test: deps build
	e2e/vm/test-in-vm.sh --smoke $(VM_PKGS)
	e2e/vm/kernel-limits.sh

# The VM stage's own check: a guest kernel panic (made on purpose) is named, retried once and
# counted, and a second one fails (three boots; run it after changing e2e/vm's scripts).
.PHONY: vm-panic-selftest
vm-panic-selftest:
	e2e/vm/panic-selftest.sh

# The seed tutorial as assertions, two nodes in the VM against a real API server.
e2e: deps build
	e2e/run-parallel.sh

# The compatibility matrices (docs/compatibility.md; results in e2e/matrix/*.tsv, one row per line
# of the matrix, replaced by each run): k8s-matrix runs the core e2e scenarios against each
# Kubernetes minor's own kube-apiserver (K8S=1.35 for one; default 1.35 1.36 1.37), kernel-matrix
# runs the VM tests and the e2e suite on each Debian 12 kernel (KERNELS=6.1 for one; default
# 6.12 6.1 cloud). `make test` runs the newest minor and 6.12 (the e2e stage). One minor or kernel
# per call keeps a VM hold near an hour.
K8S     ?=
KERNELS ?=
.PHONY: k8s-matrix kernel-matrix
k8s-matrix: deps build
	e2e/matrix.sh kubernetes $(K8S)

kernel-matrix: deps build
	e2e/matrix.sh kernels $(KERNELS)

# e2e-migrate: the migration from the real kube-proxy's IPVS mode (also in `make e2e`); the
# rollbacks to its IPVS, iptables and nftables modes and the migrations from its iptables and
# nftables modes are left out of `make e2e` for time (e2e/suite/scenarios_test.go: run by name only).
.PHONY: e2e-migrate
e2e-migrate: deps build
	IPVSPROXY_E2E_SCENARIOS="migrate-from-kube-proxy-ipvs rollback-to-kube-proxy-ipvs migrate-from-kube-proxy-iptables migrate-from-kube-proxy-nftables rollback-to-kube-proxy-iptables rollback-to-kube-proxy-nftables" e2e/run.sh

# conformance-smoke: the DaemonSet started by a real kubelet becomes Ready and one Services
# [Conformance] test passes; the full pass is `make conformance`. prebuild starts the
# control plane's and the conformance cluster's builds in the background first (nice 19): on a new
# machine they are most of the run, and the VM stages leave a core idle for them. fuzz: FUZZTIME per
# target (2 targets).
# e2e/stages.sh runs them in this order and prints each one's time; A+B runs A and B at once (each
# boots one guest of one vCPU: two use the host's two cores), after `build` made the binary they share.
TEST_STAGES := prebuild unit fuzz bench-smoke build vm-test+bench-dataplane-smoke e2e bench-daemon-smoke+conformance-smoke
test:
	MAKE="$(MAKE)" e2e/stages.sh $(TEST_STAGES)

.PHONY: prebuild
prebuild:
	e2e/prebuild.sh

demo: deps build
	e2e/run.sh --demo

# `make test` from a clean clone of HEAD with every cache empty, as on a new machine; prints its time.
fresh-check:
	e2e/fresh-check.sh test

# A time-boxed pass of each fuzz target (make test runs it); a failure fails make and leaves the
# input under the package's testdata/fuzz/ (ipvsproxy, internal/proxier) to commit as a regression case. FUZZTIME=10s for a quick look.
FUZZTIME ?= 60s
fuzz:
	$(GO) test ./ipvsproxy -run XXX -fuzz '^FuzzBuildService$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/proxier -run XXX -fuzz '^FuzzSync$$' -fuzztime $(FUZZTIME) -parallel 2

bench:
	$(GO) test ./benchmarks/... -run XXX -bench . -benchmem

# The daemon tier: the real `ipvsproxy run` and kube-proxy's own binary in its nftables and IPVS
# modes in the VM against the real API server, N Services × 10 endpoints, one boot per N
# (docs/performance.md, "The daemon tier"). BENCH_SIZES picks the sizes (one boot each), e.g.
# `make bench-daemon BENCH_SIZES=1000`: the three sizes take hours under emulation.
.PHONY: bench-daemon bench-daemon-smoke bench-dataplane bench-dataplane-smoke
BENCH_SIZES ?= 1000 10000 30000
bench-daemon: deps build
	e2e/vm/bench-daemon.sh $(BENCH_SIZES)

# bench-daemon-smoke: the daemon tier's smoke form (make test runs it): 100 Services, every side;
# fails unless each became ready, programmed every Service and the endpoint changes, a Service of
# 2,000 endpoints beside them, and produced its figures, and the IPVS sides brought every change
# of 20 s of churn (5 a second) to the kernel.
bench-daemon-smoke: deps build
	e2e/vm/bench-daemon.sh --smoke --churn

# bench-daemon-churn: network programming latency under continuous churn (5 endpoint changes a
# second over random Services, at least three full re-checks), ipvsproxy at its default flags,
# CHURN_SIZES Services × 10 (docs/performance.md). Creating 50,000 Services takes the API server
# over an hour; IPVSPROXY_BENCH_CONTROLPLANE reuses a control plane that holds them.
.PHONY: bench-daemon-churn
CHURN_SIZES ?= 20000 50000
bench-daemon-churn: deps build
	IPVSPROXY_BENCH_SIDES="$${IPVSPROXY_BENCH_SIDES:-ipvsproxy}" IPVSPROXY_VM_MEM="$${IPVSPROXY_VM_MEM:-6144}" \
		IPVSPROXY_BENCH_SERIES="$${IPVSPROXY_BENCH_SERIES:-0}" IPVSPROXY_BENCH_BIG="$${IPVSPROXY_BENCH_BIG:-0}" \
		IPVSPROXY_VM_TIMEOUT="$${IPVSPROXY_VM_TIMEOUT:-7200}" e2e/vm/bench-daemon.sh --churn $(CHURN_SIZES)

# The daemon's live heap by owner after its first full sync and its first periodic re-check, on
# its own informers, tracker and sync loop over the Fakes, in this process (no VM; slow: every
# allocation is recorded). HEAP_SIZES lists the Services × 10 endpoints; the heap profiles go to
# HEAP_PROFILES (`go tool pprof -top -sample_index=inuse_space <file>`).
HEAP_SIZES ?= 10000,20000,50000
HEAP_PROFILES ?= /tmp/ipvsproxy-heap
.PHONY: bench-daemon-heap
bench-daemon-heap:
	mkdir -p $(HEAP_PROFILES)
	cd cmd/ipvsproxy && IPVSPROXY_HEAP_SERVICES=$(HEAP_SIZES) IPVSPROXY_HEAP_PROFILES=$(HEAP_PROFILES) \
		$(GO) test -run '^$$' -bench '^BenchmarkDaemonHeap$$' -benchtime 1x -timeout 3h .

# How far the live heap rises above what stays live during the cold sync of COLD_PEAK_SIZES
# Services × 10 endpoints (the transient the collector's heap goal multiplies), in process.
COLD_PEAK_SIZES ?= 10000,50000
.PHONY: bench-cold-peak
bench-cold-peak:
	cd benchmarks && IPVSPROXY_COLD_PEAK_SERVICES=$(COLD_PEAK_SIZES) \
		$(GO) test -run '^$$' -bench '^BenchmarkColdSyncPeakLiveHeap$$' -benchtime 1x -timeout 1h .

# The inspect endpoint under hostile clients, long form: 10,000 Services for a minute of slow
# readers, a connection flood and 1,000 requests/s; fails unless the heap stays within its bound
# and every /healthz probe is answered (the short form runs in `go test ./cmd/ipvsproxy`).
.PHONY: bench-inspect-load
bench-inspect-load:
	$(GO) test ./cmd/ipvsproxy -run '^$$' -bench '^BenchmarkInspectEndpointUnderHostileClients$$' -benchtime 1x

# The data plane: what a packet pays through ipvsproxy's and each kube-proxy mode's kernel state
# with N Services programmed (connect time, new connections/s, an established flow, UDP), empty
# and with 100,000 connections held, beside a no-proxy baseline, one boot per N.
bench-dataplane: deps build
	e2e/vm/bench-daemon.sh --dataplane $(BENCH_SIZES)

# bench-dataplane-smoke: its smoke form (make test runs it): 100 Services, ipvsproxy and
# kube-proxy's nftables mode beside the baseline (IPVSPROXY_BENCH_SIDES adds the others), every
# measurement short and taken once, 2,000 held connections; fails unless each produced every
# figure with no failed connection.
bench-dataplane-smoke: deps build
	e2e/vm/bench-daemon.sh --dataplane-smoke

# The conntrack clean-up at a million flows, in the VM: a network namespace here holds
# at most the host's nf_conntrack_max, which is not ours to raise.
bench-conntrack-vm:
	IPVSPROXY_VM_MEM=4096 e2e/vm/test-in-vm.sh --run '^$$' --bench BenchmarkCleanUp -e IPVSPROXY_CONNTRACK_BENCH_FLOWS=1000000 ./conntrack

# The image, without a container engine (release/image.sh, docs/install.md): for each platform
# the daemon cross-compiled, deploy/rootfs's Debian packages of that architecture, the tree
# checked by deploy/rootfs/check-rootfs.sh; one OCI archive of both, named IMAGE:VERSION.
# The conformance cluster and the end-to-end deploy check run this archive. The same commit gives
# the same digest.
#   make image                                  _output/image/ipvsproxy-$(VERSION).oci.tar
#   make release                                _output/release/$(VERSION)/ (VERSION=X.Y.Z: that version)
#   make push REGISTRY=registry.example.com/team   the archive to REGISTRY/ipvsproxy:$(VERSION)
IMAGE     ?= registry.invalid/ipvsproxy
PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_DIR ?= _output/image
# IMAGE_REUSE=1: keep the archive built from the same inputs (release/image.sh).
IMAGE_REUSE ?=
RELEASE_DIR = _output/release/$(VERSION)
REGISTRY  ?=
.PHONY: image release push release-check
image:
	GO=$(GO) VERSION=$(VERSION) COMMIT=$(COMMIT) TREE_STATE=$(TREE_STATE) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) \
		LDFLAGS='$(LDFLAGS)' BUILDTAGS='$(BUILDTAGS)' IMAGE=$(IMAGE) PLATFORMS=$(PLATFORMS) IMAGE_REUSE=$(IMAGE_REUSE) \
		release/image.sh $(IMAGE_DIR)

# The release: the image archive, its SBOM (CycloneDX), the manifests and the chart pinned to its
# digest, the monitoring files, the CHANGELOG section, SHA256SUMS. From a clean tree only: the
# labels and the binaries name the commit.
release: deps
	@test "$(TREE_STATE)" = clean || { echo "make release: the tree has changes (git status): commit them first" >&2; exit 2; }
	@v=$$(cat VERSION); test "$(VERSION)" = "$$v" || test "$(VERSION)" = "$${v%-rc.*}" || \
		{ echo "make release: VERSION=$(VERSION) is neither the VERSION file's $$v nor its final version $${v%-rc.*}" >&2; exit 2; }
	$(MAKE) image
	$(IMAGE_DIR)/ipvsproxy-release release -archive $(IMAGE_DIR)/ipvsproxy-$(VERSION).oci.tar -repo . \
		-distro debian-$$(. /etc/os-release && echo $$VERSION_ID) -o $(RELEASE_DIR)
	@echo "make release: wrote $(RELEASE_DIR)"; cat $(RELEASE_DIR)/IMAGE

push:
	@test -n "$(REGISTRY)" || { echo "make push needs REGISTRY=your.registry/path" >&2; exit 2; }
	@test -f $(IMAGE_DIR)/ipvsproxy-$(VERSION).oci.tar || { echo "make push: no $(IMAGE_DIR)/ipvsproxy-$(VERSION).oci.tar: make image (or make release) first" >&2; exit 2; }
	cd release && $(GO) run ./cmd/ipvsproxy-release push -archive ../$(IMAGE_DIR)/ipvsproxy-$(VERSION).oci.tar -registry $(REGISTRY)

# The release gate (hours; not part of make test): every spec of the conformance selection passed
# at this commit, the e2e suite on both kernels, and make fresh-check (release/check.sh).
release-check:
	release/check.sh

clean:
	rm -rf bin _output

# Kubernetes' own [sig-network] e2e tests against the DaemonSet started by a real kubelet and
# containerd in the VM, no kube-proxy (docs/testing.md). Prints N passed, N failed,
# N skipped; JUnit under e2e/results/. The smoke form: the DaemonSet becomes Ready and one
# Service conformance test passes.
# SHARD=K/N runs the K-th of N shards of the selected specs; a shard or a full run appends its
# results to e2e/conformance/ledger.tsv, which conformance-status reads (docs/conformance.md).
# CONF_CLUSTER=dual-stack runs (and reports on) the dual-stack cluster and its own selection.
.PHONY: conformance conformance-smoke conformance-status bench-conntrack-vm
conformance: deps
	e2e/conformance/run.sh $(if $(SHARD),--shard $(SHARD))

conformance-status:
	e2e/conformance/status.sh

conformance-smoke: deps
	e2e/conformance/run.sh --smoke

# The benchmark harness beside kube-proxy v1.37.2's IPVS proxier (benchmarks/harness, a
# module of its own). bench-smoke proves it works on 100 Services (make test runs it; building
# kube-proxy takes about 3 minutes on a cold Go cache); bench-report is the full run whose results
# are committed under benchmarks/results/ (tens of minutes; see docs/performance.md).
.PHONY: bench-smoke bench-report
bench-smoke:
	cd benchmarks/harness && $(GO) vet ./... && $(GO) test -count=1 ./... && \
		out=$$(mktemp -d) && $(GO) run ./cmd/bench -services 100 -pairs 1 -repeats 2 -out $$out && rm -rf -- "$$out"

bench-report:
	cd benchmarks/harness && nice -n 15 $(GO) run ./cmd/bench -services 1000,10000,50000 -pairs 3 -repeats 5 -mix -out ../results

# Tier 2: the sync on the VM's real kernel beside the bare-netlink floor (e2e/vm/bench-vm.sh).
.PHONY: bench-vm bench-node
bench-vm: deps
	e2e/vm/bench-vm.sh 1000

# The same on this machine's kernel: a bare-metal node with IPVS and the dummy driver.
bench-node:
	e2e/vm/bench-vm.sh --node 1000 10000

# The conntrack clean-up: ipvsproxy's Proxier.Sync (the endpoint change's partial sync and a
# full sync's reconcile pass) beside kube-proxy v1.37.2's CleanStaleEntries: 250,000 UDP flows
# (this host's nf_conntrack_max is 262,144), 1% stale, one fresh network namespace per process.
.PHONY: bench-conntrack
bench-conntrack:
	cd benchmarks/harness && $(GO) run ./cmd/conntrack-bench -side both -flows 250000 -pairs 3 -repeats 3

# The same with 1 M flows on the VM's kernel, whose nf_conntrack_max is ours to raise (tens of minutes
# under emulation).
.PHONY: bench-conntrack-1m-vm
bench-conntrack-1m-vm: deps
	e2e/vm/conntrack-bench-vm.sh 1000000 1 1
