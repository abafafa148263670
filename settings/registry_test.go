package settings

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRegistryDefaultsValidate(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, d := range Defs() {
		if seen[d.Key] {
			t.Errorf("%s registered twice", d.Key)
		}
		seen[d.Key] = true
		if d.Doc == "" || d.Unit == "" {
			t.Errorf("%s needs a doc and a unit", d.Key)
		}
		if _, err := d.ParseText(d.Default); err != nil {
			t.Errorf("default of %s: %v", d.Key, err)
		}
	}
	for _, k := range []string{FlowApprovalFirst, ApprovalProvider, ApprovalAdapter, AdmissionMaxActive,
		PollShortInterval, PollShortCount, PollLongInterval, PipelineDeadline, RebaseDeadline, DeployDeadline,
		MergeMaxRounds, ApproveMaxRetries, ReconcileMinAge, ReconcileMaxAge, NoteDelay, JobsRescueAfter} {
		if !seen[k] {
			t.Errorf("key %s is not registered", k)
		}
	}
	if d, _ := Lookup(JobsRescueAfter); !d.StartOnly || !strings.Contains(d.Doc, "start") {
		t.Errorf("%s must be marked and documented as read at start only", JobsRescueAfter)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key, raw string
		wantErr        bool
		check          func(Value) bool
	}{
		{"bool true", FlowApprovalFirst, `true`, false, func(v Value) bool { return v.Bool() }},
		{"bool false", FlowApprovalFirst, `false`, false, func(v Value) bool { return !v.Bool() }},
		{"bool as string", FlowApprovalFirst, `"true"`, true, nil},
		{"bool as number", FlowApprovalFirst, `1`, true, nil},
		{"enum ok", ApprovalProvider, `"gitlab"`, false, func(v Value) bool { return v.String() == "gitlab" }},
		{"enum other", ApprovalAdapter, `"checklist"`, false, func(v Value) bool { return v.String() == "checklist" }},
		{"enum unknown", ApprovalProvider, `"jira"`, true, nil},
		{"enum case", ApprovalProvider, `"GitLab"`, true, nil},
		{"enum not string", ApprovalAdapter, `3`, true, nil},
		{"string ok", ApprovalApprovers, `"carol, dave"`, false, func(v Value) bool { return v.String() == "carol, dave" }},
		{"string empty", ApprovalApprovers, `""`, false, func(v Value) bool { return v.String() == "" }},
		{"string not string", ApprovalApprovers, `["carol"]`, true, nil},
		{"list ok", PolicyAllowOverride, `"queue.mode, approval.required"`, false, func(v Value) bool {
			return slices.Equal(SplitList(v.String()), []string{"queue.mode", "approval.required"})
		}},
		{"list empty", PolicyAllowOverride, `""`, false, func(v Value) bool { return v.String() == "" }},
		{"list unknown key", PolicyAllowOverride, `"queue.mode, admission.max_active"`, true, nil},
		{"list key twice", PolicyAllowOverride, `"queue.mode,queue.mode"`, true, nil},
		{"list empty item", PolicyAllowOverride, `"queue.mode,,notify"`, true, nil},
		{"int ok", AdmissionMaxActive, `250`, false, func(v Value) bool { return v.Int() == 250 }},
		{"int zero below min", AdmissionMaxActive, `0`, true, nil},
		{"int zero allowed", PollShortCount, `0`, false, func(v Value) bool { return v.Int() == 0 }},
		{"int negative", ApproveMaxRetries, `-1`, true, nil},
		{"int fraction", MergeMaxRounds, `2.5`, true, nil},
		{"int as string", MergeMaxRounds, `"3"`, true, nil},
		{"int huge", AdmissionMaxActive, `99999999999999999999`, true, nil},
		{"duration ok", PollShortInterval, `"30s"`, false, func(v Value) bool { return v.Duration() == 30*time.Second }},
		{"duration keeps spelling", ReconcileMaxAge, `"24h"`, false, func(v Value) bool { return v.String() == "24h" && string(v.JSON()) == `"24h"` }},
		{"duration zero", PipelineDeadline, `"0s"`, true, nil},
		{"duration negative", RebaseDeadline, `"-5m"`, true, nil},
		{"duration no unit", DeployDeadline, `"30"`, true, nil},
		{"duration as number", NoteDelay, `30`, true, nil},
		{"not json", PollLongInterval, `2m`, true, nil},
		{"two values", FlowApprovalFirst, `true false`, true, nil},
		{"empty", FlowApprovalFirst, ``, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, ok := Lookup(tt.key)
			if !ok {
				t.Fatalf("no key %s", tt.key)
			}
			v, err := d.Parse(json.RawMessage(tt.raw))
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidValue) {
					t.Fatalf("Parse(%s) = %v, want ErrInvalidValue", tt.raw, err)
				}
				if !strings.Contains(err.Error(), tt.key) || !strings.Contains(err.Error(), "want") {
					t.Errorf("error %q should name the key and what is wanted", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%s): %v", tt.raw, err)
			}
			if !tt.check(v) {
				t.Errorf("Parse(%s) = %+v", tt.raw, v)
			}
		})
	}
}

