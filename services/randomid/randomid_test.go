package randomid

import (
	"fmt"
	"regexp"
	"testing"
)

func TestHex(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 4, 6, 8, 16} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			want := regexp.MustCompile(fmt.Sprintf("^[0-9a-f]{%d}$", 2*n))
			id := Hex(n)
			if !want.MatchString(id) {
				t.Errorf("Hex(%d) = %q, want %d lowercase hex digits", n, id, 2*n)
			}
			if n >= 8 && Hex(n) == id {
				t.Errorf("Hex(%d) gave %q twice", n, id)
			}
		})
	}
}
