package bot

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"

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
	ln, err := listen(ctx, cfg.Listen, log)
	if err != nil {
		return err
	}
	return app.Run(ctx, ln)
}

// listen returns the socket handed to this process by a service manager
// (systemd's socket activation protocol, sd_listen_fds(3): LISTEN_FDS=1 or
// more, and LISTEN_PID unset or this process's pid, give the listening
// socket as file descriptor 3), or else a new listener on addr (host:port).
// An inherited socket keeps its port bound while the replica restarts:
// requests wait in its backlog instead of being refused. Errors name the
// address or the descriptor.
func listen(ctx context.Context, addr string, log *slog.Logger) (net.Listener, error) {
	if n, _ := strconv.Atoi(os.Getenv("LISTEN_FDS")); n >= 1 {
		if pid := os.Getenv("LISTEN_PID"); pid == "" || pid == strconv.Itoa(os.Getpid()) {
			f := os.NewFile(3, "LISTEN_FDS socket")
			ln, err := net.FileListener(f)
			_ = f.Close() // FileListener holds its own copy
			if err != nil {
				return nil, fmt.Errorf("using the socket of LISTEN_FDS (file descriptor 3): %w", err)
			}
			log.Info("listening on the inherited socket", "addr", ln.Addr().String())
			return ln, nil
		}
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return ln, nil
}
