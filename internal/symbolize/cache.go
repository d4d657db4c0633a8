package symbolize

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
)

// Cache holds parsed ELF files, keyed by build ID and by device, inode,
// size and modification time, so that every process mapping the same
// library shares one parsed copy. Create one Cache per profiler run and pass
// it to every process; it is safe for concurrent use. Files stay open until
// Close.
type Cache struct {
	mu      sync.Mutex
	byID    map[string]*object
	byInode map[inodeKey]*object
	all     []*object
	closers []io.Closer // process roots, JIT symbol files
	dinfod  *Debuginfod
}

type inodeKey struct {
	dev, ino uint64
	size     int64
	mtime    int64
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{byID: map[string]*object{}, byInode: map[inodeKey]*object{}}
}

// Close closes every file the cache holds. Processes created from the cache
// must not be used afterwards.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, o := range c.all {
		if o.file != nil {
			errs = append(errs, o.file.Close())
		}
		for _, d := range []*elf.File{o.debug, o.remote} {
			if d != nil {
				errs = append(errs, d.Close())
			}
		}
	}
	for _, cl := range c.closers {
		cl.Close()
	}
	c.closers = nil
	c.all, c.byID, c.byInode = nil, map[string]*object{}, map[inodeKey]*object{}
	return errors.Join(errs...)
}

// openFile returns the parsed object for the first of paths that opens. name
// is the path recorded for messages (the path in /proc/PID/maps).
func (c *Cache) openFile(name string, paths ...string) (*object, error) {
	return c.openFileIn(hostRoot{}, name, paths...)
}

// openFileIn is openFile for a process whose root directory is root, where
// the object's separate debug files are looked for.
func (c *Cache) openFileIn(root fsRoot, name string, paths ...string) (*object, error) {
	var f *os.File
	var err error
	for _, p := range paths {
		if f, err = os.Open(p); err == nil {
			break
		}
	}
	if f == nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	key, haveKey := statKey(f)
	c.mu.Lock()
	if o := c.byInode[key]; haveKey && o != nil {
		c.mu.Unlock()
		f.Close()
		return o, nil
	}
	c.mu.Unlock()
	ef, err := elf.NewFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read ELF %s: %w", name, err)
	}
	o := newObject(name, ef, f)
	o.root, o.cache = root, c
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.byID[o.buildID]; o.buildID != "" && old != nil {
		f.Close()
		o = old
	} else {
		c.add(o)
	}
	if haveKey {
		c.byInode[key] = o
	}
	return o, nil
}

// openMemory parses an ELF image held in memory (the vDSO).
func (c *Cache) openMemory(name string, image []byte) (*object, error) {
	ef, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		return nil, fmt.Errorf("read ELF %s: %w", name, err)
	}
	o := newObject(name, ef, nil)
	o.root, o.cache = hostRoot{}, c
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.byID[o.buildID]; o.buildID != "" && old != nil {
		return old, nil
	}
	c.add(o)
	return o, nil
}

// closeLater has Close close x.
func (c *Cache) closeLater(x io.Closer) {
	c.mu.Lock()
	c.closers = append(c.closers, x)
	c.mu.Unlock()
}

func (c *Cache) add(o *object) {
	if o.buildID != "" {
		c.byID[o.buildID] = o
	}
	c.all = append(c.all, o)
}

func statKey(f *os.File) (inodeKey, bool) {
	fi, err := f.Stat()
	if err != nil {
		return inodeKey{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return inodeKey{}, false
	}
	return inodeKey{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano()}, true
}
