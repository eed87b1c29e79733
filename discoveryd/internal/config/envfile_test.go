package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDotenv(t *testing.T) {
	t.Parallel()
	got, err := parseDotenv([]byte(`# a comment
TOKEN=abc123
export REGION = eu-west-1
QUOTED="two words # not a comment"
ESCAPED="a\tb\nc"
MULTI="line one
line two"
SINGLE='$NOT ${EXPANDED} \n'
TRAILING=value # a comment
EMPTY=

URL=https://x.example/?a=b&c=d
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"TOKEN": "abc123", "REGION": "eu-west-1", "QUOTED": "two words # not a comment", "ESCAPED": "a\tb\nc",
		"MULTI": "line one\nline two", "SINGLE": `$NOT ${EXPANDED} \n`, "TRAILING": "value", "EMPTY": "", "URL": "https://x.example/?a=b&c=d",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseDotenv (-want +got):\n%s", diff)
	}
	for in, wantErr := range map[string]string{
		"OK=1\nnot a line\n":   "line 2 is not NAME=value",
		"A=1\nB=\"open\nC=2\n": "the quote opened on line 2 is not closed",
		"1BAD=x":               "line 1 is not NAME=value",
	} {
		if _, err := parseDotenv([]byte(in)); err == nil || err.Error() != wantErr {
			t.Errorf("parseDotenv(%q) = %v, want %q", in, err, wantErr)
		}
	}
}
