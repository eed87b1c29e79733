package sessions

import "sync"

// Owners records which tenant initialised each MCP session begun in this
// process, so that another tenant presenting its ID is refused.
type Owners struct {
	mu     sync.Mutex
	owners map[string]string
}

// NewOwners returns an empty record.
func NewOwners() *Owners { return &Owners{owners: map[string]string{}} }

// Owns reports whether tenant may use the MCP session id: sessions begun
// in this process belong to the tenant that initialised them. Sessions of
// an earlier process are unknown here; the Table's per-tenant keys still
// keep them apart.
func (o *Owners) Owns(tenant, id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	owner, ok := o.owners[id]
	return !ok || owner == tenant
}

// Set records that tenant initialised the MCP session id.
func (o *Owners) Set(id, tenant string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.owners[id] = tenant
}

// Drop forgets an MCP session that ended.
func (o *Owners) Drop(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.owners, id)
}
