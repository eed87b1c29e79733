// Package mcpfix closes the gaps of mcp-go (the version in go.mod,
// v1.2.1) between what it does and what the MCP specification, its
// clients or upstream's behaviour ask of codeexec. mcp-go builds these
// answers itself, before any of the server's code runs, so each fix works
// at the transport: it reads the requests on their way in and mends or
// replaces mcp-go's answers on their way out. One file a gap:
//
//   - batch.go: JSON-RPC batches get a parse error (HTTP, stdio);
//   - bodylimit.go: request bodies are read without a limit (HTTP);
//   - cancelled.go: a cancelled request is answered all the same (stdio);
//   - cursor.go: a foreign list cursor gets a base64 decoder's error;
//   - invalidparams.go: a tool's refusal of a retry's input gets -32603,
//     not -32602;
//   - detach.go: a dropped connection cancels its request (HTTP);
//   - listenack.go: a listen stream's acknowledgement can be lost (HTTP);
//   - nosession.go: requests outside any session get 404, 200 or an
//     empty stream instead of 400 (HTTP);
//   - notfound.go: an unknown resource's error lacks its URI;
//   - unknowntool.go: an unknown tool gets a protocol error, not a tool
//     result.
//
// jsonl.go is what the stdio fixes share, held.go what the HTTP ones that
// edit an answer share. Each file names the test that
// shows its gap: when, on a newer mcp-go, that test passes with the fix
// taken out of Stdio, HTTP or AddHooks, delete the file.
package mcpfix
