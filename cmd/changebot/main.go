// Command changebot is the changebot binary; all of it lives in package bot.
package main

import (
	"os"

	"changebot/bot"
)

func main() { os.Exit(bot.Main(os.Args[1:], os.Stdout, os.Stderr)) }
