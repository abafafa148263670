package flows

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"changebot/flows/rules"
	"changebot/platform/gitlab"
	"changebot/store"
	"changebot/templates"
)

var update = flag.Bool("update", false, "rewrite the failure goldens in ../templates/testdata/")

// jobKind returns the kind of a follow-up job's args.
func jobKind(t *testing.T, args any) string {
	t.Helper()
	k, ok := args.(interface{ Kind() string })
	if !ok {
		t.Fatalf("job args %T have no Kind", args)
	}
	return k.Kind()
}

// TestEveryStepJobHasAReachableDeclaredFailure walks every step a job can
// be enqueued for (in both flow orders, taken from followUps itself) and
// checks that the job kind's declared failure step is a legal move from
// there, or the step itself: a panic, an unexpected error or exhausted
// attempts always end in a state (DESIGN §2, issue 4 point 6).
func TestEveryStepJobHasAReachableDeclaredFailure(t *testing.T) {
	t.Parallel()
	e := &Engine{now: time.Now, poll: DefaultPollConfig}
	seen := map[string]bool{}
	for _, st := range rules.Catalogue() {
		for _, approvalFirst := range []bool{true, false} {
			op := store.Operation{ID: "op_test", Step: int(st.Code), ApprovalFirst: approvalFirst, MRIID: 7}
			for _, j := range e.followUps(op, st.Code, 2, 0) {
				kind := jobKind(t, j.Args)
				declared := declaredFailure(kind, op)
				if kind == rules.KindRefreshNote {
					continue
				}
				seen[kind] = true
				t.Run(fmt.Sprintf("%s@%s/approval_first=%v", kind, st.Name, approvalFirst), func(t *testing.T) {
					if declared == 0 {
						t.Fatalf("%s declares no failure step", kind)
					}
					if declared != st.Code && !rules.CanMove(st.Code, declared) {
						t.Fatalf("a %s job at %s cannot reach its declared failure %s", kind, st.Name, declared)
					}
				})
			}
		}
	}
	for kind := range rules.DeclaredFailures() {
		if !seen[kind] {
			t.Errorf("no step enqueues a %s job", kind)
		}
	}
}

// failureDetails are sample details for the failure goldens, as the steps
// write them.
var failureDetails = map[rules.StepCode]string{
	rules.CreateFailed:         "opening the merge request: GitLab answered 422 Source branch \"changebot/op_x\" does not exist on POST /projects/101/merge_requests",
	rules.CreatePipelineFailed: "pipeline 5003 failed for 3f2a9c1e",
	// HandleFailed's is the adapter's own (answered503Detail).
	rules.HandleRebaseConflict:  "rebasing !1 onto main failed: Rebase failed. Please rebase locally",
	rules.HandleReviewerDenied:  "reviewer robot reviewer-2 may not approve !1: GitLab answered 401 (token revoked or expired, or the account is not eligible to approve)",
	rules.HandleNotMergeable:    "GitLab refuses to merge !1: a reviewer requested changes (requested_changes)",
	rules.HandleRetargeted:      "!1 now targets production; retarget it to main and comment /retry, or /cancel",
	rules.HandlePipelinePending: "no pipeline result for 3f2a9c1e after 2h0m0s",
	rules.CreatePipelinePending: "no pipeline result for 3f2a9c1e after 2h0m0s",
	rules.ApprovalSendPending:   "requesting approval: POST https://approvals.example/requests: 503 Service Unavailable",
	rules.HandleRebasePending:   "rebase still running after 15m0s",
	rules.HandleMergePending:    "GitLab still reports checking for !1 after 15m0s",
	rules.DeployPending:         "no successful deploy pipeline for 9c0d1e2f after 6h0m0s",
	rules.ApprovalRejected:      "rejected by carol",
	rules.ApprovalWithdrawn:     "withdrawn by carol",
}

