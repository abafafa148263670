package bot

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"changebot/api"
	"changebot/commands"
	"changebot/config"
	"changebot/flows"
	"changebot/flows/rules"
	"changebot/internal/jsonbody"
	"changebot/platform/gitlab"
	"changebot/settings"
	"changebot/store"
	"changebot/webhooks"
)

// intakeCloser is a webhook handler with a group commit to drain (Run
// closes it after the HTTP server stopped).
type intakeCloser interface {
	Close(ctx context.Context) error
}

// intakeDispatcher is the dispatcher the webhook intake stores for: on
// PostgreSQL a batch is stored by one autocommit statement and its jobs are
// enqueued by the dispatcher (one durable round trip per request, issue
// 12). On SQLite nil: the intake stores a batch with its jobs in one
// transaction, which costs no network round trip, and a second write
// transaction per batch would queue on SQLite's one writer.
func (a *App) intakeDispatcher() *webhooks.Dispatcher {
	if a.db.Engine() != config.EnginePostgres {
		return nil
	}
	return a.dispatcher
}

func (a *App) routes(fm *flows.Metrics) (http.Handler, error) {
	wm := webhooks.NewMetrics(a.registry)
	// The intake and callback handlers recover their own panics: counted
	// with the router's, so that changebot_panics_total has them all.
	wm.AlsoCountPanics(fm.PanicCounter().WithLabelValues(panicSiteHTTP))
	var hook http.Handler
	var err error
	if a.cfg.Platform == config.PlatformGitHub {
		hook, err = a.githubHook(wm)
	} else {
		var gl *webhooks.GitLabHandler
		gl, err = webhooks.NewGitLabHandler(webhooks.GitLabConfig{Secrets: a.cfg.WebhookSecrets,
			MaxBodyBytes: a.cfg.MaxBodyBytes, Store: a.store, Dispatcher: a.intakeDispatcher(), Decode: gitlab.DecodeHook, Logger: a.log, Metrics: wm,
			NoteHasCommand: commands.MayHoldCommand})
		hook = gl
	}
	if err != nil {
		return nil, err
	}
	if c, ok := hook.(intakeCloser); ok {
		a.intake = c
	}
	cbCfg := webhooks.CallbackConfig{Secret: a.cfg.CallbackSecret, MaxBodyBytes: a.cfg.MaxBodyBytes,
		Approvals: a.engine, Deploys: a.engine, Logger: a.log, Metrics: wm}
	approvalCfg := cbCfg
	approvalCfg.OnBadSignature = a.refusals.refused
	approvalCB, err := webhooks.NewApprovalCallbackHandler(approvalCfg)
	if err != nil {
		return nil, err
	}
	deployCB, err := webhooks.NewDeployCallbackHandler(cbCfg)
	if err != nil {
		return nil, err
	}
	r := mux.NewRouter()
	// One fallback for both routers and both cases: gorilla/mux answers
	// some wrong methods under the /api/v1 sub-router with its NotFound
	// handler (PUT /api/v1/changes was a 404), so the fallback itself looks
	// for routes of the path.
	fallback := noRouteOrMethod(r)
	r.NotFoundHandler, r.MethodNotAllowedHandler = fallback, fallback
	r.Handle(a.cfg.WebhookPath(), hook).Methods(http.MethodPost)
	r.Handle("/callbacks/approval", textInput(cbCfg.MaxBodyBytes, true, approvalCB)).Methods(http.MethodPost)
	r.Handle("/callbacks/deploy", textInput(cbCfg.MaxBodyBytes, true, deployCB)).Methods(http.MethodPost)
	v1 := r.PathPrefix("/api/v1").Subrouter()
	v1.NotFoundHandler, v1.MethodNotAllowedHandler = fallback, fallback
	v1.HandleFunc("/openapi.json", serveOpenAPI).Methods(http.MethodGet)
	v1.Handle("/changes", a.auth(api.RoleSubmitter, http.HandlerFunc(a.submitChange))).Methods(http.MethodPost)
	v1.Handle("/changes", a.auth("", http.HandlerFunc(a.serveChangeList))).Methods(http.MethodGet)
	v1.Handle("/changes/{id}", a.auth("", http.HandlerFunc(a.getChange))).Methods(http.MethodGet)
	v1.Handle("/changes/{id}/events", a.auth("", http.HandlerFunc(a.getEvents))).Methods(http.MethodGet)
	v1.Handle("/changes/{id}/{action:retry|resume|cancel}", a.auth("", http.HandlerFunc(a.changeAction))).Methods(http.MethodPost)
	v1.Handle("/settings", a.auth("", http.HandlerFunc(a.listSettings))).Methods(http.MethodGet)
	v1.Handle("/settings/{key}", a.auth("", http.HandlerFunc(a.getSetting))).Methods(http.MethodGet)
	v1.Handle("/settings/{key}", a.auth(api.RoleOperator, textInput(a.cfg.MaxBodyBytes, true, http.HandlerFunc(a.putSetting)))).Methods(http.MethodPut)
	a.webRoutes(r)
	r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	r.HandleFunc("/readyz", a.readyz)
	r.Handle("/metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
	return accessLog(a.log, r, recoverPanics(fm.PanicCounter(), a, textInput(a.cfg.MaxBodyBytes, false, r))), nil
}

// panicSiteHTTP is the where label of changebot_panics_total for a panic
// of an HTTP handler: the router's recovery and the webhook and callback
// handlers' own (webhooks.Metrics.AlsoCountPanics).
const panicSiteHTTP = "http"

// recoverPanics turns a handler panic into a 500 and a counted, logged
// error (STYLE 13).
func recoverPanics(c *prometheus.CounterVec, a *App, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				c.WithLabelValues(panicSiteHTTP).Inc()
				a.log.Error("handler panicked", "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error"})
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// auth checks "Authorization: Bearer <token>" (any case of the scheme) in constant time against every
// configured API token; role "" accepts any role (viewers included: the
// GET endpoints), "submitter" also accepts operators but not viewers.
func (a *App) auth(role string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The scheme is case-insensitive (RFC 9110 §11.1).
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		ok = ok && strings.EqualFold(scheme, "Bearer")
		got = strings.TrimSpace(got)
		matched, id := "", ""
		for _, t := range a.cfg.APITokens {
			if subtle.ConstantTimeCompare([]byte(got), []byte(t.Token)) == 1 && ok {
				matched, id = t.Role, tokenID(t.Token)
			}
		}
		switch {
		case matched == "":
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or invalid bearer token"})
		case role == api.RoleOperator && matched != api.RoleOperator:
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "this needs an operator token"})
		case role == api.RoleSubmitter && matched == api.RoleViewer:
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "a viewer token only reads; this needs a submitter or operator token"})
		default:
			ctx := context.WithValue(r.Context(), tokenRoleKey{}, matched)
			next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, tokenIDKey{}, id)))
		}
	})
}

