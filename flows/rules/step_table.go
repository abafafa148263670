package rules

import (
	"fmt"
	"slices"
	"sort"
)

// StepCode is a fine-grained step status (operation.step). Codes are grouped
// by phase so a prefix aggregates (DESIGN §2): create 100xx, handle 101xx,
// close 102xx, callback 103xx, approval 104xx, pending 105xx. Codes are
// persisted: never renumber one.
type StepCode int

// The step table's codes.
const (
	CreateStarted         StepCode = 10001
	CreateSucceeded       StepCode = 10002
	CreateMROpened        StepCode = 10003
	CreatePipelineFailed  StepCode = 10004
	CreateFailed          StepCode = 10005
	CreateRefused         StepCode = 10006
	HandleStarted         StepCode = 10101
	HandleApproved        StepCode = 10102
	HandleMerged          StepCode = 10103
	HandleFailed          StepCode = 10104
	HandleRebaseConflict  StepCode = 10105
	HandleRebasing        StepCode = 10106
	HandleReviewerDenied  StepCode = 10107
	HandleNotMergeable    StepCode = 10108
	HandleAwaitPipeline   StepCode = 10109
	HandleDraft           StepCode = 10110
	HandleRetargeted      StepCode = 10111
	HandleQueued          StepCode = 10112
	HandleInTrain         StepCode = 10113
	Closed                StepCode = 10201
	ClosedByPerson        StepCode = 10202
	CalledBack            StepCode = 10301
	ApprovalSending       StepCode = 10401
	ApprovalSent          StepCode = 10402
	ApprovalRejected      StepCode = 10403
	ApprovalWithdrawn     StepCode = 10404
	HandlePipelinePending StepCode = 10501
	CreatePipelinePending StepCode = 10502
	ApprovalSendPending   StepCode = 10503
	HandleRebasePending   StepCode = 10504
	DeployPending         StepCode = 10505
	HandleMergePending    StepCode = 10506
)

// Phase names, the prefix groups of step codes.
const (
	PhaseCreate   = "create"
	PhaseHandle   = "handle"
	PhaseClose    = "close"
	PhaseCallback = "callback"
	PhaseApproval = "approval"
	PhasePending  = "pending"
)

// Wait is what a step waits for (Step.Wait); "" for a step that waits for
// nothing outside its own job, or only for a person's command.
type Wait string

// The waits of the step table.
const (
	// WaitApproval: the approver's decision (the approval system's callback
	// or approvals in GitLab) is accepted in this step (DESIGN §3 step 2).
	WaitApproval Wait = "approval decision"
	// WaitPipeline: the merge request pipeline of the head; its webhook or
	// the step's polling job moves the change on.
	WaitPipeline Wait = "MR pipeline"
	// WaitRebase: a rebase GitLab runs.
	WaitRebase Wait = "rebase"
	// WaitMergeCheck: GitLab computing whether the merge request can be
	// merged.
	WaitMergeCheck Wait = "merge check"
	// WaitDeploy: the deploy pipeline on the target branch, or a deploy
	// callback, confirming the merge is applied.
	WaitDeploy Wait = "deploy"
	// WaitReady: a person marking the draft merge request as ready; the
	// Merge Request Hook with changes.draft, or the step's polling job,
	// moves the change on.
	WaitReady Wait = "merge request marked ready"
	// WaitQueue: the change's turn in the merge queue of its target
	// branch (issue 22): the change ahead leaving the head wakes it.
	WaitQueue Wait = "turn in the merge queue"
	// WaitTrain: GitLab's merge train merging the merge request (its
	// train pipeline, the cars ahead of it), or GitHub's merge queue
	// merging the pull request (its merge group checks).
	WaitTrain Wait = "merge train"
)

// Hints a person sees in the status comment and the API.
const (
	hintKeepWaiting = "Keep waiting: changebot is working on it."
	hintFixAndRetry = "Fix the cause and comment /retry, or contact the maintainers."
	hintUnknownWait = "Outcome unknown: keep waiting; an operator can /resume."
	hintDone        = "Nothing to do: the change is applied."
	hintReapply     = "Nothing to do here; the change may be submitted again."
)

// StepJob is the job that works a step and the step it declares for its
// failure: an unexpected error, a panic or used-up attempts of that job
// write Failure (DESIGN §2 "every exit path ends in a state").
type StepJob struct {
	// Kind is the River job kind (KindHandle, ...); "" when no job runs.
	Kind string
	// Failure is the step the job writes when it fails unexpectedly, panics
	// or uses up its attempts (a pending step where the outcome is
	// unknown, a failed step where it is known).
	Failure StepCode
}

