package gitlabfake

import (
	"fmt"
	"maps"
	"net/http"
	"testing"
	"time"
)

func TestFaults(t *testing.T) {
	t.Parallel()
	const approve = "/api/v4/projects/*/merge_requests/*/approve"
	tests := []struct {
		name       string
		fault      Fault
		wantStatus []int // statuses of consecutive approve calls by different users
		wantBody   string
		wantRetry  string
	}{
		{name: "500 once", fault: Fault{Method: "POST", PathPattern: approve, Status: 500, Times: 1},
			wantStatus: []int{500, 201}, wantBody: "500 Internal Server Error"},
		{name: "429 twice with Retry-After", fault: Fault{PathPattern: approve, Status: 429, Times: 2, RetryAfter: "7"},
			wantStatus: []int{429, 429, 201}, wantRetry: "7"},
		{name: "text body", fault: Fault{PathPattern: approve, Status: 502, Body: "Bad gateway", Times: 1},
			wantStatus: []int{502, 201}, wantBody: "Bad gateway"},
		{name: "JSON body as is", fault: Fault{PathPattern: approve, Status: 422, Body: `{"message":{"error":"too many"}}`, Times: 1},
			wantStatus: []int{422, 201}, wantBody: `{"error":"too many"}`},
		{name: "forever", fault: Fault{PathPattern: approve, Status: 503},
			wantStatus: []int{503, 503, 503}},
		{name: "other method untouched", fault: Fault{Method: "GET", PathPattern: approve, Status: 500},
			wantStatus: []int{201}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, ProjectSpec{})
			mr := e.openMR("feature")
			e.srv.InjectFault(tt.fault)
			tokens := []string{reviewerToken, robotToken, reviewerToken}
			for i, want := range tt.wantStatus {
				st, h, b := e.call("POST", mrPath(e, mr, "/approve"), tokens[i%2], nil)
				if st != want {
					t.Fatalf("call %d: status %d, want %d: %s", i, st, want, b)
				}
				if i == 0 && tt.wantBody != "" && message(t, b) != tt.wantBody {
					t.Errorf("body message %q, want %q", message(t, b), tt.wantBody)
				}
				if i == 0 && h.Get("Retry-After") != tt.wantRetry {
					t.Errorf("Retry-After %q, want %q", h.Get("Retry-After"), tt.wantRetry)
				}
			}
			calls := e.srv.Calls()
			last := calls[len(calls)-1]
			if last.Status != tt.wantStatus[len(tt.wantStatus)-1] || last.Method != "POST" || last.User == "" {
				t.Errorf("last recorded call %+v", last)
			}
			if n := e.srv.CallCount("POST", approve); n != len(tt.wantStatus) {
				t.Errorf("CallCount %d, want %d", n, len(tt.wantStatus))
			}
		})
	}
}

func TestLatency(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	e.srv.SetLatency(30 * time.Millisecond)
	start := time.Now()
	e.must(200, "GET", "/user", robotToken, nil)
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("answered after %v, want at least 30ms", d)
	}
}

func TestAuthAndLookup(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	tests := []struct {
		name   string
		path   string
		header [2]string
		status int
		msg    string
	}{
		{"private token", "/user", [2]string{"PRIVATE-TOKEN", robotToken}, 200, ""},
		{"bearer", "/user", [2]string{"Authorization", "Bearer " + robotToken}, 200, ""},
		{"unknown token", "/user", [2]string{"PRIVATE-TOKEN", "nope"}, 401, "401 Unauthorized"},
		{"no token", "/user", [2]string{"X-None", "x"}, 401, "401 Unauthorized"},
		{"project by path", "/projects/group%2Frepo", [2]string{"PRIVATE-TOKEN", robotToken}, 200, ""},
		{"project by id", "/projects/" + itoa(e.proj.ID), [2]string{"PRIVATE-TOKEN", robotToken}, 200, ""},
		{"unknown project", "/projects/nope%2Fnope", [2]string{"PRIVATE-TOKEN", robotToken}, 404, "404 Project Not Found"},
		{"member", "/projects/group%2Frepo/members/all/11", [2]string{"PRIVATE-TOKEN", robotToken}, 200, ""},
		{"not a member", "/projects/group%2Frepo/members/all/999", [2]string{"PRIVATE-TOKEN", robotToken}, 404, "404 Not found"},
		{"protected branch", "/projects/group%2Frepo/protected_branches/main", [2]string{"PRIVATE-TOKEN", robotToken}, 200, ""},
		{"unprotected branch", "/projects/group%2Frepo/protected_branches/dev", [2]string{"PRIVATE-TOKEN", robotToken}, 404, "404 Not found"},
		{"unknown MR", "/projects/group%2Frepo/merge_requests/42", [2]string{"PRIVATE-TOKEN", robotToken}, 404, "404 Not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest("GET", e.srv.URL()+"/api/v4"+tt.path, nil)
			req.Header.Set(tt.header[0], tt.header[1])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.msg != "" {
				var b [512]byte
				n, _ := resp.Body.Read(b[:])
				if got := message(t, b[:n]); got != tt.msg {
					t.Errorf("message %q, want %q", got, tt.msg)
				}
			}
		})
	}
	p := e.must(200, "GET", "/projects/group%2Frepo", robotToken, nil)
	for k, want := range map[string]any{"path_with_namespace": "group/repo", "default_branch": "main", "squash_option": "default_off", "merge_method": "merge"} {
		if p[k] != want {
			t.Errorf("project %s = %v, want %v", k, p[k], want)
		}
	}
	if m := e.must(200, "GET", "/projects/group%2Frepo/members/all/11", robotToken, nil); m["access_level"] != float64(AccessMaintainer) {
		t.Errorf("robot access_level %v", m["access_level"])
	}
}

// TestCallsByEndpoint: every call is counted under its route's method and
// pattern, whatever its path parameters; a path of no route under "".
func TestCallsByEndpoint(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	s.AddUser("robot", "tok", AsBot())
	p := s.AddProject(ProjectSpec{PathWithNamespace: "g/r", Members: map[string]int{"robot": AccessMaintainer}})
	get := func(path string) {
		req, _ := http.NewRequest(http.MethodGet, s.URL()+path, nil)
		req.Header.Set("PRIVATE-TOKEN", "tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get(fmt.Sprintf("/api/v4/projects/%d", p.ID))
	get("/api/v4/projects/g%2Fr")
	get(fmt.Sprintf("/api/v4/projects/%d/repository/branches/main", p.ID))
	get("/api/v4/no/such/route")
	want := map[string]int{"GET /projects/:id": 2, "GET /projects/:id/repository/branches/:branch": 1, "": 1}
	if got := s.CallsByEndpoint(); !maps.Equal(got, want) {
		t.Fatalf("CallsByEndpoint = %v, want %v", got, want)
	}
}
