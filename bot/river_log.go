package bot

import (
	"context"
	"log/slog"
	"strings"
)

// riverQuietSuffixes end the messages River logs at info on every periodic
// tick of its producers and maintenance services (river v0.51:
// producer.go "Producer job counts", riversharedmaintenance
// LogPrefixRanSuccessfully, the periodic job enqueuer's skip): routine
// lines that changebot logs at debug.
var riverQuietSuffixes = []string{
	": Producer job counts",
	": Ran successfully",
	": nil returned from periodic job constructor, skipping",
}

// riverLogHandler hands River's log records to next, turning its routine
// info lines (riverQuietSuffixes) into debug ones. Everything else keeps
// its level.
type riverLogHandler struct{ next slog.Handler }

// quietRiverLogger returns the logger River is given.
func quietRiverLogger(log *slog.Logger) *slog.Logger {
	return slog.New(riverLogHandler{next: log.Handler()})
}

// Enabled implements slog.Handler.
func (h riverLogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle implements slog.Handler.
func (h riverLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo && routineRiverLine(r.Message) {
		if !h.next.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.next.Handle(ctx, r)
}

func routineRiverLine(msg string) bool {
	for _, s := range riverQuietSuffixes {
		if strings.HasSuffix(msg, s) {
			return true
		}
	}
	return false
}

// WithAttrs implements slog.Handler.
func (h riverLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return riverLogHandler{next: h.next.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h riverLogHandler) WithGroup(name string) slog.Handler {
	return riverLogHandler{next: h.next.WithGroup(name)}
}
