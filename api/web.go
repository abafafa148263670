package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"changebot/flows/rules"
	"changebot/templates"
)

// The web pages (issue 13 point 2): server-rendered HTML under /ui, read
// only, working without JavaScript. A person logs in once with any API
// token (viewer, submitter or operator) on /ui/login; the answer sets the
// session cookie SessionCookie, which holds a session id of its own
// (session.go: signed, issued at login, refused after Config.SessionTTL or
// once logged out; never the token nor a fixed hash of it) and is
// HttpOnly, SameSite=Strict and, over https, Secure. No page ever renders
// a token or secret. The login form is the only POST, and it is refused
// unless its Origin header names this server.

//go:embed web/*.html web/style.css
var webFS embed.FS

var webTemplates = template.Must(template.New("web").Funcs(template.FuncMap{"dur": durationWords}).ParseFS(webFS, "web/*.html"))

// webCSS is the pages' one style sheet, served at /ui/static/style.css.
var webCSS = func() []byte {
	b, err := webFS.ReadFile("web/style.css")
	if err != nil {
		panic(err)
	}
	return b
}()

const (
	// SessionCookie is the name of the web pages' session cookie, whose
	// value is the session id a login issued (see session.go).
	SessionCookie = "changebot_session"
	// webSameSiteParam marks the second try of a page after a
	// cross-site arrival (see webAuth).
	webSameSiteParam = "same_site"
)

// webSession returns the verified, not logged-out session of the
// request's cookie; errNoSession (wrapped) when it has none, or the
// store's error when the revocations could not be read.
func (h *Handler) webSession(r *http.Request) (session, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return session{}, fmt.Errorf("%w: no cookie", errNoSession)
	}
	s, err := parseSession(c.Value, h.cfg.Tokens, h.now(), h.cfg.SessionTTL)
	if err != nil {
		return session{}, err
	}
	revoked, err := h.revoked(r.Context(), s)
	if err != nil {
		return session{}, err
	}
	if revoked {
		return session{}, fmt.Errorf("%w: logged out", errNoSession)
	}
	return s, nil
}

// webAuth lets a request with a valid session through. Without one it
// answers a page that reloads itself once (a meta refresh, no script): a
// SameSite=Strict cookie is not sent on the arrival from another site (a
// link in the GitLab status comment), but is on that same-site reload.
// When the reload has no session either it redirects to the login page.
func (h *Handler) webAuth(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		webHeaders(w)
		s, err := h.webSession(r)
		if err == nil {
			ctx := context.WithValue(r.Context(), tokenRoleKey{}, s.token.Role)
			next(w, r.WithContext(context.WithValue(ctx, tokenIDKey{}, TokenID(s.token.Token))))
			return
		}
		if !errors.Is(err, errNoSession) {
			h.log.Error("checking a web session", "err", err)
			http.Error(w, "could not check the session, try again", http.StatusServiceUnavailable)
			return
		}
		q := r.URL.Query()
		if q.Get(webSameSiteParam) == "" {
			q.Set(webSameSiteParam, "1")
			again := r.URL.Path + "?" + q.Encode()
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusOK)
			_ = webReload.Execute(w, again)
			return
		}
		q.Del(webSameSiteParam)
		nextURL := r.URL.Path
		if len(q) > 0 {
			nextURL += "?" + q.Encode()
		}
		http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(nextURL), http.StatusSeeOther)
	})
}

var webReload = template.Must(template.New("reload").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">` +
	`<meta http-equiv="refresh" content="0;url={{.}}"><title>changebot</title></head>` +
	`<body><p><a href="{{.}}">Continue</a></p></body></html>`))

// webHeaders sets the headers of every page: no caching, no framing, no
// scripts, no referrer to other sites ("no-referrer" would also make the
// browser send "Origin: null" on the login POST, which sameOrigin refuses).
func webHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
}

