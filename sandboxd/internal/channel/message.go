package channel

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Message is the content of one frame. Its concrete type, one of the
// pointer types below, says which message it is; Type gives the frame's
// "t" field.
//
// A new message type is a struct with a Type method and one entry in
// messageTypes.
type Message interface {
	Type() string
}

// Ready is the agent's first frame: its interpreter is up and it reads
// exec frames from now on.
type Ready struct {
	// Python is the interpreter's version, "3.12.4".
	Python string `json:"python"`
	// PID is the agent's process id inside the sandbox.
	PID int `json:"pid"`
}

// Out is a chunk of an exec's output, in order per stream.
type Out struct {
	// Exec is the id of the exec that wrote it.
	Exec int64 `json:"id"`
	// Stream is "stdout" or "stderr".
	Stream string `json:"s"`
	// Data is the text, at most 64 KiB of it.
	Data string `json:"d"`
}

// Progress is the code's report of how far its exec has got
// (runtime.progress), passed on to a client that asked for progress.
type Progress struct {
	// Exec is the id of the exec that reported it.
	Exec int64 `json:"id"`
	// Done is how much is done; Total how much in all (0: unknown).
	Done  float64 `json:"done"`
	Total float64 `json:"total,omitempty"`
	// Message says what is being done.
	Message string `json:"msg,omitempty"`
}

// Call is a request from the sandboxed code to the outside world; the
// agent waits for the Reply with the same ID.
type Call struct {
	// ID is unique per sandbox.
	ID int64 `json:"id"`
	// Exec is the id of the exec whose code made the call: only that exec's
	// allow-list applies, and only while it runs.
	Exec int64 `json:"exec"`
	// Method names what is asked for; Params holds the method's Request
	// (method.go) as JSON.
	Method string          `json:"m"`
	Params json.RawMessage `json:"p,omitempty"`
}

// Done ends an exec: nothing more is sent for it.
type Done struct {
	// Exec is the id of the exec that finished.
	Exec int64 `json:"id"`
	// OK is false when the code raised or exited with a non-zero status.
	OK bool `json:"ok"`
	// Exit is the exit status: 0, 1 for an exception, n for sys.exit(n).
	Exit int `json:"exit"`
	// Error is the exception in one line ("ZeroDivisionError: division by
	// zero"); its traceback went out on stderr.
	Error string `json:"error,omitempty"`
	// Dropped counts the bytes per stream that the output cap cut.
	Dropped map[string]int64 `json:"dropped,omitempty"`
	// End asks for the session to end (runtime.end_session()).
	End bool `json:"end,omitempty"`
	// Files are the files under /workspace/out the exec made or changed,
	// at most 20; FilesMore counts the others.
	Files     []OutFile `json:"files,omitempty"`
	FilesMore int       `json:"files_more,omitempty"`
}

// OutFile is one file under /workspace/out.
type OutFile struct {
	// Path is relative to /workspace: "out/chart.png".
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
	MIME  string `json:"mime"`
}

// Exec asks the agent to run code in the session's namespace. Only one is
// in flight at a time.
type Exec struct {
	// ID increases with every exec in a sandbox.
	ID   int64  `json:"id"`
	Code string `json:"code"`
	// Servers are the servers the code may use in this exec, in the order
	// asked for. The agent builds its proxies from them.
	Servers []Server `json:"servers"`
	// Discovered lists every configured server, loaded or not.
	Discovered []DiscoveredServer `json:"discovered"`
	// Unloaded are the config entries that discoveryd did not load, under
	// a name no loaded entry has: the agent says so, with where and why,
	// when the code names one.
	Unloaded []UnloadedServer `json:"unloaded,omitempty"`
	// Limit caps each output stream at this many bytes; 0 means no cap.
	Limit int64 `json:"limit"`
	// First marks a session's first exec in this sandbox (never the
	// pool's warm-up exec): the agent then binds the tenant's saved tools
	// as bare names before the code runs.
	First bool `json:"first,omitempty"`
	// SavedTools, on a first exec only, are the tenant's saved tools,
	// fetched while the sandbox was readied: the agent builds
	// `user_tools` from them instead of asking with tool.list. Absent
	// (nil) means they were not fetched, and the agent asks; an empty
	// list means there are none.
	SavedTools []SavedTool `json:"saved_tools,omitzero"`
	// Checkpoint, when positive, asks the agent for a checkpoint of the
	// session after the exec's done, of at most this many bytes.
	Checkpoint int64 `json:"checkpoint,omitempty"`
	// Workspace, with Checkpoint, caps the bytes of /workspace's files
	// the checkpoint holds; zero keeps no files in it.
	Workspace int64 `json:"workspace,omitempty"`
	// Display bounds the images the exec sends; nil leaves the agent's
	// defaults.
	Display *DisplayLimits `json:"display,omitempty"`
	// Budget, when positive, bounds the characters of output the exec
	// sends: the head and each stream's tail, the whole of a stream over
	// it kept in a file in the workspace (docs/PROTOCOL.md). Limit then
	// does not apply.
	Budget int64 `json:"budget,omitempty"`
}

