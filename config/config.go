// Package config owns changebot's start-up configuration: the one Config,
// loaded from an optional YAML file and the environment (secrets also from
// files) by Load, defaulted, and validated with every problem reported at
// once; LoadDatabase for the commands that need only the database; the
// table every configuration input is documented from (Reference); and what
// a DATABASE_URL names (ParseDatabaseTarget) and how it is printed without
// its password. It opens nothing and imports no database driver, platform
// client or HTTP server: bot, cli, ops and demo open what it describes.
package config

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"changebot/api"
	"changebot/notify"
	"changebot/settings"
)

// Platform names (CHANGEBOT_PLATFORM), equal to store.PlatformGitLab and
// store.PlatformGitHub.
const (
	PlatformGitLab = "gitlab"
	PlatformGitHub = "github"
)

// redacted replaces every secret value in String, GoString and LogValue.
const redacted = "[REDACTED]"

// Config is the bot's validated start-up configuration (STYLE rule 28). It is
// loaded by Load from an optional YAML file and the environment; each
// field's environment variable, YAML key and default are listed by
// Reference. Fields marked secret never appear whole in String,
// GoString, LogValue or any error.
type Config struct {
	// Listen is the HTTP listen address, host:port (":8080").
	Listen string
	// DatabaseURL names the database: a PostgreSQL connection string (URL
	// or key=value form) or sqlite://<path> for a SQLite file (three
	// slashes for an absolute path). Empty means DataDir's changebot.db
	// (see ResolvedDatabaseURL). It may hold a password: print
	// RedactedDatabaseURL instead.
	DatabaseURL string
	// DataDir is the directory of the default SQLite file changebot.db,
	// used when DATABASE_URL is empty; empty means the working directory.
	DataDir string
	// Platform is where the repositories live: PlatformGitLab (the
	// default) or PlatformGitHub. One installation serves one platform
	// (flows.EngineConfig.Platform); its webhook endpoint is
	// /webhooks/gitlab or /webhooks/github.
	Platform string
	// GitLabURL is GitLab's base URL without "/api/v4" and without a
	// trailing slash (Load strips both); see GitLabAPIURL.
	GitLabURL string
	// GitLabToken is the token of the robot account that authors branches,
	// commits, merge requests and the status comment. Secret.
	GitLabToken string
	// GitHubURL is GitHub's REST API root: "" means https://api.github.com/,
	// GitHub Enterprise Server "https://ghe.example.com/api/v3".
	GitHubURL string
	// GitHubToken is the robot account's token on GitHub (a personal
	// access token, classic or fine-grained); exclusive with the App
	// fields. Secret.
	GitHubToken string
	// GitHubAppID, GitHubAppPrivateKey and GitHubInstallationID
	// authenticate as a GitHub App installation instead of GitHubToken
	// (installation tokens renewed before their one-hour expiry). The key
	// is the PEM GitHub downloads; secret, usually given as a _FILE.
	GitHubAppID          int64
	GitHubAppPrivateKey  string
	GitHubInstallationID int64
	// ReviewerTokens are the tokens of the reviewer robots, each of which
	// approves separately (DESIGN §5). Secret.
	ReviewerTokens []string
	// WebhookSecrets are the accepted X-Gitlab-Token values, or on GitHub
	// the webhook secrets X-Hub-Signature-256 is checked with; several
	// allow rotation. At least one is required. Secret.
	WebhookSecrets []string
	// CallbackSecret is the HMAC-SHA256 key of X-Changebot-Signature on
	// approval and deploy callbacks. Secret.
	CallbackSecret string
	// APITokens are the REST API bearer tokens with their roles. Secret.
	APITokens []api.Token
	// ApprovalURL is the external approval system's base URL; the bot calls
	// POST {ApprovalURL}/approvals. Required unless the initial setting
	// approval.provider is "gitlab". No trailing slash.
	ApprovalURL string
	// ExternalURL is the bot's public base URL, used to build callback_url
	// and status links. No trailing slash.
	ExternalURL string
	// Operators are GitLab usernames that hold the operator role in MR
	// comments.
	Operators []string
	// BotUsers are other bot accounts whose notes are ignored (the robot and
	// the reviewer robots are always ignored).
	BotUsers []string
	// AdoptProjects are the projects ("group/repo", "owner/name") where
	// developers' merge requests may be adopted (issue 25 point 1); empty:
	// nowhere.
	AdoptProjects []string
	// AdoptLabel is the label that opts a merge request in.
	AdoptLabel string
	// LogLevel is one of debug, info, warn, error.
	LogLevel string
	// LogFormat is text or json.
	LogFormat string
	// Workers is how many jobs one replica runs at once in each of the
	// step and webhook delivery queues; status comment refreshes get
	// half of it (noteWorkers).
	Workers int
	// MaxBodyBytes bounds every request body (webhooks, callbacks, API).
	MaxBodyBytes int64
	// ShutdownGrace is how long serve drains in-flight work after SIGTERM.
	ShutdownGrace time.Duration
	// ShutdownDelay is how long serve, after SIGTERM, keeps accepting
	// requests while /readyz answers 503, before the drain starts (0: none).
	ShutdownDelay time.Duration
	// WebSessionTTL is how long a web session lasts after its login
	// (api.Config.SessionTTL), from api.MinSessionTTL to api.MaxSessionTTL.
	WebSessionTTL time.Duration
	// AutoMigrate makes serve and demo apply database migrations at start.
	AutoMigrate bool
	// Settings are initial runtime settings (issue 4 point 9), key to value
	// as written in the config file's "settings:" map. The settings package
	// validates keys and values; Config only checks they are non-empty keys.
	Settings map[string]string
	// Notifications are the notification destinations of the config
	// file's "notifications:" list (issue 25 point 3), with their secrets
	// read (secret or secret_env); nil sends none. Secret: printed by
	// name, kind and host only.
	Notifications []notify.Destination
}

