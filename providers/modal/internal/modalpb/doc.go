// Package modalpb holds the protobuf messages and gRPC stubs of the part of Modal's API
// that talkops uses, generated from this directory's .proto files by `make proto`
// (gen.sh). Do not edit the *.pb.go files by hand: TestGeneratedCodeIsFresh fails when
// they differ from what the .proto files generate.
package modalpb
