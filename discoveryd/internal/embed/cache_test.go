package embed

import (
	"fmt"
	"slices"
	"testing"
)

// TestQueryCacheKeepsTheLatest: a cached query gives the model's vector,
// and the cache holds at most its size, dropping the oldest.
func TestQueryCacheKeepsTheLatest(t *testing.T) {
	t.Parallel()
	e := installedEncoder(t)
	c := e.NewQueryCache(3)
	want, err := e.Encode([]string{"q0"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := c.Vector(fmt.Sprintf("q%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if c.Len() != 3 {
		t.Fatalf("cache holds %d queries, want 3", c.Len())
	}
	if _, ok := c.vecs["q0"]; ok {
		t.Error("the oldest query is still cached")
	}
	got, err := c.Vector("q0")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want[0]) {
		t.Error("the cached vector differs from the model's")
	}
	if _, ok := c.vecs["q2"]; ok {
		t.Error("q2 should have made room for q0")
	}
}
