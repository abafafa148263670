package github

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v93/github"

	"changebot/internal/jsonbody"
	"changebot/platform"
)

// Delivery headers GitHub sends with every webhook (docs.github.com
// "Webhook events and payloads", delivery headers; fixtures
// webhook-*.headers.json).
const (
	// HeaderEvent names the event, for example "pull_request".
	HeaderEvent = "X-GitHub-Event"
	// HeaderDelivery is the delivery's GUID. A redelivery keeps it, and
	// every hook subscribed to one event gets the same one: deduplicate on
	// it per endpoint.
	HeaderDelivery = "X-GitHub-Delivery"
	// HeaderSignature256 is "sha256=" + the lower-case hex HMAC-SHA256 of
	// the raw body keyed with the webhook secret.
	HeaderSignature256 = "X-Hub-Signature-256"
)

// Events DecodeHook reads (X-GitHub-Event values).
const (
	EventPullRequest       = "pull_request"
	EventPullRequestReview = "pull_request_review"
	EventIssueComment      = "issue_comment"
	EventCheckSuite        = "check_suite"
	EventCheckRun          = "check_run"
	EventStatus            = "status"
	EventWorkflowRun       = "workflow_run"
	EventPush              = "push"
	EventMergeGroup        = "merge_group"
)

// ErrBadSignature is wrapped by VerifySignature's error when the signature
// header is missing, malformed or does not match the body. The webhook
// endpoint answers 401 for it and stores nothing.
var ErrBadSignature = errors.New("bad webhook signature")

// VerifySignature checks header (the X-Hub-Signature-256 value,
// "sha256=<64 hex digits>") against the HMAC-SHA256 of the raw body bytes
// keyed with secret, comparing in constant time (hmac.Equal). It must run
// on the exact bytes received, before any parsing. An empty secret is an
// error: the endpoint's secret is mandatory. The error wraps
// ErrBadSignature and never contains the secret or the body
// (docs.github.com "Validating webhook deliveries"; fixtures
// webhook-*.headers.json verify with the secret their origin published).
func VerifySignature(secret, header string, body []byte) error {
	if secret == "" {
		return fmt.Errorf("verifying %s: %w: no webhook secret configured", HeaderSignature256, ErrBadSignature)
	}
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
	if !ok {
		if header == "" {
			return fmt.Errorf("verifying %s: %w: header missing", HeaderSignature256, ErrBadSignature)
		}
		return fmt.Errorf("verifying %s: %w: want the sha256= prefix", HeaderSignature256, ErrBadSignature)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("verifying %s: %w: not 64 hex digits", HeaderSignature256, ErrBadSignature)
	}
	if !hmac.Equal(got, Sign(secret, body)) {
		return fmt.Errorf("verifying %s: %w: does not match the body", HeaderSignature256, ErrBadSignature)
	}
	return nil
}

// Sign returns the raw HMAC-SHA256 of body keyed with secret; the header
// value is "sha256=" + hex.EncodeToString(Sign(secret, body)). githubfake
// signs its deliveries with it.
func Sign(secret string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return m.Sum(nil)
}

// SignatureHeader returns the X-Hub-Signature-256 value for body.
func SignatureHeader(secret string, body []byte) string {
	return "sha256=" + hex.EncodeToString(Sign(secret, body))
}

