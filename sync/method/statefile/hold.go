package statefile

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	stdsync "sync"
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
// with their session, so a crash of slotsync leaves nothing behind, and the sessions ask the
// server for TCP keepalives, so a lost host does not either.
//
// The hold is fail-closed: the gate calls a copy READY only once one observation has shown the
// standby's horizon covering the copy while the primary slot or this hold still kept its rows
// (rule 4). A hold that lapses first (it failed to take, expired, or the primary restarted)
// leaves the copy NOT READY, and the copy is made again.
type catalogHold struct {
	log hclog.Logger
	mu  stdsync.Mutex // the expiry timers run apart from the passes
	// conns: per database, a logical slot is copied in its own database.
	conns map[string]*pgx.Conn
	held  map[string]*holding // by slot name
	// maxHold bounds a hold whose feedback never comes (hot_standby_feedback off, the standby
	// down): its timer drops it then, pass or no pass, and the primary is not pinned forever.
	maxHold time.Duration
}

type holding struct {
	temp, database string
	timer          *time.Timer
}

// DefaultHoldTimeout is how long a catalog hold waits for the standby's feedback.
const DefaultHoldTimeout = 10 * time.Minute

func newCatalogHold(log hclog.Logger, maxHold time.Duration) *catalogHold {
	return &catalogHold{log: log, conns: map[string]*pgx.Conn{}, held: map[string]*holding{},
		maxHold: cmp.Or(maxHold, DefaultHoldTimeout)}
}

// keepalives make the primary end a hold's session, and the hold with it, within about a minute
// of losing slotsync's host (the OS default is about two hours). Over a Unix socket they do
// nothing.
const keepalives = "SET tcp_keepalives_idle = 30; SET tcp_keepalives_interval = 10; SET tcp_keepalives_count = 3"

// idleBound is how long the primary lets a hold session stay idle before it ends it, and its
// holds with it (idle_session_timeout, 14+): maxHold and as much again, a minute at most. The
// timer of each hold (expire) ends it at maxHold; a slotsync that cannot run its timers (its
// process stopped, its host frozen) keeps a live TCP connection, which keepalives do not end,
// and without this bound would pin the primary's catalog rows and WAL for as long as it is
// stopped. Every statement of the session (a take, a release) starts the bound again, and a
// session idle that long keeps only holds older than maxHold.
func idleBound(maxHold time.Duration) time.Duration {
	return min(maxHold+min(maxHold, time.Minute), math.MaxInt32*time.Millisecond) // the setting's own maximum
}

// takeTimeout bounds taking a hold: a few quick statements on the primary, which on a route gone
// silent would otherwise wait for TCP to give up (minutes), holding up the pass and the expiry
// of the holds already taken.
const takeTimeout = 10 * time.Second

// Take holds the catalog rows of slot ps on the primary until Release finds the standby covers
// them; standby is the standby's physical slot, part of the hold's name. It is called before the
// slot's state file is read. A primary that cannot copy slots (11) or refuses is logged: the
// copy goes on, and the gate says it is NOT READY unless the primary slot itself still keeps its
// rows when the standby's feedback covers it. A take that does not finish within takeTimeout
// ends the hold session, and the holds it kept with it: the plan sees them gone on the primary.
func (h *catalogHold) Take(ctx context.Context, ep *topology.Endpoint, standby string, ps topology.Slot, major int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.held[ps.Name]; ok || major < 12 || failpoint.Mutant("catalog-hold-off") {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, takeTimeout)
	defer cancel()
	conn, err := h.conn(ctx, ep, ps.Database, major)
	if err != nil {
		h.log.Warn("could not hold the catalog rows of a slot being copied", "slot", ps.Name, "error", err)
		return
	}
	temp := method.HoldName(standby, ps.Name)
	// A hold of this name left in this session by an earlier, released copy is dropped first.
	_, _ = conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid = pg_backend_pid()", temp)
	if _, err := conn.Exec(ctx, "SELECT pg_copy_logical_replication_slot($1, $2, true)", ps.Name, temp); err != nil {
		h.log.Warn("could not hold the catalog rows of a slot being copied", "slot", ps.Name, "error", err)
		if conn.IsClosed() || ctx.Err() != nil {
			h.endSession(ps.Database)
		}
		return
	}
	hd := &holding{temp: temp, database: ps.Database}
	hd.timer = time.AfterFunc(h.maxHold, func() { h.expire(ps.Name, hd) })
	h.held[ps.Name] = hd
	_ = failpoint.Hit("hold.taken")
}

