package api

import (
	"fmt"
	"sync"
	"time"

	"changebot/flows/rules"
)

// CallbackRefusals counts the approval callbacks this process refused for
// a bad signature: a POST /callbacks/approval whose X-Changebot-Signature
// was well formed but did not verify (callback_secret is not the key the
// approval system signs with), counted by the handler's
// webhooks.CallbackConfig.OnBadSignature. A POST without a signature (a
// scanner, a stray request) is refused too but not counted: it says
// nothing about callback_secret. A change whose callback was
// refused waits in APPROVAL_SENT for ever, and its hint says only that it
// waits for an approver; ApprovalHint adds what this process saw to the hints of the API and the pages. It is
// per process (a replica knows of the callbacks it received, and the count
// restarts with it): storing it would need a table for what the WARN log
// and changebot_callbacks_total{kind="approval",result="unauthorized"}
// already record, and doctor points at those.
type CallbackRefusals struct {
	mu          sync.Mutex
	n           int
	first, last time.Time
	now         func() time.Time
}

// NewCallbackRefusals returns a count of none, timed with now (nil:
// time.Now).
func NewCallbackRefusals(now func() time.Time) *CallbackRefusals {
	if now == nil {
		now = time.Now
	}
	return &CallbackRefusals{now: now}
}

// Refused counts one refused callback, now
// (webhooks.CallbackConfig.OnBadSignature).
func (c *CallbackRefusals) Refused() {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now()
	if c.n == 0 {
		c.first = t
	}
	c.n++
	c.last = t
}

// ApprovalHint returns hint, followed, for a change in APPROVAL_SENT
// (status) when this process refused callbacks, by how many since when and
// what to check.
func (c *CallbackRefusals) ApprovalHint(status, hint string) string {
	if c == nil || status != rules.StatusApprovalSent {
		return hint
	}
	c.mu.Lock()
	n, first, last := c.n, c.first, c.last
	c.mu.Unlock()
	if n == 0 {
		return hint
	}
	what := "1 approval callback was"
	if n > 1 {
		what = fmt.Sprintf("%d approval callbacks were", n)
	}
	return fmt.Sprintf("%s But %s refused for a bad signature since %s (the last at %s): if the approval system decided, "+
		"its callback did not reach this change; check that callback_secret (CHANGEBOT_CALLBACK_SECRET) is the key the approval system signs with.",
		hint, what, first.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339))
}
