package sync

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/slotsync/slotsync/topology"
)

// StandbySlotsInput is what the management of synchronized_standby_slots (17+, opt-in) decides
// from: the setting as it is, the state of each slot it lists, and, beside a standby, that
// standby's own physical slot on the primary.
type StandbySlotsInput struct {
	Setting string
	Listed  []topology.SyncedStandbySlot
	// Own is the standby's primary_slot_name (empty beside a primary); OwnStreaming: a
	// walsender streams through it.
	Own          string
	OwnStreaming bool
	// GoneAfter: a listed slot with no walsender for this long is taken out.
	GoneAfter time.Duration
}

// StandbySlotsChange is what the setting becomes, and why.
type StandbySlotsChange struct {
	Next []string
	Why  []string
}

// slotName is what PostgreSQL accepts as a slot name, and so what may be written into the
// setting.
var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// PlanStandbySlots decides the primary's synchronized_standby_slots (pure; rule 10): the
// standby's own slot is listed once the standby streams through it, so that a consumer of a
// failover slot never confirms WAL this standby lacks; a listed slot that does not exist, or
// has had no walsender for GoneAfter, is taken out, so that consumers do not wait for a standby
// that is gone. A setting of "*" is the operator's and is left alone. ok is false when nothing
// is to change.
func PlanStandbySlots(in StandbySlotsInput) (StandbySlotsChange, bool) {
	current := splitSetting(in.Setting)
	if slices.Contains(current, "*") {
		return StandbySlotsChange{}, false
	}
	state := map[string]topology.SyncedStandbySlot{}
	for _, l := range in.Listed {
		state[l.Name] = l
	}
	var ch StandbySlotsChange
	for _, name := range current {
		l := state[name]
		switch {
		case name == in.Own && in.OwnStreaming:
			ch.Next = append(ch.Next, name)
		case !l.Exists:
			ch.Why = append(ch.Why, fmt.Sprintf("%s taken out: no such physical slot", name))
		case !l.Active && l.InactiveFor >= in.GoneAfter:
			ch.Why = append(ch.Why, fmt.Sprintf("%s taken out: no standby has streamed through it for %s", name, l.InactiveFor.Round(time.Second)))
		default:
			ch.Next = append(ch.Next, name)
		}
	}
	if in.Own != "" && in.OwnStreaming && !slices.Contains(ch.Next, in.Own) && slotName.MatchString(in.Own) {
		ch.Next = append(ch.Next, in.Own)
		ch.Why = append(ch.Why, fmt.Sprintf("%s added: this standby streams through it", in.Own))
	}
	return ch, len(ch.Why) > 0
}

// splitSetting lists a synchronized_standby_slots value's names.
func splitSetting(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.Trim(strings.TrimSpace(n), `"`); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// StandbySlotsSQL is the statement that sets synchronized_standby_slots to names (RESET for
// none); names are slot names as PostgreSQL accepts them, nothing else is written.
func StandbySlotsSQL(names []string) (string, error) {
	if len(names) == 0 {
		return "ALTER SYSTEM RESET synchronized_standby_slots", nil
	}
	for _, n := range names {
		if !slotName.MatchString(n) {
			return "", fmt.Errorf("synchronized_standby_slots: %q is not a slot name", n)
		}
	}
	return fmt.Sprintf("ALTER SYSTEM SET synchronized_standby_slots = '%s'", strings.Join(names, ",")), nil
}

// manageStandbySlots applies PlanStandbySlots to the primary's synchronized_standby_slots
// (onPrimary) or, beside a primary, to its own. A failure (most often a missing grant) is
// logged when it first happens or changes, and the pass goes on: syncing does not depend on it.
func (e *Engine) manageStandbySlots(ctx context.Context, onPrimary bool, in StandbySlotsInput) {
	ch, ok := PlanStandbySlots(in)
	if !ok {
		return
	}
	where := "on this node"
	if onPrimary {
		where = "on the primary"
	}
	err := e.ctl.SetStandbySlots(ctx, onPrimary, ch.Next)
	if err != nil {
		if msg := err.Error(); msg != e.logged.standbySlotsErr {
			e.logged.standbySlotsErr = msg
			e.log.Warn("could not set synchronized_standby_slots "+where, "error", msg, "wanted", strings.Join(ch.Next, ","),
				"fix", "GRANT ALTER SYSTEM ON PARAMETER synchronized_standby_slots TO <slotsync's role>; GRANT EXECUTE ON FUNCTION pg_reload_conf() TO <slotsync's role>")
		}
		return
	}
	e.logged.standbySlotsErr = ""
	e.log.Info("synchronized_standby_slots set "+where, "from", in.Setting, "to", strings.Join(ch.Next, ","), "why", strings.Join(ch.Why, "; "))
}
