package flows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
	"changebot/templates"
)

// StatusView builds the status comment's view of op from its events and the
// step catalogue; commands lists what may be run now (from the command
// registry, wired by bot). The ticket's page, the decision and who made it
// and the deploy pipeline are read from the events' payloads; timeline
// sources are put in words (describeSource).
func (e *Engine) StatusView(op store.Operation, events []store.Event) templates.StatusView {
	st := rules.MustStep(rules.StepCode(op.Step))
	v := templates.StatusView{
		OperationID: op.ID, Title: op.Title, SubjectID: op.SubjectID, TargetKey: op.TargetKey,
		RequestedBy: op.RequestedBy, Status: op.Status, StepCode: op.Step, StepName: st.Name,
		Hint: st.HintOn(op.Platform), Terminal: st.Terminal, Detail: op.Detail,
		Failed:      op.Status == store.StatusCreateFailed || op.Status == store.StatusHandleFailed || op.Status == store.StatusRejected,
		MR:          templates.MRView{IID: op.MRIID, WebURL: op.MRWebURL},
		PipelineURL: op.PipelineURL, TicketID: op.TicketID, HistoryURL: e.changeURL(op.ID), PageURL: e.pageURL(op.ID),
		ApprovalInGitLab: op.TicketID == rules.GitLabTicket,
		Platform:         store.PlatformOr(op.Platform),
	}
	var gitlabApprovers []string
	var deployPipeline int64
	for _, ev := range events {
		v.Seq = ev.Seq
		pl := payloadOf(ev)
		if u, _ := pl["ticket_url"].(string); u != "" && pl["ticket_id"] == op.TicketID {
			v.ApprovalURL = u
		}
		switch {
		case ev.Type == EventApproval && !slices.Contains(gitlabApprovers, ev.Actor):
			gitlabApprovers = append(gitlabApprovers, ev.Actor)
		case pl["decision"] != nil:
			v.Decision, _ = pl["decision"].(string)
			v.DecidedBy = []string{personOf(ev.Actor)}
			if pl["provider"] == rules.ProviderGitLab && v.Decision == rules.DecisionApproved && len(gitlabApprovers) > 0 {
				v.DecidedBy = gitlabApprovers
			}
		}
		if ev.ToStep == int(rules.CalledBack) && ev.FromStep != int(rules.CalledBack) {
			if id, ok := pl["pipeline_id"].(float64); ok {
				deployPipeline = int64(id)
			}
		}
		if ev.Type == store.EventAttempt || ev.Type == store.EventClaim {
			v.HiddenEvents++ // retried calls and gate claims are history, not steps
			continue
		}
		v.Timeline = append(v.Timeline, templates.TimelineEntry{At: ev.OccurredAt,
			StepName: rules.StepCode(ev.ToStep).String(), Status: ev.ToStatus, Actor: personOf(ev.Actor), Source: describeSource(rules.WordsOf(op.Platform), ev, pl)})
	}
	v.DeployURL = deployURL(op, deployPipeline)
	// The commands that apply now, from the flow's own vocabulary (issue
	// 20 point 2: no callback into the command layer).
	for _, c := range rules.CommandsNow(st, rules.AwaitsPlatformApproval(op.TicketID, op.Status), store.PlatformOr(op.Platform)) {
		v.Commands = append(v.Commands, templates.CommandHelp{Usage: c.Usage, Description: c.Description, Who: c.WhoText})
	}
	return v
}

// payloadOf decodes ev's payload; nil when it is empty or not an object.
func payloadOf(ev store.Event) map[string]any {
	var m map[string]any
	if len(ev.Payload) > 0 {
		_ = json.Unmarshal(ev.Payload, &m)
	}
	return m
}

// personOf is the person in an event's actor: "approval:carol" is carol,
// "api:operator" is "operator (API)".
func personOf(actor string) string {
	if p, ok := strings.CutPrefix(actor, "approval:"); ok {
		return p
	}
	if role, ok := strings.CutPrefix(actor, "api:"); ok {
		return role + " (API)"
	}
	return actor
}

// jobWords names in w's words the work of each job kind, for event sources
// "job:<kind>".
func jobWords(w rules.Words) map[string]string {
	return map[string]string{
		rules.KindRequestApproval: "approval request",
		rules.KindCreateMR:        w.MR + " creation",
		rules.KindAwaitPipeline:   w.PipelineCheck,
		rules.KindHandle:          w.MR + " handling",
		rules.KindAwaitDeploy:     "deploy check",
		rules.KindCloseMR:         w.MR + " cleanup",
	}
}

