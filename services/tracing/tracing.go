// Package tracing exports OpenTelemetry traces over OTLP when an endpoint is
// configured, and costs nothing when not: no provider is installed, no gRPC
// stats handler is added, and spans started through otel's global tracer
// are no-ops.
package tracing

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
)

// enabled is set once a provider is installed; the gRPC options read it.
var enabled atomic.Bool

// Enabled reports whether traces are being exported.
func Enabled() bool { return enabled.Load() }

// Setup exports the process's traces to the OTLP/gRPC endpoint, a URL such
// as http://collector:4317 (http means no TLS). An empty endpoint does
// nothing. The returned function flushes and stops the exporter.
func Setup(ctx context.Context, endpoint, service string) (shutdown func(context.Context) error, err error) {
	if endpoint == "" {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(endpoint))
	if err != nil {
		return nil, errors.Join(errors.New("OTLP trace exporter for "+endpoint), err)
	}
	return Install(exp, service), nil
}

// Install makes exp receive the process's spans, batched, and turns on the
// gRPC instrumentation. Tests pass an in-memory exporter.
func Install(exp sdktrace.SpanExporter, service string) (shutdown func(context.Context) error) {
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	enabled.Store(true)
	return tp.Shutdown
}

// ServerOptions instrument a gRPC server when tracing is on.
func ServerOptions() []grpc.ServerOption {
	if !Enabled() {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler())}
}

// DialOptions instrument a gRPC client when tracing is on, so that the
// caller's span continues in the service it calls.
func DialOptions() []grpc.DialOption {
	if !Enabled() {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler())}
}
