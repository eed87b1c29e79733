# Test tiers and the usual commands. Each target is one command; the
# README's table names them.
.PHONY: build run fast bare test e2e ci lint

build:            ## bin/codeexec
	go build -o bin/codeexec ./cmd/codeexec

run:              ## build and serve MCP on stdio
	./scripts/run.sh

fast:             ## unit tests: no sandboxes, PostgreSQL, containers or npm
	go test -short ./...

bare:             ## the fast tier with bwrap, Node.js, PostgreSQL and docker hidden
	bash scripts/bare.sh go test -short ./...

test:             ## every Go test, end to end included, with the race detector
	go test -race -shuffle=on -timeout 20m ./...

e2e:              ## the end-to-end tests alone: the real binary, real sandboxes and MCP servers
	go test -race -timeout 20m ./cmd/codeexec/e2e/...

lint:
	golangci-lint run ./...

ci:               ## everything CI runs (scripts/test.sh)
	bash scripts/test.sh
