// Package api owns changebot's HTTP interface for people and their tools:
// the REST API under /api/v1 (submit, list, read, act on changes; runtime
// settings; the merge queues; openapi.json), the web pages under /ui with
// their templates, the API tokens, their roles and the web sessions made
// with them.
//
// It reaches the rest of the bot only through the small interfaces it
// declares (Engine, Store, Settings, Queues), each with the methods it
// calls, so that its tests run in process against hand-written fakes,
// without a database. It must not import a database driver, River, a
// platform fake, or the packages above it (bot, cli, ops, demo); it opens
// nothing, starts no goroutine and never calls the platform on its own.
package api
