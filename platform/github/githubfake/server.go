package githubfake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configure a Server. The zero value is a working server that sends
// no webhooks.
type Options struct {
	// WebhookURL receives every webhook (POST). Empty: none are sent or
	// recorded.
	WebhookURL string
	// WebhookSecret signs deliveries (X-Hub-Signature-256 and the legacy
	// X-Hub-Signature); empty sends no signature headers, as GitHub does.
	WebhookSecret string
	// Logger, may be nil (discarded).
	Logger *slog.Logger
	// Listener, when set, is where the server serves; nil means a free
	// port on 127.0.0.1.
	Listener net.Listener
	// NowFunc stamps created_at, expires_at, rate-limit resets and JWT
	// checks; nil means time.Now. Scripted CI and update-branch still run
	// on real timers.
	NowFunc func() time.Time
	// CIDuration is how long a scripted check runs before it completes;
	// zero means 20 ms.
	CIDuration time.Duration
	// UpdateBranchDelay is how long an accepted update-branch takes; zero
	// means 20 ms.
	UpdateBranchDelay time.Duration
}

// Server is the in-memory GitHub. All methods are safe for concurrent use
// (one mutex guards the state).
//
// Deliberate differences from GitHub:
//   - any authenticated account can read every repository; writes need
//     write permission (a collaborator permission, or an App installation,
//     which may write everywhere);
//   - trees are flat (full paths), and a merge or update-branch merges
//     file by file: a path changed on both sides since the merge base is
//     a conflict;
//   - mergeable is null exactly on the first read after a change of the
//     pull request, its head or its base, then computed;
//   - a rebase merge writes one commit like squash does;
//   - GitHub Actions is one scripted workflow per pushed head; only its
//     runs can be re-run (rerun-failed-jobs), and re-requesting a check
//     suite of another App re-queues its runs, which then complete with
//     the scripted outcome;
//   - a merge queue builds one entry at a time, each merge group holding
//     one pull request, and POST /graphql answers only the documents
//     listed on graphql (merge_queue.go, graphql.go);
//   - rate-limit headers are sent on every answer with a fixed limit of
//     5,000 that no call consumes: limits happen only when injected.
type Server struct {
	opts Options
	log  *slog.Logger
	now  func() time.Time
	ts   *httptest.Server

	mu      sync.Mutex
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	users   map[int64]*user
	byLogin map[string]*user
	tokens  map[string]*token
	apps    map[int64]*app
	repos   map[int64]*repo
	byName  map[string]*repo
	orgs    map[string]map[string]string // org → login → role
	objects objectStore
	ids     idCounters
	calls   []Call
	faults  []*Fault
	pending int
	// holdUpdates and heldUpdates: HoldUpdates, FinishUpdates.
	holdUpdates bool
	heldUpdates []func()
	idle        *sync.Cond
	hooks       hookQueue
	hookTab     hookTable
	dropHook    func(event string) bool
	latency     time.Duration
	before      func(method, path string)
	reqLimit    RequestLimit
	windows     map[string]*requestWindow
	gqlCalls    map[string]int // GraphQLCalls
}

type idCounters struct {
	user, repo, pull, review, comment, check, suite, run, commit, delivery, token, label int64
}

// token is what an Authorization header may carry.
type token struct {
	user    *user
	app     *app // set for installation tokens
	expires time.Time
}

