package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/logkeys"
)

// runImportUpstream copies an upstream state dir (user_tools/memory/*.json
// and user_tools/user_tools.py) into memoryd: into a running one with
// --memory, else straight into the local database.
func runImportUpstream(ctx context.Context, args []string, e env) error {
	fs := flagenv.New("import-upstream", e.getenv)
	var (
		db     memoryDB
		tenant string
	)
	db.bind(fs, e.getenv, "a memoryd's address; empty uses the local database, shared with any codeexec using it")
	bindMemory(fs, &db.st)
	fs.String(&tenant, "tenant", "default", "tenant to import into", "CODEEXEC_TENANT")
	if err := parse(fs, args, e); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(e.stderr, "usage: codeexec import-upstream [flags] [DIR]   (DIR defaults to ~/MCPs)")
		return errUsage
	}
	dir := stateDirDefault(e.getenv)
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a directory: pass upstream's state dir (the one holding user_tools/)", dir)
	}

	conn, closeConn, err := db.connect(ctx, e.stderr)
	if err != nil {
		return err
	}
	defer closeConn()
	rep, err := memoryd.ImportUpstream(ctx, memoryv1.NewMemoryServiceClient(conn), memoryv1.NewToolServiceClient(conn), dir, tenant)
	fmt.Fprint(e.stdout, rep.String())
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
