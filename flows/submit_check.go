package flows

import (
	"context"
	"errors"
	"fmt"
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
// under their common directory. It always asks GitLab (a GitLab that cannot
// answer is the submitter's 503) and keeps the project's answer for the
// create step (projectReads). A failure GitLab may clear by itself (5xx,
// 429, no answer) is a *GitLabUnavailableError; what does not fit is a
// *GitLabCheckError naming every problem. It returns the project as the
// platform answered for p.Project (its canonical path and id).
func (e *Engine) checkGitLab(ctx context.Context, p SubmitParams) (platform.Project, error) {
	w := rules.WordsOf(e.platform)
	unavailable := func(err error) error {
		return &GitLabUnavailableError{Platform: w.Platform, RetryAfter: platform.RetryAfterOf(err), Err: err}
	}
	refused := func(field, format string, args ...any) error {
		return &GitLabCheckError{Fields: []FieldError{{field, fmt.Sprintf(format, args...)}}}
	}
	proj, err := e.gl.Project(ctx, p.Project)
	switch {
	case errors.Is(err, platform.ErrNotFound), errors.Is(err, platform.ErrForbidden):
		return platform.Project{}, refused("project", "project %q not found or not visible to the robot", p.Project)
	case platform.IsRefused(err):
		return platform.Project{}, refused("project", "%s refused project %q: %s", w.Platform, p.Project, failureDetail(w, err))
	case err != nil:
		return platform.Project{}, unavailable(err)
	}
	target := p.TargetBranch
	if target == "" {
		target = proj.DefaultBranch
	}
	if target == "" {
		return platform.Project{}, refused("target_branch", "project %q has no default branch; name the target branch", p.Project)
	}
	e.rememberProject(p.Project, proj)
	if proj.PathWithNamespace != "" {
		e.rememberProject(proj.PathWithNamespace, proj) // the create step reads it by this name
	}
	_, err = e.gl.Branch(ctx, proj.ID, target)
	switch {
	case errors.Is(err, platform.ErrNotFound):
		return platform.Project{}, refused("target_branch", "branch %q not found in project %q", target, p.Project)
	case platform.IsRefused(err):
		return platform.Project{}, refused("target_branch", "%s refused branch %q: %s", w.Platform, target, failureDetail(w, err))
	case err != nil:
		return platform.Project{}, unavailable(err)
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
		return platform.Project{}, unavailable(err)
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
