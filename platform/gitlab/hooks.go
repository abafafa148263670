package gitlab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	gl "gitlab.com/gitlab-org/api/client-go"

	"changebot/platform"
)

// hookObjectKinds maps an X-Gitlab-Event header to the object_kind GitLab
// sends with it (client-go testdata/webhooks, GITLAB-FACTS §1). A body whose
// object_kind is present and differs is malformed. Headers not listed here
// (Member, Subgroup and Project Hooks carry event_name instead, System Hook
// carries either, Service Hook follows its object_kind) are not checked.
var hookObjectKinds = map[string]string{
	"Merge Request Hook":         "merge_request",
	"Pipeline Hook":              "pipeline",
	"Note Hook":                  "note",
	"Confidential Note Hook":     "note",
	"Emoji Hook":                 "emoji",
	"Job Hook":                   "build",
	"Build Hook":                 "build",
	"Push Hook":                  "push",
	"Tag Push Hook":              "tag_push",
	"Issue Hook":                 "issue",
	"Confidential Issue Hook":    "issue",
	"Wiki Page Hook":             "wiki_page",
	"Deployment Hook":            "deployment",
	"Release Hook":               "release",
	"Feature Flag Hook":          "feature_flag",
	"Milestone Hook":             "milestone",
	"Resource Access Token Hook": "access_token",
	"Vulnerability Hook":         "vulnerability",
}

// hookKinds maps the object_kind of a checked event to its platform kind;
// anything else is platform.HookOther.
var hookKinds = map[string]string{
	"merge_request": platform.HookMergeRequest,
	"pipeline":      platform.HookPipeline,
	"note":          platform.HookNote,
	"emoji":         platform.HookEmoji,
	"build":         platform.HookJob,
	"push":          platform.HookPush,
}

// Events whose kind comes from the body's object_kind, not from the header.
const (
	// eventService is what GitLab 14.3 sent for integration-owned hooks
	// (client-go ParseWebhook, woodpecker fixtures); it carries push,
	// tag_push or merge_request payloads.
	eventService = "Service Hook"
	// eventConfidentialNote marks an internal note (GITLAB-FACTS §1.1).
	eventConfidentialNote = "Confidential Note Hook"
)

// hookEnvelope is what every webhook payload may carry. project and user
// are kept raw and read leniently: for events the bot does not use, an
// unexpected shape there must not turn a delivery into an error (a 4xx
// answer counts towards GitLab auto-disabling the hook, GITLAB-FACTS §1.2).
type hookEnvelope struct {
	ObjectKind string          `json:"object_kind"`
	EventType  string          `json:"event_type"`
	ProjectID  json.RawMessage `json:"project_id"`
	Project    json.RawMessage `json:"project"`
	User       json.RawMessage `json:"user"`
}

// hookProject is the part of payload "project" the bot reads.
type hookProject struct {
	ID                int64  `json:"id"`
	PathWithNamespace string `json:"path_with_namespace"`
	WebURL            string `json:"web_url"`
}

// noteExtra holds what client-go's note events lack (confidential and
// internal flags) and what a note on something else than a merge request
// needs, since client-go's ParseWebhook rejects unknown noteable types.
type noteExtra struct {
	ObjectAttributes struct {
		ID           int64  `json:"id"`
		Note         string `json:"note"`
		Action       string `json:"action"`
		NoteableType string `json:"noteable_type"`
		System       bool   `json:"system"`
		AuthorID     int64  `json:"author_id"`
		Confidential *bool  `json:"confidential"`
		Internal     *bool  `json:"internal"`
	} `json:"object_attributes"`
}

