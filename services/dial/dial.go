// Package dial makes gRPC client connections to the suite's services, over
// TCP, a unix socket or an in-process listener, with the same interceptors.
package dial

import (
	"context"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/codeexec/codeexec/services/requestid"
	"github.com/codeexec/codeexec/services/tracing"
)

// Dialer opens a raw connection; it stands in for the network when services
// run in one process.
type Dialer func(ctx context.Context, addr string) (net.Conn, error)

// Target normalises an address for grpc.NewClient: "unix:/path" and
// "/path" become unix sockets, "host:port" stays TCP.
func Target(addr string) (string, error) {
	switch {
	case addr == "":
		return "", fmt.Errorf("empty address: want host:port or unix:/path")
	case strings.HasPrefix(addr, "unix:"), strings.HasPrefix(addr, "dns:"), strings.HasPrefix(addr, "passthrough:"):
		return addr, nil
	case strings.HasPrefix(addr, "/"):
		return "unix:" + addr, nil
	default:
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", fmt.Errorf("bad address %q: want host:port or unix:/path: %w", addr, err)
		}
		return "passthrough:///" + addr, nil
	}
}

// New connects to addr. With a non-nil dialer the connection is made by it
// (for in-process wiring) and addr is only a name.
func New(addr string, dialer Dialer, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	target := "passthrough:///" + addr
	if dialer == nil {
		var err error
		if target, err = Target(addr); err != nil {
			return nil, err
		}
	}
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(requestid.UnaryClientInterceptor),
		grpc.WithChainStreamInterceptor(requestid.StreamClientInterceptor),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
	}
	if dialer != nil {
		base = append(base, grpc.WithContextDialer(dialer))
	}
	base = append(base, tracing.DialOptions()...)
	return grpc.NewClient(target, append(base, opts...)...)
}

// MaxMessageBytes bounds one gRPC message in either direction. Tool results
// and memory values can be large; output is streamed in small chunks.
const MaxMessageBytes = 64 << 20
