package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go"

	"changebot/platform"
)

// maxNotePages bounds FindNote's scan (100 notes a page).
const maxNotePages = 100

// CreateNote comments on merge request !iid as the robot (POST
// /projects/:id/merge_requests/:iid/notes, 201; doc/api/notes.md; fixture
// api-mr-note-get.json). A body made only of quick actions is executed and
// answered 202 without a note (GITLAB-FACTS.md §2.9): that is reported as an
// error, since the bot's comments must persist. GitLab.com allows 60 note
// creations per minute.
func (c *Client) CreateNote(ctx context.Context, projectID, iid int64, body string) (platform.Note, error) {
	n, resp, err := callResp(ctx, c, epNoteCreate, func(o gl.RequestOptionFunc) (*gl.Note, *gl.Response, error) {
		return c.robot.Notes.CreateMergeRequestNote(projectID, iid, &gl.CreateMergeRequestNoteOptions{Body: gl.Ptr(body)}, o)
	})
	if err != nil {
		return platform.Note{}, fmt.Errorf("commenting on merge request !%d of project %d: %w", iid, projectID, err)
	}
	if (resp != nil && resp.StatusCode == http.StatusAccepted) || n == nil || n.ID == 0 {
		return platform.Note{}, fmt.Errorf("commenting on merge request !%d of project %d: gitlab ran the body as quick actions and kept no note", iid, projectID)
	}
	return toNote(n), nil
}

// UpdateNote replaces the body of note noteID on merge request !iid (PUT
// /projects/:id/merge_requests/:iid/notes/:note_id, doc/api/notes.md). A
// deleted note matches platform.ErrNotFound: create a new one.
func (c *Client) UpdateNote(ctx context.Context, projectID, iid, noteID int64, body string) (platform.Note, error) {
	n, err := call(ctx, c, epNoteUpdate, func(o gl.RequestOptionFunc) (*gl.Note, *gl.Response, error) {
		return c.robot.Notes.UpdateMergeRequestNote(projectID, iid, noteID, &gl.UpdateMergeRequestNoteOptions{Body: gl.Ptr(body)}, o)
	})
	if err != nil {
		return platform.Note{}, fmt.Errorf("updating note %d on merge request !%d of project %d: %w", noteID, iid, projectID, err)
	}
	return toNote(n), nil
}

// Note reads note noteID on merge request !iid (GET
// /projects/:id/merge_requests/:iid/notes/:note_id, doc/api/notes.md;
// fixture api-mr-note-get.json). A deleted note matches platform.ErrNotFound.
func (c *Client) Note(ctx context.Context, projectID, iid, noteID int64) (platform.Note, error) {
	n, err := call(ctx, c, epNoteGet, func(o gl.RequestOptionFunc) (*gl.Note, *gl.Response, error) {
		return c.robot.Notes.GetMergeRequestNote(projectID, iid, noteID, o)
	})
	if err != nil {
		return platform.Note{}, fmt.Errorf("reading note %d on merge request !%d of project %d: %w", noteID, iid, projectID, err)
	}
	return toNote(n), nil
}

// FindNote returns the oldest non-system note on merge request !iid authored
// by the robot (CurrentUser) whose body contains marker, scanning every page
// oldest first with per_page=100 (GET .../notes?sort=asc&order_by=created_at,
// doc/api/notes.md; GitLab's default order is newest first). It stops at the
// first match. No such note matches platform.ErrNotFound. This is how the
// status comment is found again (DESIGN.md §7).
func (c *Client) FindNote(ctx context.Context, projectID, iid int64, marker string) (platform.Note, error) {
	if marker == "" {
		return platform.Note{}, errors.New("finding note: marker is empty")
	}
	robot, err := c.CurrentUser(ctx)
	if err != nil {
		return platform.Note{}, fmt.Errorf("finding note on merge request !%d of project %d: %w", iid, projectID, err)
	}
	opt := &gl.ListMergeRequestNotesOptions{
		ListOptions: gl.ListOptions{PerPage: pageSize, Page: 1},
		OrderBy:     gl.Ptr("created_at"),
		Sort:        gl.Ptr("asc"),
	}
	for range maxNotePages {
		notes, resp, err := callResp(ctx, c, epNotesList, func(o gl.RequestOptionFunc) ([]*gl.Note, *gl.Response, error) {
			return c.robot.Notes.ListMergeRequestNotes(projectID, iid, opt, o)
		})
		if err != nil {
			return platform.Note{}, fmt.Errorf("finding note on merge request !%d of project %d: %w", iid, projectID, err)
		}
		for _, n := range notes {
			if n != nil && !n.System && n.Author.ID == robot.ID && strings.Contains(n.Body, marker) {
				return toNote(n), nil
			}
		}
		if resp == nil || resp.NextPage == 0 || resp.NextPage <= opt.Page {
			break
		}
		opt.Page = resp.NextPage
	}
	return platform.Note{}, fmt.Errorf("finding note on merge request !%d of project %d: %w", iid, projectID, platform.ErrNotFound)
}
