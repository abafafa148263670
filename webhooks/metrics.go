package webhooks

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric label keys (STYLE 9).
const (
	labelEvent   = "event"
	labelOutcome = "outcome"
	labelKind    = "kind"
	labelResult  = "result"
	labelHandler = "handler"
	labelReason  = "reason"
)

// Outcomes of a GitLab delivery: the outcome label of
// changebot_webhook_deliveries_total.
const (
	// OutcomeAccepted: stored and its processing job enqueued.
	OutcomeAccepted = "accepted"
	// OutcomeDuplicate: the dedupe key was stored before; nothing new.
	OutcomeDuplicate = "duplicate"
	// OutcomeIgnored: a well-formed event the bot does not use; not stored.
	OutcomeIgnored = "ignored"
	// OutcomeUnauthorized: missing or wrong X-Gitlab-Token.
	OutcomeUnauthorized = "unauthorized"
	// OutcomeMalformed: wrong method, missing X-Gitlab-Event, or a body
	// that does not decode.
	OutcomeMalformed = "malformed"
	// OutcomeTooLarge: the body exceeds the configured limit.
	OutcomeTooLarge = "too_large"
	// OutcomeError: the store failed or the handler panicked.
	OutcomeError = "error"
)

// Reasons a well-formed delivery cannot move any change: the reason label
// of changebot_webhook_ignored_total. Such a delivery answers 200
// {"result":"ignored"} and is not stored (issue 12).
const (
	// IgnoredEventNotUsed: a kind other than merge request, pipeline, note.
	IgnoredEventNotUsed = "event_not_used"
	// IgnoredNotOnMergeRequest: a note on an issue, commit or snippet.
	IgnoredNotOnMergeRequest = "note_not_on_merge_request"
	// IgnoredSystemNote: a note GitLab wrote itself.
	IgnoredSystemNote = "system_note"
	// IgnoredEditedNote: an edited note (commands run on creation only).
	IgnoredEditedNote = "edited_note"
	// IgnoredNoCommand: a note whose body holds no command for the bot
	// (GitLabConfig.NoteHasCommand).
	IgnoredNoCommand = "no_command"
	// IgnoredMergeRequestUnused: a Merge Request Hook whose action and
	// changes move no change (platform.MergeRequestHook.MovesChanges: an
	// open, a reopen, an edit of the title or labels).
	IgnoredMergeRequestUnused = "merge_request_unused"
	// IgnoredPipelineInProgress: a Pipeline Hook of a pipeline on its way
	// (platform.Pipeline.InProgress: created, pending, preparing, running).
	IgnoredPipelineInProgress = "pipeline_in_progress"
	// IgnoredReviewerApproval: a Merge Request Hook of an approval given or
	// taken back by one of the bot's reviewer robots (GitLabConfig.IsReviewer).
	IgnoredReviewerApproval = "reviewer_approval"
)

// Callback results that are not an acceptor's answer: the result label of
// changebot_callbacks_total next to ACCEPTED, DUPLICATE, IGNORED_STALE,
// IGNORED_UNKNOWN and FAILED_RECORDED.
const (
	ResultUnauthorized = "unauthorized"
	ResultMalformed    = "malformed"
	ResultInvalid      = "invalid"
	ResultTooLarge     = "too_large"
	ResultError        = "error"
	// ResultOther stands for an acceptor result this package does not know,
	// so a label never takes an unbounded value.
	ResultOther = "other"
)

// Callback kinds: the kind label of changebot_callbacks_total and the
// handler label of changebot_webhook_panics_total (with handlerGitLab).
const (
	KindApproval = "approval"
	KindDeploy   = "deploy"

	handlerGitLab = "gitlab"
	handlerGitHub = "github"
)

// knownEvents are the X-Gitlab-Event values used as metric labels as they
// are; any other value is counted as "other" and a missing one as "none",
// so a sender cannot grow the label set (GITLAB-FACTS §1.1).
var knownEvents = []string{
	"Merge Request Hook", "Pipeline Hook", "Note Hook", "Confidential Note Hook", "Emoji Hook",
	"Job Hook", "Push Hook", "Tag Push Hook", "Issue Hook", "Confidential Issue Hook",
	"System Hook", "Service Hook",
}

func eventLabel(event string) string {
	if event == "" {
		return "none"
	}
	for _, e := range knownEvents {
		if e == event {
			return e
		}
	}
	return "other"
}