// tokenIDKey is the request context key of the matched API token's id
// (tokenID).
type tokenIDKey struct{}

// tokenID names an API token without revealing it: "api:" and the first 16
// hex digits of its SHA-256. It is recorded as submitted_by on the changes
// the token submits, so that a submitter token may cancel its own changes.
func tokenID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "api:" + hex.EncodeToString(sum[:8])
}

// requestTokenID returns the id of the request's API token ("" when auth
// did not run).
func requestTokenID(r *http.Request) string {
	id, _ := r.Context().Value(tokenIDKey{}).(string)
	return id
}

func (a *App) readyz(w http.ResponseWriter, r *http.Request) {
	if status := a.readiness(r.Context()); status != "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": status})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// readiness returns why this replica is not ready ("" when it is): it is
// shutting down, the database is unreachable, or the migrations are not
// applied. /readyz and changebot_ready both answer from it.
func (a *App) readiness(ctx context.Context) string {
	if a.draining.Load() {
		return "shutting down"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := a.store.Ping(ctx); err != nil {
		return "database unreachable"
	}
	if _, current, err := a.db.MigrationStatus(); err != nil || !current {
		return "migrations not applied: run changebot migrate"
	}
	return ""
}

// registerReady exports changebot_ready: 1 when this replica would answer
// /readyz with 200, else 0, checked at each scrape.
func (a *App) registerReady() {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "changebot_ready",
		Help: "1 when this replica is ready (GET /readyz answers 200: database reachable, migrations applied, not shutting down), else 0; read at each scrape."},
		func() float64 {
			if a.readiness(context.Background()) != "" {
				return 0
			}
			return 1
		})
	// A registry shared by several Apps (tests) keeps the first one.
	_ = a.registry.Register(g)
}