// Step is one row of the step table: everything the flow knows about a step
// in one place. The transition table (CheckTransition), the declared
// failures, the sweeper, /resume, /retry, /help and the state table of docs/states.md
// are derived from these rows.
type Step struct {
	// Code is the persisted step code (operation.step).
	Code StepCode
	// Name is the persisted, upper-case name, for example "CREATE_STARTED".
	Name string
	// Phase is the prefix group of Code (PhaseCreate, ...).
	Phase string
	// Status is the binding status this step implies.
	Status string
	// Terminal steps never move again (a new operation may take the binding
	// when the status is reappliable or VALIDATED).
	Terminal bool
	// Job works the step in both flow orders; zero when no job runs (the
	// step waits for a webhook, a callback or a person).
	Job StepJob
	// MRFirstJob is the job in the MR-first order where it differs from
	// Job (CREATE_SUCCEEDED continues with the approval request there).
	MRFirstJob StepJob
	// Next are the moves the step's own work makes: its job, or the
	// webhook or callback it waits for. The moves to the job's failure, to
	// Retry and Resume, cancel (CLOSED) and a merge found in GitLab
	// (HANDLE_MERGED) are not listed: CheckTransition derives them.
	Next []StepCode
	// Retry is where /retry sends a change at this step; zero when /retry
	// does not apply.
	Retry StepCode
	// Resume is where /resume sends a change at this step: a pending step
	// goes back to the step it waited in; Resume == Code enqueues the step's
	// job again. Zero when /resume does not apply.
	Resume StepCode
	// Wait is what the step waits for.
	Wait Wait
	// Hint is what to do now, shown to people, in GitLab's words: the
	// state table of docs/states.md shows it. HintOn gives it in the words of a
	// change's platform.
	Hint string
	// hintIn, when set, writes the hint in a platform's words (Hint is
	// hintIn(gitlabWords), set when the table is built).
	hintIn func(w Words) string
}

// HintOn is the step's hint in the words of platform (PlatformGitLab,
// also "", or PlatformGitHub): "merge request" or "pull request",
// "pipeline" or "checks", GitLab or GitHub (issue 15). On GitLab it is Hint.
func (s Step) HintOn(platform string) string {
	if s.hintIn == nil {
		return s.Hint
	}
	return s.hintIn(WordsOf(platform))
}

// Retryable reports whether /retry applies at this step.
func (s Step) Retryable() bool { return s.Retry != 0 }

// Resumable reports whether /resume applies at this step.
func (s Step) Resumable() bool { return s.Resume != 0 }

// Cancellable reports whether /cancel applies at this step: any step that
// is not terminal, except the MERGED ones and the CLOSED ones that may be
// resumed (MR_CLOSED: stopped already, its binding free). A merged change
// is not cancellable: the configuration is on the target branch, so
// calling it CLOSED (re-appliable) would be a lie (deviation from DESIGN §2
// "any non-terminal -> CLOSED").
func (s Step) Cancellable() bool {
	return !s.Terminal && s.Status != StatusMerged && s.Status != StatusClosed
}

// JobFor returns the job that works the step in the given flow order.
func (s Step) JobFor(approvalFirst bool) StepJob {
	if !approvalFirst && s.MRFirstJob.Kind != "" {
		return s.MRFirstJob
	}
	return s.Job
}

// Polls reports whether the step's job polls GitLab for something it waits
// for (a pipeline, a rebase, the deploy): its first poll comes after the
// short interval, and the reconciler wakes it when nothing was heard for a
// while.
func (s Step) Polls() bool {
	return s.Job.Kind != "" && (s.Wait == WaitPipeline || s.Wait == WaitRebase || s.Wait == WaitDeploy || s.Wait == WaitReady || s.Wait == WaitTrain)
}

func job(kind string, failure StepCode) StepJob { return StepJob{Kind: kind, Failure: failure} }

func next(steps ...StepCode) []StepCode { return steps }

