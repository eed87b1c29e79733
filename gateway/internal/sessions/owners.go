package sessions

import "sync"

// Owners records which tenant initialised each MCP session begun in this
// process, so that another tenant presenting its ID is refused, and which
// sessions their clients ended, so that their IDs are refused after.
type Owners struct {
	mu     sync.Mutex
	owners map[string]string
	// ended holds the IDs of the last maxEnded sessions a client ended
	// (DELETE), in order.
	ended     map[string]bool
	endedList []string
}

// maxEnded bounds the ended sessions remembered: a few MiB of IDs.
const maxEnded = 1 << 16

// NewOwners returns an empty record.
func NewOwners() *Owners { return &Owners{owners: map[string]string{}, ended: map[string]bool{}} }

// Owns reports whether tenant may use the MCP session id: sessions begun
// in this process belong to the tenant that initialised them. Sessions of
// an earlier process are unknown here; the Table's per-tenant keys still
// keep them apart. A session its client ended is no one's: the MCP
// specification has the server answer 404 to its ID from then on.
func (o *Owners) Owns(tenant, id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended[id] {
		return false
	}
	owner, ok := o.owners[id]
	return !ok || owner == tenant
}

// Ended records that the client of the MCP session id ended it.
func (o *Owners) Ended(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended[id] {
		return
	}
	if len(o.endedList) == maxEnded {
		delete(o.ended, o.endedList[0])
		o.endedList = o.endedList[1:]
	}
	o.ended[id] = true
	o.endedList = append(o.endedList, id)
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