// noRoute answers a path the bot does not serve: 404 with the API's error
// body (openapi.json's Error), as every other 4xx of the API, rather than
// the router's plain-text "404 page not found". Under /ui/ it stays a
// plain page.
func noRoute(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/ui/") {
		http.NotFound(w, r)
		return
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such endpoint: " + r.Method + " " + r.URL.Path + " (see /api/v1/openapi.json)"})
}

// methodNotAllowed answers a known path asked with a method it does not
// serve: 405 with the API's error body instead of an empty one, and
// allow, the methods the path serves, as its Allow header (RFC 9110
// §15.5.6).
func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow []string) {
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeJSON(w, http.StatusMethodNotAllowed, map[string]string{
		"error": r.Method + " is not allowed on " + r.URL.Path + " (allowed: " + strings.Join(allow, ", ") + ")"})
}

// noRouteOrMethod returns the handler of a request no route of root (its
// sub-routers included) takes: methodNotAllowed when a route serves its
// path with other methods, noRoute otherwise.
func noRouteOrMethod(root *mux.Router) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if allow := pathMethods(root, r); len(allow) > 0 {
			methodNotAllowed(w, r, allow)
			return
		}
		noRoute(w, r)
	})
}

// pathMethods returns, sorted, the methods the routes of root with a
// method restriction serve r's path with.
func pathMethods(root *mux.Router, r *http.Request) []string {
	var allow []string
	_ = root.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		methods, err := route.GetMethods()
		if route.GetHandler() == nil || err != nil {
			return nil // a sub-router, or a route taking every method
		}
		var m mux.RouteMatch
		if route.Match(r, &m) || errors.Is(m.MatchErr, mux.ErrMethodMismatch) {
			for _, method := range methods {
				if !slices.Contains(allow, method) {
					allow = append(allow, method)
				}
			}
		}
		return nil
	})
	slices.Sort(allow)
	return allow
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

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

// params turns the request into flows.SubmitParams, and lists the fields
// that did not arrive as valid UTF-8, and the files without content that
// are not deleted.
func (req changeRequest) params() (flows.SubmitParams, []flows.FieldError) {
	var bad []flows.FieldError
	str := func(field string, t jsonText) string {
		if t.invalid {
			bad = append(bad, flows.FieldError{Field: field, Message: "is not valid UTF-8"})
		}
		return t.s
	}
	p := flows.SubmitParams{
		SubjectID: str("subject_id", req.SubjectID), TargetKey: str("target_key", req.TargetKey),
		Project: string(req.Project), TargetBranch: str("target_branch", req.TargetBranch),
		Title: str("title", req.Title), Description: str("description", req.Description),
		RequestedBy: str("requested_by", req.RequestedBy),
	}
	for i, f := range req.Files {
		content := fmt.Sprintf("files[%d].content", i)
		p.Files = append(p.Files, store.File{Path: str(fmt.Sprintf("files[%d].path", i), f.Path),
			Content: str(content, f.Content), Action: str(fmt.Sprintf("files[%d].action", i), f.Action)})
		// A file without content would be written empty: only a delete
		// goes without it ("" is an empty file's content).
		if !f.Content.set && f.Action.s != "delete" {
			bad = append(bad, flows.FieldError{Field: content, Message: `is required unless action is "delete" ("" for an empty file)`})
		}
	}
	return p, bad
}

// decodeBody reads r's body, at most limit bytes, into v: one JSON value,
// unknown fields refused, nothing but whitespace after it, no key twice in
// an object (encoding/json would keep the last silently): all of it
// jsonbody.DecodeStrict.
// When it does not, it answers 413 or 400 naming the problem in the API's
// words (JSON field paths with indexes and JSON types, never Go's:
// jsonbody.Describe) and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"error": fmt.Sprintf("body larger than %d bytes", tooLarge.Limit)})
		return false
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "reading the request body failed"})
		return false
	}
	if err := jsonbody.DecodeStrict(body, v, true); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
		return false
	}
	return true
}

