package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// Candidate is a runtime Select may use.
type Candidate struct {
	// Name is the runtime's name as users select it, e.g. "bwrap".
	Name string
	// New makes the runtime's engine without checking it.
	New func() (Engine, error)
}

// Select returns the checked engine of the candidate called name. With no
// name it takes the first candidate that passes its check (sandboxd lists
// bwrap, podman and docker, in that order), and when none does the error
// says, for each, what to install. An engine that fails its check is
// closed.
func Select(ctx context.Context, name string, candidates []Candidate, logger *slog.Logger) (Engine, error) {
	if name != "" {
		for _, c := range candidates {
			if c.Name == name {
				return checked(ctx, c)
			}
		}
		return nil, errors.New("unknown runtime " + name)
	}
	var reasons []string
	for _, c := range candidates {
		eng, err := checked(ctx, c)
		if err == nil {
			if len(reasons) > 0 {
				// Say why the ones before it were passed over: a limit one
				// of them refused, say, is worth knowing.
				logger.Warn("sandbox runtime detected, passing over the ones before it", "runtime", c.Name, "passed_over", strings.Join(reasons, "; "))
			} else {
				logger.Info("sandbox runtime detected", "runtime", c.Name)
			}
			return eng, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		reasons = append(reasons, fmt.Sprintf("%s: %s", c.Name, strings.TrimPrefix(err.Error(), ErrUnavailable.Error()+": ")))
	}
	return nil, fmt.Errorf("%w: no sandbox runtime works here. Install one: bubblewrap (`apt-get install bubblewrap`, the default), "+
		"or podman or docker with an image (MCP_BRIDGE_IMAGE); set MCP_BRIDGE_RUNTIME to choose. What each said: %s",
		ErrUnavailable, strings.Join(reasons, "; "))
}

// checked makes c's engine and checks it.
func checked(ctx context.Context, c Candidate) (Engine, error) {
	eng, err := c.New()
	if err != nil {
		return nil, err
	}
	if err := eng.Check(ctx); err != nil {
		_ = eng.Close()
		return nil, err
	}
	return eng, nil
}
