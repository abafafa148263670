// Package ops owns the operator's day-one tools: doctor (RunDoctor: one
// finding per thing changebot needs, from the database and its migrations
// to the platform tokens, the robot's rights, the webhooks and the
// approval system, each with how to fix it; LogDoctor at serve's start) and
// setup (RunSetup: the platform webhook created or corrected idempotently,
// then tested). It reads the platform and the database and writes only
// webhooks: it never changes a change, a setting or a table, and it never
// imports bot, cli or demo.
package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"changebot/config"
	"changebot/database"
	"changebot/platform"
	"changebot/platform/gitlab"
	"changebot/settings"
	"changebot/store"
)

// Check levels printed by changebot doctor, in increasing gravity.
const (
	CheckOK   = "OK"
	CheckWarn = "WARN"
	CheckFail = "FAIL"
)

// TokenExpiryWarning is how close to its expiry date a GitLab token makes
// doctor warn: GitLab tokens expire (at most a year after creation since
// GitLab 16.0, doc/user/profile/personal_access_tokens.md), and the bot
// stops on the day they do.
const TokenExpiryWarning = 14 * 24 * time.Hour

// neededTriggers are the webhook triggers the bot relies on (README
// "Running it"), with the names GitLab's settings page shows.
var neededTriggers = []struct{ name, label string }{
	{platform.TriggerMergeRequests, "Merge request events"},
	{platform.TriggerPipeline, "Pipeline events"},
	{platform.TriggerNote, "Comments"},
}

// Check is one finding of changebot doctor: its Level (CheckOK, CheckWarn
// or CheckFail), What was checked and found, and, unless OK, how to Fix it.
type Check struct {
	Level string
	What  string
	Fix   string
}

// String is the check's line: "OK   <what>" or "FAIL <what> — <fix>".
func (c Check) String() string {
	s := fmt.Sprintf("%-4s %s", c.Level, c.What)
	if c.Fix != "" {
		s += " — " + c.Fix
	}
	return s
}

// DoctorOpts are the optional inputs of RunDoctor; nil means defaults.
type DoctorOpts struct {
	// Projects are checked besides those named by stored project-scoped
	// settings (full paths or numeric ids).
	Projects []string
	// HookToken is a token allowed to read webhooks (Maintainer of the
	// projects); empty means the robot's token.
	HookToken string
	// Schema is the PostgreSQL schema of changebot's tables; empty means
	// the connection's search_path.
	Schema string
	// NowFunc is the clock; nil means time.Now.
	NowFunc func() time.Time
	// Logger receives the GitLab client's debug records; nil discards.
	Logger *slog.Logger
}

// doctorGitLab is what doctor asks GitLab, as the robot and the reviewer
// robots (platform/gitlab.Client).
type doctorGitLab interface {
	TokenInfo(ctx context.Context) (platform.TokenInfo, error)
	CurrentUser(ctx context.Context) (platform.User, error)
	ReviewerCount() int
	ReviewerTokenInfo(ctx context.Context, i int) (platform.TokenInfo, error)
	Reviewer(ctx context.Context, i int) (platform.User, error)
	Project(ctx context.Context, project string) (platform.Project, error)
	MemberAccess(ctx context.Context, projectID, userID int64) (int, error)
	MergeAccessLevel(ctx context.Context, projectID int64, branch string) (level int, protected bool, err error)
}

// hookReader reads webhooks, as the robot or the HookToken's user.
type hookReader interface {
	Webhooks(ctx context.Context, owner platform.HookOwner) ([]platform.Webhook, error)
	CurrentUser(ctx context.Context) (platform.User, error)
}

