package storetest

import (
	"context"
	"errors"
	"testing"

	"changebot/store"
)

// adoptedOp is an adopted change of merge request !7 of project 5 on
// binding subject / prod (issue 25 point 1): its merge request, head and
// the Adopted mark are set at creation, and it has no files.
func adoptedOp(id, subject string) store.Operation {
	op := newOp(id, subject)
	op.Files, op.Adopted, op.ProjectID, op.MRIID, op.MRWebURL, op.HeadSHA = nil, true, 5, 7, "https://gl/g/r/-/merge_requests/7", "abc123"
	op.SourceBranch, op.TargetBranch = "dana/x", "main"
	return op
}

// testAdoptedMergeRequests: an adopted change keeps its mark and its merge
// request as created; a second adopted change of the same merge request in
// progress is refused (store.ErrUniqueViolation, operations_adopted_mr)
// even on another binding; once the first is CLOSED the merge request may
// be adopted again.
func testAdoptedMergeRequests(t *testing.T, open Open) {
	s := open(t)(Opts{})
	ctx := context.Background()
	op := create(t, s, adoptedOp("op_1", "svc"))
	got, err := s.GetOperation(ctx, s.DB(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Adopted || got.MRIID != 7 || got.HeadSHA != "abc123" || got.MRWebURL == "" || len(got.Files) != 0 {
		t.Fatalf("adopted change read back as %+v", got)
	}
	if found, err := s.FindOperationByMR(ctx, s.DB(), store.PlatformGitLab, 5, 7); err != nil || found.ID != op.ID {
		t.Fatalf("FindOperationByMR = %s, %v; want %s", found.ID, err, op.ID)
	}
	_, _, err = s.CreateOperation(ctx, store.CreateParams{Operation: adoptedOp("op_2", "other"), Event: store.EventParams{Type: store.EventSubmitted}})
	if !errors.Is(err, store.ErrUniqueViolation) {
		t.Fatalf("a second adoption of !7 in progress: %v, want ErrUniqueViolation", err)
	}
	plain := newOp("op_3", "plain")
	plain.ProjectID = 5
	create(t, s, plain) // changes that are not adopted are not concerned
	if _, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: op.ID, ExpectStep: op.Step,
		ExpectVersion: op.Version, ToStep: 10201, ToStatus: store.StatusClosed,
		Event: store.EventParams{Type: store.EventTransition}}); err != nil {
		t.Fatal(err)
	}
	create(t, s, adoptedOp("op_4", "other"))
}
