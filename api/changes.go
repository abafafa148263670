package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"changebot/flows/rules"
)

// changeRequest is the body of POST /api/v1/changes. Its strings keep
// whether they arrived as valid UTF-8 (encoding/json replaces invalid bytes
// silently); see badText.
type changeRequest struct {
	SubjectID    jsonText      `json:"subject_id"`
	TargetKey    jsonText      `json:"target_key"`
	Project      projectRef    `json:"project"`
	TargetBranch jsonText      `json:"target_branch"`
	Title        jsonText      `json:"title"`
	Description  jsonText      `json:"description"`
	Files        []fileRequest `json:"files"`
	RequestedBy  jsonText      `json:"requested_by"`
	RolloutID    jsonText      `json:"rollout_id"`
}

// fileRequest is one entry of changeRequest.Files.
type fileRequest struct {
	Path    jsonText `json:"path"`
	Content jsonText `json:"content"`
	Action  jsonText `json:"action"`
}

// jsonText is a JSON string that remembers whether its encoded form was
// valid UTF-8 (no invalid bytes, no lone surrogate escape such as
// "\ud800"), which encoding/json would otherwise replace with U+FFFD, and
// whether it was sent at all.
type jsonText struct {
	s       string
	invalid bool
	// set is true when the field held a string (absent and null: false).
	set bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *jsonText) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if err := json.Unmarshal(b, &t.s); err != nil {
		return err
	}
	t.invalid = !validJSONString(b)
	t.set = true
	return nil
}

// validJSONString reports whether the encoded JSON string b is valid UTF-8
// with every \u surrogate escape paired (a NUL is checked per field later).
func validJSONString(b []byte) bool { return jsonEscapesProblem(b, true) == "" }

// submission turns the request into a Submission, and lists the fields
// that did not arrive as valid UTF-8, and the files without content that
// are not deleted.
func (req changeRequest) submission() (Submission, []FieldError) {
	var bad []FieldError
	str := func(field string, t jsonText) string {
		if t.invalid {
			bad = append(bad, FieldError{Field: field, Message: "is not valid UTF-8"})
		}
		return t.s
	}
	p := Submission{
		SubjectID: str("subject_id", req.SubjectID), TargetKey: str("target_key", req.TargetKey),
		Project: string(req.Project), TargetBranch: str("target_branch", req.TargetBranch),
		Title: str("title", req.Title), Description: str("description", req.Description),
		RequestedBy: str("requested_by", req.RequestedBy), RolloutID: str("rollout_id", req.RolloutID),
	}
	for i, f := range req.Files {
		content := fmt.Sprintf("files[%d].content", i)
		p.Files = append(p.Files, File{Path: str(fmt.Sprintf("files[%d].path", i), f.Path),
			Content: str(content, f.Content), Action: str(fmt.Sprintf("files[%d].action", i), f.Action)})
		// A file without content would be written empty: only a delete
		// goes without it ("" is an empty file's content).
		if !f.Content.set && f.Action.s != "delete" {
			bad = append(bad, FieldError{Field: content, Message: `is required unless action is "delete" ("" for an empty file)`})
		}
	}
	return p, bad
}

func (h *Handler) submitChange(w http.ResponseWriter, r *http.Request) {
	var req changeRequest
	if !decodeBody(w, r, h.cfg.MaxBodyBytes, &req) {
		return
	}
	params, badText := req.submission()
	if len(badText) > 0 {
		// Every problem at once: the invalid text, then the rest.
		fields := badText
		for _, f := range h.cfg.Engine.Check(params) {
			if !slices.ContainsFunc(fields, func(b FieldError) bool { return b.Field == f.Field }) {
				fields = append(fields, f)
			}
		}
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid change", "fields": fields})
		return
	}
	params.IdempotencyKey = r.Header.Get("Idempotency-Key")
	params.SubmittedBy = requestTokenID(r)
	op, created, err := h.cfg.Engine.Submit(r.Context(), params)
	if errors.Is(err, ErrOverloaded) {
		w.Header().Set("Retry-After", strconv.Itoa(admissionRetryAfter))
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "too many active changes (admission.max_active); nothing was created, retry later",
			"retry_after_seconds": admissionRetryAfter})
		return
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid change", "fields": ve.Fields})
		return
	}
	var check *CheckError
	if errors.As(err, &check) {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": "the change does not fit the project in " + platformName(h.cfg.Engine.Platform()) + "; nothing was created",
			"fields": check.Fields})
		return
	}
	var down *UnavailableError
	if errors.As(err, &down) {
		wait := max(int(down.RetryAfter.Round(time.Second)/time.Second), 1)
		if down.RetryAfter <= 0 {
			wait = gitlabRetryAfter
		}
		h.log.Warn("the platform could not answer the submission checks", "platform", h.cfg.Engine.Platform(), "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(wait))
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": platformName(h.cfg.Engine.Platform()) + " could not answer the checks of the change; nothing was created, retry later",
			"retry_after_seconds": wait})
		return
	}
	var idem *IdempotencyConflictError
	if errors.As(err, &idem) {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": idem.Error(),
			"operation_id": idem.OperationID, "differing_fields": idem.Fields})
		return
	}
	var held *BindingHeldError
	if errors.As(err, &held) {
		writeJSON(w, http.StatusConflict, map[string]any{"error": held.Reason,
			"operation_id": held.OperationID, "status": held.Status, "failed": held.Failed})
		return
	}
	if err != nil {
		h.log.Error("submitting change", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not store the change, try again"})
		return
	}
	noteOperation(r.Context(), op.ID)
	status := http.StatusAccepted
	if !created {
		status = http.StatusOK
	}
	writeJSON(w, status, map[string]string{"operation_id": op.ID, "status_url": h.cfg.ExternalURL + "/api/v1/changes/" + op.ID})
}

