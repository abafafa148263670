package flows

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
	"changebot/templates"
)

// commitMessage names the operation so that a repeated create step can
// recognise its own commit on the branch. A change whose first pipeline
// waits for the head of its merge queue (deferCI) carries
// rules.SkipCIMarker as its last line.
func commitMessage(op store.Operation, deferCI bool) string {
	m := fmt.Sprintf("%s\n\n%s, requested by %s", op.Title, commitMarker(op), op.RequestedBy)
	if deferCI {
		m += "\n" + rules.SkipCIMarker
	}
	return m
}

// mrDescription is the merge request's description: the change's, then who
// requested it. One that would pass the platform's limit (GitLab's
// 1,048,576 characters, GitHub's 65,536: templates.MaxDescriptionCharsOn)
// is cut with a visible "…truncated; full history at <link>" line, the
// requester's line kept (issue 10 point 5, issue 21 point 3).
func (e createWorker) mrDescription(op store.Operation) string {
	footer := fmt.Sprintf("\n\nRequested by @%s through changebot (operation `%s`).", op.RequestedBy, op.ID)
	room := templates.MaxDescriptionCharsOn(store.PlatformOr(op.Platform)) - utf8.RuneCountInString(footer)
	return strings.TrimRight(templates.Truncate(op.Description, room, e.changeURL(op.ID)), "\n") + footer
}

