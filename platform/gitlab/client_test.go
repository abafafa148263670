package gitlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"changebot/internal/fixture"
	"changebot/platform"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string // substrings; nil means success
	}{
		{name: "minimal", cfg: Config{BaseURL: "https://gitlab.example.com", Token: robotToken}},
		{name: "api suffix and slash", cfg: Config{BaseURL: "https://gitlab.example.com/api/v4/", Token: robotToken}},
		{name: "empty url and token", cfg: Config{}, wantErr: []string{"base URL is empty", "robot token is empty"}},
		{name: "no scheme", cfg: Config{BaseURL: "gitlab.example.com", Token: robotToken}, wantErr: []string{"scheme must be http or https"}},
		{name: "user info", cfg: Config{BaseURL: "https://user:" + robotToken + "@gitlab.example.com", Token: robotToken}, wantErr: []string{"must not carry user info"}},
		{name: "empty reviewer token", cfg: Config{BaseURL: "https://gitlab.example.com", Token: robotToken, ReviewerTokens: []string{reviewerTokenA, " "}}, wantErr: []string{"reviewer token 1 is empty"}},
		{name: "negative wait", cfg: Config{BaseURL: "https://gitlab.example.com", Token: robotToken, RetryWaitMax: -time.Second}, wantErr: []string{"retry waits must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := New(tt.cfg)
			if tt.wantErr == nil {
				if err != nil || c == nil {
					t.Fatalf("New() = %v, %v; want a client", c, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New() succeeded; want errors %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New() error %q lacks %q", err, w)
				}
			}
			assertNoSecrets(t, err.Error())
		})
	}
}

func TestBaseURLForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, suffix string
	}{
		{name: "root", suffix: ""},
		{name: "root slash", suffix: "/"},
		{name: "api", suffix: "/api/v4"},
		{name: "api slash", suffix: "/api/v4/"},
		{name: "path prefix", suffix: "/gitlab"},
		{name: "path prefix and api", suffix: "/gitlab/api/v4/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t)
			s.on("GET /user", answer{body: `{"id":7,"username":"changebot"}`})
			s.on("GET /projects/42/repository/branches/main", answer{status: 404, body: `{"message":"404 Branch Not Found"}`})
			c := newClient(t, s, func(cfg *Config) { cfg.BaseURL = s.srv.URL + tt.suffix })
			u, err := c.CurrentUser(t.Context())
			if err != nil {
				t.Fatalf("CurrentUser: %v", err)
			}
			if want := (platform.User{ID: 7, Username: "changebot"}); u != want {
				t.Errorf("CurrentUser = %+v; want %+v", u, want)
			}
			_, err = c.Branch(t.Context(), 42, "main")
			var pe *platform.Error
			if !errors.As(err, &pe) || pe.Path != "/projects/42/repository/branches/main" || pe.Message != "404 Branch Not Found" {
				t.Errorf("Branch error = %#v; want path relative to the API root and GitLab's message", pe)
			}
			prefix := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(tt.suffix, "/"), "/api/v4"), "/")
			for _, r := range s.seenRequests() {
				if !strings.HasPrefix(r.rawPath, prefix+"/api/v4/") {
					t.Errorf("request went to %q; want prefix %q", r.rawPath, prefix+"/api/v4/")
				}
			}
		})
	}
}

