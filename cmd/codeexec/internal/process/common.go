package process

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/grpctls"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/requestid"
	"github.com/codeexec/codeexec/services/tracing"
)

// Common are the settings every target's process has: logs and traces,
// and alone, the TLS files of gRPC between services and (a gRPC target)
// the metrics address.
type Common struct {
	logLevel  string
	logFormat string
	// Metrics is where a gRPC target alone serves /metrics.
	Metrics string
	otlp    string
	tls     grpctls.Config
}

// BindCommon binds them; metrics, when not empty, is the default of a
// gRPC target's --metrics.
func BindCommon(fs *flagenv.Set, c *Common, alone bool, metrics string) {
	fs.String(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error", "MCP_BRIDGE_LOG_LEVEL", "CODEEXEC_LOG_LEVEL")
	fs.String(&c.logFormat, "log-format", "text", "log format: text or json", "CODEEXEC_LOG_FORMAT")
	fs.String(&c.otlp, "otlp-endpoint", "", "export OpenTelemetry traces to this OTLP/gRPC URL, e.g. http://collector:4317; empty exports none", "CODEEXEC_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if !alone {
		return // in one process the targets talk in memory
	}
	if metrics != "" {
		fs.String(&c.Metrics, "metrics", metrics, "serve Prometheus /metrics on this address; empty disables it", "CODEEXEC_METRICS_ADDR")
	}
	cli.BindGRPCTLS(fs, &c.tls)
}

// logger builds the process logger. Logs go to stderr: stdout may carry MCP.
func (c *Common) logger(stderr io.Writer) (*slog.Logger, error) {
	var level slog.Level
	switch strings.ToLower(c.logLevel) {
	case "debug":
		level = slog.LevelDebug
	case "info", "":
		level = slog.LevelInfo
	case "warn", "warning":
		level = slog.LevelWarn
	case "error", "critical":
		level = slog.LevelError
	default:
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", c.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch c.logFormat {
	case "json":
		h = slog.NewJSONHandler(stderr, opts)
	case "text", "":
		h = slog.NewTextHandler(stderr, opts)
	default:
		return nil, fmt.Errorf("log format %q: want text or json", c.logFormat)
	}
	// Lines logged with a call's context carry its request ID.
	return slog.New(requestid.NewLogHandler(h)), nil
}

// startTracing exports traces when --otlp-endpoint is set; the returned
// function flushes them at exit.
func (c *Common) startTracing(ctx context.Context, service string, logger *slog.Logger) (func(), error) {
	shutdown, err := tracing.Setup(ctx, c.otlp, service)
	if err != nil {
		return nil, err
	}
	if c.otlp != "" {
		logger.Info("exporting traces over OTLP", "otlp.endpoint", c.otlp)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			logger.Warn("flushing traces", logkeys.Error, err)
		}
	}, nil
}
