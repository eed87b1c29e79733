// Package search ranks MCP tool descriptions against a free-text query.
//
// Upstream (elusznik/mcp-server-code-execution-mode) keeps a tool only when
// every whitespace-separated query token is a substring of its keywords, so a
// synonym, a plural or a typo hides the tool entirely. This package instead
// scores every tool that shares at least one term with the query (BM25F over
// names, aliases, descriptions and parameters), tolerates small typos, and
// always puts an exact tool-name match first. Results carry Total and
// Truncated so a partial list never looks complete.
package search

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
	// lowest because it is long and generic.
	ParamText string
}

// Hit is one ranked result.
type Hit struct {
	// Doc points into the index's own copy of the documents.
	Doc *Doc
	// Score orders hits; it is only comparable within one Result.
	Score float64
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
