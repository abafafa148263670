package api

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"changebot/flows/rules"
	"changebot/internal/textcheck"
	"changebot/templates"
)

// The operators' pages (issue 23): an overview, what needs a person, the
// merge queues, and the actions retry, resume and cancel (one change or a
// filtered set) and freeze. An action is a POST form behind a confirmation
// and a reason; it takes the same path as the MR commands and the API
// (Engine.Act, Queues.FreezeQueue), recorded with the token's id and the
// reason. Only an operator's session may act (403 otherwise), and every
// POST under /ui passes Go's http.CrossOriginProtection (Sec-Fetch-Site
// or Origin must name this server) besides the SameSite=Strict cookie.

// webRefreshSeconds is how often the change and attention pages reload
// themselves (a meta refresh: no script, works with JavaScript off).
const webRefreshSeconds = 15

// attentionTTL is how long the needs-attention groups are kept and shown
// to every viewer before they are read again: a page reloading every
// webRefreshSeconds costs the database at most one read of each group per
// attentionTTL, however many people watch it.
const attentionTTL = 5 * time.Second

// attentionLimit is how many changes each needs-attention group lists; the
// group links the full list.
const attentionLimit = 50

// maxBulk is how many changes one bulk action acts on at most.
const maxBulk = MaxListLimit

// attentionGroup is one group of /ui/attention: its criteria in words,
// what to do, the list filter that selects it, and the changes in it.
type attentionGroup struct {
	ID, Title, Criteria, WhatToDo string
	// All is the list of the group's changes (GET /ui/changes with its
	// filter).
	All  template.URL
	Rows []webListRow
	// More is set when the group holds more than attentionLimit changes.
	More bool
}

// attentionGroups are the groups of needs-attention, in the order shown.
// A change shows in the first group it belongs to.
var attentionGroups = []struct {
	id, title, criteria, whatToDo string
	query                         url.Values
}{
	{"failed", "Failed",
		"status CREATE_FAILED or HANDLE_FAILED, except a merge request retargeted by a person (below): a step stopped on an error and the change keeps its binding.",
		"Read the reason on the change's page, fix its cause, then retry it; or cancel it to free its binding.",
		url.Values{"status": {rules.StatusCreateFailed + "," + rules.StatusHandleFailed}}},
	{"person", "Waiting on a named person",
		"step APPROVAL_SENT (the approver decides), HANDLE_DRAFT (someone marks the merge request ready) or a parked step (*_PENDING: an operator resumes it).",
		"The change's hint names who: the approver, the merge request's author, or an operator, who resumes a parked change once its cause is fixed.",
		url.Values{"step": {stepNames(rules.ApprovalSent, rules.HandleDraft, rules.HandlePipelinePending, rules.CreatePipelinePending,
			rules.ApprovalSendPending, rules.HandleRebasePending, rules.DeployPending, rules.HandleMergePending)}}},
	{"closed", "Closed or retargeted by a person",
		"step MR_CLOSED (a person closed the merge request) or HANDLE_RETARGETED (a person changed its target branch).",
		"Reopen the merge request and resume, or retarget it back and retry; or cancel the change to free its binding.",
		url.Values{"step": {stepNames(rules.ClosedByPerson, rules.HandleRetargeted)}}},
	{"slow", "Past their step's normal time",
		"an in-progress step that started longer ago than its deadline (pipeline.deadline, rebase.deadline, deploy.deadline, else sweeper.after).",
		"Open the change: its checklist shows what it waits for; its job retries by itself, and a resume makes it look again now.",
		url.Values{"stuck": {"true"}, "active": {"true"}}},
}

// stepNames is the step filter value naming steps.
func stepNames(steps ...rules.StepCode) string {
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.String()
	}
	return strings.Join(names, ",")
}

// attentionCache keeps the needs-attention groups for attentionTTL.
type attentionCache struct {
	mu     sync.Mutex
	at     time.Time
	groups []attentionGroup
}

