package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"changebot/internal/guard"
)

// Log attribute keys (STYLE 9).
const (
	attrDeliveryID  = "delivery_id"
	attrEvent       = "event"
	attrProjectID   = "project_id"
	attrOutcome     = "outcome"
	attrKind        = "kind"
	attrResult      = "result"
	attrRequestID   = "request_id"
	attrOperationID = "operation_id"
	attrMRIID       = "mr_iid"
	attrRemoteAddr  = "remote_addr"
	attrError       = "error"
)

// Defaults applied when a Config field is zero.
const (
	// DefaultMaxBodyBytes bounds a GitLab delivery. GitLab allows payloads
	// of up to 25 MB (GITLAB-FACTS §1.2), but merge request, pipeline and
	// note payloads are a few KiB; larger ones (pushes of many commits) are
	// events the bot ignores anyway.
	DefaultMaxBodyBytes = 5 << 20
	// DefaultCallbackMaxBodyBytes bounds an approval or deploy callback.
	DefaultCallbackMaxBodyBytes = 64 << 10
	// DefaultStoreTimeout bounds the one transaction (or acceptor call) of
	// a request. It runs detached from the client's connection: once the
	// body was read and verified, finishing the write is better than
	// dropping it because GitLab stopped waiting (it does not retry).
	DefaultStoreTimeout = 10 * time.Second
)

// answer is the JSON body of every response: small, since GitLab keeps
// only 8 KiB of it (GITLAB-FACTS §1.2).
type answer struct {
	Result     string    `json:"result,omitempty"`
	DeliveryID int64     `json:"delivery_id,omitempty"`
	Error      string    `json:"error,omitempty"`
	Problems   []Problem `json:"fields,omitempty"`
}

// Problem is one invalid field of a callback, listed in a 400 answer's
// "fields" in the shape of the API's (openapi.json's FieldError, as a
// submission's): {"field", "message"}.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, a answer) {
	b, err := json.Marshal(a)
	if err != nil {
		b = []byte(`{"error":"internal error"}`)
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// onPanic makes a panic of the handler serving r count in
// changebot_webhook_panics_total{handler} and, with count, in the handler's
// own outcome counter. The panic is the HTTP guard's (internal/guard.HTTP,
// around the router, STYLE 13): it answers 500, counts
// changebot_panics_total{where="http"}, logs, and re-raises
// http.ErrAbortHandler, which counts nothing here either.
func onPanic(r *http.Request, m *Metrics, handler string, count func()) {
	guard.OnPanic(r.Context(), func() {
		m.panics.WithLabelValues(handler).Inc()
		count()
	})
}

// limitBody bounds r's body to limit bytes (STYLE 19: before anything is
// read). It reports true when the declared Content-Length already exceeds it.
func limitBody(w http.ResponseWriter, r *http.Request, limit int64) (tooLarge bool) {
	if r.ContentLength > limit {
		return true
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	return false
}

// readBody reads the body bounded by limitBody. tooLarge is true when it
// exceeded the limit.
func readBody(r *http.Request) (body []byte, tooLarge bool, err error) {
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	if _, err := io.Copy(&buf, r.Body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("reading body: %w", err)
	}
	return buf.Bytes(), false, nil
}

// detached returns a context that outlives the client's connection but not
// timeout, keeping the request's values.
func detached(r *http.Request, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), timeout)
}

func methodNotAllowed(w http.ResponseWriter) {
	w.Header().Set("Allow", http.MethodPost)
	writeJSON(w, http.StatusMethodNotAllowed, answer{Error: "method not allowed, use POST"})
}
