package flows_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// githubRule is the message GitHub's 405 gives for a merge a ruleset
// blocks (the pull request reads mergeable_state "blocked" as for a
// missing review).
const githubRule = "Repository rule violations found: commit message must match ^CHG-"

// TestFailureTextsSpeakThePlatform (issue 15): the same failure paths on a
// GitLab change and on a GitHub change. The GitLab change keeps its texts
// word for word; the GitHub change's detail and hint name "pull request
// #N" and GitHub and never GitLab, a merge request or "!N"; and the reason
// GitHub gives only in its 405 (a ruleset) reaches the detail of
// HANDLE_NOT_MERGEABLE after the one more round the flow takes.
//
// The harness's GitLab fake stands in for the platform on both (the flow
// decides on the neutral platform types); on GitHub every merge the fake
// refuses answers 405 with GitHub's message, as GitHub does.
func TestFailureTextsSpeakThePlatform(t *testing.T) {
	t.Parallel()
	const mergePath = "/api/v4/projects/*/merge_requests/*/merge"
	tests := []struct {
		name string
		// block is what the fake shows for the merge request once its
		// pipeline passed; fault, when set, is injected as well.
		block gitlabfake.MergeBlock
		fault *gitlabfake.Fault
		// refusal is the message of GitHub's 405 to the merge.
		refusal string
		want    rules.StepCode
		// gitlab is the GitLab change's detail (%[1]d: the iid); github
		// are texts the GitHub change's detail must hold (%[1]d: the iid).
		gitlab string
		github []string
	}{
		{
			name:   "reviewer denied",
			fault:  &gitlabfake.Fault{Method: "POST", PathPattern: "/api/v4/projects/*/merge_requests/*/approve", Status: 401, Body: `{"message":"401 Unauthorized"}`, User: "reviewer1"},
			want:   rules.HandleReviewerDenied,
			gitlab: "reviewer robot reviewer1 may not approve !%[1]d: GitLab answered 401 (token revoked or expired, or the account is not eligible to approve)",
			github: []string{"may not approve #%[1]d: GitHub answered 401"},
		},
		{
			name:    "a reviewer requested changes",
			block:   gitlabfake.MergeBlock{DetailedMergeStatus: "requested_changes"},
			refusal: "Pull Request is not mergeable",
			want:    rules.HandleNotMergeable,
			gitlab:  "GitLab refuses to merge !%[1]d: a reviewer requested changes (requested_changes)",
			github:  []string{"GitHub refuses to merge #%[1]d: a reviewer requested changes (requested_changes): Pull Request is not mergeable"},
		},
		{
			// GitHub: "blocked" reads as a missing review, so the flow
			// approves once more (merge.max_rounds 1), then stops with
			// the ruleset's message, which only the 405 gives.
			name:    "blocked by a rule only the merge answer names",
			block:   gitlabfake.MergeBlock{DetailedMergeStatus: "not_approved"},
			refusal: githubRule,
			want:    rules.HandleNotMergeable,
			gitlab:  "GitLab still answers not_approved for !%[1]d after 1 rounds",
			github:  []string{"GitHub still answers not_approved for #%[1]d after 1 rounds: " + githubRule},
		},
		{
			name:    "conflict",
			block:   gitlabfake.MergeBlock{DetailedMergeStatus: "conflict"},
			refusal: "Pull Request is not mergeable",
			want:    rules.HandleRebaseConflict,
			gitlab:  "!%[1]d has conflicts with main",
			github:  []string{"#%[1]d has conflicts with main"},
		},
		{
			name:    "draft",
			block:   gitlabfake.MergeBlock{Draft: true},
			refusal: "Pull Request is not mergeable",
			want:    rules.HandleDraft,
			gitlab:  "the merge request is a draft: mark it ready in GitLab",
			github:  []string{"the pull request is a draft: mark it ready in GitHub"},
		},
	}
	for _, tt := range tests {
		for _, platformName := range []string{store.PlatformGitLab, store.PlatformGitHub} {
			t.Run(tt.name+"/"+platformName, func(t *testing.T) {
				t.Parallel()
				h := flowtest.New(t, &flowtest.Opts{Poll: withMaxRounds(1), Configure: func(c *flows.EngineConfig) {
					c.Platform = platformName
				}})
				op := h.ToMROpened(t, flowtest.Change("payments-api"))
				if tt.block != (gitlabfake.MergeBlock{}) {
					h.GitLab.SetMergeBlock(h.Project.ID, op.MRIID, tt.block)
				}
				if tt.fault != nil {
					h.GitLab.InjectFault(*tt.fault)
				}
				if platformName == store.PlatformGitHub && tt.refusal != "" {
					h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPut, PathPattern: mergePath, Status: http.StatusMethodNotAllowed,
						Body: fmt.Sprintf(`{"message":%q,"documentation_url":"https://docs.github.com/rest/pulls/pulls#merge-a-pull-request"}`, tt.refusal)})
				}
				h.DeliverWebhooks(t) // the pipeline passed: the handle phase starts
				got := h.RunUntil(t, op.ID, tt.want, time.Hour)
				st := rules.MustStep(tt.want)
				hint := h.Engine.StatusView(got, h.Events(t, op.ID)).Hint
				if platformName == store.PlatformGitLab {
					if want := withIID(tt.gitlab, op.MRIID); got.Detail != want {
						t.Errorf("GitLab detail %q, want %q", got.Detail, want)
					}
					if hint != st.Hint {
						t.Errorf("GitLab hint %q, want the step table's %q", hint, st.Hint)
					}
					return
				}
				for _, w := range tt.github {
					if w = withIID(w, op.MRIID); !strings.Contains(got.Detail, w) {
						t.Errorf("GitHub detail %q does not say %q", got.Detail, w)
					}
				}
				for what, text := range map[string]string{"detail": got.Detail, "hint": hint} {
					for _, never := range []string{"GitLab", "merge request", fmt.Sprintf("!%d", op.MRIID)} {
						if strings.Contains(text, never) {
							t.Errorf("GitHub %s %q says %q", what, text, never)
						}
					}
				}
			})
		}
	}
}

// withIID fills format's %[1]d with iid, if it has one.
func withIID(format string, iid int64) string {
	if !strings.Contains(format, "%[1]d") {
		return format
	}
	return fmt.Sprintf(format, iid)
}

// TestHintsOnGitHub: every hint of the step table, in GitHub's words,
// names no GitLab term; on GitLab each is the step table's Hint (the
// state table of docs/states.md) word for word.
func TestHintsOnGitHub(t *testing.T) {
	t.Parallel()
	changed := 0
	for _, st := range rules.Catalogue() {
		if got := st.HintOn(store.PlatformGitLab); got != st.Hint {
			t.Errorf("%s: GitLab hint %q, want %q", st.Name, got, st.Hint)
		}
		if got := st.HintOn(""); got != st.Hint {
			t.Errorf("%s: hint with no platform %q, want GitLab's %q", st.Name, got, st.Hint)
		}
		gh := st.HintOn(store.PlatformGitHub)
		for _, never := range []string{"GitLab", "merge request", "MR ", "pipeline"} {
			if strings.Contains(gh, never) {
				t.Errorf("%s: GitHub hint %q says %q", st.Name, gh, never)
			}
		}
		if gh != st.Hint {
			changed++
		}
	}
	if changed < 8 {
		t.Errorf("only %d hints differ on GitHub; the step table names GitLab terms in at least 8", changed)
	}
}