// DecodeHook decodes one webhook delivery, given its X-GitHub-Event header
// and raw body (verified first with VerifySignature), into the neutral
// platform.HookEvent that platform/gitlab's DecodeHook also produces, so
// one delivery router serves both. Events and what they become:
//
//   - pull_request: HookMergeRequest. Actions map onto GitLab's: opened
//     → open, reopened → reopen, closed with merged true → merge (GitHub
//     has no merged action), closed → close, every other action → update
//     (synchronize carries OldRev = before; ready_for_review and
//     converted_to_draft set DraftChanged; edited with changes.base sets
//     TargetChanged; dequeued sets QueueChanged). State is opened, closed or
//     merged; DetailedMergeStatus comes from mergeable_state
//     (MergeStatusOf).
//   - pull_request_review: submitted with state approved → HookMergeRequest
//     action "approved"; dismissed → "unapproved"; User is the reviewer.
//     Other reviews (commented, changes_requested, edited) → HookOther.
//   - issue_comment: created → HookNote action create, edited → update,
//     NoteableType MergeRequest with MRIID = issue.number when the issue
//     is a pull request (issue.pull_request present), else "Issue";
//     deleted → HookOther (a deleted comment runs nothing). MRID is 0:
//     the payload has the issue's id, not the pull request's.
//   - check_suite, check_run, status, workflow_run: HookPipeline with
//     Partial set and ID 0 (see platform.PipelineHook.Partial); MRIID is
//     the first of pull_requests[] (empty for forks, status events and
//     pushes to a branch); Ref is the head branch (for a status, the
//     repository's default branch when it is among branches[], else the
//     first); Status is mapped by checkRunStatus or commitStatus.
//   - push: HookPush with the envelope.
//   - merge_group: HookMergeRequest action "update" with QueueChanged for
//     the pull request its head_ref names
//     (refs/heads/gh-readonly-queue/<base>/pr-<number>-<sha>: IID, SHA,
//     TargetBranch); a head_ref not of that shape is HookOther.
//   - anything else (ping, installation, deployment_status, …): HookOther
//     with the envelope as far as the payload has it.
//
// ProjectID is repository.id, ProjectPath repository.full_name, User the
// sender (id, login). The error wraps platform.ErrMalformedHook when body
// is not a JSON object, a field of a used event has the wrong JSON type,
// (named by its JSON path and type: "pull_request.number must be an
// integer, not a string", jsonbody.Describe), or a field the event cannot
// be used without is missing: action (but for
// the CI events and push), repository.id, and the object the event is
// about with its number or id (pull_request.number, issue.number and
// comment.id of a created or edited comment, check_suite.id, check_run.id,
// workflow_run.id, a status's id). The error names every missing field by
// its JSON path ("check_run is missing", "issue and repository are
// missing"). An unused action (a deleted comment, a commented review)
// needs only action. Error texts never contain the body.
func DecodeHook(eventHeader string, body []byte) (platform.HookEvent, error) {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return platform.HookEvent{}, malformedHook(eventHeader, errors.New("body is not a JSON object"))
	}
	var ev platform.HookEvent
	var err error
	switch eventHeader {
	case EventPullRequest:
		ev, err = decodePullRequest(body)
	case EventPullRequestReview:
		ev, err = decodeReview(body)
	case EventIssueComment:
		ev, err = decodeIssueComment(body)
	case EventCheckSuite, EventCheckRun, EventStatus, EventWorkflowRun:
		ev, err = decodeCheck(eventHeader, body)
	case EventPush:
		ev, err = decodePush(body)
	case EventMergeGroup:
		ev, err = decodeMergeGroup(body)
	default:
		ev, err = decodeEnvelope(platform.HookOther, body)
	}
	if err != nil {
		return platform.HookEvent{}, malformedHook(eventHeader, jsonbody.Readable(err, body))
	}
	return ev, nil
}

// parse decodes body as event's go-github type T.
func parse[T any](event string, body []byte) (*T, error) {
	v, err := gh.ParseWebHook(event, body)
	if err != nil {
		return nil, err
	}
	e, ok := v.(*T)
	if !ok {
		return nil, fmt.Errorf("decoded as %T", v)
	}
	return e, nil
}

// envelope fills the repository and sender of an event.
func envelope(kind string, repo *gh.Repository, sender *gh.User) platform.HookEvent {
	return platform.HookEvent{
		Kind:        kind,
		ProjectID:   repo.GetID(),
		ProjectPath: repo.GetFullName(),
		User:        toUser(sender),
	}
}

