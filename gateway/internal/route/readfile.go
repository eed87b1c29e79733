package route

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// ReadFile implements SandboxServiceClient. A file is read from the
// session store, which every replica reaches, so it goes to the best
// replica and on to the next while replicas are unreachable.
func (b *Balancer) ReadFile(ctx context.Context, in *sandboxv1.ReadFileRequest, opts ...grpc.CallOption) (*sandboxv1.ReadFileResponse, error) {
	var last error
	for _, r := range b.pick() {
		resp, err := r.client.ReadFile(ctx, in, opts...)
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return resp, err
		}
		last = err
	}
	if last == nil {
		return nil, status.Error(codes.Unavailable, "no sandboxd replica is known: check the --sandbox address")
	}
	return nil, status.Errorf(codes.Unavailable, "no sandboxd replica could read the file: %s", fmt.Sprint(status.Convert(last).Message()))
}