// describeSource says in words where event ev (payload pl) came from, for
// the status comment's timeline: "pipeline webhook", "comment by @dev-a",
// "approval system callback", "sweeper", never the stored "webhook:9" or
// "job:handle_merge_request" (store.EventParams documents the stored forms).
func describeSource(w rules.Words, ev store.Event, pl map[string]any) string {
	kind, _, _ := strings.Cut(ev.Source, ":")
	switch kind {
	case "api":
		if ev.Type == store.EventSubmitted {
			return "API request"
		}
		return "API call"
	case SourceWebhook:
		if pl["pipeline_id"] != nil || pl["pipeline_status"] != nil {
			return w.PipelineHook
		}
		return w.MR + " webhook"
	case SourceCallback:
		if strings.HasPrefix(ev.Actor, "approval:") || pl["decision"] != nil {
			return "approval system callback"
		}
		return "deploy callback"
	case "command":
		return "comment by @" + ev.Actor
	case "job":
		if w, ok := jobWords(w)[strings.TrimPrefix(ev.Source, "job:")]; ok {
			return w
		}
		return "changebot job"
	case SourcePoll:
		return "deploy check"
	case SourceReconciler:
		return "reconciler"
	case ActorSweeper:
		return "sweeper"
	}
	return ev.Source
}

// deployURL links the deploy pipeline of a merged op: on GitLab the
// pipeline id (the one that confirmed it) when known, else the merge
// commit's pipelines page; on GitHub the merge commit's page, which shows its
// checks (GitHub's pipeline ids are changebot's own, not addresses). "" before
// the merge or when the project's web URL cannot be told from the request's
// (GitLab's "<project>/-/merge_requests/<iid>", GitHub's
// "<repository>/pull/<number>").
func deployURL(op store.Operation, pipelineID int64) string {
	if op.MergeCommitSHA == "" && pipelineID == 0 {
		return ""
	}
	if op.Platform == store.PlatformGitHub {
		repo, _, ok := strings.Cut(op.MRWebURL, "/pull/")
		if !ok || repo == "" || op.MergeCommitSHA == "" {
			return ""
		}
		return repo + "/commit/" + op.MergeCommitSHA
	}
	project, _, ok := strings.Cut(op.MRWebURL, "/-/merge_requests/")
	if !ok || project == "" {
		return ""
	}
	if pipelineID > 0 {
		return fmt.Sprintf("%s/-/pipelines/%d", project, pipelineID)
	}
	return project + "/-/commit/" + op.MergeCommitSHA + "/pipelines"
}

// changeURL is the change's API URL under the configured external URL
// ({external_url}/api/v1/changes/{id}), where its full history is read;
// "" without an external URL.
func (e *Engine) changeURL(opID string) string {
	if e.cfg.ExternalURL == "" {
		return ""
	}
	return strings.TrimRight(e.cfg.ExternalURL, "/") + "/api/v1/changes/" + opID
}

// pageURL is the change's web page under the configured external URL
// ({external_url}/ui/changes/{id}, issue 13 point 2); "" without an
// external URL.
func (e *Engine) pageURL(opID string) string {
	if e.cfg.ExternalURL == "" {
		return ""
	}
	return strings.TrimRight(e.cfg.ExternalURL, "/") + "/ui/changes/" + opID
}

// DescribeSource says in the words of platform (store.PlatformGitLab, also
// "", or store.PlatformGitHub) where event ev came from ("pipeline
// webhook", "checks webhook", "comment by @dev-a", "sweeper"), as the
// status comment's timeline does; the web pages show it beside the stored
// source.
func DescribeSource(ev store.Event, platform string) string {
	return describeSource(rules.WordsOf(platform), ev, payloadOf(ev))
}

type noteWorker struct {
	river.WorkerDefaults[RefreshNoteArgs]
	e *Engine
}

// Work implements river.Worker; its panic is the job guard's
// (internal/guard.Jobs).
func (w *noteWorker) Work(ctx context.Context, job *river.Job[RefreshNoteArgs]) error {
	err := w.e.RefreshNote(ctx, job.Args.OperationID)
	if errors.Is(err, ErrNoteBusy) {
		// The refresh in flight may have read the history before our
		// events: check again after it has recorded.
		return river.JobSnooze(max(w.e.pollFor(store.Operation{}).NoteDelay, time.Second))
	}
	if d, ok := platform.RateLimitWait(err); ok {
		return river.JobSnooze(d) // the robot waits out GitLab's rate limit (issue 10 point 4)
	}
	return err
}

