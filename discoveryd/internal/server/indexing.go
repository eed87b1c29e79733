package server

import (
	"context"
	"slices"
	"time"

	"github.com/codeexec/codeexec/discoveryd/internal/upstream"
	"github.com/codeexec/codeexec/services/logkeys"
)

// indexAttempt is one background listing of a server's tools, started so
// that the server can be searched.
type indexAttempt struct {
	done chan struct{} // closed when the listing ended, either way
}

// indexServer starts listing name's tools in the background, or joins the
// listing already under way. The listing does not end with ctx: a server
// that is slow to start keeps starting and is searched by a later request.
// Close ends it by stopping the manager.
func (s *Server) indexServer(ctx context.Context, name string) *indexAttempt {
	s.indexingMu.Lock()
	defer s.indexingMu.Unlock()
	if a, ok := s.indexing[name]; ok {
		return a
	}
	a := &indexAttempt{done: make(chan struct{})}
	s.indexing[name] = a
	bg := context.WithoutCancel(ctx) // keeps the request's values for logs
	go func() {
		// The start may take longer than a call's timeout (npx fetching
		// the package); only the listing after it is one call.
		err := s.mgr.Start(bg, name)
		if err == nil {
			_, err = s.mgr.Tools(bg, name)
		}
		if err != nil {
			s.logger.WarnContext(bg, "cannot list tools for search", logkeys.MCPServer, name, logkeys.Error, err)
		}
		s.indexingMu.Lock()
		delete(s.indexing, name)
		s.indexingMu.Unlock()
		close(a.done)
	}()
	return a
}

// indexUnlisted starts every server in names whose tools were never listed,
// all at once, and waits until they are listed, failed, or the wait ends:
// s.opts.SearchIndexWait, or most of the time left before ctx's deadline when
// that is sooner, so that the search itself can still answer. It returns
// the servers that are still not indexed.
//
// A server whose last start failed is retried in the background, but not
// waited for: it is backing off, possibly for longer than the wait, and a
// broken server must not slow down every search.
func (s *Server) indexUnlisted(ctx context.Context, names []string) []string {
	var pending, missing []string
	attempts := map[string]*indexAttempt{}
	s.fromCatalog(ctx, names)
	for _, n := range names {
		if _, known := s.knownTools(n); known {
			continue // listed here, or in the catalogue: nothing to start
		}
		a := s.indexServer(ctx, n)
		if st, err := s.mgr.Status(n); err == nil && st.State == upstream.StateFailed {
			missing = append(missing, n)
			continue
		}
		pending = append(pending, n)
		attempts[n] = a
	}
	if len(pending) == 0 {
		return missing
	}
	d := s.opts.SearchIndexWait
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)*3/4)
	}
	wait := time.NewTimer(d)
	defer wait.Stop()
	timedOut := false
	for _, n := range pending {
		if !timedOut {
			select {
			case <-attempts[n].done:
			case <-wait.C:
				timedOut = true
			case <-ctx.Done():
				timedOut = true
			}
		}
		if _, known := s.knownTools(n); !known {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	return missing
}
