package integration

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// EnvRunUser names the environment variable that chooses the unprivileged user local clusters
// run as when the caller is root (initdb refuses root). Default: postgres.
const EnvRunUser = "SLOTSYNC_PG_USER"

// runAs is the identity local servers run under: the current user, or an unprivileged one
// when the current user is root.
type runAs struct {
	name     string
	uid, gid int
	home     string
	switched bool // true when commands must switch to uid/gid
}

func currentRunAs() (runAs, error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return runAs{}, fmt.Errorf("look up current user: %w", err)
		}
		return runAs{name: u.Username, uid: os.Geteuid(), gid: os.Getegid(), home: u.HomeDir}, nil
	}
	name := os.Getenv(EnvRunUser)
	if name == "" {
		name = "postgres"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return runAs{}, fmt.Errorf("running as root: local clusters need an unprivileged user %q (initdb refuses root): "+
			"create it with `useradd --system --create-home %s` or set %s: %w", name, name, EnvRunUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 {
		return runAs{}, fmt.Errorf("%s=%s is root; name an unprivileged user", EnvRunUser, name)
	}
	return runAs{name: name, uid: uid, gid: gid, home: u.HomeDir, switched: true}, nil
}

// command builds an exec.Cmd that runs as this identity with a clean PostgreSQL environment
// (no PG* variables from the caller leak into the test servers).
func (r runAs) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	env := []string{"LC_ALL=C", "LANG=C", "PATH=/usr/local/bin:/usr/bin:/bin"}
	if r.home != "" {
		env = append(env, "HOME="+r.home)
	}
	cmd.Env = env
	if r.switched {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid)}}
	}
	return cmd
}

// chownTree gives every file under root to this identity (a no-op unless switched).
func (r runAs) chownTree(root string) error {
	if !r.switched {
		return nil
	}
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, r.uid, r.gid)
	})
}

// checkReachable fails with a clear message when this identity cannot run a program because a
// directory on its path is closed to others (a checkout under /root, say).
func (r runAs) checkReachable(program string) error {
	if !r.switched {
		return nil
	}
	dir := filepath.Dir(program)
	for {
		st, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			mode := st.Mode().Perm()
			var can bool
			switch {
			case int(sys.Uid) == r.uid:
				can = mode&0o100 != 0
			case int(sys.Gid) == r.gid:
				can = mode&0o010 != 0
			default:
				can = mode&0o001 != 0
			}
			if !can {
				return fmt.Errorf("user %s cannot reach %s (directory %s is mode %v): "+
					"put the binary cache elsewhere with %s=/var/cache/slotsync-pg (and rerun scripts/fetch-postgres.sh)",
					r.name, program, dir, mode, EnvCache)
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir || strings.TrimSpace(parent) == "" {
			return nil
		}
		dir = parent
	}
}

// ShellPrefix returns what to put before a shell command so that it runs as the user local
// clusters run as ("runuser -u postgres -- " when the caller is root, "" otherwise): pg_ctl
// refuses root, as an operator's stop and start commands would. runuser is named by its path.
func ShellPrefix() (string, error) {
	r, err := currentRunAs()
	if err != nil || !r.switched {
		return "", err
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil {
		runuser = "/usr/sbin/runuser" // util-linux; a command's own PATH may leave sbin out
	}
	return runuser + " -u " + r.name + " -- ", nil
}

// RunUser is the OS user local clusters run as (peer authentication sees it).
func RunUser() (string, error) {
	r, err := currentRunAs()
	return r.name, err
}

// GiveToRunUser makes the user test clusters run as own path and everything below it (when the
// caller is root), for servers and tools started beside them (an HA manager, say).
func GiveToRunUser(path string) error {
	r, err := currentRunAs()
	if err != nil {
		return err
	}
	return r.chownTree(path)
}

// PgCtl is the shell words that run major's pg_ctl as the user local clusters run as, as an
// operator's stop, start and promote commands would ("runuser -u postgres -- …/pg_ctl").
func PgCtl(major int) (string, error) {
	bin, err := FindBinaries(major)
	if err != nil {
		return "", err
	}
	asUser, err := ShellPrefix()
	if err != nil {
		return "", err
	}
	return asUser + bin.Path("pg_ctl"), nil
}
