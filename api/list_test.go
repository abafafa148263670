package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"changebot/flows/rules"
)

// TestListFilters: GET /api/v1/changes hands each filter to the store
// (repeated or comma-separated statuses and steps, step names in any
// case, times, stuck=true from the step deadlines at the API's clock),
// pages newest first with an opaque cursor, and answers 400 naming a
// parameter it does not know or cannot read.
func TestListFilters(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	sent := opsFixture(s, 3, "grp/a", rules.StatusApprovalSent, rules.ApprovalSent)
	merging := opsFixture(s, 2, "grp/b", rules.StatusMerging, rules.HandleStarted)
	failed := opsFixture(s, 1, "grp/b", rules.StatusCreateFailed, rules.CreateFailed)
	closed := opsFixture(s, 1, "grp/d", rules.StatusClosed, rules.Closed)
	// One change waits in its pipeline since long before the API's clock.
	old := s.changes.add(Change{SubjectID: "old", TargetKey: "prod", Project: "grp/c", Status: rules.StatusMRCreating,
		Step: int(rules.CreateMROpened), StepStartedAt: s.changes.now.Add(-72 * time.Hour), CreatedAt: s.changes.now.Add(-72 * time.Hour),
		UpdatedAt: s.changes.now.Add(-72 * time.Hour)})
	rev := func(ids ...[]string) []string {
		var all []string
		for _, l := range ids {
			all = append(all, l...)
		}
		slices.Sort(all)
		slices.Reverse(all)
		return all
	}
	tests := []struct {
		name  string
		query string
		want  []string // ids, in order
		code  int
		err   string
	}{
		{name: "everything, newest first", query: "", want: rev(sent, merging, failed, closed, []string{old})},
		{name: "one status", query: "status=MERGING", want: rev(merging)},
		{name: "statuses repeated and listed", query: "status=MERGING,CREATE_FAILED&status=APPROVAL_SENT", want: rev(sent, merging, failed)},
		{name: "step by name in any case", query: "step=create_failed", want: failed},
		{name: "step by code", query: "step=10402", want: rev(sent)},
		{name: "project", query: "project=grp/b", want: rev(merging, failed)},
		{name: "project and status", query: "project=grp/b&status=MERGING", want: rev(merging)},
		{name: "subject", query: "subject_id=grp/a-1", want: sent[1:2]},
		{name: "requested_by", query: "requested_by=bob", want: nil},
		{name: "updated before", query: "updated_before=2026-12-01T00:00:00Z", want: []string{old}},
		{name: "updated after", query: "updated_after=2026-12-01T00:00:00Z&project=grp/c", want: nil},
		{name: "stuck", query: "stuck=true", want: []string{old}},
		// CREATE_FAILED can be retried: it is active, as are the waiting
		// and merging changes; a closed change is not.
		{name: "active", query: "active=true", want: rev(sent, merging, failed, []string{old})},
		{name: "active and a final step", query: "active=true&step=CLOSED", want: nil},
		{name: "not active", query: "active=false", want: closed},
		{name: "active not a bool", query: "active=yes", code: 400, err: `query parameter active: \"yes\" is not true or false`},
		{name: "an empty value filters nothing", query: "status=&project=grp/a", want: rev(sent)},
		{name: "unknown status", query: "status=DONE", code: 400, err: `query parameter status: \"DONE\" is not a status`},
		{name: "unknown step", query: "step=NOPE", code: 400, err: "query parameter step"},
		{name: "unknown parameter", query: "colour=red", code: 400, err: "query parameter colour: unknown; the filters are status, step"},
		{name: "bad time", query: "updated_after=yesterday", code: 400, err: "not an RFC 3339 time"},
		{name: "bad stuck", query: "stuck=maybe", code: 400, err: `\"maybe\" is not true or false`},
		{name: "limit too large", query: "limit=501", code: 400, err: "from 1 to 500"},
		{name: "limit zero", query: "limit=0", code: 400, err: "from 1 to 500"},
		{name: "a cursor this API did not give", query: "cursor=abc", code: 400, err: "not a cursor this API gave"},
	}
	for _, tc := range tests {
		code, body := s.call(t, http.MethodGet, "/api/v1/changes?"+tc.query, viewerToken, "")
		if tc.code == 0 {
			tc.code = 200
		}
		if code != tc.code {
			t.Errorf("%s: status %d %s, want %d", tc.name, code, body, tc.code)
			continue
		}
		if tc.code != 200 {
			if !strings.Contains(body, tc.err) {
				t.Errorf("%s: body %s does not say %q", tc.name, body, tc.err)
			}
			continue
		}
		var page ChangeListPage
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, c := range page.Changes {
			got = append(got, c.OperationID)
		}
		if !slices.Equal(got, tc.want) || page.NextCursor != "" {
			t.Errorf("%s: changes %v (next %q), want %v", tc.name, got, page.NextCursor, tc.want)
		}
	}
}

// TestListPages: limit pages the list; next_cursor, passed back as it is,
// gives the next page without repeats or gaps, and the last page has
// none. A change without a merge request gets the API's hint.
func TestListPages(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	ids := opsFixture(s, 5, "grp/a", rules.StatusCreateFailed, rules.CreateFailed)
	slices.Reverse(ids)
	var got []string
	q := url.Values{"limit": {"2"}}
	for range 5 {
		code, body := s.call(t, http.MethodGet, "/api/v1/changes?"+q.Encode(), viewerToken, "")
		var page ChangeListPage
		if code != 200 || json.Unmarshal([]byte(body), &page) != nil {
			t.Fatalf("page: %d %s", code, body)
		}
		for _, c := range page.Changes {
			got = append(got, c.OperationID)
			if !strings.Contains(c.Hint, externalURL+"/api/v1/changes/"+c.OperationID+"/retry") || c.MergeRequest != nil {
				t.Errorf("hint of %s without MR: %q", c.OperationID, c.Hint)
			}
		}
		if page.NextCursor == "" {
			break
		}
		q.Set("cursor", page.NextCursor)
	}
	if !slices.Equal(got, ids) {
		t.Errorf("paged %v, want %v", got, ids)
	}
}

// TestListFilterErrorsInFlagWords: changebot list reports a bad filter in
// its flags' words, the API in its parameters'.
func TestListFilterErrorsInFlagWords(t *testing.T) {
	t.Parallel()
	_, err := ParseListQuery(url.Values{"status": {"DONE"}}, time.Now())
	var fe *FilterError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T), want a *FilterError", err, err)
	}
	if !strings.HasPrefix(fe.Error(), "query parameter status: ") || !strings.HasPrefix(fe.FlagError(), "-status: unknown status DONE; one of ") {
		t.Errorf("Error %q, FlagError %q", fe.Error(), fe.FlagError())
	}
}
