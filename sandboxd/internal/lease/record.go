package lease

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/codeexec/codeexec/services/randomid"
)

// Errors of the store; the session package turns them into its own.
var (
	// ErrUnknown means the handle names no session of this tenant (or an
	// expired one): the one answer for all of them.
	ErrUnknown = errors.New("unknown session")
	// ErrLost means another replica took the session over, or ended it.
	ErrLost = errors.New("the session was taken over or ended by another replica")
	// ErrExists means a session with the handle asked for exists already.
	ErrExists = errors.New("a session with this handle exists already")
)

// ElsewhereError says that another live replica holds the session.
type ElsewhereError struct {
	// Replica names the holder.
	Replica string
	// Address is where its SandboxService listens.
	Address string
}

func (e *ElsewhereError) Error() string {
	return fmt.Sprintf("the session is live on replica %s (%s)", e.Replica, e.Address)
}

// stateVersion is the version of State's encoding.
const stateVersion = 1

// State is sandboxd's record of one session, stored opaquely by memoryd.
type State struct {
	V int `json:"v"`
	// Owner is the replica holding the session live, or "".
	Owner string `json:"owner,omitempty"`
	// Epoch grows with every change of owner.
	Epoch uint64 `json:"epoch"`
	// Manifest is the agent's description of the last checkpoint (which
	// chunks hold which names), or nil before the first.
	Manifest json.RawMessage `json:"manifest,omitempty"`
	// Seq is the number of execs the checkpoint reflects.
	Seq uint64 `json:"seq"`
	// Env is the ID of the environment the checkpoint was made in
	// (package environment), "" before environments were recorded.
	Env string `json:"env,omitempty"`
	// NotDurable says why the last checkpoint could not be made, or "".
	NotDurable string `json:"not_durable,omitempty"`
	// Created is when the session began.
	Created time.Time `json:"created"`
	// Labels are the session's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Stopped says why the holder gave the session up ("the sandbox was
	// stopped after being idle", ...), for the next restore's report.
	Stopped string `json:"stopped,omitempty"`
	// Running, when set, is when a run that outlives its call began on
	// the holder: the run's checkpoint (or its end) clears it, so a
	// replica that takes the session over with it set knows that a run
	// was interrupted, and says so.
	Running *time.Time `json:"running,omitempty"`
}

func decodeState(b []byte) (State, error) {
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("decode session record: %w", err)
	}
	if st.V != stateVersion {
		return st, fmt.Errorf("session record version %d is not supported (this sandboxd reads %d)", st.V, stateVersion)
	}
	return st, nil
}

func (st State) encode() []byte {
	st.V = stateVersion
	b, _ := json.Marshal(st) // State has only encodable fields
	return b
}

// Chunk IDs of a manifest, to know which chunks a new checkpoint no longer
// needs: its values' and its workspace files' (docs/PROTOCOL.md).
func chunkIDs(manifest json.RawMessage) map[string]bool {
	var m struct {
		Values map[string]struct {
			Chunk string `json:"chunk"`
		} `json:"values"`
		Workspace struct {
			Files map[string]struct {
				Chunks []string `json:"chunks"`
			} `json:"files"`
		} `json:"workspace"`
	}
	ids := map[string]bool{}
	if len(manifest) == 0 || json.Unmarshal(manifest, &m) != nil {
		return ids
	}
	for _, v := range m.Values {
		ids[v.Chunk] = true
	}
	for _, f := range m.Workspace.Files {
		for _, c := range f.Chunks {
			ids[c] = true
		}
	}
	return ids
}

// ChunkIDs lists a manifest's chunks, in a stable order.
func ChunkIDs(manifest json.RawMessage) []string {
	ids := chunkIDs(manifest)
	out := make([]string, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	sortStrings(out)
	return out
}

// NewHandle returns an unguessable session handle: 128 random bits.
func NewHandle() string {
	return randomid.Hex(16)
}
