package bot

import (
	"fmt"
	"strings"

	"changebot/commands"
	"changebot/flows"
)

// ReadmeSections returns the generated parts of README.md, keyed by the
// name of their markers (<!-- BEGIN name --> ... <!-- END name -->): the
// command table (from the command registry), the configuration table (from
// ConfigReference), the settings table (SettingsReference) and the step
// catalogue (flows.Catalogue). A test keeps README.md equal to them.
func ReadmeSections() map[string]string {
	var cfg strings.Builder
	cfg.WriteString("| environment | YAML key | default | secret | meaning |\n| --- | --- | --- | --- | --- |\n")
	for _, v := range ConfigReference() {
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
	var steps strings.Builder
	steps.WriteString("| code | step | phase | binding status | terminal | /retry | /resume | what to do |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	yes := map[bool]string{true: "yes", false: ""}
	for _, s := range flows.Catalogue() {
		fmt.Fprintf(&steps, "| %d | `%s` | %s | `%s` | %s | %s | %s | %s |\n", s.Code, s.Name, s.Phase, s.Status,
			yes[s.Terminal], yes[s.Retryable], yes[s.Resumable], s.Hint)
	}
	return map[string]string{
		"commands": commands.ReadmeTable(),
		"config":   cfg.String(),
		"settings": set.String(),
		"steps":    steps.String(),
	}
}
