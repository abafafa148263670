package bot

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"changebot/config"
	"changebot/ops"
)

// Serve runs `changebot serve` with cfg (loaded and validated by the
// command line, package cli) until ctx ends: it logs the start, builds the
// App (which takes the SQLite file's lock before anything writes to it),
// logs doctor's findings while the replica already serves, listens on
// cfg.Listen and runs the App. Errors: building the App, listening, or
// App.Run's.
func Serve(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	b := BuildVersion()
	log.Info("starting changebot", "version", b.Version, "commit", b.Commit, "go", b.Go,
		"database", cfg.DatabaseNote(), "config", cfg)
	app, err := NewApp(ctx, cfg, &AppOpts{Logger: log})
	if err != nil {
		return err
	}
	defer app.Close()
	// Doctor's findings are logged while the replica already serves: a
	// slow GitLab must not hold back readiness or liveness.
	doctorCtx, stopDoctor := context.WithCancel(ctx)
	doctorDone := make(chan struct{})
	go func() { defer close(doctorDone); ops.LogDoctor(doctorCtx, cfg, log) }()
	defer func() { stopDoctor(); <-doctorDone }()
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	return app.Run(ctx, ln)
}
