// Package tasks serves the tasks extension of MCP 2026-07-28
// (io.modelcontextprotocol/tasks, SEP-2663) over streamable HTTP and
// stdio: a
// run_python call from a client that declares the extension, still
// running after a short while, is answered with a task (resultType
// "task"), and tasks/get, tasks/update and tasks/cancel follow it. A task
// is a run in flight in its session (see sandboxd's Execute attach), so
// any gateway answers for it: its ID names the session and the run, and
// the session's holder keeps the run's result until the session runs
// other code.
//
// mcp-go v1.2.1 knows only the tasks of 2025-11-25, kept in one process,
// so the extension's methods are answered here, before mcp-go, and a
// tool result that marks a task is rewritten as the task on its way out.
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Extension is the extension's identifier.
const Extension = "io.modelcontextprotocol/tasks"

// clientCapabilitiesKey is the _meta key of a request's client
// capabilities under 2026-07-28.
const clientCapabilitiesKey = "io.modelcontextprotocol/clientCapabilities"

// MetaKey marks, in a tool result's _meta, the task the result stands
// for; Handler turns such a result into the task.
const MetaKey = "dev.codeexec/task"

// PollInterval is the polling interval a task suggests.
const PollInterval = time.Second

// ErrUnknown means that no task has the ID: it never existed, its
// session has run other code since, or it belongs to another tenant.
var ErrUnknown = errors.New("unknown task")

// Status is a task's status, as the extension names them.
type Status string

// The statuses a run_python task takes.
const (
	Working   Status = "working"
	Completed Status = "completed"
	Cancelled Status = "cancelled"
	Failed    Status = "failed"
)

// State is what a task is now.
type State struct {
	Status  Status
	Message string
	// Created is when the run began; Updated when it last changed.
	Created, Updated time.Time
	// TTL is how long the task is kept from its creation, at least.
	TTL time.Duration
	// Result is the tool's result, once Completed.
	Result *mcp.CallToolResult
}

// Runs are the runs behind tasks (runpython.Tool).
type Runs interface {
	// TaskState says what the run (session handle, run ID) of
	// tenant is now; ErrUnknown when there is no such run.
	TaskState(ctx context.Context, tenant, handle string, run uint64) (State, error)
	// CancelTask stops the run, if it still runs.
	CancelTask(ctx context.Context, tenant, handle string, run uint64) error
}

// ID is the task ID of a run: its session's handle and its run ID.
func ID(handle string, run uint64) string { return handle + "." + strconv.FormatUint(run, 10) }

// parseID is ID's inverse.
func parseID(id string) (handle string, run uint64, err error) {
	h, n, ok := strings.Cut(id, ".")
	if ok {
		run, err = strconv.ParseUint(n, 10, 64)
	}
	if !ok || err != nil || h == "" || run == 0 {
		return "", 0, fmt.Errorf("%w %q: a task ID is what a CreateTaskResult gave", ErrUnknown, id)
	}
	return h, run, nil
}

// Declared reports whether a request's _meta declares the extension in
// its client capabilities.
func Declared(meta map[string]any) bool {
	caps, _ := meta[clientCapabilitiesKey].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[Extension]
	return ok
}

// Marker is the _meta entry of a tool result that stands for the task of
// a run that goes on: Handler answers the call with the task instead.
func Marker(handle string, run uint64, st State) map[string]any {
	return map[string]any{MetaKey: task(ID(handle, run), st)}
}

// task is the wire form of a task in state st (Task, with a DetailedTask's
// result when completed).
func task(id string, st State) map[string]any {
	t := map[string]any{
		"taskId":         id,
		"status":         st.Status,
		"createdAt":      st.Created.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt":  st.Updated.UTC().Format(time.RFC3339Nano),
		"ttlMs":          st.TTL.Milliseconds(),
		"pollIntervalMs": PollInterval.Milliseconds(),
	}
	if st.Message != "" {
		t["statusMessage"] = st.Message
	}
	if st.Status == Completed && st.Result != nil {
		raw, err := json.Marshal(st.Result)
		var res map[string]any
		if err == nil && json.Unmarshal(raw, &res) == nil {
			// The task's ID is at the root: the result carries no
			// related-task key, and is complete.
			res["resultType"] = "complete"
			t["result"] = res
		}
	}
	return t
}