// Var describes one configuration input: its environment variable (""
// when it has none), its key in the YAML file, its default as it would be
// written in either ("" when there is none), whether it is secret (never
// printed; may also be given as Env+"_FILE", whose content is trimmed) and
// what it means. Reference lists them; the README table is generated
// from that list.
type Var struct {
	Env         string
	YAML        string
	Default     string
	Secret      bool
	Description string
}

// Error is the error Load and Config.Validate return: every
// problem found, one per line, none quoting a secret value.
type Error struct {
	Problems []string
}

// Error lists every problem on its own line.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid configuration (%d problem", len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	b.WriteString("):")
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p)
	}
	return b.String()
}

// problems collects configuration problems in the order they are found.
type problems []string

func (p *problems) addf(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return &Error{Problems: slices.Clone(p)}
}

// configField is one row of the configuration table: its documentation and
// how a textual value is applied to a Config. Exactly one of set and setList
// is non-nil. set may return an error quoting the value only for fields that
// are not secret.
type configField struct {
	Var
	set     func(c *Config, v string) error
	setList func(c *Config, v []string)
}

// configFields is the single table behind Load, Default and
// Reference, in the order the README shows them.
var configFields = []configField{
	{Var: Var{Env: "CHANGEBOT_LISTEN", YAML: "listen", Default: ":8080",
		Description: "HTTP listen address, host:port."},
		set: func(c *Config, v string) error { c.Listen = v; return nil }},
	{Var: Var{Env: "DATABASE_URL", YAML: "database_url", Secret: true,
		Description: "The database: a PostgreSQL connection string (URL or key=value), needed for several replicas, or sqlite:///path/changebot.db for a SQLite file (one replica). Empty: changebot.db in CHANGEBOT_DATA_DIR. Printed with its password removed."},
		set: func(c *Config, v string) error { c.DatabaseURL = v; return nil }},
	{Var: Var{Env: "CHANGEBOT_DATA_DIR", YAML: "data_dir",
		Description: "Directory of the SQLite file changebot.db used when DATABASE_URL is empty (created if missing). Empty: the working directory."},
		set: func(c *Config, v string) error { c.DataDir = v; return nil }},
	{Var: Var{Env: "CHANGEBOT_PLATFORM", YAML: "platform", Default: PlatformGitLab,
		Description: "Where the repositories live: gitlab or github. One installation serves one platform; its webhook endpoint is /webhooks/gitlab or /webhooks/github."},
		set: func(c *Config, v string) error { c.Platform = strings.ToLower(v); return nil }},
	{Var: Var{Env: "CHANGEBOT_GITLAB_URL", YAML: "gitlab_url",
		Description: "GitLab base URL, http or https, with or without /api/v4. Required on GitLab."},
		set: func(c *Config, v string) error { c.GitLabURL = trimGitLabURL(v); return nil }},
	{Var: Var{Env: "CHANGEBOT_GITLAB_TOKEN", YAML: "gitlab_token", Secret: true,
		Description: "Token of the robot account that authors branches, commits, merge requests and the status comment. Required on GitLab."},
		set: func(c *Config, v string) error { c.GitLabToken = v; return nil }},
	{Var: Var{Env: "CHANGEBOT_GITHUB_URL", YAML: "github_url",
		Description: "GitHub REST API root on GitHub: empty for github.com, https://ghe.example.com/api/v3 for GitHub Enterprise Server."},
		set: func(c *Config, v string) error { c.GitHubURL = strings.TrimRight(v, "/"); return nil }},
	{Var: Var{Env: "CHANGEBOT_GITHUB_TOKEN", YAML: "github_token", Secret: true,
		Description: "On GitHub: token of the robot account that authors branches, commits, pull requests and the status comment. Either this or the three GitHub App settings."},
		set: func(c *Config, v string) error { c.GitHubToken = v; return nil }},
	{Var: Var{Env: "CHANGEBOT_GITHUB_APP_ID", YAML: "github_app_id",
		Description: "On GitHub, instead of a token: the GitHub App's numeric id."},
		set: func(c *Config, v string) error { return setPositiveID(&c.GitHubAppID, v) }},
	{Var: Var{Env: "CHANGEBOT_GITHUB_APP_PRIVATE_KEY", YAML: "github_app_private_key", Secret: true,
		Description: "The GitHub App's private key (PEM as GitHub downloads it), usually given as CHANGEBOT_GITHUB_APP_PRIVATE_KEY_FILE. A key on one line with its newlines written \\n, as many secret stores keep it, is accepted."},
		set: func(c *Config, v string) error { c.GitHubAppPrivateKey = unescapePEM(v); return nil }},
	{Var: Var{Env: "CHANGEBOT_GITHUB_INSTALLATION_ID", YAML: "github_installation_id",
		Description: "The GitHub App's installation id on the account that owns the repositories."},
		set: func(c *Config, v string) error { return setPositiveID(&c.GitHubInstallationID, v) }},
	{Var: Var{Env: "CHANGEBOT_REVIEWER_TOKENS", YAML: "reviewer_tokens", Secret: true,
		Description: "Tokens of the reviewer robots on the platform, comma-separated (in a _FILE also one per line). Each approves separately; none may be the robot's own token (on GitHub an App cannot approve the pull requests it opened either)."},
		setList: func(c *Config, v []string) { c.ReviewerTokens = v }},
	{Var: Var{Env: "CHANGEBOT_WEBHOOK_SECRETS", YAML: "webhook_secrets", Secret: true,
		Description: "Accepted X-Gitlab-Token values, or on GitHub the webhook secrets X-Hub-Signature-256 is checked with; comma-separated (several allow rotation). At least one is required: the bot refuses to start without one."},
		setList: func(c *Config, v []string) { c.WebhookSecrets = v }},
	{Var: Var{Env: "CHANGEBOT_CALLBACK_SECRET", YAML: "callback_secret", Secret: true,
		Description: "HMAC-SHA256 key of X-Changebot-Signature (over X-Changebot-Timestamp and the body) on approval and deploy callbacks. Required."},
		set: func(c *Config, v string) error { c.CallbackSecret = v; return nil }},
	{Var: Var{Env: "CHANGEBOT_API_TOKENS", YAML: "api_tokens", Secret: true,
		Description: "REST API bearer tokens, comma-separated role:token with role submitter, operator or viewer (read-only: GET endpoints and the web pages). At least one is required."},
		setList: func(c *Config, v []string) { c.APITokens = parseAPITokens(v) }},
	{Var: Var{Env: "CHANGEBOT_APPROVAL_URL", YAML: "approval_url",
		Description: "Base URL of the external approval system (the bot calls POST {url}/approvals). Required unless the setting approval.provider is gitlab."},
		set: func(c *Config, v string) error { c.ApprovalURL = strings.TrimRight(v, "/"); return nil }},
	{Var: Var{Env: "CHANGEBOT_EXTERNAL_URL", YAML: "external_url",
		Description: "The bot's public base URL, used for callback_url and links. Required."},
		set: func(c *Config, v string) error { c.ExternalURL = strings.TrimRight(v, "/"); return nil }},
	{Var: Var{Env: "CHANGEBOT_OPERATORS", YAML: "operators",
		Description: "Usernames with the operator role in MR comments, comma-separated: GitLab usernames, or GitHub logins with CHANGEBOT_PLATFORM=github."},
		setList: func(c *Config, v []string) { c.Operators = trimAt(v) }},
	{Var: Var{Env: "CHANGEBOT_BOT_USERS", YAML: "bot_users",
		Description: "Other bot accounts whose notes are ignored, comma-separated (the robot and the reviewer robots are always ignored)."},
		setList: func(c *Config, v []string) { c.BotUsers = trimAt(v) }},
	{Var: Var{Env: "CHANGEBOT_ADOPT_PROJECTS", YAML: "adopt_projects",
		Description: "Projects where changebot adopts merge requests that developers open, comma-separated paths (group/repo, or owner/name on GitHub). A merge request there opts in by the label CHANGEBOT_ADOPT_LABEL or a `@<robot> merge` comment from someone with write access. Empty: nowhere (docs/adoption.md)."},
		setList: func(c *Config, v []string) { c.AdoptProjects = v }},
	{Var: Var{Env: "CHANGEBOT_ADOPT_LABEL", YAML: "adopt_label", Default: "changebot",
		Description: "The label that opts a developer's merge request in, in the projects of CHANGEBOT_ADOPT_PROJECTS; removing it lets the change go without closing the merge request."},
		set: func(c *Config, v string) error { c.AdoptLabel = v; return nil }},
	{Var: Var{Env: "CHANGEBOT_LOG_LEVEL", YAML: "log_level", Default: "info",
		Description: "Log level: debug, info, warn or error."},
		set: func(c *Config, v string) error { c.LogLevel = strings.ToLower(v); return nil }},
	{Var: Var{Env: "CHANGEBOT_LOG_FORMAT", YAML: "log_format", Default: "json",
		Description: "Log format: text or json."},
		set: func(c *Config, v string) error { c.LogFormat = strings.ToLower(v); return nil }},
	{Var: Var{Env: "CHANGEBOT_WORKERS", YAML: "workers", Default: "20",
		Description: "Jobs one replica runs at once: up to this many step jobs and as many webhook deliveries, and half of it (at least 2) of status comment refreshes."},
		set: setWorkers},
	{Var: Var{Env: "CHANGEBOT_MAX_BODY_BYTES", YAML: "max_body_bytes", Default: "5MiB",
		Description: "Largest accepted request body, in bytes or with a KiB, MiB or GiB suffix."},
		set: setMaxBodyBytes},
	{Var: Var{Env: "CHANGEBOT_SHUTDOWN_GRACE", YAML: "shutdown_grace", Default: "20s",
		Description: "How long serve drains in-flight requests and jobs after SIGTERM (a Go duration such as 20s)."},
		set: setShutdownGrace},
	{Var: Var{Env: "CHANGEBOT_SHUTDOWN_DELAY", YAML: "shutdown_delay", Default: "10s",
		Description: "After SIGTERM, how long serve keeps accepting webhooks and API calls while /readyz answers 503, so load balancers stop sending to it before intake stops; then the shutdown grace starts. 0 stops at once."},
		set: setShutdownDelay},
	{Var: Var{Env: "CHANGEBOT_WEB_SESSION_TTL", YAML: "web_session_ttl", Default: "12h",
		Description: "How long a web page session lasts after its login (a Go duration, from 1m to 168h); /ui/logout ends it sooner on every replica."},
		set: setWebSessionTTL},
	{Var: Var{Env: "CHANGEBOT_AUTO_MIGRATE", YAML: "auto_migrate", Default: "false",
		Description: "Apply database migrations when serve or demo starts (otherwise run changebot migrate)."},
		set: setAutoMigrate},
}

