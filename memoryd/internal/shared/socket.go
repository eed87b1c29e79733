package shared

// Protocol is the version of what the owner's socket speaks (StoreService
// and its rules). Processes with different protocols never talk: each
// listens on a socket named after its own, and a process that finds the
// database held by an owner of another protocol says so, naming both
// versions. It is a variable so that a test can build a binary that speaks
// another one (-ldflags -X). Protocol 2 is protocol 1 with StoreService
// moved from codeexec.memory.v1 to codeexec.sharedstore.v1, which renamed
// its methods on the wire.
var Protocol = "2"

// SocketPath is the unix socket beside the database on which its owner
// serves StoreService.
func SocketPath(db string) string { return db + ".v" + Protocol + ".sock" }

// socketWhat names the owner's socket in logs and errors.
const socketWhat = "the shared memory socket"