// gitlabRetryAfter is the Retry-After, in seconds, of a submission whose
// GitLab checks could not be made, when GitLab named no wait itself.
const gitlabRetryAfter = 30

// admissionRetryAfter is the Retry-After, in seconds, of a submission
// refused by admission control.
const admissionRetryAfter = 30

// projectRef accepts "project" as a path string ("group/repo") or a
// numeric id.
type projectRef string

// UnmarshalJSON implements json.Unmarshaler.
func (p *projectRef) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if !validJSONString(b) {
			return errors.New("project is not valid UTF-8")
		}
		*p = projectRef(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		if _, err := n.Int64(); err == nil {
			*p = projectRef(n.String())
			return nil
		}
	}
	return errors.New("project must be a path or a numeric id")
}

// changeAction serves POST /api/v1/changes/{id}/{retry|resume|cancel}
// (operator token): the same actions as the MR commands, for changes that
// have no merge request to comment on (for example CREATE_FAILED before the
// MR was opened). 409 with the reason when the action does not apply now.
func (h *Handler) changeAction(w http.ResponseWriter, r *http.Request) {
	vars := mux.Vars(r)
	id, action := vars["id"], rules.Action(vars["action"])
	role := tokenRole(r)
	if role != RoleOperator {
		if action != rules.ActionCancel || role != RoleSubmitter {
			// A viewer only reads; a submitter may cancel its own changes.
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "a " + role + " token may not " + string(action) + " changes; this needs an operator token"})
			return
		}
		c, _, err := h.cfg.Engine.Get(r.Context(), id)
		if errors.Is(err, ErrNotFound) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no change with id " + id})
			return
		}
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not read the change"})
			return
		}
		if c.SubmittedBy == "" || c.SubmittedBy != requestTokenID(r) {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "a submitter token may cancel only the changes it submitted; this needs an operator token"})
			return
		}
	}
	reason, ok := decodeReason(w, r, h.cfg.MaxBodyBytes, false, "")
	if !ok {
		return
	}
	// The actor is the token that acted (TokenID, as submitted_by names the
	// submitter), not only its role: two operators' tokens stay apart.
	_, err := h.cfg.Engine.Act(r.Context(), id, action, rules.ActionParams{Actor: requestTokenID(r), Source: "api", Reason: reason})
	if errors.Is(err, ErrNotFound) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no change with id " + id})
		return
	}
	var na *rules.NotApplicableError
	switch {
	case errors.As(err, &na):
		writeJSON(w, http.StatusConflict, map[string]string{"error": na.Reason})
		return
	case err != nil:
		h.log.Error("change action failed", "operation_id", id, "action", vars["action"], "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not " + vars["action"] + " the change, try again"})
		return
	}
	h.getChange(w, r)
}

func (h *Handler) getChange(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	if !knownParams(w, r, "include") {
		return
	}
	withContent := false
	for _, inc := range splitValues(r.URL.Query()["include"]) {
		if inc != "content" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "include: " + strconv.Quote(inc) + " is not something a change includes (content)"})
			return
		}
		withContent = true
	}
	op, events, err := h.cfg.Engine.Get(r.Context(), id)
	if errors.Is(err, ErrNotFound) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no change with id " + id})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not read the change"})
		return
	}
	it := NewChangeListItem(op, h.cfg.ExternalURL)
	it.Hint = h.cfg.Refusals.ApprovalHint(it.Status, it.Hint)
	v := ChangeView{ChangeListItem: it, Detail: op.Detail, Events: events, ApprovalFirst: op.ApprovalFirst,
		StepStartedAt: op.StepStartedAt, Files: FileViews(op.Files, withContent)}
	if v.Events == nil {
		v.Events = []Event{}
	}
	writeJSON(w, http.StatusOK, v)
}

