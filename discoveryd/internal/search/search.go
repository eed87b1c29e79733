// Package search ranks MCP tool descriptions against a free-text query.
//
// Upstream (elusznik/mcp-server-code-execution-mode) keeps a tool only when
// every whitespace-separated query token is a substring of its keywords, so a
// synonym, a plural or a typo hides the tool entirely. This package instead
// scores every tool that shares at least one term with the query (BM25F over
// names, aliases, descriptions and parameters), tolerates small typos, and
// always puts an exact tool-name match first. Results carry Total and
// Truncated so a partial list never looks complete.
//
// Matching, in rank order:
//   - the whole query is a tool's name (any case), then its alias or a
//     server-qualified name ("github/create_issue", "github.create_issue",
//     "mcp__github__create_issue");
//   - the query, or a few consecutive words of it, spells a tool name once
//     separators are dropped ("read file", "readFile", "who am i"), or an
//     identifier inside the query is a tool name;
//   - BM25F over words split at camelCase, snake_case, kebab-case, dots and
//     digits, Porter-stemmed, with field weights name > server >
//     description > parameter names > parameter descriptions > the
//     server's description, a
//     coordination factor for matching more of the query's words and a
//     bonus for covering more of the tool's name. A word unknown to the
//     index is matched to vocabulary words one edit away (two from 8
//     letters), else completed as a prefix; common synonyms ("remove" for
//     "delete", "repo" for "repository") match at a lower weight;
//   - words and phrases ("get rid of") that the lexicon relates to a query
//     word match at the weight of the relation: a lexicon generated from
//     WordNet and GloVe word vectors by tools/lexgen (see internal/lexicon).
//     A unit matched through a weaker relation also counts as less of a
//     match for the coordination factor.
//
// The index is built once and never changes. Each term's posting list holds
// its precomputed contribution to every document that contains it, and the
// typo index is a precomputed deletion neighbourhood, so a query costs a few
// posting-list walks; per-query working memory is pooled, so a query
// allocates nothing in proportion to the catalogue.
package search

import (
	"encoding/json"
	"sort"
	"strings"
)

// Doc is one searchable tool.
type Doc struct {
	// Server is the configured server name, e.g. "github".
	Server string
	// ServerAlias is the Python-safe server identifier used in the sandbox.
	ServerAlias string
	// Tool is the tool name as the MCP server reports it.
	Tool string
	// ToolAlias is the Python-safe tool identifier used in the sandbox.
	ToolAlias string
	// Description is the tool description from tools/list.
	Description string
	// Params holds the names of the input schema's properties.
	Params []string
	// ParamText holds the parameters' descriptions, joined; it is weighted
	// low because it is long and generic.
	ParamText string
	// ServerDescription is the server's description from its config
	// ("DigitalOcean: droplets, that is virtual machines, …"). Every tool
	// of the server shares it, so it weighs least.
	ServerDescription string
}

// Hit is one ranked result.
type Hit struct {
	// Doc points into the index's own copy of the documents.
	Doc *Doc
	// Score orders hits; it is only comparable within one Result.
	Score float64
	// Why says in a few words why the tool matched, so that a caller can
	// judge a weak hit: "exact name", or the matched words by field, each
	// with the query's word when the tool uses another, e.g.
	// "name: screenshot; description: image (for picture)". Only the
	// first 50 hits of a Result have one.
	Why string
}

// Result is the answer to one query.
type Result struct {
	// Hits are the best matches, best first, at most limit of them.
	Hits []Hit
	// Total counts every document that matched the query at all.
	Total int
	// Truncated reports that Total > len(Hits), i.e. matches were left out.
	Truncated bool
}

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
