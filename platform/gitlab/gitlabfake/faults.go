package gitlabfake

import (
	"encoding/json"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Call is one REST call the server received, recorded after it was answered
// (faulted calls included).
type Call struct {
	// Method is the HTTP method, for example "PUT".
	Method string
	// Path is the escaped request path without the query, for example
	// "/api/v4/projects/group%2Frepo/merge_requests/1/merge".
	Path string
	// Query is the raw query string.
	Query string
	// Endpoint names the route the call matched: the method and the route
	// pattern, path parameters as ":name", for example
	// "PUT /projects/:id/merge_requests/:iid/merge"; "" when the path is
	// none of the fake's routes.
	Endpoint string
	// Status is the HTTP status answered.
	Status int
	// User is the authenticated username, "" when the token was unknown.
	User string
	// Body is the raw request body.
	Body []byte
	// At is when the call was answered (wall clock, for checking waits such
	// as Retry-After).
	At time.Time
	// ClockAt is when the call was answered on the server's clock
	// (Options.NowFunc), for checking waits in tests with an injected clock.
	ClockAt time.Time
}

// Calls returns a copy of every REST call received so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsByEndpoint counts the calls received so far by Call.Endpoint
// (calls of no route under ""), faulted and refused calls included.
func (s *Server) CallsByEndpoint() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, c := range s.calls {
		out[c.Endpoint]++
	}
	return out
}

// CallCount counts the calls with method ("" = any) whose escaped path
// matches pathPattern segment by segment, where a segment "*" matches any
// one segment: "/api/v4/projects/*/merge_requests/*/approve".
func (s *Server) CallCount(method, pathPattern string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if (method == "" || c.Method == method) && pathMatches(pathPattern, c.Path) {
			n++
		}
	}
	return n
}

// Fault makes the next matching REST calls fail instead of running. Faults
// are checked before authentication, in the order they were injected; the
// first match wins.
type Fault struct {
	// Method to match; "" matches any.
	Method string
	// PathPattern is an escaped path with "*" per segment, as in CallCount.
	PathPattern string
	// Status is the HTTP status to answer, for example 500, 429, 405.
	Status int
	// Body is the answer body: a JSON document is sent as is; other text
	// is sent as {"message": Body}; empty sends {"message": "<status> <text>"}
	// like GitLab's helpers ("500 Internal Server Error").
	Body string
	// Times is how many calls fail; 0 means every call until ClearFaults.
	Times int
	// RetryAfter, when set, is sent as the Retry-After header (seconds).
	RetryAfter string
	// User, when set, limits the fault to calls authenticated as this
	// username (for example one reviewer robot's approve calls).
	User string
	// AfterEffect lets the call run and take effect, then replaces its
	// answer with the fault, as when a proxy or a timeout loses GitLab's
	// answer to a write that happened.
	AfterEffect bool
	// Rate, when in (0, 1), makes each matching call fail with that
	// probability only (chaos runs); a call spared by the draw goes on to
	// the next fault or runs normally. Times counts only the calls that
	// failed. 0 (or 1) fails every matching call.
	Rate float64
}

// InjectFault adds f. See Fault.
func (s *Server) InjectFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// takeFault returns the fault for this call by u (nil when the token is
// unknown) and uses up one of its times.
func (s *Server) takeFault(method, path string, u *user) *Fault {
	for i, f := range s.faults {
		if (f.Method != "" && f.Method != method) || !pathMatches(f.PathPattern, path) {
			continue
		}
		if f.User != "" && (u == nil || u.username != f.User) {
			continue
		}
		if f.Rate > 0 && f.Rate < 1 && mrand.Float64() >= f.Rate {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		return f
	}
	return nil
}

func (rc *reqCtx) writeFault(f *Fault) {
	if f.RetryAfter != "" {
		rc.w.Header().Set("Retry-After", f.RetryAfter)
	}
	body := strings.TrimSpace(f.Body)
	switch {
	case body == "":
		// GitLab's helpers prefix the code: "500 Internal Server Error".
		rc.fail(f.Status, strconv.Itoa(f.Status)+" "+http.StatusText(f.Status))
	case json.Valid([]byte(body)):
		rc.status = f.Status
		rc.w.Header().Set("Content-Type", "application/json")
		rc.w.WriteHeader(f.Status)
		_, _ = rc.w.Write([]byte(body))
	default:
		rc.fail(f.Status, body)
	}
}

func pathMatches(pattern, path string) bool {
	ps := strings.Split(strings.Trim(pattern, "/"), "/")
	xs := strings.Split(strings.Trim(path, "/"), "/")
	if len(ps) != len(xs) {
		return false
	}
	for i := range ps {
		if ps[i] != "*" && ps[i] != xs[i] {
			return false
		}
	}
	return true
}
