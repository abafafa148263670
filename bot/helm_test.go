package bot

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"changebot/config"

	"github.com/goccy/go-yaml"
)

// chartDir is the Helm chart, from this package's directory.
const chartDir = "../deploy/helm/changebot"

// helmBinary finds helm: $CHANGEBOT_HELM, else bin/helm (`make helm`
// installs it there from the Go module proxy; `make test` runs that first).
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHANGEBOT_HELM"); p != "" {
		return p
	}
	p, err := filepath.Abs("../bin/helm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		// make test installs helm before the tests run, so in CI it is
		// there; only -short (no services, no tools) may do without it.
		if testing.Short() {
			t.Skip("helm is not installed: `make helm` installs it in bin/ (make test does)")
		}
		t.Fatalf("helm is not installed at %s: run `make helm` (make test does), or set CHANGEBOT_HELM", p)
	}
	return p
}

// manifest is one rendered Kubernetes object.
type manifest map[string]any

// at walks keys (strings for maps, ints for lists) and returns what is
// there, or nil.
func (m manifest) at(keys ...any) any {
	var cur any = map[string]any(m)
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			mm, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = mm[k]
		case int:
			l, ok := cur.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			cur = l[k]
		}
	}
	return cur
}

func (m manifest) str(keys ...any) string { return fmt.Sprint(m.at(keys...)) }

// renderChart runs helm template with sets and returns the objects by
// kind, or helm's error output.
func renderChart(t *testing.T, helm string, sets ...string) (map[string][]manifest, string, error) {
	t.Helper()
	args := []string{"template", "cb", chartDir, "--namespace", "ops", "--kube-version", "1.31.0"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helm, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, stderr.String(), err
	}
	out := map[string][]manifest{}
	for _, doc := range strings.Split(stdout.String(), "\n---") {
		var m manifest
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		out[m.str("kind")] = append(out[m.str("kind")], m)
	}
	return out, "", nil
}

func one(t *testing.T, objs map[string][]manifest, kind string) manifest {
	t.Helper()
	if len(objs[kind]) != 1 {
		t.Fatalf("rendered %d %s objects, want 1", len(objs[kind]), kind)
	}
	return objs[kind][0]
}

