// Package routing is the delivery router of changebot (DESIGN §8 "delivery
// routing"): the job that reads a stored GitLab webhook delivery, decodes it
// and hands it to flows (pipeline and merge request events) or to commands
// (comments), and the adapters through which commands acts on the flow and
// records notes. It sits above both flows and commands so that neither
// calls up: flows knows nothing of commands, commands nothing of the store.
//
// It holds no rules of its own (what a delivery does is decided by flows or
// commands) and talks neither HTTP nor GitLab; bot wires it.
package routing
