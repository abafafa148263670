package github

import (
	"strconv"

	gh "github.com/google/go-github/v93/github"

	"changebot/platform"
)

// This file translates go-github types into platform types. A nil input
// yields the zero value, so a "null" body never panics.

func toUser(u *gh.User) platform.User {
	if u == nil {
		return platform.User{}
	}
	return platform.User{ID: u.GetID(), Username: u.GetLogin()}
}

func toCommit(c *gh.Commit) platform.Commit {
	if c == nil {
		return platform.Commit{}
	}
	out := platform.Commit{SHA: c.GetSHA(), Message: c.GetMessage(), Title: title(c.GetMessage())}
	for _, p := range c.Parents {
		out.ParentIDs = append(out.ParentIDs, p.GetSHA())
	}
	return out
}

func toRepoCommit(c *gh.RepositoryCommit) platform.Commit {
	if c == nil {
		return platform.Commit{}
	}
	out := toCommit(c.GetCommit())
	out.SHA = c.GetSHA()
	out.ParentIDs = nil
	for _, p := range c.Parents {
		out.ParentIDs = append(out.ParentIDs, p.GetSHA())
	}
	return out
}

// title is the first line of a commit message.
func title(msg string) string {
	for i := range len(msg) {
		if msg[i] == '\n' {
			return msg[:i]
		}
	}
	return msg
}

func toNote(c *gh.IssueComment) platform.Note {
	if c == nil {
		return platform.Note{}
	}
	return platform.Note{ID: c.GetID(), Body: c.GetBody(), Author: toUser(c.GetUser())}
}

// toMergeRequest translates a pull request (GET /repos/{o}/{r}/pulls/{n},
// fixture api-pulls-get.json): IID is the number, SHA head.sha,
// SourceBranch head.ref, TargetBranch base.ref, State opened, closed or
// merged (merged from merged/merged_at, never from merge_commit_sha, which
// is the test merge of an open pull request). MergeCommitSHA is set only
// once merged: the merge commit, the squashed commit or the rebased tip,
// by the merge method. DetailedMergeStatus is MergeStatusOf with head, the
// head's synthesized pipeline (nil when not read).
func toMergeRequest(pr *gh.PullRequest, projectID int64, head *platform.Pipeline) platform.MergeRequest {
	if pr == nil {
		return platform.MergeRequest{}
	}
	out := platform.MergeRequest{
		ID:                  pr.GetID(),
		IID:                 int64(pr.GetNumber()),
		ProjectID:           projectID,
		Title:               pr.GetTitle(),
		SourceBranch:        pr.GetHead().GetRef(),
		TargetBranch:        pr.GetBase().GetRef(),
		State:               prState(pr),
		SHA:                 pr.GetHead().GetSHA(),
		DetailedMergeStatus: MergeStatusOf(pr.Mergeable, pr.GetMergeableState(), head),
		HasConflicts:        pr.GetMergeableState() == "dirty" || (pr.Mergeable != nil && !*pr.Mergeable && pr.GetMergeableState() != "draft"),
		WebURL:              pr.GetHTMLURL(),
		Author:              toUser(pr.GetUser()),
		MergedBy:            toUser(pr.MergedBy),
		HeadPipeline:        head,
	}
	if out.State == platform.MRStateMerged {
		out.MergeCommitSHA = pr.GetMergeCommitSHA()
	}
	return out
}

// Merge statuses in GitLab's detailed_merge_status vocabulary, which the
// flows decide on (GitLab doc/api/merge_requests.md "Merge status").
const (
	mergeStatusMergeable = "mergeable"
	mergeStatusChecking  = "checking"
	mergeStatusConflict  = "conflict"
	mergeStatusRebase    = "need_rebase"
	mergeStatusDraft     = "draft_status"
	mergeStatusApprovals = "not_approved"
	mergeStatusCIRunning = "ci_still_running"
	mergeStatusCIFailed  = "ci_must_pass"
)