// attention returns the needs-attention groups, read at most once per
// attentionTTL.
func (h *Handler) attention(ctx context.Context) ([]attentionGroup, time.Time, error) {
	c := &h.attn
	c.mu.Lock()
	defer c.mu.Unlock()
	now := h.now()
	if c.groups != nil && now.Sub(c.at) < attentionTTL && !now.Before(c.at) {
		return c.groups, c.at, nil
	}
	seen := map[string]bool{}
	var groups []attentionGroup
	for _, g := range attentionGroups {
		q := url.Values{}
		for k, v := range g.query {
			q[k] = v
		}
		q.Set("limit", strconv.Itoa(attentionLimit))
		ops, next, err := h.listChanges(ctx, q)
		if err != nil {
			return nil, time.Time{}, err
		}
		ag := attentionGroup{ID: g.id, Title: g.title, Criteria: g.criteria, WhatToDo: g.whatToDo, All: queryURL("/ui/changes", g.query), More: next != ""}
		for _, op := range ops {
			if seen[op.ID] || (g.id == "failed" && rules.StepCode(op.Step) == rules.HandleRetargeted) {
				continue
			}
			seen[op.ID] = true
			ag.Rows = append(ag.Rows, h.listRow(op))
		}
		groups = append(groups, ag)
	}
	c.groups, c.at = groups, now
	return groups, now, nil
}

// attentionPage is the data of attention.html.
type attentionPage struct {
	webPage
	Groups []attentionGroup
	ReadAt string
	Total  int
}

func (h *Handler) webAttention(w http.ResponseWriter, r *http.Request) {
	groups, at, err := h.attention(r.Context())
	if err != nil {
		h.log.Error("reading what needs attention", "err", err)
		http.Error(w, "could not read the changes, try again", http.StatusServiceUnavailable)
		return
	}
	p := attentionPage{webPage: h.page(r, "Needs attention"), Groups: groups, ReadAt: at.UTC().Format("15:04:05Z")}
	p.Refresh = webRefreshSeconds
	for _, g := range groups {
		p.Total += len(g.Rows)
	}
	h.render(w, http.StatusOK, "attention.html", p)
}

// overviewPage is the data of overview.html.
type overviewPage struct {
	webPage
	ByStatus []StatusCount
	Projects []projectRow
	Statuses []string
	Health   []healthLine
}

// projectRow is one project's active changes by status (Counts in the
// order of overviewPage.Statuses).
type projectRow struct {
	Project string
	Counts  []int
	Total   int
}

// healthLine is one item of the overview's health line: OK false marks a
// problem.
type healthLine struct {
	Text string
	OK   bool
}

// webOverview serves /ui: counts per status and per project, and the
// health line (webhooks arriving, jobs failing, budget left).
func (h *Handler) webOverview(w http.ResponseWriter, r *http.Request) {
	o, err := h.cfg.Store.ReadOverview(r.Context(), h.now())
	if err != nil {
		h.log.Error("reading the overview", "err", err)
		http.Error(w, "could not read the overview, try again", http.StatusServiceUnavailable)
		return
	}
	p := overviewPage{webPage: h.page(r, "Overview"), ByStatus: o.ByStatus}
	present := map[string]bool{}
	for _, c := range o.ByProject {
		present[c.Status] = true
	}
	for _, st := range rules.Statuses() {
		if present[st] {
			p.Statuses = append(p.Statuses, st)
		}
	}
	byProject := map[string]*projectRow{}
	var order []string
	for _, c := range o.ByProject {
		row := byProject[c.Project]
		if row == nil {
			row = &projectRow{Project: c.Project, Counts: make([]int, len(p.Statuses))}
			byProject[c.Project] = row
			order = append(order, c.Project)
		}
		row.Counts[slices.Index(p.Statuses, c.Status)] += c.Count
		row.Total += c.Count
	}
	for _, name := range order {
		p.Projects = append(p.Projects, *byProject[name])
	}
	p.Health = h.health(o)
	h.render(w, http.StatusOK, "overview.html", p)
}