// DecodeHook decodes one webhook delivery, given its X-Gitlab-Event header
// and raw body, into a platform.HookEvent. It is the bot's only decoding path
// for GitLab webhooks: every fixture webhook-*.json decodes through it.
//
// Merge Request, Pipeline and Note Hooks ("Confidential Note Hook" included)
// are read with client-go's webhook types, plus small local structs for what
// client-go lacks. Every other event, and any header it does not know,
// decodes to Kind HookEmoji, HookJob, HookPush or HookOther with the
// envelope (project, user) as far as the payload has it: not an error.
//
// The error wraps platform.ErrMalformedHook when body is not a JSON object,
// when a field of a used event has the wrong JSON type, or when object_kind
// contradicts the header (missing counts as contradicting for the used
// kinds), or when the id a used event is about (object_attributes.iid of a
// merge request, object_attributes.id of a pipeline or note) is missing.
// Error texts never contain the body.
func DecodeHook(eventHeader string, body []byte) (platform.HookEvent, error) {
	var ev platform.HookEvent
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return ev, malformedHook(eventHeader, fmt.Errorf("body is not a JSON object"))
	}
	var env hookEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return ev, malformedHook(eventHeader, err)
	}
	ev.Kind = platform.HookOther
	objectKind, checked := hookObjectKinds[eventHeader]
	switch {
	case eventHeader == eventService:
		objectKind = env.ObjectKind
		if k := hookKinds[objectKind]; k == platform.HookMergeRequest || k == platform.HookPush {
			ev.Kind = k
		}
	case checked:
		ev.Kind = hookKinds[objectKind]
		if ev.Kind == "" {
			ev.Kind = platform.HookOther
		}
		used := ev.Kind == platform.HookMergeRequest || ev.Kind == platform.HookPipeline || ev.Kind == platform.HookNote
		if env.ObjectKind != objectKind && (used || env.ObjectKind != "") {
			return platform.HookEvent{}, malformedHook(eventHeader,
				fmt.Errorf("object_kind contradicts the header, want %q", objectKind))
		}
	}
	project := envelopeProject(env)
	ev.ProjectID, ev.ProjectPath = project.ID, project.PathWithNamespace
	ev.User = envelopeUser(env.User)

	var err error
	switch ev.Kind {
	case platform.HookMergeRequest:
		ev.MergeRequest, err = decodeMergeRequestHook(eventHeader, body)
	case platform.HookPipeline:
		ev.Pipeline, err = decodePipelineHook(eventHeader, body, project)
	case platform.HookNote:
		ev.Note, err = decodeNoteHook(eventHeader, env.EventType, body)
		if ev.Note != nil {
			ev.Note.Author = ev.User
		}
	}
	if err != nil {
		return platform.HookEvent{}, malformedHook(eventHeader, err)
	}
	return ev, nil
}

// decodeMergeRequestHook reads object_attributes of a Merge Request Hook
// (fixtures webhook-merge_request-*.json).
func decodeMergeRequestHook(eventHeader string, body []byte) (*platform.MergeRequestHook, error) {
	parsed, err := gl.ParseWebhook(gl.EventType(eventHeader), body)
	if err != nil {
		return nil, err
	}
	e, ok := parsed.(*gl.MergeEvent)
	if !ok {
		return nil, fmt.Errorf("decoded as %T, want a merge request event", parsed)
	}
	oa := e.ObjectAttributes
	if oa.IID == 0 {
		return nil, fmt.Errorf("object_attributes.iid is missing")
	}
	return &platform.MergeRequestHook{
		ID:                  oa.ID,
		IID:                 oa.IID,
		Action:              oa.Action,
		State:               oa.State,
		SHA:                 oa.LastCommit.ID,
		OldRev:              oa.OldRev,
		MergeCommitSHA:      oa.MergeCommitSHA,
		SourceBranch:        oa.SourceBranch,
		TargetBranch:        oa.TargetBranch,
		DetailedMergeStatus: oa.DetailedMergeStatus,
		Title:               oa.Title,
		AuthorID:            oa.AuthorID,
	}, nil
}

