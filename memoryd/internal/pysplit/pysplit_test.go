package pysplit

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		src    string
		funcs  []Func
		others []Other
	}{
		{
			name:  "one function",
			src:   "def f(x):\n    return x\n",
			funcs: []Func{{Name: "f", Source: "def f(x):\n    return x\n", Line: 1}},
		},
		{
			name: "upstream append format",
			src:  "\n\ndef a():\n    \"\"\"Say a.\"\"\"\n    return 'a'\n\n\nasync def b(x: int = 1) -> str:\n    '''B.\n\n    More.\n    '''\n    return 'b'\n",
			funcs: []Func{
				{Name: "a", Source: "def a():\n    \"\"\"Say a.\"\"\"\n    return 'a'\n", Doc: "Say a.", Line: 3},
				{Name: "b", Source: "async def b(x: int = 1) -> str:\n    '''B.\n\n    More.\n    '''\n    return 'b'\n", Doc: "B.\n\nMore.", Line: 8},
			},
		},
		{
			name:   "decorators and comments stay with the def",
			src:    "x = 1\n\n# helper\n@functools.cache\n@other(\n    1,\n)\ndef g():\n    pass\n",
			funcs:  []Func{{Name: "g", Source: "# helper\n@functools.cache\n@other(\n    1,\n)\ndef g():\n    pass\n", Line: 3}},
			others: []Other{{Source: "x = 1\n", Line: 1}},
		},
		{
			name:  "column-0 text inside a triple-quoted string is not a statement",
			src:   "def h():\n    s = \"\"\"\ndef fake():\n    pass\n\"\"\"\n    return s\n",
			funcs: []Func{{Name: "h", Source: "def h():\n    s = \"\"\"\ndef fake():\n    pass\n\"\"\"\n    return s\n", Line: 1}},
		},
		{
			name:  "multi-line signature at column 0",
			src:   "def k(\na,\nb=\"):\",\n):\n    \"Doc: k.\"\n    return a\n",
			funcs: []Func{{Name: "k", Source: "def k(\na,\nb=\"):\",\n):\n    \"Doc: k.\"\n    return a\n", Doc: "Doc: k.", Line: 1}},
		},
		{
			name:  "imports and classes are other statements",
			src:   "import json\nfrom os import path\n\nclass C:\n    pass\n\ndef f():\n    return json.dumps(1)\n",
			funcs: []Func{{Name: "f", Source: "def f():\n    return json.dumps(1)\n", Line: 7}},
			others: []Other{
				{Import: true, Source: "import json\n", Line: 1},
				{Import: true, Source: "from os import path\n", Line: 2},
				{Source: "class C:\n    pass\n", Line: 4},
			},
		},
		{
			name: "duplicates are both returned, in order",
			src:  "def f():\n    return 1\n\ndef f():\n    return 2\n",
			funcs: []Func{
				{Name: "f", Source: "def f():\n    return 1\n", Line: 1},
				{Name: "f", Source: "def f():\n    return 2\n", Line: 4},
			},
		},
		{
			name:  "one-line def, default with a colon in a string, no final newline",
			src:   "def f(s='a:b'): return s",
			funcs: []Func{{Name: "f", Source: "def f(s='a:b'): return s\n", Line: 1}},
		},
		{
			name:  "backslash continuation",
			src:   "def f():\n    return 1 + \\\n2\n",
			funcs: []Func{{Name: "f", Source: "def f():\n    return 1 + \\\n2\n", Line: 1}},
		},
		{name: "empty", src: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			funcs, others := Split(tc.src)
			if diff := cmp.Diff(tc.funcs, funcs); diff != "" {
				t.Errorf("funcs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.others, others); diff != "" {
				t.Errorf("others (-want +got):\n%s", diff)
			}
		})
	}
}
