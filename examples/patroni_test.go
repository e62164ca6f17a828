package examples

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/integration"
	"github.com/slotsync/slotsync/integration/pgtest"
	"go.yaml.in/yaml/v3"
)

// patroniCluster is a real Patroni cluster on this machine: etcd, two PostgreSQL nodes run by
// Patroni from examples/patroni/patroni.yml, the pre_promote hook from the example, and a
// slotsync daemon beside each node with the same settings (examples/patroni/slotsync.env).
type patroniCluster struct {
	t          *testing.T
	ctx        context.Context
	kind       patroniKind
	dir        string
	prefix     string // runs a shell command as the clusters' user
	user       string // the clusters' user, "uid:gid"
	etcdPort   int
	nodes      []*patroniNode
	processes  []*exec.Cmd
	containers []string
}

// patroniKind is the Patroni and PostgreSQL a cluster runs: Debian bookworm's Patroni 3 on its
// PostgreSQL 15, on this machine; or trixie's Patroni 4 on its PostgreSQL 17, each node in a
// container of the local image scripts/setup.sh builds (host network, the cluster's directory at
// the same path, the clusters' user), the sidecars on this machine beside them.
type patroniKind struct {
	name  string
	major int
	image string // "": the host's Patroni
	// managed: slotsync.env's optional line SLOTSYNC_MANAGE_SYNCHRONIZED_STANDBY_SLOTS=true
	// taken, the choice the example's README offers beside the file as shipped (slotsync owns
	// the list, Patroni's parameters leave it out).
	managed bool
}

var (
	patroni3        = patroniKind{name: "patroni3-pg15", major: 15}
	patroni4        = patroniKind{name: "patroni4-pg17", major: 17, image: "slotsync-postgres:17"}
	patroni4Managed = patroniKind{name: "patroni4-pg17-slotsync-lists-standbys", major: 17, image: "slotsync-postgres:17", managed: true}
)

type patroniNode struct {
	name, config, dataDir, stateDir string
	pgPort, apiPort, metricsPort    int
	patroni, sidecar                *exec.Cmd
	// Logs go to files: PostgreSQL, started by Patroni, inherits the descriptors and outlives a
	// killed Patroni, so a pipe would never close.
	patroniLog, sidecarLog string
}

func readLog(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

// dsn logs in to node n as the example's superuser, with its password (the example's pg_hba
// asks for it over TCP).
func (n *patroniNode) dsn() string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres password=change-me dbname=postgres sslmode=disable connect_timeout=3", n.pgPort)
}

func needPatroni(t *testing.T, kind patroniKind) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test runs a real Patroni cluster")
	}
	need := []string{"patroni", "patronictl", "etcd"}
	if kind.image != "" {
		need = []string{"docker", "etcd"}
	}
	for _, p := range need {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed (scripts/setup.sh installs Debian's patroni, etcd-server, etcd-client and docker.io)", p)
		}
	}
	if kind.image != "" {
		out, err := exec.Command("docker", "run", "--rm", "--entrypoint", "patroni", kind.image, "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "patroni 4.") {
			t.Skipf("no Patroni 4 in the image %s (scripts/setup.sh builds it when Docker runs here): %v %s", kind.image, err, out)
		}
		t.Logf("%s in %s", strings.TrimSpace(string(out)), kind.image)
		return
	}
	if _, err := os.Stat("/usr/lib/postgresql/15/bin/pg_basebackup"); err != nil {
		t.Skip("PostgreSQL 15 from the distribution is not installed (scripts/setup.sh installs it)")
	}
}

// start runs a process group as the clusters' user, appending its output to logFile; it is
// killed when the test ends.
func (c *patroniCluster) start(env []string, logFile string, command string) *exec.Cmd {
	c.t.Helper()
	return c.launch(env, logFile, c.prefix+command)
}

// launch runs shell as a process group of this process's user (a container's client as root).
func (c *patroniCluster) launch(env []string, logFile string, shell string) *exec.Cmd {
	c.t.Helper()
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command("sh", "-c", shell)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.processes = append(c.processes, cmd)
	return cmd
}

