package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"changebot/api"
	"changebot/api/backend"
	"changebot/config"
	"changebot/database"
	"changebot/flows"
	"changebot/flows/rules"
	"changebot/settings"
	"changebot/store"
)

// openedStore is a database a command opened (openStore): its
// configuration, the handle to close, and the store on it.
type openedStore struct {
	cfg config.Config
	db  *database.DB
	st  store.Store
}

// openStore connects to DATABASE_URL (or the -config file's database_url)
// for the commands that read or write the store (history, replay, verify,
// list, settings); the caller closes db. It is the command line's one way
// to open the store.
func openStore(ctx context.Context, path string) (openedStore, error) {
	cfg, err := config.LoadDatabase(path, nil, nil)
	if err != nil {
		return openedStore{}, err
	}
	db, err := database.OpenExisting(ctx, cfg.ResolvedDatabaseURL(), "")
	if err != nil {
		return openedStore{}, err
	}
	st, err := db.Store(nil)
	if err != nil {
		db.Close()
		return openedStore{}, err
	}
	return openedStore{cfg: cfg, db: db, st: st}, nil
}

// settings loads the runtime settings from the store, the config file's
// settings: map as their initial values (what serve would use).
func (o openedStore) settings(ctx context.Context) (*settings.Cache, error) {
	cache, err := settings.NewCache(settings.CacheConfig{Store: o.st, Initial: o.cfg.Settings})
	if err != nil {
		return nil, err
	}
	if err := cache.Load(ctx); err != nil {
		return nil, err
	}
	return cache, nil
}

// cmdHistory prints an operation's events (changebot history <id>), or its
// state at a moment rebuilt from them (changebot replay <id> -at <time>).
func cmdHistory(ctx context.Context, args []string, stdout io.Writer, replay bool) (err error) {
	name := "history"
	if replay {
		name = "replay"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	path := fs.String("config", os.Getenv("CHANGEBOT_CONFIG"), "YAML configuration file")
	at := fs.String("at", "", "RFC 3339 time to rebuild the state at (replay; default now)")
	asJSON := fs.Bool("json", false, "print the events as JSON, the body of GET /api/v1/changes/{id}/events (history)")
	stored := fs.Bool("stored", false, "with -json: the events as stored, the form their hash chain covers, not upcast")
	if err := parseFlags(fs, reorderFlags(args), ""); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want one operation id, got %d argument(s): usage: changebot %s <operation id>", fs.NArg(), name)
	}
	// A flag the command would ignore is refused, not dropped silently.
	var ignored []string
	fs.Visit(func(f *flag.Flag) {
		switch {
		case replay && (f.Name == "json" || f.Name == "stored"):
			ignored = append(ignored, "-"+f.Name+" is history's (replay prints the state)")
		case !replay && f.Name == "at":
			ignored = append(ignored, "-at is replay's (history prints every event)")
		case !replay && f.Name == "stored" && !*asJSON:
			ignored = append(ignored, "-stored goes with -json (history -json -stored <id>: the events as stored, for their hash chain); the table takes no -stored")
		}
	})
	if len(ignored) > 0 {
		return usageError{msg: strings.Join(ignored, "; "), usage: commandUsage(fs)}
	}
	if *at != "" {
		if _, perr := time.Parse(time.RFC3339, *at); perr != nil {
			return usageError{msg: fmt.Sprintf("-at %q: want an RFC 3339 time such as 2026-12-01T14:00:00Z", *at), usage: commandUsage(fs)}
		}
	}
	o, err := openStore(ctx, *path)
	if err != nil {
		return err
	}
	defer o.db.Close()
	defer func() { err = o.db.ExplainMissingSchema(err) }()
	st := o.st
	id := fs.Arg(0)
	if *asJSON && !replay {
		return printEventsJSON(ctx, st, id, *stored, stdout)
	}
	if replay {
		return printReplay(ctx, st, *path, id, *at, stdout)
	}
	events, err := st.ListEvents(ctx, st.DB(), id)
	if err != nil {
		return err
	}
	if len(events) == 0 {
		return unknownChange(id)
	}
	tw := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "seq\ttime (UTC)\ttype\tstep\tstatus\tactor\tsource\tpayload")
	for _, ev := range events {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ev.Seq, ev.OccurredAt.Format("2006-01-02 15:04:05"), ev.Type,
			rules.StepCode(ev.ToStep), ev.ToStatus, ev.Actor, ev.Source, ev.Payload)
	}
	return tw.Flush()
}

