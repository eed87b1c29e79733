package channel

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
)

// FuzzRead feeds arbitrary bytes to the frame reader, as a broken or
// hostile agent could: it must return messages or an error, never panic
// or read past the stream, and every message it returns must write back
// as a frame that reads as the same message.
func FuzzRead(f *testing.F) {
	for _, ex := range wireExamples {
		f.Add(frame(ex.body))
	}
	f.Add(append(frame(`{"t":"ready","python":"3.12.4","pid":1}`), frame(`{"t":"out","id":1,"s":"stderr","d":"x"}`)...))
	f.Add([]byte{0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add(frame(`{"t":"checkpoint"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := New(bytes.NewReader(b), nil)
		for range len(b)/4 + 1 {
			m, err := r.Read()
			if err != nil {
				if errors.Is(err, io.EOF) && r.r.Buffered() != 0 {
					t.Fatalf("EOF with %d bytes unread", r.r.Buffered())
				}
				return
			}
			if _, unknown := m.(*Unknown); unknown {
				continue
			}
			var buf bytes.Buffer
			if err := New(nil, &buf).Write(m); err != nil {
				t.Fatalf("a %s message read from %q does not write: %v", m.Type(), b, err)
			}
			again, err := New(&buf, nil).Read()
			if err != nil {
				t.Fatalf("a %s message written as %q does not read: %v", m.Type(), buf.Bytes(), err)
			}
			stable(t, m, again)
		}
	})
}

// FuzzDecode parses arbitrary frame bodies: Decode must give a message or
// an error, a message's type must be the body's "t", and what it gives
// must encode to a body that decodes to the same message.
func FuzzDecode(f *testing.F) {
	for _, ex := range wireExamples {
		f.Add([]byte(ex.body))
	}
	for _, s := range []string{
		`{"t":"out","t":"call","id":1}`, `{"t":"o\u0075t","d":"\ud800"}`, `{"t":"exec","servers":null,"discovered":[{}]}`,
		`{"t":"done","dropped":{"stdout":-1},"exit":2147483648}`, `{"t":"reply","result":{"a":[1,2,{"b":null}]}}`,
		`{"t":""}`, `{"t":"unknown"}`, `{}`, `[]`, `"t"`, `{"t":"call","p":"text"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := Decode(body)
		if err != nil {
			if m != nil {
				t.Fatalf("Decode(%q) returned a message and the error %v", body, err)
			}
			return
		}
		if m.Type() == "" {
			t.Fatalf("Decode(%q) = a message with no type", body)
		}
		if _, unknown := m.(*Unknown); unknown {
			if messageTypes[m.Type()] != nil {
				t.Fatalf("Decode(%q): known type %q read as Unknown", body, m.Type())
			}
			return
		}
		enc, err := Encode(m)
		if err != nil {
			t.Fatalf("Encode(Decode(%q)): %v", body, err)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(%q))) = %v (encoded %q)", body, err, enc)
		}
		stable(t, m, again)
	})
}

// stable fails unless a and b encode alike. Comparing encodings rather
// than values allows for what JSON normalises on the way (white space
// inside raw fields, an empty map dropped).
func stable(t *testing.T, a, b Message) {
	t.Helper()
	ea, errA := Encode(a)
	eb, errB := Encode(b)
	if errA != nil || errB != nil || !bytes.Equal(ea, eb) {
		t.Fatalf("message changed on a round trip:\n%q (%v)\n%q (%v)", ea, errA, eb, errB)
	}
}

// FuzzDecodeParams reads arbitrary parameters as every method's request:
// DecodeParams must accept or refuse them without a panic, and what it
// accepts must encode to parameters that decode to the same request.
func FuzzDecodeParams(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `{"server":"fs"}`, `{"server":"fs","tool":"read","arguments":{"path":"/x"}}`,
		`{"query":"read a file","limit":5,"detail":"full"}`, `{"key":"k","value":[1,{"a":null}],"metadata":{"m":1}}`,
		`{"key":"k","value":"v","revision":18446744073709551615}`, `{"name":"f","source":"def f(): pass","docstring":""}`,
		`{"server":"fs","extra":1}`, `{"limit":2147483648}`, `{} {}`, `{"key":"\ud800"}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		for _, req := range Requests() {
			if err := DecodeParams(params, req); err != nil {
				continue
			}
			enc, err := json.Marshal(req)
			if err != nil {
				t.Fatalf("%s: %q decoded but does not encode: %v", req.Method(), params, err)
			}
			again := reflect.New(reflect.TypeOf(req).Elem()).Interface().(Request)
			if err := DecodeParams(enc, again); err != nil {
				t.Fatalf("%s: %q decoded, encoded as %q, which does not decode: %v", req.Method(), params, enc, err)
			}
			if enc2, _ := json.Marshal(again); !bytes.Equal(enc, enc2) {
				t.Fatalf("%s: parameters changed on a round trip: %q then %q", req.Method(), enc, enc2)
			}
		}
	})
}
