package container

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// LabelEnv is the label of an image made from an environment (package
// environment): the environment's ID, which a checkpoint records.
const LabelEnv = "codeexec.env"

// ImageLabel returns the value of label on image, "" when the image has
// none or cannot be inspected.
func ImageLabel(ctx context.Context, cli, image, label string) string {
	out, err := exec.CommandContext(ctx, cli, "image", "inspect", "--format",
		fmt.Sprintf(`{{index .Config.Labels %q}}`, label), image).Output()
	if err != nil {
		return ""
	}
	v := strings.TrimSpace(string(out))
	if v == "<no value>" {
		return ""
	}
	return v
}

// ImportRoot makes image from the root file system root (an
// environment's tree) unless the runtime already has it: the same tree
// the bwrap engine runs, so a session behaves the same on either. The
// image runs as uid 65534 in /workspace and carries LabelEnv=envID.
func ImportRoot(ctx context.Context, cli, root, image, envID string) (imported bool, err error) {
	if ImageLabel(ctx, cli, image, LabelEnv) == envID {
		return false, nil
	}
	tar := exec.CommandContext(ctx, "tar", "-C", root, "-c", ".")
	imp := exec.CommandContext(ctx, cli, "import",
		"--change", "WORKDIR /workspace", "--change", "USER 65534:65534",
		"--change", `CMD ["/usr/bin/python3"]`, "--change", "LABEL "+LabelEnv+"="+envID,
		"-", image)
	pipe, err := tar.StdoutPipe()
	if err != nil {
		return false, err
	}
	imp.Stdin = pipe
	var errOut strings.Builder
	imp.Stderr, tar.Stderr = &errOut, &errOut
	if err := tar.Start(); err != nil {
		return false, fmt.Errorf("import %s into %s: %w", root, cli, err)
	}
	ierr := imp.Run()
	terr := tar.Wait()
	if ierr != nil || terr != nil {
		return false, fmt.Errorf("import %s into %s as %s: %w: %s", root, cli, image, errors.Join(ierr, terr), strings.TrimSpace(errOut.String()))
	}
	return true, nil
}
