package githubfake

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"changebot/internal/fixture"
)

// Exceptions shared by several shapes, each with its reason.
var (
	notModelled = map[string]string{
		"labels[]":              "the fake has no labels: arrays are empty",
		"milestone":             "the fake has no milestones: null",
		"assignee":              "the fake has no assignees: null",
		"assignees[]":           "the fake has no assignees: arrays are empty",
		"requested_reviewers[]": "the fake requests no reviewers: arrays are empty",
		"requested_teams[]":     "the fake has no teams: arrays are empty",
		"license":               "the fake's repositories have no license: null",
		"active_lock_reason":    "never locked",
		"topics[]":              "the fake's repositories have no topics: arrays are empty",
	}
	hookEnvelope = map[string]string{
		"installation": "the fake delivers as a repository webhook, without an App installation block",
		"organization": "the fake has no organization objects",
		"enterprise":   "the fake has no enterprise",
	}
)

// receiver records the webhooks it receives.
type receiver struct {
	mu   sync.Mutex
	got  []*http.Request
	body [][]byte
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rv.mu.Lock()
	rv.got = append(rv.got, r)
	rv.body = append(rv.body, b)
	rv.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// first returns the body of the first delivery of event with action ("" any).
func (rv *receiver) first(t *testing.T, event, action, contains string) []byte {
	t.Helper()
	rv.mu.Lock()
	defer rv.mu.Unlock()
	for i := range rv.got {
		if rv.got[i].Header.Get("X-GitHub-Event") != event {
			continue
		}
		var m struct {
			Action string `json:"action"`
		}
		_ = json.Unmarshal(rv.body[i], &m)
		if (action == "" || m.Action == action) && bytes.Contains(rv.body[i], []byte(contains)) {
			return rv.body[i]
		}
	}
	t.Fatalf("no %s %s webhook received", event, action)
	return nil
}

const (
	robotToken    = "ghp_shape_robot"
	reviewerToken = "ghp_shape_reviewer"
	hookSecret    = "shape-secret"
)

type env struct {
	t   *testing.T
	srv *Server
	rv  *receiver
}

func (e *env) call(method, path, tok string, body any) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL()+path, rd)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (e *env) must(want int, method, path, tok string, body any) map[string]any {
	e.t.Helper()
	st, b := e.call(method, path, tok, body)
	if st != want {
		e.t.Fatalf("%s %s = %d, want %d: %s", method, path, st, want, b)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// captured runs one scenario through the fake's REST API and returns the
// answers by name, and the receiver of its webhooks.
func captured(t *testing.T) (map[string][]byte, *receiver) {
	t.Helper()
	rv := &receiver{}
	hooks := httptest.NewServer(rv)
	t.Cleanup(hooks.Close)
	srv := New(Options{WebhookURL: hooks.URL, WebhookSecret: hookSecret})
	t.Cleanup(srv.Close)
	srv.AddUser("changebot", robotToken)
	srv.AddUser("reviewer", reviewerToken)
	repo := srv.AddRepo(RepoSpec{FullName: "acme/config", Collaborators: map[string]string{"changebot": "write", "reviewer": "admin"},
		RequiredContexts: []string{"build"}, CI: &CIScript{Statuses: []string{"ci/external"}}})
	e := &env{t: t, srv: srv, rv: rv}
	out := map[string][]byte{}
	rec := func(name string, want int, method, path, tok string, body any) map[string]any {
		t.Helper()
		st, b := e.call(method, path, tok, body)
		if st != want {
			t.Fatalf("%s: %s %s = %d, want %d: %s", name, method, path, st, want, b)
		}
		out[name] = b
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	const api = "/repos/acme/config"
	rec("user", 200, "GET", "/user", robotToken, nil)
	rec("permission", 200, "GET", api+"/collaborators/reviewer/permission", robotToken, nil)
	main := rec("ref", 200, "GET", api+"/git/ref/heads/main", robotToken, nil)
	mainSHA := main["object"].(map[string]any)["sha"].(string)
	rec("ref create", 201, "POST", api+"/git/refs", robotToken, map[string]any{"ref": "refs/heads/feature", "sha": mainSHA})
	blob := rec("blob", 201, "POST", api+"/git/blobs", robotToken, map[string]any{"content": "a: 1\n", "encoding": "utf-8"})
	base := e.must(200, "GET", api+"/git/commits/"+mainSHA, robotToken, nil)
	tree := rec("tree", 201, "POST", api+"/git/trees", robotToken, map[string]any{
		"base_tree": base["tree"].(map[string]any)["sha"],
		"tree":      []any{map[string]any{"path": "a.yaml", "mode": "100644", "type": "blob", "sha": blob["sha"]}},
	})
	commit := rec("commit", 201, "POST", api+"/git/commits", robotToken, map[string]any{"message": "Add a", "tree": tree["sha"], "parents": []any{mainSHA}})
	rec("ref update", 200, "PATCH", api+"/git/refs/heads/feature", robotToken, map[string]any{"sha": commit["sha"]})
	rec("pull create", 201, "POST", api+"/pulls", robotToken, map[string]any{"title": "Change", "head": "feature", "base": "main", "body": "changebot"})
	if err := srv.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	head := commit["sha"].(string)
	rec("check runs", 200, "GET", api+"/commits/"+head+"/check-runs", robotToken, nil)
	rec("combined status", 200, "GET", api+"/commits/"+head+"/status", robotToken, nil)
	rec("workflow runs", 200, "GET", api+"/actions/runs?head_sha="+head, robotToken, nil)
	rec("comment", 201, "POST", api+"/issues/1/comments", robotToken, map[string]any{"body": "Me too"})
	rec("comments", 200, "GET", api+"/issues/1/comments", robotToken, nil)
	rec("review", 200, "POST", api+"/pulls/1/reviews", reviewerToken, map[string]any{"commit_id": head, "event": "APPROVE"})
	rec("reviews", 200, "GET", api+"/pulls/1/reviews", robotToken, nil)
	rec("merge 409", 409, "PUT", api+"/pulls/1/merge", robotToken, map[string]any{"sha": mainSHA})
	srv.BlockMerge(repo.ID, 1, "Pull Request is not mergeable")
	rec("merge 405", 405, "PUT", api+"/pulls/1/merge", robotToken, map[string]any{"sha": head})
	srv.BlockMerge(repo.ID, 1, "")
	srv.PushToBranch(repo.ID, "main", "reviewer")
	rec("branch", 200, "GET", api+"/branches/main", robotToken, nil)
	rec("update-branch", 202, "PUT", api+"/pulls/1/update-branch", robotToken, map[string]any{"expected_head_sha": head})
	if err := srv.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	newHead := srv.BranchSHA(repo.ID, "feature")
	e.must(200, "POST", api+"/pulls/1/reviews", reviewerToken, map[string]any{"commit_id": newHead, "event": "APPROVE"})
	rec("merge 200", 200, "PUT", api+"/pulls/1/merge", robotToken, map[string]any{"sha": newHead, "merge_method": "merge"})
	rec("pull", 200, "GET", api+"/pulls/1", robotToken, nil)
	hook := rec("hook create", 201, "POST", api+"/hooks", reviewerToken, map[string]any{"name": "web", "active": true,
		"events": []any{"pull_request"}, "config": map[string]any{"url": "https://bot.example/webhooks/github", "content_type": "json", "secret": "s", "insecure_ssl": "0"}})
	rec("hook edit", 200, "PATCH", api+"/hooks/"+strconv.FormatFloat(hook["id"].(float64), 'f', -1, 64), reviewerToken, map[string]any{"events": []any{"*"}})
	if err := srv.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	return out, rv
}

// TestShapesMatchFixtures checks every REST answer and webhook the fake
// produces field by field against GitHub's real payloads and documented
// examples (testdata/github): every key path of the fixture must be in the
// fake's answer, except the listed exceptions, each with its reason.
func TestShapesMatchFixtures(t *testing.T) {
	t.Parallel()
	out, rv := captured(t)
	rest := []struct {
		name, fixture string
		exceptions    map[string]string
	}{
		{"user", "api-users-get-authenticated.json", nil},
		{"permission", "api-repos-collaborator-permission.json", nil},
		{"ref", "api-git-ref.json", nil},
		{"ref create", "api-git-ref.json", nil},
		{"ref update", "api-git-ref.json", nil},
		{"blob", "api-git-create-blob.json", nil},
		{"tree", "api-git-create-tree.json", nil},
		{"commit", "api-git-create-commit.json", nil},
		{"pull create", "api-pulls-get.json", fixture.Merge(notModelled, map[string]string{"merged_by": "not merged yet: null"})},
		{"pull", "api-pulls-get.json", notModelled},
		{"branch", "api-repos-branch-with-protection.json", nil},
		{"check runs", "api-checks-list-for-ref.json", nil},
		{"combined status", "api-repos-combined-status.json", notModelled},
		{"workflow runs", "api-actions-list-workflow-runs.json", notModelled},
		{"comment", "api-issues-comment.json", nil},
		{"comments", "api-issues-list-comments.json", nil},
		{"review", "api-pulls-create-review.json", nil},
		{"reviews", "api-pulls-list-reviews.json", nil},
		{"merge 200", "api-pulls-merge-200.json", nil},
		{"merge 405", "api-pulls-merge-405.json", nil},
		{"merge 409", "api-pulls-merge-409.json", nil},
		{"update-branch", "api-pulls-update-branch-202.json", nil},
	}
	// values are the paths, by test name, whose type or enum value may
	// differ from the fixture's, each with its reason: the fixture records
	// another situation than the scenario's.
	firstRead := "the first read after a change answers mergeable null and unknown, as GitHub does; the docs example is a later read"
	values := map[string]map[string]string{
		"pull create": {"mergeable_state": firstRead},
		"pull": {
			"state":           "the scenario's pull request is merged by then (closed); the docs example is open",
			"mergeable_state": "a merged pull request has no mergeability (unknown); the docs example is open and clean",
		},
		"check runs":    {"conclusion": "the docs example's check run concluded neutral; the scenario's build succeeded"},
		"workflow runs": {"status": "the docs example's run is queued; the scenario's has completed"},
		"review":        {"state": "the scenario approves; the docs example requests changes"},
		"check_run completed": {
			"conclusion":                   "the captured check run was skipped; the scenario's succeeded",
			"check_run.check_suite.status": "the capture's embedded suite still said queued; the fake's suite of one job has completed with it",
		},
	}
	hookFixture := func(t *testing.T) []byte {
		var ping struct {
			Hook json.RawMessage `json:"hook"`
		}
		if err := json.Unmarshal(fixture.GitHub(t, "webhook-ping-repo.json"), &ping); err != nil {
			t.Fatal(err)
		}
		return ping.Hook
	}
	for _, name := range []string{"hook create", "hook edit"} {
		t.Run(name, func(t *testing.T) {
			// The repository webhook object of the ping (GitHub's REST shape).
			if diff := fixture.Diff(t, hookFixture(t), out[name], fixture.Check{Match: fixture.Anywhere}); len(diff) > 0 {
				t.Errorf("%s answer differs from webhook-ping-repo.json's hook:\n  %s", name, strings.Join(diff, "\n  "))
			}
		})
	}
	for _, tt := range rest {
		t.Run(tt.name, func(t *testing.T) {
			if diff := fixture.Diff(t, fixture.GitHub(t, tt.fixture), out[tt.name], fixture.Check{Exceptions: tt.exceptions, Values: values[tt.name], Match: fixture.Anywhere}); len(diff) > 0 {
				t.Errorf("%s answer differs from %s:\n  %s", tt.name, tt.fixture, strings.Join(diff, "\n  "))
			}
		})
	}
	hooks := []struct {
		event, action, fixture string
		exceptions             map[string]string
		contains               string // in the delivery's body, to pick one
	}{
		{"pull_request", "opened", "webhook-pull_request-opened.json", fixture.Merge(notModelled, hookEnvelope), ""},
		{"pull_request", "synchronize", "webhook-pull_request-synchronize.json", fixture.Merge(notModelled, hookEnvelope), ""},
		{"pull_request", "closed", "webhook-pull_request-closed-merged.json", fixture.Merge(notModelled, hookEnvelope), ""},
		{"pull_request_review", "submitted", "webhook-pull_request_review-submitted-approved.json", fixture.Merge(notModelled, hookEnvelope), ""},
		{"issue_comment", "created", "webhook-issue_comment-created-pr.json", fixture.Merge(notModelled, hookEnvelope), ""},
		{"check_run", "completed", "webhook-check_run-completed.json", fixture.Merge(notModelled, hookEnvelope), ""},
		{"check_suite", "completed", "webhook-check_suite-completed.json", fixture.Merge(notModelled, hookEnvelope), ""},
		{"status", "", "webhook-status-success.json", fixture.Merge(notModelled, hookEnvelope), `"state":"success"`},
		{"workflow_run", "completed", "webhook-workflow_run-completed.json", fixture.Merge(notModelled, hookEnvelope), ""},
		{"push", "", "webhook-push-default-branch.json", fixture.Merge(notModelled, hookEnvelope), `"ref":"refs/heads/main"`},
	}
	for _, tt := range hooks {
		t.Run(tt.event+" "+tt.action, func(t *testing.T) {
			got := rv.first(t, tt.event, tt.action, tt.contains)
			if diff := fixture.Diff(t, fixture.GitHub(t, tt.fixture), got, fixture.Check{Exceptions: tt.exceptions, Values: values[tt.event+" "+tt.action], Match: fixture.Anywhere}); len(diff) > 0 {
				t.Errorf("%s %s webhook differs from %s:\n  %s", tt.event, tt.action, tt.fixture, strings.Join(diff, "\n  "))
			}
		})
	}
}

// TestSecondaryRateLimitBodyIsTheRecording: the fake's secondary limit
// answers the recorded 2018 body byte for byte.
func TestSecondaryRateLimitBodyIsTheRecording(t *testing.T) {
	t.Parallel()
	if want := string(fixture.GitHub(t, "api-error-403-secondary-rate-limit-2018.json")); SecondaryRateLimitBody != want {
		t.Errorf("SecondaryRateLimitBody = %s\nwant the fixture %s", SecondaryRateLimitBody, want)
	}
}

// TestWebhooksSigned: every delivery carries GitHub's headers and an
// X-Hub-Signature-256 over its exact body; a redelivery keeps its GUID.
func TestWebhooksSigned(t *testing.T) {
	t.Parallel()
	_, rv := captured(t)
	rv.mu.Lock()
	n := len(rv.got)
	guids := map[string]bool{}
	for i, r := range rv.got {
		m := hmac.New(sha256.New, []byte(hookSecret))
		m.Write(rv.body[i])
		want := "sha256=" + hex.EncodeToString(m.Sum(nil))
		if got := r.Header.Get("X-Hub-Signature-256"); !hmac.Equal([]byte(got), []byte(want)) {
			t.Errorf("delivery %d (%s): signature %q; want %q", i, r.Header.Get("X-GitHub-Event"), got, want)
		}
		guid := r.Header.Get("X-GitHub-Delivery")
		if guid == "" || guids[guid] || r.Header.Get("X-GitHub-Event") == "" || !strings.HasPrefix(r.Header.Get("User-Agent"), "GitHub-Hookshot/") {
			t.Errorf("delivery %d headers: %v", i, r.Header)
		}
		guids[guid] = true
	}
	rv.mu.Unlock()
	if n < 10 {
		t.Fatalf("only %d deliveries", n)
	}
}