// health is the overview's health line in words.
func (h *Handler) health(o Overview) []healthLine {
	var out []healthLine
	if o.LastDeliveryAt.IsZero() {
		out = append(out, healthLine{Text: "No webhook delivery stored yet: check the project's webhook (changebot doctor).", OK: false})
	} else {
		ago := h.now().Sub(o.LastDeliveryAt)
		out = append(out, healthLine{Text: "Last webhook delivery stored " + durationWords(ago) + " ago (" +
			o.LastDeliveryAt.UTC().Format("2006-01-02 15:04:05Z") + ").", OK: ago < time.Hour})
	}
	out = append(out, healthLine{Text: fmt.Sprintf("%d %s retrying after an error; %d gave up in the last hour.",
		o.RetryingJobs, templates.Plural(o.RetryingJobs, "job", "jobs"), o.DiscardedJobs), OK: o.DiscardedJobs == 0})
	if o.BudgetLeft == nil {
		out = append(out, healthLine{Text: "No call budget on this platform (GitHub's own rate limits apply).", OK: true})
	}
	accounts := make([]string, 0, len(o.BudgetLeft))
	for a := range o.BudgetLeft {
		accounts = append(accounts, a)
	}
	sort.Strings(accounts)
	for _, a := range accounts {
		left := math.Floor(o.BudgetLeft[a])
		out = append(out, healthLine{Text: fmt.Sprintf("Call budget of %s: %.0f calls left at this replica's last call.", a, left), OK: left > 0})
	}
	if o.BudgetLeft != nil && len(accounts) == 0 {
		out = append(out, healthLine{Text: "Call budget: this replica has made no call yet.", OK: true})
	}
	return out
}

// durationWords is d rounded for people: "42 s", "5 min", "3 h 10 min",
// "2 days".
func durationWords(d time.Duration) string {
	switch {
	case d < 0:
		return "0 s"
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 48*time.Hour:
		if m := int(d%time.Hour) / int(time.Minute); m > 0 {
			return fmt.Sprintf("%d h %d min", int(d/time.Hour), m)
		}
		return fmt.Sprintf("%d h", int(d/time.Hour))
	}
	return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
}

// queuesPage is the data of queues.html.
type queuesPage struct {
	webPage
	Queues []queueRow
}

// queueRow is one merge queue's row: its head, its waiting changes (first
// in line first), frozen or not.
type queueRow struct {
	Queue
	ProjectRef string
	Waiting    []QueuedChange
}

func (h *Handler) webQueues(w http.ResponseWriter, r *http.Request) {
	qs, err := h.cfg.Queues.ListQueues(r.Context())
	if err != nil {
		h.log.Error("listing the merge queues", "err", err)
		http.Error(w, "could not read the merge queues, try again", http.StatusServiceUnavailable)
		return
	}
	p := queuesPage{webPage: h.page(r, "Merge queues")}
	for _, q := range qs {
		full, err := h.cfg.Queues.Queue(r.Context(), q.ProjectID, q.TargetBranch)
		if err != nil {
			h.log.Error("reading a merge queue", "project_id", q.ProjectID, "branch", q.TargetBranch, "err", err)
			http.Error(w, "could not read the merge queues, try again", http.StatusServiceUnavailable)
			return
		}
		if full.Project == "" {
			full.Project = q.Project
		}
		p.Queues = append(p.Queues, queueRow{Queue: full, ProjectRef: strconv.FormatInt(q.ProjectID, 10), Waiting: full.Waiting})
	}
	h.render(w, http.StatusOK, "queues.html", p)
}

// webActionResult is the data of action.html: what an action did, or why
// it did not.
type webActionResult struct {
	webPage
	Message string
	Error   string
	Back    string
	// Done and Refused list a bulk action's changes by outcome.
	Done    []string
	Refused []string
}

