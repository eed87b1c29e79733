package search

import "strings"

// Baseline is upstream's search (search_tool_docs in
// mcp_server_code_execution_mode.py): a document matches when every
// whitespace-separated token of the lowercased query is a substring of its
// keywords, the lowercased join of server name, server alias, tool name,
// tool alias and description. Matches keep catalogue order; nothing is
// ranked. The benchmark compares against it; nothing else uses it.
func Baseline(docs []Doc, query string, limit int) Result {
	tokens := strings.Fields(strings.ToLower(query))
	var res Result
	for i := range docs {
		d := &docs[i]
		kw := strings.ToLower(strings.Join([]string{d.Server, d.ServerAlias, d.Tool, d.ToolAlias, d.Description}, " "))
		ok := true
		for _, t := range tokens {
			if !strings.Contains(kw, t) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		res.Total++
		if limit <= 0 || len(res.Hits) < limit {
			res.Hits = append(res.Hits, Hit{Doc: d, Score: 1})
		}
	}
	res.Truncated = res.Total > len(res.Hits)
	return res
}
