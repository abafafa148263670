package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"changebot/flows/rules"
	"changebot/internal/jsonbody"
	"changebot/internal/textcheck"
)

// HeaderSignature carries the HMAC of a callback's timestamp and raw body:
// "sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>" (issue 2,
// point 7; the timestamp since issue 21.11), as Slack and Stripe sign
// theirs.
const HeaderSignature = "X-Changebot-Signature"

// HeaderTimestamp carries when the callback was signed, in Unix seconds
// (decimal). It is part of the signed text, and a callback signed more than
// CallbackTolerance away from the bot's clock is refused: a captured
// callback cannot be replayed once retention has deleted its dedupe row.
const HeaderTimestamp = "X-Changebot-Timestamp"

// CallbackTolerance is how far a callback's HeaderTimestamp may be from the
// bot's clock, either way (clock skew and transit). A sender re-signs each
// send, so a retried callback carries a fresh timestamp.
const CallbackTolerance = 5 * time.Minute

const signaturePrefix = "sha256="

// maxRequestIDLen bounds a callback's request_id (it is a unique key).
const maxRequestIDLen = 200

// ApprovalCallback is the approval system's decision, POST
// /callbacks/approval {request_id, operation_id, ticket_id, decision,
// approver, ext}. It is flows' type, so that flows' engine is an
// ApprovalAcceptor as it is.
type ApprovalCallback = rules.ApprovalCallback

// DeployCallback is a deploy system's "this merge is applied", POST
// /callbacks/deploy {request_id, project_id, mr_iid, merge_commit_sha,
// status}. It is flows' type, so that flows' engine is a DeployAcceptor.
type DeployCallback = rules.DeployCallback

// ApprovalAcceptor applies an approval decision (flows' engine). It
// deduplicates on RequestID and answers rules.ResultAccepted,
// ResultDuplicate, ResultIgnoredStale or ResultIgnoredUnknown; an error
// means nothing was recorded and the sender should try again.
type ApprovalAcceptor interface {
	AcceptApproval(ctx context.Context, cb ApprovalCallback) (result string, err error)
}

// DeployAcceptor applies a deploy callback (flows' engine), with the same
// results as ApprovalAcceptor.
type DeployAcceptor interface {
	AcceptDeploy(ctx context.Context, cb DeployCallback) (result string, err error)
}

// Decisions an approval callback may carry.
var decisions = []string{rules.DecisionApproved, rules.DecisionRejected, rules.DecisionWithdrawn}

// Deploy statuses a deploy callback may carry: success and applied mean
// the merge is live; failed is written on a merged change (its detail and
// an event, answered FAILED_RECORDED) and moves nothing.
const (
	DeployStatusSuccess = "success"
	DeployStatusApplied = "applied"
	DeployStatusFailed  = "failed"
)

var deployStatuses = []string{DeployStatusSuccess, DeployStatusApplied, DeployStatusFailed}

// acceptorResults are the results counted under their own label value.
var acceptorResults = []string{rules.ResultAccepted, rules.ResultDuplicate, rules.ResultIgnoredStale, rules.ResultIgnoredUnknown, rules.ResultFailedRecorded}

// CallbackConfig configures NewApprovalCallbackHandler and
// NewDeployCallbackHandler.
type CallbackConfig struct {
	// Secret is the shared HMAC key of X-Changebot-Signature. Required.
	Secret string
	// MaxBodyBytes bounds a callback; zero means DefaultCallbackMaxBodyBytes.
	MaxBodyBytes int64
	// Approvals applies approval callbacks; required by
	// NewApprovalCallbackHandler.
	Approvals ApprovalAcceptor
	// Deploys applies deploy callbacks; required by NewDeployCallbackHandler.
	Deploys DeployAcceptor
	// Timeout bounds the acceptor call; zero means DefaultStoreTimeout.
	Timeout time.Duration
	// Logger receives one record per callback; nil discards.
	Logger *slog.Logger
	// Metrics counts callbacks; nil counts into unregistered metrics.
	Metrics *Metrics
	// OnBadSignature, when set, is called once for each callback refused
	// (401) whose X-Changebot-Signature was well formed ("sha256=" and the
	// hex of a SHA-256 HMAC) but did not verify: a sender signing with
	// another secret. A request without the header or with a malformed one
	// (a scanner, a stray POST) does not call it.
	OnBadSignature func()
	// NowFunc is the clock HeaderTimestamp is checked against; nil means
	// time.Now.
	NowFunc func() time.Time
}

// Sign returns the X-Changebot-Signature value of body signed at unix
// (Unix seconds, the HeaderTimestamp value):
// "sha256=" + hex(HMAC-SHA256(secret, "<unix>." + body)).
func Sign(secret string, unix int64, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac([]byte(secret), unix, body))
}