// printEventsJSON writes the events of id as GET
// /api/v1/changes/{id}/events answers them, upcast or as stored.
func printEventsJSON(ctx context.Context, st store.Store, id string, stored bool, stdout io.Writer) error {
	h, err := st.ReadHistory(ctx, id)
	if err != nil {
		return err
	}
	form := api.FormCurrent
	if stored {
		form = api.FormStored
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(api.NewEventsView(backend.HistoryOf(h), form))
}

// printReplay prints id's state at `at` (RFC 3339; empty: now), replayed
// from its nearest snapshot (flows.ReplaySnapshots), storing snapshots every
// history.snapshot_every events on the way.
func printReplay(ctx context.Context, st store.Store, path, id, at string, stdout io.Writer) error {
	var when time.Time
	if at != "" {
		var err error
		if when, err = time.Parse(time.RFC3339, at); err != nil {
			return fmt.Errorf("parsing -at: %w", err)
		}
	}
	s, read, err := flows.ReplaySnapshots(ctx, st, id, when, snapshotEvery(ctx, st, path))
	if err != nil {
		return err
	}
	if s.Seq == 0 && read == 0 {
		return unknownChange(id)
	}
	if s.Seq == 0 {
		fmt.Fprintf(stdout, "%s did not exist yet at %s\n", id, at)
		return nil
	}
	fmt.Fprintf(stdout, "%s at %s: %s (%s), event %d of %s\n", id, orNow(at), s.Status, s.Step, s.Seq, s.At.Format(time.RFC3339))
	return nil
}

// snapshotEvery is the setting history.snapshot_every as stored (or
// configured); its default when the settings cannot be read.
func snapshotEvery(ctx context.Context, st store.Store, path string) int {
	def := settings.DefaultValue(settings.HistorySnapshotEvery).Int()
	cfg, err := config.LoadDatabase(path, nil, nil)
	if err != nil {
		return def
	}
	cache, err := settings.NewCache(settings.CacheConfig{Store: st, Initial: cfg.Settings})
	if err != nil || cache.Load(ctx) != nil {
		return def
	}
	return cache.Get(settings.HistorySnapshotEvery, "").Int()
}

func orNow(at string) string {
	if at == "" {
		return "now"
	}
	return at
}

// cmdVerify checks every operation's history (or the given ones): the hash
// chain and that replaying the events gives the stored state (DESIGN §4).
func cmdVerify(ctx context.Context, args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	path := fs.String("config", os.Getenv("CHANGEBOT_CONFIG"), "YAML configuration file")
	if err := parseFlags(fs, reorderFlags(args), ""); err != nil {
		return err
	}
	o, err := openStore(ctx, *path)
	if err != nil {
		return err
	}
	defer o.db.Close()
	defer func() { err = o.db.ExplainMissingSchema(err) }()
	st := o.st
	return VerifyHistories(ctx, st, fs.Args(), stdout)
}

// VerifyHistories checks the operations ids (every operation when empty),
// each read in one snapshot, printing each broken one and a summary to
// stdout; an error when one is broken.
func VerifyHistories(ctx context.Context, st store.Store, ids []string, stdout io.Writer) error {
	db := st.DB()
	checked, broken := 0, 0
	check := func(id string) error {
		h, err := st.ReadHistory(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return unknownChange(id)
		}
		if err != nil {
			return err
		}
		checked++
		if err := flows.Verify(h); err != nil {
			broken++
			fmt.Fprintf(stdout, "%s: %v\n", id, err)
		}
		return nil
	}
	if len(ids) > 0 {
		for _, id := range ids {
			if err := check(id); err != nil {
				return err
			}
		}
	} else {
		after := ""
		for {
			page, err := st.ListOperationIDs(ctx, db, after, 500)
			if err != nil {
				return err
			}
			for _, id := range page {
				if err := check(id); err != nil {
					return err
				}
			}
			if len(page) < 500 {
				break
			}
			after = page[len(page)-1]
		}
	}
	noun := "operations"
	if checked == 1 {
		noun = "operation"
	}
	fmt.Fprintf(stdout, "%d %s checked, %d broken\n", checked, noun, broken)
	if broken > 0 {
		return fmt.Errorf("%d operations have a broken history", broken)
	}
	return nil
}

// unknownChange is the error of history, replay and verify for an
// operation id the database does not hold: the three name it alike.
func unknownChange(id string) error {
	return fmt.Errorf("no change %s in this database (changebot list shows the changes)", id)
}

// reorderFlags moves flags before positional arguments so that
// "history op_1 -config x" works like "history -config x op_1".
func reorderFlags(args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			if !containsEq(a) && i+1 < len(args) && (a == "-config" || a == "--config" || a == "-at" || a == "--at") {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		rest = append(rest, a)
	}
	return append(flags, rest...)
}

func containsEq(s string) bool {
	for _, c := range s {
		if c == '=' {
			return true
		}
	}
	return false
}
