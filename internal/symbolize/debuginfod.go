package symbolize

import (
	"context"
	"debug/elf"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Debuginfod fetches separate debug files by build ID from debuginfod
// servers (GET URL/buildid/ID/debuginfo) into a cache directory, where
// later runs find them without asking. A server that fails to answer is not
// asked again in the same run. It is only used when the profile is
// symbolized, after the recording: see Cache.UseDebuginfod.
type Debuginfod struct {
	urls    []string
	dir     string
	client  *http.Client
	timeout time.Duration // per file, for one server

	mu   sync.Mutex
	dead map[string]bool // servers that failed to answer
}

// debuginfodTimeout bounds one download from one server.
const debuginfodTimeout = 30 * time.Second

// maxDebuginfo bounds the size of one downloaded debug file.
const maxDebuginfo = 2 << 30

// DebuginfodFromEnv returns a client for the servers listed in
// DEBUGINFOD_URLS (separated by spaces), caching in
// $XDG_CACHE_HOME/wallprof/debuginfod (~/.cache/wallprof/debuginfod), or
// nil when the variable is empty.
func DebuginfodFromEnv() *Debuginfod {
	urls := strings.Fields(os.Getenv("DEBUGINFOD_URLS"))
	if len(urls) == 0 {
		return nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return NewDebuginfod(urls, filepath.Join(dir, "wallprof", "debuginfod"))
}

// NewDebuginfod returns a client for the servers at urls that caches the
// files it downloads in dir.
func NewDebuginfod(urls []string, dir string) *Debuginfod {
	return &Debuginfod{urls: urls, dir: dir, client: &http.Client{}, timeout: debuginfodTimeout, dead: map[string]bool{}}
}

// UseDebuginfod lets the cache fetch the debug files it does not find
// locally from d (nil: never). Call it once recording is over: objects
// whose names were looked up before keep what they had.
func (c *Cache) UseDebuginfod(d *Debuginfod) {
	c.mu.Lock()
	c.dinfod = d
	c.mu.Unlock()
}

func (c *Cache) debuginfod() *Debuginfod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dinfod
}

// fetch returns the path of the debug file with build ID id, from the
// cache directory or downloaded into it.
func (d *Debuginfod) fetch(id string) (string, error) {
	if !isGNUBuildID(id) {
		return "", fmt.Errorf("not a GNU build ID: %q", id)
	}
	dst := filepath.Join(d.dir, id, "debuginfo")
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	var errs []string
	for _, u := range d.urls {
		if d.isDead(u) {
			continue
		}
		err := d.download(strings.TrimSuffix(u, "/")+"/buildid/"+id+"/debuginfo", dst)
		if err == nil {
			return dst, nil
		}
		errs = append(errs, err.Error())
	}
	return "", fmt.Errorf("debuginfod: no debug file for build ID %s: %s", id, strings.Join(errs, "; "))
}

func (d *Debuginfod) isDead(u string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dead[u]
}

// download writes url's body to dst, through a temporary file renamed when
// complete. A server that cannot be reached or fails (5xx) is marked dead;
// one that says it has no such file (404) is not.
func (d *Debuginfod) download(url, dst string) error {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := d.client.Do(req)
	if err != nil || resp.StatusCode >= 500 {
		d.mu.Lock()
		d.dead[strings.SplitN(url, "/buildid/", 2)[0]] = true
		for _, u := range d.urls {
			if strings.HasPrefix(url, strings.TrimSuffix(u, "/")+"/buildid/") {
				d.dead[u] = true
			}
		}
		d.mu.Unlock()
		if err != nil {
			return err
		}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".download-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, io.LimitReader(resp.Body, maxDebuginfo+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if n > maxDebuginfo {
		return fmt.Errorf("GET %s: larger than %d bytes", url, int64(maxDebuginfo))
	}
	return os.Rename(tmp.Name(), dst)
}

// fetchDebugFile returns the debug file of build ID id from d, checked
// like a local one, or nil.
func fetchDebugFile(d *Debuginfod, id string) *elf.File {
	p, err := d.fetch(id)
	if err != nil {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	if df := checkDebugFile(f, id, false, 0); df != nil && buildID(df) == id {
		return df
	}
	f.Close()
	os.Remove(p) // not what was asked for: do not keep it
	return nil
}
