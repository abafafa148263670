// Package approval is the HTTP client of the external approval system
// (README "Approval system contract"): POST {approval_url}/approvals with
// the change, answered 2xx {"ticket_id": "...", "ticket_url": "..."}
// (ticket_url optional). It owns no state and knows nothing of the flow.
package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"changebot/platform"
)

// Request is the body sent to the approval system.
type Request struct {
	OperationID string         `json:"operation_id"`
	SubjectID   string         `json:"subject_id"`
	TargetKey   string         `json:"target_key"`
	Title       string         `json:"title"`
	RequestedBy string         `json:"requested_by"`
	CallbackURL string         `json:"callback_url"`
	Ext         map[string]any `json:"ext"`
	// IdempotencyKey is the request's Idempotency-Key; "" means
	// OperationID (the contract's key). A change asking again after an
	// operator resumed it sends another key, so the system opens a new
	// ticket (see flows' requestApproval).
	IdempotencyKey string `json:"-"`
}

// Ticket is the approval system's answer to a request (README "Approval
// system contract").
type Ticket struct {
	// ID is the ticket id (ticket_id), never empty.
	ID string `json:"ticket_id"`
	// URL is the ticket's page for people (ticket_url), "" when the system
	// gave none; the status comment links it. Only an absolute http(s) URL
	// is kept: anything else is dropped, never an error.
	URL string `json:"ticket_url,omitempty"`
}

// Client calls the approval system.
type Client struct {
	baseURL string
	hc      *http.Client
}

// New returns a client for the approval system at baseURL; hc nil means a
// client with a 10 s timeout.
func New(baseURL string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), hc: hc}
}

// RequestApproval asks for a decision and returns the ticket. Non-2xx answers
// are *platform.Error with the status (429 and 5xx are transient for the
// caller; other 4xx are not); a 2xx without ticket_id is an error.
func (c *Client) RequestApproval(ctx context.Context, r Request) (Ticket, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return Ticket{}, fmt.Errorf("encoding approval request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/approvals", bytes.NewReader(body))
	if err != nil {
		return Ticket{}, fmt.Errorf("building approval request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	key := r.IdempotencyKey
	if key == "" {
		key = r.OperationID
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.hc.Do(req)
	if err != nil {
		return Ticket{}, fmt.Errorf("requesting approval for %s: %w", r.OperationID, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		pe := &platform.Error{Method: http.MethodPost, Path: "/approvals", Status: resp.StatusCode,
			Message: strings.TrimSpace(string(data))}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			pe.RetryAfter = time.Duration(s) * time.Second
		}
		return Ticket{}, fmt.Errorf("requesting approval for %s: %w", r.OperationID, pe)
	}
	var out Ticket
	if err := json.Unmarshal(data, &out); err != nil || out.ID == "" {
		return Ticket{}, fmt.Errorf("requesting approval for %s: %w", r.OperationID, errors.New("answer has no ticket_id"))
	}
	if !webURL(out.URL) {
		out.URL = ""
	}
	return out, nil
}

// webURL reports whether u is an absolute http or https URL with a host.
func webURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != ""
}
