package bot

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// openAPIRoundTripper validates every request a test sends to the bot, and
// every answer, against the OpenAPI document (api/openapi.json) with
// kin-openapi, so that the document cannot drift from the handlers. It is
// http.DefaultTransport in this package's tests (TestMain): the tests' own
// clients, the stand-in approval system's callbacks and the fake GitLab's
// webhooks all go through it. Requests to anything but the bot's routes
// (/api/v1/, /webhooks/, /callbacks/; the fakes serve other paths) pass
// unchecked.
//
// The rules: a request the document lacks (no route) must be refused by the
// bot with a 4xx, else it is a violation ("the bot serves a route the
// document does not describe"); a request the document refuses (a missing
// required field, a wrong type) must be refused by the bot with a 4xx; every
// answer of a documented route must have a documented status and match its
// schema. A violation is recorded (TestMain fails the run) and returned as
// the request's error.
type openAPIRoundTripper struct {
	router routers.Router
	next   http.RoundTripper

	// checked counts the exchanges validated (a documented route).
	checked atomic.Int64

	mu         sync.Mutex
	violations []string
}

// openAPIValidator is the round tripper TestMain installs.
var openAPIValidator *openAPIRoundTripper

// newOpenAPIRoundTripper loads and validates doc and returns a round tripper
// that validates through next.
func newOpenAPIRoundTripper(doc []byte, next http.RoundTripper) (*openAPIRoundTripper, error) {
	loader := openapi3.NewLoader()
	spec, err := loader.LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("loading the OpenAPI document: %w", err)
	}
	if err := spec.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is invalid: %w", err)
	}
	router, err := gorillamux.NewRouter(spec)
	if err != nil {
		return nil, fmt.Errorf("routing the OpenAPI document: %w", err)
	}
	return &openAPIRoundTripper{router: router, next: next}, nil
}

// botPath reports whether path is one of the bot's routes the document must
// describe.
func botPath(path string) bool {
	for _, p := range []string{"/api/v1/", "/webhooks/", "/callbacks/"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// Violations returns the violations recorded so far.
func (v *openAPIRoundTripper) Violations() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.violations...)
}

func (v *openAPIRoundTripper) violation(format string, args ...any) error {
	msg := "OpenAPI: " + fmt.Sprintf(format, args...)
	v.mu.Lock()
	v.violations = append(v.violations, msg)
	v.mu.Unlock()
	return fmt.Errorf("%s", msg)
}

// RoundTrip implements http.RoundTripper.
func (v *openAPIRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if !botPath(req.URL.Path) {
		return v.next.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	what := req.Method + " " + req.URL.Path
	route, params, routeErr := v.router.FindRoute(req)
	var in *openapi3filter.RequestValidationInput
	var reqErr error
	if routeErr == nil {
		check := req.Clone(req.Context())
		check.Body = io.NopCloser(bytes.NewReader(body))
		if check.Header.Get("Content-Type") == "" && len(body) > 0 {
			// The bot reads every body as JSON, whatever its
			// Content-Type (the document's info says so).
			check.Header.Set("Content-Type", "application/json")
		}
		in = &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		reqErr = openapi3filter.ValidateRequest(req.Context(), in)
	}
	resp, err := v.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	switch {
	case routeErr != nil && resp.StatusCode < 400:
		return nil, v.violation("%s is not in the document (%v), yet the bot answered %d", what, routeErr, resp.StatusCode)
	case routeErr != nil:
		return resp, nil // refused by the bot, unknown to the document: they agree
	case reqErr != nil && resp.StatusCode < 400:
		return nil, v.violation("the document refuses %s (%v), yet the bot answered %d", what, reqErr, resp.StatusCode)
	}
	v.checked.Add(1)
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(respBody)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		return nil, v.violation("the answer %d to %s does not match the document: %v\nbody: %.300s", resp.StatusCode, what, err, respBody)
	}
	return resp, nil
}