// settingsVar documents the YAML-only "settings:" map.
var settingsVar = Var{YAML: "settings",
	Description: "Initial values of runtime settings (key: value, e.g. flow.approval_first: true), used until an operator changes them."}

// Reference lists every configuration input in README order: one
// entry per Config field, then the YAML-only settings map and
// notifications list.
func Reference() []Var {
	ref := make([]Var, 0, len(configFields)+2)
	for _, f := range configFields {
		ref = append(ref, f.Var)
	}
	return append(ref, settingsVar, notificationsVar)
}

// Default returns a Config holding only the defaults of
// Reference. It does not pass Validate on its own.
func Default() Config {
	var c Config
	for _, f := range configFields {
		if f.Default == "" {
			continue
		}
		if err := f.set(&c, f.Default); err != nil {
			panic(fmt.Sprintf("bot: default of %s does not parse: %v", f.Env, err))
		}
	}
	return c
}

// Load builds the Config from, in increasing precedence: the YAML file
// at path (skipped when path is ""; strict: an unknown key is an error), the
// environment read through getenv (an empty variable counts as unset), and
// the files named by the *_FILE variables of secrets (their content is
// trimmed; setting both X and X_FILE is an error). Defaults fill what none of
// them set. It then validates the result and returns every problem at once
// as a *Error; no problem quotes a secret. A nil getenv or readFile
// means os.Getenv or os.ReadFile.
func Load(path string, getenv func(string) string, readFile func(string) ([]byte, error)) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if readFile == nil {
		readFile = os.ReadFile
	}
	c := Default()
	var ps problems
	fileRead := true
	if path != "" {
		fileRead = loadConfigFile(&c, path, readFile, &ps)
	}
	failed := make(map[string]bool) // labels whose secret source failed
	for _, f := range configFields {
		if !loadConfigEnv(&c, f, getenv, readFile, &ps) {
			failed[configLabel(f.Env)] = true
		}
	}
	resolveNotificationSecrets(&c, getenv, &ps)
	if err := c.Validate(); err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			for _, p := range ce.Problems {
				label, _, _ := strings.Cut(p, ":")
				// "is required" would only repeat the cause: a secret
				// source that failed, or a file that did not parse (it may
				// well hold the value).
				if !failed[label] && (fileRead || !isMissingProblem(p)) {
					ps = append(ps, p)
				}
			}
		}
	}
	return c, ps.err()
}

