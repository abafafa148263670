package flows_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"changebot/flows/flowtest"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/templates"
)

// TestMRDescriptionTruncatedToGitLabLimit (issue 10 point 5): a change
// whose description is longer than GitLab's MR description limit
// (1,048,576 characters; gitlabfake answers 400 beyond it) still opens its
// merge request, with the description cut and a visible "…truncated; full
// history at <the change's API URL>" line, the requester's line kept.
func TestMRDescriptionTruncatedToGitLabLimit(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	p := flowtest.Change("svc")
	p.Description = strings.Repeat("é", gitlabfake.MaxDescriptionChars+10)
	op := h.ToMROpened(t, p)
	desc := h.MR(t, op.ID).Description
	link := flowtest.ExternalURL + "/api/v1/changes/" + op.ID
	if n := utf8.RuneCountInString(desc); n > gitlabfake.MaxDescriptionChars || n < gitlabfake.MaxDescriptionChars-200 {
		t.Errorf("description of %d characters, want at most %d and not much less", n, gitlabfake.MaxDescriptionChars)
	}
	if !strings.Contains(desc, "\n\n"+templates.TruncatedPrefix+link+"\n") ||
		!strings.HasSuffix(desc, "Requested by @"+p.RequestedBy+" through changebot (operation `"+op.ID+"`).") {
		t.Errorf("description does not end with the truncation line and the requester: %q", desc[len(desc)-300:])
	}
}

// TestStatusCommentTruncatedToGitLabLimit (issue 10 point 5): a change whose
// history makes its status comment longer than GitLab's note limit
// (1,000,000 characters; gitlabfake answers 400 beyond it) still gets its
// comment, cut to the limit with a visible "…truncated; full history at
// <the change's API URL>" line, and the refresh succeeds.
func TestStatusCommentTruncatedToGitLabLimit(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	h.RequirePostgres(t, "writes change_events rows with PostgreSQL SQL through h.Schema.Pool")
	ctx := context.Background()
	op := h.ToMROpened(t, flowtest.Change("svc"))
	h.RunFor(t, flowtest.Poll.NoteDelay)
	// A long history, as a change parked and resumed for years would leave:
	// copies of its last event (the comment reads events, not their hashes).
	if _, err := h.Schema.Pool.Exec(ctx, `INSERT INTO change_events (operation_id, seq, type, from_step, to_step,
		from_status, to_status, actor, source, payload, schema_version, occurred_at, prev_hash, hash)
		SELECT e.operation_id, e.seq + g, e.type, e.from_step, e.to_step, e.from_status, e.to_status,
			'reviewer-with-a-rather-long-username', 'reconciler', e.payload, e.schema_version, e.occurred_at, e.prev_hash, e.hash
		FROM change_events e, generate_series(1, 12000) g
		WHERE e.operation_id = $1 AND e.seq = (SELECT max(seq) FROM change_events WHERE operation_id = $1)`, op.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.Engine.RefreshNow(ctx, h.Op(t, op.ID)); err != nil {
		t.Fatalf("refreshing a long status comment: %v", err)
	}
	var body string
	for _, n := range h.MR(t, op.ID).Notes {
		if _, ok := templates.ParseMarker(n.Body); ok {
			body = n.Body
		}
	}
	link := flowtest.ExternalURL + "/api/v1/changes/" + op.ID
	if n := utf8.RuneCountInString(body); n > gitlabfake.MaxNoteChars || n < gitlabfake.MaxNoteChars-500 {
		t.Errorf("status comment of %d characters, want at most %d and not much less", n, gitlabfake.MaxNoteChars)
	}
	if !strings.HasSuffix(body, templates.TruncatedPrefix+link+"\n") || !strings.Contains(body, "<sub>MR_CREATING · step CREATE_MR_OPENED") {
		t.Errorf("status comment is not the truncated current one: %q … %q", body[:200], body[len(body)-200:])
	}
}
