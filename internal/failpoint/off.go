//go:build !failpoints

package failpoint

// Hit does nothing in builds without failpoints.
func Hit(string) error { return nil }

// Mutant is false in builds without failpoints: no safety check can be switched off.
func Mutant(string) bool { return false }
