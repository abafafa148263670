package platform_test

import (
	"net/http"
	"testing"
	"time"

	"changebot/platform"
)

// TestOwnHTTPClientNeverSharesDefaultTransport checks that an adapter's
// client has a connection pool of its own: with http.DefaultTransport,
// another part of the process closing its idle connections (httptest does)
// broke in-flight platform calls ("http: CloseIdleConnections called").
func TestOwnHTTPClientNeverSharesDefaultTransport(t *testing.T) {
	t.Parallel()
	custom := &http.Transport{}
	tests := []struct {
		name          string
		in            *http.Client
		wantTimeout   time.Duration
		wantTransport http.RoundTripper // nil: a fresh *http.Transport
	}{
		{name: "nil client", in: nil, wantTimeout: 30 * time.Second},
		{name: "client without transport", in: &http.Client{Timeout: 5 * time.Second}, wantTimeout: 5 * time.Second},
		{name: "caller's transport kept", in: &http.Client{Transport: custom}, wantTimeout: 0, wantTransport: custom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var before http.Client
			if tt.in != nil {
				before = *tt.in
			}
			got := platform.OwnHTTPClient(tt.in, 30*time.Second)
			if got == tt.in {
				t.Fatal("OwnHTTPClient returned the caller's client; want a copy")
			}
			if got.Timeout != tt.wantTimeout {
				t.Errorf("Timeout = %v; want %v", got.Timeout, tt.wantTimeout)
			}
			if tt.wantTransport != nil {
				if got.Transport != tt.wantTransport {
					t.Errorf("Transport = %p; want the caller's %p", got.Transport, tt.wantTransport)
				}
			} else {
				tr, ok := got.Transport.(*http.Transport)
				if !ok || tr == nil {
					t.Fatalf("Transport = %T; want a *http.Transport of its own", got.Transport)
				}
				if got.Transport == http.DefaultTransport {
					t.Error("Transport is http.DefaultTransport; want a clone")
				}
			}
			if tt.in != nil && (tt.in.Transport != before.Transport || tt.in.Timeout != before.Timeout) {
				t.Error("the caller's client was changed")
			}
		})
	}
}
