package bot

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"time"

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

// queueFromSettings builds the merge queue configuration of project from
// the runtime settings (flows.EngineConfig.QueueFunc).
func queueFromSettings(c *settings.Cache, project string) flows.QueueConfig {
	retries := c.Get(settings.QueuePipelineRetries, project).Int()
	if retries == 0 {
		retries = -1 // QueueConfig: negative means none
	}
	return flows.QueueConfig{Mode: c.Get(settings.QueueMode, project).String(), PipelineRetries: retries,
		DeferCI: c.Get(settings.QueueDeferCI, project).String()}
}

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