// inImage is the docker run command that runs program of the kind's image as the clusters'
// user, on this machine's network, with the cluster's directory at the same path.
func (c *patroniCluster) inImage(name, program string, options ...string) []string {
	args := []string{"docker", "run", "--rm", "--network", "host", "--user", c.user,
		"-v", "/etc/passwd:/etc/passwd:ro", "-v", "/etc/group:/etc/group:ro", "-v", c.dir + ":" + c.dir, "--entrypoint", program}
	if name != "" {
		args = append(args, "--name", name)
	}
	return append(append(args, options...), c.kind.image)
}

// container is the name of node n's container (the image's kind).
func (c *patroniCluster) container(n *patroniNode) string {
	return "slotsync-" + filepath.Base(c.dir) + "-" + n.name
}

// killPostgres kills node n's PostgreSQL with SIGKILL: its container (with Patroni in it), or the
// postmaster named in its pid file, which outlives a killed Patroni.
func (c *patroniCluster) killPostgres(n *patroniNode) error {
	if c.kind.image != "" {
		if out, err := exec.Command("docker", "kill", c.container(n)).CombinedOutput(); err != nil {
			return fmt.Errorf("docker kill %s: %w %s", n.name, err, out)
		}
		return nil
	}
	if data, err := os.ReadFile(filepath.Join(n.dataDir, "postmaster.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.SplitN(string(data), "\n", 2)[0]); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

// patronictl runs patronictl on the cluster's configuration with args.
func (c *patroniCluster) patronictl(args ...string) *exec.Cmd {
	args = append([]string{"-c", c.nodes[0].config}, args...)
	if c.kind.image == "" {
		return exec.CommandContext(c.ctx, "patronictl", args...)
	}
	run := c.inImage("", "patronictl")
	return exec.CommandContext(c.ctx, run[0], append(run[1:], args...)...)
}

func kill(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}
}

func newPatroniCluster(t *testing.T, kind patroniKind) *patroniCluster {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	t.Cleanup(cancel)
	dir, err := os.MkdirTemp("", "slotsync-patroni-")
	if err != nil {
		t.Fatal(err)
	}
	prefix, err := integration.ShellPrefix()
	if err != nil {
		t.Fatal(err)
	}
	c := &patroniCluster{t: t, ctx: ctx, kind: kind, dir: dir, prefix: prefix, etcdPort: pgtest.FreePort(t)}
	runUser, err := integration.RunUser()
	if err != nil {
		t.Fatal(err)
	}
	if u, err := user.Lookup(runUser); err != nil {
		t.Fatal(err)
	} else {
		c.user = u.Uid + ":" + u.Gid
	}
	t.Cleanup(func() {
		if len(c.containers) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, c.containers...)...).Run()
		}
		for i := len(c.processes) - 1; i >= 0; i-- {
			kill(c.processes[i])
		}
		// Postgres started by Patroni lives on if Patroni was killed (in a container it went
		// with the container).
		if kind.image == "" {
			for _, n := range c.nodes {
				_ = c.killPostgres(n)
			}
		}
		time.Sleep(200 * time.Millisecond)
		if t.Failed() {
			for _, n := range c.nodes {
				t.Logf("--- %s patroni log:\n%s\n--- %s slotsync log:\n%s", n.name, tail(readLog(n.patroniLog), 6000), n.name, tail(readLog(n.sidecarLog), 4000))
			}
		}
		os.RemoveAll(dir)
	})
	// The clusters' user runs slotsync (the sidecars, Patroni's hook) from the cluster's directory.
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(binDir, "slotsync")); err != nil || os.WriteFile(filepath.Join(bin, "slotsync"), data, 0o755) != nil {
		t.Fatalf("copy slotsync: %v", err)
	}
	var hook, postBootstrap string
	for _, f := range []struct {
		from string
		to   *string
	}{{"patroni/pre-promote.sh", &hook}, {"patroni/post-bootstrap.sh", &postBootstrap}} {
		*f.to = filepath.Join(dir, filepath.Base(f.from))
		data, err := os.ReadFile(f.from)
		if err != nil || os.WriteFile(*f.to, data, 0o755) != nil {
			t.Fatalf("copy %s: %v", f.from, err)
		}
	}
	// The sidecar's password for the primary (SLOTSYNC_PRIMARY_PASSWORD_FILE), which
	// post-bootstrap.sh gives the role slotsync.
	if err := os.WriteFile(filepath.Join(dir, "password"), []byte("slotsync-test-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	peer := pgtest.FreePort(t)
	c.start(nil, filepath.Join(dir, "etcd.log"), fmt.Sprintf("etcd --name e1 --data-dir %[1]s/etcd --listen-client-urls http://127.0.0.1:%[2]d --advertise-client-urls http://127.0.0.1:%[2]d "+
		"--listen-peer-urls http://127.0.0.1:%[3]d --initial-advertise-peer-urls http://127.0.0.1:%[3]d --initial-cluster e1=http://127.0.0.1:%[3]d", dir, c.etcdPort, peer))

	var template map[string]any
	raw, err := os.ReadFile("patroni/patroni.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &template); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		c.nodes = append(c.nodes, c.configureNode(fmt.Sprintf("n%d", i), raw, runUser, hook, postBootstrap))
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := integration.GiveToRunUser(dir); err != nil {
		t.Fatal(err)
	}
	return c
}

// restartMember is the absolute path of the example's restart script.
func restartMember(t *testing.T) string {
	p, err := filepath.Abs("patroni/restart-member.sh")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// env is what Patroni's service and the sidecar get on node n (examples/patroni/slotsync.env).
// Read from the example with its paths and socket replaced (the socket's port added): the same
// file on every node, as shipped.
func (c *patroniCluster) env(n *patroniNode) []string {
	raw, err := os.ReadFile("patroni/slotsync.env")
	if err != nil {
		c.t.Fatal(err)
	}
	replace := strings.NewReplacer("host=/var/run/postgresql", fmt.Sprintf("host=%s port=%d", c.dir, n.pgPort),
		"/etc/slotsync/password", filepath.Join(c.dir, "password"), "/var/lib/slotsync", n.stateDir,
		"/var/lib/postgresql/15/main", n.dataDir, "/etc/patroni/patroni.yml", n.config, "/etc/slotsync/restart-member.sh", restartMember(c.t),
		"PATH=/usr/local/bin", "PATH="+filepath.Join(c.dir, "bin")+":/usr/local/bin")
	text := replace.Replace(string(raw))
	if c.kind.managed { // the file's optional line, taken as the README says
		const line = "\n#SLOTSYNC_MANAGE_SYNCHRONIZED_STANDBY_SLOTS=true\n"
		if !strings.Contains(text, line) {
			c.t.Fatalf("examples/patroni/slotsync.env has no line %q to take", strings.TrimSpace(line))
		}
		text = strings.Replace(text, line, "\n"+line[2:], 1)
	}
	var env []string
	for _, line := range strings.Split(text, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			env = append(env, line)
		}
	}
	// The example's hook policy is kept as shipped (proceed: the test checks that every
	// promotion was on READY); only the time between two restarts of a replica is shortened
	// (the test has minutes, not the default 5 between them).
	return append(env, "SLOTSYNC_MIN_RESTART_INTERVAL=5s")
}

// up starts node n's Patroni and its slotsync sidecar.
func (c *patroniCluster) up(n *patroniNode) {
	if c.kind.image == "" {
		n.patroni = c.start(c.env(n), n.patroniLog, "patroni "+n.config)
	} else {
		// Patroni's service environment, as the example's EnvironmentFile gives it.
		envFile := filepath.Join(c.dir, n.name+".env")
		if err := os.WriteFile(envFile, []byte(strings.Join(c.env(n), "\n")+"\n"), 0o644); err != nil {
			c.t.Fatal(err)
		}
		name := c.container(n)
		_ = exec.Command("docker", "rm", "-f", name).Run()
		c.containers = append(c.containers, name)
		run := append(c.inImage(name, "patroni", "--env-file", envFile), n.config)
		n.patroni = c.launch(nil, n.patroniLog, strings.Join(run, " "))
	}
	// The daemon as the example's systemd unit runs it (its default pass interval); only the
	// metrics address is the test's.
	n.sidecar = c.start(c.env(n), n.sidecarLog, fmt.Sprintf("slotsync run --listen 127.0.0.1:%d", n.metricsPort))
}

// crash kills node n as a machine loss would: Patroni, PostgreSQL and the sidecar, with SIGKILL.
func (c *patroniCluster) crash(n *patroniNode) {
	kill(n.patroni)
	kill(n.sidecar)
	if err := c.killPostgres(n); err != nil {
		c.t.Fatal(err)
	}
}

type member struct {
	Member, Role, State string
}

func (c *patroniCluster) members() []member {
	out, err := c.patronictl("list", "-f", "json").Output()
	if err != nil {
		return nil
	}
	var ms []member
	_ = json.Unmarshal(out, &ms)
	return ms
}

// waitRoles waits until leader leads, out of recovery (Patroni lists a leader whose
// pre_promote hook still runs as one), and every node in replicas streams from it.
func (c *patroniCluster) waitRoles(leader *patroniNode, replicas ...*patroniNode) {
	c.t.Helper()
	c.eventually(3*time.Minute, fmt.Sprintf("%s leading", leader.name), func() bool {
		ok := 0
		for _, m := range c.members() {
			switch {
			case m.Member == leader.name && m.Role == "Leader" && m.State == "running":
				if primary := c.queryInts(leader.dsn(), "SELECT array_agg(1) WHERE NOT pg_is_in_recovery()"); len(primary) == 1 {
					ok++
				}
			case m.Role == "Replica" && (m.State == "streaming" || m.State == "running"):
				for _, r := range replicas {
					if r.name == m.Member {
						ok++
					}
				}
			}
		}
		return ok == 1+len(replicas)
	})
}

func (c *patroniCluster) eventually(limit time.Duration, what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("waited %s for %s; members: %+v", limit, what, c.members())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (c *patroniCluster) exec(dsn, sql string, args ...any) {
	c.t.Helper()
	conn, err := pgx.Connect(c.ctx, dsn)
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(c.ctx, sql, args...); err != nil {
		c.t.Fatalf("%s: %v", sql, err)
	}
}

func (c *patroniCluster) queryInts(dsn, sql string) []int64 {
	c.t.Helper()
	conn, err := pgx.Connect(c.ctx, dsn)
	if err != nil {
		return nil
	}
	defer conn.Close(context.Background())
	var out []int64
	_ = conn.QueryRow(c.ctx, sql).Scan(&out)
	return out
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestPatroniFailoverAndSwitchover: a real Patroni cluster with slotsync beside each node and a
// native subscriber on a third server, with Debian bookworm's Patroni 3 on PostgreSQL 15 and
// trixie's Patroni 4 on PostgreSQL 17. The leader is killed -9: Patroni promotes the replica
// (the pre_promote hook lets it only because every copy is READY, judged without the dead
// primary), the slots are there, and the re-pointed subscriber gets every row exactly once. The
// old leader rejoins as a replica (pg_rewind), its sidecar takes over its stale slots, and a
// planned patronictl switchover moves the leader back, again with every row exactly once. On 17
// a second subscription's slot has failover = true: the server syncs it (the example's
// sync_replication_slots), slotsync copies the other and drops the stale failover slot the old
// leader kept (the example's SLOTSYNC_DROP_STALE), so the server syncs it there again. Patroni 4
// runs once more with the README's other choice for synchronized_standby_slots, slotsync's
// --manage-synchronized-standby-slots on every node: the same failovers, then the leader lists
// the replica's slot and keeps it through Patroni's reload.
func TestPatroniFailoverAndSwitchover(t *testing.T) {
	pgtest.Slow(t)
	for _, kind := range []patroniKind{patroni3, patroni4, patroni4Managed} {
		t.Run(kind.name, func(t *testing.T) { patroniFailoverAndSwitchover(t, kind) })
	}
}

// show is a setting of node n.
func (c *patroniCluster) show(n *patroniNode, setting string) string {
	c.t.Helper()
	var v string
	conn, err := pgx.Connect(c.ctx, n.dsn())
	if err == nil {
		err = conn.QueryRow(c.ctx, "SHOW "+setting).Scan(&v)
		conn.Close(context.Background())
	}
	if err != nil {
		c.t.Fatalf("SHOW %s on %s: %v", setting, n.name, err)
	}
	return v
}

// standbyListed: with --manage-synchronized-standby-slots, the leader's
// synchronized_standby_slots comes to list the replica's physical slot (rule 10), stays so
// through Patroni's own reload of its configuration, and the consumers of both slots still get
// every row exactly once: Patroni and slotsync do not fight over it.
func (s *patroniSubscriber) standbyListed(leader, replica *patroniNode) {
	c := s.c
	c.t.Helper()
	want := c.show(replica, "primary_slot_name")
	if want == "" {
		c.t.Fatalf("%s streams through no physical slot", replica.name)
	}
	c.eventually(time.Minute, "the leader's synchronized_standby_slots to list "+want, func() bool {
		return c.show(leader, "synchronized_standby_slots") == want
	})
	if out, err := c.patronictl("reload", "--force", "pg-ha").CombinedOutput(); err != nil {
		c.t.Fatalf("patronictl reload: %v\n%s", err, out)
	}
	time.Sleep(5 * time.Second) // Patroni applies its configuration again; slotsync makes passes
	if got := c.show(leader, "synchronized_standby_slots"); got != want {
		c.t.Errorf("after Patroni's reload the leader's synchronized_standby_slots is %q, want %q", got, want)
	}
	s.write(leader, 100)
	s.exactlyOnce(leader, "with the replica listed")
}

// patroniSubscriber is the native subscriber beside a Patroni cluster: table t through slot sub1
// (slotsync's copy), and on 17+ table t2 through the failover slot sub2 (the server's).
type patroniSubscriber struct {
	c    *patroniCluster
	dsn  string
	subs []patroniSubscription
	next int
}

// patroniSubscription is one subscription: its table, and the slot it reads on the leader.
type patroniSubscription struct {
	table, slot string
	failover    bool
}

// publisher is the subscriptions' connection string for leader.
func publisher(leader *patroniNode) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres", leader.pgPort)
}

func newPatroniSubscriber(t *testing.T, c *patroniCluster, leader *patroniNode) *patroniSubscriber {
	sub, err := integration.NewPair(c.ctx, integration.Options{Major: 15, NoStandby: true, BaseDir: c.dir, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	s := &patroniSubscriber{c: c, dsn: sub.Primary.DSN("postgres"), subs: []patroniSubscription{{table: "t", slot: "sub1"}}, next: 1}
	if c.kind.major >= 17 {
		s.subs = append(s.subs, patroniSubscription{table: "t2", slot: "sub2", failover: true})
	}
	for _, sb := range s.subs {
		c.exec(leader.dsn(), fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY)", sb.table))
		c.exec(leader.dsn(), fmt.Sprintf("CREATE PUBLICATION pub_%s FOR TABLE %s", sb.table, sb.table))
		if sb.failover {
			c.exec(leader.dsn(), "SELECT pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)", sb.slot)
		} else {
			c.exec(leader.dsn(), "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", sb.slot)
		}
		c.exec(s.dsn, fmt.Sprintf("CREATE TABLE %s (id int)", sb.table)) // no key: a row delivered twice shows as a duplicate
		c.exec(s.dsn, fmt.Sprintf("CREATE SUBSCRIPTION %s CONNECTION '%s' PUBLICATION pub_%s "+
			"WITH (create_slot = false, slot_name = '%s', copy_data = false)", sb.slot, publisher(leader), sb.table, sb.slot))
	}
	return s
}

// write inserts n rows into each table on the leader.
func (s *patroniSubscriber) write(leader *patroniNode, n int) {
	for _, sb := range s.subs {
		s.c.exec(leader.dsn(), fmt.Sprintf("INSERT INTO %s SELECT generate_series($1::int, $2::int)", sb.table), s.next, s.next+n-1)
	}
	s.next += n
}

// follow points every subscription at leader.
func (s *patroniSubscriber) follow(leader *patroniNode) {
	for _, sb := range s.subs {
		s.c.exec(s.dsn, fmt.Sprintf("ALTER SUBSCRIPTION %s CONNECTION '%s'", sb.slot, publisher(leader)))
	}
}

// exactlyOnce waits until the subscriber has every row the leader has, in each table, then
// checks that it has each exactly once.
func (s *patroniSubscriber) exactlyOnce(leader *patroniNode, when string) {
	s.c.t.Helper()
	for _, sb := range s.subs {
		table := sb.table
		query := fmt.Sprintf("SELECT array_agg(id ORDER BY id) FROM %s", table)
		want := s.c.queryInts(leader.dsn(), query)
		s.c.eventually(time.Minute, "the subscriber to catch up on "+table+" "+when, func() bool {
			got := s.c.queryInts(s.dsn, query)
			return len(got) >= len(want) && len(want) > 0
		})
		if got := s.c.queryInts(s.dsn, query); fmt.Sprint(got) != fmt.Sprint(want) {
			s.c.t.Fatalf("%s: the subscriber has %d rows of %s %v, the leader %d rows %v: lost or repeated changes", when, len(got), table, got, len(want), want)
		}
	}
}

// ready waits until slotsync's gate on replica n says READY, the subscriber confirming as rows flow.
func (s *patroniSubscriber) ready(leader, n *patroniNode) {
	s.c.t.Helper()
	s.c.eventually(3*time.Minute, "the copies on "+n.name+" to be READY", func() bool {
		s.write(leader, 1)
		cmd := exec.Command(filepath.Join(binDir, "slotsync"), "check", "--standby", n.dsn(), "--state-dir", n.stateDir)
		return cmd.Run() == nil
	})
}

func patroniFailoverAndSwitchover(t *testing.T, kind patroniKind) {
	needPatroni(t, kind)
	c := newPatroniCluster(t, kind)
	n1, n2 := c.nodes[0], c.nodes[1]
	c.up(n1)
	c.waitRoles(n1)
	c.up(n2)
	c.waitRoles(n1, n2)
	// The example's sync_replication_slots is 17+: Patroni leaves it out on older majors.
	if kind.major < 17 && !strings.Contains(readLog(n1.patroniLog), "Removing unexpected parameter=sync_replication_slots") {
		t.Errorf("Patroni on %d did not say it leaves sync_replication_slots out:\n%s", kind.major, tail(readLog(n1.patroniLog), 3000))
	}
	doctor, _ := exec.Command(filepath.Join(binDir, "slotsync"), "doctor", "--standby", n2.dsn()).CombinedOutput()
	if !strings.Contains(string(doctor), "ha_manager") || !strings.Contains(string(doctor), "ignore_slots") {
		t.Errorf("doctor on a Patroni replica must warn about ignore_slots:\n%s", doctor)
	}
	s := newPatroniSubscriber(t, c, n1)
	s.write(n1, 100)
	s.exactlyOnce(n1, "before the failover")
	s.ready(n1, n2)
	s.exactlyOnce(n1, "before the failover")
	time.Sleep(2 * time.Second) // two passes: the sidecar records the last observation of the primary

	// Unplanned failover: the leader's machine is gone.
	c.crash(n1)
	c.waitRoles(n2)
	for _, sb := range s.subs {
		if got := c.queryInts(n2.dsn(), fmt.Sprintf("SELECT array_agg(1) FROM pg_replication_slots WHERE slot_name = '%s'", sb.slot)); len(got) != 1 {
			t.Fatalf("the promoted node has no slot %s", sb.slot)
		}
	}
	if !strings.Contains(readLog(n2.patroniLog), "JUDGED WITHOUT THE PRIMARY") {
		t.Error("the hook's answer (judged without the primary) is not in Patroni's log")
	}
	s.follow(n2)
	s.write(n2, 100)
	s.exactlyOnce(n2, "after the failover")

	// The old leader comes back as a replica; its sidecar manages its stale slots.
	c.up(n1)
	c.waitRoles(n2, n1)
	s.write(n2, 100)
	s.exactlyOnce(n2, "before the switchover")
	// A switchover asked right after a burst of writes may find a copy NOT READY for a moment
	// (its catalog_xmin moved and the standby's feedback not yet seen holding it, up to
	// wal_receiver_status_interval): the hook would then promote anyway, by the example's policy.
	// The switchover is asked once the copies are READY, as an operator would.
	s.ready(n2, n1)
	time.Sleep(2 * time.Second) // two passes: the sidecar records the last observation of the primary

	// Planned switchover back to n1 (Patroni 4 names the leader --leader, 3 --master).
	leaderFlag := map[bool]string{true: "--master", false: "--leader"}[kind.image == ""]
	if out, err := c.patronictl("switchover", leaderFlag, n2.name, "--candidate", n1.name, "--force").CombinedOutput(); err != nil {
		t.Fatalf("patronictl switchover: %v\n%s", err, out)
	}
	c.waitRoles(n1, n2)
	s.follow(n1)
	s.write(n1, 100)
	s.exactlyOnce(n1, "after the switchover")

	// Patroni 4 never sets synchronized_standby_slots (slotsync owns it, and only with
	// --manage-synchronized-standby-slots, which the example leaves off): after the failover
	// and the switchover the leader's is still empty; with the flag, it lists the replica's
	// slot, and Patroni's reload leaves it so.
	if kind.major >= 17 && !kind.managed {
		if sss := c.show(n1, "synchronized_standby_slots"); sss != "" {
			t.Errorf("synchronized_standby_slots on the leader: %q; want it empty, set by no one", sss)
		}
	}
	if kind.managed {
		s.standbyListed(n1, n2)
	}

	// The example's own policy (proceed) is in force: each promotion above must have been on
	// the gate's READY, never a promotion "anyway".
	for _, n := range c.nodes {
		log := readLog(n.patroniLog)
		t.Logf("%s: the hook said\n%s", n.name, hookLines(log))
		if strings.Contains(log, "PROMOTING ANYWAY") {
			t.Errorf("%s: the hook promoted without a READY gate:\n%s", n.name, hookLines(log))
		}
	}
}

// hookLines is what the pre_promote hook said in a Patroni log.
func hookLines(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "slotsync pre_promote") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// configureNode writes node name's Patroni configuration: the example's patroni.yml (raw) as
// shipped, with only addresses, ports, paths and the OS user of the peer map (runUser) replaced,
// and the example's hooks.
func (c *patroniCluster) configureNode(name string, raw []byte, runUser, hook, postBootstrap string) *patroniNode {
	c.t.Helper()
	n := &patroniNode{name: name, pgPort: pgtest.FreePort(c.t), apiPort: pgtest.FreePort(c.t), metricsPort: pgtest.FreePort(c.t)}
	n.patroniLog, n.sidecarLog = filepath.Join(c.dir, n.name+"-patroni.log"), filepath.Join(c.dir, n.name+"-slotsync.log")
	n.dataDir, n.stateDir, n.config = filepath.Join(c.dir, n.name), filepath.Join(c.dir, n.name+"-slotsync"), filepath.Join(c.dir, n.name+".yml")
	if err := os.Mkdir(n.stateDir, 0o700); err != nil {
		c.t.Fatal(err)
	}
	var cfg map[string]any
	_ = yaml.Unmarshal(raw, &cfg) // a fresh copy of the example
	cfg["name"] = n.name
	cfg["restapi"] = map[string]any{"listen": fmt.Sprintf("127.0.0.1:%d", n.apiPort), "connect_address": fmt.Sprintf("127.0.0.1:%d", n.apiPort)}
	cfg["etcd3"] = map[string]any{"hosts": fmt.Sprintf("127.0.0.1:%d", c.etcdPort)}
	// The example's authentication as shipped: only addresses, paths and the OS user of the
	// peer map (the clusters' user here) are replaced.
	boot := cfg["bootstrap"].(map[string]any)
	boot["post_bootstrap"] = postBootstrap
	for k, line := range boot["pg_hba"].([]any) {
		boot["pg_hba"].([]any)[k] = strings.ReplaceAll(line.(string), "0.0.0.0/0", "127.0.0.1/32")
	}
	pg := cfg["postgresql"].(map[string]any)
	for k, line := range pg["pg_ident"].([]any) {
		pg["pg_ident"].([]any)[k] = strings.Replace(line.(string), " postgres ", " "+runUser+" ", 1)
	}
	pg["listen"] = fmt.Sprintf("127.0.0.1:%d", n.pgPort)
	pg["connect_address"] = fmt.Sprintf("127.0.0.1:%d", n.pgPort)
	pg["data_dir"], pg["pgpass"], pg["pre_promote"] = n.dataDir, filepath.Join(c.dir, n.name+".pgpass"), hook
	pg["bin_dir"] = fmt.Sprintf("/usr/lib/postgresql/%d/bin", c.kind.major)
	pg["parameters"] = map[string]any{"unix_socket_directories": c.dir}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(n.config, out, 0o600); err != nil {
		c.t.Fatal(err)
	}
	return n
}
