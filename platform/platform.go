// Package platform holds the types and errors that describe a code-hosting
// platform (GitLab) to the rest of changebot. It owns no I/O: adapters such as
// platform/gitlab implement the interfaces that consumers (flows) declare, and
// speak in these types so that nothing outside platform/gitlab imports the
// GitLab client library.
package platform

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The kinds of platform failure. Every *Error matches exactly one of them
// with errors.Is (its Kind): adapters choose it from the HTTP status and, where
// one status means different things on different endpoints, from the
// endpoint and GitLab's message (doc/api/rest/troubleshooting.md "Status
// codes"; the per-endpoint texts are in each adapter method's doc). Callers
// decide with errors.Is and errors.As only, never with bare status numbers.
var (
	// ErrNotFound: the resource (project, branch, merge request, note,
	// file) does not exist or is not visible to the caller (404).
	ErrNotFound = errors.New("not found")
	// ErrForbidden: the caller may not do this (401, 403), for example a
	// revoked token, a protected branch ("403 Forbidden - You are not allowed
	// to push into this branch"), or an approval GitLab refuses. GitLab also
	// answers 401 to a second approval by the same user: a caller that
	// approves reads the approvals again before believing it.
	ErrForbidden = errors.New("forbidden")
	// ErrAlreadyExists: what was to be created exists already, for example
	// 400 "Branch already exists" on branch create or 409 "Another open merge
	// request already exists for this source branch: !<iid>" on merge request
	// create. Read it instead.
	ErrAlreadyExists = errors.New("already exists")
	// ErrHeadMoved: the sha the caller pinned is no longer the merge
	// request's head (409 "SHA does not match HEAD of source branch: <sha>" on
	// approve and merge). Read the merge request again.
	ErrHeadMoved = errors.New("head moved")
	// ErrNotMergeable: GitLab refuses to merge now (405 "Method Not Allowed",
	// older GitLab 406, 422 "Branch cannot be merged"); the reason is
	// GitLab's message, Error.Message, and the merge request's
	// detailed_merge_status says more.
	ErrNotMergeable = errors.New("not mergeable")
	// ErrConflict: a 409 with no more specific meaning, for example 409
	// "Failed to enqueue the rebase operation" while a rebase of the merge
	// request is already being set up.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: GitLab refused the request as it is (400, 422 and other
	// 4xx not named above), for example 400 "A file with this name doesn't
	// exist" on commit create. Repeating it will not help.
	ErrInvalid = errors.New("invalid request")
	// ErrRateLimited: GitLab asks to slow down (429); Error.RetryAfter is
	// how long it asked to wait, zero when it did not say. Transient.
	ErrRateLimited = errors.New("rate limited")
	// ErrUnavailable: GitLab failed or is unavailable (5xx). Transient; a
	// write answered 5xx may have taken effect.
	ErrUnavailable = errors.New("unavailable")
)

// KindOf returns the kind a bare HTTP status means when the endpoint gives
// it no more specific meaning: 401 and 403 ErrForbidden, 404 ErrNotFound,
// 409 ErrConflict, 429 ErrRateLimited, 5xx ErrUnavailable, any other 4xx
// ErrInvalid; nil for a status below 400.
func KindOf(status int) error {
	switch {
	case status == 401 || status == 403:
		return ErrForbidden
	case status == 404:
		return ErrNotFound
	case status == 409:
		return ErrConflict
	case status == 429:
		return ErrRateLimited
	case status >= 500:
		return ErrUnavailable
	case status >= 400:
		return ErrInvalid
	}
	return nil
}

