// Package route answers, for the gateway, which sandboxd replica holds a
// sandbox session, and sends each call on the session there. Three things
// say where a session is, tried in this order:
//
//   - the Balancer, over the replicas of one deployment (--sandbox with
//     several addresses), pins each session to the replica it placed it
//     on or saw take it over;
//   - the session store: a replica asked about a session that another
//     live replica holds answers FAILED_PRECONDITION with a
//     SessionElsewhere detail, the holder's address as its record and
//     heartbeat in the store give it, and the Router follows it, waiting
//     out the lease of a holder it cannot reach;
//   - failing both, the replica asked (the best healthy one) takes a
//     durable session over from the store, or the session is lost.
//
// The gateway keeps no other record of where sessions are: sessions.Table
// maps MCP sessions to sandbox sessions, and reaches them through the
// Router.
package route
