// Package drill runs failover drills on a primary/standby pair: slots, writes, real consumers
// over the replication protocol, slotsync, promotion, resumption on the new primary, and a
// verdict on every change (none lost, none repeated past the consumer's confirmed position).
package drill
