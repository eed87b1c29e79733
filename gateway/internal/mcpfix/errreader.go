package mcpfix

// errReader fails every read with err: what follows the bytes of a body
// that a fix read first, so that mcp-go sees the error the body ended with.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
