package webhooks

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"

	"github.com/riverqueue/river"

	"changebot/platform"
	"changebot/store"
)

// GitLab delivery headers (GITLAB-FACTS §1.1).
const (
	headerGitLabToken    = "X-Gitlab-Token"
	headerGitLabEvent    = "X-Gitlab-Event"
	headerIdempotencyKey = "Idempotency-Key"
)

// maxIdempotencyKeyLen bounds an Idempotency-Key used as it is in the
// dedupe key; GitLab sends a UUID. A longer one is hashed so that the unique
// index never sees an oversized value.
const maxIdempotencyKeyLen = 128

// DeliveryStore stores a batch of deliveries and enqueues the processing job
// of each one stored, in one transaction (store.Store implements it). out[i]
// answers ds[i]: Inserted is false, and nothing is written for it, when its
// DedupeKey was stored before (or earlier in ds).
type DeliveryStore interface {
	InsertDeliveries(ctx context.Context, ds []store.Delivery, job func(id int64) river.InsertManyParams) (out []store.DeliveryInsert, err error)
}

// HookDecoder decodes a GitLab delivery (platform/gitlab.DecodeHook, the
// bot's one decoding path). Its error wraps platform.ErrMalformedHook for a
// body that cannot be read.
type HookDecoder func(event string, body []byte) (platform.HookEvent, error)

// GitLabConfig configures NewGitLabHandler.
type GitLabConfig struct {
	// Secrets are the accepted X-Gitlab-Token values; at least one, none
	// empty. Several allow rotating the secret without downtime. They never
	// appear in logs, errors or answers.
	Secrets []string
	// MaxBodyBytes bounds a delivery; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Store stores deliveries and enqueues their jobs. Required.
	Store DeliveryStore
	// Dispatcher, when set, enqueues the jobs: Store must then also store
	// deliveries without their jobs (StoreDeliveries), which the intake
	// does with one autocommit statement before waking Dispatcher (issue
	// 12; bot sets it on PostgreSQL). Nil enqueues each batch's jobs in
	// its transaction.
	Dispatcher *Dispatcher
	// Decode decodes a delivery. Required.
	Decode HookDecoder
	// StoreTimeout bounds the store transaction, and a request's wait for
	// it; zero means DefaultStoreTimeout.
	StoreTimeout time.Duration
	// MaxBatch bounds the deliveries stored by one transaction (group
	// commit); zero means DefaultMaxBatch.
	MaxBatch int
	// MaxInFlight bounds the intake transactions committing at once; zero
	// means DefaultMaxInFlight.
	MaxInFlight int
	// Logger receives one record per delivery; nil discards.
	Logger *slog.Logger
	// Metrics counts deliveries; nil counts into unregistered metrics.
	Metrics *Metrics
	// NoteHasCommand reports whether a note's body may hold a command for
	// the bot (bot wires commands.MayHoldCommand; webhooks never import
	// commands, DESIGN §8). A note it answers false for is answered
	// ignored and not stored. Nil stores every note on a merge request.
	NoteHasCommand func(body string) bool
	// IsReviewer reports whether a username is one of the bot's reviewer
	// robots (bot wires the adapter's gitlab.Client.IsReviewer, which makes
	// no call). Their approvals are the bot's own and move no change: a
	// Merge Request Hook of one is answered ignored and not stored. Nil
	// stores them.
	IsReviewer func(username string) bool
	// MayAdopt reports whether a Merge Request Hook that moves no change
	// may adopt or let go of a developer's merge request (bot wires the
	// adoption projects and label: platform.MergeRequestHook.MayAdopt);
	// such a hook is stored. Nil stores none.
	MayAdopt func(ev platform.HookEvent) bool
}

