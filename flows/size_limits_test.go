package flows_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/platform/github/githubfake"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
	"changebot/templates"
)

// platformLimits are each platform's limits on what the bot writes, in
// characters, as the fakes enforce them: GitLab's MR description and note
// (gitlabfake answers 400 beyond them), GitHub's pull request body and
// issue comment (githubfake answers 422 "body is too long (maximum is 65536
// characters)").
var platformLimits = []struct {
	platform          string
	description, note int
}{
	{store.PlatformGitLab, gitlabfake.MaxDescriptionChars, gitlabfake.MaxNoteChars},
	{store.PlatformGitHub, githubfake.MaxBodyChars, githubfake.MaxBodyChars},
}

// TestMRDescriptionTruncatedToPlatformLimit (issue 10 point 5, issue 21
// point 3): a change whose description is longer than its platform's
// description limit still opens its merge request (pull request), with the
// description cut and a visible "…truncated; full history at <the
// change's API URL>" line, the requester's line kept. On GitHub the limit
// is 65,536 characters; before issue 21 the description was cut at
// GitLab's and GitHub refused the create.
func TestMRDescriptionTruncatedToPlatformLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range platformLimits {
		t.Run(tc.platform, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, &flowtest.Opts{Configure: func(c *flows.EngineConfig) { c.Platform = tc.platform }})
			p := flowtest.Change("svc")
			p.Description = strings.Repeat("é", tc.description+10)
			op := h.ToMROpened(t, p)
			desc := h.MR(t, op.ID).Description
			link := flowtest.ExternalURL + "/api/v1/changes/" + op.ID
			if n := utf8.RuneCountInString(desc); n > tc.description || n < tc.description-200 {
				t.Errorf("description of %d characters, want at most %d and not much less", n, tc.description)
			}
			if !strings.Contains(desc, "\n\n"+templates.TruncatedPrefix+link+"\n") ||
				!strings.HasSuffix(desc, "Requested by @"+p.RequestedBy+" through changebot (operation `"+op.ID+"`).") {
				t.Errorf("description does not end with the truncation line and the requester: %q", desc[len(desc)-300:])
			}
		})
	}
}

// TestStatusCommentTruncatedToPlatformLimit (issue 10 point 5, issue 21
// point 3): a change whose history makes its status comment longer than
// its platform's comment limit still gets its comment, cut to the limit
// with a visible "…truncated; full history at <the change's API URL>"
// line, and the refresh succeeds. On GitHub the limit is 65,536
// characters.
func TestStatusCommentTruncatedToPlatformLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range platformLimits {
		t.Run(tc.platform, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, &flowtest.Opts{Configure: func(c *flows.EngineConfig) { c.Platform = tc.platform }})
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
			if n := utf8.RuneCountInString(body); n > tc.note || n < tc.note-500 {
				t.Errorf("status comment of %d characters, want at most %d and not much less", n, tc.note)
			}
			if !strings.HasSuffix(body, templates.TruncatedPrefix+link+"\n") || !strings.Contains(body, "<sub>MR_CREATING · step CREATE_MR_OPENED") {
				t.Errorf("status comment is not the truncated current one: %q … %q", body[:200], body[len(body)-200:])
			}
		})
	}
}
