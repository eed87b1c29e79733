package memoryd_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

// errCase is one row of an RPC's error table.
type errCase struct {
	name string
	call func(ctx context.Context, e *env) error
	code codes.Code
	want string // substring of the status message
}

func runErrTable(t *testing.T, cases []errCase) {
	t.Helper()
	eachStore(t, func(t *testing.T, cfg memoryd.Config) { runErrCases(t, cfg, cases) })
}

func runErrCases(t *testing.T, cfg memoryd.Config, cases []errCase) {
	cfg.MaxValueBytes = 64
	e := start(t, cfg)
	e.save(t, "", "present", `{"a":1}`, `{"m":true}`)
	if _, err := e.tools.SaveTool(t.Context(), &memoryv1.SaveToolRequest{Name: "present", Source: "def present():\n    pass\n"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(t.Context(), e)
			st := status.Convert(err)
			if st.Code() != tc.code {
				t.Fatalf("code = %v (%q), want %v", st.Code(), st.Message(), tc.code)
			}
			if !strings.Contains(st.Message(), tc.want) {
				t.Errorf("message %q does not contain %q", st.Message(), tc.want)
			}
		})
	}
}

func TestSaveMemoryError(t *testing.T) {
	t.Parallel()
	save := func(tenant, key, value, meta string) func(context.Context, *env) error {
		return func(ctx context.Context, e *env) error {
			_, err := e.mem.SaveMemory(ctx, &memoryv1.SaveMemoryRequest{Tenant: tenant, Key: key, ValueJson: value, MetadataJson: meta})
			return err
		}
	}
	runErrTable(t, []errCase{
		{"ok", save("", "k", `1`, ""), codes.OK, ""},
		{"empty key", save("", "", `1`, ""), codes.InvalidArgument, "key is empty"},
		{"key 2048 bytes", save("", strings.Repeat("k", 2048), `1`, ""), codes.OK, ""},
		{"key 2049 bytes", save("", strings.Repeat("k", 2049), `1`, ""), codes.InvalidArgument, "key is 2049 bytes long; at most 2048 bytes are allowed"},
		{"tenant 257 bytes", save(strings.Repeat("t", 257), "k", `1`, ""), codes.InvalidArgument, "tenant is 257 bytes"},
		{"empty value", save("", "k", "", ""), codes.InvalidArgument, "value_json is empty"},
		{"bad json", save("", "k", `{"a":}`, ""), codes.InvalidArgument, "value_json is not valid JSON: invalid character '}'"},
		{"truncated json", save("", "k", `[1,2`, ""), codes.InvalidArgument, "unexpected end of input"},
		{"two values", save("", "k", `1 2`, ""), codes.InvalidArgument, "extra data after its first JSON value"},
		{"python repr", save("", "k", `{'a': 1}`, ""), codes.InvalidArgument, "not valid JSON"},
		{"metadata not object", save("", "k", `1`, `[1]`), codes.InvalidArgument, "metadata_json must be a JSON object"},
		{"metadata bad json", save("", "k", `1`, `{`), codes.InvalidArgument, "metadata_json is not valid JSON"},
		{"value over cap", save("", "k", `"`+strings.Repeat("x", 63)+`"`, ""), codes.InvalidArgument, "value_json is 65 bytes; the limit is 64 bytes: keep less in one (split a large value over several keys), or raise the limit with CODEEXEC_MEMORY_MAX_VALUE"},
		{"value at cap", save("", "k", `"`+strings.Repeat("x", 62)+`"`, ""), codes.OK, ""},
	})
}

func TestSaveMemoryTimesError(t *testing.T) {
	t.Parallel()
	save := func(create, update *timestamppb.Timestamp) func(context.Context, *env) error {
		return func(ctx context.Context, e *env) error {
			_, err := e.mem.SaveMemory(ctx, &memoryv1.SaveMemoryRequest{Key: "k", ValueJson: "1", CreateTime: create, UpdateTime: update})
			return err
		}
	}
	at := func(sec int64) *timestamppb.Timestamp { return &timestamppb.Timestamp{Seconds: sec} }
	runErrTable(t, []errCase{
		{"both", save(at(1), at(2)), codes.OK, ""},
		{"equal", save(at(5), at(5)), codes.OK, ""},
		{"create only", save(at(1), nil), codes.OK, ""},
		{"update only", save(nil, at(1)), codes.OK, ""},
		{"update before create", save(at(2), at(1)), codes.InvalidArgument, "update_time 1970-01-01T00:00:01Z is before create_time 1970-01-01T00:00:02Z"},
		{"create beyond the store's range", save(at(1<<40), nil), codes.InvalidArgument, "create_time (1099511627776 seconds since 1970) is out of range; use a time between the years 1678 and 2261"},
		{"invalid nanos", save(&timestamppb.Timestamp{Nanos: -1}, nil), codes.InvalidArgument, "create_time (0 seconds since 1970) is out of range"},
	})
}

