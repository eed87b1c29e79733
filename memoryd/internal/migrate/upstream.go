package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/memoryd/internal/pysplit"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Report says what ImportUpstream took and what it left behind.
type Report struct {
	// Memories are the keys imported, in file-name order.
	Memories []string
	// Tools are the tool names imported, in source order.
	Tools []string
	// Skipped lists everything not imported, with the reason.
	Skipped []Skipped
}

// Skipped is one item ImportUpstream did not import.
type Skipped struct {
	// Path is the file the item came from.
	Path string
	// Item is the key, tool name or "line N" that was skipped; empty when
	// the whole file was.
	Item string
	// Reason says why, in words a user can act on.
	Reason string
}

// String renders the report for a terminal.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "imported %d memories and %d tools; skipped %d\n", len(r.Memories), len(r.Tools), len(r.Skipped))
	for _, s := range r.Skipped {
		item := s.Item
		if item != "" {
			item = " " + item
		}
		fmt.Fprintf(&b, "  skipped %s%s: %s\n", s.Path, item, s.Reason)
	}
	return b.String()
}

// upstreamRecord is one file of upstream's ~/MCPs/user_tools/memory.
type upstreamRecord struct {
	Key      *string         `json:"key"`
	Value    json.RawMessage `json:"value"`
	Metadata json.RawMessage `json:"metadata"`
	// CreatedAt and UpdatedAt are seconds since 1970, as Python's
	// time.time() gives them.
	CreatedAt json.RawMessage `json:"created_at"`
	UpdatedAt json.RawMessage `json:"updated_at"`
}

// times converts the record's epoch seconds. A time that is missing or not
// a number is left nil, so that memoryd uses the time of the import; an
// update time before the create time (a clock that went back) is raised to
// it.
func (r upstreamRecord) times() (created, updated *timestamppb.Timestamp) {
	created, updated = epochTime(r.CreatedAt), epochTime(r.UpdatedAt)
	if created != nil && updated != nil && updated.AsTime().Before(created.AsTime()) {
		updated = created
	}
	return created, updated
}

// pySpace reports whether Python's str.strip() strips r: Unicode white
// space, and the separators U+001C to U+001F.
func pySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

func epochTime(raw json.RawMessage) *timestamppb.Timestamp {
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	sec := math.Floor(f)
	nanos := math.Round((f - sec) * 1e9)
	if nanos >= 1e9 {
		sec, nanos = sec+1, 0
	}
	return &timestamppb.Timestamp{Seconds: int64(sec), Nanos: int32(nanos)}
}

// ImportUpstream copies the state of an upstream install (dir is its
// MCP_BRIDGE_STATE_DIR, ~/MCPs by default) into memoryd for tenant:
// dir/user_tools/memory/*.json become memories and the functions of
// dir/user_tools/user_tools.py become tools. Records and tools that
// already exist in memoryd are left alone, so running it twice is safe.
// Module-level imports of user_tools.py are prepended to every tool, since
// the functions were written against them. Memories keep upstream's
// created_at and updated_at; tools, which upstream keeps no times for, get
// the time of the import. Items that memoryd refuses (bad JSON, a key over
// the limit, ...) are skipped with the reason; transport errors abort the
// import. The upstream files are only read.
func ImportUpstream(ctx context.Context, mem memoryv1.MemoryServiceClient, tools memoryv1.ToolServiceClient, dir, tenant string) (Report, error) {
	var rep Report
	base := filepath.Join(dir, "user_tools")
	memDir := filepath.Join(base, "memory")
	toolsFile := filepath.Join(base, "user_tools.py")
	_, errMem := os.Stat(memDir)
	_, errTools := os.Stat(toolsFile)
	if errors.Is(errMem, fs.ErrNotExist) && errors.Is(errTools, fs.ErrNotExist) {
		return rep, fmt.Errorf("no upstream state in %s: expected %s/*.json or %s", dir, memDir, toolsFile)
	}
	if err := importMemories(ctx, mem, memDir, tenant, &rep); err != nil {
		return rep, err
	}
	if err := importTools(ctx, tools, toolsFile, tenant, &rep); err != nil {
		return rep, err
	}
	return rep, nil
}

func importMemories(ctx context.Context, mem memoryv1.MemoryServiceClient, memDir, tenant string, rep *Report) error {
	paths, err := filepath.Glob(filepath.Join(memDir, "*.json"))
	if err != nil {
		return err
	}
	sort.Strings(paths)
	for _, path := range paths {
		skip := func(item, reason string) {
			rep.Skipped = append(rep.Skipped, Skipped{Path: path, Item: item, Reason: reason})
		}
		data, err := os.ReadFile(path)
		if err != nil {
			skip("", "cannot read: "+err.Error())
			continue
		}
		var rec upstreamRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			skip("", "bad JSON: "+err.Error())
			continue
		}
		switch {
		case rec.Key == nil:
			skip("", `missing "key"`)
			continue
		case rec.Value == nil:
			skip(*rec.Key, `missing "value"`)
			continue
		}
		// Upstream named the file after the stripped key, so " a " and
		// "a" were one memory there; the sandbox's helpers strip keys too.
		key := strings.TrimFunc(*rec.Key, pySpace)
		if key == "" {
			skip(*rec.Key, `"key" is blank`)
			continue
		}
		rec.Key = &key
		var value, meta bytes.Buffer
		_ = json.Compact(&value, rec.Value) // already validated by Unmarshal
		metaText := "{}"
		if m := bytes.TrimSpace(rec.Metadata); len(m) > 0 && !bytes.Equal(m, []byte("null")) {
			if m[0] != '{' {
				skip(*rec.Key, `"metadata" is not a JSON object`)
				continue
			}
			_ = json.Compact(&meta, m)
			metaText = meta.String()
		}
		_, err = mem.GetMemory(ctx, &memoryv1.GetMemoryRequest{Tenant: tenant, Key: *rec.Key})
		if err == nil {
			skip(*rec.Key, "already in memoryd; not overwritten")
			continue
		}
		if status.Code(err) != codes.NotFound {
			if refused(err) {
				skip(*rec.Key, status.Convert(err).Message())
				continue
			}
			return fmt.Errorf("import %s: %w", path, err)
		}
		created, updated := rec.times()
		_, err = mem.SaveMemory(ctx, &memoryv1.SaveMemoryRequest{Tenant: tenant, Key: *rec.Key, ValueJson: value.String(), MetadataJson: metaText,
			CreateTime: created, UpdateTime: updated})
		if refused(err) {
			skip(*rec.Key, status.Convert(err).Message())
			continue
		}
		if err != nil {
			return fmt.Errorf("import %s: %w", path, err)
		}
		rep.Memories = append(rep.Memories, *rec.Key)
	}
	return nil
}