// webForbidden answers 403 to a session that may not act.
func (h *Handler) webForbidden(w http.ResponseWriter, r *http.Request, back string) {
	h.render(w, http.StatusForbidden, "action.html", webActionResult{webPage: h.page(r, "Not allowed"), Back: back,
		Error: "A " + tokenRole(r) + " token may look but not act: log in with an operator token to retry, resume, cancel or freeze."})
}

// operatorForm lets an operator's form through: it answers 403 to any other
// session (webForbidden) and reads the reason and the confirmation
// (webReason); ok is false when it answered.
func (h *Handler) operatorForm(w http.ResponseWriter, r *http.Request, back string) (reason string, ok bool) {
	if tokenRole(r) != RoleOperator {
		h.webForbidden(w, r, back)
		return "", false
	}
	return h.webReason(w, r, back)
}

// notDone answers the action page with status saying msg: nothing was
// done.
func (h *Handler) notDone(w http.ResponseWriter, r *http.Request, status int, back, msg string) {
	h.render(w, status, "action.html", webActionResult{webPage: h.page(r, "Not done"), Back: back, Error: msg})
}

// webReason reads the form's reason and confirmation (both required): the
// reason as one line of text of at most maxReasonChars. It answers 400
// and returns false when one is missing or bad.
func (h *Handler) webReason(w http.ResponseWriter, r *http.Request, back string) (string, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.notDone(w, r, http.StatusBadRequest, back, "The form could not be read.")
		return "", false
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	msg := ""
	switch {
	case r.PostForm.Get("confirm") != "yes":
		msg = "Tick the confirmation box: nothing was done."
	case reason == "":
		msg = "Give a reason: it is recorded in the change's history and shown on its merge request. Nothing was done."
	case textcheck.Problem(reason) != "":
		msg = "reason " + textcheck.Problem(reason) + ". Nothing was done."
	case utf8.RuneCountInString(reason) > maxReasonChars:
		msg = fmt.Sprintf("reason is longer than %d characters. Nothing was done.", maxReasonChars)
	}
	if msg != "" {
		h.notDone(w, r, http.StatusBadRequest, back, msg)
		return "", false
	}
	return reason, true
}

// webAct serves POST /ui/changes/{id}/{retry|resume|cancel} (operator):
// the action with the form's reason, as the API's and the MR commands'
// (Engine.Act, source "web"), then back to the change's page.
func (h *Handler) webAct(w http.ResponseWriter, r *http.Request) {
	vars := mux.Vars(r)
	id, action := vars["id"], rules.Action(vars["action"])
	back := "/ui/changes/" + url.PathEscape(id)
	reason, ok := h.operatorForm(w, r, back)
	if !ok {
		return
	}
	_, err := h.cfg.Engine.Act(r.Context(), id, action, rules.ActionParams{Actor: requestTokenID(r), Source: "web", Reason: reason})
	var na *rules.NotApplicableError
	switch {
	case errors.Is(err, ErrNotFound):
		h.render(w, http.StatusNotFound, "action.html", webActionResult{webPage: h.page(r, "No such change"), Back: "/ui/changes",
			Error: "No change has the id " + id + "."})
		return
	case errors.As(err, &na):
		h.notDone(w, r, http.StatusConflict, back, na.Reason)
		return
	case err != nil:
		h.log.Error("web action failed", "operation_id", id, "action", action, "err", err)
		h.notDone(w, r, http.StatusServiceUnavailable, back, "Could not "+string(action)+" the change; try again.")
		return
	}
	h.attn.forget()
	h.log.Info("web action", "operation_id", id, "action", action, "actor", requestTokenID(r), "reason", reason)
	http.Redirect(w, r, back+"?done="+string(action), http.StatusSeeOther)
}

// forget drops the cached needs-attention groups (an action changed them).
func (c *attentionCache) forget() {
	c.mu.Lock()
	c.groups = nil
	c.mu.Unlock()
}

// bulkActions are the actions a filtered set takes, and which changes each
// applies to.
var bulkActions = map[rules.Action]func(rules.Step) bool{
	rules.ActionRetry:  rules.Step.Retryable,
	rules.ActionCancel: rules.Step.Cancellable,
}