// catalogue is the one step table (DESIGN §2).
var catalogue = []Step{
	{Code: CreateStarted, Name: "CREATE_STARTED", Phase: PhaseCreate, Status: StatusMRCreating,
		Job: job(KindCreateMR, CreateFailed), Resume: CreateStarted, Next: next(CreateMROpened, CreateSucceeded, CreateRefused),
		Hint: hintKeepWaiting},
	{Code: CreateSucceeded, Name: "CREATE_SUCCEEDED", Phase: PhaseCreate, Status: StatusMRCreated,
		Job: job(KindHandle, HandleFailed), MRFirstJob: job(KindRequestApproval, ApprovalSendPending),
		Resume: CreateSucceeded, Next: next(HandleStarted, ApprovalSending),
		Hint: hintKeepWaiting},
	{Code: CreateMROpened, Name: "CREATE_MR_OPENED", Phase: PhaseCreate, Status: StatusMRCreating,
		Job: job(KindAwaitPipeline, CreatePipelinePending), Resume: CreateMROpened, Wait: WaitPipeline,
		Next: next(CreateSucceeded, CreatePipelineFailed, CreateFailed),
		hintIn: func(w Words) string {
			if w.OnGitHub() {
				return "Keep waiting: the pull request's checks are running."
			}
			return "Keep waiting: the merge request pipeline is running."
		}},
	{Code: CreatePipelineFailed, Name: "CREATE_PIPELINE_FAILED", Phase: PhaseCreate, Status: StatusCreateFailed,
		Retry: CreateStarted,
		hintIn: func(w Words) string {
			if w.OnGitHub() {
				return "The checks failed. " + hintFixAndRetry
			}
			return "The pipeline failed. " + hintFixAndRetry
		}},
	{Code: CreateFailed, Name: "CREATE_FAILED", Phase: PhaseCreate, Status: StatusCreateFailed,
		Retry:  CreateStarted,
		hintIn: func(w Words) string { return "Creating the " + w.MR + " failed. " + hintFixAndRetry }},
	// CREATE_REFUSED: the checks against the platform that the submit
	// could not make (the call budget was spent: a burst of submits never
	// waits on it, issue 22 point 1) found, in the change's first job, that
	// it does not fit the project: the project or the target branch is
	// missing, or a file's action does not fit the branch. The same reasons
	// a submit's 422 gives are the detail. Nothing was sent to the approver
	// and nothing was opened, so the change ends here and its binding is
	// free: fix the request and submit it again.
	{Code: CreateRefused, Name: "CREATE_REFUSED", Phase: PhaseCreate, Status: StatusClosed, Terminal: true,
		hintIn: func(w Words) string {
			return "The change does not fit the project in " + w.Platform + " (see the reason): fix the request and submit it again."
		}},
	{Code: HandleStarted, Name: "HANDLE_STARTED", Phase: PhaseHandle, Status: StatusMerging,
		Job: job(KindHandle, HandleFailed), Resume: HandleStarted,
		Next: next(HandleApproved, HandleReviewerDenied, HandleNotMergeable, HandleRebasing, HandleAwaitPipeline, HandleRetargeted),
		Hint: hintKeepWaiting},
	{Code: HandleApproved, Name: "HANDLE_APPROVED", Phase: PhaseHandle, Status: StatusMerging,
		Job: job(KindHandle, HandleFailed), Resume: HandleApproved,
		Next: next(HandleStarted, HandleNotMergeable, HandleRebaseConflict, HandleRebasing, HandleAwaitPipeline, HandleMergePending, HandleDraft, HandleRetargeted, HandleQueued, HandleInTrain),
		Hint: "Keep waiting: reviewers approved, merging."},
	// HANDLE_QUEUED: approved, and waiting for its turn in the merge queue
	// of its target branch (issue 22), where the platform merges only an
	// up-to-date merge request: only the queue's head is rebased, tested
	// and merged, so the others get no rebase and no pipeline while they
	// wait. The head leaving the queue (merged, failed, cancelled, closed)
	// wakes the next; its job looks again at intervals that grow with its
	// place in line, as a fallback. A person's close, merge, draft or
	// retarget is read as in every step (the webhooks, the reconciler's
	// MR watch).
	{Code: HandleQueued, Name: "HANDLE_QUEUED", Phase: PhaseHandle, Status: StatusMerging,
		Job: job(KindHandle, HandleFailed), Resume: HandleQueued, Wait: WaitQueue,
		Next: next(HandleApproved, HandleRetargeted),
		hintIn: func(w Words) string {
			return "Keep waiting: approved, and waiting for its turn in the merge queue of the target branch (its place is in the detail). Nobody needs to act unless the queue is frozen."
		}},
	// HANDLE_IN_TRAIN: approved and added, with its head sha, to GitLab's
	// merge train of the target branch (issue 22 point 4; a project with
	// merge trains, POST /projects/:id/merge_trains/merge_requests/:iid):
	// GitLab runs the train pipeline and merges it. The Merge Request Hook
	// "merge" or the step's poll records the merge; a car GitLab removed
	// (its train pipeline failed, or a person took it off) fails the
	// change in HANDLE_FAILED; /retry approves and adds it again. On
	// GitHub the same step is the pull request enqueued in the merge queue
	// its target branch requires (GraphQL enqueuePullRequest): GitHub runs
	// the merge_group checks and merges it, or dequeues it (HANDLE_FAILED).
	{Code: HandleInTrain, Name: "HANDLE_IN_TRAIN", Phase: PhaseHandle, Status: StatusMerging,
		Job: job(KindHandle, HandleFailed), Resume: HandleInTrain, Wait: WaitTrain,
		Next: next(HandleAwaitPipeline, HandleRetargeted),
		hintIn: func(w Words) string {
			if w.OnGitHub() {
				return "Keep waiting: in the merge queue of the target branch; GitHub merges it once its merge group checks pass."
			}
			return "Keep waiting: on the merge train of the target branch; GitLab merges it once its train pipeline passes."
		}},
	{Code: HandleMerged, Name: "HANDLE_MERGED", Phase: PhaseHandle, Status: StatusMerged,
		Job: job(KindAwaitDeploy, DeployPending), Wait: WaitDeploy, Next: next(CalledBack),
		hintIn: func(w Words) string { return "Keep waiting: merged, waiting for the " + w.Deploy + " to apply it." }},
	{Code: HandleFailed, Name: "HANDLE_FAILED", Phase: PhaseHandle, Status: StatusHandleFailed,
		Retry: HandleStarted,
		Hint:  "Merging failed. " + hintFixAndRetry},
	{Code: HandleRebaseConflict, Name: "HANDLE_REBASE_CONFLICT", Phase: PhaseHandle, Status: StatusHandleFailed,
		Retry: HandleStarted,
		Hint:  "The rebase has conflicts: resolve them on the source branch and comment /retry, or contact the maintainers."},
	{Code: HandleRebasing, Name: "HANDLE_REBASING", Phase: PhaseHandle, Status: StatusMerging,
		Job: job(KindHandle, HandleFailed), Resume: HandleRebasing, Wait: WaitRebase,
		Next: next(HandleAwaitPipeline, HandleRebaseConflict, HandleRebasePending, HandleRetargeted),
		Hint: "Keep waiting: rebasing onto the target branch."},
	{Code: HandleReviewerDenied, Name: "HANDLE_REVIEWER_DENIED", Phase: PhaseHandle, Status: StatusHandleFailed,
		Retry: HandleStarted,
		Hint:  "A reviewer robot may not approve (token revoked or not eligible). Contact the maintainers, then /retry."},
	{Code: HandleNotMergeable, Name: "HANDLE_NOT_MERGEABLE", Phase: PhaseHandle, Status: StatusHandleFailed,
		Retry:  HandleStarted,
		hintIn: func(w Words) string { return w.Platform + " refuses the merge (see the reason). " + hintFixAndRetry }},
	{Code: HandleAwaitPipeline, Name: "HANDLE_AWAIT_PIPELINE", Phase: PhaseHandle, Status: StatusMerging,
		Job: job(KindAwaitPipeline, HandlePipelinePending), Resume: HandleAwaitPipeline, Wait: WaitPipeline,
		Next: next(HandleStarted, HandleFailed, HandleRetargeted),
		hintIn: func(w Words) string {
			if w.OnGitHub() {
				return "Keep waiting: the checks of the new head are running."
			}
			return "Keep waiting: the pipeline of the new head is running."
		}},
	// HANDLE_DRAFT waits, without a deadline and spending no rounds, until
	// a person marks the draft merge request ready (issue 10 point 3).
	{Code: HandleDraft, Name: "HANDLE_DRAFT", Phase: PhaseHandle, Status: StatusMerging,
		Job: job(KindHandle, HandleFailed), Resume: HandleDraft, Wait: WaitReady,
		Next: next(HandleApproved, HandleAwaitPipeline, HandleRetargeted),
		hintIn: func(w Words) string {
			return "The " + w.MR + " is a draft: mark it ready in " + w.Platform + "; changebot then merges by itself."
		}},
	// HANDLE_RETARGETED: a person changed the merge request's target branch
	// mid-flow (issue 21 point 1). The approvals (the approval system's and
	// the reviewer robots') and the binding were given for the submitted
	// target (store.Operation.TargetBranch), so nothing is approved, rebased
	// or merged into another branch: the change stops here, with no write
	// to the platform, until a person retargets it back and comments /retry
	// (Retry: the pipeline wait of the head, whose result the new target
	// may have changed, then approvals and the merge, each checking the
	// target again) or cancels it. GitLab: PUT
	// /projects/:id/merge_requests/:iid target_branch, the Merge Request
	// Hook's changes.target_branch (doc/api/merge_requests.md "Update MR",
	// doc/user/project/integrations/webhook_events.md); GitHub: PATCH
	// /repos/{owner}/{repo}/pulls/{n} base, the pull_request "edited" event
	// with changes.base (docs.github.com "Update a pull request", "Webhook
	// events and payloads").
	{Code: HandleRetargeted, Name: "HANDLE_RETARGETED", Phase: PhaseHandle, Status: StatusHandleFailed,
		Retry: HandleAwaitPipeline,
		hintIn: func(w Words) string {
			return "A person changed the " + w.MR + "'s target branch in " + w.Platform + ", so changebot stopped: no approve, rebase or merge follows. " +
				"Retarget it to the change's target branch and comment /retry, or /cancel."
		}},
	{Code: Closed, Name: "CLOSED", Phase: PhaseClose, Status: StatusClosed, Terminal: true,
		Hint: hintReapply},
	// MR_CLOSED: a person closed the merge request in GitLab mid-flow (issue
	// 10 point 1, after Shopify/shipit-engine#673 and Mergifyio/mergify#3970:
	// a closed MR must end the flow, not loop it). Like CLOSED it frees the
	// binding, and a reopen in GitLab does not move it; unlike CLOSED an
	// operator's /resume continues it once the MR is reopened (Resume), from
	// the pipeline wait of the head with a new pipeline and approvals given
	// afresh (flows.Engine.Resume). A merge found in GitLab is recorded (Next).
	{Code: ClosedByPerson, Name: "MR_CLOSED", Phase: PhaseClose, Status: StatusClosed,
		Resume: CreateMROpened, Next: next(HandleMerged),
		hintIn: func(w Words) string {
			return "A person closed the " + w.MR + " in " + w.Platform + ", so changebot stopped: no approve, merge or rebase follows. " +
				"Reopen it and have an operator comment /resume to continue (" + w.NewRun + " and fresh approvals of its head), or submit the change again."
		}},
	{Code: CalledBack, Name: "CALLED_BACK", Phase: PhaseCallback, Status: StatusValidated, Terminal: true,
		Hint: hintDone},
	{Code: ApprovalSending, Name: "APPROVAL_SENDING", Phase: PhaseApproval, Status: StatusApprovalSending,
		Job: job(KindRequestApproval, ApprovalSendPending), Resume: ApprovalSending, Wait: WaitApproval,
		Next: next(ApprovalSent, CreateStarted, HandleStarted, ApprovalRejected, ApprovalWithdrawn, CreateRefused),
		Hint: "Keep waiting: requesting approval. A request the approval system does not answer is retried by itself; nobody needs to act."},
	// APPROVAL_SENT has no job and is not resumable: it waits for the
	// decision; cancel is the way out.
	{Code: ApprovalSent, Name: "APPROVAL_SENT", Phase: PhaseApproval, Status: StatusApprovalSent,
		Wait: WaitApproval, Next: next(CreateStarted, HandleStarted, ApprovalRejected, ApprovalWithdrawn),
		Hint: "Waiting for an approver to decide (an operator can cancel)."},
	{Code: ApprovalRejected, Name: "APPROVAL_REJECTED", Phase: PhaseApproval, Status: StatusRejected, Terminal: true,
		Hint: "The change was rejected. " + hintReapply},
	{Code: ApprovalWithdrawn, Name: "APPROVAL_WITHDRAWN", Phase: PhaseApproval, Status: StatusRejected, Terminal: true,
		Hint: "The approval was withdrawn. " + hintReapply},
	{Code: HandlePipelinePending, Name: "HANDLE_PIPELINE_PENDING", Phase: PhasePending, Status: StatusMerging,
		Resume: HandleAwaitPipeline, Wait: WaitPipeline, Next: next(HandleStarted, HandleFailed),
		Hint: hintUnknownWait},
	{Code: CreatePipelinePending, Name: "CREATE_PIPELINE_PENDING", Phase: PhasePending, Status: StatusMRCreating,
		Resume: CreateMROpened, Wait: WaitPipeline, Next: next(CreateSucceeded, CreatePipelineFailed, CreateFailed),
		Hint: hintUnknownWait},
	{Code: ApprovalSendPending, Name: "APPROVAL_SEND_PENDING", Phase: PhasePending, Status: StatusApprovalSending,
		Resume: ApprovalSending, Wait: WaitApproval,
		Next: next(ApprovalSent, CreateStarted, HandleStarted, ApprovalRejected, ApprovalWithdrawn),
		Hint: "The approval system did not answer, and changebot stopped retrying: an operator asks it again with /resume once it is back."},
	{Code: HandleRebasePending, Name: "HANDLE_REBASE_PENDING", Phase: PhasePending, Status: StatusMerging,
		Resume: HandleRebasing, Wait: WaitRebase, Next: next(HandleAwaitPipeline, HandleRebaseConflict, HandleFailed),
		Hint: "The rebase is still running past its deadline. " + hintUnknownWait},
	{Code: HandleMergePending, Name: "HANDLE_MERGE_PENDING", Phase: PhasePending, Status: StatusMerging,
		Resume: HandleApproved, Wait: WaitMergeCheck, Next: next(HandleFailed),
		hintIn: func(w Words) string {
			return w.Platform + " has not said whether the " + w.MR + " can be merged (still checking) past the deadline. " + hintUnknownWait
		}},
	{Code: DeployPending, Name: "DEPLOY_PENDING", Phase: PhasePending, Status: StatusMerged,
		Resume: HandleMerged, Wait: WaitDeploy, Next: next(CalledBack),
		hintIn: func(w Words) string {
			return "Merged, but no " + w.Deploy + " has confirmed it yet. " + hintUnknownWait
		}},
}

