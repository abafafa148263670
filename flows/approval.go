package flows

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"changebot/flows/rules"
	"changebot/store"
)

// requestApproval runs at APPROVAL_SENDING (or at CREATE_SUCCEEDED in the
// MR-first order, where it first moves to APPROVAL_SENDING).
func (e *Engine) requestApproval(ctx context.Context, op store.Operation) error {
	if rules.StepCode(op.Step) == rules.CreateSucceeded {
		_, err := e.Transition(ctx, op, rules.ApprovalSending, TransitionOpts{Source: "job:" + rules.KindRequestApproval})
		return err
	}
	if done, err := e.deferredChecks(ctx, op, "job:"+rules.KindRequestApproval); done {
		return err
	}
	if e.policyFor(op).Provider == rules.ProviderGitLab && op.MRIID > 0 {
		return e.requestGitLabApproval(ctx, op)
	}
	ext := map[string]any{}
	key := ""
	if op.MRIID > 0 {
		// MR-first order: the ticket carries the MR so the callback knows
		// which order to continue in, even after flow.approval_first flips,
		// and the head the approval is for.
		ext["mr_iid"] = op.MRIID
		ext["project_id"] = op.ProjectID
		ext["mr_web_url"] = op.MRWebURL
		ext["head_sha"] = op.HeadSHA
	}
	if supersedes(op) {
		// Asked again after an operator resumed a change a person had
		// stopped by closing its MR: a new ticket (another key), and the
		// old one's decisions no longer count (callbackMatches).
		ext["supersedes_ticket_id"] = op.TicketID
		key = op.ID + "/supersedes/" + op.TicketID
	}
	ticket, err := e.cfg.Approvals.RequestApproval(ctx, ApprovalRequest{
		OperationID: op.ID, SubjectID: op.SubjectID, TargetKey: op.TargetKey, Title: op.Title,
		RequestedBy: op.RequestedBy, CallbackURL: e.cfg.ExternalURL + "/callbacks/approval", Ext: ext,
		IdempotencyKey: key,
	})
	if err != nil {
		return fmt.Errorf("requesting approval: %w", err)
	}
	payload := map[string]any{"ticket_id": ticket.ID}
	if ticket.URL != "" {
		payload["ticket_url"] = ticket.URL // the status comment links it
	}
	_, err = e.Transition(ctx, op, rules.ApprovalSent, TransitionOpts{Source: "job:" + rules.KindRequestApproval,
		Payload: payload,
		Update:  func(o *store.Operation) { o.TicketID = ticket.ID }})
	if isConflict(err) {
		// The decision arrived before this write: it already moved the change.
		e.opLog(op).Info("approval decided before APPROVAL_SENT was written", "ticket_id", ticket.ID)
		return nil
	}
	return err
}