func TestMergeRequestFromFixtures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		fixture       string
		includeRebase bool
		want          platform.MergeRequest
	}{
		{
			name:    "api-mr-get",
			fixture: "api-mr-get.json",
			want: platform.MergeRequest{
				ID: 33092005, IID: 14656, ProjectID: 278964,
				Title:        "Add deletion support for designs",
				SourceBranch: "delete-designs-v2", TargetBranch: "master",
				State:               platform.MRStateOpened,
				SHA:                 "8e0b45049b6253b8984cde9241830d2851168142",
				DetailedMergeStatus: "mergeable",
				HasConflicts:        true,
				Squash:              true, // "squash": true in the fixture
				WebURL:              "https://gitlab.com/gitlab-org/gitlab-ee/merge_requests/14656",
				Author:              platform.User{ID: 3614858, Username: "alexkalderimis"},
				HeadPipeline: &platform.Pipeline{
					ID: 77056819, SHA: "8e0b45049b6253b8984cde9241830d2851168142", Ref: "delete-designs-v2",
					Status: platform.PipelineSuccess, WebURL: "https://gitlab.com/gitlab-org/gitlab-ee/pipelines/77056819",
				},
			},
		},
		{
			name:    "api-mr-get-doc merged results pipeline",
			fixture: "api-mr-get-doc.json",
			want: platform.MergeRequest{
				ID: 155016530, IID: 133, ProjectID: 15513260,
				Title:        "Manual job rules",
				SourceBranch: "manual-job-rules", TargetBranch: "main",
				State:               platform.MRStateOpened,
				SHA:                 "e82eb4a098e32c796079ca3915e07487fc4db24c",
				DetailedMergeStatus: "can_be_merged",
				WebURL:              "https://gitlab.com/marcel.amirault/test-project/-/merge_requests/133",
				Author:              platform.User{ID: 4155490, Username: "marcel.amirault"},
				HeadPipeline: &platform.Pipeline{
					ID: 538317940, SHA: "1604b0c46c395822e4e9478777f8e54ac99fe5b9", Ref: "refs/merge-requests/133/merge",
					Status: platform.PipelineFailed, Source: "merge_request_event",
					WebURL: "https://gitlab.com/marcel.amirault/test-project/-/pipelines/538317940",
				},
			},
		},
		{
			name:          "api-mr-rebase-failed",
			fixture:       "api-mr-rebase-failed.json",
			includeRebase: true,
			want:          platform.MergeRequest{MergeError: "Rebase failed. Please rebase locally"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t)
			s.on("GET /projects/42/merge_requests/7", answer{fixture: tt.fixture})
			c := newClient(t, s)
			got, err := c.MergeRequest(t.Context(), 42, 7, tt.includeRebase)
			if err != nil {
				t.Fatalf("MergeRequest: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("MergeRequest =\n%+v\nwant\n%+v", got, tt.want)
			}
			if got.HeadPipeline != nil && tt.fixture == "api-mr-get-doc.json" && got.HeadPipeline.SHA == got.SHA {
				t.Errorf("merged-results head pipeline sha should differ from the MR sha")
			}
			q := s.seenRequests()[0].query
			if has := strings.Contains(q, "include_rebase_in_progress=true"); has != tt.includeRebase {
				t.Errorf("query %q: include_rebase_in_progress sent = %v; want %v", q, has, tt.includeRebase)
			}
			assertNoEventUUID(t, s)
		})
	}
}