// prState is a pull request's state in the platform's terms.
func prState(pr *gh.PullRequest) string {
	switch {
	case pr.GetMerged() || pr.MergedAt != nil:
		return platform.MRStateMerged
	case pr.GetState() == "closed":
		return platform.MRStateClosed
	}
	return platform.MRStateOpened
}

func decodePullRequest(body []byte) (platform.HookEvent, error) {
	e, err := parse[gh.PullRequestEvent](EventPullRequest, body)
	if err != nil {
		return platform.HookEvent{}, err
	}
	var m missing
	m.need(e.Action != nil, "action")
	m.object(e.PullRequest != nil, e.GetPullRequest().GetNumber() != 0, "pull_request", "number")
	m.object(e.Repo != nil, e.GetRepo().GetID() != 0, "repository", "id")
	if err := m.err(); err != nil {
		return platform.HookEvent{}, err
	}
	pr := e.GetPullRequest()
	h := prHook(pr)
	switch a := e.GetAction(); {
	case a == "opened":
		h.Action = "open"
	case a == "reopened":
		h.Action = "reopen"
	case a == "closed" && h.State == platform.MRStateMerged:
		h.Action = "merge"
	case a == "closed":
		h.Action = "close"
	default:
		h.Action = "update"
		if a == "synchronize" {
			h.OldRev = e.GetBefore()
		}
		h.DraftChanged = a == "ready_for_review" || a == "converted_to_draft"
		h.TargetChanged = a == "edited" && e.GetChanges().GetBase() != nil
		h.QueueChanged = a == "dequeued"
		labelChange(h, a, e.GetLabel().GetName())
		if a == "review_requested" && e.GetRequestedReviewer().GetLogin() != "" {
			h.ReviewersAdded = []string{e.GetRequestedReviewer().GetLogin()}
		}
	}
	ev := envelope(platform.HookMergeRequest, e.GetRepo(), e.GetSender())
	ev.MergeRequest = h
	return ev, nil
}

// labelChange records on h a pull_request "labeled" or "unlabeled" of
// label (docs.github.com "Webhook events and payloads", pull_request: the
// payload's label, and pull_request.labels as they are after it): the
// labels before are h.Labels without, or with, label.
func labelChange(h *platform.MergeRequestHook, action, label string) {
	if label == "" || (action != "labeled" && action != "unlabeled") {
		return
	}
	h.LabelsChanged = true
	for _, l := range h.Labels {
		if !strings.EqualFold(l, label) {
			h.LabelsBefore = append(h.LabelsBefore, l)
		}
	}
	if action == "unlabeled" {
		h.LabelsBefore = append(h.LabelsBefore, label)
	}
}

// prHook is the pull request part of a HookMergeRequest.
func prHook(pr *gh.PullRequest) *platform.MergeRequestHook {
	h := &platform.MergeRequestHook{
		ID:                  pr.GetID(),
		IID:                 int64(pr.GetNumber()),
		State:               prState(pr),
		SHA:                 pr.GetHead().GetSHA(),
		SourceBranch:        pr.GetHead().GetRef(),
		TargetBranch:        pr.GetBase().GetRef(),
		DetailedMergeStatus: MergeStatusOf(pr.Mergeable, pr.GetMergeableState(), nil),
		Title:               pr.GetTitle(),
		AuthorID:            pr.GetUser().GetID(),
		Draft:               pr.GetDraft(),
	}
	for _, l := range pr.Labels {
		h.Labels = append(h.Labels, l.GetName())
	}
	if h.State == platform.MRStateMerged {
		// merge_commit_sha of an open pull request is the test merge, not
		// a merge (fixture webhook-pull_request-closed-unmerged.json).
		h.MergeCommitSHA = pr.GetMergeCommitSHA()
	}
	return h
}

