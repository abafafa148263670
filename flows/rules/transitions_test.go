package rules

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// designEdges is DESIGN §2's state diagram, written out independently of
// the code: every binding status move the flows may make.
var designEdges = map[[2]string]bool{
	// approval first
	{StatusApprovalSending, StatusApprovalSent}: true,
	{StatusApprovalSent, StatusMRCreating}:      true,
	{StatusMRCreating, StatusMRCreated}:         true,
	{StatusMRCreated, StatusMerging}:            true,
	{StatusMerging, StatusMerged}:               true,
	{StatusMerged, StatusValidated}:             true,
	// MR first
	{StatusMRCreated, StatusApprovalSending}: true,
	{StatusApprovalSent, StatusMerging}:      true,
	// a decision that arrives before the SENT write (awaiting = {SENDING, SENT})
	{StatusApprovalSending, StatusMRCreating}: true,
	{StatusApprovalSending, StatusMerging}:    true,
	{StatusApprovalSending, StatusRejected}:   true,
	// failures and retries
	{StatusApprovalSent, StatusRejected}:   true,
	{StatusMRCreating, StatusCreateFailed}: true,
	{StatusMerging, StatusHandleFailed}:    true,
	{StatusCreateFailed, StatusMRCreating}: true,
	{StatusHandleFailed, StatusMerging}:    true,
	{StatusHandleFailed, StatusMerged}:     true, // merged by hand after a failure, found on /retry
	{StatusMRCreated, StatusHandleFailed}:  true, // the handle job failed before its first move (every exit path ends in a state)
	// cancel: any non-terminal except MERGED (see transitions.go; MERGED below)
	{StatusApprovalSending, StatusClosed}: true,
	{StatusApprovalSent, StatusClosed}:    true,
	{StatusMRCreating, StatusClosed}:      true,
	{StatusMRCreated, StatusClosed}:       true,
	{StatusMerging, StatusClosed}:         true,
	{StatusCreateFailed, StatusClosed}:    true,
	{StatusHandleFailed, StatusClosed}:    true,
	// merged by a person in GitLab: every status that may be cancelled may
	// also turn out merged (issue 9 defect 8; MERGING and HANDLE_FAILED above)
	{StatusApprovalSending, StatusMerged}: true,
	{StatusApprovalSent, StatusMerged}:    true,
	{StatusMRCreating, StatusMerged}:      true,
	{StatusMRCreated, StatusMerged}:       true,
	{StatusCreateFailed, StatusMerged}:    true,
	// a change a person's close stopped (MR_CLOSED): an operator's /resume
	// once the MR is reopened goes back to the pipeline wait, retaking the
	// binding unless a newer change took it; a merge found is recorded
	// (issue 10 point 1)
	{StatusClosed, StatusMRCreating}: true,
	{StatusClosed, StatusMerged}:     true,
	// a change recorded merged that GitLab says was never merged (a merge
	// webhook believed without asking): /cancel, having read the MR
	{StatusMerged, StatusClosed}: true,
}

// TestTransitionTableEveryPair walks every (from, to) pair of the catalogue:
// allowed pairs must realise a design edge (or keep the status), refused
// pairs must return ErrIllegalTransition.
func TestTransitionTableEveryPair(t *testing.T) {
	t.Parallel()
	allowed, refused := 0, 0
	for _, from := range Catalogue() {
		for _, to := range Catalogue() {
			t.Run(fmt.Sprintf("%s->%s", from.Name, to.Name), func(t *testing.T) {
				err := CheckTransition(from.Code, to.Code)
				if err == nil {
					allowed++
					if from.Terminal {
						t.Fatalf("terminal step %s may move to %s", from.Name, to.Name)
					}
					if from.Status != to.Status && !designEdges[[2]string{from.Status, to.Status}] {
						t.Fatalf("allowed move changes status %s -> %s, which the design does not have", from.Status, to.Status)
					}
					return
				}
				refused++
				if !errors.Is(err, ErrIllegalTransition) {
					t.Fatalf("refusal is not ErrIllegalTransition: %v", err)
				}
			})
		}
	}
	if allowed == 0 || refused == 0 {
		t.Fatalf("allowed=%d refused=%d", allowed, refused)
	}
	t.Logf("%d allowed, %d refused moves", allowed, refused)
}

// TestEveryDesignEdgeIsReachable checks the other direction: each edge of
// the design diagram is realised by at least one step move.
func TestEveryDesignEdgeIsReachable(t *testing.T) {
	t.Parallel()
	seen := map[[2]string]bool{}
	for _, from := range Catalogue() {
		for _, to := range Catalogue() {
			if CanMove(from.Code, to.Code) {
				seen[[2]string{from.Status, to.Status}] = true
			}
		}
	}
	for edge := range designEdges {
		if !seen[edge] {
			t.Errorf("design edge %s -> %s has no step move", edge[0], edge[1])
		}
	}
}

func TestNamedIllegalTransitions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		from, to StepCode
	}{
		{"validated to merging", CalledBack, HandleStarted},
		{"rejected to create", ApprovalRejected, CreateStarted},
		{"closed to anything", Closed, CreateStarted},
		{"merged to closed by a person", HandleMerged, ClosedByPerson},
		{"deploy pending to closed by a person", DeployPending, ClosedByPerson},
		{"unknown code", StepCode(99999), CreateStarted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := CheckTransition(tt.from, tt.to); !errors.Is(err, ErrIllegalTransition) {
				t.Fatalf("CheckTransition(%s, %s) = %v, want ErrIllegalTransition", tt.from, tt.to, err)
			}
		})
	}
}

