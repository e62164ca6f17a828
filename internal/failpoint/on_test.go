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

// TestSetAndHits: Set arms a spec in place of the environment's, its hits counted from none.
func TestSetAndHits(t *testing.T) {
	if err := Set("y@2=error"); err != nil {
		t.Fatal(err)
	}
	if Hit("y") != nil || Hits("y") != 1 || Hit("y") == nil || Hits("y") != 2 || Hits("z") != 0 {
		t.Fatal("the second hit of y fails, and each is counted")
	}
	if err := Set("y=explode"); err == nil {
		t.Fatal("a bad spec accepted")
	}
	if err := Set(""); err != nil || Hit("y") != nil {
		t.Fatalf("an empty spec arms nothing: %v", err)
	}
}
