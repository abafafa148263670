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
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"changebot/flows"
	"changebot/settings"
	"changebot/store/postgres"
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

// settingView is a setting as the API and the CLI show it.
type settingView struct {
	Key       string          `json:"key"`
	Scope     string          `json:"scope"`
	Value     json.RawMessage `json:"value"`
	UpdatedBy string          `json:"updated_by"`
	UpdatedAt *time.Time      `json:"updated_at"`
	Source    string          `json:"source"`
}

func newSettingView(v settings.Value) settingView {
	sv := settingView{Key: v.Key, Scope: v.Scope, Value: v.JSON(), UpdatedBy: v.UpdatedBy, Source: v.Source}
	if !v.UpdatedAt.IsZero() {
		t := v.UpdatedAt.UTC()
		sv.UpdatedAt = &t
	}
	return sv
}

const settingsUsage = `Usage:
  changebot settings get [<key>] [-project P] [-config file]
  changebot settings set <key> <value> [-project P] [-by user] [-config file]

<value> is JSON (true, 8, "30s", null to remove the stored value); a bare
word that is not JSON is taken as a string, so 30s and gitlab work as is.
Needs only DATABASE_URL (and the config file for initial values).
`

// cmdSettings runs "changebot settings get|set".
func cmdSettings(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "get" && args[0] != "set") {
		return errors.New("want get or set (see changebot help)")
	}
	verb := args[0]
	fs := flag.NewFlagSet("settings "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("config", os.Getenv("CHANGEBOT_CONFIG"), "YAML configuration file")
	project := fs.String("project", "", "project path or numeric id (default: global)")
	by := fs.String("by", "", "who makes the change (default cli:$USER)")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return fmt.Errorf("%w\n%s", err, settingsUsage)
	}
	cfg, err := loadDatabaseConfig(*path, nil, nil)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connecting to the database: %w", errors.New("invalid DATABASE_URL"))
	}
	defer pool.Close()
	st, err := postgres.New(pool, nil)
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
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	switch {
	case verb == "get" && len(pos) == 0:
		views := []settingView{}
		for _, v := range cache.List(*project) {
			views = append(views, newSettingView(v))
		}
		return enc.Encode(views)
	case verb == "get" && len(pos) == 1:
		v, err := cache.Lookup(pos[0], *project)
		if err != nil {
			return err
		}
		return enc.Encode(newSettingView(v))
	case verb == "set" && len(pos) == 2:
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
		v, err := cache.Lookup(pos[0], *project)
		if err != nil {
			return err
		}
		return enc.Encode(newSettingView(v))
	default:
		return errors.New("wrong number of arguments (see changebot help)")
	}
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
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
	if v, current, serr := postgres.MigrationStatus(a.pool, a.schema); serr == nil && !current {
		a.log.Error("database migrations not applied: run changebot migrate; serving with config values and default settings, /readyz answers 503 until then",
			"migration_version", v, "migration_want", postgres.LatestMigration, "err", err)
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
