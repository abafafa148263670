package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"changebot/config"
	"changebot/database"
	"changebot/demo"
)

const usage = `changebot carries configuration changes through GitLab merge requests or GitHub pull requests.

Usage:
  changebot serve   [-config file]          run the HTTP server and the job workers
  changebot migrate [-config file] [-down version [-yes]]  apply the database migrations (or revert to a version, asking first)
  changebot demo    [-timeout 90s] [-keep [-fail pipeline|approval|rebase|hang|none]] [-keep-data] [-platform gitlab|github]  carry one change end to end against an in-memory GitLab or GitHub
                                            (-keep: keep it all running to try more, with a second change stopped by -fail; -keep-data: keep its database or PostgreSQL schema)
  changebot doctor  [-config file] [-project P]... [-hook-token-file f]   check tokens, roles, webhooks, approval system, database
  changebot setup   [-config file] (-project P | -group G)... [-hook-token-file f] [-no-test] [-force]   create or fix the webhook, then test it
                                            (on GitHub -project is owner/repository; -group is GitLab's only)
  changebot settings get [<key>] [-project P] [-json]       show runtime settings as a table (needs DATABASE_URL)
  changebot settings set [-project P] [-by u] <key> [--] <json>  change one, audited, seen by every replica within 5s
  changebot list    [filters] [-stuck] [-json]               list changes, newest first (filters of GET /api/v1/changes)
  changebot rollout <rollout id> [-json]                    print a rollout's progress (-json: as GET /api/v1/rollouts/{id})
  changebot history <operation id> [-json [-stored]]        print a change's events (-json: as the events API)
  changebot replay  <operation id> [-at RFC3339 time]       rebuild a change's state from its events
  changebot verify  [<operation id>...]                     check hash chains and that replay equals the stored state
  changebot copy    -from <database url> -to <database url>  move an installation to another database (stop serving it first)
  changebot version                                         print the version, commit and Go version
  changebot help

Configuration comes from the YAML file and the environment (see README.md, "Configuration").
Every installation needs CHANGEBOT_EXTERNAL_URL, CHANGEBOT_CALLBACK_SECRET, CHANGEBOT_WEBHOOK_SECRETS
and CHANGEBOT_API_TOKENS; DATABASE_URL is optional (default: a SQLite file); CHANGEBOT_APPROVAL_URL
is needed unless the setting approval.provider is gitlab; CHANGEBOT_REVIEWER_TOKENS (the reviewer
accounts' tokens) only where the projects require approvals on the platform (serve starts without
them, with a WARN). Then one platform:
  GitLab (CHANGEBOT_PLATFORM=gitlab, the default): CHANGEBOT_GITLAB_URL and CHANGEBOT_GITLAB_TOKEN
    (the robot's token); webhook {CHANGEBOT_EXTERNAL_URL}/webhooks/gitlab.
  GitHub (CHANGEBOT_PLATFORM=github): a GitHub App, CHANGEBOT_GITHUB_APP_ID,
    CHANGEBOT_GITHUB_INSTALLATION_ID and CHANGEBOT_GITHUB_APP_PRIVATE_KEY_FILE (or
    CHANGEBOT_GITHUB_APP_PRIVATE_KEY), or a robot user's CHANGEBOT_GITHUB_TOKEN instead;
    CHANGEBOT_GITHUB_URL for GitHub Enterprise Server (https://<host>/api/v3);
    webhook {CHANGEBOT_EXTERNAL_URL}/webhooks/github (README "GitHub setup").
Any secret X may be given as X_FILE, a file holding it.
`

// Bot is what the command line needs of the bot itself, which it does not
// import (nothing imports package bot but cmd/changebot, which wires it in
// here): serving, the demo's in-process bot and the build's version.
type Bot struct {
	// Serve runs `changebot serve` with cfg (loaded and validated) and the
	// logger built from it, until ctx ends; bot.Serve.
	Serve func(ctx context.Context, cfg config.Config, log *slog.Logger) error
	// StartDemo starts the demo's bot; bot.StartDemo.
	StartDemo demo.StartFunc
	// Version is what `changebot version` prints (bot.BuildVersion).
	Version string
}

