package main

import (
	"context"
	"errors"
	"io"
)

func runImportUpstream(context.Context, []string, func(string) string, io.Writer, io.Writer) error {
	return errors.New("import-upstream: not wired yet")
}
