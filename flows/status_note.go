package flows

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/riverqueue/river"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
	"changebot/templates"
)

// StatusView builds the status comment's view of op from its events and the
// step catalogue; commands lists what may be run now (from the command
// registry, wired by bot). The ticket's page, the decision and who made it
// and the deploy pipeline are read from the events' payloads; each
// timeline row says what its event did (describeEvent) and where it came
// from (describeSource), in the words of op's platform. In the in-platform
// approval mode the approvers and the count needed come from the
// project's approval policy.
func (e *Engine) StatusView(op store.Operation, events []store.Event) templates.StatusView {
	st := rules.MustStep(rules.StepCode(op.Step))
	w := rules.WordsOf(op.Platform)
	v := templates.StatusView{
		OperationID: op.ID, Title: op.Title, SubjectID: op.SubjectID, TargetKey: op.TargetKey,
		RequestedBy: op.RequestedBy, Status: op.Status, StepCode: op.Step, StepName: st.Name,
		Hint: st.HintOn(op.Platform), Terminal: st.Terminal, Detail: op.Detail,
		Failed:      op.Status == store.StatusCreateFailed || op.Status == store.StatusHandleFailed || op.Status == store.StatusRejected,
		MR:          templates.MRView{IID: op.MRIID, WebURL: op.MRWebURL},
		PipelineURL: op.PipelineURL, TicketID: op.TicketID, HistoryURL: e.changeURL(op.ID), PageURL: e.pageURL(op.ID),
		ApprovalInGitLab: op.TicketID == rules.GitLabTicket,
		Platform:         store.PlatformOr(op.Platform),
		Policy:           policyView(events),
	}
	var gitlabApprovers []string
	var deployPipeline int64
	opened := false // a move to CREATE_MR_OPENED was seen
	for _, ev := range events {
		v.Seq = ev.Seq
		pl := payloadOf(ev)
		if u, _ := pl["ticket_url"].(string); u != "" && pl["ticket_id"] == op.TicketID {
			v.ApprovalURL = u
		}
		switch {
		case ev.Type == EventApproval && !slices.Contains(gitlabApprovers, ev.Actor):
			gitlabApprovers = append(gitlabApprovers, ev.Actor)
		case pl["resumed_step"] == rules.ClosedByPerson.String():
			gitlabApprovers = nil // a resume after a close asks for every approval again
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
		what, kind := describeEvent(w, ev, pl)
		if ev.ToStep == int(rules.CreateMROpened) && ev.Type == store.EventTransition {
			if opened && op.MRIID > 0 {
				// A retry finds its merge request open and runs its CI again.
				what = fmt.Sprintf("%s still open: waiting for %s", w.MRRef(op.MRIID), w.NewRun)
			}
			opened = true
		}
		switch kind {
		case rowRetriedCall:
			v.RetriedCalls++
			continue
		case rowBookkeeping:
			continue
		}
		v.Timeline = append(v.Timeline, templates.TimelineEntry{At: ev.OccurredAt, What: what,
			StepName: rules.StepCode(ev.ToStep).String(), Status: ev.ToStatus, Actor: personOf(ev.Actor), Source: describeSource(w, ev, pl)})
	}
	v.DeployURL = deployURL(op, deployPipeline)
	if v.ApprovalInGitLab && rules.AwaitingApproval(rules.StepCode(op.Step)) {
		v.Approvals = e.approvalNeed(op, gitlabApprovers)
	}
	// The commands that apply now, from the flow's own vocabulary (issue
	// 20 point 2: no callback into the command layer).
	for _, c := range rules.CommandsNow(st, rules.AwaitsPlatformApproval(op.TicketID, op.Status), store.PlatformOr(op.Platform)) {
		v.Commands = append(v.Commands, templates.CommandHelp{Usage: c.Usage, Description: c.Description, Who: c.WhoText})
	}
	return v
}

// approvalNeed is who may approve op in the in-platform approval mode and
// how many must (its project's policy, as advanceIfApproved counts), with
// the approvals given so far; the requester, who never approves their own
// change, is not named.
func (e *Engine) approvalNeed(op store.Operation, given []string) *templates.ApprovalNeed {
	p := e.policyFor(op)
	need := &templates.ApprovalNeed{Required: p.Required, Groups: p.ApproverGroups, Given: given}
	for _, u := range p.Approvers {
		if u != op.RequestedBy {
			need.Approvers = append(need.Approvers, u)
		}
	}
	if p.MinAccess > 0 {
		need.MinAccess = accessWords(op.Platform, p.MinAccess)
	}
	return need
}

// accessWords names access level on platform: GitLab's role ("Developer",
// "Maintainer"), or GitHub's repository permission ("write", "maintain";
// platform/github.AccessLevelOf maps them onto the same levels).
func accessWords(platform string, level int) string {
	names := []struct {
		level          int
		gitlab, github string
	}{{50, "Owner", "admin"}, {40, "Maintainer", "maintain"}, {30, "Developer", "write"}, {20, "Reporter", "triage"}, {0, "Guest", "read"}}
	for _, n := range names {
		if level >= n.level {
			if platform == store.PlatformGitHub {
				return n.github
			}
			return n.gitlab
		}
	}
	return fmt.Sprint(level)
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
	if id, ok := strings.CutPrefix(actor, "api:"); ok {
		// An API token's id (api.TokenID): it acted through the REST API
		// or the web pages, which the source says.
		return "token " + id
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
	case "web":
		return "web page"
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

// rowKind is how the status comment's timeline treats an event
// (describeEvent); not persisted.
type rowKind int

const (
	// rowShown: a row saying what happened.
	rowShown rowKind = iota
	// rowRetriedCall: a call made again after a transient failure,
	// counted in the timeline's summary, not shown.
	rowRetriedCall
	// rowBookkeeping: neither shown nor counted (a merge-gate claim, the
	// follow-up read of a refused merge): routine, no step of the change.
	rowBookkeeping
)

// maxRowDetail bounds, in characters, the failure detail or reason a
// timeline row quotes; the comment's warning shows the current detail in
// full, the change's page every event's.
const maxRowDetail = 160

// describeEvent says in w's words what event ev (payload pl) did, for a
// row of the status comment's timeline: "submitted by alice (1 file)",
// "/cancel refused: role — operators only", "approved by carol",
// "cancelled by olivia: wrong file", "pipeline 5003 passed", "merged". It
// also tells whether the event is a row at all (rowKind): merge-gate
// claims are routine and not even counted, retried calls are counted.
func describeEvent(w rules.Words, ev store.Event, pl map[string]any) (string, rowKind) {
	by := byWords(ev.Actor)
	switch ev.Type {
	case store.EventSubmitted:
		count, ok := pl["file_count"].(float64)
		if !ok {
			count, ok = pl["files"].(float64) // schema version 1
		}
		if !ok {
			return "submitted" + by, rowShown
		}
		n := int(count)
		return fmt.Sprintf("submitted%s (%d %s)", by, n, templates.Plural(n, "file", "files")), rowShown
	case store.EventRefused:
		return refusedWords(pl), rowShown
	case store.EventCommand:
		if what := commandWords(pl, ev.Actor); what != "" {
			return what, rowShown
		}
		return "command" + by, rowShown
	case EventApproval:
		what := "approved" + by
		if req := intOf(pl["required"]); req > 1 {
			what += fmt.Sprintf(" (%d of %d)", intOf(pl["approvals"]), req)
		}
		return what, rowShown
	case store.EventCleanup:
		return cleanupWords(w, pl), rowShown
	case store.EventDeployFailed:
		return withDetail("the deploy reported failure; a later successful deploy still applies the change", pl["detail"]), rowShown
	case store.EventClaim:
		return "", rowBookkeeping
	case store.EventAttempt:
		return attemptWords(w, ev, pl)
	}
	if ev.FromStep == ev.ToStep && ev.Actor == ActorSweeper {
		return withDetail("restarted by the sweeper", pl["reason"]), rowShown
	}
	if what := commandWords(pl, ev.Actor); what != "" {
		return what, rowShown
	}
	return transitionWords(w, ev, pl, by), rowShown
}

// transitionWords says what a move to ev's step did, from its payload
// (by is " by <person>" when a person caused it, else "").
func transitionWords(w rules.Words, ev store.Event, pl map[string]any, by string) string {
	to := rules.StepCode(ev.ToStep)
	switch to {
	case rules.ApprovalSending:
		return "asking for approval"
	case rules.ApprovalSent:
		if pl["provider"] == rules.ProviderGitLab {
			n := max(intOf(pl["required"]), 1)
			return fmt.Sprintf("waiting for %d %s in %s", n, templates.Plural(n, "approval", "approvals"), w.Platform)
		}
		if t, _ := pl["ticket_id"].(string); t != "" {
			return "approval requested: ticket " + t
		}
		return "approval requested"
	case rules.CreateStarted:
		if pl["decision"] == rules.DecisionApproved {
			return "approved" + by
		}
		return "opening the " + w.MR
	case rules.CreateMROpened:
		if iid := intOf(pl["mr_iid"]); iid > 0 {
			return w.MRRef(int64(iid)) + " opened"
		}
		return w.MR + " opened"
	case rules.CreateSucceeded:
		return pipelineWords(w, pl, "passed")
	case rules.CreatePipelineFailed:
		return pipelineWords(w, pl, "failed")
	case rules.CreateFailed:
		return detailOr("failed: ", pl["detail"], "opening the "+w.MR+" failed")
	case rules.CreateRefused:
		return "refused: the change does not fit the project in " + w.Platform
	case rules.HandleStarted:
		switch {
		case pl["decision"] == rules.DecisionApproved && pl["provider"] == rules.ProviderGitLab:
			n := intOf(pl["approvals"])
			return fmt.Sprintf("approved%s: %d %s, enough to merge", by, n, templates.Plural(n, "approval", "approvals"))
		case pl["decision"] == rules.DecisionApproved:
			return "approved" + by
		case pl["pipeline_status"] != nil:
			return pipelineWords(w, pl, "passed")
		}
		return "merging started"
	case rules.HandleApproved:
		switch {
		case pl["action"] == "queue_head":
			return "at the head of the merge queue" + suffix(" of ", pl["queue"]) + ": merging"
		case pl["reason"] == "marked ready":
			return "marked ready: merging"
		case intOf(pl["reviewers"]) > 0:
			n := intOf(pl["reviewers"])
			return fmt.Sprintf("approved by the %d reviewer %s", n, templates.Plural(n, "robot", "robots"))
		}
		return "approved: merging"
	case rules.HandleMerged:
		return "merged" + by
	case rules.HandleFailed:
		if pl["pipeline_status"] != nil {
			return pipelineWords(w, pl, "failed")
		}
		return detailOr("failed: ", pl["detail"], "merging failed")
	case rules.HandleRebaseConflict:
		return "rebase failed: conflicts"
	case rules.HandleRebasing:
		if pl["rebase_requested"] == false {
			return "waiting for a rebase already running"
		}
		return "rebase started: the target branch moved"
	case rules.HandleReviewerDenied:
		return detailOr("", pl["detail"], "a reviewer robot may not approve")
	case rules.HandleNotMergeable:
		return detailOr("", pl["detail"], w.Platform+" refuses to merge")
	case rules.HandleAwaitPipeline:
		switch {
		case pl["rebased"] == true:
			return "rebased: waiting for the " + w.Pipeline + " of the new head"
		case pl["previous_head_sha"] != nil:
			return fmt.Sprintf("new head %s: waiting for its %s", short(strOf(pl["head_sha"])), w.Pipeline)
		case pl["reason"] != nil:
			return fmt.Sprintf("%s answered %s: waiting for the %s again (round %d)", w.Platform, strOf(pl["reason"]), w.Pipeline, intOf(pl["round"]))
		}
		return "waiting for the " + w.Pipeline + " of the head"
	case rules.HandleDraft:
		return "draft: waiting for a person to mark it ready"
	case rules.HandleRetargeted:
		return "retargeted" + by + suffix(" to ", pl["target_branch"]) + ": stopped"
	case rules.HandleQueued:
		return fmt.Sprintf("queued%s: position %d", suffix(" for ", pl["queue"]), intOf(pl["position"]))
	case rules.HandleInTrain:
		return "added to the " + w.Train + suffix(" of ", pl["merge_train"])
	case rules.Closed:
		return "closed" + by
	case rules.ClosedByPerson:
		if who, _ := pl["closed_by"].(string); who != "" {
			return fmt.Sprintf("%s closed by %s in %s", w.MR, who, w.Platform)
		}
		return w.MR + " closed in " + w.Platform
	case rules.CalledBack:
		switch {
		case intOf(pl["pipeline_id"]) > 0 && w.OnGitHub():
			return "applied: the " + w.Deploy + " passed"
		case intOf(pl["pipeline_id"]) > 0:
			return fmt.Sprintf("applied: %s %d passed", w.Deploy, intOf(pl["pipeline_id"]))
		case ev.Actor == ActorReconciler:
			return "applied: found deployed by the reconciler"
		}
		return "applied: the deploy reported success"
	case rules.ApprovalRejected:
		return "rejected" + by
	case rules.ApprovalWithdrawn:
		return "withdrawn" + by
	case rules.HandlePipelinePending, rules.CreatePipelinePending:
		return detailOr("parked: ", pl["detail"], "no "+w.Pipeline+" result in time")
	case rules.ApprovalSendPending:
		return detailOr("parked: ", pl["detail"], "the approval system did not answer")
	case rules.HandleRebasePending:
		return "parked: the rebase is still running"
	case rules.HandleMergePending:
		return detailOr("parked: ", pl["detail"], w.Platform+" is still checking whether it can merge")
	case rules.DeployPending:
		return detailOr("parked: ", pl["detail"], "no "+w.Deploy+" confirmed the merge in time")
	}
	return strings.ToLower(strings.ReplaceAll(to.String(), "_", " ")) + by
}

// commandWords says what a person's action did ("retried by dave",
// "resumed by olivia", "cancelled by olivia: wrong file") when payload pl
// names the command; "" otherwise. The reason is the person's own.
func commandWords(pl map[string]any, actor string) string {
	cmd, _ := pl["command"].(string)
	what := map[string]string{string(rules.ActionRetry): "retried", string(rules.ActionResume): "resumed", string(rules.ActionCancel): "cancelled"}[cmd]
	if cmd == "" {
		return ""
	}
	if what == "" {
		what = "/" + cmd
	}
	return withReason(what+byWords(actor), pl["reason"])
}

// refusedWords says why a command was refused (a refused event's
// payload): "/cancel refused: role — the change's requester and
// operators", "/retry refused: state — it applies to a failed change; …".
// The reason is the one the command layer recorded; its kind is its
// "because" when recorded, else read from the reason's own form.
func refusedWords(pl map[string]any) string {
	cmd, _ := pl["command"].(string)
	reason, _ := pl["reason"].(string)
	because, _ := pl["because"].(string)
	head := "/" + cmd + " refused"
	if cmd == "" {
		head = "a command was refused"
	}
	kind, rest := "", reason
	if r, ok := strings.CutPrefix(reason, "/"+cmd+" "); ok {
		switch {
		case strings.HasPrefix(r, "needs: "):
			kind, rest = templates.BecauseRole, strings.TrimPrefix(r, "needs: ")
		case strings.HasPrefix(r, "leads to a merge"):
			kind, rest = templates.BecauseAccess, "it "+r
		case strings.HasPrefix(r, "applies to"):
			kind, rest = templates.BecauseState, "it "+r
		}
	} else if strings.Contains(reason, "come from the approval system") {
		kind = templates.BecauseApprovalSystem
	}
	because = strings.ReplaceAll(cmp.Or(because, kind), "_", " ")
	switch {
	case because != "" && rest != "":
		return cut(head+": "+because+" — "+rest, maxRowDetail)
	case because != "":
		return head + ": " + because
	case rest != "":
		return cut(head+": "+rest, maxRowDetail)
	}
	return head
}

// attemptWords says what an attempt event was: a retried call (counted,
// not shown), bookkeeping, or a row of its own (a pipeline that waits for
// a person or was run again, a queue frozen or a change moved to its
// front).
func attemptWords(w rules.Words, ev store.Event, pl map[string]any) (string, rowKind) {
	switch pl["action"] {
	case "approve", "approve_refused", "merge_refused":
		return "", rowRetriedCall
	case "merge_refusal_followed", "queue_place":
		return "", rowBookkeeping
	case "pipeline_waits_for_person":
		return withDetail(w.PipelineRef(int64(intOf(pl["pipeline_id"])))+" waits for a person", pl["detail"]), rowShown
	case actionPipelineRetried:
		return fmt.Sprintf("%s failed: ran it again as %s (retry %d)", w.PipelineRef(int64(intOf(pl["failed_pipeline_id"]))),
			w.PipelineRef(int64(intOf(pl["pipeline_id"]))), intOf(pl["retry"])), rowShown
	case "queue_frozen":
		return withReason("merge queue"+suffix(" of ", pl["queue"])+" frozen"+byWords(strOf(pl["frozen_by"])), pl["frozen_reason"]), rowShown
	case "queue_unfrozen":
		return "merge queue" + suffix(" of ", pl["queue"]) + " unfrozen", rowShown
	case "queue_front":
		return withReason("moved to the front of the merge queue"+suffix(" of ", pl["queue"])+byWords(ev.Actor), pl["reason"]), rowShown
	}
	if pl["attempt"] != nil || pl["rate_limited"] != nil {
		return "", rowRetriedCall // a job retried after an error, or waiting out a rate limit
	}
	if d, _ := pl["detail"].(string); d != "" {
		return cut(d, maxRowDetail), rowShown
	}
	return "", rowBookkeeping
}

// cleanupWords says what was closed after a cancel raced the change's
// create job (a cleanup event).
func cleanupWords(w rules.Words, pl map[string]any) string {
	var done []string
	if iid := intOf(pl["closed_mr_iid"]); iid > 0 {
		done = append(done, "closed "+w.MRRef(int64(iid)))
	}
	if pl["deleted_branch"] == true {
		done = append(done, "deleted its branch")
	}
	if len(done) == 0 {
		return "cleaned up after the cancel: nothing was left open"
	}
	return "cleaned up after the cancel: " + strings.Join(done, " and ")
}

// pipelineWords is "pipeline 5003 passed" (GitHub: "checks (run 5003)
// passed"), the run's own status when it is not a plain success or
// failure ("canceled"), or without an id "pipeline passed".
func pipelineWords(w rules.Words, pl map[string]any, outcome string) string {
	if s, _ := pl["pipeline_status"].(string); s != "" && s != platform.PipelineSuccess && s != "failed" {
		outcome = s
	}
	if id := intOf(pl["pipeline_id"]); id > 0 {
		return w.PipelineRef(int64(id)) + " " + outcome
	}
	return w.Pipeline + " " + outcome
}

// isPerson reports whether actor is a person (or an API token), not the
// bot, its sweeper or reconciler, the platform or the deploy.
func isPerson(actor string) bool {
	switch actor {
	case "", ActorBot, ActorSweeper, ActorReconciler, store.PlatformGitLab, store.PlatformGitHub, "deploy":
		return false
	}
	return true
}

// byWords is " by <person>" for a person's actor, else "".
func byWords(actor string) string {
	if !isPerson(actor) {
		return ""
	}
	return " by " + personOf(actor)
}

// withReason is what, then ": " and the person's reason when pl gave one
// (cut to maxRowDetail).
func withReason(what string, reason any) string {
	if r, _ := reason.(string); strings.TrimSpace(r) != "" {
		return what + ": " + cut(strings.TrimSpace(r), maxRowDetail)
	}
	return what
}

// withDetail is what, then ": " and a failure detail when there is one,
// on one line and cut to maxRowDetail.
func withDetail(what string, detail any) string {
	d, _ := detail.(string)
	d = strings.Join(strings.Fields(d), " ")
	if d == "" {
		return what
	}
	return what + ": " + cut(d, maxRowDetail)
}

// detailOr is prefix and the failure detail, on one line and cut to
// maxRowDetail, or prefix and fallback when there is none.
func detailOr(prefix string, detail any, fallback string) string {
	d, _ := detail.(string)
	if d = strings.Join(strings.Fields(d), " "); d == "" {
		return prefix + fallback
	}
	return prefix + cut(d, maxRowDetail)
}

// cut shortens s to n characters, ending it with "…" when it was longer.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// strOf is a payload's string value; "" for anything else.
func strOf(v any) string {
	s, _ := v.(string)
	return s
}

// suffix is sep and the payload's string value v, or "" when v is none.
func suffix(sep string, v any) string {
	if s := strOf(v); s != "" {
		return sep + s
	}
	return ""
}

// intOf is a JSON number's value (payloads decode numbers as float64); 0
// for anything else.
func intOf(v any) int {
	f, _ := v.(float64)
	return int(f)
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

// DescribeEvent says in the words of platform (store.PlatformGitLab, also
// "", or store.PlatformGitHub) what event ev did, as the status comment's
// timeline rows do: "approved by carol", "/cancel refused: role —
// operators only", "cancelled by olivia: wrong file", "pipeline 5003
// passed", "merged". Events the comment leaves out (merge-gate claims,
// retried calls) are described too, for pages that list every event.
func DescribeEvent(ev store.Event, platform string) string {
	pl := payloadOf(ev)
	what, kind := describeEvent(rules.WordsOf(platform), ev, pl)
	switch {
	case kind == rowShown:
		return what
	case ev.Type == store.EventClaim && pl["action"] == "merge_claim_released":
		return withDetail("merge claim released", pl["reason"])
	case ev.Type == store.EventClaim:
		return "merge claimed"
	case kind == rowRetriedCall:
		return withDetail("call retried", pl["detail"])
	}
	return "bookkeeping"
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
	noteID, err := e.renderNote(wctx, op, view, force, claim.TakenOver, upToDate)
	stop()
	if errors.Is(err, errNoteCreateUnknown) {
		// The create may have posted the note: the claim is kept, so
		// that the refresh that takes it over once it expired (the
		// backstop, noteBackstopAfter) looks for the note by its marker
		// before creating one.
		return false, fmt.Errorf("refreshing status note of %s: %w", opID, err)
	}
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
func (e *Engine) renderNote(ctx context.Context, op store.Operation, view templates.StatusView, force, takenOver bool,
	upToDate func() (store.StatusNote, bool, error)) (int64, error) {
	rec, ok, err := upToDate()
	if err != nil || (ok && !force) {
		return 0, err
	}
	body, err := e.cfg.Renderer.Status(view)
	if err != nil {
		return 0, fmt.Errorf("rendering status comment: %w", err)
	}
	return e.writeNote(ctx, op, rec, body, takenOver)
}

// errNoteCreateUnknown wraps a note create that failed in a way that may
// have posted the note (not platform.NotApplied): see writeNote.
var errNoteCreateUnknown = errors.New("the status comment may have been created")

// writeNote edits the recorded note, or creates one. Without a recorded
// note it looks for ours by its marker first only when the note's claim
// was taken over (store.NoteClaim.TakenOver): every refresh that got as far
// as creating a note either recorded it or, when the create's outcome is
// unknown (errNoteCreateUnknown), kept its claim until it expired, so on a
// claim of a free MR no note of ours can be there (issue 24 point 3: the
// first note costs one call, not a list and a create).
func (e *Engine) writeNote(ctx context.Context, op store.Operation, rec store.StatusNote, body string, takenOver bool) (int64, error) {
	if rec.NoteID != 0 {
		n, err := e.gl.UpdateNote(ctx, op.ProjectID, op.MRIID, rec.NoteID, body)
		if err == nil {
			return n.ID, nil
		}
		if !errors.Is(err, platform.ErrNotFound) {
			return 0, err
		}
		// Deleted by someone: recreate below.
	} else if takenOver {
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
	if err != nil && !platform.NotApplied(err) {
		return 0, fmt.Errorf("%w: %w", errNoteCreateUnknown, err)
	}
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
