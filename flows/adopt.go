package flows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

// DefaultAdoptLabel is AdoptConfig.Label's default: the label that opts a
// developer's merge request in (issue 25 point 1).
const DefaultAdoptLabel = "changebot"

// AdoptConfig turns on adopting merge requests that developers open (issue
// 25 point 1). Its zero value adopts nothing: only the projects listed are
// served, and a project not listed never sees the robot act on a label,
// a "merge" command or a review request.
type AdoptConfig struct {
	// Projects lists the projects where adoption is on, by their path as
	// the platform names it ("group/repo" on GitLab, "owner/name" on
	// GitHub), compared without regard to case (config key adopt.projects).
	Projects []string
	// Label is the label that opts a merge request in (adopt.label); ""
	// means DefaultAdoptLabel.
	Label string
	// Bindings derives the binding of a merge request; nil means the path
	// rules of the `.changebot.yml` that governs its target branch (the
	// last valid one while the branch's is invalid) over its changed paths.
	Bindings BindingDeriver
}

// BindingDeriver derives the binding (subject and target) an adopted merge
// request changes, from the repository's path rules over the paths it
// changes (`.changebot.yml`, package repoconfig). It is declared here, by
// its caller, with the one method Adopt calls.
type BindingDeriver interface {
	// AdoptBinding returns the binding of merge request iid of project
	// projectID, whose target branch is targetBranch; ok false when its
	// paths map to no single binding, with reason saying why in a
	// sentence shown to the developer. An error is a failed read (retried).
	AdoptBinding(ctx context.Context, projectID, iid int64, targetBranch string) (b AdoptedBinding, err error)
}

// AdoptedBinding is what BindingDeriver answers for a merge request.
type AdoptedBinding struct {
	// SubjectID and TargetKey name the binding when OK.
	SubjectID, TargetKey string
	// OK reports whether the merge request's paths map to one binding.
	OK bool
	// Reason says why not when !OK ("paths map to two bindings: …").
	Reason string
}

// AdoptConfig returns the engine's adoption configuration.
func (e *Engine) AdoptConfig() AdoptConfig { return e.cfg.Adopt }

// LabelOrDefault is the opt-in label: Label, else DefaultAdoptLabel.
func (c AdoptConfig) LabelOrDefault() string { return c.label() }

// label is the opt-in label (Label, else DefaultAdoptLabel).
func (c AdoptConfig) label() string {
	if c.Label == "" {
		return DefaultAdoptLabel
	}
	return c.Label
}

// Allows reports whether adoption is on in project (its path, any case).
func (c AdoptConfig) Allows(project string) bool {
	return project != "" && slices.ContainsFunc(c.Projects, func(p string) bool { return strings.EqualFold(p, project) })
}

// AdoptParams are the arguments of Engine.Adopt.
type AdoptParams struct {
	// ProjectID and IID name the merge request on the engine's platform.
	ProjectID, IID int64
	// By is the username of who opted it in: the labeller, or the author
	// of the "merge" command.
	By string
	// Via is how: AdoptViaLabel or AdoptViaCommand.
	Via string
	// Source is the event source recorded ("webhook:<delivery id>",
	// "command:<note id>").
	Source string
}

// How a merge request was opted in, recorded as "via" on the submitted
// event of an adopted change.
const (
	AdoptViaLabel   = "label"
	AdoptViaCommand = "command"
)

// AdoptRefusedError is returned by Adopt when the merge request cannot be
// adopted; Reason is one sentence for the reply on the merge request.
type AdoptRefusedError struct{ Reason string }

// Error implements error.
func (e *AdoptRefusedError) Error() string { return "not adopted: " + e.Reason }

// AdoptRefusal returns the reason of an *AdoptRefusedError in err's chain.
func AdoptRefusal(err error) (string, bool) {
	var r *AdoptRefusedError
	if errors.As(err, &r) {
		return r.Reason, true
	}
	return "", false
}

// refuseAdopt is an *AdoptRefusedError with a formatted reason.
func refuseAdopt(format string, args ...any) error {
	return &AdoptRefusedError{Reason: fmt.Sprintf(format, args...)}
}

// AdoptsIn reports whether adoption is on in project projectID (its path as
// the platform answers it, read within projectReadTTL).
func (e *Engine) AdoptsIn(ctx context.Context, projectID int64) (bool, error) {
	if len(e.cfg.Adopt.Projects) == 0 {
		return false, nil
	}
	proj, err := e.project(ctx, strconv.FormatInt(projectID, 10))
	if err != nil {
		return false, fmt.Errorf("reading project %d: %w", projectID, err)
	}
	return e.cfg.Adopt.Allows(proj.PathWithNamespace), nil
}

