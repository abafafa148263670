package bot

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/demo"
)

// TestActiveChangesGaugeFromTheDatabase (issue 9, defect 12): the leader
// exports changebot_active_changes per status from the database, zero for
// an empty status, and the age of each status's oldest change.
func TestActiveChangesGaugeFromTheDatabase(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, 100*time.Millisecond) // no decision: the change waits at APPROVAL_SENT
	startBot(t, env)
	opID, err := demo.SubmitChange(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	waitStep(t, env, opID, "APPROVAL_SENT", 30*time.Second)
	want := []string{
		`changebot_active_changes{status="APPROVAL_SENT"} 1`,
		`changebot_active_changes{status="MERGING"} 0`,
		`changebot_active_changes_oldest_seconds{status="APPROVAL_SENT"} `,
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		body := scrape(t, env)
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed %q; it has:\n%s", missing, grepLines(body, "changebot_active"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func scrape(t *testing.T, env *demo.Env) string {
	t.Helper()
	resp, err := http.Get(env.BaseURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
