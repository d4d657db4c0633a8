package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// version, when set at link time (-ldflags "-X main.version=v1.2.3"),
// overrides the module version the build info gives.
var version = ""

// versionString says which wallprof this is, from what the Go toolchain
// records in the binary: the module's version ('go install ...@v1.2.3'
// stamps it; a build in a clone stamps a pseudo-version, or "(devel)"),
// the commit it was built from (short) with "+dirty" when the tree had
// changes, and the Go version, e.g.
// "wallprof v1.2.3 (commit 0123456789ab+dirty, go1.26.0, linux/amd64)".
func versionString(bi *debug.BuildInfo, ok bool) string {
	v := version
	if v == "" && ok {
		v = bi.Main.Version
	}
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var details []string
	if ok {
		var rev string
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			if dirty {
				rev += "+dirty"
			}
			details = append(details, "commit "+rev)
		}
		details = append(details, bi.GoVersion)
	} else {
		details = append(details, runtime.Version())
	}
	details = append(details, runtime.GOOS+"/"+runtime.GOARCH)
	return fmt.Sprintf("wallprof %s (%s)", v, strings.Join(details, ", "))
}

// printVersion is 'wallprof version'.
func printVersion() string {
	bi, ok := debug.ReadBuildInfo()
	return versionString(bi, ok)
}
