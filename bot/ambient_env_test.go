package bot

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestAmbientDatabaseURLDoesNotReachTheTests runs two tests that read the
// configuration (the CLI on an unmigrated database, doctor's day one) in a
// child test process whose environment names another database and
// platform, as a developer's shell might: they must pass all the same,
// since the test binary clears the configuration it inherits
// (clearAmbientConfig; issue 21.12). Without it both failed reading the
// named database instead of their schema.
func TestAmbientDatabaseURLDoesNotReachTheTests(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two database tests in a child process; skipped under -short")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^(TestCLIOnUnmigratedDatabase|TestDoctorFindsDayOneProblems)$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		"DATABASE_URL=postgres://nobody@127.0.0.1:1/elsewhere?sslmode=disable",
		"CHANGEBOT_GITLAB_URL=http://127.0.0.1:1",
		"CHANGEBOT_CONFIG=/nonexistent/changebot.yaml")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("with an ambient DATABASE_URL the tests failed (%v):\n%s", err, tail(string(out), 40))
	}
	if !strings.Contains(string(out), "PASS") {
		t.Fatalf("the child ran no test:\n%s", tail(string(out), 40))
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
