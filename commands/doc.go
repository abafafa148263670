// Package commands owns the MR-comment command language of changebot: the
// parser that finds commands such as "/retry" or "@changebot retry" in a
// note's Markdown body, the one registry of commands with their usage, help
// text, the roles that may run them and their handlers, and the executor
// that runs a note's commands once, checking who may run each (DESIGN §1,
// STYLE rules 20-22, issue 3).
//
// It acts on changes through the flow engine (retry, resume and cancel go
// through flows.Engine.Act, the dispatch the REST API shares) and speaks
// the flow's vocabulary (flows/rules) and platform's types; it declares
// what it needs from the flow, the note store and GitLab as interfaces
// (Flow, NoteStore, Access) that the delivery router (package routing)
// implements. It must not import the engine (changebot/flows), store,
// webhooks, bot, routing or a GitLab client: nothing below it calls up into
// it.
package commands
