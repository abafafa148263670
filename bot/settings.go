package bot

import (
	"fmt"
	"strconv"
	"time"

	"changebot/flows"
)

// SettingDoc documents one setting key: its default and unit.
type SettingDoc struct {
	Key, Default, Unit, Description string
}

// SettingsReference lists the settings read at start from the config file's
// "settings:" map (README "Settings"). Durations are Go durations ("30s",
// "10m").
func SettingsReference() []SettingDoc {
	d := flows.DefaultPollConfig
	return []SettingDoc{
		{"poll.short_interval", d.ShortInterval.String(), "duration", "interval of the first polls of a wait (pipeline, rebase, deploy)"},
		{"poll.short_count", strconv.Itoa(d.ShortCount), "count", "how many short polls before switching to the long interval"},
		{"poll.long_interval", d.LongInterval.String(), "duration", "interval of later polls"},
		{"pipeline.deadline", d.PipelineDeadline.String(), "duration", "how long to wait for a pipeline before parking the change as *_PIPELINE_PENDING"},
		{"rebase.deadline", d.RebaseDeadline.String(), "duration", "how long a rebase may run before HANDLE_REBASE_PENDING"},
		{"deploy.deadline", d.DeployDeadline.String(), "duration", "how long to wait for the deploy pipeline before DEPLOY_PENDING"},
		{"merge.max_rounds", strconv.Itoa(d.MaxRounds), "count", "rebase/re-approval rounds per change before HANDLE_FAILED"},
		{"note.delay", d.NoteDelay.String(), "duration", "how long status-comment edits wait to coalesce"},
		{"jobs.rescue_after", "5m", "duration", "a job still marked running this long after its replica died is run again"},
	}
}

// pollConfig reads the polling settings from settings over the defaults; it
// reports every malformed value at once.
func pollConfig(settings map[string]string) (flows.PollConfig, time.Duration, error) {
	p := flows.DefaultPollConfig
	rescue := 5 * time.Minute
	var ps problems
	dur := func(key string, dst *time.Duration) {
		if v, ok := settings[key]; ok {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				ps.addf("setting %s: want a positive duration like 30s, got %q", key, v)
				return
			}
			*dst = d
		}
	}
	count := func(key string, dst *int) {
		if v, ok := settings[key]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				ps.addf("setting %s: want a non-negative integer, got %q", key, v)
				return
			}
			*dst = n
		}
	}
	dur("poll.short_interval", &p.ShortInterval)
	count("poll.short_count", &p.ShortCount)
	dur("poll.long_interval", &p.LongInterval)
	dur("pipeline.deadline", &p.PipelineDeadline)
	dur("rebase.deadline", &p.RebaseDeadline)
	dur("deploy.deadline", &p.DeployDeadline)
	count("merge.max_rounds", &p.MaxRounds)
	dur("note.delay", &p.NoteDelay)
	dur("jobs.rescue_after", &rescue)
	if err := ps.err(); err != nil {
		return p, rescue, fmt.Errorf("reading settings: %w", err)
	}
	return p, rescue, nil
}
