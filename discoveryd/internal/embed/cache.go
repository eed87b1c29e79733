package embed

import "sync"

// QueryCache remembers the vectors of the most recent distinct queries,
// so that a query asked again (an agent retrying, or paging) costs no
// run of the model. It is safe for concurrent use.
type QueryCache struct {
	enc   *Encoder
	mu    sync.Mutex
	vecs  map[string][]float32
	order []string // the cached queries, oldest at next
	next  int
}

// NewQueryCache returns a cache of the last n queries' vectors by e.
func (e *Encoder) NewQueryCache(n int) *QueryCache {
	return &QueryCache{enc: e, vecs: make(map[string][]float32, n), order: make([]string, 0, n)}
}

// Vector returns q's unit vector, from the cache or the model. The
// result is shared: callers must not change it.
func (c *QueryCache) Vector(q string) ([]float32, error) {
	c.mu.Lock()
	v, ok := c.vecs[q]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	vs, err := c.enc.Encode([]string{q})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.vecs[q]; !ok {
		if len(c.order) < cap(c.order) {
			c.order = append(c.order, q)
		} else if cap(c.order) > 0 {
			delete(c.vecs, c.order[c.next])
			c.order[c.next] = q
			c.next = (c.next + 1) % len(c.order)
		}
		if cap(c.order) > 0 {
			c.vecs[q] = vs[0]
		}
	}
	return vs[0], nil
}

// Len is the number of queries cached.
func (c *QueryCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.vecs)
}
