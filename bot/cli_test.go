package bot

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"changebot/cli"
	"changebot/config"
	"changebot/database"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
	"changebot/store/sqlite"
)

// clearConfigEnv unsets every configuration variable (t.Setenv with ""
// counts as unset), so that only what a case sets is seen, except
// CHANGEBOT_DATA_DIR: a directory of t's, where the default SQLite file of
// an empty DATABASE_URL goes (never the package's directory).
func clearConfigEnv(t *testing.T) {
	t.Helper()
	t.Setenv("CHANGEBOT_CONFIG", "")
	for _, f := range config.Reference() {
		if f.Env == "" {
			continue
		}
		t.Setenv(f.Env, "")
		if f.Secret {
			t.Setenv(f.Env+"_FILE", "")
		}
	}
	t.Setenv("CHANGEBOT_DATA_DIR", t.TempDir())
}

// TestDatabaseCommandsNeedOnlyDatabaseURL runs the subcommands that need
// only the database (migrate, settings, history, replay, verify) without
// serve's configuration: with DATABASE_URL (or the config file's
// database_url) they work and say nothing about it; without, the only
// complaint is the missing DATABASE_URL (and a config file problem that
// hides it). Not parallel: it sets the environment.
func TestDatabaseCommandsNeedOnlyDatabaseURL(t *testing.T) {
	schema := emptySchema(t)
	url := pgtest.WithSearchPath(pgtest.URL(), schema)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A file with database_url only, and one with other keys wrong too
	// (serve's problems, which these commands must not report).
	goodFile := write("db.yaml", fmt.Sprintf("database_url: %q\n", url))
	noisyFile := write("noisy.yaml", fmt.Sprintf("database_url: %q\ngitlab_url: ftp://x\nworkers: many\nno_such_key: 1\n", url))
	emptyFile := write("empty.yaml", "listen: \":9090\"\nno_such_key: 1\n")
	brokenFile := write("broken.yaml", "database_url: [\n")
	urlFile := write("db-url", url+"\n")

	dataDir := t.TempDir()
	dataDirEnv := map[string]string{"CHANGEBOT_DATA_DIR": dataDir}
	serveWords := []string{"GITLAB", "TOKEN", "SECRET", "EXTERNAL", "APPROVAL", "WORKERS", "no_such_key", "gitlab_url"}
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		code    int
		stdout  string // substring
		stderr  string // exact
		errHas  []string
		errNone bool // stderr must be empty
	}{
		// In order: migrate first, revert last.
		{name: "migrate with DATABASE_URL", env: map[string]string{"DATABASE_URL": url}, args: []string{"migrate"},
			stdout: fmt.Sprintf("migrations applied, now at version %d\n", postgres.LatestMigration), errNone: true},
		{name: "migrate again from the config file", args: []string{"migrate", "-config", goodFile},
			stdout: fmt.Sprintf("migrations applied, now at version %d\n", postgres.LatestMigration), errNone: true},
		{name: "migrate with CHANGEBOT_CONFIG full of serve problems", env: map[string]string{"CHANGEBOT_CONFIG": noisyFile}, args: []string{"migrate"},
			stdout: "migrations applied", errNone: true},
		{name: "migrate with DATABASE_URL_FILE", env: map[string]string{"DATABASE_URL_FILE": urlFile}, args: []string{"migrate"},
			stdout: "migrations applied", errNone: true},
		{name: "settings get with DATABASE_URL", env: map[string]string{"DATABASE_URL": url}, args: []string{"settings", "get", "flow.approval_first"},
			stdout: "flow.approval_first  ", errNone: true},
		{name: "settings get from the config file", args: []string{"settings", "get", "-config", noisyFile},
			stdout: "flow.approval_first  ", errNone: true},
		// A numeric id is no scope flow.approval_first is read in: the
		// global value it would show is not the project's (the API refuses
		// it the same way).
		{name: "settings get for a project by id", env: map[string]string{"DATABASE_URL": url}, args: []string{"settings", "get", "flow.approval_first", "-project", "101"},
			code: 1, stderr: "changebot settings: flow.approval_first is never read for project:101: its project scope is the project's path " +
				"(group/name, as GitLab or GitHub shows it; case is ignored) (a change there uses another value than this scope would show)\n"},
		{name: "verify with DATABASE_URL", env: map[string]string{"DATABASE_URL": url}, args: []string{"verify"},
			stdout: "0 operations checked, 0 broken", errNone: true},
		{name: "verify from the config file", args: []string{"verify", "-config", goodFile},
			stdout: "0 operations checked, 0 broken", errNone: true},
		{name: "history reaches the database", env: map[string]string{"DATABASE_URL": url}, args: []string{"history", "op_none"},
			code: 1, stderr: "changebot history: no change op_none in this database (changebot list shows the changes)\n"},
		{name: "replay reaches the database", args: []string{"replay", "op_none", "-config", goodFile},
			code: 1, stderr: "changebot replay: no change op_none in this database (changebot list shows the changes)\n"},
		{name: "verify names an unknown id as history does", env: map[string]string{"DATABASE_URL": url}, args: []string{"verify", "op_none"},
			code: 1, stderr: "changebot verify: no change op_none in this database (changebot list shows the changes)\n"},
		{name: "environment wins over a broken file", env: map[string]string{"DATABASE_URL": url, "CHANGEBOT_CONFIG": brokenFile}, args: []string{"verify"},
			stdout: "0 operations checked", errNone: true},

		// Without DATABASE_URL: the SQLite file changebot.db in
		// CHANGEBOT_DATA_DIR, made by the first case.
		{name: "history before the SQLite file exists", env: dataDirEnv, args: []string{"history", "op_1"}, code: 1,
			errHas: []string{"no SQLite database at " + filepath.Join(dataDir, "changebot.db") + " yet"}},
		{name: "migrate without DATABASE_URL", env: dataDirEnv, args: []string{"migrate"},
			stdout: fmt.Sprintf("migrations applied, now at version %d\n", sqlite.LatestMigration), errNone: true},
		{name: "settings get without DATABASE_URL", env: dataDirEnv, args: []string{"settings", "get", "flow.approval_first"},
			stdout: "flow.approval_first  ", errNone: true},
		{name: "history without DATABASE_URL", env: dataDirEnv, args: []string{"history", "op_1"}, code: 1, stderr: "changebot history: no change op_1 in this database (changebot list shows the changes)\n"},
		{name: "replay without DATABASE_URL", env: dataDirEnv, args: []string{"replay", "op_1"}, code: 1, stderr: "changebot replay: no change op_1 in this database (changebot list shows the changes)\n"},
		{name: "verify without DATABASE_URL", env: dataDirEnv, args: []string{"verify"}, stdout: "0 operations checked, 0 broken", errNone: true},
		{name: "config file without database_url", env: dataDirEnv, args: []string{"verify", "-config", emptyFile}, stdout: "0 operations checked, 0 broken", errNone: true},
		{name: "config file that is not YAML", args: []string{"migrate", "-config", brokenFile}, code: 1,
			errHas: []string{"invalid YAML", "DATABASE_URL is required"}},
		{name: "config file missing", args: []string{"history", "op_1", "-config", filepath.Join(dir, "nope.yaml")}, code: 1,
			errHas: []string{"reading config file", "DATABASE_URL is required"}},
		{name: "database_url not a string", env: map[string]string{"CHANGEBOT_CONFIG": write("list.yaml", "database_url: [a, b]\n")}, args: []string{"settings", "get"}, code: 1,
			errHas: []string{`config file key "database_url"`}},
		{name: "DATABASE_URL not a connection string", env: map[string]string{"DATABASE_URL": "http://example"}, args: []string{"verify"}, code: 1,
			errHas: []string{"DATABASE_URL (database_url): is not a postgres:// URL"}},

		{name: "migrate -down", env: map[string]string{"DATABASE_URL": url}, args: []string{"migrate", "-down", "0", "-yes"},
			stdout: "all migrations reverted\n", errNone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearConfigEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr strings.Builder
			code := cliMain(tt.args, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit code %d, want %d (stdout %q, stderr %q)", code, tt.code, stdout.String(), stderr.String())
			}
			if tt.stdout != "" && !strings.Contains(stdout.String(), tt.stdout) {
				t.Errorf("stdout %q, want it to contain %q", stdout.String(), tt.stdout)
			}
			if tt.errNone && stderr.String() != "" {
				t.Errorf("stderr %q, want nothing", stderr.String())
			}
			if tt.stderr != "" && stderr.String() != tt.stderr {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.stderr)
			}
			for _, s := range tt.errHas {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr %q, want it to contain %q", stderr.String(), s)
				}
			}
			for _, w := range serveWords {
				if strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q names %q, a problem of serve's configuration only", stderr.String(), w)
				}
			}
		})
	}
}

