// Package settings owns changebot's runtime settings (issue 4 point 9): the
// registry of keys with their types, defaults, units and documentation; the
// validation of values; and the Cache that every replica reads them through,
// refreshed from the settings table by PostgreSQL LISTEN/NOTIFY with a short
// TTL as the bound for a missed notification. A lookup never does I/O.
//
// A value is found, in order, in the project scope ("project:<path>", the
// path in lower case, matched against the project the caller passes, case
// ignored; "project:<id>" for a key read by numeric id, Def.ScopeByID), the
// global scope,
// the config file's initial value, and the registry default. Writes go
// through Cache.Set, which validates and audits them. It must not import
// flows or bot: consumers read values and translate them into their own
// configuration.
package settings

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"changebot/retention"
)

// Keys of the registry. Persisted names: never rename one without a
// migration of the stored rows.
const (
	FlowApprovalFirst     = "flow.approval_first"
	ApprovalProvider      = "approval.provider"
	ApprovalAdapter       = "approval.adapter"
	AdmissionMaxActive    = "admission.max_active"
	PollShortInterval     = "poll.short_interval"
	PollShortCount        = "poll.short_count"
	PollLongInterval      = "poll.long_interval"
	PipelineDeadline      = "pipeline.deadline"
	RebaseDeadline        = "rebase.deadline"
	DeployDeadline        = "deploy.deadline"
	MergeMaxRounds        = "merge.max_rounds"
	ApproveMaxRetries     = "approve.max_retries"
	ReconcileMinAge       = "reconcile.min_age"
	ReconcileMaxAge       = "reconcile.max_age"
	NoteDelay             = "note.delay"
	JobsRescueAfter       = "jobs.rescue_after"
	ApprovalApprovers     = "approval.approvers"
	ApprovalMinAccess     = "approval.min_access"
	ApprovalRequired      = "approval.required"
	ReconcileInterval     = "reconcile.interval"
	ReconcileQuietAfter   = "reconcile.quiet_after"
	SweeperInterval       = "sweeper.interval"
	SweeperAfter          = "sweeper.after"
	CommandsRateLimit     = "commands.rate_limit"
	ApprovalGroups        = "approval.approver_groups"
	RetentionIntake       = "retention.intake_max_age"
	HistorySnapshotEvery  = "history.snapshot_every"
	GitLabBudgetPerMinute = "gitlab.budget_per_minute"
	GitLabBudgetBurst     = "gitlab.budget_burst"
	GitLabBudgetReserve   = "gitlab.budget_reserve"
	QueueMode             = "queue.mode"
	QueuePipelineRetries  = "queue.pipeline_retries"
	QueueDeferCI          = "queue.defer_ci"
	PolicyAllowOverride   = "policy.allow_override"
)

// OverridableKeys are the keys of a repository's .changebot.yml that
// policy.allow_override may let replace the server's setting of the same
// name (issue 25 point 2: server settings win, except keys the server
// lists as overridable per project).
var OverridableKeys = []string{ApprovalProvider, ApprovalApprovers, ApprovalRequired, QueueMode, QueueDeferCI,
	QueuePipelineRetries, MergeMaxRounds, NotifyRoutes}

// NotifyRoutes is the `.changebot.yml` key of its notification routes, in
// OverridableKeys: no setting of its own, the server's destinations'
// event lists (notifications in the config file) are what it replaces.
const NotifyRoutes = "notify"

const (
	scopeGlobal         = "global"
	scopeProjectPrefix  = "project:"
	maxIntSettingValue  = 1 << 31
	maxStringSetting    = 4096
	durationExampleText = `a positive duration such as "30s" or "10m"`
)

// DefaultMinDuration is the shortest duration an operator may set for a
// KindDuration setting without a MinDuration of its own: every duration of
// the registry counts seconds or more, so "1ns" or "500us" is a typo.
const DefaultMinDuration = time.Second

// gitLabAccessLevels are the values approval.min_access accepts: 0 (off)
// and GitLab's access levels (docs.gitlab.com, "Roles and permissions":
// 10 Guest, 20 Reporter, 30 Developer, 40 Maintainer, 50 Owner).
var gitLabAccessLevels = []int{0, 10, 20, 30, 40, 50}

// Kind is the type of a setting's value.
type Kind string

