package explore

import (
	"sort"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/slotsync/slotsync/integration/drill"
)

// History is everything an iteration's judgement rests on besides the failover's outcome and
// the servers' truths (both in the report already): the two answers as the gate gave them (with
// their output, sent and returned times and the servers read around them), each consumer's first
// receipt of every change with its commit's end and every move of its offset, the standby's
// streaming samples, and the standby's WAL end at the promotion. A report keeps it, so that
// Rejudge judges the iteration again from it by today's oracle (judge), not only the figures
// the oracle drew from it then.
type History struct {
	With    GateAnswer `json:"with"`
	Without GateAnswer `json:"without"`
	// WithBinding: the answer with the primary bound the promotion (it happened at its moment).
	WithBinding bool              `json:"with_binding"`
	Consumers   []ConsumerHistory `json:"consumers"`
	Streaming   []StreamSample    `json:"standby_streaming"`
	// WALEnd: the standby's end of WAL at the promotion.
	WALEnd pglogrepl.LSN `json:"standby_wal_end"`
	// WritesAfterAnswer: the writes went on after the answer with the primary (a hook's cutover,
	// a kill bound by the servers' word, a clean stop that could not send them to the standby).
	WritesAfterAnswer bool `json:"writes_after_answer,omitempty"`
	// Residual: what rule 8a's residual is judged by (unobservedRemake).
	Residual Residual `json:"residual"`
	// Shadows: the gate mutants' answers beside the gate's (shadow.go).
	Shadows []ShadowAnswer `json:"shadows,omitempty"`
}

// ConsumerHistory is one consumer's side of a History.
type ConsumerHistory struct {
	Slot     string `json:"slot"`
	FromSlot bool   `json:"resumed_from_slot,omitempty"`
	// Receipts: each change's id and the end of its commit at its first receipt, by id.
	Receipts      [][2]uint64          `json:"first_receipts"`
	Confirmations []drill.Confirmation `json:"confirmations"`
}

// StreamSample is one read of the standby's WAL receiver (receiverLog).
type StreamSample struct {
	At        time.Time `json:"at"`
	Streaming bool      `json:"streaming"`
}

// askedAnswer is one of a History's two answers, how it was asked, and whether it bound the
// promotion.
type askedAnswer struct {
	answer  GateAnswer
	asked   string
	binding bool
}

// asked is the History's two answers: with the primary, then without it (always binding).
func (h *History) asked() []askedAnswer {
	return []askedAnswer{{h.With, askedWithPrimary, h.WithBinding}, {h.Without, "asked without the primary", true}}
}

// history gathers the world's History for its answers.
func (wd *world) history(with, without GateAnswer, binding bool) *History {
	h := &History{With: with, Without: without, WithBinding: binding, WALEnd: wd.walEnd,
		WritesAfterAnswer: wd.hook || wd.byServers || wd.stopUnsent, Residual: wd.residualAt, Shadows: wd.shadowHistory(binding)}
	for _, f := range wd.feeds {
		ch := ConsumerHistory{Slot: f.c.Slot, FromSlot: f.c.FromSlot, Confirmations: f.c.Confirmations()}
		for id, end := range f.c.FirstEnd() {
			ch.Receipts = append(ch.Receipts, [2]uint64{uint64(id), uint64(end)})
		}
		sort.Slice(ch.Receipts, func(i, j int) bool { return ch.Receipts[i][0] < ch.Receipts[j][0] })
		h.Consumers = append(h.Consumers, ch)
	}
	h.Streaming = wd.recv.streamSamples()
	return h
}

// streamSamples is the log's samples as a History keeps them (none for no log).
func (r *receiverLog) streamSamples() []StreamSample {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]StreamSample, len(r.samples))
	for i, s := range r.samples {
		out[i] = StreamSample{At: s.at, Streaming: s.streaming}
	}
	return out
}

// receivers is the History's streaming samples as a receiverLog, to be read as the live one is.
func (h *History) receivers() *receiverLog {
	r := &receiverLog{}
	for _, s := range h.Streaming {
		r.samples = append(r.samples, receiverSample{at: s.At, streaming: s.Streaming})
	}
	return r
}

// firstEnd is the commit end of each change's first receipt.
func (c ConsumerHistory) firstEnd() map[int]pglogrepl.LSN {
	out := make(map[int]pglogrepl.LSN, len(c.Receipts))
	for _, r := range c.Receipts {
		out[int(r[0])] = pglogrepl.LSN(r[1])
	}
	return out
}

// confirmedAt is the consumer's offset at time t.
func (c ConsumerHistory) confirmedAt(t time.Time) pglogrepl.LSN {
	return drill.ConfirmedIn(c.Confirmations, t)
}

// truthIn is the servers' truth read at when ("": none was).
func truthIn(truths []Truth, when string) Truth {
	for _, t := range truths {
		if t.When == when {
			return t
		}
	}
	return Truth{}
}
