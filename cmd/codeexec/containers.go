package main

import (
	"strings"

	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/services/flagenv"
)

// bindContainers binds the podman and docker settings that upstream does
// not have. Call cs.apply after parsing.
func bindContainers(fs *flagenv.Set, c *sandboxd.Config, cs *containerSettings) {
	fs.String(&cs.runtimeArgs, "runtime-args", "", "extra arguments for `podman run` / `docker run`, space-separated, e.g. --runtime=runsc for gVisor", "CODEEXEC_RUNTIME_ARGS")
	fs.Var(&cs.runtimeArg, "runtime-arg", "one extra argument for `podman run` / `docker run`; repeat for more (added after --runtime-args)")
	fs.String(&c.AgentRoot, "agent-root", "", "directory for the sandbox agent's files (default: the temp dir); when sandboxd runs in a container with the host's engine socket, a host path mounted at the same path", "CODEEXEC_AGENT_ROOT")
}

// apply copies the parsed container settings into c.
func (cs *containerSettings) apply(c *sandboxd.Config) {
	// White space splits: engine flags like --runtime=runsc have none;
	// --runtime-arg takes an argument that does.
	c.RuntimeArgs = append(strings.Fields(cs.runtimeArgs), cs.runtimeArg...)
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, " ") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
