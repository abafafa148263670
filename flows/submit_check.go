package flows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

// GitLabCheckError is returned by Submit when the change does not fit what
// GitLab has: the project or the target branch does not exist (or the
// robot cannot see it), or a file's action does not fit the branch (update
// or delete of a missing file, create of an existing one). Fields lists
// every problem; the API answers 422.
type GitLabCheckError struct{ Fields []FieldError }

// Error implements error.
func (e *GitLabCheckError) Error() string {
	return (&ValidationError{Fields: e.Fields}).Error()
}

// ErrGitLabUnavailable is returned (wrapped in *GitLabUnavailableError) by
// Submit when GitLab could not answer the submission's checks: nothing was
// created, the submitter may try again (the API answers 503).
var ErrGitLabUnavailable = errors.New("gitlab could not answer")

// GitLabUnavailableError says that GitLab could not answer the checks of a
// submission, and how long it asked to wait (zero when it did not say).
type GitLabUnavailableError struct {
	// Platform names the platform that could not answer: "GitLab" (also
	// "") or "GitHub".
	Platform   string
	RetryAfter time.Duration
	Err        error
}

// Error implements error.
func (e *GitLabUnavailableError) Error() string {
	name := e.Platform
	if name == "" {
		name = rules.WordsOf(rules.PlatformGitLab).Platform
	}
	return fmt.Sprintf("checking the change against %s: %v", name, e.Err)
}

// Unwrap makes errors.Is(err, ErrGitLabUnavailable) hold and keeps the cause.
func (e *GitLabUnavailableError) Unwrap() []error { return []error{ErrGitLabUnavailable, e.Err} }

// checkGitLab checks p against GitLab with reads only, before anything is
// stored: the project, the target branch (the project's default when
// empty), and, for files with an explicit action, one listing of the tree
// under their common directory. The project and the branch are taken as
// the engine read them within projectReadTTL (a burst of submits to one
// project shares one read of each); the tree is always read. A read the
// account's call budget holds back is not waited for (issue 22 point 1):
// the check stops there and reports deferred, and the change's first job
// makes the rest (deferredChecks). A failure GitLab may clear by itself
// (5xx, 429, no answer) is a *GitLabUnavailableError; what does not fit is
// a *GitLabCheckError naming every problem. It returns the project as far
// as the platform answered for p.Project (its canonical path and id; zero
// when the read was deferred).
func (e *Engine) checkGitLab(ctx context.Context, p SubmitParams) (proj platform.Project, deferred bool, err error) {
	proj, err = e.checkRemote(ctx, p)
	if platform.IsBudgetHold(err) {
		return proj, true, nil
	}
	return proj, false, err
}