// Adopt makes the open merge request p names, opened by a developer, a
// change (issue 25 point 1): it reads the merge request, its project and
// the binding its paths map to (AdoptConfig.Bindings), and creates the
// operation, its binding, its submitted event and its first job in one
// transaction, as Submit does. The operation carries the merge request's
// title, author (RequestedBy), branches, number and head sha, no files, and
// the Adopted mark; its create step records the merge request and waits for
// its pipeline (adoptedMR). It returns the change and whether it was
// created now: a merge request already carried by a change in progress
// answers that change and false (the same hook twice, a label and a
// comment). It refuses, with an *AdoptRefusedError, a project where
// adoption is off, a merge request that is not open or that the robot
// opened, one whose paths map to no single binding, and one whose binding
// is held by another change (naming it).
func (e *Engine) Adopt(ctx context.Context, p AdoptParams) (store.Operation, bool, error) {
	w := rules.WordsOf(e.platform)
	proj, err := e.project(ctx, strconv.FormatInt(p.ProjectID, 10))
	if err != nil {
		return store.Operation{}, false, fmt.Errorf("reading project %d to adopt %s: %w", p.ProjectID, w.MRRef(p.IID), err)
	}
	if !e.cfg.Adopt.Allows(proj.PathWithNamespace) {
		return store.Operation{}, false, refuseAdopt("adoption is not turned on for %s (adopt.projects)", proj.PathWithNamespace)
	}
	if op, err := e.FindByMR(ctx, p.ProjectID, p.IID); err == nil && !store.Reappliable[op.Status] {
		return op, false, nil
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Operation{}, false, fmt.Errorf("looking for the change of %s: %w", w.MRRef(p.IID), err)
	}
	mr, err := e.gl.MergeRequest(ctx, p.ProjectID, p.IID, false)
	if err != nil {
		return store.Operation{}, false, fmt.Errorf("reading %s to adopt it: %w", w.MRRef(p.IID), err)
	}
	if mr.State != platform.MRStateOpened {
		return store.Operation{}, false, refuseAdopt("%s is %s, not open", w.MRRef(p.IID), mr.State)
	}
	robot, err := e.gl.CurrentUser(ctx)
	if err != nil {
		return store.Operation{}, false, fmt.Errorf("reading the robot's user: %w", err)
	}
	if mr.Author.Username == robot.Username || (robot.ID != 0 && mr.Author.ID == robot.ID) {
		return store.Operation{}, false, refuseAdopt("%s was opened by the robot itself", w.MRRef(p.IID))
	}
	var bindings BindingDeriver = repoBindings{e}
	if e.cfg.Adopt.Bindings != nil {
		bindings = e.cfg.Adopt.Bindings
	}
	b, err := bindings.AdoptBinding(ctx, p.ProjectID, p.IID, mr.TargetBranch)
	if err != nil {
		return store.Operation{}, false, fmt.Errorf("deriving the binding of %s: %w", w.MRRef(p.IID), err)
	}
	if !b.OK {
		return store.Operation{}, false, refuseAdopt("%s", b.Reason)
	}
	return e.createAdopted(ctx, p, proj, mr, b)
}

// createAdopted creates the change of an adoptable merge request mr (see
// Adopt) with binding b.
func (e *Engine) createAdopted(ctx context.Context, p AdoptParams, proj platform.Project, mr platform.MergeRequest, b AdoptedBinding) (store.Operation, bool, error) {
	// The merge request exists already: an adopted change is always MR
	// first (its pipeline on the head, then the approval, whose request
	// carries the merge request: mr_iid, mr_web_url and head_sha), whatever
	// flow.approval_first says; an approval request of a change with an
	// iid is read as MR first (requestApproval).
	const approvalFirst = false
	first := rules.CreateStarted
	op := store.Operation{
		ID: NewOperationID(), Platform: e.platform, SubjectID: b.SubjectID, TargetKey: b.TargetKey,
		Project: proj.PathWithNamespace, ProjectID: proj.ID, TargetBranch: mr.TargetBranch, SourceBranch: mr.SourceBranch,
		Title: mr.Title, RequestedBy: mr.Author.Username, ApprovalFirst: approvalFirst, Step: int(first),
		Status: rules.MustStep(first).Status, MRIID: mr.IID, MRWebURL: mr.WebURL, HeadSHA: mr.SHA, Adopted: true,
	}
	op, _, err := e.st.CreateOperation(ctx, store.CreateParams{
		Operation: op,
		Event: store.EventParams{Type: store.EventSubmitted, Actor: p.By, Source: p.Source, Payload: map[string]any{
			"project": op.Project, "file_count": 0, "approval_first": approvalFirst, "adopted": true,
			"via": p.Via, "mr_iid": mr.IID, "head_sha": mr.SHA,
		}},
		Jobs: e.followUps(op, first, 1, 0),
	})
	var held *store.ActiveChangeError
	switch {
	case errors.As(err, &held):
		if held.Platform == e.platform && held.MRIID == mr.IID {
			existing, gerr := e.st.GetOperation(ctx, e.st.DB(), held.OperationID)
			return existing, false, gerr
		}
		w := rules.WordsOf(e.platform)
		holder := held.OperationID
		if held.MRIID > 0 {
			holder += " (" + w.Ref(held.MRIID) + ")"
		}
		return store.Operation{}, false, refuseAdopt("binding %s / %s is busy with another change, %s (%s)",
			b.SubjectID, b.TargetKey, holder, held.Status)
	case errors.Is(err, store.ErrUniqueViolation):
		// A concurrent adoption of the same merge request won
		// (operations_adopted_mr): answer its change.
		existing, gerr := e.FindByMR(ctx, proj.ID, mr.IID)
		return existing, false, gerr
	case err != nil:
		return store.Operation{}, false, err
	}
	e.opLog(op).Info("merge request adopted", "mr_iid", mr.IID, "via", p.Via, "by", p.By)
	return op, true, nil
}

