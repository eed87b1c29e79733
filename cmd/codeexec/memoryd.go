package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/grpctls"
)

// runMemoryd runs MemoryService and ToolService alone, takes a backup, or
// copies a database.
func runMemoryd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "backup" {
		return runMemorydBackup(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "copy" {
		return runMemorydCopy(ctx, args[1:], getenv, stdout, stderr)
	}
	fs := flagenv.New("memoryd", getenv)
	var (
		common commonSettings
		st     stores
		listen string
	)
	bindCommon(fs, &common, "127.0.0.1:9104")
	bindStores(fs, &st, getenv)
	fs.String(&listen, "listen", "127.0.0.1:9004", "gRPC address: host:port or unix:/path", "CODEEXEC_MEMORYD_LISTEN")
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if err := fs.Err(); err != nil {
		return err
	}
	svcRT, err := common.startService(ctx, "memoryd", stderr)
	if err != nil {
		return err
	}
	defer svcRT.stopTracing()
	cfg := st.memoryConfig()
	cfg.Registerer = svcRT.srv.Registry
	svc, err := memoryd.New(cfg, svcRT.logger)
	if err != nil {
		return err
	}
	defer func() { _ = svc.Close() }()
	svc.Register(svcRT.srv.GRPC)
	return svcRT.serve(ctx, listen, common.metrics, defaultGRPCGrace)
}

// runMemorydBackup copies a memoryd's database to a file: a remote one
// with --memory, else the local state dir's, while every codeexec that
// shares it keeps running.
func runMemorydBackup(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flagenv.New("memoryd backup", getenv)
	var (
		addr string
		tlsc grpctls.Config
		st   stores
	)
	fs.String(&addr, "memory", "", "a memoryd's address (host:port or unix:/path); empty backs up the local database", "CODEEXEC_MEMORYD_ADDR")
	bindStateDir(fs, &st, getenv)
	bindGRPCTLS(fs, &tlsc)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if err := fs.Err(); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: codeexec memoryd backup [--memory ADDR | --state-dir DIR | --db FILE | --store postgres://…] FILE")
		return errUsage
	}
	var conn *grpc.ClientConn
	if addr != "" {
		c, err := dialService(addr, tlsc)
		if err != nil {
			return err
		}
		defer c.Close()
		conn = c
	} else {
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		c, closeLocal, err := st.localMemory(ctx, logger)
		if err != nil {
			return err
		}
		defer closeLocal()
		conn = c
	}
	n, err := memoryd.BackupToFile(ctx, memoryv1.NewMemoryServiceClient(conn), fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backed up %d bytes to %s\n", n, fs.Arg(0))
	return nil
}
