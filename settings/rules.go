package settings

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// rule is an order two settings must keep in every scope: Low below High
// (or at most High when OrEqual), each read as the value in effect there.
type rule struct {
	Low, High string
	OrEqual   bool
	// Why says what goes wrong otherwise, for the error.
	Why string
}

// rules are the checks between settings (Cache.Set and the config file's
// initial values). Each pair is ints or durations.
var rules = []rule{
	{Low: GitLabBudgetReserve, High: GitLabBudgetBurst,
		Why: "the reserve is kept out of the burst, so polls of waiting changes would never get a call"},
	{Low: PollShortInterval, High: PollLongInterval, OrEqual: true,
		Why: "the long interval is for later polls, which never come sooner than the first ones"},
	{Low: ReconcileMinAge, High: ReconcileMaxAge,
		Why: "the reconciler looks at MERGED changes between the two ages, so it would look at none"},
	{Low: JobsRescueAfter, High: SweeperAfter,
		Why: "a dead replica's job must be rescued before the sweeper re-enqueues its change, or the step runs twice"},
}

// ErrConflict is returned (wrapped in a *ConflictError) for a value that
// breaks a rule between two settings.
var ErrConflict = errors.New("settings conflict")

// ConflictError names the two settings of a broken rule, their values in
// effect and the scope where they meet.
type ConflictError struct {
	Low, High           string
	LowValue, HighValue string
	OrEqual             bool
	Scope               string
	Why                 string
}

// Error implements error.
func (e *ConflictError) Error() string {
	rel := "below"
	if e.OrEqual {
		rel = "at most"
	}
	return fmt.Sprintf("%s (%s) must be %s %s (%s) in scope %s: %s", e.Low, e.LowValue, rel, e.High, e.HighValue, e.Scope, e.Why)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// ordinal returns an int or duration value as a number to compare.
func ordinal(v Value) int64 {
	if v.Kind == KindDuration {
		return int64(v.Duration() / time.Nanosecond)
	}
	return int64(v.Int())
}

// effective is the value of key for project ("" for global): the stored
// project value (never for a global-only key), the stored global value,
// the initial value, then the default.
func effective(stored map[rowKey]Value, initial map[string]Value, d Def, project string) Value {
	if project = strings.TrimSpace(project); project != "" && !d.GlobalOnly {
		if v, ok := stored[rowKey{d.Key, Scope(project)}]; ok {
			return v
		}
	}
	if v, ok := stored[rowKey{d.Key, scopeGlobal}]; ok {
		return v
	}
	if v, ok := initial[d.Key]; ok {
		return v
	}
	v, err := d.ParseText(d.Default)
	if err != nil {
		panic(fmt.Sprintf("settings: default of %s does not validate: %v", d.Key, err))
	}
	v.Scope, v.Source = scopeGlobal, SourceDefault
	return v
}

// checkRules checks the rules that involve key (every rule when key is "")
// with the values of stored, initial and the defaults: in the scope of
// project, and when project is "" (a global change) also in every project
// scope holding a stored value of either setting of a rule, since those
// projects combine it with the global value.
func checkRules(initial map[string]Value, stored map[rowKey]Value, key, project string) []error {
	var errs []error
	for _, r := range rules {
		if key != "" && key != r.Low && key != r.High {
			continue
		}
		projects := []string{strings.TrimSpace(project)}
		if projects[0] == "" {
			for rk := range stored {
				if p, ok := strings.CutPrefix(rk.scope, scopeProjectPrefix); ok && (rk.key == r.Low || rk.key == r.High) && !slices.Contains(projects, p) {
					projects = append(projects, p)
				}
			}
			slices.Sort(projects[1:])
		}
		low, _ := Lookup(r.Low)
		high, _ := Lookup(r.High)
		for _, p := range projects {
			lv, hv := effective(stored, initial, low, p), effective(stored, initial, high, p)
			if a, b := ordinal(lv), ordinal(hv); a < b || (r.OrEqual && a == b) {
				continue
			}
			errs = append(errs, &ConflictError{Low: r.Low, High: r.High, LowValue: lv.String(), HighValue: hv.String(),
				OrEqual: r.OrEqual, Scope: Scope(p), Why: r.Why})
		}
	}
	return errs
}