// checkRemote makes checkGitLab's reads; a budget hold is returned as it
// is, with the project when it was read.
func (e *Engine) checkRemote(ctx context.Context, p SubmitParams) (platform.Project, error) {
	w := rules.WordsOf(e.platform)
	var proj platform.Project
	unavailable := func(err error) error {
		if platform.IsBudgetHold(err) {
			return err
		}
		return &GitLabUnavailableError{Platform: w.Platform, RetryAfter: platform.RetryAfterOf(err), Err: err}
	}
	refused := func(field, format string, args ...any) error {
		return &GitLabCheckError{Fields: []FieldError{{field, fmt.Sprintf(format, args...)}}}
	}
	proj, err := e.project(ctx, p.Project)
	switch {
	case errors.Is(err, platform.ErrNotFound), errors.Is(err, platform.ErrForbidden):
		return platform.Project{}, refused("project", "project %q not found or not visible to the robot", p.Project)
	case platform.IsRefused(err):
		return platform.Project{}, refused("project", "%s refused project %q: %s", w.Platform, p.Project, failureDetail(w, err))
	case err != nil:
		return platform.Project{}, unavailable(err)
	}
	if proj.PathWithNamespace != "" {
		e.rememberProject(proj.PathWithNamespace, proj) // the create step reads it by this name
	}
	target := p.TargetBranch
	if target == "" {
		target = proj.DefaultBranch
	}
	if target == "" {
		return platform.Project{}, refused("target_branch", "project %q has no default branch; name the target branch", p.Project)
	}
	err = e.branchExists(ctx, proj.ID, target)
	switch {
	case errors.Is(err, platform.ErrNotFound):
		return platform.Project{}, refused("target_branch", "branch %q not found in project %q", target, p.Project)
	case platform.IsRefused(err):
		return platform.Project{}, refused("target_branch", "%s refused branch %q: %s", w.Platform, target, failureDetail(w, err))
	case err != nil:
		return proj, unavailable(err)
	}
	var explicit []string
	for _, f := range p.Files {
		if f.Action != "" {
			explicit = append(explicit, f.Path)
		}
	}
	if len(explicit) == 0 {
		return proj, nil
	}
	dir := commonDir(explicit)
	existing, err := e.gl.TreeFiles(ctx, proj.ID, target, dir)
	switch {
	case errors.Is(err, platform.ErrNotFound):
		existing = map[string]bool{} // no such directory yet
	case platform.IsRefused(err):
		return platform.Project{}, refused("files", "%s refused listing the files under %q: %s", w.Platform, dir, failureDetail(w, err))
	case err != nil:
		return proj, unavailable(err)
	}
	if fields := fileActionProblems(p.Files, existing, target); len(fields) > 0 {
		return platform.Project{}, &GitLabCheckError{Fields: fields}
	}
	return proj, nil
}

// fileActionProblems lists the files whose explicit action does not fit
// the branch whose files are existing (GitLab would refuse the commit).
func fileActionProblems(files []store.File, existing map[string]bool, branch string) []FieldError {
	var out []FieldError
	for i, f := range files {
		field := fmt.Sprintf("files[%d].action", i)
		switch {
		case (f.Action == "update" || f.Action == "delete") && !existing[f.Path]:
			out = append(out, FieldError{field, fmt.Sprintf("%s of %s, which does not exist on %s (leave the action empty to create or update)",
				f.Action, f.Path, branch)})
		case f.Action == "create" && existing[f.Path]:
			out = append(out, FieldError{field, fmt.Sprintf("create of %s, which already exists on %s (use update, or leave the action empty)",
				f.Path, branch)})
		}
	}
	return out
}

// deferredChecks makes, in a change's first job (the approval request or
// the create step, while the change has not moved since its submit), the
// checks its submit deferred because the call budget was spent
// (checkGitLab). A change that does not fit ends in CREATE_REFUSED with
// the reasons a submit's 422 gives; done reports that the caller must
// stop and return err (a budget hold or an unavailable platform is the
// job's error: it waits and runs again).
func (e *Engine) deferredChecks(ctx context.Context, op store.Operation, source string) (done bool, err error) {
	if op.Version != 1 {
		return false, nil
	}
	events, err := e.st.ListEvents(ctx, e.st.DB(), op.ID)
	if err != nil {
		return true, fmt.Errorf("reading how %s was submitted: %w", op.ID, err)
	}
	var submitted struct {
		ChecksDeferred bool `json:"checks_deferred"`
	}
	if len(events) == 0 || json.Unmarshal(events[0].Payload, &submitted) != nil || !submitted.ChecksDeferred {
		return false, nil
	}
	_, err = e.checkRemote(ctx, SubmitParams{Project: op.Project, TargetBranch: op.TargetBranch, Files: op.Files})
	var refused *GitLabCheckError
	var unavailable *GitLabUnavailableError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &refused):
		reasons := make([]string, len(refused.Fields))
		for i, f := range refused.Fields {
			reasons[i] = f.Field + ": " + f.Message
		}
		_, err = e.Transition(ctx, op, rules.CreateRefused, TransitionOpts{Source: source,
			Payload: map[string]any{"fields": refused.Fields},
			Update:  func(o *store.Operation) { o.Detail = strings.Join(reasons, "; ") }})
		return true, err
	case errors.As(err, &unavailable):
		return true, unavailable.Err
	}
	return true, err
}
