package bot

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
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

// renderChart runs helm template for Kubernetes 1.31 with sets and returns
// the objects by kind, or helm's error output.
func renderChart(t *testing.T, helm string, sets ...string) (map[string][]manifest, string, error) {
	t.Helper()
	return renderChartAt(t, helm, chartDir, "1.31.0", sets...)
}

// renderChartAt is renderChart of the chart in dir for the Kubernetes
// version kube; "" passes no --kube-version (helm then assumes v1.20.0).
func renderChartAt(t *testing.T, helm, dir, kube string, sets ...string) (map[string][]manifest, string, error) {
	t.Helper()
	args := []string{"template", "cb", dir, "--namespace", "ops"}
	if kube != "" {
		args = append(args, "--kube-version", kube)
	}
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

	// Defaults: no optional object, and no --kube-version needed (helm
	// assumes v1.20.0 then, which the chart's kubeVersion accepts).
	if _, stderr, err := renderChartAt(t, helm, chartDir, "", "existingSecret=changebot"); err != nil {
		t.Errorf("helm template without --kube-version: %v\n%s", err, stderr)
	}
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
		if !slices.Equal(got, []string{"/webhooks/gitlab", "/callbacks", "/api/v1", "/ui"}) {
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
			{[]string{"existingSecret=x", "config.platform=bitbucket"}, "config.platform"},
			{[]string{"existingSecret=x", "config.platform=github", "config.github_app_id=12"}, "config.github_installation_id"},
			{[]string{"existingSecret=x", "config.platform=github", "config.github_installation_id=34"}, "config.github_app_id"},
			{[]string{"existingSecret=x", "config.platform=github", "ingress.enabled=true", "ingress.paths={/webhooks/gitlab,/ui}"}, "/webhooks/github"},
			{[]string{"existingSecret=x", "secretKeys.apiTokens="}, "secretKeys.apiTokens"},
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
			case "github-app-private-key":
				value = testAppPrivateKey(t)
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

// testAppPrivateKey is a GitHub App private key as GitHub downloads it
// (an RSA key in PKCS #1 PEM), made for the test.
func testAppPrivateKey(t *testing.T) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
}

// renderNotes renders the chart's NOTES.txt, which helm template leaves
// out: in a copy of the chart, a template renders the file with tpl into a
// ConfigMap (templates/ is not readable through .Files, so the copy holds
// NOTES.txt in files/ too).
func renderNotes(t *testing.T, helm string, sets ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "changebot")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(chartDir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "files", "NOTES.txt"), notes, 0o644); err != nil {
		t.Fatal(err)
	}
	const tmpl = `apiVersion: v1
kind: ConfigMap
metadata:
  name: notes
data:
  notes: {{ tpl (.Files.Get "files/NOTES.txt") . | quote }}
`
	if err := os.WriteFile(filepath.Join(dir, "templates", "notes-configmap.yaml"), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, stderr, err := renderChartAt(t, helm, dir, "1.31.0", sets...)
	if err != nil {
		t.Fatalf("helm template of the notes: %v\n%s", err, stderr)
	}
	for _, cm := range objs["ConfigMap"] {
		if cm.str("metadata", "name") == "notes" {
			return cm.str("data", "notes")
		}
	}
	t.Fatal("the notes ConfigMap was not rendered")
	return ""
}

