//go:build failpoints

package failpoint

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	ps, err := parse("a=crash, b=delay:2s,c@3=error")
	if err != nil {
		t.Fatal(err)
	}
	if ps["a"].action != "crash" || ps["b"].delay != 2*time.Second || ps["c"].nth != 3 || ps["c"].action != "error" {
		t.Fatalf("%+v", ps)
	}
	for _, bad := range []string{"a", "a=explode", "a=delay:soon", "a@0=crash"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestNthHit(t *testing.T) {
	points, _ = parse("x@2=error")
	once.Do(func() {})
	if Hit("x") != nil || Hit("x") == nil || Hit("x") != nil {
		t.Fatal("only the second hit fails")
	}
}