func (a *App) submitChange(w http.ResponseWriter, r *http.Request) {
	var req changeRequest
	if !decodeBody(w, r, a.cfg.MaxBodyBytes, &req) {
		return
	}
	params, badText := req.params()
	params.Platform = a.engine.Platform()
	if len(badText) > 0 {
		// Every problem at once: the invalid text, then the rest.
		fields := badText
		if ve, ok := flows.IsValidation(params.Validate()); ok {
			for _, f := range ve.Fields {
				if !slices.ContainsFunc(fields, func(b flows.FieldError) bool { return b.Field == f.Field }) {
					fields = append(fields, f)
				}
			}
		}
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid change", "fields": fields})
		return
	}
	params.IdempotencyKey = r.Header.Get("Idempotency-Key")
	params.SubmittedBy = requestTokenID(r)
	// Read for the project's path as the platform answers it (the engine
	// resolves the submitter's spelling first), not for what was typed.
	params.ApprovalFirstFunc = func(project string) bool { return a.settings.Get(settings.FlowApprovalFirst, project).Bool() }
	params.MaxActive = a.settings.Get(settings.AdmissionMaxActive, "").Int()
	op, created, err := a.engine.Submit(r.Context(), params)
	if errors.Is(err, flows.ErrOverloaded) {
		w.Header().Set("Retry-After", strconv.Itoa(admissionRetryAfter))
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "too many active changes (admission.max_active); nothing was created, retry later",
			"retry_after_seconds": admissionRetryAfter})
		return
	}
	if ve, ok := flows.IsValidation(err); ok {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid change", "fields": ve.Fields})
		return
	}
	var check *flows.GitLabCheckError
	if errors.As(err, &check) {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": "the change does not fit the project in " + config.PlatformName(a.cfg.Platform) + "; nothing was created",
			"fields": check.Fields})
		return
	}
	var down *flows.GitLabUnavailableError
	if errors.As(err, &down) {
		wait := max(int(down.RetryAfter.Round(time.Second)/time.Second), 1)
		if down.RetryAfter <= 0 {
			wait = gitlabRetryAfter
		}
		a.log.Warn("the platform could not answer the submission checks", "platform", a.cfg.Platform, "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(wait))
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": config.PlatformName(a.cfg.Platform) + " could not answer the checks of the change; nothing was created, retry later",
			"retry_after_seconds": wait})
		return
	}
	var idem *flows.IdempotencyConflictError
	if errors.As(err, &idem) {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": idem.Error(),
			"operation_id": idem.OperationID, "differing_fields": idem.Fields})
		return
	}
	var active *store.ActiveChangeError
	if errors.As(err, &active) {
		writeJSON(w, http.StatusConflict, map[string]any{"error": active.Reason(),
			"operation_id": active.OperationID, "status": active.Status, "failed": active.Failed()})
		return
	}
	if err != nil {
		a.log.Error("submitting change", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not store the change, try again"})
		return
	}
	noteOperation(r.Context(), op.ID)
	status := http.StatusAccepted
	if !created {
		status = http.StatusOK
	}
	writeJSON(w, status, map[string]string{"operation_id": op.ID, "status_url": a.cfg.ExternalURL + "/api/v1/changes/" + op.ID})
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
func (a *App) changeAction(w http.ResponseWriter, r *http.Request) {
	vars := mux.Vars(r)
	id, action := vars["id"], rules.Action(vars["action"])
	role := tokenRole(r)
	if role != api.RoleOperator {
		if action != rules.ActionCancel {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "this needs an operator token"})
			return
		}
		owner, err := a.submittedBy(r.Context(), id)
		if errors.Is(err, store.ErrNotFound) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no change with id " + id})
			return
		}
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not read the change"})
			return
		}
		if owner == "" || owner != requestTokenID(r) {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "a submitter token may cancel only the changes it submitted; this needs an operator token"})
			return
		}
	}
	_, err := a.engine.Act(r.Context(), id, action, rules.ActionParams{Actor: "api:" + role, Source: "api"})
	if errors.Is(err, store.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no change with id " + id})
		return
	}
	var na *rules.NotApplicableError
	switch {
	case errors.As(err, &na):
		writeJSON(w, http.StatusConflict, map[string]string{"error": na.Reason})
		return
	case err != nil:
		a.log.Error("change action failed", "operation_id", id, "action", vars["action"], "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not " + vars["action"] + " the change, try again"})
		return
	}
	a.getChange(w, r)
}

// submittedBy returns the id of the API token that submitted change id
// (the submitted event's submitted_by), "" when it was not recorded.
func (a *App) submittedBy(ctx context.Context, id string) (string, error) {
	_, events, err := a.engine.Get(ctx, id)
	if err != nil {
		return "", err
	}
	for _, ev := range events {
		if ev.Type == store.EventSubmitted {
			var p struct {
				SubmittedBy string `json:"submitted_by"`
			}
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				return "", fmt.Errorf("decoding the submitted event of %s: %w", id, err)
			}
			return p.SubmittedBy, nil
		}
	}
	return "", nil
}

