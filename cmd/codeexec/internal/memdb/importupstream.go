package memdb

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/logkeys"
)

// ImportUpstreamCommand copies an upstream state dir
// (user_tools/memory/*.json and user_tools/user_tools.py) into memoryd:
// into a running one with --memory, else straight into the local
// database.
type ImportUpstreamCommand struct {
	db     database
	tenant string
}

// Bind binds the flags of `codeexec import-upstream`.
func (c *ImportUpstreamCommand) Bind(fs *flagenv.Set, e cli.Env) {
	c.db.bind(fs, e.Getenv, "a memoryd's address; empty uses the local database, shared with any codeexec using it")
	BindMemory(fs, &c.db.st)
	fs.String(&c.tenant, "tenant", "default", "tenant to import into", "CODEEXEC_TENANT")
}

// TakesArgs says that import-upstream takes its DIR after the flags.
func (c *ImportUpstreamCommand) TakesArgs() {}

// Run runs `codeexec import-upstream` with the arguments after the flags.
func (c *ImportUpstreamCommand) Run(ctx context.Context, args []string, e cli.Env) error {
	if len(args) > 1 {
		fmt.Fprintln(e.Stderr, "usage: codeexec import-upstream [flags] [DIR]   (DIR defaults to ~/MCPs)")
		return cli.ErrUsage
	}
	dir := defaultStateDir
	if len(args) == 1 {
		dir = args[0]
	}
	dir, err := flagenv.AbsPath(dir, e.Getenv("HOME"), "upstream state dir", "pass the directory (the one holding user_tools/) after the flags")
	if err != nil {
		return err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a directory: pass upstream's state dir (the one holding user_tools/)", dir)
	}

	// The database's directory is checked before anything is opened, so
	// that a mistyped one fails having created nothing.
	db, existed, err := c.db.fileInExistingDir()
	if err != nil {
		return err
	}
	conn, closeConn, err := c.db.connect(ctx, e)
	if err != nil {
		return err
	}
	defer closeConn()
	rep, err := memoryd.ImportUpstream(ctx, memoryv1.NewMemoryServiceClient(conn), memoryv1.NewToolServiceClient(conn), dir, c.tenant)
	fmt.Fprint(e.Stdout, rep.String())
	if db != "" && !existed {
		fmt.Fprintf(e.Stdout, "the memory database %s is new: there was none before this import\n", db)
	}
	return err
}

// ImportOnFirstStart brings an upstream user's memory and saved
// tools (dir/user_tools) into the default tenant when this start created
// svc's database, so that code written for upstream finds them from the
// first call without an `import-upstream`. Later starts never import
// again, and a failure only costs the import: it is logged, and serving
// goes on.
func ImportOnFirstStart(ctx context.Context, svc *memoryd.Service, dir string, logger *slog.Logger) {
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