// RefreshNote renders op's status comment and writes it to its MR: edits
// the note it recorded, finds it by the hidden marker if the record is
// missing, recreates it if someone deleted it, never creates a second one.
// It claims the MR's note (store.ClaimStatusNote), calls GitLab holding no
// transaction or lock, then records what it rendered and releases the
// claim; a render never replaces a newer one (rendered_seq). While another
// refresh holds the claim it returns ErrNoteBusy (the job snoozes and
// checks again once that one has recorded). It renders once; events that
// arrive while it renders are shown by the refresh their transition asked
// for, so coalescing never leaves an older state visible.
func (e *Engine) RefreshNote(ctx context.Context, opID string) error {
	return e.refreshNote(ctx, opID, false)
}

// ErrNoteBusy is returned by RefreshNote while another refresh is writing
// the MR's status note (its job snoozes and tries again).
var ErrNoteBusy = errors.New("status note is being refreshed")

// noteClaimLease bounds how long a refresh holds an MR's note without
// renewing it. The refresh renews it every noteClaimRenew while it writes
// to GitLab, so only a replica that died (or lost the database) leaves a
// claim to expire; short, so that the next refresh shows the change's state
// within 10 s of a transition even then (issue 10 point 6): a transition's
// refresh is due after note.delay and, while the dead claim lasts, snoozes
// for note.delay at a time.
const noteClaimLease = 5 * time.Second

// noteClaimRenew is how often a refresh in flight renews its claim: a third
// of the lease, so one slow or failed renewal does not lose it.
const noteClaimRenew = noteClaimLease / 3

// refreshNote renders; force re-renders even when the recorded note already
// shows the newest event (/status), which also recreates a deleted note. It
// renders once: the events recorded while it renders belong to transitions
// that asked for refreshes of their own (refreshNoteJobs), due after this
// one's window, so reading the history again after recording (two more
// transactions per edit, issue 12 point 2) would only make their edit
// earlier.
func (e *Engine) refreshNote(ctx context.Context, opID string, force bool) error {
	_, err := e.refreshNoteOnce(ctx, opID, force)
	return err
}

// refreshNoteOnce renders once unless the note is up to date (done). Unless
// forced it first checks, in one read-only statement
// (store.StatusNotes.StatusNoteState), whether the MR's note already shows
// the operation's newest event: most refreshes find it so (a backstop, a
// refresh of a window whose events an earlier one rendered) and then write
// nothing and open no transaction (issue 12 point 2). Otherwise it reads
// the operation and its events in one snapshot, claims the note, writes it
// to GitLab and records it.
func (e *Engine) refreshNoteOnce(ctx context.Context, opID string, force bool) (done bool, err error) {
	if !force {
		ns, err := e.st.StatusNoteState(ctx, e.st.DB(), opID)
		if errors.Is(err, store.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if ns.MRIID == 0 || e.ownPlatform(store.Operation{ID: opID, Platform: ns.Platform}) != nil || ns.Current(opID) {
			return true, nil
		}
	}
	h, err := e.st.ReadHistory(ctx, opID)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	op := h.Operation
	if op.MRIID == 0 || e.ownPlatform(op) != nil {
		return true, nil
	}
	view := e.StatusView(op, h.Events())
	upToDate := func() (store.StatusNote, bool, error) {
		rec, err := e.st.GetStatusNote(ctx, e.st.DB(), op.Platform, op.ProjectID, op.MRIID)
		if errors.Is(err, store.ErrNotFound) {
			return store.StatusNote{}, false, nil
		}
		return rec, err == nil && rec.OperationID == op.ID && rec.RenderedSeq >= view.Seq, err
	}
	if _, ok, err := upToDate(); err != nil || (ok && !force) {
		return true, err
	}
	claim, ok, err := e.st.ClaimStatusNote(ctx, op.Platform, op.ProjectID, op.MRIID, noteClaimLease)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, ErrNoteBusy
	}
	wctx, stop := e.keepNoteClaim(ctx, op, claim)
	noteID, err := e.renderNote(wctx, op, view, force, upToDate)
	stop()
	if err != nil || noteID == 0 {
		// Nothing to record: release on a fresh context, the claim must
		// not outlive a cancelled job.
		rctx, cancel := recordContext(ctx)
		defer cancel()
		if rerr := e.st.ReleaseStatusNote(rctx, e.st.DB(), claim); rerr != nil {
			e.opLog(op).Warn("releasing status note claim", "err", rerr)
		}
		if err != nil {
			return false, fmt.Errorf("refreshing status note of %s: %w", opID, err)
		}
		return true, nil
	}
	if _, err := e.st.RecordStatusNote(ctx, claim, store.StatusNote{Platform: op.Platform, ProjectID: op.ProjectID, MRIID: op.MRIID,
		NoteID: noteID, OperationID: op.ID, RenderedSeq: view.Seq}); err != nil {
		return false, fmt.Errorf("recording status note of %s: %w", opID, err)
	}
	return false, nil
}