// New starts a Server. Call Close when done.
func New(opts Options) *Server {
	s := &Server{
		opts:    opts,
		log:     opts.Logger,
		now:     opts.NowFunc,
		users:   map[int64]*user{},
		byLogin: map[string]*user{},
		tokens:  map[string]*token{},
		apps:    map[int64]*app{},
		repos:   map[int64]*repo{},
		byName:  map[string]*repo{},
		orgs:    map[string]map[string]string{},
		objects: newObjectStore(),
		// Distinct ranges make id mix-ups visible in tests.
		ids: idCounters{user: 10, repo: 100, pull: 5000, review: 7000, comment: 3000, check: 90000, suite: 60000, run: 40000},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.opts.CIDuration == 0 {
		s.opts.CIDuration = 20 * time.Millisecond
	}
	if s.opts.UpdateBranchDelay == 0 {
		s.opts.UpdateBranchDelay = 20 * time.Millisecond
	}
	s.idle = sync.NewCond(&s.mu)
	s.hooks.cond = sync.NewCond(&s.mu)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	if opts.Listener != nil {
		_ = s.ts.Listener.Close()
		s.ts.Listener = opts.Listener
	}
	s.ts.Start()
	s.startHooks()
	return s
}

// URL is the API root, for example http://127.0.0.1:1234 (the adapter's
// Config.BaseURL). Web URLs in payloads start with URL() too.
func (s *Server) URL() string { return s.ts.URL }

// Close stops the server, scripted work and webhook delivery.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.cancel()
	s.hooks.cond.Broadcast()
	s.idle.Broadcast()
	s.mu.Unlock()
	s.ts.Close()
	s.hooks.wg.Wait()
}

// WaitIdle waits until no scripted check, update-branch or webhook
// delivery is pending, or ctx ends. Deliveries held by PauseWebhooks are
// pending: resume them first.
func (s *Server) WaitIdle(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.idle.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for (s.pending > 0 || len(s.hooks.queue) > 0 || s.hooks.sending > 0) && !s.closed {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.idle.Wait()
	}
	return nil
}

// schedule runs f after d under the lock unless the server closed;
// WaitIdle waits for it.
func (s *Server) schedule(d time.Duration, f func()) {
	s.pending++
	time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.pending--
		if !s.closed {
			f()
		}
		s.idle.Broadcast()
	})
}

// Call is one REST request the server received.
type Call struct {
	Method string
	// Path is the escaped path, for example /repos/o/r/pulls/1.
	Path  string
	Query string
	// Login is the caller ("" when unauthenticated; "app:<id>" for a JWT).
	Login  string
	Status int
}

// Calls returns every request received so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallCount counts requests with method (empty: any) whose escaped path
// matches pathPattern, where "*" matches one path segment and a trailing
// "**" any rest.
func (s *Server) CallCount(method, pathPattern string) int {
	n := 0
	for _, c := range s.Calls() {
		if (method == "" || c.Method == method) && pathMatches(pathPattern, c.Path) {
			n++
		}
	}
	return n
}

func pathMatches(pattern, path string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	for i, p := range ps {
		if p == "**" {
			return true
		}
		if i >= len(xs) || (p != "*" && p != xs[i]) {
			return false
		}
	}
	return len(ps) == len(xs)
}

// Fault makes matching requests fail. Zero Method matches any method.
type Fault struct {
	Method      string
	PathPattern string
	// Status is the answer's status.
	Status int
	// Body is the answer's body; empty means {"message": "<status text>"}.
	Body string
	// RetryAfter, when set, is sent as Retry-After.
	RetryAfter string
	// Headers are sent as they are (for example X-Ratelimit-Remaining).
	Headers map[string]string
	// Times is how many requests fail; zero means until ClearFaults.
	Times int
	// ResetIn, when set, sends X-Ratelimit-Reset as now + ResetIn (Unix
	// seconds).
	ResetIn time.Duration
	// Login, when set, limits the fault to requests whose token is that
	// account's: GitHub's rate limits are per account, so one reviewer may
	// be limited while another is not.
	Login string
}

// SecondaryRateLimitBody is GitHub's 403 body of a secondary ("abuse")
// rate limit as recorded live in 2018 (fixture
// api-error-403-secondary-rate-limit-2018.json, byte for byte).
const SecondaryRateLimitBody = `{"documentation_url": "https://developer.github.com/v3/#abuse-rate-limits","message": "You have triggered an abuse detection mechanism. Please wait a few minutes before you try again."}`

