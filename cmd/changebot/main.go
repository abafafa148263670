// Command changebot is the changebot binary: the command line (package
// cli) with the bot (package bot) wired in; neither imports the other.
package main

import (
	"os"

	"changebot/bot"
	"changebot/cli"
)

func main() {
	b := cli.Bot{Serve: bot.Serve, StartDemo: bot.StartDemo, Version: bot.BuildVersion().String()}
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr, b))
}
