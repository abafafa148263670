package gitlab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	gl "gitlab.com/gitlab-org/api/client-go"

	"changebot/internal/jsonbody"
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

// Headers that DecodeHook treats specially.
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
}

// noteBody is a Note Hook as the bot reads it, in one pass. It is local
// rather than client-go's MergeCommentEvent because client-go lacks the
// confidential and internal flags and its ParseWebhook rejects noteable
// types it does not know; the envelope fields stay lenient because notes
// on issues, commits and snippets are decoded too (and ignored).
type noteBody struct {
	hookEnvelope
	ObjectAttributes struct {
		ID           int64  `json:"id"`
		Note         string `json:"note"`
		Action       string `json:"action"`
		NoteableType string `json:"noteable_type"`
		NoteableID   int64  `json:"noteable_id"`
		System       bool   `json:"system"`
		AuthorID     int64  `json:"author_id"`
		Confidential *bool  `json:"confidential"`
		Internal     *bool  `json:"internal"`
	} `json:"object_attributes"`
	MergeRequest *struct {
		ID  int64 `json:"id"`
		IID int64 `json:"iid"`
	} `json:"merge_request"`
}

// DecodeHook decodes one webhook delivery, given its X-Gitlab-Event header
// and raw body, into a platform.HookEvent. It is the bot's only decoding path
// for GitLab webhooks: every fixture webhook-*.json decodes through it.
//
// Merge Request and Pipeline Hooks are read with client-go's webhook types
// (gitlab.ParseWebhook); Note Hooks ("Confidential Note Hook" included) with
// the local noteBody. Every other event, and any header it does not know,
// decodes to Kind HookEmoji, HookJob, HookPush or HookOther with the
// envelope (project, user) as far as the payload has it: not an error.
// "Service Hook" (GitLab 14.3 integrations) follows the body's object_kind.
// The body is parsed once (twice for a Service Hook).
//
// The error wraps platform.ErrMalformedHook when body is not a JSON object,
// when a field of a used event has the wrong JSON type (named by its JSON
// path and type, jsonbody.Describe: "object_attributes.iid must be an
// integer, not a string"), when object_kind is missing (for the used
// kinds) or contradicts the header, or when the id a used event is about (object_attributes.iid of a
// merge request, object_attributes.id of a pipeline or note) is missing
// ("object_attributes is missing" when the whole object is), or when the
// project (project.id) of such an event is missing. Its text says
// it once (platform.MalformedHook): `malformed "Merge Request Hook"
// payload: object_attributes.iid is missing`. Error texts never contain
// the body.
func DecodeHook(eventHeader string, body []byte) (platform.HookEvent, error) {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return platform.HookEvent{}, malformedHook(eventHeader, errors.New("body is not a JSON object"))
	}
	objectKind, checked := hookObjectKinds[eventHeader]
	kind := hookKinds[objectKind]
	if eventHeader == eventService {
		var env hookEnvelope
		if err := json.Unmarshal(body, &env); err != nil {
			return platform.HookEvent{}, malformedHook(eventHeader, jsonbody.Readable(err, body))
		}
		objectKind, checked = env.ObjectKind, true
		if kind = hookKinds[objectKind]; kind != platform.HookMergeRequest && kind != platform.HookPush {
			kind = platform.HookOther
		}
	}
	if kind == "" {
		kind = platform.HookOther
	}
	var ev platform.HookEvent
	var err error
	used := true // an event that can move a change
	switch kind {
	case platform.HookMergeRequest:
		ev, err = decodeMergeRequestHook(eventHeader, objectKind, body)
	case platform.HookPipeline:
		ev, err = decodePipelineHook(eventHeader, objectKind, body)
	case platform.HookNote:
		ev, err = decodeNoteHook(eventHeader, objectKind, body)
	default:
		ev, err = decodeOtherHook(kind, objectKind, checked, body)
		used = false
	}
	if err != nil {
		return platform.HookEvent{}, malformedHook(eventHeader, jsonbody.Readable(err, body))
	}
	if used && ev.ProjectID == 0 {
		// Every change is found by its project: a used event without one
		// could only be stored as project 0 and never move anything.
		return platform.HookEvent{}, malformedHook(eventHeader, errors.New("project.id is missing"))
	}
	return ev, nil
}

