package server

import (
	"context"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

// records serves one kind of keyed record. Memories and tools are
// checked, stored, fetched, listed and deleted alike, and session records
// stored alike; they differ in the kind, in how a request's tenant and key
// are checked, and in how a record is sent.
type records[P any] struct {
	kind store.Kind
	// noun names a missing record in the NotFound message.
	noun string
	// check checks a request's tenant and key together and returns the
	// tenant to use.
	check func(tenant, key string) (string, error)
	// encode turns a stored record into its message.
	encode func(store.Record) P
	// listValues makes list send the values too.
	listValues bool
}

// put checks the tenant and key first, then builds the write from the
// rest of the request, so that a bad key is named before anything else,
// and stores it.
func (r records[P]) put(ctx context.Context, st store.Store, tenant, key string, write func() (store.Write, error)) (P, error) {
	var zero P
	tenant, err := r.check(tenant, key)
	if err != nil {
		return zero, err
	}
	w, err := write()
	if err != nil {
		return zero, err
	}
	rec, err := st.Put(ctx, tenant, r.kind, key, w)
	if err != nil {
		return zero, err
	}
	return r.encode(rec), nil
}

// get returns one record; a missing one is named by noun and key.
func (r records[P]) get(ctx context.Context, st store.Store, tenant, key string) (P, error) {
	var zero P
	tenant, err := r.check(tenant, key)
	if err != nil {
		return zero, err
	}
	rec, err := st.Get(ctx, tenant, r.kind, key)
	if err != nil {
		return zero, wrapNotFound(err, r.noun, key)
	}
	return r.encode(rec), nil
}

// delete removes one record and reports whether it existed.
func (r records[P]) delete(ctx context.Context, st store.Store, tenant, key string) (bool, error) {
	tenant, err := r.check(tenant, key)
	if err != nil {
		return false, err
	}
	return st.Delete(ctx, tenant, r.kind, key, nil)
}

// list returns all of a tenant's records of the kind, sorted by key.
func (r records[P]) list(ctx context.Context, st store.Store, tenant string) ([]P, error) {
	tenant, err := tenantOf(tenant)
	if err != nil {
		return nil, err
	}
	recs, err := st.List(ctx, tenant, r.kind, r.listValues)
	if err != nil {
		return nil, err
	}
	out := make([]P, 0, len(recs))
	for _, rec := range recs {
		out = append(out, r.encode(rec))
	}
	return out, nil
}
