package agent

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
)

// agentProtocol is what codeexec_protocol.py declares, as JSON: each call
// method's parameters, and the error code of each exception class.
const agentProtocol = `import json, sys
sys.path.insert(0, sys.argv[1])
import codeexec_protocol as p
print(json.dumps({
    "methods": {m.name: {"required": sorted(m.required), "optional": sorted(m.optional)} for m in p.METHODS.values()},
    "codes": sorted(cls.code for cls in p.ERRORS),
}))`

type params struct {
	Required []string `json:"required"`
	Optional []string `json:"optional"`
}

// TestAgentMatchesTheChannel holds the agent's side of the protocol to
// the Go side: the same call methods with the same required and optional
// parameters (a Request field tagged omitempty is optional), and an
// exception class for every error code.
func TestAgentMatchesTheChannel(t *testing.T) {
	t.Parallel()
	dir := writtenAgent(t)
	out, err := exec.CommandContext(t.Context(), python, "-I", "-B", "-c", agentProtocol, dir).Output()
	if err != nil {
		t.Fatalf("reading codeexec_protocol: %v", err)
	}
	var agent struct {
		Methods map[string]params `json:"methods"`
		Codes   []channel.Code    `json:"codes"`
	}
	if err := json.Unmarshal(out, &agent); err != nil {
		t.Fatal(err)
	}

	want := map[string]params{}
	for _, r := range channel.Requests() {
		want[r.Method()] = paramsOf(reflect.TypeOf(r).Elem())
	}
	if diff := cmp.Diff(want, agent.Methods); diff != "" {
		t.Errorf("agent methods differ from channel.Requests (-go +python):\n%s", diff)
	}
	codes := channel.Codes()
	slices.Sort(codes)
	if diff := cmp.Diff(codes, agent.Codes); diff != "" {
		t.Errorf("agent exception codes differ from channel.Codes (-go +python):\n%s", diff)
	}
}

// paramsOf lists a Request struct's JSON fields, sorted.
func paramsOf(typ reflect.Type) params {
	p := params{Required: []string{}, Optional: []string{}}
	for f := range typ.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if strings.Contains(opts, "omitempty") {
			p.Optional = append(p.Optional, name)
		} else {
			p.Required = append(p.Required, name)
		}
	}
	slices.Sort(p.Required)
	slices.Sort(p.Optional)
	return p
}
