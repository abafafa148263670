package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"changebot/store"
)

// SameNumbersOnTwoPlatforms: project 42's request 7 on GitLab and on
// GitHub are two distinct changes (issue 15 point 1): each records its
// platform, and every lookup by project id and request number (the
// operation of a request, merged operations of a project, status notes,
// their claims, the commands of a comment) finds only its own platform's
// rows. An operation that names no platform is GitLab's.
func testSameNumbersOnTwoPlatforms(t *testing.T, open Open) {
	s := open(t)(Opts{})
	ctx := context.Background()
	opened := func(op store.Operation) store.Operation {
		t.Helper()
		op = create(t, s, op)
		got, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: op.ID, ExpectStep: op.Step, ToStep: 10402,
			ToStatus: store.StatusMerged, Update: func(o *store.Operation) {
				o.ProjectID, o.MRIID, o.MergeCommitSHA = 42, 7, "m-"+o.ID
			},
			Event: store.EventParams{Type: store.EventTransition, Actor: "changebot", Source: "test"}})
		if err != nil {
			t.Fatalf("ApplyTransition: %v", err)
		}
		return got
	}
	lab := opened(newOp("op_lab", "svc-lab")) // no platform named: GitLab
	hubOp := newOp("op_hub", "svc-hub")
	hubOp.Platform = store.PlatformGitHub
	hub := opened(hubOp)
	if lab.Platform != store.PlatformGitLab || hub.Platform != store.PlatformGitHub {
		t.Fatalf("platforms read back %q and %q, want gitlab and github", lab.Platform, hub.Platform)
	}
	for _, want := range []store.Operation{lab, hub} {
		got, err := s.FindOperationByMR(ctx, s.DB(), want.Platform, 42, 7)
		if err != nil || got.ID != want.ID {
			t.Fatalf("FindOperationByMR(%s, 42, 7) = %s, %v; want %s", want.Platform, got.ID, err, want.ID)
		}
		merged, err := s.ListMergedByProject(ctx, s.DB(), want.Platform, 42, 10)
		if err != nil || len(merged) != 1 || merged[0].ID != want.ID {
			t.Fatalf("ListMergedByProject(%s, 42) = %+v, %v; want only %s", want.Platform, merged, err, want.ID)
		}
	}
	if _, err := s.FindOperationByMR(ctx, s.DB(), "elsewhere", 42, 7); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FindOperationByMR on a third platform: %v, want ErrNotFound", err)
	}

	// Status notes and their claims: one per platform's request.
	for _, p := range []string{store.PlatformGitLab, store.PlatformGitHub} {
		c, ok, err := s.ClaimStatusNote(ctx, p, 42, 7, time.Minute)
		if err != nil || !ok {
			t.Fatalf("claiming the %s note of 42/7 while the other platform's is claimed: %v %v", p, ok, err)
		}
		id := map[string]string{store.PlatformGitLab: lab.ID, store.PlatformGitHub: hub.ID}[p]
		noteID := map[string]int64{store.PlatformGitLab: 100, store.PlatformGitHub: 200}[p]
		if wrote, err := s.RecordStatusNote(ctx, c, store.StatusNote{Platform: p, ProjectID: 42, MRIID: 7, NoteID: noteID,
			OperationID: id, RenderedSeq: 2}); err != nil || !wrote {
			t.Fatalf("recording the %s note: %v %v", p, wrote, err)
		}
	}
	for p, want := range map[string]int64{store.PlatformGitLab: 100, store.PlatformGitHub: 200} {
		n, err := s.GetStatusNote(ctx, s.DB(), p, 42, 7)
		if err != nil || n.NoteID != want || n.Platform != p {
			t.Fatalf("GetStatusNote(%s, 42, 7) = %+v, %v; want note %d", p, n, err, want)
		}
	}

	// A comment id claimed on one platform is still new on the other.
	for _, p := range []string{store.PlatformGitLab, store.PlatformGitHub} {
		ok, err := s.ClaimNote(ctx, s.DB(), p, 42, 900, 7, "bob")
		if err != nil || !ok {
			t.Fatalf("claiming comment 900 on %s: %v %v", p, ok, err)
		}
		if err := s.SetNoteOutcome(ctx, s.DB(), p, 42, 900, "ran"); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := s.ClaimNote(ctx, s.DB(), store.PlatformGitHub, 42, 900, 7, "bob"); err != nil || ok {
		t.Fatalf("comment 900 on github claimed twice: %v %v", ok, err)
	}
}