func importTools(ctx context.Context, tools memoryv1.ToolServiceClient, path, tenant string, rep *Report) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		rep.Skipped = append(rep.Skipped, Skipped{Path: path, Reason: "cannot read: " + err.Error()})
		return nil //nolint:nilerr // an unreadable file is reported and skipped, as a bad entry is
	}
	funcs, others := pysplit.Split(string(data))
	var imports strings.Builder
	for _, o := range others {
		if o.Import {
			imports.WriteString(o.Source)
			continue
		}
		first, _, _ := strings.Cut(o.Source, "\n")
		rep.Skipped = append(rep.Skipped, Skipped{Path: path, Item: fmt.Sprintf("line %d", o.Line),
			Reason: fmt.Sprintf("top-level statement that is not a function (%q); saved tools are functions only", first)})
	}
	prefix := imports.String()
	if prefix != "" {
		prefix += "\n\n"
	}
	// Upstream appended every save, so a name may appear several times;
	// the last definition is the one Python would have kept.
	last := map[string]int{}
	for i, f := range funcs {
		last[f.Name] = i
	}
	for i, f := range funcs {
		if last[f.Name] != i {
			rep.Skipped = append(rep.Skipped, Skipped{Path: path, Item: fmt.Sprintf("%s (line %d)", f.Name, f.Line),
				Reason: fmt.Sprintf("replaced by a later definition at line %d", funcs[last[f.Name]].Line)})
			continue
		}
		_, err := tools.GetTool(ctx, &memoryv1.GetToolRequest{Tenant: tenant, Name: f.Name})
		if err == nil {
			rep.Skipped = append(rep.Skipped, Skipped{Path: path, Item: f.Name, Reason: "already in memoryd; not overwritten"})
			continue
		}
		if status.Code(err) == codes.NotFound {
			_, err = tools.SaveTool(ctx, &memoryv1.SaveToolRequest{Tenant: tenant, Name: f.Name, Source: prefix + f.Source, Docstring: f.Doc})
		}
		if refused(err) {
			rep.Skipped = append(rep.Skipped, Skipped{Path: path, Item: f.Name, Reason: status.Convert(err).Message()})
			continue
		}
		if err != nil {
			return fmt.Errorf("import tool %s from %s: %w", f.Name, path, err)
		}
		rep.Tools = append(rep.Tools, f.Name)
	}
	return nil
}

// refused reports whether memoryd rejected the item itself, as opposed to
// failing to answer.
func refused(err error) bool {
	c := status.Code(err)
	return c == codes.InvalidArgument || c == codes.Aborted || c == codes.FailedPrecondition
}

// HasUpstreamState reports whether dir, an upstream state dir, holds
// memories or saved tools: dir/user_tools/memory or
// dir/user_tools/user_tools.py.
func HasUpstreamState(dir string) bool {
	for _, p := range []string{filepath.Join(dir, "user_tools", "memory"), filepath.Join(dir, "user_tools", "user_tools.py")} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// ImportUpstreamOnFirstStart imports the upstream state in dir into tenant
// as ImportUpstream does, for a database this start created, so that an
// upstream user's memory and tools are there from the first call. It logs
// what it imported, at info, and each item it skipped, at warn. A failure
// is logged and returned; the caller carries on without the state, which
// `codeexec import-upstream` can bring in later. The upstream files are
// only read.
func ImportUpstreamOnFirstStart(ctx context.Context, mem memoryv1.MemoryServiceClient, tools memoryv1.ToolServiceClient, dir, tenant string, logger *slog.Logger) error {
	rep, err := ImportUpstream(ctx, mem, tools, dir, tenant)
	for _, s := range rep.Skipped {
		logger.WarnContext(ctx, "upstream state: item not imported", slog.String("path", s.Path), slog.String("item", s.Item), slog.String("reason", s.Reason))
	}
	if err != nil {
		logger.ErrorContext(ctx, "importing upstream state on first start failed; run `codeexec import-upstream` to try again",
			slog.String("dir", dir), slog.Int("memories", len(rep.Memories)), slog.Int("tools", len(rep.Tools)), slog.String(logkeys.Error, err.Error()))
		return err
	}
	logger.InfoContext(ctx, "imported upstream state on first start (its files are left unchanged)",
		slog.String("dir", dir), slog.String(logkeys.Tenant, tenant),
		slog.Int("memories", len(rep.Memories)), slog.Int("tools", len(rep.Tools)), slog.Int("skipped", len(rep.Skipped)))
	return nil
}