// Kinds of values. Bool and Int are JSON booleans and integers; Enum,
// String and Duration are JSON strings (durations in Go syntax: "30s",
// "10m", "2h").
const (
	KindBool     Kind = "bool"
	KindEnum     Kind = "enum"
	KindString   Kind = "string"
	KindInt      Kind = "int"
	KindDuration Kind = "duration"
)

// Def declares one setting.
type Def struct {
	Key  string
	Kind Kind
	// Default is the value used when nothing is stored or configured, in
	// the text form of the config file ("true", "15s", "1000", "external").
	Default string
	// Unit is what a number or duration counts, for documentation.
	Unit string
	// Enum lists the accepted values of a KindEnum setting.
	Enum []string
	// Items, when set, makes a KindString setting a comma-separated list
	// of these words only (each at most once; spaces around a word are
	// ignored).
	Items []string
	// Min is the smallest accepted KindInt value.
	Min int
	// Allowed, when set, lists the only KindInt values an operator or the
	// config file may give (approval.min_access: 0 or a GitLab access
	// level).
	Allowed []int
	// MinDuration is the shortest KindDuration value an operator may set
	// with Validate (CLI, REST API); zero means DefaultMinDuration. The
	// config file's values are checked for type only, so tests and the demo
	// can run sub-second schedules.
	MinDuration time.Duration
	// StartOnly marks settings read once when a replica starts: a change
	// takes effect at the next start.
	StartOnly bool
	// GlobalOnly marks settings the bot reads for the whole process, never
	// per project (admission, the command rate limit, the reconciler, the
	// sweeper, job rescue, retention): a project-scoped value would never
	// be used, so Validate refuses one and Cache.Lookup ignores any stored
	// before the rule existed.
	GlobalOnly bool
	// ScopeByID says the project scope is the project's numeric id (the
	// reader knows only the id); every other key's project scope is the
	// project's path. Validate refuses the other spelling.
	ScopeByID bool
	// Doc says what the setting does, one sentence without a final period.
	Doc string
}

