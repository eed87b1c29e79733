package sandbox

import (
	"context"
	"sync/atomic"
)

// Approval is a tool call that a person must approve before it runs.
type Approval struct {
	// Server and Tool name the call; Reason is the rule that marks it.
	Server, Tool, Reason string
	// Arguments is the call's arguments as JSON, cut short and with
	// secrets masked, for showing to the person.
	Arguments string
}

// Decision is a person's answer to an Approval.
type Decision int

// The answers to an Approval.
const (
	// Accept runs the call.
	Accept Decision = iota + 1
	// Decline: the person said no.
	Decline
	// Cancel: the person dismissed the question.
	Cancel
	// Unavailable: nobody could be asked; Answer.Reason says why.
	Unavailable
)

// Answer is a person's answer, or why there was none.
type Answer struct {
	Decision Decision
	Reason   string
}

// Asker asks a person to approve a tool call and waits, until ctx ends,
// for the answer.
type Asker func(ctx context.Context, a Approval) (Answer, error)

// Controls are what an exec's caller decides about its tool calls: who is
// asked to approve them, and how many it may make.
type Controls struct {
	// Ask asks a person; nil means nobody can be asked.
	Ask Asker
	// MaxToolCalls bounds the exec's tool calls; 0 is no bound.
	MaxToolCalls int
	// toolCalls counts them.
	toolCalls atomic.Int64
}

// CountToolCall counts one tool call and returns the count, this one
// included.
func (c *Controls) CountToolCall() int64 {
	if c == nil {
		return 0
	}
	return c.toolCalls.Add(1)
}