// TestHelmChartLintsAndRenders runs helm lint and helm template on the
// chart and checks the manifests: secrets only by reference; migrations
// as a pre-install/pre-upgrade hook Job that Helm deletes itself; probes
// on /readyz and /healthz; a preStop sleep and a termination grace longer
// than the sleep, the shutdown delay and the drain together; the Ingress
// routes no /metrics; the pod's environment and files load as a valid
// configuration; the optional objects appear only when enabled.
func TestHelmChartLintsAndRenders(t *testing.T) {
	t.Parallel()
	helm := helmBinary(t)
	if out, err := exec.Command(helm, "lint", chartDir, "--strict", "--set", "existingSecret=changebot").CombinedOutput(); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}

	// Defaults: no optional object.
	objs, stderr, err := renderChart(t, helm, "existingSecret=changebot")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr)
	}
	for _, kind := range []string{"Ingress", "NetworkPolicy", "ServiceMonitor", "PrometheusRule", "Secret"} {
		if len(objs[kind]) != 0 {
			t.Errorf("defaults render a %s", kind)
		}
	}
	for _, kind := range []string{"Deployment", "Service", "ConfigMap", "Job", "PodDisruptionBudget", "ServiceAccount"} {
		one(t, objs, kind)
	}

	// Everything enabled.
	objs, stderr, err = renderChart(t, helm, "existingSecret=changebot", "ingress.enabled=true", "networkPolicy.enabled=true",
		"metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true", "metrics.grafanaDashboard.enabled=true")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr)
	}
	if len(objs["Secret"]) != 0 {
		t.Error("the chart renders a Secret: secrets are only referenced (existingSecret)")
	}
	dep := one(t, objs, "Deployment")
	svc := one(t, objs, "Service")
	pod := manifest(dep.at("spec", "template", "spec").(map[string]any))
	ctr := manifest(pod.at("containers", 0).(map[string]any))

	t.Run("migration hook job", func(t *testing.T) {
		job := one(t, objs, "Job")
		hooks := strings.Split(job.str("metadata", "annotations", "helm.sh/hook"), ",")
		policy := strings.Split(job.str("metadata", "annotations", "helm.sh/hook-delete-policy"), ",")
		if !slices.Contains(hooks, "pre-install") || !slices.Contains(hooks, "pre-upgrade") {
			t.Errorf("migration Job hooks %v, want pre-install and pre-upgrade", hooks)
		}
		if !slices.Contains(policy, "before-hook-creation") || !slices.Contains(policy, "hook-succeeded") {
			t.Errorf("migration Job delete policy %v, want before-hook-creation and hook-succeeded (nothing deleted by hand)", policy)
		}
		if got := job.str("spec", "template", "spec", "containers", 0, "args"); got != "[migrate]" {
			t.Errorf("migration Job args %s, want [migrate]", got)
		}
		if got := job.str("spec", "template", "spec", "volumes", 0, "secret", "secretName"); got != "changebot" {
			t.Errorf("migration Job reads the Secret %q, want existingSecret", got)
		}
		// A pre-install hook runs before the release's ConfigMap exists.
		if v := job.at("spec", "template", "spec", "volumes"); strings.Contains(fmt.Sprint(v), "configMap") {
			t.Errorf("the migration hook mounts a ConfigMap, which does not exist yet at install: %v", v)
		}
	})

	t.Run("probes and shutdown", func(t *testing.T) {
		if got := ctr.str("readinessProbe", "httpGet", "path"); got != "/readyz" {
			t.Errorf("readiness probe on %q, want /readyz", got)
		}
		if got := ctr.str("livenessProbe", "httpGet", "path"); got != "/healthz" {
			t.Errorf("liveness probe on %q, want /healthz", got)
		}
		if ctr.str("readinessProbe", "httpGet", "port") != "http" || ctr.str("ports", 0, "name") != "http" || ctr.str("ports", 0, "containerPort") != "8080" {
			t.Errorf("probe port %s, container port %s %s", ctr.str("readinessProbe", "httpGet", "port"), ctr.str("ports", 0, "name"), ctr.str("ports", 0, "containerPort"))
		}
		cfg := loadPodConfig(t, objs, ctr)
		var sleep int
		if _, err := fmt.Sscan(ctr.str("lifecycle", "preStop", "sleep", "seconds"), &sleep); err != nil || sleep <= 0 {
			t.Fatalf("no preStop sleep: %v", ctr.at("lifecycle"))
		}
		var grace int
		if _, err := fmt.Sscan(pod.str("terminationGracePeriodSeconds"), &grace); err != nil {
			t.Fatal(err)
		}
		need := time.Duration(sleep)*time.Second + cfg.ShutdownDelay + cfg.ShutdownGrace
		if time.Duration(grace)*time.Second <= need || cfg.ShutdownDelay <= 0 {
			t.Errorf("terminationGracePeriodSeconds %d, want above preStop %ds + shutdown_delay %s + shutdown_grace %s", grace, sleep, cfg.ShutdownDelay, cfg.ShutdownGrace)
		}
		if cfg.AutoMigrate {
			t.Error("replicas migrate at start: the hook Job does it")
		}
	})

	t.Run("ingress", func(t *testing.T) {
		ing := one(t, objs, "Ingress")
		paths, _ := ing.at("spec", "rules", 0, "http", "paths").([]any)
		var got []string
		for i := range paths {
			p := manifest(paths[i].(map[string]any))
			got = append(got, p.str("path"))
			if strings.HasPrefix(p.str("path"), "/metrics") || p.str("path") == "/" {
				t.Errorf("the Ingress routes %s: /metrics must stay internal", p.str("path"))
			}
			if p.str("backend", "service", "name") != svc.str("metadata", "name") || p.str("backend", "service", "port", "name") != svc.str("spec", "ports", 0, "name") {
				t.Errorf("path %s goes to %v, not the Service's http port", p.str("path"), p.at("backend"))
			}
		}
		if !slices.Equal(got, []string{"/webhooks/gitlab", "/callbacks", "/api/v1"}) {
			t.Errorf("Ingress paths %v", got)
		}
	})

	t.Run("monitoring", func(t *testing.T) {
		sm := one(t, objs, "ServiceMonitor")
		if sm.str("spec", "endpoints", 0, "path") != "/metrics" || sm.str("spec", "endpoints", 0, "port") != "http" {
			t.Errorf("ServiceMonitor endpoint %v", sm.at("spec", "endpoints"))
		}
		rule := one(t, objs, "PrometheusRule")
		rendered, _ := rule.at("spec", "groups", 0, "rules").([]any)
		if want := len(alertExprs(t)); len(rendered) != want {
			t.Errorf("PrometheusRule has %d rules, files/alerts.yml %d", len(rendered), want)
		}
		for _, r := range rendered {
			if a := manifest(r.(map[string]any)); a.str("alert") == "ChangebotDown" && a.str("expr") != alertExprs(t)["ChangebotDown"] {
				t.Errorf("PrometheusRule changed an expression: %s", a.str("expr"))
			}
		}
	})

	t.Run("selectors", func(t *testing.T) {
		podLabels := dep.at("spec", "template", "metadata", "labels").(map[string]any)
		for _, sel := range []manifest{one(t, objs, "PodDisruptionBudget"), svc} {
			m, _ := sel.at("spec", "selector", "matchLabels").(map[string]any)
			if m == nil {
				m, _ = sel.at("spec", "selector").(map[string]any)
			}
			for k, v := range m {
				if podLabels[k] != v {
					t.Errorf("%s selects %s=%v, which the pods do not carry", sel.str("kind"), k, v)
				}
			}
		}
	})

	t.Run("refused values", func(t *testing.T) {
		for _, c := range []struct {
			sets []string
			want string
		}{
			{nil, "existingSecret"},
			{[]string{"existingSecret=x", "ingress.enabled=true", "ingress.paths={/api/v1,/metrics}"}, "/metrics"},
		} {
			if _, stderr, err := renderChart(t, helm, c.sets...); err == nil || !strings.Contains(stderr, c.want) {
				t.Errorf("helm template %v: err %v, stderr %q, want a refusal naming %s", c.sets, err, stderr, c.want)
			}
		}
	})
}

