package lsncheck

import (
	"encoding/json"
	"fmt"
)

// Identity is what a logical slot is, apart from where it is: a slot whose identity changes
// under the same name is another slot.
type Identity struct {
	Name     string `json:"name"`
	Database string `json:"database"`
	Plugin   string `json:"plugin"`
	TwoPhase bool   `json:"two_phase"`
}

// Position is where a slot is. Zero fields are NULL (a slot still being created, or invalidated).
type Position struct {
	RestartLSN     LSN `json:"restart_lsn"`
	ConfirmedFlush LSN `json:"confirmed_flush"`
	CatalogXmin    XID `json:"catalog_xmin"`
}

// Known reports whether every position is set.
func (p Position) Known() bool {
	return p.RestartLSN != 0 && p.ConfirmedFlush != 0 && p.CatalogXmin != 0
}

// String renders the position for logs.
func (p Position) String() string {
	return fmt.Sprintf("restart_lsn=%s confirmed_flush=%s catalog_xmin=%d", p.RestartLSN, p.ConfirmedFlush, p.CatalogXmin)
}

// Change is the verdict on a slot seen again under the same name.
type Change int

const (
	// Unchanged: same identity, same positions.
	Unchanged Change = iota
	// MovedForward: same identity; no position went backwards and at least one moved.
	MovedForward
	// NewIncarnation: the identity changed or a monotonic position went backwards: the slot was
	// dropped and recreated (or refilled by pg_copy_logical_replication_slot).
	NewIncarnation
)

func (c Change) String() string {
	switch c {
	case Unchanged:
		return "unchanged"
	case MovedForward:
		return "moved forward"
	case NewIncarnation:
		return "new incarnation"
	}
	return fmt.Sprintf("Change(%d)", int(c))
}

// SameSlotRegression reports whether a position going back between prev and cur is still the
// same slot (docs/RULES.md rule 2): the identity held, catalog_xmin did not go back, and what went
// back is confirmed_flush (PostgreSQL saves it at checkpoints only, so a crash of the server
// loses the newer value; a consumer may also confirm an older position again), or, after a
// restart of the primary, restart_lsn (minors before 13.18/14.15/15.10/16.6/17.2 could move it
// back at a restart). Anything else that goes back is a new incarnation.
func SameSlotRegression(prev, cur Seen, primaryRestarted bool) bool {
	if prev.Identity != cur.Identity {
		return false
	}
	if prev.CatalogXmin != 0 && cur.CatalogXmin != 0 && XIDPrecedes(cur.CatalogXmin, prev.CatalogXmin) {
		return false
	}
	restartBack := prev.RestartLSN != 0 && cur.RestartLSN != 0 && cur.RestartLSN < prev.RestartLSN
	confirmedBack := prev.ConfirmedFlush != 0 && cur.ConfirmedFlush != 0 && cur.ConfirmedFlush < prev.ConfirmedFlush
	if restartBack {
		return primaryRestarted
	}
	return confirmedBack
}

// RestartLSNMayRegress reports whether a server of this version (server_version_num) can take
// a slot's restart_lsn back without a restart, when its consumer reconnects: fixed in
// 13.18, 14.15, 15.10, 16.6 and 17.2, never in 11 and 12 (release notes of 2024-11-21).
func RestartLSNMayRegress(versionNum int) bool {
	fixed := map[int]int{13: 130018, 14: 140015, 15: 150010, 16: 160006, 17: 170002}
	major := versionNum / 10000
	switch {
	case versionNum == 0:
		return false
	case major <= 12:
		return true
	case fixed[major] != 0:
		return versionNum < fixed[major]
	}
	return false
}

// Seen is a slot as observed at one moment.
type Seen struct {
	Identity
	Position
}

// CompareIncarnation judges cur against prev, an earlier observation of the same-name slot on
// the same node. A NULL position on either side is not compared (it proves nothing).
// The reason says what changed, for logs.
func CompareIncarnation(prev, cur Seen) (Change, string) {
	switch {
	case prev.Database != cur.Database:
		return NewIncarnation, fmt.Sprintf("database changed from %q to %q", prev.Database, cur.Database)
	case prev.Plugin != cur.Plugin:
		return NewIncarnation, fmt.Sprintf("plugin changed from %q to %q", prev.Plugin, cur.Plugin)
	case prev.TwoPhase != cur.TwoPhase:
		return NewIncarnation, fmt.Sprintf("two_phase changed from %v to %v", prev.TwoPhase, cur.TwoPhase)
	}
	if prev.RestartLSN != 0 && cur.RestartLSN != 0 && cur.RestartLSN < prev.RestartLSN {
		return NewIncarnation, fmt.Sprintf("restart_lsn went backwards from %s to %s", prev.RestartLSN, cur.RestartLSN)
	}
	if prev.ConfirmedFlush != 0 && cur.ConfirmedFlush != 0 && cur.ConfirmedFlush < prev.ConfirmedFlush {
		return NewIncarnation, fmt.Sprintf("confirmed_flush went backwards from %s to %s", prev.ConfirmedFlush, cur.ConfirmedFlush)
	}
	if prev.CatalogXmin != 0 && cur.CatalogXmin != 0 && XIDPrecedes(cur.CatalogXmin, prev.CatalogXmin) {
		return NewIncarnation, fmt.Sprintf("catalog_xmin went backwards from %d to %d", prev.CatalogXmin, cur.CatalogXmin)
	}
	if prev.Position == cur.Position {
		return Unchanged, "unchanged"
	}
	return MovedForward, "moved forward"
}

// positionJSON is Position's JSON form: LSNs in PostgreSQL's text form, readable by operators.
type positionJSON struct {
	RestartLSN     string `json:"restart_lsn"`
	ConfirmedFlush string `json:"confirmed_flush"`
	CatalogXmin    XID    `json:"catalog_xmin"`
}

// MarshalJSON writes LSNs as "X/Y".
func (p Position) MarshalJSON() ([]byte, error) {
	return json.Marshal(positionJSON{p.RestartLSN.String(), p.ConfirmedFlush.String(), p.CatalogXmin})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Position) UnmarshalJSON(data []byte) error {
	var j positionJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	var err error
	if p.RestartLSN, err = ParseLSN(j.RestartLSN); err != nil {
		return err
	}
	if p.ConfirmedFlush, err = ParseLSN(j.ConfirmedFlush); err != nil {
		return err
	}
	p.CatalogXmin = j.CatalogXmin
	return nil
}
