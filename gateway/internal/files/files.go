// Package files serves the files a call writes under /workspace/out as
// MCP resources: a result names each with a resource_link whose
// codeexec:// URI resources/read answers, for the tenant that owns the
// session and no other. The content comes from the session's latest
// stored checkpoint (sandboxd's ReadFile), so any gateway and any
// sandboxd replica serve it, whether or not the session's sandbox lives.
package files

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/gateway/internal/auth"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// Scheme and host of the URIs: codeexec://session/<id>/<path>?v=<calls>.
const (
	scheme = "codeexec"
	host   = "session"
)

// MaxBytes is the largest file a read returns (8 MiB, 10.7 MiB in
// base64): larger ones are named in the result but not linked.
const MaxBytes = 8 << 20

// URI names the file at p (relative to /workspace) of session as the
// call that made it, the execCount-th, left it or later.
func URI(session string, execCount uint64, p string) string {
	u := url.URL{Scheme: scheme, Host: host, Path: "/" + session + "/" + p}
	if execCount > 0 {
		u.RawQuery = "v=" + strconv.FormatUint(execCount, 10)
	}
	return u.String()
}

// ErrBadURI is the error of a URI that is not one of ours.
var ErrBadURI = errors.New("not a codeexec file URI")

// Parse splits a URI made by URI.
func Parse(uri string) (session, p string, execCount uint64, err error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != scheme || u.Host != host {
		return "", "", 0, fmt.Errorf("%w: %q; such URIs look like codeexec://session/<session>/out/<file>", ErrBadURI, uri)
	}
	session, p, _ = strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if session == "" || p == "" || path.Clean(p) != p || strings.HasPrefix(p, "../") {
		return "", "", 0, fmt.Errorf("%w: %q names no file of a session", ErrBadURI, uri)
	}
	if v := u.Query().Get("v"); v != "" {
		if execCount, err = strconv.ParseUint(v, 10, 64); err != nil {
			return "", "", 0, fmt.Errorf("%w: %q has a version that is not a number", ErrBadURI, uri)
		}
	}
	return session, p, execCount, nil
}

// Template matches the URIs for resources/read.
func Template() mcp.ResourceTemplate {
	return mcp.NewResourceTemplate(scheme+"://"+host+"/{session}/{+path}", "workspace-file",
		mcp.WithTemplateDescription("A file a run_python call wrote under /workspace/out, as its result links it."))
}

// Reader answers resources/read of file URIs.
type Reader struct {
	// Sandbox reads the file from the session's checkpoint.
	Sandbox sandboxv1.SandboxServiceClient
	// Tenant is the caller's tenant when the context names none (stdio).
	Tenant string
}

// Read serves one file: as text when it is UTF-8 text, else as a blob.
func (r *Reader) Read(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri := req.Params.URI
	session, p, v, err := Parse(uri)
	if err != nil {
		return nil, err
	}
	resp, err := r.Sandbox.ReadFile(ctx, &sandboxv1.ReadFileRequest{
		Tenant: auth.Tenant(ctx, r.Tenant), SessionId: session, Path: p, MinExecCount: v, MaxBytes: MaxBytes,
	})
	if err != nil {
		return nil, readError(uri, err)
	}
	mt := MIMEType(p)
	data := resp.GetData()
	if isText(mt, data) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: mt, Text: string(data)}}, nil
	}
	return []mcp.ResourceContents{mcp.BlobResourceContents{URI: uri, MIMEType: mt, Blob: base64.StdEncoding.EncodeToString(data)}}, nil
}

// readError says what went wrong in words a model can act on; another
// tenant's session reads as an unknown one.
func readError(uri string, err error) error {
	st := status.Convert(err)
	switch st.Code() { //nolint:exhaustive // every other code reads as its message
	case codes.NotFound:
		return fmt.Errorf("resource not found: %s: %s", uri, st.Message())
	case codes.FailedPrecondition, codes.InvalidArgument:
		return fmt.Errorf("cannot read %s: %s", uri, st.Message())
	case codes.Unavailable:
		return fmt.Errorf("cannot read %s now: the sandbox service is unreachable (%s); retry shortly", uri, st.Message())
	}
	return fmt.Errorf("cannot read %s: %s", uri, st.Message())
}

// MIMEType guesses a file's type from its name.
func MIMEType(p string) string {
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// isText says whether data reads as text: UTF-8 whose type is text, or
// any type but an image, audio or video one when the bytes are UTF-8
// without NULs.
func isText(mt string, data []byte) bool {
	if !utf8.Valid(data) {
		return false
	}
	major, _, _ := strings.Cut(mt, "/")
	switch major {
	case "text":
		return true
	case "image", "audio", "video":
		return false
	}
	return !bytes.ContainsRune(data, 0)
}
