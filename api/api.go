package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"changebot/flows"
	"changebot/flows/rules"
	"changebot/settings"
	"changebot/store"
	"changebot/templates"
)

// Engine is what the API asks the flow engine (*flows.Engine): submit a
// change, read one, act on one, and render the status a page shows.
type Engine interface {
	// Platform is the installation's platform (store.PlatformGitLab or
	// store.PlatformGitHub).
	Platform() string
	Submit(ctx context.Context, p flows.SubmitParams) (op store.Operation, created bool, err error)
	Act(ctx context.Context, id string, a rules.Action, p rules.ActionParams) (store.Operation, error)
	Get(ctx context.Context, id string) (store.Operation, []store.Event, error)
	StatusView(op store.Operation, events []store.Event) templates.StatusView
}

// ChangeLister reads pages of changes (the store: *postgres.Store,
// *sqlite.Store); ListChanges needs nothing more, so changebot list uses
// it too.
type ChangeLister interface {
	DB() store.DBTX
	ListChanges(ctx context.Context, db store.DBTX, p store.ListParams) ([]store.Operation, error)
}

// Store is what the API reads from the store itself: pages of changes and
// one change's history in one snapshot.
type Store interface {
	ChangeLister
	ReadHistory(ctx context.Context, id string) (store.History, error)
}

// Settings is the runtime settings cache (*settings.Cache): the values in
// effect, and the one audited write.
type Settings interface {
	Get(key, project string) settings.Value
	List(project string) []settings.Value
	Lookup(key, project string) (settings.Value, error)
	Set(ctx context.Context, key, project string, rawJSON json.RawMessage, updatedBy string) error
}

// Config wires a Handler.
type Config struct {
	Engine   Engine
	Store    Store
	Settings Settings
	// Refusals counts the approval callbacks refused for a bad signature,
	// which the hints of changes waiting in APPROVAL_SENT mention; nil
	// counts none.
	Refusals *CallbackRefusals
	// Tokens are the API tokens and their roles (CHANGEBOT_API_TOKENS); a
	// web session is made with one of them.
	Tokens []Token
	// ExternalURL is the bot's public base URL, without a trailing slash:
	// status_url and the hints' links start with it.
	ExternalURL string
	// MaxBodyBytes bounds a request body, in bytes; at least 1.
	MaxBodyBytes int64
	// Logger receives the handlers' records; nil discards them.
	Logger *slog.Logger
	// NowFunc is the clock of stuck=true (tests move it past a deadline);
	// nil means time.Now.
	NowFunc func() time.Time
}

// Handler serves the REST API and the web pages (Mount).
type Handler struct {
	cfg Config
	log *slog.Logger
	now func() time.Time
}

// New checks cfg and returns the Handler; it starts nothing.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.Engine == nil || cfg.Store == nil || cfg.Settings == nil:
		return nil, errors.New("api: Engine, Store and Settings are required")
	case cfg.MaxBodyBytes < 1:
		return nil, errors.New("api: MaxBodyBytes must be positive")
	}
	h := &Handler{cfg: cfg, log: cfg.Logger, now: cfg.NowFunc}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	return h, nil
}

// Mount adds the REST API (under /api/v1) and the web pages (under /ui)
// to root. A path or method none of root's routes serves, under /api/v1
// too, is answered by Fallback(root): the caller sets it as root's
// NotFoundHandler and MethodNotAllowedHandler, so that the routes it
// mounts itself (webhooks, callbacks, health) answer the same way.
func (h *Handler) Mount(root *mux.Router) {
	fallback := Fallback(root)
	v1 := root.PathPrefix("/api/v1").Subrouter()
	// gorilla/mux answers some wrong methods under a sub-router with its
	// NotFound handler (PUT /api/v1/changes was a 404): the fallback
	// itself looks for routes of the path.
	v1.NotFoundHandler, v1.MethodNotAllowedHandler = fallback, fallback
	v1.HandleFunc("/openapi.json", serveOpenAPI).Methods(http.MethodGet)
	v1.Handle("/changes", h.auth(RoleSubmitter, http.HandlerFunc(h.submitChange))).Methods(http.MethodPost)
	v1.Handle("/changes", h.auth("", http.HandlerFunc(h.serveChangeList))).Methods(http.MethodGet)
	v1.Handle("/changes/{id}", h.auth("", http.HandlerFunc(h.getChange))).Methods(http.MethodGet)
	v1.Handle("/changes/{id}/events", h.auth("", http.HandlerFunc(h.getEvents))).Methods(http.MethodGet)
	v1.Handle("/changes/{id}/{action:retry|resume|cancel}", h.auth("", http.HandlerFunc(h.changeAction))).Methods(http.MethodPost)
	v1.Handle("/settings", h.auth("", http.HandlerFunc(h.listSettings))).Methods(http.MethodGet)
	v1.Handle("/settings/{key}", h.auth("", http.HandlerFunc(h.getSetting))).Methods(http.MethodGet)
	v1.Handle("/settings/{key}", h.auth(RoleOperator, TextInput(h.cfg.MaxBodyBytes, true, http.HandlerFunc(h.putSetting)))).Methods(http.MethodPut)
	h.webRoutes(root)
}
