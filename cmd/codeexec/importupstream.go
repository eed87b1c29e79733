package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/grpctls"
	"github.com/codeexec/codeexec/services/logkeys"
)

// runImportUpstream copies an upstream state dir (user_tools/memory/*.json
// and user_tools/user_tools.py) into memoryd: into a running one with
// --memory, else straight into the local database.
func runImportUpstream(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flagenv.New("import-upstream", getenv)
	var (
		st     stores
		addr   string
		tenant string
		tlsc   grpctls.Config
	)
	bindStores(fs, &st, getenv)
	bindGRPCTLS(fs, &tlsc)
	fs.String(&addr, "memory", "", "a memoryd's address; empty uses the local database, shared with any codeexec using it", "CODEEXEC_MEMORYD_ADDR")
	fs.String(&tenant, "tenant", "default", "tenant to import into", "CODEEXEC_TENANT")
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if err := fs.Err(); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, "usage: codeexec import-upstream [flags] [DIR]   (DIR defaults to ~/MCPs)")
		return errUsage
	}
	dir := stateDirDefault(getenv)
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a directory: pass upstream's state dir (the one holding user_tools/)", dir)
	}

	var (
		mem   memoryv1.MemoryServiceClient
		tools memoryv1.ToolServiceClient
	)
	if addr != "" {
		conn, err := dialService(addr, tlsc)
		if err != nil {
			return err
		}
		defer conn.Close()
		mem, tools = memoryv1.NewMemoryServiceClient(conn), memoryv1.NewToolServiceClient(conn)
	} else {
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		conn, closeLocal, err := st.localMemory(ctx, logger)
		if err != nil {
			return err
		}
		defer closeLocal()
		mem, tools = memoryv1.NewMemoryServiceClient(conn), memoryv1.NewToolServiceClient(conn)
	}
	rep, err := memoryd.ImportUpstream(ctx, mem, tools, dir, tenant)
	fmt.Fprint(stdout, rep.String())
	return err
}

// importUpstreamOnFirstStart brings an upstream user's memory and saved
// tools (dir/user_tools) into the default tenant when this start created
// svc's database, so that code written for upstream finds them from the
// first call without an `import-upstream`. Later starts never import
// again, and a failure only costs the import: it is logged, and serving
// goes on.
func importUpstreamOnFirstStart(ctx context.Context, svc *memoryd.Service, dir string, logger *slog.Logger) {
	if !svc.NewDatabase() || !memoryd.HasUpstreamState(dir) {
		return
	}
	conn, stop, err := serveLocal(ctx, svc, logger)
	if err != nil {
		logger.ErrorContext(ctx, "cannot import upstream state on first start", logkeys.Error, err)
		return
	}
	defer stop()
	_ = memoryd.ImportUpstreamOnFirstStart(ctx, memoryv1.NewMemoryServiceClient(conn), memoryv1.NewToolServiceClient(conn), dir, memoryd.DefaultTenant, logger)
}
