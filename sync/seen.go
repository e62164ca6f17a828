package sync

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/slotsync/slotsync/internal/atomicfile"
	"github.com/slotsync/slotsync/internal/failpoint"
	"github.com/slotsync/slotsync/topology"
)

// SeenFile is the file in the state directory where the daemon notes, after each pass judged
// with the primary, that the journal's gate record still says what that pass saw (rule 8).
const SeenFile = "gate-seen.json"

// SeenLagMargin: without the primary, the standby may have replayed commits this much past the
// moment the daemon's next pass was due to note the primary again (GateSeen.RenewBy) before the
// gate cannot tell (rule 8): timers and a pass slower than the one before. Both moments are read
// from the primary's clock, so no margin for clocks apart is needed.
const SeenLagMargin = time.Second

// GateSeen is the daemon's note of its last pass with the primary: the record is written at once
// when a verdict changes and otherwise only every GateRecordInterval, so the record's own
// renewal leaves the primary's last seconds unwatched; this note, written every pass, closes
// that window. It vouches only for the record it names.
type GateSeen struct {
	// Record: the gate record the pass left in force (GateRecord.ObservedAt).
	Record time.Time `json:"record_observed_at"`
	// PrimaryClock: the primary's clock when the pass observed it; RenewBy: by the same clock,
	// when the next pass was due to note it again (an interval and as long as this pass took,
	// twice).
	PrimaryClock time.Time `json:"primary_clock"`
	RenewBy      time.Time `json:"renew_by"`
}

// newGateSeen notes a pass that observed the primary at primary (its clock, zero when not
// read) and took took, under a record observed at record.
func newGateSeen(record, primary time.Time, interval, took time.Duration) *GateSeen {
	if primary.IsZero() {
		return nil
	}
	return &GateSeen{Record: record, PrimaryClock: primary, RenewBy: primary.Add(2 * (interval + max(took, 0)))}
}

// LoadGateSeen reads the note in dir (nil when there is none, or it cannot be read: then the
// gate rests on the record's own renewal, as before any note).
func LoadGateSeen(dir string) *GateSeen {
	if dir == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(dir, SeenFile))
	if err != nil {
		return nil
	}
	var s GateSeen
	if json.Unmarshal(data, &s) != nil || s.RenewBy.IsZero() {
		return nil
	}
	return &s
}

// seenReads bounds how many times readRecordAndSeen reads the journal and the note again.
const seenReads = 3

// readRecordAndSeen reads the journal, then the note (after it: the daemon writes the journal
// first, so a note of an older record is never taken for the newer one). A note of a record newer
// than the journal read means the daemon wrote both between the two reads, and such a note says
// nothing of the older record: both are read again, up to seenReads times, so that the gate is
// not left with the record's own renewal, a wider window, for a race of milliseconds. A nil
// journal is one that could not be read.
func readRecordAndSeen(journal func() *Journal, note func() *GateSeen) (*Journal, *GateSeen) {
	var j *Journal
	var s *GateSeen
	for range seenReads {
		j, s = journal(), note()
		if j == nil || j.Gate == nil || s == nil || !s.Record.After(j.Gate.ObservedAt) {
			break
		}
	}
	return j, s
}

// save writes the note. It is not fsynced: a crash that loses it leaves an older note, or
// none, which only makes the gate more careful.
func (s *GateSeen) save(dir string) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return atomicfile.WriteNoSync(dir, SeenFile, append(data, '\n'))
}

// outlived says whether the standby replayed a commit the primary made after the daemon was due
// to note it again (RenewBy and SeenLagMargin, by the primary's clock): the primary lived on
// unobserved, and a slot made again then is unknown to the record (rule 8). A note of another
// record, or none, says nothing. It is pure.
func (s *GateSeen) outlived(rec *GateRecord, standby topology.NodeInfo) bool {
	if s == nil || rec == nil || !s.Record.Equal(rec.ObservedAt) || standby.ReplayedCommitAt.IsZero() || failpoint.Mutant("seen-unchecked") {
		return false
	}
	return standby.ReplayedCommitAt.After(s.RenewBy.Add(lagMargin(SeenLagMargin, "seen-margin-doubled")))
}
