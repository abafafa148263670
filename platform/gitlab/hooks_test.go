package gitlab_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"changebot/internal/fixture"
	"changebot/platform"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
)

// fixtureHeaders maps the kind in a fixture's name (webhook-<kind>-….json)
// to its X-Gitlab-Event header, from the fixtures README table.
var fixtureHeaders = map[string]string{
	"merge_request": "Merge Request Hook",
	"pipeline":      "Pipeline Hook",
	"note":          "Note Hook",
	"emoji":         "Emoji Hook",
	"job":           "Job Hook",
}

// fixtureKinds is the platform kind each fixture kind must decode to.
var fixtureKinds = map[string]string{
	"merge_request": platform.HookMergeRequest,
	"pipeline":      platform.HookPipeline,
	"note":          platform.HookNote,
	"emoji":         platform.HookEmoji,
	"job":           platform.HookJob,
}

// wantFixtureEvents pins every value DecodeHook reads from each known
// fixture. A new fixture not listed here is still decoded and checked for
// its kind and project by TestDecodeHookFixtures.
var wantFixtureEvents = map[string]platform.HookEvent{
	"webhook-merge_request-open.json": {
		Kind: platform.HookMergeRequest, ProjectID: 1, ProjectPath: "gitlabhq/gitlab-test",
		User: platform.User{ID: 1, Username: "user1"},
		MergeRequest: &platform.MergeRequestHook{
			ID: 99, IID: 1, Action: "open", State: "opened", SHA: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
			SourceBranch: "ms-viewport", TargetBranch: "master", DetailedMergeStatus: "mergeable",
			Title: "MS-Viewport", AuthorID: 51,
			// changes.labels: API before, Platform after (the top-level
			// labels still say API in the docs' example).
			Labels: []string{"API"}, LabelsChanged: true, LabelsBefore: []string{"API"},
		},
	},
	"webhook-merge_request-open-gitlabcom.json": {
		Kind: platform.HookMergeRequest, ProjectID: 72081820, ProjectPath: "demoaccount2-commits-group/test_ci_tmp",
		User: platform.User{ID: 4575606, Username: "real6543"},
		MergeRequest: &platform.MergeRequestHook{
			ID: 405095454, IID: 3, Action: "open", State: "opened", SHA: "2f7670508b771e7e77839402be8b34b13787aba8",
			SourceBranch: "real6543-main-patch-42541", TargetBranch: "main", DetailedMergeStatus: "checking",
			Title: "Edit README.md for more text to read", AuthorID: 4575606,
			Labels: []string{"documentation"},
		},
	},
	"webhook-merge_request-update-push.json": {
		Kind: platform.HookMergeRequest, ProjectID: 2, ProjectPath: "test/woodpecker",
		User: platform.User{ID: 2, Username: "test"},
		MergeRequest: &platform.MergeRequestHook{
			ID: 2, IID: 2, Action: "update", State: "opened", SHA: "0ab96a10266b95b4b533dcfd98738015fbe70889",
			OldRev: "6ef047571374c96a2bf13c361efd1fb008b0063e", SourceBranch: "next-feature", TargetBranch: "master",
			Title: "Update client.go 🎉", AuthorID: 2,
		},
	},
	"webhook-merge_request-update-edit.json": {
		Kind: platform.HookMergeRequest, ProjectID: 72081820, ProjectPath: "demoaccount2-commits-group/test_ci_tmp",
		User: platform.User{ID: 4575606, Username: "real6543"},
		MergeRequest: &platform.MergeRequestHook{
			ID: 405095454, IID: 3, Action: "update", State: "opened", SHA: "2f7670508b771e7e77839402be8b34b13787aba8",
			SourceBranch: "real6543-main-patch-42541", TargetBranch: "main", DetailedMergeStatus: "mergeable",
			Title: "Edit README for more text to read", AuthorID: 4575606,
			Labels: []string{"documentation"},
		},
	},
	"webhook-merge_request-unapproved.json": {
		Kind: platform.HookMergeRequest, ProjectID: 72081820, ProjectPath: "demoaccount2-commits-group/test_ci_tmp",
		User: platform.User{ID: 4575606, Username: "real6543"},
		MergeRequest: &platform.MergeRequestHook{
			ID: 405095454, IID: 3, Action: "unapproved", State: "opened", SHA: "2f7670508b771e7e77839402be8b34b13787aba8",
			SourceBranch: "real6543-main-patch-42541", TargetBranch: "main", DetailedMergeStatus: "mergeable",
			Title: "Edit README for more text to read", AuthorID: 4575606,
			Labels: []string{"good first issue"},
		},
	},
	"webhook-merge_request-merge.json": {
		Kind: platform.HookMergeRequest, ProjectID: 32059612, ProjectPath: "anbraten/woodpecker-test",
		User: platform.User{ID: 2251488, Username: "anbraten"},
		MergeRequest: &platform.MergeRequestHook{
			ID: 268189426, IID: 4, Action: "merge", State: "merged", SHA: "3e4db3586b65dd401de8c77b3ac343fd24cbf89b",
			MergeCommitSHA: "43411b53d670203e887c4985c4e58e8e6b7c109e", SourceBranch: "patch-1", TargetBranch: "main",
			DetailedMergeStatus: "not_open", Title: "Add new file", AuthorID: 2251488,
		},
	},
	"webhook-merge_request-close.json": {
		Kind: platform.HookMergeRequest, ProjectID: 32059612, ProjectPath: "anbraten/woodpecker-test",
		User: platform.User{ID: 2251488, Username: "anbraten"},
		MergeRequest: &platform.MergeRequestHook{
			ID: 268189426, IID: 4, Action: "close", State: "closed", SHA: "3e4db3586b65dd401de8c77b3ac343fd24cbf89b",
			SourceBranch: "patch-1", TargetBranch: "main", DetailedMergeStatus: "not_open",
			Title: "Add new file", AuthorID: 2251488,
		},
	},
	"webhook-pipeline-mr-success.json": {
		Kind: platform.HookPipeline, ProjectID: 1, ProjectPath: "gitlab-org/gitlab-test",
		User: platform.User{ID: 42, Username: "user1"},
		Pipeline: &platform.PipelineHook{
			ID: 31, Ref: "master", SHA: "bcbb5ec396a2c0f828686f14fac9b80b780504f2",
			BeforeSHA: "bcbb5ec396a2c0f828686f14fac9b80b780504f2", Status: "success", Source: "merge_request_event",
			MRIID: 1, MRSourceBranch: "test",
			// The fixture has no object_attributes.url: derived from project.web_url.
			WebURL: "http://192.168.64.1:3005/gitlab-org/gitlab-test/-/pipelines/31",
		},
	},
	"webhook-note-mr.json": {
		Kind: platform.HookNote, ProjectID: 5, ProjectPath: "gitlab-org/gitlab-test",
		User: platform.User{ID: 1, Username: "root"},
		Note: &platform.NoteHook{
			ID: 1244, Body: "This MR needs work.", Action: "create", NoteableType: "MergeRequest",
			MRIID: 1, MRID: 7, Author: platform.User{ID: 1, Username: "root"}, AuthorID: 1,
		},
	},
	"webhook-emoji-award-note.json": {
		Kind: platform.HookEmoji, ProjectID: 6, ProjectPath: "flightjs/Flight",
		User: platform.User{ID: 1, Username: "root"},
	},
	"webhook-job.json": {
		// No project object: the top-level project_id.
		Kind: platform.HookJob, ProjectID: 31537070,
		User: platform.User{ID: 2967854, Username: "jsmithy2"},
	},
}