// AcceptApproval applies an approval decision (DESIGN §3 step 3). It is
// deduplicated on RequestID and accepted only while the operation owns its
// binding and awaits a decision; otherwise it answers IGNORED_STALE (or
// IGNORED_UNKNOWN for an unknown operation) and changes nothing but the
// request record. Approved continues with the MR (approval-first) or with
// handling it (MR-first, recognised by an MR iid in Ext or on the operation);
// rejected or withdrawn end the change as REJECTED.
func (e *Engine) AcceptApproval(ctx context.Context, cb rules.ApprovalCallback) (string, error) {
	switch _, err := e.st.CallbackResult(ctx, e.st.DB(), callbackKindApproval, cb.RequestID); {
	case err == nil:
		return rules.ResultDuplicate, nil
	case !errors.Is(err, store.ErrNotFound):
		return "", err
	}
	for range 3 {
		op, err := e.st.GetOperation(ctx, e.st.DB(), cb.OperationID)
		if errors.Is(err, store.ErrNotFound) {
			return e.recordCallback(ctx, cb, rules.ResultIgnoredUnknown)
		}
		if err != nil {
			return "", err
		}
		if !rules.AwaitingApproval(rules.StepCode(op.Step)) || !callbackMatches(op, cb) {
			return e.recordCallback(ctx, cb, rules.ResultIgnoredStale)
		}
		to := approvalTarget(op, cb)
		_, err = e.Transition(ctx, op, to, TransitionOpts{
			Actor: "approval:" + cb.Approver, Source: "callback:" + cb.RequestID, IgnoreVersion: true,
			Payload: map[string]any{"decision": cb.Decision, "ticket_id": cb.TicketID},
			Update: func(o *store.Operation) {
				if o.TicketID == "" || supersedes(*o) {
					o.TicketID = cb.TicketID // the decision came before APPROVAL_SENT was recorded
				}
				if to == rules.ApprovalRejected || to == rules.ApprovalWithdrawn {
					o.Detail = fmt.Sprintf("%s by %s", cb.Decision, cb.Approver)
				}
			},
			Guard: func(ctx context.Context, tx store.Tx, _ store.Operation, _ store.Binding) error {
				return e.st.InsertCallbackRequest(ctx, tx, cb.RequestID, callbackKindApproval, cb.OperationID, rules.ResultAccepted)
			},
		})
		switch {
		case err == nil:
			return rules.ResultAccepted, nil
		case errors.Is(err, store.ErrDuplicate):
			return rules.ResultDuplicate, nil
		case errors.Is(err, store.ErrBindingNotOwned):
			return e.recordCallback(ctx, cb, rules.ResultIgnoredStale)
		case errors.Is(err, store.ErrStepMismatch):
			continue // SENDING -> SENT raced us: read again and decide again
		default:
			return "", err
		}
	}
	return "", fmt.Errorf("accepting approval %s: operation kept moving", cb.RequestID)
}

// approvalTarget is where a decision moves the operation.
func approvalTarget(op store.Operation, cb rules.ApprovalCallback) rules.StepCode {
	switch cb.Decision {
	case rules.DecisionRejected:
		return rules.ApprovalRejected
	case rules.DecisionWithdrawn:
		return rules.ApprovalWithdrawn
	}
	if op.MRIID > 0 {
		return rules.HandleStarted // MR-first: the MR exists and passed its pipeline
	}
	return rules.CreateStarted
}

// callbackMatches reports whether a decision belongs to op as the bot knows
// it: the operation's own state decides the flow order, never the callback.
// A ticket id other than the one recorded (or none, once one is recorded), an MR iid in ext other than the
// operation's (or on an operation without an MR), or a decision for a change
// approved in GitLab is stale.
func callbackMatches(op store.Operation, cb rules.ApprovalCallback) bool {
	if op.TicketID == rules.GitLabTicket {
		return false
	}
	switch {
	case supersedes(op):
		// The ticket held is the one from before a close and /resume: its
		// decisions no longer count; another ticket is the new request's,
		// decided before APPROVAL_SENT was recorded.
		if cb.TicketID == "" || cb.TicketID == op.TicketID {
			return false
		}
	case op.TicketID != "" && cb.TicketID != op.TicketID:
		// Once the ticket is recorded a decision must name it: one without
		// a ticket_id could be a decision on a superseded ticket.
		return false
	}
	if iid := extMRIID(cb.Ext); iid != 0 && iid != op.MRIID {
		return false
	}
	return true
}

// supersedes reports whether op asks the external approval system again
// while it holds the ticket of an earlier request: an MR-first change at
// APPROVAL_SENDING with an external ticket got there only through an
// operator's /resume after a person closed its MR (Engine.resumeClosed),
// so that ticket is superseded by the request now being made.
func supersedes(op store.Operation) bool {
	return op.MRIID > 0 && op.Status == store.StatusApprovalSending && op.TicketID != "" && op.TicketID != rules.GitLabTicket
}

func extMRIID(ext map[string]any) int64 {
	switch v := ext["mr_iid"].(type) {
	case float64:
		return int64(v)
	case int64:
		return v
	case int:
		return int64(v)
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

func (e *Engine) recordCallback(ctx context.Context, cb rules.ApprovalCallback, result string) (string, error) {
	err := e.st.InsertCallbackRequest(ctx, e.st.DB(), cb.RequestID, callbackKindApproval, cb.OperationID, result)
	if errors.Is(err, store.ErrDuplicate) {
		return rules.ResultDuplicate, nil
	}
	if err != nil {
		return "", err
	}
	return result, nil
}