// Main runs the changebot command line with b and returns the process exit
// code: 0, 1 when a command failed, 2 for a command line it refuses (an
// unknown command, a bad flag or argument), printing the usage.
func Main(args []string, stdout, stderr io.Writer, b Bot) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal the default comes back: a second Ctrl-C or
	// SIGTERM ends the process at once, without the shutdown delay and drain.
	go func() { <-ctx.Done(); stop() }()
	var err error
	switch args[0] {
	case "serve":
		err = cmdServe(ctx, args[1:], stderr, b.Serve)
	case "history":
		err = cmdHistory(ctx, args[1:], stdout, false)
	case "replay":
		err = cmdHistory(ctx, args[1:], stdout, true)
	case "list":
		err = cmdList(ctx, args[1:], stdout)
	case "rollout":
		err = cmdRollout(ctx, args[1:], stdout)
	case "verify":
		err = cmdVerify(ctx, args[1:], stdout)
	case "copy":
		err = cmdCopy(ctx, args[1:], stdout, stderr)
	case "migrate":
		err = cmdMigrate(ctx, args[1:], stdout, stderr)
	case "demo":
		err = cmdDemo(ctx, args[1:], stdout, stderr, b.StartDemo)
	case "settings":
		err = cmdSettings(ctx, args[1:], stdout)
	case "version", "-version", "--version":
		if len(args) > 1 {
			err = usagef("unexpected argument %q: version takes no arguments", args[1])
			break
		}
		_, err = fmt.Fprintln(stdout, b.Version)
	case "doctor":
		err = cmdDoctor(ctx, args[1:], stdout, stderr)
	case "setup":
		err = cmdSetup(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0 // -h printed the flags: asking for help is no failure
	}
	if ue := (usageError{}); errors.As(err, &ue) {
		if ue.usage != "" {
			fmt.Fprintf(stderr, "changebot %s: %v\n%s", args[0], err, ue.usage)
			return 2
		}
		fmt.Fprintf(stderr, "changebot %s: %v (changebot help shows the usage)\n", args[0], err)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "changebot %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// usageError is a command line a command refuses before doing anything (a
// stray argument, a value out of range): Main exits 2 for it, as for an
// unknown command.
type usageError struct {
	msg string
	// usage, when set, is the command's own usage, printed after msg.
	usage string
}

func (e usageError) Error() string { return e.msg }

// parseFlags parses args into fs. A flag error (an unknown flag, a value
// that does not parse) is a usageError carrying the command's usage: Main
// prints the error, then the usage, and exits 2, where the flag package
// alone printed "Usage of <name>:" and Main exited 1. -h prints the usage
// to fs's output and returns flag.ErrHelp. cmdUsage is the usage to show;
// "" means the command's lines of changebot help followed by its flags.
func parseFlags(fs *flag.FlagSet, args []string, cmdUsage string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard) // the error is Main's to print, once
	err := fs.Parse(args)
	fs.SetOutput(out)
	if cmdUsage == "" {
		cmdUsage = commandUsage(fs)
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(out, cmdUsage)
		return err
	case err != nil:
		return usageError{msg: err.Error(), usage: cmdUsage}
	}
	return nil
}

// commandUsage is fs's command's lines of changebot help ("usage:
// changebot migrate [-config file] …") and its flags, as -h shows them.
func commandUsage(fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("usage:\n")
	in := false
	for _, line := range strings.Split(usage, "\n") {
		switch {
		case strings.HasPrefix(line, "  changebot "+fs.Name()+" "), line == "  changebot "+fs.Name():
			in = true
		case in && strings.HasPrefix(line, strings.Repeat(" ", 20)):
		default:
			in = false
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	b.WriteString("flags:\n")
	out := fs.Output()
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(out)
	return b.String()
}

// usagef returns a usageError formatted as fmt.Sprintf.
func usagef(format string, a ...any) error { return usageError{msg: fmt.Sprintf(format, a...)} }

// noArgs refuses the arguments left after fs's flags.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q: %s takes flags only", fs.Arg(0), fs.Name())
	}
	return nil
}

func newLogger(w io.Writer, cfg config.Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.SlogLevel()}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func cmdServe(ctx context.Context, args []string, stderr io.Writer, serve func(context.Context, config.Config, *slog.Logger) error) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", os.Getenv("CHANGEBOT_CONFIG"), "YAML configuration file")
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
	return serve(ctx, cfg, newLogger(stderr, cfg))
}