// NewGitLabHandler returns the handler of POST /webhooks/gitlab. It checks,
// in order (STYLE 19): method POST (else 405); X-Gitlab-Token against every
// secret in constant time (401 {"error":"invalid webhook token"}); X-Gitlab-Event
// present (400); body size (413 above MaxBodyBytes: only after the token, so
// that a sender without it does not learn the limit);
// the body decodes (400 {"error":"malformed \"Merge Request Hook\" payload: …"}, without the
// body; a decoder error not wrapping platform.ErrMalformedHook answers 500).
// Events that cannot move any change answer 200 {"result":"ignored"}, are
// not stored and are counted in changebot_webhook_ignored_total by Ignored*
// reason: kinds other than merge request, pipeline and note; merge request
// webhooks the flows do not act on (platform.MergeRequestHook.MovesChanges)
// and approvals by the bot's reviewer robots (GitLabConfig.IsReviewer);
// pipelines still in progress (platform.Pipeline.InProgress); notes on
// anything but a merge request; system notes; edited notes (a command runs
// once per note id, never on an edit: DESIGN §1); and notes without a
// command (GitLabConfig.NoteHasCommand; issue 12). Every other delivery is
// stored, deduplicated on "idem:"+Idempotency-Key (GitLab 17.4+, stable
// across resends) or else "sha256:"+hex(sha256(event+"\n"+body)), with its
// ProcessDeliveryJob in one transaction (with GitLabConfig.Dispatcher,
// the delivery alone, by one autocommit statement, and the dispatcher
// enqueues the job after): 200
// {"result":"accepted","delivery_id":N}, or 200 {"result":"duplicate"}.
// Concurrent deliveries share that transaction (group commit: while
// MaxInFlight transactions commit, the next deliveries queue, and the next
// transaction takes up to MaxBatch of them); each request still gets its
// own answer. When a shared commit fails,
// each of its deliveries is stored again on its own, so one delivery the
// database refuses fails only its own request. A store failure answers 503:
// GitLab shows the failure (and may temporarily disable the hook), which is
// better than claiming a delivery that was not stored. A panic answers 500
// behind the HTTP guard (internal/guard.HTTP).
// Every answer is counted in changebot_webhook_deliveries_total.
//
// Close stops the group commit; the HTTP server must have stopped first.
//
// It returns an error, listing every problem, when cfg is invalid.
func NewGitLabHandler(cfg GitLabConfig) (*GitLabHandler, error) {
	secrets := make([][sha256.Size]byte, 0, len(cfg.Secrets))
	for _, s := range cfg.Secrets {
		if s != "" {
			secrets = append(secrets, sha256.Sum256([]byte(s)))
		}
	}
	h := &GitLabHandler{secrets: secrets}
	in, err := newIntake(intakeConfig{
		platform: "GitLab", noSecret: "at least one webhook secret is required", secrets: cfg.Secrets,
		decode: cfg.Decode, store: cfg.Store, dispatcher: cfg.Dispatcher, maxBody: cfg.MaxBodyBytes,
		storeTimeout: cfg.StoreTimeout, maxBatch: cfg.MaxBatch, maxInFlight: cfg.MaxInFlight,
		logger: cfg.Logger, metrics: cfg.Metrics, noteHasCommand: cfg.NoteHasCommand,
	}, hookRules{
		handler: handlerGitLab, eventHeader: headerGitLabEvent, label: eventLabel,
		beforeBody: h.headersOK,
		ignoreReason: func(ev platform.HookEvent, hasCommand func(string) bool) string {
			return ignoreReason(ev, hasCommand, cfg.IsReviewer, cfg.MayAdopt)
		},
		dedupeKey: func(q *hookRequest) string {
			return GitLabDedupeKey(q.r.Header.Get(headerIdempotencyKey), q.event, q.body)
		},
	})
	if err != nil {
		return nil, err
	}
	h.intake = in
	return h, nil
}

// GitLabHandler is the handler of POST /webhooks/gitlab (NewGitLabHandler).
type GitLabHandler struct {
	secrets [][sha256.Size]byte
	intake  *intake
}

// Close stops the group commit after the HTTP server stopped taking
// requests: deliveries arriving later answer 503, and Close waits until
// every queued delivery is committed and answered, or ctx ends (its error
// is returned).
func (h *GitLabHandler) Close(ctx context.Context) error { return h.intake.Close(ctx) }