// readFixture returns the bytes of a fixture file.
func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	return fixture.GitLab(t, name)
}

// TestDecodeHookFixtures decodes every webhook-*.json fixture, found with a
// glob so that a new fixture is covered without touching this test
// (issue 2 acceptance: every fixture decodes through the bot's decoding path).
func TestDecodeHookFixtures(t *testing.T) {
	t.Parallel()
	files := fixture.GitLabGlob(t, "webhook-*.json")
	if len(files) < len(wantFixtureEvents) {
		t.Fatalf("found %d webhook fixtures in %s, want at least %d", len(files), fixture.GitLabDir(), len(wantFixtureEvents))
	}
	seen := map[string]bool{}
	for _, path := range files {
		name := filepath.Base(path)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kind, _, _ := strings.Cut(strings.TrimPrefix(name, "webhook-"), "-")
			kind = strings.TrimSuffix(kind, ".json")
			header, ok := fixtureHeaders[kind]
			if !ok {
				t.Fatalf("no X-Gitlab-Event known for fixture kind %q: add it to fixtureHeaders from the fixtures README", kind)
			}
			got, err := gitlab.DecodeHook(header, readFixture(t, name))
			if err != nil {
				t.Fatalf("DecodeHook(%q): %v", header, err)
			}
			if got.Kind != fixtureKinds[kind] {
				t.Errorf("Kind = %q, want %q", got.Kind, fixtureKinds[kind])
			}
			if got.ProjectID == 0 {
				t.Errorf("ProjectID = 0, want the payload's project")
			}
			want, ok := wantFixtureEvents[name]
			if !ok {
				t.Logf("no pinned values for %s; only kind and project checked", name)
				return
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("DecodeHook(%q)\n got %s\nwant %s", header, dump(got), dump(want))
			}
		})
	}
	for name := range wantFixtureEvents {
		if !seen[name] {
			t.Errorf("pinned fixture %s is missing from %s", name, fixture.GitLabDir())
		}
	}
}

