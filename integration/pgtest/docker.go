//go:build docker

package pgtest

import "github.com/slotsync/slotsync/integration/docker"

func init() { withDocker = docker.With }
