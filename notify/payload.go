package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"changebot/flows/rules"
	"changebot/store"
)

// Payload is the JSON body a webhook destination receives: a flat shape,
// after Atlantis' (issue 25 point 3; docs/notifications.md). It is built
// when the move commits and carried by the job, so every attempt sends
// the same bytes but its time.
type Payload struct {
	// Event is what happened (X-Changebot-Event).
	Event Event `json:"event"`
	// IdempotencyKey is "<operation_id>:<event seq>", the same on every
	// attempt and every destination (X-Changebot-Delivery).
	IdempotencyKey string `json:"idempotency_key"`
	OperationID    string `json:"operation_id"`
	// Platform is gitlab or github.
	Platform string `json:"platform"`
	// Project is the project's path ("group/repo"), ProjectID its id.
	Project   string `json:"project"`
	ProjectID int64  `json:"project_id"`
	SubjectID string `json:"subject_id"`
	TargetKey string `json:"target_key"`
	Title     string `json:"title"`
	// Status is the binding status the change entered (HANDLE_FAILED…),
	// Step the step's name (CREATE_PIPELINE_FAILED…) and StepCode its code.
	Status   string `json:"status"`
	Step     string `json:"step"`
	StepCode int    `json:"step_code"`
	// Detail is the change's detail at that moment (a failure's reason).
	Detail string `json:"detail"`
	// Hint is what a person should do now, in the platform's words.
	Hint string `json:"hint"`
	// MergeRequest is the change's merge (pull) request; nil before one
	// is opened.
	MergeRequest *PayloadMR `json:"merge_request"`
	HeadSHA      string     `json:"head_sha"`
	TargetBranch string     `json:"target_branch"`
	RequestedBy  string     `json:"requested_by"`
	// OccurredAt is when the move committed (the event's time, UTC).
	OccurredAt time.Time `json:"occurred_at"`
	// Rollout is set on a rollout's summary (RolloutNotice): the
	// rollout's progress as the move left it; the other fields are the
	// change whose move changed the rollout's state. Absent otherwise.
	Rollout *RolloutSummary `json:"rollout,omitempty"`
}

// PayloadMR is the merge request of a Payload.
type PayloadMR struct {
	IID    int64  `json:"iid"`
	WebURL string `json:"web_url"`
}

// NewPayload is the payload of event ev raised by the move that wrote op
// and appended event e.
func NewPayload(ev Event, op store.Operation, e store.Event) Payload {
	step := rules.StepCode(op.Step)
	p := Payload{
		Event: ev, IdempotencyKey: DeliveryKey(op.ID, e.Seq), OperationID: op.ID, Platform: store.PlatformOr(op.Platform),
		Project: op.Project, ProjectID: op.ProjectID, SubjectID: op.SubjectID, TargetKey: op.TargetKey, Title: op.Title,
		Status: op.Status, Step: step.String(), StepCode: op.Step, Detail: op.Detail, HeadSHA: op.HeadSHA,
		TargetBranch: op.TargetBranch, RequestedBy: op.RequestedBy, OccurredAt: e.OccurredAt.UTC(),
	}
	if s, ok := rules.Lookup(step); ok {
		p.Hint = s.HintOn(op.Platform)
	}
	if op.MRIID > 0 {
		p.MergeRequest = &PayloadMR{IID: op.MRIID, WebURL: op.MRWebURL}
	}
	return p
}

// DeliveryKey is the idempotency key of the notifications of event seq of
// operation id: "<id>:<seq>".
func DeliveryKey(id string, seq int64) string { return id + ":" + strconv.FormatInt(seq, 10) }

// Sign returns X-Changebot-Signature for body sent at timestamp (unix
// seconds, as in X-Changebot-Timestamp): "sha256=" and the lower-case hex
// HMAC-SHA256, keyed with secret, of the timestamp's decimal digits, a
// '.', and the body's bytes.
func Sign(secret string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether signature is Sign(secret, timestamp, body), in
// constant time: what a receiver checks (docs/notifications.md).
func Verify(secret string, timestamp int64, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, timestamp, body)), []byte(signature))
}

// SlackText is the one-line message of p for a Slack destination: for a
// rollout's summary "changebot: rollout <id> <state>: " and RolloutText,
// else, for example "changebot: change op_… (Raise replicas) in group/repo failed at
// CREATE_PIPELINE_FAILED: pipeline failed — !12 https://…".
func SlackText(p Payload) string {
	if p.Rollout != nil {
		return fmt.Sprintf("changebot: rollout %s %s: %s", oneLine(p.Rollout.ID, 100), rolloutVerb(p.Rollout.State), RolloutText(*p.Rollout))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "changebot: change %s", p.OperationID)
	if p.Title != "" {
		fmt.Fprintf(&b, " (%s)", oneLine(p.Title, 100))
	}
	fmt.Fprintf(&b, " in %s %s at %s", p.Project, slackVerb(p.Event), p.Step)
	if p.Detail != "" {
		fmt.Fprintf(&b, ": %s", oneLine(p.Detail, 200))
	}
	if p.MergeRequest != nil && p.MergeRequest.WebURL != "" {
		fmt.Fprintf(&b, " — %s", p.MergeRequest.WebURL)
	}
	return b.String()
}

// slackVerb says what an event means in a sentence.
func slackVerb(ev Event) string {
	switch ev {
	case EventFailed:
		return "failed"
	case EventNeedsPerson:
		return "needs a person"
	case EventMerged:
		return "was merged"
	case EventApplied:
		return "was applied"
	}
	return string(ev)
}

// rolloutVerb says what a rollout's told state means in a sentence.
func rolloutVerb(state rules.RolloutState) string {
	switch state {
	case rules.RolloutFailed:
		return "stopped on failures"
	case rules.RolloutNeedsPerson:
		return "needs a person"
	case rules.RolloutMerged:
		return "is all merged"
	case rules.RolloutDone:
		return "is done"
	}
	return string(state)
}

// oneLine is s on one line, at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
