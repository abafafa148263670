package flows_test

import (
	"context"
	"errors"
	"testing"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/store"
)

// TestOnePlatformPerInstallation: an engine serving GitHub records github
// on every change it submits, and an engine serving GitLab on the same
// database never acts on that change: its step jobs do nothing and its
// actions answer ErrOtherPlatform, leaving the change where it was
// (issue 15 point 1: one platform per installation, recorded on each
// change).
func TestOnePlatformPerInstallation(t *testing.T) {
	ctx := context.Background()
	var cfg flows.EngineConfig
	h := flowtest.New(t, &flowtest.Opts{Configure: func(c *flows.EngineConfig) {
		c.Platform = store.PlatformGitHub
		cfg = *c
	}})
	if got := h.Engine.Platform(); got != store.PlatformGitHub {
		t.Fatalf("engine platform %q, want github", got)
	}
	op := h.Submit(t, flowtest.Change("svc-hub"))
	if got := h.Op(t, op.ID).Platform; got != store.PlatformGitHub {
		t.Fatalf("submitted change records platform %q, want github", got)
	}

	cfg.Platform = ""
	lab, err := flows.NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := lab.Platform(); got != store.PlatformGitLab {
		t.Fatalf("engine with no platform named serves %q, want gitlab", got)
	}
	ran := false
	if err := lab.RunStepFunc(ctx, rules.KindRequestApproval, op.ID, rules.StepCode(op.Step), 1, 5,
		func(context.Context, store.Operation) error { ran = true; return nil }); err != nil {
		t.Fatalf("the other platform's job: %v, want nil (dropped)", err)
	}
	if ran {
		t.Fatal("a GitLab engine worked a step of a GitHub change")
	}
	if _, err := lab.Act(ctx, op.ID, rules.ActionCancel, rules.ActionParams{Actor: "ops", Source: "api"}); !errors.Is(err, flows.ErrOtherPlatform) {
		t.Fatalf("cancel through the GitLab engine: %v, want ErrOtherPlatform", err)
	}
	if got := h.Op(t, op.ID); got.Step != op.Step || got.Version != op.Version {
		t.Fatalf("the refused action moved the change: step %d version %d", got.Step, got.Version)
	}

	cfg.Platform = "bitbucket"
	if _, err := flows.NewEngine(cfg); err == nil {
		t.Fatal("an engine for an unknown platform was built")
	}
}