// adoptedMR is the create step of an adopted change: it opens nothing and
// pushes nothing (the developer's branch is theirs), it reads the merge
// request, records its head and moves to the pipeline wait
// (CREATE_MR_OPENED). A merge request no longer open fails the step.
func (e createWorker) adoptedMR(ctx context.Context, op store.Operation) error {
	w := rules.WordsOf(op.Platform)
	mr, err := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, false)
	if err != nil {
		return notFoundIs(err, w, rules.CreateFailed, "%s not found or not visible to the robot", w.MRRef(op.MRIID))
	}
	if mr.State != platform.MRStateOpened {
		return failTo(rules.CreateFailed, "%s is %s, not open", w.MRRef(op.MRIID), mr.State)
	}
	if hp := headPipeline(mr); op.PipelineID != 0 && hp != nil && hp.Finished() && hp.Status != platform.PipelineSuccess {
		// A /retry after a failed pipeline with no new push (the change
		// waited for a pipeline before): run the head's pipeline again, as
		// for the robot's own merge requests. The first create step of an
		// adoption runs none: a developer's failed pipeline fails the
		// change, for them to fix.
		if _, err := e.gl.CreateMergeRequestPipeline(ctx, op.ProjectID, mr.IID); err != nil {
			return err
		}
	}
	_, err = e.Transition(ctx, op, rules.CreateMROpened, TransitionOpts{Source: "job:" + rules.KindCreateMR,
		Payload: map[string]any{"mr_iid": mr.IID, "head_sha": mr.SHA, "project_id": op.ProjectID, "adopted": true},
		Update: func(o *store.Operation) {
			o.TargetBranch, o.SourceBranch, o.MRWebURL, o.HeadSHA = mr.TargetBranch, mr.SourceBranch, mr.WebURL, mr.SHA
		}})
	return err
}

// LetGo ends adopted change op in CLOSED without closing its merge request
// or touching its branch (Cancel of an adopted change): the developer took
// the label off (issue 25 point 4). A change that can no longer be
// cancelled (merged, finished) is left as it is, and so is a change that
// was not adopted: both answer a *rules.NotApplicableError.
func (e *Engine) LetGo(ctx context.Context, op store.Operation, p rules.ActionParams) (store.Operation, error) {
	if !op.Adopted {
		return op, notApplicable("the change was not adopted: only /cancel ends it")
	}
	return e.Cancel(ctx, op, p)
}

// letGoDetail starts the detail of an adopted change of platformName let
// go: the status comment says the robot let go and left the merge request
// as it is.
func letGoDetail(platformName string) string {
	return "let go (the " + rules.WordsOf(platformName).MR + " stays open, its branch untouched)"
}

