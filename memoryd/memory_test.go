package memoryd_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

func TestKeysAreStoredExactly(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, cfg memoryd.Config) {
		e := start(t, cfg)
		// Upstream sanitised keys, so "a b", "a_b" and "a/b" collided, and long
		// keys were cut at 100 characters. Every one of these is its own record.
		keys := []string{
			"a b", "a_b", "a/b", "a-b", " a_b", "a_b ", "../etc/passwd", "ключ", "🔑", "日本語のキー",
			"A_B", "a\x00b", "a\nb",
			strings.Repeat("x", 100) + "1", strings.Repeat("x", 100) + "2",
			strings.Repeat("k", 256), strings.Repeat("é", 128), // 256 bytes each
			strings.Repeat("k", 2048), strings.Repeat("é", 1024), // 2,048 bytes each, the limit
		}
		for i, k := range keys {
			e.save(t, "", k, strconv.Itoa(i), "")
		}
		for i, k := range keys {
			got := e.get(t, "", k)
			if got.GetKey() != k {
				t.Errorf("key %q came back as %q", k, got.GetKey())
			}
			if want := strconv.Itoa(i); got.GetValueJson() != want {
				t.Errorf("key %q: value %q, want %q (keys collided?)", k, got.GetValueJson(), want)
			}
		}
		list, err := e.mem.ListMemories(t.Context(), &memoryv1.ListMemoriesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.GetRecords()) != len(keys) {
			t.Errorf("ListMemories returned %d records, want %d", len(list.GetRecords()), len(keys))
		}
		for _, r := range list.GetRecords() {
			if r.GetValueJson() != "" || r.GetValueBytes() == 0 {
				t.Errorf("list record %q: value_json %q, value_bytes %d; want no value and its size", r.GetKey(), r.GetValueJson(), r.GetValueBytes())
			}
		}
	})
}

func TestValuesRoundTripExactly(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, cfg memoryd.Config) {
		e := start(t, cfg)
		values := []string{
			`null`, `true`, `false`, `0`, `-1.5e300`, `12345678901234567890123`, `"text"`, `""`,
			`"\u00e9 é 🔑 \n"`, `[]`, `{}`, `[1, "two", {"three": [3]}]`,
			"{\n  \"pretty\": true,\n  \"keep\": \"whitespace\"\n}",
			`{"a":1,"a":2}`,
		}
		for i, v := range values {
			key := "v" + string(rune('a'+i))
			e.save(t, "", key, v, "")
			if got := e.get(t, "", key).GetValueJson(); got != v {
				t.Errorf("value %q came back as %q", v, got)
			}
		}
	})
}

func TestOverwriteKeepsCreateTimeAndBumpsRevision(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, cfg memoryd.Config) {
		e := start(t, cfg)
		first := e.save(t, "", "k", `1`, `{"source":"a"}`)
		time.Sleep(5 * time.Millisecond)
		second := e.save(t, "", "k", `2`, "")
		if !second.GetCreateTime().AsTime().Equal(first.GetCreateTime().AsTime()) {
			t.Errorf("create_time changed on overwrite: %v → %v", first.GetCreateTime().AsTime(), second.GetCreateTime().AsTime())
		}
		if !second.GetUpdateTime().AsTime().After(first.GetUpdateTime().AsTime()) {
			t.Errorf("update_time did not move: %v → %v", first.GetUpdateTime().AsTime(), second.GetUpdateTime().AsTime())
		}
		if first.GetRevision() != 1 || second.GetRevision() != 2 {
			t.Errorf("revisions = %d, %d; want 1, 2", first.GetRevision(), second.GetRevision())
		}
		// save_memory replaces metadata, as upstream does.
		if second.GetMetadataJson() != "{}" {
			t.Errorf("metadata after save without metadata = %q, want {}", second.GetMetadataJson())
		}
		if diff := cmp.Diff(second, e.get(t, "", "k"), protocmp.Transform()); diff != "" {
			t.Errorf("GetMemory differs from SaveMemory's record (-save +get):\n%s", diff)
		}
		// Deleting resets the history.
		if _, err := e.mem.DeleteMemory(t.Context(), &memoryv1.DeleteMemoryRequest{Key: "k"}); err != nil {
			t.Fatal(err)
		}
		third := e.save(t, "", "k", `3`, "")
		if third.GetRevision() != 1 || !third.GetCreateTime().AsTime().After(first.GetCreateTime().AsTime()) {
			t.Errorf("after delete: revision %d create_time %v; want a new record", third.GetRevision(), third.GetCreateTime().AsTime())
		}
	})
}