// MergeStatusOf maps GitHub's mergeable and mergeable_state onto GitLab's
// detailed_merge_status, the vocabulary the flows decide on. GitHub does
// not enumerate mergeable_state in its REST docs; the values seen are
// clean, unstable, has_hooks, blocked, behind, dirty, draft and unknown:
//
//   - draft → draft_status;
//   - dirty, or mergeable false → conflict;
//   - mergeable null or unknown (GitHub is still computing the test merge:
//     never read as false) → checking;
//   - behind (strict required checks and the base moved) → need_rebase;
//   - blocked (a required review or a required check is missing) →
//     ci_must_pass when head, the head's synthesized pipeline, failed or
//     was canceled, ci_still_running while it runs, else not_approved;
//   - clean, unstable (a check that is not required fails or runs) and
//     has_hooks → mergeable;
//   - any other value → checking: wait, and let the merge answer decide.
func MergeStatusOf(mergeable *bool, state string, head *platform.Pipeline) string {
	switch {
	case state == "draft":
		return mergeStatusDraft
	case state == "dirty" || (mergeable != nil && !*mergeable):
		return mergeStatusConflict
	case mergeable == nil || state == "unknown" || state == "":
		return mergeStatusChecking
	}
	switch state {
	case "behind":
		return mergeStatusRebase
	case "blocked":
		switch {
		case head == nil:
			return mergeStatusApprovals
		case head.Status == platform.PipelineFailed || head.Status == platform.PipelineCanceled:
			return mergeStatusCIFailed
		case !head.Finished():
			return mergeStatusCIRunning
		}
		return mergeStatusApprovals
	case "clean", "unstable", "has_hooks":
		return mergeStatusMergeable
	}
	return mergeStatusChecking
}

// Pipeline statuses used by the synthesized pipeline beside the finished
// ones in package platform (GitLab's enum).
const (
	pipelinePending = "pending"
	pipelineRunning = "running"
	pipelineManual  = "manual"
)

// checkRunStatus maps a check run's, check suite's or workflow run's
// status and conclusion onto GitLab's pipeline statuses: queued,
// requested and pending → pending; in_progress → running; waiting (a
// deployment waiting for a person's approval) → manual; completed with
// success or neutral → success (GitHub counts neutral as passing a
// required check), skipped → skipped, cancelled → canceled, any other
// conclusion (failure, timed_out, startup_failure, action_required,
// stale) → failed.
func checkRunStatus(status, conclusion string) string {
	switch status {
	case "completed":
	case "in_progress":
		return pipelineRunning
	case "waiting":
		return pipelineManual
	default:
		return pipelinePending
	}
	switch conclusion {
	case "success", "neutral":
		return platform.PipelineSuccess
	case "skipped":
		return platform.PipelineSkipped
	case "cancelled":
		return platform.PipelineCanceled
	}
	return platform.PipelineFailed
}

// commitStatus maps a commit status state (error, failure, pending,
// success) onto GitLab's pipeline statuses: pending → running, success →
// success, error and failure → failed.
func commitStatus(state string) string {
	switch state {
	case "success":
		return platform.PipelineSuccess
	case "error", "failure":
		return platform.PipelineFailed
	}
	return pipelineRunning
}

// check is one reported check of a sha: a check run (latest per name) or
// a commit status (latest per context).
type check struct {
	id     int64
	name   string
	status string // GitLab pipeline status, from checkRunStatus or commitStatus
}

// synthesize builds the one pipeline of sha on ref from its checks and the
// required contexts of the target branch's protection (a required context
// that nothing reported yet is pending). The result, in order: failed when
// any check failed; canceled when any was canceled; manual when one waits
// for a person and nothing else runs; running while any runs or is
// pending, or a required context is missing; skipped when every check was
// skipped; else success. ID is the largest check run or status id (GitHub
// ids grow with time, so a re-run or a later head gets a larger one, as a
// GitLab pipeline id does); 0 while nothing has reported. nil when there is
// no check and no required context: the sha has no CI.
func synthesize(sha, ref, webURL string, checks []check, required []string) *platform.Pipeline {
	if len(checks) == 0 && len(required) == 0 {
		return nil
	}
	p := &platform.Pipeline{SHA: sha, Ref: ref, WebURL: webURL, Source: "github_checks"}
	seen := map[string]bool{}
	var failed, canceled, running, manual bool
	skipped := len(checks) > 0
	for _, c := range checks {
		p.ID = max(p.ID, c.id)
		seen[c.name] = true
		switch c.status {
		case platform.PipelineFailed:
			failed = true
		case platform.PipelineCanceled:
			canceled = true
		case pipelineManual:
			manual = true
		case platform.PipelineSuccess:
		case platform.PipelineSkipped:
			continue
		default:
			running = true
		}
		skipped = false
	}
	for _, r := range required {
		if !seen[r] {
			running = true
			skipped = false
		}
	}
	switch {
	case failed:
		p.Status = platform.PipelineFailed
	case canceled:
		p.Status = platform.PipelineCanceled
	case manual && !running:
		p.Status = pipelineManual
	case running:
		p.Status = pipelineRunning
		if p.ID == 0 {
			p.Status = pipelinePending
		}
	case skipped:
		p.Status = platform.PipelineSkipped
	default:
		p.Status = platform.PipelineSuccess
	}
	return p
}

// itoa is strconv.FormatInt in base 10.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
