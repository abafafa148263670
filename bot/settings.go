package bot

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"changebot/api"
	"changebot/api/backend"
	"changebot/config"
	"changebot/database"
	"changebot/flows"
	"changebot/settings"
)

// SettingDoc documents one setting key: its default and unit.
type SettingDoc struct {
	Key, Default, Unit, Description string
}

// SettingsReference lists the runtime settings of the settings registry
// (README "Settings"), in registry order. Durations are Go durations ("30s",
// "10m").
func SettingsReference() []SettingDoc {
	defs := settings.Defs()
	out := make([]SettingDoc, 0, len(defs))
	for _, d := range defs {
		desc := d.Doc
		if d.Kind == settings.KindEnum {
			desc += " (one of `" + strings.Join(d.Enum, "`, `") + "`)"
		}
		if d.GlobalOnly {
			desc += " (global only)"
		}
		def := d.Default
		if def == "" {
			def = `""`
		}
		out = append(out, SettingDoc{Key: d.Key, Default: def, Unit: d.Unit, Description: desc})
	}
	return out
}

// initialSettings returns the config file's settings with the polling
// schedule of AppOpts.Poll (demo and tests) laid over them: both are
// initial values, which stored settings override.
func initialSettings(cfg map[string]string, poll flows.PollConfig) map[string]string {
	out := maps.Clone(cfg)
	if out == nil {
		out = map[string]string{}
	}
	if poll == (flows.PollConfig{}) {
		return out
	}
	for k, d := range map[string]time.Duration{
		settings.PollShortInterval: poll.ShortInterval, settings.PollLongInterval: poll.LongInterval,
		settings.PipelineDeadline: poll.PipelineDeadline, settings.RebaseDeadline: poll.RebaseDeadline,
		settings.DeployDeadline: poll.DeployDeadline, settings.NoteDelay: poll.NoteDelay,
	} {
		if d > 0 {
			out[k] = d.String()
		}
	}
	out[settings.PollShortCount] = strconv.Itoa(poll.ShortCount)
	if poll.MaxRounds > 0 {
		out[settings.MergeMaxRounds] = strconv.Itoa(poll.MaxRounds)
	}
	if poll.ApproveMaxRetries > 0 {
		out[settings.ApproveMaxRetries] = strconv.Itoa(poll.ApproveMaxRetries)
	}
	return out
}

// pollFromSettings builds the polling schedule of project from the runtime
// settings (flows.EngineConfig.PollFunc).
func pollFromSettings(c *settings.Cache, project string) flows.PollConfig {
	get := func(key string) settings.Value { return c.Get(key, project) }
	retries := get(settings.ApproveMaxRetries).Int()
	if retries == 0 {
		retries = -1 // PollConfig: zero means its default, negative means none
	}
	return flows.PollConfig{
		ShortInterval:     get(settings.PollShortInterval).Duration(),
		ShortCount:        get(settings.PollShortCount).Int(),
		LongInterval:      get(settings.PollLongInterval).Duration(),
		PipelineDeadline:  get(settings.PipelineDeadline).Duration(),
		RebaseDeadline:    get(settings.RebaseDeadline).Duration(),
		DeployDeadline:    get(settings.DeployDeadline).Duration(),
		NoteDelay:         get(settings.NoteDelay).Duration(),
		MaxRounds:         get(settings.MergeMaxRounds).Int(),
		ApproveMaxRetries: retries,
	}
}

const settingsUsage = `Usage:
  changebot settings get [<key>] [-project P] [-json] [-config file]
  changebot settings set <key> <value> [-project P] [-by user] [-json] [-config file]
  changebot settings set [-project P] [-by user] [-json] [-config file] <key> -- <value>

get and set print a table: key, value (text form), scope and source of the
value in effect, who stored it and when, and notes (global only, read at
start only); -json prints what GET /api/v1/settings answers instead.
<value> is JSON (true, 8, "30s", null to remove the stored value); a bare
word that is not JSON is taken as a string, so 30s and gitlab work as is.
A value that starts with "-" goes after "--", flags before it
(set -project grp/app approval.approvers -- -bot).
Values are checked as the REST API checks them: counts are never negative,
durations are at least 1s (note.delay 100ms), approval.min_access is 0 or
a GitLab access level (10, 20, 30, 40, 50), a global-only setting takes no
-project, and these orders hold with the values in effect after the change:
gitlab.budget_reserve < gitlab.budget_burst, poll.short_interval <=
poll.long_interval, reconcile.min_age < reconcile.max_age,
jobs.rescue_after < sweeper.after. A refused value stores nothing.
Needs only DATABASE_URL; the config file is serve's (-config, default
$CHANGEBOT_CONFIG), whose settings: map gives the initial values.
`

