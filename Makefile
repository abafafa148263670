# changebot developer targets. `make test` expects PostgreSQL at
# TEST_DATABASE_URL (start the local one with `make db-up`); .ci/run does both.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

GO ?= go
LOCAL_DATABASE_URL := postgres://postgres@127.0.0.1:5432/test?sslmode=disable
TEST_DATABASE_URL ?= $(LOCAL_DATABASE_URL)
# The demo's database: empty means a temporary SQLite file (no server);
# make demo DATABASE_URL=postgres://… runs it on PostgreSQL.
DATABASE_URL ?=
export TEST_DATABASE_URL

GOLANGCI_LINT := $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
SQLC := $(GO) run github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1
# Each engine's sqlc.yaml and the directory its generated code goes to.
SQLC_ENGINES := store/postgres store/sqlite
BENCHSTAT := $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
HELM_VERSION := v3.22.0
HELM := bin/helm
# A count, never a duration: with a wall-clock -fuzztime, Go 1.26's fuzz
# coordinator can fail at its deadline with 'context deadline exceeded' after
# every input passed (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 200000x
BENCHCOUNT ?= 6
CHAOS_N ?= 1000
# CHAOS_PLATFORM is gitlab (gitlabfake) or github (githubfake): make chaos CHAOS_PLATFORM=github
CHAOS_PLATFORM ?= gitlab
# CHAOS_METHOD is merge, or ff (every merge request must be up to date: the merge queue): make chaos METHOD=ff
CHAOS_METHOD ?= merge
# `make chaos PLATFORM=github N=200` is short for it: N and PLATFORM count only when given on the command line (an
# environment's PLATFORM must not change the run).
chaos_arg = $(if $(filter command line,$(origin $(1))),$($(1)),$(2))
# Stamped into the binary (changebot version, changebot_build_info).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X changebot/bot.version=$(VERSION) -X changebot/bot.commit=$(COMMIT)

.PHONY: all build test vet fuzz demo lint bench bench-queue bench-waiting bench-intake pgbench chaos db-up clean helm sqlc sqlc-check

all: build lint test

## build: compile bin/changebot
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/changebot ./cmd/changebot

## test: vet, the Helm chart, all tests with the race detector (PostgreSQL tests included), the flow tests again on SQLite, a bounded fuzz run
# Package bot (its tests start `changebot serve` processes and wait on real
# time) runs after the others, not beside them: beside flows' database-heavy
# tests on a 2-core runner its waits measured the load.
test: vet helm
	$(GO) test -race -count=1 -timeout 15m $$($(GO) list ./... | grep -v '^changebot/bot$$')
	$(GO) test -race -count=1 -timeout 15m ./bot
	CHANGEBOT_TEST_ENGINE=sqlite $(GO) test -race -count=1 -timeout 15m ./flows/...
	$(MAKE) --no-print-directory fuzz

vet:
	$(GO) vet ./...

fuzz:
	@case '$(FUZZTIME)' in *[0-9]x) ;; *) echo "FUZZTIME=$(FUZZTIME): give a count such as 200000x, not a duration (golang/go#75804)" >&2; exit 2;; esac
	$(GO) test ./commands -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME)

## helm: helm lint and helm template of deploy/helm/changebot (GitLab and GitHub), and the Go tests that check the rendered manifests
helm: $(HELM)
	$(HELM) lint --strict deploy/helm/changebot --set existingSecret=changebot
	$(HELM) lint --strict deploy/helm/changebot --set existingSecret=changebot --set config.platform=github
	$(HELM) template cb deploy/helm/changebot --kube-version 1.31.0 --set existingSecret=changebot >/dev/null
	$(HELM) template cb deploy/helm/changebot --kube-version 1.31.0 --set existingSecret=changebot --set config.platform=github >/dev/null
	CHANGEBOT_HELM=$(abspath $(HELM)) $(GO) test -count=1 ./bot -run 'TestHelmChart'

# helm itself, built from the Go module proxy (no download of a release binary).
$(HELM):
	GOBIN=$(abspath bin) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