// createMR runs at CREATE_STARTED: branch, commit, merge request, each
// idempotent against what GitLab already has (DESIGN §3 step 4), then
// CREATE_MR_OPENED and the pipeline wait.
func (e createWorker) createMR(ctx context.Context, op store.Operation) error {
	if op.Adopted {
		// A developer's merge request: nothing to open or push.
		return e.adoptedMR(ctx, op)
	}
	if done, err := e.deferredChecks(ctx, op, "job:"+rules.KindCreateMR); done {
		return err
	}
	proj, err := e.project(ctx, op.Project)
	if err != nil {
		return notFoundIs(err, rules.WordsOf(op.Platform), rules.CreateFailed, "project %q not found or not visible to the robot", op.Project)
	}
	target := op.TargetBranch
	if target == "" {
		target = proj.DefaultBranch
	}
	source := e.prefix + op.ID
	// The change starts from the target branch as it is now: the
	// branch's .changebot.yml (or its last valid one) governs it from
	// here (issue 25 point 2), before anything is opened.
	at := op
	at.ProjectID, at.TargetBranch = proj.ID, target
	var gov Governing
	if e.policyMatters(at) {
		if gov, err = e.readPolicy(ctx, at, proj.ID, target); err != nil {
			return err
		}
	}
	deferCI, err := e.defersCI(ctx, at)
	if err != nil {
		return err
	}
	// fresh: the branch was created by this run, so it cannot hold our
	// commit or be the source of an MR yet; the reads that make a repeated
	// run idempotent are skipped (DESIGN §9: close to the minimum calls).
	// The branch is created without reading first: only a repeated run
	// finds it there (GitLab answers 400 "Branch already exists") and then
	// reads it. Where the platform creates a branch with its first commit
	// in one call (GitLab's start_branch), a first run makes that call.
	head, made, err := e.branchWithCommit(ctx, op, proj.ID, source, target, deferCI)
	if err != nil {
		return err
	}
	fresh, committed := made == branchCreated, made == branchCreated
	if !fresh {
		branch, err := platform.Branch{}, platform.ErrAlreadyExists
		if made != branchExists {
			branch, err = e.gl.CreateBranch(ctx, proj.ID, source, target)
			fresh = err == nil
		}
		if errors.Is(err, platform.ErrAlreadyExists) {
			branch, err = e.gl.Branch(ctx, proj.ID, source)
		}
		if err != nil {
			return notFoundIs(err, rules.WordsOf(op.Platform), rules.CreateFailed, "target branch %q not found", target)
		}
		head = branch.CommitSHA
	}
	if !fresh {
		// Our commit anywhere on the branch, not only at its tip: after a
		// failed pipeline a developer may have pushed a fix on top, and
		// committing the submitted files again would revert it (issue 9
		// defect 4). The branch is then left as it is.
		commits, err := e.gl.BranchCommits(ctx, proj.ID, target, source)
		if err != nil {
			return notFoundIs(err, rules.WordsOf(op.Platform), rules.CreateFailed, "target branch %q not found", target)
		}
		committed = slices.ContainsFunc(commits, func(c platform.Commit) bool { return strings.Contains(c.Message, commitMarker(op)) })
	}
	if !committed {
		actions, err := e.commitActions(ctx, proj.ID, source, op.Files)
		if err != nil {
			return err
		}
		c, err := e.gl.CreateCommit(ctx, proj.ID, platform.CommitParams{Branch: source, Message: commitMessage(op, deferCI), Actions: actions})
		if err != nil {
			if platform.IsRefused(err) {
				return failTo(rules.CreateFailed, "committing the files: %s", failureDetail(rules.WordsOf(op.Platform), err))
			}
			return err
		}
		head = c.SHA
	}
	var mr platform.MergeRequest
	err = platform.ErrNotFound
	if !fresh {
		mr, err = e.gl.FindOpenMergeRequest(ctx, proj.ID, source)
	}
	if err == nil {
		// Lists do not carry head_pipeline: read the MR itself.
		mr, err = e.gl.MergeRequest(ctx, proj.ID, mr.IID, false)
	} else if errors.Is(err, platform.ErrNotFound) {
		mr, err = e.gl.CreateMergeRequest(ctx, proj.ID, platform.CreateMRParams{
			SourceBranch: source, TargetBranch: target, Title: op.Title, RemoveSourceBranch: true,
			Description: e.mrDescription(op), Squash: squashByDefault(proj),
		})
		if errors.Is(err, platform.ErrAlreadyExists) {
			mr, err = e.gl.FindOpenMergeRequest(ctx, proj.ID, source)
		}
	}
	if err != nil {
		if platform.IsRefused(err) {
			return failTo(rules.CreateFailed, "opening the %s: %s", rules.WordsOf(op.Platform).MR, failureDetail(rules.WordsOf(op.Platform), err))
		}
		return err
	}
	if hp := headPipeline(mr); !deferCI && hp != nil && hp.Finished() && hp.Status != platform.PipelineSuccess {
		// A /retry after a failed pipeline with no new push: run the
		// pipeline of the head again.
		if _, err := e.gl.CreateMergeRequestPipeline(ctx, proj.ID, mr.IID); err != nil {
			return err
		}
	}
	if mr.SHA != "" {
		head = mr.SHA
	}
	// A deferred change does not wait for a pipeline here: its commit
	// skipped CI, and the head of its merge queue runs the pipeline
	// (runDeferredPipeline).
	to, payload, detail := rules.CreateMROpened, map[string]any{"mr_iid": mr.IID, "head_sha": head, "project_id": proj.ID}, ""
	if gov.Blob != "" || gov.Invalid != nil {
		payload["policy"] = gov.payload()
	}
	if deferCI {
		to, payload["ci_deferred"] = rules.CreateSucceeded, true
		detail = "its " + rules.WordsOf(op.Platform).Pipeline + " runs when it reaches the head of the merge queue (queue.defer_ci)"
	}
	_, err = e.Transition(ctx, op, to, TransitionOpts{Source: "job:" + rules.KindCreateMR,
		Payload: payload,
		Update: func(o *store.Operation) {
			o.ProjectID, o.TargetBranch, o.SourceBranch = proj.ID, target, source
			o.MRIID, o.MRWebURL, o.HeadSHA, o.Detail = mr.IID, mr.WebURL, head, detail
		}})
	if isConflict(err) {
		// Someone moved the change while this job opened its branch and
		// merge request: a /cancel leaves them to us (issue 9 defect 6).
		return e.cleanUpIfCancelled(ctx, op.ID, proj.ID, source, mr)
	}
	return err
}

// branchCommitter is the platform that creates a branch with its first
// commit in one call (gitlab.Client.CreateBranchWithCommit: POST
// .../repository/commits with start_branch); GitHub's adapter is not one.
type branchCommitter interface {
	CreateBranchWithCommit(ctx context.Context, projectID int64, start string, p platform.CommitParams) (platform.Commit, error)
}

// What branchWithCommit made of the change's branch.
type branchMade int

const (
	// branchNotMade: the platform cannot, or refused the commit; the
	// caller creates the branch and commits on it.
	branchNotMade branchMade = iota
	// branchCreated: the branch and its commit (head) are there.
	branchCreated
	// branchExists: the branch was there already (a repeated run); the
	// caller reads what it holds.
	branchExists
)

