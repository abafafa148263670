package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"changebot/internal/textcheck"
)

// maxReasonChars bounds the reason of a freeze, an unfreeze or a move to
// the front of a merge queue, in characters.
const maxReasonChars = 500

// QueueHeadView is the change at the head of a merge queue (openapi.json
// QueueHead).
type QueueHeadView struct {
	OperationID string    `json:"operation_id"`
	MRIID       int64     `json:"mr_iid"`
	MRWebURL    string    `json:"mr_web_url"`
	Since       time.Time `json:"since"`
}

// QueueFrozenView says who froze a merge queue, why and when
// (openapi.json QueueFrozen).
type QueueFrozenView struct {
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// QueueSummaryView is one merge queue of GET /api/v1/queues (openapi.json
// QueueSummary): Waiting counts its waiting changes.
type QueueSummaryView struct {
	ProjectID    int64            `json:"project_id"`
	Project      string           `json:"project"`
	TargetBranch string           `json:"target_branch"`
	Head         *QueueHeadView   `json:"head"`
	Waiting      int              `json:"waiting"`
	Frozen       *QueueFrozenView `json:"frozen"`
}

// QueueListView is the body of GET /api/v1/queues.
type QueueListView struct {
	Queues []QueueSummaryView `json:"queues"`
}

// QueuedChangeView is a change waiting in a merge queue (openapi.json
// QueuedChange); Position is its place in line, from 1.
type QueuedChangeView struct {
	Position       int        `json:"position"`
	OperationID    string     `json:"operation_id"`
	MRIID          int64      `json:"mr_iid"`
	MRWebURL       string     `json:"mr_web_url"`
	Title          string     `json:"title"`
	SubjectID      string     `json:"subject_id"`
	TargetKey      string     `json:"target_key"`
	ReadyAt        time.Time  `json:"ready_at"`
	MovedToFrontBy *string    `json:"moved_to_front_by"`
	MovedToFrontAt *time.Time `json:"moved_to_front_at"`
}

// QueueView is one merge queue with its waiting changes in order: the body
// of GET /api/v1/queues/{project}/{branch}, of its freeze and unfreeze and
// of a move to the front (openapi.json Queue).
type QueueView struct {
	ProjectID    int64              `json:"project_id"`
	Project      string             `json:"project"`
	TargetBranch string             `json:"target_branch"`
	Head         *QueueHeadView     `json:"head"`
	Frozen       *QueueFrozenView   `json:"frozen"`
	Waiting      []QueuedChangeView `json:"waiting"`
}

// headView is q's head as the API shows it, nil when none.
func headView(q Queue) *QueueHeadView {
	if q.Head == nil {
		return nil
	}
	return &QueueHeadView{OperationID: q.Head.OperationID, MRIID: q.Head.MRIID, MRWebURL: q.Head.MRWebURL, Since: q.Head.Since.UTC()}
}

// frozenView is q's freeze as the API shows it, nil when it is not frozen.
func frozenView(q Queue) *QueueFrozenView {
	if !q.Frozen() {
		return nil
	}
	return &QueueFrozenView{By: q.FrozenBy, Reason: q.FrozenReason, At: q.FrozenAt.UTC()}
}

// NewQueueSummaryView is q as GET /api/v1/queues lists it.
func NewQueueSummaryView(q Queue) QueueSummaryView {
	return QueueSummaryView{ProjectID: q.ProjectID, Project: q.Project, TargetBranch: q.TargetBranch, Head: headView(q),
		Waiting: q.WaitingCount, Frozen: frozenView(q)}
}

// NewQueueView is q with its waiting changes, as the API answers one queue.
func NewQueueView(q Queue) QueueView {
	v := QueueView{ProjectID: q.ProjectID, Project: q.Project, TargetBranch: q.TargetBranch, Head: headView(q),
		Frozen: frozenView(q), Waiting: make([]QueuedChangeView, 0, len(q.Waiting))}
	for i, c := range q.Waiting {
		w := QueuedChangeView{Position: i + 1, OperationID: c.OperationID, MRIID: c.MRIID, MRWebURL: c.MRWebURL, Title: c.Title,
			SubjectID: c.SubjectID, TargetKey: c.TargetKey, ReadyAt: c.ReadyAt.UTC()}
		if !c.FrontAt.IsZero() {
			by, at := c.FrontBy, c.FrontAt.UTC()
			w.MovedToFrontBy, w.MovedToFrontAt = &by, &at
		}
		v.Waiting = append(v.Waiting, w)
	}
	return v
}

// listQueues serves GET /api/v1/queues (any token): every merge queue of
// the installation's platform, by project and branch, with its head, how
// many changes wait and its freeze. A queue appears once a change joined
// it or an operator froze it.
func (h *Handler) listQueues(w http.ResponseWriter, r *http.Request) {
	if !noQueryParams(w, r) {
		return
	}
	qs, err := h.cfg.Queues.ListQueues(r.Context())
	if err != nil {
		h.log.Error("listing the merge queues", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not read the merge queues, try again"})
		return
	}
	out := QueueListView{Queues: make([]QueueSummaryView, 0, len(qs))}
	for _, q := range qs {
		out.Queues = append(out.Queues, NewQueueSummaryView(q))
	}
	writeJSON(w, http.StatusOK, out)
}

// getQueue serves GET /api/v1/queues/{project}/{branch} (any token): the
// queue with its waiting changes in order. A queue nobody used yet is
// answered empty (200), as every branch has one. A branch ending in
// /freeze or /unfreeze is taken for a GET of those actions: 405.
func (h *Handler) getQueue(w http.ResponseWriter, r *http.Request) {
	projectID, branch, ok := queuePath(w, r)
	if !ok {
		return
	}
	for _, action := range []string{"/freeze", "/unfreeze"} {
		if strings.HasSuffix(branch, action) {
			// Most likely a GET of a POST-only action, not a branch named
			// so: answered as the router answers a wrong method.
			w.Header().Set("Allow", http.MethodPost)
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method GET not allowed on " + action[1:] + "; use POST"})
			return
		}
	}
	if !noQueryParams(w, r) {
		return
	}
	q, err := h.cfg.Queues.Queue(r.Context(), projectID, branch)
	if err != nil {
		h.log.Error("reading a merge queue", "project_id", projectID, "branch", branch, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not read the merge queue, try again"})
		return
	}
	writeJSON(w, http.StatusOK, NewQueueView(q))
}

// freezeQueue serves POST /api/v1/queues/{project}/{branch}/freeze
// (frozen) and /unfreeze (operator token) with the body {"reason": "..."}:
// a reason is required to freeze, optional to unfreeze (an empty body is
// no reason). The actor is the token's id. While a queue is frozen no
// change takes its head (the one merging finishes); freezing a frozen
// queue keeps the first freeze. The answer is the queue then.
func (h *Handler) freezeQueue(frozen bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		projectID, branch, ok := queuePath(w, r)
		if !ok {
			return
		}
		what := "unfreeze"
		if frozen {
			what = "freeze"
		}
		reason, ok := decodeReason(w, r, h.cfg.MaxBodyBytes, frozen, "to freeze a queue: say why nothing may merge")
		if !ok {
			return
		}
		actor := requestTokenID(r)
		q, err := h.cfg.Queues.FreezeQueue(r.Context(), projectID, branch, frozen, actor, reason)
		var nq *NoQueueError
		if errors.As(err, &nq) {
			status := http.StatusConflict
			if nq.Unknown {
				status = http.StatusNotFound
			}
			writeJSON(w, status, map[string]string{"error": "cannot freeze: " + nq.Reason})
			return
		}
		if err != nil {
			h.log.Error("freezing a merge queue", "project_id", projectID, "branch", branch, "frozen", frozen, "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not " + what + " the merge queue, try again"})
			return
		}
		h.log.Info("merge queue frozen or unfrozen", "action", what, "project_id", projectID, "branch", branch, "actor", actor, "role", tokenRole(r), "reason", reason)
		writeJSON(w, http.StatusOK, NewQueueView(q))
	})
}

