package flows

import (
	"context"

	"changebot/platform"
)

// ApplyHook exposes applyHook to the external tests (the webhook path of
// the validated race).
func (e *Engine) ApplyHook(ctx context.Context, deliveryID int64, ev platform.HookEvent) (string, error) {
	return e.applyHook(ctx, deliveryID, ev)
}
