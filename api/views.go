package api

import "time"

// ChangeView is the body of GET /api/v1/changes/{id} (openapi.json
// Change): every field of the list's item (ChangeListItem: the change's
// state, its step with the hint a person reads, its merge request once
// opened, title, project, who asked and when), and besides them the
// detail, when the current step started, the files and the events.
type ChangeView struct {
	ChangeListItem
	Detail        string    `json:"detail,omitempty"`
	StepStartedAt time.Time `json:"step_started_at"`
	// Files are the submitted files, content only with ?include=content.
	Files         []FileView `json:"files"`
	Events        []Event    `json:"events"`
	ApprovalFirst bool       `json:"approval_first"`
}

// FileView is one file of a change (FileViews): Action is create, update,
// delete or create_or_update (FileCreateOrUpdate), Size the content's length in bytes, SHA256 its hex digest;
// Content is nil unless asked for.
type FileView struct {
	Path    string  `json:"path"`
	Action  string  `json:"action"`
	Size    int     `json:"size"`
	SHA256  string  `json:"sha256"`
	Content *string `json:"content,omitempty"`
}

// StepView is a step as the API shows it: its code and name (README state
// table).
type StepView struct {
	Code int    `json:"code"`
	Name string `json:"name"`
}

// MRView is a change's merge request (pull request on GitHub) as the API
// shows it.
type MRView struct {
	ProjectID int64  `json:"project_id"`
	IID       int64  `json:"iid"`
	WebURL    string `json:"web_url"`
}
