// Package webhooks holds changebot's HTTP intake handlers: the GitLab webhook
// endpoint (POST /webhooks/gitlab, NewGitLabHandler) and the callbacks of the
// external approval system and of the deploy pipeline (POST
// /callbacks/approval and POST /callbacks/deploy, NewApprovalCallbackHandler
// and NewDeployCallbackHandler).
//
// A handler only verifies, decodes, deduplicates, stores, enqueues and
// answers, in the order of STYLE rule 19: method, body size, constant-time
// token or HMAC signature check, event type, decode, then one database
// transaction (the GitLab delivery stored under its dedupe key together with
// its processing job), then a small JSON answer. Callbacks are handed to an
// acceptor that flows implements, which deduplicates on the callback's
// request id in its own transaction.
//
// It must not call GitLab, start goroutines, sleep, or decide anything about
// a change: what a delivery means is decided later by the job that processes
// it (flows). It never logs or answers with a token, a signature or a body.
package webhooks
