package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/gateway"
)

// runToken makes tokens-file lines: `codeexec token add TENANT` makes a
// random token, prints it once on stderr and the line to append on stdout;
// `codeexec token hash` reads a token from stdin and prints its hash.
func runToken(_ context.Context, args []string, e cli.Env) error {
	help := slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "--help" })
	switch {
	case help:
	case len(args) == 2 && args[0] == "add" && strings.HasPrefix(args[1], "-"):
		// A flag where the tenant goes is a mistake, not a tenant called
		// "--force": say so rather than make a token for it.
		fmt.Fprintf(e.Stderr, "codeexec token add: %q is not a tenant name (it starts with '-'); token add takes no flags\n", args[1])
		return cli.ErrUsage
	case len(args) == 2 && args[0] == "add":
		if err := gateway.ValidTenant(args[1]); err != nil {
			return err
		}
		var b [32]byte
		_, _ = rand.Read(b[:])
		token := "cx_" + base64.RawURLEncoding.EncodeToString(b[:])
		line := gateway.HashToken(token) + " " + args[1]
		fmt.Fprintf(e.Stderr, "token for tenant %s (shown once; give it to the client as \"Authorization: Bearer <token>\"):\n%s\n", args[1], token)
		fmt.Fprintln(e.Stdout, line)
		return nil
	case len(args) == 1 && args[0] == "hash":
		token, err := bufio.NewReader(e.Stdin).ReadString('\n')
		token = strings.TrimSpace(token)
		if token == "" {
			return fmt.Errorf("token hash: no token on stdin: %w", err)
		}
		fmt.Fprintln(e.Stdout, gateway.HashToken(token))
		return nil
	}
	out := e.Stderr
	if help {
		out = e.Stdout
	}
	fmt.Fprint(out, "usage:\n  codeexec token add TENANT >> tokens   new random token for TENANT; the line for --tokens-file goes to stdout\n"+
		"  echo TOKEN | codeexec token hash     the sha256:<hex> form of an existing token\n")
	if help {
		return nil
	}
	return cli.ErrUsage
}