// isMissingProblem reports whether p is Validate's "is required" or "at
// least one is required" of a value none of the sources gave.
func isMissingProblem(p string) bool {
	return strings.Contains(p, ": is required") || strings.Contains(p, ": at least one is required")
}

// ResolvedDatabaseURL is DatabaseURL, or when it is empty the SQLite file
// changebot.db in DataDir as an absolute sqlite:// URL (issue 11: one
// binary that works out of the box, on one machine).
func (c Config) ResolvedDatabaseURL() string {
	if c.DatabaseURL == "" {
		return DefaultDatabaseURL(c.DataDir)
	}
	return c.DatabaseURL
}

// DatabaseNote describes the database for serve's first log line, saying
// when it is the default file because DATABASE_URL is empty.
func (c Config) DatabaseNote() string {
	t, err := ParseDatabaseTarget(c.ResolvedDatabaseURL())
	switch {
	case err != nil:
		return "invalid DATABASE_URL"
	case c.DatabaseURL == "":
		return "sqlite " + t.Path + " (DATABASE_URL is empty: changebot.db in CHANGEBOT_DATA_DIR; one replica only, several need PostgreSQL)"
	case t.Engine == EngineSQLite:
		return "sqlite " + t.Path + " (one replica only, several need PostgreSQL)"
	}
	return "postgres " + c.RedactedDatabaseURL()
}

// errDatabaseURLRequired is the whole error of the database-only
// subcommands when no database URL is configured.
var errDatabaseURLRequired = errors.New("DATABASE_URL is required")

// LoadDatabase is Load for the subcommands that need only the
// database (migrate, settings, history, replay, verify): it returns the
// Config with DatabaseURL (from DATABASE_URL, DATABASE_URL_FILE or the YAML
// file's database_url) and the file's other values, and reports only the
// problems that concern the database URL: the file unreadable or not YAML
// (unless the environment gives the URL), a bad database_url value, both
// DATABASE_URL and DATABASE_URL_FILE set, a URL that is not a connection
// string, and errDatabaseURLRequired when there is none. The rest of the
// configuration, which serve needs, is not checked. A nil getenv or
// readFile means os.Getenv or os.ReadFile.
func LoadDatabase(path string, getenv func(string) string, readFile func(string) ([]byte, error)) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if readFile == nil {
		readFile = os.ReadFile
	}
	c := Default()
	var fileProblems, ps problems
	if path != "" {
		loadConfigFile(&c, path, readFile, &fileProblems)
	}
	for _, f := range configFields {
		if (f.Env == "DATABASE_URL" || f.Env == "CHANGEBOT_DATA_DIR") && !loadConfigEnv(&c, f, getenv, readFile, &ps) {
			return c, ps.err()
		}
	}

	if getenv("DATABASE_URL") == "" && getenv("DATABASE_URL_FILE") == "" {
		ownKey := fmt.Sprintf("config file key %q", "database_url")
		for _, p := range fileProblems {
			// Problems of other keys start with their "config file key" label.
			if !strings.HasPrefix(p, "config file key ") || strings.HasPrefix(p, ownKey) {
				ps = append(ps, p)
			}
		}
	}
	switch {
	case c.DatabaseURL == "" && len(ps) > 0:
		// A broken file may hold the URL: no silent default then.
		ps.addf("%s", errDatabaseURLRequired)
	case c.DatabaseURL != "" && !validDatabaseURL(c.DatabaseURL):
		ps.addf("%s: is not a postgres:// URL or a key=value connection string or a sqlite:// file (percent-encode special characters in the password)", configLabel("DATABASE_URL"))
	}
	return c, ps.err()
}

// loadConfigFile applies the YAML file at path to c. It reports false when
// the file could not be read or is not YAML (one problem saying why; the
// values it holds are then unknown).
func loadConfigFile(c *Config, path string, readFile func(string) ([]byte, error), ps *problems) bool {
	data, err := readFile(path)
	if err != nil {
		ps.addf("reading config file: %v (values it would give are not checked)", err)
		return false
	}
	var doc map[string]any
	if err := yaml.UnmarshalWithOptions(data, &doc); err != nil {
		ps.addf("config file %s: %s (values it would give are not checked)", path, describeYAMLError(err))
		return false
	}
	byKey := make(map[string]configField, len(configFields))
	for _, f := range configFields {
		byKey[f.YAML] = f
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		label := fmt.Sprintf("config file key %q", k)
		if k == settingsVar.YAML {
			c.Settings = yamlSettings(doc[k], label, ps)
			continue
		}
		if k == notificationsVar.YAML {
			c.Notifications = yamlNotifications(doc[k], label, ps)
			continue
		}
		f, ok := byKey[k]
		if !ok {
			if near := nearestConfigKey(k); near != "" {
				ps.addf("%s: unknown key (did you mean %q?)", label, near)
			} else {
				ps.addf("%s: unknown key", label)
			}
			continue
		}
		applyYAMLValue(c, f, doc[k], label, ps)
	}
	return true
}