// TestMigrateDownToAVersionAsksFirst: migrate -down V reverts changebot's
// migrations to version V only after the person typed yes (or with -yes),
// refuses a version above the applied one, and migrate goes back up. Not
// parallel: it sets the environment and the confirmation input.
func TestMigrateDownToAVersionAsksFirst(t *testing.T) {
	sc := pgtest.New(t)
	clearConfigEnv(t)
	t.Setenv("DATABASE_URL", sc.URL)
	defer func(r io.Reader) { cli.ConfirmInput = r }(cli.ConfirmInput)
	latest := postgres.LatestMigration
	prev := latest - 1
	version := func() uint {
		t.Helper()
		v, _, err := postgres.MigrationStatus(sc.Pool, sc.Name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name        string
		args        []string
		input       string
		code        int
		stdout      string
		stderrHas   []string
		wantVersion uint
	}{
		{name: "answered no", args: []string{"-down", fmt.Sprint(prev)}, input: "no\n", code: 1,
			stderrHas: []string{fmt.Sprintf("reverts migrations %d to %d", latest, latest), "Type yes", "not confirmed; nothing was reverted"}, wantVersion: latest},
		{name: "no answer at all", args: []string{"-down", fmt.Sprint(prev)}, input: "", code: 1,
			stderrHas: []string{"not confirmed"}, wantVersion: latest},
		{name: "answered yes", args: []string{"-down", fmt.Sprint(prev)}, input: "yes\n",
			stdout: fmt.Sprintf("migrations reverted, now at version %d\n", prev), wantVersion: prev},
		{name: "above the applied version", args: []string{"-down", fmt.Sprint(latest), "-yes"}, code: 1,
			stderrHas: []string{fmt.Sprintf("the database is at version %d", prev)}, wantVersion: prev},
		{name: "at the applied version", args: []string{"-down", fmt.Sprint(prev), "-yes"},
			stdout: "nothing reverted", wantVersion: prev},
		{name: "up again", args: nil, stdout: fmt.Sprintf("now at version %d", latest), wantVersion: latest},
		{name: "-yes asks nothing", args: []string{"-down", fmt.Sprint(prev), "-yes"}, input: "",
			stdout: fmt.Sprintf("now at version %d", prev), wantVersion: prev},
	}
	for _, tt := range tests {
		cli.ConfirmInput = strings.NewReader(tt.input)
		var stdout, stderr strings.Builder
		code := cliMain(append([]string{"migrate"}, tt.args...), &stdout, &stderr)
		if code != tt.code || !strings.Contains(stdout.String(), tt.stdout) {
			t.Fatalf("%s: exit %d (want %d), stdout %q (want %q), stderr %q", tt.name, code, tt.code, stdout.String(), tt.stdout, stderr.String())
		}
		for _, s := range tt.stderrHas {
			if !strings.Contains(stderr.String(), s) {
				t.Errorf("%s: stderr %q, want it to contain %q", tt.name, stderr.String(), s)
			}
		}
		if tt.input == "" && strings.Contains(stderr.String(), "Type yes") && tt.code == 0 {
			t.Errorf("%s: asked although -yes was given", tt.name)
		}
		if v := version(); v != tt.wantVersion {
			t.Fatalf("%s: database at version %d, want %d", tt.name, v, tt.wantVersion)
		}
	}

	// Tables older than the binary (migration 12 has no platform column
	// yet, which list reads): list says to migrate, not the SQL error.
	if code := cliMain([]string{"migrate", "-down", "12", "-yes"}, io.Discard, io.Discard); code != 0 || version() != 12 {
		t.Fatalf("migrate -down 12: exit %d, at version %d", code, version())
	}
	var stdout, stderr strings.Builder
	code := cliMain([]string{"list"}, &stdout, &stderr)
	if want := fmt.Sprintf("is at migration 12 of %d: run changebot migrate", latest); code != 1 || !strings.Contains(stderr.String(), want) ||
		strings.Contains(stderr.String(), "SQLSTATE") {
		t.Errorf("list on tables at migration 12: exit %d, stderr %q; want 1 saying %q", code, stderr.String(), want)
	}
}

// TestMigrateDownOnSQLiteRefusesBeforeAsking: on SQLite, which reverts to 0
// only, migrate -down 3 is refused (exit 2, naming the rule) without the
// question, even when the person would have typed yes, and nothing is
// reverted; -down 0 still asks, and reverts after yes. Not parallel: it
// sets the environment and the confirmation input.
func TestMigrateDownOnSQLiteRefusesBeforeAsking(t *testing.T) {
	clearConfigEnv(t)
	path := filepath.Join(t.TempDir(), "changebot.db")
	t.Setenv("DATABASE_URL", config.SQLiteURL(path))
	defer func(r io.Reader) { cli.ConfirmInput = r }(cli.ConfirmInput)
	if code := cliMain([]string{"migrate"}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("first migrate: exit %d", code)
	}
	version := func() uint {
		t.Helper()
		db, err := sqlite.OpenDB(path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		v, _, err := sqlite.MigrationStatus(db)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, args := range [][]string{{"-down", "3"}, {"-down", "3", "-yes"}, {"-down", fmt.Sprint(sqlite.LatestMigration + 1)}} {
		cli.ConfirmInput = strings.NewReader("yes\n")
		var stdout, stderr strings.Builder
		code := cliMain(append([]string{"migrate"}, args...), &stdout, &stderr)
		if code != 2 || strings.Contains(stderr.String(), "Type yes") || !strings.Contains(stderr.String(), "a SQLite database reverts to 0 only") {
			t.Errorf("migrate %v: exit %d, stdout %q, stderr %q; want exit 2 naming the rule, without asking", args, code, stdout.String(), stderr.String())
		}
		if v := version(); v != sqlite.LatestMigration {
			t.Fatalf("migrate %v reverted to %d", args, v)
		}
	}
	cli.ConfirmInput = strings.NewReader("yes\n")
	var stdout, stderr strings.Builder
	if code := cliMain([]string{"migrate", "-down", "0"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "Type yes") ||
		!strings.Contains(stdout.String(), "all migrations reverted") {
		t.Errorf("migrate -down 0: exit %d, stdout %q, stderr %q; want the question, then everything reverted", code, stdout.String(), stderr.String())
	}
}

// TestMigrateRefusesAServedSQLiteFile: migrate, up or down, on a SQLite
// file whose <file>.lock a serve holds exits 1 naming it and changes
// nothing (the tables stay). Not parallel: it sets the environment.
func TestMigrateRefusesAServedSQLiteFile(t *testing.T) {
	clearConfigEnv(t)
	path := filepath.Join(t.TempDir(), "changebot.db")
	t.Setenv("DATABASE_URL", config.SQLiteURL(path))
	if code := cliMain([]string{"migrate"}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("first migrate: exit %d", code)
	}
	lock, err := database.Open(context.Background(), config.SQLiteURL(path), &database.OpenOpts{Exclusive: true}) // the lock serve holds
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"migrate", "-down", "0", "-yes"}, {"migrate"}} {
		var stdout, stderr strings.Builder
		code := cliMain(args, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "is being served: stop changebot serve") {
			t.Errorf("%v while served: exit %d, stdout %q, stderr %q; want exit 1 and is being served", args, code, stdout.String(), stderr.String())
		}
	}
	lock.Close()
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, _, err := sqlite.MigrationStatus(db); err != nil || v != sqlite.LatestMigration {
		t.Fatalf("after the refused migrations: version %d, %v; want %d (nothing reverted)", v, err, sqlite.LatestMigration)
	}
}

// TestMigrateAndDemoRefuseBadUsage: a negative -down, a stray argument to
// any command, a demo -timeout that is not positive, a changebot list
// filter that is not one are usage errors (exit 2) refused before anything
// is opened or changed, naming the flag or the argument. Not parallel: it
// sets the environment.
func TestMigrateAndDemoRefuseBadUsage(t *testing.T) {
	clearConfigEnv(t)
	path := filepath.Join(t.TempDir(), "changebot.db")
	t.Setenv("DATABASE_URL", config.SQLiteURL(path))
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "-down", "-3", "-yes"}, "-down -3: a version is 0 or more"},
		{[]string{"migrate", "extra"}, `unexpected argument "extra"`},
		{[]string{"migrate", "-down", "0", "-yes", "extra"}, `unexpected argument "extra"`},
		{[]string{"demo", "bogusarg"}, `unexpected argument "bogusarg"`},
		{[]string{"demo", "-timeout", "-5s"}, "-timeout -5s: want a positive duration"},
		{[]string{"demo", "-timeout", "0"}, "-timeout 0s: want a positive duration"},
		{[]string{"demo", "-platform", "bitbucket"}, `-platform "bitbucket": want gitlab or github`},
		{[]string{"serve", "foo"}, `unexpected argument "foo": serve takes flags only`},
		{[]string{"doctor", "foo"}, `unexpected argument "foo": doctor takes flags only`},
		{[]string{"setup", "-project", "grp/app", "foo"}, `unexpected argument "foo": setup takes flags only`},
		{[]string{"copy", "-from", config.SQLiteURL(path), "-to", config.SQLiteURL(path + "2"), "foo"}, `unexpected argument "foo": copy takes flags only`},
		{[]string{"version", "foo"}, `unexpected argument "foo": version takes no arguments`},
		{[]string{"list", "foo"}, `unexpected argument "foo": list takes flags only`},
		{[]string{"list", "-status", "MERGED", "foo"}, `unexpected argument "foo"`},
		{[]string{"list", "-status", "BOGUS"}, "-status: unknown status BOGUS; one of APPROVAL_SENDING, "},
		{[]string{"list", "-status", "MERGED,bogus"}, "-status: unknown status bogus; one of"},
		{[]string{"list", "-step", "NOPE"}, "-step: unknown step NOPE; a step code or name"},
		{[]string{"list", "-limit", "0"}, `-limit: "0" is not a whole number from 1 to 500`},
		{[]string{"list", "-updated_after", "yesterday"}, `-updated_after: "yesterday" is not an RFC 3339 time`},
		{[]string{"history", "op-1", "op-2"}, "want one operation id, got 2 argument(s)"},
		{[]string{"replay"}, "want one operation id, got 0 argument(s)"},
		{[]string{"replay", "op_1", "-at", "yesterday"}, `-at "yesterday": want an RFC 3339 time such as 2026-12-01T14:00:00Z` + "\nusage:"},
		{[]string{"setup"}, "name at least one -project or -group\nusage:"},
		{[]string{"settings", "get", "poll.short_count", "merge.max_rounds"}, "wrong number of arguments: settings get takes at most one key"},
		{[]string{"settings", "set", "poll.short_count"}, "wrong number of arguments: settings set takes a key and a value"},
		{[]string{"settings", "list"}, "want get or set"},
		// Flag errors: exit 2 with the command's own usage, not the flag
		// package's "Usage of migrate:" and exit 1.
		{[]string{"list", "-limit", "abc"}, `invalid value "abc" for flag -limit: parse error` + "\nusage: changebot list"},
		{[]string{"migrate", "-down", "abc"}, `invalid value "abc" for flag -down: parse error` + "\nusage:\n  changebot migrate [-config file]"},
		{[]string{"serve", "-nope"}, "flag provided but not defined: -nope\nusage:\n  changebot serve"},
		{[]string{"verify", "-nope"}, "flag provided but not defined: -nope\nusage:\n  changebot verify"},
		{[]string{"settings", "get", "-project"}, "flag needs an argument: -project\nUsage:\n  changebot settings get"},
		{[]string{"copy"}, "both -from and -to are required\nusage:\n  changebot copy"},
		{[]string{"copy", "-to", config.SQLiteURL(path)}, "both -from and -to are required"},
		// A flag the command would ignore is refused.
		{[]string{"history", "op-1", "-stored"}, "-stored goes with -json"},
		{[]string{"history", "op-1", "-at", "2026-01-01T00:00:00Z"}, "-at is replay's"},
		{[]string{"replay", "op-1", "-json"}, "-json is history's"},
	}
	for _, tt := range tests {
		var stdout, stderr strings.Builder
		code := cliMain(tt.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tt.want) || stdout.Len() > 0 || strings.Contains(stderr.String(), "query parameter") ||
			strings.Contains(stderr.String(), "Usage of ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, stderr with %q", tt.args, code, stdout.String(), stderr.String(), tt.want)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a refused command made the database %s (%v)", path, err)
	}
}