// TestCallsFromFixtures runs each call against the real fixture of its
// endpoint and checks the request shape and the translated value.
func TestCallsFromFixtures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		route     string
		answer    answer
		run       func(*testing.T, *Client) (any, error)
		want      any
		wantQuery []string // substrings of the raw query
		wantBody  string   // JSON the request body must equal, when set
		wantToken string   // PRIVATE-TOKEN the request must carry; robot by default
	}{
		{
			name:   "branch",
			route:  "GET /projects/42/repository/branches/change%2Fop_1",
			answer: answer{fixture: "api-branch-create.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.Branch(t.Context(), 42, "change/op_1")
			},
			want: platform.Branch{Name: "master", CommitSHA: "7b5c3cc8be40ee161ae89a06bba6229da1032a0c"},
		},
		{
			name:   "add to merge train",
			route:  "POST /projects/42/merge_trains/merge_requests/7",
			answer: answer{status: 201, fixture: "api-merge-train-list.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return nil, c.AddToMergeTrain(t.Context(), 42, 7, "b83d6e391c22777fca1ed3012fce84f633d7fed0", false)
			},
			want:     nil,
			wantBody: `{"sha":"b83d6e391c22777fca1ed3012fce84f633d7fed0"}`,
		},
		{
			name:   "create branch",
			route:  "POST /projects/42/repository/branches",
			answer: answer{status: 201, fixture: "api-branch-create.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.CreateBranch(t.Context(), 42, "master", "main")
			},
			want:     platform.Branch{Name: "master", CommitSHA: "7b5c3cc8be40ee161ae89a06bba6229da1032a0c"},
			wantBody: `{"branch":"master","ref":"main"}`,
		},
		{
			name:   "create commit",
			route:  "POST /projects/42/repository/commits",
			answer: answer{status: 201, fixture: "api-commit-create.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.CreateCommit(t.Context(), 42, platform.CommitParams{
					Branch: "main", Message: "some commit message",
					Actions: []platform.FileAction{
						{Action: "create", FilePath: "foo/bar", Content: "some content"},
						{Action: "delete", FilePath: "foo/bar2"},
						{Action: "update", FilePath: "foo/bar5", Content: "new content"},
					},
				})
			},
			want: platform.Commit{SHA: "ed899a2f4b50b4370feeea94676502b42383c746", ParentIDs: []string{"ae1d9fb46aa2b07ee9836d49862ec4e2c46fbbba"}, Title: "some commit message", Message: "some commit message"},
			// The create, delete and update actions of api-commit-create-request.json.
			wantBody: `{"branch":"main","commit_message":"some commit message","actions":[
				{"action":"create","file_path":"foo/bar","content":"some content"},
				{"action":"delete","file_path":"foo/bar2"},
				{"action":"update","file_path":"foo/bar5","content":"new content"}]}`,
		},
		{
			name:   "commit",
			route:  "GET /projects/42/repository/commits/ed899a2f4b50b4370feeea94676502b42383c746",
			answer: answer{fixture: "api-commit-create.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.Commit(t.Context(), 42, "ed899a2f4b50b4370feeea94676502b42383c746")
			},
			want: platform.Commit{SHA: "ed899a2f4b50b4370feeea94676502b42383c746", ParentIDs: []string{"ae1d9fb46aa2b07ee9836d49862ec4e2c46fbbba"}, Title: "some commit message", Message: "some commit message"},
		},
		{
			name:   "is ancestor",
			route:  "GET /projects/42/repository/merge_base",
			answer: answer{fixture: "api-commit-create.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.IsAncestor(t.Context(), 42, "ed899a2f4b50b4370feeea94676502b42383c746", "main")
			},
			want:      true,
			wantQuery: []string{"refs%5B%5D=ed899a2f4b50b4370feeea94676502b42383c746", "refs%5B%5D=main"},
		},
		{
			name:   "is not ancestor",
			route:  "GET /projects/42/repository/merge_base",
			answer: answer{fixture: "api-commit-create.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.IsAncestor(t.Context(), 42, "ae1d9fb46aa2b07ee9836d49862ec4e2c46fbbba", "main")
			},
			want: false,
		},
		{
			name:   "approvals",
			route:  "GET /projects/42/merge_requests/5/approvals",
			answer: answer{fixture: "api-mr-approvals-get.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.Approvals(t.Context(), 42, 5)
			},
			want: []platform.User{{ID: 1, Username: "root"}},
		},
		{
			name:   "approve as reviewer 1",
			route:  "POST /projects/42/merge_requests/5/approve",
			answer: answer{status: 201, fixture: "api-mr-approve.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return nil, c.Approve(t.Context(), 1, 42, 5, "8e0b45049b6253b8984cde9241830d2851168142")
			},
			wantBody:  `{"sha":"8e0b45049b6253b8984cde9241830d2851168142"}`,
			wantToken: reviewerTokenB,
		},
		{
			name:   "merge",
			route:  "PUT /projects/42/merge_requests/14656/merge",
			answer: answer{fixture: "api-mr-get.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				mr, err := c.Merge(t.Context(), 42, 14656, platform.MergeParams{SHA: "8e0b45049b6253b8984cde9241830d2851168142", Squash: true, CommitMessage: "Apply op_1"})
				return mr.IID, err
			},
			want:     int64(14656),
			wantBody: `{"merge_commit_message":"Apply op_1","squash_commit_message":"Apply op_1","squash":true,"sha":"8e0b45049b6253b8984cde9241830d2851168142"}`,
		},
		{
			name:   "create merge request",
			route:  "POST /projects/278964/merge_requests",
			answer: answer{status: 201, fixture: "api-mr-get.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				mr, err := c.CreateMergeRequest(t.Context(), 278964, platform.CreateMRParams{
					SourceBranch: "delete-designs-v2", TargetBranch: "master", Title: "Add deletion support for designs",
					Description: "desc", RemoveSourceBranch: true,
				})
				return [3]any{mr.IID, mr.SHA, mr.HeadPipeline.ID}, err
			},
			want:     [3]any{int64(14656), "8e0b45049b6253b8984cde9241830d2851168142", int64(77056819)},
			wantBody: `{"title":"Add deletion support for designs","description":"desc","source_branch":"delete-designs-v2","target_branch":"master","remove_source_branch":true}`,
		},
		{
			name:   "create merge request squashed on merge",
			route:  "POST /projects/278964/merge_requests",
			answer: answer{status: 201, fixture: "api-mr-get.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				mr, err := c.CreateMergeRequest(t.Context(), 278964, platform.CreateMRParams{
					SourceBranch: "delete-designs-v2", TargetBranch: "master", Title: "Add deletion support for designs", Squash: true,
				})
				return mr.Squash, err
			},
			want:     true,
			wantBody: `{"title":"Add deletion support for designs","source_branch":"delete-designs-v2","target_branch":"master","squash":true}`,
		},
		{
			name:   "rebase accepted",
			route:  "PUT /projects/42/merge_requests/7/rebase",
			answer: answer{status: 202, fixture: "api-mr-rebase-accepted.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return nil, c.Rebase(t.Context(), 42, 7)
			},
		},
		{
			name:   "close",
			route:  "PUT /projects/42/merge_requests/133",
			answer: answer{fixture: "api-mr-get-doc.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				mr, err := c.CloseMergeRequest(t.Context(), 42, 133)
				return mr.IID, err
			},
			want:     int64(133),
			wantBody: `{"state_event":"close"}`,
		},
		{
			name:   "merge request pipelines",
			route:  "GET /projects/42/merge_requests/7/pipelines",
			answer: answer{fixture: "api-mr-pipelines-list.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.MergeRequestPipelines(t.Context(), 42, 7)
			},
			want:      []platform.Pipeline{{ID: 77, SHA: "959e04d7c7a30600c894bd3c0cd0e1ce7f42c11d", Ref: "main", Status: platform.PipelineSuccess}},
			wantQuery: []string{"per_page=100"},
		},
		{
			name:   "merge request pipelines newest first",
			route:  "GET /projects/42/merge_requests/7/pipelines",
			answer: answer{body: `[{"id":3,"status":"failed"},{"id":9,"status":"running"},{"id":5,"status":"success"}]`},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.MergeRequestPipelines(t.Context(), 42, 7)
			},
			want: []platform.Pipeline{{ID: 9, Status: "running"}, {ID: 5, Status: "success"}, {ID: 3, Status: "failed"}},
		},
		{
			name:   "create merge request pipeline",
			route:  "POST /projects/42/merge_requests/1/pipelines",
			answer: answer{status: 201, fixture: "api-mr-pipeline-create.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.CreateMergeRequestPipeline(t.Context(), 42, 1)
			},
			want: platform.Pipeline{ID: 2, SHA: "b83d6e391c22777fca1ed3012fce84f633d7fed0", Ref: "refs/merge-requests/1/head", Status: "pending", WebURL: "http://localhost/user1/project1/pipelines/2"},
		},
		{
			name:   "project pipelines by ref and sha",
			route:  "GET /projects/42/pipelines",
			answer: answer{fixture: "api-mr-pipelines-list.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.Pipelines(t.Context(), 42, "main", "959e04d7c7a30600c894bd3c0cd0e1ce7f42c11d")
			},
			want:      []platform.Pipeline{{ID: 77, SHA: "959e04d7c7a30600c894bd3c0cd0e1ce7f42c11d", Ref: "main", Status: platform.PipelineSuccess}},
			wantQuery: []string{"ref=main", "sha=959e04d7c7a30600c894bd3c0cd0e1ce7f42c11d", "order_by=id", "sort=desc"},
		},
		{
			name:   "note",
			route:  "GET /projects/5/merge_requests/2/notes/301",
			answer: answer{fixture: "api-mr-note-get.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.Note(t.Context(), 5, 2, 301)
			},
			want: platform.Note{ID: 301, Body: "Comment for MR", Author: platform.User{ID: 1, Username: "pipin"}},
		},
		{
			name:   "create note",
			route:  "POST /projects/5/merge_requests/2/notes",
			answer: answer{status: 201, fixture: "api-mr-note-get.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.CreateNote(t.Context(), 5, 2, "Comment for MR")
			},
			want:     platform.Note{ID: 301, Body: "Comment for MR", Author: platform.User{ID: 1, Username: "pipin"}},
			wantBody: `{"body":"Comment for MR"}`,
		},
		{
			name:   "update note",
			route:  "PUT /projects/5/merge_requests/2/notes/301",
			answer: answer{fixture: "api-mr-note-get.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.UpdateNote(t.Context(), 5, 2, 301, "Comment for MR")
			},
			want:     platform.Note{ID: 301, Body: "Comment for MR", Author: platform.User{ID: 1, Username: "pipin"}},
			wantBody: `{"body":"Comment for MR"}`,
		},
		{
			name:   "project by path",
			route:  "GET /projects/group%2Fconfig",
			answer: answer{body: `{"id":42,"path_with_namespace":"group/config","default_branch":"main","web_url":"https://gitlab.example.com/group/config","squash_option":"default_off","merge_method":"ff"}`},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.Project(t.Context(), "group/config")
			},
			want: platform.Project{ID: 42, PathWithNamespace: "group/config", DefaultBranch: "main", WebURL: "https://gitlab.example.com/group/config", SquashOption: "default_off", MergeMethod: "ff"},
		},
		{
			name:   "member access",
			route:  "GET /projects/42/members/all/9",
			answer: answer{fixture: "api-project-member-all-get.json"},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.MemberAccess(t.Context(), 42, 9)
			},
			want: 30,
		},
		{
			name:   "not a member",
			route:  "GET /projects/42/members/all/9",
			answer: answer{status: 404, body: `{"message":"404 Not found"}`},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.MemberAccess(t.Context(), 42, 9)
			},
			want: 0,
		},
		{
			name:   "reviewer user",
			route:  "GET /user",
			answer: answer{body: `{"id":21,"username":"reviewer-a"}`},
			run: func(t *testing.T, c *Client) (any, error) {
				return c.Reviewer(t.Context(), 0)
			},
			want:      platform.User{ID: 21, Username: "reviewer-a"},
			wantToken: reviewerTokenA,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t)
			s.on(tt.route, tt.answer)
			c := newClient(t, s)
			got, err := tt.run(t, c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if tt.want != nil && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n%#v\nwant\n%#v", got, tt.want)
			}
			reqs := s.seenRequests()
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests; want 1", len(reqs))
			}
			r := reqs[0]
			for _, q := range tt.wantQuery {
				if !strings.Contains(r.query, q) {
					t.Errorf("query %q lacks %q", r.query, q)
				}
			}
			if tt.wantBody != "" {
				assertJSONEqual(t, r.body, tt.wantBody)
			}
			wantToken := tt.wantToken
			if wantToken == "" {
				wantToken = robotToken
			}
			if got := r.header.Get("PRIVATE-TOKEN"); got != wantToken {
				t.Errorf("request sent with the wrong token")
			}
			assertNoEventUUID(t, s)
		})
	}
}