## demo: run one change end to end against gitlabfake, on a temporary SQLite file (or PostgreSQL at DATABASE_URL)
demo:
	DATABASE_URL='$(DATABASE_URL)' $(GO) run ./cmd/changebot demo

## sqlc: regenerate each engine's queries (store/<engine>/internal/dbsqlc) from its .sql files and migrations
# Generated files are removed first, so a file whose queries are gone does not linger.
sqlc:
	for d in $(SQLC_ENGINES); do rm -f $$d/internal/dbsqlc/*_gen.go; (cd $$d && $(SQLC) generate); done

## sqlc-check: fail when `make sqlc` would change the committed generated code
sqlc-check: sqlc
	@if ! git diff --exit-code -- $(addsuffix /internal/dbsqlc,$(SQLC_ENGINES)) || \
		[ -n "$$(git ls-files --others --exclude-standard -- $(addsuffix /internal/dbsqlc,$(SQLC_ENGINES)))" ]; then \
		git ls-files --others --exclude-standard -- $(addsuffix /internal/dbsqlc,$(SQLC_ENGINES)); \
		echo "FAIL: the generated queries above differ from what sqlc generates from the .sql files; run make sqlc and commit the result" >&2; \
		exit 1; \
	fi
	@echo "generated queries match their .sql files"

## lint: golangci-lint with .golangci.yml
lint:
	$(GOLANGCI_LINT) run --allow-serial-runners ./...

## bench: benchmarks, $(BENCHCOUNT) runs each, summarised by benchstat
bench:
	CHANGEBOT_BENCH_RATE=$${CHANGEBOT_BENCH_RATE:-$$(scripts/pgbench.sh | awk '/tps =/{t=$$3} END{printf "%d", t/2}')} \
		CHANGEBOT_BENCH_WAITING=$${CHANGEBOT_BENCH_WAITING:-1000} \
		CHANGEBOT_BENCH_QUEUE_K=$${CHANGEBOT_BENCH_QUEUE_K:-20} CHANGEBOT_BENCH_BURST_SMALL=1 \
		$(GO) test -run='^$$' -bench=. -benchmem -count=$(BENCHCOUNT) -timeout 60m ./... | tee bench.txt
	$(BENCHSTAT) bench.txt

## bench-queue: the merge queue, K = 20 and 200 changes at once on gitlabfake (ff) and githubfake (strict checks), and the submit bursts (1,000 and 10,000), once each (BENCHMARKS.md)
bench-queue:
	$(GO) test ./bot -run '^$$' -bench '^Benchmark(MergeQueue|BurstSubmits)$$' -benchtime 1x -timeout 60m -v | grep -E '^Benchmark|first submit|answers'

## bench-waiting: 1,000 and 10,000 waiting changes, alone on a scratch database (scripts/waiting-bench.sh; BENCHMARKS.md)
bench-waiting:
	scripts/waiting-bench.sh

## bench-intake: the intake next to pgbench in one run (scripts/intake-bench.sh; BENCHMARKS.md)
bench-intake:
	scripts/intake-bench.sh

## pgbench: the PostgreSQL reference of BENCHMARKS.md (scratch database bench, never test)
pgbench:
	scripts/pgbench.sh

## chaos: long randomised fault-injection run (package chaos); PLATFORM=github runs it on githubfake, N changes, METHOD=ff through the merge queue
chaos:
	$(GO) test ./chaos -run TestChaos -chaos.n=$(call chaos_arg,N,$(CHAOS_N)) -chaos.platform=$(call chaos_arg,PLATFORM,$(CHAOS_PLATFORM)) -chaos.merge_method=$(call chaos_arg,METHOD,$(CHAOS_METHOD)) -timeout 30m

## db-up: start the local PostgreSQL cluster unless it already answers
db-up:
	@if pg_isready -q -h 127.0.0.1 -p 5432; then \
		echo "PostgreSQL is up"; \
	else \
		pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start; \
		for i in $$(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done; \
		pg_isready -h 127.0.0.1 -p 5432; \
	fi

clean:
	rm -rf bin bench.txt
