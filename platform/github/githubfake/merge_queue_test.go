package githubfake

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"changebot/internal/fixture"
)

const (
	gqlDetect  = `query($owner: String!, $name: String!, $branch: String!) { repository(owner: $owner, name: $name) { mergeQueue(branch: $branch) { id } } }`
	gqlEntry   = `query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) { pullRequest(number: $number) { merged state mergeQueueEntry { state position } } } }`
	gqlEnqueue = `mutation($input: EnqueuePullRequestInput!) { enqueuePullRequest(input: $input) { mergeQueueEntry { state position } } }`
)

// TestMergeQueue (issue 22 point 4): a branch that requires a merge queue
// refuses the REST merge with 405; GraphQL detects the queue, refuses a
// stale expectedHeadOid, enqueues at the head; the group's checks run on
// gh-readonly-queue/main/pr-<n>-<sha> with merge_group checks_requested;
// passing checks merge the pull request (base moves, closed merged,
// merge_group destroyed merged); failing ones dequeue the next (pull_request
// dequeued, merge_group destroyed dequeued).
func TestMergeQueue(t *testing.T) {
	t.Parallel()
	rv := &receiver{}
	hooks := httptest.NewServer(rv)
	t.Cleanup(hooks.Close)
	srv := New(Options{WebhookURL: hooks.URL})
	t.Cleanup(srv.Close)
	srv.AddUser("changebot", robotToken)
	repo := srv.AddRepo(RepoSpec{FullName: "acme/config", Collaborators: map[string]string{"changebot": "write"}})
	srv.SetMergeQueue(repo.ID, "main", true)
	e := &env{t: t, srv: srv, rv: rv}
	const api = "/repos/acme/config"
	gql := func(query string, vars map[string]any) map[string]any {
		t.Helper()
		return e.must(200, "POST", "/graphql", robotToken, map[string]any{"query": query, "variables": vars})
	}
	open := func(b string) string { // a pull request of a new branch b off main's tip, its node id
		t.Helper()
		e.must(201, "POST", api+"/git/refs", robotToken, map[string]any{"ref": "refs/heads/" + b, "sha": srv.BranchSHA(repo.ID, "main")})
		srv.PushToBranch(repo.ID, b, "changebot")
		return e.must(201, "POST", api+"/pulls", robotToken, map[string]any{"title": b, "head": b, "base": "main"})["node_id"].(string)
	}
	nodes := []string{open("one"), open("two")} // two changes README.md as one does: it will conflict
	if err := srv.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	head1 := srv.BranchSHA(repo.ID, "one")
	if st, b := e.call("PUT", api+"/pulls/1/merge", robotToken, map[string]any{"sha": head1}); st != 405 || !strings.Contains(string(b), mergeQueueRefusal) {
		t.Fatalf("REST merge into a queued branch: %d %s, want 405 %q", st, b, mergeQueueRefusal)
	}
	for branch, want := range map[string]bool{"main": true, "one": false} {
		d := gql(gqlDetect, map[string]any{"owner": "acme", "name": "config", "branch": branch})
		if got := d["data"].(map[string]any)["repository"].(map[string]any)["mergeQueue"] != nil; got != want {
			t.Errorf("mergeQueue(branch: %s) non-null %v, want %v", branch, got, want)
		}
	}
	stale := gql(gqlEnqueue, map[string]any{"input": map[string]any{"pullRequestId": nodes[0], "expectedHeadOid": srv.BranchSHA(repo.ID, "main")}})
	if stale["errors"] == nil || stale["data"] != nil {
		t.Fatalf("enqueue with a stale expectedHeadOid: %v, want errors and data null", stale)
	}
	ok := gql(gqlEnqueue, map[string]any{"input": map[string]any{"pullRequestId": nodes[0], "expectedHeadOid": head1}})
	if ok["errors"] != nil {
		t.Fatalf("enqueue: %v", ok)
	}
	entry := gql(gqlEntry, map[string]any{"owner": "acme", "name": "config", "number": 1})
	pr := entry["data"].(map[string]any)["repository"].(map[string]any)["pullRequest"].(map[string]any)
	if mq, _ := pr["mergeQueueEntry"].(map[string]any); mq["state"] != "AWAITING_CHECKS" || mq["position"] != float64(1) {
		t.Errorf("entry right after enqueue: %v, want AWAITING_CHECKS at 1", pr)
	}
	if err := srv.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	snap, _ := srv.PullRequest(repo.ID, 1)
	if !snap.Merged || srv.BranchSHA(repo.ID, "main") != snap.MergeCommitSHA {
		t.Fatalf("after passing group checks: %+v, main at %s; want merged and main at its merge commit", snap, srv.BranchSHA(repo.ID, "main"))
	}
	if n, shas := srv.EnqueueCount(repo.ID, 1); n != 1 || shas[0] != head1 {
		t.Errorf("EnqueueCount = %d %v, want 1 [%s]", n, shas, head1)
	}
	var group struct {
		MergeGroup struct {
			HeadSHA string `json:"head_sha"`
			HeadRef string `json:"head_ref"`
			BaseRef string `json:"base_ref"`
		} `json:"merge_group"`
		Reason string `json:"reason"`
	}
	requested := rv.first(t, "merge_group", "checks_requested", "")
	if err := json.Unmarshal(requested, &group); err != nil {
		t.Fatal(err)
	}
	// The shape of GitHub's documentation example (no real capture found).
	if diff := fixture.Diff(t, fixture.GitHub(t, "webhook-merge_group-checks_requested.json"), requested,
		fixture.Check{Exceptions: fixture.Merge(notModelled, hookEnvelope), Match: fixture.Anywhere}); len(diff) > 0 {
		t.Errorf("merge_group checks_requested differs from webhook-merge_group-checks_requested.json:\n  %s", strings.Join(diff, "\n  "))
	}
	if want := "refs/heads/gh-readonly-queue/main/pr-1-" + head1; group.MergeGroup.HeadRef != want || group.MergeGroup.BaseRef != "refs/heads/main" || group.MergeGroup.HeadSHA != snap.MergeCommitSHA {
		t.Errorf("checks_requested merge_group %+v, want head_ref %s, base_ref refs/heads/main, head_sha %s", group.MergeGroup, want, snap.MergeCommitSHA)
	}
	rv.first(t, "merge_group", "destroyed", `"reason":"merged"`)
	rv.first(t, "pull_request", "closed", `"merged":true`)

	gql(gqlEnqueue, map[string]any{"input": map[string]any{"pullRequestId": nodes[1], "expectedHeadOid": srv.BranchSHA(repo.ID, "two")}})
	if err := srv.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	rv.first(t, "pull_request", "dequeued", `"reason":"MERGE_CONFLICT"`)

	srv.SetCIScript(repo.ID, CIScript{Outcomes: []string{"failure"}})
	third := open("three")
	gql(gqlEnqueue, map[string]any{"input": map[string]any{"pullRequestId": third, "expectedHeadOid": srv.BranchSHA(repo.ID, "three")}})
	if err := srv.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if snap, _ := srv.PullRequest(repo.ID, 3); snap.Merged || snap.State != "open" || srv.QueueEntryState(repo.ID, 3) != "" {
		t.Errorf("after failing group checks: %+v, entry %q; want open, unmerged, not queued", snap, srv.QueueEntryState(repo.ID, 3))
	}
	rv.first(t, "pull_request", "dequeued", `"reason":"CI_FAILURE"`)
	rv.first(t, "merge_group", "destroyed", `"reason":"dequeued"`)
	entry = gql(gqlEntry, map[string]any{"owner": "acme", "name": "config", "number": 3})
	if pr := entry["data"].(map[string]any)["repository"].(map[string]any)["pullRequest"].(map[string]any); pr["mergeQueueEntry"] != nil {
		t.Errorf("entry after dequeue: %v, want null", pr["mergeQueueEntry"])
	}
}
