package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gorilla/mux"
)

// RolloutView is a rollout's progress (issue 25 point 3), the body of GET
// /api/v1/rollouts/{id} (openapi.json Rollout): the changes submitted with
// one rollout_id, counted by status in one aggregate.
type RolloutView struct {
	RolloutID string `json:"rollout_id"`
	// State is running, needs_person, failed, merged or done
	// (docs/api.md: the rule).
	State string `json:"state"`
	Total int    `json:"total"`
	// Counts are the changes by binding status (only statuses some change
	// is in).
	Counts map[string]int `json:"counts"`
	// Applied, Failed and NeedsPerson count the changes VALIDATED, failed
	// and waiting for a person.
	Applied     int `json:"applied"`
	Failed      int `json:"failed"`
	NeedsPerson int `json:"needs_person"`
	// Attention lists the changes that failed, then those that wait for a
	// person, at most MaxRolloutAttention; More counts the others.
	Attention []RolloutChangeView `json:"attention"`
	More      int                 `json:"more"`
	// FirstCreatedAt is when its first change was submitted,
	// LastUpdatedAt when one last moved (UTC).
	FirstCreatedAt time.Time `json:"first_created_at"`
	LastUpdatedAt  time.Time `json:"last_updated_at"`
}

// MaxRolloutAttention bounds RolloutView.Attention.
const MaxRolloutAttention = 100

// RolloutChangeView is a change a rollout's progress lists.
type RolloutChangeView struct {
	OperationID string `json:"operation_id"`
	Project     string `json:"project"`
	SubjectID   string `json:"subject_id"`
	TargetKey   string `json:"target_key"`
	// Standing is failed or needs_person.
	Standing     string   `json:"standing"`
	Status       string   `json:"status"`
	Step         StepView `json:"step"`
	Detail       string   `json:"detail"`
	MergeRequest *MRView  `json:"merge_request"`
}

// Rollouts reads rollouts: ReadRollout answers ErrNotFound for an id no
// change was submitted with.
type Rollouts interface {
	ReadRollout(ctx context.Context, id string) (RolloutView, error)
}

// getRollout serves GET /api/v1/rollouts/{id}.
func (h *Handler) getRollout(w http.ResponseWriter, r *http.Request) {
	if !knownParams(w, r) {
		return
	}
	v, status, msg := h.readRollout(r.Context(), mux.Vars(r)["id"])
	if status != http.StatusOK {
		writeJSON(w, status, map[string]string{"error": msg})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// readRollout reads rollout id for the API and the page: the view, or the
// status and message to answer instead (404: no change has the id).
func (h *Handler) readRollout(ctx context.Context, id string) (RolloutView, int, string) {
	notFound := "no change was submitted with rollout_id " + id
	if h.cfg.Rollouts == nil {
		return RolloutView{}, http.StatusNotFound, notFound
	}
	v, err := h.cfg.Rollouts.ReadRollout(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return RolloutView{}, http.StatusNotFound, notFound
	case err != nil:
		h.log.Error("reading rollout", "rollout_id", id, "err", err)
		return RolloutView{}, http.StatusServiceUnavailable, "could not read the rollout"
	}
	return v, http.StatusOK, ""
}

// rolloutPage is the data of rollout.html.
type rolloutPage struct {
	webPage
	// Missing says why there is no rollout to show (the page answers its
	// status then).
	Missing string
	Rollout RolloutView
}

// webRollout serves /ui/rollouts/{id}: a rollout's progress, as GET
// /api/v1/rollouts/{id} reads it; refreshed while it is not done.
func (h *Handler) webRollout(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	v, status, msg := h.readRollout(r.Context(), id)
	if status == http.StatusServiceUnavailable {
		http.Error(w, "could not read the rollout, try again", status)
		return
	}
	p := rolloutPage{webPage: h.page(r, "Rollout "+id), Missing: msg, Rollout: v}
	if status == http.StatusNotFound {
		p.Title = "No such rollout"
	} else if v.State != "done" {
		p.Refresh = webRefreshSeconds
	}
	h.render(w, status, "rollout.html", p)
}