// moveToFront serves POST /api/v1/changes/{id}/front (operator token) with
// the body {"reason": "..."} (optional; an empty body is no reason): the
// change, waiting in its branch's merge queue, becomes the next to take
// the head (after the changes moved before it). 409 when it does not
// wait in a queue. The answer is its queue after the move.
func (h *Handler) moveToFront(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	reason, ok := decodeReason(w, r, h.cfg.MaxBodyBytes, false, "")
	if !ok {
		return
	}
	actor := requestTokenID(r)
	q, err := h.cfg.Queues.MoveToFront(r.Context(), id, actor, reason)
	var nq *NotQueuedError
	switch {
	case errors.Is(err, ErrNotFound):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no change with id " + id})
		return
	case errors.As(err, &nq):
		writeJSON(w, http.StatusConflict, map[string]string{"error": nq.Error(), "operation_id": id})
		return
	case err != nil:
		h.log.Error("moving a change to the front of its merge queue", "operation_id", id, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not move the change to the front of its merge queue, try again"})
		return
	}
	noteOperation(r.Context(), id)
	h.log.Info("moved to the front of its merge queue", "operation_id", id, "actor", actor, "role", tokenRole(r), "reason", reason)
	writeJSON(w, http.StatusOK, NewQueueView(q))
}

// noQueryParams answers 400 naming the first query parameter of r, which
// the queues' reads do not take (a misspelled filter would otherwise pass
// unnoticed), and reports whether r has none.
func noQueryParams(w http.ResponseWriter, r *http.Request) bool {
	keys := slices.Sorted(maps.Keys(r.URL.Query()))
	if len(keys) == 0 {
		return true
	}
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("unknown query parameter %q: the queues' reads take none", keys[0])})
	return false
}