// registry is the single list of settings, in README order.
var registry = []Def{
	{Key: FlowApprovalFirst, Kind: KindBool, Default: "true", Unit: "bool",
		Doc: "flow order of new changes: approval before the merge request (true) or the merge request first (false); read at submit and stored on the change; ignored where approval.provider is gitlab, whose changes always open the merge request first"},
	{Key: ApprovalProvider, Kind: KindEnum, Default: "external", Unit: "enum", Enum: []string{"external", "gitlab"},
		Doc: "who approves: the external approval system, or approvers in GitLab"},
	{Key: ApprovalApprovers, Kind: KindString, Default: "", Unit: "usernames",
		Doc: "comma-separated GitLab usernames whose approval counts when approval.provider is gitlab"},
	{Key: ApprovalMinAccess, Kind: KindInt, Default: "0", Unit: "access level", Min: 0, Allowed: gitLabAccessLevels,
		Doc: "when above 0, every project member with at least this GitLab access level (10 Guest, 20 Reporter, 30 Developer, 40 Maintainer, 50 Owner) may also approve in GitLab"},
	{Key: ApprovalGroups, Kind: KindString, Default: "", Unit: "groups",
		Doc: "comma-separated GitLab groups (full path or id) whose members may approve in GitLab, inherited membership included"},
	{Key: ApprovalRequired, Kind: KindInt, Default: "1", Unit: "approvals", Min: 1,
		Doc: "how many distinct approvals in GitLab a change needs when approval.provider is gitlab"},
	{Key: CommandsRateLimit, Kind: KindInt, Default: "20", Unit: "commands per minute", Min: 1, GlobalOnly: true,
		Doc: "how many MR comments with commands one user may send per minute; the excess is ignored and answered once"},
	{Key: ApprovalAdapter, Kind: KindEnum, Default: "legacy", Unit: "enum", Enum: []string{"legacy", "checklist"}, ScopeByID: true,
		Doc: "how reviewer robots approve: the client library's approve, or a direct call carrying the required checklist"},
	{Key: AdmissionMaxActive, Kind: KindInt, Default: "1000", Unit: "changes", Min: 1, GlobalOnly: true,
		Doc: "above this many active changes POST /api/v1/changes answers 503 with Retry-After and creates nothing"},
	{Key: GitLabBudgetPerMinute, Kind: KindInt, Default: "1500", Unit: "calls per minute", Min: 0, GlobalOnly: true,
		Doc: "GitLab calls per minute the robot and each reviewer robot may make, all replicas together (a budget in the database); keep budget_per_minute + budget_burst under GitLab's limit (GitLab.com: 2,000 per minute per user); 0 turns the budget off"},
	{Key: GitLabBudgetBurst, Kind: KindInt, Default: "250", Unit: "calls", Min: 1, GlobalOnly: true,
		Doc: "most calls the budget holds when the account has been idle (its burst)"},
	{Key: GitLabBudgetReserve, Kind: KindInt, Default: "100", Unit: "calls", Min: 0, GlobalOnly: true,
		Doc: "calls the polls of waiting changes leave in the budget for work a person waits on (commands, approvals, merges, the status comment); below gitlab.budget_burst"},
	{Key: PollShortInterval, Kind: KindDuration, Default: "15s", Unit: "duration",
		Doc: "interval of the first polls of a wait (pipeline, rebase, deploy)"},
	{Key: PollShortCount, Kind: KindInt, Default: "8", Unit: "polls", Min: 0,
		Doc: "how many short polls before switching to the long interval"},
	{Key: PollLongInterval, Kind: KindDuration, Default: "2m", Unit: "duration",
		Doc: "interval of later polls; at least poll.short_interval"},
	{Key: PipelineDeadline, Kind: KindDuration, Default: "2h", Unit: "duration",
		Doc: "how long to wait for a pipeline before parking the change as *_PIPELINE_PENDING"},
	{Key: RebaseDeadline, Kind: KindDuration, Default: "15m", Unit: "duration",
		Doc: "how long a rebase may run before HANDLE_REBASE_PENDING"},
	{Key: DeployDeadline, Kind: KindDuration, Default: "6h", Unit: "duration",
		Doc: "how long to wait for the deploy pipeline before DEPLOY_PENDING"},
	{Key: MergeMaxRounds, Kind: KindInt, Default: "3", Unit: "rounds", Min: 1,
		Doc: "rebase/re-approval rounds per change before HANDLE_FAILED"},
	{Key: ApproveMaxRetries, Kind: KindInt, Default: "3", Unit: "retries", Min: 0,
		Doc: "retries of one reviewer robot's approve call (exponential backoff) before its failure state"},
	// The values of queue.mode are flows/rules.QueueModes (a test keeps
	// them equal).
	{Key: QueueMode, Kind: KindEnum, Default: "auto", Unit: "enum", Enum: []string{"auto", "on", "off"},
		Doc: "the merge queue of each target branch: auto queues where the platform merges only an up-to-date merge request (GitLab merge methods ff and rebase_merge; every GitHub branch), on always, off merges in parallel"},
	{Key: QueuePipelineRetries, Kind: KindInt, Default: "1", Unit: "retries", Min: 0,
		Doc: "runs again of a failed pipeline of the merge queue's head before the change is blamed"},
	// The values of queue.defer_ci are flows/rules.DeferCIModes (a test
	// keeps them equal).
	{Key: QueueDeferCI, Kind: KindEnum, Default: "auto", Unit: "enum", Enum: []string{"auto", "on", "off"},
		Doc: "GitLab: a queued change's first pipeline runs when it reaches the head of the merge queue (its commit skips CI until then), so it costs one pipeline: auto where the merge method is rebase_merge, on wherever it queues (never under ff, whose fast-forward would carry the [skip ci] onto the target branch and skip its deploy), off runs it when the merge request opens"},
	{Key: PolicyAllowOverride, Kind: KindString, Default: "", Unit: "keys", Items: OverridableKeys,
		Doc: "comma-separated keys of the repository's `.changebot.yml` whose value there replaces this server's setting of the same name for the project's changes (any of `approval.provider`, `approval.approvers`, `approval.required`, `queue.mode`, `queue.defer_ci`, `queue.pipeline_retries`, `merge.max_rounds`, and `notify`: the file's routes replace the event lists of the destinations they name); the file's other values are shown, never applied"},
	{Key: ReconcileMinAge, Kind: KindDuration, Default: "10m", Unit: "duration", GlobalOnly: true,
		Doc: "the reconciler looks at MERGED changes last changed at least this long ago"},
	{Key: ReconcileMaxAge, Kind: KindDuration, Default: "24h", Unit: "duration", GlobalOnly: true,
		Doc: "the reconciler ignores MERGED changes last changed longer ago than this; above reconcile.min_age"},
	{Key: ReconcileInterval, Kind: KindDuration, Default: "1m", Unit: "duration", StartOnly: true, GlobalOnly: true,
		Doc: "time between reconciler passes; read at start only, a change needs a restart"},
	{Key: ReconcileQuietAfter, Kind: KindDuration, Default: "10m", Unit: "duration", GlobalOnly: true,
		Doc: "a change waiting on a pipeline or a merge unchanged this long gets its polling job woken by the reconciler"},
	{Key: SweeperInterval, Kind: KindDuration, Default: "1m", Unit: "duration", StartOnly: true, GlobalOnly: true,
		Doc: "time between stuck-step sweeper passes; read at start only, a change needs a restart"},
	{Key: SweeperAfter, Kind: KindDuration, Default: "10m", Unit: "duration", GlobalOnly: true,
		Doc: "an in-progress change unchanged this long with no live job is re-enqueued by the sweeper; keep it above jobs.rescue_after"},
	{Key: NoteDelay, Kind: KindDuration, Default: "2s", Unit: "duration", MinDuration: 100 * time.Millisecond,
		Doc: "how long status-comment edits wait to coalesce"},
	{Key: JobsRescueAfter, Kind: KindDuration, Default: "5m", Unit: "duration", StartOnly: true, GlobalOnly: true,
		Doc: "a job still marked running this long after its replica died is run again; read at start only, a change needs a restart"},
	{Key: RetentionIntake, Kind: KindDuration, Default: "720h", Unit: "duration", GlobalOnly: true, MinDuration: retention.MinMaxAge,
		Doc: "stored webhook deliveries (once processed) and callback dedupe rows older than this are deleted by the leader, in batches, every 10 minutes; change events are kept. At least 192h (8 days): a platform may send a delivery again within 7 days (GitHub Enterprise Server's redelivery, GitLab's Recent events), and its dedupe row must still be there"},
	{Key: HistorySnapshotEvery, Kind: KindInt, Default: "50", Unit: "events", Min: 1, GlobalOnly: true,
		Doc: "a replay (changebot replay) stores a snapshot of a change's state at every this many events and starts from the nearest one"},
}