// DisplayLimits bound the images of one exec; a zero field leaves the
// agent's default.
type DisplayLimits struct {
	// Side is the longest side of an image in pixels; larger ones are
	// scaled down.
	Side int64 `json:"side,omitempty"`
	// Bytes bounds one encoded image.
	Bytes int64 `json:"bytes,omitempty"`
	// CallBytes and CallImages bound the images of one exec together.
	CallBytes  int64 `json:"call_bytes,omitempty"`
	CallImages int64 `json:"call_images,omitempty"`
}

// Display is an image the code showed (display(), a matplotlib figure,
// plt.show()), PNG or JPEG, in the frame's one blob, "image".
type Display struct {
	// Exec is the exec that showed it.
	Exec int64 `json:"id"`
	// MIME is "image/png" or "image/jpeg".
	MIME string `json:"mime"`
	// Width and Height are the image's, in pixels.
	Width  int `json:"w"`
	Height int `json:"h"`
	// Chunks holds the image as "image"; Blobs is as Checkpoint's.
	Chunks map[string][]byte `json:"-"`
	Blobs  []Blob            `json:"blobs,omitempty"`
}

// Image returns the image's bytes.
func (d *Display) Image() []byte { return d.Chunks["image"] }

// SavedTool is one saved tool as tool.list returns it.
type SavedTool struct {
	Name      string `json:"name"`
	Docstring string `json:"docstring"`
	Source    string `json:"source"`
}

// Checkpoint is one frame of the checkpoint the agent takes after an exec
// that asked for one (Exec.Checkpoint): chunks of pickled values, in as
// many frames as they need, the manifest in the last. Chunks travel as
// the frame's blobs (blob.go), raw. A state that cannot be checkpointed
// comes as one last frame with Error.
type Checkpoint struct {
	// Exec is the exec after which it was taken.
	Exec int64 `json:"id"`
	// Chunks are the chunks the store does not hold yet, by ID.
	Chunks map[string][]byte `json:"-"`
	// Blobs lists the chunks in the frame's blobs: Encode writes it from
	// Chunks, and Decode reads Chunks by it and leaves it empty.
	Blobs []Blob `json:"blobs,omitempty"`
	// Last marks the frame with the manifest (or the error).
	Last bool `json:"last,omitempty"`
	// Manifest describes the whole checkpoint (docs/PROTOCOL.md).
	Manifest json.RawMessage `json:"manifest,omitempty"`
	// Error says why there is no checkpoint (too large, ...).
	Error string `json:"error,omitempty"`
}

// Checkpointed answers a checkpoint: OK when it is stored, so that the
// agent's next checkpoint may leave out the chunks it holds.
type Checkpointed struct {
	// Exec is the checkpoint's exec.
	Exec int64 `json:"id"`
	OK   bool  `json:"ok"`
}

// Restore hands a fresh agent a checkpoint to rebuild the session from,
// in frames as Checkpoint is sent. The agent answers with Restored.
type Restore struct {
	Chunks map[string][]byte `json:"-"`
	// Blobs is as Checkpoint's.
	Blobs    []Blob          `json:"blobs,omitempty"`
	Last     bool            `json:"last,omitempty"`
	Manifest json.RawMessage `json:"manifest,omitempty"`
	// SavedTools, on the last frame only, are as Exec's: a checkpoint
	// that holds `user_tools` rebuilds the module from them instead of
	// asking with tool.list. Absent means not fetched.
	SavedTools []SavedTool `json:"saved_tools,omitzero"`
}

// Restored is the agent's report on a restore.
type Restored struct {
	Report RestoreReport `json:"report"`
}

// RestoreReport says what came back: names restored, names that failed
// to restore, and names the checkpoint could not hold at all.
type RestoreReport struct {
	Restored []string `json:"restored"`
	// Files are the paths of the workspace's files written back.
	Files   []string   `json:"files,omitempty"`
	Failed  []LostName `json:"failed"`
	Unsaved []LostName `json:"unsaved"`
	// Error, when set, means the restore failed as a whole.
	Error string `json:"error,omitempty"`
}

// LostName is one name a checkpoint or a restore could not keep.
type LostName struct {
	Name string `json:"name"`
	// Type is what it held ("open file", "socket", ...), for unsaved names.
	Type string `json:"type,omitempty"`
	Why  string `json:"why"`
}

// Server is the metadata of one server allowed in an exec.
type Server struct {
	Name string `json:"name"`
	// Alias is discoveryd's Python name for the server (mcp_<alias>). It
	// is never empty: the agent has no alias rules of its own.
	Alias       string `json:"alias"`
	Description string `json:"description,omitempty"`
	Cwd         string `json:"cwd,omitempty"`
	Tools       []Tool `json:"tools"`
	// Error, when set, says why the server's tools could not be listed,
	// with the code and message a call would have failed with, so that
	// the agent's sync helpers raise what the async ones would.
	Error *Error `json:"error,omitempty"`
}

