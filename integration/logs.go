package integration

import "strings"

// LogTails returns the tail of each local server's log, for a failing test to print; empty for
// servers this package does not run itself.
func (p *Pair) LogTails() string {
	var b strings.Builder
	for _, n := range []*Node{p.Primary, p.Standby} {
		if n == nil {
			continue
		}
		if s, ok := n.life.(*localServer); ok {
			b.WriteString(n.Name + " log:" + s.logTail() + "\n")
		}
	}
	return b.String()
}
