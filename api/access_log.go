package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"
)

// accessNoteKey is the request context key of the *accessNote a handler
// fills in for the access line.
type accessNoteKey struct{}

// accessNote carries what a handler learnt that the access line names:
// the operation a request created or acted on.
type accessNote struct{ operationID string }

// noteOperation records the operation id of the request for its access
// line (a no-op outside accessLog).
func noteOperation(ctx context.Context, id string) {
	if n, ok := ctx.Value(accessNoteKey{}).(*accessNote); ok {
		n.operationID = id
	}
}

// callbackPeekBytes bounds the copy of a callback body kept to name its
// operation in the access line.
const callbackPeekBytes = 64 << 10

// AccessLog writes one info line per HTTP request once it is answered:
// method, route (the route template, so ids do not make every line
// unique; "unmatched" for a 404), status, duration in milliseconds, and
// the GitLab delivery's uuid (X-Gitlab-Event-UUID, else Idempotency-Key) or
// the operation id (the {id} of the path, the change a submission created,
// the operation_id of a callback's body) when there is one. /healthz,
// /readyz and /metrics are logged at debug: probes and scrapes would
// drown the rest.
func AccessLog(log *slog.Logger, router *mux.Router, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		route := "unmatched"
		var opID string
		var match mux.RouteMatch
		if router.Match(r, &match) && match.Route != nil {
			if tpl, err := match.Route.GetPathTemplate(); err == nil {
				route = tpl
			}
			opID = match.Vars["id"]
		}
		var peek *bytes.Buffer
		if strings.HasPrefix(route, "/callbacks/") && r.Body != nil {
			peek = &bytes.Buffer{}
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.TeeReader(r.Body, &limitedWriter{buf: peek, n: callbackPeekBytes}), r.Body}
		}
		note := &accessNote{}
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), accessNoteKey{}, note)))
		if note.operationID != "" {
			opID = note.operationID
		}
		if opID == "" && peek != nil {
			var body struct {
				OperationID string `json:"operation_id"`
			}
			if json.Unmarshal(peek.Bytes(), &body) == nil {
				opID = body.OperationID
			}
		}
		level := slog.LevelInfo
		switch route {
		case "/healthz", "/readyz", "/metrics":
			level = slog.LevelDebug
		}
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("route", route),
			slog.Int("status", rec.code()), slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000)}
		if id := deliveryID(r); id != "" {
			attrs = append(attrs, slog.String("delivery_uuid", id))
		}
		if opID != "" {
			attrs = append(attrs, slog.String("operation_id", opID))
		}
		log.LogAttrs(r.Context(), level, "http request", attrs...)
	})
}

// deliveryID is the id GitLab gives a webhook delivery: X-Gitlab-Event-UUID,
// else Idempotency-Key (GitLab 17.4+), cut to 128 bytes.
func deliveryID(r *http.Request) string {
	id := r.Header.Get("X-Gitlab-Event-UUID")
	if id == "" && strings.HasPrefix(r.URL.Path, "/webhooks/") {
		id = r.Header.Get("Idempotency-Key")
	}
	if len(id) > 128 {
		id = id[:128]
	}
	return strings.ToValidUTF8(id, "?")
}

// limitedWriter keeps the first n bytes written to it and drops the rest.
type limitedWriter struct {
	buf *bytes.Buffer
	n   int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if room := l.n - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// statusRecorder remembers the status a handler answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}