func assertJSONEqual(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("request body %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want body %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("request body\n%s\nwant\n%s", got, want)
	}
}

// TestCommitRequestMatchesFixture checks that the actions we send use the
// field names of the real request payload api-commit-create-request.json.
func TestCommitRequestMatchesFixture(t *testing.T) {
	t.Parallel()
	raw := fixture.GitLab(t, "api-commit-create-request.json")
	var fx struct {
		Branch        string `json:"branch"`
		CommitMessage string `json:"commit_message"`
		Actions       []map[string]any
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	var params platform.CommitParams
	params.Branch, params.Message = fx.Branch, fx.CommitMessage
	var want []map[string]any
	for _, a := range fx.Actions {
		switch a["action"] {
		case "create", "update", "delete":
			content, _ := a["content"].(string)
			params.Actions = append(params.Actions, platform.FileAction{Action: a["action"].(string), FilePath: a["file_path"].(string), Content: content})
			want = append(want, a)
		}
	}
	s := newServer(t)
	s.on("POST /projects/42/repository/commits", answer{status: 201, fixture: "api-commit-create.json"})
	c := newClient(t, s)
	if _, err := c.CreateCommit(t.Context(), 42, params); err != nil {
		t.Fatalf("CreateCommit: %v", err)
	}
	var sent struct {
		Branch        string           `json:"branch"`
		CommitMessage string           `json:"commit_message"`
		Actions       []map[string]any `json:"actions"`
	}
	if err := json.Unmarshal([]byte(s.seenRequests()[0].body), &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Branch != fx.Branch || sent.CommitMessage != fx.CommitMessage || !reflect.DeepEqual(sent.Actions, want) {
		t.Errorf("sent %+v; want the fixture's create/update/delete actions %+v", sent, want)
	}
}

func TestFindOpenMergeRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		body     string
		wantIID  int64
		notFound bool
	}{
		{name: "one open", body: `[{"id":1,"iid":7,"project_id":42,"source_project_id":42,"source_branch":"change/op_1","state":"opened","sha":"abc"}]`, wantIID: 7},
		{name: "none", body: `[]`, notFound: true},
		{name: "fork with same branch", body: `[{"id":1,"iid":8,"project_id":42,"source_project_id":99,"source_branch":"change/op_1","state":"opened"}]`, notFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t)
			s.on("GET /projects/42/merge_requests", answer{body: tt.body})
			c := newClient(t, s)
			mr, err := c.FindOpenMergeRequest(t.Context(), 42, "change/op_1")
			if tt.notFound {
				if !errors.Is(err, platform.ErrNotFound) {
					t.Fatalf("err = %v; want ErrNotFound", err)
				}
				return
			}
			if err != nil || mr.IID != tt.wantIID {
				t.Fatalf("FindOpenMergeRequest = %+v, %v; want !%d", mr, err, tt.wantIID)
			}
			q, _ := url.ParseQuery(s.seenRequests()[0].query)
			if q.Get("state") != "opened" || q.Get("source_branch") != "change/op_1" {
				t.Errorf("query %v lacks state=opened and source_branch", q)
			}
		})
	}
}

