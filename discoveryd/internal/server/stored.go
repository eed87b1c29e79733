package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/discoveryd/internal/config"
	"github.com/codeexec/codeexec/discoveryd/internal/upstream"
	catalogv1 "github.com/codeexec/codeexec/proto/gen/codeexec/catalog/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

// The catalogue (memoryd's CatalogService) keeps what each server listed,
// so that a search can answer for servers this process never started.

// catalogTimeout bounds one call to the catalogue: it is a cache, and a
// slow one must not hold a search up for long.
const catalogTimeout = 3 * time.Second

// storedList is a server's tool list from the catalogue.
type storedList struct {
	key   string // the config entry's key it was found under
	tools []mcp.Tool
	hints upstream.CacheHints
}

// fresh reports whether the list may still be used at now: a server's
// ttlMs bounds its age, and no ttlMs leaves it fresh until the server is
// listed again.
func (l storedList) fresh(now time.Time) bool {
	return l.hints.TTLMs == nil || now.Before(l.hints.ListedAt.Add(time.Duration(*l.hints.TTLMs)*time.Millisecond))
}

// configKey identifies a server's config entry: its transport, command,
// arguments, working directory and URL, and the names of its environment
// variables and headers. A private key adds their values, for a list the
// server said was private (cacheScope), which may depend on credentials.
func configKey(cfg config.Server, private bool) string {
	k := struct {
		Transport string            `json:"transport"`
		Command   string            `json:"command"`
		Cwd       string            `json:"cwd"`
		URL       string            `json:"url"`
		Args      []string          `json:"args"`
		Env       []string          `json:"env"`
		Headers   []string          `json:"headers"`
		Values    map[string]string `json:"values,omitempty"`
	}{Transport: string(cfg.Transport), Command: cfg.Command, Cwd: cfg.Cwd, URL: cfg.URL, Args: cfg.Args,
		Env: slices.Sorted(maps.Keys(cfg.Env)), Headers: slices.Sorted(maps.Keys(cfg.Headers))}
	if private {
		k.Values = map[string]string{}
		for n, v := range cfg.Env {
			k.Values["env:"+n] = v
		}
		for n, v := range cfg.Headers {
			k.Values["header:"+n] = v
		}
	}
	b, _ := json.Marshal(k) // strings and slices only: cannot fail
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// fromCatalog asks the catalogue once for each server in names that was
// never listed here and not asked about since its config entry changed,
// and keeps what it finds in s.stored.
func (s *Server) fromCatalog(ctx context.Context, names []string) {
	if s.opts.Catalog == nil {
		return
	}
	var keys []string
	want := map[string][]string{} // key → servers
	s.storedMu.Lock()
	for _, n := range names {
		if _, listed := s.mgr.CachedTools(n); listed {
			continue
		}
		cfg, err := s.mgr.Config(n)
		if err != nil {
			continue
		}
		pub, priv := configKey(cfg, false), configKey(cfg, true)
		if s.asked[n] == pub {
			continue
		}
		s.asked[n] = pub
		for _, k := range []string{priv, pub} {
			if want[k] == nil {
				keys = append(keys, k)
			}
			want[k] = append(want[k], n)
		}
	}
	s.storedMu.Unlock()
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), catalogTimeout)
	defer cancel()
	resp, err := s.opts.Catalog.GetCatalogs(ctx, &catalogv1.GetCatalogsRequest{Keys: keys})
	if err != nil {
		s.logger.WarnContext(ctx, "cannot read the tool catalogue; servers will be started to list their tools", logkeys.Error, err)
		s.storedMu.Lock()
		for _, n := range names {
			delete(s.asked, n) // ask again next time
		}
		s.storedMu.Unlock()
		return
	}
	s.storedMu.Lock()
	defer s.storedMu.Unlock()
	for _, c := range resp.GetCatalogs() {
		var tools []mcp.Tool
		if err := json.Unmarshal([]byte(c.GetToolsJson()), &tools); err != nil {
			s.logger.WarnContext(ctx, "unreadable tool catalogue entry", "key", c.GetKey(), logkeys.Error, err)
			continue
		}
		l := storedList{key: c.GetKey(), tools: tools, hints: upstream.CacheHints{TTLMs: c.TtlMs, Scope: c.GetCacheScope(), ListedAt: c.GetListedAt().AsTime()}}
		for _, n := range want[c.GetKey()] {
			// A public entry under the public key, or a private one under
			// the private key: a private list is never taken from an
			// entry whose credentials may differ.
			old, ok := s.stored[n]
			if cfg, err := s.mgr.Config(n); err != nil || l.hints.Scope == "private" && configKey(cfg, true) != c.GetKey() {
				continue
			}
			if !ok || old.hints.ListedAt.Before(l.hints.ListedAt) {
				s.stored[n] = l
			}
		}
	}
	s.indexDirty.Store(true)
}

// knownTools returns a server's tools as this process listed them, else
// as the catalogue has them while they are fresh.
func (s *Server) knownTools(name string) ([]mcp.Tool, bool) {
	if tools, ok := s.mgr.CachedTools(name); ok {
		return tools, true
	}
	s.storedMu.Lock()
	defer s.storedMu.Unlock()
	l, ok := s.stored[name]
	if !ok || !l.fresh(time.Now()) {
		return nil, false
	}
	return l.tools, true
}

// toCatalog stores a server's new tool list in the catalogue, in the
// background: a listing is never slowed by the catalogue.
func (s *Server) toCatalog(name string) {
	if s.opts.Catalog == nil {
		return
	}
	tools, hints, ok := s.mgr.CachedList(name)
	cfg, err := s.mgr.Config(name)
	if !ok || err != nil {
		return
	}
	b, err := json.Marshal(tools)
	if err != nil {
		s.logger.Warn("cannot encode tools for the catalogue", logkeys.MCPServer, name, logkeys.Error, err)
		return
	}
	c := &catalogv1.Catalog{Key: configKey(cfg, hints.Scope == "private"), Server: name, ToolsJson: string(b),
		ListedAt: timestamppb.New(hints.ListedAt), TtlMs: hints.TTLMs, CacheScope: hints.Scope}
	s.catalogWrites.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
		defer cancel()
		if _, err := s.opts.Catalog.PutCatalog(ctx, &catalogv1.PutCatalogRequest{Catalog: c}); err != nil {
			s.logger.Warn("cannot store tools in the catalogue", logkeys.MCPServer, name, logkeys.Error, err)
		}
	})
}
