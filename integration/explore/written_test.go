package explore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWrittenPlansParse: every file of plans/ parses as a written plan whose faults are the
// drill's, with a reason of its own; a copy of one given to --plan replays the same plan.
func TestWrittenPlansParse(t *testing.T) {
	plans, err := readWrittenPlans(plansDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) < 50 {
		t.Fatalf("%d written plans, want the matrix's 50 and more", len(plans))
	}
	faults := faultConstants(t)
	for _, p := range plans {
		for _, s := range p.Steps {
			if !faults[s.Fault] {
				t.Errorf("%s: fault %q is none of the drill's (faults.go)", p.Name, s.Fault)
			}
		}
	}
	copied := filepath.Join(t.TempDir(), "hook-slot-behind.yaml")
	data, err := plansDir.ReadFile("plans/hook-slot-behind.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copied, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPlans(copied)
	if err != nil || len(got) != 1 || got[0].Name != "hook-slot-behind" || got[0].String() != samplePlan(t, "hook-slot-behind", 0).String() {
		t.Fatalf("--plan with a copy of hook-slot-behind.yaml: %+v, %v", got, err)
	}
	if got[0].Live != 3*time.Second || !got[0].Hook || len(got[0].Steps) != 2 || got[0].Steps[1].Fault != FaultSlotBehind || !got[0].Steps[1].Away {
		t.Fatalf("hook-slot-behind.yaml read as %+v", got[0])
	}
}

// TestWrittenPlanRefusals: a written plan that says too little, or what the drill cannot do, is
// refused with an error that names the fix.
func TestWrittenPlanRefusals(t *testing.T) {
	why := "why: a test\n"
	for _, c := range []struct{ name, text, want string }{
		{"no why", "live: 3s\n", "no why"},
		{"no live", why + "kill: true\n", "no live phase"},
		{"unknown field", why + "live: 3s\nkil: true\n", "field kil not found"},
		{"duration without unit", why + "live: 3\n", "cannot unmarshal"},
		{"step without fault", why + "live: 3s\nsteps:\n  - {at: 1s}\n", "step 1 has no fault"},
		{"step after live", why + "live: 3s\nsteps:\n  - {at: 4s, fault: slotsync_paused}\n", "outside the live phase"},
		{"contradiction", why + "live: 3s\nhook: true\nlinger: 5s\n", "linger"},
	} {
		if _, err := parseWrittenPlan(c.name+".yaml", []byte(c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// faultConstants are the values of faults.go's Fault constants.
func faultConstants(t *testing.T) map[Fault]bool {
	f, err := parser.ParseFile(token.NewFileSet(), "faults.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[Fault]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		v, ok := n.(*ast.ValueSpec)
		if !ok || v.Type == nil || len(v.Values) != 1 {
			return true
		}
		if id, ok := v.Type.(*ast.Ident); ok && id.Name == "Fault" {
			if lit, ok := v.Values[0].(*ast.BasicLit); ok {
				s, _ := strconv.Unquote(lit.Value)
				out[Fault(s)] = true
			}
		}
		return true
	})
	if len(out) < 30 {
		t.Fatalf("%d Fault constants read from faults.go", len(out))
	}
	return out
}
