package webhooks

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"time"

	"changebot/platform"
)

// GitHub delivery headers (docs.github.com "Webhook events and payloads",
// delivery headers; platform/github names the same ones).
const (
	headerGitHubEvent     = "X-GitHub-Event"
	headerGitHubDelivery  = "X-GitHub-Delivery"
	headerGitHubSignature = "X-Hub-Signature-256"
)

// GitHubEvents are the X-GitHub-Event values the bot stores and routes
// (issue 15 point 4); every other event (ping, installation, …) is
// answered 200 {"result":"ignored"}, counted, and not stored.
var GitHubEvents = []string{
	"pull_request", "pull_request_review", "issue_comment", "check_suite", "check_run", "status",
	"workflow_run", "push", "merge_group",
}

// SignatureVerifier checks an X-Hub-Signature-256 header against the raw
// body with secret, in constant time (platform/github.VerifySignature). A
// nil error means the delivery is GitHub's.
type SignatureVerifier func(secret, header string, body []byte) error

// GitHubConfig configures NewGitHubHandler.
type GitHubConfig struct {
	// Secrets are the accepted webhook secrets; at least one, none empty (a
	// GitHub webhook without a secret sends no signature: the endpoint
	// refuses to start rather than accept unsigned deliveries). Several
	// allow rotating the secret: a delivery signed with any is accepted.
	// They never appear in logs, errors or answers.
	Secrets []string
	// Verify checks a signature (platform/github.VerifySignature).
	// Required.
	Verify SignatureVerifier
	// Decode decodes a delivery (platform/github.DecodeHook). Required.
	Decode HookDecoder
	// MaxBodyBytes bounds a delivery; zero means DefaultMaxBodyBytes.
	// GitHub caps payloads at 25 MB; pull request events are far smaller.
	MaxBodyBytes int64
	// Store stores deliveries and enqueues their jobs. Required.
	Store DeliveryStore
	// Dispatcher enqueues the jobs when set, as GitLabConfig.Dispatcher.
	Dispatcher *Dispatcher
	// StoreTimeout bounds the store transaction; zero means
	// DefaultStoreTimeout.
	StoreTimeout time.Duration
	// Logger receives one record per delivery; nil discards.
	Logger *slog.Logger
	// Metrics counts deliveries; nil counts into unregistered metrics.
	Metrics *Metrics
	// NoteHasCommand reports whether a comment's body may hold a command
	// for the bot (bot wires commands.MayHoldCommand, as for GitLab). A
	// comment it answers false for is answered ignored and not stored. Nil
	// stores every comment on a pull request.
	NoteHasCommand func(body string) bool
}

// NewGitHubHandler returns the handler of POST /webhooks/github. It checks,
// in order (STYLE 19): method POST (else 405); body size (413 above
// MaxBodyBytes; before the signature, which is an HMAC of the body and so
// needs it read); X-Hub-Signature-256 against the HMAC-SHA256 of the raw
// body with each secret, compared in constant time (401 {"error":"invalid
// webhook signature"}, nothing stored: a missing, malformed or wrong
// signature alike); Content-Type application/json when one is sent (415
// naming it: GitHub's webhook setting "Content type" may also send
// application/x-www-form-urlencoded, which changebot does not read);
// X-GitHub-Event and X-GitHub-Delivery present (400
// naming the header). Events not in GitHubEvents answer 200
// {"result":"ignored"} and are not stored; the others must decode (400
// {"error":"malformed GitHub \"check_run\" payload: …"}). Comments not on a pull request,
// edited or deleted comments (a command runs once per comment id, never on
// an edit, as on GitLab) and comments without a command
// (GitHubConfig.NoteHasCommand) are ignored too, counted in
// changebot_webhook_ignored_total by reason. Every other delivery is
// stored, deduplicated on "github:"+X-GitHub-Delivery (a redelivery keeps
// the GUID), with its ProcessDeliveryJob in one transaction through
// the same store path as GitLab's: 200 {"result":"accepted",
// "delivery_id":N}, or 200 {"result":"duplicate"}. A store failure answers
// 503 (GitHub shows the failed delivery for a manual redelivery), a panic
// 500 behind the HTTP guard (internal/guard.HTTP). Every answer is counted in changebot_webhook_deliveries_total with
// the X-GitHub-Event value as event ("other" for events outside
// GitHubEvents and "ping").
//
// It returns an error, listing every problem, when cfg is invalid.
func NewGitHubHandler(cfg GitHubConfig) (http.Handler, error) {
	var more []error
	if cfg.Verify == nil {
		more = append(more, errors.New("a signature verifier is required"))
	}
	h := &githubHandler{secrets: cfg.Secrets, verify: cfg.Verify}
	in, err := newIntake(intakeConfig{
		platform: "GitHub", noSecret: "a webhook secret is required (GitHub signs deliveries only when the webhook has one)",
		secrets: cfg.Secrets, decode: cfg.Decode, store: cfg.Store, dispatcher: cfg.Dispatcher, maxBody: cfg.MaxBodyBytes,
		storeTimeout: cfg.StoreTimeout, logger: cfg.Logger, metrics: cfg.Metrics, noteHasCommand: cfg.NoteHasCommand,
	}, hookRules{
		handler: handlerGitHub, eventHeader: headerGitHubEvent, label: githubEventLabel,
		// No beforeBody: the signature is an HMAC of the body, so the
		// size limit is checked first, and the signature on the exact
		// bytes received, before anything reads them.
		afterBody: h.deliveryOK, ignoreReason: githubIgnoreReason,
		dedupeKey: func(q *hookRequest) string { return GitHubDedupeKey(q.r.Header.Get(headerGitHubDelivery)) },
	}, more...)
	if err != nil {
		return nil, err
	}
	h.intake = in
	return h, nil
}

