// Package githubfake is an in-memory GitHub: an HTTP server that speaks the
// subset of the REST API changebot uses, with GitHub's JSON shapes, status
// codes and error bodies, and that emits webhooks (pull_request,
// pull_request_review, issue_comment, check_run, check_suite, status,
// workflow_run, push) signed with X-Hub-Signature-256 and carrying
// X-GitHub-Event and X-GitHub-Delivery.
//
// It owns: users and their tokens, GitHub Apps (JWT checked against the
// App's public key, installation tokens that expire after an hour),
// repositories with collaborator permissions, organization memberships,
// branch protection (required contexts, required approving reviews,
// strict "up to date"), a tiny git object store (blobs, flat trees,
// commits, refs), pull requests whose mergeable is computed lazily (null on
// the first read after a change, as GitHub answers while it computes),
// reviews, issue comments, scripted CI (one workflow run per pushed head:
// check runs and commit statuses with scripted outcomes, re-runs of failed
// jobs), merges with GitHub's 405/409 rules, merge queues (POST /graphql:
// enqueuePullRequest, mergeQueueEntry, mergeQueue; merge_group webhooks;
// merge_queue.go), asynchronous update-branch,
// injected faults and rate limits (primary and secondary), and per-endpoint
// call counts. Tests and `changebot demo` start one with New and point the
// GitHub adapter (platform/github) and the bot's webhook endpoint at it.
//
// Shapes follow the real payloads in the repository's testdata/github:
// fixture_shapes_test.go checks REST answers and webhook payloads field by
// field against them. Deliberate differences from GitHub are listed in the
// doc comment of Server.
//
// It must not import anything of changebot's nor the GitHub client
// library (it is a leaf used by tests of other packages), talk to a real
// GitHub, persist anything, or grow business logic of the bot. It records
// what happened (Calls, Webhooks, PullRequest) instead of asserting it.
package githubfake
