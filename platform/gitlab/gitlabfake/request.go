package gitlabfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"changebot/internal/guard"
)

// maxBody bounds request bodies (GitLab limits notes to 1,000,000 chars and
// descriptions to 1,048,576).
const maxBody = 4 << 20

// reqCtx is one REST call being served, under s.mu.
type reqCtx struct {
	w      http.ResponseWriter
	r      *http.Request
	user   *user
	params map[string]string // path parameters, unescaped
	body   []byte
	json   map[string]any // body decoded as a JSON object, nil otherwise
	status int
}

type route struct {
	method  string
	pattern []string
	handle  func(*Server, *reqCtx)
	// endpoint is the method and the pattern as written:
	// "GET /projects/:id/merge_requests/:iid" (Call.Endpoint).
	endpoint string
}

var routes = buildRoutes()

func buildRoutes() []route {
	const mr = "/projects/:id/merge_requests/:iid"
	defs := []struct {
		method, pattern string
		handle          func(*Server, *reqCtx)
	}{
		{"GET", "/user", (*Server).getCurrentUser},
		{"GET", "/projects/:id", (*Server).getProject},
		{"GET", "/projects/:id/members/all/:user_id", (*Server).getMember},
		{"GET", "/groups/:id/members/all/:user_id", (*Server).getGroupMember},
		{"GET", "/projects/:id/protected_branches/:name", (*Server).getProtectedBranch},
		{"GET", "/projects/:id/approval_checklist", (*Server).getChecklist},
		{"GET", "/projects/:id/repository/branches/:branch", (*Server).getBranch},
		{"POST", "/projects/:id/repository/branches", (*Server).createBranch},
		{"DELETE", "/projects/:id/repository/branches/:branch", (*Server).deleteBranch},
		{"POST", "/projects/:id/repository/commits", (*Server).createCommit},
		{"GET", "/projects/:id/repository/commits/:sha", (*Server).getCommit},
		{"GET", "/projects/:id/repository/files/:file_path/raw", (*Server).getRawFile},
		{"GET", "/projects/:id/repository/tree", (*Server).listTree},
		{"GET", "/projects/:id/repository/compare", (*Server).compare},
		{"GET", "/projects/:id/repository/merge_base", (*Server).mergeBase},
		{"GET", "/projects/:id/pipelines", (*Server).listPipelines},
		{"GET", "/projects/:id/pipelines/:pipeline_id", (*Server).getPipeline},
		{"POST", "/projects/:id/pipeline", (*Server).createPipeline},
		{"POST", "/projects/:id/jobs/:job_id/play", (*Server).playJob},
		{"POST", "/projects/:id/merge_requests", (*Server).createMR},
		{"GET", "/projects/:id/merge_requests", (*Server).listMRs},
		{"GET", mr, (*Server).getMR},
		{"PUT", mr, (*Server).updateMR},
		{"GET", mr + "/approvals", (*Server).getApprovals},
		{"POST", mr + "/approve", (*Server).approve},
		{"POST", mr + "/unapprove", (*Server).unapprove},
		{"PUT", mr + "/merge", (*Server).merge},
		{"PUT", mr + "/rebase", (*Server).rebase},
		{"GET", mr + "/notes", (*Server).listNotes},
		{"POST", mr + "/notes", (*Server).createNote},
		{"GET", mr + "/notes/:note_id", (*Server).getNote},
		{"PUT", mr + "/notes/:note_id", (*Server).updateNote},
		{"DELETE", mr + "/notes/:note_id", (*Server).deleteNote},
		{"GET", mr + "/pipelines", (*Server).listMRPipelines},
		{"POST", mr + "/pipelines", (*Server).createMRPipeline},
		{"GET", mr + "/diffs", (*Server).listMRDiffs},
		{"POST", "/projects/:id/merge_trains/merge_requests/:iid", (*Server).addToTrain},
		{"GET", "/projects/:id/merge_trains/merge_requests/:iid", (*Server).getTrainCar},
	}
	out := make([]route, 0, len(defs))
	for _, d := range defs {
		out = append(out, route{d.method, strings.Split(strings.Trim(d.pattern, "/"), "/"), d.handle, d.method + " " + d.pattern})
	}
	for _, d := range adminRoutes() {
		out = append(out, route{d.method, strings.Split(strings.Trim(d.pattern, "/"), "/"), d.handle, d.method + " " + d.pattern})
	}
	return out
}