func (a *App) getChange(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	op, events, err := a.engine.Get(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no change with id " + id})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not read the change"})
		return
	}
	st := rules.MustStep(rules.StepCode(op.Step))
	v := api.ChangeView{OperationID: op.ID, SubjectID: op.SubjectID, TargetKey: op.TargetKey, Status: op.Status,
		Step: api.StepView{Code: op.Step, Name: st.Name}, Hint: st.HintOn(op.Platform), Terminal: st.Terminal, Detail: op.Detail, Events: events,
		ApprovalFirst: op.ApprovalFirst}
	if op.MRIID > 0 {
		v.MergeRequest = &api.MRView{ProjectID: op.ProjectID, IID: op.MRIID, WebURL: op.MRWebURL}
	} else {
		v.Hint = apiHint(st, op.Platform, a.cfg.ExternalURL+"/api/v1/changes/"+op.ID)
	}
	v.Hint = a.refusals.approvalHint(op.Status, v.Hint)
	if v.Events == nil {
		v.Events = []store.Event{}
	}
	writeJSON(w, http.StatusOK, v)
}

// eventsView is the body of GET /api/v1/changes/{id}/events and of
// changebot history -json.
type eventsView struct {
	OperationID string `json:"operation_id"`
	// Form is "current" (events upcast to store.EventSchemaVersion, to
	// read and replay) or "stored" (as stored, to check the hash chain).
	Form   string        `json:"form"`
	Events []store.Event `json:"events"`
}

// Event forms of GET /api/v1/changes/{id}/events?form=.
const (
	formCurrent = "current"
	formStored  = "stored"
)

// newEventsView returns h's events in form (formCurrent or formStored).
func newEventsView(h store.History, form string) eventsView {
	v := eventsView{OperationID: h.Operation.ID, Form: form, Events: h.Stored}
	if form == formCurrent {
		v.Events = h.Events()
	}
	if v.Events == nil {
		v.Events = []store.Event{}
	}
	return v
}

// getEvents serves GET /api/v1/changes/{id}/events[?form=current|stored]
// (any token): the change's events in sequence order, read with the
// operation in one snapshot (store.ReadHistory); "stored" gives them as
// stored, whose hash chain a client can check (store.ComputeHash).
func (a *App) getEvents(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	form := r.URL.Query().Get("form")
	if form == "" {
		form = formCurrent
	}
	if form != formCurrent && form != formStored {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "form must be current or stored, not " + strconv.Quote(form)})
		return
	}
	h, err := a.store.ReadHistory(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no change with id " + id})
		return
	}
	if err != nil {
		a.log.Error("reading events", "operation_id", id, "error", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not read the change's events"})
		return
	}
	writeJSON(w, http.StatusOK, newEventsView(h, form))
}

// apiHint is the hint of a change that has no merge request to comment
// on: the step's own hint speaks of MR commands, so the API's actions are
// named instead (issue 9 defect 16). It speaks of a merge request, or of a
// pull request on GitHub (platform, the change's).
func apiHint(st rules.Step, platform, url string) string {
	mr := "merge request"
	if platform == store.PlatformGitHub {
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

// gitlabMetrics counts GitLab calls (changebot_gitlab_calls_total) and
// their latency.
type gitlabMetrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newGitLabMetrics(reg prometheus.Registerer) *gitlabMetrics {
	m := &gitlabMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "changebot_gitlab_calls_total",
			Help: "GitLab API calls by endpoint and HTTP status (0: no answer)."}, []string{"endpoint", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "changebot_gitlab_call_duration_seconds",
			Help: "GitLab API call latency by endpoint, in seconds.", Buckets: prometheus.DefBuckets}, []string{"endpoint"}),
	}
	reg.MustRegister(m.calls, m.duration)
	return m
}

func (m *gitlabMetrics) observe(endpoint string, status int, d time.Duration) {
	m.calls.WithLabelValues(endpoint, fmt.Sprint(status)).Inc()
	m.duration.WithLabelValues(endpoint).Observe(d.Seconds())
}

func stepName(code int) string { return rules.StepCode(code).String() }