func TestFindNote(t *testing.T) {
	t.Parallel()
	const marker = "<!-- changebot:status op_1 -->"
	page1 := `[{"id":1,"body":"` + marker + `","author":{"id":99,"username":"someone"}},
		{"id":2,"body":"` + marker + `","system":true,"author":{"id":7,"username":"changebot"}},
		{"id":3,"body":"hello","author":{"id":7,"username":"changebot"}}]`
	page2 := `[{"id":4,"body":"status ` + marker + `","author":{"id":7,"username":"changebot"}},
		{"id":5,"body":"` + marker + `","author":{"id":7,"username":"changebot"}}]`
	tests := []struct {
		name     string
		pages    []answer
		wantID   int64
		notFound bool
		wantList int
	}{
		{
			name: "second page",
			pages: []answer{
				{body: page1, header: map[string]string{"X-Next-Page": "2", "X-Page": "1"}},
				{body: page2, header: map[string]string{"X-Page": "2"}},
			},
			wantID: 4, wantList: 2,
		},
		{
			name:     "none by the robot",
			pages:    []answer{{body: page1, header: map[string]string{"X-Page": "1"}}},
			notFound: true, wantList: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t)
			s.on("GET /user", answer{body: `{"id":7,"username":"changebot"}`})
			s.on("GET /projects/42/merge_requests/7/notes", tt.pages...)
			c := newClient(t, s)
			n, err := c.FindNote(t.Context(), 42, 7, marker)
			if tt.notFound {
				if !errors.Is(err, platform.ErrNotFound) {
					t.Fatalf("err = %v; want ErrNotFound", err)
				}
			} else if err != nil || n.ID != tt.wantID {
				t.Fatalf("FindNote = %+v, %v; want note %d", n, err, tt.wantID)
			}
			if got := s.count("GET /projects/42/merge_requests/7/notes"); got != tt.wantList {
				t.Errorf("listed notes %d times; want %d", got, tt.wantList)
			}
			for _, r := range s.seenRequests() {
				if r.path == "/projects/42/merge_requests/7/notes" {
					q, _ := url.ParseQuery(r.query)
					if q.Get("per_page") != "100" || q.Get("sort") != "asc" {
						t.Errorf("notes query %v; want per_page=100 sort=asc", q)
					}
				}
			}
		})
	}
}