// PrimaryRateLimit is a Fault of GitHub's primary rate limit on matching
// requests: 403 "API rate limit exceeded for user ID …" with
// X-Ratelimit-Remaining 0 and X-Ratelimit-Reset now+reset, times times.
func PrimaryRateLimit(method, pathPattern string, times int, reset time.Duration) Fault {
	return Fault{Method: method, PathPattern: pathPattern, Status: http.StatusForbidden, Times: times, ResetIn: reset,
		Body:    `{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}`,
		Headers: map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Used": "5000"}}
}

// SecondaryRateLimit is a Fault of GitHub's secondary rate limit on
// matching requests: 403 with SecondaryRateLimitBody and Retry-After
// retryAfter (seconds; "" sends none), times times. X-Ratelimit-Remaining
// stays above 0, as in the recording.
func SecondaryRateLimit(method, pathPattern string, times int, retryAfter string) Fault {
	return Fault{Method: method, PathPattern: pathPattern, Status: http.StatusForbidden, Times: times,
		Body: SecondaryRateLimitBody, RetryAfter: retryAfter}
}

// InjectFault adds f; faults are tried in the order added.
func (s *Server) InjectFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

func (s *Server) takeFault(method, path, login string) *Fault {
	for i, f := range s.faults {
		if (f.Method == "" || f.Method == method) && pathMatches(f.PathPattern, path) && (f.Login == "" || f.Login == login) {
			if f.Times > 0 {
				f.Times--
				if f.Times == 0 {
					s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
				}
			}
			return f
		}
	}
	return nil
}

// tokenLogin is the login of r's token, "" for none or an unknown one
// (Fault.Login).
func (s *Server) tokenLogin(r *http.Request) string {
	h := r.Header.Get("Authorization")
	t := s.tokens[strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(h, "Bearer "), "token "))]
	if t == nil || t.user == nil {
		return ""
	}
	return t.user.Login
}

// reqCtx is one request being served, under the lock.
type reqCtx struct {
	s      *Server
	w      http.ResponseWriter
	r      *http.Request
	caller *user
	app    *app // the App of a JWT or an installation token
	jwt    bool // authenticated with the App's JWT
	params map[string]string
	body   map[string]any
	status int
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	s.mu.Lock()
	latency, before := s.latency, s.before
	s.mu.Unlock()
	if before != nil {
		before(r.Method, r.URL.EscapedPath())
	}
	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rc := &reqCtx{s: s, w: w, r: r}
	path := r.URL.EscapedPath()
	call := Call{Method: r.Method, Path: path, Query: r.URL.RawQuery}
	login := s.tokenLogin(r)
	defer func() {
		call.Status = rc.status
		switch {
		case rc.caller != nil:
			call.Login = rc.caller.Login
		case rc.jwt:
			call.Login = "app:" + strconv.FormatInt(rc.app.ID, 10)
		default: // a fault answered before authentication
			call.Login = login
		}
		s.calls = append(s.calls, call)
	}()
	if strings.HasPrefix(path, "/-/fake/") {
		s.serveFake(w, r, raw)
		return
	}
	s.rateHeaders(w)
	if f := s.takeFault(r.Method, path, login); f != nil {
		rc.writeFault(f)
		return
	}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &rc.body); err != nil {
			rc.fail(http.StatusBadRequest, "Problems parsing JSON")
			return
		}
	}
	if rc.body == nil {
		rc.body = map[string]any{}
	}
	for _, rt := range routes {
		params, ok := matchRoute(rt.pattern, path)
		if !ok || rt.method != r.Method {
			continue
		}
		rc.params = params
		if !rc.authenticate(rt.jwt) || !rc.withinLimit() {
			return
		}
		rt.h(s, rc)
		return
	}
	rc.fail(http.StatusNotFound, "Not Found")
}

// SetLatency makes every REST call wait d before it is served (faults
// included). Zero turns it off.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// SetUpdateBranchDelay sets how long an update-branch accepted from now
// on takes before it moves the head (Options.UpdateBranchDelay); zero
// means 20 ms.
func (s *Server) SetUpdateBranchDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d == 0 {
		d = 20 * time.Millisecond
	}
	s.opts.UpdateBranchDelay = d
}

