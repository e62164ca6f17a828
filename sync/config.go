package sync

import (
	"fmt"
	"path"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/slotsync/slotsync/sync/method/statefile"
	"github.com/slotsync/slotsync/topology"
)

// Config is everything the sync engine needs; the command line fills it, Validate checks it.
type Config struct {
	// PrimaryDSN pins the primary. Empty: the primary is the standby's primary_conninfo, read
	// again on every pass, so the engine follows an HA manager that re-points the standby.
	PrimaryDSN string
	StandbyDSN string
	// Passwords read from secret files; they override the DSNs' own. The files, when named, are
	// read again at every connection attempt (a rotated secret).
	PrimaryPassword, StandbyPassword         string
	PrimaryPasswordFile, StandbyPasswordFile string
	// PrimaryUser logs in to the primary as this role instead of the DSN's (primary_conninfo
	// names the standby's replication role, which may not be allowed to read slot state).
	PrimaryUser string
	// PrimaryConnectTimeout bounds connecting to the primary (default 2 s): when it is gone, the
	// gate answers from the standby and the journal instead of waiting (rule 8).
	PrimaryConnectTimeout time.Duration
	// Strict: the gate refuses to judge without the primary (CANNOT TELL instead).
	Strict bool
	// Exact: the gate requires every copy to stand exactly at its consumer's confirmed position
	// (a planned switchover with zero redelivery); without the primary, at the last observation.
	Exact bool
	// ForPromotion: the gate is asked by a promotion hook, right before the standby is promoted
	// (check --for-promotion): an old primary that answers read-write is alive, and promoting
	// now would make two primaries (ErrPrimaryAlive), whatever the copies' verdicts. HA managers
	// demote the primary before they ask, so it is their fencing that failed.
	ForPromotion bool
	// MaxRecordAge: without the primary, a gate record older than this is too old to judge from
	// (CANNOT TELL): slots made since are unknown to it (default 2 minutes: an HA manager's TTL
	// plus its loop, with room to spare).
	MaxRecordAge time.Duration
	// PrimaryGoneAfter: without the primary, the gate judges only once the standby has not
	// streamed from it for this long (default 10 s: twice a standby's wal_retrieve_retry_interval).
	// A WAL receiver between two attempts to reconnect (the primary restarting, a cut
	// connection) says nothing of the primary, which may be alive and taking writes. Until then
	// the answer is CANNOT TELL; check watches the standby that long before judging.
	PrimaryGoneAfter time.Duration
	// SilentReceiverBound: how long a standby whose wal_receiver_timeout is 0 may hear nothing
	// from its primary and still be taken to stream from a live one (default a minute:
	// topology.SilentReceiverBound, twice the keepalive interval of a primary's default
	// wal_sender_timeout). Tests shorten it; it is not a flag.
	SilentReceiverBound time.Duration
	// GateRecordInterval: how often a pass refreshes, in the journal, the observation the gate
	// judges from when the primary is gone (default 5 s; sooner when a verdict changes).
	GateRecordInterval time.Duration
	// ReadOnly engines only Inspect (check, status): the state directory is optional and the
	// journal is never written.
	ReadOnly bool
	// StateDir holds the journal; one directory per cluster.
	StateDir string
	Method   topology.Method
	Select   Selection
	// Interval between full passes under Run; MaxBackoff caps the wait after failed passes.
	Interval time.Duration
	// WatchInterval: between full passes, how often the watch looks at the primary slots'
	// positions to advance copies whose consumer moved (default 50 ms; negative: no watch).
	WatchInterval time.Duration
	MaxBackoff    time.Duration
	// SlotTimeout bounds the work on one slot in one pass (creating a copy waits for the
	// standby to replay a running-xacts record).
	SlotTimeout time.Duration
	// ObserveTimeout bounds one observation of both nodes; a timed-out observation changes nothing.
	ObserveTimeout time.Duration
	// Native configures what slotsync may do for PostgreSQL 17's own slot sync.
	Native NativeConfig
	// DropLeftAlone drops the copies slotsync made and no longer syncs (their primary slot is
	// invalidated, or they are no longer selected); by default they are reported and kept.
	DropLeftAlone bool
	// AdoptCopies: make again, as slotsync's own, the idle standby copies it has no journal
	// entry for whose database and plugin are their primary slot's (after a lost or corrupt
	// journal; each is NOT READY copy_not_ours until then).
	AdoptCopies bool
	// Statefile configures the state-file method.
	Statefile statefile.Config
	// ExactCopyAfter (sql and native methods, 16+; 0: never): a copy made by the standby's own
	// decoding that still stands ahead of its consumer this long after it was made, while the
	// consumer is not connected, is replaced by an exact copy of the primary slot made from its
	// state files (as the state-file method makes them, with Statefile's settings), which is
	// READY without a word from the consumer (rule 4).
	ExactCopyAfter time.Duration
	// AdvanceStep bounds how far one advance moves a copy (default 256 MiB): a copy far behind
	// (a standby back from an outage) catches up in steps of at most this much WAL, each well
	// within SlotTimeout, while every other slot keeps moving; progress is logged as it goes.
	AdvanceStep int64
	// Workers is how many slots are worked on at once.
	Workers int
	// CreateWorkers is how many new copies are made at once, on sessions of their own (default
	// 16): a new copy mostly waits for the primary's next running-xacts record.
	CreateWorkers int
	Logger        hclog.Logger
}

