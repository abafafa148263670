package bot

import (
	"fmt"
	"sync"
	"time"

	"changebot/store"
)

// callbackRefusals counts the approval callbacks this process refused for
// a bad signature: a POST /callbacks/approval whose X-Changebot-Signature
// was well formed but did not verify (callback_secret is not the key the
// approval system signs with), counted by the handler's
// webhooks.CallbackConfig.OnBadSignature. A POST without a signature (a
// scanner, a stray request) is refused too but not counted: it says
// nothing about callback_secret. A change whose callback was
// refused waits in APPROVAL_SENT for ever, and its hint says only that it
// waits for an approver; approvalHint adds what this process saw. It is
// per process (a replica knows of the callbacks it received, and the count
// restarts with it): storing it would need a table for what the WARN log
// and changebot_callbacks_total{kind="approval",result="unauthorized"}
// already record, and doctor points at those.
type callbackRefusals struct {
	mu          sync.Mutex
	n           int
	first, last time.Time
	now         func() time.Time
}

// refused counts one refused callback, now.
func (c *callbackRefusals) refused() {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now()
	if c.n == 0 {
		c.first = t
	}
	c.n++
	c.last = t
}

// approvalHint returns hint, followed, for a change in APPROVAL_SENT
// (status) when this process refused callbacks, by how many since when and
// what to check.
func (c *callbackRefusals) approvalHint(status, hint string) string {
	if status != store.StatusApprovalSent {
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
