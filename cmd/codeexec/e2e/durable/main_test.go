package durable

import (
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
