package flows

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

// ApprovalPolicy is a project's approval mode (issue 3): the external
// approval system, or approvals given in GitLab by configured approvers.
type ApprovalPolicy struct {
	// Provider is ProviderExternal or ProviderGitLab.
	Provider string
	// Approvers are GitLab usernames allowed to approve.
	Approvers []string
	// ApproverGroups are GitLab groups (full path or id) whose members,
	// inherited membership included, may approve.
	ApproverGroups []string
	// MinAccess, when above 0, also makes every project member with at
	// least this access level an approver (30 Developer, 40 Maintainer).
	MinAccess int
	// Required is how many distinct approvers must approve; at least 1.
	Required int
}

// policyFor is the approval policy of op: its project's, with the values
// of its branch's `.changebot.yml` the server allows laid over it.
func (e *Engine) policyFor(op store.Operation) ApprovalPolicy {
	p := e.applyApprovalPolicy(op, e.policy(op.Project))
	if p.Required < 1 {
		p.Required = 1
	}
	return p
}

// policy is the approval policy of project from the server's settings
// (EngineConfig.ApprovalPolicyFunc); see policyFor.
func (e *Engine) policy(project string) ApprovalPolicy {
	p := ApprovalPolicy{Provider: rules.ProviderExternal, Required: 1}
	if e.cfg.ApprovalPolicyFunc != nil {
		p = e.cfg.ApprovalPolicyFunc(project)
	}
	if p.Required < 1 {
		p.Required = 1
	}
	return p
}