// Error is a failed platform call with the real HTTP status. Adapters return
// it (wrapped) for every non-2xx answer so callers can decide with
// errors.Is on its Kind (ErrHeadMoved, ErrNotMergeable, ...) and read the
// details with errors.As. Message never contains a token. Err, when set, is
// the client library's own error (for example *gitlab.ErrorResponse) and is
// reachable through Unwrap.
type Error struct {
	// Method and Path name the call, for example "PUT" and
	// "/projects/42/merge_requests/7/merge".
	Method, Path string
	// Status is the HTTP status code GitLab answered.
	Status int
	// Kind is one of the Err* kinds above, chosen by the adapter; nil means
	// KindOf(Status).
	Kind error
	// Message is GitLab's message text, for example
	// "SHA does not match HEAD of source branch: <sha>".
	Message string
	// RetryAfter is how long GitLab asked us to wait (Retry-After or
	// RateLimit-Reset), zero when it did not say.
	RetryAfter time.Duration
	// Err is the underlying client library error, if any.
	Err error
	// NotSent marks a call the adapter held back without sending it: the
	// account waits out a 429 (Status 429) or its call budget is spent
	// (Status 429, Budget set). GitLab never saw it.
	NotSent bool
	// Budget marks a call held back by the account's call budget (issue
	// 12 point 4), not by GitLab: RetryAfter is when the budget has a call
	// for it again.
	Budget bool
}

// Error implements error: "POST /projects/101/merge_requests/1/approve:
// 503 Service Unavailable" (Answer).
func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Method, e.Path, e.Answer())
}

// Answer is the platform's answer in words: the status code and Message
// ("422 Source branch does not exist"), the code once when Message
// already starts with it (GitLab's own "404 Project Not Found", and the
// adapters' "503 Service Unavailable" for an empty body), or the code and
// its status text when there is no message.
func (e *Error) Answer() string {
	code := strconv.Itoa(e.Status)
	switch {
	case e.Message == "":
		return strings.TrimSpace(code + " " + http.StatusText(e.Status))
	case e.Message == code || strings.HasPrefix(e.Message, code+" "):
		return e.Message
	}
	return code + " " + e.Message
}

// kind is Kind, or KindOf(Status) when the adapter set none.
func (e *Error) kind() error {
	if e.Kind != nil {
		return e.Kind
	}
	return KindOf(e.Status)
}

// Unwrap returns the error's kind and the client library error.
func (e *Error) Unwrap() []error {
	errs := []error{}
	if k := e.kind(); k != nil {
		errs = append(errs, k)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// Retryable reports whether the call may succeed if repeated later without
// any change on our side: ErrRateLimited and ErrUnavailable.
func (e *Error) Retryable() bool {
	k := e.kind()
	return errors.Is(k, ErrRateLimited) || errors.Is(k, ErrUnavailable)
}

// StatusOf returns the HTTP status carried by err, or 0 when err is not a
// platform call failure (for example a network error). It is for logs,
// events and messages; decisions use errors.Is on the kinds.
func StatusOf(err error) int {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Status
	}
	return 0
}

// RetryAfterOf returns how long the platform asked to wait before the next
// call (Error.RetryAfter), zero when err carries no such wait.
func RetryAfterOf(err error) time.Duration {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.RetryAfter
	}
	return 0
}

// DefaultRateLimitWait is how long to wait after a 429 that named no wait
// (no Retry-After, RateLimit-Reset or RateLimit-ResetTime): GitLab's
// throttles count requests per minute, so a minute is the longest a window
// can still last (issue 10 point 4: "with no header at all, at most one a
// minute").
const DefaultRateLimitWait = time.Minute

// RateLimitWait reports whether err is a rate limit (ErrRateLimited) and
// how long to wait before the next call: Error.RetryAfter, or
// DefaultRateLimitWait when the platform named no wait.
func RateLimitWait(err error) (time.Duration, bool) {
	if !errors.Is(err, ErrRateLimited) {
		return 0, false
	}
	if d := RetryAfterOf(err); d > 0 {
		return d, true
	}
	return DefaultRateLimitWait, true
}

// IsTransient reports whether err is worth retrying with backoff:
// ErrRateLimited, ErrUnavailable, or a failure with no answer at all
// (network error, timeout).
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Retryable()
	}
	return true
}

// IsRefused reports whether the platform answered and refused the call for
// a reason that repeating it will not clear: an *Error that is not
// transient (any kind but ErrRateLimited and ErrUnavailable).
func IsRefused(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && !pe.Retryable()
}