var stepByCode = func() map[StepCode]Step {
	m := make(map[StepCode]Step, len(catalogue))
	for i, s := range catalogue {
		// A hint written in a platform's words reads GitLab's in Hint
		// (the state table of docs/states.md, callers that know no platform).
		if s.hintIn != nil {
			s.Hint = s.hintIn(gitlabWords)
			catalogue[i].Hint = s.Hint
		}
		if _, dup := m[s.Code]; dup {
			panic(fmt.Sprintf("flows: duplicate step code %d", s.Code))
		}
		m[s.Code] = s
	}
	return m
}()

// Lookup returns the step table's row for code and whether it exists.
func Lookup(code StepCode) (Step, bool) {
	s, ok := stepByCode[code]
	return s, ok
}

// MustStep returns the step table's row for code; it panics on an unknown
// code, which is a programming error (every code used in flows is in the
// table).
func MustStep(code StepCode) Step {
	s, ok := stepByCode[code]
	if !ok {
		panic(fmt.Sprintf("flows: unknown step code %d", code))
	}
	return s
}

// Catalogue returns a copy of every step, ordered by code.
func Catalogue() []Step {
	out := append([]Step(nil), catalogue...)
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// String returns the step's name, or the number for an unknown code.
func (c StepCode) String() string {
	if s, ok := stepByCode[c]; ok {
		return s.Name
	}
	return fmt.Sprintf("STEP_%d", int(c))
}

// StepsWhere returns the codes of the steps for which keep holds, in code
// order.
func StepsWhere(keep func(Step) bool) []StepCode {
	var out []StepCode
	for _, s := range Catalogue() {
		if keep(s) {
			out = append(out, s.Code)
		}
	}
	return out
}

// WaitsFor reports whether the step at code waits for w.
func WaitsFor(code StepCode, w Wait) bool {
	s, ok := Lookup(code)
	return ok && s.Wait == w
}

// stepJobKinds are the kinds of the jobs that advance an operation's step,
// in code order of the first step each works.
var stepJobKinds = func() []string {
	var out []string
	for _, s := range Catalogue() {
		for _, j := range []StepJob{s.Job, s.MRFirstJob} {
			if j.Kind != "" && !slices.Contains(out, j.Kind) {
				out = append(out, j.Kind)
			}
		}
	}
	return out
}()

// StepJobKinds returns the kinds of the jobs that advance an operation's
// step, in code order of the first step each works (a fresh slice).
func StepJobKinds() []string { return slices.Clone(stepJobKinds) }

// WaitsForPipeline reports whether step waits for the MR pipeline of the
// head (step table), in the create phase and (after a rebase or a moved
// head) the handle phase.
func WaitsForPipeline(step StepCode) bool { return WaitsFor(step, WaitPipeline) }

// InCreatePhase reports whether step belongs to the create phase by its
// binding status (the pending steps' codes are in the pending range).
func InCreatePhase(step StepCode) bool {
	s, ok := Lookup(step)
	return ok && s.Status == StatusMRCreating
}

// AwaitingApproval reports whether an approval decision is accepted at step:
// the steps that wait for one in the step table, SENDING too, because the
// callback can arrive before the SENT write has committed (DESIGN §3 step 2).
func AwaitingApproval(step StepCode) bool { return WaitsFor(step, WaitApproval) }

// BeforePipelineWait reports whether the step at code is a step right
// before a pipeline wait of its own phase: its own work moves the change
// into that wait (Step.Next), as CREATE_STARTED into CREATE_MR_OPENED and
// HANDLE_REBASING into HANDLE_AWAIT_PIPELINE. Derived from the step table.
func BeforePipelineWait(code StepCode) bool {
	s, ok := Lookup(code)
	if !ok || s.Terminal || s.Wait == WaitPipeline {
		return false
	}
	for _, n := range s.Next {
		if w, ok := Lookup(n); ok && w.Wait == WaitPipeline && w.Phase == s.Phase {
			return true
		}
	}
	return false
}

// SweepableSteps returns the in-progress steps: those the step table gives
// a job in both flow orders (pending, failed and terminal steps have none;
// they wait for a person). APPROVAL_SENT, which waits for the approval
// system's callback without a job, is not one.
func SweepableSteps() []StepCode {
	return StepsWhere(func(s Step) bool { return s.JobFor(true).Kind != "" && s.JobFor(false).Kind != "" })
}

// pollingSteps are the steps that wait on the platform (a pipeline, a
// rebase, the deploy, a draft marked ready) with a polling job
// (Step.Polls); webhooks only speed them up. pollingKinds are their jobs'
// kinds.
var pollingSteps = StepsWhere(Step.Polls)

var pollingKinds = func() []string {
	var out []string
	for _, c := range pollingSteps {
		if k := MustStep(c).Job.Kind; !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}()

// PollingSteps returns the steps whose job polls the platform for what
// they wait for (Step.Polls), in code order: the reconciler wakes them when
// nothing was heard for a while (a fresh slice).
func PollingSteps() []StepCode { return slices.Clone(pollingSteps) }

// PollingKinds returns the kinds of the jobs of PollingSteps, in their
// order (a fresh slice).
func PollingKinds() []string { return slices.Clone(pollingKinds) }

// FailureOf is the step a job of kind writes at step, in the flow order
// approvalFirst, for an unexpected error, a panic or exhausted retries: the
// failure of the step's job in the step table (DESIGN §2 "every exit path
// ends in a state"); 0 when the step's job in that order is not of kind.
func FailureOf(kind string, step StepCode, approvalFirst bool) StepCode {
	s, ok := Lookup(step)
	if j := s.JobFor(approvalFirst); ok && j.Kind == kind {
		return j.Failure
	}
	return 0
}

// DeclaredFailures lists, per job kind, the failure it declares at the first
// step (in code order) it works, from the step table (for documentation and
// the panic test). KindAwaitPipeline declares CREATE_PIPELINE_PENDING in the
// create phase and HANDLE_PIPELINE_PENDING in the handle phase; see
// DeclaredFailure.
func DeclaredFailures() map[string]StepCode {
	out := map[string]StepCode{}
	for _, s := range Catalogue() {
		for _, j := range []StepJob{s.Job, s.MRFirstJob} {
			if _, seen := out[j.Kind]; j.Kind != "" && !seen {
				out[j.Kind] = j.Failure
			}
		}
	}
	return out
}

// DeclaredFailure is the step a job of kind running at step writes when it
// fails unexpectedly, panics or uses up its attempts (in either flow order);
// 0 when no job of kind works step.
func DeclaredFailure(kind string, step StepCode) StepCode {
	for _, first := range []bool{true, false} {
		if f := FailureOf(kind, step, first); f != 0 {
			return f
		}
	}
	return 0
}
