package channel

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRequestsHaveDistinctMethods(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, r := range Requests() {
		if reflect.TypeOf(r).Kind() != reflect.Pointer || r.Method() == "" || seen[r.Method()] {
			t.Errorf("request %T: method %q is empty or taken, or the request not a pointer", r, r.Method())
		}
		seen[r.Method()] = true
	}
}

func TestDecodeParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		params string
		req    Request
		want   Request
		err    string
	}{
		{`{"server":"fs","tool":"read","arguments":{"p":1}}`, &CallToolRequest{},
			&CallToolRequest{Server: "fs", Tool: "read", Arguments: json.RawMessage(`{"p":1}`)}, ""},
		{`{"server":"fs","detail":"full"}`, &QueryToolDocsRequest{}, &QueryToolDocsRequest{Server: "fs", Detail: "full"}, ""},
		{``, &ListServersRequest{}, &ListServersRequest{}, ""},
		{` null `, &ListMemoriesRequest{}, &ListMemoriesRequest{}, ""},
		{`{"key":"k","revision":-1}`, &UpdateMemoryRequest{}, nil, "bad parameters for memory.update: json: cannot unmarshal number -1"},
		{`{"key":"k","value":1,"meta":{}}`, &SaveMemoryRequest{}, nil, `bad parameters for memory.save: json: unknown field "meta"`},
		{`{"name":"f"}]`, &DeleteSavedToolRequest{}, nil, "bad parameters for tool.delete: data after the parameters object"},
		{`{"name":`, &DeleteSavedToolRequest{}, nil, "bad parameters for tool.delete: unexpected EOF"},
	} {
		t.Run(fmt.Sprintf("%s %s", tc.req.Method(), tc.params), func(t *testing.T) {
			t.Parallel()
			err := DecodeParams(json.RawMessage(tc.params), tc.req)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("DecodeParams error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tc.req); diff != "" {
				t.Errorf("DecodeParams (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAsError(t *testing.T) {
	t.Parallel()
	coded := Errorf(CodeConflict, "revision %d moved", 3)
	for _, tc := range []struct {
		err  error
		want *Error
	}{
		{coded, coded},
		{fmt.Errorf("update: %w", coded), coded},
		{errors.New("boom"), &Error{Code: CodeInternal, Message: "boom"}},
	} {
		if diff := cmp.Diff(tc.want, AsError(tc.err)); diff != "" {
			t.Errorf("AsError(%v) (-want +got):\n%s", tc.err, diff)
		}
	}
	if coded.Error() != "revision 3 moved" {
		t.Errorf("Error() = %q, want the message alone", coded.Error())
	}
}

func TestReplyTo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		result json.RawMessage
		err    error
		want   *Reply
	}{
		{"result", json.RawMessage(`[1]`), nil, &Reply{ID: 9, Result: json.RawMessage(`[1]`)}},
		{"no result is null", nil, nil, &Reply{ID: 9, Result: json.RawMessage(`null`)}},
		{"coded error", json.RawMessage(`[1]`), Errorf(CodeNotFound, "gone"), &Reply{ID: 9, Error: &Error{Code: CodeNotFound, Message: "gone"}}},
		{"plain error", nil, errors.New("boom"), &Reply{ID: 9, Error: &Error{Code: CodeInternal, Message: "boom"}}},
	} {
		if diff := cmp.Diff(tc.want, ReplyTo(9, tc.result, tc.err)); diff != "" {
			t.Errorf("%s: ReplyTo (-want +got):\n%s", tc.name, diff)
		}
	}
}
