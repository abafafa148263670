package demo

import (
	"bytes"
	"strings"
	"testing"
)

// TestGitHubDemoInstructionsNameEveryToken: the kept GitHub demo prints
// the viewer token for the web pages and the reviewer accounts' tokens.
func TestGitHubDemoInstructionsNameEveryToken(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	printGitHubKeepInstructions(&out, Info{BotURL: "http://bot", GitLabURL: "http://gh", Project: Project, ProjectID: 7, MRIID: 1}, "at exit")
	for _, want := range []string{"viewer " + ViewerToken, "http://bot/ui", "log in with the viewer token " + ViewerToken,
		"reviewer tokens " + Reviewers[0].Token + " (" + Reviewers[0].Name + "), " + Reviewers[1].Token} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("instructions lack %q:\n%s", want, out.String())
		}
	}
}

// TestExportEnvReachesTheDemosSchema: the printed DATABASE_URL selects the
// demo's own PostgreSQL schema and never carries the password, which is
// named as left out; a SQLite file is given as it is.
func TestExportEnvReachesTheDemosSchema(t *testing.T) {
	t.Parallel()
	env, err := NewEnv("", true, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	for _, tc := range []struct {
		name, url, schema, want string
		password                bool
	}{
		{"postgres URL", "postgres://cb:s3cret@db.example:5432/cb?sslmode=disable", "changebot_demo_1a2b3c4d",
			"postgres://cb@db.example:5432/cb?search_path=changebot_demo_1a2b3c4d&sslmode=disable", true},
		{"password parameter", "postgres://cb@db.example/cb?password=s3cret", "changebot_demo_1a2b3c4d",
			"postgres://cb@db.example/cb?search_path=changebot_demo_1a2b3c4d", true},
		{"key=value", "host=db.example user=cb password=s3cret dbname=cb", "changebot_demo_1a2b3c4d",
			"host=db.example user=cb dbname=cb search_path=changebot_demo_1a2b3c4d", true},
		{"trust auth", "postgres://postgres@127.0.0.1:5432/postgres", "changebot_demo_1a2b3c4d",
			"postgres://postgres@127.0.0.1:5432/postgres?search_path=changebot_demo_1a2b3c4d", false},
		{"sqlite", "sqlite:///tmp/x/changebot.db", "", "sqlite:///tmp/x/changebot.db", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, password := ExportEnv(env.Config, tc.url, tc.schema)
			if got[0][0] != "DATABASE_URL" || got[0][1] != tc.want || password != tc.password {
				t.Errorf("DATABASE_URL %q (password left out %v), want %q (%v)", got[0][1], password, tc.want, tc.password)
			}
			var out bytes.Buffer
			printExports(&out, Info{Export: got, PasswordLeftOut: password, Project: Project})
			if strings.Contains(out.String(), "s3cret") || password != strings.Contains(out.String(), "export PGPASSWORD=") {
				t.Errorf("printed:\n%s", out.String())
			}
		})
	}
}

// TestMergeCallIID: the rebase switches act on the merge call only.
func TestMergeCallIID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method, path string
		iid          int64
		ok           bool
	}{
		{"PUT", "/api/v4/projects/101/merge_requests/7/merge", 7, true},
		{"PUT", "/api/v4/projects/platform%2Fconfig/merge_requests/12/merge", 12, true},
		{"GET", "/api/v4/projects/101/merge_requests/7/merge", 0, false},
		{"PUT", "/api/v4/projects/101/merge_requests/7/rebase", 0, false},
		{"PUT", "/api/v4/projects/101/merge_requests/7", 0, false},
	} {
		if iid, ok := mergeCallIID(tc.method, tc.path); iid != tc.iid || ok != tc.ok {
			t.Errorf("mergeCallIID(%s %s) = %d, %v; want %d, %v", tc.method, tc.path, iid, ok, tc.iid, tc.ok)
		}
	}
}

// TestFailMode: -fail defaults to a failed pipeline on GitLab, to none on
// GitHub (no switches there) and without -keep; unknown modes and
// switches on GitHub are refused.
func TestFailMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o    Opts
		want string
		err  bool
	}{
		{o: Opts{Keep: true}, want: FailPipeline},
		{o: Opts{Keep: true, Platform: "github"}, want: FailNone},
		{o: Opts{Fail: FailRebase}, want: FailNone},
		{o: Opts{Keep: true, Fail: FailHang}, want: FailHang},
		{o: Opts{Keep: true, Fail: "explode"}, err: true},
		{o: Opts{Keep: true, Fail: FailApproval, Platform: "github"}, err: true},
	} {
		got, err := failMode(tc.o)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("failMode(%+v) = %q, %v; want %q, error %v", tc.o, got, err, tc.want, tc.err)
		}
	}
}

// TestShellQuote: exported values paste into a POSIX shell as they are.
func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"demo-robot-token":                         "demo-robot-token",
		"http://127.0.0.1:8080":                    "http://127.0.0.1:8080",
		"host=db user=cb dbname=cb":                "'host=db user=cb dbname=cb'",
		"postgres://cb@db/cb?a=1&search_path=demo": "'postgres://cb@db/cb?a=1&search_path=demo'",
		"it's": `'it'\''s'`,
		"":     "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
