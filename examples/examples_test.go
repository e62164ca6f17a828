package examples

import (
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "sigs.k8s.io/yaml"

	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/slotsync/slotsync/integration/pgtest"
	slotsync "github.com/slotsync/slotsync/sync"
	"go.yaml.in/yaml/v3"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "slotsync-examples-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "slotsync"), "../cmd/slotsync").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// knownEnv lists every SLOTSYNC_* variable the commands document in their help.
func knownEnv(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{}
	for _, cmd := range []string{"run", "check", "status", "doctor", "drill"} {
		out, _ := exec.Command(filepath.Join(binDir, "slotsync"), cmd, "--help").Output()
		for _, m := range regexp.MustCompile(`\$(SLOTSYNC_[A-Z_]+)`).FindAllStringSubmatch(string(out), -1) {
			known[m[1]] = true
		}
	}
	if len(known) < 10 {
		t.Fatalf("help output lists too few variables: %v", known)
	}
	return known
}

// checkEnvNames fails for any SLOTSYNC_* name in text that no command knows.
func checkEnvNames(t *testing.T, file string, known map[string]bool) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`SLOTSYNC_[A-Z_]+`).FindAllString(string(data), -1) {
		if !known[m] && m != "SLOTSYNC_BACKEND" && m != "SLOTSYNC_WAIT" {
			t.Errorf("%s uses %s, which no command knows", file, m)
		}
	}
}

func readYAML(t *testing.T, file string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("%s: %v", file, err)
		}
		docs = append(docs, doc)
	}
	return docs
}

func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			s, _ := v.([]any)
			if k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

func TestEnvNamesInExamplesExist(t *testing.T) {
	known := knownEnv(t)
	// The Patroni hook's own settings (its policy, where slotsync is).
	known["SLOTSYNC_ON_NOT_READY"], known["SLOTSYNC_BIN"] = true, true
	for _, f := range []string{"docker-compose/compose.yaml", "kubernetes/slotsync-sidecar.yaml", "patroni/pre-promote.sh",
		"patroni/slotsync.env", "systemd/slotsync.env", "github-actions/failover-drill.yml"} {
		checkEnvNames(t, f, known)
	}
}

func TestCompose(t *testing.T) {
	doc := readYAML(t, "docker-compose/compose.yaml")[0]
	for _, svc := range []string{"primary", "standby", "slotsync"} {
		if dig(doc, "services", svc) == nil {
			t.Fatalf("service %s missing", svc)
		}
	}
	if dig(doc, "services", "slotsync", "environment", "SLOTSYNC_STANDBY") == nil || dig(doc, "services", "slotsync", "build") != "../.." {
		t.Fatal("the slotsync service must be built from the repository and point at the standby")
	}
	for _, f := range []string{"docker-compose/init-primary.sh", "docker-compose/slotsync-password.txt", "../Dockerfile"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("compose refers to %s: %v", f, err)
		}
	}
	if out, err := exec.Command("sh", "-n", "docker-compose/init-primary.sh").CombinedOutput(); err != nil {
		t.Errorf("init-primary.sh: %v %s", err, out)
	}
}

