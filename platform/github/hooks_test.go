package github

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"changebot/internal/fixture"
	"changebot/platform"
)

// cogniSecret is the webhook secret the Cogni-DAO project published for
// its captures (testdata/github/README.md): the six webhook-*.json files
// with a .headers.json twin are signed with it.
const cogniSecret = "402786017574bd28f9d8f7a18648939751c47fe09077d56e10f0444f14fbb73b"

// TestVerifySignatureRealDeliveries verifies each captured delivery's
// X-Hub-Signature-256 over the file's exact bytes, and refuses it with one
// byte changed, with another secret, without the header and without the
// sha256= prefix.
func TestVerifySignatureRealDeliveries(t *testing.T) {
	t.Parallel()
	for _, hp := range fixture.GitHubGlob(t, "webhook-*.headers.json") {
		name := strings.TrimSuffix(filepath.Base(hp), ".headers.json") + ".json"
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var headers map[string]string
			if err := json.Unmarshal(fixture.GitHub(t, filepath.Base(hp)), &headers); err != nil {
				t.Fatal(err)
			}
			body := fixture.GitHub(t, name)
			sig := headers["x-hub-signature-256"]
			if err := VerifySignature(cogniSecret, sig, body); err != nil {
				t.Fatalf("VerifySignature(real delivery) = %v", err)
			}
			if got := SignatureHeader(cogniSecret, body); got != sig {
				t.Errorf("SignatureHeader = %s; want the captured %s", got, sig)
			}
			tampered := append([]byte(nil), body...)
			tampered[len(tampered)/2] ^= 1
			for what, err := range map[string]error{
				"tampered body": VerifySignature(cogniSecret, sig, tampered),
				"other secret":  VerifySignature("other", sig, body),
				"no header":     VerifySignature(cogniSecret, "", body),
				"no prefix":     VerifySignature(cogniSecret, strings.TrimPrefix(sig, "sha256="), body),
				"sha1 header":   VerifySignature(cogniSecret, headers["x-hub-signature"], body),
				"no secret":     VerifySignature("", sig, body),
			} {
				if !errors.Is(err, ErrBadSignature) {
					t.Errorf("%s: err = %v; want ErrBadSignature", what, err)
				} else if strings.Contains(err.Error(), cogniSecret) {
					t.Errorf("%s: error leaks the secret", what)
				}
			}
			ev, err := DecodeHook(headers["x-github-event"], body)
			if err != nil || ev.ProjectID == 0 {
				t.Errorf("DecodeHook(%s) = %+v, %v", headers["x-github-event"], ev, err)
			}
		})
	}
}

// TestVerifySignatureDocsVector is GitHub's documented test vector
// (docs.github.com "Validating webhook deliveries").
func TestVerifySignatureDocsVector(t *testing.T) {
	t.Parallel()
	const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if err := VerifySignature("It's a Secret to Everybody", want, []byte("Hello, World!")); err != nil {
		t.Fatalf("docs vector: %v", err)
	}
}

// circleURL is the target_url of the status fixtures.
const circleURL = "https://circleci.com/gh/recipeyak/recipeyak/9329?utm_campaign=vcs-integration-link&utm_medium=referral&utm_source=github-build-link"

