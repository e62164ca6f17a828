package main

import (
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestCompletionScripts: each script is generated from the command definitions (every command,
// every flag of every command), is valid for its shell, and completes the values of the flags
// that take a fixed set, which agree with those flags' help.
func TestCompletionScripts(t *testing.T) {
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	for flag, vals := range flagValues {
		found := false
		for _, c := range visibleCommands(app) {
			for _, f := range c.Flags {
				if f.Names()[0] != flag {
					continue
				}
				found = true
				usage := f.String()
				for _, v := range vals {
					if !strings.Contains(usage, v) {
						t.Errorf("completion offers %s for --%s, whose help (%s) does not name it", v, flag, usage)
					}
				}
			}
		}
		if !found {
			t.Errorf("completion knows values of --%s, which no command has", flag)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		r := slotsyncCmd(t, nil, "completion", shell)
		if r.code != 0 {
			t.Fatalf("completion %s: exit %d: %s", shell, r.code, r.stderr)
		}
		for _, c := range visibleCommands(app) {
			if !strings.Contains(r.stdout, c.Name) {
				t.Errorf("%s completion lacks the command %s", shell, c.Name)
			}
			for _, f := range c.Flags {
				if !strings.Contains(r.stdout, f.Names()[0]) {
					t.Errorf("%s completion lacks %s --%s", shell, c.Name, f.Names()[0])
				}
			}
		}
		if _, err := exec.LookPath(shell); err == nil && shell != "fish" {
			cmd := exec.Command(shell, "-n")
			cmd.Stdin = strings.NewReader(r.stdout)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", shell, err, out)
			}
		}
	}
	// Completing in bash: the flags of the command typed, and a flag's values.
	if _, err := exec.LookPath("bash"); err == nil {
		script := slotsyncCmd(t, nil, "completion", "bash").stdout
		for words, want := range map[string]string{"slotsync ch": "check", "slotsync check --st": "--standby --standby-gone-after --standby-password-file --state-dir --strict",
			"slotsync run --method s": "sql statefile"} {
			w := strings.Fields(words)
			if strings.HasSuffix(words, " ") {
				w = append(w, "")
			}
			prog := script + "\nCOMP_WORDS=(" + strings.Join(w, " ") + "); COMP_CWORD=" + strconv.Itoa(len(w)-1) + "; _slotsync; echo \"${COMPREPLY[*]}\"\n"
			out, err := exec.Command("bash", "-c", prog).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != want {
				t.Errorf("bash completion of %q: %q, want %q (%v)", words, strings.TrimSpace(string(out)), want, err)
			}
		}
	}
	if r := slotsyncCmd(t, nil, "completion", "tcsh"); r.code != exitUsage {
		t.Errorf("an unknown shell: exit %d", r.code)
	}
}

// TestManPage: the man page generated from the command definitions names every command and
// flag (the release ships it; its binary leaves the generator out).
func TestManPage(t *testing.T) {
	r := slotsyncCmd(t, nil, "man")
	if r.code != 0 || !strings.HasPrefix(r.stdout, ".nh\n.TH slotsync") {
		t.Fatalf("man: exit %d: %.200s %s", r.code, r.stdout, r.stderr)
	}
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	for _, c := range visibleCommands(app) {
		for _, f := range c.Flags {
			if !strings.Contains(r.stdout, f.Names()[0]) {
				t.Errorf("the man page lacks %s --%s", c.Name, f.Names()[0])
			}
		}
	}
}

// TestCompletionHasNoDuplicates: no script offers a word twice (the help flag, the help command)
// and each completes the shells `completion` takes.
func TestCompletionHasNoDuplicates(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out := slotsyncCmd(t, nil, "completion", shell).stdout
		lines := map[string]bool{}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "complete ") {
				if lines[line] {
					t.Errorf("%s: line twice: %s", shell, line)
				}
				lines[line] = true
			}
			words := map[string]bool{}
			for _, w := range strings.Fields(line) {
				commandList := strings.Contains(line, "contains -- $i")
				if words[w] && (strings.HasPrefix(w, "--") && len(w) > 2 || commandList) {
					t.Errorf("%s: %q twice in: %s", shell, w, line)
				}
				words[w] = true
			}
		}
		if shell != "zsh" && !strings.Contains(out, "fish") || !strings.Contains(out, "bash") {
			t.Errorf("%s: the completion command's shells are not completed", shell)
		}
	}
}
