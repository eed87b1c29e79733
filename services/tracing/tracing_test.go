package tracing_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"

	"github.com/codeexec/codeexec/services/dial"
	"github.com/codeexec/codeexec/services/grpcserver"
	"github.com/codeexec/codeexec/services/tracing"
)

// TestSpansCrossGRPC: with tracing installed, a call made inside a span
// produces client and server spans of the same trace. Before Install the
// package adds nothing to servers and clients: the zero-cost case.
func TestSpansCrossGRPC(t *testing.T) {
	if tracing.Enabled() || len(tracing.ServerOptions()) != 0 || len(tracing.DialOptions()) != 0 {
		t.Fatal("tracing is on, or adds gRPC options, before Install")
	}
	exp := keepSpans{tracetest.NewInMemoryExporter()}
	shutdown := tracing.Install(exp, "test")
	if len(tracing.ServerOptions()) != 1 || len(tracing.DialOptions()) != 1 {
		t.Fatal("after Install, the gRPC options do not add the stats handlers")
	}
	srv := grpcserver.New(slog.New(slog.DiscardHandler), nil)
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.GRPC.Serve(lis) }()
	t.Cleanup(srv.GRPC.Stop)
	conn, err := dial.New("bufconn", func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	ctx, span := otel.Tracer("test").Start(t.Context(), "parent")
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	span.End()
	// The server's span ends after the client has its answer, so it can
	// still be open here: flush until it is exported (or 10 s pass), and
	// only then shut down, which drops spans that end after it.
	trace := span.SpanContext().TraceID()
	tp := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	kinds := map[string]int{}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err := tp.ForceFlush(t.Context()); err != nil {
			t.Fatal(err)
		}
		clear(kinds)
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID() == trace {
				kinds[s.SpanKind.String()]++
			}
		}
		if kinds["server"] > 0 || time.Now().After(deadline) {
			break
		}
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if kinds["client"] != 1 || kinds["server"] != 1 {
		t.Errorf("spans of the call's trace by kind: %v; want one client and one server span", kinds)
	}
}

// keepSpans keeps the exported spans past Shutdown, which flushes them.
type keepSpans struct{ *tracetest.InMemoryExporter }

func (keepSpans) Shutdown(context.Context) error { return nil }
