package main

import (
	"context"
	"fmt"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/slotsync/slotsync/integration"
	"github.com/urfave/cli/v2"
)

func sandboxCommand() *cli.Command {
	return &cli.Command{
		Name:  "sandbox",
		Usage: "start a throwaway local primary with a streaming standby and print their DSNs",
		Description: "Starts a real PostgreSQL pair from the binaries on this machine (/usr/lib/postgresql/N/bin, or $SLOTSYNC_PG_CACHE/N/bin), " +
			"prints how to connect to each node, and stops and removes it on Ctrl-C or after --for.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "major", Usage: "PostgreSQL major version (default: the newest installed, as for drill)", EnvVars: []string{"SLOTSYNC_SANDBOX_MAJOR"}},
			&cli.DurationFlag{Name: "for", Usage: "stop after this long (0: until interrupted)", EnvVars: []string{"SLOTSYNC_SANDBOX_FOR"}},
		},
		Action: func(c *cli.Context) error {
			major := c.Int("major")
			if major == 0 {
				m, err := newestInstalled()
				if err != nil {
					return err
				}
				major = m
			}
			if !slices.Contains(integration.SupportedMajors, major) {
				return configError("--major %d: use one of %v", major, integration.SupportedMajors)
			}
			if c.Duration("for") < 0 {
				return configError("--for %s: give a positive duration (or leave it out to run until interrupted)", c.Duration("for"))
			}
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			pair, err := integration.NewPair(startCtx, integration.Options{Major: major})
			if err != nil {
				return cli.Exit(fmt.Sprintf("start sandbox pair: %v", err), exitConnect)
			}
			defer pair.Close()
			w := c.App.Writer
			fmt.Fprintf(w, "PostgreSQL %d pair running (files in %s)\n", pair.Major, pair.Dir)
			fmt.Fprintf(w, "  primary: %s\n", pair.Primary.DSN("postgres"))
			fmt.Fprintf(w, "  standby: %s\n", pair.Standby.DSN("postgres"))
			if d := c.Duration("for"); d > 0 {
				fmt.Fprintf(w, "stopping in %s (or on Ctrl-C)\n", d)
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			} else {
				fmt.Fprintln(w, "press Ctrl-C to stop and remove it")
				<-ctx.Done()
			}
			fmt.Fprintln(w, "stopping the pair")
			return nil
		},
	}
}
