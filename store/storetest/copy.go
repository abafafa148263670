package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"changebot/store"
)

// Copier is a store that also exports and imports whole installations
// (`changebot copy`, package storecopy).
type Copier interface {
	store.Store
	Export(ctx context.Context) (*store.Snapshot, error)
	Import(ctx context.Context, snap *store.Snapshot) error
}

// OpenCopier makes a new, empty, migrated database of one implementation
// and returns a store on it; everything is released when t ends.
type OpenCopier func(t testing.TB, opts Opts) Copier

// uniqueJob is a stand-in for a step job: unique by args while it waits,
// as flows' jobs are.
type uniqueJob struct {
	OperationID string `json:"operation_id"`
	Step        int    `json:"step"`
	Version     int64  `json:"version"`
}

func (uniqueJob) Kind() string { return "test_step" }

func stepJob(id string, step int, version int64, at time.Time) river.InsertManyParams {
	return river.InsertManyParams{Args: uniqueJob{OperationID: id, Step: step, Version: version}, InsertOpts: &river.InsertOpts{
		ScheduledAt: at, Queue: "default", Priority: 2, MaxAttempts: 7, Tags: []string{"copy"},
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
			rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
			rivertype.JobStateRunning, rivertype.JobStateScheduled}}}}
}

// FillInstallation writes, through the contract only, an installation
// with a row in every table store.CopyTables lists and unfinished jobs:
// two operations (one moved twice, with an event payload PostgreSQL's
// jsonb reorders), deliveries processed and not, a callback request, a
// note command, a status note, a commit claim, a GitLab approval, settings
// changed twice, a deploy confirmation and an account wait.
func FillInstallation(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	now := s.Now()
	a := newOp("op_copy_a", "svc-a")
	a.IdempotencyKey = "idem-a"
	a.RolloutID = "ro-copy" // its rollout and the rollout's mark travel with it
	create(t, s, a)
	b := newOp("op_copy_b", "svc-b")
	b.ApprovalFirst = false
	b.Platform = store.PlatformGitHub // its platform travels with it
	create(t, s, b)
	if _, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: a.ID, ExpectStep: a.Step, ToStep: 10402,
		ToStatus: store.StatusApprovalSent, Update: func(op *store.Operation) { op.MRIID = 7; op.ProjectID = 42 },
		Event: store.EventParams{Type: store.EventTransition, Actor: "changebot", Source: "job:x",
			Payload: map[string]any{"zeta": 1.5, "a": []any{"é", map[string]any{"y": 2, "b": nil}}, "long_key_first": "x"}},
		Jobs: []river.InsertManyParams{stepJob(a.ID, 10402, 2, now.Add(time.Hour))},
		Rollout: &store.RolloutNotice{Decide: func(store.Rollout, store.RolloutMark, store.Operation, store.Event) (string, []river.InsertManyParams) {
			return "needs_person", nil
		}}}); err != nil {
		t.Fatalf("ApplyTransition: %v", err)
	}
	if _, err := s.AppendEvent(ctx, b.ID, store.EventParams{Type: store.EventRefused, Actor: "bob", Source: "command:5"},
		stepJob(b.ID, b.Step, 1, time.Time{})); err != nil {
		t.Fatalf("AppendEvent: %v", err)
	}
	for i, processed := range []bool{true, false} {
		id, _, err := s.InsertDelivery(ctx, store.Delivery{DedupeKey: fmt.Sprintf("key-%d", i), Event: "Pipeline Hook", ProjectID: 42,
			Body: []byte(fmt.Sprintf(`{"b": 1,  "a": "\u0000 raw %d"}`, i)), ReceivedAt: now}, deliveryJob)
		if err != nil {
			t.Fatalf("InsertDelivery: %v", err)
		}
		if processed {
			if err := s.MarkDeliveryProcessed(ctx, s.DB(), id, "done"); err != nil {
				t.Fatalf("MarkDeliveryProcessed: %v", err)
			}
		}
	}
	// A delivery stored but not dispatched yet (issue 12) travels so: the
	// target's dispatcher enqueues it.
	if out, err := s.StoreDeliveries(ctx, []store.Delivery{{DedupeKey: "key-undispatched", Event: "Pipeline Hook", ProjectID: 42,
		Body: []byte(`{}`)}}); err != nil || !out[0].Inserted {
		t.Fatalf("StoreDeliveries: %v, %v", out, err)
	}
	if err := s.InsertCallbackRequest(ctx, s.DB(), "req-1", "deploy", a.ID, "ACCEPTED"); err != nil {
		t.Fatalf("InsertCallbackRequest: %v", err)
	}
	for _, p := range []string{store.PlatformGitLab, store.PlatformGitHub} {
		if _, err := s.ClaimNote(ctx, s.DB(), p, 42, 900, 7, "bob"); err != nil {
			t.Fatalf("ClaimNote: %v", err)
		}
	}
	if err := s.SetNoteOutcome(ctx, s.DB(), store.PlatformGitLab, 42, 900, "ran"); err != nil {
		t.Fatalf("SetNoteOutcome: %v", err)
	}
	if _, err := s.SaveStatusNote(ctx, s.DB(), store.StatusNote{ProjectID: 42, MRIID: 7, NoteID: 901, OperationID: a.ID, RenderedSeq: 2}); err != nil {
		t.Fatalf("SaveStatusNote: %v", err)
	}
	if _, err := s.SaveStatusNote(ctx, s.DB(), store.StatusNote{Platform: store.PlatformGitHub, ProjectID: 42, MRIID: 7, NoteID: 902,
		OperationID: b.ID, RenderedSeq: 1}); err != nil {
		t.Fatalf("SaveStatusNote on github: %v", err)
	}
	if _, _, err := s.ClaimStatusNote(ctx, store.PlatformGitLab, 42, 7, time.Minute); err != nil {
		t.Fatalf("ClaimStatusNote: %v", err)
	}
	for _, step := range []string{"merge", "tag"} {
		if _, _, err := s.ClaimCommit(ctx, s.DB(), store.CommitClaim{RunID: a.ID, Step: step, Status: "claimed", Branch: "main", Seq: 3}); err != nil {
			t.Fatalf("ClaimCommit: %v", err)
		}
	}
	if _, _, err := s.AddGitLabApproval(ctx, s.DB(), a.ID, "reviewer1", "hook"); err != nil {
		t.Fatalf("AddGitLabApproval: %v", err)
	}
	for _, v := range []string{`{"every": "10s"}`, `{"every":"20s","extra":[1,2]}`} {
		if _, err := s.SaveSetting(ctx, store.SaveSettingParams{Key: "poll", Scope: "global", Value: json.RawMessage(v), UpdatedBy: "ops"}); err != nil {
			t.Fatalf("SaveSetting: %v", err)
		}
	}
	if err := s.RecordDeployConfirmation(ctx, s.DB(), store.DeployConfirmation{ProjectID: 42, TargetBranch: "main", MRIID: 7}); err != nil {
		t.Fatalf("RecordDeployConfirmation: %v", err)
	}
	if err := s.BlockAccountUntil(ctx, "robot", now.Add(time.Minute)); err != nil {
		t.Fatalf("BlockAccountUntil: %v", err)
	}
	// A frozen merge queue with a head, and a change moved to the front.
	key := store.QueueKey{Platform: store.PlatformGitLab, ProjectID: 42, TargetBranch: "main"}
	if ok, err := s.ClaimQueueHead(ctx, s.DB(), store.QueueHeadParams{Key: key, OperationID: a.ID}); err != nil || !ok {
		t.Fatalf("ClaimQueueHead: %v, %v", ok, err)
	}
	if _, err := s.FreezeQueue(ctx, key, true, "token:ops", "release freeze"); err != nil {
		t.Fatalf("FreezeQueue: %v", err)
	}
	if err := s.MoveToQueueFront(ctx, b.ID, "token:ops", "hotfix"); err != nil {
		t.Fatalf("MoveToQueueFront: %v", err)
	}
	// The branch's last valid .changebot.yml travels: the target's changes
	// keep it while the branch's file is invalid.
	if _, err := s.SaveRepoPolicy(ctx, s.DB(), store.RepoPolicy{Platform: store.PlatformGitLab, ProjectID: 42,
		Branch: "main", SHA: "1f0e9d8c", Body: "version: 1\n"}); err != nil {
		t.Fatalf("SaveRepoPolicy: %v", err)
	}
}