// contradiction reports an object_kind (got) that does not match the
// header, which wants want: missing, or another kind (not shown: the
// error never echoes the body).
func contradiction(got, want string) error {
	if got == "" {
		return fmt.Errorf("object_kind is missing, want %q", want)
	}
	return fmt.Errorf("object_kind contradicts the header, want %q", want)
}

// decodeMergeRequestHook reads a Merge Request Hook (fixtures
// webhook-merge_request-*.json).
func decodeMergeRequestHook(eventHeader, objectKind string, body []byte) (platform.HookEvent, error) {
	parsed, err := gl.ParseWebhook(gl.EventType(eventHeader), body)
	if err != nil {
		return platform.HookEvent{}, err
	}
	e, ok := parsed.(*gl.MergeEvent)
	if !ok {
		return platform.HookEvent{}, fmt.Errorf("decoded as %T, want a merge request event", parsed)
	}
	if e.ObjectKind != objectKind {
		return platform.HookEvent{}, contradiction(e.ObjectKind, objectKind)
	}
	oa := e.ObjectAttributes
	if oa.IID == 0 {
		return platform.HookEvent{}, missingID(body, "object_attributes.iid")
	}
	return platform.HookEvent{
		Kind:        platform.HookMergeRequest,
		ProjectID:   e.Project.ID,
		ProjectPath: e.Project.PathWithNamespace,
		User:        eventUser(e.User),
		MergeRequest: &platform.MergeRequestHook{
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
			Draft:               oa.Draft,
			DraftChanged:        e.Changes.Draft.Previous != e.Changes.Draft.Current,
			TargetChanged:       e.Changes.TargetBranch.Previous != e.Changes.TargetBranch.Current,
			Labels:              labelTitles(e.Labels),
			LabelsChanged:       labelsChanged(e.Changes.Labels),
			LabelsBefore:        labelTitles(e.Changes.Labels.Previous),
			ReviewersAdded:      reviewersAdded(e.Changes.Reviewers),
		},
	}, nil
}

// labelTitles are the titles of labels.
func labelTitles(labels []*gl.EventLabel) []string {
	var out []string
	for _, l := range labels {
		if l != nil {
			out = append(out, l.Title)
		}
	}
	return out
}

// labelsChanged reports whether changes.labels is present with another
// set of titles than before (fixture webhook-merge_request-open.json).
func labelsChanged(c gl.EventChangesLabels) bool {
	if c.Previous == nil && c.Current == nil {
		return false
	}
	before, after := labelTitles(c.Previous), labelTitles(c.Current)
	slices.Sort(before)
	slices.Sort(after)
	return !slices.Equal(before, after)
}

// reviewersAdded are the usernames in changes.reviewers.current that
// changes.reviewers.previous lacks.
func reviewersAdded(c gl.MergeEventChangesReviewers) []string {
	var out []string
	for _, r := range c.Current {
		if r != nil && !slices.ContainsFunc(c.Previous, func(p *gl.EventUser) bool { return p != nil && p.Username == r.Username }) {
			out = append(out, r.Username)
		}
	}
	return out
}

