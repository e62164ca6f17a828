// Package failpoint lets test builds crash (as kill -9 would), delay or fail slotsync at named
// steps, chosen with SLOTSYNC_FAILPOINTS; builds without the tag failpoints (every release) have
// none, and Hit compiles to nothing.
//
// SLOTSYNC_FAILPOINTS is a comma-separated list of name=action, where action is crash,
// error, or delay:<duration>; a name may end in @N to act only on its Nth hit (from 1), e.g.
// "sql.after-create=crash,engine.actions-done=delay:2s,statefile.standby-stopped@2=error".
//
// The same builds can switch off one safety check of the gate, named in SLOTSYNC_MUTANT (Mutant):
// the fault explorer's mutation matrix runs them to show that it catches each.
package failpoint