// SignRequest sets HeaderTimestamp to at and HeaderSignature to the
// signature of body at that time. The demo's stand-in approval system and
// tests sign with it; a sender signs each send anew.
func SignRequest(r *http.Request, secret string, at time.Time, body []byte) {
	r.Header.Set(HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	r.Header.Set(HeaderSignature, Sign(secret, at.Unix(), body))
}

// mac is HMAC-SHA256(secret, "<unix>." + body).
func mac(secret []byte, unix int64, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(strconv.AppendInt(nil, unix, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// NewApprovalCallbackHandler returns the handler of POST /callbacks/approval.
// It checks, in order: method POST (405); body size (413); the signature
// over the raw body with hmac.Equal (401 {"error":"invalid signature"},
// nothing called); JSON (400 {"error":"malformed payload: …"}); fields
// (400 listing every problem: request_id, operation_id and decision
// required, decision one of approved, rejected, withdrawn, approver
// required for approved and rejected: the page and the timeline say who
// decided; checkApprover). Then it calls
// cfg.Approvals and answers 200 {"result": <its result>}, or 503 when it
// fails. Unknown JSON fields are allowed so the approval system can grow
// its payload.
func NewApprovalCallbackHandler(cfg CallbackConfig) (http.Handler, error) {
	var problems []error
	if cfg.Approvals == nil {
		problems = append(problems, errors.New("an approval acceptor is required"))
	}
	h, err := newCallbackHandler(cfg, KindApproval, problems)
	if err != nil {
		return nil, err
	}
	h.accept = func(ctx context.Context, body []byte) (string, []any, []Problem, error) {
		var wire struct {
			RequestID   string         `json:"request_id"`
			OperationID string         `json:"operation_id"`
			TicketID    string         `json:"ticket_id"`
			Decision    string         `json:"decision"`
			Approver    string         `json:"approver"`
			Ext         map[string]any `json:"ext"`
		}
		if err := decodeStrict(body, &wire); err != nil {
			return "", nil, nil, err
		}
		var ps []Problem
		ps = checkRequestID(ps, wire.RequestID)
		if wire.OperationID == "" {
			ps = append(ps, Problem{"operation_id", "required"})
		}
		switch {
		case wire.Decision == "":
			ps = append(ps, Problem{"decision", "required"})
		case !slices.Contains(decisions, wire.Decision):
			ps = append(ps, Problem{"decision", "must be one of " + strings.Join(decisions, ", ")})
		}
		ps = checkApprover(ps, wire.Decision, wire.Approver)
		if len(ps) > 0 {
			return "", nil, ps, nil
		}
		attrs := []any{attrRequestID, wire.RequestID, attrOperationID, wire.OperationID}
		result, err := cfg.Approvals.AcceptApproval(ctx, ApprovalCallback{
			RequestID: wire.RequestID, OperationID: wire.OperationID, TicketID: wire.TicketID,
			Decision: wire.Decision, Approver: wire.Approver, Ext: wire.Ext,
		})
		return result, attrs, nil, err
	}
	return h, nil
}

// NewDeployCallbackHandler returns the handler of POST /callbacks/deploy,
// with the same checks and answers as NewApprovalCallbackHandler. Fields:
// request_id, project_id (> 0), mr_iid (> 0) and status (success, applied
// or failed) required; merge_commit_sha optional (when set, a change whose
// merge commit differs is not validated by it).
func NewDeployCallbackHandler(cfg CallbackConfig) (http.Handler, error) {
	var problems []error
	if cfg.Deploys == nil {
		problems = append(problems, errors.New("a deploy acceptor is required"))
	}
	h, err := newCallbackHandler(cfg, KindDeploy, problems)
	if err != nil {
		return nil, err
	}
	h.accept = func(ctx context.Context, body []byte) (string, []any, []Problem, error) {
		var wire struct {
			RequestID      string `json:"request_id"`
			ProjectID      int64  `json:"project_id"`
			MRIID          int64  `json:"mr_iid"`
			MergeCommitSHA string `json:"merge_commit_sha"`
			Status         string `json:"status"`
		}
		if err := decodeStrict(body, &wire); err != nil {
			return "", nil, nil, err
		}
		var ps []Problem
		ps = checkRequestID(ps, wire.RequestID)
		if wire.ProjectID <= 0 {
			ps = append(ps, Problem{"project_id", "required, a positive integer"})
		}
		if wire.MRIID <= 0 {
			ps = append(ps, Problem{"mr_iid", "required, a positive integer"})
		}
		if s := wire.MergeCommitSHA; s != "" {
			if _, err := hex.DecodeString(s); err != nil || len(s) < 7 || len(s) > 64 {
				ps = append(ps, Problem{"merge_commit_sha", "must be a commit sha (7 to 64 hex digits)"})
			}
		}
		switch {
		case wire.Status == "":
			ps = append(ps, Problem{"status", "required"})
		case !slices.Contains(deployStatuses, wire.Status):
			ps = append(ps, Problem{"status", "must be one of " + strings.Join(deployStatuses, ", ")})
		}
		if len(ps) > 0 {
			return "", nil, ps, nil
		}
		attrs := []any{attrRequestID, wire.RequestID, attrProjectID, wire.ProjectID, attrMRIID, wire.MRIID}
		result, err := cfg.Deploys.AcceptDeploy(ctx, DeployCallback{
			RequestID: wire.RequestID, ProjectID: wire.ProjectID, MRIID: wire.MRIID,
			MergeCommitSHA: wire.MergeCommitSHA, Status: wire.Status,
		})
		return result, attrs, nil, err
	}
	return h, nil
}

func newCallbackHandler(cfg CallbackConfig, kind string, problems []error) (*callbackHandler, error) {
	if cfg.Secret == "" {
		problems = append(problems, errors.New("a callback secret is required"))
	}
	if cfg.MaxBodyBytes < 0 {
		problems = append(problems, fmt.Errorf("max body bytes is negative (%d)", cfg.MaxBodyBytes))
	}
	if cfg.Timeout < 0 {
		problems = append(problems, fmt.Errorf("timeout is negative (%s)", cfg.Timeout))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the %s callback handler: %w", kind, errors.Join(problems...))
	}
	h := &callbackHandler{
		kind:    kind,
		secret:  []byte(cfg.Secret),
		maxBody: cfg.MaxBodyBytes,
		timeout: cfg.Timeout,
		log:     cfg.Logger,
		m:       orNew(cfg.Metrics),
		onBad:   cfg.OnBadSignature,
		now:     cfg.NowFunc,
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultCallbackMaxBodyBytes
	}
	if h.timeout == 0 {
		h.timeout = DefaultStoreTimeout
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.log = h.log.With(attrKind, kind)
	return h, nil
}

type callbackHandler struct {
	kind    string
	secret  []byte
	maxBody int64
	timeout time.Duration
	log     *slog.Logger
	m       *Metrics
	onBad   func() // CallbackConfig.OnBadSignature
	now     func() time.Time
	// accept decodes and validates body, then calls the acceptor and
	// returns its result with log attributes naming the callback. It
	// returns the field problems when the body is invalid, and an error
	// wrapping errMalformedCallback when it is not the expected JSON.
	accept func(ctx context.Context, body []byte) (result string, attrs []any, problems []Problem, err error)
}

// errMalformedCallback marks a body that is not the expected JSON.
var errMalformedCallback = errors.New("malformed payload")

func (h *callbackHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := h.log
	count := func(result string) { h.m.callbacks.WithLabelValues(h.kind, result).Inc() }
	onPanic(r, h.m, h.kind, func() { count(ResultError) })

	if r.Method != http.MethodPost {
		count(ResultMalformed)
		methodNotAllowed(w)
		return
	}
	// The size is checked before the signature: the signature is an HMAC
	// of the body, so the body must be read to check it.
	tooLarge := limitBody(w, r, h.maxBody)
	var body []byte
	var err error
	if !tooLarge {
		body, tooLarge, err = readBody(r)
	}
	if tooLarge {
		count(ResultTooLarge)
		log.Warn("callback refused: body too large", "content_length", r.ContentLength, "limit", h.maxBody)
		writeJSON(w, http.StatusRequestEntityTooLarge, answer{Error: fmt.Sprintf("payload larger than %d bytes", h.maxBody)})
		return
	}
	if err != nil {
		count(ResultMalformed)
		log.Warn("callback refused: body unreadable", attrError, err)
		writeJSON(w, http.StatusBadRequest, answer{Error: "reading the request body failed"})
		return
	}
	unix, tsOK := timestampOf(r.Header.Get(HeaderTimestamp))
	if !tsOK {
		count(ResultUnauthorized)
		log.Warn("callback refused: no timestamp", attrRemoteAddr, r.RemoteAddr)
		writeJSON(w, http.StatusUnauthorized, answer{Error: "missing or malformed " + HeaderTimestamp + " (Unix seconds, signed with the body)"})
		return
	}
	if sig := r.Header.Get(HeaderSignature); !h.signatureOK(sig, unix, body) {
		count(ResultUnauthorized)
		if h.onBad != nil && signatureWellFormed(sig) {
			h.onBad()
		}
		log.Warn("callback refused: invalid signature", attrRemoteAddr, r.RemoteAddr)
		writeJSON(w, http.StatusUnauthorized, answer{Error: "invalid signature"})
		return
	}
	// Checked once the signature holds, so that only the sender learns of
	// its clock: an authentic callback signed too long ago is a replay, or
	// a sender's clock off by more than the tolerance.
	if skew := h.now().Sub(time.Unix(unix, 0)); skew > CallbackTolerance || skew < -CallbackTolerance {
		count(ResultUnauthorized)
		log.Warn("callback refused: timestamp outside the tolerance", attrRemoteAddr, r.RemoteAddr, "skew", skew.Round(time.Second).String())
		writeJSON(w, http.StatusUnauthorized, answer{Error: fmt.Sprintf("%s is %s from the bot's clock, more than %s: sign each send with the current time",
			HeaderTimestamp, skew.Abs().Round(time.Second), CallbackTolerance)})
		return
	}
	ctx, cancel := detached(r, h.timeout)
	defer cancel()
	result, attrs, problems, err := h.accept(ctx, body)
	log = log.With(attrs...)
	switch {
	case errors.Is(err, errMalformedCallback):
		count(ResultMalformed)
		log.Warn("callback refused: malformed payload", attrError, err)
		writeJSON(w, http.StatusBadRequest, answer{Error: err.Error()})
	case len(problems) > 0:
		count(ResultInvalid)
		log.Warn("callback refused: invalid fields", "problems", len(problems))
		writeJSON(w, http.StatusBadRequest, answer{Error: "invalid " + h.kind + " callback", Problems: problems})
	case err != nil:
		count(ResultError)
		log.Error("callback not applied", attrError, err)
		writeJSON(w, http.StatusServiceUnavailable, answer{Error: "applying the callback failed; send it again"})
	default:
		label := result
		if !slices.Contains(acceptorResults, result) {
			label = ResultOther
		}
		count(label)
		log.Debug("callback applied", attrResult, result) // the access line is the info one
		writeJSON(w, http.StatusOK, answer{Result: result})
	}
}

// signatureOK checks "sha256=<hex>" against the HMAC of the timestamp
// unix and body, in constant time for a well-formed header. The hex digits
// are decoded first, so upper and lower case alike are accepted.
func (h *callbackHandler) signatureOK(header string, unix int64, body []byte) bool {
	hexSig, ok := strings.CutPrefix(header, signaturePrefix)
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	return hmac.Equal(got, mac(h.secret, unix, body))
}

// timestampOf parses a HeaderTimestamp value: decimal Unix seconds, at most
// 12 digits, no sign.
func timestampOf(v string) (int64, bool) {
	if v == "" || len(v) > 12 || strings.TrimLeft(v, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// signatureWellFormed reports whether header has the shape of a signature,
// "sha256=" and the hex of sha256.Size bytes, whatever the key.
func signatureWellFormed(header string) bool {
	hexSig, ok := strings.CutPrefix(header, signaturePrefix)
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	return err == nil && len(got) == sha256.Size
}

// decodeStrict decodes one JSON object into v with jsonbody.DecodeStrict:
// a wrong type, trailing data or a key twice in an object is an error
// wrapping errMalformedCallback; unknown fields are allowed. Its text names the
// field by its JSON path and JSON type (jsonbody.Describe), never a value
// or a Go type.
func decodeStrict(body []byte, v any) error {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("%w: body is not a JSON object", errMalformedCallback)
	}
	if err := jsonbody.DecodeStrict(body, v, false); err != nil {
		return fmt.Errorf("%w: %w", errMalformedCallback, err)
	}
	return nil
}

// maxApproverLen bounds a callback's approver (a person's name or login).
const maxApproverLen = 255

// checkApprover requires the approver of an approved or rejected decision
// (a withdrawal may come from the system itself): not blank, at most
// maxApproverLen bytes, one line without control or bidirectional
// formatting characters (textcheck.Problem: it is shown as "approved by
// <approver>").
func checkApprover(ps []Problem, decision, approver string) []Problem {
	if msg := textcheck.Problem(approver); msg != "" {
		return append(ps, Problem{"approver", msg})
	}
	switch {
	case len(approver) > maxApproverLen:
		return append(ps, Problem{"approver", fmt.Sprintf("longer than %d bytes", maxApproverLen)})
	case strings.TrimSpace(approver) == "" && (decision == rules.DecisionApproved || decision == rules.DecisionRejected):
		return append(ps, Problem{"approver", "required when decision is " + decision})
	}
	return ps
}

func checkRequestID(ps []Problem, id string) []Problem {
	switch {
	case id == "":
		return append(ps, Problem{"request_id", "required"})
	case len(id) > maxRequestIDLen:
		return append(ps, Problem{"request_id", fmt.Sprintf("longer than %d bytes", maxRequestIDLen)})
	}
	return ps
}
