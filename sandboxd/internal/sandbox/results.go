package sandbox

import (
	"path"
	"strings"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
)

// Results bounds what one exec sends back for a model's context: the
// characters of its output (the rest kept in a file in the workspace)
// and its images.
type Results struct {
	// Budget, when positive, bounds the characters of output an exec
	// sends; zero leaves OutputLimit's byte cap alone.
	Budget int64
	// Display bounds the images; zero fields leave the agent's defaults.
	Display channel.DisplayLimits
	// Workspace, with a checkpoint, caps the bytes of /workspace's files
	// it holds; zero keeps none.
	Workspace int64
}

// apply puts the bounds on an exec frame.
func (r Results) apply(msg *channel.Exec) {
	msg.Budget = r.Budget
	msg.Workspace = r.Workspace
	if r.Display != (channel.DisplayLimits{}) {
		d := r.Display
		msg.Display = &d
	}
}

// Display receives the images an exec shows, as they come.
type Display func(d *channel.Display) error

// The agent's defaults (codeexec_display.py), which the gate holds a
// frame to when Results leaves them unset.
const (
	defaultCallImages = 10
	defaultCallBytes  = 640 << 10
)

// maxSide bounds the sizes a display frame may claim (Claude's own
// ceiling is 8000 px).
const maxSide = 1 << 15

// displayGate holds one exec's images to the call's bounds whatever the
// sandbox sends: code in the sandbox can write frames of its own.
type displayGate struct {
	images, bytes       int64
	maxImages, maxBytes int64
	// Dropped counts the images refused.
	dropped int
}

func newDisplayGate(r Results) *displayGate {
	g := &displayGate{maxImages: r.Display.CallImages, maxBytes: r.Display.CallBytes}
	if g.maxImages <= 0 {
		g.maxImages = defaultCallImages
	}
	if g.maxBytes <= 0 {
		g.maxBytes = defaultCallBytes
	}
	return g
}

// admit counts d against the bounds; false means it is over them.
func (g *displayGate) admit(d *channel.Display) bool {
	n := int64(len(d.Image()))
	if n == 0 || g.images >= g.maxImages || g.bytes+n > g.maxBytes ||
		(d.MIME != "image/png" && d.MIME != "image/jpeg") ||
		d.Width <= 0 || d.Height <= 0 || d.Width > maxSide || d.Height > maxSide {
		g.dropped++
		return false
	}
	g.images++
	g.bytes += n
	return true
}

// maxOutFiles is the most files under /workspace/out one result names, as
// the agent sends them.
const maxOutFiles = 20

// outFiles are the files a done frame names, those with a clean path
// under out/ and at most maxOutFiles: code in the sandbox can write the
// frame too. The count of the others is kept, never negative.
func outFiles(d *channel.Done) ([]channel.OutFile, int) {
	var files []channel.OutFile
	more := max(d.FilesMore, 0)
	for _, f := range d.Files {
		clean := path.Clean(f.Path)
		if clean != f.Path || !strings.HasPrefix(clean, "out/") || len(clean) > 4096 || f.Bytes < 0 || len(files) == maxOutFiles {
			more++
			continue
		}
		files = append(files, f)
	}
	return files, more
}
