package bot

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/prometheus/prometheus/promql/parser"
)

// The alerting rules and the dashboard, as the Helm chart ships them.
const (
	alertsFile    = "../deploy/helm/changebot/files/alerts.yml"
	dashboardFile = "../deploy/helm/changebot/files/dashboard.json"
)

// ruleFile is the part of a Prometheus rule file the test reads.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// alertExprs returns alert name -> expression of alertsFile.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(raw, &rf); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	out := map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" {
				t.Fatalf("%s: a rule without alert name or expression in group %s", alertsFile, g.Name)
			}
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// dashboardPanels returns panel title -> its target expressions, and the
// panel types by title.
func dashboardPanels(t *testing.T) (exprs map[string][]string, types map[string]string) {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	exprs, types = map[string][]string{}, map[string]string{}
	for _, p := range d.Panels {
		types[p.Title] = p.Type
		for _, tg := range p.Targets {
			exprs[p.Title] = append(exprs[p.Title], tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			exprs["variable "+v.Name] = append(exprs["variable "+v.Name], v.Definition)
		}
	}
	return exprs, types
}

var metricName = regexp.MustCompile(`\bchangebot_[a-z0-9_]+\b`)

// grafanaMacros stand in for Grafana's variables so that a panel's query
// parses as PromQL.
var grafanaMacros = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$step", ".*")

// promqlMetrics parses expr (a rule's or a panel's query, or a variable's
// label_values(metric, label) definition) and returns the metric names its
// selectors read.
func promqlMetrics(expr string) ([]string, error) {
	if inner, ok := strings.CutPrefix(expr, "label_values("); ok {
		metric, _, _ := strings.Cut(inner, ",")
		expr = strings.TrimSpace(metric)
	}
	e, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaMacros.Replace(expr))
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && !slices.Contains(names, vs.Name) {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names, nil
}

// exportedMetrics returns the metric families of a /metrics text body (its
// # TYPE lines) and the sample lines.
func exportedMetrics(body string) (families map[string]string, samples []string) {
	families = map[string]string{}
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(f, " ")
			families[name] = typ
		} else if line != "" && !strings.HasPrefix(line, "#") {
			samples = append(samples, line)
		}
	}
	return families, samples
}

// exported reports whether metric (maybe a histogram's _bucket, _sum or
// _count series) is in families.
func exported(families map[string]string, metric string) bool {
	if _, ok := families[metric]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(metric, suffix); ok && families[base] == "histogram" {
			return true
		}
	}
	return false
}

// TestAlertsAndDashboardNameOnlyExportedMetrics carries one change to
// VALIDATED, scrapes the bot's /metrics, and checks that every changebot_
// metric named by an alerting rule or a dashboard panel is exported, that
// no rule or panel needs a job label, that the series the "entering
// pending" rule and the heatmaps watch exist before anything happened in
// them (started at 0), and that the alerts and heatmaps issue 14 asks for
// are there.
func TestAlertsAndDashboardNameOnlyExportedMetrics(t *testing.T) {
	t.Parallel()
	run := runOneChangeCapturingLogs(t)
	families, samples := exportedMetrics(run.metrics)
	alerts := alertExprs(t)
	panels, types := dashboardPanels(t)
	where := map[string][]string{}
	for name, expr := range alerts {
		where["alert "+name] = []string{expr}
	}
	for title, exprs := range panels {
		where["panel "+title] = exprs
	}
	named := 0
	for place, exprs := range where {
		for _, expr := range exprs {
			if strings.Contains(expr, "job=") || strings.Contains(expr, "job!=") || strings.Contains(expr, "job=~") || strings.Contains(expr, "$job") {
				t.Errorf("%s depends on a job label: %s", place, expr)
			}
			names, err := promqlMetrics(expr)
			if err != nil {
				t.Errorf("%s: not valid PromQL: %v\n%s", place, err, expr)
				continue
			}
			for _, m := range names {
				if m == "up" { // Prometheus's own, per scrape target
					continue
				}
				named++
				if !strings.HasPrefix(m, "changebot_") || !exported(families, m) {
					t.Errorf("%s names %s, which the bot does not export", place, m)
				}
			}
		}
	}
	if named == 0 {
		t.Fatal("no changebot_ metric named by the rules or the dashboard: the test read nothing")
	}

	for _, want := range []string{"ChangebotDown", "ChangebotReplicaNotReady", "ChangebotWebhookSilence", "ChangebotJobFailuresDeclared",
		"ChangebotPanics", "ChangebotChangesEnteringPending"} {
		if _, ok := alerts[want]; !ok {
			t.Errorf("no alert %s", want)
		}
	}
	heatmaps := map[string]bool{}
	for title, typ := range types {
		if typ != "heatmap" {
			continue
		}
		for _, e := range panels[title] {
			for _, m := range metricName.FindAllString(e, -1) {
				heatmaps[m] = true
			}
		}
	}
	if !heatmaps["changebot_transitions_total"] || !heatmaps["changebot_state_seconds_bucket"] {
		t.Errorf("the dashboard's heatmaps show %v, want the transitions and the state durations", heatmaps)
	}

	// The first entry into a pending step must be an increase from 0: the
	// series exist, at 0, although this change entered none. Likewise the
	// declared job failures, the panics and the time in a pending step.
	has := func(prefix string, parts ...string) bool {
		return slices.ContainsFunc(samples, func(s string) bool {
			if !strings.HasPrefix(s, prefix+"{") || !strings.HasSuffix(s, " 0") {
				return false
			}
			for _, p := range parts {
				if !strings.Contains(s, p) {
					return false
				}
			}
			return true
		})
	}
	for _, c := range []struct {
		metric string
		parts  []string
	}{
		{"changebot_transitions_total", []string{`from="CREATE_MR_OPENED"`, `to="CREATE_PIPELINE_PENDING"`, `result="ok"`}},
		{"changebot_transitions_total", []string{`from="HANDLE_MERGED"`, `to="DEPLOY_PENDING"`, `result="ok"`}},
		{"changebot_job_failures_total", []string{`job_kind="handle_merge_request"`, `kind="declared"`}},
		{"changebot_panics_total", []string{`where="await_pipeline"`}},
		{"changebot_state_seconds_count", []string{`step="DEPLOY_PENDING"`}},
	} {
		if !has(c.metric, c.parts...) {
			t.Errorf("no %s series %v at 0 before anything happened in it: increase() would miss the first", c.metric, c.parts)
		}
	}
	if !strings.Contains(run.metrics, "changebot_ready 1") {
		t.Error("changebot_ready is not 1 on a ready replica")
	}
	b := BuildVersion()
	if want := `changebot_build_info{commit="` + b.Commit + `",go="` + b.Go + `",version="` + b.Version + `"} 1`; !strings.Contains(run.metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}
