package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"changebot/flows/rules"
)

// List API limits (issue 13 point 1).
const (
	// DefaultListLimit is the page size of GET /api/v1/changes without limit.
	DefaultListLimit = 50
	// MaxListLimit is the largest limit it accepts.
	MaxListLimit = 500
)

// ListFilters are the query parameters GET /api/v1/changes knows.
var ListFilters = []string{"status", "step", "active", "project", "subject_id", "target_key", "requested_by",
	"rollout_id", "updated_after", "updated_before", "stuck", "limit", "cursor"}

// FilterError is a bad query parameter of the list API: Param names it,
// Reason says what is wrong. The API answers it with a 400. Flag, when
// set, says it in changebot list's words (FlagError).
type FilterError struct {
	Param, Reason string
	Flag          string
}

// Error implements error.
func (e *FilterError) Error() string { return "query parameter " + e.Param + ": " + e.Reason }

// FlagError says what is wrong in the words of changebot list, whose
// flags are the parameters: "-status: unknown status X; one of …".
func (e *FilterError) FlagError() string {
	if e.Flag != "" {
		return "-" + e.Param + ": " + e.Flag
	}
	return "-" + e.Param + ": " + e.Reason
}

// ListQuery is a parsed list request: the filters (Params.Limit is one
// more than the page, to learn whether a next page exists) and the page
// size. None is set when the filters exclude every change (active=true
// with only final steps): nothing needs to be read.
type ListQuery struct {
	Params ListParams
	Limit  int
	None   bool
}

// ParseListQuery reads the list API's filters from q (each may repeat or
// list values separated by commas where it takes several: status, step);
// an empty value does not filter. stuck=true keeps the changes stuck at
// now (ListParams.StuckAt). Unknown parameters and bad values are a
// *FilterError.
func ParseListQuery(q url.Values, now time.Time) (ListQuery, error) {
	for k := range q {
		if !slices.Contains(ListFilters, k) {
			return ListQuery{}, &FilterError{Param: k, Reason: "unknown; the filters are " + strings.Join(ListFilters, ", ")}
		}
	}
	lq := ListQuery{Limit: DefaultListLimit}
	p := &lq.Params
	for _, v := range splitValues(q["status"]) {
		if statuses := rules.Statuses(); !slices.Contains(statuses, v) {
			return ListQuery{}, &FilterError{Param: "status", Reason: fmt.Sprintf("%q is not a status (%s)", v, strings.Join(statuses, ", ")),
				Flag: fmt.Sprintf("unknown status %s; one of %s", v, strings.Join(statuses, ", "))}
		}
		p.Statuses = append(p.Statuses, v)
	}
	for _, v := range splitValues(q["step"]) {
		code, ok := parseStep(v)
		if !ok {
			return ListQuery{}, &FilterError{Param: "step", Reason: fmt.Sprintf("%q is not a step code or name (docs/states.md)", v),
				Flag: fmt.Sprintf("unknown step %s; a step code or name of docs/states.md (10401 or APPROVAL_SENDING)", v)}
		}
		p.Steps = append(p.Steps, code)
	}
	if v := q.Get("active"); v != "" {
		active, err := strconv.ParseBool(v)
		if err != nil {
			return ListQuery{}, &FilterError{Param: "active", Reason: fmt.Sprintf("%q is not true or false", v)}
		}
		p.Steps, lq.None = activeSteps(p.Steps, active)
	}
	p.Project, p.SubjectID = q.Get("project"), q.Get("subject_id")
	p.TargetKey, p.RequestedBy, p.RolloutID = q.Get("target_key"), q.Get("requested_by"), q.Get("rollout_id")
	var err error
	if p.UpdatedAfter, err = parseTimeParam(q, "updated_after"); err != nil {
		return ListQuery{}, err
	}
	if p.UpdatedBefore, err = parseTimeParam(q, "updated_before"); err != nil {
		return ListQuery{}, err
	}
	if v := q.Get("stuck"); v != "" {
		stuck, err := strconv.ParseBool(v)
		if err != nil {
			return ListQuery{}, &FilterError{Param: "stuck", Reason: fmt.Sprintf("%q is not true or false", v)}
		}
		if stuck {
			p.StuckAt = now.UTC()
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			return ListQuery{}, &FilterError{Param: "limit", Reason: fmt.Sprintf("%q is not a whole number from 1 to %d", v, MaxListLimit)}
		}
		lq.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		id, ok := decodeCursor(v)
		if !ok {
			return ListQuery{}, &FilterError{Param: "cursor", Reason: "not a cursor this API gave (pass next_cursor back as it is)"}
		}
		p.Before = id
	}
	p.Limit = lq.Limit + 1
	return lq, nil
}

// activeSteps narrows the step filter steps (empty: every step) to the
// steps that are not final (active true: the change is still in progress
// or can be resumed or retried) or to the final ones (active false), by
// the step table's Terminal. none reports that no step is left.
func activeSteps(steps []int, active bool) (narrowed []int, none bool) {
	for _, st := range rules.Catalogue() {
		if st.Terminal == active {
			continue
		}
		if len(steps) == 0 || slices.Contains(steps, int(st.Code)) {
			narrowed = append(narrowed, int(st.Code))
		}
	}
	return narrowed, len(narrowed) == 0
}