func decodeReview(body []byte) (platform.HookEvent, error) {
	e, err := parse[gh.PullRequestReviewEvent](EventPullRequestReview, body)
	if err != nil {
		return platform.HookEvent{}, err
	}
	var m missing
	m.need(e.Action != nil, "action")
	if err := m.err(); err != nil {
		return platform.HookEvent{}, err
	}
	action := ""
	switch {
	case e.GetAction() == "submitted" && strings.EqualFold(e.GetReview().GetState(), "approved"):
		action = "approved"
	case e.GetAction() == "dismissed":
		action = "unapproved"
	case e.GetAction() == "submitted" && e.Review == nil:
		m.need(false, "review")
	default:
		return envelope(platform.HookOther, e.GetRepo(), e.GetSender()), nil
	}
	m.object(e.PullRequest != nil, e.GetPullRequest().GetNumber() != 0, "pull_request", "number")
	m.object(e.Repo != nil, e.GetRepo().GetID() != 0, "repository", "id")
	if err := m.err(); err != nil {
		return platform.HookEvent{}, err
	}
	pr := e.GetPullRequest()
	ev := envelope(platform.HookMergeRequest, e.GetRepo(), e.GetSender())
	if u := e.GetReview().GetUser(); u.GetID() != 0 {
		ev.User = toUser(u)
	}
	h := prHook(pr)
	h.Action = action
	ev.MergeRequest = h
	return ev, nil
}

func decodeIssueComment(body []byte) (platform.HookEvent, error) {
	e, err := parse[gh.IssueCommentEvent](EventIssueComment, body)
	if err != nil {
		return platform.HookEvent{}, err
	}
	var m missing
	m.need(e.Action != nil, "action")
	action := ""
	switch e.GetAction() {
	case "created":
		action = platform.NoteActionCreate
	case "edited":
		action = platform.NoteActionUpdate
	default:
		if err := m.err(); err != nil {
			return platform.HookEvent{}, err
		}
		return envelope(platform.HookOther, e.GetRepo(), e.GetSender()), nil
	}
	m.object(e.Comment != nil, e.GetComment().GetID() != 0, "comment", "id")
	m.object(e.Issue != nil, e.GetIssue().GetNumber() != 0, "issue", "number")
	m.object(e.Repo != nil, e.GetRepo().GetID() != 0, "repository", "id")
	if err := m.err(); err != nil {
		return platform.HookEvent{}, err
	}
	c := e.GetComment()
	author := toUser(c.GetUser())
	n := &platform.NoteHook{
		ID:           c.GetID(),
		Body:         c.GetBody(),
		Action:       action,
		NoteableType: "Issue",
		Author:       author,
		AuthorID:     author.ID,
	}
	if e.Issue.IsPullRequest() {
		n.NoteableType = platform.NoteableMergeRequest
		n.MRIID = int64(e.GetIssue().GetNumber())
	}
	ev := envelope(platform.HookNote, e.GetRepo(), e.GetSender())
	// The comment's author, as GitLab's Note Hook "user" is also for edits.
	ev.User = author
	ev.Note = n
	return ev, nil
}

// checkFields are what the four CI events share.
type checkFields struct {
	name, ref, sha, status, url string
	prs                         []*gh.PullRequest
	repo                        *gh.Repository
	sender                      *gh.User
	id                          int64
}