func dump(ev platform.HookEvent) string {
	b, _ := json.Marshal(ev)
	return string(b)
}

// TestDecodeHookEvents covers headers and bodies beyond the fixtures:
// events the bot does not use decode without error, and malformed or
// contradicting bodies fail with platform.ErrMalformedHook without echoing
// the body.
func TestDecodeHookEvents(t *testing.T) {
	t.Parallel()
	noteMR := string(readFixture(t, "webhook-note-mr.json"))
	mrOpen := string(readFixture(t, "webhook-merge_request-open.json"))
	pipeline := string(readFixture(t, "webhook-pipeline-mr-success.json"))
	const issueNote = `{"object_kind":"note","event_type":"note","user":{"id":3,"username":"dev"},"project_id":9,
		"project":{"id":9,"path_with_namespace":"g/p"},
		"object_attributes":{"id":77,"note":"/retry","noteable_type":"Issue","author_id":3,"action":"create"},
		"issue":{"id":5,"iid":2}}`
	const secretMarker = "s3cr3t-body-value"
	tests := []struct {
		name      string
		header    string
		body      string
		want      platform.HookEvent
		check     func(*testing.T, platform.HookEvent) // instead of want, when set
		wantError bool
		// wantMsg, when set, is how the error ends: the problem in the
		// sender's words, JSON paths and types, no Go names.
		wantMsg string
	}{
		{
			name:   "push hook is kind push with its project",
			header: "Push Hook",
			body:   `{"object_kind":"push","event_name":"push","ref":"refs/heads/main","user_id":4,"user_username":"dev","project_id":15,"project":{"id":15,"path_with_namespace":"g/cfg"},"commits":[]}`,
			want:   platform.HookEvent{Kind: platform.HookPush, ProjectID: 15, ProjectPath: "g/cfg"},
		},
		{
			name:   "tag push hook is other",
			header: "Tag Push Hook",
			body:   `{"object_kind":"tag_push","ref":"refs/tags/v1","project_id":15}`,
			want:   platform.HookEvent{Kind: platform.HookOther, ProjectID: 15},
		},
		{
			name:   "issue hook is other",
			header: "Issue Hook",
			body:   `{"object_kind":"issue","event_type":"issue","user":{"id":3,"username":"dev"},"project":{"id":9,"path_with_namespace":"g/p"},"object_attributes":{"id":1,"iid":1}}`,
			want:   platform.HookEvent{Kind: platform.HookOther, ProjectID: 9, ProjectPath: "g/p", User: platform.User{ID: 3, Username: "dev"}},
		},
		{
			name:   "system hook is other whatever its object_kind",
			header: "System Hook",
			body:   `{"object_kind":"merge_request","project":{"id":9},"object_attributes":{"iid":1}}`,
			want:   platform.HookEvent{Kind: platform.HookOther, ProjectID: 9},
		},
		{
			name:   "member hook without object_kind is other",
			header: "Member Hook",
			body:   `{"event_name":"user_add_to_group","group_id":3}`,
			want:   platform.HookEvent{Kind: platform.HookOther},
		},
		{
			name:   "unknown header is other",
			header: "Something New Hook",
			body:   `{"object_kind":"something_new","project":{"id":1}}`,
			want:   platform.HookEvent{Kind: platform.HookOther, ProjectID: 1},
		},
		{
			name:   "unused event with odd project shape still decodes",
			header: "Emoji Hook",
			body:   `{"object_kind":"emoji","project":"not an object","project_id":"seven","user":[1]}`,
			want:   platform.HookEvent{Kind: platform.HookEmoji},
		},
		{
			name:   "service hook with merge_request payload is a merge request",
			header: "Service Hook",
			body:   mrOpen,
			check: func(t *testing.T, ev platform.HookEvent) {
				if ev.Kind != platform.HookMergeRequest || ev.MergeRequest == nil || ev.MergeRequest.IID != 1 {
					t.Errorf("got %s, want the merge request !1", dump(ev))
				}
			},
		},
		{
			name:   "confidential note hook maps like note hook",
			header: "Confidential Note Hook",
			body:   noteMR,
			check: func(t *testing.T, ev platform.HookEvent) {
				if ev.Kind != platform.HookNote || ev.Note == nil || !ev.Note.Confidential || ev.Note.MRIID != 1 || ev.Note.Body != "This MR needs work." {
					t.Errorf("got %s, want a confidential MR note on !1", dump(ev))
				}
			},
		},
		{
			name:   "internal note flag is confidential",
			header: "Note Hook",
			body:   strings.Replace(noteMR, `"system": false,`, `"system": false, "internal": true,`, 1),
			check: func(t *testing.T, ev platform.HookEvent) {
				if ev.Note == nil || !ev.Note.Confidential {
					t.Errorf("got %s, want Confidential", dump(ev))
				}
			},
		},
		{
			name:   "note without action (GitLab before 16.11)",
			header: "Note Hook",
			body:   strings.Replace(noteMR, `"action": "create",`, ``, 1),
			check: func(t *testing.T, ev platform.HookEvent) {
				if ev.Note == nil || ev.Note.Action != "" || ev.Note.ID != 1244 {
					t.Errorf("got %s, want note 1244 without action", dump(ev))
				}
			},
		},
		{
			name:   "note on an issue is a note without merge request",
			header: "Note Hook",
			body:   issueNote,
			want: platform.HookEvent{
				Kind: platform.HookNote, ProjectID: 9, ProjectPath: "g/p", User: platform.User{ID: 3, Username: "dev"},
				Note: &platform.NoteHook{ID: 77, Body: "/retry", Action: "create", NoteableType: "Issue",
					Author: platform.User{ID: 3, Username: "dev"}, AuthorID: 3},
			},
		},
		{
			name:   "note on an unknown noteable type decodes",
			header: "Note Hook",
			body:   strings.Replace(issueNote, `"Issue"`, `"WikiPage::Meta"`, 1),
			check: func(t *testing.T, ev platform.HookEvent) {
				if ev.Note == nil || ev.Note.NoteableType != "WikiPage::Meta" || ev.Note.MRIID != 0 {
					t.Errorf("got %s", dump(ev))
				}
			},
		},
		{
			name:   "branch pipeline has no merge request",
			header: "Pipeline Hook",
			body:   `{"object_kind":"pipeline","object_attributes":{"id":8,"ref":"main","sha":"abc","status":"success","source":"push","url":"https://gl/g/p/-/pipelines/8"},"merge_request":null,"project":{"id":9,"web_url":"https://gl/g/p"}}`,
			want: platform.HookEvent{Kind: platform.HookPipeline, ProjectID: 9, Pipeline: &platform.PipelineHook{
				ID: 8, Ref: "main", SHA: "abc", Status: "success", Source: "push", WebURL: "https://gl/g/p/-/pipelines/8",
			}},
		},
		{name: "empty body", header: "Merge Request Hook", body: ``, wantError: true},
		{name: "not JSON", header: "Merge Request Hook", body: `{"object_kind": "merge_request", ` + secretMarker, wantError: true},
		{name: "JSON array", header: "Push Hook", body: `[{"object_kind":"push"}]`, wantError: true},
		{name: "JSON null", header: "Pipeline Hook", body: `null`, wantError: true},
		{name: "truncated JSON of an unused event", header: "Push Hook", body: `{"object_kind":"push",`, wantError: true},
		{name: "object_kind contradicts header", header: "Merge Request Hook", body: noteMR, wantError: true},
		{name: "object_kind missing for a used event", header: "Pipeline Hook", body: `{"object_attributes":{"id":1}}`, wantError: true,
			wantMsg: `object_kind is missing, want "pipeline"`},
		// It said "object_kind contradicts the header".
		{name: "empty object", header: "Merge Request Hook", body: `{}`, wantError: true, wantMsg: `object_kind is missing, want "merge_request"`},
		{name: "empty object as a note", header: "Note Hook", body: `{}`, wantError: true, wantMsg: `object_kind is missing, want "note"`},
		{name: "object_kind contradicts an unused header", header: "Push Hook", body: `{"object_kind":"` + secretMarker + `"}`, wantError: true},
		{name: "pipeline body sent as note", header: "Note Hook", body: pipeline, wantError: true},
		// It said "Go struct field MergeEventObjectAttributes.object_attributes.iid of type int64".
		{name: "wrong type in a used field", header: "Merge Request Hook", body: strings.Replace(mrOpen, `"iid": 1,`, `"iid": "`+secretMarker+`",`, 1), wantError: true,
			wantMsg: "field object_attributes.iid must be an integer, not a string"},
		{name: "wrong type in a note", header: "Note Hook", body: `{"object_kind":"note","object_attributes":{"id":"x"}}`, wantError: true,
			wantMsg: "field object_attributes.id must be an integer, not a string"},
		{name: "not JSON worded without Go", header: "Pipeline Hook", body: `{"object_kind":`, wantError: true, wantMsg: "malformed JSON: the body ends early"},
		{name: "merge request without iid", header: "Merge Request Hook", body: `{"object_kind":"merge_request","object_attributes":{"action":"open"}}`, wantError: true,
			wantMsg: `malformed "Merge Request Hook" payload: object_attributes.iid is missing`},
		{name: "note without id", header: "Note Hook", body: `{"object_kind":"note","object_attributes":{"noteable_type":"MergeRequest"}}`, wantError: true,
			wantMsg: `malformed "Note Hook" payload: object_attributes.id is missing`},
		// Without the object, the object is what is missing (as GitHub's "pull_request is missing").
		{name: "merge request without object_attributes", header: "Merge Request Hook", body: `{"object_kind":"merge_request"}`, wantError: true,
			wantMsg: `malformed "Merge Request Hook" payload: object_attributes is missing`},
		{name: "pipeline with null object_attributes", header: "Pipeline Hook", body: `{"object_kind":"pipeline","object_attributes":null}`, wantError: true,
			wantMsg: `malformed "Pipeline Hook" payload: object_attributes is missing`},
		{name: "note without object_attributes", header: "Note Hook", body: `{"object_kind":"note"}`, wantError: true,
			wantMsg: `malformed "Note Hook" payload: object_attributes is missing`},
		// They were stored as project 0, where no change can be found.
		{name: "merge request without project", header: "Merge Request Hook", body: `{"object_kind":"merge_request","object_attributes":{"iid":3,"action":"open"}}`, wantError: true,
			wantMsg: `malformed "Merge Request Hook" payload: project.id is missing`},
		{name: "pipeline without project", header: "Pipeline Hook", body: `{"object_kind":"pipeline","object_attributes":{"id":8,"status":"success"}}`, wantError: true,
			wantMsg: `malformed "Pipeline Hook" payload: project.id is missing`},
		{name: "note without project", header: "Note Hook", body: `{"object_kind":"note","object_attributes":{"id":5,"noteable_type":"MergeRequest","note":"/retry"},"merge_request":{"iid":3}}`, wantError: true,
			wantMsg: `malformed "Note Hook" payload: project.id is missing`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := gitlab.DecodeHook(tt.header, []byte(tt.body))
			if tt.wantError {
				if !errors.Is(err, platform.ErrMalformedHook) {
					t.Fatalf("err = %v, want one wrapping platform.ErrMalformedHook", err)
				}
				if strings.Contains(err.Error(), secretMarker) {
					t.Errorf("error echoes the body: %v", err)
				}
				if tt.wantMsg != "" && !strings.HasSuffix(err.Error(), tt.wantMsg) {
					t.Errorf("err = %v, want it to end %q", err, tt.wantMsg)
				}
				if strings.Contains(err.Error(), "Go ") {
					t.Errorf("err = %v names Go types", err)
				}
				if !reflect.DeepEqual(got, platform.HookEvent{}) {
					t.Errorf("event %s alongside an error, want the zero value", dump(got))
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeHook: %v", err)
			}
			if tt.check != nil {
				tt.check(t, got)
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DecodeHook(%q)\n got %s\nwant %s", tt.header, dump(got), dump(tt.want))
			}
		})
	}
}

