package drill

import (
	"context"
	"testing"
	"time"

	"github.com/slotsync/slotsync/integration"
)

func TestJudge(t *testing.T) {
	truth := map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true}
	cases := []struct {
		name                  string
		durable               map[int]int
		after                 []int
		ok                    bool
		lost, repeated, ahead int
	}{
		{"exact", map[int]int{1: 1, 2: 1}, []int{3, 4, 5}, true, 0, 0, 0},
		{"lost in between", map[int]int{1: 1, 2: 1}, []int{4, 5}, false, 1, 0, 0},
		{"repeated past the offset", map[int]int{1: 1, 2: 1}, []int{2, 3, 4, 5}, false, 0, 1, 0},
		{"consumer ahead of the new primary", map[int]int{1: 1, 2: 1, 6: 1}, []int{3, 4, 5}, false, 0, 0, 1},
	}
	for _, c := range cases {
		var sv SlotVerdict
		judge(&sv, truth, c.durable, c.after)
		if sv.OK != c.ok || len(sv.Lost) != c.lost || len(sv.Repeated) != c.repeated || len(sv.Ahead) != c.ahead {
			t.Errorf("%s: %+v", c.name, sv)
		}
	}
}

// TestDrill fails over a real pair with live consumers, cleanly and with kill -9, and switches
// back; every change must arrive exactly once.
func TestDrill(t *testing.T) {
	integration.ForEachMajor(t, nil, func(t *testing.T, major int) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		for _, kill := range []bool{false, true} {
			pair := integration.StartPair(t, integration.Options{Major: major})
			v, err := Run(ctx, pair, Options{Duration: 1500 * time.Millisecond, Kill: kill, Failovers: 2, StateDir: t.TempDir()})
			if err != nil {
				t.Fatalf("kill=%v: %v", kill, err)
			}
			if !v.OK || len(v.Failovers) != 2 {
				t.Fatalf("kill=%v: verdict %+v", kill, v)
			}
			for _, f := range v.Failovers {
				for _, s := range f.Slots {
					if s.Durable == 0 || s.Resumed == 0 {
						t.Fatalf("kill=%v failover %d: the drill did not exercise %s: %+v", kill, f.Number, s.Slot, s)
					}
				}
			}
			t.Logf("kill=%v: %+v", kill, v)
			if err := pair.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestCheckOnDocker is the helper users call from their own CI; here it skips without Docker.
func TestCheckOnDocker(t *testing.T) {
	Check(t, integration.Options{Major: 17, Backend: "docker"}, Options{Duration: time.Second, Kill: true})
}