func TestKubernetesSidecar(t *testing.T) {
	docs := readYAML(t, "kubernetes/slotsync-sidecar.yaml")
	var sts map[string]any
	for _, d := range docs {
		if d["kind"] == "StatefulSet" {
			sts = d
		}
	}
	if sts == nil {
		t.Fatal("no StatefulSet")
	}
	side := dig(sts, "spec", "template", "spec", "initContainers", 0)
	if dig(side, "name") != "slotsync" || dig(side, "restartPolicy") != "Always" {
		t.Fatalf("slotsync must be a native sidecar (init container, restartPolicy Always): %v", side)
	}
	// A native sidecar's readiness is the pod's: a readiness probe on it would take the standby
	// out of its Services whenever slotsync is not ready.
	if dig(side, "readinessProbe") != nil || dig(side, "startupProbe") != nil {
		t.Fatal("the sidecar must have no readiness or startup probe: they gate the pod's readiness")
	}
	if dig(side, "livenessProbe", "httpGet", "path") != "/livez" {
		t.Fatal("the sidecar's liveness probe must use /livez (never /promotion-ready)")
	}
	port := dig(side, "ports", 0, "containerPort")
	var listen string
	for _, e := range dig(side, "env").([]any) {
		if dig(e, "name") == "SLOTSYNC_LISTEN" {
			listen = dig(e, "value").(string)
		}
	}
	if !strings.HasSuffix(listen, ":"+strconv.Itoa(port.(int))) || strings.HasPrefix(listen, "127.") {
		t.Fatalf("SLOTSYNC_LISTEN %q must serve the gate port %v to the pod network", listen, port)
	}
	// The "restricted" Pod Security profile, for every container.
	pod := dig(sts, "spec", "template", "spec")
	if dig(pod, "securityContext", "seccompProfile", "type") != "RuntimeDefault" || dig(pod, "securityContext", "runAsNonRoot") != true {
		t.Error("the pod needs seccompProfile RuntimeDefault and runAsNonRoot")
	}
	if dig(pod, "securityContext", "fsGroup") == nil {
		t.Error("the pod needs an fsGroup so the state volume is writable")
	}
	containers := append(dig(pod, "initContainers").([]any), dig(pod, "containers").([]any)...)
	for _, c := range containers {
		sc := dig(c, "securityContext")
		if dig(sc, "allowPrivilegeEscalation") != false || dig(sc, "capabilities", "drop", 0) != "ALL" || dig(sc, "runAsNonRoot") != true {
			t.Errorf("container %v is not restricted: %v", dig(c, "name"), sc)
		}
	}
	if dig(side, "securityContext", "readOnlyRootFilesystem") != true || dig(side, "resources", "limits", "memory") == nil || dig(side, "resources", "requests", "cpu") == nil {
		t.Error("the sidecar needs a read-only root filesystem, requests and limits")
	}
	mounted := false
	for _, m := range dig(side, "volumeMounts").([]any) {
		if dig(m, "mountPath") == "/var/lib/slotsync" {
			mounted = true
		}
	}
	if !mounted {
		t.Error("the sidecar needs a writable volume at its state directory")
	}
	for _, e := range dig(side, "env").([]any) {
		if dig(e, "name") == "SLOTSYNC_PRIMARY" {
			t.Error("SLOTSYNC_PRIMARY pins the primary: the sidecar would not follow a failover")
		}
	}
}

// TestKubernetesManifestsStrict decodes every document of the Kubernetes example into its API
// type, refusing unknown or misplaced fields (what kubectl apply --validate=strict refuses),
// and checks that the postgres container makes itself a streaming standby.
func TestKubernetesManifestsStrict(t *testing.T) {
	data, err := os.ReadFile("kubernetes/slotsync-sidecar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sts *appsv1.StatefulSet
	for i, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := k8syaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var obj any
		switch meta.APIVersion + "/" + meta.Kind {
		case "v1/Secret":
			obj = &corev1.Secret{}
		case "apps/v1/StatefulSet":
			sts = &appsv1.StatefulSet{}
			obj = sts
		default:
			t.Fatalf("document %d: unexpected %s %s", i, meta.APIVersion, meta.Kind)
		}
		if err := k8syaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("document %d (%s): %v", i, meta.Kind, err)
		}
	}
	if sts == nil {
		t.Fatal("no StatefulSet")
	}
	pod := sts.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].RestartPolicy == nil || *pod.InitContainers[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatal("slotsync must be a native sidecar")
	}
	pg := pod.Containers[0]
	script := strings.Join(pg.Command, " ")
	for _, want := range []string{"pg_basebackup", " -R ", "-S ", "hot_standby_feedback=on"} {
		if !strings.Contains(script, want) {
			t.Errorf("the postgres container does not make itself a standby: no %q in %q", want, script)
		}
	}
	claims := map[string]bool{}
	for _, c := range sts.Spec.VolumeClaimTemplates {
		claims[c.Name] = true
	}
	for _, m := range pg.VolumeMounts {
		if !claims[m.Name] {
			t.Errorf("the postgres container mounts %s, which is no volume claim", m.Name)
		}
	}
}

