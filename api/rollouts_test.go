package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"changebot/flows/rules"
)

// fakeRollouts is a hand-written rollout reader: the views put in it, by
// id; err fails every read.
type fakeRollouts struct {
	mu    sync.Mutex
	views map[string]RolloutView
	err   error
}

func (f *fakeRollouts) ReadRollout(_ context.Context, id string) (RolloutView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return RolloutView{}, f.err
	}
	v, ok := f.views[id]
	if !ok {
		return RolloutView{}, fmt.Errorf("rollout %q: %w", id, ErrNotFound)
	}
	return v, nil
}

// TestRolloutProgress: any token reads a rollout's progress in
// openapi.json's shape; an unknown id is a 404 naming it, a query
// parameter a 400, a store that cannot answer a 503 without its error.
func TestRolloutProgress(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	s.rollouts.views["ro-7"] = RolloutView{RolloutID: "ro-7", State: string(rules.RolloutFailed), Total: 3,
		Counts: map[string]int{rules.StatusValidated: 2, rules.StatusCreateFailed: 1}, Applied: 2, Failed: 1,
		Attention: []RolloutChangeView{{OperationID: "op_f", Project: "g/r", SubjectID: "svc", TargetKey: "prod", Standing: "failed",
			Status: rules.StatusCreateFailed, Step: StepView{Code: int(rules.CreatePipelineFailed), Name: "CREATE_PIPELINE_FAILED"},
			Detail: "the pipeline failed", MergeRequest: &MRView{IID: 4, WebURL: "https://gitlab.example/mr/4"}}},
		FirstCreatedAt: at, LastUpdatedAt: at.Add(time.Minute)}
	code, body := s.callDocumented(t, http.MethodGet, "/api/v1/rollouts/ro-7", viewerToken, "")
	want := `{"rollout_id":"ro-7","state":"failed","total":3,"counts":{"CREATE_FAILED":1,"VALIDATED":2},"applied":2,"failed":1,"needs_person":0,` +
		`"attention":[{"operation_id":"op_f","project":"g/r","subject_id":"svc","target_key":"prod","standing":"failed","status":"CREATE_FAILED",` +
		`"step":{"code":10004,"name":"CREATE_PIPELINE_FAILED"},"detail":"the pipeline failed","merge_request":{"project_id":0,"iid":4,"web_url":"https://gitlab.example/mr/4"}}],` +
		`"more":0,"first_created_at":"2026-12-07T09:00:00Z","last_updated_at":"2026-12-07T09:01:00Z"}` + "\n"
	if code != 200 || body != want {
		t.Errorf("GET /api/v1/rollouts/ro-7 = %d\n%s\nwant 200\n%s", code, body, want)
	}
	if code, body := s.callDocumented(t, http.MethodGet, "/api/v1/rollouts/ro-none", viewerToken, ""); code != 404 ||
		!strings.Contains(body, "no change was submitted with rollout_id ro-none") {
		t.Errorf("unknown rollout: %d %s, want 404 naming it", code, body)
	}
	if code, body := s.callDocumented(t, http.MethodGet, "/api/v1/rollouts/ro-7?x=1", viewerToken, ""); code != 400 || !strings.Contains(body, `\"x\"`) {
		t.Errorf("with ?x=: %d %s, want 400 naming x", code, body)
	}
	s.rollouts.err = errors.New("connection refused")
	if code, body := s.call(t, http.MethodGet, "/api/v1/rollouts/ro-7", viewerToken, ""); code != 503 || strings.Contains(body, "refused") {
		t.Errorf("store down: %d %s, want 503 without the store's error", code, body)
	}
}