// Defs returns the registry in documentation order.
func Defs() []Def {
	out := slices.Clone(registry)
	for i := range out {
		out[i].Enum = slices.Clone(out[i].Enum)
		out[i].Allowed = slices.Clone(out[i].Allowed)
	}
	return out
}

// Lookup returns the definition of key.
func Lookup(key string) (Def, bool) {
	for _, d := range registry {
		if d.Key == key {
			return d, true
		}
	}
	return Def{}, false
}

// DefaultValue returns the registry default of key, parsed: the one source
// of the defaults that packages reading these values (flows) start from. It
// panics for a key that is not in the registry, a programming error (keys
// are the constants above).
func DefaultValue(key string) Value {
	d, ok := Lookup(key)
	if !ok {
		panic(fmt.Sprintf("settings: no default for unknown key %q", key))
	}
	v, err := d.ParseText(d.Default)
	if err != nil {
		panic(fmt.Sprintf("settings: default of %s: %v", key, err))
	}
	return v
}

// ErrUnknownKey is returned (wrapped in an *UnknownKeyError) for a key that
// is not in the registry.
var ErrUnknownKey = errors.New("unknown setting")

// UnknownKeyError names the unknown key and lists the known ones.
type UnknownKeyError struct{ Key string }

// Error implements error.
func (e *UnknownKeyError) Error() string {
	keys := make([]string, len(registry))
	for i, d := range registry {
		keys[i] = d.Key
	}
	return fmt.Sprintf("unknown setting %q (known: %s)", e.Key, strings.Join(keys, ", "))
}

// Is makes errors.Is(err, ErrUnknownKey) true.
func (e *UnknownKeyError) Is(target error) bool { return target == ErrUnknownKey }

// ErrInvalidValue is returned (wrapped in an *InvalidValueError) for a value
// that does not fit its setting's type.
var ErrInvalidValue = errors.New("invalid setting value")

// InvalidValueError says which value was refused and what was wanted.
type InvalidValueError struct {
	Key  string
	Want string
	Got  string
}

// Error implements error.
func (e *InvalidValueError) Error() string {
	return fmt.Sprintf("invalid value for %s: want %s, got %s", e.Key, e.Want, e.Got)
}

// Is makes errors.Is(err, ErrInvalidValue) true.
func (e *InvalidValueError) Is(target error) bool { return target == ErrInvalidValue }

