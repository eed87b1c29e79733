package embed

import (
	"errors"
	"io/fs"
	"testing"
)

// installedModel loads the model that scripts/search-model.sh installed,
// or skips the test when there is none (scripts/install-tools.sh installs
// it for the tests).
func installedModel(t testing.TB) *Model {
	t.Helper()
	p := DefaultPath()
	m, err := Load(p)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("no search model at %s: run scripts/search-model.sh", p)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}
