package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"changebot/config"
	"changebot/database"
	"changebot/platform"
	"changebot/platform/gitlab"
	"changebot/store"
)

// WebhookName is the name setup gives the webhook it manages (GitLab
// 17.1+ shows it; older versions ignore it).
const WebhookName = "changebot"

// SetupOpts are the inputs of RunSetup.
type SetupOpts struct {
	// Owners are the projects and groups whose webhook is set up.
	Owners []platform.HookOwner
	// HookToken is the token that writes webhooks (a Maintainer of the
	// projects, an Owner of the groups); empty means the robot's token.
	HookToken string
	// NoTest skips the test event.
	NoTest bool
	// Force lets setup repoint a hook named "changebot" that sends to
	// another URL (another installation's, or this one's old external
	// URL); without it such a hook is left alone and the owner fails.
	Force bool
	// Schema is the PostgreSQL schema of changebot's tables (where the
	// test event's delivery is looked for); empty means the search_path.
	Schema string
	// Out receives one line per action and finding.
	Out io.Writer
	// Logger receives the GitLab client's debug records; nil discards.
	Logger *slog.Logger
}

// SetupResult is what RunSetup did to one owner's webhook.
type SetupResult struct {
	Owner platform.HookOwner
	// HookID is the webhook's id.
	HookID int64
	// Action is "created", "updated" or "unchanged".
	Action string
	// Delivered reports whether GitLab's test event reached the bot and
	// was accepted (2xx); false when not tested.
	Delivered bool
}

// Setup actions.
const (
	SetupCreated   = "created"
	SetupUpdated   = "updated"
	SetupUnchanged = "unchanged"
)

// hookWriter is what setup asks GitLab (platform/gitlab.Client).
type hookWriter interface {
	Webhooks(ctx context.Context, owner platform.HookOwner) ([]platform.Webhook, error)
	CreateWebhook(ctx context.Context, owner platform.HookOwner, p platform.WebhookParams) (platform.Webhook, error)
	UpdateWebhook(ctx context.Context, owner platform.HookOwner, id int64, p platform.WebhookParams) (platform.Webhook, error)
	TestWebhook(ctx context.Context, owner platform.HookOwner, id int64, trigger string) error
}

