//go:build !failpoints

package failpoint

// Hit does nothing in builds without failpoints.
func Hit(string) error { return nil }