// preHook runs the Patroni example's pre-promote hook with env and returns its exit code and
// output.
func preHook(t *testing.T, env ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("sh", "patroni/pre-promote.sh")
	cmd.Env = append([]string{"PATH=" + binDir + ":/usr/bin:/bin", "SLOTSYNC_WAIT=1s"}, env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func TestPatroniHookPolicy(t *testing.T) {
	if out, err := exec.Command("sh", "-n", "patroni/pre-promote.sh").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	run := func(env ...string) (int, string) { return preHook(t, env...) }
	unreachable := []string{"SLOTSYNC_STANDBY=host=127.0.0.1 port=1 connect_timeout=1", "SLOTSYNC_STATE_DIR=" + t.TempDir()}
	// The gate cannot tell: block refuses the promotion, proceed promotes and says so loudly.
	if code, out := run(append(unreachable, "SLOTSYNC_ON_NOT_READY=block")...); code != 1 || !strings.Contains(out, "BLOCKING") {
		t.Fatalf("block policy: %d\n%s", code, out)
	}
	if code, out := run(unreachable...); code != 0 || !strings.Contains(out, "PROMOTING ANYWAY") {
		t.Fatalf("proceed policy (the default): %d\n%s", code, out)
	}
	// NOT READY: the hook says what is at risk for each slot (its reason codes), not only that
	// consumers must resnapshot (issue: a copy 752 bytes ahead made it call for a resnapshot).
	notReady := filepath.Join(t.TempDir(), "slotsync")
	answer := `{"ready":false,"exit_code":1,"not_ready":["cdc","sub"],"at_risk":["cdc: copy_behind_consumer","sub: missing"]}`
	if err := os.WriteFile(notReady, []byte("#!/bin/sh\necho '"+answer+"'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, out := run(append(unreachable, "SLOTSYNC_BIN="+notReady)...); code != 0 || !strings.Contains(out, "at risk: cdc: copy_behind_consumer; sub: missing") {
		t.Fatalf("the hook on NOT READY does not say what is at risk: %d\n%s", code, out)
	}
	// READY: the hook says what consumers that resume from their slot's position may receive
	// again (the answer as check --json prints it: the gate's answer type, indented).
	readyAnswer := slotsync.Answer{Ready: true, NotReady: []string{}, AtRisk: []string{}, Redelivery: []slotsync.Redelivery{
		{Slot: "cdc", From: 0x3000000, To: 0x3002000, Bytes: 8192}, {Slot: "sub", From: 0x3000000, To: 0x3000000, AtLeast: true}}}
	readyJSON, err := json.MarshalIndent(readyAnswer, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(t.TempDir(), "slotsync")
	if err := os.WriteFile(ready, []byte("#!/bin/sh\ncat <<'EOF'\n"+string(readyJSON)+"\nEOF\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, out := run(append(unreachable, "SLOTSYNC_BIN="+ready)...); code != 0 || !strings.Contains(out, "may receive again: cdc 8192 B, sub at least 0 B") {
		t.Fatalf("the hook on READY does not say what may be received again: %d\n%s", code, out)
	}
	// Patroni's environment without slotsync's settings: the hook names what is missing.
	if code, out := run("SLOTSYNC_STANDBY=host=x"); code == 0 || !strings.Contains(out, "SLOTSYNC_STATE_DIR") {
		t.Fatalf("without SLOTSYNC_STATE_DIR: %d\n%s", code, out)
	}
	if code, out := run(append(unreachable, "SLOTSYNC_ON_NOT_READY=maybe")...); code == 0 || !strings.Contains(out, "proceed, block or block-for") {
		t.Fatalf("an unknown policy: %d\n%s", code, out)
	}
	if code, out := run(append(unreachable, "SLOTSYNC_ON_NOT_READY=block-for=soon")...); code == 0 || !strings.Contains(out, "block-for=<seconds>s") {
		t.Fatalf("a bad block-for: %d\n%s", code, out)
	}
	// The shared env file may say SLOTSYNC_JSON=true: the hook reads JSON anyway.
	if code, out := run(append(unreachable, "SLOTSYNC_JSON=true", "SLOTSYNC_ON_NOT_READY=block")...); code != 1 || !strings.Contains(out, "BLOCKING") {
		t.Fatalf("with SLOTSYNC_JSON=true: %d\n%s", code, out)
	}
}

// TestPatroniHookBlockFor: with block-for, the hook refuses until the deadline kept in the state
// directory, then promotes.
func TestPatroniHookBlockFor(t *testing.T) {
	run := func(env ...string) (int, string) { return preHook(t, env...) }
	state := t.TempDir()
	blockFor := []string{"SLOTSYNC_STANDBY=host=127.0.0.1 port=1 connect_timeout=1", "SLOTSYNC_STATE_DIR=" + state, "SLOTSYNC_ON_NOT_READY=block-for=2s"}
	if code, out := run(blockFor...); code != 1 || !strings.Contains(out, "BLOCKING the promotion of this node for") {
		t.Fatalf("block-for, first call: %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(state, "pre-promote-deadline")); err != nil {
		t.Fatalf("no deadline kept: %v", err)
	}
	time.Sleep(2100 * time.Millisecond)
	if code, out := run(blockFor...); code != 0 || !strings.Contains(out, "PROMOTING ANYWAY") {
		t.Fatalf("block-for, past the deadline: %d\n%s", code, out)
	}
	// Patroni asks again a TTL or so after a refusal (30 s by default), later than a short
	// block-for: past the deadline, it promotes (a deadline 25 s old is this failover's).
	if err := os.WriteFile(filepath.Join(state, "pre-promote-deadline"), []byte(fmt.Sprint(time.Now().Unix()-25)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := run(blockFor...); code != 0 || !strings.Contains(out, "PROMOTING ANYWAY") {
		t.Fatalf("block-for, asked again 25 s past the deadline: %d\n%s", code, out)
	}
	// A deadline left by an earlier failover (an hour old) starts a new one.
	if err := os.WriteFile(filepath.Join(state, "pre-promote-deadline"), []byte(fmt.Sprint(time.Now().Unix()-3600)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := run(blockFor...); code != 1 || !strings.Contains(out, "BLOCKING the promotion of this node for 2s more") {
		t.Fatalf("block-for, an earlier failover's deadline: %d\n%s", code, out)
	}
}

// TestPatroniHookPrimaryAlive: the gate says the old primary is alive (a stand-in slotsync
// answering as check --json does then): blocked whatever the policy.
func TestPatroniHookPrimaryAlive(t *testing.T) {
	run := func(env ...string) (int, string) { return preHook(t, env...) }
	fake := filepath.Join(t.TempDir(), "slotsync")
	script := "#!/bin/sh\nprintf '{\\n  \"ready\": false,\\n  \"exit_code\": 2,\\n  \"cannot_tell\": true,\\n  \"primary_alive\": true,\\n  \"not_ready\": []\\n}\\n'\nexit 2\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, policy := range []string{"proceed", "block-for=1s"} {
		env := []string{"SLOTSYNC_BIN=" + fake, "SLOTSYNC_STANDBY=x", "SLOTSYNC_STATE_DIR=" + t.TempDir(), "SLOTSYNC_ON_NOT_READY=" + policy}
		if code, out := run(env...); code != 1 || !strings.Contains(out, "old primary is alive") {
			t.Fatalf("%s with the primary alive: %d\n%s", policy, code, out)
		}
	}
}

// TestSystemdStatefileDropIn: the state-file drop-in lets the unit write the standby's data
// directory and restarts the standby through the standby's own unit (never pg_ctl: a postmaster
// started by slotsync would live in slotsync's cgroup), and the polkit rule allows exactly those
// two verbs on that unit to the unit's user.
func TestSystemdStatefileDropIn(t *testing.T) {
	dropIn, err := os.ReadFile("systemd/statefile.conf")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	var rw, runAs string
	for _, line := range strings.Split(string(dropIn), "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "ReadWritePaths="); ok {
			rw = v
		}
		if v, ok := strings.CutPrefix(line, "User="); ok {
			runAs = v
		}
		if v, ok := strings.CutPrefix(line, "Environment="); ok {
			k, val, _ := strings.Cut(strings.Trim(v, `"`), "=")
			env[k] = val
		}
	}
	known := knownEnv(t)
	for k := range env {
		if !known[k] && k != "STANDBY_UNIT" {
			t.Errorf("statefile.conf sets %s, which slotsync does not read", k)
		}
	}
	if runAs != "postgres" {
		t.Errorf("statefile.conf runs slotsync as %q, not the data directory's owner (postgres)", runAs)
	}
	// A stop in the middle of a standby restart waits for the restart: systemd must not kill
	// slotsync between the standby's stop and its start.
	if m := regexp.MustCompile(`(?m)^TimeoutStopSec=(\S+)`).FindStringSubmatch(string(dropIn)); m == nil {
		t.Error("statefile.conf keeps the base unit's TimeoutStopSec, too short to finish a standby restart")
	} else if d, err := time.ParseDuration(strings.Replace(m[1], "min", "m", 1)); err != nil || d < 2*time.Minute {
		t.Errorf("statefile.conf TimeoutStopSec=%s: give a standby restart at least 2 minutes", m[1])
	}
	if rw == "" || !strings.HasPrefix(env["SLOTSYNC_STANDBY_DATA_DIR"], rw+"/") {
		t.Errorf("ReadWritePaths=%q does not cover the data directory %q (ProtectSystem=strict makes it read-only)", rw, env["SLOTSYNC_STANDBY_DATA_DIR"])
	}
	if env["SLOTSYNC_RESTART"] != "command" {
		t.Errorf("SLOTSYNC_RESTART=%q: restart the standby through its unit (command), not pg_ctl", env["SLOTSYNC_RESTART"])
	}
	unit := ""
	for _, verb := range []string{"stop", "start"} {
		// The commands run with sh -c, in the unit's environment: one variable names the unit.
		f := strings.Fields(os.Expand(env["SLOTSYNC_"+strings.ToUpper(verb)+"_COMMAND"], func(k string) string { return env[k] }))
		if len(f) != 3 || f[0] != "systemctl" || f[1] != verb {
			t.Fatalf("the %s command %q is not systemctl %s <unit>", verb, f, verb)
		}
		if unit != "" && f[2] != unit {
			t.Errorf("stop and start name different units: %s, %s", unit, f[2])
		}
		unit = f[2]
	}
	rules, err := os.ReadFile("systemd/50-slotsync-postgresql.rules")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`var STANDBY_UNIT = "` + unit + `";`, `action.lookup("unit") == STANDBY_UNIT`, `"stop"`, `"start"`,
		`subject.user == "` + runAs + `"`, "org.freedesktop.systemd1.manage-units"} {
		if !strings.Contains(string(rules), want) {
			t.Errorf("the polkit rule does not hold %s", want)
		}
	}
}

// TestSystemdUnitHardened: a configuration error (exit 3) does not restart the unit forever;
// the unit runs as the slotsync user, not postgres, with the hardening systemd-analyze security
// asks for (exposure at most 3.0), and its env file logs in as the slotsync role. Its state
// directory is readable by the group Patroni's hook runs as (postgres), by no one else.
func TestSystemdUnitHardened(t *testing.T) {
	unit, err := os.ReadFile("systemd/slotsync.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RestartPreventExitStatus=3", "User=slotsync", "Group=postgres", "UMask=0027", "StateDirectoryMode=0750", "ExecReload=/bin/kill -HUP $MAINPID"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).Match(unit) {
			t.Errorf("slotsync.service lacks %s", want)
		}
	}
	env, _ := os.ReadFile("systemd/slotsync.env")
	for _, want := range []string{"user=slotsync", "SLOTSYNC_PRIMARY_USER=slotsync"} {
		if !strings.Contains(string(env), want) {
			t.Errorf("slotsync.env does not log in as the slotsync role: no %s", want)
		}
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed: the exposure is not measured here")
	}
	dir := t.TempDir()
	envPath, _ := filepath.Abs("systemd/slotsync.env")
	text := strings.ReplaceAll(string(unit), "/etc/slotsync/slotsync.env", envPath)
	if err := os.WriteFile(filepath.Join(dir, "slotsync.service"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("systemd-analyze", "security", "--offline=true", "--no-pager", "slotsync.service")
	cmd.Dir = dir
	out, _ := cmd.CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for slotsync.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security said:\n%s", out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security: exposure %.1f", score)
	if score > 3.0 {
		t.Errorf("exposure %.1f, aim at most 3.0:\n%s", score, out)
	}
}

func TestSystemdUnit(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed: the unit is not verified here")
	}
	dir := t.TempDir()
	unit, err := os.ReadFile("systemd/slotsync.service")
	if err != nil {
		t.Fatal(err)
	}
	env, _ := filepath.Abs("systemd/slotsync.env")
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/slotsync", filepath.Join(binDir, "slotsync"))
	text = strings.ReplaceAll(text, "/etc/slotsync/slotsync.env", env)
	path := filepath.Join(dir, "slotsync.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// The state-file drop-in is verified with the unit.
	dropIn, err := os.ReadFile("systemd/statefile.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "slotsync.service.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "slotsync.service.d", "statefile.conf"), dropIn, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("systemd-analyze", "verify", path)
	cmd.Env = append(os.Environ(), "SYSTEMD_UNIT_PATH="+dir+":")
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "slotsync.service") && !strings.Contains(line, "postgresql.service") {
			t.Errorf("systemd-analyze: %s", line)
		}
	}
	if err != nil && strings.Contains(string(out), "slotsync.service:") {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestWorkflowGoreleaserDockerfile(t *testing.T) {
	wf := readYAML(t, "github-actions/failover-drill.yml")[0]
	steps, _ := dig(wf, "jobs", "drill", "steps").([]any)
	run, _ := dig(steps[len(steps)-1], "run").(string)
	if !strings.Contains(run, "-run TestFailoverKeepsOurSlots") {
		t.Fatalf("workflow runs %q", run)
	}
	src, _ := os.ReadFile("github-actions/your-repo/failover_test.go")
	if !strings.Contains(string(src), "func TestFailoverKeepsOurSlots(") {
		t.Fatal("the workflow's test does not exist in the user's layout")
	}
	gr := readYAML(t, "../.goreleaser.yaml")[0]
	if dig(gr, "builds", 0, "main") != "./cmd/slotsync" || dig(gr, "builds", 0, "env", 0) != "CGO_ENABLED=0" {
		t.Fatalf("goreleaser build: %v", dig(gr, "builds", 0))
	}
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := string(df)
	user := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindStringSubmatch(text)
	if user == nil || strings.HasPrefix(user[1], "0") || strings.HasPrefix(user[1], "root") {
		t.Fatalf("the image must run as a non-root user: %v", user)
	}
	if !strings.Contains(text, "CGO_ENABLED=0") || !strings.Contains(text, "FROM scratch") || !strings.Contains(text, "./cmd/slotsync") {
		t.Fatal("the image must hold a static binary of ./cmd/slotsync")
	}
	if !strings.Contains(text, "--chown=65532:65532 /out/state /var/lib/slotsync") || !strings.Contains(text, "USER 65532:65532") {
		t.Fatal("the image must hold a state directory its user can write (a named volume mounted there inherits it)")
	}
	compose := readYAML(t, "docker-compose/compose.yaml")[0]
	if dig(compose, "services", "slotsync", "environment", "SLOTSYNC_STATE_DIR") != "/var/lib/slotsync" || dig(compose, "services", "slotsync", "volumes", 0) != "slotsync-state:/var/lib/slotsync" {
		t.Fatal("compose must give slotsync a named volume at its state directory")
	}
	// The static build itself works here even without a Docker engine (the full run only: it
	// builds the binary again).
	if testing.Short() {
		return
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "slotsync"), "../cmd/slotsync")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
}

// TestGitHubActionsExample runs the GitHub Actions example as a user's repository would: the
// test in github-actions/your-repo, in a module of its own that requires slotsync (replaced by
// this checkout: a path), run by the workflow step's own command and environment, the matrix
// given the major of the image here. It is the failover drill on Docker (a kill -9 of the
// primary's container); it skips without a reachable Docker engine.
func TestGitHubActionsExample(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a drill runs on real PostgreSQL pairs")
	}
	major := pgtest.DockerMajor()
	if major < 16 {
		t.Skipf("the drill on PostgreSQL %d needs the state-file method, which installs copies in the standby's data directory: not inside a container; "+
			"give an image of 16 or newer (%s, %s)", major, pgtest.EnvDockerImage, pgtest.EnvDockerMajor)
	}
	wf := readYAML(t, "github-actions/failover-drill.yml")[0]
	if m, _ := dig(wf, "jobs", "drill", "strategy", "matrix", "postgres").([]any); !slices.Contains(m, any(major)) {
		t.Fatalf("the workflow's matrix %v does not run %d", m, major)
	}
	steps, _ := dig(wf, "jobs", "drill", "steps").([]any)
	step := steps[len(steps)-1]
	run, _ := dig(step, "run").(string)
	env := os.Environ()
	stepEnv, _ := dig(step, "env").(map[string]any)
	for k, v := range stepEnv {
		env = append(env, k+"="+strings.ReplaceAll(fmt.Sprint(v), "${{ matrix.postgres }}", strconv.Itoa(major)))
	}
	dir := t.TempDir()
	for _, f := range []string{"go.mod", "failover_test.go"} {
		data, err := os.ReadFile(filepath.Join("github-actions/your-repo", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "go.mod" {
			root, _ := filepath.Abs("..")
			data = append(data, []byte("\nreplace github.com/slotsync/slotsync => "+root+"\n")...)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tidy := exec.Command("go", "mod", "tidy")
	tidy.Dir = dir
	if out, err := tidy.CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy in the user's module: %v\n%s", err, out)
	}
	cmd := exec.Command("sh", "-c", run)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	switch {
	case strings.Contains(string(out), "--- SKIP: TestFailoverKeepsOurSlots"):
		t.Skipf("the user's test skipped:\n%s", out)
	case err != nil || !strings.Contains(string(out), "--- PASS: TestFailoverKeepsOurSlots"):
		t.Fatalf("the workflow's step %q: %v\n%s", run, err, out)
	}
	t.Logf("%s", grepPrefix(string(out), "    failover_test.go"))
}

// grepPrefix keeps the lines of text that start with prefix.
func grepPrefix(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// checkReleaseImage: one amd64+arm64 image per release, published as X.Y.Z and X.Y, made of
// the binaries goreleaser built (copied, not rebuilt: the image's build_info is the release's),
// running as a non-root user with a state directory it can write; SBOMs and signatures of the
// checksums and the image are configured.
func checkReleaseImage(t *testing.T, gr any) {
	img := dig(gr, "dockers_v2", 0)
	if dig(img, "dockerfile") != "Dockerfile.release" || fmt.Sprint(dig(img, "platforms")) != "[linux/amd64 linux/arm64]" ||
		fmt.Sprint(dig(img, "images")) != "[ghcr.io/slotsync/slotsync]" || fmt.Sprint(dig(img, "ids")) != "[slotsync]" {
		t.Errorf("release image: %v", img)
	}
	if tags := fmt.Sprint(dig(img, "tags")); tags != "[{{ .Version }} {{ .Major }}.{{ .Minor }}]" {
		t.Errorf("release image tags %s", tags)
	}
	if dig(img, "labels", "org.opencontainers.image.revision") != "{{ .FullCommit }}" {
		t.Error("the image's revision label is not the release's commit")
	}
	df, err := os.ReadFile("../Dockerfile.release")
	if err != nil {
		t.Fatal(err)
	}
	text := string(df)
	for _, want := range []string{"COPY $TARGETPLATFORM/slotsync /slotsync", "FROM scratch", "USER 65532:65532",
		"--chown=65532:65532 /out/state /var/lib/slotsync"} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile.release lacks %q", want)
		}
	}
	if strings.Contains(text, "go build") {
		t.Error("Dockerfile.release builds slotsync again instead of copying the release's binary")
	}
	if dig(gr, "sboms", 0, "artifacts") != "archive" || dig(gr, "signs", 0, "artifacts") != "checksum" ||
		dig(gr, "signs", 0, "cmd") != "cosign" || dig(gr, "docker_signs", 0, "cmd") != "cosign" {
		t.Error("SBOMs and signatures of the checksums and the image must be configured")
	}
}

// TestReleaseConfig: what a release publishes is what the README and the examples promise:
// archives and .deb/.rpm packages carrying the generated man page and completions (generated by
// commands that exist), the systemd unit and env file; an amd64+arm64 image whose version is the
// release's, published as X.Y.Z and X.Y; and examples pinned to a tag the release publishes.
func TestReleaseConfig(t *testing.T) {
	gr := readYAML(t, "../.goreleaser.yaml")[0]
	generated := map[string]bool{}
	hooks, _ := dig(gr, "before", "hooks").([]any)
	hookCmd := regexp.MustCompile(`go run \./cmd/slotsync ([a-z ]+) > (build/[^"\s]+)`)
	// Files a hook derives from a checked-in one with one substitution (sed 's#from#to#'), for
	// the packages only: their text as the hook writes it.
	hookSed := regexp.MustCompile(`sed 's#([^#]+)#([^#]*)#' (\S+) > (build/[^"\s]+)`)
	derived := map[string]string{}
	for _, h := range hooks {
		if m := hookSed.FindStringSubmatch(h.(string)); m != nil {
			src, err := os.ReadFile(filepath.Join("..", m[3]))
			if err != nil || !strings.Contains(string(src), m[1]) {
				t.Errorf("hook %q: %s does not hold %q (%v)", h, m[3], m[1], err)
			}
			derived[m[4]] = strings.ReplaceAll(string(src), m[1], m[2])
			continue
		}
		m := hookCmd.FindStringSubmatch(h.(string))
		if m == nil {
			continue
		}
		out, err := exec.Command(filepath.Join(binDir, "slotsync"), strings.Fields(m[1])...).Output()
		if err != nil || len(out) < 100 {
			t.Errorf("hook %q: the command fails here: %v", h, err)
		}
		generated[m[2]] = true
	}
	for _, want := range []string{"build/slotsync.8", "build/slotsync.bash", "build/_slotsync", "build/slotsync.fish"} {
		if !generated[want] {
			t.Errorf("no before hook generates %s", want)
		}
	}
	files := map[string]bool{}
	for _, f := range dig(gr, "archives", 0, "files").([]any) {
		files[f.(string)] = true
	}
	dsts := map[string]string{}
	for _, c := range dig(gr, "nfpms", 0, "contents").([]any) {
		src, dst := dig(c, "src").(string), dig(c, "dst").(string)
		dsts[dst] = src
		if _, ok := derived[src]; !generated[src] && !ok {
			if _, err := os.Stat(filepath.Join("..", src)); err != nil {
				t.Errorf("package content %s: %v", src, err)
			}
		}
		if dst == "/etc/slotsync/slotsync.env" && dig(c, "type") != "config|noreplace" {
			t.Error("the env file must be a configuration file an upgrade keeps")
		}
	}
	for f := range generated {
		if !files[f] {
			t.Errorf("the archive lacks %s", f)
		}
	}
	for _, dst := range []string{"/lib/systemd/system/slotsync.service", "/etc/slotsync/slotsync.env", "/usr/share/man/man8/slotsync.8",
		"/usr/share/bash-completion/completions/slotsync", "/usr/share/zsh/vendor-completions/_slotsync", "/usr/share/fish/vendor_completions.d/slotsync.fish"} {
		if dsts[dst] == "" {
			t.Errorf("the packages lack %s", dst)
		}
	}
	// The packaged unit starts the binary where the packages put it.
	unitSrc := dsts["/lib/systemd/system/slotsync.service"]
	unit, ok := derived[unitSrc]
	if !ok {
		b, _ := os.ReadFile(filepath.Join("..", unitSrc))
		unit = string(b)
	}
	bindir, _ := dig(gr, "nfpms", 0, "bindir").(string)
	if !regexp.MustCompile(`(?m)^ExecStart=` + regexp.QuoteMeta(bindir+"/slotsync") + ` `).MatchString(unit) {
		t.Errorf("the packaged unit (%s) does not start %s/slotsync, where the packages install it", unitSrc, bindir)
	}
	formats := fmt.Sprint(dig(gr, "nfpms", 0, "formats"))
	if !strings.Contains(formats, "deb") || !strings.Contains(formats, "rpm") {
		t.Errorf("package formats %s", formats)
	}
	checkReleaseImage(t, gr)
	df, _ := os.ReadFile("../Dockerfile")
	if !strings.Contains(string(df), "--platform=$BUILDPLATFORM") || !strings.Contains(string(df), "GOARCH=$TARGETARCH") {
		t.Error("the Dockerfile must cross-compile for the target platform")
	}
	// The examples and the README pin the release line the README announces.
	readme, _ := os.ReadFile("../README.md")
	first := regexp.MustCompile("the first is `v(\\d+)\\.(\\d+)\\.\\d+`").FindStringSubmatch(string(readme))
	if first == nil {
		t.Fatal("the README does not say which release is the first")
	}
	line := first[1] + "." + first[2]
	pinned := regexp.MustCompile(`ghcr\.io/slotsync/slotsync:(\S+)`)
	for _, f := range []string{"kubernetes/slotsync-sidecar.yaml", "docker-compose/compose.yaml", "../README.md"} {
		data, _ := os.ReadFile(f)
		for _, m := range pinned.FindAllStringSubmatch(string(data), -1) {
			tag := strings.TrimRight(m[1], "`,)")
			if tag != line && !strings.HasPrefix(tag, line+".") {
				t.Errorf("%s pins %s, which the %s release line does not publish", f, m[0], line)
			}
		}
	}
}
