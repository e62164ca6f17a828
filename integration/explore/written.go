package explore

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// plansDir holds the written plans, one YAML file each, named for its plan.
//
//go:embed plans/*.yaml
var plansDir embed.FS

// writtenPlan is a written plan's file: why the plan exists, and the plan.
type writtenPlan struct {
	Why  string `yaml:"why"`
	Plan `yaml:",inline"`
}

// MatrixPlans are the plans written for the rules the drawn plans seldom reach at the cutover
// (plans/*.yaml, by name): each puts the failover right where a rule decides (the mutation
// matrix runs them before drawn seeds; slotsync-explore run --plan replays one). A file that
// does not parse is a defect of the build (TestWrittenPlansParse), not of the run.
func MatrixPlans() []Plan {
	plans, err := readWrittenPlans(plansDir)
	if err != nil {
		panic(err)
	}
	return plans
}

// readWrittenPlans reads every plans/*.yaml of dir, sorted by name.
func readWrittenPlans(dir fs.FS) ([]Plan, error) {
	names, err := fs.Glob(dir, "plans/*.yaml")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	out := make([]Plan, 0, len(names))
	for _, name := range names {
		data, err := fs.ReadFile(dir, name)
		if err != nil {
			return nil, err
		}
		p, err := parseWrittenPlan(name, data)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// ReadWrittenPlan reads a written plan's file (a copy of one of plans/*.yaml, or a plan of the
// same form): its plan takes the file's name.
func ReadWrittenPlan(file string) (Plan, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Plan{}, err
	}
	return parseWrittenPlan(file, data)
}

// parseWrittenPlan parses a written plan's file: every field known, a reason given, a live
// phase, and a plan the drill can carry out (Plan.Check).
func parseWrittenPlan(file string, data []byte) (Plan, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var w writtenPlan
	if err := dec.Decode(&w); err != nil {
		return Plan{}, fmt.Errorf("%s: %w", file, err)
	}
	w.Name = strings.TrimSuffix(path.Base(file), path.Ext(file))
	switch {
	case strings.TrimSpace(w.Why) == "":
		return Plan{}, fmt.Errorf("%s: no why: say what the plan is for, and which rule it puts at the cutover", file)
	case w.Live <= 0:
		return Plan{}, fmt.Errorf("%s: no live phase: give live, such as live: 3s", file)
	}
	for i, s := range w.Steps {
		if s.Fault == "" {
			return Plan{}, fmt.Errorf("%s: step %d has no fault", file, i+1)
		}
		if s.At < 0 || s.At > w.Live {
			return Plan{}, fmt.Errorf("%s: step %d at %s, outside the live phase (0 to %s)", file, i+1, s.At, w.Live)
		}
	}
	if err := w.Check(); err != nil {
		return Plan{}, fmt.Errorf("%s: %w", file, err)
	}
	return w.Plan, nil
}
