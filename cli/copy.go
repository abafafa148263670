package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"changebot/config"
	"changebot/database"
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
// (<file>.lock, database.ErrSecondProcess when a serve holds it) for the copy's
// duration, so a serve can neither be running nor start meanwhile; a SQLite
// source must exist. The target is migrated (changebot's and River's
// migrations); the source must be at the newest migration already.
func openCopyEnd(ctx context.Context, url string, target bool) (*copyEnd, error) {
	t, err := config.ParseDatabaseTarget(url)
	if err != nil {
		return nil, err
	}
	if !target && t.Engine == config.EngineSQLite {
		if _, err := os.Stat(t.Path); err != nil {
			return nil, fmt.Errorf("no SQLite database at %s: %w", t.Path, err)
		}
	}
	d, err := database.Open(ctx, url, &database.OpenOpts{Exclusive: true})
	if errors.Is(err, database.ErrSecondProcess) {
		return nil, fmt.Errorf("%s is being served: stop changebot serve before copying", t.Path)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case target:
		err = d.Migrate(ctx)
	default:
		if err = requireCurrent(d.MigrationStatus()); err == nil {
			err = d.RefuseServed(ctx)
		}
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

var (
	_ copyStore = (*sqlite.Store)(nil)
	_ copyStore = (*postgres.Store)(nil)
)