func TestCatalogueCodesInPhaseRanges(t *testing.T) {
	t.Parallel()
	ranges := map[string][2]StepCode{
		PhaseCreate: {10000, 10099}, PhaseHandle: {10100, 10199}, PhaseClose: {10200, 10299},
		PhaseCallback: {10300, 10399}, PhaseApproval: {10400, 10499}, PhasePending: {10500, 10599},
	}
	statuses := map[string]bool{}
	for _, s := range Statuses() {
		statuses[s] = true
	}
	for _, s := range Catalogue() {
		r, ok := ranges[s.Phase]
		if !ok || s.Code < r[0] || s.Code > r[1] {
			t.Errorf("%s (%d) is outside the %q range", s.Name, s.Code, s.Phase)
		}
		if !statuses[s.Status] {
			t.Errorf("%s implies unknown status %q", s.Name, s.Status)
		}
		if s.Hint == "" {
			t.Errorf("%s has no hint", s.Name)
		}
		if s.Terminal && (s.Retryable() || s.Resumable()) {
			t.Errorf("terminal %s cannot be retried or resumed", s.Name)
		}
		// A step whose binding is free is final, except the one a person's
		// close stopped: /resume continues it (MR_CLOSED).
		if s.Terminal != (s.Status == StatusValidated || Reappliable(s.Status) && !s.Resumable()) {
			t.Errorf("%s: terminal=%v disagrees with its status %s", s.Name, s.Terminal, s.Status)
		}
		for _, j := range []StepJob{s.Job, s.MRFirstJob} {
			if (j.Kind == "") != (j.Failure == 0) {
				t.Errorf("%s: job %q with failure %s: a job and its failure go together", s.Name, j.Kind, j.Failure)
			}
		}
		if s.MRFirstJob.Kind != "" && s.Job.Kind == "" {
			t.Errorf("%s has a job in the MR-first order only", s.Name)
		}
		if (s.Terminal || s.Phase == PhasePending || s.Retryable()) && s.Job.Kind != "" {
			t.Errorf("%s waits for a person or is over, yet has a job", s.Name)
		}
		if s.Resume == s.Code && s.Job.Kind == "" {
			t.Errorf("%s resumes by enqueueing its job again, but has none", s.Name)
		}
		if s.Retryable() != (s.Status == StatusCreateFailed || s.Status == StatusHandleFailed) {
			t.Errorf("%s: /retry %s does not match its failed status %s", s.Name, s.Retry, s.Status)
		}
	}
}

// TestDerivedStepSets pins the step sets derived from the step table
// against lists written out here: who accepts an approval decision, who
// waits for the MR pipeline, what the sweeper and the reconciler watch.
func TestDerivedStepSets(t *testing.T) {
	t.Parallel()
	filter := func(keep func(StepCode) bool) []StepCode {
		var out []StepCode
		for _, s := range Catalogue() {
			if keep(s.Code) {
				out = append(out, s.Code)
			}
		}
		return out
	}
	tests := []struct {
		name      string
		got, want []StepCode
	}{
		{"awaiting an approval decision", filter(AwaitingApproval), []StepCode{ApprovalSending, ApprovalSent, ApprovalSendPending}},
		{"waiting for the MR pipeline", filter(WaitsForPipeline), []StepCode{CreateMROpened, HandleAwaitPipeline, HandlePipelinePending, CreatePipelinePending}},
		{"in the create phase", filter(InCreatePhase), []StepCode{CreateStarted, CreateMROpened, CreatePipelinePending}},
		{"swept", SweepableSteps(), []StepCode{CreateStarted, CreateSucceeded, CreateMROpened, HandleStarted, HandleApproved,
			HandleMerged, HandleRebasing, HandleAwaitPipeline, HandleDraft, HandleQueued, HandleInTrain, ApprovalSending}},
		{"woken by the reconciler", PollingSteps(), []StepCode{CreateMROpened, HandleMerged, HandleRebasing, HandleAwaitPipeline, HandleDraft, HandleInTrain}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if !slices.Equal(tt.got, tt.want) {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	if want := []string{KindAwaitPipeline, KindAwaitDeploy, KindHandle}; !slices.Equal(PollingKinds(), want) {
		t.Errorf("reconciler wakes %v, want %v", PollingKinds(), want)
	}
	if want := []string{KindCreateMR, KindHandle, KindRequestApproval, KindAwaitPipeline, KindAwaitDeploy}; !slices.Equal(StepJobKinds(), want) {
		t.Errorf("step job kinds %v, want %v", StepJobKinds(), want)
	}
}

// TestResumableStepsLandOnAJob: every step the step table calls resumable
// lands, on /resume, at a step with a job in both flow orders (itself when
// Resume is the step, else the waiting step it goes back to) by a legal
// move; otherwise /resume would answer yes and do nothing. (flows'
// TestResumeEnqueuesTheStepJob checks that the engine enqueues it.)
func TestResumableStepsLandOnAJob(t *testing.T) {
	t.Parallel()
	for _, s := range Catalogue() {
		if !s.Resumable() {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			if s.Resume != s.Code && !CanMove(s.Code, s.Resume) {
				t.Errorf("%s resumes to %s, an illegal move", s.Name, s.Resume)
			}
			for _, first := range []bool{true, false} {
				if MustStep(s.Resume).JobFor(first).Kind == "" {
					t.Errorf("%s resumes to %s, which has no job (approval first %v)", s.Name, s.Resume, first)
				}
			}
		})
	}
}
