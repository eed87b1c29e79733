package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/grpctls"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/requestid"
	"github.com/codeexec/codeexec/services/tracing"
)

// commonSettings are what every target's process has: logs and traces,
// and alone, the TLS files of gRPC between services and (a gRPC target)
// the metrics address.
type commonSettings struct {
	logLevel  string
	logFormat string
	metrics   string
	otlp      string
	tls       grpctls.Config
}

// bindCommon binds them; metrics, when not empty, is the default of a gRPC
// target's --metrics.
func bindCommon(fs *flagenv.Set, c *commonSettings, alone bool, metrics string) {
	fs.String(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error", "MCP_BRIDGE_LOG_LEVEL", "CODEEXEC_LOG_LEVEL")
	fs.String(&c.logFormat, "log-format", "text", "log format: text or json", "CODEEXEC_LOG_FORMAT")
	fs.String(&c.otlp, "otlp-endpoint", "", "export OpenTelemetry traces to this OTLP/gRPC URL, e.g. http://collector:4317; empty exports none", "CODEEXEC_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if !alone {
		return // in one process the targets talk in memory
	}
	if metrics != "" {
		fs.String(&c.metrics, "metrics", metrics, "serve Prometheus /metrics on this address; empty disables it", "CODEEXEC_METRICS_ADDR")
	}
	cli.BindGRPCTLS(fs, &c.tls)
}

// logger builds the process logger. Logs go to stderr: stdout may carry MCP.
func (c *commonSettings) logger(stderr io.Writer, service string) (*slog.Logger, error) {
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
	return slog.New(requestid.NewLogHandler(h)).With("service", service), nil
}

// stateDirDefault resolves MCP_BRIDGE_STATE_DIR's default, ~/MCPs.
func stateDirDefault(getenv func(string) string) string {
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, "MCPs")
	}
	return "MCPs"
}

// startTracing exports traces when --otlp-endpoint is set; the returned
// function flushes them at exit.
func (c *commonSettings) startTracing(ctx context.Context, service string, logger *slog.Logger) (func(), error) {
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
