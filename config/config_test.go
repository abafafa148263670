package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/settings"
)

// Distinctive secret values: no test output may contain any of them.
const (
	secretDBPassword   = "db-pa55word-XYZZY"
	secretGitLabToken  = "glpat-robot-SECRET-1111"
	secretReviewer1    = "glpat-reviewer-SECRET-2222"
	secretReviewer2    = "glpat-reviewer-SECRET-3333"
	secretWebhook      = "webhook-SECRET-4444"
	secretCallback     = "callback-SECRET-5555"
	secretAPISubmitter = "api-submitter-SECRET-6666"
	secretAPIOperator  = "api-operator-SECRET-7777"
)

var allSecrets = []string{
	secretDBPassword, secretGitLabToken, secretReviewer1, secretReviewer2,
	secretWebhook, secretCallback, secretAPISubmitter, secretAPIOperator,
	// values from the testdata files
	"yaml-db-password", "yaml-gitlab-token", "yaml-reviewer-1", "yaml-webhook-1",
	"yaml-callback-secret", "yaml-api-submitter", "yaml-api-operator",
	"typo-secret-value", "syntax-secret-value",
}

// validEnv is a minimal environment that passes validation.
func validEnv() map[string]string {
	return map[string]string{
		"DATABASE_URL":              "postgres://changebot:" + secretDBPassword + "@127.0.0.1:5432/changebot?sslmode=disable",
		"CHANGEBOT_GITLAB_URL":      "https://gitlab.example",
		"CHANGEBOT_GITLAB_TOKEN":    secretGitLabToken,
		"CHANGEBOT_REVIEWER_TOKENS": secretReviewer1 + "," + secretReviewer2,
		"CHANGEBOT_WEBHOOK_SECRETS": secretWebhook,
		"CHANGEBOT_CALLBACK_SECRET": secretCallback,
		"CHANGEBOT_API_TOKENS":      "submitter:" + secretAPISubmitter + ",operator:" + secretAPIOperator,
		"CHANGEBOT_APPROVAL_URL":    "https://approvals.example",
		"CHANGEBOT_EXTERNAL_URL":    "https://changebot.example",
	}
}

func with(env map[string]string, kv ...string) map[string]string {
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

func without(env map[string]string, keys ...string) map[string]string {
	for _, k := range keys {
		delete(env, k)
	}
	return env
}

// load runs Load with env as the environment and files as the only
// readable files besides testdata/.
func load(t *testing.T, path string, env, files map[string]string) (Config, error) {
	t.Helper()
	getenv := func(k string) string { return env[k] }
	readFile := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		if strings.HasPrefix(p, "testdata/") || strings.HasPrefix(p, "../deploy/") {
			return os.ReadFile(p)
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	return Load(path, getenv, readFile)
}

func problemsOf(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error is %T, want *Error: %v", err, err)
	}
	return ce.Problems
}

func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, secret := range allSecrets {
		if strings.Contains(s, secret) {
			t.Errorf("%s contains secret %q:\n%s", what, secret, s)
		}
	}
}