// RunSetup makes each owner's webhook send the needed triggers to
// CHANGEBOT_EXTERNAL_URL/webhooks/gitlab with the first of
// CHANGEBOT_WEBHOOK_SECRETS, idempotently: it finds the hook by URL (else
// by the name "changebot", repointed only with Force), creates it when
// missing, edits it only when its URL, triggers or TLS verification
// differ, and otherwise changes
// nothing and says so. GitLab never shows a hook's secret, so setup then
// asks GitLab for a test event (merge request events, or push events in a
// project without merge requests): when the bot refuses its secret, the
// secret is written and the test repeated. It reports whether the test
// arrived: GitLab's answer (the bot answered 2xx, so it took the secret)
// and the delivery the bot stored, if any (a test event of a merge
// request's open, or a push, moves no change and is not stored). It returns an error when a webhook could not be set up or
// its test did not arrive. On GitHub (CHANGEBOT_PLATFORM github) it is
// runGitHubSetup.
func RunSetup(ctx context.Context, cfg config.Config, o SetupOpts) ([]SetupResult, error) {
	if len(cfg.WebhookSecrets) == 0 || cfg.ExternalURL == "" {
		return nil, errors.New("setup needs CHANGEBOT_EXTERNAL_URL and CHANGEBOT_WEBHOOK_SECRETS")
	}
	if cfg.Platform == config.PlatformGitHub {
		return runGitHubSetup(ctx, cfg, o)
	}
	token := o.HookToken
	if token == "" {
		token = cfg.GitLabToken
	}
	client, err := gitlab.New(gitlab.Config{BaseURL: cfg.GitLabURL, Token: token, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	s := &setup{gl: client, out: o.Out, force: o.Force, hookToken: o.HookToken != "", want: platform.WebhookParams{
		URL: cfg.ExternalURL + config.GitLabWebhookPath, Name: WebhookName, Token: cfg.WebhookSecrets[0],
		EnableSSLVerification: strings.HasPrefix(cfg.ExternalURL, "https://"),
		Triggers: map[string]bool{platform.TriggerMergeRequests: true, platform.TriggerPipeline: true,
			platform.TriggerNote: true, platform.TriggerPush: false},
	}}
	if !o.NoTest {
		s.deliveries = openDeliveries(ctx, cfg.ResolvedDatabaseURL(), o.Schema, o.Out)
		defer s.deliveries.close()
	}
	var results []SetupResult
	var failed []string
	for _, owner := range o.Owners {
		r, err := s.retrying(ctx, owner, !o.NoTest)
		if err != nil {
			fmt.Fprintf(o.Out, "FAIL %s: %v\n", owner, err)
			failed = append(failed, owner.String())
			continue
		}
		results = append(results, r)
	}
	if len(failed) > 0 {
		return results, fmt.Errorf("setting up the webhook of %s failed", strings.Join(failed, ", "))
	}
	return results, nil
}

type setup struct {
	gl         hookWriter
	out        io.Writer
	want       platform.WebhookParams
	force      bool
	hookToken  bool // the token is -hook-token-file's, not the robot's
	deliveries *deliveryWatch
}

// setupAttempts is how often setup tries one owner when GitLab answers
// 5xx or 429; setupMaxWait bounds one wait (GitLab allows five hook tests
// a minute per user).
const (
	setupAttempts = 3
	setupMaxWait  = 2 * time.Minute
)

// retrying runs one again after a 5xx or 429 (GitLab's wait, else
// platform.DefaultRateLimitWait for a 429 and 2 s for a 5xx): one is
// idempotent, it finds what an earlier attempt created, so a write whose
// answer was lost is not repeated.
func (s *setup) retrying(ctx context.Context, owner platform.HookOwner, test bool) (SetupResult, error) {
	for attempt := 1; ; attempt++ {
		r, err := s.one(ctx, owner, test)
		var pe *platform.Error
		if err == nil || !errors.As(err, &pe) || !pe.Retryable() || attempt == setupAttempts {
			return r, err
		}
		wait := pe.RetryAfter
		if wait <= 0 {
			wait = 2 * time.Second
			if errors.Is(err, platform.ErrRateLimited) {
				wait = platform.DefaultRateLimitWait
			}
		}
		wait = min(wait, setupMaxWait)
		fmt.Fprintf(s.out, "%s: GitLab answered %s; trying again in %s\n", owner, pe.Answer(), wait)
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (s *setup) one(ctx context.Context, owner platform.HookOwner, test bool) (SetupResult, error) {
	r := SetupResult{Owner: owner}
	hooks, err := s.gl.Webhooks(ctx, owner)
	if err != nil {
		return r, s.hookAccessHint(owner, err)
	}
	h, found := findHook(hooks, s.want.URL)
	if !found {
		for _, c := range hooks {
			if c.Name == WebhookName {
				h, found = c, true
				break
			}
		}
		// Found by name only: it sends elsewhere, perhaps to another
		// installation's bot, which must not lose its hook silently.
		if found && !s.force {
			return r, fmt.Errorf("webhook %d is named %s but sends to %s, not %s (another installation's bot?); left unchanged. "+
				"Setup would change: %s. Run setup with -force to repoint it, or create ours beside it by renaming that hook in GitLab",
				h.ID, WebhookName, h.URL, s.want.URL, strings.Join(hookDiffs(h, s.want), "; "))
		}
	}
	switch diffs := hookDiffs(h, s.want); {
	case !found:
		if h, err = s.gl.CreateWebhook(ctx, owner, s.want); err != nil {
			return r, s.hookAccessHint(owner, err)
		}
		r.Action = SetupCreated
		fmt.Fprintf(s.out, "%s: created webhook %d sending %s to %s\n", owner, h.ID, triggerLabels(), s.want.URL)
	case len(diffs) > 0:
		if h, err = s.gl.UpdateWebhook(ctx, owner, h.ID, s.want); err != nil {
			return r, s.hookAccessHint(owner, err)
		}
		r.Action = SetupUpdated
		fmt.Fprintf(s.out, "%s: updated webhook %d (%s)\n", owner, h.ID, strings.Join(diffs, "; "))
	default:
		r.Action = SetupUnchanged
		fmt.Fprintf(s.out, "%s: webhook %d already sends %s to %s: no change\n", owner, h.ID, triggerLabels(), s.want.URL)
	}
	r.HookID = h.ID
	if h.AlertStatus == platform.WebhookDisabled || h.AlertStatus == platform.WebhookTemporarilyDisabled {
		fmt.Fprintf(s.out, "%s: GitLab had disabled webhook %d after failed deliveries (%s); a successful test re-enables it\n", owner, h.ID, h.AlertStatus)
	}
	if !test {
		return r, nil
	}
	err = s.test(ctx, owner, h.ID)
	if err != nil && r.Action != SetupCreated && strings.Contains(platformMessage(err), "invalid webhook token") {
		// The hook's secret, which GitLab never shows, is not ours.
		if _, uerr := s.gl.UpdateWebhook(ctx, owner, h.ID, s.want); uerr != nil {
			return r, s.hookAccessHint(owner, uerr)
		}
		r.Action = SetupUpdated
		fmt.Fprintf(s.out, "%s: updated webhook %d (its secret token was not one of CHANGEBOT_WEBHOOK_SECRETS)\n", owner, h.ID)
		err = s.test(ctx, owner, h.ID)
	}
	if err != nil {
		return r, err
	}
	r.Delivered = true
	return r, nil
}

// test asks GitLab for a test event and reports what arrived.
func (s *setup) test(ctx context.Context, owner platform.HookOwner, id int64) error {
	before := s.deliveries.last(ctx)
	trigger := platform.TriggerMergeRequests
	err := s.gl.TestWebhook(ctx, owner, id, trigger)
	if gitlab.ErrNoTestData(err) {
		// No merge request to build the event from: a push event also
		// goes through the bot's secret check (and is then ignored).
		trigger = platform.TriggerPush
		err = s.gl.TestWebhook(ctx, owner, id, trigger)
	}
	var pe *platform.Error
	if errors.As(err, &pe) && pe.Retryable() {
		return fmt.Errorf("asking GitLab for a test event (%s): %w", trigger, err)
	}
	if err != nil {
		return fmt.Errorf("GitLab's test event (%s) did not reach the bot: %s — check that GitLab reaches %s and that the bot runs with these secrets",
			trigger, platformMessage(err), s.want.URL)
	}
	line := fmt.Sprintf("%s: test event (%s) arrived: the bot answered 2xx", owner, trigger)
	switch got := s.deliveries.after(ctx, before, "Merge Request Hook"); {
	case got != "":
		line += " and stored it as " + got
	default:
		// GitLab's test events (a merge request's open, a push) move no
		// change: the bot checks their secret, answers and stores nothing.
		line += " (a test event moves no change: acknowledged, not stored)"
	}
	fmt.Fprintln(s.out, line)
	return nil
}

// hookDiffs names what differs between a found hook and the wanted one.
func hookDiffs(h platform.Webhook, want platform.WebhookParams) []string {
	var d []string
	if strings.TrimRight(h.URL, "/") != strings.TrimRight(want.URL, "/") {
		d = append(d, fmt.Sprintf("URL %s → %s", h.URL, want.URL))
	}
	for _, t := range []string{platform.TriggerMergeRequests, platform.TriggerPipeline, platform.TriggerNote, platform.TriggerPush} {
		if h.Triggers[t] != want.Triggers[t] {
			d = append(d, fmt.Sprintf("%s %t → %t", t, h.Triggers[t], want.Triggers[t]))
		}
	}
	if h.EnableSSLVerification != want.EnableSSLVerification {
		d = append(d, fmt.Sprintf("enable_ssl_verification %t → %t", h.EnableSSLVerification, want.EnableSSLVerification))
	}
	return d
}

// hookAccessHint words a refused webhook call for a person: a 404 as
// doctor words it (GitLab answers 404 for a project the token cannot see),
// a 401/403 with the role the token needs.
func (s *setup) hookAccessHint(owner platform.HookOwner, err error) error {
	if errors.Is(err, platform.ErrNotFound) {
		who := "the robot"
		if s.hookToken {
			who = "the account of -hook-token-file"
		}
		return fmt.Errorf("not found, or not visible to %s — check the path, and add %s as a member", who, who)
	}
	if errors.Is(err, platform.ErrForbidden) {
		role := "Maintainer of the project"
		if owner.Group {
			role = "Owner of the group (group webhooks need GitLab Premium)"
		}
		return fmt.Errorf("%w — run setup with -hook-token-file naming a file with the token of a %s", err, role)
	}
	return err
}

func platformMessage(err error) string {
	var pe *platform.Error
	if errors.As(err, &pe) {
		return pe.Answer()
	}
	return err.Error()
}

// deliveryWatch reads the bot's stored deliveries; nil (no database)
// reports nothing.
type deliveryWatch struct {
	db    *database.DB
	store store.Store
}

func openDeliveries(ctx context.Context, url, schema string, out io.Writer) *deliveryWatch {
	if _, err := config.ParseDatabaseTarget(url); err != nil {
		return nil
	}
	db, err := database.OpenExisting(ctx, url, schema)
	var st store.Store
	if err == nil {
		if st, err = db.Store(nil); err == nil {
			err = st.Ping(ctx)
		}
	}
	if err != nil {
		fmt.Fprintf(out, "(the bot's stored deliveries are not checked: database unreachable: %v)\n", err)
		if db != nil {
			db.Close()
		}
		return nil
	}
	return &deliveryWatch{db: db, store: st}
}

func (w *deliveryWatch) close() {
	if w != nil {
		w.db.Close()
	}
}

func (w *deliveryWatch) last(ctx context.Context) int64 {
	if w == nil {
		return 0
	}
	id, _ := w.store.LastDeliveryID(ctx, w.store.DB())
	return id
}

// after describes the deliveries of event stored after id, "" when none.
func (w *deliveryWatch) after(ctx context.Context, id int64, event string) string {
	if w == nil {
		return ""
	}
	ds, err := w.store.DeliveriesAfter(ctx, w.store.DB(), id)
	if err != nil || len(ds) == 0 {
		return ""
	}
	var l []string
	for _, d := range ds {
		if d.Event != event {
			continue
		}
		l = append(l, fmt.Sprintf("delivery %d (%s, project %d)", d.ID, d.Event, d.ProjectID))
	}
	return strings.Join(l, ", ")
}