// Metrics are the intake's Prometheus metrics. Build them once per
// registry with NewMetrics and share them between the handlers.
type Metrics struct {
	deliveries *prometheus.CounterVec
	ignored    *prometheus.CounterVec
	batch      prometheus.Histogram
	callbacks  *prometheus.CounterVec
	panics     *prometheus.CounterVec
}

// NewMetrics creates the intake metrics and registers them on reg (nil:
// not registered, as for handlers built without Metrics):
//
//   - changebot_webhook_deliveries_total{event,outcome}: GitLab deliveries
//     by X-Gitlab-Event (known values, else "other") and GitHub's by
//     X-GitHub-Event (GitHubEvents and "ping", else "other"), and Outcome*;
//   - changebot_webhook_commit_batch_size: deliveries stored per intake
//     transaction (the group commit's batches; a delivery retried alone
//     after a failed batch counts as a batch of one);
//   - changebot_webhook_ignored_total{reason}: the GitLab deliveries
//     counted there as ignored, by Ignored* reason;
//   - changebot_callbacks_total{kind,result}: callbacks by KindApproval or
//     KindDeploy and the acceptor's result or a Result* constant;
//   - changebot_webhook_panics_total{handler}: panics of a handler
//     (gitlab, github, approval, deploy) that the HTTP guard around the
//     router recovered (internal/guard.HTTP, which also counts them in
//     changebot_panics_total{where="http"}).
//
// Registering on a registry that already holds them reuses the registered
// collectors, so NewMetrics may be called more than once per registry.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "changebot_webhook_deliveries_total",
			Help: "GitLab and GitHub webhook deliveries received, by X-Gitlab-Event or X-GitHub-Event and outcome.",
		}, []string{labelEvent, labelOutcome}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "changebot_webhook_ignored_total",
			Help: "GitLab webhook deliveries answered without being stored because they cannot move any change, by reason.",
		}, []string{labelReason}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "changebot_webhook_commit_batch_size",
			Help:    "Webhook deliveries stored per intake transaction (group commit).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}),
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "changebot_callbacks_total",
			Help: "Approval and deploy callbacks received, by kind and result.",
		}, []string{labelKind, labelResult}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "changebot_webhook_panics_total",
			Help: "Panics recovered in the webhook and callback handlers, by handler.",
		}, []string{labelHandler}),
	}
	if reg != nil {
		m.deliveries = register(reg, m.deliveries)
		m.ignored = register(reg, m.ignored)
		m.batch = registerHistogram(reg, m.batch)
		m.callbacks = register(reg, m.callbacks)
		m.panics = register(reg, m.panics)
	}
	// Start the common series at zero so rates and alerts see them.
	for _, e := range []string{"Merge Request Hook", "Pipeline Hook", "Note Hook"} {
		for _, o := range []string{OutcomeAccepted, OutcomeDuplicate, OutcomeIgnored, OutcomeUnauthorized, OutcomeMalformed, OutcomeTooLarge, OutcomeError} {
			m.deliveries.WithLabelValues(e, o)
		}
	}
	for _, r := range []string{IgnoredEventNotUsed, IgnoredNotOnMergeRequest, IgnoredSystemNote, IgnoredEditedNote, IgnoredNoCommand, IgnoredMergeRequestUnused, IgnoredPipelineInProgress, IgnoredReviewerApproval} {
		m.ignored.WithLabelValues(r)
	}
	for _, h := range []string{handlerGitLab, handlerGitHub, KindApproval, KindDeploy} {
		m.panics.WithLabelValues(h)
	}
	return m
}

// register registers c on reg, or returns the collector already registered
// under the same description.
func register(reg prometheus.Registerer, c *prometheus.CounterVec) *prometheus.CounterVec {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
			return existing
		}
	}
	if err != nil {
		panic("webhooks: registering metrics: " + err.Error())
	}
	return c
}

// registerHistogram registers h on reg, or returns the histogram already
// registered under the same description.
func registerHistogram(reg prometheus.Registerer, h prometheus.Histogram) prometheus.Histogram {
	err := reg.Register(h)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(prometheus.Histogram); ok {
			return existing
		}
	}
	if err != nil {
		panic("webhooks: registering metrics: " + err.Error())
	}
	return h
}

// orNew returns m, or unregistered metrics when m is nil.
func orNew(m *Metrics) *Metrics {
	if m == nil {
		return NewMetrics(nil)
	}
	return m
}
