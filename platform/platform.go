// Package platform holds the types and errors that describe a code-hosting
// platform (GitLab) to the rest of changebot. It owns no I/O: adapters such as
// platform/gitlab implement the interfaces that consumers (flows) declare, and
// speak in these types so that nothing outside platform/gitlab imports the
// GitLab client library.
package platform

import (
	"errors"
	"fmt"
	"time"
)

// ErrNotFound reports that the platform answered 404 for a resource (a
// branch, a merge request, a note). Adapters wrap it; callers use errors.Is.
var ErrNotFound = errors.New("not found")

// Error is a failed platform call with the real HTTP status. Adapters return
// it (wrapped) for every non-2xx answer so callers can decide with errors.As:
// 429 and 5xx are transient (Retryable reports true), other 4xx are not.
// Message never contains a token. Err, when set, is the client library's own
// error (for example *gitlab.ErrorResponse) and is reachable through Unwrap.
type Error struct {
	// Method and Path name the call, for example "PUT" and
	// "/projects/42/merge_requests/7/merge".
	Method, Path string
	// Status is the HTTP status code GitLab answered.
	Status int
	// Message is GitLab's message text, for example
	// "SHA does not match HEAD of source branch: <sha>".
	Message string
	// RetryAfter is how long GitLab asked us to wait (Retry-After or
	// RateLimit-Reset), zero when it did not say.
	RetryAfter time.Duration
	// Err is the underlying client library error, if any.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, e.Message)
}

// Unwrap returns the client library error, and ErrNotFound for a 404.
func (e *Error) Unwrap() []error {
	errs := []error{}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.Status == 404 {
		errs = append(errs, ErrNotFound)
	}
	return errs
}

// Retryable reports whether the call may succeed if repeated later without
// any change on our side: 429 (rate limited) and 5xx.
func (e *Error) Retryable() bool { return e.Status == 429 || e.Status >= 500 }

// StatusOf returns the HTTP status carried by err, or 0 when err is not a
// platform call failure (for example a network error).
func StatusOf(err error) int {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Status
	}
	return 0
}

// IsTransient reports whether err is worth retrying with backoff: a 429, a
// 5xx, or a failure with no HTTP status at all (network error, timeout).
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
	WebURL           string
	Author           User
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
