// Package webhooks holds changebot's HTTP intake handlers: the GitLab webhook
// endpoint (POST /webhooks/gitlab, NewGitLabHandler) and the callbacks of the
// external approval system and of the deploy pipeline (POST
// /callbacks/approval and POST /callbacks/deploy, NewApprovalCallbackHandler
// and NewDeployCallbackHandler).
//
// Both platforms' webhook handlers share one request path (intake); what
// differs (authentication, headers, ignore rules, dedupe key) is their
// hookRules.
//
// A handler only verifies, decodes, deduplicates, stores, enqueues and
// answers, in the order of STYLE rule 19: method, constant-time token check
// (a header: before the body size, so a sender without it does not learn the
// limit) or body size then HMAC signature check (it needs the body), event
// type, decode, then one database
// transaction (the GitLab delivery stored under its dedupe key together with
// its processing job), then a small JSON answer. Callbacks are handed to an
// acceptor that flows implements, which deduplicates on the callback's
// request id in its own transaction.
//
// It must not call GitLab, start goroutines, sleep, or decide anything about
// a change: what a delivery means is decided later by the job that processes
// it (flows). It speaks the flow's vocabulary (flows/rules: callback
// results, decisions, the delivery job's kind) and never imports the engine
// (changebot/flows). It never logs or answers with a token, a signature or
// a body.
package webhooks