// splitValues returns the non-empty comma-separated values of vs.
func splitValues(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// parseStep reads a step code (10401) or name (APPROVAL_SENDING, any case).
func parseStep(v string) (int, bool) {
	for _, s := range rules.Catalogue() {
		if strconv.Itoa(int(s.Code)) == v || strings.EqualFold(s.Name, v) {
			return int(s.Code), true
		}
	}
	return 0, false
}

func parseTimeParam(q url.Values, key string) (time.Time, error) {
	v := q.Get(key)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, &FilterError{Param: key, Reason: fmt.Sprintf("%q is not an RFC 3339 time (2026-12-01T10:00:00Z)", v)}
	}
	return t.UTC(), nil
}

// cursorPrefix versions the cursor's form.
const cursorPrefix = "v1:"

// encodeCursor makes the opaque next_cursor of a page whose last change is
// id: the keyset position, not an offset.
func encodeCursor(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + id))
}

func decodeCursor(c string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", false
	}
	id, ok := strings.CutPrefix(string(b), cursorPrefix)
	return id, ok && id != ""
}

// ChangeListItem is one change of GET /api/v1/changes.
type ChangeListItem struct {
	OperationID  string   `json:"operation_id"`
	Title        string   `json:"title"`
	SubjectID    string   `json:"subject_id"`
	TargetKey    string   `json:"target_key"`
	Project      string   `json:"project"`
	Status       string   `json:"status"`
	Step         StepView `json:"step"`
	Hint         string   `json:"hint"`
	Terminal     bool     `json:"terminal"`
	MergeRequest *MRView  `json:"merge_request"`
	RequestedBy  string   `json:"requested_by"`
	// RolloutID is the change's rollout; absent for none.
	RolloutID string `json:"rollout_id,omitempty"`
	// Adopted is true for a change that carries a merge request a
	// developer opened (docs/adoption.md); absent otherwise.
	Adopted   bool      `json:"adopted,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ChangeListPage is the body of GET /api/v1/changes.
type ChangeListPage struct {
	Changes    []ChangeListItem `json:"changes"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// serveChangeList serves GET /api/v1/changes: a page of changes, newest first,
// filtered by the query (ParseListQuery), with next_cursor unless it is
// the last page.
func (h *Handler) serveChangeList(w http.ResponseWriter, r *http.Request) {
	ops, next, err := h.listChanges(r.Context(), r.URL.Query())
	var bad *listFilterError
	switch {
	case errors.As(err, &bad):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": bad.Error()})
		return
	case err != nil:
		h.log.Error("listing changes", "error", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not list the changes"})
		return
	}
	page := ChangeListPage{Changes: []ChangeListItem{}, NextCursor: next}
	for _, op := range ops {
		it := NewChangeListItem(op, h.cfg.ExternalURL)
		it.Hint = h.cfg.Refusals.ApprovalHint(it.Status, it.Hint)
		page.Changes = append(page.Changes, it)
	}
	writeJSON(w, http.StatusOK, page)
}

// NewChangeListItem is op as the list API shows it; externalURL is the
// bot's, for the hint of a change without a merge request (apiHint).
func NewChangeListItem(op Change, externalURL string) ChangeListItem {
	st := rules.MustStep(rules.StepCode(op.Step))
	it := ChangeListItem{OperationID: op.ID, Title: op.Title, SubjectID: op.SubjectID, TargetKey: op.TargetKey, Project: op.Project,
		Status: op.Status, Step: StepView{Code: op.Step, Name: st.Name}, Hint: st.HintOn(op.Platform), Terminal: st.Terminal,
		RequestedBy: op.RequestedBy, RolloutID: op.RolloutID, Adopted: op.Adopted, CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt}
	if op.MRIID > 0 {
		it.MergeRequest = &MRView{ProjectID: op.ProjectID, IID: op.MRIID, WebURL: op.MRWebURL}
	} else {
		it.Hint = apiHint(st, op.Platform, externalURL+"/api/v1/changes/"+op.ID)
	}
	return it
}

// listChanges is ListChanges over the handler's store, at its clock.
func (h *Handler) listChanges(ctx context.Context, q url.Values) ([]Change, string, error) {
	return ListChanges(ctx, h.cfg.Store, q, h.now())
}

// ListChanges is one page of changes of st for the query parameters of GET
// /api/v1/changes (ParseListQuery), newest first, stuck=true at now, and
// the cursor of the next page ("" on the last): what the API, the web
// pages and changebot list show. A bad filter is an error whose message
// names it (the API answers it 400).
func ListChanges(ctx context.Context, st ChangeLister, q url.Values, now time.Time) ([]Change, string, error) {
	lq, err := ParseListQuery(q, now)
	if err != nil {
		return nil, "", &listFilterError{msg: err.Error()}
	}
	if lq.None {
		return nil, "", nil
	}
	ops, err := st.ListChanges(ctx, lq.Params)
	if err != nil {
		return nil, "", err
	}
	if len(ops) > lq.Limit {
		ops = ops[:lq.Limit]
		return ops, encodeCursor(ops[len(ops)-1].ID), nil
	}
	return ops, "", nil
}

// listFilterError is a filter of the list the server refuses (400).
type listFilterError struct{ msg string }

func (e *listFilterError) Error() string { return e.msg }
