package gitlabfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"changebot/internal/fixture"
)

// TestMergeTrainCarShape: gitlabfake's merge train car (GET
// /projects/:id/merge_trains/merge_requests/:iid) has the keys and types of
// GitLab's (testdata/gitlab/api-merge-train-list.json, a list of cars).
func TestMergeTrainCarShape(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{MergeTrains: true, MergeMethod: "ff"})
	e.srv.SetPipelineScript(e.proj.ID, PipelineScript{MR: []string{"success", "running"}})
	mr := e.openMR("feature")
	e.idle()
	iid := int64(mr["iid"].(float64))
	e.must(http.StatusCreated, "POST", e.projPath(fmt.Sprintf("/merge_trains/merge_requests/%d", iid)), robotToken,
		map[string]any{"sha": mr["sha"]})
	// On the train already (its train pipeline never finishes): 400.
	e.must(http.StatusBadRequest, "POST", e.projPath(fmt.Sprintf("/merge_trains/merge_requests/%d", iid)), robotToken,
		map[string]any{"sha": mr["sha"]})
	_, _, body := e.call("GET", e.projPath(fmt.Sprintf("/merge_trains/merge_requests/%d", iid)), robotToken, nil)
	var fx []json.RawMessage
	if err := json.Unmarshal(fixture.GitLab(t, "api-merge-train-list.json"), &fx); err != nil || len(fx) == 0 {
		t.Fatalf("fixture: %v", err)
	}
	diff := fixture.Diff(t, fx[0], body, fixture.Check{
		Values: fixture.Exceptions{
			"merge_request.description": "the fixture's MR has no description (null); the fake's an empty text",
			"duration":                  "the fixture's car has not finished (null); the fake counts seconds on the train",
			"pipeline.source":           "the fixture's car pipeline is a push's; the fake's a merge request train pipeline",
			"pipeline.ref":              "the fixture's pipeline ran on main; the fake's on refs/merge-requests/<iid>/train",
			"status":                    "the fixture's car is idle; the fake's has its pipeline running (fresh)",
			"pipeline.status":           "the fixture's pipeline is pending; the fake's running",
		},
		Exceptions: fixture.Exceptions{},
	})
	if len(diff) > 0 {
		t.Errorf("the fake's car differs from GitLab's:\n%v\n%s", diff, body)
	}
}

// TestMergeTrainMergesInOrderAndDropsAFailedCar: cars merge in the order
// they were added once their train pipelines pass; a car whose pipeline
// fails is removed (404) and its merge request stays open; no rebase is
// asked (merge method ff); an add with another sha answers 409, and a
// project without merge trains 403 (a second add: TestMergeTrainCarShape).
func TestMergeTrainMergesInOrderAndDropsAFailedCar(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{MergeTrains: true, MergeMethod: "ff"})
	// MR pipelines of a, b, c pass; then the train pipelines: a's passes,
	// b's fails, c's (restarted without b) passes.
	e.srv.SetPipelineScript(e.proj.ID, PipelineScript{MR: []string{"success", "success", "success", "success", "failed", "success"}})
	var mrs []map[string]any
	for _, b := range []string{"a", "b", "c"} {
		mrs = append(mrs, e.openMR(b))
	}
	e.idle()
	path := func(mr map[string]any) string {
		return e.projPath(fmt.Sprintf("/merge_trains/merge_requests/%d", int64(mr["iid"].(float64))))
	}
	e.must(http.StatusConflict, "POST", path(mrs[0]), robotToken, map[string]any{"sha": "0000"})
	for _, mr := range mrs {
		e.must(http.StatusCreated, "POST", path(mr), robotToken, map[string]any{"sha": mr["sha"]})
	}
	e.idle()
	mrState := func(mr map[string]any) string {
		got := e.must(http.StatusOK, "GET", e.projPath(fmt.Sprintf("/merge_requests/%d", int64(mr["iid"].(float64)))), robotToken, nil)
		return got["state"].(string)
	}
	if a, c := mrState(mrs[0]), mrState(mrs[2]); a != "merged" || c != "merged" {
		t.Errorf("a %s, c %s; want both merged", a, c)
	}
	if b := mrState(mrs[1]); b != "opened" {
		t.Errorf("b %s, want opened (removed from the train)", b)
	}
	if st, _, _ := e.call("GET", path(mrs[1]), robotToken, nil); st != http.StatusNotFound {
		t.Errorf("b's car answers %d, want 404 (removed)", st)
	}
	if car := e.must(http.StatusOK, "GET", path(mrs[0]), robotToken, nil); car["status"] != "merged" {
		t.Errorf("a's car is %v, want merged", car["status"])
	}
	if n := e.srv.CallCount("PUT", "/api/v4/projects/*/merge_requests/*/rebase"); n != 0 {
		t.Errorf("%d rebases, want none", n)
	}
	plain := setup(t, ProjectSpec{})
	mr := plain.openMR("x")
	plain.idle()
	plain.must(http.StatusForbidden, "POST", plain.projPath(fmt.Sprintf("/merge_trains/merge_requests/%d", int64(mr["iid"].(float64)))), robotToken, map[string]any{"sha": mr["sha"]})
}
