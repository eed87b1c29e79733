package main

import (
	"context"
	"os"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/process"
	"github.com/codeexec/codeexec/discoveryd"
	catalogv1 "github.com/codeexec/codeexec/proto/gen/codeexec/catalog/v1"
	"github.com/codeexec/codeexec/services/flagenv"
)

// discoverydUnit is discoveryd's settings.
type discoverydUnit struct {
	shortCalls
	cfg    discoveryd.Config
	memory string // alone: memoryd's address, for the tool catalogue
}

func (u *discoverydUnit) bind(fs *flagenv.Set, e cli.Env, alone bool) {
	bindDiscovery(fs, &u.cfg, e.Getenv)
	if alone {
		fs.String(&u.memory, "memory-addr", "", "memoryd address, where the tool catalogue is kept; empty: none, so a search starts every server not listed yet", "CODEEXEC_MEMORYD_ADDR")
	}
}

func (u *discoverydUnit) start(_ context.Context, p *process.Process) error {
	u.cfg.Registerer = p.Registry
	mem, err := p.Dial(u.memory, "--memory-addr")
	if err != nil {
		return err
	}
	if mem != nil {
		u.cfg.Catalog = catalogv1.NewCatalogServiceClient(mem)
	}
	return p.Register(discoveryd.New(u.cfg, p.ServiceLogger("discoveryd")))
}

// bindDiscovery binds discoveryd's settings. The config sources are found
// from the home and working directories, as upstream finds them.
func bindDiscovery(fs *flagenv.Set, c *discoveryd.Config, getenv func(string) string) {
	c.Home = getenv("HOME")
	c.Cwd, _ = os.Getwd()
	c.Executable, _ = os.Executable()
	c.Getenv = getenv
	fs.Path(&c.ServersConfig, "servers-config", "extra JSON or TOML file of mcpServers, loaded after every other source", "MCP_SERVERS_CONFIG")
	fs.Bool(&c.AllowSelfServer, "allow-self-server", false, "keep server configs that would launch codeexec itself", "MCP_BRIDGE_ALLOW_SELF_SERVER")
	fs.Duration(&c.CallTimeout, "tool-timeout", discoveryd.DefaultCallTimeout, "timeout of one upstream MCP tool call", "CODEEXEC_TOOL_TIMEOUT")
	fs.Duration(&c.SearchIndexWait, "search-index-wait", discoveryd.DefaultSearchIndexWait, "how long a search waits for servers that have not listed their tools yet", "CODEEXEC_SEARCH_INDEX_WAIT")
	fs.Strings(&c.Approve, "approve", "tools whose calls a person must approve, asked through the client: SERVER.TOOL (globs * ? [...]) or destructive (every tool not annotated read-only, or annotated destructive)", "CODEEXEC_APPROVE")
	fs.Int(&c.ToolCallsPerMinute, "tool-calls-per-minute", 0, "most calls one tenant makes to one tool per minute; 0 means no cap", "CODEEXEC_TOOL_CALLS_PER_MINUTE")
	fs.String(&c.SearchModel, "search-model", "", "absolute path of the search model's directory (scripts/search-model.sh installs it); empty: "+discoveryd.DefaultSearchModelPath()+"; off: rank by words only", "CODEEXEC_SEARCH_MODEL")
	fs.Duration(&c.StartTimeout, "server-start-timeout", discoveryd.DefaultStartTimeout, "timeout for starting an upstream MCP server", "CODEEXEC_SERVER_START_TIMEOUT")
}
