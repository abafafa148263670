package config

import (
	"fmt"
	"strings"
	"testing"

	"changebot/notify"
)

const (
	secretNotifyInline = "notify-inline-SECRET-7777"
	secretNotifyEnv    = "notify-env-SECRET-8888"
	secretSlackToken   = "slackTOKENsecret9999"
)

// TestLoadNotifications: the notifications list loads with its secret
// inline or from the environment, and every problem of an entry is
// reported by entry and key without quoting a secret or a URL.
func TestLoadNotifications(t *testing.T) {
	t.Parallel()
	valid := `notifications:
  - name: ops
    kind: webhook
    url: https://hooks.example.com/changebot
    secret_env: OPS_HOOK_SECRET
    projects: ["platform/*", 42]
    events: [failed, needs_person]
  - name: chat
    kind: Slack
    url: https://hooks.slack.com/services/T0/B0/` + secretSlackToken + `
  - name: audit
    kind: webhook
    url: http://audit.internal/hook
    secret: ` + secretNotifyInline + `
    events: merged
`
	tests := []struct {
		name     string
		yaml     string
		env      []string
		want     []notify.Destination
		problems []string // substrings, one per problem
	}{
		{name: "valid", yaml: valid, env: []string{"OPS_HOOK_SECRET", secretNotifyEnv},
			want: []notify.Destination{
				{Name: "ops", Kind: notify.KindWebhook, URL: "https://hooks.example.com/changebot", Secret: secretNotifyEnv,
					SecretEnv: "OPS_HOOK_SECRET", Projects: []string{"platform/*", "42"}, Events: []notify.Event{notify.EventFailed, notify.EventNeedsPerson}},
				{Name: "chat", Kind: notify.KindSlack, URL: "https://hooks.slack.com/services/T0/B0/" + secretSlackToken},
				{Name: "audit", Kind: notify.KindWebhook, URL: "http://audit.internal/hook", Secret: secretNotifyInline,
					Events: []notify.Event{notify.EventMerged}},
			}},
		{name: "secret_env unset", yaml: valid, problems: []string{
			`config file key "notifications": entry 1: secret_env OPS_HOOK_SECRET is unset or empty`,
			`config file key "notifications": entry 1 (ops): secret: a webhook needs a secret`}},
		{name: "not a list", yaml: "notifications: yes\n", problems: []string{`"notifications": want a list of destinations`}},
		{name: "bad entries", yaml: `notifications:
  - name: a
    kind: email
    url: nope
    chanel: "#ops"
    events: [queued]
  - name: a
    kind: webhook
    url: https://h/x
    secret: ` + secretNotifyInline + `
    secret_env: X
`, env: []string{"X", secretNotifyEnv}, problems: []string{
			`entry 1: unknown key "chanel"`,
			"entry 2: give secret or secret_env, not both",
			`entry 1 (a): kind: "email" is not webhook or slack`,
			"entry 1 (a): url: want an http:// or https:// URL",
			`entry 1 (a): events: entry 1: "queued" is not an event`,
			"entry 2 (a): name: entry 1 has the same name",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := with(validEnv(), tt.env...)
			c, err := load(t, "c.yaml", env, map[string]string{"c.yaml": tt.yaml})
			ps := problemsOf(t, err)
			if len(ps) != len(tt.problems) {
				t.Fatalf("problems %q, want %d like %q", ps, len(tt.problems), tt.problems)
			}
			for i, w := range tt.problems {
				if !strings.Contains(ps[i], w) {
					t.Errorf("problem %d %q, want it to contain %q", i, ps[i], w)
				}
			}
			assertNoNotifySecret(t, "problems", strings.Join(ps, "\n"))
			if tt.problems != nil {
				return
			}
			if got, want := fmt.Sprint(c.Notifications), fmt.Sprint(tt.want); got != want {
				t.Fatalf("destinations %s, want %s", got, want)
			}
			for i, d := range c.Notifications {
				if d.Secret != tt.want[i].Secret || d.URL != tt.want[i].URL {
					t.Fatalf("destination %d: secret or URL not loaded as given", i)
				}
			}
			for _, s := range []string{c.String(), fmt.Sprintf("%#v", c), fmt.Sprintf("%+v", c)} {
				assertNoNotifySecret(t, "printed config", s)
				if !strings.Contains(s, "ops(webhook https://hooks.example.com/…") {
					t.Errorf("printed config does not name the destinations:\n%s", s)
				}
			}
		})
	}
}

func assertNoNotifySecret(t *testing.T, what, s string) {
	t.Helper()
	for _, secret := range []string{secretNotifyInline, secretNotifyEnv, secretSlackToken} {
		if strings.Contains(s, secret) {
			t.Errorf("%s contains secret %q:\n%s", what, secret, s)
		}
	}
}
