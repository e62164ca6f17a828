// Package topology connects to a primary and its standby, verifies that they form one healthy
// streaming pair, and reads each node's slots and positions.
package topology