// bulkPage is the data of bulk.html: the action, the filter, and the
// changes of the filter it applies to, shown before the confirmation.
type bulkPage struct {
	webPage
	Action string
	// Back is the list of the filter.
	Back    template.URL
	Filters []webFilterField
	Rows    []webListRow
	Skipped int
	Error   string
}

// bulkTargets lists the changes of the list filter q (at most maxBulk) the
// action applies to, and how many others the filter holds.
func (h *Handler) bulkTargets(ctx context.Context, action rules.Action, q url.Values) ([]Change, int, error) {
	applies := bulkActions[action]
	q.Set("limit", strconv.Itoa(maxBulk))
	q.Del("cursor")
	ops, _, err := h.listChanges(ctx, q)
	if err != nil {
		return nil, 0, err
	}
	var out []Change
	for _, op := range ops {
		if applies(rules.MustStep(rules.StepCode(op.Step))) {
			out = append(out, op)
		}
	}
	return out, len(ops) - len(out), nil
}

// bulkQuery is the list filter of a bulk request: its query (GET) or form
// (POST) but the action, the form's own fields and the list's paging
// (limit and cursor select no change: a bulk action takes every change of
// its filter, up to maxBulk, so a query of paging alone is no filter).
func bulkQuery(v url.Values) url.Values {
	q := url.Values{}
	for k, vs := range v {
		switch k {
		case "action", "reason", "confirm", "limit", "cursor", webSameSiteParam:
			continue
		}
		if len(vs) == 1 && vs[0] == "" {
			continue
		}
		q[k] = vs
	}
	return q
}

// webBulkForm serves GET /ui/bulk?action=retry|cancel&<filters>: the
// changes the action would act on, counted, and the form to confirm.
func (h *Handler) webBulkForm(w http.ResponseWriter, r *http.Request) {
	action := rules.Action(r.URL.Query().Get("action"))
	q := bulkQuery(r.URL.Query())
	p := bulkPage{webPage: h.page(r, "Bulk "+string(action)), Action: string(action), Back: queryURL("/ui/changes", q)}
	for k, vs := range q {
		for _, v := range vs {
			p.Filters = append(p.Filters, webFilterField{Name: k, Value: v})
		}
	}
	slices.SortFunc(p.Filters, func(a, b webFilterField) int { return strings.Compare(a.Name, b.Name) })
	if _, ok := bulkActions[action]; !ok {
		p.Error = "action must be retry or cancel"
		h.render(w, http.StatusBadRequest, "bulk.html", p)
		return
	}
	if len(q) == 0 {
		p.Error = "Choose a filter first (a status, a step, a project…): a bulk action never acts on every change."
		h.render(w, http.StatusBadRequest, "bulk.html", p)
		return
	}
	targets, skipped, err := h.bulkTargets(r.Context(), action, q)
	var bad *listFilterError
	switch {
	case errors.As(err, &bad):
		p.Error = bad.Error()
		h.render(w, http.StatusBadRequest, "bulk.html", p)
		return
	case err != nil:
		h.log.Error("listing a bulk action's changes", "err", err)
		http.Error(w, "could not list the changes, try again", http.StatusServiceUnavailable)
		return
	}
	for _, op := range targets {
		p.Rows = append(p.Rows, h.listRow(op))
	}
	p.Skipped = skipped
	h.render(w, http.StatusOK, "bulk.html", p)
}