// branchWithCommit creates the change's branch source from target with its
// commit in one call where the platform can (branchCommitter). A single
// file submitted without an action gets a guessed one, and the other when
// GitLab refuses the guess (guessedFile); several are decided from one
// listing of the target's tree. It answers branchNotMade, and no error,
// when the platform cannot and when the platform refused the commit for its
// files (fileRefused: the target may have moved since the listing; the
// caller commits on the branch once it is created, as without this call),
// and for
// a change that opened its merge request before. A target branch that does
// not exist, or another refusal (the robot may not push), fails the change
// in CREATE_FAILED.
func (e createWorker) branchWithCommit(ctx context.Context, op store.Operation, projectID int64, source, target string, deferCI bool) (head string, made branchMade, err error) {
	bc, ok := e.gl.(branchCommitter)
	if !ok || op.MRIID != 0 {
		// A change that opened its MR before (a /retry) most likely
		// has its branch: the caller reads it as it always did.
		return "", branchNotMade, nil
	}
	var actions []platform.FileAction
	guess, guessed := guessedFile(op.Files)
	if guessed {
		// One file without an action: guessed (create, unless a change
		// of the project last needed update) instead of listing the tree;
		// GitLab's refusal of a wrong guess tells the other.
		actions = fileActions(op.Files, map[string]bool{op.Files[guess].Path: e.guesses.exists(projectID)})
	} else if actions, err = e.commitActions(ctx, projectID, target, op.Files); err != nil {
		return "", branchNotMade, err
	}
	params := platform.CommitParams{Branch: source, Message: commitMessage(op, deferCI), Actions: actions}
	c, err := bc.CreateBranchWithCommit(ctx, projectID, target, params)
	if guessed && fileRefused(err) {
		params.Actions[guess].Action = otherAction(params.Actions[guess].Action)
		c, err = bc.CreateBranchWithCommit(ctx, projectID, target, params)
	}
	if guessed && err == nil {
		e.guesses.remember(projectID, params.Actions[guess].Action == "update")
	}
	switch {
	case err == nil:
		return c.SHA, branchCreated, nil
	case errors.Is(err, platform.ErrAlreadyExists):
		return "", branchExists, nil
	case errors.Is(err, platform.ErrNotFound):
		return "", branchNotMade, failTo(rules.CreateFailed, "target branch %q not found", target)
	case fileRefused(err):
		e.opLog(op).Info("the commit creating the branch was refused for its files; committing on a created branch instead", "err", err)
		return "", branchNotMade, nil
	case platform.IsRefused(err):
		return "", branchNotMade, failTo(rules.CreateFailed, "committing the files: %s", failureDetail(rules.WordsOf(op.Platform), err))
	}
	return "", branchNotMade, err
}

// fileRefused reports whether GitLab refused a commit for its file actions
// (400 with the Files::MultiService message, such as "A file with this name
// already exists"), not for its branch (platform.ErrAlreadyExists,
// ErrNotFound) nor for the robot's rights (403).
func fileRefused(err error) bool {
	return platform.StatusOf(err) == http.StatusBadRequest && platform.IsRefused(err) &&
		!errors.Is(err, platform.ErrAlreadyExists) && !errors.Is(err, platform.ErrNotFound)
}

// squashByDefault reports whether the project squashes merge requests
// unless told otherwise (squash_option always or default_on): the create
// step sets the new MR's squash flag from it, and the merge follows the
// MR's flag (a person may untick it where the option allows).
func squashByDefault(p platform.Project) bool {
	return p.SquashOption == "always" || p.SquashOption == "default_on"
}

// commitMarker is the line of our commit message that names the operation.
func commitMarker(op store.Operation) string { return "changebot operation " + op.ID }

// commitActions turns submitted files into commit actions, choosing create
// or update for files submitted without an action from one listing of the
// repository tree at ref under the files' common directory (a few paginated
// requests for any number of files: one raw-file read per file made a
// change of 1,000 files outlive its job, issue 9 defect 3).
func (e createWorker) commitActions(ctx context.Context, projectID int64, ref string, files []store.File) ([]platform.FileAction, error) {
	var undecided []string
	for _, f := range files {
		if f.Action == "" {
			undecided = append(undecided, f.Path)
		}
	}
	existing := map[string]bool{}
	if len(undecided) > 0 {
		dir := commonDir(undecided)
		var err error
		existing, err = e.gl.TreeFiles(ctx, projectID, ref, dir)
		if errors.Is(err, platform.ErrNotFound) {
			existing, err = map[string]bool{}, nil // no such directory yet
		}
		if err != nil {
			return nil, fmt.Errorf("listing the files under %q: %w", dir, err)
		}
	}
	return fileActions(files, existing), nil
}

