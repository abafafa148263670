// Package cli is changebot's command line: the usage, flag parsing, exit
// codes (0, 1 for a failed command, 2 for a refused command line) and
// every subcommand but the server itself — migrate, list, history,
// replay, verify, copy, settings, doctor, setup, demo, version. It opens
// the store for the commands that read or write it (openStore) and prints
// what the REST API answers through api/backend.
//
// It must not import package bot: `serve` and the demo's in-process bot
// are given to Main in a Bot by cmd/changebot, which joins the two (issue
// 20 point 1).
package cli
