// Package pgtest starts a throwaway Postgres server for tests.
package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

// Find returns the directory of Postgres's initdb and pg_ctl ("" when
// they are in PATH), or an error when Postgres is not installed.
func Find() (string, error) {
	if _, err := exec.LookPath("initdb"); err == nil {
		return "", nil
	}
	// Debian's postgresql package keeps its tools out of PATH.
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	if len(dirs) == 0 {
		return "", errors.New("Postgres is not installed (no initdb in PATH or /usr/lib/postgresql)")
	}
	return dirs[len(dirs)-1] + "/", nil
}

// Start starts a throwaway Postgres server (initdb, pg_ctl) on a
// Unix socket and returns its URL. It skips when Postgres is not
// installed. As root, the server runs as the postgres user.
func Start(t testing.TB) string {
	t.Helper()
	binDir, err := Find()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but Postgres is not installed (.ci/run installs postgresql)")
		}
		t.Skip(err)
	}
	dir, err := os.MkdirTemp("", "wallprof-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sh := func(script string) *exec.Cmd { return exec.Command("sh", "-c", script) }
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root and there is no postgres user to run Postgres")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o755)
		sh = func(script string) *exec.Cmd { return exec.Command("su", "postgres", "-s", "/bin/sh", "-c", script) }
	}
	port := 20000 + os.Getpid()%20000
	start := fmt.Sprintf("%[3]sinitdb -D %[1]s/data -A trust -U postgres >%[1]s/initdb.log 2>&1 && %[3]spg_ctl -D %[1]s/data -l %[1]s/server.log -w -o \"-p %[2]d -k %[1]s -c listen_addresses=''\" start >/dev/null", dir, port, binDir)
	if out, err := sh(start).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(dir + "/server.log")
		t.Fatalf("start Postgres: %v\n%s%s", err, out, log)
	}
	t.Cleanup(func() { sh(fmt.Sprintf("%spg_ctl -D %s/data -m immediate stop >/dev/null", binDir, dir)).Run() })
	return fmt.Sprintf("postgres://postgres@/postgres?host=%s&port=%d&sslmode=disable", dir, port)
}
