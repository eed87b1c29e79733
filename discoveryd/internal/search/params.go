package search

import (
	"encoding/json"
	"sort"
	"strings"
)

// ParamsFromSchema extracts what Doc.Params and Doc.ParamText hold from a
// tool's JSON input schema: the names of its top-level properties, sorted,
// and their descriptions joined by spaces in the same order. A schema that
// is not a JSON object, or has no properties, yields nothing; search treats
// parameters as a hint, so a malformed schema is not an error here.
func ParamsFromSchema(schema []byte) (names []string, text string) {
	var s struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return nil, ""
	}
	names = make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		if d := strings.TrimSpace(s.Properties[n].Description); d != "" {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(d)
		}
	}
	return names, b.String()
}
