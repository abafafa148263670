package gitlab

import (
	gl "gitlab.com/gitlab-org/api/client-go"

	"changebot/platform"
)

// This file translates client-go types into platform types. A nil input
// yields the zero value, so a "null" body never panics.

func toBranch(b *gl.Branch) platform.Branch {
	if b == nil {
		return platform.Branch{}
	}
	out := platform.Branch{Name: b.Name}
	if b.Commit != nil {
		out.CommitSHA = b.Commit.ID
	}
	return out
}

func toCommit(c *gl.Commit) platform.Commit {
	if c == nil {
		return platform.Commit{}
	}
	return platform.Commit{SHA: c.ID, ParentIDs: c.ParentIDs, Title: c.Title, Message: c.Message}
}

func toUser(u *gl.BasicUser) platform.User {
	if u == nil {
		return platform.User{}
	}
	return platform.User{ID: u.ID, Username: u.Username}
}

func toPipelineInfo(p *gl.PipelineInfo) platform.Pipeline {
	if p == nil {
		return platform.Pipeline{}
	}
	return platform.Pipeline{ID: p.ID, SHA: p.SHA, Ref: p.Ref, Status: p.Status, WebURL: p.WebURL, Source: p.Source}
}

func toPipeline(p *gl.Pipeline) *platform.Pipeline {
	if p == nil {
		return nil
	}
	return &platform.Pipeline{ID: p.ID, SHA: p.SHA, Ref: p.Ref, Status: p.Status, WebURL: p.WebURL, Source: string(p.Source)}
}

// toMergeRequest translates GET /projects/:id/merge_requests/:iid (fixtures
// api-mr-get.json, api-mr-get-doc.json). HeadPipeline comes from
// head_pipeline, which GitLab prefers over the older pipeline field; for a
// merged-results pipeline its sha is the merge ref's, not the MR's.
func toMergeRequest(m *gl.MergeRequest) platform.MergeRequest {
	if m == nil {
		return platform.MergeRequest{}
	}
	out := toBasicMergeRequest(&m.BasicMergeRequest)
	out.MergeError = m.MergeError
	out.RebaseInProgress = m.RebaseInProgress
	out.HeadPipeline = toPipeline(m.HeadPipeline)
	return out
}

func toBasicMergeRequest(m *gl.BasicMergeRequest) platform.MergeRequest {
	if m == nil {
		return platform.MergeRequest{}
	}
	return platform.MergeRequest{
		ID:                  m.ID,
		IID:                 m.IID,
		ProjectID:           m.ProjectID,
		Title:               m.Title,
		SourceBranch:        m.SourceBranch,
		TargetBranch:        m.TargetBranch,
		State:               m.State,
		SHA:                 m.SHA,
		MergeCommitSHA:      m.MergeCommitSHA,
		SquashCommitSHA:     m.SquashCommitSHA,
		DetailedMergeStatus: m.DetailedMergeStatus,
		HasConflicts:        m.HasConflicts,
		Squash:              m.Squash,
		WebURL:              m.WebURL,
		Author:              toUser(m.Author),
		MergedBy:            toUser(m.MergeUser),
		ClosedBy:            toUser(m.ClosedBy),
	}
}

func toNote(n *gl.Note) platform.Note {
	if n == nil {
		return platform.Note{}
	}
	return platform.Note{
		ID:     n.ID,
		Body:   n.Body,
		Author: platform.User{ID: n.Author.ID, Username: n.Author.Username},
		System: n.System,
	}
}