// endSession closes the hold session of database db, whose temporary slots go with it, and
// forgets the holds it kept; the caller holds h.mu.
func (h *catalogHold) endSession(db string) {
	if c := h.conns[db]; c != nil {
		_ = c.Close(context.Background())
	}
	delete(h.conns, db)
	for name, hd := range h.held {
		if hd.database == db {
			if hd.timer != nil {
				hd.timer.Stop()
			}
			delete(h.held, name)
		}
	}
}

// conn is the hold session of database db, opened with keepalives (and on 14+ the primary's own
// bound on its idleness, idleBound) when there is none.
func (h *catalogHold) conn(ctx context.Context, ep *topology.Endpoint, db string, major int) (*pgx.Conn, error) {
	if c := h.conns[db]; c != nil && !c.IsClosed() {
		return c, nil
	}
	c, err := ep.Connect(ctx, db)
	if err != nil {
		return nil, err
	}
	set := keepalives
	if major >= 14 {
		set += fmt.Sprintf("; SET idle_session_timeout = %d", idleBound(h.maxHold).Milliseconds())
	}
	if _, err := c.Exec(ctx, set); err != nil {
		_ = c.Close(context.Background())
		return nil, fmt.Errorf("hold session: %s: %w", set, err)
	}
	h.conns[db] = c
	return c, nil
}

// expire drops hold hd of slot name once maxHold has passed, whether passes run or not.
func (h *catalogHold) expire(name string, hd *holding) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held[name] != hd {
		return // released already
	}
	h.log.Warn(
		"released the catalog hold of a slot copy the standby's feedback never covered (is hot_standby_feedback on, and the standby up?); the copy is made again",
		"slot",
		name,
		"held",
		h.maxHold.String(),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h.drop(ctx, name, hd)
}

// Release drops each hold the standby now covers: its copy is there and the physical slot's
// horizon (hot_standby_feedback) is set and not newer than the copy's catalog_xmin; a hold whose
// copy is not there while no copy is pending is dropped too. An older hold than maxHold is gone
// already: its timer dropped it (expire).
func (h *catalogHold) Release(ctx context.Context, horizon lsncheck.XID, copies map[string]topology.Slot, pending func(string) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, hd := range h.held {
		cp, ok := copies[name]
		covered := ok && cp.CatalogXmin != 0 && horizon != 0 && !lsncheck.XIDPrecedes(cp.CatalogXmin, horizon)
		if !covered && (ok || pending(name)) {
			continue
		}
		h.drop(ctx, name, hd)
	}
}

// drop ends hold hd of slot name; the caller holds h.mu.
func (h *catalogHold) drop(ctx context.Context, name string, hd *holding) {
	delete(h.held, name)
	if hd.timer != nil {
		hd.timer.Stop()
	}
	conn := h.conns[hd.database]
	if conn == nil || conn.IsClosed() {
		return // the session ended: its temporary slot is gone with it
	}
	_ = failpoint.Hit("hold.release")
	if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", hd.temp); err != nil {
		h.log.Warn("could not drop a catalog hold; it goes with its session", "slot", name, "hold", hd.temp, "error", err)
		_ = conn.Close(context.Background())
		delete(h.conns, hd.database)
	}
}

// Held names the slots whose catalog rows are held now.
func (h *catalogHold) Held() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.held))
}

// Close ends every hold (their temporary slots go with the sessions).
func (h *catalogHold) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hd := range h.held {
		if hd.timer != nil {
			hd.timer.Stop()
		}
	}
	for db, c := range h.conns {
		_ = c.Close(context.Background())
		delete(h.conns, db)
	}
	h.held = map[string]*holding{}
}
