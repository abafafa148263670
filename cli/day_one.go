package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"changebot/config"
	"changebot/ops"
	"changebot/platform"
)

// listFlag is a repeatable flag whose values may also be comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// readTokenFile reads a token from a file (its content, trimmed); "" for
// no file. The token never appears in an error.
func readTokenFile(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path) // #nosec G304 -- a file the operator names
	if err != nil {
		return "", fmt.Errorf("reading the token file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("the token file %s is empty", path)
	}
	return t, nil
}

func cmdDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", os.Getenv("CHANGEBOT_CONFIG"), "YAML configuration file")
	var projects listFlag
	fs.Var(&projects, "project", "a project to check, full path or id (repeatable or comma-separated); projects with stored settings are always checked")
	tokenFile := fs.String("hook-token-file", "", "file holding a token allowed to read the webhooks (a project Maintainer's); default the robot's token")
	if err := parseFlags(fs, args, ""); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	cfg, err := config.Load(*path, nil, nil)
	if err != nil {
		return err
	}
	token, err := readTokenFile(*tokenFile)
	if err != nil {
		return err
	}
	checks := ops.RunDoctor(ctx, cfg, &ops.DoctorOpts{Projects: projects, HookToken: token})
	for _, c := range checks {
		fmt.Fprintln(stdout, c)
	}
	summary, fails := ops.DoctorSummary(checks)
	fmt.Fprintln(stdout, summary)
	if fails > 0 {
		return fmt.Errorf("%d check(s) failed", fails)
	}
	return nil
}

func cmdSetup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", os.Getenv("CHANGEBOT_CONFIG"), "YAML configuration file")
	var projects, groups listFlag
	fs.Var(&projects, "project", "a project whose webhook to set up, full path or id (repeatable or comma-separated)")
	fs.Var(&groups, "group", "a group whose webhook to set up, full path or id (GitLab Premium; repeatable or comma-separated)")
	tokenFile := fs.String("hook-token-file", "", "file holding a token allowed to write webhooks (a project Maintainer's, a group Owner's); default the robot's token")
	noTest := fs.Bool("no-test", false, "do not ask GitLab for a test event")
	force := fs.Bool("force", false, "repoint a webhook named changebot that sends to another URL (another installation's) to this bot")
	if err := parseFlags(fs, args, ""); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if len(projects)+len(groups) == 0 {
		return usageError{msg: "name at least one -project or -group", usage: commandUsage(fs)}
	}
	cfg, err := config.Load(*path, nil, nil)
	if err != nil {
		return err
	}
	token, err := readTokenFile(*tokenFile)
	if err != nil {
		return err
	}
	var owners []platform.HookOwner
	for _, p := range projects {
		owners = append(owners, platform.HookOwner{ID: p})
	}
	for _, g := range groups {
		owners = append(owners, platform.HookOwner{Group: true, ID: g})
	}
	_, err = ops.RunSetup(ctx, cfg, ops.SetupOpts{Owners: owners, HookToken: token, NoTest: *noTest, Force: *force, Out: stdout})
	return err
}
