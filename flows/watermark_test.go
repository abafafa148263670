package flows_test

import (
	"context"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// mergedInto is deploySetup.merged into targetBranch.
func (s deploySetup) mergedInto(t *testing.T, subject, targetBranch string, iid int64, sha string) store.Operation {
	t.Helper()
	op := s.merged(t, subject, iid, sha)
	if targetBranch == op.TargetBranch {
		return op
	}
	if _, err := s.sc.Pool.Exec(context.Background(), `UPDATE operations SET target_branch = $2 WHERE id = $1`, op.ID, targetBranch); err != nil {
		t.Fatal(err)
	}
	op.TargetBranch = targetBranch
	return op
}

// TestDeployWatermarkPerBranch (issue 9, defect 5): the watermark rule
// counts the confirmed deploys of the candidate's own project and target
// branch, every one of them, whatever the callback was answered.
func TestDeployWatermarkPerBranch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// confirm merges a later MR (iid 5) and has its deploy confirmed;
		// it returns the answer the deploy callback got.
		confirm       func(t *testing.T, s deploySetup) string
		wantAnswer    string
		wantWatermark bool
	}{
		{
			name: "an accepted deploy of another branch does not count",
			confirm: func(t *testing.T, s deploySetup) string {
				s.mergedInto(t, "release-change", "release", 5, s.push(t))
				return deployCallback(t, s, "d-rel", 5, "success")
			},
			wantAnswer: rules.ResultAccepted,
		},
		{
			name: "a deploy already validated by its pipeline counts",
			confirm: func(t *testing.T, s deploySetup) string {
				later := s.mergedInto(t, "later-change", "main", 5, s.push(t))
				if flipped, err := s.engine.MarkValidated(context.Background(), later.ID, flows.SourceWebhook, "test", nil); err != nil || !flipped {
					t.Fatalf("validating the later change: %v %v", flipped, err)
				}
				return deployCallback(t, s, "d-late", 5, "success")
			},
			wantAnswer:    rules.ResultIgnoredStale,
			wantWatermark: true,
		},
		{
			name: "an accepted deploy of the same branch counts",
			confirm: func(t *testing.T, s deploySetup) string {
				s.mergedInto(t, "later-change", "main", 5, s.push(t))
				return deployCallback(t, s, "d-main", 5, "applied")
			},
			wantAnswer:    rules.ResultAccepted,
			wantWatermark: true,
		},
		{
			name: "a failed deploy does not count",
			confirm: func(t *testing.T, s deploySetup) string {
				s.mergedInto(t, "later-change", "main", 5, s.push(t))
				return deployCallback(t, s, "d-failed", 5, "failed")
			},
			wantAnswer: rules.ResultFailedRecorded, // written on the later change, which stays MERGED
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newDeploySetup(t)
			s.fake.SetPipelineScript(s.project.ID, gitlabfake.PipelineScript{Deploy: []string{"canceled"}})
			lost := s.mergedInto(t, "lost-deploy", "main", 3, s.push(t))
			s.age(t, lost, time.Hour)
			if got := tt.confirm(t, s); got != tt.wantAnswer {
				t.Fatalf("deploy callback answered %s, want %s", got, tt.wantAnswer)
			}
			s.idle(t)
			rep, err := flows.NewReconciler(s.engine, s.store, flows.ReconcileConfig{}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want, wantFlips := rules.HandleMerged, 0
			if tt.wantWatermark {
				want, wantFlips = rules.CalledBack, 1
			}
			if got := s.step(t, lost); got != want || rep.Flipped["watermark"] != wantFlips {
				t.Fatalf("MR !3 into main at %s after %+v, want %s and %d watermark flips", got, rep, want, wantFlips)
			}
		})
	}
}

func deployCallback(t *testing.T, s deploySetup, requestID string, iid int64, status string) string {
	t.Helper()
	res, err := s.engine.AcceptDeploy(context.Background(), rules.DeployCallback{RequestID: requestID, ProjectID: s.project.ID, MRIID: iid, Status: status})
	if err != nil {
		t.Fatalf("deploy callback %s: %v", requestID, err)
	}
	return res
}
