package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store/postgres/pgtest"
)

// changeListPageOf is GET /api/v1/changes?query, which must answer 200.
func changeListPageOf(t *testing.T, env *demo.Env, query url.Values) api.ChangeListPage {
	t.Helper()
	code, _, body := apiCall(t, env, http.MethodGet, "/api/v1/changes?"+query.Encode(), demo.APIToken, nil)
	var p api.ChangeListPage
	if code != http.StatusOK || json.Unmarshal(body, &p) != nil {
		t.Fatalf("GET /api/v1/changes?%s = %d %s", query.Encode(), code, body)
	}
	return p
}

// TestListChangesAPI is issue 13 point 1's acceptance: 30 changes over 3
// projects (a path, another path, a numeric id; a change keeps the path
// GitLab answers, so the third is listed and filtered by its path) page 10
// at a time, each
// exactly once, while changes move (cancelled) and new ones arrive between
// pages; stuck=true finds a change waiting past its pipeline deadline (the
// list's clock moved 3 h on) and one parked past it (pipeline.deadline
// lowered to 1s), and no change that waits for a person; every bad filter
// is a 400 naming it.
func TestListChangesAPI(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, 10*time.Minute) // no automatic approval; pipelines run 10 min
	other := env.GitLab.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: "platform/other"})
	third := env.GitLab.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: "platform/third"})
	var skew atomic.Int64
	_, schema := startBotWithOpts(t, env, demo.Poll, &AppOpts{Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	// As submitted; listed as paths (the third's id becomes its path).
	submitted := []string{demo.Project, other.PathWithNamespace, strconv.FormatInt(third.ID, 10)}
	projects := []string{demo.Project, other.PathWithNamespace, third.PathWithNamespace}
	perProject := []int{16, 9, 5}

	submit := func(project, subject string) string {
		t.Helper()
		body := fmt.Sprintf(`{"subject_id":%q,"target_key":"prod","project":%q,"title":"t %s","requested_by":%q,
			"files":[{"path":"svc/%s.yaml","content":"x: 1\n"}]}`, subject, project, subject, demo.Requester, subject)
		code, _, out := apiCall(t, env, http.MethodPost, "/api/v1/changes", demo.APIToken, body)
		var s struct {
			OperationID string `json:"operation_id"`
		}
		if code != http.StatusAccepted || json.Unmarshal(out, &s) != nil {
			t.Fatalf("submitting %s to %s: %d %s", subject, project, code, out)
		}
		return s.OperationID
	}
	projectOf := map[string]string{}
	n := 0
	for i, p := range projects {
		for j := 0; j < perProject[i]; j++ {
			projectOf[submit(submitted[i], fmt.Sprintf("svc-%d-%d", i, j))] = p
			n++
		}
	}
	if n != 30 {
		t.Fatalf("submitted %d changes, want 30", n)
	}
	// All wait for their approval decision (APPROVAL_SENT) before paging.
	deadline := time.Now().Add(60 * time.Second)
	for len(changeListPageOf(t, env, url.Values{"status": {"APPROVAL_SENT"}, "limit": {"500"}}).Changes) != 30 {
		if time.Now().After(deadline) {
			t.Fatal("the 30 changes did not all reach APPROVAL_SENT")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// pageAll pages through query 10 at a time; between pages it cancels
	// one change of want not seen yet (it moves: CLOSED, updated now) and
	// submits a new one (newer than the first page: never listed).
	extra, cancelled := 0, map[string]bool{}
	pageAll := func(query url.Values, wantOf func(id string) bool) {
		t.Helper()
		// Changes submitted after the paging starts are newer than its
		// first page: never listed.
		known := maps.Clone(projectOf)
		want := func(id string) bool { _, ok := known[id]; return ok && wantOf(id) }
		seen := map[string]int{}
		query.Set("limit", "10")
		for page := 1; ; page++ {
			p := changeListPageOf(t, env, query)
			if len(p.Changes) > 10 || (p.NextCursor != "" && len(p.Changes) != 10) {
				t.Fatalf("page %d of %v: %d changes, next_cursor %q", page, query, len(p.Changes), p.NextCursor)
			}
			for _, c := range p.Changes {
				seen[c.OperationID]++
				if c.Project != projectOf[c.OperationID] || c.Step.Name == "" || c.CreatedAt.IsZero() || c.RequestedBy != demo.Requester {
					t.Errorf("listed %+v, want project %q, a step, created_at, requested_by", c, projectOf[c.OperationID])
				}
			}
			if p.NextCursor == "" {
				break
			}
			for id := range projectOf {
				if want(id) && seen[id] == 0 && !cancelled[id] {
					cancelled[id] = true
					if code, _, body := apiCall(t, env, http.MethodPost, "/api/v1/changes/"+id+"/cancel", demo.APIToken, nil); code != http.StatusOK {
						t.Fatalf("cancelling %s: %d %s", id, code, body)
					}
					break
				}
			}
			extra++
			projectOf[submit(projects[0], fmt.Sprintf("late-%d", extra))] = projects[0]
			query.Set("cursor", p.NextCursor)
		}
		for id := range projectOf {
			if want(id) && seen[id] != 1 {
				t.Errorf("paging %v: %s listed %d times, want once", query, id, seen[id])
			}
		}
		for id, k := range seen {
			if !want(id) {
				t.Errorf("paging %v: %s listed %d times, not wanted", query, id, k)
			}
		}
	}
	for _, p := range projects {
		pageAll(url.Values{"project": {p}}, func(id string) bool { return projectOf[id] == p })
	}
	pageAll(url.Values{}, func(id string) bool { return projectOf[id] != "" })

	// Stuck: approve one change of the first project; it waits for its
	// 10-minute MR pipeline in CREATE_MR_OPENED.
	var x string
	for id, p := range projectOf {
		if p == projects[0] && !cancelled[id] && listChangeStatus(t, env, id) == "APPROVAL_SENT" {
			x = id
			break
		}
	}
	for _, r := range env.Approvals.Requests() {
		if r.OperationID == x {
			if res, err := env.Approvals.Decide(context.Background(), r, "approved", "req-"+x); err != nil || res != rules.ResultAccepted {
				t.Fatalf("deciding %s: %s %v", x, res, err)
			}
		}
	}
	waitStep(t, env, x, "CREATE_MR_OPENED", 30*time.Second)
	stuck := func(query url.Values) []string {
		t.Helper()
		query.Set("stuck", "true")
		var ids []string
		for _, c := range changeListPageOf(t, env, query).Changes {
			ids = append(ids, c.Step.Name+" "+c.OperationID)
		}
		return ids
	}
	if got := stuck(url.Values{}); len(got) != 0 {
		t.Fatalf("stuck before any deadline: %v, want none", got)
	}
	// The changes submitted while paging wait for their approval request
	// to be sent (APPROVAL_SENDING) until their job has run: on a loaded
	// machine one may not have yet, and 3 h later it would be stuck too.
	deadline = time.Now().Add(60 * time.Second)
	for len(changeListPageOf(t, env, url.Values{"status": {"APPROVAL_SENDING"}, "limit": {"500"}}).Changes) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("changes still sending their approval requests after 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	skew.Store(int64(3 * time.Hour)) // past pipeline.deadline (2 min here) and sweeper.after
	if got, want := strings.Join(stuck(url.Values{}), ","), "CREATE_MR_OPENED "+x; got != want {
		t.Fatalf("stuck 3 h later: %q, want only %q (the others wait for a person)", got, want)
	}
	if got := stuck(url.Values{"project": {projects[1]}}); len(got) != 0 {
		t.Fatalf("stuck in %s: %v, want none", projects[1], got)
	}
	skew.Store(0)
	// Parked: with pipeline.deadline at 1s its next poll parks it.
	if code, _, body := apiCall(t, env, http.MethodPut, "/api/v1/settings/pipeline.deadline", demo.OperatorToken,
		`{"value": "1s"}`); code != http.StatusOK {
		t.Fatalf("setting pipeline.deadline: %d %s", code, body)
	}
	waitStep(t, env, x, "CREATE_PIPELINE_PENDING", 30*time.Second)
	if got, want := strings.Join(stuck(url.Values{"project": {projects[0]}}), ","), "CREATE_PIPELINE_PENDING "+x; got != want {
		t.Fatalf("stuck once parked: %q, want %q", got, want)
	}

	// Bad filters: 400 naming the parameter; no token: 401.
	for _, c := range []struct{ query, param string }{
		{"status=NOPE", "status"},
		{"step=99999", "step"},
		{"step=NOT_A_STEP", "step"},
		{"updated_after=yesterday", "updated_after"},
		{"updated_before=2026-13-01T00:00:00Z", "updated_before"},
		{"stuck=maybe", "stuck"},
		{"limit=0", "limit"},
		{"limit=501", "limit"},
		{"limit=ten", "limit"},
		{"cursor=not-a-cursor", "cursor"},
		{"staus=MERGED", "staus"},
	} {
		code, _, body := apiCall(t, env, http.MethodGet, "/api/v1/changes?"+c.query, demo.APIToken, nil)
		var e struct {
			Error string `json:"error"`
		}
		if code != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, c.param) {
			t.Errorf("GET ?%s = %d %s, want 400 JSON naming %s", c.query, code, body, c.param)
		}
	}
	if code, _, _ := apiCall(t, env, http.MethodGet, "/api/v1/changes", "", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/changes without a token = %d, want 401", code)
	}

	// changebot list reads the same page from the database.
	cfgFile := filepath.Join(t.TempDir(), "db.yaml")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf("database_url: %q\n", pgtest.WithSearchPath(pgtest.URL(), schema.Name))), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr strings.Builder
		code := cliMain(append([]string{"list", "-config", cfgFile}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	fromAPI := changeListPageOf(t, env, url.Values{"project": {projects[2]}, "limit": {"3"}})
	code, out, errOut := cli("-project", projects[2], "-limit", "3", "-json")
	var got api.ChangeListPage
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || !reflect.DeepEqual(got, fromAPI) {
		t.Errorf("changebot list -json = %d %s %s, want the API's page %+v", code, out, errOut, fromAPI)
	}
	code, out, _ = cli("-stuck")
	if code != 0 || !strings.Contains(out, x) || !strings.Contains(out, "CREATE_PIPELINE_PENDING") || strings.Count(out, "\n") != 2 {
		t.Errorf("changebot list -stuck = %d\n%s\nwant a header and the row of %s", code, out, x)
	}
	code, out, _ = cli("-project", projects[2], "-limit", "3")
	if code != 0 || !strings.HasPrefix(out, "operation id") || !strings.Contains(out, fromAPI.Changes[0].OperationID) ||
		!strings.Contains(out, "more: add -cursor "+fromAPI.NextCursor) {
		t.Errorf("changebot list table = %d\n%s", code, out)
	}
	// A repeated filter flag is the API's repeated parameter, not the last
	// value alone.
	statuses := url.Values{"status": {"CLOSED", "APPROVAL_SENT"}, "limit": {"500"}}
	fromAPI = changeListPageOf(t, env, statuses)
	for _, st := range statuses["status"] {
		if len(changeListPageOf(t, env, url.Values{"status": {st}, "limit": {"500"}}).Changes) == 0 {
			t.Fatalf("no change is %s: the repeated filter is not tested", st)
		}
	}
	for _, args := range [][]string{
		{"-status", "CLOSED", "-status", "APPROVAL_SENT"},
		{"-status", "CLOSED,APPROVAL_SENT"},
	} {
		code, out, errOut := cli(append(args, "-limit", "500", "-json")...)
		got = api.ChangeListPage{}
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || !reflect.DeepEqual(got, fromAPI) {
			t.Errorf("changebot list %v = %d %s %s, want the API's page for status=CLOSED&status=APPROVAL_SENT (%d changes)",
				args, code, out, errOut, len(fromAPI.Changes))
		}
	}
	if code, _, errOut = cli("-status", "NOPE"); code != 2 || !strings.Contains(errOut, "-status: unknown status NOPE; one of") {
		t.Errorf("changebot list -status NOPE = %d %q, want 2 naming -status", code, errOut)
	}
}

// listChangeStatus reads a change's status through GET /api/v1/changes/{id}.
func listChangeStatus(t *testing.T, env *demo.Env, id string) string {
	t.Helper()
	v, err := demo.GetChange(context.Background(), env, id)
	if err != nil {
		t.Fatal(err)
	}
	return v.Status
}