// ErrGlobalOnly is returned (wrapped in a *GlobalOnlyError) for a value of
// a global-only setting (Def.GlobalOnly) given a project scope.
var ErrGlobalOnly = errors.New("setting is global only")

// GlobalOnlyError names the global-only key and the scope it was given.
type GlobalOnlyError struct{ Key, Scope string }

// Error implements error.
func (e *GlobalOnlyError) Error() string {
	return fmt.Sprintf("%s is global only: it applies to every project, so it cannot be set for %s (leave the project out)", e.Key, e.Scope)
}

// Is makes errors.Is(err, ErrGlobalOnly) true.
func (e *GlobalOnlyError) Is(target error) bool { return target == ErrGlobalOnly }

// ErrProjectScope is returned (wrapped in a *ProjectScopeError) for a
// project scope spelled so that no lookup would ever match it.
var ErrProjectScope = errors.New("project scope would never be matched")

// ProjectScopeError names the key and the project scope it was given, and
// how that key's project scope must be spelled. Read is set when the scope
// was given to read the value (CheckScope), not to write it.
type ProjectScopeError struct {
	Key, Scope, Want string
	Read             bool
}

// Error implements error.
func (e *ProjectScopeError) Error() string {
	if e.Read {
		return fmt.Sprintf("%s is never read for %s: its project scope is %s (a change there uses another value than this scope would show)", e.Key, e.Scope, e.Want)
	}
	return fmt.Sprintf("%s cannot be set for %s: its project scope is %s, or the value would never be used", e.Key, e.Scope, e.Want)
}

// Is makes errors.Is(err, ErrProjectScope) true.
func (e *ProjectScopeError) Is(target error) bool { return target == ErrProjectScope }

