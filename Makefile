# talkops — common tasks. `make test` is what CI runs (through .ci/run).
GO        ?= go
PKGS      ?= ./...
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X github.com/talkops/talkops/internal/version.version=$(VERSION) -X github.com/talkops/talkops/internal/version.commit=$(COMMIT)
GOLANGCI  ?= github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
GORELEASER ?= github.com/goreleaser/goreleaser/v2@v2.16.0

.PHONY: build install test test-race test-faults lint fmt vet tidy bench pr docker docker-ci release-snapshot actionlint proto

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/talkops ./cmd/talkops

install:
	CGO_ENABLED=0 $(GO) install -trimpath -ldflags '$(LDFLAGS)' ./cmd/talkops

test:
	$(GO) test -count=1 -shuffle=on $(PKGS)

test-race:
	$(GO) test -count=1 -race $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

lint: vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet -tags talkops_testprovider ./cmd/talkops ./faulttest
	$(GO) run $(GOLANGCI) run $(PKGS)
	$(GO) run $(GOLANGCI) run --build-tags talkops_testprovider ./cmd/talkops

# proto regenerates the Modal gRPC stubs (needs protoc: apt-get install protobuf-compiler).
proto:
	sh providers/modal/internal/modalpb/gen.sh

tidy:
	$(GO) mod tidy

test-faults:
	$(GO) test -count=1 -v -run 'Matrix|Canary|Load' ./faulttest/

docker:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t talkops:$(VERSION) .
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --build-arg RUN_AS=talkops -t talkops:$(VERSION)-nonroot .

docker-ci:
	bash .ci/image.sh

release-snapshot:
	$(GO) run $(GORELEASER) release --snapshot --clean --skip=docker,publish

actionlint:
	$(GO) tool actionlint .github/workflows/*.yml examples/github/*.yml internal/actiontest/testdata/*.yml
	shellcheck .ci/run .ci/*.sh .github/action/*.sh bench/*.sh
	for f in .github/action/*.js; do node --check "$$f" || exit 1; done

bench:
	$(GO) test -run=NONE -bench=. -benchmem $(PKGS)

pr: tidy fmt lint test
