package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"changebot/api"
	"changebot/api/backend"
)

// cmdRollout prints a rollout's progress (changebot rollout <rollout id>):
// what GET /api/v1/rollouts/{id} answers, read through api/backend.
func cmdRollout(ctx context.Context, args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet("rollout", flag.ContinueOnError)
	path := fs.String("config", os.Getenv("CHANGEBOT_CONFIG"), "YAML configuration file")
	asJSON := fs.Bool("json", false, "print the API's JSON answer (GET /api/v1/rollouts/{id}) instead of text")
	if err := parseFlags(fs, reorderFlags(args), ""); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want one rollout id, got %d argument(s): usage: changebot rollout <rollout id> [-json]", fs.NArg())
	}
	id := fs.Arg(0)
	if strings.TrimSpace(id) == "" {
		return usagef("the rollout id is empty: usage: changebot rollout <rollout id> [-json]")
	}
	o, err := openStore(ctx, *path)
	if err != nil {
		return err
	}
	defer o.db.Close()
	defer func() { err = o.db.ExplainMissingSchema(err) }()
	v, err := backend.Rollouts{Store: o.st}.ReadRollout(ctx, id)
	if errors.Is(err, api.ErrNotFound) {
		return fmt.Errorf("no change was submitted with rollout_id %s in this database (changebot list shows the changes)", id)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return printRollout(stdout, v)
}

// printRollout writes v as text: a line of state and counts, the changes
// by status, and the changes that need someone.
func printRollout(w io.Writer, v api.RolloutView) error {
	fmt.Fprintf(w, "rollout %s: %s, %d of %d applied", v.RolloutID, v.State, v.Applied, v.Total)
	if v.Failed > 0 {
		fmt.Fprintf(w, ", %d failed", v.Failed)
	}
	if v.NeedsPerson > 0 {
		fmt.Fprintf(w, ", %d need a person", v.NeedsPerson)
	}
	fmt.Fprintf(w, "\nfirst submitted %s, last moved %s (UTC)\n\n", v.FirstCreatedAt.Format("2006-01-02 15:04:05"),
		v.LastUpdatedAt.Format("2006-01-02 15:04:05"))
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "status\tchanges")
	statuses := make([]string, 0, len(v.Counts))
	for s := range v.Counts {
		statuses = append(statuses, s)
	}
	slices.Sort(statuses)
	for _, s := range statuses {
		fmt.Fprintf(tw, "%s\t%d\n", s, v.Counts[s])
	}
	if len(v.Attention) > 0 {
		fmt.Fprintln(tw, "\noperation id\tstanding\tsubject\ttarget\tstep\tdetail")
		for _, c := range v.Attention {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.OperationID, c.Standing, c.SubjectID, c.TargetKey, c.Step.Name,
				strings.Join(strings.Fields(c.Detail), " "))
		}
		if v.More > 0 {
			fmt.Fprintf(tw, "…and %d more\n", v.More)
		}
	}
	return tw.Flush()
}