// projectPathPattern is the shape of a project's path as GitLab (a group,
// its subgroups and the project: doc/user/reserved_names.md, "path can
// contain only letters, digits, '_', '-' and '.'") and GitHub (owner/repo)
// show it: two or more segments of those characters, none empty.
var projectPathPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+$`)

// projectPath reports whether project is shaped as a project's path
// (projectPathPattern, and no segment "." or ".."): a scope of another
// shape ("platform", "platform/config/", "../x", "a/b?x=1") names no
// project a change could have, so its value would never be used.
func projectPath(project string) bool {
	project = strings.TrimSpace(project)
	if !projectPathPattern.MatchString(project) {
		return false
	}
	for _, seg := range strings.Split(project, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// numericID reports whether project is a numeric project id.
func numericID(project string) bool {
	_, err := strconv.ParseInt(strings.TrimSpace(project), 10, 64)
	return err == nil
}

// Validate checks a value an operator sets for key in project's scope (""
// for global): the one check behind Cache.Set, so the CLI and the REST API
// refuse the same values with the same words. raw is JSON; a JSON null
// (remove the stored value) returns a zero Value and is accepted in every
// scope, so a project value stored before its key became global only can
// still be removed. Errors: *UnknownKeyError, *InvalidValueError (wrong
// type, an enum outside its list, a count below its minimum such as a
// negative count, a duration that is not positive or shorter than its
// minimum (Def.MinDuration), an int outside Def.Allowed, a string too
// long), *GlobalOnlyError. Rules between settings need the other values in
// effect and are checked by Cache.Set (*ConflictError).
func Validate(key, project string, raw json.RawMessage) (Value, error) {
	d, ok := Lookup(key)
	if !ok {
		return Value{}, &UnknownKeyError{Key: key}
	}
	if strings.TrimSpace(string(raw)) == "null" {
		return Value{}, nil
	}
	if d.GlobalOnly && Scope(project) != scopeGlobal {
		return Value{}, &GlobalOnlyError{Key: key, Scope: Scope(project)}
	}
	if err := d.checkScope(project); err != nil {
		return Value{}, err
	}
	v, err := d.Parse(raw)
	if err != nil {
		return Value{}, err
	}
	if err := d.checkRange(v, true); err != nil {
		return Value{}, err
	}
	return v, nil
}

// CheckScope reports whether project ("" for global) spells a scope key's
// values are looked up in, for a person reading one setting (the CLI's
// settings get, GET /api/v1/settings/{key}): a *ProjectScopeError when it
// would name a scope no change reads (a numeric id for a key read by the
// project's path, a path for approval.adapter), whose answer would be the
// global value while the project uses another; *UnknownKeyError for an
// unknown key. Validate applies the same rule to writes.
func CheckScope(key, project string) error {
	d, ok := Lookup(key)
	if !ok {
		return &UnknownKeyError{Key: key}
	}
	err := d.checkScope(project)
	if pe := (*ProjectScopeError)(nil); errors.As(err, &pe) {
		pe.Read = true
	}
	return err
}

// checkScope is CheckScope for d. A global-only key read for a project is
// its global value, which is right: only writes refuse a project there.
func (d Def) checkScope(project string) error {
	if d.GlobalOnly || Scope(project) == scopeGlobal {
		return nil
	}
	if d.ScopeByID && numericID(project) || !d.ScopeByID && !numericID(project) && projectPath(project) {
		return nil
	}
	// A change's settings are looked up by the project's path as the
	// platform answers it; approval.adapter by its numeric id (the adapter
	// knows only the id). The other spelling would be stored and silently
	// never apply, or read and show the global value instead.
	want := "the project's path (group/name, as GitLab or GitHub shows it; case is ignored)"
	if d.ScopeByID {
		want = "the project's numeric id"
	}
	return &ProjectScopeError{Key: d.Key, Scope: Scope(project), Want: want}
}

// minDuration returns the shortest duration an operator may set for d.
func (d Def) minDuration() time.Duration {
	if d.MinDuration > 0 {
		return d.MinDuration
	}
	return DefaultMinDuration
}

// checkRange refuses a parsed value outside d's range: an int not in
// Def.Allowed and, when durations is set (an operator's write), a duration
// shorter than d's minimum.
func (d Def) checkRange(v Value, durations bool) error {
	switch {
	case d.Kind == KindInt && len(d.Allowed) > 0 && !slices.Contains(d.Allowed, v.Int()):
		return d.invalid(string(v.JSON()))
	case d.Kind == KindDuration && durations && v.Duration() < d.minDuration():
		return &InvalidValueError{Key: d.Key, Want: fmt.Sprintf(`a duration of at least %s (such as "30s" or "10m")`, d.minDuration()),
			Got: v.String()}
	}
	return nil
}

// want describes the accepted values of d.
func (d Def) want() string {
	switch d.Kind {
	case KindBool:
		return "true or false"
	case KindEnum:
		return "one of " + `"` + strings.Join(d.Enum, `", "`) + `"`
	case KindInt:
		if len(d.Allowed) > 0 {
			vals := make([]string, len(d.Allowed))
			for i, n := range d.Allowed {
				vals[i] = strconv.Itoa(n)
			}
			return "one of " + strings.Join(vals, ", ") + " (" + d.Unit + ")"
		}
		return fmt.Sprintf("a whole number of at least %d", d.Min)
	case KindString:
		if len(d.Items) > 0 {
			return "a comma-separated list of " + `"` + strings.Join(d.Items, `", "`) + `"`
		}
		return fmt.Sprintf("a string of at most %d bytes", maxStringSetting)
	default:
		return durationExampleText
	}
}

func (d Def) invalid(got string) error {
	if len(got) > 80 {
		got = got[:80] + "…"
	}
	return &InvalidValueError{Key: d.Key, Want: d.want(), Got: got}
}

// Parse validates a JSON value for d and returns it as a Value (Source and
// Scope left for the caller). Durations and enums are JSON strings.
func (d Def) Parse(raw json.RawMessage) (Value, error) {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Value{}, d.invalid(strconv.Quote(string(raw)))
	}
	// One value and nothing after it: dec.More is false before a stray
	// '}' or ']', so the next token must be the end.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Value{}, d.invalid(strconv.Quote(string(raw)))
	}
	switch d.Kind {
	case KindBool:
		b, ok := v.(bool)
		if !ok {
			return Value{}, d.invalid(string(raw))
		}
		return d.value(b), nil
	case KindInt:
		n, ok := v.(json.Number)
		if !ok {
			return Value{}, d.invalid(string(raw))
		}
		i, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			return Value{}, d.invalid(string(raw))
		}
		return d.intValue(i, string(raw))
	case KindEnum:
		s, ok := v.(string)
		if !ok {
			return Value{}, d.invalid(string(raw))
		}
		return d.enumValue(s)
	case KindString:
		s, ok := v.(string)
		if !ok {
			return Value{}, d.invalid(string(raw))
		}
		return d.stringValue(s)
	default:
		s, ok := v.(string)
		if !ok {
			return Value{}, d.invalid(string(raw))
		}
		return d.durationValue(s)
	}
}

// ParseText validates a value in the config file's text form ("true",
// "30s", "1000", "external"; a double-quoted string is unquoted first) for
// d.
func (d Def) ParseText(s string) (Value, error) {
	s = strings.TrimSpace(s)
	if u, err := strconv.Unquote(s); err == nil && strings.HasPrefix(s, `"`) {
		s = u // a JSON-style quoted string: "30s"
	}
	switch d.Kind {
	case KindBool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return Value{}, d.invalid(strconv.Quote(s))
		}
		return d.value(b), nil
	case KindInt:
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Value{}, d.invalid(strconv.Quote(s))
		}
		return d.intValue(i, strconv.Quote(s))
	case KindEnum:
		return d.enumValue(s)
	case KindString:
		return d.stringValue(s)
	default:
		return d.durationValue(s)
	}
}