// ConfirmInput is where migrate -down reads its confirmation; tests
// replace it.
var ConfirmInput io.Reader = os.Stdin

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", os.Getenv("CHANGEBOT_CONFIG"), "YAML configuration file")
	down := fs.Int("down", -1, "revert changebot's migrations down to this version (0: every migration, the job queue's tables too); asks for confirmation")
	yes := fs.Bool("yes", false, "revert without asking")
	if err := parseFlags(fs, args, ""); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	downSet := false
	fs.Visit(func(f *flag.Flag) { downSet = downSet || f.Name == "down" })
	if downSet && *down < 0 {
		return usagef("-down %d: a version is 0 or more (0 reverts every migration)", *down)
	}
	// Migrating needs only the database: other configuration problems are
	// reported by serve.
	cfg, err := config.LoadDatabase(*path, nil, nil)
	if err != nil {
		return err
	}
	if !downSet {
		db, err := openMigrateDatabase(ctx, cfg.ResolvedDatabaseURL())
		if err != nil {
			return err
		}
		defer db.Close()
		if err := db.Migrate(ctx); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "migrations applied, now at version %d\n", db.LatestMigration())
		return nil
	}
	return migrateDown(ctx, cfg.ResolvedDatabaseURL(), uint(*down), *yes, stdout, stderr)
}

// openMigrateDatabase opens the database migrate changes. A SQLite file is
// locked as serve locks it (<file>.lock) for the migration's duration: a
// serve or demo holding it is refused, as copy refuses a served source, so
// no migration changes the tables under a running bot.
func openMigrateDatabase(ctx context.Context, url string) (*database.DB, error) {
	db, err := database.Open(ctx, url, &database.OpenOpts{Exclusive: true})
	if errors.Is(err, database.ErrSecondProcess) {
		t, _ := config.ParseDatabaseTarget(url)
		return nil, fmt.Errorf("%s is being served: stop changebot serve (or demo) before migrating", t.Path)
	}
	return db, err
}

