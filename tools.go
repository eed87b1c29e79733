//go:build tools

// Package tools pins the code generators that buf runs, so that their
// versions live in go.mod with everything else.
package tools

import (
	_ "google.golang.org/grpc/cmd/protoc-gen-go-grpc"
	_ "google.golang.org/protobuf/cmd/protoc-gen-go"
)