// hookRecorder is a webhook receiver that decodes every delivery with
// DecodeHook and records the outcome.
type hookRecorder struct {
	mu     sync.Mutex
	events []platform.HookEvent
	errs   []string
}

func (r *hookRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err == nil {
		var ev platform.HookEvent
		ev, err = gitlab.DecodeHook(req.Header.Get("X-Gitlab-Event"), body)
		r.mu.Lock()
		if err != nil {
			r.errs = append(r.errs, req.Header.Get("X-Gitlab-Event")+": "+err.Error())
		} else {
			r.events = append(r.events, ev)
		}
		r.mu.Unlock()
	}
	w.WriteHeader(http.StatusOK)
}

// TestDecodeHookFromFake decodes what gitlabfake emits over a change's life
// (MR open, MR pipeline, notes by a human and by the robot, merge, deploy
// pipeline): the fake and the decoder agree on the payload shapes.
func TestDecodeHookFromFake(t *testing.T) {
	t.Parallel()
	rec := &hookRecorder{}
	receiver := httptest.NewServer(rec)
	t.Cleanup(receiver.Close)
	srv := gitlabfake.New(gitlabfake.Options{WebhookURL: receiver.URL, WebhookSecret: "hook-secret"})
	t.Cleanup(srv.Close)
	const token = "decode-hook-robot-token"
	robot := srv.AddUser("changebot", token, gitlabfake.AsBot())
	proj := srv.AddProject(gitlabfake.ProjectSpec{
		PathWithNamespace: "group/config",
		Members:           map[string]int{"changebot": gitlabfake.AccessMaintainer, "human": gitlabfake.AccessDeveloper},
	})
	srv.SetPipelineScript(proj.ID, gitlabfake.PipelineScript{Duration: 5 * time.Millisecond})
	c, err := gitlab.New(gitlab.Config{BaseURL: srv.URL(), Token: token, RetryWaitMin: time.Millisecond, RetryWaitMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.CreateBranch(ctx, proj.ID, "change/op_1", "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCommit(ctx, proj.ID, platform.CommitParams{Branch: "change/op_1", Message: "Add a", Actions: []platform.FileAction{
		{Action: "create", FilePath: "a.yaml", Content: "a: 1\n"},
	}}); err != nil {
		t.Fatal(err)
	}
	mr, err := c.CreateMergeRequest(ctx, proj.ID, platform.CreateMRParams{SourceBranch: "change/op_1", TargetBranch: "main", Title: "Change a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	human := srv.AddNoteAsUser(proj.ID, mr.IID, "human", "/retry")
	if _, err := c.CreateNote(ctx, proj.ID, mr.IID, "status"); err != nil {
		t.Fatal(err)
	}
	merged, err := c.Merge(ctx, proj.ID, mr.IID, platform.MergeParams{SHA: mr.SHA})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.errs {
		t.Errorf("fake payload did not decode: %s", e)
	}
	var sawOpen, sawMerge, sawMRPipeline, sawDeploy, sawHumanNote, sawRobotNote bool
	for _, ev := range rec.events {
		if ev.ProjectID != proj.ID || ev.ProjectPath != "group/config" {
			t.Errorf("%s event for project %d %q, want %d group/config", ev.Kind, ev.ProjectID, ev.ProjectPath, proj.ID)
		}
		switch {
		case ev.MergeRequest != nil:
			m := ev.MergeRequest
			if m.IID != mr.IID || m.ID != mr.ID || m.SourceBranch != "change/op_1" || m.TargetBranch != "main" || m.AuthorID != robot.ID {
				t.Errorf("merge request hook %+v does not match MR %+v", m, mr)
			}
			switch m.Action {
			case "open":
				sawOpen = m.SHA == mr.SHA && m.State == "opened"
			case "merge":
				sawMerge = m.MergeCommitSHA == merged.MergeCommitSHA && m.MergeCommitSHA != "" && m.State == "merged"
			}
		case ev.Pipeline != nil:
			p := ev.Pipeline
			if p.ID == 0 || p.WebURL == "" {
				t.Errorf("pipeline hook %+v lacks id or url", p)
			}
			if p.Status == platform.PipelineSuccess && p.Source == "merge_request_event" {
				sawMRPipeline = p.MRIID == mr.IID && p.MRSourceBranch == "change/op_1" && p.SHA == mr.SHA
			}
			if p.Status == platform.PipelineSuccess && p.Source == "push" {
				sawDeploy = p.MRIID == 0 && p.SHA == merged.MergeCommitSHA && p.Ref == "main"
			}
		case ev.Note != nil:
			n := ev.Note
			if n.NoteableType != platform.NoteableMergeRequest || n.MRIID != mr.IID || n.MRID != mr.ID || n.Action != platform.NoteActionCreate {
				t.Errorf("note hook %+v, want a created note on !%d", n, mr.IID)
			}
			if n.ID == human.ID && n.Body == "/retry" && n.Author.Username == "human" && n.AuthorID == n.Author.ID {
				sawHumanNote = true
			}
			if n.Body == "status" && n.Author.ID == robot.ID {
				sawRobotNote = true
			}
		}
	}
	for what, ok := range map[string]bool{
		"MR open": sawOpen, "MR merge": sawMerge, "MR pipeline success": sawMRPipeline,
		"deploy pipeline success": sawDeploy, "human note": sawHumanNote, "robot note": sawRobotNote,
	} {
		if !ok {
			t.Errorf("no decoded %s among %d events", what, len(rec.events))
		}
	}
}

// restFixtureElsewhere names, for the api-*.json fixtures that no test of
// this package serves to the adapter, why not. Every other REST fixture must
// appear in a test of this package (client_test.go, call_test.go, …), so a
// new fixture cannot go unnoticed.
var restFixtureElsewhere = map[string]string{
	"api-mr-approval-state.json": "GET .../approval_state is not called by the adapter: Approvals reads GET .../approvals (api-mr-approvals-get.json)",
}

// TestRESTFixturesServedToAdapter checks that every REST fixture is decoded
// through the adapter by some test of this package, or is listed with a
// reason in restFixtureElsewhere.
func TestRESTFixturesServedToAdapter(t *testing.T) {
	t.Parallel()
	fixtures := fixture.GitLabGlob(t, "api-*.json")
	tests, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var sources strings.Builder
	for _, f := range tests {
		if f == "hooks_test.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources.Write(b)
	}
	for _, f := range fixtures {
		name := filepath.Base(f)
		_, exempt := restFixtureElsewhere[name]
		used := strings.Contains(sources.String(), `"`+name+`"`)
		switch {
		case !used && !exempt:
			t.Errorf("REST fixture %s is not served to the adapter by any test: add a case to TestCallsFromFixtures or a reason to restFixtureElsewhere", name)
		case used && exempt:
			t.Errorf("REST fixture %s is now used by a test: remove it from restFixtureElsewhere", name)
		}
	}
}
