package guard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHTTP: behind the guard a handler's panic answers 500 JSON, counts
// under WhereHTTP, runs the request's OnPanic hooks and is logged;
// http.ErrAbortHandler is re-raised to net/http, not answered, counted,
// hooked or logged; a handler that does not panic is untouched.
func TestHTTP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		handler   func(w http.ResponseWriter, r *http.Request)
		wantCode  int
		wantBody  string
		wantRaise any // the value re-raised to net/http
		wantCount float64
	}{
		{name: "answers", handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) },
			wantCode: http.StatusNoContent},
		{name: "panics", handler: func(http.ResponseWriter, *http.Request) { panic("handler bug") },
			wantCode: http.StatusInternalServerError, wantBody: `{"error":"internal error"}` + "\n", wantCount: 1},
		{name: "aborts", handler: func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) },
			wantCode: http.StatusOK, wantRaise: http.ErrAbortHandler},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t)
			hooked := 0
			h := HTTP(s.cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				OnPanic(r.Context(), func() { hooked++ })
				tc.handler(w, r)
			}))
			w := httptest.NewRecorder()
			raised := serveCatching(h, w, httptest.NewRequest(http.MethodPost, "/hooks/x", nil))
			if raised != tc.wantRaise {
				t.Errorf("re-raised %v, want %v", raised, tc.wantRaise)
			}
			if w.Code != tc.wantCode || w.Body.String() != tc.wantBody {
				t.Errorf("answered %d %q, want %d %q", w.Code, w.Body, tc.wantCode, tc.wantBody)
			}
			if tc.wantBody != "" && w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q, want application/json", w.Header().Get("Content-Type"))
			}
			if got := s.count(WhereHTTP); got != tc.wantCount {
				t.Errorf("panics{where=http} = %v, want %v", got, tc.wantCount)
			}
			if hooked != int(tc.wantCount) {
				t.Errorf("OnPanic hook ran %d times, want %v", hooked, tc.wantCount)
			}
			logs := s.logs.String()
			if logged := strings.Contains(logs, `msg="handler panicked"`); logged != (tc.wantCount == 1) {
				t.Errorf("log %q, want a panic logged: %v", logs, tc.wantCount == 1)
			}
			if tc.wantCount == 1 {
				for _, want := range []string{"method=POST", "path=/hooks/x", `panic="handler bug"`, "guard.TestHTTP"} {
					if !strings.Contains(logs, want) {
						t.Errorf("log %q lacks %s", logs, want)
					}
				}
			}
		})
	}
}

// serveCatching serves r as net/http's server would, returning the value of
// a panic that reached it.
func serveCatching(h http.Handler, w http.ResponseWriter, r *http.Request) (raised any) {
	defer func() { raised = recover() }()
	h.ServeHTTP(w, r)
	return nil
}
