package bot

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
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
	if err := parseFlags(fs, args, ""); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *from == "" || *to == "" {
		return usageError{msg: "both -from and -to are required", usage: commandUsage(fs)}
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

// openCopyEnd opens the database url names (a DATABASE_URL: postgres://…,
// key=value or sqlite:///path). A SQLite end is locked as serve locks it
// (<file>.lock, errSecondProcess when a serve holds it) for the copy's
// duration, so a serve can neither be running nor start meanwhile; a SQLite
// source must exist. The target is migrated (changebot's and River's
// migrations); the source must be at the newest migration already.
func openCopyEnd(ctx context.Context, url string, target bool) (*copyEnd, error) {
	t, err := parseDatabaseTarget(url)
	if err != nil {
		return nil, err
	}
	if !target && t.Engine == EngineSQLite {
		if _, err := os.Stat(t.Path); err != nil {
			return nil, fmt.Errorf("no SQLite database at %s: %w", t.Path, err)
		}
	}
	d, err := openDatabase(ctx, url, "", true)
	if errors.Is(err, errSecondProcess) {
		return nil, fmt.Errorf("%s is being served: stop changebot serve before copying", t.Path)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case target:
		err = d.Migrate(ctx)
	case d.pool != nil:
		if err = requireCurrent(d.MigrationStatus()); err == nil {
			err = refuseServed(ctx, d.pool)
		}
	default:
		err = requireCurrent(d.MigrationStatus())
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	st, err := d.Store(nil)
	if err != nil {
		d.Close()
		return nil, err
	}
	cs, ok := st.(copyStore)
	if !ok {
		d.Close()
		return nil, fmt.Errorf("the %s store cannot export or import", t.Engine)
	}
	return &copyEnd{store: cs, name: d.Describe(), close: d.Close}, nil
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

// refuseServed refuses a PostgreSQL source that a replica serves: one
// leads its job queue (River elects a leader among running clients and
// renews it every few seconds; a stopped replica resigns, a killed one's
// term runs out within about a minute).
func refuseServed(ctx context.Context, pool *pgxpool.Pool) error {
	var leader string
	var until time.Time
	err := pool.QueryRow(ctx, `SELECT leader_id, expires_at FROM river_leader WHERE expires_at > now() LIMIT 1`).Scan(&leader, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking whether a replica serves the database: %w", err)
	}
	return fmt.Errorf("replica %s is serving this database (it leads the job queue until %s): stop every replica before copying",
		leader, until.UTC().Format(time.RFC3339))
}

var (
	_ copyStore = (*sqlite.Store)(nil)
	_ copyStore = (*postgres.Store)(nil)
)
