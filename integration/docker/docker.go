// Package docker runs slotsync's test pairs as containers through testcontainers-go: a primary
// and a standby made with pg_basebackup, from the official postgres image or one you name.
package docker

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	dockernet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/slotsync/slotsync/integration"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
)

// dataDir is PGDATA inside the containers (set explicitly: images of 18+ moved the default).
const dataDir = "/var/lib/postgresql/pgdata"

// Available reports whether a Docker engine answers, and why not when it does not.
func Available(ctx context.Context) error {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("no reachable Docker engine: %w", err)
	}
	return nil
}

// server runs one node as a container.
type server struct {
	ctr   testcontainers.Container
	major int
}

// Endpoint is the container's port 5432 as mapped on the host. A local engine (a unix socket)
// publishes on this machine's loopback, which is used as it is: asked inside a container,
// testcontainers would name the container network's gateway instead.
func (s *server) Endpoint(ctx context.Context) (string, int, error) {
	host := "127.0.0.1"
	if h := os.Getenv("TESTCONTAINERS_HOST_OVERRIDE"); h != "" {
		host = h
	} else if dh := os.Getenv("DOCKER_HOST"); dh != "" && !strings.HasPrefix(dh, "unix://") {
		var err error
		if host, err = s.ctr.Host(ctx); err != nil {
			return "", 0, err
		}
	}
	port, err := s.ctr.MappedPort(ctx, "5432/tcp")
	if err != nil {
		return "", 0, err
	}
	return host, int(port.Num()), nil
}