// TestDecodeHookFixtures decodes every real payload in testdata/github
// into the neutral event and checks the fields the flows read.
func TestDecodeHookFixtures(t *testing.T) {
	t.Parallel()
	type mrWant struct {
		iid                            int64
		action, state, sha, mergeSHA   string
		oldRev, source, target, status string
		draft, draftChanged            bool
	}
	tests := []struct {
		file, event string
		kind        string
		project     int64
		path, user  string
		mr          *mrWant
		note        *platform.NoteHook
		pipe        *platform.PipelineHook
	}{
		{file: "webhook-pull_request-opened.json", event: "pull_request", kind: platform.HookMergeRequest, project: 1064412804, path: "derekg1729/test-repo", user: "derekg1729",
			mr: &mrWant{iid: 315, action: "open", state: "opened", sha: "eeb67d6e0f", source: "cogni-e2e-1759155366275", target: "main", status: "checking"}},
		{file: "webhook-pull_request-synchronize.json", event: "pull_request", kind: platform.HookMergeRequest, project: 1064412804, path: "derekg1729/test-repo", user: "derekg1729",
			mr: &mrWant{iid: 315, action: "update", state: "opened", sha: "b47337c4ca", oldRev: "b459bb3b", source: "cogni-e2e-1759155366275", target: "main", status: "checking"}},
		{file: "webhook-pull_request-closed-merged.json", event: "pull_request", kind: platform.HookMergeRequest, project: 1064412804, path: "derekg1729/test-repo", user: "derekg1729",
			mr: &mrWant{iid: 315, action: "merge", state: "merged", sha: "b47337c4ca", mergeSHA: "18cc785e", source: "cogni-e2e-1759155366275", target: "main", status: "checking"}},
		{file: "webhook-pull_request-closed-unmerged.json", event: "pull_request", kind: platform.HookMergeRequest, project: 576689461, path: "anbraten/test-ready-release-go", user: "anbraten",
			mr: &mrWant{iid: 62, action: "close", state: "closed", sha: "c88b9ee719", source: "anbraten-patch-3", target: "main", status: "mergeable"}},
		{file: "webhook-pull_request-reopened.json", event: "pull_request", kind: platform.HookMergeRequest, project: 1028609128, path: "6543/test_ci_tmp", user: "6543",
			mr: &mrWant{iid: 1, action: "reopen", state: "opened", sha: "36b5813240", source: "6543-patch-1", target: "main", status: "checking"}},
		{file: "webhook-pull_request-ready_for_review.json", event: "pull_request", kind: platform.HookMergeRequest, project: 498312568, path: "wings-software/meet-git-sync-test", user: "rathodmeetsatish",
			mr: &mrWant{iid: 38, action: "update", state: "opened", sha: "212015fb01", source: "rathodmeetsatish-patch-25", target: "main", status: "mergeable", draftChanged: true}},
		{file: "webhook-pull_request-converted_to_draft.json", event: "pull_request", kind: platform.HookMergeRequest, project: 186853002, path: "Codertocat/Hello-World", user: "Codertocat",
			mr: &mrWant{iid: 2, action: "update", state: "opened", sha: "ec26c3e57c", source: "changes", target: "master", status: "mergeable", draft: true, draftChanged: true}},
		{file: "webhook-pull_request-edited.json", event: "pull_request", kind: platform.HookMergeRequest, project: 183980723, path: "chdsbd/test_repo", user: "chdsbd",
			mr: &mrWant{iid: 8, action: "update", state: "opened", sha: "61e583350f", source: "chdsbd-patch-5", target: "master", status: "mergeable"}},
		{file: "webhook-pull_request-opened-draft.json", event: "pull_request", kind: platform.HookMergeRequest, project: 183980723, path: "chdsbd/test_repo", user: "chdsbd",
			mr: &mrWant{iid: 10, action: "open", state: "opened", sha: "f7a70abcdb", source: "chdsbd-patch-7", target: "master", status: "draft_status", draft: true}},
		{file: "webhook-pull_request_review-submitted-approved.json", event: "pull_request_review", kind: platform.HookMergeRequest, project: 183980723, path: "chdsbd/test_repo", user: "sbdchd",
			mr: &mrWant{iid: 9, action: "approved", state: "opened", sha: "da14dfc294", source: "chdsbd-patch-6", target: "master", status: "checking"}},
		{file: "webhook-issue_comment-created-pr.json", event: "issue_comment", kind: platform.HookNote, project: 309651765, path: "abc/def-ci-webhook-test", user: "lts-def",
			note: &platform.NoteHook{ID: 751955664, Body: "trigger abc", Action: "create", NoteableType: platform.NoteableMergeRequest, MRIID: 2, AuthorID: 10278482}},
		{file: "webhook-issue_comment-edited-pr.json", event: "issue_comment", kind: platform.HookNote, project: 537482687, user: "gagbo-test-app[bot]",
			note: &platform.NoteHook{ID: 1640255529, Action: "update", NoteableType: platform.NoteableMergeRequest, MRIID: 5, AuthorID: 139451816}},
		{file: "webhook-check_suite-completed.json", event: "check_suite", kind: platform.HookPipeline, project: 1064412804, path: "derekg1729/test-repo",
			pipe: &platform.PipelineHook{Ref: "e2e-test-1760227487027", SHA: "a69811586879ea72cb7657e555fcdb45cf96c6d6", Status: "success", Source: "check_suite", MRIID: 166, MRSourceBranch: "e2e-test-1760227487027", Partial: true, Name: "github-actions"}},
		{file: "webhook-check_run-completed.json", event: "check_run", kind: platform.HookPipeline, project: 1064412804, path: "derekg1729/test-repo",
			pipe: &platform.PipelineHook{Ref: "e2e-test-1760227487027", SHA: "a69811586879ea72cb7657e555fcdb45cf96c6d6", Status: "skipped", Source: "check_run", MRIID: 166, MRSourceBranch: "e2e-test-1760227487027", Partial: true, Name: "OpenSSF Scorecard (weekly)",
				WebURL: "https://github.com/derekg1729/test-repo/actions/runs/18436407476/job/52530363735"}},
		{file: "webhook-status-success.json", event: "status", kind: platform.HookPipeline, project: 115887384,
			pipe: &platform.PipelineHook{Ref: "master", SHA: "736e0e8d7cfd6cc3ac43357f61ea0419debd57fa", Status: "success", Source: "status", Partial: true, Name: "ci/circleci: build_ui_container",
				WebURL: circleURL}},
		{file: "webhook-status-pending.json", event: "status", kind: platform.HookPipeline, project: 115887384,
			pipe: &platform.PipelineHook{Ref: "master", SHA: "736e0e8d7cfd6cc3ac43357f61ea0419debd57fa", Status: "running", Source: "status", Partial: true, Name: "ci/circleci: build_ui_container",
				WebURL: circleURL}},
		{file: "webhook-workflow_run-completed.json", event: "workflow_run", kind: platform.HookPipeline,
			pipe: &platform.PipelineHook{Ref: "master", SHA: "3484a3fb816e0859fd6e1cea078d76385ff50625", Status: "success", Source: "workflow_run", Partial: true,
				WebURL: "https://github.com/octo-org/octo-repo/actions/runs/289782451"}},
		{file: "webhook-workflow_run-in_progress.json", event: "workflow_run", kind: platform.HookPipeline, project: 1064412804, path: "derekg1729/test-repo",
			pipe: &platform.PipelineHook{Ref: "refs/pull/166/head", SHA: "a69811586879ea72cb7657e555fcdb45cf96c6d6", Status: "running", Source: "workflow_run", Partial: true, Name: "PR #166",
				WebURL: "https://github.com/derekg1729/test-repo/actions/runs/18436407157"}},
		{file: "webhook-push-default-branch.json", event: "push", kind: platform.HookPush, project: 179344069, path: "woodpecker-ci/woodpecker", user: "6543"},
		{file: "webhook-deployment_status-created.json", event: "deployment_status", kind: platform.HookOther, project: 186853002, path: "Codertocat/Hello-World", user: "Codertocat"},
		{file: "webhook-ping-repo.json", event: "ping", kind: platform.HookOther, project: 186853261, path: "Octocoders/Hello-World", user: "Codertocat"},
		{file: "webhook-ping-app.json", event: "ping", kind: platform.HookOther},
	}
	covered := map[string]bool{"webhook-merge_group-checks_requested.json": true} // TestDecodeMergeQueueHooks
	for _, tt := range tests {
		covered[tt.file] = true
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			ev, err := DecodeHook(tt.event, fixture.GitHub(t, tt.file))
			if err != nil {
				t.Fatalf("DecodeHook: %v", err)
			}
			if ev.Kind != tt.kind || ev.ProjectID != tt.project && tt.project != 0 || (tt.path != "" && ev.ProjectPath != tt.path) || (tt.user != "" && ev.User.Username != tt.user) {
				t.Errorf("envelope = %s project %d %q user %+v; want %s %d %q %s", ev.Kind, ev.ProjectID, ev.ProjectPath, ev.User, tt.kind, tt.project, tt.path, tt.user)
			}
			if (ev.MergeRequest != nil) != (tt.mr != nil) || (ev.Note != nil) != (tt.note != nil) || (ev.Pipeline != nil) != (tt.pipe != nil) {
				t.Fatalf("parts = mr %v note %v pipeline %v", ev.MergeRequest != nil, ev.Note != nil, ev.Pipeline != nil)
			}
			if w := tt.mr; w != nil {
				m := ev.MergeRequest
				if m.IID != w.iid || m.Action != w.action || m.State != w.state || !strings.HasPrefix(m.SHA, w.sha) || len(m.SHA) != 40 ||
					!strings.HasPrefix(m.MergeCommitSHA, w.mergeSHA) || (w.mergeSHA == "" && m.MergeCommitSHA != "") ||
					!strings.HasPrefix(m.OldRev, w.oldRev) || (w.oldRev == "" && m.OldRev != "") ||
					m.SourceBranch != w.source || m.TargetBranch != w.target || m.DetailedMergeStatus != w.status ||
					m.Draft != w.draft || m.DraftChanged != w.draftChanged || m.ID == 0 || m.AuthorID == 0 {
					t.Errorf("merge request = %+v; want %+v", *m, *w)
				}
			}
			if w := tt.note; w != nil {
				n := *ev.Note
				if w.Body == "" {
					n.Body = ""
				}
				n.Author = platform.User{}
				if n != *w {
					t.Errorf("note = %+v; want %+v", n, *w)
				}
				if ev.Note.Author.ID != w.AuthorID || ev.User != ev.Note.Author {
					t.Errorf("note author %+v, user %+v; want id %d both", ev.Note.Author, ev.User, w.AuthorID)
				}
			}
			if w := tt.pipe; w != nil && *ev.Pipeline != *w {
				t.Errorf("pipeline = %+v; want %+v", *ev.Pipeline, *w)
			}
		})
	}
	for _, f := range fixture.GitHubGlob(t, "webhook-*.json") {
		if b := filepath.Base(f); !strings.HasSuffix(b, ".headers.json") && !covered[b] {
			t.Errorf("fixture %s is not decoded by this test", b)
		}
	}
}

