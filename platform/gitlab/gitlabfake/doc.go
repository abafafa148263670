// Package gitlabfake is an in-memory GitLab: an HTTP server that speaks the
// subset of the REST API v4 changebot uses, with GitLab's JSON shapes, status
// codes and error bodies, and that emits Merge Request, Pipeline and Note
// Hooks with GitLab's delivery headers and payload shapes.
//
// It owns: users and their tokens, projects with members, protected branches
// and a tiny in-memory repository (branches, commits, file trees), merge
// requests (approvals, notes, merge, asynchronous rebase), scripted CI
// pipelines, webhook delivery with chaos (drop, duplicate, reorder), and
// fault injection (any status, Retry-After, latency); for `changebot setup`
// and `doctor`, project and group webhook configuration with test events
// and access token details (project_hooks.go, tokens.go); and, beside the
// API, one endpoint for a person to comment as any user (FakeNotesPath,
// used by `changebot demo -keep`). Tests and
// `changebot demo` start one with New and point the GitLab adapter and the
// bot's webhook endpoint at it.
//
// Shapes follow the real payloads in the repository's testdata/gitlab and
// the rules in docs/gitlab.md; fixture_shapes_test.go checks every emitted
// payload and REST answer against those fixtures. Deliberate differences from
// GitLab are listed in the doc comments of the identifiers they concern and
// gathered in the doc comment of Server.
//
// It must not: import anything of changebot's (it is a leaf used by tests of
// every other package), talk to a real GitLab, persist anything, or grow
// business logic of the bot. It is a state-based fake: it records what
// happened (Calls, Webhooks, MergeRequest) instead of asserting it.
package gitlabfake