// loadPodConfig loads the configuration the server container would: its
// environment, its config file from the rendered ConfigMap, its secrets
// from the Secret volume's item paths (fake values).
func loadPodConfig(t *testing.T, objs map[string][]manifest, ctr manifest) config.Config {
	t.Helper()
	env := map[string]string{}
	envList, _ := ctr.at("env").([]any)
	for _, e := range envList {
		m := manifest(e.(map[string]any))
		env[m.str("name")] = m.str("value")
	}
	dep := one(t, objs, "Deployment")
	vols, _ := dep.at("spec", "template", "spec", "volumes").([]any)
	files := map[string]string{}
	for _, v := range vols {
		// The config volume's ConfigMap (the dashboard's is another one).
		if name := manifest(v.(map[string]any)).str("configMap", "name"); name != "<nil>" {
			for _, cm := range objs["ConfigMap"] {
				if cm.str("metadata", "name") == name {
					for k, v := range cm.at("data").(map[string]any) {
						files["/etc/changebot/"+k] = fmt.Sprint(v)
					}
				}
			}
		}
		items, _ := manifest(v.(map[string]any)).at("secret", "items").([]any)
		for _, it := range items {
			p := manifest(it.(map[string]any)).str("path")
			value := "secret-" + p
			switch p {
			case "database-url":
				value = "postgres://changebot:pw@db:5432/changebot"
			case "api-tokens":
				value = "operator:token-1"
			}
			files["/run/secrets/changebot/"+p] = value
		}
	}
	cfg, err := config.Load(env["CHANGEBOT_CONFIG"], func(k string) string { return env[k] }, func(name string) ([]byte, error) {
		if s, ok := files[path.Clean(name)]; ok {
			return []byte(s), nil
		}
		return nil, fmt.Errorf("%s: no such file in the pod", name)
	})
	if err != nil {
		t.Fatalf("the pod's configuration does not load: %v", err)
	}
	return cfg
}