// cmdSettings runs "changebot settings get|set".
func cmdSettings(ctx context.Context, args []string, stdout io.Writer) (err error) {
	if len(args) == 0 || (args[0] != "get" && args[0] != "set") {
		return usagef("want get or set\n%s", settingsUsage)
	}
	verb := args[0]
	fs := flag.NewFlagSet("settings "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("config", os.Getenv("CHANGEBOT_CONFIG"), "YAML configuration file")
	project := fs.String("project", "", "project path or numeric id (default: global)")
	by := fs.String("by", "", "who makes the change (default cli:$USER)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	pos, err := parseInterleaved(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, settingsUsage)
		return err
	}
	if err != nil {
		return usageError{msg: err.Error(), usage: settingsUsage}
	}
	switch {
	case verb == "get" && len(pos) > 1, verb == "set" && len(pos) != 2:
		return usagef("wrong number of arguments: settings %s takes %s\n%s", verb, map[string]string{"get": "at most one key", "set": "a key and a value"}[verb], settingsUsage)
	}
	cfg, err := config.LoadDatabase(*path, nil, nil)
	if err != nil {
		return err
	}
	db, err := database.OpenExisting(ctx, cfg.ResolvedDatabaseURL(), "")
	if err != nil {
		return err
	}
	defer db.Close()
	defer func() { err = db.ExplainMissingSchema(err) }()
	st, err := db.Store(nil)
	if err != nil {
		return err
	}
	cache, err := settings.NewCache(settings.CacheConfig{Store: st, Initial: cfg.Settings})
	if err != nil {
		return err
	}
	if err := cache.Load(ctx); err != nil {
		return err
	}
	switch {
	case verb == "get" && len(pos) == 0:
		return printSettings(stdout, *asJSON, false, cache.List(*project))
	case verb == "set":
		actor := *by
		if actor == "" {
			actor = "cli:" + cmp.Or(os.Getenv("USER"), "unknown")
		}
		raw := json.RawMessage(pos[1])
		if !json.Valid(raw) {
			raw, _ = json.Marshal(pos[1])
		}
		if err := cache.Set(ctx, pos[0], *project, raw, actor); err != nil {
			return err
		}
	}
	v, err := cache.Lookup(pos[0], *project)
	if err != nil {
		return err
	}
	return printSettings(stdout, *asJSON, true, []settings.Value{v})
}

// printSettings writes vals as a table for a person, or as JSON (one
// object when single, else an array) in the REST API's shape.
func printSettings(w io.Writer, asJSON, single bool, vals []settings.Value) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if single {
			return enc.Encode(backend.SettingOf(vals[0]))
		}
		views := make([]api.SettingView, 0, len(vals))
		for _, v := range vals {
			views = append(views, backend.SettingOf(v))
		}
		return enc.Encode(views)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tSCOPE\tSOURCE\tUPDATED BY\tUPDATED AT\tNOTES")
	for _, v := range vals {
		text := v.String()
		if text == "" {
			text = `""`
		}
		by, at := cmp.Or(v.UpdatedBy, "-"), "-"
		if !v.UpdatedAt.IsZero() {
			at = v.UpdatedAt.UTC().Format(time.RFC3339)
		}
		var notes []string
		d, _ := settings.Lookup(v.Key)
		if d.GlobalOnly {
			notes = append(notes, "global only")
		}
		if d.StartOnly {
			notes = append(notes, "read at start only")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Key, text, v.Scope, v.Source, by, at, strings.Join(notes, ", "))
	}
	return tw.Flush()
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments, and returns the positional ones. Everything after
// "--" is positional, so a value may start with "-"; a lone "-" is
// positional too. An argument before "--" that starts with "-" and names no
// flag is refused with that hint, not taken as a value.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		a := args[0]
		args = args[1:]
		if a == "--" {
			return append(pos, args...), nil
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if f == nil && name != "h" && name != "help" {
			return nil, fmt.Errorf("flag provided but not defined: %s (a value that starts with \"-\" goes after \"--\")", a)
		}
		one := []string{a}
		if f != nil && !hasValue && !isBoolFlag(f) && len(args) > 0 {
			one, args = append(one, args[0]), args[1:] // the flag's value is the next argument
		}
		if err := fs.Parse(one); err != nil {
			return nil, err
		}
	}
	return pos, nil
}

// isBoolFlag reports whether f takes no value (-json, not -json true).
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// buildSettings creates the settings cache from the config file's initial
// values (and AppOpts.Poll) and reads the stored values once, so that
// start-only settings see them. An unreadable table leaves config values
// and defaults; the cache Run starts keeps retrying. When the reason is
// that the migrations are not applied, one error line says to run
// `changebot migrate` (and /readyz answers 503 until then).
func (a *App) buildSettings(ctx context.Context, poll flows.PollConfig) error {
	c, err := settings.NewCache(settings.CacheConfig{Store: a.store, Initial: initialSettings(a.cfg.Settings, poll), Logger: a.log})
	if err != nil {
		return err
	}
	a.settings = c
	err = c.Load(ctx)
	if err == nil {
		return nil
	}
	if v, current, serr := a.db.MigrationStatus(); serr == nil && !current {
		a.log.Error("database migrations not applied: run changebot migrate; serving with config values and default settings, /readyz answers 503 until then",
			"migration_version", v, "migration_want", a.db.LatestMigration(), "err", err)
		return nil
	}
	a.log.Warn("settings not readable at start, using config values and defaults", "err", err)
	return nil
}

// settingText returns a setting's value for project in text form, "" for a
// key that is not registered.
func (a *App) settingText(key, project string) string {
	v, err := a.settings.Lookup(key, project)
	if err != nil {
		return ""
	}
	return v.String()
}

// Settings returns the runtime settings cache.
func (a *App) Settings() *settings.Cache { return a.settings }
