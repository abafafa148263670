package platform

import (
	"net/http"
	"time"
)

// OwnHTTPClient returns the HTTP client an adapter should use: a copy of hc,
// or a new client with timeout when hc is nil, whose Transport is the
// adapter's own clone of http.DefaultTransport when hc names none.
//
// An adapter never shares http.DefaultTransport: anything in the process
// that calls CloseIdleConnections on it (net/http/httptest.Server.Close
// does) breaks a connection an in-flight call is about to reuse, and the call
// fails with "http: CloseIdleConnections called" instead of reaching the
// platform. A transport of its own keeps one adapter's connection pool out
// of everybody else's reach. timeout bounds one attempt.
func OwnHTTPClient(hc *http.Client, timeout time.Duration) *http.Client {
	h := &http.Client{Timeout: timeout}
	if hc != nil {
		c := *hc
		h = &c
	}
	if h.Transport == nil {
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			h.Transport = dt.Clone()
		}
	}
	return h
}