// SetBeforeCall makes every REST call run f(method, escaped path) first,
// outside the server's lock; nil removes it.
func (s *Server) SetBeforeCall(f func(method, path string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before = f
}

// RequestLimit is GitHub's primary rate limit, per account: PerWindow
// requests per Window (default an hour), windows aligned on the server's
// clock. Answers carry X-Ratelimit-Limit, -Remaining, -Used and -Reset
// (the window's end, Unix seconds); the request beyond the limit answers
// 403 "API rate limit exceeded for user ID <id>." with remaining 0.
type RequestLimit struct {
	PerWindow int
	Window    time.Duration
}

type requestWindow struct {
	start time.Time
	calls int
}

// SetRequestLimit throttles every account to l from now on; a zero
// PerWindow removes the limit.
func (s *Server) SetRequestLimit(l RequestLimit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.Window <= 0 {
		l.Window = time.Hour
	}
	s.reqLimit, s.windows = l, map[string]*requestWindow{}
}

// withinLimit counts the call in its account's window and answers 403
// when the limit is spent.
func (rc *reqCtx) withinLimit() bool {
	l := rc.s.reqLimit
	if l.PerWindow <= 0 {
		return true
	}
	key, id := "", int64(0)
	switch {
	case rc.caller != nil:
		key, id = rc.caller.Login, rc.caller.ID
	case rc.app != nil:
		key, id = "app:"+strconv.FormatInt(rc.app.ID, 10), rc.app.ID
	}
	now := rc.s.now()
	start := now.Truncate(l.Window)
	w := rc.s.windows[key]
	if w == nil || !w.start.Equal(start) {
		w = &requestWindow{start: start}
		rc.s.windows[key] = w
	}
	w.calls++
	h := rc.w.Header()
	h.Set("X-Ratelimit-Limit", strconv.Itoa(l.PerWindow))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(max(l.PerWindow-w.calls, 0)))
	h.Set("X-Ratelimit-Used", strconv.Itoa(min(w.calls, l.PerWindow)))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(start.Add(l.Window).Unix(), 10))
	if w.calls <= l.PerWindow {
		return true
	}
	rc.fail(http.StatusForbidden, fmt.Sprintf("API rate limit exceeded for user ID %d.", id))
	return false
}

// rateHeaders are the x-ratelimit-* headers GitHub sends on every answer,
// with its request id and media type (fixtures api-real-*.exchange.json).
func (s *Server) rateHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("X-Ratelimit-Limit", "5000")
	h.Set("X-Ratelimit-Remaining", "4999")
	h.Set("X-Ratelimit-Used", "1")
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(s.now().Add(time.Hour).Unix(), 10))
	h.Set("X-Ratelimit-Resource", "core")
	h.Set("X-Github-Request-Id", fmt.Sprintf("FAKE:%d", len(s.calls)+1))
	h.Set("X-Github-Media-Type", "github.v3; format=json")
}

func (rc *reqCtx) writeFault(f *Fault) {
	h := rc.w.Header()
	for k, v := range f.Headers {
		h.Set(k, v)
	}
	if f.RetryAfter != "" {
		h.Set("Retry-After", f.RetryAfter)
	}
	if f.ResetIn > 0 {
		h.Set("X-Ratelimit-Reset", strconv.FormatInt(rc.s.now().Add(f.ResetIn).Unix(), 10))
	}
	body := f.Body
	if body == "" {
		b, _ := json.Marshal(map[string]any{"message": http.StatusText(f.Status)})
		body = string(b)
	}
	h.Set("Content-Type", "application/json; charset=utf-8")
	rc.status = f.Status
	rc.w.WriteHeader(f.Status)
	_, _ = io.WriteString(rc.w, body)
}

// docsURL is the documentation_url GitHub adds to error bodies.
const docsURL = "https://docs.github.com/rest"

// fail answers GitHub's error body {"message", "documentation_url"}.
func (rc *reqCtx) fail(status int, msg string) {
	rc.json(status, map[string]any{"message": msg, "documentation_url": docsURL})
}