// TestDecodeHookMalformed refuses bodies the bot cannot read with
// platform.ErrMalformedHook, and decodes an unknown or ignored event
// without error.
func TestDecodeHookMalformed(t *testing.T) {
	t.Parallel()
	const repo = `"repository":{"id":5,"full_name":"o/r"}`
	tests := []struct {
		name, event, body string
		// wantErr is in the error: the missing fields named by
		// their JSON paths; "" decodes without error.
		wantErr string
		kind    string
	}{
		{name: "array body", event: "pull_request", body: `[1]`, wantErr: "body is not a JSON object"},
		{name: "empty body", event: "push", body: ``, wantErr: "body is not a JSON object"},
		{name: "number of wrong type", event: "pull_request", body: `{"action":"opened","pull_request":{"number":"seven"}}`, wantErr: ": field pull_request.number must be an integer, not a string"},
		{name: "nested wrong type names its index", event: "check_run", body: `{"check_run":{"id":1,"pull_requests":[{"number":1},{"number":"2"}]}}`, wantErr: ": field check_run.pull_requests[1].number must be an integer, not a string"},
		{name: "pull request without number", event: "pull_request", body: `{"action":"opened","pull_request":{},` + repo + `}`, wantErr: ": pull_request.number is missing"},
		{name: "pull request event without anything", event: "pull_request", body: `{}`, wantErr: ": action, pull_request and repository are missing"},
		{name: "pull request without repository", event: "pull_request", body: `{"action":"opened","pull_request":{"number":3}}`, wantErr: ": repository is missing"},
		{name: "pull request with a repository without id", event: "pull_request", body: `{"action":"opened","pull_request":{"number":3},"repository":{}}`, wantErr: ": repository.id is missing"},
		{name: "approving review without pull request", event: "pull_request_review", body: `{"action":"submitted","review":{"state":"approved"},` + repo + `}`, wantErr: ": pull_request is missing"},
		{name: "submitted review without review", event: "pull_request_review", body: `{"action":"submitted","pull_request":{"number":3},` + repo + `}`, wantErr: ": review is missing"},
		{name: "review without action", event: "pull_request_review", body: `{}`, wantErr: ": action is missing"},
		{name: "comment without id", event: "issue_comment", body: `{"action":"created","issue":{"number":3},"comment":{},` + repo + `}`, wantErr: ": comment.id is missing"},
		{name: "comment without issue or repository", event: "issue_comment", body: `{"action":"created","comment":{"id":1,"body":"/retry"}}`, wantErr: ": issue and repository are missing"},
		{name: "empty comment event", event: "issue_comment", body: `{}`, wantErr: ": action is missing"},
		{name: "comment without comment", event: "issue_comment", body: `{"action":"edited","issue":{"number":3},` + repo + `}`, wantErr: ": comment is missing"},
		{name: "check run without id", event: "check_run", body: `{"action":"completed","check_run":{"status":"completed"},` + repo + `}`, wantErr: ": check_run.id is missing"},
		{name: "check run event without check run", event: "check_run", body: `{"action":"completed"}`, wantErr: ": check_run and repository are missing"},
		{name: "check suite event without check suite", event: "check_suite", body: `{"action":"completed"}`, wantErr: ": check_suite and repository are missing"},
		{name: "workflow run event without workflow run", event: "workflow_run", body: `{"action":"completed"}`, wantErr: ": workflow_run and repository are missing"},
		{name: "workflow run without repository", event: "workflow_run", body: `{"action":"completed","workflow_run":{"id":4}}`, wantErr: ": repository is missing"},
		{name: "status without id", event: "status", body: `{"state":"success"}`, wantErr: ": id and repository are missing"},
		{name: "push without repository", event: "push", body: `{"ref":"refs/heads/main"}`, wantErr: ": repository is missing"},
		{name: "push", event: "push", body: `{"ref":"refs/heads/main",` + repo + `}`, kind: platform.HookPush},
		{name: "deleted comment is ignored", event: "issue_comment", body: `{"action":"deleted","issue":{"number":3},"comment":{"id":9}}`, kind: platform.HookOther},
		{name: "commented review is ignored", event: "pull_request_review", body: `{"action":"submitted","review":{"state":"commented"},"pull_request":{"number":3}}`, kind: platform.HookOther},
		{name: "dismissed review", event: "pull_request_review", body: `{"action":"dismissed","review":{"state":"dismissed","user":{"id":4,"login":"r"}},"pull_request":{"number":3,"state":"open"},` + repo + `}`, kind: platform.HookMergeRequest},
		{name: "unknown event", event: "team_add", body: `{"repository":{"id":5,"full_name":"o/r"},"sender":{"id":2,"login":"u"}}`, kind: platform.HookOther},
		{name: "unknown event with odd repository", event: "star", body: `{"repository":"o/r"}`, kind: platform.HookOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev, err := DecodeHook(tt.event, []byte(tt.body))
			if tt.wantErr != "" {
				if !errors.Is(err, platform.ErrMalformedHook) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v; want ErrMalformedHook saying %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "Go ") {
					t.Errorf("err = %v names Go types", err)
				}
				return
			}
			if err != nil || ev.Kind != tt.kind {
				t.Fatalf("DecodeHook = %+v, %v; want kind %s", ev, err, tt.kind)
			}
			if tt.name == "dismissed review" && (ev.MergeRequest.Action != "unapproved" || ev.User.Username != "r") {
				t.Errorf("dismissed review = %+v user %+v; want action unapproved by r", *ev.MergeRequest, ev.User)
			}
		})
	}
}

