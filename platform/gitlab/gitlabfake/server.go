package gitlabfake

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Options configure a Server. The zero value is a working server that sends
// no webhooks.
type Options struct {
	// WebhookURL receives webhooks (POST). Empty: no webhooks are sent or
	// recorded.
	WebhookURL string
	// WebhookSecret is sent as X-Gitlab-Token (omitted when empty, as GitLab
	// does).
	WebhookSecret string
	// Logger, may be nil (logs are discarded).
	Logger *slog.Logger
	// Listener, when set, is where the server serves (`changebot demo
	// -keep` in a container); nil means a free port on 127.0.0.1. Its
	// address makes URL().
	Listener net.Listener
	// NowFunc, may be nil (time.Now). It stamps created_at/updated_at and
	// the like; pipeline durations and rebase durations still run on real
	// timers.
	NowFunc func() time.Time
}

// Server is the in-memory GitLab. All methods are safe for concurrent use
// (one mutex guards the whole state).
//
// Deliberate differences from GitLab (see the identifiers for details):
//   - every project behaves as "internal": any authenticated user can read
//     it; writes need a role (branches, commits, MRs: Developer; pushes to a
//     protected branch: Maintainer);
//   - merging needs ProjectSpec.MergeAccessLevel (default Developer, 30),
//     where GitLab's default for a protected target is Maintainer (40);
//   - approving a second time answers 401 as GitLab 16/17 does (GitLab 18
//     answers 304 Not Modified); approving below Developer answers 403 as
//     GitLab's authorize! does;
//   - the Merge Request Hook action for every approval is "approved" (GitLab
//     Free); the Premium "approval" action is never sent;
//   - detailed_merge_status is computed synchronously (never "checking" or
//     "preparing" unless a test scripts it with SetMergeBlock; only the
//     Merge Request Hooks of an open and of a push say "checking" and
//     "unchecked", as GitLab's do), in the order
//     not_open, conflict, need_rebase, ci_still_running / ci_must_pass,
//     not_approved, mergeable;
//   - pipelines have one scripted outcome each and report one fake job;
//   - webhooks configured through the API receive only their test events
//     (every event goes to Options.WebhookURL), and token expiry dates are
//     shown, not enforced (project_hooks.go, tokens.go).
type Server struct {
	opts Options
	log  *slog.Logger
	now  func() time.Time
	ts   *httptest.Server
	h    http.Handler

	mu       sync.Mutex
	closed   bool
	ctx      context.Context
	cancel   context.CancelFunc
	users    map[int64]*user
	byName   map[string]*user
	byToken  map[string]*user
	projects map[int64]*project
	byPath   map[string]*project
	groups   map[int64]*group
	mrByID   map[int64]*mergeRequest
	ids      idCounters
	calls    []Call
	faults   []*Fault
	limits   []RateLimit
	// reqLimit and reqWindows are the request limit (SetRequestLimit).
	reqLimit   RequestLimit
	reqWindows map[string]*requestWindow
	latency    time.Duration
	before     func(method, path string)
	pending    int // scheduled pipeline steps and rebases that will finish
	hooks      hookQueue
	webhooks   hookState  // webhook configuration (project_hooks.go)
	tokens     tokenState // access token details (tokens.go)
}

type idCounters struct {
	label                                               int64
	user, project, mr, pipeline, note, commit, job, car int64
}

// New starts a Server listening on opts.Listener, else on 127.0.0.1 on a
// free port (an httptest.Server) and, when opts.WebhookURL is set, its webhook sender.
// Call Close when done.
func New(opts Options) *Server {
	s := newServer(opts)
	s.ts = httptest.NewUnstartedServer(s.h)
	if opts.Listener != nil {
		_ = s.ts.Listener.Close()
		s.ts.Listener = opts.Listener
	}
	s.ts.Start()
	s.startHooks()
	return s
}

func newServer(opts Options) *Server {
	s := &Server{
		opts:     opts,
		log:      opts.Logger,
		now:      opts.NowFunc,
		users:    map[int64]*user{},
		byName:   map[string]*user{},
		byToken:  map[string]*user{},
		projects: map[int64]*project{},
		byPath:   map[string]*project{},
		mrByID:   map[int64]*mergeRequest{},
		// Distinct ranges make id/iid mix-ups visible in tests.
		ids: idCounters{user: 10, project: 100, mr: 1000, pipeline: 5000, note: 3000, job: 9000},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.h = s.withFakeEndpoints(http.HandlerFunc(s.serveHTTP))
	return s
}

// URL returns the base URL without /api/v4, for example
// http://127.0.0.1:1234. Web URLs in payloads (web_url, url) start with it.
func (s *Server) URL() string { return s.ts.URL }

// Handler returns the HTTP handler serving /api/v4, for embedding in another
// server. Web URLs in answers still use URL().
func (s *Server) Handler() http.Handler { return s.h }

// Close stops the HTTP server, pending pipelines and rebases, and webhook
// delivery. Undelivered webhooks are abandoned.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.cancel()
	s.hooks.cond.Broadcast()
	s.mu.Unlock()
	s.ts.Close()
	s.hooks.wg.Wait()
}

// SetLatency makes every REST call wait d before it is answered (faults
// included). Zero turns it off.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// SetBeforeCall makes every REST call run f(method, escaped path) before it
// is served, outside the server's lock; the call waits until f returns, so a
// test can look at the bot's state while a call is in flight. nil removes it.
func (s *Server) SetBeforeCall(f func(method, path string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before = f
}

// baseURL is the web base used in payloads.
func (s *Server) baseURL() string {
	if s.ts != nil {
		return s.ts.URL
	}
	return "http://gitlab.invalid"
}

// schedule runs f after d on a timer, under the lock, unless the server was
// closed. counted work keeps WaitIdle waiting until it ran.
func (s *Server) schedule(d time.Duration, f func()) {
	s.pending++
	time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.pending--
		if s.closed {
			return
		}
		f()
	})
}

func trimAPI(p string) (string, bool) {
	const prefix = "/api/v4"
	if !strings.HasPrefix(p, prefix+"/") {
		return "", false
	}
	return strings.TrimPrefix(p, prefix), true
}
