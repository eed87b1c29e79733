//go:build !cgo

package embed

import "fmt"

// openRunner fails: the runtime is reached through cgo.
func openRunner(_, _ string) (runner, error) {
	return nil, fmt.Errorf("%w: this codeexec was built without cgo (CGO_ENABLED=0)", ErrNoRuntime)
}