// decodePipelineHook reads a Pipeline Hook (fixture
// webhook-pipeline-mr-success.json); the merge_request block is absent or
// null for branch and tag pipelines.
func decodePipelineHook(eventHeader, objectKind string, body []byte) (platform.HookEvent, error) {
	parsed, err := gl.ParseWebhook(gl.EventType(eventHeader), body)
	if err != nil {
		return platform.HookEvent{}, err
	}
	e, ok := parsed.(*gl.PipelineEvent)
	if !ok {
		return platform.HookEvent{}, fmt.Errorf("decoded as %T, want a pipeline event", parsed)
	}
	if e.ObjectKind != objectKind {
		return platform.HookEvent{}, contradiction(e.ObjectKind, objectKind)
	}
	oa := e.ObjectAttributes
	if oa.ID == 0 {
		return platform.HookEvent{}, missingID(body, "object_attributes.id")
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
	if p.WebURL == "" && e.Project.WebURL != "" {
		p.WebURL = e.Project.WebURL + "/-/pipelines/" + strconv.FormatInt(p.ID, 10)
	}
	return platform.HookEvent{
		Kind:        platform.HookPipeline,
		ProjectID:   e.Project.ID,
		ProjectPath: e.Project.PathWithNamespace,
		User:        eventUser(e.User),
		Pipeline:    p,
	}, nil
}

// decodeNoteHook reads a Note Hook (fixture webhook-note-mr.json) on any
// noteable; MRIID and MRID are set only for a merge request.
func decodeNoteHook(eventHeader, objectKind string, body []byte) (platform.HookEvent, error) {
	var nb noteBody
	if err := json.Unmarshal(body, &nb); err != nil {
		return platform.HookEvent{}, err
	}
	if nb.ObjectKind != objectKind {
		return platform.HookEvent{}, contradiction(nb.ObjectKind, objectKind)
	}
	a := nb.ObjectAttributes
	if a.ID == 0 {
		return platform.HookEvent{}, missingID(body, "object_attributes.id")
	}
	project := envelopeProject(nb.hookEnvelope)
	user := envelopeUser(nb.User)
	n := &platform.NoteHook{
		ID:           a.ID,
		Body:         a.Note,
		Action:       a.Action,
		NoteableType: a.NoteableType,
		System:       a.System,
		Author:       user,
		AuthorID:     a.AuthorID,
		Confidential: eventHeader == eventConfidentialNote || nb.EventType == "confidential_note" ||
			(a.Confidential != nil && *a.Confidential) || (a.Internal != nil && *a.Internal),
	}
	if a.NoteableType == platform.NoteableMergeRequest {
		n.MRID = a.NoteableID
		if nb.MergeRequest != nil {
			n.MRIID = nb.MergeRequest.IID
			if nb.MergeRequest.ID != 0 {
				n.MRID = nb.MergeRequest.ID
			}
		}
	}
	return platform.HookEvent{
		Kind:        platform.HookNote,
		ProjectID:   project.ID,
		ProjectPath: project.PathWithNamespace,
		User:        user,
		Note:        n,
	}, nil
}

// decodeOtherHook reads the envelope of an event the bot does not use.
// When the header is known (checked), a present object_kind must match it.
func decodeOtherHook(kind, objectKind string, checked bool, body []byte) (platform.HookEvent, error) {
	var env hookEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return platform.HookEvent{}, err
	}
	if checked && env.ObjectKind != "" && env.ObjectKind != objectKind {
		return platform.HookEvent{}, contradiction(env.ObjectKind, objectKind)
	}
	project := envelopeProject(env)
	return platform.HookEvent{
		Kind:        kind,
		ProjectID:   project.ID,
		ProjectPath: project.PathWithNamespace,
		User:        envelopeUser(env.User),
	}, nil
}

// eventUser translates client-go's payload user.
func eventUser(u *gl.EventUser) platform.User {
	if u == nil {
		return platform.User{}
	}
	return platform.User{ID: u.ID, Username: u.Username}
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
// never a value of the body) with platform.ErrMalformedHook:
// `malformed "Merge Request Hook" payload: object_attributes is missing`.
func malformedHook(eventHeader string, err error) error {
	return platform.MalformedHook(quoteShort(eventHeader), err)
}

// missingID is the error of a used event without the id it is about
// (field, "object_attributes.iid"): "object_attributes is missing" when the
// body has no object_attributes object at all (or null), like GitHub's
// "pull_request is missing", else "<field> is missing". body is parsed
// again only on this error path.
func missingID(body []byte, field string) error {
	var probe struct {
		ObjectAttributes json.RawMessage `json:"object_attributes"`
	}
	if json.Unmarshal(body, &probe) == nil && (len(probe.ObjectAttributes) == 0 || string(probe.ObjectAttributes) == "null") {
		return errors.New("object_attributes is missing")
	}
	return errors.New(field + " is missing")
}

// quoteShort quotes s, cut to 40 bytes, for an error text.
func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strconv.Quote(s)
}
