package embed

import (
	"os"
	"path/filepath"
)

// EnvPath names the environment variable that points codeexec at a model
// file; "off" turns the model off.
const EnvPath = "CODEEXEC_SEARCH_MODEL"

// FileName is the installed model's file name. Its version changes with
// the file's format or the distillation's method, so an old file is not
// read as a new one.
const FileName = "minilm-l6-static-v1.bin"

// DefaultPath is where scripts/search-model.sh installs the model:
// $CODEEXEC_SEARCH_MODEL when set, else $XDG_DATA_HOME/codeexec/FileName,
// else ~/.local/share/codeexec/FileName. It is "" when no home is known.
func DefaultPath() string {
	if p := os.Getenv(EnvPath); p != "" {
		return p
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "codeexec", FileName)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".local", "share", "codeexec", FileName)
}