// match returns the route for method and the escaped API path (without
// /api/v4), its parameters, and whether the path exists for another method.
func match(method, escaped string) (*route, map[string]string, bool) {
	raw := strings.Split(strings.Trim(escaped, "/"), "/")
	segs := make([]string, len(raw))
	for i, r := range raw {
		u, err := url.PathUnescape(r)
		if err != nil {
			return nil, nil, false
		}
		segs[i] = u
	}
	pathExists := false
	for i := range routes {
		rt := &routes[i]
		if len(rt.pattern) != len(segs) {
			continue
		}
		params := map[string]string{}
		ok := true
		for j, p := range rt.pattern {
			if strings.HasPrefix(p, ":") {
				params[p[1:]] = segs[j]
			} else if p != segs[j] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		if rt.method == method {
			return rt, params, true
		}
		pathExists = true
	}
	return nil, nil, pathExists
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
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
	rc := &reqCtx{w: w, r: r, body: body}
	if len(body) > 0 {
		var m map[string]any
		if json.Unmarshal(body, &m) == nil {
			rc.json = m
		}
	}
	rc.user = s.byToken[token(r)]
	path := r.URL.EscapedPath()
	defer func() {
		c := Call{Method: r.Method, Path: path, Query: r.URL.RawQuery, Status: rc.status, Body: body, At: time.Now(), ClockAt: s.now(),
			Endpoint: endpointOf(r.Method, path)}
		if rc.user != nil {
			c.User = rc.user.username
		}
		s.calls = append(s.calls, c)
	}()
	// Before the recording above: a panic is answered and recorded as 500.
	if err := guard.Call(func() error { s.serveLocked(rc, r, path); return nil }); err != nil {
		s.log.Error("gitlabfake handler panicked", "method", r.Method, "path", r.URL.Path, "panic", err)
		if rc.status == 0 {
			rc.fail(http.StatusInternalServerError, "500 Internal Server Error")
		}
	}
}

// serveLocked answers the request of rc (at escaped path) holding s.mu:
// the request limits, rate limits and faults, then the route.
func (s *Server) serveLocked(rc *reqCtx, r *http.Request, path string) {
	if !rc.countRequest(s, rc.user, s.now()) {
		return
	}
	if rl := s.rateLimitOf(rc.user); rl != nil {
		rc.writeRateLimit(rl, s.now())
		return
	}
	if f := s.takeFault(r.Method, path, rc.user); f != nil && !f.AfterEffect {
		rc.writeFault(f)
		return
	} else if f != nil {
		// The call runs and takes effect; its answer is lost and the fault
		// is answered instead.
		w := rc.w
		rc.w = httptest.NewRecorder()
		defer func() {
			rc.w, rc.status = w, 0
			rc.writeFault(f)
		}()
	}
	apiPath, ok := trimAPI(path)
	if !ok {
		rc.writeJSON(http.StatusNotFound, map[string]any{"error": "404 Not Found"})
		return
	}
	if rc.user == nil {
		rc.fail(http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	rt, params, exists := match(r.Method, apiPath)
	if rt == nil {
		if exists {
			rc.fail(http.StatusMethodNotAllowed, "405 Method Not Allowed")
			return
		}
		rc.writeJSON(http.StatusNotFound, map[string]any{"error": "404 Not Found"})
		return
	}
	rc.params = params
	rt.handle(s, rc)
}

// endpointOf names the route of a call (route.endpoint), "" when the path
// is not one of the API's routes.
func endpointOf(method, escaped string) string {
	apiPath, ok := trimAPI(escaped)
	if !ok {
		return ""
	}
	if rt, _, _ := match(method, apiPath); rt != nil {
		return rt.endpoint
	}
	return ""
}

// token returns the credential of r: PRIVATE-TOKEN, or Authorization: Bearer.
func token(r *http.Request) string {
	if t := r.Header.Get("PRIVATE-TOKEN"); t != "" {
		return t
	}
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		return strings.TrimPrefix(a, "Bearer ")
	}
	return ""
}

// str returns a request parameter from the JSON body, the form body or the
// query string, in that order (client-go sends JSON for POST/PUT and a
// query string for GET).
func (rc *reqCtx) str(name string) (string, bool) {
	if v, ok := rc.json[name]; ok && v != nil {
		switch t := v.(type) {
		case string:
			return t, true
		case bool:
			return strconv.FormatBool(t), true
		case float64:
			return strconv.FormatFloat(t, 'f', -1, 64), true
		default:
			b, _ := json.Marshal(t)
			return string(b), true
		}
	}
	if rc.json == nil && len(rc.body) > 0 &&
		strings.HasPrefix(rc.r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		if form, err := url.ParseQuery(string(rc.body)); err == nil && form.Has(name) {
			return form.Get(name), true
		}
	}
	q := rc.r.URL.Query()
	if q.Has(name) {
		return q.Get(name), true
	}
	return "", false
}

// get returns a parameter or "".
func (rc *reqCtx) get(name string) string {
	v, _ := rc.str(name)
	return v
}

// boolean returns a boolean parameter and whether it was given.
func (rc *reqCtx) boolean(name string) (bool, bool) {
	v, ok := rc.str(name)
	if !ok {
		return false, false
	}
	b, err := strconv.ParseBool(v)
	return err == nil && b, true
}

func (rc *reqCtx) writeJSON(status int, v any) {
	rc.status = status
	rc.w.Header().Set("Content-Type", "application/json")
	rc.w.WriteHeader(status)
	_ = json.NewEncoder(rc.w).Encode(v)
}

// fail writes GitLab's error body {"message": msg}.
func (rc *reqCtx) fail(status int, msg any) {
	rc.writeJSON(status, map[string]any{"message": msg})
}

// missing answers 400 {"error": "<name> is missing"}, Grape's validation
// error for a required parameter.
func (rc *reqCtx) missing(name string) {
	rc.writeJSON(http.StatusBadRequest, map[string]any{"error": name + " is missing"})
}

// paginate writes items as a page with GitLab's offset pagination headers
// (doc/api/rest/_index.md): page (default 1), per_page (default 20, max 100),
// X-Total, X-Total-Pages, X-Page, X-Per-Page, X-Next-Page, X-Prev-Page, Link.
func (rc *reqCtx) paginate(items []any) {
	page, _ := strconv.Atoi(rc.get("page"))
	if page < 1 {
		page = 1
	}
	per, _ := strconv.Atoi(rc.get("per_page"))
	if per < 1 {
		per = 20
	}
	per = min(per, 100)
	total := len(items)
	pages := max(1, (total+per-1)/per)
	lo := min((page-1)*per, total)
	hi := min(lo+per, total)
	h := rc.w.Header()
	h.Set("X-Total", strconv.Itoa(total))
	h.Set("X-Total-Pages", strconv.Itoa(pages))
	h.Set("X-Page", strconv.Itoa(page))
	h.Set("X-Per-Page", strconv.Itoa(per))
	h.Set("X-Next-Page", "")
	h.Set("X-Prev-Page", "")
	link := func(p int, rel string) string {
		u := *rc.r.URL
		u.Scheme, u.Host = "http", rc.r.Host
		q := u.Query()
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(per))
		u.RawQuery = q.Encode()
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	links := []string{}
	if page < pages {
		h.Set("X-Next-Page", strconv.Itoa(page+1))
		links = append(links, link(page+1, "next"))
	}
	if page > 1 {
		h.Set("X-Prev-Page", strconv.Itoa(page-1))
		links = append(links, link(page-1, "prev"))
	}
	links = append(links, link(1, "first"), link(pages, "last"))
	h.Set("Link", strings.Join(links, ", "))
	rc.writeJSON(http.StatusOK, items[lo:hi])
}

// sortByID orders items by id, descending when desc (ids grow with time).
func sortByID[T any](items []T, id func(T) int64, desc bool) {
	sort.SliceStable(items, func(i, j int) bool {
		if desc {
			return id(items[i]) > id(items[j])
		}
		return id(items[i]) < id(items[j])
	})
}

// restTime formats t as GitLab's REST API does: 2019-07-11T22:34:43.500Z.
func restTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// hookTime formats t as webhook payloads do: 2023-12-05 18:40:22 UTC.
func hookTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 MST") }

// timeOrNil returns restTime(t), or nil for the zero time.
func timeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return restTime(t)
}

// strOrNil returns s, or nil when empty (GitLab's null).
func strOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}
