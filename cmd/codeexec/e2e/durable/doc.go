// Package durable holds the end-to-end tests of what outlives one
// codeexec process: memory and saved tools across restarts, durable
// sessions, state dirs shared by several processes, PostgreSQL, and the
// services split into processes and replicas. Like cmd/codeexec/e2e, its
// TestMain builds the binary and the tests drive it as users do. It has
// no code outside its tests.
package durable
