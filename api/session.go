package api

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Web sessions (issue 21 point 8). A login issues a session id of its own,
// never derived from the token alone:
//
//	v1.<token id hex>.<issued at, Unix seconds>.<nonce, 32 hex>.<mac, 64 hex>
//
// where mac is the HMAC-SHA256, keyed with the API token logged in with,
// of everything before it. Every replica holds the tokens, so every
// replica verifies any session without a secret of its own to distribute;
// only a holder of the token can forge one, and removing the token from
// CHANGEBOT_API_TOKENS ends its sessions. A session is refused once
// SessionTTL has passed since its issue time. Logout records the nonce as
// revoked in the database every replica shares (Sessions: the
// callback_requests claims, kind SessionRevokedKind), which every page
// request reads; the
// retention pruner keeps those rows retention.MinMaxAge, longer than
// MaxSessionTTL, so a revocation outlives the session it ends.

const (
	// DefaultSessionTTL is how long a web session lasts when
	// Config.SessionTTL is zero (CHANGEBOT_WEB_SESSION_TTL's default).
	DefaultSessionTTL = 12 * time.Hour
	// MinSessionTTL is the shortest Config.SessionTTL.
	MinSessionTTL = time.Minute
	// MaxSessionTTL is the longest Config.SessionTTL. It stays under
	// retention.MinMaxAge (8 days), how long the revocation of a
	// logged-out session is kept at least (TestSessionTTLBounds).
	MaxSessionTTL = 7 * 24 * time.Hour
	// SessionRevokedKind is the callback_requests kind of a logged-out
	// session (api/backend): request_id is the session's nonce,
	// operation_id the id of its token (TokenID). Persisted: never rename
	// it.
	SessionRevokedKind = "web_logout"
	// sessionVersion is the first field of a session id.
	sessionVersion = "v1"
	// sessionSkew is how far in the future an issue time may lie (another
	// replica's clock) before the session is refused.
	sessionSkew = time.Minute
)

// errNoSession is why a request's session cookie is not a session: absent,
// malformed, signed with no configured token, expired or logged out.
var errNoSession = errors.New("no valid web session")

// session is a verified web session.
type session struct {
	token  Token
	nonce  string
	issued time.Time
}

// newSession issues a session id for t at now.
func newSession(t Token, now time.Time) (string, error) {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", fmt.Errorf("drawing a web session nonce: %w", err)
	}
	body := strings.Join([]string{sessionVersion, tokenHex(t.Token), strconv.FormatInt(now.Unix(), 10), hex.EncodeToString(nonce[:])}, ".")
	return body + "." + sessionMAC(t.Token, body), nil
}

// sessionMAC is the hex HMAC-SHA256 of a session id's body keyed with the
// token it was issued for.
func sessionMAC(token, body string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("changebot web session\x00"))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

// parseSession verifies id's signature against tokens and its age at now
// against ttl; it reads nothing. Errors: errNoSession, wrapped with what
// was wrong (never the id or a token).
func parseSession(id string, tokens []Token, now time.Time, ttl time.Duration) (session, error) {
	parts := strings.Split(id, ".")
	if len(parts) != 5 || parts[0] != sessionVersion || len(parts[3]) != 32 {
		return session{}, fmt.Errorf("%w: malformed", errNoSession)
	}
	body := strings.Join(parts[:4], ".")
	var s session
	for _, t := range tokens {
		// Token ids are public (events, logs); the MAC is compared in
		// constant time.
		if t.Token != "" && tokenHex(t.Token) == parts[1] && hmac.Equal([]byte(sessionMAC(t.Token, body)), []byte(parts[4])) {
			s.token = t
		}
	}
	if s.token.Token == "" {
		return session{}, fmt.Errorf("%w: signed by no configured token", errNoSession)
	}
	secs, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return session{}, fmt.Errorf("%w: malformed issue time", errNoSession)
	}
	s.issued, s.nonce = time.Unix(secs, 0).UTC(), parts[3]
	switch {
	case s.issued.After(now.Add(sessionSkew)):
		return session{}, fmt.Errorf("%w: issued in the future", errNoSession)
	case !now.Before(s.issued.Add(ttl)):
		return session{}, fmt.Errorf("%w: expired", errNoSession)
	}
	return s, nil
}

// Sessions is where logged-out web sessions are recorded, shared by every
// replica (api/backend keeps them in the store's one-off claims,
// callback_requests kind SessionRevokedKind). A revocation must be kept
// longer than MaxSessionTTL.
type Sessions interface {
	// RevokeSession records the session with nonce, issued for the token
	// tokenID, as logged out; revoking it twice is no error.
	RevokeSession(ctx context.Context, nonce, tokenID string) error
	// SessionRevoked reports whether the session with nonce was logged
	// out.
	SessionRevoked(ctx context.Context, nonce string) (bool, error)
}

// revoked reports whether s was logged out.
func (h *Handler) revoked(ctx context.Context, s session) (bool, error) {
	revoked, err := h.cfg.Store.SessionRevoked(ctx, s.nonce)
	if err != nil {
		return false, fmt.Errorf("reading the revocation of a web session of %s: %w", TokenID(s.token.Token), err)
	}
	return revoked, nil
}

// revoke records s as logged out.
func (h *Handler) revoke(ctx context.Context, s session) error {
	if err := h.cfg.Store.RevokeSession(ctx, s.nonce, TokenID(s.token.Token)); err != nil {
		return fmt.Errorf("revoking a web session of %s: %w", TokenID(s.token.Token), err)
	}
	return nil
}