// TestDecodeMergeQueueHooks (issue 22 point 4): merge_group (GitHub's
// documentation example) decodes to an "update" with QueueChanged for the
// pull request its head_ref names, with its head sha and base; a head_ref
// not of the gh-readonly-queue shape is HookOther; pull_request dequeued
// sets QueueChanged.
func TestDecodeMergeQueueHooks(t *testing.T) {
	t.Parallel()
	body := fixture.GitHub(t, "webhook-merge_group-checks_requested.json")
	ev, err := DecodeHook(EventMergeGroup, body)
	if err != nil {
		t.Fatal(err)
	}
	h := ev.MergeRequest
	if ev.Kind != platform.HookMergeRequest || h == nil || h.Action != "update" || !h.QueueChanged || h.IID != 104 ||
		h.SHA != "929f8209d40f77f4abc622a499c93a83babdbe64" || h.TargetBranch != "main" || ev.ProjectID != 17273051 {
		t.Fatalf("merge_group decoded as %+v %+v; want an update of #104 at 929f820… into main with QueueChanged", ev, h)
	}
	other := strings.Replace(string(body), "gh-readonly-queue/main/pr-104-", "feature/", 1)
	if ev, err := DecodeHook(EventMergeGroup, []byte(other)); err != nil || ev.Kind != platform.HookOther {
		t.Errorf("merge_group of another ref: %+v, %v; want HookOther", ev, err)
	}
	dequeued := strings.Replace(string(fixture.GitHub(t, "webhook-pull_request-edited.json")), `"action": "edited"`, `"action": "dequeued"`, 1)
	dequeued = strings.Replace(dequeued, `"action":"edited"`, `"action":"dequeued"`, 1)
	ev, err = DecodeHook(EventPullRequest, []byte(dequeued))
	if err != nil || ev.MergeRequest == nil || !ev.MergeRequest.QueueChanged || ev.MergeRequest.Action != "update" || ev.MergeRequest.TargetChanged {
		t.Errorf("pull_request dequeued: %+v, %v; want an update with QueueChanged", ev.MergeRequest, err)
	}
}

