package main

import (
	"errors"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/dial"
	"google.golang.org/grpc"
)

// remoteDeps connects sandboxd to remote discoveryd and memoryd. An empty
// address leaves that dependency out.
func remoteDeps(discovery, memory string, opts ...grpc.DialOption) (sandboxd.Deps, func(), error) {
	var (
		deps  sandboxd.Deps
		conns []*grpc.ClientConn
	)
	closeAll := func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}
	if discovery != "" {
		c, err := dial.New(discovery, nil, opts...)
		if err != nil {
			return deps, closeAll, errors.Join(err, errors.New("bad --discovery address"))
		}
		conns = append(conns, c)
		deps.Discovery = discoveryv1.NewDiscoveryServiceClient(c)
	}
	if memory != "" {
		c, err := dial.New(memory, nil, opts...)
		if err != nil {
			closeAll()
			return deps, func() {}, errors.Join(err, errors.New("bad --memory-addr address"))
		}
		conns = append(conns, c)
		deps.Memory = memoryv1.NewMemoryServiceClient(c)
		deps.Tools = memoryv1.NewToolServiceClient(c)
	}
	return deps, closeAll, nil
}
