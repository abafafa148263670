package bot

import (
	"context"
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
	"changebot/store/storetest"
)

// sqliteInstallation makes a SQLite installation with a row in every copied
// table and unfinished jobs (storetest.FillInstallation); it returns its
// sqlite:// URL and its path.
func sqliteInstallation(t *testing.T) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "changebot.db")
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := sqlite.Migrate(context.Background(), db, nil); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	storetest.FillInstallation(t, st)
	return "sqlite://" + path, path
}

// TestCopyCommand: `changebot copy` prints the rows of every table, the
// target then verifies, and it copies back from PostgreSQL to SQLite; a
// second copy into a target, a source being served (SQLite: its lock file
// held; PostgreSQL: a replica leads its job queue), a missing flag or
// source exit 1 naming the problem.
func TestCopyCommand(t *testing.T) {
	t.Parallel()
	from, path := sqliteInstallation(t)
	sc := pgtest.New(t)
	run := func(args ...string) (int, string, string) {
		var out, errb strings.Builder
		code := cliMain(append([]string{"copy"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}

	code, out, stderr := run("-from", from, "-to", sc.URL)
	if code != 0 {
		t.Fatalf("copy: exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{`operations\s+2\n`, `change_events\s+4\n`, `settings_audit\s+2\n`, `river_job\s+[1-9]\d*\n`,
		`2 operations' hash chains verified`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("copy output lacks %q:\n%s", want, out)
		}
	}
	st, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	var vout strings.Builder
	if err := cli.VerifyHistories(context.Background(), st, nil, &vout); err != nil || !strings.Contains(vout.String(), "2 operations checked, 0 broken") {
		t.Errorf("verify on the target: %v\n%s", err, vout.String())
	}

	// And back to SQLite: a PostgreSQL source, a SQLite target made here.
	back := "sqlite://" + filepath.Join(t.TempDir(), "back.db")
	if code, out, stderr := run("-from", sc.URL, "-to", back); code != 0 || !regexp.MustCompile(`operations\s+2\n`).MatchString(out) {
		t.Errorf("copy back to SQLite: exit %d\n%s%s", code, out, stderr)
	}
	// A PostgreSQL source whose job queue a replica leads is being served.
	if _, err := sc.Pool.Exec(context.Background(), `INSERT INTO river_leader (elected_at, expires_at, leader_id)
		VALUES (now(), now() + interval '1 minute', 'replica-a')`); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run("-from", sc.URL, "-to", "sqlite://"+filepath.Join(t.TempDir(), "again.db")); code != 1 ||
		!strings.Contains(stderr, "replica replica-a is serving this database") {
		t.Errorf("copy from a served PostgreSQL: exit %d, stderr %q (stdout %q)", code, stderr, out)
	}

	cases := []struct {
		name string
		args []string
		hold bool
		want string
	}{
		{"target not empty", []string{"-from", from, "-to", sc.URL}, false, "operations has 2 rows"},
		{"source served", []string{"-from", from, "-to", pgtest.New(t).URL}, true, "is being served: stop changebot serve before copying"},
		{"source missing", []string{"-from", "sqlite://" + filepath.Join(t.TempDir(), "none.db"), "-to", sc.URL}, false, "no SQLite database"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.hold {
				lock, err := database.Open(context.Background(), config.SQLiteURL(path), &database.OpenOpts{Exclusive: true})
				if err != nil {
					t.Fatal(err)
				}
				defer lock.Close()
			}
			code, out, stderr := run(c.args...)
			if code != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q (stdout %q); want 1 and %q", code, stderr, out, c.want)
			}
		})
	}
}