// invalid answers 422 "Validation Failed" with one error, as GitHub does
// (fixture api-real-422-validation-failed.exchange.json).
func (rc *reqCtx) invalid(resource, field, code, msg string) {
	e := map[string]any{"resource": resource, "code": code}
	if field != "" {
		e["field"] = field
	}
	if msg != "" {
		e["message"] = msg
	}
	rc.json(http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": []any{e}, "documentation_url": docsURL})
}

func (rc *reqCtx) json(status int, v any) {
	rc.status = status
	rc.w.Header().Set("Content-Type", "application/json; charset=utf-8")
	rc.w.WriteHeader(status)
	if status == http.StatusNoContent {
		return
	}
	_ = json.NewEncoder(rc.w).Encode(v)
}

// str, num and flag read the JSON body.
func (rc *reqCtx) str(k string) string { v, _ := rc.body[k].(string); return v }

func (rc *reqCtx) flag(k string) bool { v, _ := rc.body[k].(bool); return v }

// param returns a path parameter, unescaped.
func (rc *reqCtx) param(k string) string { return rc.params[k] }

func (rc *reqCtx) intParam(k string) int64 {
	n, _ := strconv.ParseInt(rc.params[k], 10, 64)
	return n
}

func (rc *reqCtx) query(k string) string { return rc.r.URL.Query().Get(k) }

// route is one REST endpoint: pattern segments are literals, {name} (one
// segment, unescaped) or {name...} (the rest, unescaped per segment and
// joined with "/").
type route struct {
	method, pattern string
	jwt             bool // authenticated with an App JWT
	h               func(*Server, *reqCtx)
}

func matchRoute(pattern, escaped string) (map[string]string, bool) {
	ps := strings.Split(strings.Trim(pattern, "/"), "/")
	xs := strings.Split(strings.Trim(escaped, "/"), "/")
	out := map[string]string{}
	for i, p := range ps {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "...}") {
			if i >= len(xs) {
				return nil, false
			}
			rest := make([]string, 0, len(xs)-i)
			for _, x := range xs[i:] {
				u, err := url.PathUnescape(x)
				if err != nil {
					return nil, false
				}
				rest = append(rest, u)
			}
			out[strings.TrimSuffix(strings.TrimPrefix(p, "{"), "...}")] = strings.Join(rest, "/")
			return out, true
		}
		if i >= len(xs) {
			return nil, false
		}
		if strings.HasPrefix(p, "{") {
			u, err := url.PathUnescape(xs[i])
			if err != nil || u == "" {
				return nil, false
			}
			out[strings.Trim(p, "{}")] = u
			continue
		}
		if p != xs[i] {
			return nil, false
		}
	}
	return out, len(ps) == len(xs)
}