// NotApplied reports whether a failed write certainly changed nothing: the
// platform refused it (IsRefused), or never processed it (a 429, or a call
// the adapter held back: ErrRateLimited). Any other failure (a 5xx, a
// timeout, a lost answer) may have taken effect.
func NotApplied(err error) bool {
	return IsRefused(err) || errors.Is(err, ErrRateLimited)
}

// Project is a GitLab project as the flows need it.
type Project struct {
	ID                int64
	PathWithNamespace string
	DefaultBranch     string
	WebURL            string
	// SquashOption is GitLab's squash_option: never, always, default_on,
	// default_off.
	SquashOption string
	// MergeMethod is GitLab's merge_method: merge, rebase_merge, ff.
	MergeMethod string
	// MergeTrains is GitLab's merge_trains_enabled (Premium): merge
	// requests are merged by adding them to the merge train of their
	// target branch, which GitLab runs and merges (issue 22 point 4).
	// Never set on GitHub, whose merge queues are per branch
	// (platform/github.Client.MergeQueue).
	MergeTrains bool
}

// TrainCar is a merge request's place on a GitLab merge train (GET
// /projects/:id/merge_trains/merge_requests/:iid): Status is GitLab's car
// state (idle, stale, fresh, merging, merged, skip_merged) and the
// pipeline its train pipeline. On GitHub it is a pull request's merge
// queue entry: Status its state in lower case (queued, awaiting_checks,
// mergeable, unmergeable, locked) or merged, PipelineStatus its merge
// group checks (platform/github.Client.MergeTrainCar).
type TrainCar struct {
	Status         string
	PipelineID     int64
	PipelineStatus string
	PipelineURL    string
}

// User is a GitLab user (robot, reviewer robot or human).
type User struct {
	ID       int64
	Username string
}

// Branch is a repository branch and the commit at its tip.
type Branch struct {
	Name      string
	CommitSHA string
}

// FileAction is one action of a multi-file commit
// (POST /projects/:id/repository/commits, fixture api-commit-create-request.json).
type FileAction struct {
	// Action is create, update, delete or move.
	Action   string
	FilePath string
	Content  string
}

// CommitParams are the arguments of CreateCommit.
type CommitParams struct {
	Branch  string
	Message string
	Actions []FileAction
}

// Commit is a created or read commit.
type Commit struct {
	SHA       string
	ParentIDs []string
	Title     string
	// Message is the full commit message.
	Message string
}

// Pipeline is a CI pipeline as GitLab reports it (GET .../pipelines, Pipeline
// Hook). Status is GitLab's enum: created, waiting_for_resource, preparing,
// pending, running, success, failed, canceled, skipped, manual, scheduled.
type Pipeline struct {
	ID     int64
	SHA    string
	Ref    string
	Status string
	WebURL string
	// Source is the pipeline source, for example "merge_request_event" or "push".
	Source string
}

// Pipeline status values (doc/api/pipelines.md).
const (
	PipelineSuccess  = "success"
	PipelineFailed   = "failed"
	PipelineCanceled = "canceled"
	PipelineSkipped  = "skipped"
)

// Finished reports whether the pipeline will not change status any more.
func (p Pipeline) Finished() bool {
	switch p.Status {
	case PipelineSuccess, PipelineFailed, PipelineCanceled, PipelineSkipped:
		return true
	}
	return false
}

// InProgress reports that the pipeline is on its way and waits for nobody:
// GitLab's created, pending, preparing and running (doc/api/pipelines.md).
// Its webhook tells nothing a change waits for: neither a result nor a
// person's part (manual, scheduled, waiting_for_resource wait for one). An
// unknown status is not in progress.
func (p Pipeline) InProgress() bool {
	switch p.Status {
	case "created", "pending", "preparing", "running":
		return true
	}
	return false
}