// keepNoteClaim renews claim every noteClaimRenew until stop is called.
// When the claim is lost (another refresh took it over after a renewal
// failed for a whole lease) it cancels the returned context, so that this
// refresh stops writing to GitLab. stop waits for the renewal loop to end.
func (e *Engine) keepNoteClaim(ctx context.Context, op store.Operation, claim store.NoteClaim) (context.Context, func()) {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(noteClaimRenew)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			ok, err := e.st.RenewStatusNote(wctx, claim, noteClaimLease)
			if wctx.Err() != nil {
				return // stopped: the refresh is done
			}
			if err != nil {
				e.opLog(op).Warn("renewing status note claim", "err", err)
				continue
			}
			if !ok {
				e.opLog(op).Warn("status note claim lost to another refresh; stopping this one")
				cancel()
				return
			}
		}
	}()
	return wctx, func() { cancel(); <-done }
}

// renderNote re-reads the note's record under the claim (another refresh
// may have written it meanwhile), renders view and writes it to GitLab. It
// returns the note id, or 0 when the note already shows view (and not
// force).
func (e *Engine) renderNote(ctx context.Context, op store.Operation, view templates.StatusView, force bool,
	upToDate func() (store.StatusNote, bool, error)) (int64, error) {
	rec, ok, err := upToDate()
	if err != nil || (ok && !force) {
		return 0, err
	}
	body, err := e.cfg.Renderer.Status(view)
	if err != nil {
		return 0, fmt.Errorf("rendering status comment: %w", err)
	}
	return e.writeNote(ctx, op, rec, body)
}

// writeNote edits the recorded note, or finds ours by marker, or creates one.
func (e *Engine) writeNote(ctx context.Context, op store.Operation, rec store.StatusNote, body string) (int64, error) {
	if rec.NoteID != 0 {
		n, err := e.gl.UpdateNote(ctx, op.ProjectID, op.MRIID, rec.NoteID, body)
		if err == nil {
			return n.ID, nil
		}
		if !errors.Is(err, platform.ErrNotFound) {
			return 0, err
		}
		// Deleted by someone: recreate below.
	} else {
		n, err := e.gl.FindNote(ctx, op.ProjectID, op.MRIID, templates.Marker(op.ID))
		if err == nil {
			if _, err := e.gl.UpdateNote(ctx, op.ProjectID, op.MRIID, n.ID, body); err != nil {
				return 0, err
			}
			return n.ID, nil
		}
		if !errors.Is(err, platform.ErrNotFound) {
			return 0, err
		}
	}
	n, err := e.gl.CreateNote(ctx, op.ProjectID, op.MRIID, body)
	if err != nil {
		return 0, err
	}
	return n.ID, nil
}

// ApprovalProvider says who approves changes of project (approval.provider):
// ProviderExternal, the approval system, or ProviderGitLab, approvers on the
// merge request.
func (e *Engine) ApprovalProvider(project string) string { return e.policy(project).Provider }

// TicketURL returns the page of op's approval ticket as the approval system
// gave it (its answer's optional ticket_url, recorded on APPROVAL_SENT), or
// "" when it gave none or op has no ticket.
func (e *Engine) TicketURL(ctx context.Context, op store.Operation) (string, error) {
	if op.TicketID == "" || op.TicketID == rules.GitLabTicket {
		return "", nil
	}
	events, err := e.st.ListEvents(ctx, e.st.DB(), op.ID)
	if err != nil {
		return "", fmt.Errorf("reading the events of %s: %w", op.ID, err)
	}
	url := ""
	for _, ev := range events {
		pl := payloadOf(ev)
		if u, _ := pl["ticket_url"].(string); u != "" && pl["ticket_id"] == op.TicketID {
			url = u
		}
	}
	return url, nil
}
