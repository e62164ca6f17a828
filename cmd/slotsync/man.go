//go:build !urfave_cli_no_docs

package main

import (
	"io"

	"github.com/urfave/cli/v2"
)

// docCommands are the commands only a build with urfave/cli's documentation has: the release
// binary leaves them out (-tags urfave_cli_no_docs) and the release ships their output.
func docCommands() []*cli.Command {
	return []*cli.Command{{
		Name:   "man",
		Usage:  "print the man page (roff), generated from the command definitions",
		Hidden: true,
		Action: func(c *cli.Context) error {
			page, err := c.App.ToMan()
			if err != nil {
				return err
			}
			_, err = io.WriteString(c.App.Writer, page)
			return err
		},
	}}
}
