//go:build !failpoints

package failpoint

// Enabled is false: this build has no failpoints.
const Enabled = false

// Hit does nothing in builds without failpoints.
func Hit(string) error { return nil }
