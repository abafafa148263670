package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"changebot/api"
	"changebot/api/backend"
	"changebot/settings"
)

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
	o, err := openStore(ctx, *path)
	if err != nil {
		return err
	}
	defer o.db.Close()
	defer func() { err = o.db.ExplainMissingSchema(err) }()
	cache, err := o.settings(ctx)
	if err != nil {
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
	if err := settings.CheckScope(pos[0], *project); err != nil {
		return err // as set refuses it
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