func TestValidateInitial(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		initial map[string]string
		wantErr []string
	}{
		{"empty", nil, nil},
		{"valid", map[string]string{FlowApprovalFirst: "false", PollShortInterval: "500ms", AdmissionMaxActive: "20", ApprovalProvider: "gitlab"}, nil},
		{"every problem", map[string]string{"flow.aproval_first": "true", PollShortInterval: "soon", AdmissionMaxActive: "many"},
			[]string{`unknown setting "flow.aproval_first"`, "invalid value for poll.short_interval", "invalid value for admission.max_active"}},
		{"sub-second schedule of a test", map[string]string{PollShortInterval: "300ms", PollLongInterval: "1s", NoteDelay: "100ms", JobsRescueAfter: "2s"}, nil},
		{"not an access level", map[string]string{ApprovalMinAccess: "25"}, []string{"approval.min_access", "got 25"}},
		{"reserve above the default burst", map[string]string{GitLabBudgetReserve: "300"},
			[]string{"gitlab.budget_reserve (300) must be below gitlab.budget_burst (250) in scope global"}},
		{"long interval shorter than the short one", map[string]string{PollShortInterval: "1m", PollLongInterval: "30s"},
			[]string{"poll.short_interval (1m) must be at most poll.long_interval (30s)"}},
		{"min age above max age", map[string]string{ReconcileMinAge: "2h", ReconcileMaxAge: "1h"},
			[]string{"reconcile.min_age (2h) must be below reconcile.max_age (1h)"}},
		{"sweeper before rescue", map[string]string{SweeperAfter: "3m"},
			[]string{"jobs.rescue_after (5m) must be below sweeper.after (3m)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateInitial(tt.initial)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestScope(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "global", "  ": "global", "42": "project:42", "group/repo": "project:group/repo",
		" Platform/Config ": "project:platform/config"} {
		if got := Scope(in); got != want {
			t.Errorf("Scope(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestValidate lists every rule an operator's value meets, through the one
// check the CLI and the REST API share.
func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key, project, raw string
		wantErr                 error
		wantText                []string
	}{
		{"bool", FlowApprovalFirst, "grp/app", `false`, nil, nil},
		{"wrong type", FlowApprovalFirst, "", `"no"`, ErrInvalidValue, []string{"flow.approval_first", "true or false"}},
		{"enum outside its list", ApprovalProvider, "", `"jira"`, ErrInvalidValue, []string{"approval.provider", `one of "external", "gitlab"`}},
		{"negative count", PollShortCount, "", `-1`, ErrInvalidValue, []string{"poll.short_count", "at least 0", "got -1"}},
		{"negative retries", ApproveMaxRetries, "grp/app", `-3`, ErrInvalidValue, []string{"approve.max_retries", "at least 0"}},
		{"negative access level", ApprovalMinAccess, "", `-30`, ErrInvalidValue, []string{"approval.min_access", "one of 0, 10, 20, 30, 40, 50"}},
		{"not an access level", ApprovalMinAccess, "", `25`, ErrInvalidValue, []string{"approval.min_access", "one of 0, 10, 20, 30, 40, 50", "got 25"}},
		{"access level", ApprovalMinAccess, "grp/app", `40`, nil, nil},
		{"access level off", ApprovalMinAccess, "", `0`, nil, nil},
		{"nanoseconds where seconds are meant", PollShortInterval, "", `"1ns"`, ErrInvalidValue, []string{"poll.short_interval", "at least 1s", "got 1ns"}},
		{"milliseconds where minutes are meant", SweeperAfter, "", `"500ms"`, ErrInvalidValue, []string{"sweeper.after", "at least 1s"}},
		{"one second", PipelineDeadline, "", `"1s"`, nil, nil},
		{"note delay below its own minimum", NoteDelay, "", `"50ms"`, ErrInvalidValue, []string{"note.delay", "at least 100ms"}},
		{"note delay in milliseconds", NoteDelay, "", `"200ms"`, nil, nil},
		{"retention inside the platforms' redelivery windows", RetentionIntake, "", `"72h"`, ErrInvalidValue, []string{"retention.intake_max_age", "at least 192h"}},
		{"retention at its floor", RetentionIntake, "", `"192h"`, nil, nil},
		{"zero count", PollShortCount, "", `0`, nil, nil},
		{"a stray brace after the value", PollShortCount, "", `3 }`, ErrInvalidValue, []string{"poll.short_count"}},
		{"a stray bracket after the value", PollShortCount, "", `3]`, ErrInvalidValue, []string{"poll.short_count"}},
		{"a second value", PollShortCount, "", `3 4`, ErrInvalidValue, []string{"poll.short_count"}},
		{"whitespace after the value", PollShortCount, "", "3 \n", nil, nil},
		{"zero below a minimum of one", ApprovalRequired, "", `0`, ErrInvalidValue, []string{"approval.required", "at least 1"}},
		{"count too large", MergeMaxRounds, "", `4294967296`, ErrInvalidValue, []string{"merge.max_rounds"}},
		{"negative duration", NoteDelay, "", `"-2s"`, ErrInvalidValue, []string{"note.delay", "positive duration"}},
		{"zero duration", DeployDeadline, "", `"0s"`, ErrInvalidValue, []string{"deploy.deadline", "positive duration"}},
		{"string too long", ApprovalApprovers, "", `"` + strings.Repeat("a", 4097) + `"`, ErrInvalidValue, []string{"approval.approvers", "at most 4096 bytes"}},
		{"string starting with a dash", ApprovalApprovers, "grp/app", `"-bot"`, nil, nil},
		{"unknown key", "poll.shortcount", "", `1`, ErrUnknownKey, []string{`"poll.shortcount"`, "poll.short_count"}},
		{"global-only key globally", AdmissionMaxActive, "", `5`, nil, nil},
		{"global-only key for a project", AdmissionMaxActive, "grp/app", `5`, ErrGlobalOnly, []string{"admission.max_active is global only", "project:grp/app"}},
		{"global-only key for a project id", RetentionIntake, "42", `"24h"`, ErrGlobalOnly, []string{"retention.intake_max_age", "project:42"}},
		{"project id for a key read by path", ApprovalProvider, "101", `"gitlab"`, ErrProjectScope, []string{"approval.provider", "project:101", "path"}},
		{"project path in another case", ApprovalApprovers, "Platform/Config", `"carol"`, nil, nil},
		{"project path in a subgroup", QueueDeferCI, "platform/infra/config", `"on"`, nil, nil},
		{"one segment is no project path", QueueDeferCI, "platform", `"on"`, ErrProjectScope, []string{"queue.defer_ci", "project:platform", "group/name"}},
		{"trailing slash", QueueDeferCI, "platform/config/", `"on"`, ErrProjectScope, []string{"project:platform/config/", "path"}},
		{"empty segment", QueueDeferCI, "platform//config", `"on"`, ErrProjectScope, nil},
		{"dot-dot segment", QueueDeferCI, "../x", `"on"`, ErrProjectScope, nil},
		{"query in the path", QueueDeferCI, "platform/config?x=1", `"on"`, ErrProjectScope, nil},
		{"project id for a key read by id", ApprovalAdapter, "101", `"checklist"`, nil, nil},
		{"project path for a key read by id", ApprovalAdapter, "platform/config", `"checklist"`, ErrProjectScope, []string{"approval.adapter", "numeric id"}},
		{"removing a project id value", ApprovalProvider, "101", `null`, nil, nil},
		{"global-only start-only key for a project", JobsRescueAfter, "grp/app", `"1m"`, ErrGlobalOnly, []string{"jobs.rescue_after"}},
		{"removing a global-only project value", CommandsRateLimit, "grp/app", `null`, nil, nil},
		{"global-only wrong type for a project", CommandsRateLimit, "grp/app", `"x"`, ErrGlobalOnly, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Validate(tt.key, tt.project, json.RawMessage(tt.raw))
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Validate(%s, %q, %s): %v", tt.key, tt.project, tt.raw, err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Validate(%s, %q, %s) = %v, want %v", tt.key, tt.project, tt.raw, err, tt.wantErr)
			}
			for _, w := range tt.wantText {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestGlobalOnlyKeys keeps the global-only marks equal to how the bot reads
// the settings: these are read without a project, every other key per
// project (a key added to either side must be marked here on purpose).
func TestGlobalOnlyKeys(t *testing.T) {
	t.Parallel()
	want := []string{CommandsRateLimit, AdmissionMaxActive, ReconcileMinAge, ReconcileMaxAge, ReconcileInterval,
		ReconcileQuietAfter, SweeperInterval, SweeperAfter, JobsRescueAfter, RetentionIntake, HistorySnapshotEvery,
		GitLabBudgetPerMinute, GitLabBudgetBurst, GitLabBudgetReserve}
	var got []string
	for _, d := range Defs() {
		if d.GlobalOnly {
			got = append(got, d.Key)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("global-only keys %v, want %v", got, want)
	}
}
