// Command slotsync keeps PostgreSQL logical replication slots alive across failover by copying
// them from a primary to its physical standby, and gates promotion on their readiness.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	slotsync "github.com/slotsync/slotsync/sync"
	"github.com/urfave/cli/v2"
)

// Exit codes shared by the commands that judge a pair.
const (
	exitOK       = slotsync.ExitReady
	exitNotReady = slotsync.ExitNotReady
	exitConnect  = slotsync.ExitCannotTell
	exitUsage    = slotsync.ExitUsage
)

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:  "slotsync",
		Usage: "keep logical replication slots alive across PostgreSQL failover",
		Description: "slotsync runs beside a physical standby and copies every logical slot of the primary to it, " +
			"so that after a promotion every logical consumer resumes exactly where it stopped. " +
			"Exit codes: 0 ready/ok, 1 not ready, 2 cannot connect, 3 usage or configuration error.",
		Version:   currentBuild().details(),
		Writer:    stdout,
		ErrWriter: stderr,
		Commands: []*cli.Command{
			runCommand(),
			checkCommand(),
			statusCommand(),
			doctorCommand(),
			versionCommand(),
			drillCommand(),
			sandboxCommand(),
			completionCommand(),
		},
		// Usage errors (unknown flags, bad values) exit 3 like configuration errors.
		OnUsageError:   usageError,
		Before:         helpTakesOneCommand,
		ExitErrHandler: func(c *cli.Context, err error) {},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("unknown command %q: use %s (slotsync --help lists them)", c.Args().First(), commandNames(c.App)), exitUsage)
			}
			return cli.ShowAppHelp(c)
		},
	}
	app.Commands = append(app.Commands, docCommands()...)
	for _, cmd := range app.Commands {
		// One line on stderr naming the fix, never the whole help on stdout; and no stray
		// arguments: an unquoted DSN ("--standby host=x port=1") would drop everything after it.
		cmd.OnUsageError = usageError
		if cmd.ArgsUsage == "" { // completion takes its shell as an argument
			cmd.Before = noStrayArguments
		}
	}
	return app
}

func usageError(c *cli.Context, err error, _ bool) error {
	name := "slotsync"
	if c.Command != nil && c.Command.Name != "" {
		name += " " + c.Command.Name
	}
	return cli.Exit(fmt.Sprintf("usage: %v (see %s --help)", err, name), exitUsage)
}

func noStrayArguments(c *cli.Context) error {
	if c.NArg() == 0 {
		return nil
	}
	hint := ""
	for _, f := range c.Command.Flags {
		if f.Names()[0] == "standby" {
			hint = "; quote a DSN with spaces, e.g. --standby 'host=db1 port=5432'"
		}
	}
	return cli.Exit(fmt.Sprintf("usage: unexpected argument %q: %s takes flags only%s", c.Args().First(), c.Command.Name, hint), exitUsage)
}

// helpTakesOneCommand refuses `help run extra` (urfave/cli shows run's help and ignores the
// rest), as every command refuses a stray argument.
func helpTakesOneCommand(c *cli.Context) error {
	if first := c.Args().First(); (first == "help" || first == "h") && c.NArg() > 2 {
		return cli.Exit(fmt.Sprintf("usage: unexpected argument %q: help takes one command, e.g. slotsync help run", c.Args().Get(2)), exitUsage)
	}
	return nil
}

func commandNames(app *cli.App) string {
	var names []string
	for _, c := range app.Commands {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	return strings.Join(names, ", ")
}

func main() {
	// --version prints the line `slotsync version` prints: one version string.
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, currentBuild()) }
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run executes the app and maps its outcome to an exit code.
func run(args []string, stdout, stderr io.Writer) int {
	err := newApp(stdout, stderr).Run(args)
	if err == nil {
		return exitOK
	}
	var coder cli.ExitCoder
	if errors.As(err, &coder) {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(stderr, "slotsync:", msg)
		}
		return coder.ExitCode()
	}
	fmt.Fprintln(stderr, "slotsync:", err)
	return exitUsage
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: func(c *cli.Context) error {
			if c.Bool("json") {
				writeJSON(c.App.Writer, currentBuild())
				return nil
			}
			fmt.Fprintln(c.App.Writer, currentBuild())
			return nil
		},
	}
}