// requestGitLabApproval is request approval in the in-GitLab mode: nothing
// to call, the change now waits for approvers on the MR. Approvals given
// before the change started waiting (while its pipeline ran, or while it
// was APPROVAL_SENDING) were recorded and are counted once SENT is written.
func (e *Engine) requestGitLabApproval(ctx context.Context, op store.Operation) error {
	required := e.policyFor(op).Required
	_, err := e.Transition(ctx, op, rules.ApprovalSent, TransitionOpts{Source: "job:" + rules.KindRequestApproval,
		Payload: map[string]any{"provider": rules.ProviderGitLab, "required": required},
		Update:  func(o *store.Operation) { o.TicketID = rules.GitLabTicket }})
	if isConflict(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return e.advanceIfApproved(ctx, op.ID, ActorBot, "job:"+rules.KindRequestApproval)
}

// advanceIfApproved counts operation id's GitLab approvals (the requester's
// never count) and moves it on when it waits for them at APPROVAL_SENT and
// has enough. It reads the operation afresh: both the job that writes SENT
// and every recorded approval come here after their write, so whichever
// commits last sees the other's, and an approval recorded while the change
// was still APPROVAL_SENDING is never left uncounted.
func (e *Engine) advanceIfApproved(ctx context.Context, id, actor, source string) error {
	op, err := e.st.GetOperation(ctx, e.st.DB(), id)
	if err != nil {
		return err
	}
	if op.TicketID != rules.GitLabTicket || rules.StepCode(op.Step) != rules.ApprovalSent {
		return nil
	}
	count, err := e.st.CountGitLabApprovals(ctx, e.st.DB(), op.ID)
	if err != nil || count < e.policyFor(op).Required {
		return err
	}
	_, err = e.Transition(ctx, op, rules.HandleStarted, TransitionOpts{Actor: actor, Source: source, IgnoreVersion: true,
		Payload: map[string]any{"decision": "approved", "provider": rules.ProviderGitLab, "approvals": count}})
	if isConflict(err) || errors.Is(err, rules.ErrIllegalTransition) {
		return nil // another approval or the job moved it first
	}
	return err
}

// earlyApproval reports whether op may record (not yet act on) a GitLab
// approval: its MR exists but it does not wait for approvals yet.
func earlyApproval(op store.Operation) bool {
	switch op.Status {
	case store.StatusMRCreating, store.StatusMRCreated, store.StatusApprovalSending:
		return op.MRIID > 0
	}
	return false
}

// IsApprover reports whether user may approve op in the in-GitLab mode.
// The robot, the reviewer robots and the change's requester never count as
// approvers (nobody approves their own change).
func (e *Engine) IsApprover(ctx context.Context, op store.Operation, user platform.User) (bool, error) {
	p := e.policyFor(op)
	if p.Provider != rules.ProviderGitLab || user.Username == op.RequestedBy {
		return false, nil
	}
	if robot, err := e.isRobot(ctx, user); err != nil || robot {
		return false, err
	}
	if slices.Contains(p.Approvers, user.Username) {
		return true, nil
	}
	for _, g := range p.ApproverGroups {
		if user.ID == 0 {
			break
		}
		a, err := e.gl.GroupMemberAccess(ctx, g, user.ID)
		if err != nil {
			return false, err
		}
		if a > 0 {
			return true, nil
		}
	}
	if p.MinAccess > 0 && user.ID > 0 {
		a, err := e.gl.MemberAccess(ctx, op.ProjectID, user.ID)
		if err != nil {
			return false, err
		}
		return a >= p.MinAccess, nil
	}
	return false, nil
}

func (e *Engine) isRobot(ctx context.Context, u platform.User) (bool, error) {
	robot, err := e.gl.CurrentUser(ctx)
	if err != nil {
		return false, err
	}
	if u.ID == robot.ID || u.Username == robot.Username {
		return true, nil
	}
	for i := range e.gl.ReviewerCount() {
		r, err := e.gl.Reviewer(ctx, i)
		if err != nil {
			return false, err
		}
		if u.ID == r.ID || u.Username == r.Username {
			return true, nil
		}
	}
	return false, nil
}

// DecideInGitLab records an approver's decision given in GitLab, from an MR
// Hook (approved/approval, unapproved/unapproval) or an /approve, /reject
// command. One approval per approver per change, however it arrived; the
// change moves on once Required distinct approvers approved (counted again
// after the approval is recorded, on the change as it is then: op may have
// been read before it reached APPROVAL_SENT). It returns a
// *NotApplicableError when the change does not wait for a GitLab decision,
// user requested it, or user is not an approver.
func (e *Engine) DecideInGitLab(ctx context.Context, op store.Operation, user platform.User, decision, source string) error {
	awaiting := op.TicketID == rules.GitLabTicket && rules.AwaitingApproval(rules.StepCode(op.Step))
	early := e.policyFor(op).Provider == rules.ProviderGitLab && earlyApproval(op) && decision != rules.GitLabReject
	if !awaiting && !early {
		return notApplicable("this change does not wait for an approval in %s (it is %s)", rules.WordsOf(op.Platform).Platform, op.Status)
	}
	if user.Username == op.RequestedBy {
		return notApplicable("%s requested this change and cannot decide on it", user.Username)
	}
	ok, err := e.IsApprover(ctx, op, user)
	if err != nil {
		return err
	}
	if !ok {
		return notApplicable("%s is not an approver of this project", user.Username)
	}
	db := e.st.DB()
	switch decision {
	case rules.GitLabUnapprove:
		_, err := e.st.RemoveGitLabApproval(ctx, db, op.ID, user.Username)
		return err
	case rules.GitLabReject:
		_, err := e.Transition(ctx, op, rules.ApprovalRejected, TransitionOpts{Actor: user.Username, Source: source,
			IgnoreVersion: true, Payload: map[string]any{"decision": "rejected", "provider": rules.ProviderGitLab},
			Update: func(o *store.Operation) { o.Detail = "rejected by " + user.Username }})
		if isConflict(err) {
			return nil
		}
		return err
	case rules.GitLabApprove:
	default:
		return fmt.Errorf("unknown decision %q", decision)
	}
	added, count, err := e.st.AddGitLabApproval(ctx, db, op.ID, user.Username, source)
	if err != nil {
		return err
	}
	if !added {
		return nil // this approver was already counted
	}
	required := e.policyFor(op).Required
	if _, err := e.st.AppendEvent(ctx, op.ID, store.EventParams{Type: EventApproval, Actor: user.Username, Source: source,
		Payload: map[string]any{"approvals": count, "required": required}}); err != nil {
		return err
	}
	return e.advanceIfApproved(ctx, op.ID, user.Username, source)
}

// EventApproval records one approver's approval in the in-GitLab mode.
const EventApproval = "approval"

// applyApprovalHook applies an MR Hook approval action to the MR's change.
func (e *Engine) applyApprovalHook(ctx context.Context, op store.Operation, ev platform.HookEvent, source string) (string, error) {
	decision := rules.GitLabApprove
	if ev.MergeRequest.Action == "unapproved" || ev.MergeRequest.Action == "unapproval" {
		decision = rules.GitLabUnapprove
	}
	err := e.DecideInGitLab(ctx, op, ev.User, decision, source)
	if errors.Is(err, rules.ErrNotApplicable) {
		return OutcomeNoChange, nil
	}
	if err != nil {
		return "", err
	}
	return OutcomeApplied, nil
}