func TestGetMemoryError(t *testing.T) {
	t.Parallel()
	get := func(tenant, key string) func(context.Context, *env) error {
		return func(ctx context.Context, e *env) error {
			_, err := e.mem.GetMemory(ctx, &memoryv1.GetMemoryRequest{Tenant: tenant, Key: key})
			return err
		}
	}
	runErrTable(t, []errCase{
		{"ok", get("", "present"), codes.OK, ""},
		{"default tenant by name", get("default", "present"), codes.OK, ""},
		{"missing", get("", "absent"), codes.NotFound, `no memory "absent"`},
		{"other tenant", get("other", "present"), codes.NotFound, "no memory"},
		{"empty key", get("", ""), codes.InvalidArgument, "key is empty"},
		{"key too long", get("", strings.Repeat("é", 1025)), codes.InvalidArgument, "2050 bytes long; at most 2048"},
	})
}

func TestUpdateMemoryError(t *testing.T) {
	t.Parallel()
	update := func(key, value string, rev uint64) func(context.Context, *env) error {
		return func(ctx context.Context, e *env) error {
			_, err := e.mem.UpdateMemory(ctx, &memoryv1.UpdateMemoryRequest{Key: key, ValueJson: value, ExpectedRevision: rev})
			return err
		}
	}
	runErrTable(t, []errCase{
		{"stale revision", update("present", `2`, 7), codes.Aborted, `conflict: "present" is at revision 1, not 7`},
		{"create expected absent but exists", update("present", `2`, 0), codes.Aborted, "conflict"},
		{"absent but revision given", update("absent", `2`, 3), codes.Aborted, "conflict: \"absent\" no longer exists"},
		{"bad json", update("present", `nope`, 1), codes.InvalidArgument, "not valid JSON"},
		{"empty key", update("", `1`, 0), codes.InvalidArgument, "key is empty"},
		{"too large", update("present", `"`+strings.Repeat("x", 100)+`"`, 1), codes.InvalidArgument, "limit is 64 bytes"},
		{"create new with revision 0", update("fresh", `1`, 0), codes.OK, ""},
	})
}

func TestDeleteMemoryError(t *testing.T) {
	t.Parallel()
	del := func(key string) func(context.Context, *env) error {
		return func(ctx context.Context, e *env) error {
			_, err := e.mem.DeleteMemory(ctx, &memoryv1.DeleteMemoryRequest{Key: key})
			return err
		}
	}
	runErrTable(t, []errCase{
		{"missing is not an error", del("absent"), codes.OK, ""},
		{"empty key", del(""), codes.InvalidArgument, "key is empty"},
	})
}

func TestListMemoriesError(t *testing.T) {
	t.Parallel()
	list := func(tenant string) func(context.Context, *env) error {
		return func(ctx context.Context, e *env) error {
			_, err := e.mem.ListMemories(ctx, &memoryv1.ListMemoriesRequest{Tenant: tenant})
			return err
		}
	}
	runErrTable(t, []errCase{
		{"ok", list(""), codes.OK, ""},
		{"unknown tenant is empty, not an error", list("nobody"), codes.OK, ""},
		{"tenant too long", list(strings.Repeat("t", 300)), codes.InvalidArgument, "tenant is 300 bytes"},
	})
}

func TestToolError(t *testing.T) {
	t.Parallel()
	saveTool := func(name, source string) func(context.Context, *env) error {
		return func(ctx context.Context, e *env) error {
			_, err := e.tools.SaveTool(ctx, &memoryv1.SaveToolRequest{Name: name, Source: source})
			return err
		}
	}
	runErrTable(t, []errCase{
		{"save ok", saveTool("f", "def f(): pass"), codes.OK, ""},
		{"save unicode identifier", saveTool("größe", "def größe(): pass"), codes.OK, ""},
		{"save empty name", saveTool("", "def f(): pass"), codes.InvalidArgument, "tool name is empty"},
		{"save not identifier", saveTool("my-tool", "def f(): pass"), codes.InvalidArgument, "not a Python identifier"},
		{"save leading digit", saveTool("1f", "def f(): pass"), codes.InvalidArgument, "not a Python identifier"},
		{"save empty source", saveTool("f", ""), codes.InvalidArgument, "source of tool \"f\" is empty"},
		{"save source too large", saveTool("f", strings.Repeat("#", 65)), codes.InvalidArgument, "source is 65 bytes; the limit is 64"},
		{"get missing", func(ctx context.Context, e *env) error {
			_, err := e.tools.GetTool(ctx, &memoryv1.GetToolRequest{Name: "absent"})
			return err
		}, codes.NotFound, `no tool "absent"`},
		{"get bad name", func(ctx context.Context, e *env) error {
			_, err := e.tools.GetTool(ctx, &memoryv1.GetToolRequest{Name: "a b"})
			return err
		}, codes.InvalidArgument, "not a Python identifier"},
		{"delete missing is not an error", func(ctx context.Context, e *env) error {
			_, err := e.tools.DeleteTool(ctx, &memoryv1.DeleteToolRequest{Name: "absent"})
			return err
		}, codes.OK, ""},
		{"list other tenant", func(ctx context.Context, e *env) error {
			_, err := e.tools.ListTools(ctx, &memoryv1.ListToolsRequest{Tenant: "other"})
			return err
		}, codes.OK, ""},
	})
}