func decodeCheck(event string, body []byte) (platform.HookEvent, error) {
	var f checkFields
	// present: the event's object (check_suite, check_run, workflow_run;
	// a status is its own object) is in the payload.
	present := true
	switch event {
	case EventCheckSuite:
		e, err := parse[gh.CheckSuiteEvent](event, body)
		if err != nil {
			return platform.HookEvent{}, err
		}
		s := e.GetCheckSuite()
		present = s != nil
		f = checkFields{repo: e.GetRepo(), sender: e.GetSender()}
		if s != nil {
			f.name, f.ref, f.sha = s.GetApp().GetSlug(), s.GetHeadBranch(), s.GetHeadSHA()
			f.status, f.prs, f.id = checkRunStatus(s.GetStatus(), s.GetConclusion()), s.PullRequests, s.GetID()
		}
	case EventCheckRun:
		e, err := parse[gh.CheckRunEvent](event, body)
		if err != nil {
			return platform.HookEvent{}, err
		}
		r := e.GetCheckRun()
		present = r != nil
		f = checkFields{repo: e.GetRepo(), sender: e.GetSender()}
		if r != nil {
			f.name, f.ref, f.sha = r.GetName(), r.GetCheckSuite().GetHeadBranch(), r.GetHeadSHA()
			f.status, f.url, f.prs, f.id = checkRunStatus(r.GetStatus(), r.GetConclusion()), r.GetHTMLURL(), r.PullRequests, r.GetID()
		}
	case EventWorkflowRun:
		e, err := parse[gh.WorkflowRunEvent](event, body)
		if err != nil {
			return platform.HookEvent{}, err
		}
		r := e.GetWorkflowRun()
		present = r != nil
		f = checkFields{repo: e.GetRepo(), sender: e.GetSender()}
		if r != nil {
			f.name, f.ref, f.sha = r.GetName(), r.GetHeadBranch(), r.GetHeadSHA()
			f.status, f.url, f.prs, f.id = checkRunStatus(r.GetStatus(), r.GetConclusion()), r.GetHTMLURL(), r.PullRequests, r.GetID()
		}
	case EventStatus:
		e, err := parse[gh.StatusEvent](event, body)
		if err != nil {
			return platform.HookEvent{}, err
		}
		f = checkFields{name: e.GetContext(), sha: e.GetSHA(), status: commitStatus(e.GetState()),
			url: e.GetTargetURL(), repo: e.GetRepo(), sender: e.GetSender(), id: e.GetID()}
		def := e.GetRepo().GetDefaultBranch()
		for i, b := range e.Branches {
			if i == 0 || b.GetName() == def {
				f.ref = b.GetName()
			}
		}
	}
	var m missing
	if event == EventStatus {
		m.need(f.id != 0, "id")
	} else {
		m.object(present, f.id != 0, event, "id")
	}
	m.object(f.repo != nil, f.repo.GetID() != 0, "repository", "id")
	if err := m.err(); err != nil {
		return platform.HookEvent{}, err
	}
	p := &platform.PipelineHook{
		Ref:     f.ref,
		SHA:     f.sha,
		Status:  f.status,
		Source:  event,
		WebURL:  f.url,
		Partial: true,
		Name:    f.name,
	}
	for _, pr := range f.prs {
		if pr.GetNumber() > 0 {
			p.MRIID = int64(pr.GetNumber())
			p.MRSourceBranch = pr.GetHead().GetRef()
			break
		}
	}
	ev := envelope(platform.HookPipeline, f.repo, f.sender)
	ev.Pipeline = p
	return ev, nil
}

// decodePush reads a push's envelope; the repository is required, as for
// the other events the bot stores.
func decodePush(body []byte) (platform.HookEvent, error) {
	e, err := parse[gh.PushEvent](EventPush, body)
	if err != nil {
		return platform.HookEvent{}, err
	}
	var m missing
	m.object(e.Repo != nil, e.GetRepo().GetID() != 0, "repository", "id")
	if err := m.err(); err != nil {
		return platform.HookEvent{}, err
	}
	ev := envelope(platform.HookPush, nil, e.GetSender())
	ev.ProjectID, ev.ProjectPath = e.GetRepo().GetID(), e.GetRepo().GetFullName()
	return ev, nil
}

// missing collects the JSON paths of the fields a payload lacks, in the
// order checked, so that one error names all of them.
type missing []string

// need records field when ok is false.
func (m *missing) need(ok bool, field string) {
	if !ok {
		*m = append(*m, field)
	}
}

