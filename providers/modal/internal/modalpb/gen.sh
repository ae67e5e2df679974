#!/bin/sh
# gen.sh [OUTDIR] regenerates the Go code of this directory's .proto files into OUTDIR
# (default: this directory) with protoc and the protoc-gen-go / protoc-gen-go-grpc
# versions that go.mod pins as tools. `make proto` runs it; TestGeneratedCodeIsFresh runs
# it into a temporary directory and compares.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
go build -o "$bin/protoc-gen-go-grpc" google.golang.org/grpc/cmd/protoc-gen-go-grpc
cd "$here"
protoc --proto_path=. \
	--plugin=protoc-gen-go="$bin/protoc-gen-go" --plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc" \
	--go_out="$out" --go_opt=paths=source_relative \
	--go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
	api.proto task_command_router.proto
