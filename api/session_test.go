package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWebSessionsEnd: a login issues a session of its own (two logins
// with one token get two cookies, neither holding the token), which every
// page refuses once Config.SessionTTL has passed on the Handler's clock,
// and which logout ends on the server: the same cookie sent again is
// refused, while another session of the same token lives on. A session
// whose issue time was edited, or signed by no configured token, is none.
// When the revocation cannot be stored, logout says so and keeps the
// cookie.
func TestWebSessionsEnd(t *testing.T) {
	t.Parallel()
	// The reload of a page (same_site=1) answers 200 with a session and
	// 303 to the login page without one.
	const page = "/ui/changes?same_site=1"
	tests := []struct {
		name string
		// run logs in on s and returns the cookie to send.
		run  func(t *testing.T, s *apiSetup) string
		want int
	}{
		{"fresh", func(t *testing.T, s *apiSetup) string { return s.login(t, viewerToken) }, http.StatusOK},
		{"a second before its TTL", func(t *testing.T, s *apiSetup) string {
			c := s.login(t, viewerToken)
			s.clock.Add(DefaultSessionTTL - time.Second)
			return c
		}, http.StatusOK},
		{"at its TTL", func(t *testing.T, s *apiSetup) string {
			c := s.login(t, viewerToken)
			s.clock.Add(DefaultSessionTTL)
			return c
		}, http.StatusSeeOther},
		{"a day later", func(t *testing.T, s *apiSetup) string {
			c := s.login(t, operatorToken)
			s.clock.Add(24 * time.Hour)
			return c
		}, http.StatusSeeOther},
		{"after logout", func(t *testing.T, s *apiSetup) string {
			c := s.login(t, viewerToken)
			if code, _ := s.page(t, c, "/ui/logout"); code != http.StatusSeeOther {
				t.Fatalf("logout: %d, want 303", code)
			}
			return c
		}, http.StatusSeeOther},
		{"another session of the token after logout", func(t *testing.T, s *apiSetup) string {
			gone, kept := s.login(t, viewerToken), s.login(t, viewerToken)
			if code, _ := s.page(t, gone, "/ui/logout"); code != http.StatusSeeOther {
				t.Fatalf("logout: %d, want 303", code)
			}
			return kept
		}, http.StatusOK},
		{"its issue time moved", func(t *testing.T, s *apiSetup) string {
			c := s.login(t, viewerToken)
			s.clock.Add(DefaultSessionTTL)
			parts := strings.Split(c, ".")
			parts[2] = strconv.FormatInt(s.clock.Now().Unix()-60, 10)
			return strings.Join(parts, ".")
		}, http.StatusSeeOther},
		{"signed by no configured token", func(t *testing.T, s *apiSetup) string {
			c, err := newSession(Token{Role: RoleOperator, Token: "tok-unknown"}, s.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			return c
		}, http.StatusSeeOther},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "")
			cookie := tc.run(t, s)
			if code, body := s.page(t, cookie, page); code != tc.want {
				t.Errorf("page: %d, want %d\n%s", code, tc.want, body)
			}
		})
	}

	t.Run("two logins differ", func(t *testing.T) {
		t.Parallel()
		s := setup(t, "")
		a, b := s.login(t, viewerToken), s.login(t, viewerToken)
		if a == b {
			t.Errorf("two logins with one token gave the same cookie %q", a)
		}
		for _, c := range []string{a, b} {
			if strings.Contains(c, viewerToken) {
				t.Errorf("the cookie holds the token")
			}
		}
	})

	t.Run("logout without a store", func(t *testing.T) {
		t.Parallel()
		s := setup(t, "")
		c := s.login(t, viewerToken)
		s.changes.mu.Lock()
		s.changes.err = errors.New("database down")
		s.changes.mu.Unlock()
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/ui/logout", nil)
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: c})
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || len(resp.Cookies()) != 0 {
			t.Errorf("logout with the store down: %d, cookies %v; want 503 keeping the cookie", resp.StatusCode, resp.Cookies())
		}
	})
}

// TestSessionTTLBounds: New takes a TTL from MinSessionTTL to
// MaxSessionTTL (zero: DefaultSessionTTL). That the longest outlives no
// revocation is api/backend's TestWebSessionRevocations.
func TestSessionTTLBounds(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	for _, tc := range []struct {
		ttl time.Duration
		ok  bool
	}{{0, true}, {MinSessionTTL, true}, {MaxSessionTTL, true}, {MinSessionTTL - time.Second, false}, {MaxSessionTTL + time.Second, false}} {
		_, err := New(Config{Engine: s.changes, Store: s.changes, Settings: s.settings, Queues: s.queues, MaxBodyBytes: 1, SessionTTL: tc.ttl})
		if (err == nil) != tc.ok {
			t.Errorf("SessionTTL %s: err %v, want accepted %v", tc.ttl, err, tc.ok)
		}
	}
}