// RunDoctor checks what changebot needs in order to work, and returns one
// Check per finding, in this order: the database is reachable and
// migrated; the robot token is valid, has scope api and does not expire
// within TokenExpiryWarning; each reviewer token likewise, each of a
// distinct user who is not the robot; then, for each project of
// o.Projects and of the stored project-scoped settings: the robot may push
// and merge into the default branch (protected branch rules and its role),
// the reviewers may approve (Developer role or more), a webhook sends the
// needed triggers to CHANGEBOT_EXTERNAL_URL/webhooks/gitlab and GitLab has
// not disabled it; last, the approval system answers. It never returns
// an error: a check that cannot be made is itself a finding. On GitHub
// (CHANGEBOT_PLATFORM github) the checks after the database's are
// runGitHubDoctor's.
func RunDoctor(ctx context.Context, cfg config.Config, o *DoctorOpts) []Check {
	if o == nil {
		o = &DoctorOpts{}
	}
	d := &doctor{cfg: cfg, now: o.NowFunc, projects: slices.Clone(o.Projects)}
	if d.now == nil {
		d.now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d.checkDatabase(ctx, o.Schema)
	if cfg.Platform == config.PlatformGitHub {
		d.runGitHubDoctor(ctx, log, o.HookToken)
		return d.out
	}
	client, err := gitlab.New(gitlab.Config{BaseURL: cfg.GitLabURL, Token: cfg.GitLabToken, ReviewerTokens: cfg.ReviewerTokens, Logger: log})
	if err != nil {
		d.fail("GitLab client: "+err.Error(), "fix CHANGEBOT_GITLAB_URL, CHANGEBOT_GITLAB_TOKEN and CHANGEBOT_REVIEWER_TOKENS")
		return d.out
	}
	d.gl, d.hooks = client, client
	if o.HookToken != "" {
		hc, err := gitlab.New(gitlab.Config{BaseURL: cfg.GitLabURL, Token: o.HookToken, Logger: log})
		if err != nil {
			d.fail("webhook reader token: "+err.Error(), "give a non-empty token file")
			return d.out
		}
		d.hooks = hc
	}
	d.checkRobot(ctx)
	d.checkReviewers(ctx)
	if o.HookToken != "" {
		d.checkHookToken(ctx, "GitLab", "of a project Maintainer (a group Owner for group webhooks)", d.hooks.CurrentUser)
	}
	for _, p := range d.projects {
		d.checkProject(ctx, p)
	}
	d.checkApprovalURL(ctx)
	return d.out
}

// DoctorSummary counts checks per level: "12 OK, 1 WARN, 3 FAIL".
func DoctorSummary(checks []Check) (summary string, fails int) {
	n := map[string]int{}
	for _, c := range checks {
		n[c.Level]++
	}
	return fmt.Sprintf("%d OK, %d WARN, %d FAIL", n[CheckOK], n[CheckWarn], n[CheckFail]), n[CheckFail]
}

type doctor struct {
	cfg       config.Config
	now       func() time.Time
	gl        doctorGitLab
	hooks     hookReader
	projects  []string
	robot     platform.User
	reviewers []platform.User // zero User when its token failed
	// hookUser is the user of DoctorOpts.HookToken once it answered;
	// hookRefused is set when the platform refused that token (the webhook
	// checks are then skipped: checkHookToken's FAIL says why).
	hookUser    string
	hookRefused bool
	out         []Check
}

// hookTokenWhat names the -hook-token-file token in doctor's findings.
const hookTokenWhat = "hook token (-hook-token-file)"

// checkHookToken asks the platform (GitLab or GitHub) who the
// -hook-token-file token is, so that a refused token is reported as that
// token, not the robot's. whose says whose token it should be.
func (d *doctor) checkHookToken(ctx context.Context, plat, whose string, currentUser func(context.Context) (platform.User, error)) {
	u, err := currentUser(ctx)
	switch {
	case err == nil:
		d.hookUser = u.Username
		d.ok(fmt.Sprintf("%s: user %s (id %d), a valid token; the webhooks are read with it", hookTokenWhat, u.Username, u.ID))
	case errors.Is(err, platform.ErrForbidden):
		d.hookRefused = true
		d.fail(fmt.Sprintf("%s: %s refused it (401): revoked, expired or mistyped, so no webhook is checked", hookTokenWhat, plat),
			fmt.Sprintf("put a valid token %s in the -hook-token-file file, or leave -hook-token-file out to read the webhooks with the robot's token", whose))
	default:
		d.hookRefused = true
		d.fail(fmt.Sprintf("%s: %s did not answer (%v), so no webhook is checked", hookTokenWhat, plat, err),
			"check that "+plat+" is reachable from here")
	}
}

// hookReaderName is who read the webhooks, for a finding that it may not.
func (d *doctor) hookReaderName() string {
	if d.hookUser != "" {
		return d.hookUser + " (the -hook-token-file token)"
	}
	return "the robot"
}

func (d *doctor) ok(what string) { d.out = append(d.out, Check{Level: CheckOK, What: what}) }
func (d *doctor) warn(what, fix string) {
	d.out = append(d.out, Check{Level: CheckWarn, What: what, Fix: fix})
}
func (d *doctor) fail(what, fix string) {
	d.out = append(d.out, Check{Level: CheckFail, What: what, Fix: fix})
}
func (d *doctor) addProject(p string) { d.projects = appendNew(d.projects, p) }
func appendNew(l []string, s string) []string {
	if s == "" || slices.Contains(l, s) {
		return l
	}
	return append(l, s)
}

// checkDatabase connects, checks the migrations, and adds the projects
// named by stored project-scoped settings.
func (d *doctor) checkDatabase(ctx context.Context, schema string) {
	const fix = "check DATABASE_URL and that PostgreSQL accepts connections (or that the SQLite file exists)"
	url := d.cfg.ResolvedDatabaseURL()
	target, err := config.ParseDatabaseTarget(url)
	if err != nil {
		d.fail("database: DATABASE_URL is not a connection string", fix)
		return
	}
	sqliteStart := "changebot serve creates the file and applies the migrations when it first starts (or run changebot migrate now)"
	if target.Engine == config.EngineSQLite {
		if _, serr := os.Stat(target.Path); errors.Is(serr, fs.ErrNotExist) {
			// Day one on SQLite: nothing to fix, serve makes it.
			d.warn(fmt.Sprintf("database: no SQLite file at %s yet, expected before the first start", target.Path), sqliteStart)
			return
		}
	}
	db, err := database.OpenExisting(ctx, url, schema)
	var st store.Store
	if err == nil {
		defer db.Close()
		if st, err = db.Store(nil); err == nil {
			err = st.Ping(ctx)
		}
	}
	if err != nil {
		d.fail(fmt.Sprintf("database %s: unreachable (%v)", config.RedactDatabaseURL(url), err), fix)
		return
	}
	version, current, err := db.MigrationStatus()
	switch {
	case err != nil:
		d.fail(fmt.Sprintf("database: migration state unreadable (%v)", err), "run changebot migrate")
		return
	case !current && version == db.LatestMigration():
		d.fail(fmt.Sprintf("database: migration %d failed half-way (dirty)", version), "repair the schema by hand, then run changebot migrate")
		return
	case !current && target.Engine == config.EngineSQLite && version < db.LatestMigration():
		d.warn(fmt.Sprintf("database: SQLite file %s at migration version %d of %d", target.Path, version, db.LatestMigration()),
			"changebot serve applies the migrations when it starts (or run changebot migrate now)")
		return
	case !current:
		d.fail(fmt.Sprintf("database: migrations at version %d of %d", version, db.LatestMigration()), "run changebot migrate (or set CHANGEBOT_AUTO_MIGRATE=true)")
		return
	}
	d.ok(fmt.Sprintf("database: reachable, migrations at version %d", version))
	d.checkApprovalWaits(ctx, st)
	stored, err := st.ListSettings(ctx, st.DB())
	if err != nil {
		d.warn(fmt.Sprintf("database: stored settings unreadable (%v)", err), "projects named by project settings are not checked; name them with -project")
		return
	}
	for _, s := range stored {
		if p, ok := strings.CutPrefix(s.Scope, "project:"); ok {
			d.addProject(p)
		}
	}
}

// ApprovalWaitWarning is how long the oldest change may wait in
// APPROVAL_SENT before doctor warns. A change waits there until the
// approval system's callback is accepted: a callback signed with another
// key than callback_secret is refused (401), and the change then waits for
// ever while the hint says it waits for an approver. Doctor cannot know the
// approval system's key; a long wait is what it can see.
const ApprovalWaitWarning = time.Hour

// checkApprovalWaits reports the changes waiting for an approval decision,
// warning when the oldest waits longer than ApprovalWaitWarning.
func (d *doctor) checkApprovalWaits(ctx context.Context, st store.Store) {
	ages, err := st.CountByStatusWithAge(ctx, st.DB(), []string{store.StatusApprovalSent})
	if err != nil {
		d.warn(fmt.Sprintf("database: changes waiting for an approval decision unreadable (%v)", err), "check the database")
		return
	}
	var n int
	var oldest time.Time
	for _, a := range ages {
		if a.Status == store.StatusApprovalSent && a.Count > 0 {
			n, oldest = a.Count, a.OldestUpdatedAt
		}
	}
	if n == 0 {
		return
	}
	waited := d.now().Sub(oldest).Truncate(time.Minute)
	what := fmt.Sprintf("approval: %d change(s) wait in APPROVAL_SENT for a decision, the oldest since %s (%s)", n, oldest.UTC().Format(time.RFC3339), waited)
	if waited < ApprovalWaitWarning {
		d.ok(what)
		return
	}
	d.warn(what, "if the approval system has decided them, its callbacks are refused: check that callback_secret (CHANGEBOT_CALLBACK_SECRET) "+
		"is the key it signs with (refusals show as changebot_callbacks_total{kind=\"approval\",result=\"unauthorized\"}, "+
		"a WARN \"callback refused: invalid signature\" in serve's log, and in those changes' hint)")
}

// tokenFinding turns a token read failure into its check.
func (d *doctor) tokenFinding(what, env string, err error) {
	switch {
	case errors.Is(err, platform.ErrForbidden):
		d.fail(what+": GitLab refused it (401): revoked, expired or mistyped",
			"create a new access token with scope api for that account and set "+env)
	case errors.Is(err, platform.ErrNotFound):
		d.warn(what+": GitLab does not show its details (GET /personal_access_tokens/self answered 404; GitLab before 15.5?)",
			"check its expiry date and scope api in GitLab by hand")
	default:
		d.fail(fmt.Sprintf("%s: GitLab at %s did not answer (%v)", what, d.cfg.GitLabURL, err),
			"check CHANGEBOT_GITLAB_URL and that GitLab is reachable from here")
	}
}

// tokenDetails checks scopes and expiry of a token read successfully and
// returns the text shown on an OK line, or "" when it reported a finding.
func (d *doctor) tokenDetails(what, env string, ti platform.TokenInfo) (string, bool) {
	if !slices.Contains(ti.Scopes, "api") {
		d.fail(fmt.Sprintf("%s: scopes %s lack api, so it cannot write", what, strings.Join(ti.Scopes, ", ")),
			"create a token with scope api and set "+env)
		return "", false
	}
	if ti.ExpiresAt.IsZero() {
		return "scope api, never expires", true
	}
	left := ti.ExpiresAt.Sub(d.now())
	day := ti.ExpiresAt.Format(time.DateOnly)
	if left < TokenExpiryWarning {
		d.warn(fmt.Sprintf("%s: expires %s (in %d days)", what, day, max(0, int(left.Hours()/24))),
			"rotate it (POST /personal_access_tokens/self/rotate, or a new token) and update "+env+" before then")
		return "", false
	}
	return fmt.Sprintf("scope api, expires %s", day), true
}

func (d *doctor) checkRobot(ctx context.Context) {
	const what, env = "robot token", "CHANGEBOT_GITLAB_TOKEN"
	ti, err := d.gl.TokenInfo(ctx)
	if err != nil && !errors.Is(err, platform.ErrNotFound) {
		d.tokenFinding(what, env, err)
		return
	}
	u, uerr := d.gl.CurrentUser(ctx)
	if uerr != nil {
		d.tokenFinding(what, env, uerr)
		return
	}
	d.robot = u
	if err != nil {
		d.tokenFinding(fmt.Sprintf("%s (user %s)", what, u.Username), env, err)
		return
	}
	if details, ok := d.tokenDetails(fmt.Sprintf("%s (user %s)", what, u.Username), env, ti); ok {
		d.ok(fmt.Sprintf("%s: user %s (id %d), %s", what, u.Username, u.ID, details))
	}
}

func (d *doctor) checkReviewers(ctx context.Context) {
	const env = "CHANGEBOT_REVIEWER_TOKENS"
	n := d.gl.ReviewerCount()
	d.reviewers = make([]platform.User, n)
	if n == 0 {
		d.warn("reviewer tokens: none configured, so no robot approves the merge requests",
			"set "+env+" when the projects require approvals")
		return
	}
	for i := range n {
		what := fmt.Sprintf("reviewer token %d", i+1)
		ti, err := d.gl.ReviewerTokenInfo(ctx, i)
		if err != nil && !errors.Is(err, platform.ErrNotFound) {
			d.tokenFinding(what, env, err)
			continue
		}
		u, uerr := d.gl.Reviewer(ctx, i)
		if uerr != nil {
			d.tokenFinding(what, env, uerr)
			continue
		}
		what = fmt.Sprintf("%s (user %s)", what, u.Username)
		if d.robot.ID != 0 && u.ID == d.robot.ID {
			d.fail(what+": it is the robot's own account, and GitLab does not count an author's approval",
				"give each reviewer robot its own account and token")
			continue
		}
		if j := slices.IndexFunc(d.reviewers, func(r platform.User) bool { return r.ID == u.ID }); j >= 0 {
			d.fail(fmt.Sprintf("%s: same user as reviewer token %d, and GitLab counts one approval per user", what, j+1),
				"give each reviewer robot its own account and token")
			continue
		}
		d.reviewers[i] = u
		if err != nil {
			d.tokenFinding(what, env, err)
			continue
		}
		if details, ok := d.tokenDetails(what, env, ti); ok {
			d.ok(fmt.Sprintf("%s: %s", what, details))
		}
	}
}

func (d *doctor) checkProject(ctx context.Context, ref string) {
	p, err := d.gl.Project(ctx, ref)
	if err != nil {
		if errors.Is(err, platform.ErrNotFound) {
			d.fail(fmt.Sprintf("project %s: not found, or not visible to the robot", ref),
				"check the path, and add the robot as a member of the project")
		} else {
			d.fail(fmt.Sprintf("project %s: unreadable (%v)", ref, err), "check that GitLab is reachable and the robot token valid")
		}
		return
	}
	name := p.PathWithNamespace
	if d.robot.ID != 0 {
		d.checkMergeRights(ctx, p)
	}
	d.checkApprovers(ctx, p)
	d.checkWebhook(ctx, name)
}

// checkMergeRights: the robot pushes its branches (Developer) and merges
// into the target branch: when protected, its merge_access_levels
// decide (doc/api/protected_branches.md; 0 is "No one").
func (d *doctor) checkMergeRights(ctx context.Context, p platform.Project) {
	name, branch := p.PathWithNamespace, p.DefaultBranch
	access, err := d.gl.MemberAccess(ctx, p.ID, d.robot.ID)
	if err != nil {
		d.fail(fmt.Sprintf("robot role in %s: unreadable (%v)", name, err), "check that the robot is a member of the project")
		return
	}
	level, protected, err := d.gl.MergeAccessLevel(ctx, p.ID, branch)
	if err != nil {
		d.fail(fmt.Sprintf("protection of %s in %s: unreadable (%v)", branch, name, err), "check that the robot is a member of the project")
		return
	}
	const settingsPage = "Settings → Repository → Protected branches"
	if protected && level == 0 {
		d.fail(fmt.Sprintf("robot %s may not merge into %s of %s: no role may merge into it (only named users or groups, or no one)", d.robot.Username, branch, name),
			fmt.Sprintf("allow Maintainers (or the robot) to merge into %s in %s", branch, settingsPage))
		return
	}
	need := platform.AccessDeveloper
	if protected {
		need = max(need, level)
	}
	if access < need {
		fix := fmt.Sprintf("give %s the %s role in %s", d.robot.Username, roleName(need), name)
		if protected && access == platform.AccessDeveloper {
			fix += fmt.Sprintf(", or allow \"Developers + Maintainers\" to merge into %s in %s", branch, settingsPage)
		}
		d.fail(fmt.Sprintf("robot %s may not push and merge into %s of %s: its role is %s, merging needs %s",
			d.robot.Username, branch, name, roleName(access), roleName(need)), fix)
		return
	}
	d.ok(fmt.Sprintf("robot %s may push and merge into %s of %s (%s)", d.robot.Username, branch, name, roleName(access)))
}

// checkApprovers: approving needs the Developer role (GitLab's
// :approve_merge_request).
func (d *doctor) checkApprovers(ctx context.Context, p platform.Project) {
	var ok []string
	for _, r := range d.reviewers {
		if r.ID == 0 {
			continue
		}
		access, err := d.gl.MemberAccess(ctx, p.ID, r.ID)
		switch {
		case err != nil:
			d.fail(fmt.Sprintf("reviewer %s in %s: role unreadable (%v)", r.Username, p.PathWithNamespace, err), "check that GitLab is reachable")
		case access < platform.AccessDeveloper:
			d.fail(fmt.Sprintf("reviewer %s may not approve in %s: its role is %s, approving needs Developer", r.Username, p.PathWithNamespace, roleName(access)),
				fmt.Sprintf("give %s the Developer role in %s", r.Username, p.PathWithNamespace))
		default:
			ok = append(ok, r.Username)
		}
	}
	if len(ok) > 0 {
		d.ok(fmt.Sprintf("reviewers %s may approve in %s", strings.Join(ok, ", "), p.PathWithNamespace))
	}
}

// checkWebhook looks for a project webhook, else a webhook of the
// project's group, sending to the bot.
func (d *doctor) checkWebhook(ctx context.Context, project string) {
	want := d.cfg.ExternalURL + config.GitLabWebhookPath
	fix := "run changebot setup -project " + project
	if d.hookRefused {
		return
	}
	hooks, err := d.hooks.Webhooks(ctx, platform.HookOwner{ID: project})
	if errors.Is(err, platform.ErrForbidden) {
		who := d.hookReaderName()
		if d.hookUser == "" {
			if u, uerr := d.hooks.CurrentUser(ctx); uerr == nil {
				who = u.Username
			}
		}
		d.warn(fmt.Sprintf("webhook of %s: %s may not read webhooks (Maintainer role needed), so it is not checked", project, who),
			fmt.Sprintf("run changebot doctor -hook-token-file <file with a Maintainer's token>, or check Settings → Webhooks for %s with %s", want, triggerLabels()))
		return
	}
	if err != nil {
		d.fail(fmt.Sprintf("webhook of %s: unreadable (%v)", project, err), "check that GitLab is reachable")
		return
	}
	owner := "project " + project
	h, found := findHook(hooks, want)
	// Webhooks of the project's group and of every group above it
	// (Premium) also send the project's events; 403 or 404 (Free, or not
	// an Owner) just means there are none to see.
	for group := project; !found && strings.Contains(group, "/"); {
		group = group[:strings.LastIndex(group, "/")]
		if gh, err := d.hooks.Webhooks(ctx, platform.HookOwner{Group: true, ID: group}); err == nil {
			if h, found = findHook(gh, want); found {
				owner = "group " + group
			}
		}
	}
	if !found {
		d.fail(fmt.Sprintf("webhook of %s: none sends to %s", project, want), fix)
		return
	}
	if missing := missingTriggers(h); len(missing) > 0 {
		d.fail(fmt.Sprintf("webhook %d of %s lacks the triggers %s", h.ID, owner, strings.Join(missing, ", ")), fix)
		return
	}
	switch {
	case h.AlertStatus == platform.WebhookDisabled:
		d.fail(fmt.Sprintf("webhook %d of %s is disabled: GitLab stopped sending after its deliveries kept failing", h.ID, owner),
			"see why in Settings → Webhooks → Edit → Recent events, fix it, then "+fix+" (its successful test re-enables the hook)")
		return
	case h.AlertStatus == platform.WebhookTemporarilyDisabled || h.DisabledUntil.After(d.now()):
		until := "for now"
		if !h.DisabledUntil.IsZero() {
			until = "until " + h.DisabledUntil.Format(time.RFC3339)
		}
		d.fail(fmt.Sprintf("webhook %d of %s is disabled %s after failed deliveries", h.ID, owner, until),
			"see why in Settings → Webhooks → Edit → Recent events, fix it, then "+fix+" (its successful test re-enables the hook)")
		return
	}
	if strings.HasPrefix(want, "https://") && !h.EnableSSLVerification {
		d.warn(fmt.Sprintf("webhook %d of %s sends to %s without verifying its TLS certificate", h.ID, owner, want), fix)
		return
	}
	d.ok(fmt.Sprintf("webhook %d of %s sends %s to %s", h.ID, owner, triggerLabels(), want))
}

// findHook returns the hook sending to url (a trailing slash aside).
func findHook(hooks []platform.Webhook, url string) (platform.Webhook, bool) {
	for _, h := range hooks {
		if strings.TrimRight(h.URL, "/") == strings.TrimRight(url, "/") {
			return h, true
		}
	}
	return platform.Webhook{}, false
}

func missingTriggers(h platform.Webhook) []string {
	var out []string
	for _, t := range neededTriggers {
		if !h.Triggers[t.name] {
			out = append(out, t.label)
		}
	}
	return out
}

// triggerLabels names the needed triggers, "Merge request events,
// Pipeline events and Comments".
func triggerLabels() string {
	var l []string
	for _, t := range neededTriggers {
		l = append(l, t.label)
	}
	return strings.Join(l[:len(l)-1], ", ") + " and " + l[len(l)-1]
}

// checkApprovalURL asks the approval system GET {url}/approvals: any
// answer below 500 shows it is there (the bot only POSTs to it).
func (d *doctor) checkApprovalURL(ctx context.Context) {
	url := d.cfg.ApprovalURL
	if url == "" {
		d.ok(fmt.Sprintf("approval system: none configured (initial setting approval.provider %q)", d.cfg.Settings[settings.ApprovalProvider]))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/approvals", nil)
	if err != nil {
		d.fail("approval system: CHANGEBOT_APPROVAL_URL is not a URL", "fix CHANGEBOT_APPROVAL_URL")
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.fail(fmt.Sprintf("approval system at %s: no answer (%v)", url, err), "check CHANGEBOT_APPROVAL_URL and that the approval system is up")
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	if resp.StatusCode >= 500 {
		d.warn(fmt.Sprintf("approval system at %s: answered %d to GET /approvals", url, resp.StatusCode), "check the approval system's health")
		return
	}
	d.ok(fmt.Sprintf("approval system at %s answers (%d to GET /approvals)", url, resp.StatusCode))
}

// roleName names a GitLab access level (doc/api/members.md).
func roleName(level int) string {
	switch {
	case level >= platform.AccessOwner:
		return "Owner"
	case level >= platform.AccessMaintainer:
		return "Maintainer"
	case level >= platform.AccessDeveloper:
		return "Developer"
	case level >= platform.AccessReporter:
		return "Reporter"
	case level > 0:
		return "Guest"
	}
	return "none (not a member)"
}
