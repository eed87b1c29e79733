package embed

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func small() *Model {
	return New([]string{"[PAD]", "[UNK]", "car", "auto", "##mobile", "fish"},
		[][]float32{{0, 0}, {0, 0}, {1, 0.1}, {0.9, 0.2}, {1, 0}, {0, 1}},
		[]float32{0, 0, 1, 1, 1, 1})
}

func TestModelRoundTrip(t *testing.T) {
	t.Parallel()
	m := small()
	var b bytes.Buffer
	if err := m.Write(&b); err != nil {
		t.Fatal(err)
	}
	got, err := Read(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got.Dims() != 2 || got.Tokens() != 6 || got.Token(4) != "##mobile" {
		t.Fatalf("read back dims %d, tokens %d, token 4 %q", got.Dims(), got.Tokens(), got.Token(4))
	}
	a, c := make([]float32, 2), make([]float32, 2)
	for _, id := range got.AppendTokens(nil, "Automobile") {
		got.Add(a, id, 1)
	}
	for _, id := range got.AppendTokens(nil, "car") {
		got.Add(c, id, 1)
	}
	Unitize(a)
	Unitize(c)
	if cos := Dot(a, c); cos < 0.95 {
		t.Errorf("cos(automobile, car) = %v, want near 1", cos)
	}
	f := make([]float32, 2)
	got.Add(f, got.AppendTokens(nil, "fish")[0], 1)
	Unitize(f)
	if cos := Dot(a, f); math.Abs(float64(cos)) > 0.3 {
		t.Errorf("cos(automobile, fish) = %v, want near 0", cos)
	}
}

func TestReadRejectsBadFiles(t *testing.T) {
	t.Parallel()
	var good bytes.Buffer
	if err := small().Write(&good); err != nil {
		t.Fatal(err)
	}
	g := good.Bytes()
	for _, tt := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "not a codeexec search model"},
		{"other magic", append([]byte("GGUF...."), g[8:]...), "not a codeexec search model"},
		{"truncated", g[:len(g)-3], "not a codeexec search model"},
		{"trailing bytes", append(bytes.Clone(g), 0), "bytes after the scales"},
		{"zero dims", append(append([]byte(magic), 0, 0, 0, 0), g[12:]...), "dims 0"},
	} {
		_, err := Read(bytes.NewReader(tt.b))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Read = %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
}