// queuePath reads the project id and the branch of a queue's path; when
// they are not one, it answers 400 and returns false.
func queuePath(w http.ResponseWriter, r *http.Request) (int64, string, bool) {
	vars := mux.Vars(r)
	projectID, err := strconv.ParseInt(vars["project"], 10, 64)
	if err != nil || projectID < 1 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("project must be a numeric project id (GitLab's project id, GitHub's repository id), not %q", vars["project"]),
			"fields": []FieldError{{Field: "project", Message: "is not a numeric project id"}}})
		return 0, "", false
	}
	branch := vars["branch"]
	if msg := textcheck.Problem(branch); msg != "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "branch " + msg, "fields": []FieldError{{Field: "branch", Message: msg}}})
		return 0, "", false
	}
	return projectID, branch, true
}

// reasonRequest is the body of a freeze, an unfreeze and a move to the
// front.
type reasonRequest struct {
	Reason string `json:"reason"`
}

// decodeReason reads the body {"reason": "..."} (an empty body is no
// reason) and checks the reason: one line of text (textcheck), at most
// maxReasonChars, and when required not blank (required names why). It
// returns the reason without surrounding spaces; when the body or the
// reason does not do, it answers 400 naming reason (413 for a body over
// limit) and returns false.
func decodeReason(w http.ResponseWriter, r *http.Request, limit int64, required bool, why string) (string, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"error": fmt.Sprintf("body larger than %d bytes", tooLarge.Limit)})
		return "", false
	case err != nil:
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "reading the request body failed"})
		return "", false
	}
	var req reasonRequest
	if len(bytes.TrimSpace(body)) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !decodeBody(w, r, limit, &req) {
			return "", false
		}
	}
	bad := func(msg string) (string, bool) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "reason " + msg, "fields": []FieldError{{Field: "reason", Message: msg}}})
		return "", false
	}
	if msg := textcheck.Problem(req.Reason); msg != "" {
		return bad(msg)
	}
	reason := strings.TrimSpace(req.Reason)
	switch {
	case required && reason == "":
		return bad("is required " + why)
	case utf8.RuneCountInString(reason) > maxReasonChars:
		return bad(fmt.Sprintf("is longer than %d characters", maxReasonChars))
	}
	return reason, true
}
