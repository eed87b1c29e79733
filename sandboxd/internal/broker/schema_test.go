package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
)

func TestCheckArguments(t *testing.T) {
	t.Parallel()
	env := &sandbox.ExecEnv{Servers: []channel.Server{{Name: "everything", Alias: "everything", Tools: []channel.Tool{
		{Name: "echo", Alias: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"],"additionalProperties":false}`)},
		{Name: "pick", Alias: "pick", InputSchema: json.RawMessage(`{"type":"object","properties":{"mode":{"enum":["a","b"]},"n":{"type":"integer"},"opts":{"type":"object","properties":{"deep":{"type":"boolean"}}}}}`)},
		{Name: "open", Alias: "open", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "bad", Alias: "bad", InputSchema: json.RawMessage(`{"type":"object","$ref":"file:///etc/passwd"}`)},
	}}}}
	for _, tc := range []struct {
		tool, args, want string
	}{
		{"echo", `{"message":"hi"}`, ""},
		{"echo", `{"mesage":"typo"}`, "invalid arguments for tool 'echo' of server 'everything': missing required argument 'message' (a string); unknown argument 'mesage'; accepted: message"},
		{"echo", `{"message":5}`, "argument 'message' is a number, but must be a string"},
		{"pick", `{"mode":"c"}`, `argument 'mode' is "c"; accepted: "a", "b"`},
		{"pick", `{"n":1.5}`, "argument 'n' is a number, but must be an integer"},
		{"pick", `{"opts":{"deep":"yes"}}`, "argument 'opts.deep' is a string, but must be a boolean"},
		{"open", `{"anything":1}`, ""},
		{"bad", `{"x":1}`, ""},     // does not compile: passed on, logged
		{"unknown", `{"x":1}`, ""}, // not in the metadata: the server decides
	} {
		t.Run(tc.tool+tc.args, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			b := &Broker{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			err := b.checkArguments(&origin{env: env}, "everything", tc.tool, json.RawMessage(tc.args))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			ce, ok := errors.AsType[*channel.Error](err)
			if !ok || ce.Code != channel.CodeInvalidArgument || !strings.Contains(ce.Message, tc.want) {
				t.Fatalf("err = %#v, want invalid_argument containing %q", err, tc.want)
			}
		})
	}
}

func TestUncompilableSchemaIsLoggedOnce(t *testing.T) {
	t.Parallel()
	env := &sandbox.ExecEnv{Servers: []channel.Server{{Name: "s", Alias: "s", Tools: []channel.Tool{
		{Name: "t", Alias: "t", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/nowhere"}}}`)},
	}}}}
	var logs bytes.Buffer
	b := &Broker{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	for range 3 {
		if err := b.checkArguments(&origin{env: env}, "s", "t", json.RawMessage(`{"a":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "does not compile"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, logs.String())
	}
}
