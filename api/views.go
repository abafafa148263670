package api

// ChangeView is the body of GET /api/v1/changes/{id} (openapi.json
// Change): the change's state, its step with the hint a person reads, its
// merge request once opened, and its events.
type ChangeView struct {
	OperationID   string   `json:"operation_id"`
	SubjectID     string   `json:"subject_id"`
	TargetKey     string   `json:"target_key"`
	Status        string   `json:"status"`
	Step          StepView `json:"step"`
	Hint          string   `json:"hint"`
	Terminal      bool     `json:"terminal"`
	Detail        string   `json:"detail,omitempty"`
	MergeRequest  *MRView  `json:"merge_request"`
	Events        []Event  `json:"events"`
	ApprovalFirst bool     `json:"approval_first"`
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