// Tool is the metadata of one tool of a Server.
type Tool struct {
	Name string `json:"name"`
	// Alias is discoveryd's Python name for the tool, never empty.
	Alias       string          `json:"alias"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// DiscoveredServer is one configured server, loaded in the exec or not.
type DiscoveredServer struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Alias is discoveryd's Python name for the server, so that the agent
	// can bind mcp_<alias> of a server not loaded in the exec to a name
	// that says how to load it.
	Alias string `json:"alias,omitempty"`
	// Failed, when set, is why the server's last start failed: the name
	// of a server not loaded says so too.
	Failed string `json:"failed,omitempty"`
}

// UnloadedServer is a config entry that was not loaded, as discoveryd
// lists it: its name, the file that holds it, and why.
type UnloadedServer struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// Reply answers a Call: with Result, or with Error when the call failed.
type Reply struct {
	// ID is the Call's.
	ID int64 `json:"id"`
	// Result is the method's result as JSON; "null" is a result too.
	Result json.RawMessage `json:"result,omitempty"`
	// Error says why the call failed, with a code the agent raises as a
	// typed exception.
	Error *Error `json:"error,omitempty"`
}

// ReplyTo answers call id with result, or with err when it is not nil
// (as a CodeInternal error unless it holds a *Error).
func ReplyTo(id int64, result json.RawMessage, err error) *Reply {
	if err != nil {
		return &Reply{ID: id, Error: AsError(err)}
	}
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	return &Reply{ID: id, Result: result}
}

// Unknown is a frame whose type this package does not know. sandboxd
// logs it and reads on.
type Unknown struct {
	// T is the frame's "t" field.
	T string `json:"-"`
}

// Type implements Message.
func (*Ready) Type() string { return "ready" }

// Type implements Message.
func (*Out) Type() string { return "out" }

// Type implements Message.
func (*Call) Type() string { return "call" }

// Type implements Message.
func (*Progress) Type() string { return "progress" }

// Type implements Message.
func (*Done) Type() string { return "done" }

// Type implements Message.
func (*Exec) Type() string { return "exec" }

// Type implements Message.
func (*Reply) Type() string { return "reply" }

// Type implements Message.
func (*Checkpoint) Type() string { return "checkpoint" }

// Type implements Message.
func (*Checkpointed) Type() string { return "checkpointed" }

// Type implements Message.
func (*Restore) Type() string { return "restore" }

// Type implements Message.
func (*Restored) Type() string { return "restored" }

// Type implements Message.
func (*Display) Type() string { return "display" }

// Type implements Message.
func (u *Unknown) Type() string { return u.T }

// messageTypes makes an empty message of each known type, by its "t".
var messageTypes = byType(
	newMessage[Ready], newMessage[Out], newMessage[Call], newMessage[Done], newMessage[Progress],
	newMessage[Exec], newMessage[Reply],
	newMessage[Checkpoint], newMessage[Checkpointed], newMessage[Restore], newMessage[Restored],
	newMessage[Display],
)

func newMessage[T any, P interface {
	*T
	Message
}]() Message {
	return P(new(T))
}

func byType(makers ...func() Message) map[string]func() Message {
	m := make(map[string]func() Message, len(makers))
	for _, mk := range makers {
		m[mk().Type()] = mk
	}
	return m
}

var errNoType = errors.New("missing message type")

// Decode parses one frame's body. Fields a type does not have are
// ignored, so either side may add one before the other reads it.
func Decode(body []byte) (Message, error) {
	body, tail, err := splitBlobs(body)
	if err != nil {
		return nil, err
	}
	var head struct {
		T string `json:"t"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return nil, err
	}
	if head.T == "" {
		return nil, errNoType
	}
	mk := messageTypes[head.T]
	if mk == nil {
		return &Unknown{T: head.T}, nil
	}
	m := mk()
	if err := json.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("%s frame: %w", head.T, err)
	}
	if err := takeBlobs(m, tail); err != nil {
		return nil, fmt.Errorf("%s frame: %w", head.T, err)
	}
	return m, nil
}

// Encode renders m as one frame's body, with "t" first.
func Encode(m Message) ([]byte, error) {
	if _, ok := m.(*Unknown); ok {
		return nil, fmt.Errorf("encode %q frame: not a message type this side knows", m.Type())
	}
	wire, blobs := listBlobs(m)
	fields, err := json.Marshal(wire)
	if err != nil {
		return nil, fmt.Errorf("encode %s frame: %w", m.Type(), err)
	}
	t, _ := json.Marshal(m.Type()) // a string always encodes
	body := make([]byte, 0, len(`{"t":,`)+len(t)+len(fields))
	body = append(body, `{"t":`...)
	body = append(body, t...)
	if len(fields) > len("{}") {
		body = append(body, ',')
	}
	return withBlobs(append(body, fields[1:]...), blobs), nil
}
