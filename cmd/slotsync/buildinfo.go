package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at build time with -ldflags "-X main.version=… -X main.commit=… -X main.date=…" (the
// release builds do); otherwise read from the module and VCS information Go records.
var (
	version = "dev"
	commit  = ""
	date    = ""
)

// buildInfo is where this binary came from: `slotsync version` and slotsync_build_info.
type buildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"go_version"`
}

func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version // go install …@v1.2.3
		}
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && b.Commit == "":
				b.Commit = s.Value
			case s.Key == "vcs.time" && b.Date == "":
				b.Date = s.Value
			case s.Key == "vcs.modified" && s.Value == "true" && b.Commit != "" && commit == "":
				b.Commit += "-dirty"
			}
		}
	}
	for _, p := range []*string{&b.Commit, &b.Date} {
		if *p == "" {
			*p = "unknown"
		}
	}
	return b
}

func (b buildInfo) String() string { return "slotsync " + b.details() }

func (b buildInfo) details() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s)", b.Version, b.Commit, b.Date, b.GoVersion)
}