// TestHelpSpeaksOfGitHub: changebot help (and the usage printed without a
// command) says how to set up GitHub as well as GitLab, with the
// variables README's GitHub setup names, and every CHANGEBOT_ variable it
// names is one changebot reads.
func TestHelpSpeaksOfGitHub(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := cliMain([]string{"help"}, &out, &errOut); code != 0 {
		t.Fatalf("changebot help: exit %d", code)
	}
	var bare bytes.Buffer
	if code := cliMain(nil, io.Discard, &bare); code != 2 || bare.String() != out.String() {
		t.Errorf("changebot without a command: exit %d, usage differs from help:\n%s", code, bare.String())
	}
	help := out.String()
	for _, want := range []string{"GitHub pull requests", "CHANGEBOT_PLATFORM=github", "CHANGEBOT_GITHUB_APP_ID",
		"CHANGEBOT_GITHUB_INSTALLATION_ID", "CHANGEBOT_GITHUB_APP_PRIVATE_KEY_FILE", "CHANGEBOT_GITHUB_TOKEN", "CHANGEBOT_GITHUB_URL",
		"/webhooks/github", "CHANGEBOT_GITLAB_URL", "CHANGEBOT_GITLAB_TOKEN", "/webhooks/gitlab", "-platform gitlab|github", `"GitHub setup"`} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	known := map[string]bool{"CHANGEBOT_CONFIG": true}
	for _, f := range config.Reference() {
		known[f.Env] = true
		if f.Secret {
			known[f.Env+"_FILE"] = true
		}
	}
	for _, name := range regexp.MustCompile(`CHANGEBOT_[A-Z_]+[A-Z]`).FindAllString(help, -1) {
		if !known[name] {
			t.Errorf("help names %s, which changebot does not read", name)
		}
	}
}