// TestSubmitRolloutID: rollout_id is passed on to the engine, shown by
// the list and the change, and the list filters by it.
func TestSubmitRolloutID(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	body := strings.Replace(validChange("ro"), `"title":"t"`, `"title":"t","rollout_id":"ro-9"`, 1)
	if code, answer := s.callDocumented(t, http.MethodPost, "/api/v1/changes", submitterToken, body); code != 202 {
		t.Fatalf("submit with rollout_id: %d %s", code, answer)
	}
	if got := s.changes.submitted[0].RolloutID; got != "ro-9" {
		t.Fatalf("the engine got rollout_id %q, want ro-9", got)
	}
	s.changes.add(Change{ID: "op_other", SubjectID: "o", TargetKey: "prod", Status: rules.StatusApprovalSending, Step: int(rules.ApprovalSending)})
	code, list := s.callDocumented(t, http.MethodGet, "/api/v1/changes?rollout_id=ro-9", viewerToken, "")
	if code != 200 || strings.Count(list, `"operation_id"`) != 1 || !strings.Contains(list, `"rollout_id":"ro-9"`) {
		t.Fatalf("list of rollout ro-9: %d %s, want the one change with its rollout_id", code, list)
	}
	id := strings.Split(strings.Split(list, `"operation_id":"`)[1], `"`)[0]
	if code, one := s.callDocumented(t, http.MethodGet, "/api/v1/changes/"+id, viewerToken, ""); code != 200 || !strings.Contains(one, `"rollout_id":"ro-9"`) {
		t.Fatalf("GET the change: %d %s, want its rollout_id", code, one)
	}
}

// TestRolloutPage: /ui/rollouts/{id} shows a rollout's state, its counts
// and the changes that need someone, linked to their pages; a change of a
// rollout links to it, one without shows no rollout; an unknown id is a
// 404 page saying so.
func TestRolloutPage(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	inRollout := s.changes.add(Change{SubjectID: "svc", TargetKey: "prod", Project: "g/r", Status: rules.StatusCreateFailed,
		Step: int(rules.CreatePipelineFailed), Detail: "the pipeline failed", RolloutID: "ro-7"})
	alone := s.changes.add(Change{SubjectID: "other", TargetKey: "prod", Project: "g/r", Status: rules.StatusMerging, Step: int(rules.HandleStarted)})
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	s.rollouts.views["ro-7"] = RolloutView{RolloutID: "ro-7", State: string(rules.RolloutFailed), Total: 3,
		Counts: map[string]int{rules.StatusValidated: 2, rules.StatusCreateFailed: 1}, Applied: 2, Failed: 1, More: 4,
		Attention: []RolloutChangeView{{OperationID: inRollout, SubjectID: "svc", TargetKey: "prod", Standing: "failed",
			Status: rules.StatusCreateFailed, Step: StepView{Code: int(rules.CreatePipelineFailed), Name: "CREATE_PIPELINE_FAILED"}, Detail: "the pipeline failed"}},
		FirstCreatedAt: at, LastUpdatedAt: at}
	viewer := s.login(t, viewerToken)
	tests := []struct {
		name, path string
		code       int
		want, not  []string
	}{
		{"the rollout", "/ui/rollouts/ro-7", 200, []string{"<strong>failed</strong>: 2 of 3 applied, 1 failed", "<code>VALIDATED</code></td><td>2",
			`<a href="/ui/changes/` + inRollout + `">`, "CREATE_PIPELINE_FAILED", "the pipeline failed", "…and 4 more", `http-equiv="refresh"`}, nil},
		{"a change of the rollout", "/ui/changes/" + inRollout, 200, []string{`<a href="/ui/rollouts/ro-7">ro-7</a>`}, nil},
		{"a change of none", "/ui/changes/" + alone, 200, nil, []string{`id="rollout"`}},
		{"an unknown rollout", "/ui/rollouts/ro-none", 404, []string{`id="missing"`, "no change was submitted with rollout_id ro-none"}, []string{`id="counts"`}},
	}
	for _, tc := range tests {
		code, body := s.page(t, viewer, tc.path)
		if code != tc.code {
			t.Errorf("%s: status %d, want %d\n%s", tc.name, code, tc.code, body)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: the page lacks %q\n%s", tc.name, w, body)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(body, w) {
				t.Errorf("%s: the page shows %q", tc.name, w)
			}
		}
	}
}