func (d Def) stringValue(s string) (Value, error) {
	if len(s) > maxStringSetting {
		return Value{}, d.invalid(strconv.Quote(fmt.Sprintf("%d bytes", len(s))))
	}
	if len(d.Items) > 0 && strings.TrimSpace(s) != "" {
		seen := map[string]bool{}
		for _, w := range strings.Split(s, ",") {
			w = strings.TrimSpace(w)
			switch {
			case w == "":
				return Value{}, &InvalidValueError{Key: d.Key, Want: d.want() + ", without an empty item", Got: strconv.Quote(s)}
			case seen[w]:
				return Value{}, &InvalidValueError{Key: d.Key, Want: d.want() + ", each once", Got: strconv.Quote(s) + " (" + w + " twice)"}
			case !slices.Contains(d.Items, w):
				return Value{}, d.invalid(strconv.Quote(s))
			}
			seen[w] = true
		}
	}
	return d.value(s), nil
}

// SplitList splits a comma-separated setting into its words, spaces
// trimmed and empty words dropped ("a, b,,c" is a, b, c).
func SplitList(s string) []string {
	var out []string
	for _, w := range strings.Split(s, ",") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out
}

func (d Def) intValue(i int64, got string) (Value, error) {
	if i < int64(d.Min) || i > maxIntSettingValue {
		return Value{}, d.invalid(got)
	}
	return d.value(int(i)), nil
}

func (d Def) enumValue(s string) (Value, error) {
	if !slices.Contains(d.Enum, s) {
		return Value{}, d.invalid(strconv.Quote(s))
	}
	return d.value(s), nil
}

func (d Def) durationValue(s string) (Value, error) {
	dur, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || dur <= 0 {
		return Value{}, d.invalid(strconv.Quote(s))
	}
	v := d.value(dur)
	v.raw, _ = json.Marshal(strings.TrimSpace(s)) // keep the operator's spelling ("2m", not "2m0s")
	return v, nil
}

// value builds a Value of d holding v (bool, int, string or
// time.Duration) with its canonical JSON.
func (d Def) value(v any) Value {
	raw, _ := json.Marshal(v)
	return Value{Key: d.Key, Kind: d.Kind, raw: raw, v: v}
}

// ValidateInitial checks initial values as read from the config file's
// "settings:" map and returns every problem at once (nil when all are
// valid).
func ValidateInitial(initial map[string]string) error {
	_, err := parseInitial(initial)
	return err
}

func parseInitial(initial map[string]string) (map[string]Value, error) {
	keys := make([]string, 0, len(initial))
	for k := range initial {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(map[string]Value, len(initial))
	var errs []error
	for _, k := range keys {
		d, ok := Lookup(k)
		if !ok {
			errs = append(errs, &UnknownKeyError{Key: k})
			continue
		}
		v, err := d.ParseText(initial[k])
		if err == nil {
			err = d.checkRange(v, false)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v.Scope, v.Source = scopeGlobal, SourceConfig
		out[k] = v
	}
	if len(errs) == 0 {
		errs = checkRules(out, nil, "", "")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("reading initial settings: %w", err)
	}
	return out, nil
}

// Scope returns the scope a project's values are stored under:
// "global" for "", else "project:<project>" with the project in lower
// case: GitLab and GitHub match project paths case-insensitively, so
// "Platform/Config" and "platform/config" are one project and one scope.
func Scope(project string) string {
	project = strings.TrimSpace(project)
	if project == "" {
		return scopeGlobal
	}
	return scopeProjectPrefix + strings.ToLower(project)
}
