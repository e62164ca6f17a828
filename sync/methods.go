package sync

import (
	"fmt"

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

// newMethod makes method m for an applying engine.
func newMethod(m topology.Method, cfg Config, deps method.Deps) (method.Method, error) {
	switch m {
	case topology.MethodSQL:
		return sqlslot.New(deps, sqlslot.SQLTraits()), nil
	case topology.MethodNative:
		// The server syncs failover slots; slots that keep failover=false are copied as by
		// the sql method, and the opt-in actions go through the same sessions.
		return sqlslot.New(deps, sqlslot.NativeTraits()), nil
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

// mayJudgeStateFiles says whether this engine may judge state-file copies on 17+, where auto
// never chooses that method: it was asked for, or the journal records copies it made (the
// gate beside a daemon that runs it).
func mayJudgeStateFiles(cfg Config, j *Journal) bool {
	if cfg.Method == topology.MethodStatefile || j.Gate != nil && j.Gate.Method == string(topology.MethodStatefile) {
		return true
	}
	for _, ent := range j.Slots {
		if ent.Method == string(topology.MethodStatefile) {
			return true
		}
	}
	return false
}

// drivesServerSync says whether the engine drives the server's slot sync itself
// (--native-drive with the native method): each pass runs pg_sync_replication_slots() first.
func drivesServerSync(cfg Config) bool {
	return cfg.Native.Drive && cfg.Method == topology.MethodNative
}
