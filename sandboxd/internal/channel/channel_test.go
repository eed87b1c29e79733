package channel

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func frame(body string) []byte {
	b := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	copy(b[4:], body)
	return b
}

// wireExamples are one message of each type and its exact frame body, as
// docs/PROTOCOL.md describes them.
var wireExamples = []struct {
	msg  Message
	body string
}{
	{&Ready{Python: "3.12.4", PID: 7}, `{"t":"ready","python":"3.12.4","pid":7}`},
	{&Out{Exec: 1, Stream: "stdout", Data: "hi\n"}, `{"t":"out","id":1,"s":"stdout","d":"hi\n"}`},
	{&Progress{Exec: 1, Done: 3, Total: 10, Message: "rows"}, `{"t":"progress","id":1,"done":3,"total":10,"msg":"rows"}`},
	{&Call{ID: 3, Exec: 1, Method: "list_tools", Params: json.RawMessage(`{"server":"fs"}`)},
		`{"t":"call","id":3,"exec":1,"m":"list_tools","p":{"server":"fs"}}`},
	{&Done{Exec: 1, OK: true, Dropped: map[string]int64{"stdout": 5}}, `{"t":"done","id":1,"ok":true,"exit":0,"dropped":{"stdout":5}}`},
	{&Done{Exec: 2, Exit: 1, Error: "ZeroDivisionError: division by zero"},
		`{"t":"done","id":2,"ok":false,"exit":1,"error":"ZeroDivisionError: division by zero"}`},
	{&Exec{ID: 1, Code: "print(1)", Servers: []Server{{Name: "a-b", Alias: "a_b", Tools: []Tool{{Name: "get", Alias: "get", InputSchema: json.RawMessage(`{}`)}}}},
		Discovered: []DiscoveredServer{{Name: "a-b", Description: "d"}}, Limit: 10, First: true},
		`{"t":"exec","id":1,"code":"print(1)","servers":[{"name":"a-b","alias":"a_b","tools":[{"name":"get","alias":"get","input_schema":{}}]}],` +
			`"discovered":[{"name":"a-b","description":"d"}],"limit":10,"first":true}`},
	{&Exec{ID: 1, Code: "f()", Servers: []Server{}, Discovered: []DiscoveredServer{}, First: true,
		SavedTools: []SavedTool{{Name: "f", Docstring: "d", Source: "def f():\n    pass\n"}}},
		`{"t":"exec","id":1,"code":"f()","servers":[],"discovered":[],"limit":0,"first":true,` +
			`"saved_tools":[{"name":"f","docstring":"d","source":"def f():\n    pass\n"}]}`},
	{&Exec{ID: 1, Code: "x", Servers: []Server{{Name: "ghost", Alias: "ghost", Tools: []Tool{}, Error: &Error{Code: CodeUnavailable, Message: "unavailable: no such file"}}},
		Discovered: []DiscoveredServer{{Name: "ghost", Description: ""}}},
		`{"t":"exec","id":1,"code":"x","servers":[{"name":"ghost","alias":"ghost","tools":[],"error":{"code":"unavailable","message":"unavailable: no such file"}}],` +
			`"discovered":[{"name":"ghost","description":""}],"limit":0}`},
	{&Exec{ID: 1, Code: "x", Servers: []Server{}, Discovered: []DiscoveredServer{}, First: true, SavedTools: []SavedTool{}},
		`{"t":"exec","id":1,"code":"x","servers":[],"discovered":[],"limit":0,"first":true,"saved_tools":[]}`},
	{&Reply{ID: 3, Result: json.RawMessage(`null`)}, `{"t":"reply","id":3,"result":null}`},
	{&Reply{ID: 4, Error: &Error{Code: CodeConflict, Message: "revision 3 moved"}}, `{"t":"reply","id":4,"error":{"code":"conflict","message":"revision 3 moved"}}`},
	{&Exec{ID: 2, Code: "x = 1", Servers: []Server{}, Discovered: []DiscoveredServer{}, Checkpoint: 64 << 20},
		`{"t":"exec","id":2,"code":"x = 1","servers":[],"discovered":[],"limit":0,"checkpoint":67108864}`},
	{&Checkpoint{Exec: 2, Chunks: map[string][]byte{"c1": []byte("pickle")}, Last: true, Manifest: json.RawMessage(`{"v":1}`)},
		"\x00\x00\x00\x00\x54" + `{"t":"checkpoint","id":2,"blobs":[{"id":"c1","n":6}],"last":true,"manifest":{"v":1}}` + "pickle"},
	{&Checkpoint{Exec: 3, Last: true, Error: "the session's state is 70.0 MiB, over the 64.0 MiB checkpoint limit"},
		`{"t":"checkpoint","id":3,"last":true,"error":"the session's state is 70.0 MiB, over the 64.0 MiB checkpoint limit"}`},
	{&Checkpointed{Exec: 2, OK: true}, `{"t":"checkpointed","id":2,"ok":true}`},
	{&Done{Exec: 4, OK: true, Files: []OutFile{{Path: "out/a.png", Bytes: 3, MIME: "image/png"}}, FilesMore: 2},
		`{"t":"done","id":4,"ok":true,"exit":0,"files":[{"path":"out/a.png","bytes":3,"mime":"image/png"}],"files_more":2}`},
	{&Exec{ID: 3, Code: "x", Servers: []Server{}, Discovered: []DiscoveredServer{}, Checkpoint: 8, Workspace: 9, Display: &DisplayLimits{Side: 1568, Bytes: 524288}, Budget: 40000},
		`{"t":"exec","id":3,"code":"x","servers":[],"discovered":[],"limit":0,"checkpoint":8,"workspace":9,"display":{"side":1568,"bytes":524288},"budget":40000}`},
	{&Restored{Report: RestoreReport{Restored: []string{}, Files: []string{"/workspace/a"}, Failed: []LostName{}, Unsaved: []LostName{}}},
		`{"t":"restored","report":{"restored":[],"files":["/workspace/a"],"failed":[],"unsaved":[]}}`},
	{&Display{Exec: 3, MIME: "image/png", Width: 2, Height: 1, Chunks: map[string][]byte{"image": []byte("\x89PNG")}},
		"\x00\x00\x00\x00\x54" + `{"t":"display","id":3,"mime":"image/png","w":2,"h":1,"blobs":[{"id":"image","n":4}]}` + "\x89PNG"},
	{&Restore{Chunks: map[string][]byte{"c1": []byte("pickle")}, Last: true, Manifest: json.RawMessage(`{"v":1}`)},
		"\x00\x00\x00\x00\x4a" + `{"t":"restore","blobs":[{"id":"c1","n":6}],"last":true,"manifest":{"v":1}}` + "pickle"},
	{&Restore{Chunks: map[string][]byte{"c1": []byte("pickle")}, Last: true, Manifest: json.RawMessage(`{"v":1}`),
		SavedTools: []SavedTool{{Name: "f", Source: "def f():\n    pass\n"}}},
		"\x00\x00\x00\x00\x96" + `{"t":"restore","blobs":[{"id":"c1","n":6}],"last":true,"manifest":{"v":1},` +
			`"saved_tools":[{"name":"f","docstring":"","source":"def f():\n    pass\n"}]}` + "pickle"},
	{&Restored{Report: RestoreReport{Restored: []string{"x"}, Failed: []LostName{}, Unsaved: []LostName{{Name: "f", Type: "open file", Why: "TypeError: cannot pickle"}}}},
		`{"t":"restored","report":{"restored":["x"],"failed":[],"unsaved":[{"name":"f","type":"open file","why":"TypeError: cannot pickle"}]}}`},
}