// nearestConfigKey returns the configuration key an unknown key k most
// likely misspells: one that k extends with "_…" (listen_port: listen), or
// one at most two edits away (workerz: workers); "" when none is.
func nearestConfigKey(k string) string {
	best, bestDist := "", 3
	for _, f := range append(slices.Clone(configFields), configField{Var: settingsVar}, configField{Var: notificationsVar}) {
		if strings.HasPrefix(k, f.YAML+"_") {
			return f.YAML
		}
		if d := editDistance(k, f.YAML); d < bestDist {
			best, bestDist = f.YAML, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// applyYAMLValue applies one decoded YAML value; null leaves the field as it is.
func applyYAMLValue(c *Config, f configField, v any, label string, ps *problems) {
	if v == nil {
		return
	}
	if f.setList != nil {
		switch v := v.(type) {
		case []any:
			list := make([]string, 0, len(v))
			for i, e := range v {
				s, ok := yamlScalar(e)
				if !ok {
					ps.addf("%s: entry %d is not a single value", label, i+1)
					return
				}
				list = append(list, strings.TrimSpace(s))
			}
			f.setList(c, list)
		case string:
			f.setList(c, splitConfigList(v))
		default:
			ps.addf("%s: want a list or a comma-separated string", label)
		}
		return
	}
	s, ok := yamlScalar(v)
	if !ok {
		ps.addf("%s: want a single value", label)
		return
	}
	if err := f.set(c, strings.TrimSpace(s)); err != nil {
		ps.addf("%s: %v", label, err)
	}
}

// yamlSettings converts the "settings:" map to strings.
func yamlSettings(v any, label string, ps *problems) map[string]string {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		ps.addf("%s: want a map of setting keys to values", label)
		return nil
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, ok := yamlScalar(e)
		if !ok {
			ps.addf("%s: value of %q is not a single value", label, k)
			continue
		}
		out[k] = s
	}
	return out
}

// yamlScalar formats a decoded YAML scalar; maps, lists and null are not scalars.
func yamlScalar(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case bool, int, int64, uint64, float64:
		return fmt.Sprint(v), true
	default:
		return "", false
	}
}

// describeYAMLError explains a YAML decoding error by position and reason
// without the source text: the reason is the parser's message ("mapping key
// \"listen\" already defined at [1:1]", "could not find end character of
// single-quoted text"), in which a quoted word that is not a configuration
// or setting key is replaced by "…", since a value may be a secret.
func describeYAMLError(err error) string {
	var se *yaml.SyntaxError
	if errors.As(err, &se) {
		reason := ""
		if m := strings.TrimSpace(se.Message); m != "" {
			reason = ": " + quotedYAMLText.ReplaceAllStringFunc(m, keepKnownKey)
		}
		if se.Token != nil {
			return fmt.Sprintf("invalid YAML at line %d, column %d%s", se.Token.Position.Line, se.Token.Position.Column, reason)
		}
		return "invalid YAML" + reason
	}
	var ye yaml.Error
	if errors.As(err, &ye) {
		return yaml.FormatError(err, false, false)
	}
	return "invalid YAML"
}

// loadConfigEnv applies the environment variable of f, or for secrets the
// file named by its _FILE variable. It reports false when the secret's
// source could not be used (both set, unreadable or empty file).
func loadConfigEnv(c *Config, f configField, getenv func(string) string, readFile func(string) ([]byte, error), ps *problems) bool {
	val, label := getenv(f.Env), f.Env
	if f.Secret {
		if file := getenv(f.Env + "_FILE"); file != "" {
			if val != "" {
				ps.addf("%s and %s_FILE are both set: set only one", f.Env, f.Env)
				return false
			}
			data, err := readFile(file)
			if err != nil {
				ps.addf("%s_FILE: reading secret file: %v", f.Env, err)
				return false
			}
			val, label = strings.TrimSpace(string(data)), f.Env+"_FILE"
			if val == "" {
				ps.addf("%s_FILE: file %s is empty", f.Env, file)
				return false
			}
		}
	}
	if val == "" {
		return true
	}
	if f.setList != nil {
		f.setList(c, splitConfigList(val))
		return true
	}
	if err := f.set(c, strings.TrimSpace(val)); err != nil {
		ps.addf("%s: %v", label, err)
	}
	return true
}

// splitConfigList splits a list value on commas and newlines, trimming each
// entry. Empty entries are kept so that Validate can report them.
func splitConfigList(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' })
	var out []string
	for _, line := range parts {
		for e := range strings.SplitSeq(line, ",") {
			out = append(out, strings.TrimSpace(e))
		}
	}
	return out
}

// parseAPITokens splits each "role:token" entry at its first colon. Entries
// without a colon get an empty role, which Validate reports.
func parseAPITokens(entries []string) []api.Token {
	out := make([]api.Token, 0, len(entries))
	for _, e := range entries {
		role, token, ok := strings.Cut(e, ":")
		if !ok {
			out = append(out, api.Token{Token: e})
			continue
		}
		out = append(out, api.Token{Role: strings.ToLower(strings.TrimSpace(role)), Token: strings.TrimSpace(token)})
	}
	return out
}

func trimAt(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.TrimPrefix(n, "@")
	}
	return out
}

// trimGitLabURL removes a trailing slash and "/api/v4".
func trimGitLabURL(s string) string {
	s = strings.TrimRight(s, "/")
	return strings.TrimRight(strings.TrimSuffix(s, "/api/v4"), "/")
}

func setWorkers(c *Config, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", v)
	}
	c.Workers = n
	return nil
}

func setMaxBodyBytes(c *Config, v string) error {
	n, err := parseByteSize(v)
	if err != nil {
		return err
	}
	c.MaxBodyBytes = n
	return nil
}

func setShutdownGrace(c *Config, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 20s or 1m", v)
	}
	c.ShutdownGrace = d
	return nil
}