// RunCopy checks Export and Import between two implementations: an
// installation filled through the contract on from's database and imported
// into to's exports the same rows and jobs (JSON compared by meaning, since
// an engine may reformat it); every hash chain verifies on to; to's
// counters went past the copied ids and tokens; Import refuses a database
// that is not empty, naming the tables; and an Import that fails half-way
// leaves nothing behind.
func RunCopy(t *testing.T, from, to OpenCopier) {
	t.Helper()
	ctx := context.Background()
	src := from(t, Opts{})
	FillInstallation(t, src)
	snap, err := src.Export(ctx)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	for _, c := range snap.Counts() {
		if c.Rows == 0 {
			t.Errorf("the filled installation exports no rows of %s: the case does not cover it", c.Table)
		}
	}
	dst := to(t, Opts{})
	if err := dst.Import(ctx, snap); err != nil {
		t.Fatalf("Import: %v", err)
	}
	back, err := dst.Export(ctx)
	if err != nil {
		t.Fatalf("Export of the target: %v", err)
	}
	if d := diffSnapshots(snap, back); d != "" {
		t.Errorf("the target exports other rows than the source's:\n%s", d)
	}
	for _, id := range []string{"op_copy_a", "op_copy_b"} {
		h, err := dst.ReadHistory(ctx, id)
		if err != nil {
			t.Fatalf("ReadHistory(%s): %v", id, err)
		}
		if len(h.Stored) < 2 {
			t.Errorf("%s has %d events on the target, want 2", id, len(h.Stored))
		}
		if seq, err := store.VerifyChain(h.Stored); err != nil {
			t.Errorf("%s: chain broken on the target at %d: %v", id, seq, err)
		}
	}

	// The copied undispatched delivery is dispatched on the target, once;
	// the copied dispatched ones are not.
	if n, err := dst.DispatchDeliveries(ctx, 100, deliveryJob); err != nil || n != 1 {
		t.Errorf("DispatchDeliveries on the target = %d, %v; want the one undispatched delivery", n, err)
	}

	// The target's counters continue past the copied rows.
	last, err := dst.LastDeliveryID(ctx, dst.DB())
	if err != nil {
		t.Fatal(err)
	}
	id, inserted, err := dst.InsertDelivery(ctx, store.Delivery{DedupeKey: "key-new", Event: "Pipeline Hook", ReceivedAt: dst.Now(), Body: []byte(`{}`)}, deliveryJob)
	if err != nil || !inserted || id <= last {
		t.Errorf("a delivery after the copy: id %d inserted %v err %v, want an id above %d", id, inserted, err, last)
	}
	if _, inserted, err := dst.InsertDelivery(ctx, store.Delivery{DedupeKey: "key-0", Event: "Pipeline Hook", ReceivedAt: dst.Now(), Body: []byte(`{}`)}, deliveryJob); err != nil || inserted {
		t.Errorf("a copied delivery sent again: inserted %v err %v, want a duplicate", inserted, err)
	}
	old, err := dst.GetCommitClaim(ctx, dst.DB(), "op_copy_a", "tag")
	if err != nil {
		t.Fatal(err)
	}
	tok, claimed, err := dst.ClaimCommit(ctx, dst.DB(), store.CommitClaim{RunID: "op_copy_b", Step: "merge", Status: "claimed"})
	if err != nil || !claimed || tok <= old.Token {
		t.Errorf("a commit claim after the copy: token %d claimed %v err %v, want a token above %d", tok, claimed, err, old.Token)
	}
	if _, err := dst.SaveSetting(ctx, store.SaveSettingParams{Key: "poll", Scope: "global", Value: json.RawMessage(`{}`), UpdatedBy: "ops"}); err != nil {
		t.Errorf("SaveSetting after the copy: %v", err)
	}
	audit, err := dst.ListSettingAudit(ctx, dst.DB(), "poll", "global")
	if err != nil || len(audit) != 3 {
		t.Fatalf("settings audit after the copy: %d rows, err %v; want 3", len(audit), err)
	}
	if audit[2].ID <= audit[1].ID || audit[1].ID <= audit[0].ID {
		t.Errorf("settings audit ids after the copy: %d, %d, %d: the new one is not above the copied", audit[0].ID, audit[1].ID, audit[2].ID)
	}

	// A target that is not empty is refused, naming what it holds.
	err = dst.Import(ctx, snap)
	var full *store.NotEmptyError
	if !errors.As(err, &full) || full.Rows["operations"] != 2 || full.Rows[store.JobsTable] == 0 {
		t.Errorf("Import into a filled database: %v, want a NotEmptyError with 2 operations and the jobs", err)
	}

	// An Import failing at its last table writes nothing.
	bad := *snap
	bad.Rows = map[string][][]any{}
	for k, v := range snap.Rows {
		bad.Rows[k] = v
	}
	waits := bad.Rows["gitlab_account_waits"]
	bad.Rows["gitlab_account_waits"] = append(append([][]any(nil), waits...), waits[0]) // a duplicate key
	empty := to(t, Opts{})
	if err := empty.Import(ctx, &bad); err == nil {
		t.Fatal("Import of a snapshot with a duplicate key: no error")
	}
	after, err := empty.Export(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range after.Counts() {
		if c.Rows != 0 {
			t.Errorf("after a failed Import the target holds %d rows of %s, want none", c.Rows, c.Table)
		}
	}
}

// diffSnapshots describes how b differs from a: rows compared value by
// value (JSON by meaning), jobs by what a copy keeps.
func diffSnapshots(a, b *store.Snapshot) string {
	var out bytes.Buffer
	for _, t := range store.CopyTables {
		ra, rb := a.Rows[t.Name], b.Rows[t.Name]
		if len(ra) != len(rb) {
			fmt.Fprintf(&out, "%s: %d rows, want %d\n", t.Name, len(rb), len(ra))
			continue
		}
		for i := range ra {
			for j, c := range t.Columns {
				va, vb := normalise(c.Kind, ra[i][j]), normalise(c.Kind, rb[i][j])
				if !reflect.DeepEqual(va, vb) {
					fmt.Fprintf(&out, "%s row %d %s: %#v, want %#v\n", t.Name, i, c.Name, vb, va)
				}
			}
		}
	}
	if len(a.Jobs) != len(b.Jobs) {
		fmt.Fprintf(&out, "jobs: %d, want %d\n", len(b.Jobs), len(a.Jobs))
		return out.String()
	}
	for i, ja := range a.Jobs {
		jb := b.Jobs[i]
		type kept struct {
			Kind, Args, Queue, Meta string
			Priority, MaxAttempts   int
			Scheduled               time.Time
			Tags                    []string
			UniqueKey               []byte
			UniqueStates            []rivertype.JobState
		}
		k := func(j *rivertype.JobRow) kept {
			return kept{j.Kind, canonical(j.EncodedArgs), j.Queue, canonical(store.CopyJobMetadata(j.Metadata)), j.Priority, j.MaxAttempts,
				time.Time{}, j.Tags, j.UniqueKey, j.UniqueStates}
		}
		// SQLite keeps job times to the millisecond.
		if d := ja.ScheduledAt.Sub(jb.ScheduledAt); d > time.Millisecond || d < -time.Millisecond {
			fmt.Fprintf(&out, "job %d: scheduled at %s, want %s\n", i, jb.ScheduledAt, ja.ScheduledAt)
		}
		if ka, kb := k(ja), k(jb); !reflect.DeepEqual(ka, kb) {
			fmt.Fprintf(&out, "job %d: %+v, want %+v\n", i, kb, ka)
		}
	}
	return out.String()
}

func normalise(k store.ColumnKind, v any) any {
	if b, ok := v.([]byte); ok && (k == store.KindJSON || k == store.KindNullJSON) {
		return canonical(b)
	}
	return v
}

// canonical is JSON b re-encoded with sorted keys, compact; b itself when
// it is not JSON.
func canonical(b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}
