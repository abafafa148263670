package webhooks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"changebot/platform"
	"changebot/store"
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
	"workflow_run", "push",
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
// MaxBodyBytes); X-Hub-Signature-256 against the HMAC-SHA256 of the raw
// body with each secret, compared in constant time (401 {"error":"invalid
// webhook signature"}, nothing stored: a missing, malformed or wrong
// signature alike); X-GitHub-Event and X-GitHub-Delivery present (400
// naming the header). Events not in GitHubEvents answer 200
// {"result":"ignored"} and are not stored; the others must decode (400
// {"error":"malformed payload: …"}). Comments not on a pull request,
// edited or deleted comments (a command runs once per comment id, never on
// an edit, as on GitLab) and comments without a command
// (GitHubConfig.NoteHasCommand) are ignored too, counted in
// changebot_webhook_ignored_total by reason. Every other delivery is
// stored, deduplicated on "github:"+X-GitHub-Delivery (a redelivery keeps
// the GUID), with its flows.ProcessDeliveryJob in one transaction through
// the same store path as GitLab's: 200 {"result":"accepted",
// "delivery_id":N}, or 200 {"result":"duplicate"}. A store failure answers
// 503 (GitHub shows the failed delivery for a manual redelivery), a panic
// 500. Every answer is counted in changebot_webhook_deliveries_total with
// the X-GitHub-Event value as event ("other" for events outside
// GitHubEvents and "ping").
//
// It returns an error, listing every problem, when cfg is invalid.
func NewGitHubHandler(cfg GitHubConfig) (http.Handler, error) {
	var problems []error
	if len(cfg.Secrets) == 0 {
		problems = append(problems, errors.New("a webhook secret is required (GitHub signs deliveries only when the webhook has one)"))
	}
	for i, s := range cfg.Secrets {
		if s == "" {
			problems = append(problems, fmt.Errorf("webhook secret %d is empty", i+1))
		}
	}
	if cfg.Verify == nil {
		problems = append(problems, errors.New("a signature verifier is required"))
	}
	if cfg.Decode == nil {
		problems = append(problems, errors.New("a hook decoder is required"))
	}
	if cfg.Store == nil {
		problems = append(problems, errors.New("a delivery store is required"))
	}
	if cfg.MaxBodyBytes < 0 {
		problems = append(problems, fmt.Errorf("max body bytes is negative (%d)", cfg.MaxBodyBytes))
	}
	if cfg.StoreTimeout < 0 {
		problems = append(problems, fmt.Errorf("store timeout is negative (%s)", cfg.StoreTimeout))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the GitHub webhook handler: %w", errors.Join(problems...))
	}
	h := &githubHandler{cfg: cfg, m: orNew(cfg.Metrics), log: cfg.Logger}
	if h.cfg.MaxBodyBytes == 0 {
		h.cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if h.cfg.StoreTimeout == 0 {
		h.cfg.StoreTimeout = DefaultStoreTimeout
	}
	c, err := newDeliveryCommitter(h.cfg.Store, h.cfg.Dispatcher, h.m, 0, 0, h.cfg.StoreTimeout)
	if err != nil {
		return nil, fmt.Errorf("configuring the GitHub webhook handler: %w", err)
	}
	h.intake = c
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h, nil
}

type githubHandler struct {
	cfg    GitHubConfig
	m      *Metrics
	log    *slog.Logger
	intake *deliveryCommitter
}

// Close stops the group commit after the HTTP server stopped taking
// requests, as GitLabHandler.Close does.
func (h *githubHandler) Close(ctx context.Context) error { return h.intake.Close(ctx) }

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

func (h *githubHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	event := r.Header.Get(headerGitHubEvent)
	label := githubEventLabel(event)
	log := h.log.With(attrEvent, label)
	count := func(outcome string) { h.m.deliveries.WithLabelValues(label, outcome).Inc() }
	defer recoverPanic(w, log, h.m, handlerGitHub, func() { count(OutcomeError) })

	if r.Method != http.MethodPost {
		count(OutcomeMalformed)
		methodNotAllowed(w)
		return
	}
	if limitBody(w, r, h.cfg.MaxBodyBytes) {
		h.tooLarge(w, r, log, count)
		return
	}
	body, tooLarge, err := readBody(r)
	if tooLarge {
		h.tooLarge(w, r, log, count)
		return
	}
	if err != nil {
		count(OutcomeMalformed)
		log.Warn("webhook refused: body unreadable", attrError, err)
		writeJSON(w, http.StatusBadRequest, answer{Error: "reading the request body failed"})
		return
	}
	// The signature is checked on the exact bytes received, before
	// anything reads them.
	if !h.signed(r.Header.Get(headerGitHubSignature), body) {
		count(OutcomeUnauthorized)
		log.Warn("webhook refused: invalid signature", attrRemoteAddr, r.RemoteAddr)
		writeJSON(w, http.StatusUnauthorized, answer{Error: "invalid webhook signature"})
		return
	}
	delivery := r.Header.Get(headerGitHubDelivery)
	for _, missing := range []struct{ header, value string }{{headerGitHubEvent, event}, {headerGitHubDelivery, delivery}} {
		if missing.value == "" {
			count(OutcomeMalformed)
			log.Warn("webhook refused: header missing", "header", missing.header, attrRemoteAddr, r.RemoteAddr)
			writeJSON(w, http.StatusBadRequest, answer{Error: "missing " + missing.header + " header"})
			return
		}
	}
	log = log.With("github_delivery", delivery)
	if !slices.Contains(GitHubEvents, event) {
		count(OutcomeIgnored)
		h.m.ignored.WithLabelValues(IgnoredEventNotUsed).Inc()
		log.Debug("webhook ignored", "reason", IgnoredEventNotUsed)
		writeJSON(w, http.StatusOK, answer{Result: OutcomeIgnored})
		return
	}
	ev, err := h.cfg.Decode(event, body)
	if err != nil {
		if !errors.Is(err, platform.ErrMalformedHook) {
			count(OutcomeError)
			log.Error("webhook not decoded: decoder failed", attrError, err)
			writeJSON(w, http.StatusInternalServerError, answer{Error: "decoding the payload failed"})
			return
		}
		count(OutcomeMalformed)
		log.Warn("webhook refused: malformed payload", attrError, err)
		writeJSON(w, http.StatusBadRequest, answer{Error: "malformed payload: " + err.Error()})
		return
	}
	log = log.With(attrProjectID, ev.ProjectID)
	if reason := githubIgnoreReason(ev, h.cfg.NoteHasCommand); reason != "" {
		count(OutcomeIgnored)
		h.m.ignored.WithLabelValues(reason).Inc()
		log.Debug("webhook ignored", "reason", reason, "kind", ev.Kind)
		writeJSON(w, http.StatusOK, answer{Result: OutcomeIgnored})
		return
	}
	d := store.Delivery{DedupeKey: githubDedupeKey(delivery), Event: event, ProjectID: ev.ProjectID, Body: body}
	ctx, cancel := detached(r, h.cfg.StoreTimeout)
	defer cancel()
	res, err := h.intake.commit(ctx, log, d)
	id, inserted := res.ID, res.Inserted
	switch {
	case err != nil:
		count(OutcomeError)
		log.Error("webhook not stored", attrError, err)
		writeJSON(w, http.StatusServiceUnavailable, answer{Error: "storing the delivery failed; it was not accepted"})
	case !inserted:
		count(OutcomeDuplicate)
		log.Debug("webhook duplicate", attrOutcome, OutcomeDuplicate)
		writeJSON(w, http.StatusOK, answer{Result: OutcomeDuplicate})
	default:
		count(OutcomeAccepted)
		log.Debug("webhook accepted", attrDeliveryID, id)
		writeJSON(w, http.StatusOK, answer{Result: OutcomeAccepted, DeliveryID: id})
	}
}

// signed reports whether header is the body's signature with one of the
// secrets. Every secret is tried, so the time taken does not tell which
// matched.
func (h *githubHandler) signed(header string, body []byte) bool {
	ok := false
	for _, s := range h.cfg.Secrets {
		if h.cfg.Verify(s, header, body) == nil {
			ok = true
		}
	}
	return ok
}

func (h *githubHandler) tooLarge(w http.ResponseWriter, r *http.Request, log *slog.Logger, count func(string)) {
	count(OutcomeTooLarge)
	log.Warn("webhook refused: body too large", "content_length", r.ContentLength, "limit", h.cfg.MaxBodyBytes)
	writeJSON(w, http.StatusRequestEntityTooLarge, answer{Error: fmt.Sprintf("payload larger than %d bytes", h.cfg.MaxBodyBytes)})
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

// githubDedupeKey is "github:"+X-GitHub-Delivery (a GUID; one longer than
// maxIdempotencyKeyLen is hashed so the unique index never sees an
// oversized value). The prefix keeps it apart from GitLab's keys.
func githubDedupeKey(delivery string) string {
	if len(delivery) <= maxIdempotencyKeyLen {
		return "github:" + delivery
	}
	sum := sha256.Sum256([]byte(delivery))
	return "github-sha256:" + hex.EncodeToString(sum[:])
}
