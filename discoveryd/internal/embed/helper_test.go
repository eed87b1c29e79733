package embed

import (
	"errors"
	"io/fs"
	"testing"
)

// installedEncoder opens the model that scripts/search-model.sh
// installed, or skips the test when there is none (scripts/install-tools.sh
// installs it for the tests) or when this build cannot run it.
func installedEncoder(t testing.TB) *Encoder {
	t.Helper()
	p := DefaultPath()
	e, err := Open(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNoRuntime) {
		t.Skipf("no search model at %s: %v (run scripts/search-model.sh)", p, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}