func setShutdownDelay(c *Config, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 10s", v)
	}
	c.ShutdownDelay = d
	return nil
}

func setWebSessionTTL(c *Config, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 12h", v)
	}
	c.WebSessionTTL = d
	return nil
}

func setAutoMigrate(c *Config, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	c.AutoMigrate = b
	return nil
}

// parseByteSize parses "5242880", "512KiB", "5MiB" or "1GiB".
func parseByteSize(v string) (int64, error) {
	mult := int64(1)
	num := v
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(v, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(v, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size such as 5242880 or 5MiB", v)
	}
	return n * mult, nil
}

// quotedYAMLText is a double- or single-quoted word of a YAML parser message.
var quotedYAMLText = regexp.MustCompile(`"[^"]*"|'[^']*'`)

// keepKnownKey returns q, a quoted word of a YAML parser message, when it
// names a configuration key or a setting (names, never secrets), and "…"
// otherwise; a quoted character such as ']' or '@' is kept too.
func keepKnownKey(q string) string {
	w := q[1 : len(q)-1]
	if len([]rune(w)) <= 1 || w == settingsVar.YAML || w == notificationsVar.YAML {
		return q
	}
	for _, f := range configFields {
		if f.YAML == w {
			return q
		}
	}
	if _, ok := settings.Lookup(w); ok {
		return q
	}
	return q[:1] + "…" + q[:1]
}

// usernamePattern accepts GitLab usernames, and GitHub's (a subset).
var usernamePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// Validate reports every problem of c at once as a *Error, or nil.
// Messages name the environment variable and YAML key, never a secret value.
func (c Config) Validate() error {
	var ps problems
	c.validateEndpoints(&ps)
	c.validateSecrets(&ps)
	c.validateNotifications(&ps)
	for _, l := range []struct {
		env   string
		names []string
	}{{"CHANGEBOT_OPERATORS", c.Operators}, {"CHANGEBOT_BOT_USERS", c.BotUsers}} {
		for i, n := range l.names {
			switch {
			case n == "":
				ps.addf("%s: entry %d is empty", configLabel(l.env), i+1)
			case !usernamePattern.MatchString(n):
				ps.addf("%s: entry %d %q is not a %s username", configLabel(l.env), i+1, n, PlatformName(c.Platform))
			}
		}
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel) {
		ps.addf("%s: %q is not debug, info, warn or error", configLabel("CHANGEBOT_LOG_LEVEL"), c.LogLevel)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		ps.addf("%s: %q is not text or json", configLabel("CHANGEBOT_LOG_FORMAT"), c.LogFormat)
	}
	if c.Workers < 1 {
		ps.addf("%s: must be at least 1, got %d", configLabel("CHANGEBOT_WORKERS"), c.Workers)
	}
	if c.MaxBodyBytes < 1 {
		ps.addf("%s: must be positive, got %d", configLabel("CHANGEBOT_MAX_BODY_BYTES"), c.MaxBodyBytes)
	}
	if c.ShutdownGrace <= 0 {
		ps.addf("%s: must be positive, got %s", configLabel("CHANGEBOT_SHUTDOWN_GRACE"), c.ShutdownGrace)
	}
	if c.ShutdownDelay < 0 {
		ps.addf("%s: must not be negative, got %s", configLabel("CHANGEBOT_SHUTDOWN_DELAY"), c.ShutdownDelay)
	}
	if c.WebSessionTTL < api.MinSessionTTL || c.WebSessionTTL > api.MaxSessionTTL {
		ps.addf("%s: must be from %s to %s, got %s", configLabel("CHANGEBOT_WEB_SESSION_TTL"), api.MinSessionTTL, api.MaxSessionTTL, c.WebSessionTTL)
	}
	empty := false
	for k := range c.Settings {
		if strings.TrimSpace(k) == "" {
			empty = true
			ps.addf("config file key %q: a setting has an empty key", settingsVar.YAML)
		}
	}
	// The settings are checked here, with the rest, and not only when serve
	// builds its settings cache (after its first log line, the data
	// directory and the database file).
	if err := settings.ValidateInitial(c.Settings); err != nil && !empty {
		for _, e := range leafErrors(err) {
			ps.addf("config file key %q: %v", settingsVar.YAML, e)
		}
	}
	return ps.err()
}

// leafErrors returns the errors err joins (errors.Join, through any
// wrapping fmt.Errorf), or err itself.
func leafErrors(err error) []error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			return j.Unwrap()
		}
	}
	return []error{err}
}

// validateEndpoints checks the listen address, the database and the URLs.
func (c Config) validateEndpoints(ps *problems) {
	if c.Listen == "" {
		ps.addf("%s: is required", configLabel("CHANGEBOT_LISTEN"))
	} else if _, port, err := net.SplitHostPort(c.Listen); err != nil {
		ps.addf("%s: %q is not a host:port address such as :8080", configLabel("CHANGEBOT_LISTEN"), c.Listen)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		ps.addf("%s: %q has no port number between 0 and 65535", configLabel("CHANGEBOT_LISTEN"), c.Listen)
	}
	// Empty DATABASE_URL: the default SQLite file (ResolvedDatabaseURL).
	switch {
	case c.DatabaseURL != "" && !validDatabaseURL(c.DatabaseURL):
		ps.addf("%s: is not a postgres:// URL or a key=value connection string or a sqlite:// file (percent-encode special characters in the password)", configLabel("DATABASE_URL"))
	}
	validateHTTPURL(ps, "CHANGEBOT_GITLAB_URL", c.GitLabURL, c.onGitLab())
	validateHTTPURL(ps, "CHANGEBOT_GITHUB_URL", c.GitHubURL, false)
	validateHTTPURL(ps, "CHANGEBOT_APPROVAL_URL", c.ApprovalURL, c.Settings["approval.provider"] != "gitlab")
	validateHTTPURL(ps, "CHANGEBOT_EXTERNAL_URL", c.ExternalURL, true)
}