// DefaultConfig is the configuration's defaults, written once: the command line's flags take
// their values from it, and Validate fills a zero field from it.
func DefaultConfig() Config {
	return Config{
		Method:                topology.MethodAuto,
		Interval:              time.Second,
		WatchInterval:         50 * time.Millisecond,
		MaxBackoff:            30 * time.Second,
		SlotTimeout:           30 * time.Second,
		ObserveTimeout:        10 * time.Second,
		PrimaryConnectTimeout: 2 * time.Second,
		GateRecordInterval:    5 * time.Second,
		MaxRecordAge:          2 * time.Minute,
		PrimaryGoneAfter:      10 * time.Second,
		SilentReceiverBound:   topology.SilentReceiverBound,
		Workers:               4,
		CreateWorkers:         16,
		AdvanceStep:           256 << 20,
		Statefile:             statefile.Config{MinRestartInterval: 5 * time.Minute, MaxAttempts: 2, HoldTimeout: statefile.DefaultHoldTimeout},
		Native:                NativeConfig{StandbyGoneAfter: 5 * time.Minute},
	}
}

// Validate checks the configuration and fills each zero field from DefaultConfig. A bad value
// is refused with the fix, and nothing in PostgreSQL is changed. A negative WatchInterval means
// no watch between passes.
func (c *Config) Validate() error {
	if c.StandbyDSN == "" {
		return &topology.ConfigError{Field: "standby DSN", Problem: "is empty", Fix: "give --standby (or SLOTSYNC_STANDBY)"}
	}
	if c.StateDir == "" && !c.ReadOnly {
		return &topology.ConfigError{Field: "state directory", Problem: "is empty", Fix: "give --state-dir, a directory kept across restarts (one per cluster)"}
	}
	m, err := topology.ParseMethod(string(c.Method))
	if err != nil {
		return err
	}
	c.Method = m
	if err := c.Select.Validate(); err != nil {
		return err
	}
	d := DefaultConfig()
	for _, f := range []struct {
		name     string
		v        *time.Duration
		fallback time.Duration
	}{
		{"interval", &c.Interval, d.Interval}, {"max backoff", &c.MaxBackoff, d.MaxBackoff}, {"slot timeout", &c.SlotTimeout, d.SlotTimeout},
		{"observe timeout", &c.ObserveTimeout, d.ObserveTimeout}, {"primary connect timeout", &c.PrimaryConnectTimeout, d.PrimaryConnectTimeout},
		{"gate record interval", &c.GateRecordInterval, d.GateRecordInterval}, {"max record age", &c.MaxRecordAge, d.MaxRecordAge},
		{"primary gone after", &c.PrimaryGoneAfter, d.PrimaryGoneAfter}, {"silent receiver bound", &c.SilentReceiverBound, d.SilentReceiverBound},
		{"minimum restart interval", &c.Statefile.MinRestartInterval, d.Statefile.MinRestartInterval},
		{"catalog hold timeout", &c.Statefile.HoldTimeout, d.Statefile.HoldTimeout},
		{"standby gone after", &c.Native.StandbyGoneAfter, d.Native.StandbyGoneAfter},
	} {
		if err := orDefault(f.name, f.v, f.fallback); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name     string
		v        *int
		fallback int
	}{{"workers", &c.Workers, d.Workers}, {"create workers", &c.CreateWorkers, d.CreateWorkers},
		{"max attempts", &c.Statefile.MaxAttempts, d.Statefile.MaxAttempts}} {
		if err := orDefault(f.name, f.v, f.fallback); err != nil {
			return err
		}
	}
	if err := orDefault("advance step", &c.AdvanceStep, d.AdvanceStep); err != nil {
		return err
	}
	if c.MaxRecordAge >= c.Native.StandbyGoneAfter {
		// Rule 10: a record's "held back" outlives the standby's entry in
		// synchronized_standby_slots, which any node's sidecar takes out after --standby-gone-after.
		return &topology.ConfigError{
			Field:   "max record age",
			Problem: fmt.Sprintf("(%s) is not below --standby-gone-after (%s)", c.MaxRecordAge, c.Native.StandbyGoneAfter),
			Fix:     "give --max-record-age a value below --standby-gone-after (the same --standby-gone-after on every node)",
		}
	}
	if err := c.validateExact(); err != nil {
		return err
	}
	if c.WatchInterval == 0 {
		c.WatchInterval = d.WatchInterval
	}
	if c.MaxBackoff < c.Interval {
		c.MaxBackoff = c.Interval
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return nil
}

// validateExact checks --exact-copy-after: a duration, with the state-file settings its copies
// need (an applying engine), and a method whose own copies are not exact already.
func (c *Config) validateExact() error {
	switch {
	case c.ExactCopyAfter < 0:
		return &topology.ConfigError{Field: "exact copy after", Problem: fmt.Sprintf("is negative (%s)", c.ExactCopyAfter),
			Fix: "give --exact-copy-after a duration (e.g. 10m), or leave it out"}
	case c.ExactCopyAfter == 0:
		return nil
	case c.Method == topology.MethodStatefile:
		return &topology.ConfigError{Field: "exact copy after", Problem: "is given with --method statefile, whose copies are all exact",
			Fix: "leave out --exact-copy-after, or use --method sql (or auto) with it"}
	case c.Statefile.DataDir == "" && !c.ReadOnly:
		return &topology.ConfigError{Field: "exact copy after", Problem: "needs the standby's data directory: exact copies are installed there as state files",
			Fix: "give --standby-data-dir (slotsync then runs as its owner, on the standby's host), and --restart as for the state-file method"}
	case c.Statefile.Restarter == nil && !c.ReadOnly:
		// --restart never: the own copy would be dropped for a staged one that no start loads
		// until someone restarts the standby, and the consumer, back meanwhile, would find none.
		return &topology.ConfigError{Field: "exact copy after",
			Problem: "needs a standby restart slotsync makes (--restart never stages copies for a start it does not make)",
			Fix:     "give --restart pg_ctl, or --restart command with the HA manager's restart command"}
	}
	return nil
}

// orDefault refuses a negative value and replaces a zero one by the default.
func orDefault[T time.Duration | int | int64](name string, v *T, fallback T) error {
	switch {
	case *v < 0:
		return &topology.ConfigError{Field: name, Problem: fmt.Sprintf("is negative (%v)", *v), Fix: "give a positive value, or leave it out for the default"}
	case *v == 0:
		*v = fallback
	}
	return nil
}

// NativeConfig holds the opt-in actions for the native method (PostgreSQL 17+).
type NativeConfig struct {
	// SetFailover sets failover=true on primary slots that lack it, while they are idle.
	SetFailover bool
	// DropStale drops inactive same-name slots with synced=false on the standby (left by a
	// demotion) that stop the server's slot sync.
	DropStale bool
	// Drive calls pg_sync_replication_slots() on the standby every pass, for a standby with
	// sync_replication_slots off.
	Drive bool
	// ManageStandbySlots keeps synchronized_standby_slots (17+, rule 10): beside a standby, its
	// physical slot is listed on the primary once it streams; beside a primary (and on a
	// standby's primary), a listed slot that is missing or has had no walsender for
	// StandbyGoneAfter is taken out.
	ManageStandbySlots bool
	StandbyGoneAfter   time.Duration
}

// Endpoints parses both nodes' DSNs, with the passwords from secret files applied. The
// primary is nil when it is to be found from the standby's primary_conninfo.
func (c *Config) Endpoints() (primary, standby *topology.Endpoint, err error) {
	if c.PrimaryDSN != "" {
		if primary, err = topology.ParseEndpoint("primary", c.PrimaryDSN, c.PrimaryPassword); err != nil {
			return nil, nil, err
		}
		primary.SetUser(c.PrimaryUser, c.PrimaryPassword)
		primary.SetPasswordFile(c.PrimaryPasswordFile)
	}
	if standby, err = topology.ParseEndpoint("standby", c.StandbyDSN, c.StandbyPassword); err != nil {
		return nil, nil, err
	}
	standby.SetPasswordFile(c.StandbyPasswordFile)
	return primary, standby, nil
}

// primaryLink makes the engine's link to the primary: pinned, or discovered on every pass.
func (c *Config) primaryLink(pinned *topology.Endpoint) *primaryLink {
	if pinned != nil {
		return pinnedPrimary(pinned)
	}
	return discoveredPrimary(c.PrimaryUser, c.PrimaryPassword, c.PrimaryPasswordFile)
}

// Selection picks the slots slotsync manages. Empty lists select everything.
type Selection struct {
	Patterns  []string // shell globs on the slot name (path.Match), e.g. "debezium_*"
	Databases []string
	Plugins   []string
	// Ignore: shell globs on the slot name of slots left out whatever the rest selects (as
	// Patroni's ignore_slots).
	Ignore []string
}

// Validate rejects malformed patterns.
func (s Selection) Validate() error {
	for _, p := range append(append([]string(nil), s.Patterns...), s.Ignore...) {
		if _, err := path.Match(p, ""); err != nil {
			return &topology.ConfigError{Field: "slot pattern", Problem: fmt.Sprintf("%q is malformed", p), Fix: "use shell globs such as 'debezium_*' or 'orders?'"}
		}
	}
	return nil
}

// Matches reports whether a slot with this name, database and plugin is selected.
func (s Selection) Matches(name, database, plugin string) bool {
	return matchAny(s.Patterns, name, true) && matchAny(s.Databases, database, false) && matchAny(s.Plugins, plugin, false) &&
		(len(s.Ignore) == 0 || !matchAny(s.Ignore, name, true))
}

// Unselected names the primary's logical slots the selection leaves out (temporary ones, such
// as the catalog holds, are no consumer's to protect), and counts those it selects.
func (s Selection) Unselected(primary map[string]topology.Slot) (selected int, unselected []string) {
	for _, name := range sortedKeys(primary) {
		ps := primary[name]
		switch {
		case ps.Temporary:
		case s.Matches(name, ps.Database, ps.Plugin):
			selected++
		default:
			unselected = append(unselected, name)
		}
	}
	return selected, unselected
}

func matchAny(list []string, v string, glob bool) bool {
	if len(list) == 0 {
		return true
	}
	for _, p := range list {
		if glob {
			if ok, _ := path.Match(p, v); ok {
				return true
			}
		} else if p == v {
			return true
		}
	}
	return false
}
