// Package e2e holds the end-to-end tests of codeexec: TestMain builds the
// binary (internal/harness, shared with the tests of what outlives a
// process in e2e/durable), and the tests drive it as users do, with real
// MCP clients (mcp-go and the TypeScript SDK in testdata/sdkclient.mjs),
// real sandboxes and real PostgreSQL servers. It has no code outside its
// tests.
package e2e