// TestHelmChartFollowsThePlatform renders the chart for GitLab, for GitHub
// with a token and for GitHub with a GitHub App, and checks what follows
// config.platform (each also passes helm lint --strict): the Secret's keys
// mounted and the *_FILE variables
// naming them (only the platform's robot credential), the config file's
// platform and URL keys, the Ingress's webhook path (and /ui routed on
// both), the notes' words; and that each pod's configuration loads.
func TestHelmChartFollowsThePlatform(t *testing.T) {
	t.Parallel()
	helm := helmBinary(t)
	for _, c := range []struct {
		name      string
		sets      []string
		robotKey  string // the key of existingSecret holding the robot's credential
		robotEnv  string
		webhook   string
		config    []string // lines the config file has
		notConfig []string // keys it must not have
		notes     []string
		notNotes  []string
	}{
		{name: "gitlab", robotKey: "gitlab-token", robotEnv: "CHANGEBOT_GITLAB_TOKEN_FILE", webhook: "/webhooks/gitlab",
			config:    []string{"platform: gitlab", "gitlab_url: https://gitlab.example.com"},
			notConfig: []string{"github_url", "github_app_id", "github_installation_id"},
			notes:     []string{"GitLab merge requests", "https://changebot.example.com/webhooks/gitlab", "merge request events, pipeline events, comments", "https://changebot.example.com/ui"},
			notNotes:  []string{"GitHub", "pull request", "/webhooks/github"}},
		{name: "github token", sets: []string{"config.platform=github", "secretKeys.githubToken=robot-token"},
			robotKey: "robot-token", robotEnv: "CHANGEBOT_GITHUB_TOKEN_FILE", webhook: "/webhooks/github",
			config:    []string{"platform: github"},
			notConfig: []string{"gitlab_url", "github_url", "github_app_id", "github_installation_id"},
			notes: []string{"GitHub pull requests", "https://changebot.example.com/webhooks/github", "content type application/json",
				"Pull requests, Pull request reviews", "the token in key robot-token", "https://changebot.example.com/ui"},
			notNotes: []string{"GitLab", "merge request", "/webhooks/gitlab"}},
		{name: "github app", sets: []string{"config.platform=GitHub", "config.github_app_id=12345", "config.github_installation_id=67890",
			"config.github_url=https://ghe.example.com/api/v3"},
			robotKey: "github-app-private-key", robotEnv: "CHANGEBOT_GITHUB_APP_PRIVATE_KEY_FILE", webhook: "/webhooks/github",
			config:    []string{"platform: github", "github_app_id: 12345", "github_installation_id: 67890", "github_url: https://ghe.example.com/api/v3"},
			notConfig: []string{"gitlab_url"},
			notes:     []string{"GitHub pull requests", "/webhooks/github", "the GitHub App 12345 (installation 67890; private key: key github-app-private-key)"},
			notNotes:  []string{"GitLab", "merge request", "/webhooks/gitlab"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sets := append([]string{"existingSecret=changebot", "ingress.enabled=true"}, c.sets...)
			lint := []string{"lint", chartDir, "--strict"}
			for _, s := range sets {
				lint = append(lint, "--set", s)
			}
			if out, err := exec.Command(helm, lint...).CombinedOutput(); err != nil {
				t.Errorf("helm lint: %v\n%s", err, out)
			}
			objs, stderr, err := renderChart(t, helm, sets...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, stderr)
			}
			dep := one(t, objs, "Deployment")
			ctr := manifest(dep.at("spec", "template", "spec", "containers", 0).(map[string]any))

			// The Secret's keys: the shared ones and the platform's robot.
			want := []string{"database-url", c.robotKey, "reviewer-tokens", "webhook-secrets", "callback-secret", "api-tokens"}
			var keys []string
			vols, _ := dep.at("spec", "template", "spec", "volumes").([]any)
			for _, v := range vols {
				items, _ := manifest(v.(map[string]any)).at("secret", "items").([]any)
				for _, it := range items {
					keys = append(keys, manifest(it.(map[string]any)).str("key"))
				}
			}
			if !slices.Equal(keys, want) {
				t.Errorf("Secret keys mounted %v, want %v", keys, want)
			}
			var fileVars []string
			envList, _ := ctr.at("env").([]any)
			for _, e := range envList {
				if name := manifest(e.(map[string]any)).str("name"); strings.HasSuffix(name, "_FILE") {
					fileVars = append(fileVars, name)
				}
			}
			wantVars := []string{"DATABASE_URL_FILE", c.robotEnv, "CHANGEBOT_REVIEWER_TOKENS_FILE", "CHANGEBOT_WEBHOOK_SECRETS_FILE",
				"CHANGEBOT_CALLBACK_SECRET_FILE", "CHANGEBOT_API_TOKENS_FILE"}
			if !slices.Equal(fileVars, wantVars) {
				t.Errorf("*_FILE variables %v, want %v", fileVars, wantVars)
			}

			// The config file: the platform's keys only.
			var file string
			for _, cm := range objs["ConfigMap"] {
				if cm.str("metadata", "name") == dep.str("metadata", "name") {
					file = cm.str("data", "changebot.yaml")
				}
			}
			for _, line := range c.config {
				if !slices.Contains(strings.Split(file, "\n"), line) {
					t.Errorf("config file lacks %q:\n%s", line, file)
				}
			}
			for _, key := range c.notConfig {
				if strings.Contains(file, "\n"+key+":") {
					t.Errorf("config file has the other platform's (or an empty) key %s:\n%s", key, file)
				}
			}
			cfg := loadPodConfig(t, objs, ctr)
			if got := cfg.WebhookPath(); got != c.webhook {
				t.Errorf("the pod's configuration serves its webhook at %s, want %s", got, c.webhook)
			}

			// The Ingress: the platform's webhook path and /ui.
			var paths []string
			ps, _ := one(t, objs, "Ingress").at("spec", "rules", 0, "http", "paths").([]any)
			for _, p := range ps {
				paths = append(paths, manifest(p.(map[string]any)).str("path"))
			}
			if wantPaths := []string{c.webhook, "/callbacks", "/api/v1", "/ui"}; !slices.Equal(paths, wantPaths) {
				t.Errorf("Ingress paths %v, want %v", paths, wantPaths)
			}

			notes := renderNotes(t, helm, sets...)
			for _, w := range c.notes {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES.txt lacks %q:\n%s", w, notes)
				}
			}
			for _, w := range c.notNotes {
				if strings.Contains(notes, w) {
					t.Errorf("NOTES.txt says %q:\n%s", w, notes)
				}
			}
		})
	}
}

