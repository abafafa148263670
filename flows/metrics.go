package flows

import (
	"github.com/prometheus/client_golang/prometheus"

	"changebot/flows/rules"
	"changebot/internal/guard"
)

// Metrics are the flow's Prometheus metrics (DESIGN §8), prefix changebot_.
type Metrics struct {
	transitions  *prometheus.CounterVec
	stateSeconds *prometheus.HistogramVec
	validated    *prometheus.CounterVec
	jobFailures  *prometheus.CounterVec
	panics       *prometheus.CounterVec
	active       *prometheus.GaugeVec
	oldest       *prometheus.GaugeVec
	admission    prometheus.Counter
	contradicted *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (nil: not
// registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "changebot_transitions_total",
			Help: "Operation transitions by flow, from step, to step and result (ok, conflict, illegal).",
		}, []string{"flow", "from", "to", "result"}),
		stateSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "changebot_state_seconds",
			Help:    "Time spent in a step before leaving it, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.5, 4, 10),
		}, []string{"step"}),
		validated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "changebot_validated_total",
			Help: "MERGED -> VALIDATED flips, counted after commit and only for a real flip, by source.",
		}, []string{"source"}),
		jobFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "changebot_job_failures_total",
			Help: "Job attempts that returned an error, by job kind and kind of error (transient, declared).",
		}, []string{"job_kind", "kind"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "changebot_panics_total",
			Help: "Panics recovered at a job or handler boundary.",
		}, []string{"where"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "changebot_active_changes",
			Help: "Changes per binding status that hold their binding, read from the database by the job queue leader (other replicas export none).",
		}, []string{"status"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "changebot_active_changes_oldest_seconds",
			Help: "Per binding status, seconds since the least recently changed change in it last changed (0 when none); set by the job queue leader.",
		}, []string{"status"}),
		admission: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "changebot_admission_rejected_total",
			Help: "Submissions refused with 503 because the backlog was above admission.max_active.",
		}),
		contradicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "changebot_webhooks_contradicted_total",
			Help: "Merge request webhooks saying merged or closed whose merge request GitLab or GitHub, read at once, says is not: nothing moved; by action (merge, close).",
		}, []string{"action"}),
	}
	if reg != nil {
		reg.MustRegister(m.transitions, m.stateSeconds, m.validated, m.jobFailures, m.panics, m.active, m.oldest, m.admission, m.contradicted)
	}
	m.initSeries()
	return m
}

// Label values of changebot_job_failures_total's kind.
var jobFailureKinds = []string{"recognised", "declared", "rate_limited", "transient", "budget_yield"}

// panicSites are the where values of changebot_panics_total
// (internal/guard counts there): the job kinds and guard.WhereHTTP (the
// HTTP guard around the router, every handler's).
var panicSites = append(append([]string{}, rules.StepJobKinds()...),
	rules.KindProcessDelivery, rules.KindRefreshNote, rules.KindCloseMR, rules.KindReconcile, rules.KindSweep, guard.WhereHTTP)

// initSeries starts at 0 every series an alert or a dashboard panel
// watches, so that increase() sees the first occurrence too (a series
// born at 1 has no earlier sample to increase from): every legal move of
// the step table with result ok in both flow orders, the time spent in
// each step, every job failure kind per job kind, every panic site.
func (m *Metrics) initSeries() {
	for _, a := range []string{"merge", "close"} {
		m.contradicted.WithLabelValues(a)
	}
	for _, s := range rules.Catalogue() {
		m.stateSeconds.WithLabelValues(s.Code.String())
		if s.Terminal {
			continue
		}
		for _, to := range s.Moves() {
			for _, flow := range []string{"approval_first", "mr_first"} {
				m.transitions.WithLabelValues(flow, s.Code.String(), to.String(), "ok")
			}
		}
	}
	for _, kind := range rules.StepJobKinds() {
		for _, k := range jobFailureKinds {
			m.jobFailures.WithLabelValues(kind, k)
		}
	}
	for _, w := range panicSites {
		m.panics.WithLabelValues(w)
	}
	m.admission.Add(0)
}

// ValidatedCounter exposes the validated counter (tests and the chaos run
// compare it with the database).
func (m *Metrics) ValidatedCounter() *prometheus.CounterVec { return m.validated }

// PanicCounter exposes the panic counter for the job and HTTP guards
// (internal/guard.Config.Panics).
func (m *Metrics) PanicCounter() *prometheus.CounterVec { return m.panics }
