package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// rpcAnswer is a JSON-RPC answer as a client reads it.
type rpcAnswer struct {
	ID     any             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// wantNotFound checks that a is the not-found error for uri, with the URI
// in error.data.uri and the code of its era.
func wantNotFound(t *testing.T, how string, a rpcAnswer, code int, uri string) {
	t.Helper()
	if a.Error == nil {
		t.Fatalf("%s: reading %q answered %s, want an error", how, uri, a.Result)
	}
	var data struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(a.Error.Data, &data); err != nil || data.URI != uri || a.Error.Code != code {
		t.Errorf("%s: error %d %q, data %s; want code %d and data {\"uri\": %q}", how, a.Error.Code, a.Error.Message, a.Error.Data, code, uri)
	}
}

// TestUnknownResourceErrorNamesTheURI reads an unknown resource as each
// kind of client does (stdio, HTTP with a session, HTTP under
// 2026-07-28) and wants error.data.uri, which mcp-go leaves out; a known
// resource, an unknown tool and the ids of both kinds still come back as
// mcp-go wrote them.
func TestUnknownResourceErrorNamesTheURI(t *testing.T) {
	t.Parallel()
	const unknown = "resource://mcp-server-code-execution-mode/other"

	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		g, _ := newTestGateway(t, Config{})
		serverIn, clientOut := io.Pipe()
		clientIn, serverOut := io.Pipe()
		served := make(chan error, 1)
		go func() { served <- g.ServeStdio(context.Background(), serverIn, serverOut) }()
		answers := bufio.NewScanner(clientIn)
		send := func(msg map[string]any) rpcAnswer {
			t.Helper()
			b, _ := json.Marshal(msg)
			// Written in two parts, so that the request's line is split
			// across reads.
			half := len(b) / 2
			if _, err := clientOut.Write(b[:half]); err != nil {
				t.Fatal(err)
			}
			if _, err := clientOut.Write(append(b[half:], '\n')); err != nil {
				t.Fatal(err)
			}
			if _, ok := msg["id"]; !ok {
				return rpcAnswer{}
			}
			if !answers.Scan() {
				t.Fatalf("no answer to %s: %v", b, answers.Err())
			}
			var a rpcAnswer
			if err := json.Unmarshal(answers.Bytes(), &a); err != nil {
				t.Fatalf("answer %q: %v", answers.Text(), err)
			}
			return a
		}
		init := send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
			"protocolVersion": mcp.LATEST_LEGACY_PROTOCOL_VERSION, "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "t", "version": "1"}}})
		if init.Error != nil {
			t.Fatalf("initialize: %+v", init.Error)
		}
		send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})

		a := send(map[string]any{"jsonrpc": "2.0", "id": "read-1", "method": "resources/read", "params": map[string]any{"uri": unknown}})
		if a.ID != "read-1" {
			t.Errorf("answer id %v, want read-1", a.ID)
		}
		wantNotFound(t, "stdio", a, mcp.RESOURCE_NOT_FOUND, unknown)
		a = send(map[string]any{"jsonrpc": "2.0", "id": 7.0, "method": "resources/read", "params": map[string]any{"uri": unknown + "2"}})
		wantNotFound(t, "stdio, a numeric id", a, mcp.RESOURCE_NOT_FOUND, unknown+"2")

		a = send(map[string]any{"jsonrpc": "2.0", "id": 8, "method": "resources/read", "params": map[string]any{"uri": CapabilitiesURI}})
		if a.Error != nil || !bytes.Contains(a.Result, []byte("Code Execution MCP Capabilities")) {
			t.Errorf("reading the capabilities: %+v %s", a.Error, a.Result)
		}
		a = send(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "prompts/get", "params": map[string]any{"name": "x"}})
		if a.Error == nil || len(a.Error.Data) != 0 {
			t.Errorf("prompts/get: %+v, want mcp-go's error as it is", a.Error)
		}

		_ = clientOut.Close()
		if err := <-served; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	})

	t.Run("http", func(t *testing.T) {
		t.Parallel()
		g, _ := newTestGateway(t, Config{})
		srv := httptest.NewServer(g.HTTPHandler())
		t.Cleanup(srv.Close)
		post := func(header http.Header, msg map[string]any) (rpcAnswer, int, http.Header) {
			t.Helper()
			b, _ := json.Marshal(msg)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = header.Clone()
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			var a rpcAnswer
			if err := json.Unmarshal(body, &a); err != nil {
				t.Fatalf("%s answered %d %q: %v", msg["method"], resp.StatusCode, body, err)
			}
			if n := resp.ContentLength; n >= 0 && n != int64(len(body)) {
				t.Errorf("Content-Length %d for a body of %d bytes", n, len(body))
			}
			return a, resp.StatusCode, resp.Header
		}

		// A session-based client.
		init, _, h := post(http.Header{}, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
			"protocolVersion": mcp.LATEST_LEGACY_PROTOCOL_VERSION, "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "t", "version": "1"}}})
		if init.Error != nil || h.Get(server.HeaderKeySessionID) == "" {
			t.Fatalf("initialize: %+v, session %q", init.Error, h.Get(server.HeaderKeySessionID))
		}
		legacy := http.Header{}
		legacy.Set(server.HeaderKeySessionID, h.Get(server.HeaderKeySessionID))
		legacy.Set(mcp.HeaderProtocolVersion, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
		a, _, _ := post(legacy, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": map[string]any{"uri": unknown}})
		wantNotFound(t, "HTTP with a session", a, mcp.RESOURCE_NOT_FOUND, unknown)
		a, _, _ = post(legacy, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": map[string]any{"uri": CapabilitiesURI}})
		if a.Error != nil || !bytes.Contains(a.Result, []byte("Code Execution MCP Capabilities")) {
			t.Errorf("reading the capabilities over HTTP: %+v %s", a.Error, a.Result)
		}
		// A read with a session that does not exist is still refused by
		// mcp-go, before any resource is looked up.
		bogus := legacy.Clone()
		bogus.Set(server.HeaderKeySessionID, "no-such-session")
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": map[string]any{"uri": unknown}})
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, bytes.NewReader(b))
		req.Header = bogus
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if resp, err := http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		} else {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("a read with an unknown MCP session: HTTP %d, want 404", resp.StatusCode)
			}
		}

		// A 2026-07-28 client: no session, the method and URI in headers.
		modern := http.Header{}
		modern.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		modern.Set(mcp.HeaderMethod, string(mcp.MethodResourcesRead))
		modern.Set(mcp.HeaderName, unknown)
		a, status, _ := post(modern, map[string]any{"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": map[string]any{"uri": unknown,
			"_meta": map[string]any{mcp.MetaKeyProtocolVersion: mcp.ProtocolVersion20260728,
				"io.modelcontextprotocol/clientCapabilities": map[string]any{},
				mcp.MetaKeyClientInfo:                        map[string]any{"name": "t", "version": "1"}}}})
		wantNotFound(t, "HTTP under 2026-07-28", a, mcp.INVALID_PARAMS, unknown)
		if status != http.StatusBadRequest {
			t.Errorf("HTTP status %d under 2026-07-28, want mcp-go's 400 for -32602", status)
		}
	})
}