// ServeHTTP implements http.Handler (NewGitLabHandler documents it).
func (h *GitLabHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.intake.ServeHTTP(w, r) }

// headersOK checks the token, then that the event is named: both are
// headers, so they are checked before the body's size, which a sender
// without the token must not learn.
func (h *GitLabHandler) headersOK(q *hookRequest) bool {
	if !h.tokenOK(q.r.Header.Get(headerGitLabToken)) {
		q.log.Warn("webhook refused: invalid token", attrRemoteAddr, q.r.RemoteAddr)
		q.refuse(http.StatusUnauthorized, OutcomeUnauthorized, "invalid webhook token")
		return false
	}
	if q.event == "" {
		q.log.Warn("webhook refused: no X-Gitlab-Event header", attrRemoteAddr, q.r.RemoteAddr)
		q.refuse(http.StatusBadRequest, OutcomeMalformed, "missing X-Gitlab-Event header")
		return false
	}
	return true
}

// tokenOK compares got with every configured secret in constant time. Both
// sides are hashed first so that neither the length of a secret nor which
// secret matched shows in the timing.
func (h *GitLabHandler) tokenOK(got string) bool {
	sum := sha256.Sum256([]byte(got))
	match := 0
	for i := range h.secrets {
		match |= subtle.ConstantTimeCompare(sum[:], h.secrets[i][:])
	}
	return got != "" && match == 1
}

// ignoreReason returns why ev cannot move any change (an Ignored*
// reason), "" when it may. It reads the event only: no database, no GitLab.
// hasCommand nil keeps every note; isReviewer nil keeps every approval;
// mayAdopt nil keeps no hook that moves no change.
func ignoreReason(ev platform.HookEvent, hasCommand, isReviewer func(string) bool, mayAdopt func(platform.HookEvent) bool) string {
	switch ev.Kind {
	case platform.HookMergeRequest:
		switch mr := ev.MergeRequest; {
		case mr != nil && !mr.MovesChanges() && (mayAdopt == nil || !mayAdopt(ev)):
			return IgnoredMergeRequestUnused
		case mr != nil && isReviewer != nil && mr.Approval() && isReviewer(ev.User.Username):
			return IgnoredReviewerApproval
		}
		return ""
	case platform.HookPipeline:
		if ev.Pipeline != nil && (platform.Pipeline{Status: ev.Pipeline.Status}).InProgress() {
			return IgnoredPipelineInProgress
		}
		return ""
	case platform.HookNote:
		switch {
		case ev.Note == nil || ev.Note.NoteableType != platform.NoteableMergeRequest:
			return IgnoredNotOnMergeRequest
		case ev.Note.System:
			return IgnoredSystemNote
		case ev.Note.Action == platform.NoteActionUpdate:
			return IgnoredEditedNote
		case hasCommand != nil && !hasCommand(ev.Note.Body):
			return IgnoredNoCommand
		}
		return ""
	}
	return IgnoredEventNotUsed
}

// GitLabDedupeKey is a GitLab delivery's store.Delivery.DedupeKey: "idem:"+Idempotency-Key when GitLab sent one (hashed when
// longer than maxIdempotencyKeyLen), else "sha256:"+hex(sha256(event + "\n"
// + body)) (DESIGN §1).
func GitLabDedupeKey(idempotencyKey, event string, body []byte) string {
	if idempotencyKey != "" {
		if len(idempotencyKey) <= maxIdempotencyKeyLen {
			return "idem:" + idempotencyKey
		}
		sum := sha256.Sum256([]byte(idempotencyKey))
		return "idem-sha256:" + hex.EncodeToString(sum[:])
	}
	hash := sha256.New()
	hash.Write([]byte(event))
	hash.Write([]byte{'\n'})
	hash.Write(body)
	return "sha256:" + hex.EncodeToString(hash.Sum(nil))
}