// migrateDown reverts changebot's migrations to version target (0: all of
// them and River's), after the person typed "yes" (or with yes set). It
// refuses, before asking, a target above the applied version and, on
// SQLite, any target but 0 (database.MigrateDown's rule); the question
// comes only when the revert would run.
func migrateDown(ctx context.Context, url string, target uint, yes bool, stdout, stderr io.Writer) error {
	if t, err := config.ParseDatabaseTarget(url); err == nil && t.Engine == config.EngineSQLite && target != 0 {
		return usagef("-down %d: %s", target, database.ErrSQLiteDownTo)
	}
	db, err := openMigrateDatabase(ctx, url)
	if err != nil {
		return err
	}
	defer db.Close()
	current, _, err := db.MigrationStatus()
	if err != nil {
		return err
	}
	switch {
	case target > current:
		return fmt.Errorf("-down %d: the database is at version %d; changebot migrate (without -down) moves it up", target, current)
	case target == current && target > 0:
		fmt.Fprintf(stdout, "already at version %d; nothing reverted\n", current)
		return nil
	}
	what := fmt.Sprintf("migrations %d to %d", target+1, current)
	if target == 0 {
		what = "every migration, the job queue's tables included"
	}
	if !yes {
		fmt.Fprintf(stderr, "This reverts %s: the tables, columns and indexes they added are dropped with their data.\n"+
			"Stop every changebot replica first. Type yes to continue: ", what)
		line, _ := bufio.NewReader(ConfirmInput).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			return errors.New("not confirmed; nothing was reverted (answer yes, or pass -yes)")
		}
	}
	if err := db.MigrateDown(ctx, target); err != nil {
		return err
	}
	if target == 0 {
		fmt.Fprintln(stdout, "all migrations reverted")
		return nil
	}
	fmt.Fprintf(stdout, "migrations reverted, now at version %d\n", target)
	return nil
}

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer, start demo.StartFunc) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 90*time.Second, "give up after this long")
	verbose := fs.Bool("v", false, "log the bot's own lines")
	keep := fs.Bool("keep", false, "keep the bot, the in-memory GitLab and the approval system running after the first change (until Ctrl-C), leave a second change stopped by -fail, and print how to use them")
	fail := fs.String("fail", "", "with -keep, what stops the second change: "+strings.Join(demo.FailModes, ", ")+
		" (its pipeline fails once; its approval is held; its rebase conflicts; its rebase hangs; no second change); default pipeline, none with -platform github")
	keepData := fs.Bool("keep-data", false, "keep the demo's database when it ends: its PostgreSQL schema (changebot_demo_<random>, dropped by default), or the temporary SQLite file")
	listen := fs.String("listen", "", "host:port of the bot (default a free port on 127.0.0.1)")
	glListen := fs.String("gitlab-listen", "", "host:port of the in-memory GitLab (default a free port on 127.0.0.1)")
	apListen := fs.String("approval-listen", "", "host:port of the stand-in approval system (default a free port on 127.0.0.1)")
	platformName := fs.String("platform", config.PlatformGitLab, "the in-memory platform: gitlab, or github (githubfake, webhooks to /webhooks/github)")
	if err := parseFlags(fs, args, ""); err != nil {
		return err
	}
	if *platformName != config.PlatformGitLab && *platformName != config.PlatformGitHub {
		return usagef("-platform %q: want gitlab or github", *platformName)
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *timeout <= 0 {
		return usagef("-timeout %v: want a positive duration such as 90s", *timeout)
	}
	switch {
	case *fail != "" && !slices.Contains(demo.FailModes, *fail):
		return usagef("-fail %q: want one of %s", *fail, strings.Join(demo.FailModes, ", "))
	case *fail != "" && !*keep:
		return usagef("-fail %s needs -keep: the second change is left for you to act on", *fail)
	case *fail != "" && *fail != demo.FailNone && *platformName == config.PlatformGitHub:
		return usagef("-fail %s: the failure switches need the in-memory GitLab (-platform gitlab)", *fail)
	}
	// Without DATABASE_URL the demo needs no database server: a SQLite
	// file in a temporary directory, removed at exit unless -keep.
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		dir, err := os.MkdirTemp("", "changebot-demo-")
		if err != nil {
			return fmt.Errorf("making the demo's database directory: %w", err)
		}
		if *keep || *keepData {
			fmt.Fprintf(stdout, "the demo's database stays at %s after the demo\n", dir)
		} else {
			defer os.RemoveAll(dir)
		}
		url = config.SQLiteURL(filepath.Join(dir, config.DefaultDatabaseFile))
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	// A closed standard output (changebot demo | head) would kill the
	// process with SIGPIPE before it drops its schema: with SIGPIPE
	// notified, the write fails instead and demo.Run stops and cleans up.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	return demo.Run(ctx, demo.Opts{StartFunc: start, DatabaseURL: url, Timeout: *timeout, Out: stdout, Logger: log, Keep: *keep, KeepData: *keepData,
		Listen: *listen, GitLabListen: *glListen, ApprovalListen: *apListen, Platform: *platformName, Fail: *fail})
}