// validateSecrets checks the tokens and secrets without ever quoting one.
func (c Config) validateSecrets(ps *problems) {
	switch {
	case c.Platform != PlatformGitLab && c.Platform != PlatformGitHub:
		ps.addf("%s: %q is not gitlab or github", configLabel("CHANGEBOT_PLATFORM"), c.Platform)
	case c.onGitLab() && c.GitLabToken == "":
		ps.addf("%s: is required", configLabel("CHANGEBOT_GITLAB_TOKEN"))
	case !c.onGitLab():
		c.validateGitHubAuth(ps)
	}
	if c.CallbackSecret == "" {
		ps.addf("%s: is required", configLabel("CHANGEBOT_CALLBACK_SECRET"))
	}
	validateSecretList(ps, "CHANGEBOT_REVIEWER_TOKENS", c.ReviewerTokens, false)
	for i, t := range c.ReviewerTokens {
		if t != "" && t == c.GitLabToken && c.onGitLab() {
			ps.addf("%s: entry %d is the robot's own CHANGEBOT_GITLAB_TOKEN (GitLab does not let an author approve)", configLabel("CHANGEBOT_REVIEWER_TOKENS"), i+1)
		}
	}
	validateSecretList(ps, "CHANGEBOT_WEBHOOK_SECRETS", c.WebhookSecrets, true)
	validateAPITokens(ps, c.APITokens)
}

// onGitLab reports whether the installation serves GitLab (Platform).
func (c Config) onGitLab() bool { return c.Platform != PlatformGitHub }

// validateGitHubAuth checks that exactly one of the robot's token and the
// GitHub App's three settings is given, without quoting a secret.
func (c Config) validateGitHubAuth(ps *problems) {
	app := c.GitHubAppID != 0 || c.GitHubAppPrivateKey != "" || c.GitHubInstallationID != 0
	switch {
	case c.GitHubToken != "" && app:
		ps.addf("%s: give either the token or the GitHub App settings, not both", configLabel("CHANGEBOT_GITHUB_TOKEN"))
	case c.GitHubToken == "" && !app:
		ps.addf("%s: is required on GitHub, or CHANGEBOT_GITHUB_APP_ID, CHANGEBOT_GITHUB_APP_PRIVATE_KEY and CHANGEBOT_GITHUB_INSTALLATION_ID", configLabel("CHANGEBOT_GITHUB_TOKEN"))
	case app:
		for _, m := range []struct {
			env     string
			missing bool
		}{{"CHANGEBOT_GITHUB_APP_ID", c.GitHubAppID == 0}, {"CHANGEBOT_GITHUB_APP_PRIVATE_KEY", c.GitHubAppPrivateKey == ""},
			{"CHANGEBOT_GITHUB_INSTALLATION_ID", c.GitHubInstallationID == 0}} {
			if m.missing {
				ps.addf("%s: is required with the other GitHub App settings", configLabel(m.env))
			}
		}
		if c.GitHubAppPrivateKey != "" {
			if err := checkAppPrivateKey(c.GitHubAppPrivateKey); err != nil {
				ps.addf("%s (or its _FILE): %v; want the App's private key as GitHub downloads it (PEM, \"-----BEGIN RSA PRIVATE KEY-----\" "+
					"on a line of its own, real newlines or each written \\n), best as CHANGEBOT_GITHUB_APP_PRIVATE_KEY_FILE", configLabel("CHANGEBOT_GITHUB_APP_PRIVATE_KEY"), err)
			}
		}
	}
	for i, t := range c.ReviewerTokens {
		if t != "" && t == c.GitHubToken {
			ps.addf("%s: entry %d is the robot's own CHANGEBOT_GITHUB_TOKEN (GitHub does not let an author approve)", configLabel("CHANGEBOT_REVIEWER_TOKENS"), i+1)
		}
	}
}

// unescapePEM turns a PEM whose newlines are written as the two characters
// \n (a secret store or an env file keeping it on one line) back into
// lines. It is unambiguous: a PEM's base64 body and its header lines hold
// no backslash, so \n in one can only be an escaped newline. Anything
// without a PEM header is returned as it is.
func unescapePEM(v string) string {
	if !strings.Contains(v, "-----BEGIN") || !strings.Contains(v, `\n`) {
		return v
	}
	return strings.NewReplacer(`\r\n`, "\n", `\n`, "\n").Replace(v)
}

// checkAppPrivateKey says why key is not an RSA private key in PEM (PKCS
// #1, as GitHub downloads it, or PKCS #8), without quoting it: what
// github.AppAuth parses.
func checkAppPrivateKey(key string) error {
	block, _ := pem.Decode([]byte(key))
	if block == nil {
		return errors.New("not PEM (no -----BEGIN … PRIVATE KEY----- block with its own lines found)")
	}
	if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return fmt.Errorf("its PEM block %q does not hold a private key", block.Type)
	}
	if _, ok := k.(*rsa.PrivateKey); !ok {
		return fmt.Errorf("its PEM block holds a %T key, not RSA (GitHub App keys are RSA)", k)
	}
	return nil
}

// setPositiveID parses a GitHub numeric id into dst.
func setPositiveID(dst *int64, v string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("%q is not a positive number", v)
	}
	*dst = n
	return nil
}

// validateAPITokens checks roles, empty entries and duplicate tokens.
func validateAPITokens(ps *problems, tokens []api.Token) {
	label := configLabel("CHANGEBOT_API_TOKENS")
	if len(tokens) == 0 {
		ps.addf("%s: at least one is required", label)
		return
	}
	first := make(map[string]int, len(tokens))
	for i, t := range tokens {
		switch {
		case t.Role == "" && t.Token == "":
			ps.addf("%s: entry %d is empty", label, i+1)
		case t.Role == "":
			ps.addf("%s: entry %d has no role: want role:token", label, i+1)
		case !api.ValidRole(t.Role):
			ps.addf("%s: entry %d: the role must be %s, %s or %s", label, i+1, api.RoleSubmitter, api.RoleOperator, api.RoleViewer)
		case t.Token == "":
			ps.addf("%s: entry %d (%s) has an empty token", label, i+1, t.Role)
		}
		if t.Token == "" {
			continue
		}
		if j, ok := first[t.Token]; ok {
			ps.addf("%s: entries %d and %d have the same token", label, j+1, i+1)
			continue
		}
		first[t.Token] = i
	}
}

