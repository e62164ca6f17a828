package integration

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
)

// dockerDataDir is PGDATA inside the containers (set explicitly: images of 18+ moved the default).
const dockerDataDir = "/var/lib/postgresql/pgdata"

// DockerAvailable reports whether a Docker engine answers, and why not when it does not.
func DockerAvailable(ctx context.Context) error {
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

// dockerServer runs one node as a container of the official postgres image.
type dockerServer struct {
	ctr testcontainers.Container
}

func (s *dockerServer) endpoint(ctx context.Context) (string, int, error) {
	host, err := s.ctr.Host(ctx)
	if err != nil {
		return "", 0, err
	}
	port, err := s.ctr.MappedPort(ctx, "5432/tcp")
	if err != nil {
		return "", 0, err
	}
	return host, int(port.Num()), nil
}

func (s *dockerServer) start(ctx context.Context) error {
	if err := s.ctr.Start(ctx); err != nil {
		return err
	}
	return poll(ctx, 2*time.Minute, "the container's server to accept connections", func(ctx context.Context) (bool, error) {
		n := &Node{life: s}
		_, err := n.InRecovery(ctx)
		return err == nil, nil
	})
}

func (s *dockerServer) stop(ctx context.Context) error {
	timeout := time.Minute
	return s.ctr.Stop(ctx, &timeout) // SIGTERM is a smart shutdown in the image; it waits
}

func (s *dockerServer) kill(ctx context.Context) error {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.ContainerKill(ctx, s.ctr.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"})
	return err
}

func (s *dockerServer) close(ctx context.Context) error { return s.ctr.Terminate(ctx) }

func newDockerPair(ctx context.Context, opts Options) (*Pair, error) {
	if err := DockerAvailable(ctx); err != nil {
		return nil, err
	}
	image := opts.Image
	if image == "" {
		image = fmt.Sprintf("postgres:%d", opts.Major)
	}
	p := &Pair{Major: opts.Major}
	nw, err := network.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker network: %w", err)
	}
	p.cleanup = append(p.cleanup, nw.Remove)

	settings := func(extra []string) []string {
		var args []string
		for _, line := range append(append([]string{}, baseConf...), append(opts.Conf, extra...)...) {
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.TrimSpace(k) == "listen_addresses" {
				continue
			}
			args = append(args, "-c", strings.TrimSpace(k)+"="+strings.Trim(strings.TrimSpace(v), "'"))
		}
		return args
	}
	env := map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust", "PGDATA": dockerDataDir}
	hba := "#!/bin/sh\necho 'host replication all all trust' >> \"$PGDATA/pg_hba.conf\"\n"

	opts.logf("pg%d: starting primary container %s", opts.Major, image)
	primary, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:          image,
			Env:            env,
			ExposedPorts:   []string{"5432/tcp"},
			Networks:       []string{nw.Name},
			NetworkAliases: map[string][]string{nw.Name: {"primary"}},
			Cmd:            append([]string{"postgres", "-c", "cluster_name=primary"}, settings(opts.PrimaryConf)...),
			Files: []testcontainers.ContainerFile{{
				Reader: strings.NewReader(hba), ContainerFilePath: "/docker-entrypoint-initdb.d/replication.sh", FileMode: 0o755,
			}},
			WaitingFor: wait.ForLog("database system is ready to accept connections").WithOccurrence(2).
				WithStartupTimeout(3 * time.Minute),
		},
		Started: true,
	})
	if primary != nil {
		ps := &dockerServer{ctr: primary}
		p.cleanup = append(p.cleanup, ps.close)
		p.Primary = &Node{Name: "primary", Major: opts.Major, DataDir: dockerDataDir, life: ps}
	}
	if err != nil {
		return p, fmt.Errorf("start primary container: %w", err)
	}
	if err := p.Primary.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true)", PhysicalSlot); err != nil {
		return p, err
	}

	if opts.BeforeStandby != nil {
		if err := opts.BeforeStandby(ctx, p.Primary); err != nil {
			return p, fmt.Errorf("before the standby: %w", err)
		}
	}
	// The standby is made once with pg_basebackup; later starts (after a stop or kill) reuse it.
	conninfo := fmt.Sprintf("host=primary port=5432 user=%s dbname=postgres application_name=%s", Superuser, StandbyAppName)
	script := fmt.Sprintf(`set -e
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_isready -h primary -U %[1]s -q; do sleep 0.5; done
  mkdir -p "$PGDATA"
  pg_basebackup -h primary -U %[1]s -D "$PGDATA" -X stream -S %[2]s -R -d '%[3]s'
  chown -R postgres:postgres "$PGDATA"; chmod 700 "$PGDATA"
fi
exec docker-entrypoint.sh "$@"`, Superuser, PhysicalSlot, conninfo)
	standbyArgs := append([]string{"postgres", "-c", "cluster_name=standby",
		"-c", "primary_conninfo=" + conninfo, "-c", "primary_slot_name=" + PhysicalSlot}, settings(opts.StandbyConf)...)
	opts.logf("pg%d: starting standby container (pg_basebackup)", opts.Major)
	standby, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        image,
			Env:          env,
			ExposedPorts: []string{"5432/tcp"},
			Networks:     []string{nw.Name},
			Entrypoint:   []string{"bash", "-c", script, "standby"},
			Cmd:          standbyArgs,
			WaitingFor:   wait.ForListeningPort("5432/tcp").WithStartupTimeout(3 * time.Minute),
		},
		Started: true,
	})
	if standby != nil {
		ss := &dockerServer{ctr: standby}
		p.cleanup = append(p.cleanup, ss.close)
		p.Standby = &Node{Name: "standby", Major: opts.Major, DataDir: dockerDataDir, life: ss}
	}
	if err != nil {
		return p, fmt.Errorf("start standby container: %w", err)
	}
	return p, nil
}
