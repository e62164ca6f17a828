package sync

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/slotsync/slotsync/topology"
)

// TestOneWriterPerStateDirectory: a second writing engine on the same state directory is refused
// with who holds it; readers (check, status) are not; closing the first frees it.
func TestOneWriterPerStateDirectory(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{StandbyDSN: "host=127.0.0.1 port=1", StateDir: dir}
	first, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := New(cfg)
	var ce *topology.ConfigError
	if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("a second writer: %v", err)
	}
	if second != nil {
		t.Fatal("a second writer was made")
	}
	reader := cfg
	reader.ReadOnly = true
	r, err := New(reader)
	if err != nil {
		t.Fatalf("a reader beside the writer: %v", err)
	}
	r.Close()
	first.Close()
	again, err := New(cfg)
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	again.Close()
}