// Start starts the container and waits until its server accepts connections.
func (s *server) Start(ctx context.Context) error {
	if err := s.ctr.Start(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	n := integration.NewNode("", s.major, dataDir, s)
	for {
		_, err := n.InRecovery(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the container's server to accept connections: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop shuts the server down cleanly: SIGINT is PostgreSQL's fast shutdown (an image that
// does not set it as its stop signal would get a smart one, which waits for every client).
func (s *server) Stop(ctx context.Context) error {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.ContainerKill(ctx, s.ctr.GetContainerID(), client.ContainerKillOptions{Signal: "INT"}); err != nil {
		return err
	}
	timeout := time.Minute
	return s.ctr.Stop(ctx, &timeout)
}

// Kill sends SIGKILL to the container: a crash of that server.
func (s *server) Kill(ctx context.Context) error {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.ContainerKill(ctx, s.ctr.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"})
	return err
}

// Close removes the container.
func (s *server) Close(ctx context.Context) error { return s.ctr.Terminate(ctx) }

// Launch starts a pair in containers: use it as integration.Options.Launch. The image is
// opts.Image (default postgres:<major>, the official image); it must hold the server, initdb,
// pg_basebackup and pg_isready on PATH and the official image's docker-entrypoint.sh (or a
// script of that name with the same contract: initdb on first start, then exec "$@").
func Launch(ctx context.Context, opts integration.Options) (*integration.Pair, error) {
	if err := Available(ctx); err != nil {
		return nil, err
	}
	image := opts.Image
	if image == "" {
		image = fmt.Sprintf("postgres:%d", opts.Major)
	}
	p := &integration.Pair{Major: opts.Major}
	nw, err := network.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker network: %w", err)
	}
	p.OnClose(nw.Remove)

	logf := func(format string, args ...any) {
		if opts.Logf != nil {
			opts.Logf(format, args...)
		}
	}
	logf("pg%d: starting primary container %s", opts.Major, image)
	if err := startPrimary(ctx, p, opts, image, nw.Name); err != nil {
		return p, err
	}
	if opts.BeforeStandby != nil {
		if err := opts.BeforeStandby(ctx, p.Primary); err != nil {
			return p, fmt.Errorf("before the standby: %w", err)
		}
	}
	logf("pg%d: starting standby container (pg_basebackup)", opts.Major)
	return p, startStandby(ctx, p, opts, image, nw.Name)
}

// settings turns the pair's configuration lines into postgres -c arguments.
func settings(opts integration.Options, extra []string) []string {
	var args []string
	for _, line := range append(integration.BaseConf(), append(opts.Conf, extra...)...) {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) == "listen_addresses" {
			continue
		}
		args = append(args, "-c", strings.TrimSpace(k)+"="+strings.Trim(strings.TrimSpace(v), "'"))
	}
	return args
}

// pinnedPort binds the server's port 5432, with a local engine, to a free port of this machine's
// loopback chosen once, so that a container stopped or killed and started again (a fault of the
// drills) is found where it was: Docker gives a port published without one a new host port at
// each start. A remote engine picks its own (nil).
func pinnedPort() func(*container.HostConfig) {
	if os.Getenv("TESTCONTAINERS_HOST_OVERRIDE") != "" || os.Getenv("DOCKER_HOST") != "" && !strings.HasPrefix(os.Getenv("DOCKER_HOST"), "unix://") {
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return func(hc *container.HostConfig) {
		hc.PortBindings = dockernet.PortMap{dockernet.MustParsePort("5432/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(port)}}}
	}
}

// containerEnv is the official image's environment for both servers.
func containerEnv() map[string]string {
	return map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust", "PGDATA": dataDir}
}

// startPrimary starts the primary's container, with the standby's physical slot.
func startPrimary(ctx context.Context, p *integration.Pair, opts integration.Options, image, network string) error {
	hba := "#!/bin/sh\necho 'host replication all all trust' >> \"$PGDATA/pg_hba.conf\"\n"
	primary, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:              image,
			Env:                containerEnv(),
			ExposedPorts:       []string{"5432/tcp"},
			HostConfigModifier: pinnedPort(),
			Networks:           []string{network},
			NetworkAliases:     map[string][]string{network: {"primary"}},
			Cmd:                append([]string{"postgres", "-c", "cluster_name=primary"}, settings(opts, opts.PrimaryConf)...),
			Files: []testcontainers.ContainerFile{{
				Reader: strings.NewReader(hba), ContainerFilePath: "/docker-entrypoint-initdb.d/replication.sh", FileMode: 0o755,
			}},
			WaitingFor: wait.ForLog("database system is ready to accept connections").WithOccurrence(2).
				WithStartupTimeout(3 * time.Minute),
		},
		Started: true,
	})
	if primary != nil {
		ps := &server{ctr: primary, major: opts.Major}
		p.OnClose(ps.Close)
		p.Primary = integration.NewNode("primary", opts.Major, dataDir, ps)
	}
	if err != nil {
		return fmt.Errorf("start primary container: %w", err)
	}
	return p.Primary.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true)", integration.PhysicalSlot)
}

// startStandby starts the standby's container: made once with pg_basebackup; later starts
// (after a stop or kill) reuse it.
func startStandby(ctx context.Context, p *integration.Pair, opts integration.Options, image, network string) error {
	conninfo := fmt.Sprintf("host=primary port=5432 user=%s dbname=postgres application_name=%s", integration.Superuser, integration.StandbyAppName)
	script := fmt.Sprintf(`set -e
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_isready -h primary -U %[1]s -q; do sleep 0.5; done
  mkdir -p "$PGDATA"
  pg_basebackup -h primary -U %[1]s -D "$PGDATA" -X stream -S %[2]s -R -d '%[3]s'
  chown -R postgres:postgres "$PGDATA"; chmod 700 "$PGDATA"
fi
exec docker-entrypoint.sh "$@"`, integration.Superuser, integration.PhysicalSlot, conninfo)
	standbyArgs := append([]string{"postgres", "-c", "cluster_name=standby",
		"-c", "primary_conninfo=" + conninfo, "-c", "primary_slot_name=" + integration.PhysicalSlot}, settings(opts, opts.StandbyConf)...)
	standby, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:              image,
			Env:                containerEnv(),
			ExposedPorts:       []string{"5432/tcp"},
			HostConfigModifier: pinnedPort(),
			Networks:           []string{network},
			Entrypoint:         []string{"bash", "-c", script, "standby"},
			Cmd:                standbyArgs,
			// A log line, not a dial: asked from inside a container, testcontainers would dial the
			// network gateway rather than this machine.
			WaitingFor: wait.ForLog("database system is ready to accept read-only connections").WithStartupTimeout(3 * time.Minute),
		},
		Started: true,
	})
	if standby != nil {
		ss := &server{ctr: standby, major: opts.Major}
		p.OnClose(ss.Close)
		p.Standby = integration.NewNode("standby", opts.Major, dataDir, ss)
	}
	if err != nil {
		return fmt.Errorf("start standby container: %w", err)
	}
	return nil
}

// With returns opts with this backend's Launch when opts asks for Docker (Backend "docker") and
// gives none, and the reason it cannot run when no engine is reachable.
func With(ctx context.Context, opts integration.Options) (integration.Options, error) {
	if opts.Backend != "docker" || opts.Launch != nil {
		return opts, nil
	}
	if err := Available(ctx); err != nil {
		return opts, err
	}
	opts.Launch = Launch
	return opts, nil
}
