// Package commands owns the MR-comment command language of changebot: the
// parser that finds commands such as "/retry" or "@changebot retry" in a
// note's Markdown body, and the one registry of commands with their usage,
// help text and the roles that may run them (DESIGN §1, STYLE rules 20-22,
// issue 3).
//
// The package is pure: it does no I/O, keeps no state between calls and
// imports nothing of changebot. It must not decide whether a commenter holds
// a role, look at a change's state or run a command: the caller (webhooks and
// flows, wired by bot) maps each command name to its handler and checks
// permissions when the command runs.
package commands
