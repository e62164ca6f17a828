// Package explore is slotsync's fault explorer: faulted failovers of throwaway pairs, the gate
// asked as an HA hook asks it, an oracle that judges each answer, written plans and mutants.
package explore
