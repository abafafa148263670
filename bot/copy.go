package bot

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"

	"changebot/store/postgres"
	"changebot/store/sqlite"
	"changebot/store/storecopy"
)

// copyStore is what `changebot copy` needs of a store at either end.
type copyStore interface {
	storecopy.Source
	storecopy.Target
}

// copyEnd is one end of a copy, open: its store, what it names and how to
// release it.
type copyEnd struct {
	store copyStore
	name  string
	close func()
}

// cmdCopy moves an installation to another database (issue 11 point 6):
// changebot copy -from sqlite:///path/changebot.db -to postgres://…
func cmdCopy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("copy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "database to copy from: sqlite:///path/changebot.db or postgres://… (not being served)")
	to := fs.String("to", "", "database to copy to: postgres://… or sqlite:///path (migrated here; must be empty)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *from == "" || *to == "" || fs.NArg() > 0 {
		return errors.New("usage: changebot copy -from <database url> -to <database url>")
	}
	if *from == *to {
		return errors.New("-from and -to name the same database")
	}
	src, err := openCopyEnd(ctx, *from, false)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer src.close()
	dst, err := openCopyEnd(ctx, *to, true)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer dst.close()
	rep, err := storecopy.Copy(ctx, src.store, dst.store)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintf(tw, "copied %s to %s\n", src.name, dst.name)
	fmt.Fprintln(tw, "table\trows")
	for _, c := range rep.Counts {
		fmt.Fprintf(tw, "%s\t%d\n", c.Table, c.Rows)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d operations' hash chains verified on the target\n", rep.Verified)
	return nil
}

// copySQLitePrefix starts a URL naming a SQLite file (sqlite:///abs/path
// or sqlite://relative/path), as DATABASE_URL does.
const copySQLitePrefix = "sqlite://"

// openCopyEnd opens the database url names. A SQLite source must exist
// and must not be served: its lock file (<file>.lock, which serve holds
// while it runs) is taken for the copy's duration, so neither can a serve
// start meanwhile. The target is migrated (changebot's and River's
// migrations); the source must be at the newest migration already.
func openCopyEnd(ctx context.Context, url string, target bool) (*copyEnd, error) {
	if path, ok := strings.CutPrefix(url, copySQLitePrefix); ok {
		return openCopySQLite(ctx, path, target)
	}
	if !validDatabaseURL(url) {
		return nil, errors.New("not a sqlite:// file, a postgres:// URL or a key=value connection string")
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting: %w", err)
	}
	if target {
		err = postgres.Migrate(ctx, pool, nil)
	} else {
		err = requireCurrent(postgres.MigrationStatus(pool, ""))
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	st, err := postgres.New(pool, nil)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &copyEnd{store: st, name: "postgres " + Config{DatabaseURL: url}.RedactedDatabaseURL(), close: pool.Close}, nil
}

func openCopySQLite(ctx context.Context, path string, target bool) (*copyEnd, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, errors.New("want sqlite:///absolute/path/changebot.db or sqlite://relative/path.db, without parameters")
	}
	if !target {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("no SQLite database at %s: %w", path, err)
		}
	}
	lock, err := copyLock(path + ".lock")
	if err != nil {
		return nil, err
	}
	db, err := sqlite.OpenDB(path)
	if err != nil {
		lock.Close()
		return nil, err
	}
	release := func() { _ = db.Close(); _ = lock.Close() }
	if target {
		err = sqlite.Migrate(ctx, db, nil)
	} else {
		err = requireCurrent(sqlite.MigrationStatus(db))
	}
	if err != nil {
		release()
		return nil, err
	}
	st, err := sqlite.New(db, nil)
	if err != nil {
		release()
		return nil, err
	}
	return &copyEnd{store: st, name: "sqlite " + path, close: release}, nil
}

// requireCurrent refuses a source that is not at the newest migration.
func requireCurrent(version uint, current bool, err error) error {
	if err != nil {
		return err
	}
	if !current {
		return fmt.Errorf("the database is at migration %d, not the newest: run changebot migrate on it first (DATABASE_URL set to it)", version)
	}
	return nil
}

// copyLock takes the exclusive lock serve holds on a SQLite file's
// <file>.lock while it runs (flock: the operating system releases it with
// the process); a held lock means the database is being served.
func copyLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is locked: a changebot process is serving this database; stop it before copying", path)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}

var _ copyStore = (*sqlite.Store)(nil)
var _ copyStore = (*postgres.Store)(nil)
