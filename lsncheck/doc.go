// Package lsncheck holds slotsync's pure rules: LSN distances, whether a slot seen again is the
// same incarnation, and whether a standby copy is ready to be used after promotion.
package lsncheck