// TestFailureStatusGolden renders the status comment of every failure and
// pending step from the catalogue itself (its hint, the detail a step
// writes) and compares it with templates/testdata/status_failure_<step>.golden
// (go test ./flows -run FailureStatusGolden -update rewrites them). A hint
// changed in the catalogue shows up here.
func TestFailureStatusGolden(t *testing.T) {
	t.Parallel()
	r, err := templates.NewRenderer(nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{now: time.Now, poll: DefaultPollConfig}
	t0 := time.Date(2026, 3, 9, 14, 0, 0, 0, time.UTC)
	covered := 0
	for _, st := range rules.Catalogue() {
		failure := st.Retryable() || st.Phase == rules.PhasePending || st.Status == store.StatusRejected
		if !failure {
			continue
		}
		covered++
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			detail, ok := failureDetails[st.Code]
			if st.Code == rules.HandleFailed {
				detail, ok = "approving as reviewer-2 failed 6 times: "+answered503Detail(t), true
			}
			if !ok {
				t.Fatalf("no sample detail for %s: add one to failureDetails", st.Name)
			}
			op := store.Operation{ID: "op_01JNZK6W4X7Q2V9M3H8T5R1C0D", Title: "Raise the rate limit of payments-api",
				SubjectID: "payments-api", TargetKey: "prod/eu-west-1", RequestedBy: "alice",
				Status: st.Status, Step: int(st.Code), Detail: detail, MRIID: 1,
				MRWebURL: "https://gitlab.example/platform/config/-/merge_requests/1", TicketID: "CHG-1042"}
			payload, _ := json.Marshal(map[string]any{"detail": detail})
			events := []store.Event{
				{Seq: 1, Type: store.EventSubmitted, ToStep: int(rules.ApprovalSending), ToStatus: store.StatusApprovalSending, Actor: "alice", Source: "api", OccurredAt: t0},
				{Seq: 2, Type: store.EventAttempt, ToStep: int(rules.ApprovalSending), ToStatus: store.StatusApprovalSending, Actor: ActorBot, Source: "job:" + rules.KindHandle, OccurredAt: t0.Add(time.Minute)},
				{Seq: 3, Type: store.EventTransition, ToStep: int(st.Code), ToStatus: st.Status, Actor: ActorBot, Source: "job:test", Payload: payload, OccurredAt: t0.Add(5 * time.Minute)},
			}
			got, err := r.Status(e.StatusView(op, events))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, st.Hint) || !strings.Contains(got, detail) {
				t.Errorf("the status comment of %s does not show its hint %q and detail %q:\n%s", st.Name, st.Hint, detail, got)
			}
			path := filepath.Join("..", "templates", "testdata", "status_failure_"+strings.ToLower(st.Name)+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading golden (go test ./flows -run FailureStatusGolden -update creates it): %v", err)
			}
			if got != string(want) {
				t.Errorf("%s differs (go test ./flows -run FailureStatusGolden -update if intended)\n--- got:\n%s\n--- want:\n%s", path, got, want)
			}
		})
	}
	if covered < 10 {
		t.Fatalf("only %d failure steps in the catalogue", covered)
	}
}

// githubFailureDetails are sample details of a GitHub change, as the steps
// write them in GitHub's words (issue 15), for the GitHub failure goldens.
var githubFailureDetails = map[rules.StepCode]string{
	rules.CreatePipelineFailed: "checks (run 5003) failed for 3f2a9c1e",
	rules.HandleReviewerDenied: "reviewer robot reviewer-2 may not approve #1: GitHub answered 401 (token revoked or expired, or the account is not eligible to approve)",
	rules.HandleNotMergeable:   "GitHub still answers not_approved for #1 after 3 rounds: Repository rule violations found: commit message must match ^CHG-",
	rules.HandleMergePending:   "GitHub still reports checking for #1 after 15m0s",
	rules.HandleRetargeted:     "#1 now targets production; retarget it to main and comment /retry, or /cancel",
	rules.DeployPending:        "no successful deploy run for 9c0d1e2f after 6h0m0s",
}