// decodePipelineHook reads a Pipeline Hook (fixture
// webhook-pipeline-mr-success.json); the merge_request block is absent or
// null for branch and tag pipelines.
func decodePipelineHook(eventHeader string, body []byte, project hookProject) (*platform.PipelineHook, error) {
	parsed, err := gl.ParseWebhook(gl.EventType(eventHeader), body)
	if err != nil {
		return nil, err
	}
	e, ok := parsed.(*gl.PipelineEvent)
	if !ok {
		return nil, fmt.Errorf("decoded as %T, want a pipeline event", parsed)
	}
	oa := e.ObjectAttributes
	if oa.ID == 0 {
		return nil, fmt.Errorf("object_attributes.id is missing")
	}
	p := &platform.PipelineHook{
		ID:             oa.ID,
		Ref:            oa.Ref,
		SHA:            oa.SHA,
		BeforeSHA:      oa.BeforeSHA,
		Status:         oa.Status,
		Source:         oa.Source,
		Tag:            oa.Tag,
		MRIID:          e.MergeRequest.IID,
		MRSourceBranch: e.MergeRequest.SourceBranch,
		WebURL:         oa.URL,
	}
	if p.WebURL == "" && project.WebURL != "" && p.ID != 0 {
		p.WebURL = project.WebURL + "/-/pipelines/" + strconv.FormatInt(p.ID, 10)
	}
	return p, nil
}

// decodeNoteHook reads a Note Hook (fixture webhook-note-mr.json). Notes on
// a merge request go through client-go's MergeCommentEvent; notes on issues,
// commits, snippets or anything newer only need what noteExtra holds, as
// the bot ignores them.
func decodeNoteHook(eventHeader, eventType string, body []byte) (*platform.NoteHook, error) {
	var x noteExtra
	if err := json.Unmarshal(body, &x); err != nil {
		return nil, err
	}
	xa := x.ObjectAttributes
	if xa.ID == 0 {
		return nil, fmt.Errorf("object_attributes.id is missing")
	}
	n := &platform.NoteHook{
		ID:           xa.ID,
		Body:         xa.Note,
		Action:       xa.Action,
		NoteableType: xa.NoteableType,
		System:       xa.System,
		AuthorID:     xa.AuthorID,
		Confidential: eventHeader == eventConfidentialNote || eventType == "confidential_note" ||
			(xa.Confidential != nil && *xa.Confidential) || (xa.Internal != nil && *xa.Internal),
	}
	if xa.NoteableType != platform.NoteableMergeRequest {
		return n, nil
	}
	// ParseWebhook would decode the body twice (once to dispatch on the
	// noteable type, checked above); the type is the same.
	var e gl.MergeCommentEvent
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, err
	}
	n.MRIID = e.MergeRequest.IID
	n.MRID = e.MergeRequest.ID
	if n.MRID == 0 {
		n.MRID = e.ObjectAttributes.NoteableID
	}
	return n, nil
}

// envelopeProject reads payload "project", falling back to the top-level
// project_id (Job Hook, fixture webhook-job.json, has no project.id).
// Unreadable values count as absent.
func envelopeProject(env hookEnvelope) hookProject {
	var p hookProject
	if len(env.Project) > 0 {
		_ = json.Unmarshal(env.Project, &p)
	}
	if p.ID == 0 && len(env.ProjectID) > 0 {
		var id int64
		if json.Unmarshal(env.ProjectID, &id) == nil {
			p.ID = id
		}
	}
	return p
}

// envelopeUser reads payload "user"; unreadable counts as absent.
func envelopeUser(raw json.RawMessage) platform.User {
	var u struct {
		ID       int64  `json:"id"`
		Username string `json:"username"`
	}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &u)
	}
	return platform.User{ID: u.ID, Username: u.Username}
}

// malformedHook wraps err (a JSON error, which names a type or a position,
// never a value of the body) with platform.ErrMalformedHook.
func malformedHook(eventHeader string, err error) error {
	return fmt.Errorf("decoding %s: %w: %w", quoteShort(eventHeader), platform.ErrMalformedHook, err)
}

// quoteShort quotes s, cut to 40 bytes, for an error text.
func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strconv.Quote(s)
}
