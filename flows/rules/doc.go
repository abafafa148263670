// Package rules owns the change flow's rules, the pure part of flows: the
// one step table (codes, names, statuses, jobs and their declared
// failures, retry and resume targets, waits, hints) and the transition
// table derived from it (DESIGN §2), the binding statuses and the
// persisted names the flow speaks (job kinds and queues, actions, approval
// decisions and callback results, platform names), each platform's words
// for the texts people read, and the decisions that follow from a change's
// state and what the platform said.
//
// It must not do I/O: it imports no store, platform client, River,
// database driver, template or HTTP package and reads no clock (times are
// passed in), so that webhooks, commands and the web pages can use the
// flow's vocabulary without the engine, and every rule is tested by table
// tests alone. The engine (package flows) runs these rules; nothing here
// calls back into it.
package rules