// TestGitHubFailureStatusGolden renders the status comment of a GitHub
// change at a handful of failure and pending steps (the step table's hint
// in GitHub's words, a detail as the step writes it) and compares it with
// templates/testdata/status_failure_github_<step>.golden (-update rewrites
// them): it names pull request #1, GitHub and its checks, never GitLab, a
// merge request or !1.
func TestGitHubFailureStatusGolden(t *testing.T) {
	t.Parallel()
	r, err := templates.NewRenderer(nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{now: time.Now, poll: DefaultPollConfig}
	t0 := time.Date(2026, 3, 9, 14, 0, 0, 0, time.UTC)
	for code, detail := range githubFailureDetails {
		st := rules.MustStep(code)
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			op := store.Operation{ID: "op_01JNZK6W4X7Q2V9M3H8T5R1C0D", Title: "Raise the rate limit of payments-api",
				SubjectID: "payments-api", TargetKey: "prod/eu-west-1", RequestedBy: "alice", Platform: store.PlatformGitHub,
				Status: st.Status, Step: int(st.Code), Detail: detail, MRIID: 1,
				MRWebURL: "https://github.com/platform/config/pull/1", TicketID: "CHG-1042"}
			payload, _ := json.Marshal(map[string]any{"detail": detail})
			events := []store.Event{
				{Seq: 1, Type: store.EventSubmitted, ToStep: int(rules.ApprovalSending), ToStatus: store.StatusApprovalSending, Actor: "alice", Source: "api", OccurredAt: t0},
				{Seq: 2, Type: store.EventTransition, ToStep: int(rules.CreateMROpened), ToStatus: store.StatusMRCreating, Actor: ActorBot, Source: "job:" + rules.KindCreateMR, OccurredAt: t0.Add(time.Minute)},
				{Seq: 3, Type: store.EventTransition, ToStep: int(st.Code), ToStatus: st.Status, Actor: ActorBot, Source: "job:" + rules.KindHandle, Payload: payload, OccurredAt: t0.Add(5 * time.Minute)},
			}
			got, err := r.Status(e.StatusView(op, events))
			if err != nil {
				t.Fatal(err)
			}
			if hint := st.HintOn(store.PlatformGitHub); !strings.Contains(got, hint) || !strings.Contains(got, detail) {
				t.Errorf("the status comment of %s does not show its GitHub hint %q and detail %q:\n%s", st.Name, hint, detail, got)
			}
			for _, never := range []string{"GitLab", "merge request", "!1"} {
				if strings.Contains(got, never) {
					t.Errorf("the GitHub status comment of %s says %q:\n%s", st.Name, never, got)
				}
			}
			path := filepath.Join("..", "templates", "testdata", "status_failure_github_"+strings.ToLower(st.Name)+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading golden (go test ./flows -run GitHubFailureStatusGolden -update creates it): %v", err)
			}
			if got != string(want) {
				t.Errorf("%s differs (go test ./flows -run GitHubFailureStatusGolden -update if intended)\n--- got:\n%s\n--- want:\n%s", path, got, want)
			}
		})
	}
}

// answered503Detail is what a step writes of GitLab's 503 with an empty
// body on an approve, as the GitLab adapter reports it: an httptest
// server answers exactly that, so the golden shows the wording the
// adapter and failureDetail produce, not a typed copy of it (issue 21.16:
// the typed copy froze "GitLab answered 503 503 Service Unavailable").
func answered503Detail(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: "robot", ReviewerTokens: []string{"r1", "r2"}, RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Approve(t.Context(), 1, 101, 1, "3f2a9c1e")
	if err == nil {
		t.Fatal("the approve against a 503 succeeded")
	}
	return failureDetail(rules.WordsOf(rules.PlatformGitLab), err)
}
