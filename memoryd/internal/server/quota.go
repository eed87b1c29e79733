package server

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

// Quotas cap what one tenant keeps in the store. Zero fields set no cap.
//
// They are checked against what the store holds before each write, under
// a lock per tenant in this process: with several memoryd processes on
// one PostgreSQL database, writes of one tenant racing through different
// processes may pass a cap by the few values in flight.
type Quotas struct {
	// MemoryKeys caps the tenant's memory records, MemoryBytes their
	// keys, values and metadata together.
	MemoryKeys  int
	MemoryBytes int64
	// CheckpointBytes caps the chunks of all the tenant's session
	// checkpoints together.
	CheckpointBytes int64
}

// errQuota is a write refused because its tenant is at a quota.
var errQuota = errors.New("quota reached")

// Names of the quotas, as the refusals metric labels them.
const (
	QuotaMemoryKeys      = "memory_keys"
	QuotaMemoryBytes     = "memory_bytes"
	QuotaCheckpointBytes = "checkpoint_bytes"
)

// tenantLocks serialises one tenant's quota-checked writes in this
// process, so that a check and the write after it see each other.
type tenantLocks struct {
	mu sync.Mutex
	m  map[string]*sync.Mutex
}

func (l *tenantLocks) lock(tenant string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*sync.Mutex{}
	}
	mu := l.m[tenant]
	if mu == nil {
		mu = &sync.Mutex{}
		l.m[tenant] = mu
	}
	l.mu.Unlock()
	mu.Lock()
	return mu.Unlock
}

// lockQuota takes the tenant's lock for a quota-checked memory write when
// memory quotas are set (a bad tenant or key is left to the write, which
// names it), and returns its release.
func (h *handler) lockQuota(tenant, key string) func() {
	if h.quotas.MemoryKeys <= 0 && h.quotas.MemoryBytes <= 0 {
		return func() {}
	}
	t, err := tenantKey(tenant, key)
	if err != nil {
		return func() {}
	}
	return h.locks.lock(t)
}

// recordBytes is what a memory record counts against MemoryBytes.
func recordBytes(key string, value, meta int) int64 { return int64(len(key) + value + meta) }

// checkMemoryQuota refuses a write of key (value and meta bytes; meta -1
// keeps the record's) that would take tenant past its memory quotas.
func (h *handler) checkMemoryQuota(ctx context.Context, tenant, key string, value, meta int) error {
	q := h.quotas
	if q.MemoryKeys <= 0 && q.MemoryBytes <= 0 {
		return nil
	}
	tenant, err := tenantKey(tenant, key)
	if err != nil {
		return err
	}
	recs, err := h.store.List(ctx, tenant, store.KindMemory, false)
	if err != nil {
		return err
	}
	keys, total, exists := len(recs), int64(0), false
	for _, r := range recs {
		n := recordBytes(r.Key, r.ValueLen, len(r.Meta))
		if r.Key == key {
			exists = true
			if meta < 0 {
				meta = len(r.Meta)
			}
			n = 0 // replaced by the write
		}
		total += n
	}
	meta = max(meta, 2) // a new record's kept metadata is {}
	if !exists && q.MemoryKeys > 0 && keys >= q.MemoryKeys {
		h.metrics.quotaRefusals.WithLabelValues(QuotaMemoryKeys).Inc()
		return fmt.Errorf("%w: this tenant's memory holds %d keys, the most it may (the memory quota, --quota-memory-keys): delete some with delete_memory, or update an existing key", errQuota, keys)
	}
	if after := total + recordBytes(key, value, meta); q.MemoryBytes > 0 && after > q.MemoryBytes {
		h.metrics.quotaRefusals.WithLabelValues(QuotaMemoryBytes).Inc()
		return fmt.Errorf("%w: with this value, this tenant's memory would hold %d bytes (keys, values and metadata), more than the %d it may (the memory quota, --quota-memory-bytes): delete some with delete_memory, or store less", errQuota, after, q.MemoryBytes)
	}
	return nil
}

// checkCheckpointQuota refuses a checkpoint of handle whose chunks hold
// size bytes when, with the chunks of the tenant's other sessions, it
// would take the tenant past its checkpoint quota.
func (s *Sessions) checkCheckpointQuota(ctx context.Context, tenant, handle string, size uint64) error {
	limit := s.h.quotas.CheckpointBytes
	if limit <= 0 {
		return nil
	}
	sessions, err := s.h.store.List(ctx, tenant, KindSession, false)
	if err != nil {
		return err
	}
	total := size
	for _, r := range sessions {
		if r.Key == handle {
			continue
		}
		chunks, err := s.h.store.List(ctx, tenant, ChunkKind(r.Key), false)
		if err != nil {
			return err
		}
		for _, c := range chunks {
			total += uint64(c.ValueLen)
		}
	}
	if total > uint64(limit) {
		s.h.metrics.quotaRefusals.WithLabelValues(QuotaCheckpointBytes).Inc()
		// ErrTooLarge, as for one checkpoint over its own cap: sandboxd
		// then drops the chunks it stored for it and keeps the last.
		return fmt.Errorf("%w: this tenant's session checkpoints would hold %d bytes with this one, more than the %d it may (the checkpoint quota, --quota-checkpoint-bytes); "+
			"sessions expire after a week unused, and ending one (a DELETE of its MCP session, or runtime.end_session()) frees its checkpoint", store.ErrTooLarge, total, limit)
	}
	return nil
}
