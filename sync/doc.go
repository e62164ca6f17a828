// Package sync copies logical replication slots from a primary to its physical standby, pass
// by pass, and judges whether promoting the standby now would lose a consumer's change.
//
// # The pass
//
// Engine.RunOnce is one pass: observe → plan → apply → remember → judge.
//
//   - observe (observe.go): one Observation of both nodes, standby first; the primary is found
//     from the standby's primary_conninfo unless pinned (primary.go). A failed observation
//     changes nothing.
//   - plan (plan.go): Plan is pure: the same Observation, journal and traits give the same
//     Actions, each with a Code and a Reason. Scenarios in testdata/scenarios script it.
//   - apply (apply.go): creations are written to the journal first (journal.go), then the
//     actions run on worker sessions of the chosen method, one timeout per slot.
//   - remember (memory.go): the engine's one memory between passes (backoff, copies counted,
//     copies to make again, what the watch may move) changes there and nowhere else.
//   - judge (gate.go): each slot's verdict with the primary (lsncheck.Readiness), from the
//     journal's rule-4 facts (facts.go); the GateRecord kept in the journal for judging without
//     it (record.go: JudgeWithoutPrimary), and when the primary counts as gone (liveness.go).
//
// Engine.Inspect is the same pass without apply: check and status. Between passes the watch
// (watch.go) advances copies whose consumer moved, through the plan's own rule-1 computation.
//
// # Where the rules live
//
// docs/RULES.md numbers them. Rules 1-3 (never backwards, a new incarnation is recreated,
// drop only what slotsync made) are in plan.go; rules 4-5 (when a copy is READY) in
// lsncheck.Readiness, fed by judge; rule 8 (without the primary) in record.go and liveness.go; rule 9 (a node
// that is the primary now) in role.go. Rule 6 (never leave the standby down) and rule 7 (the
// standby streams from this primary) are in the state-file method and observe.go.
//
// # Methods
//
// The engine never names a method except in methods.go, the method choice. It reads the
// chosen method's traits (sync/method.Traits: which rules its copies answer to) and calls its
// contract (sync/method): sync/method/sqlslot (sql, and native's own copies) and
// sync/method/statefile (installed state files, with their restart strategies).
//
// # Names
//
// Node types: topology.NodeInfo is what a node says of itself; NodeState a node's info and
// slots in one Observation; NodeSummary a node in the Report; NodeError a failed observation.
// Errors: CauseOf says what kind of trouble an error is, Classify what the engine does next
// (retry, skip the slot, stop for a human); the command line's exit codes follow CauseOf.
//
// Importers name this package slotsync (import slotsync ".../sync"), and it imports the
// standard library's sync as stdsync.
package sync
