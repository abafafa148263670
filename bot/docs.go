package bot

import (
	"fmt"
	"strings"

	"changebot/commands"
	"changebot/config"
	"changebot/flows/rules"
	"changebot/repoconfig"
)

// ReadmeSections returns the generated parts of README.md, keyed by the
// name of their markers (<!-- BEGIN name --> ... <!-- END name -->): the
// command table (from the command registry), the configuration table (from
// config.Reference), the settings table (SettingsReference), the step
// table (rules.Catalogue) and the keys of .changebot.yml (repoconfig.KeysTable,
// from its schema). A test keeps README.md equal to them.
func ReadmeSections() map[string]string {
	var cfg strings.Builder
	cfg.WriteString("| environment | YAML key | default | secret | meaning |\n| --- | --- | --- | --- | --- |\n")
	for _, v := range config.Reference() {
		env := "—"
		if v.Env != "" {
			env = "`" + v.Env + "`"
		}
		def := ""
		if v.Default != "" {
			def = "`" + v.Default + "`"
		}
		secret := ""
		if v.Secret {
			secret = "yes (also `" + v.Env + "_FILE`)"
		}
		fmt.Fprintf(&cfg, "| %s | `%s` | %s | %s | %s |\n", env, v.YAML, def, secret, v.Description)
	}
	var set strings.Builder
	set.WriteString("| key | default | unit | meaning |\n| --- | --- | --- | --- |\n")
	for _, s := range SettingsReference() {
		fmt.Fprintf(&set, "| `%s` | `%s` | %s | %s |\n", s.Key, s.Default, s.Unit, s.Description)
	}
	return map[string]string{
		"commands": commands.ReadmeTable(),
		"config":   cfg.String(),
		"settings": set.String(),
		"steps":    stepTable(),
		"keys":     repoconfig.KeysTable(),
	}
}

// stepTable renders the step table (rules.Catalogue): per step its job and
// the step that job's failure writes, where /retry and /resume send the
// change ("same" for /resume: its job is enqueued again) and what it waits
// for.
func stepTable() string {
	var b strings.Builder
	b.WriteString("| code | step | phase | binding status | terminal | job | job failure | /retry | /resume | waits for | what to do |\n" +
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	code := func(c rules.StepCode) string {
		if c == 0 {
			return ""
		}
		return "`" + c.String() + "`"
	}
	for _, s := range rules.Catalogue() {
		job, failure := "", ""
		if j := s.Job; j.Kind != "" {
			job, failure = "`"+j.Kind+"`", code(j.Failure)
		}
		if j := s.MRFirstJob; j.Kind != "" {
			job += " (MR first: `" + j.Kind + "`)"
			failure += " (MR first: " + code(j.Failure) + ")"
		}
		resume := code(s.Resume)
		if s.Resume == s.Code {
			resume = "same"
		}
		terminal := ""
		if s.Terminal {
			terminal = "yes"
		}
		fmt.Fprintf(&b, "| %d | `%s` | %s | `%s` | %s | %s | %s | %s | %s | %s | %s |\n", s.Code, s.Name, s.Phase, s.Status,
			terminal, job, failure, code(s.Retry), resume, s.Wait, s.Hint)
	}
	return b.String()
}