func TestLoadConfigDefaults(t *testing.T) {
	t.Parallel()
	c, err := load(t, "", validEnv(), nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Listen != ":8080" || c.LogLevel != "info" || c.LogFormat != "json" || c.Workers != 20 ||
		c.MaxBodyBytes != 5<<20 || c.ShutdownGrace != 20*time.Second || c.AutoMigrate {
		t.Errorf("defaults not applied: %v", c)
	}
	if c.Operators != nil || c.BotUsers != nil || c.Settings != nil {
		t.Errorf("unset lists should stay nil: %v", c)
	}
	if !reflect.DeepEqual(Default(), Config{Listen: ":8080", Platform: PlatformGitLab, LogLevel: "info", LogFormat: "json",
		Workers: 20, MaxBodyBytes: 5 << 20, ShutdownGrace: 20 * time.Second, ShutdownDelay: 10 * time.Second, WebSessionTTL: 12 * time.Hour,
		AdoptLabel: "changebot"}) {
		t.Errorf("Default() = %v", Default())
	}
}

func TestLoadConfigSources(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		path  string
		env   map[string]string
		files map[string]string
		check func(t *testing.T, c Config)
	}{
		{
			name: "yaml file alone",
			path: "testdata/full.yaml",
			env:  map[string]string{},
			check: func(t *testing.T, c Config) {
				want := Config{
					Listen:         "127.0.0.1:9090",
					Platform:       PlatformGitLab,
					DatabaseURL:    "postgres://changebot:yaml-db-password@db.example:5432/changebot?sslmode=disable",
					GitLabURL:      "https://gitlab.example",
					GitLabToken:    "yaml-gitlab-token",
					ReviewerTokens: []string{"yaml-reviewer-1", "yaml-reviewer-2"},
					WebhookSecrets: []string{"yaml-webhook-1"},
					CallbackSecret: "yaml-callback-secret",
					APITokens:      []api.Token{{Role: api.RoleSubmitter, Token: "yaml-api-submitter"}, {Role: api.RoleOperator, Token: "yaml-api-operator"}},
					ApprovalURL:    "https://approvals.example",
					ExternalURL:    "https://changebot.example",
					Operators:      []string{"alice", "bob"},
					BotUsers:       []string{"renovate-bot"},
					AdoptLabel:     "changebot",
					LogLevel:       "debug",
					LogFormat:      "text",
					Workers:        7,
					MaxBodyBytes:   1 << 20,
					ShutdownGrace:  45 * time.Second,
					ShutdownDelay:  4 * time.Second,
					WebSessionTTL:  12 * time.Hour,
					AutoMigrate:    true,
					Settings: map[string]string{
						"flow.approval_first": "true", "admission.max_active": "200", "pipeline.deadline": "2h",
					},
				}
				if !reflect.DeepEqual(c, want) {
					t.Errorf("got  %#v\nwant %#v", c, want) // GoString is redacted: compare fields below
					for _, f := range reflect.VisibleFields(reflect.TypeFor[Config]()) {
						if !reflect.DeepEqual(reflect.ValueOf(c).FieldByIndex(f.Index).Interface(), reflect.ValueOf(want).FieldByIndex(f.Index).Interface()) {
							t.Errorf("field %s differs", f.Name)
						}
					}
				}
			},
		},
		{
			name: "environment wins over yaml",
			path: "testdata/full.yaml",
			env: map[string]string{
				"CHANGEBOT_LISTEN":          ":7000",
				"CHANGEBOT_GITLAB_TOKEN":    secretGitLabToken,
				"CHANGEBOT_WEBHOOK_SECRETS": secretWebhook + " , other-" + secretWebhook,
				"CHANGEBOT_OPERATORS":       "carol",
				"CHANGEBOT_WORKERS":         "3",
				"CHANGEBOT_AUTO_MIGRATE":    "false",
				"CHANGEBOT_LOG_LEVEL":       "WARN",
			},
			check: func(t *testing.T, c Config) {
				if c.Listen != ":7000" || c.GitLabToken != secretGitLabToken || c.Workers != 3 || c.AutoMigrate || c.LogLevel != "warn" {
					t.Errorf("environment did not win: %v", c)
				}
				if !slices.Equal(c.WebhookSecrets, []string{secretWebhook, "other-" + secretWebhook}) {
					t.Errorf("WebhookSecrets not split and trimmed: %d entries", len(c.WebhookSecrets))
				}
				if !slices.Equal(c.Operators, []string{"carol"}) {
					t.Errorf("Operators = %v, want the environment's list, not merged", c.Operators)
				}
				if c.CallbackSecret != "yaml-callback-secret" || c.LogFormat != "text" {
					t.Errorf("unset variables must keep the yaml values: %v", c)
				}
			},
		},
		{
			name: "empty environment variable counts as unset",
			path: "testdata/full.yaml",
			env:  map[string]string{"CHANGEBOT_LISTEN": "", "CHANGEBOT_GITLAB_TOKEN": ""},
			check: func(t *testing.T, c Config) {
				if c.Listen != "127.0.0.1:9090" || c.GitLabToken != "yaml-gitlab-token" {
					t.Errorf("empty variables overrode the file: %v", c)
				}
			},
		},
		{
			name: "secret files are read and trimmed and win over yaml",
			path: "testdata/full.yaml",
			env: map[string]string{
				"CHANGEBOT_GITLAB_TOKEN_FILE":    "/run/secrets/gitlab",
				"CHANGEBOT_CALLBACK_SECRET_FILE": "/run/secrets/callback",
				"CHANGEBOT_REVIEWER_TOKENS_FILE": "/run/secrets/reviewers",
				"CHANGEBOT_API_TOKENS_FILE":      "/run/secrets/api",
				"DATABASE_URL_FILE":              "/run/secrets/db",
			},
			files: map[string]string{
				"/run/secrets/gitlab":    "  " + secretGitLabToken + "\n",
				"/run/secrets/callback":  secretCallback + "\r\n",
				"/run/secrets/reviewers": secretReviewer1 + "\n" + secretReviewer2 + "\n",
				"/run/secrets/api":       "submitter:" + secretAPISubmitter + ", operator:" + secretAPIOperator + "\n",
				"/run/secrets/db":        "postgres://u:" + secretDBPassword + "@db/x\n",
			},
			check: func(t *testing.T, c Config) {
				if c.GitLabToken != secretGitLabToken || c.CallbackSecret != secretCallback {
					t.Error("secret files not read or not trimmed")
				}
				if !slices.Equal(c.ReviewerTokens, []string{secretReviewer1, secretReviewer2}) {
					t.Errorf("ReviewerTokens from file: %d entries", len(c.ReviewerTokens))
				}
				if !slices.Equal(c.APITokens, []api.Token{{Role: api.RoleSubmitter, Token: secretAPISubmitter}, {Role: api.RoleOperator, Token: secretAPIOperator}}) {
					t.Errorf("APITokens from file: %v", c.APITokens)
				}
				if c.DatabaseURL != "postgres://u:"+secretDBPassword+"@db/x" {
					t.Error("DATABASE_URL_FILE not used")
				}
			},
		},
		{
			name: "gitlab url without api suffix and urls without trailing slash",
			env: with(validEnv(), "CHANGEBOT_GITLAB_URL", "http://gitlab.local:8929/",
				"CHANGEBOT_EXTERNAL_URL", "https://bot.example/changebot/"),
			check: func(t *testing.T, c Config) {
				if c.GitLabURL != "http://gitlab.local:8929" || c.GitLabAPIURL() != "http://gitlab.local:8929/api/v4" {
					t.Errorf("GitLabURL = %q, GitLabAPIURL() = %q", c.GitLabURL, c.GitLabAPIURL())
				}
				if c.ExternalURL != "https://bot.example/changebot" {
					t.Errorf("ExternalURL = %q", c.ExternalURL)
				}
			},
		},
		{
			name: "sizes durations and log level parse",
			env: with(validEnv(), "CHANGEBOT_MAX_BODY_BYTES", "512KiB", "CHANGEBOT_SHUTDOWN_GRACE", "1m30s",
				"CHANGEBOT_LOG_LEVEL", "error", "CHANGEBOT_AUTO_MIGRATE", "1"),
			check: func(t *testing.T, c Config) {
				if c.MaxBodyBytes != 512<<10 || c.ShutdownGrace != 90*time.Second || c.SlogLevel() != slog.LevelError || !c.AutoMigrate {
					t.Errorf("got %v", c)
				}
			},
		},
		{
			name: "approval url is optional when the approval provider is gitlab",
			path: "testdata/gitlab_provider.yaml",
			env:  without(validEnv(), "CHANGEBOT_APPROVAL_URL"),
			files: map[string]string{
				"testdata/gitlab_provider.yaml": "settings:\n  approval.provider: gitlab\n",
			},
			check: func(t *testing.T, c Config) {
				if c.ApprovalURL != "" || c.Settings["approval.provider"] != "gitlab" {
					t.Errorf("got %v", c)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, tt.path, tt.env, tt.files)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestLoadConfigProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		path  string
		env   map[string]string
		files map[string]string
		want  []string // substrings, one per expected problem, in order
	}{
		{
			name: "nothing set: every required input at once",
			env:  map[string]string{},
			// DATABASE_URL is not among them: empty means the SQLite file.
			want: []string{
				"CHANGEBOT_GITLAB_URL (gitlab_url): is required",
				"CHANGEBOT_APPROVAL_URL (approval_url): is required",
				"CHANGEBOT_EXTERNAL_URL (external_url): is required",
				"CHANGEBOT_GITLAB_TOKEN (gitlab_token): is required",
				"CHANGEBOT_CALLBACK_SECRET (callback_secret): is required",
				"CHANGEBOT_WEBHOOK_SECRETS (webhook_secrets): at least one is required",
				"CHANGEBOT_API_TOKENS (api_tokens): at least one is required",
			},
		},
		{
			name: "every kind of bad value at once",
			env: map[string]string{
				"CHANGEBOT_LISTEN":          "8080",
				"DATABASE_URL":              "mysql://root:" + secretDBPassword + "@db/x",
				"CHANGEBOT_GITLAB_URL":      "gitlab.example",
				"CHANGEBOT_GITLAB_TOKEN":    secretGitLabToken,
				"CHANGEBOT_REVIEWER_TOKENS": secretReviewer1 + ",," + secretGitLabToken + "," + secretReviewer1,
				"CHANGEBOT_WEBHOOK_SECRETS": secretWebhook + ",",
				"CHANGEBOT_CALLBACK_SECRET": secretCallback,
				"CHANGEBOT_API_TOKENS":      "admin:" + secretAPIOperator + "," + secretAPISubmitter + ",operator:,,submitter:" + secretAPIOperator,
				"CHANGEBOT_APPROVAL_URL":    "ftp://approvals.example",
				"CHANGEBOT_EXTERNAL_URL":    "https://changebot.example/?x=1",
				"CHANGEBOT_OPERATORS":       "alice,,bad name",
				"CHANGEBOT_BOT_USERS":       "renovate,",
				"CHANGEBOT_LOG_LEVEL":       "verbose",
				"CHANGEBOT_LOG_FORMAT":      "xml",
				"CHANGEBOT_WORKERS":         "0",
				"CHANGEBOT_MAX_BODY_BYTES":  "-1",
				"CHANGEBOT_SHUTDOWN_GRACE":  "0s",
				"CHANGEBOT_SHUTDOWN_DELAY":  "-1s",
				"CHANGEBOT_WEB_SESSION_TTL": "720h",
			},
			want: []string{
				`CHANGEBOT_LISTEN (listen): "8080" is not a host:port address`,
				"DATABASE_URL (database_url): is not a postgres:// URL",
				"CHANGEBOT_GITLAB_URL (gitlab_url): must start with http:// or https://",
				"CHANGEBOT_APPROVAL_URL (approval_url): must start with http:// or https://",
				"CHANGEBOT_EXTERNAL_URL (external_url): must not have a query or fragment",
				"CHANGEBOT_REVIEWER_TOKENS (reviewer_tokens): entry 2 is empty",
				"CHANGEBOT_REVIEWER_TOKENS (reviewer_tokens): entries 1 and 4 are the same",
				"CHANGEBOT_REVIEWER_TOKENS (reviewer_tokens): entry 3 is the robot's own CHANGEBOT_GITLAB_TOKEN",
				"CHANGEBOT_WEBHOOK_SECRETS (webhook_secrets): entry 2 is empty",
				"CHANGEBOT_API_TOKENS (api_tokens): entry 1: the role must be submitter, operator or viewer",
				"CHANGEBOT_API_TOKENS (api_tokens): entry 2 has no role",
				"CHANGEBOT_API_TOKENS (api_tokens): entry 3 (operator) has an empty token",
				"CHANGEBOT_API_TOKENS (api_tokens): entry 4 is empty",
				"CHANGEBOT_API_TOKENS (api_tokens): entries 1 and 5 have the same token",
				"CHANGEBOT_OPERATORS (operators): entry 2 is empty",
				`CHANGEBOT_OPERATORS (operators): entry 3 "bad name" is not a GitLab username`,
				"CHANGEBOT_BOT_USERS (bot_users): entry 2 is empty",
				`CHANGEBOT_LOG_LEVEL (log_level): "verbose" is not debug, info, warn or error`,
				`CHANGEBOT_LOG_FORMAT (log_format): "xml" is not text or json`,
				"CHANGEBOT_WORKERS (workers): must be at least 1, got 0",
				"CHANGEBOT_MAX_BODY_BYTES (max_body_bytes): must be positive, got -1",
				"CHANGEBOT_SHUTDOWN_GRACE (shutdown_grace): must be positive, got 0s",
				"CHANGEBOT_SHUTDOWN_DELAY (shutdown_delay): must not be negative, got -1s",
				"CHANGEBOT_WEB_SESSION_TTL (web_session_ttl): must be from 1m0s to 168h0m0s, got 720h0m0s",
			},
		},
		{
			name: "values that do not parse",
			env: with(validEnv(), "CHANGEBOT_WORKERS", "many", "CHANGEBOT_MAX_BODY_BYTES", "5MB",
				"CHANGEBOT_SHUTDOWN_GRACE", "20", "CHANGEBOT_AUTO_MIGRATE", "maybe"),
			want: []string{
				`CHANGEBOT_WORKERS: "many" is not a whole number`,
				`CHANGEBOT_MAX_BODY_BYTES: "5MB" is not a size`,
				`CHANGEBOT_SHUTDOWN_GRACE: "20" is not a duration`,
				`CHANGEBOT_AUTO_MIGRATE: "maybe" is not true or false`,
			},
		},
		{
			name: "a secret and its file both set",
			env: with(validEnv(), "CHANGEBOT_GITLAB_TOKEN_FILE", "/run/secrets/gitlab",
				"CHANGEBOT_WEBHOOK_SECRETS_FILE", "/run/secrets/webhook"),
			files: map[string]string{"/run/secrets/gitlab": secretGitLabToken, "/run/secrets/webhook": secretWebhook},
			want: []string{
				"CHANGEBOT_GITLAB_TOKEN and CHANGEBOT_GITLAB_TOKEN_FILE are both set",
				"CHANGEBOT_WEBHOOK_SECRETS and CHANGEBOT_WEBHOOK_SECRETS_FILE are both set",
			},
		},
		{
			name: "unreadable and empty secret files",
			env: with(without(validEnv(), "CHANGEBOT_CALLBACK_SECRET", "CHANGEBOT_API_TOKENS"),
				"CHANGEBOT_CALLBACK_SECRET_FILE", "/run/secrets/missing",
				"CHANGEBOT_API_TOKENS_FILE", "/run/secrets/empty"),
			files: map[string]string{"/run/secrets/empty": " \n"},
			want: []string{
				"CHANGEBOT_CALLBACK_SECRET_FILE: reading secret file: open /run/secrets/missing: file does not exist",
				"CHANGEBOT_API_TOKENS_FILE: file /run/secrets/empty is empty",
			},
		},
		{
			name: "unknown yaml keys",
			path: "testdata/unknown_key.yaml",
			env:  validEnv(),
			want: []string{
				`config file key "gitlab_tokn": unknown key`,
				`config file key "workerz": unknown key`,
			},
		},
		{
			name: "yaml syntax error gives its position and reason, no value",
			path: "testdata/invalid_syntax.yaml",
			env:  validEnv(),
			want: []string{"config file testdata/invalid_syntax.yaml: invalid YAML at line"},
		},
		{
			name:  "duplicate yaml key",
			path:  "dup.yaml",
			env:   validEnv(),
			files: map[string]string{"dup.yaml": "listen: a\nlisten: b\n"},
			want:  []string{`config file dup.yaml: invalid YAML at line 2, column 1: mapping key "listen" already defined at [1:1]`},
		},
		{
			// A file that does not parse may hold the required values: no
			// "is required" follows its one problem.
			name:  "duplicate yaml key, nothing in the environment",
			path:  "dup.yaml",
			env:   map[string]string{},
			files: map[string]string{"dup.yaml": "gitlab_token: x\napi_tokens: y\ngitlab_token: z\n"},
			want:  []string{`config file dup.yaml: invalid YAML at line 3, column 1: mapping key "gitlab_token" already defined at [1:1] (values it would give are not checked)`},
		},
		{
			name:  "a quoted value in a yaml error is not shown",
			path:  "q.yaml",
			env:   validEnv(),
			files: map[string]string{"q.yaml": "settings:\n  \"" + secretCallback + "\": 1\n  \"" + secretCallback + "\": 2\n"},
			want:  []string{`config file q.yaml: invalid YAML at line 3, column 3: mapping key "…" already defined`},
		},
		{
			// Unknown keys, bad settings and the other problems, all at once.
			name: "unknown key with bad settings and a bad value",
			path: "unknown.yaml",
			env:  without(validEnv(), "CHANGEBOT_API_TOKENS"),
			files: map[string]string{"unknown.yaml": "listen_port: 8080\nworkerz: 2\nlog_level: loud\n" +
				"settings:\n  poll.short_interval: banana\n  no.such_setting: 1\n"},
			want: []string{
				`config file key "listen_port": unknown key (did you mean "listen"?)`,
				`config file key "workerz": unknown key (did you mean "workers"?)`,
				"CHANGEBOT_API_TOKENS (api_tokens): at least one is required",
				`CHANGEBOT_LOG_LEVEL (log_level): "loud" is not debug, info, warn or error`,
				`config file key "settings": unknown setting "no.such_setting"`,
				`config file key "settings": invalid value for poll.short_interval`,
			},
		},
		{
			name: "yaml values of the wrong shape",
			path: "testdata/wrong_shapes.yaml",
			env:  validEnv(),
			want: []string{
				`config file key "listen": want a single value`,
				`config file key "settings": want a map of setting keys to values`,
				`config file key "webhook_secrets": want a list or a comma-separated string`,
				`config file key "workers": "many" is not a whole number`,
			},
		},
		{
			name: "missing config file",
			path: "/etc/changebot/missing.yaml",
			env:  validEnv(),
			want: []string{"reading config file: open /etc/changebot/missing.yaml: file does not exist"},
		},
		{
			name: "database url with an unescaped special character in the password",
			env:  with(validEnv(), "DATABASE_URL", "postgres://u:"+secretDBPassword+"#x@db/x"),
			want: []string{"DATABASE_URL (database_url): is not a postgres:// URL or a key=value connection string"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tt.path, tt.env, tt.files)
			got := problemsOf(t, err)
			if len(got) != len(tt.want) {
				t.Errorf("got %d problems, want %d:\n%v", len(got), len(tt.want), err)
			}
			for i := range min(len(got), len(tt.want)) {
				if !strings.Contains(got[i], tt.want[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i+1, got[i], tt.want[i])
				}
			}
			if err != nil {
				if !strings.HasPrefix(err.Error(), fmt.Sprintf("invalid configuration (%d problem", len(got))) ||
					strings.Count(err.Error(), "\n  - ") != len(got) {
					t.Errorf("Error() does not list each problem on its own line:\n%s", err)
				}
				assertNoSecret(t, "error", err.Error())
			}
		})
	}
}

func TestConfigNeverPrintsSecrets(t *testing.T) {
	t.Parallel()
	c, err := load(t, "", with(validEnv(), "CHANGEBOT_APPROVAL_URL", "https://bot:"+secretCallback+"@approvals.example"), nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("config", "config", c)
	slog.New(slog.NewJSONHandler(&js, nil)).Info("config", slog.Any("config", c), slog.Any("token", c.APITokens[0]))
	outputs := map[string]string{
		"text log":   text.String(),
		"json log":   js.String(),
		"String":     c.String(),
		"%v":         fmt.Sprintf("%v", c),
		"%+v":        fmt.Sprintf("%+v", c),
		"%#v":        fmt.Sprintf("%#v", c),
		"%v pointer": fmt.Sprintf("%v", &c),
		"api tokens": fmt.Sprintf("%v %+v %#v", c.APITokens, c.APITokens, c.APITokens),
	}
	for what, out := range outputs {
		assertNoSecret(t, what, out)
	}
	for _, want := range []string{
		"postgres://changebot:xxxxx@127.0.0.1:5432/changebot?sslmode=disable",
		"gitlab_token=[REDACTED]",
		"reviewer_tokens=\"[[REDACTED] [REDACTED]]\"",
		"api_tokens=\"[submitter:[REDACTED] operator:[REDACTED]]\"",
		"approval_url=https://bot:xxxxx@approvals.example",
		"workers=20",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text log lacks %q:\n%s", want, text.String())
		}
	}
}

func TestRedactedDatabaseURL(t *testing.T) {
	t.Parallel()
	p := secretDBPassword
	tests := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"no password", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"},
		{"user info password", "postgres://u:" + p + "@db:5432/x", "postgres://u:xxxxx@db:5432/x"},
		{"query password", "postgresql://db/x?user=u&password=" + p + "&sslmode=require", "postgresql://db/x?password=xxxxx&sslmode=require&user=u"},
		{"key value", "host=db user=u password=" + p + " dbname=x", "host=db user=u password=xxxxx dbname=x"},
		{"key value quoted", "host=db password='" + p + " two' dbname=x", "host=db password=xxxxx dbname=x"},
		{"unescaped hash", "postgres://u:" + p + "#1@db/x", "[REDACTED]"},
		{"unescaped slash", "postgres://u:1/" + p + "@db/x", "[REDACTED]"},
		{"unescaped question mark", "postgres://u:1?" + p + "@db/x", "[REDACTED]"},
		{"unparseable", "postgres://u:" + p + "@db:port/x", "[REDACTED]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Config{DatabaseURL: tt.in}.RedactedDatabaseURL()
			if got != tt.want {
				t.Errorf("RedactedDatabaseURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
			assertNoSecret(t, "redacted URL", got)
		})
	}
}

func TestConfigReference(t *testing.T) {
	t.Parallel()
	ref := Reference()
	if n := reflect.TypeFor[Config]().NumField(); len(ref) != n {
		t.Errorf("Reference has %d entries, Config has %d fields", len(ref), n)
	}
	seen := map[string]bool{}
	for _, v := range ref {
		if v.YAML == "" || v.Description == "" {
			t.Errorf("%+v: every input needs a YAML key and a description", v)
		}
		for _, k := range []string{v.Env, v.YAML} {
			if k != "" && seen[k] {
				t.Errorf("%q appears twice", k)
			}
			seen[k] = true
		}
	}
	secrets := map[string]bool{}
	for _, v := range ref {
		if v.Secret {
			secrets[v.Env] = true
		}
	}
	for _, env := range []string{"DATABASE_URL", "CHANGEBOT_GITLAB_TOKEN", "CHANGEBOT_REVIEWER_TOKENS",
		"CHANGEBOT_WEBHOOK_SECRETS", "CHANGEBOT_CALLBACK_SECRET", "CHANGEBOT_API_TOKENS"} {
		if !secrets[env] {
			t.Errorf("%s must be marked secret", env)
		}
	}
}

// TestDeployExampleConfig keeps deploy/changebot.example.yaml loadable: it
// holds no secrets, so they come from the environment.
func TestDeployExampleConfig(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "deploy", "changebot.example.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("example config: %v", err)
	}
	c, err := load(t, "../deploy/changebot.example.yaml", validEnv(), nil)
	if err != nil {
		t.Fatalf("Load(example): %v", err)
	}
	if len(c.Settings) == 0 {
		t.Error("the example should show initial settings")
	}
}

// TestConfigLogsDurationsAsText: serve's first log line (JSON) shows the
// shutdown durations as a person writes them ("20s"), not nanoseconds.
func TestConfigLogsDurationsAsText(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	slog.New(slog.NewJSONHandler(&b, nil)).Info("starting changebot", "config", Config{ShutdownGrace: 20 * time.Second, ShutdownDelay: 10 * time.Second})
	for _, want := range []string{`"shutdown_grace":"20s"`, `"shutdown_delay":"10s"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("log line %s: want %s", b.String(), want)
		}
	}
}

func TestDeployExampleSettingsValidate(t *testing.T) {
	t.Parallel()
	c, err := load(t, "../deploy/changebot.example.yaml", validEnv(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := settings.ValidateInitial(c.Settings); err != nil {
		t.Errorf("deploy/changebot.example.yaml settings: %v", err)
	}
}
