package embed

import (
	"os"
	"path/filepath"
)

// EnvPath names the environment variable that points codeexec at the
// model's directory; "off" turns the model off.
const EnvPath = "CODEEXEC_SEARCH_MODEL"

// DirName is the installed model's directory name. Its version changes
// with the model or what the directory holds, so that an old install is
// not read as a new one.
const DirName = "search-model-v2"

// The files of a model directory, as scripts/search-model.sh installs
// them.
const (
	// ModelFile is the ONNX graph: a BERT encoder taking input_ids,
	// attention_mask and token_type_ids, giving last_hidden_state.
	ModelFile = "model.onnx"
	// TokenizerFile is Hugging Face's tokenizer.json of the model (a
	// WordPiece vocabulary).
	TokenizerFile = "tokenizer.json" //nolint:gosec // a file name, not a credential
	// LibraryFile is ONNX Runtime's shared library.
	LibraryFile = "libonnxruntime.so"
)

// DefaultPath is where scripts/search-model.sh installs the model:
// $CODEEXEC_SEARCH_MODEL when set, else $XDG_DATA_HOME/codeexec/DirName,
// else ~/.local/share/codeexec/DirName. It is "" when no home is known.
func DefaultPath() string {
	if p := os.Getenv(EnvPath); p != "" {
		return p
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "codeexec", DirName)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".local", "share", "codeexec", DirName)
}
