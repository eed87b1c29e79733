// Notifications before the answer, over stdio. mcp-go's stdio server
// queues notifications for a goroutine of their own and writes answers
// at once, so a progress notification sent just before a tool's result
// can reach the client after it, and clients drop progress for a request
// already answered. FlushNotifications waits, briefly, for the queue to
// be written.
//
// Delete when: mcp-go writes a request's notifications before its answer
// over stdio: TestE2ELongRunOverStdio's last progress notification (the
// job's end) arrives without FlushNotifications.

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
// to be written; at most flushWait. Call it, over stdio, before returning
// the answer of a request that sent notifications.
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
	// moment away.
	time.Sleep(2 * time.Millisecond)
}
