package statefile

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/slotsync/slotsync/internal/failpoint"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/slotsync/slotsync/lsncheck"
	"github.com/slotsync/slotsync/sync/method"
	"github.com/slotsync/slotsync/topology"
)

// catalogHold closes the catalog_xmin window of state-file copies (docs/RULES.md rule 4): from
// the moment a slot's state file is read until the standby's hot_standby_feedback reports the
// copy's catalog_xmin, only the primary slot itself protects the catalog rows the copy needs,
// and its consumer may move it on meanwhile. Before the state file is read, the slot is copied on
// the primary into a temporary slot (pg_copy_logical_replication_slot, 12+), which holds the
// catalog rows (and the WAL) from the slot's positions then; it is dropped once the standby's
// physical slot carries a horizon at or before the copy's catalog_xmin. Temporary slots vanish
// with their session, so a crash of slotsync leaves nothing behind.
type catalogHold struct {
	log   hclog.Logger
	conns map[string]*pgx.Conn // per database: a logical slot is copied in its own database
	held  map[string]holding   // by slot name
	// maxHold bounds a hold whose feedback never comes (hot_standby_feedback off, say): the
	// gate then says copy_catalog_unprotected, and the primary is not pinned forever.
	maxHold time.Duration
	now     func() time.Time
}

type holding struct {
	temp, database string
	since          time.Time
}

func newCatalogHold(log hclog.Logger) *catalogHold {
	return &catalogHold{log: log, conns: map[string]*pgx.Conn{}, held: map[string]holding{},
		maxHold: 10 * time.Minute, now: time.Now}
}

// HoldName is the temporary slot's name: method.HoldPrefix and a hash of the slot's name (slot names
// are at most 63 characters).
func HoldName(slot string) string {
	h := fnv.New64a()
	h.Write([]byte(slot))
	return fmt.Sprintf("%s%016x", method.HoldPrefix, h.Sum64())
}

// Take holds the catalog rows of slot ps on the primary until Release finds the standby covers
// them. It is called before the slot's state file is read. A primary that cannot copy slots
// (11) or refuses is logged: the copy goes on, and the gate judges the horizon as before.
func (h *catalogHold) Take(ctx context.Context, ep *topology.Endpoint, ps topology.Slot, major int) {
	if _, ok := h.held[ps.Name]; ok || major < 12 {
		return
	}
	conn := h.conns[ps.Database]
	if conn == nil || conn.IsClosed() {
		c, err := ep.Connect(ctx, ps.Database)
		if err != nil {
			h.log.Warn("could not hold the catalog rows of a slot being copied", "slot", ps.Name, "error", err)
			return
		}
		conn, h.conns[ps.Database] = c, c
	}
	temp := HoldName(ps.Name)
	// A hold of this name left in this session by an earlier, released copy is dropped first.
	_, _ = conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid = pg_backend_pid()", temp)
	if _, err := conn.Exec(ctx, "SELECT pg_copy_logical_replication_slot($1, $2, true)", ps.Name, temp); err != nil {
		h.log.Warn("could not hold the catalog rows of a slot being copied", "slot", ps.Name, "error", err)
		if !conn.IsClosed() && ctx.Err() == nil {
			return
		}
		delete(h.conns, ps.Database)
		return
	}
	h.held[ps.Name] = holding{temp: temp, database: ps.Database, since: h.now()}
	_ = failpoint.Hit("hold.taken")
}

// Release drops each hold the standby now covers: its copy is there and the physical slot's
// horizon (hot_standby_feedback) is set and not newer than the copy's catalog_xmin; a hold whose
// copy is not there while no copy is pending, or that is older than maxHold, is dropped too.
func (h *catalogHold) Release(ctx context.Context, horizon lsncheck.XID, copies map[string]topology.Slot, pending func(string) bool) {
	for name, hd := range h.held {
		cp, ok := copies[name]
		covered := ok && cp.CatalogXmin != 0 && horizon != 0 && !lsncheck.XIDPrecedes(cp.CatalogXmin, horizon)
		expired := h.now().Sub(hd.since) > h.maxHold
		if !covered && !expired && (ok || pending(name)) {
			continue
		}
		if expired && !covered {
			h.log.Warn("released the catalog hold of a slot copy the standby's feedback never covered (is hot_standby_feedback on?)", "slot", name, "held", h.now().Sub(hd.since).Round(time.Second).String())
		}
		h.drop(ctx, name, hd)
	}
}

func (h *catalogHold) drop(ctx context.Context, name string, hd holding) {
	delete(h.held, name)
	conn := h.conns[hd.database]
	if conn == nil || conn.IsClosed() {
		return // the session ended: its temporary slot is gone with it
	}
	_ = failpoint.Hit("hold.release")
	if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", hd.temp); err != nil {
		h.log.Warn("could not drop a catalog hold; it goes with its session", "slot", name, "hold", hd.temp, "error", err)
		_ = conn.Close(ctx)
		delete(h.conns, hd.database)
	}
}

// Held names the slots whose catalog rows are held now.
func (h *catalogHold) Held() []string { return slices.Sorted(maps.Keys(h.held)) }

// Close ends every hold (their temporary slots go with the sessions).
func (h *catalogHold) Close() {
	for db, c := range h.conns {
		_ = c.Close(context.Background())
		delete(h.conns, db)
	}
	h.held = map[string]holding{}
}