// TestHelmChartBeforeKubernetes130: a cluster without the preStop sleep
// action (before 1.30) gets no preStop hook, and a shutdown delay longer by
// the sleep instead, so a pod still accepts webhooks as long after it is
// told to stop; the termination grace still covers the delay and the drain.
func TestHelmChartBeforeKubernetes130(t *testing.T) {
	t.Parallel()
	helm := helmBinary(t)
	objs, stderr, err := renderChartAt(t, helm, chartDir, "1.29.4", "existingSecret=changebot")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr)
	}
	dep := one(t, objs, "Deployment")
	pod := manifest(dep.at("spec", "template", "spec").(map[string]any))
	ctr := manifest(pod.at("containers", 0).(map[string]any))
	if l := ctr.at("lifecycle"); l != nil {
		t.Errorf("Kubernetes 1.29 gets a lifecycle it cannot run: %v", l)
	}
	cfg := loadPodConfig(t, objs, ctr)
	if cfg.ShutdownDelay != 15*time.Second {
		t.Errorf("shutdown_delay %s, want 15s (the 10 s delay and the 5 s preStop sleep)", cfg.ShutdownDelay)
	}
	var grace int
	if _, err := fmt.Sscan(pod.str("terminationGracePeriodSeconds"), &grace); err != nil {
		t.Fatal(err)
	}
	if time.Duration(grace)*time.Second <= cfg.ShutdownDelay+cfg.ShutdownGrace {
		t.Errorf("terminationGracePeriodSeconds %d, want above shutdown_delay %s + shutdown_grace %s", grace, cfg.ShutdownDelay, cfg.ShutdownGrace)
	}
	if got := one(t, objs, "PodDisruptionBudget").str("apiVersion"); got != "policy/v1" {
		t.Errorf("PodDisruptionBudget %s, want policy/v1", got)
	}
}
