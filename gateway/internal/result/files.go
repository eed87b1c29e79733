package result

import (
	"fmt"
	"strings"

	"github.com/codeexec/codeexec/gateway/internal/files"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// Link is a file under /workspace/out that a result links as a resource.
type Link struct {
	// URI is the codeexec:// URI resources/read answers.
	URI string
	// Name is the path under /workspace/out.
	Name string
	MIME string
	Size int64
}

// outFiles turns the files a call made under /workspace/out into links,
// and a line of text naming them, with those it could not link and why.
func outFiles(r *sandboxv1.ExecResult) (links []Link, line string) {
	fs := r.GetFiles()
	if len(fs) == 0 && r.GetFilesMore() == 0 {
		return nil, ""
	}
	session, calls := r.GetSession().GetId(), r.GetSession().GetExecCount()
	var named []string
	for _, f := range fs {
		name := strings.TrimPrefix(f.GetPath(), "out/")
		desc := fmt.Sprintf("%s (%s)", name, size(f.GetSize()))
		switch {
		case !r.GetDurable() || session == "":
			desc += " (not linked: this deployment keeps no session checkpoints to serve it from)"
		case f.GetSize() > files.MaxBytes:
			desc += fmt.Sprintf(" (not linked: over the %s a resource read returns)", size(files.MaxBytes))
		default:
			links = append(links, Link{URI: files.URI(session, calls, f.GetPath()), Name: name, MIME: f.GetMimeType(), Size: f.GetSize()})
		}
		named = append(named, desc)
	}
	line = "[files in /workspace/out: " + strings.Join(named, ", ")
	if n := r.GetFilesMore(); n > 0 {
		line += fmt.Sprintf(", and %d more", n)
	}
	return links, line + "]"
}

// size is n in bytes, KiB or MiB.
func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
