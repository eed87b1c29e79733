// Notifications before the answer. mcp-go hands a request's notifications
// to a goroutine of their own, over stdio and over streamable HTTP alike,
// and writes the answer from the handler's: over stdio a notification
// sent just before a tool's result can be written after it; over HTTP
// the forwarder can take it off the queue just as the answer is written,
// and then drops it. Either way the client misses it, and clients drop
// progress for a request already answered. FlushNotifications waits,
// briefly, for the queue to be written.
//
// Delete when: mcp-go writes a request's notifications before its answer:
// TestE2ELongRunOverStdio's and TestE2ELongRunOverHTTP's last progress
// notification (the job's end) arrives without FlushNotifications.

package mcpfix

import (
	"context"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// flushWait bounds how long FlushNotifications waits for the queue.
const flushWait = 200 * time.Millisecond

// FlushNotifications waits until the notifications queued for the client
// of ctx's session have left the queue, and a moment more for the last
// to be written; at most flushWait. Call it before returning the answer
// of a request that sent notifications.
func FlushNotifications(ctx context.Context) {
	s := server.ClientSessionFromContext(ctx)
	if s == nil {
		return
	}
	ch := s.NotificationChannel()
	deadline := time.Now().Add(flushWait)
	for len(ch) > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// The writer has taken the last one off the queue; its write is a
	// moment away (a goroutine to be scheduled, a lock to take). Only a
	// call that sent notifications pays this.
	time.Sleep(10 * time.Millisecond)
}