// webRoutes adds the pages to r. Every POST but the login (which checks
// its Origin itself, sameOrigin) passes http.CrossOriginProtection.
func (h *Handler) webRoutes(r *mux.Router) {
	csrf := http.NewCrossOriginProtection()
	if ext, err := url.Parse(h.cfg.ExternalURL); err == nil && ext.Scheme != "" && ext.Host != "" {
		// The pages may be reached through the external URL's host as
		// well as the one the request names (a proxy in front).
		_ = csrf.AddTrustedOrigin(ext.Scheme + "://" + ext.Host)
	}
	post := func(f http.HandlerFunc) http.Handler { return csrf.Handler(h.webAuth(f)) }
	r.Handle("/ui", h.webAuth(h.webOverview)).Methods(http.MethodGet)
	r.Handle("/ui/", http.RedirectHandler("/ui", http.StatusSeeOther))
	r.HandleFunc("/ui/static/style.css", serveCSS).Methods(http.MethodGet)
	r.HandleFunc("/ui/login", h.webLoginForm).Methods(http.MethodGet)
	r.HandleFunc("/ui/login", h.webLogin).Methods(http.MethodPost)
	r.HandleFunc("/ui/logout", h.webLogout).Methods(http.MethodGet)
	r.Handle("/ui/changes", h.webAuth(h.webList)).Methods(http.MethodGet)
	r.Handle("/ui/attention", h.webAuth(h.webAttention)).Methods(http.MethodGet)
	// The stuck view was folded into needs-attention (issue 23).
	// With filters, the list of the stuck ones keeps them.
	r.HandleFunc("/ui/stuck", func(w http.ResponseWriter, r *http.Request) {
		to := "/ui/attention"
		if q := r.URL.Query(); len(bulkQuery(q)) > 0 {
			q.Set("stuck", "true")
			to = string(queryURL("/ui/changes", q))
		}
		http.Redirect(w, r, to, http.StatusMovedPermanently) //nolint:gosec // a path of this server: /ui/changes with the query re-encoded
	}).Methods(http.MethodGet)
	r.Handle("/ui/queues", h.webAuth(h.webQueues)).Methods(http.MethodGet)
	r.Handle("/ui/queues/{project}/{branch:.+}/{action:freeze|unfreeze}", post(h.webFreeze)).Methods(http.MethodPost)
	r.Handle("/ui/bulk", h.webAuth(h.webBulkForm)).Methods(http.MethodGet)
	r.Handle("/ui/bulk", post(h.webBulk)).Methods(http.MethodPost)
	r.Handle("/ui/changes/{id}", h.webAuth(h.webChange)).Methods(http.MethodGet)
	r.Handle("/ui/rollouts/{id}", h.webAuth(h.webRollout)).Methods(http.MethodGet)
	r.Handle("/ui/changes/{id}/{action:retry|resume|cancel}", post(h.webAct)).Methods(http.MethodPost)
}

// serveCSS serves the pages' style sheet (cached for an hour: it changes
// only with the binary).
func serveCSS(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(webCSS)
}

// webPage is the data every page template gets: the title, whether the
// navigation shows (a logged-in page), the session's role, and how often
// the page reloads itself (seconds; 0: never).
type webPage struct {
	Title    string
	Nav      bool
	Role     string
	Operator bool
	Refresh  int
}

// page is the webPage of a logged-in page titled title, for r's session.
func (h *Handler) page(r *http.Request, title string) webPage {
	role := tokenRole(r)
	return webPage{Title: title, Nav: true, Role: role, Operator: role == RoleOperator}
}

func (h *Handler) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := webTemplates.ExecuteTemplate(&buf, name, data); err != nil {
		h.log.Error("rendering a web page", "page", name, "err", err)
		http.Error(w, "could not render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

type loginPage struct {
	webPage
	Next, Error string
}

// safeNext keeps a post-login destination only when it is a page of this
// server (/ui/…), never another site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/changes"
	}
	return next
}

func (h *Handler) webLoginForm(w http.ResponseWriter, r *http.Request) {
	webHeaders(w)
	h.render(w, http.StatusOK, "login.html", loginPage{webPage: webPage{Title: "Log in"}, Next: safeNext(r.URL.Query().Get("next"))})
}

