// Package approvalfake is a stand-in external approval system for tests and
// the demo: it answers POST /approvals with a ticket and, when told to,
// calls the bot back with a signed decision. It holds state in memory only
// and must never be used in production.
package approvalfake

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"changebot/platform/approval"
)

// Options configure the stand-in.
type Options struct {
	// Secret signs callbacks (X-Changebot-Timestamp and X-Changebot-Signature: sha256=<hex HMAC of "<timestamp>." + body>).
	Secret string
	// AutoDecision, when set ("approved", "rejected", "withdrawn"), is sent
	// back AutoDelay after each request; empty means tests decide with Decide.
	AutoDecision string
	AutoDelay    time.Duration
	// Approver names the deciding person in callbacks; default "approver".
	Approver string
	// DecideBeforeAnswer sends the AutoDecision callback synchronously,
	// before answering the request: the decision then reaches the bot before
	// it has recorded APPROVAL_SENT (DESIGN §3 step 2).
	DecideBeforeAnswer bool
	// TicketURL, when set, is the base of the ticket pages: each answer
	// carries "ticket_url": TicketURL + "/" + ticket id (the contract's
	// optional field). Empty means answers without ticket_url.
	TicketURL string
	// TicketPages makes the stand-in serve a page per ticket, GET
	// /tickets/{id} (the request it holds, as JSON), and answer with
	// "ticket_url" pointing to it; it takes precedence over TicketURL.
	TicketPages bool
	// Listener, when set, is where the stand-in serves (`changebot demo
	// -keep` in a container); nil means a free port on 127.0.0.1.
	Listener net.Listener
}

// Request is one approval request received, with the ticket it got.
type Request struct {
	approval.Request
	TicketID string `json:"-"`
}

// Server is the stand-in approval system.
type Server struct {
	opts Options
	srv  *httptest.Server
	hc   *http.Client

	mu       sync.Mutex
	requests []Request
	tickets  map[string]string // operation id -> ticket id
	failNext int
	results  []string
	wg       sync.WaitGroup
}

// New starts the stand-in on opts.Listener, else on 127.0.0.1.
func New(opts Options) *Server {
	if opts.Approver == "" {
		opts.Approver = "approver"
	}
	s := &Server{opts: opts, tickets: map[string]string{}, hc: &http.Client{Timeout: 10 * time.Second}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if opts.Listener != nil {
		_ = s.srv.Listener.Close()
		s.srv.Listener = opts.Listener
	}
	s.srv.Start()
	return s
}

// URL is the base URL to configure as CHANGEBOT_APPROVAL_URL.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server after pending callbacks.
func (s *Server) Close() { s.wg.Wait(); s.srv.Close() }

// FailNext makes the next n requests answer 503.
func (s *Server) FailNext(n int) { s.mu.Lock(); s.failNext = n; s.mu.Unlock() }

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Results returns the "result" of every callback answer received.
func (s *Server) Results() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.results...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if id, ok := strings.CutPrefix(r.URL.Path, "/tickets/"); ok && r.Method == http.MethodGet && s.opts.TicketPages {
		s.serveTicket(w, id)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/approvals" {
		http.NotFound(w, r)
		return
	}
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.OperationID == "" {
		http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	if s.failNext > 0 {
		s.failNext--
		s.mu.Unlock()
		http.Error(w, `{"error":"unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		key = req.OperationID
	}
	ticket, seen := s.tickets[key]
	if !seen { // idempotent per Idempotency-Key (the operation id), as the contract requires
		ticket = fmt.Sprintf("T-%d", len(s.tickets)+1)
		s.tickets[key] = ticket
	}
	req.TicketID = ticket
	s.requests = append(s.requests, req)
	auto := s.opts.AutoDecision
	s.mu.Unlock()
	if auto != "" && !seen && s.opts.DecideBeforeAnswer {
		_, _ = s.Decide(r.Context(), req, auto, "req-"+ticket)
	} else if auto != "" && !seen {
		s.wg.Add(1)
		time.AfterFunc(s.opts.AutoDelay, func() {
			defer s.wg.Done()
			_, _ = s.Decide(context.Background(), req, auto, "req-"+ticket)
		})
	}
	w.Header().Set("Content-Type", "application/json")
	answer := approval.Ticket{ID: ticket}
	switch {
	case s.opts.TicketPages:
		answer.URL = s.URL() + "/tickets/" + ticket
	case s.opts.TicketURL != "":
		answer.URL = strings.TrimRight(s.opts.TicketURL, "/") + "/" + ticket
	}
	_ = json.NewEncoder(w).Encode(answer)
}

// serveTicket answers a ticket's page: the request that opened it.
func (s *Server) serveTicket(w http.ResponseWriter, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, req := range s.requests {
		if req.TicketID == id {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"ticket_id": id, "request": req.Request})
			return
		}
	}
	http.Error(w, `{"error":"no such ticket"}`, http.StatusNotFound)
}

// Decide sends a signed decision for req to its callback URL and returns
// the bot's "result".
func (s *Server) Decide(ctx context.Context, req Request, decision, requestID string) (string, error) {
	body, _ := json.Marshal(map[string]any{"request_id": requestID, "operation_id": req.OperationID,
		"ticket_id": req.TicketID, "decision": decision, "approver": s.opts.Approver, "ext": req.Ext})
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, req.CallbackURL, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	hreq.Header.Set("Content-Type", "application/json")
	ts := time.Now().Unix()
	hreq.Header.Set("X-Changebot-Timestamp", strconv.FormatInt(ts, 10))
	hreq.Header.Set("X-Changebot-Signature", Sign(s.opts.Secret, ts, body))
	resp, err := s.hc.Do(hreq)
	if err != nil {
		return "", fmt.Errorf("calling back: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		Result string `json:"result"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	s.mu.Lock()
	s.results = append(s.results, out.Result)
	s.mu.Unlock()
	if resp.StatusCode != http.StatusOK {
		return out.Result, fmt.Errorf("callback answered %d", resp.StatusCode)
	}
	return out.Result, nil
}

// Sign returns "sha256=<hex HMAC-SHA256(secret, "<unix>." + body)>", the
// X-Changebot-Signature of body sent with X-Changebot-Timestamp: unix. It
// is written here from the README's description, apart from the bot's
// own, so the two are checked against each other.
func Sign(secret string, unix int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(unix, 10) + "."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