type githubHandler struct {
	secrets []string
	verify  SignatureVerifier
	*intake
}

// githubEventLabel is event when it is one of GitHubEvents or "ping", else
// "other" ("none" when missing), so a sender cannot grow the label set.
func githubEventLabel(event string) string {
	switch {
	case event == "":
		return "none"
	case event == "ping" || slices.Contains(GitHubEvents, event):
		return event
	}
	return "other"
}

// deliveryOK checks, once the body is read: the signature, the content
// type, the event and delivery headers, and answers events the bot does
// not use as ignored.
func (h *githubHandler) deliveryOK(q *hookRequest) bool {
	if !h.signed(q.r.Header.Get(headerGitHubSignature), q.body) {
		q.log.Warn("webhook refused: invalid signature", attrRemoteAddr, q.r.RemoteAddr)
		q.refuse(http.StatusUnauthorized, OutcomeUnauthorized, "invalid webhook signature")
		return false
	}
	if ct := q.r.Header.Get("Content-Type"); !isJSONContentType(ct) {
		q.log.Warn("webhook refused: content type not JSON", "content_type", ct, attrRemoteAddr, q.r.RemoteAddr)
		q.refuse(http.StatusUnsupportedMediaType, OutcomeMalformed, unsupportedContentType(ct))
		return false
	}
	delivery := q.r.Header.Get(headerGitHubDelivery)
	for _, missing := range []struct{ header, value string }{{headerGitHubEvent, q.event}, {headerGitHubDelivery, delivery}} {
		if missing.value == "" {
			q.log.Warn("webhook refused: header missing", "header", missing.header, attrRemoteAddr, q.r.RemoteAddr)
			q.refuse(http.StatusBadRequest, OutcomeMalformed, "missing "+missing.header+" header")
			return false
		}
	}
	q.log = q.log.With("github_delivery", delivery)
	if !slices.Contains(GitHubEvents, q.event) {
		q.ignore(IgnoredEventNotUsed)
		return false
	}
	return true
}

// isJSONContentType reports whether a Content-Type header is JSON's, or
// absent (GitHub always sends one; a sender that does not is read as JSON).
func isJSONContentType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// unsupportedContentType is the 415 answer to a Content-Type that is not
// JSON's: it names what changebot needs and where GitHub sets it, and
// what came when that is short enough to show.
func unsupportedContentType(ct string) string {
	got := "another content type"
	if mt, _, err := mime.ParseMediaType(ct); err == nil && len(mt) <= 100 {
		got = mt
	}
	return "changebot needs Content-Type application/json, not " + got +
		": set the GitHub webhook's Content type to application/json"
}

// signed reports whether header is the body's signature with one of the
// secrets. Every secret is tried, so the time taken does not tell which
// matched.
func (h *githubHandler) signed(header string, body []byte) bool {
	ok := false
	for _, s := range h.secrets {
		if h.verify(s, header, body) == nil {
			ok = true
		}
	}
	return ok
}

// githubIgnoreReason returns why the bot does not use a decoded event of
// GitHubEvents (an Ignored* reason), "" when it does: comments not on a
// pull request, edited comments, comments without a command (hasCommand,
// nil: every comment may hold one), and deleted comments or reviews that
// neither approve nor dismiss (both decode as HookOther).
func githubIgnoreReason(ev platform.HookEvent, hasCommand func(body string) bool) string {
	switch ev.Kind {
	case platform.HookNote:
		switch {
		case ev.Note == nil || ev.Note.NoteableType != platform.NoteableMergeRequest:
			return IgnoredNotOnMergeRequest
		case ev.Note.Action == platform.NoteActionUpdate:
			return IgnoredEditedNote
		case hasCommand != nil && !hasCommand(ev.Note.Body):
			return IgnoredNoCommand
		}
		return ""
	case platform.HookOther:
		return IgnoredEventNotUsed
	}
	return ""
}

// GitHubDedupeKey is a GitHub delivery's store.Delivery.DedupeKey: "github:"+X-GitHub-Delivery (a GUID; one longer than
// maxIdempotencyKeyLen is hashed so the unique index never sees an
// oversized value). The prefix keeps it apart from GitLab's keys.
func GitHubDedupeKey(delivery string) string {
	if len(delivery) <= maxIdempotencyKeyLen {
		return "github:" + delivery
	}
	sum := sha256.Sum256([]byte(delivery))
	return "github-sha256:" + hex.EncodeToString(sum[:])
}
