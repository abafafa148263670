package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"changebot/flows/rules"
	"changebot/templates"
)

// Engine is what the API asks the flow engine: check and submit a change,
// read one, act on one, and what a change's page shows. Its errors are
// api's (ErrNotFound, ErrOverloaded, *ValidationError, *CheckError,
// *UnavailableError, *IdempotencyConflictError, *BindingHeldError,
// *rules.NotApplicableError) or a failure to answer at all.
type Engine interface {
	// Platform is the installation's platform (rules.PlatformGitLab or
	// rules.PlatformGitHub).
	Platform() string
	// Check lists every problem of s the engine finds without the platform
	// (fields, paths, names); nil when there is none.
	Check(s Submission) []FieldError
	// Submit creates the change (created true) or, for an Idempotency-Key
	// used before with the same body, answers the change it created.
	Submit(ctx context.Context, s Submission) (c Change, created bool, err error)
	Act(ctx context.Context, id string, a rules.Action, p rules.ActionParams) (Change, error)
	// Get is the change and its events, upcast, in sequence order.
	Get(ctx context.Context, id string) (Change, []Event, error)
	// Page is Get with the status view of the change's page (the status
	// comment's), each event's SourceWords set.
	Page(ctx context.Context, id string) (Change, []Event, templates.StatusView, error)
	// Replay rebuilds the state events give at the moment at.
	Replay(events []Event, at time.Time) Replayed
}

// ChangeLister reads pages of changes, newest first; changebot list uses
// it too.
type ChangeLister interface {
	ListChanges(ctx context.Context, p ListParams) ([]Change, error)
}

// Store is what the API reads of the changes besides the engine: pages of
// them, and one change's history in one snapshot (a change that does not
// exist is ErrNotFound); and where logged-out web sessions are kept
// (Sessions).
type Store interface {
	ChangeLister
	Sessions
	ReadHistory(ctx context.Context, id string) (History, error)
	// ReadOverview counts the changes for the overview page at now.
	ReadOverview(ctx context.Context, now time.Time) (Overview, error)
}

// Queues are the merge queues of the target branches (issue 22): read
// them, freeze or unfreeze one, move a waiting change to the front of its
// queue. Its errors are api's (ErrNotFound for an unknown change,
// *NotQueuedError) or a failure to answer at all.
type Queues interface {
	// ListQueues lists the queues of the installation's platform by
	// project and branch, each with its WaitingCount (Waiting nil). A
	// queue is listed once a change joined it or an operator froze it.
	ListQueues(ctx context.Context) ([]Queue, error)
	// Queue reads the queue of a project's target branch with its
	// waiting changes in order; one nobody used yet is empty, not an
	// error.
	Queue(ctx context.Context, projectID int64, branch string) (Queue, error)
	// FreezeQueue freezes (frozen) or unfreezes that queue as actor for
	// reason and returns it as it is then; freezing a frozen queue keeps
	// the first freeze.
	FreezeQueue(ctx context.Context, projectID int64, branch string, frozen bool, actor, reason string) (Queue, error)
	// MoveToFront makes change id, waiting in its queue, the next to take
	// the head, as actor for reason, and returns that queue after the
	// move.
	MoveToFront(ctx context.Context, id, actor, reason string) (Queue, error)
}

// Settings are the runtime settings: the values in effect, and the one
// audited write. An unknown key, and a value the settings refuse, are a
// *RefusedError.
type Settings interface {
	List(project string) []SettingView
	Lookup(key, project string) (SettingView, error)
	// Set stores (null: removes) the value of key for project ("":
	// global) as updatedBy and returns the scope written.
	Set(ctx context.Context, key, project string, rawJSON json.RawMessage, updatedBy string) (scope string, err error)
}

