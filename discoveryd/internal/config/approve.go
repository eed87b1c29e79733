package config

import (
	"fmt"
	"strings"

	"github.com/codeexec/codeexec/discoveryd/internal/approval"
)

// approveOf reads the entry's "approve" key: true (every tool), false,
// "destructive", a tool glob, or a list of those. A value that cannot be
// read keeps the entry out, so that a mistake never lets calls through
// unasked.
func approveOf(e map[string]any) ([]string, error) {
	const accepted = `accepted: true (every tool), false, "destructive", a tool glob such as "delete_*", or a list of those`
	var vs []string
	switch v := e["approve"].(type) {
	case nil:
		return nil, nil
	case bool:
		if v {
			return []string{"*"}, nil
		}
		return nil, nil
	case string:
		vs = []string{v}
	case []any:
		var err error
		if vs, err = stringList(e, "approve"); err != nil {
			return nil, fmt.Errorf("%w; %s", err, accepted)
		}
	default:
		return nil, fmt.Errorf("\"approve\" is %s; %s", kind(v), accepted)
	}
	for i, v := range vs {
		vs[i] = strings.TrimSpace(v)
		if err := approval.CheckEntryValue(vs[i]); vs[i] == "" || err != nil {
			return nil, fmt.Errorf("\"approve\" holds %q, which is not a glob; %s", v, accepted)
		}
	}
	return vs, nil
}
