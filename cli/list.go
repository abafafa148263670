package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"changebot/api"
	"changebot/api/backend"
	"changebot/flows/rules"
)

const listUsage = `usage: changebot list [-status S] [-step S] [-active true|false] [-project P] [-subject_id S]
                      [-target_key K] [-requested_by U] [-updated_after T] [-updated_before T] [-stuck]
                      [-limit N] [-cursor C] [-json] [-config file]
The filters are those of GET /api/v1/changes (docs/api.md, "Finding changes").
`

// cmdList prints a page of changes, newest first, filtered as GET
// /api/v1/changes filters them (changebot list): a table, or with -json
// the API's answer. It reads the database (DATABASE_URL or -config).
func cmdList(ctx context.Context, args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("config", os.Getenv("CHANGEBOT_CONFIG"), "YAML configuration file")
	// Each filter flag may be repeated: every value reaches the query as a
	// repeated parameter does in GET /api/v1/changes, which decides what a
	// repetition means (-status A -status B is -status A,B).
	filters := map[string]*queryFlag{}
	for _, p := range api.ListFilters {
		if p != "stuck" && p != "limit" {
			filters[p] = &queryFlag{}
			fs.Var(filters[p], p, "filter "+p+" (as in GET /api/v1/changes; may be repeated)")
		}
	}
	stuck := fs.Bool("stuck", false, "only stuck changes")
	limit := fs.Int("limit", api.DefaultListLimit, "page size (at most 500)")
	asJSON := fs.Bool("json", false, "print the API's JSON answer instead of a table")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, listUsage)
			return err
		}
		return usageError{msg: err.Error(), usage: listUsage}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q: list takes flags only\n%s", fs.Arg(0), listUsage)
	}
	q := url.Values{"limit": {strconv.Itoa(*limit)}}
	for k, v := range filters {
		for _, x := range *v {
			q.Add(k, x)
		}
	}
	if *stuck {
		q.Set("stuck", "true")
	}
	// The filters are checked before the database is opened: a bad one is
	// a usage error naming its flag (not the API's query parameter).
	if _, err := api.ParseListQuery(q, time.Now()); err != nil {
		if fe := (*api.FilterError)(nil); errors.As(err, &fe) {
			return usagef("%s\n%s", fe.FlagError(), listUsage)
		}
		return err
	}
	o, err := openStore(ctx, *path)
	if err != nil {
		return err
	}
	defer o.db.Close()
	defer func() { err = o.db.ExplainMissingSchema(err) }()
	cache, err := o.settings(ctx)
	if err != nil {
		return err
	}
	ops, next, err := api.ListChanges(ctx, backend.Store{Store: o.st, Settings: cache}, q, time.Now())
	if err != nil {
		return err
	}
	if *asJSON {
		page := api.ChangeListPage{Changes: []api.ChangeListItem{}, NextCursor: next}
		for _, op := range ops {
			page.Changes = append(page.Changes, api.NewChangeListItem(op, o.cfg.ExternalURL))
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(page)
	}
	tw := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "operation id\tproject\tsubject\ttarget\tstatus\tstep\tupdated (UTC)\tMR")
	for _, op := range ops {
		mr := "-"
		if op.MRIID > 0 {
			mr = "!" + strconv.FormatInt(op.MRIID, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", op.ID, op.Project, op.SubjectID, op.TargetKey, op.Status,
			rules.StepCode(op.Step).String(), op.UpdatedAt.UTC().Format("2006-01-02 15:04:05"), mr)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(ops) == 0 {
		fmt.Fprintln(stdout, "no changes match")
	}
	if next != "" {
		fmt.Fprintf(stdout, "more: add -cursor %s\n", next)
	}
	return nil
}

// queryFlag is a flag that may be given several times; each value is kept
// as given, in order, as a repeated query parameter.
type queryFlag []string

func (f *queryFlag) String() string { return strings.Join(*f, ",") }

func (f *queryFlag) Set(v string) error {
	*f = append(*f, v)
	return nil
}
