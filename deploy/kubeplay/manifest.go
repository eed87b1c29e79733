package main

import (
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// obj is a manifest, or a mapping in one, as yaml.v3 decodes it (after
// normalise).
type obj = map[string]any

// emit writes o as one YAML document.
func emit(w io.Writer, o obj) error {
	b, err := yaml.Marshal(o)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "---\n%s", b)
	return err
}

// normalise turns yaml.v3's maps into obj all the way down.
func normalise(v any) any {
	switch x := v.(type) {
	case map[string]any:
		o := obj{}
		for k, e := range x {
			o[k] = normalise(e)
		}
		return o
	case []any:
		for i := range x {
			x[i] = normalise(x[i])
		}
		return x
	}
	return v
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case obj:
		o := obj{}
		for k, e := range x {
			o[k] = deepCopy(e)
		}
		return o
	case []any:
		l := make([]any, len(x))
		for i := range x {
			l[i] = deepCopy(x[i])
		}
		return l
	}
	return v
}

func get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(obj)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func str(v any, path ...string) string  { s, _ := get(v, path...).(string); return s }
func list(v any, path ...string) []any  { l, _ := get(v, path...).([]any); return l }
func mapping(v any, path ...string) obj { m, _ := get(v, path...).(obj); return m }
func kind(o obj) string                 { return str(o, "kind") }
func name(o obj) string                 { return str(o, "metadata", "name") }
