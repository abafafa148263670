package api

import "log/slog"

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
