// Command slotsync keeps PostgreSQL logical replication slots alive across failover by copying
// them from a primary to its physical standby, and gates promotion on their readiness.
package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// Exit codes shared by the commands that judge a pair.
const (
	exitOK       = 0
	exitNotReady = 1
	exitConnect  = 2
	exitUsage    = 3
)

func newApp() *cli.App {
	return &cli.App{
		Name:    "slotsync",
		Usage:   "keep logical replication slots alive across PostgreSQL failover",
		Version: version,
		Commands: []*cli.Command{
			sandboxCommand(),
		},
		ExitErrHandler: func(c *cli.Context, err error) {
			if err == nil {
				return
			}
			if coder, ok := err.(cli.ExitCoder); ok {
				if msg := err.Error(); msg != "" {
					fmt.Fprintln(c.App.ErrWriter, "slotsync:", msg)
				}
				os.Exit(coder.ExitCode())
			}
			fmt.Fprintln(c.App.ErrWriter, "slotsync:", err)
			os.Exit(exitUsage)
		},
	}
}

func main() {
	if err := newApp().Run(os.Args); err != nil {
		os.Exit(exitUsage)
	}
}
