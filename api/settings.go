package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/mux"
)

// settingRequest is the body of PUT /api/v1/settings/{key}.
type settingRequest struct {
	Value   json.RawMessage `json:"value"`
	Project projectRef      `json:"project"`
}

// listSettings answers GET /api/v1/settings[?project=P]: every setting's
// effective value for the project (or the global ones).
func (h *Handler) listSettings(w http.ResponseWriter, r *http.Request) {
	if !onlyProjectParam(w, r) {
		return
	}
	views := []SettingView{}
	views = append(views, h.cfg.Settings.List(r.URL.Query().Get("project"))...)
	writeJSON(w, http.StatusOK, views)
}

// getSetting answers GET /api/v1/settings/{key}[?project=P].
func (h *Handler) getSetting(w http.ResponseWriter, r *http.Request) {
	if !onlyProjectParam(w, r) {
		return
	}
	v, err := h.cfg.Settings.Lookup(mux.Vars(r)["key"], r.URL.Query().Get("project"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// putSetting answers PUT /api/v1/settings/{key} with body {"value": ...,
// "project": optional}: it validates, stores and audits the value (actor:
// the token's TokenID); every replica sees it within seconds. A null value
// removes the stored value of that scope. A value the settings refuse
// (*RefusedError: an unknown key, wrong type, negative count, a duration
// under its minimum, project scope for a global-only key, a rule between
// two settings broken) answers 400 naming the key(s) and the problem, and
// changes nothing. An unknown key is refused before the body is read.
func (h *Handler) putSetting(w http.ResponseWriter, r *http.Request) {
	key := mux.Vars(r)["key"]
	if _, err := h.cfg.Settings.Lookup(key, ""); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	var req settingRequest
	if !decodeBody(w, r, 64<<10, &req) {
		return
	}
	if len(bytes.TrimSpace(req.Value)) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `"value" is required (null removes the stored value)`})
		return
	}
	project := string(req.Project)
	actor := requestTokenID(r)
	scope, err := h.cfg.Settings.Set(r.Context(), key, project, req.Value, actor)
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	case err != nil:
		h.log.Error("saving setting", "key", key, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not store the setting, try again"})
		return
	}
	h.log.Info("setting changed", "key", key, "scope", scope, "actor", actor, "role", tokenRole(r))
	v, err := h.cfg.Settings.Lookup(key, project)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// SettingView is a setting as the API and the CLI show it (openapi.json
// Setting).
type SettingView struct {
	Key       string          `json:"key"`
	Scope     string          `json:"scope"`
	Value     json.RawMessage `json:"value"`
	UpdatedBy string          `json:"updated_by"`
	UpdatedAt *time.Time      `json:"updated_at"`
	Source    string          `json:"source"`
}

// onlyProjectParam answers 400 naming a query parameter the settings reads
// do not take (only project), as GET /api/v1/changes refuses an unknown
// filter: a misspelled ?proj= would otherwise answer the global values. It
// reports whether the request may go on.
func onlyProjectParam(w http.ResponseWriter, r *http.Request) bool {
	for k := range r.URL.Query() {
		if k != "project" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("unknown query parameter %q: the settings take only project", k)})
			return false
		}
	}
	return true
}