// MergeRequest is a merge request as GET /projects/:id/merge_requests/:iid
// returns it (fixtures api-mr-get.json, api-mr-get-doc.json).
type MergeRequest struct {
	ID           int64
	IID          int64
	ProjectID    int64
	Title        string
	SourceBranch string
	TargetBranch string
	// State is opened, closed, locked or merged.
	State string
	// SHA is the head sha of the source branch (diff head sha).
	SHA string
	// MergeCommitSHA is set once merged (empty for fast-forward merges,
	// where SquashCommitSHA or SHA is the commit on the target branch).
	MergeCommitSHA  string
	SquashCommitSHA string
	// DetailedMergeStatus is GitLab's detailed_merge_status, for example
	// mergeable, checking, need_rebase, not_approved, conflict.
	DetailedMergeStatus string
	HasConflicts        bool
	MergeError          string
	// RebaseInProgress is only meaningful when the MR was read with
	// include_rebase_in_progress=true.
	RebaseInProgress bool
	// Squash is the merge request's squash flag ("squash"; fixture
	// api-mr-get.json): squash its commits when merging.
	Squash bool
	WebURL string
	Author User
	// MergedBy is who merged it (merge_user); zero until
	// merged.
	MergedBy User
	// ClosedBy is who closed it (closed_by); zero unless closed.
	ClosedBy User
	// HeadPipeline is the MR's head pipeline, nil when there is none. For
	// merged-results pipelines its SHA differs from the MR's SHA.
	HeadPipeline *Pipeline
}

// MR states (doc/api/merge_requests.md).
const (
	MRStateOpened = "opened"
	MRStateClosed = "closed"
	MRStateMerged = "merged"
	MRStateLocked = "locked"
)

// CreateMRParams are the arguments of CreateMergeRequest.
type CreateMRParams struct {
	SourceBranch       string
	TargetBranch       string
	Title              string
	Description        string
	RemoveSourceBranch bool
	// Squash sets the merge request's squash flag (the create's squash
	// parameter, doc/api/merge_requests.md "Create MR"): its commits are
	// squashed on merge. The create step sets it from the project's
	// squash option (always, default_on), so the merge needs no read of the
	// project.
	Squash bool
}

// MergeParams are the arguments of MergeMergeRequest (PUT .../merge).
type MergeParams struct {
	// SHA must equal the MR head sha, else GitLab answers 409.
	SHA    string
	Squash bool
	// CommitMessage is optional.
	CommitMessage string
}

// Note is an MR comment.
type Note struct {
	ID     int64
	Body   string
	Author User
	System bool
}

// Priority is how a GitLab call ranks against the account's call budget
// (issue 12 point 4): background work yields while the budget runs low, so
// that work a person waits on still finds calls.
type Priority int

// The priorities of GitLab calls.
const (
	// PriorityPerson is the default: a call a person waits on or that
	// moves a change (commands such as /retry, approvals, merges, the
	// status note). It may use the whole budget, its reserve included.
	PriorityPerson Priority = iota
	// PriorityBackground is a poll of a wait (pipeline, rebase, deploy)
	// and the reconciler's checks: it is held back while the budget holds
	// no more than its reserve.
	PriorityBackground
)

type priorityKey struct{}

// WithPriority returns ctx carrying p for every GitLab call made with it.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityOf returns the priority ctx carries, PriorityPerson when none.
func PriorityOf(ctx context.Context) Priority {
	p, _ := ctx.Value(priorityKey{}).(Priority)
	return p
}

type noBudgetWaitKey struct{}

// WithoutBudgetWait returns ctx whose GitLab calls are never waited for in
// the client when the account's call budget has none (PersonBudgetWait):
// they are held back at once (IsBudgetHold), whatever their priority. A
// submit's checks use it, so a burst of submits is answered at once and
// what the budget holds back is checked in the change's first job (issue
// 22 point 1).
func WithoutBudgetWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, noBudgetWaitKey{}, true)
}

// BudgetWaitAllowed reports whether ctx's calls may wait in the client for
// the call budget (not WithoutBudgetWait).
func BudgetWaitAllowed(ctx context.Context) bool {
	no, _ := ctx.Value(noBudgetWaitKey{}).(bool)
	return !no
}

// IsBudgetHold reports whether err is a call the account's call budget
// held back unsent (Error.Budget).
func IsBudgetHold(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Budget
}