// object records object when it is absent (or null), else object.key
// when the object lacks its number or id (keyOK false).
func (m *missing) object(present, keyOK bool, object, key string) {
	switch {
	case !present:
		*m = append(*m, object)
	case !keyOK:
		*m = append(*m, object+"."+key)
	}
}

// err is nil when nothing is missing, else "a is missing" or "a, b and c
// are missing".
func (m missing) err() error {
	switch len(m) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s is missing", m[0])
	}
	return fmt.Errorf("%s and %s are missing", strings.Join(m[:len(m)-1], ", "), m[len(m)-1])
}

// decodeEnvelope reads the repository and sender of an event the bot does
// not act on. Unreadable parts count as absent: a 4xx for an event the bot
// does not use would only make GitHub record failed deliveries.
func decodeEnvelope(kind string, body []byte) (platform.HookEvent, error) {
	var env struct {
		Repository json.RawMessage `json:"repository"`
		Sender     json.RawMessage `json:"sender"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return platform.HookEvent{}, err
	}
	var repo gh.Repository
	var sender gh.User
	if len(env.Repository) > 0 {
		_ = json.Unmarshal(env.Repository, &repo)
	}
	if len(env.Sender) > 0 {
		_ = json.Unmarshal(env.Sender, &sender)
	}
	return envelope(kind, &repo, &sender), nil
}

// malformedHook wraps err (a JSON error names a type or a position, never
// a value of the body) with platform.ErrMalformedHook: `malformed GitHub
// "check_run" payload: check_run is missing`.
func malformedHook(event string, err error) error {
	if len(event) > 40 {
		event = event[:40] + "…"
	}
	return platform.MalformedHook("GitHub "+strconv.Quote(event), err)
}

// queueRefPrefix starts the full ref of a merge group's temporary branch,
// refs/heads/gh-readonly-queue/<base>/pr-<number>-<head sha>
// (docs.github.com "Managing a merge queue").
const queueRefPrefix = "refs/heads/gh-readonly-queue/"

// parseQueueRef reads the base branch, pull request number and head sha
// from a merge group's head_ref; ok is false for any other ref.
func parseQueueRef(ref string) (base string, number int64, sha string, ok bool) {
	rest, found := strings.CutPrefix(ref, queueRefPrefix)
	i := strings.LastIndex(rest, "/pr-")
	if !found || i <= 0 {
		return "", 0, "", false
	}
	base = rest[:i]
	num, sha, found := strings.Cut(rest[i+len("/pr-"):], "-")
	n, err := strconv.ParseInt(num, 10, 64)
	if !found || err != nil || n <= 0 || sha == "" {
		return "", 0, "", false
	}
	return base, n, sha, true
}

// decodeMergeGroup reads a merge_group delivery as an "update" of the pull
// request its group tests (DecodeHook).
func decodeMergeGroup(body []byte) (platform.HookEvent, error) {
	e, err := parse[gh.MergeGroupEvent](EventMergeGroup, body)
	if err != nil {
		return platform.HookEvent{}, err
	}
	var m missing
	m.need(e.Action != nil, "action")
	m.object(e.MergeGroup != nil, e.GetMergeGroup().GetHeadRef() != "", "merge_group", "head_ref")
	m.object(e.Repo != nil, e.GetRepo().GetID() != 0, "repository", "id")
	if err := m.err(); err != nil {
		return platform.HookEvent{}, err
	}
	base, n, sha, ok := parseQueueRef(e.GetMergeGroup().GetHeadRef())
	if !ok {
		return envelope(platform.HookOther, e.GetRepo(), e.GetSender()), nil
	}
	ev := envelope(platform.HookMergeRequest, e.GetRepo(), e.GetSender())
	ev.MergeRequest = &platform.MergeRequestHook{Action: "update", IID: n, SHA: sha, TargetBranch: base,
		State: platform.MRStateOpened, QueueChanged: true}
	return ev, nil
}
