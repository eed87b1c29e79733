package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/time/rate"

	"github.com/codeexec/codeexec/discoveryd/internal/approval"
	"github.com/codeexec/codeexec/discoveryd/internal/upstream"
	"github.com/codeexec/codeexec/services/logkeys"
)

// ApprovalError is a call that a person must approve first, made without
// approval. toStatus sends it as FAILED_PRECONDITION with an
// ApprovalRequired detail.
type ApprovalError struct {
	Server, Tool, Reason string
}

func (e *ApprovalError) Error() string {
	return fmt.Sprintf("a person must approve each call of tool %q of server %q (%s); ask them, then call again with approved set", e.Tool, e.Server, e.Reason)
}

// errRateLimited marks a call over the tenant's calls per tool per minute.
var errRateLimited = errors.New("rate limited")

// approvalRules are the rules that apply to server's tools: the flags',
// then those of the server's config entry.
func (s *Server) approvalRules(server string) []approval.Rule {
	rules := s.opts.Approve
	if cfg, err := s.mgr.Config(server); err == nil && len(cfg.Approve) > 0 {
		rules = append(rules[:len(rules):len(rules)], approval.EntryRules(server, cfg.Source, cfg.Approve)...)
	}
	return rules
}

// approvalOf says why calls of tool need approval, or "".
func (s *Server) approvalOf(server string, tool mcp.Tool) string {
	return approval.Reason(s.approvalRules(server), server, tool)
}

// gate is the check of one CallTool on the tool as the server lists it:
// approval, then the tenant's calls per tool per minute (a refused call
// takes none of them).
func (s *Server) gate(tenant, server string, approved bool) upstream.Gate {
	return func(tool mcp.Tool) error {
		if why := s.approvalOf(server, tool); why != "" && !approved {
			return &ApprovalError{Server: server, Tool: tool.Name, Reason: why}
		}
		return s.perMinute.take(tenantOr(tenant), server, tool.Name)
	}
}

// maxLimiters bounds the limiters kept; past it, those that have filled
// up again (idle for a minute) are dropped.
const maxLimiters = 10000

// toolRates caps each tenant's calls of each tool per minute. The zero
// value with perMinute 0 caps nothing.
type toolRates struct {
	perMinute int
	mu        sync.Mutex
	limiters  map[string]*rate.Limiter
}

// take spends one call of tool, or says when the next one may go.
func (r *toolRates) take(tenant, server, tool string) error {
	if r.perMinute <= 0 {
		return nil
	}
	key := tenant + "\x00" + server + "\x00" + tool
	r.mu.Lock()
	l, ok := r.limiters[key]
	if !ok {
		if r.limiters == nil || len(r.limiters) >= maxLimiters {
			r.prune()
		}
		// A burst of the whole minute's calls, refilled evenly.
		l = rate.NewLimiter(rate.Every(time.Minute/time.Duration(r.perMinute)), r.perMinute)
		r.limiters[key] = l
	}
	r.mu.Unlock()
	res := l.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return fmt.Errorf("%w: this tenant's limit of %d calls per minute to tool %q of server %q is reached (--tool-calls-per-minute); retry in %ds",
			errRateLimited, r.perMinute, tool, server, int(math.Ceil(d.Seconds())))
	}
	return nil
}

// prune drops the limiters that are full again; r.mu is held.
func (r *toolRates) prune() {
	if r.limiters == nil {
		r.limiters = map[string]*rate.Limiter{}
		return
	}
	for k, l := range r.limiters {
		if l.Tokens() >= float64(r.perMinute) {
			delete(r.limiters, k)
		}
	}
}

// warnUnmatched warns, once at start, of the approval rules that match no
// configured tool: at once for those that match no server, and after
// listing the servers they name (in the background, within the start
// timeout) for those that match none of their tools. A server that cannot
// be listed leaves its rules unjudged, and is logged.
func (s *Server) warnUnmatched(ctx context.Context) {
	var rules []approval.Rule
	rules = append(rules, s.opts.Approve...)
	names := s.mgr.Names()
	for _, n := range names {
		if cfg, err := s.mgr.Config(n); err == nil {
			rules = append(rules, approval.EntryRules(n, cfg.Source, cfg.Approve)...)
		}
	}
	if len(rules) == 0 {
		return
	}
	var named []string
	for _, n := range names {
		for _, r := range rules {
			if r.MatchesServer(n) && !r.Destructive {
				named = append(named, n)
				break
			}
		}
	}
	for _, r := range approval.Unmatched(rules, nil, named) {
		s.logger.Warn("approval rule matches no configured server; no call is asked about by it",
			"rule", r.Source, "servers", names)
	}
	if len(named) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	tools := map[string][]mcp.Tool{}
	var unknown []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range named {
		wg.Go(func() {
			ts, err := s.mgr.Tools(ctx, n)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				unknown = append(unknown, n)
				s.logger.Warn("cannot check the approval rules against a server's tools", logkeys.MCPServer, n, logkeys.Error, err)
				return
			}
			tools[n] = ts
		})
	}
	wg.Wait()
	for _, r := range approval.Unmatched(rules, tools, unknown) {
		if len(tools) > 0 && matchesAny(r, tools) {
			s.logger.Warn("approval rule matches none of the tools of its servers; no call is asked about by it",
				"rule", r.Source, "tools", toolList(r, tools))
		}
	}
}

// matchesAny reports whether r names one of the servers in tools.
func matchesAny(r approval.Rule, tools map[string][]mcp.Tool) bool {
	for n := range tools {
		if r.MatchesServer(n) {
			return true
		}
	}
	return false
}

// toolList names the tools of r's servers, for the warning.
func toolList(r approval.Rule, tools map[string][]mcp.Tool) []string {
	var out []string
	for n, ts := range tools {
		if !r.MatchesServer(n) {
			continue
		}
		for _, t := range ts {
			out = append(out, n+"."+t.Name)
		}
	}
	return out
}