// validateSecretList reports a missing list, empty entries and duplicates
// by position only.
func validateSecretList(ps *problems, env string, list []string, required bool) {
	if required && len(list) == 0 {
		ps.addf("%s: at least one is required", configLabel(env))
		return
	}
	first := make(map[string]int, len(list))
	for i, s := range list {
		if s == "" {
			ps.addf("%s: entry %d is empty", configLabel(env), i+1)
			continue
		}
		if j, ok := first[s]; ok {
			ps.addf("%s: entries %d and %d are the same", configLabel(env), j+1, i+1)
			continue
		}
		first[s] = i
	}
}

// validateHTTPURL checks an absolute http or https URL. The value is not
// quoted: a URL may carry credentials.
func validateHTTPURL(ps *problems, env, raw string, required bool) {
	if raw == "" {
		if required {
			ps.addf("%s: is required", configLabel(env))
		}
		return
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		ps.addf("%s: is not a valid URL", configLabel(env))
	case u.Scheme != "http" && u.Scheme != "https":
		ps.addf("%s: must start with http:// or https://", configLabel(env))
	case u.Host == "":
		ps.addf("%s: has no host", configLabel(env))
	case u.RawQuery != "" || u.Fragment != "":
		ps.addf("%s: must not have a query or fragment", configLabel(env))
	}
}

// configLabel names a variable with its YAML key, e.g.
// "CHANGEBOT_LISTEN (listen)".
func configLabel(env string) string {
	for _, f := range configFields {
		if f.Env == env {
			return fmt.Sprintf("%s (%s)", env, f.YAML)
		}
	}
	return env
}

// The paths where an installation receives its platform's webhooks.
const (
	GitLabWebhookPath = "/webhooks/gitlab"
	GitHubWebhookPath = "/webhooks/github"
)

// WebhookPath is where this installation receives its platform's
// webhooks: GitHubWebhookPath on GitHub, else GitLabWebhookPath.
func (c Config) WebhookPath() string {
	if c.Platform == PlatformGitHub {
		return GitHubWebhookPath
	}
	return GitLabWebhookPath
}

// GitLabAPIURL returns GitLab's REST API base, GitLabURL + "/api/v4".
func (c Config) GitLabAPIURL() string {
	if c.GitLabURL == "" {
		return ""
	}
	return trimGitLabURL(c.GitLabURL) + "/api/v4"
}

// SlogLevel returns LogLevel as a slog.Level (info when unrecognised).
func (c Config) SlogLevel() slog.Level {
	switch c.LogLevel {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// LogValue implements slog.LogValuer: every field, secrets as "[REDACTED]"
// (lists keep their length; API tokens keep their role), the database URL
// without its password and URLs without user info passwords.
func (c Config) LogValue() slog.Value {
	apiTokens := make([]string, len(c.APITokens))
	for i, t := range c.APITokens {
		apiTokens[i] = t.String()
	}
	return slog.GroupValue(
		slog.String("listen", c.Listen),
		slog.String("database_url", c.RedactedDatabaseURL()),
		slog.String("data_dir", c.DataDir),
		slog.String("platform", c.Platform),
		slog.String("gitlab_url", redactURL(c.GitLabURL)),
		slog.String("gitlab_token", redactSecret(c.GitLabToken)),
		slog.String("github_url", redactURL(c.GitHubURL)),
		slog.String("github_token", redactSecret(c.GitHubToken)),
		slog.Int64("github_app_id", c.GitHubAppID),
		slog.String("github_app_private_key", redactSecret(c.GitHubAppPrivateKey)),
		slog.Int64("github_installation_id", c.GitHubInstallationID),
		slog.Any("reviewer_tokens", redactSecrets(c.ReviewerTokens)),
		slog.Any("webhook_secrets", redactSecrets(c.WebhookSecrets)),
		slog.String("callback_secret", redactSecret(c.CallbackSecret)),
		slog.Any("api_tokens", apiTokens),
		slog.String("approval_url", redactURL(c.ApprovalURL)),
		slog.String("external_url", redactURL(c.ExternalURL)),
		slog.Any("operators", c.Operators),
		slog.Any("bot_users", c.BotUsers),
		slog.String("log_level", c.LogLevel),
		slog.String("log_format", c.LogFormat),
		slog.Int("workers", c.Workers),
		slog.Int64("max_body_bytes", c.MaxBodyBytes),
		slog.String("shutdown_grace", c.ShutdownGrace.String()), // "20s", not nanoseconds in JSON
		slog.String("shutdown_delay", c.ShutdownDelay.String()),
		slog.String("web_session_ttl", c.WebSessionTTL.String()),
		slog.Bool("auto_migrate", c.AutoMigrate),
		slog.Any("settings", c.Settings),
		slog.Any("notifications", c.notificationsLogValue()),
	)
}

// String renders LogValue as space-separated key=value pairs.
func (c Config) String() string {
	var b strings.Builder
	b.WriteString("Config{")
	for i, a := range c.LogValue().Group() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", a.Key, a.Value)
	}
	b.WriteString("}")
	return b.String()
}

// GoString is String, so that %#v cannot print a secret either.
func (c Config) GoString() string { return c.String() }

func redactSecret(s string) string {
	if s == "" {
		return ""
	}
	return redacted
}

func redactSecrets(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = redactSecret(s)
	}
	return out
}

// redactURL hides a password in a URL's user info; an unparseable URL is
// hidden whole.
func redactURL(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return redacted
	}
	return u.Redacted()
}

// PlatformName is the platform's name as people write it: "GitHub" for
// PlatformGitHub, else "GitLab".
func PlatformName(platform string) string {
	if platform == PlatformGitHub {
		return "GitHub"
	}
	return "GitLab"
}
