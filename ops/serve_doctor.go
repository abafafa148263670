package ops

import (
	"context"
	"log/slog"
	"time"

	"changebot/config"
)

// DoctorAtStart bounds the doctor run serve makes while it starts
// (LogDoctor).
const DoctorAtStart = 20 * time.Second

// LogDoctor runs doctor over the projects with stored settings and logs
// its summary, each WARN at warn level and each FAIL at error level; it
// never stops serve (GitLab may be briefly down while the bot starts).
func LogDoctor(ctx context.Context, cfg config.Config, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, DoctorAtStart)
	defer cancel()
	checks := RunDoctor(ctx, cfg, nil)
	for _, c := range checks {
		switch c.Level {
		case CheckWarn:
			log.Warn("doctor check warns", "check", c.What, "fix", c.Fix)
		case CheckFail:
			log.Error("doctor check failed", "check", c.What, "fix", c.Fix)
		}
	}
	summary, fails := DoctorSummary(checks)
	log.Info("doctor checked the installation", "summary", summary, "fails", fails)
}