// sameOrigin reports whether the POST's Origin header names this server:
// the host the request was sent to, or the configured external URL. A
// missing Origin is refused (every current browser sends it on a form
// POST), which makes the login CSRF-safe.
func (h *Handler) sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return false
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	ext, err := url.Parse(h.cfg.ExternalURL)
	return err == nil && ext.Host != "" && strings.EqualFold(u.Host, ext.Host) && u.Scheme == ext.Scheme
}

func (h *Handler) webLogin(w http.ResponseWriter, r *http.Request) {
	webHeaders(w)
	if !h.sameOrigin(r) {
		h.render(w, http.StatusForbidden, "login.html", loginPage{webPage: webPage{Title: "Log in"}, Next: "/ui/changes",
			Error: "The login form must be sent from this server's own page (Origin header missing or foreign)."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.render(w, http.StatusBadRequest, "login.html", loginPage{webPage: webPage{Title: "Log in"}, Next: "/ui/changes",
			Error: "The login form could not be read."})
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	token := strings.TrimSpace(r.PostForm.Get("token"))
	var matched Token
	for _, t := range h.cfg.Tokens {
		if subtle.ConstantTimeCompare([]byte(token), []byte(t.Token)) == 1 && token != "" {
			matched = t
		}
	}
	if matched.Token == "" {
		h.log.Warn("web login refused: unknown token", "remote", r.RemoteAddr)
		h.render(w, http.StatusUnauthorized, "login.html", loginPage{webPage: webPage{Title: "Log in"}, Next: next,
			Error: "That token is not valid."})
		return
	}
	id, err := newSession(matched, h.now())
	if err != nil {
		h.log.Error("issuing a web session", "token", TokenID(matched.Token), "err", err)
		http.Error(w, "could not start the session, try again", http.StatusServiceUnavailable)
		return
	}
	http.SetCookie(w, h.sessionCookie(r, id, int(h.cfg.SessionTTL/time.Second)))
	h.log.Info("web login", "token", TokenID(matched.Token))
	http.Redirect(w, r, next, http.StatusSeeOther) //nolint:gosec // safeNext keeps only paths under /ui/
}

// sessionCookie is the session cookie with value and max-age (seconds; -1
// deletes it): HttpOnly, SameSite=Strict, Secure when served over https
// (TLS here or an https external URL); plain http stays possible for a
// local run.
func (h *Handler) sessionCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: value, Path: "/ui", MaxAge: maxAge, HttpOnly: true, //nolint:gosec // Secure is set over https
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || strings.HasPrefix(h.cfg.ExternalURL, "https://")}
}

// webLogout ends the request's session on the server (every replica
// refuses its id from then on, see revoke) and clears the cookie (a GET:
// logging someone out is no harm worth a form, and the SameSite=Strict
// cookie is not sent from another site). When the revocation cannot be
// stored it answers 503 and keeps the cookie, so that the person can try
// again rather than believe the session ended.
func (h *Handler) webLogout(w http.ResponseWriter, r *http.Request) {
	webHeaders(w)
	s, err := h.webSession(r)
	switch {
	case err == nil:
		if err := h.revoke(r.Context(), s); err != nil {
			h.log.Error("logging out of a web session", "err", err)
			http.Error(w, "could not end the session, try again", http.StatusServiceUnavailable)
			return
		}
		h.log.Info("web logout", "token", TokenID(s.token.Token))
	case !errors.Is(err, errNoSession):
		h.log.Error("checking a web session to log out", "err", err)
		http.Error(w, "could not end the session, try again", http.StatusServiceUnavailable)
		return
	}
	http.SetCookie(w, h.sessionCookie(r, "", -1))
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// changePage is the data of change.html.
type changePage struct {
	webPage
	// Missing is the id asked for when no change has it (the page answers
	// 404 saying so, and shows nothing else).
	Missing string
	Change  changeDetail
	// Error names a bad query parameter (the page answers 400 then).
	Error string
	// At is the "replay at" field as given; Replay is the state the
	// change's events give at that moment (DESIGN §4), nil without `at`.
	At     string
	Replay *replayView
}

// replayView is a change's state rebuilt from its events at a moment
// (Engine.Replay): the step and status it was in, and the last event then.
type replayView struct {
	At       string
	Seq      int64
	StepName string
	StepCode int
	Status   string
}

type changeDetail struct {
	templates.StatusView
	State   string
	Project string
	// RolloutID is the change's rollout, linked to its page ("" for none).
	RolloutID string
	Events    []eventRow
	// InStep is how long the change has been in its current step.
	InStep string
	// Checks is the "why is this not moving" checklist (rules.Checklist);
	// the current check carries the change's detail and hint.
	Checks []checkRow
	// Files are the submitted files; Shown the one whose content the page
	// shows (?file=path), nil for none.
	Files []FileView
	Shown *FileView
	// Actions are the actions that apply now (operators only see forms).
	Actions []actionForm
	// Done names the action just taken (?done=).
	Done string
}

// checkRow is one line of the checklist: its state and, at the current
// check, what it waits for.
type checkRow struct {
	rules.Check
	Note string
}

// eventRow is one timeline row of a change's page: every stored event,
// its source both in words and as stored, its payload indented.
type eventRow struct {
	Seq                                       int64
	At, Type, StepName, Status, Actor, Source string
	RawSource, Payload                        string
	// What says what the event did (Event.What).
	What string
	// InStep is, on a row that moved the change to a step, how long it
	// stayed there (until the next move, or until now for the current
	// step); "" on other rows.
	InStep string
	// Later marks an event after the "replay at" moment.
	Later bool
}

func (h *Handler) webChange(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	op, events, v, err := h.cfg.Engine.Page(r.Context(), id)
	if errors.Is(err, ErrNotFound) {
		h.render(w, http.StatusNotFound, "change.html", changePage{webPage: h.page(r, "No such change"), Missing: id})
		return
	}
	if err != nil {
		h.log.Error("reading a change for its page", "operation_id", id, "err", err)
		http.Error(w, "could not read the change, try again", http.StatusServiceUnavailable)
		return
	}
	if op.MRIID == 0 {
		v.Hint = apiHint(rules.MustStep(rules.StepCode(op.Step)), op.Platform, h.cfg.ExternalURL+"/api/v1/changes/"+op.ID)
	}
	v.Hint = h.cfg.Refusals.ApprovalHint(op.Status, v.Hint)
	d := changeDetail{StatusView: v, State: stateWords(v), Project: op.Project, RolloutID: op.RolloutID, Files: FileViews(op.Files, true),
		Actions: changeActions(rules.StepCode(op.Step)), InStep: durationWords(h.now().Sub(op.StepStartedAt))}
	if done := r.URL.Query().Get("done"); slices.Contains([]string{"retry", "resume", "cancel"}, done) {
		d.Done = done
	}
	// The file asked for (?file=path) is shown whole; the table lists
	// every file without its content.
	path := r.URL.Query().Get("file")
	for i, f := range d.Files {
		if path != "" && f.Path == path {
			d.Shown = &f
		}
		d.Files[i].Content = nil
	}
	page := changePage{webPage: h.page(r, "Change "+op.ID)}
	if !rules.MustStep(rules.StepCode(op.Step)).Terminal {
		page.Refresh = webRefreshSeconds
	}
	status := http.StatusOK
	if at := r.URL.Query().Get("at"); at != "" {
		page.At = at
		when, err := time.Parse(time.RFC3339, at)
		if err != nil {
			page.Error = "at: not an RFC 3339 time (for example 2026-12-01T10:36:51Z)"
			status = http.StatusBadRequest
		} else {
			rs := h.cfg.Engine.Replay(events, when)
			page.Replay = &replayView{At: when.UTC().Format(time.RFC3339), Seq: rs.Seq,
				StepName: rules.StepCode(rs.Step).String(), StepCode: rs.Step, Status: rs.Status}
		}
	}
	visited := map[rules.StepCode]bool{}
	lastMove := -1
	for _, ev := range events {
		visited[rules.StepCode(ev.ToStep)] = true
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, ev.Payload, "", "  "); err != nil {
			pretty.Reset()
			pretty.Write(ev.Payload)
		}
		d.Events = append(d.Events, eventRow{Seq: ev.Seq, At: ev.OccurredAt.UTC().Format("2006-01-02 15:04:05Z"), Type: ev.Type,
			StepName: rules.StepCode(ev.ToStep).String(), Status: ev.ToStatus, Actor: ev.Actor,
			Source: ev.SourceWords, RawSource: ev.Source, Payload: pretty.String(), What: ev.What,
			Later: page.Replay != nil && ev.Seq > page.Replay.Seq})
		if ev.FromStep != ev.ToStep || ev.Type == "submitted" {
			if lastMove >= 0 {
				d.Events[lastMove].InStep = durationWords(ev.OccurredAt.Sub(events[lastMove].OccurredAt))
			}
			lastMove = len(d.Events) - 1
		}
	}
	if lastMove >= 0 {
		d.Events[lastMove].InStep = durationWords(h.now().Sub(events[lastMove].OccurredAt)) + " so far"
		if rules.MustStep(rules.StepCode(op.Step)).Terminal {
			d.Events[lastMove].InStep = "final"
		}
	}
	for _, c := range rules.Checklist(rules.StepCode(op.Step), func(s rules.StepCode) bool { return visited[s] }) {
		row := checkRow{Check: c}
		if c.State == rules.CheckNow || c.State == rules.CheckFailed {
			row.Note = v.Detail
			if row.Note == "" {
				row.Note = v.Hint
			}
		}
		d.Checks = append(d.Checks, row)
	}
	page.Change = d
	h.render(w, status, "change.html", page)
}

// stateWords is the change's state in one sentence, as the status
// comment's first line says it (templates/status.md.tmpl "state"), without
// links: the page lists them apart.
func stateWords(v templates.StatusView) string {
	w := rules.WordsOf(v.Platform)
	mr := "the " + w.MR
	if v.MR.IID > 0 {
		mr = w.MRRef(v.MR.IID)
	}
	ticket := "its ticket"
	if v.TicketID != "" {
		ticket = v.TicketID
	}
	switch v.Status {
	case rules.StatusApprovalSending:
		if v.ApprovalInGitLab {
			return "Asking for approval in " + w.Platform + "."
		}
		return "Asking the approval system for approval."
	case rules.StatusApprovalSent:
		if v.ApprovalInGitLab {
			return "Waiting for approval on " + mr + " by the project's approvers in " + w.Platform + "."
		}
		return "Waiting for approval in " + ticket + " by the approval system."
	case rules.StatusMRCreating:
		if v.MR.IID > 0 {
			return upperFirst(mr) + " is open; waiting for its " + w.Pipeline + "."
		}
		return "Opening the " + w.MR + "."
	case rules.StatusMRCreated:
		return upperFirst(mr) + " is open and its " + w.Pipeline + " passed."
	case rules.StatusMerging:
		return "Merging " + mr + "."
	case rules.StatusMerged:
		return "Merged; waiting for the " + w.Deploy + " to apply it."
	case rules.StatusValidated:
		return "Applied: merged and confirmed by the " + w.Deploy + "."
	case rules.StatusCreateFailed:
		return "Failed while opening " + mr + "."
	case rules.StatusHandleFailed:
		return "Failed while merging " + mr + "."
	case rules.StatusRejected:
		if v.Decision == "withdrawn" {
			return "Withdrawn."
		}
		return "Rejected."
	case rules.StatusClosed:
		return "Closed without being applied."
	}
	return v.Status + "."
}

// upperFirst is s with its first letter upper case.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// webFilters are the list page's filters, the query parameters of GET
// /api/v1/changes (issue 13 point 1), in the order the form shows them.
var webFilters = []string{"status", "step", "active", "project", "subject_id", "target_key", "requested_by", "updated_after", "updated_before", "stuck"}

// webListPage is the data of list.html.
type webListPage struct {
	webPage
	Action  string
	Filters []webFilterField
	// Quick are the filter links.
	Quick []quickLink
	Rows  []webListRow
	Error string
	Next  string
	// Filtered reports that a filter is set; BulkRetry and BulkCancel
	// are then the bulk actions' links for it.
	Filtered              bool
	BulkRetry, BulkCancel template.URL
}

type webFilterField struct{ Name, Value string }

type webListRow struct {
	Change
	StepName, Updated string
	// InStep is how long the change has been in its current step.
	InStep string
	// Ref is its merge request's reference (!4, #4), "" without one.
	Ref string
	// ShortDetail is its detail (the failure's reason, what it waits
	// for), cut to webDetailRunes.
	ShortDetail string
}

// webDetailRunes is how much of a change's detail a list row shows.
const webDetailRunes = 160

// listRow is op as the pages list it.
func (h *Handler) listRow(op Change) webListRow {
	row := webListRow{Change: op, StepName: rules.StepCode(op.Step).String(),
		Updated: op.UpdatedAt.UTC().Format("2006-01-02 15:04:05Z"), InStep: durationWords(h.now().Sub(op.StepStartedAt))}
	if op.MRIID > 0 {
		row.Ref = rules.WordsOf(op.Platform).Ref(op.MRIID)
	}
	row.ShortDetail = op.Detail
	if r := []rune(op.Detail); len(r) > webDetailRunes {
		row.ShortDetail = string(r[:webDetailRunes-1]) + "…"
	}
	return row
}

// quickLink is one of the list's bookmarkable filter links: its label and
// its URL (built here from constants, so trusted as a whole: html/template
// would escape a query given as text into one parameter's value).
type quickLink struct {
	Name string
	URL  template.URL
}

// webQuickFilters are the list's bookmarkable filter links.
var webQuickFilters = []quickLink{
	{"Active", "/ui/changes?active=true"},
	{"Failed", "/ui/changes?status=" + rules.StatusCreateFailed + "," + rules.StatusHandleFailed},
	{"Waiting for approval", "/ui/changes?status=" + rules.StatusApprovalSent},
	{"Merging", "/ui/changes?status=" + rules.StatusMerging},
	{"Applied", "/ui/changes?status=" + rules.StatusValidated},
	{"Final", "/ui/changes?active=false"},
	{"All", "/ui/changes"},
}

// queryURL is path with the query q, encoded by url.Values (every key and
// value escaped), trusted as a whole by the templates.
func queryURL(path string, q url.Values) template.URL {
	if len(q) == 0 {
		return template.URL(path) //nolint:gosec // a constant path
	}
	return template.URL(path + "?" + q.Encode()) //nolint:gosec // url.Values.Encode escapes every key and value
}

func (h *Handler) webList(w http.ResponseWriter, r *http.Request) {
	h.renderList(w, r, "Changes", "/ui/changes")
}

func (h *Handler) renderList(w http.ResponseWriter, r *http.Request, title, action string) {
	q := r.URL.Query()
	p := webListPage{webPage: h.page(r, title), Action: action, Quick: webQuickFilters}
	for _, f := range webFilters {
		p.Filters = append(p.Filters, webFilterField{Name: f, Value: q.Get(f)})
	}
	// The list query refuses parameters it does not know: the reload
	// marker is not a filter, and an empty form field filters nothing.
	q.Del(webSameSiteParam)
	for k, v := range q {
		if len(v) == 1 && v[0] == "" {
			q.Del(k)
		}
	}
	ops, next, err := h.listChanges(r.Context(), q)
	var bad *listFilterError
	switch {
	case errors.As(err, &bad):
		p.Error = bad.Error()
		h.render(w, http.StatusBadRequest, "list.html", p)
		return
	case err != nil:
		h.log.Error("listing changes for the web page", "err", err)
		http.Error(w, "could not list the changes, try again", http.StatusServiceUnavailable)
		return
	}
	for _, op := range ops {
		p.Rows = append(p.Rows, h.listRow(op))
	}
	if fq := bulkQuery(q); len(fq) > 0 {
		fq.Del("limit")
		p.Filtered = true
		fq.Set("action", string(rules.ActionRetry))
		p.BulkRetry = queryURL("/ui/bulk", fq)
		fq.Set("action", string(rules.ActionCancel))
		p.BulkCancel = queryURL("/ui/bulk", fq)
	}
	if next != "" {
		nq := r.URL.Query()
		nq.Del(webSameSiteParam)
		nq.Set("cursor", next)
		p.Next = action + "?" + nq.Encode()
	}
	h.render(w, http.StatusOK, "list.html", p)
}
