package guard

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
)

// internalErrorBody is the answer to a request whose handler panicked, in
// the shape of every JSON error answer of the bot.
const internalErrorBody = `{"error":"internal error"}` + "\n"

// HTTP returns next behind the HTTP panic guard, the one recovery of every
// HTTP handler: a panic answers 500 {"error":"internal error"}, is counted
// under WhereHTTP, runs the hooks the handler registered with OnPanic, and
// is logged with the method, path and stack. http.ErrAbortHandler is
// re-raised untouched, as net/http expects of a handler that aborts its
// response: not answered, counted or logged.
func HTTP(cfg Config, next http.Handler) http.Handler {
	log := cfg.logger()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hooks := &panicHooks{}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { //nolint:errorlint // compared as net/http does
				panic(v)
			}
			cfg.count(WhereHTTP)
			for _, f := range hooks.fs {
				f()
			}
			log.ErrorContext(r.Context(), "handler panicked", attrMethod, r.Method, attrPath, r.URL.Path,
				attrPanic, fmt.Sprint(v), attrStack, string(debug.Stack()))
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(internalErrorBody))
		}()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), panicHooksKey{}, hooks)))
	})
}

type panicHooksKey struct{}

// panicHooks are the OnPanic hooks of one request.
type panicHooks struct{ fs []func() }

// OnPanic registers f to run when the handler serving the request of ctx
// panics and HTTP recovers it (not for http.ErrAbortHandler): a handler
// counts its own metrics of a failed request with it. Call it from the
// handler's goroutine; without HTTP around the handler it does nothing.
func OnPanic(ctx context.Context, f func()) {
	if h, ok := ctx.Value(panicHooksKey{}).(*panicHooks); ok {
		h.fs = append(h.fs, f)
	}
}
