package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/services/logkeys"
)

// maxSchemas bounds the compiled schemas kept; past it the cache starts
// over, as tool schemas change rarely and a session uses few tools.
const maxSchemas = 1024

// schemaURL names the one resource each compile holds.
const schemaURL = "mem:///tool-input.json"

// schemas compiles tool input schemas once each and checks arguments
// against them. The zero value is ready to use.
type schemas struct {
	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema // by schema text
	broken   map[string]bool               // schema text that did not compile, logged once
}

// noLoader refuses every reference outside the schema itself: a schema
// comes from an MCP server, which must not make sandboxd read files or
// fetch URLs.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema reference %s: only references within the schema are followed", url)
}

// schema returns the compiled schema of text, or nil when it does not
// compile (logged once per schema text, with the tool that had it).
func (s *schemas) schema(logger *slog.Logger, server, tool string, text []byte) *jsonschema.Schema {
	key := string(text)
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.compiled[key]; ok {
		return sch
	}
	if s.broken[key] {
		return nil
	}
	sch, err := compile(text)
	if err != nil {
		if s.broken == nil || len(s.broken) >= maxSchemas {
			s.broken = map[string]bool{}
		}
		s.broken[key] = true
		logger.Warn("tool input schema does not compile; its calls go to the server unchecked",
			logkeys.MCPServer, server, logkeys.MCPTool, tool, logkeys.Error, err)
		return nil
	}
	if s.compiled == nil || len(s.compiled) >= maxSchemas {
		s.compiled = map[string]*jsonschema.Schema{}
	}
	s.compiled[key] = sch
	return sch
}

func compile(text []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

// checkArguments checks a call's arguments against the input schema the
// exec's metadata has for the tool. A tool not in the metadata, or one
// without a schema or whose schema does not compile, is not checked here:
// the server still checks its own arguments.
func (b *Broker) checkArguments(o *origin, server, tool string, args json.RawMessage) error {
	var text json.RawMessage
	for _, s := range o.env.Servers {
		if s.Name != server {
			continue
		}
		for _, t := range s.Tools {
			if t.Name == tool {
				text = t.InputSchema
			}
		}
	}
	if len(bytes.TrimSpace(text)) == 0 {
		return nil
	}
	logger := b.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	sch := b.schemas.schema(logger, server, tool, text)
	if sch == nil {
		return nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return channel.Errorf(channel.CodeInvalidArgument, "arguments of %s are not JSON: %v", tool, err)
	}
	err = sch.Validate(inst)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	var raw map[string]any
	_ = json.Unmarshal(text, &raw)
	problems := describe(ve, raw, nil)
	return channel.Errorf(channel.CodeInvalidArgument, "invalid arguments for tool %s of server %s: %s",
		pyRepr(tool), pyRepr(server), strings.Join(problems, "; "))
}

var printer = message.NewPrinter(language.English)

// describe turns a validation error's leaves into sentences that name the
// argument and what it accepts.
func describe(ve *jsonschema.ValidationError, schema map[string]any, out []string) []string {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			out = describe(c, schema, out)
		}
		return out
	}
	at := ve.InstanceLocation
	var s string
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		parts := make([]string, len(k.Missing))
		for i, m := range k.Missing {
			parts[i] = fieldName(append(slices.Clone(at), m)) + wanted(propertyAt(schema, append(slices.Clone(at), m)))
		}
		s = "missing required argument " + strings.Join(parts, ", ")
	case *kind.AdditionalProperties:
		names := make([]string, len(k.Properties))
		for i, p := range k.Properties {
			names[i] = fieldName(append(slices.Clone(at), p))
		}
		s = "unknown argument " + strings.Join(names, ", ") + accepted(propertyAt(schema, at))
	case *kind.Type:
		s = fmt.Sprintf("argument %s is %s, but must be %s", fieldName(at), article(k.Got), orList(k.Want, article))
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = jsonText(w)
		}
		s = fmt.Sprintf("argument %s is %s; accepted: %s", fieldName(at), jsonText(k.Got), strings.Join(want, ", "))
	default:
		s = fmt.Sprintf("argument %s: %s", fieldName(at), ve.ErrorKind.LocalizedString(printer))
	}
	return append(out, s)
}

// fieldName is an argument's path as the code writes it: 'a', or 'a.b[0]'.
func fieldName(path []string) string {
	if len(path) == 0 {
		return "(the arguments object)"
	}
	var b strings.Builder
	for i, p := range path {
		if n := len(p); n > 0 && strings.Trim(p, "0123456789") == "" {
			b.WriteString("[" + p + "]")
			continue
		}
		if i > 0 {
			b.WriteString(".")
		}
		b.WriteString(p)
	}
	return pyRepr(b.String())
}

// propertyAt walks a raw schema's properties (and array items) along an
// instance path; nil when the path leaves what it describes plainly.
func propertyAt(schema map[string]any, path []string) map[string]any {
	cur := schema
	for _, p := range path {
		if cur == nil {
			return nil
		}
		if props, ok := cur["properties"].(map[string]any); ok {
			if next, ok := props[p].(map[string]any); ok {
				cur = next
				continue
			}
		}
		if items, ok := cur["items"].(map[string]any); ok && strings.Trim(p, "0123456789") == "" {
			cur = items
			continue
		}
		return nil
	}
	return cur
}

// wanted is " (a string)" for a property schema with a type, else "".
func wanted(prop map[string]any) string {
	switch t := prop["type"].(type) {
	case string:
		return " (" + article(t) + ")"
	case []any:
		var ts []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				ts = append(ts, s)
			}
		}
		if len(ts) > 0 {
			return " (" + orList(ts, article) + ")"
		}
	}
	return ""
}

// accepted lists the properties an object schema names.
func accepted(obj map[string]any) string {
	props, _ := obj["properties"].(map[string]any)
	if len(props) == 0 {
		return "; this tool takes no arguments"
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	return "; accepted: " + strings.Join(names, ", ")
}

func article(t string) string {
	switch t {
	case "integer", "object", "array":
		return "an " + t
	case "null":
		return "null"
	}
	return "a " + t
}

func orList(items []string, f func(string) string) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = f(it)
	}
	if len(parts) <= 1 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