// unknownParam is knownParams' error for parameter k.
func unknownParam(k string, known []string) string {
	if len(known) == 0 {
		return fmt.Sprintf("query parameter %q: unknown; this endpoint takes no query parameters", k)
	}
	return fmt.Sprintf("query parameter %q: unknown; this endpoint takes %s", k, strings.Join(known, ", "))
}

// knownParams answers 400 naming the first query parameter of r (in
// sorted order) that is not one of known, as the list does for its
// filters, and reports false; true when every parameter is known.
func knownParams(w http.ResponseWriter, r *http.Request, known ...string) bool {
	for _, k := range slices.Sorted(maps.Keys(r.URL.Query())) {
		if !slices.Contains(known, k) {
			writeJSON(w, http.StatusBadRequest, map[string]any{
				"error":  unknownParam(k, known),
				"fields": []FieldError{{Field: k, Message: "is not a parameter of this endpoint"}}})
			return false
		}
	}
	return true
}

// FileCreateOrUpdate is the action of a file submitted without one: create
// it or update it, as the repository has it or not.
const FileCreateOrUpdate = "create_or_update"

// FileViews is files as GET /api/v1/changes/{id} shows them: path, action,
// size in bytes and SHA-256 of the content, and the content itself only
// when withContent (?include=content); never nil.
func FileViews(files []File, withContent bool) []FileView {
	out := make([]FileView, 0, len(files))
	for _, f := range files {
		sum := sha256.Sum256([]byte(f.Content))
		action := f.Action
		if action == "" {
			action = FileCreateOrUpdate
		}
		fv := FileView{Path: f.Path, Action: action, Size: len(f.Content), SHA256: hex.EncodeToString(sum[:])}
		if withContent {
			content := f.Content
			fv.Content = &content
		}
		out = append(out, fv)
	}
	return out
}

// EventsView is the body of GET /api/v1/changes/{id}/events and of
// changebot history -json.
type EventsView struct {
	OperationID string `json:"operation_id"`
	// Form is "current" (events upcast to their current schema version,
	// to read and replay) or "stored" (as stored, to check the hash chain).
	Form   string  `json:"form"`
	Events []Event `json:"events"`
}

// Event forms of GET /api/v1/changes/{id}/events?form=.
const (
	FormCurrent = "current"
	FormStored  = "stored"
)

// NewEventsView returns h's events in form (FormCurrent or FormStored).
func NewEventsView(h History, form string) EventsView {
	v := EventsView{OperationID: h.Change.ID, Form: form, Events: h.Stored}
	if form == FormCurrent {
		v.Events = h.Current
	}
	if v.Events == nil {
		v.Events = []Event{}
	}
	return v
}

// getEvents serves GET /api/v1/changes/{id}/events[?form=current|stored]
// (any token): the change's events in sequence order, read with the
// operation in one snapshot (Store.ReadHistory); "stored" gives them as
// stored, whose hash chain a client can check (store.ComputeHash).
func (h *Handler) getEvents(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	if !knownParams(w, r, "form") {
		return
	}
	form := r.URL.Query().Get("form")
	if form == "" {
		form = FormCurrent
	}
	if form != FormCurrent && form != FormStored {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "form must be current or stored, not " + strconv.Quote(form)})
		return
	}
	hist, err := h.cfg.Store.ReadHistory(r.Context(), id)
	if errors.Is(err, ErrNotFound) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no change with id " + id})
		return
	}
	if err != nil {
		h.log.Error("reading events", "operation_id", id, "error", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not read the change's events"})
		return
	}
	writeJSON(w, http.StatusOK, NewEventsView(hist, form))
}

// apiHint is the hint of a change that has no merge request to comment
// on: the step's own hint speaks of MR commands, so the API's actions are
// named instead (issue 9 defect 16). It speaks of a merge request, or of a
// pull request on GitHub (platform, the change's).
func apiHint(st rules.Step, platform, url string) string {
	mr := "merge request"
	if platform == rules.PlatformGitHub {
		mr = "pull request"
	}
	switch {
	case st.Retryable():
		return "It failed before its " + mr + " was opened: an operator retries it with POST " + url +
			"/retry once the cause is fixed, or its submitter or an operator cancels it with POST " + url + "/cancel."
	case st.Resumable() && st.Phase == rules.PhasePending:
		// Only a parked change waits for an operator; a step in progress
		// (APPROVAL_SENDING, CREATE_STARTED) has its job, which retries by
		// itself, so its hint says nothing of /resume.
		return st.HintOn(platform) + " It has no " + mr + " yet: an operator resumes it with POST " + url + "/resume."
	}
	return st.HintOn(platform)
}

// platformName is the platform's name as people write it: "GitHub" for
// rules.PlatformGitHub, else "GitLab".
func platformName(platform string) string {
	if platform == rules.PlatformGitHub {
		return "GitHub"
	}
	return "GitLab"
}