// applyAdoptHook applies a merge request webhook of a project where
// adoption is on (AdoptConfig.Allows) that may adopt or let go (issue 25
// point 1 and 4): the label shown newly on an open merge request adopts it
// (Adopt; a refusal is answered with one comment), the label taken off an
// adopted change in progress lets it go (LetGo), and the robot requested
// as a reviewer on a merge request not opted in answers once how to opt in
// (answerReviewRequest). done false: the hook is applied further as any
// other (it may also move a change).
func (e *Engine) applyAdoptHook(ctx context.Context, ev platform.HookEvent, source string) (string, bool, error) {
	h, label := ev.MergeRequest, e.cfg.Adopt.label()
	switch {
	case h.LabelAdded(label) && h.State == platform.MRStateOpened:
		_, created, err := e.Adopt(ctx, AdoptParams{ProjectID: ev.ProjectID, IID: h.IID, By: ev.User.Username,
			Via: AdoptViaLabel, Source: source})
		if reason, refused := AdoptRefusal(err); refused {
			return OutcomeApplied, true, e.replyAdoptRefused(ctx, ev.ProjectID, h.IID, reason, source)
		}
		if err != nil {
			return "", true, err
		}
		if !created {
			return OutcomeNoChange, true, nil
		}
		return OutcomeApplied, true, nil
	case h.LabelRemoved(label):
		op, err := e.FindByMR(ctx, ev.ProjectID, h.IID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && !op.Adopted) {
			return OutcomeNoChange, true, nil
		}
		if err != nil {
			return "", true, err
		}
		_, err = e.LetGo(ctx, op, rules.ActionParams{Actor: ev.User.Username, Source: source, Command: "unlabel"})
		var na *rules.NotApplicableError
		if errors.As(err, &na) {
			// Merged or finished meanwhile: nothing to let go of.
			return OutcomeNoChange, true, nil
		}
		if isConflict(err) {
			// The change moved while letting go: the delivery is applied
			// again and lets go of it where it is now.
			return "", true, fmt.Errorf("letting go of %s: %w", op.ID, err)
		}
		if err != nil {
			return "", true, err
		}
		return OutcomeApplied, true, nil
	case len(h.ReviewersAdded) > 0 && !h.HasLabel(label):
		return e.answerReviewRequest(ctx, ev, source)
	}
	return "", false, nil
}

// replyAdoptRefused answers a refused adoption with one comment on the
// merge request saying why, and logs it.
func (e *Engine) replyAdoptRefused(ctx context.Context, projectID, iid int64, reason, source string) error {
	e.log.Info("merge request not adopted", "project_id", projectID, "mr_iid", iid, "reason", reason, "source", source)
	if err := e.Reply(ctx, projectID, iid, AdoptRefusedReply(reason)); err != nil {
		return fmt.Errorf("answering a refused adoption of %s: %w", rules.WordsOf(e.platform).MRRef(iid), err)
	}
	return nil
}

// AdoptRefusedReply is the comment answering a refused adoption.
func AdoptRefusedReply(reason string) string {
	return "changebot did not take this on: " + reason + "."
}

// reviewHintMarker is the HTML comment that marks the robot's one answer
// to a review request on a merge request not opted in: found on the merge
// request (FindNote), it is never posted again.
const reviewHintMarker = "<!-- changebot:adopt-hint -->"

// answerReviewRequest answers a hook that requested the robot as a
// reviewer on a merge request not opted in, in a project where adoption is
// on, with one comment saying how to opt in (issue 25 point 1); it is
// posted once per merge request (reviewHintMarker), never for a merge
// request carried by a change. Another reviewer requested moves nothing.
func (e *Engine) answerReviewRequest(ctx context.Context, ev platform.HookEvent, source string) (string, bool, error) {
	h := ev.MergeRequest
	robot, err := e.gl.CurrentUser(ctx)
	if err != nil {
		return "", true, fmt.Errorf("reading the robot's user: %w", err)
	}
	if !slices.Contains(h.ReviewersAdded, robot.Username) {
		return "", false, nil
	}
	if _, err := e.FindByMR(ctx, ev.ProjectID, h.IID); err == nil {
		return "", false, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", true, err
	}
	switch _, err := e.gl.FindNote(ctx, ev.ProjectID, h.IID, reviewHintMarker); {
	case err == nil:
		return OutcomeNoChange, true, nil
	case !errors.Is(err, platform.ErrNotFound):
		return "", true, fmt.Errorf("looking for the opt-in hint on %s: %w", rules.WordsOf(e.platform).MRRef(h.IID), err)
	}
	if err := e.Reply(ctx, ev.ProjectID, h.IID, ReviewHint(rules.WordsOf(e.platform), robot.Username, e.cfg.Adopt.label())); err != nil {
		return "", true, fmt.Errorf("answering a review request on %s: %w", rules.WordsOf(e.platform).MRRef(h.IID), err)
	}
	e.log.Info("answered a review request with how to opt in", "project_id", ev.ProjectID, "mr_iid", h.IID, "source", source)
	return OutcomeApplied, true, nil
}

// ReviewHint is the robot's one answer to a review request on a merge
// request (w's words) not opted in: add label, or comment "@robot merge".
func ReviewHint(w rules.Words, robot, label string) string {
	return fmt.Sprintf("%s\nchangebot reviews and merges a %s it carries. To hand this one over, add the label `%s` "+
		"or comment `@%s merge` (you need write access). Removing the label, or `/cancel`, lets it go again; "+
		"changebot never pushes to your branch except the rebase its merge queue needs.", reviewHintMarker, w.MR, label, robot)
}
