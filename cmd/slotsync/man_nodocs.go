//go:build urfave_cli_no_docs

package main

import "github.com/urfave/cli/v2"

// docCommands: none in a build without urfave/cli's documentation (the release binary).
func docCommands() []*cli.Command { return nil }