// webBulk serves POST /ui/bulk (operator): the action on every change of
// the filter it applies to now (listed again: the set is what holds at
// the confirmation), each as one Engine.Act with the reason; then the
// outcome per change.
func (h *Handler) webBulk(w http.ResponseWriter, r *http.Request) {
	reason, ok := h.operatorForm(w, r, "/ui/changes")
	if !ok {
		return
	}
	action := rules.Action(r.PostForm.Get("action"))
	q := bulkQuery(r.PostForm)
	back := "/ui/changes?" + q.Encode()
	if _, ok := bulkActions[action]; !ok || len(q) == 0 {
		h.notDone(w, r, http.StatusBadRequest, back, "A bulk action needs action retry or cancel and a filter.")
		return
	}
	targets, _, err := h.bulkTargets(r.Context(), action, q)
	if err != nil {
		h.notDone(w, r, http.StatusBadRequest, back, err.Error())
		return
	}
	res := webActionResult{webPage: h.page(r, "Bulk "+string(action)), Back: back}
	for _, op := range targets {
		_, err := h.cfg.Engine.Act(r.Context(), op.ID, action, rules.ActionParams{Actor: requestTokenID(r), Source: "web", Reason: reason})
		var na *rules.NotApplicableError
		switch {
		case err == nil:
			res.Done = append(res.Done, op.ID)
		case errors.As(err, &na):
			res.Refused = append(res.Refused, op.ID+": "+na.Reason)
		default:
			h.log.Error("bulk action failed", "operation_id", op.ID, "action", action, "err", err)
			res.Refused = append(res.Refused, op.ID+": could not "+string(action)+" it now; try again")
		}
	}
	h.attn.forget()
	h.log.Info("web bulk action", "action", action, "actor", requestTokenID(r), "reason", reason, "done", len(res.Done), "refused", len(res.Refused))
	res.Message = fmt.Sprintf("%s: %d %s done, %d not.", action, len(res.Done), templates.Plural(len(res.Done), "change", "changes"), len(res.Refused))
	h.render(w, http.StatusOK, "action.html", res)
}

// webFreeze serves POST /ui/queues/{project}/{branch}/{freeze|unfreeze}
// (operator): Queues.FreezeQueue with the form's reason, then back to the
// queues.
func (h *Handler) webFreeze(w http.ResponseWriter, r *http.Request) {
	vars := mux.Vars(r)
	reason, ok := h.operatorForm(w, r, "/ui/queues")
	if !ok {
		return
	}
	projectID, err := strconv.ParseInt(vars["project"], 10, 64)
	if err != nil || projectID < 1 {
		h.notDone(w, r, http.StatusBadRequest, "/ui/queues", "project must be a numeric project id")
		return
	}
	frozen := vars["action"] == "freeze"
	_, err = h.cfg.Queues.FreezeQueue(r.Context(), projectID, vars["branch"], frozen, requestTokenID(r), reason)
	var nq *NoQueueError
	switch {
	case errors.As(err, &nq):
		h.notDone(w, r, http.StatusConflict, "/ui/queues", nq.Reason)
		return
	case err != nil:
		h.log.Error("web freeze failed", "project_id", projectID, "branch", vars["branch"], "err", err)
		h.notDone(w, r, http.StatusServiceUnavailable, "/ui/queues", "Could not change the queue; try again.")
		return
	}
	h.log.Info("web freeze", "action", vars["action"], "project_id", projectID, "branch", vars["branch"], "actor", requestTokenID(r), "reason", reason)
	http.Redirect(w, r, "/ui/queues", http.StatusSeeOther)
}

// actionForm is one action the change page offers now.
type actionForm struct {
	Action, Label, What string
}

// changeActions are the actions that apply to a change at step now: retry
// a failed change, resume a waiting or parked one, cancel one in progress
// (the step table's Retryable, Resumable and Cancellable, as Engine.Act
// decides them).
func changeActions(step rules.StepCode) []actionForm {
	st := rules.MustStep(step)
	var out []actionForm
	if st.Retryable() {
		out = append(out, actionForm{Action: "retry", Label: "Retry", What: "run the failed step again"})
	}
	if st.Resumable() {
		out = append(out, actionForm{Action: "resume", Label: "Resume", What: "continue the change at its step now"})
	}
	if st.Cancellable() {
		out = append(out, actionForm{Action: "cancel", Label: "Cancel", What: "close its merge request and free its binding"})
	}
	return out
}
