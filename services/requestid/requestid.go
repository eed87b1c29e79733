// Package requestid carries a request ID through contexts and across gRPC
// hops, so that one MCP call can be followed through every service's logs.
package requestid

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/codeexec/codeexec/services/randomid"
)

// MetadataKey is the gRPC metadata key that carries the request ID.
const MetadataKey = "x-request-id"

type ctxKey struct{}

// New returns a fresh random request ID.
func New() string {
	return randomid.Hex(8)
}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// From returns the request ID in ctx, or "".
func From(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// fromIncoming takes the ID from incoming metadata, or makes one.
func fromIncoming(ctx context.Context) context.Context {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(MetadataKey); len(v) > 0 && v[0] != "" && len(v[0]) <= 128 {
			return With(ctx, v[0])
		}
	}
	return With(ctx, New())
}

func toOutgoing(ctx context.Context) context.Context {
	if id := From(ctx); id != "" {
		return metadata.AppendToOutgoingContext(ctx, MetadataKey, id)
	}
	return ctx
}

// UnaryServerInterceptor puts the caller's request ID (or a new one) into
// the handler's context.
func UnaryServerInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(fromIncoming(ctx), req)
}

// StreamServerInterceptor is UnaryServerInterceptor for streams.
func StreamServerInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &wrappedStream{ServerStream: ss, ctx: fromIncoming(ss.Context())})
}

// wrappedStream is grpc-go's way to change a stream's context: Context
// returns ctx.
type wrappedStream struct {
	grpc.ServerStream
	ctx context.Context //nolint:containedctx // the stream's context, as grpc.ServerStream.Context returns it
}

func (w *wrappedStream) Context() context.Context { return w.ctx }

// UnaryClientInterceptor sends the context's request ID as metadata.
func UnaryClientInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(toOutgoing(ctx), method, req, reply, cc, opts...)
}

// StreamClientInterceptor sends the context's request ID as metadata.
func StreamClientInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(toOutgoing(ctx), desc, cc, method, opts...)
}
