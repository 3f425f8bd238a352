# celos — the two commands that matter: `make run` and `make test`.
#
# What a user may set, from the environment or on the command line
# (`PORT=9090 make run`, `make run PORT=9090`): GO, PKGS, VERSION, PORT,
# VAR, FUZZTIME. BIN and LDFLAGS only on the command line (`make build
# BIN=/tmp/celos`): an environment often has a BIN directory or a C
# toolchain's LDFLAGS that are not ours.
GO       ?= go
BIN      := bin/celos
# The packages test-go, bench and lint run (`PKGS=./scheduler/... make test-go`).
PKGS     ?= ./...
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS  := -X github.com/celos-go/celos/cmd/celos/cmd.Version=$(VERSION)
# The demo's server port and state directory (a directory named var:
# the demo's paths are var/...).
PORT     ?= 8080
VAR      ?= var

.PHONY: all build run test test-go deps bench bench-scale lint fuzz soak clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/celos

# The main job on the bundled example: compile testdata/demo and run the
# scheduler on it with the local command service, state under ./var.
run: build
	./scripts/run-demo.sh $(BIN) $(PORT) $(VAR)

# Installs what the tests need (Debian packages, Maven artifacts, the cue
# CLI) when missing, then runs every test. See docs/testing.md.
test: deps test-go

deps:
	./scripts/test-deps.sh

test-go:
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 20m $(PKGS)

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 1x -count 1 $(PKGS)

# Every Go fuzz target for FUZZTIME each; CI runs it after the tests.
FUZZTIME ?= 10s
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

# Load and soak (not part of test): wrk against /workflow-slots and /ui with
# 1,000 workflows, 10,000 steps on a fake clock with pruning; loopback only,
# bounded in time (about 10 minutes). See docs/reliability.md.
soak:
	./scripts/soak.sh

# The growth table of issue 18 (not part of test): fresh 7-day fill, first
# step after a restart, first GET /ui, steady step for 100 / 1,000 / 10,000
# hourly workflows, printed as a table (BENCH_SCALE_SIZES to choose; the
# 10,000 case keeps its state on /dev/shm). See docs/benchmarks.md.
bench-scale:
	./scripts/bench-scale.sh

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet $(PKGS)

# Removes VAR only if it is named var (it may come from the environment).
clean:
	rm -rf bin
	@case "$(notdir $(VAR))" in var) rm -rf "$(VAR)";; *) echo "make clean: VAR=$(VAR) is not the demo's state directory (named var): left alone";; esac
