package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestEveryFlagIsDocumented: every command and every flag a user can see is in docs/CLI.md, as
// the doctor rows test does for checks.
func TestEveryFlagIsDocumented(t *testing.T) {
	data, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	app := newApp(io.Discard, io.Discard)
	for _, c := range app.Commands {
		if c.Hidden || c.Name == "help" {
			continue
		}
		if !strings.Contains(doc, "slotsync "+c.Name) && !strings.Contains(doc, "`"+c.Name+"`") {
			t.Errorf("command %s is not in docs/CLI.md", c.Name)
		}
		for _, f := range c.Flags {
			if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
				continue
			}
			for _, name := range f.Names() {
				if len(name) > 1 && !strings.Contains(doc, "--"+name) {
					t.Errorf("slotsync %s --%s is not in docs/CLI.md", c.Name, name)
				}
			}
		}
	}
}
