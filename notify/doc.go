// Package notify owns changebot's outgoing notifications (issue 25 point
// 3): the events a change's move raises (EventFor, over the step table of
// flows/rules), the server-side destinations they are routed to by
// project and event (Destination, Router), the payload and its signature
// (Payload, Sign), and the River job that POSTs one notification to one
// destination and records each attempt in the store's delivery log
// (DeliverArgs, Worker); and the summaries of rollouts, told once per
// state of a rollout instead of each of its changes' events (RolloutNotice,
// SummarizeRollout, RolloutText; the state's rule is flows/rules'). The
// jobs are enqueued by the flow engine in the
// transaction of the move that raises the event (Router.Jobs, given to
// flows.EngineConfig.EventJobsFunc, and Router.RolloutNotice, given to
// flows.EngineConfig.RolloutNotice): this package never starts a goroutine
// of its own and never reads or moves a change. It must not import flows,
// bot, api or config; it speaks HTTP only to the destinations.
package notify
