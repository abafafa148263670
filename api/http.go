package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/gorilla/mux"

	"changebot/internal/jsonbody"
)

// noRoute answers a path the bot does not serve: 404 with the API's error
// body (openapi.json's Error), as every other 4xx of the API, rather than
// the router's plain-text "404 page not found". Under /ui/ it stays a
// plain page.
func noRoute(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/ui/") {
		http.NotFound(w, r)
		return
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such endpoint: " + r.Method + " " + r.URL.Path + " (see /api/v1/openapi.json)"})
}

// methodNotAllowed answers a known path asked with a method it does not
// serve: 405 with the API's error body instead of an empty one, and
// allow, the methods the path serves, as its Allow header (RFC 9110
// §15.5.6).
func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow []string) {
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeJSON(w, http.StatusMethodNotAllowed, map[string]string{
		"error": r.Method + " is not allowed on " + r.URL.Path + " (allowed: " + strings.Join(allow, ", ") + ")"})
}

// Fallback returns the handler of a request no route of root (its
// sub-routers included) takes: 405 with the API's error body and an Allow
// header when a route serves its path with other methods, else 404 with
// the API's error body (a plain page under /ui/). The bot sets it as
// root's NotFoundHandler and MethodNotAllowedHandler; Mount sets it on the
// /api/v1 sub-router.
func Fallback(root *mux.Router) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if allow := pathMethods(root, r); len(allow) > 0 {
			methodNotAllowed(w, r, allow)
			return
		}
		noRoute(w, r)
	})
}

// pathMethods returns, sorted, the methods the routes of root with a
// method restriction serve r's path with.
func pathMethods(root *mux.Router, r *http.Request) []string {
	var allow []string
	_ = root.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		methods, err := route.GetMethods()
		if route.GetHandler() == nil || err != nil {
			return nil // a sub-router, or a route taking every method
		}
		var m mux.RouteMatch
		if route.Match(r, &m) || errors.Is(m.MatchErr, mux.ErrMethodMismatch) {
			for _, method := range methods {
				if !slices.Contains(allow, method) {
					allow = append(allow, method)
				}
			}
		}
		return nil
	})
	slices.Sort(allow)
	return allow
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeBody reads r's body, at most limit bytes, into v: one JSON value,
// unknown fields refused, nothing but whitespace after it, no key twice in
// an object (encoding/json would keep the last silently): all of it
// jsonbody.DecodeStrict.
// When it does not, it answers 413 or 400 naming the problem in the API's
// words (JSON field paths with indexes and JSON types, never Go's:
// jsonbody.Describe) and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"error": fmt.Sprintf("body larger than %d bytes", tooLarge.Limit)})
		return false
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "reading the request body failed"})
		return false
	}
	if err := jsonbody.DecodeStrict(body, v, true); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
		return false
	}
	return true
}
