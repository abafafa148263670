package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
)

// API token roles (issue 2 point 8; viewer: issue 13 point 2). They are the
// exact strings accepted in CHANGEBOT_API_TOKENS ("role:token"). A viewer
// token only reads: the API's GET endpoints and the web pages.
const (
	RoleSubmitter = "submitter"
	RoleOperator  = "operator"
	RoleViewer    = "viewer"
)

// ValidRole reports whether role is one of RoleSubmitter, RoleOperator and
// RoleViewer.
func ValidRole(role string) bool {
	return role == RoleSubmitter || role == RoleOperator || role == RoleViewer
}

// redacted replaces a token in String, GoString and LogValue.
const redacted = "[REDACTED]"

// Token is one REST API bearer token and the role it grants
// (RoleSubmitter, RoleOperator or RoleViewer). Its String, GoString and
// LogValue hide the token.
type Token struct {
	Role  string
	Token string
}

// String returns "role:[REDACTED]".
func (t Token) String() string {
	if t.Token == "" {
		return t.Role + ":"
	}
	return t.Role + ":" + redacted
}

// GoString is String, so that %#v cannot print the token either.
func (t Token) GoString() string { return t.String() }

// LogValue implements slog.LogValuer without the token.
func (t Token) LogValue() slog.Value { return slog.StringValue(t.String()) }

// auth checks "Authorization: Bearer <token>" (any case of the scheme) in constant time against every
// configured API token; role "" accepts any role (viewers included: the
// GET endpoints), "submitter" also accepts operators but not viewers.
func (h *Handler) auth(role string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The scheme is case-insensitive (RFC 9110 §11.1).
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		ok = ok && strings.EqualFold(scheme, "Bearer")
		got = strings.TrimSpace(got)
		matched, id := "", ""
		for _, t := range h.cfg.Tokens {
			if subtle.ConstantTimeCompare([]byte(got), []byte(t.Token)) == 1 && ok {
				matched, id = t.Role, TokenID(t.Token)
			}
		}
		switch {
		case matched == "":
			// RFC 6750 §3: a 401 names the scheme the resource takes.
			w.Header().Set("WWW-Authenticate", `Bearer realm="changebot"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or invalid bearer token"})
		case role == RoleOperator && matched != RoleOperator:
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "this needs an operator token"})
		case role == RoleSubmitter && matched == RoleViewer:
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "a viewer token only reads; this needs a submitter or operator token"})
		default:
			ctx := context.WithValue(r.Context(), tokenRoleKey{}, matched)
			next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, tokenIDKey{}, id)))
		}
	})
}

// tokenIDKey is the request context key of the matched API token's id
// (tokenID).
type tokenIDKey struct{}

// TokenID names an API token without revealing it: "api:" and the first 16
// hex digits of its SHA-256. It is recorded as submitted_by on the changes
// the token submits (so that a submitter token may cancel its own changes),
// as the actor of the actions it takes and as updated_by of the settings it
// writes.
func TokenID(token string) string { return "api:" + tokenHex(token) }

// tokenHex is TokenID without its "api:" prefix.
func tokenHex(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}

// requestTokenID returns the id of the request's API token ("" when auth
// did not run).
func requestTokenID(r *http.Request) string {
	id, _ := r.Context().Value(tokenIDKey{}).(string)
	return id
}

// tokenRoleKey is the request context key of the matched API token's role.
type tokenRoleKey struct{}

// tokenRole returns the role of the request's API token ("" when auth did
// not run).
func tokenRole(r *http.Request) string {
	role, _ := r.Context().Value(tokenRoleKey{}).(string)
	return role
}