// TestDecodeLabelAndReviewHooks: pull_request labeled and unlabeled
// (docs.github.com "Webhook events and payloads", pull_request: the
// payload's label and pull_request.labels after the change) and
// review_requested (requested_reviewer) are updates carrying what adoption
// reads; the payloads are the edited fixture with the action, label and
// labels of those docs.
func TestDecodeLabelAndReviewHooks(t *testing.T) {
	t.Parallel()
	base := map[string]any{}
	if err := json.Unmarshal(fixture.GitHub(t, "webhook-pull_request-edited.json"), &base); err != nil {
		t.Fatal(err)
	}
	label := func(name string) map[string]any {
		return map[string]any{"id": 208045946, "node_id": "MDU6TGFiZWwyMDgwNDU5NDY=", "url": "https://api.github.com/repos/o/r/labels/" + name,
			"name": name, "description": nil, "color": "f29513", "default": true}
	}
	tests := []struct {
		name, action string
		extra        map[string]any
		labels       []any
		want         platform.MergeRequestHook
	}{
		{"labeled", "labeled", map[string]any{"label": label("changebot")}, []any{label("docs"), label("changebot")},
			platform.MergeRequestHook{Labels: []string{"docs", "changebot"}, LabelsChanged: true, LabelsBefore: []string{"docs"}}},
		{"unlabeled", "unlabeled", map[string]any{"label": label("changebot")}, []any{label("docs")},
			platform.MergeRequestHook{Labels: []string{"docs"}, LabelsChanged: true, LabelsBefore: []string{"docs", "changebot"}}},
		{"review_requested", "review_requested", map[string]any{"requested_reviewer": map[string]any{"login": "changebot", "id": 7, "type": "User"}}, []any{},
			platform.MergeRequestHook{ReviewersAdded: []string{"changebot"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := map[string]any{}
			for k, v := range base {
				p[k] = v
			}
			delete(p, "changes")
			p["action"] = tc.action
			pr := map[string]any{}
			for k, v := range base["pull_request"].(map[string]any) {
				pr[k] = v
			}
			pr["labels"] = tc.labels
			p["pull_request"] = pr
			for k, v := range tc.extra {
				p[k] = v
			}
			body, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := DecodeHook(EventPullRequest, body)
			if err != nil || ev.MergeRequest == nil || ev.MergeRequest.Action != "update" {
				t.Fatalf("DecodeHook: %+v, %v; want an update", ev.MergeRequest, err)
			}
			h := ev.MergeRequest
			got := platform.MergeRequestHook{Labels: h.Labels, LabelsChanged: h.LabelsChanged, LabelsBefore: h.LabelsBefore, ReviewersAdded: h.ReviewersAdded}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
