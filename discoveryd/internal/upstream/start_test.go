package upstream

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codeexec/codeexec/discoveryd/internal/config"
)

// starts counts the manager's "starting MCP server" records.
type starts struct {
	slog.Handler
	n *atomic.Int32
}

func (h starts) Enabled(context.Context, slog.Level) bool { return true }

func (h starts) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "starting MCP server" {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h starts) WithAttrs(as []slog.Attr) slog.Handler {
	return starts{h.Handler.WithAttrs(as), h.n}
}

func (h starts) WithGroup(name string) slog.Handler { return starts{h.Handler.WithGroup(name), h.n} }

// A server slower to start than the call's timeout is not killed with the
// call: it goes on starting, and a later call, with the same short timeout,
// uses it. Ended with each call, it was started again by every call and,
// on a loaded machine, never came up (npm servers under a 3 s tool timeout).
func TestSlowStartOutlivesTheCall(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	m := New([]config.Server{fake(t, "slow", "--start-delay", "2")},
		Options{BaseEnv: map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": t.TempDir()}, BackoffMin: 50 * time.Millisecond},
		slog.New(starts{slog.DiscardHandler, &n}))
	t.Cleanup(func() { _ = m.Close() })

	_, err := m.CallTool(t.Context(), "slow", "echo", map[string]any{"text": "hi"}, 300*time.Millisecond, nil)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "it goes on starting") {
		t.Fatalf("first call: %v, want ErrTimeout saying that the server goes on starting", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := m.CallTool(t.Context(), "slow", "echo", map[string]any{"text": "hi"}, 300*time.Millisecond, nil)
		if err == nil {
			if got := text(t, res); got != "hi" {
				t.Errorf("echo = %q, want hi", got)
			}
			break
		}
		if !errors.Is(err, ErrTimeout) || time.Now().After(deadline) {
			t.Fatalf("a call while the server starts: %v; want ErrTimeout until it is up, then the result", err)
		}
	}
	if got := n.Load(); got != 1 {
		t.Errorf("the server was started %d times, want once", got)
	}
}

// Close ends a start that no call waits for any more, and the process with
// it.
func TestCloseEndsAStartNoCallWaitsFor(t *testing.T) {
	t.Parallel()
	m := newManager(t, []config.Server{fake(t, "slow", "--start-delay", "30")}, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := m.Tools(ctx, "slow"); err == nil {
		t.Fatal("listing a server that takes 30 s to start succeeded within 200 ms")
	}
	done := make(chan error, 1)
	go func() { done <- m.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not end the start in progress")
	}
	if st, _ := m.Status("slow"); st.State == StateRunning {
		t.Errorf("status after Close: %+v", st)
	}
}
