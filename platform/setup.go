package platform

import "time"

// TokenInfo describes the access token a client authenticates with, as
// GitLab's GET /personal_access_tokens/self answers it
// (doc/api/personal_access_tokens.md).
type TokenInfo struct {
	// ID and Name identify the token in GitLab's settings.
	ID   int64
	Name string
	// UserID is the token's user.
	UserID int64
	// Scopes are the token's scopes, for example "api" or "read_api".
	Scopes []string
	// ExpiresAt is the expiry date (UTC midnight; GitLab keeps a date);
	// zero means the token never expires.
	ExpiresAt time.Time
	// Active is false for a revoked or expired token.
	Active bool
}

// Webhook trigger names: the boolean attributes of a project or group
// webhook (doc/api/project_webhooks.md) and the :trigger of its test.
const (
	TriggerMergeRequests = "merge_requests_events"
	TriggerPipeline      = "pipeline_events"
	TriggerNote          = "note_events"
	TriggerPush          = "push_events"
)

// Webhook alert statuses: GitLab disables a webhook whose deliveries keep
// failing, "temporarily_disabled" until DisabledUntil, then "disabled"
// for good (doc/user/project/integrations/webhooks.md, "Auto-disabled
// webhooks").
const (
	WebhookExecutable          = "executable"
	WebhookTemporarilyDisabled = "temporarily_disabled"
	WebhookDisabled            = "disabled"
)

// HookOwner names whose webhooks are meant: a project (numeric id or full
// path) or, when Group is true, a group (numeric id or full path).
type HookOwner struct {
	Group bool
	ID    string
}

// String is "project grp/app" or "group grp".
func (o HookOwner) String() string {
	if o.Group {
		return "group " + o.ID
	}
	return "project " + o.ID
}

// Webhook is a project or group webhook's configuration as GitLab answers
// it; its secret token is never answered.
type Webhook struct {
	ID   int64
	URL  string
	Name string
	// Triggers are the enabled trigger names (Trigger* and others).
	Triggers map[string]bool
	// EnableSSLVerification is GitLab's enable_ssl_verification.
	EnableSSLVerification bool
	// AlertStatus is one of the Webhook* statuses ("" from GitLab versions
	// that do not report it).
	AlertStatus string
	// DisabledUntil is when a temporarily disabled hook sends again; zero
	// when GitLab did not say.
	DisabledUntil time.Time
}

// WebhookParams are the attributes written by CreateWebhook and
// UpdateWebhook: every trigger named in Triggers is set to its value, the
// others are left as GitLab has them. Token, when not empty, replaces the
// secret.
type WebhookParams struct {
	URL                   string
	Name                  string
	Token                 string
	Triggers              map[string]bool
	EnableSSLVerification bool
}

// GitLab access levels (roles) of a member (doc/api/members.md).
const (
	AccessGuest      = 10
	AccessReporter   = 20
	AccessDeveloper  = 30
	AccessMaintainer = 40
	AccessOwner      = 50
)