func TestUsersAreCached(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.on("GET /user", answer{status: 502, body: "<html>bad gateway</html>"}, answer{body: `{"id":7,"username":"changebot"}`})
	c := newClient(t, s, func(cfg *Config) { cfg.RetryMax = -1 })
	if _, err := c.CurrentUser(t.Context()); platform.StatusOf(err) != 502 {
		t.Fatalf("first CurrentUser err = %v; want 502", err)
	}
	for range 3 {
		u, err := c.CurrentUser(t.Context())
		if err != nil || u.ID != 7 {
			t.Fatalf("CurrentUser = %+v, %v", u, err)
		}
	}
	if got := s.count("GET /user"); got != 2 {
		t.Errorf("GET /user called %d times; want 2 (one failure, then cached)", got)
	}
	if c.ReviewerCount() != 2 {
		t.Errorf("ReviewerCount = %d; want 2", c.ReviewerCount())
	}
	if _, err := c.Reviewer(t.Context(), 2); err == nil {
		t.Errorf("Reviewer(2) succeeded with two reviewers")
	}
}

// TestUsersReadOncePerToken: callers that start together (the status note
// job, the command check of a note hook, the approve step) share the first
// GET /user of a token instead of each making one, and one whose context
// ends while it waits returns at once.
func TestUsersReadOncePerToken(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	reads := map[string]int{}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.Header.Get("PRIVATE-TOKEN")
		mu.Lock()
		reads[tok]++
		mu.Unlock()
		<-release // every caller has asked by now
		fmt.Fprintf(w, `{"id":7,"username":%q}`, "user-"+tok)
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{BaseURL: srv.URL, Token: robotToken, ReviewerTokens: []string{reviewerTokenA}, RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 8 {
		wg.Add(2)
		go func() { defer wg.Done(); _, err := c.CurrentUser(t.Context()); errs <- err }()
		go func() { defer wg.Done(); _, err := c.Reviewer(t.Context(), 0); errs <- err }()
	}
	for { // both first reads are in flight
		mu.Lock()
		n := len(reads)
		mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	late := make(chan error, 1)
	go func() { _, err := c.CurrentUser(waitCtx); late <- err }()
	cancel()
	if err := <-late; !errors.Is(err, context.Canceled) {
		t.Errorf("a waiting caller whose context ended got %v, want context.Canceled", err)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a sharing caller got %v", err)
		}
	}
	if reads[robotToken] != 1 || reads[reviewerTokenA] != 1 {
		t.Errorf("GET /user per token %v, want one each", reads)
	}
}

func TestObserveFunc(t *testing.T) {
	t.Parallel()
	type obs struct {
		endpoint string
		status   int
	}
	var got []obs
	s := newServer(t)
	s.on("GET /projects/42/merge_requests/7", answer{fixture: "api-mr-get.json"})
	s.on("PUT /projects/42/merge_requests/7/merge", answer{status: 405, body: `{"message":"405 Method Not Allowed"}`})
	c := newClient(t, s, func(cfg *Config) {
		cfg.ObserveFunc = func(endpoint string, status int, d time.Duration) {
			if d < 0 {
				t.Errorf("negative duration")
			}
			got = append(got, obs{endpoint, status})
		}
	})
	_, _ = c.MergeRequest(t.Context(), 42, 7, false)
	_, _ = c.Merge(t.Context(), 42, 7, platform.MergeParams{SHA: "abc"})
	want := []obs{{"merge_request_get", 200}, {"merge_request_merge", 405}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("observed %v; want %v", got, want)
	}
}