func TestUpdateKeepsMetadata(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, cfg memoryd.Config) {
		e := start(t, cfg)
		saved := e.save(t, "", "k", `1`, `{"source": "notes", "tags": ["x"]}`)
		resp, err := e.mem.UpdateMemory(t.Context(), &memoryv1.UpdateMemoryRequest{Key: "k", ValueJson: `2`, ExpectedRevision: saved.GetRevision()})
		if err != nil {
			t.Fatal(err)
		}
		got := resp.GetRecord()
		if got.GetMetadataJson() != `{"source": "notes", "tags": ["x"]}` || got.GetValueJson() != `2` || got.GetRevision() != 2 {
			t.Errorf("after update: %v", got)
		}
		if !got.GetCreateTime().AsTime().Equal(saved.GetCreateTime().AsTime()) {
			t.Errorf("update changed create_time")
		}
		// A second update with the old revision loses.
		_, err = e.mem.UpdateMemory(t.Context(), &memoryv1.UpdateMemoryRequest{Key: "k", ValueJson: `3`, ExpectedRevision: saved.GetRevision()})
		if err == nil || !strings.Contains(err.Error(), "conflict") {
			t.Fatalf("stale update: err = %v, want a conflict", err)
		}
		if v := e.get(t, "", "k").GetValueJson(); v != `2` {
			t.Errorf("value after failed update = %s, want 2", v)
		}
	})
}

func TestTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, cfg memoryd.Config) {
		e := start(t, cfg)
		e.save(t, "alice", "k", `"alice's"`, "")
		e.save(t, "bob", "k", `"bob's"`, "")
		e.save(t, "", "only-default", `1`, "")
		if v := e.get(t, "alice", "k").GetValueJson(); v != `"alice's"` {
			t.Errorf("alice sees %s", v)
		}
		if v := e.get(t, "bob", "k").GetValueJson(); v != `"bob's"` {
			t.Errorf("bob sees %s", v)
		}
		for tenant, want := range map[string][]string{"alice": {"k"}, "bob": {"k"}, "": {"only-default"}, "default": {"only-default"}, "carol": nil} {
			list, err := e.mem.ListMemories(t.Context(), &memoryv1.ListMemoriesRequest{Tenant: tenant})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, r := range list.GetRecords() {
				keys = append(keys, r.GetKey())
			}
			if diff := cmp.Diff(want, keys); diff != "" {
				t.Errorf("tenant %q lists (-want +got):\n%s", tenant, diff)
			}
		}
		resp, err := e.mem.DeleteMemory(t.Context(), &memoryv1.DeleteMemoryRequest{Tenant: "bob", Key: "only-default"})
		if err != nil || resp.GetDeleted() {
			t.Errorf("bob deleted default's record: %v %v", resp, err)
		}
		if _, err := e.tools.SaveTool(t.Context(), &memoryv1.SaveToolRequest{Tenant: "alice", Name: "f", Source: "def f(): pass"}); err != nil {
			t.Fatal(err)
		}
		tools, err := e.tools.ListTools(t.Context(), &memoryv1.ListToolsRequest{Tenant: "bob"})
		if err != nil || len(tools.GetTools()) != 0 {
			t.Errorf("bob sees alice's tools: %v %v", tools, err)
		}
	})
}

func TestToolsReplaceByName(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, cfg memoryd.Config) {
		e := start(t, cfg)
		for _, src := range []string{"def f():\n    return 1\n", "def f():\n    \"\"\"Two.\"\"\"\n    return 2\n"} {
			if _, err := e.tools.SaveTool(t.Context(), &memoryv1.SaveToolRequest{Name: "f", Source: src, Docstring: "doc of " + src[len(src)-2:]}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.tools.SaveTool(t.Context(), &memoryv1.SaveToolRequest{Name: "a", Source: "def a(): pass"}); err != nil {
			t.Fatal(err)
		}
		list, err := e.tools.ListTools(t.Context(), &memoryv1.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.GetTools()) != 2 || list.GetTools()[0].GetName() != "a" || list.GetTools()[1].GetName() != "f" {
			t.Fatalf("tools = %v, want a and f", list.GetTools())
		}
		f := list.GetTools()[1]
		if !strings.Contains(f.GetSource(), "return 2") || f.GetRevision() != 2 {
			t.Errorf("f = %v, want the second source at revision 2", f)
		}
		del, err := e.tools.DeleteTool(t.Context(), &memoryv1.DeleteToolRequest{Name: "f"})
		if err != nil || !del.GetDeleted() {
			t.Errorf("DeleteTool = %v, %v", del, err)
		}
	})
}

func TestDefaultValueCap(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, cfg memoryd.Config) {
		e := start(t, cfg)
		atCap := `"` + strings.Repeat("x", memoryd.DefaultMaxValueBytes-2) + `"`
		rec := e.save(t, "", "big", atCap, "")
		if rec.GetValueBytes() != memoryd.DefaultMaxValueBytes {
			t.Errorf("value_bytes = %d, want %d", rec.GetValueBytes(), memoryd.DefaultMaxValueBytes)
		}
		_, err := e.mem.SaveMemory(t.Context(), &memoryv1.SaveMemoryRequest{Key: "bigger", ValueJson: atCap + " "})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "value_json is 1048577 bytes; the limit is 1048576 bytes") {
			t.Errorf("one byte over the default cap: %v", err)
		}
		if got := e.get(t, "", "big").GetValueJson(); got != atCap {
			t.Errorf("1 MiB value did not round-trip (%d bytes back)", len(got))
		}
	})
}