// Config wires a Handler.
type Config struct {
	Engine   Engine
	Store    Store
	Settings Settings
	Queues   Queues
	// Notifications is the log of outgoing notifications that GET
	// /api/v1/notifications reads; nil answers an empty log.
	Notifications Notifications
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
	// SessionTTL is how long a web session lasts after its login
	// (CHANGEBOT_WEB_SESSION_TTL), from MinSessionTTL to MaxSessionTTL;
	// zero means DefaultSessionTTL.
	SessionTTL time.Duration
	// NowFunc is the clock of stuck=true and of the web sessions' issue
	// times and expiry (tests move it past a deadline); nil means
	// time.Now.
	NowFunc func() time.Time
}

// Handler serves the REST API and the web pages (Mount).
type Handler struct {
	cfg Config
	log *slog.Logger
	now func() time.Time
	// attn keeps the needs-attention groups briefly (attentionTTL).
	attn attentionCache
}

// New checks cfg and returns the Handler; it starts nothing.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.Engine == nil || cfg.Store == nil || cfg.Settings == nil || cfg.Queues == nil:
		return nil, errors.New("api: Engine, Store, Settings and Queues are required")
	case cfg.MaxBodyBytes < 1:
		return nil, errors.New("api: MaxBodyBytes must be positive")
	case cfg.SessionTTL != 0 && (cfg.SessionTTL < MinSessionTTL || cfg.SessionTTL > MaxSessionTTL):
		return nil, fmt.Errorf("api: SessionTTL must be from %s to %s, got %s", MinSessionTTL, MaxSessionTTL, cfg.SessionTTL)
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
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
	v1.HandleFunc("/schema/changebot.yml", serveChangebotSchema).Methods(http.MethodGet)
	v1.Handle("/changes", h.auth(RoleSubmitter, http.HandlerFunc(h.submitChange))).Methods(http.MethodPost)
	v1.Handle("/changes", h.auth("", http.HandlerFunc(h.serveChangeList))).Methods(http.MethodGet)
	v1.Handle("/changes/{id}", h.auth("", http.HandlerFunc(h.getChange))).Methods(http.MethodGet)
	v1.Handle("/changes/{id}/events", h.auth("", http.HandlerFunc(h.getEvents))).Methods(http.MethodGet)
	v1.Handle("/changes/{id}/{action:retry|resume|cancel}", h.auth("", http.HandlerFunc(h.changeAction))).Methods(http.MethodPost)
	v1.Handle("/changes/{id}/front", h.auth(RoleOperator, TextInput(h.cfg.MaxBodyBytes, true, http.HandlerFunc(h.moveToFront)))).Methods(http.MethodPost)
	v1.Handle("/queues", h.auth("", http.HandlerFunc(h.listQueues))).Methods(http.MethodGet)
	// A branch may hold slashes (release/1.0), escaped as %2F or not: the
	// rest of the path is the branch, but for a last /freeze or
	// /unfreeze of a POST.
	v1.Handle("/queues/{project}/{branch:.+}/freeze", h.auth(RoleOperator, TextInput(h.cfg.MaxBodyBytes, true, h.freezeQueue(true)))).Methods(http.MethodPost)
	v1.Handle("/queues/{project}/{branch:.+}/unfreeze", h.auth(RoleOperator, TextInput(h.cfg.MaxBodyBytes, true, h.freezeQueue(false)))).Methods(http.MethodPost)
	v1.Handle("/queues/{project}/{branch:.+}", h.auth("", http.HandlerFunc(h.getQueue))).Methods(http.MethodGet)
	v1.Handle("/notifications", h.auth("", http.HandlerFunc(h.listNotifications))).Methods(http.MethodGet)
	v1.Handle("/settings", h.auth("", http.HandlerFunc(h.listSettings))).Methods(http.MethodGet)
	v1.Handle("/settings/{key}", h.auth("", http.HandlerFunc(h.getSetting))).Methods(http.MethodGet)
	v1.Handle("/settings/{key}", h.auth(RoleOperator, TextInput(h.cfg.MaxBodyBytes, true, http.HandlerFunc(h.putSetting)))).Methods(http.MethodPut)
	h.webRoutes(root)
}