func TestWireFormat(t *testing.T) {
	t.Parallel()
	for _, ex := range wireExamples {
		t.Run(ex.msg.Type(), func(t *testing.T) {
			t.Parallel()
			body, err := Encode(ex.msg)
			if err != nil || string(body) != ex.body {
				t.Errorf("Encode = %s, %v\nwant %s", body, err, ex.body)
			}
			got, err := Decode([]byte(ex.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(ex.msg, got); diff != "" {
				t.Errorf("Decode differs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEveryTypeHasAnExample(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, ex := range wireExamples {
		seen[ex.msg.Type()] = true
	}
	for typ := range messageTypes {
		if !seen[typ] {
			t.Errorf("message type %q has no wire example", typ)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("é", 3<<20) // multi-byte text well past any line limit
	msgs := []Message{
		&Exec{ID: 1, Code: "print(1)", Servers: []Server{}, Discovered: []DiscoveredServer{}, Limit: 10},
		&Out{Exec: 1, Stream: "stdout", Data: big},
		&Reply{ID: 7, Error: &Error{Code: CodeNotFound, Message: "nope"}},
		&Done{Exec: 1, OK: true, Dropped: map[string]int64{"stdout": 5}},
	}
	var buf bytes.Buffer
	w := New(nil, &buf)
	for _, m := range msgs {
		if err := w.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	r := New(&buf, nil)
	for _, want := range msgs {
		got, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("message differs (-want +got):\n%s", diff[:min(len(diff), 500)])
		}
	}
	if _, err := r.Read(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}

func TestUnknownTypesReadOn(t *testing.T) {
	t.Parallel()
	in := append(frame(`{"t":"snapshot","id":1,"blob":"x"}`), frame(`{"t":"out","id":1,"s":"stdout","d":"x","new":1}`)...)
	r := New(bytes.NewReader(in), nil)
	m, err := r.Read()
	if u, ok := m.(*Unknown); err != nil || !ok || u.Type() != "snapshot" {
		t.Fatalf("Read() = %#v, %v; want *Unknown of type snapshot", m, err)
	}
	// A field the type does not have is ignored.
	m, err = r.Read()
	if diff := cmp.Diff(Message(&Out{Exec: 1, Stream: "stdout", Data: "x"}), m); err != nil || diff != "" {
		t.Fatalf("Read() = %v, %v; (-want +got):\n%s", m, err, diff)
	}
	if err := New(nil, io.Discard).Write(&Unknown{T: "checkpoint"}); err == nil {
		t.Error("writing an Unknown message succeeded")
	}
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	tooBig := make([]byte, 4)
	binary.BigEndian.PutUint32(tooBig, MaxFrameBytes+1)
	for _, tc := range []struct {
		name  string
		input []byte
		want  string
	}{
		{"frame over the cap", tooBig, "too large"},
		{"eof inside header", []byte{0, 0}, "inside a frame header"},
		{"eof inside body", frame(`{"t":"out"}`)[:8], "inside a 11-byte frame"},
		{"not json", frame(`hello`), "bad frame"},
		{"not an object", frame(`[1]`), "bad frame"},
		{"no type", frame(`{"id":3}`), "missing message type"},
		{"null", frame(`null`), "missing message type"},
		{"type not a string", frame(`{"t":5}`), "bad frame"},
		{"field of the wrong type", frame(`{"t":"out","id":"one"}`), "bad frame from sandbox: out frame"},
		{"trailing data", frame(`{"t":"out"} {}`), "bad frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(bytes.NewReader(tc.input), nil).Read()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read() error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// Concurrent writers never interleave frames.
func TestConcurrentWritesStayFramed(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	half := func(p []byte) int {
		mu.Lock()
		defer mu.Unlock()
		n, _ := buf.Write(p)
		return n
	}
	w := New(nil, writerFunc(func(p []byte) (int, error) {
		// Each half is written on its own, as a pipe may split a large
		// write, so only Conn's frame lock keeps frames whole.
		n1 := half(p[:len(p)/2])
		runtime.Gosched()
		return n1 + half(p[len(p)/2:]), nil
	}))
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for range 50 {
				_ = w.Write(&Out{Exec: int64(i), Data: strings.Repeat("x", i*100)})
			}
		})
	}
	wg.Wait()
	r := New(&buf, nil)
	for n := 0; ; n++ {
		m, err := r.Read()
		if errors.Is(err, io.EOF) {
			if n != 16*50 {
				t.Fatalf("read %d frames, want %d", n, 16*50)
			}
			return
		}
		if err != nil {
			t.Fatalf("frame %d: %v", n, err)
		}
		if out := m.(*Out); len(out.Data) != int(out.Exec)*100 {
			t.Fatalf("frame %d corrupted", n)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A blob frame must hold exactly the blobs it lists; anything else is
// refused, saying what is wrong.
func TestBlobFrameErrors(t *testing.T) {
	t.Parallel()
	blob := func(js, tail string) string {
		return "\x00" + string([]byte{byte(len(js) >> 24), byte(len(js) >> 16), byte(len(js) >> 8), byte(len(js))}) + js + tail
	}
	for _, tc := range []struct{ name, body, want string }{
		{"short header", "\x00\x00\x00", "too short"},
		{"JSON longer than the frame", "\x00\x00\x00\x01\x00{}", "JSON announced"},
		{"blobs listed, none sent", `{"t":"restore","blobs":[{"id":"a","n":1}]}`, "frame of JSON alone"},
		{"blob bytes no entry names", blob(`{"t":"restore"}`, "x"), "no blob entry names"},
		{"a blob past the end", blob(`{"t":"restore","blobs":[{"id":"a","n":2}]}`, "x"), "runs past"},
		{"a negative size", blob(`{"t":"restore","blobs":[{"id":"a","n":-1}]}`, "x"), "runs past"},
		{"bytes after the last blob", blob(`{"t":"checkpoint","blobs":[{"id":"a","n":1}]}`, "xy"), "after the last"},
		{"one id twice", blob(`{"t":"checkpoint","blobs":[{"id":"a","n":1},{"id":"a","n":1}]}`, "xy"), "listed twice"},
		{"no id", blob(`{"t":"checkpoint","blobs":[{"n":1}]}`, "x"), "no id"},
		{"blobs on a type without chunks", blob(`{"t":"out","id":1,"s":"stdout","d":"x"}`, ""), "carries no blobs"},
	} {
		m, err := Decode([]byte(tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Decode = %v, %v; want an error saying %q", tc.name, m, err, tc.want)
		}
	}
	// Chunks are raw bytes of any value, a zero byte and invalid UTF-8
	// included, and share the frame's memory rather than being copied.
	body := blob(`{"t":"restore","blobs":[{"id":"b","n":3},{"id":"a","n":2}],"last":true}`, "\x00\xff\x01\xfe{")
	m, err := Decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	r := m.(*Restore)
	if string(r.Chunks["b"]) != "\x00\xff\x01" || string(r.Chunks["a"]) != "\xfe{" || r.Blobs != nil {
		t.Errorf("Decode = %+v", r)
	}
}
