package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The offline commands build for the platforms people read profiles on;
// the recorder's files are behind build tags (record_other.go says what
// recording needs there). Nothing is skipped: a platform that stops
// building fails here.
func TestCrossBuild(t *testing.T) {
	dir := t.TempDir()
	for _, target := range []struct{ goos, goarch string }{
		{"linux", "arm64"}, {"darwin", "arm64"}, {"darwin", "amd64"},
	} {
		t.Run(target.goos+"-"+target.goarch, func(t *testing.T) {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "wallprof-"+target.goos+"-"+target.goarch), ".")
			cmd.Env = append(os.Environ(), "GOOS="+target.goos, "GOARCH="+target.goarch, "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("GOOS=%s GOARCH=%s go build: %v\n%s", target.goos, target.goarch, err, out)
			}
		})
	}
}
