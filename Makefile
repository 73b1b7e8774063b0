# ringchat — build, test and run a token-ring chat server.
GO      ?= go
BIN     := bin
STATICCHECK ?= v0.8.2
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/ringchat/ringchat/internal/buildinfo.Version=$(VERSION)
# Packages' tests may run in parallel; each test uses its own database and ports.
TESTFLAGS ?= -race -count=1 -timeout 15m

.PHONY: all build run status test lint fmt clean db help bench bench-full

all: build

## build: compile ringnode and ringchat into bin/
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ringnode ./cmd/ringnode
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ringchat ./cmd/ringchat

## run: a local 5-node ring (nodes.csv) on the embedded store; Ctrl-C stops it
run: build
	$(BIN)/ringnode cluster --drop --nodes nodes.csv

## galera: a local 3-server MariaDB Galera cluster (scripts/galera.sh up) and a 5-node ring on it, the nodes spread over the servers; Ctrl-C stops the ring, scripts/galera.sh down the cluster
.PHONY: galera
galera: build
	bash scripts/galera.sh up
	RINGCHAT_DB="$$(bash scripts/galera.sh dsn)" $(BIN)/ringnode cluster --drop --nodes nodes.csv

## status: the local ring as the store records it
status: build
	$(BIN)/ringnode status

## chat: the chat client on the ring of make run (NAME=alice NODE=1: a node id of nodes.csv; fails over to the others; without NAME it asks)
NODE ?= 1
NAME ?=
.PHONY: chat
chat: build
	$(BIN)/ringchat --nodes nodes.csv --node $(NODE) $(if $(NAME),--user '$(NAME)')

## test: lint, then every test (MariaDB ones included; the server is started if it is installed)
test: lint
	@bash scripts/mariadb.sh start || echo "make: MariaDB is not running: its tests will skip locally (and fail in CI)" >&2
	$(GO) test $(TESTFLAGS) ./...

## bench: short benchmark (rings of 3 and 5 nodes on MariaDB, 3 s phases; under two minutes): prints the table, files in bin/bench/
bench:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ringnode ./cmd/ringnode
	$(GO) build -o $(BIN)/ringbench ./cmd/ringbench
	@bash scripts/mariadb.sh start >/dev/null || { echo "make: bench needs MariaDB at 127.0.0.1:3306 (make db)" >&2; exit 1; }
	$(BIN)/ringbench all --short --out $(BIN)/bench

## bench-full: the full benchmark (3, 5, 8 and 16 nodes, 15 s phases; about 10 min): docs/bench/ and docs/img/
bench-full:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ringnode ./cmd/ringnode
	$(GO) build -o $(BIN)/ringbench ./cmd/ringbench
	@bash scripts/mariadb.sh start >/dev/null || { echo "make: bench needs MariaDB at 127.0.0.1:3306 (make db)" >&2; exit 1; }
	$(BIN)/ringbench all --out docs/bench --img docs/img

## bench-scale: 10,000 users, a group of 10,000 (1,000 online), 1,000,000 messages of history, a backlog of 100,000 on 5 nodes (SCALE_ARGS=--users ... to size it down); docs/BENCHMARKS.md "Scale"
SCALE_ARGS ?=
.PHONY: bench-scale
bench-scale:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ringnode ./cmd/ringnode
	$(GO) build -o $(BIN)/ringbench ./cmd/ringbench
	@bash scripts/mariadb.sh start >/dev/null || { echo "make: bench needs MariaDB at 127.0.0.1:3306 (make db)" >&2; exit 1; }
	$(BIN)/ringbench scale $(SCALE_ARGS)

## chaos: fault injection on a real ring (DURATION=10m NODES=5 CLIENTS=20 SEED=0 DB=private; NET=1: network faults with nft, as root; NET=lab: on the lab hosts of scripts/netlab.sh, made if missing, left up; ARGS=more ringchaos flags); docs/RELIABILITY.md
DURATION ?= 10m
NODES    ?= 5
CLIENTS  ?= 20
SEED     ?= 0
DB       ?= private
NET      ?=
NETLAB_NAME   ?= rclab
NETLAB_SUBNET ?= 198.18.0
NETLAB_DIR    ?= /tmp/ringchat-netlab-$(NETLAB_NAME)
LABENV := NETLAB_NAME=$(NETLAB_NAME) NETLAB_SUBNET=$(NETLAB_SUBNET) NETLAB_DIR=$(NETLAB_DIR) NETLAB_HOSTS=$(NODES)
.PHONY: chaos
chaos:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ringnode ./cmd/ringnode
	$(GO) build -o $(BIN)/ringchaos ./cmd/ringchaos
	$(if $(filter lab,$(NET)),$(LABENV) bash scripts/netlab.sh up)
	$(BIN)/ringchaos --ringnode $(BIN)/ringnode --duration $(DURATION) --nodes $(NODES) --clients $(CLIENTS) \
		--seed $(SEED) $(if $(filter lab,$(NET)),--db "$$(cat $(NETLAB_DIR)/db.dsn)" --lab $(NETLAB_NAME):$(NETLAB_SUBNET),--db '$(DB)') \
		$(if $(filter 1 yes true lab,$(NET)),--net) $(ARGS)

## adversary: the simulation's adversary (a key holder forging any frame) on many more schedules than make test (ADVERSARY_CHECKS=100000: about 4 minutes here)
ADVERSARY_CHECKS ?= 100000
.PHONY: adversary
adversary:
	RINGSIM_ADVERSARY_CHECKS=$(ADVERSARY_CHECKS) $(GO) test -count=1 -timeout 6h -run 'TestAdversary' -v ./internal/ring/ringsim

## mutation: mutation testing (gremlins v0.6.0) of token, ring, election and wire, each package's mutants against every test under it, simulations included; prints each score (PKG=internal/wire: one package; DIFF=rev: only the lines changed since rev; ring alone takes an hour or more, so not in CI)
PKG ?=
DIFF ?=
.PHONY: mutation
mutation:
	DIFF=$(DIFF) bash scripts/mutation.sh $(PKG)

## lint: gofmt check, go vet and staticcheck (pinned, run with go run)
lint:
	@out="$$(gofmt -l .)"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK) ./...

## fmt: gofmt every Go file
fmt:
	gofmt -w .

## models: install spin and gcc if missing, then model-check the token protocol (models/check.sh: under a minute; make test runs it too)
.PHONY: models models-deep
SPIN_INSTALL = command -v spin >/dev/null && command -v gcc >/dev/null || \
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq spin gcc >/dev/null; }
models:
	@$(SPIN_INSTALL)
	bash models/check.sh

## models-deep: the model check with larger fault budgets and member checks at any time (minutes; docs/ARCHITECTURE.md "Model check")
models-deep:
	@$(SPIN_INSTALL)
	bash models/check.sh --deep

## db: install (if missing) and start MariaDB, open root over TCP for the tests
db:
	bash scripts/mariadb.sh ensure

## clean: remove binaries and the local embedded store
clean:
	rm -rf $(BIN) .ringchat

help:
	@grep -E '^## ' Makefile | sed 's/^## //'