// fileActions turns files into commit actions, choosing update for a file
// submitted without an action that existing holds and create otherwise.
func fileActions(files []store.File, existing map[string]bool) []platform.FileAction {
	out := make([]platform.FileAction, 0, len(files))
	for _, f := range files {
		action := f.Action
		if action == "" {
			action = "create"
			if existing[f.Path] {
				action = "update"
			}
		}
		out = append(out, platform.FileAction{Action: action, FilePath: f.Path, Content: f.Content})
	}
	return out
}

// guessedFile returns the index of the one file submitted without an
// action, and false when there is none or more than one: a single file's
// create-or-update is guessed and, when GitLab refuses the guess ("A file
// with this name already exists" / "doesn't exist"), the other action is
// tried, two calls at worst, as many as a tree listing and the commit
// (issue 24 point 3). With several such files a refusal would not say
// which one, so the tree is listed.
func guessedFile(files []store.File) (int, bool) {
	at := -1
	for i, f := range files {
		if f.Action != "" {
			continue
		}
		if at >= 0 {
			return -1, false
		}
		at = i
	}
	return at, at >= 0
}

// otherAction is the action to try after GitLab refused a guessed one.
func otherAction(action string) string {
	if action == "update" {
		return "create"
	}
	return "update"
}

// actionGuesses remembers per project whether the last guessed file that
// GitLab took was an update (the file existed): a rollout that updates one
// file in many changes guesses right after its first. Bounded by the
// projects the bot serves; a replica that restarts guesses create again.
type actionGuesses struct{ m sync.Map }

func (g *actionGuesses) exists(projectID int64) bool {
	v, ok := g.m.Load(projectID)
	return ok && v.(bool)
}

func (g *actionGuesses) remember(projectID int64, existed bool) { g.m.Store(projectID, existed) }

// commonDir is the deepest directory holding every one of paths ("" for
// the repository root): "a/b" for "a/b/c.yaml" and "a/b/d/e.yaml".
func commonDir(paths []string) string {
	var common []string
	for i, p := range paths {
		dirs := strings.Split(p, "/")
		dirs = dirs[:len(dirs)-1]
		if i == 0 {
			common = dirs
			continue
		}
		n := 0
		for n < len(common) && n < len(dirs) && common[n] == dirs[n] {
			n++
		}
		common = common[:n]
	}
	return strings.Join(common, "/")
}

// notFoundIs maps platform.ErrNotFound (and every other refusal, told in
// w's words) to a recognised failure; transient errors pass through for a
// retry.
func notFoundIs(err error, w rules.Words, step rules.StepCode, format string, args ...any) error {
	if errors.Is(err, platform.ErrNotFound) {
		return failTo(step, format, args...)
	}
	if platform.IsRefused(err) {
		return failTo(step, "%s", failureDetail(w, err))
	}
	return err
}

// createPlatform is what the create step itself calls on the platform (issue
// 20 point 2: a step worker is given only the methods it calls); the
// engine's shared moves (Transition, failures) keep their own.
type createPlatform interface {
	Branch(ctx context.Context, projectID int64, name string) (platform.Branch, error)
	BranchCommits(ctx context.Context, projectID int64, base, branch string) ([]platform.Commit, error)
	CreateBranch(ctx context.Context, projectID int64, name, ref string) (platform.Branch, error)
	CreateCommit(ctx context.Context, projectID int64, p platform.CommitParams) (platform.Commit, error)
	CreateMergeRequest(ctx context.Context, projectID int64, p platform.CreateMRParams) (platform.MergeRequest, error)
	CreateMergeRequestPipeline(ctx context.Context, projectID, iid int64) (platform.Pipeline, error)
	FindOpenMergeRequest(ctx context.Context, projectID int64, sourceBranch string) (platform.MergeRequest, error)
	MergeRequest(ctx context.Context, projectID, iid int64, includeRebase bool) (platform.MergeRequest, error)
	TreeFiles(ctx context.Context, projectID int64, ref, dir string) (map[string]bool, error)
}

// createWorker runs the create step (CREATE_STARTED: branch, commit, merge
// request) with createPlatform in place of the engine's whole platform; it
// calls the store only through the engine's shared moves.
type createWorker struct {
	*Engine
	gl createPlatform
}

// createWorker is e's create step worker.
func (e *Engine) createWorker() createWorker { return createWorker{Engine: e, gl: e.gl} }