// routes lists every endpoint; the first match wins.
var routes = []route{
	{method: "POST", pattern: "/graphql", h: (*Server).graphql},
	{method: "GET", pattern: "/user", h: (*Server).getAuthenticatedUser},
	{method: "GET", pattern: "/user/{id}", h: (*Server).getUserByID},
	{method: "GET", pattern: "/users/{login}", h: (*Server).getUser},
	{method: "GET", pattern: "/app", jwt: true, h: (*Server).getApp},
	{method: "POST", pattern: "/app/installations/{id}/access_tokens", jwt: true, h: (*Server).createInstallationToken},
	{method: "GET", pattern: "/repositories/{id}", h: (*Server).getRepoByID},
	{method: "GET", pattern: "/orgs/{org}/memberships/{login}", h: (*Server).getOrgMembership},
	{method: "GET", pattern: "/repos/{owner}/{repo}", h: (*Server).getRepo},
	{method: "GET", pattern: "/repos/{owner}/{repo}/collaborators/{login}/permission", h: (*Server).getPermission},
	{method: "GET", pattern: "/repos/{owner}/{repo}/branches/{branch}", h: (*Server).getBranch},
	{method: "GET", pattern: "/repos/{owner}/{repo}/hooks", h: (*Server).listHooks},
	{method: "POST", pattern: "/repos/{owner}/{repo}/hooks", h: (*Server).createHook},
	{method: "PATCH", pattern: "/repos/{owner}/{repo}/hooks/{id}", h: (*Server).editHook},
	{method: "POST", pattern: "/repos/{owner}/{repo}/hooks/{id}/pings", h: (*Server).pingHook},
	{method: "GET", pattern: "/repos/{owner}/{repo}/git/ref/{ref...}", h: (*Server).getRef},
	{method: "POST", pattern: "/repos/{owner}/{repo}/git/refs", h: (*Server).createRef},
	{method: "PATCH", pattern: "/repos/{owner}/{repo}/git/refs/{ref...}", h: (*Server).updateRef},
	{method: "DELETE", pattern: "/repos/{owner}/{repo}/git/refs/{ref...}", h: (*Server).deleteRef},
	{method: "POST", pattern: "/repos/{owner}/{repo}/git/blobs", h: (*Server).createBlob},
	{method: "POST", pattern: "/repos/{owner}/{repo}/git/trees", h: (*Server).createTree},
	{method: "GET", pattern: "/repos/{owner}/{repo}/git/trees/{ref...}", h: (*Server).getTree},
	{method: "GET", pattern: "/repos/{owner}/{repo}/contents/{path...}", h: (*Server).getContents},
	{method: "POST", pattern: "/repos/{owner}/{repo}/git/commits", h: (*Server).createCommit},
	{method: "GET", pattern: "/repos/{owner}/{repo}/git/commits/{sha}", h: (*Server).getGitCommit},
	{method: "GET", pattern: "/repos/{owner}/{repo}/commits", h: (*Server).listCommits},
	{method: "GET", pattern: "/repos/{owner}/{repo}/commits/{ref}/check-runs", h: (*Server).listCheckRuns},
	{method: "GET", pattern: "/repos/{owner}/{repo}/commits/{ref}/check-suites", h: (*Server).listCheckSuites},
	{method: "GET", pattern: "/repos/{owner}/{repo}/commits/{ref}/status", h: (*Server).getCombinedStatus},
	{method: "GET", pattern: "/repos/{owner}/{repo}/commits/{ref...}", h: (*Server).getCommit},
	{method: "GET", pattern: "/repos/{owner}/{repo}/compare/{spec...}", h: (*Server).compare},
	{method: "POST", pattern: "/repos/{owner}/{repo}/statuses/{sha}", h: (*Server).createStatus},
	{method: "POST", pattern: "/repos/{owner}/{repo}/check-suites/{id}/rerequest", h: (*Server).rerequestSuite},
	{method: "GET", pattern: "/repos/{owner}/{repo}/actions/runs", h: (*Server).listWorkflowRuns},
	{method: "POST", pattern: "/repos/{owner}/{repo}/actions/runs/{id}/rerun-failed-jobs", h: (*Server).rerunFailedJobs},
	{method: "GET", pattern: "/repos/{owner}/{repo}/pulls", h: (*Server).listPulls},
	{method: "POST", pattern: "/repos/{owner}/{repo}/pulls", h: (*Server).createPull},
	{method: "GET", pattern: "/repos/{owner}/{repo}/pulls/{n}", h: (*Server).getPull},
	{method: "GET", pattern: "/repos/{owner}/{repo}/pulls/{n}/files", h: (*Server).listPullFiles},
	{method: "PATCH", pattern: "/repos/{owner}/{repo}/pulls/{n}", h: (*Server).updatePull},
	{method: "PUT", pattern: "/repos/{owner}/{repo}/pulls/{n}/merge", h: (*Server).mergePull},
	{method: "PUT", pattern: "/repos/{owner}/{repo}/pulls/{n}/update-branch", h: (*Server).updateBranch},
	{method: "GET", pattern: "/repos/{owner}/{repo}/pulls/{n}/reviews", h: (*Server).listReviews},
	{method: "POST", pattern: "/repos/{owner}/{repo}/pulls/{n}/reviews", h: (*Server).createReview},
	{method: "PUT", pattern: "/repos/{owner}/{repo}/pulls/{n}/reviews/{id}/dismissals", h: (*Server).dismissReview},
	{method: "GET", pattern: "/repos/{owner}/{repo}/issues/{n}/comments", h: (*Server).listComments},
	{method: "POST", pattern: "/repos/{owner}/{repo}/issues/{n}/comments", h: (*Server).createComment},
	{method: "GET", pattern: "/repos/{owner}/{repo}/issues/comments/{id}", h: (*Server).getComment},
	{method: "PATCH", pattern: "/repos/{owner}/{repo}/issues/comments/{id}", h: (*Server).updateComment},
}
