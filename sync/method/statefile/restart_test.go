package statefile

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestWithProgress: a long standby operation logs that it is still running at a steady rhythm,
// and once more when it ends; a short one logs nothing.
func TestWithProgress(t *testing.T) {
	var buf strings.Builder
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	err := withProgress(log, 20*time.Millisecond, "starting the standby", func() error { time.Sleep(110 * time.Millisecond); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "still starting the standby"); n < 3 || n > 6 {
		t.Fatalf("%d progress lines in 110 ms at a 20 ms rhythm:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "starting the standby finished") {
		t.Fatalf("no end line:\n%s", buf.String())
	}
	buf.Reset()
	boom := errors.New("boom")
	if err := withProgress(log, time.Second, "stopping the standby", func() error { return boom }); !errors.Is(err, boom) || buf.Len() != 0 {
		t.Fatalf("a quick failure: %v, logged %q", err, buf.String())
	}
}
