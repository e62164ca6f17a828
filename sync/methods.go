package sync

import (
	"fmt"
	"time"

	"github.com/slotsync/slotsync/internal/failpoint"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/sync/method/sqlslot"
	"github.com/slotsync/slotsync/sync/method/statefile"
	"github.com/slotsync/slotsync/topology"
)

// The method choice: the one place the engine names methods. Everything else reads the
// chosen method's traits (method.Traits) and calls its contract.

// TraitsOf gives the rules of method m, also where the engine only judges (check, status) and
// makes no method.
func TraitsOf(m topology.Method) method.Traits {
	switch m {
	case topology.MethodStatefile:
		return statefile.Traits()
	case topology.MethodNative:
		return sqlslot.NativeTraits()
	}
	return sqlslot.SQLTraits()
}

// copyTraits gives the rules one copy answers to: those of the method that made it, as its
// journal entry says (--exact-copy-after makes state-file copies beside the sql method's own),
// or the method in force's for any other entry. Whether the server syncs is the method in
// force's alone.
func copyTraits(inForce method.Traits, ent *Entry) method.Traits {
	if !namesMethod(ent) || failpoint.Mutant("copy-traits-in-force") {
		return inForce
	}
	t := TraitsOf(topology.Method(ent.Method))
	t.ServerSyncs = inForce.ServerSyncs
	return t
}

// namesMethod says whether a journal entry names the method that made its copy; a primary's
// own slot's ("own") and an older journal's entries do not (copyTraits gives them the method in
// force's rules).
func namesMethod(ent *Entry) bool {
	if ent == nil {
		return false
	}
	switch topology.Method(ent.Method) {
	case topology.MethodSQL, topology.MethodNative, topology.MethodStatefile:
		return true
	}
	return false
}

// exactCopyAfter is how long an engine running method m lets a copy stand ahead of its away
// consumer before an exact copy replaces it (--exact-copy-after; 0: never): with the sql and
// native methods, whose own copies come from the standby's decoding; the state-file method's
// copies are all exact.
func exactCopyAfter(cfg Config, m topology.Method) time.Duration {
	if m == topology.MethodSQL || m == topology.MethodNative {
		return cfg.ExactCopyAfter
	}
	return 0
}

// newMethod makes method m for an applying engine.
func newMethod(m topology.Method, cfg Config, deps method.Deps) (method.Method, error) {
	switch m {
	case topology.MethodSQL, topology.MethodNative:
		// native: the server syncs failover slots; slots that keep failover=false are copied as
		// by the sql method, and the opt-in actions go through the same sessions.
		traits := sqlslot.SQLTraits()
		if m == topology.MethodNative {
			traits = sqlslot.NativeTraits()
		}
		if exactCopyAfter(cfg, m) > 0 {
			sc := cfg.Statefile
			sc.OnRequest = true
			return statefile.New(sqlslot.New(deps, traits), sc, deps)
		}
		return sqlslot.New(deps, traits), nil
	case topology.MethodStatefile:
		return statefile.New(sqlslot.New(deps, sqlslot.SQLTraits()), cfg.Statefile, deps)
	}
	return nil, fmt.Errorf("%w: %q", ErrUnsupportedMethod, m)
}

// newRecoverer finishes a standby restart that a crash interrupted, whatever method the next
// pass chooses: the standby may be down, and then nothing can be chosen.
func newRecoverer(cfg Config, deps method.Deps) method.Recoverer {
	if cfg.ReadOnly {
		return nil
	}
	return statefile.NewRecovery(cfg.Statefile, deps)
}

// drivesServerSync says whether the engine drives the server's slot sync itself
// (--native-drive with the native method): each pass runs pg_sync_replication_slots() first.
func drivesServerSync(cfg Config) bool {
	return cfg.Native.Drive && cfg.Method == topology.MethodNative
}

// verifyMethod checks what the method needs of the standby (a driven native sync needs no
// sync_replication_slots) and adds the server sync's warnings where it matters.
func (e *Engine) verifyMethod(obs *Observation, method topology.Method, drive bool) error {
	if err := topology.VerifyMethod(obs.Standby.Info, method, drive); err != nil {
		return err
	}
	if e.traits.ServerSyncs || anyFailover(obs.Primary.Slots) {
		obs.Warnings = append(obs.Warnings, topology.NativeWarnings(obs.Primary.Info, obs.Standby.Info, obs.SyncedStandbySlots)...)
	}
	return nil
}

// chooseMethod resolves the method once; applying also prepares the method's sessions.
func (e *Engine) chooseMethod(standby topology.NodeInfo, apply bool) (topology.Method, error) {
	major := standby.Major()
	if e.method == "" {
		requested := e.cfg.Method
		if e.cfg.ReadOnly && (requested == topology.MethodAuto || requested == "") && e.journal.Gate != nil && e.journal.Gate.Method != "" {
			// The gate judges by the rules of the method the daemon uses (the state-file method's
			// are stricter), not by what auto would pick for it.
			requested = topology.Method(e.journal.Gate.Method)
		}
		m, err := topology.ChooseMethod(standby, requested)
		if err != nil {
			return "", err
		}
		e.method, e.traits = m, TraitsOf(m)
	}
	if apply && e.impl == nil {
		app, err := e.methods(e.method)
		if err != nil {
			return "", err
		}
		e.impl = app
		for i := 0; i < e.cfg.Workers; i++ {
			e.sess = append(e.sess, app.Session())
		}
		e.log.Info("method chosen", "method", e.method, "major", major)
	}
	return e.method, nil
}
