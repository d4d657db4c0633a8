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
	"time"
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
	// noDWARF: native code is named from the symbol tables alone
	// (SkipDWARF).
	noDWARF bool
}

// SkipDWARF has native code (C, C++, Rust, and cgo's C code in Go
// programs) named from the symbol tables, without DWARF's inlined frames
// and lines: debug/dwarf indexes a file's every unit up front, 15 MB for
// libc's debug file and ~25 MB for a dynamic Go server, which a
// long-running recorder of every process (the agent) cannot spend per
// program. Go code keeps its inlined frames and lines (.gopclntab). Call
// it before use.
func (c *Cache) SkipDWARF() { c.noDWARF = true }

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
		errs = append(errs, o.close(false))
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
		o.refs++
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
	o.refs++
	if haveKey && c.byInode[key] == nil {
		c.byInode[key] = o
		if !o.haveKey {
			o.key, o.haveKey = key, true
		}
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
		old.refs++
		return old, nil
	}
	c.add(o)
	o.refs++
	return o, nil
}

// release gives back a process's reference to o.
func (c *Cache) release(o *object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o.refs--; o.refs == 0 {
		o.idle = time.Now()
	}
}

// Sweep closes and forgets the files that no open process has mapped for
// idle or longer (Process.Close), with what was parsed of them: a
// long recording of a machine whose programs come and go (the agent)
// holds the files of the programs that run, not of all that ever ran.
// Files that a program started again within idle are kept, parsed.
func (c *Cache) Sweep(idle time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	all := c.all[:0]
	n := 0
	for _, o := range c.all {
		if o.refs > 0 || now.Sub(o.idle) < idle {
			all = append(all, o)
			continue
		}
		n++
		if o.buildID != "" && c.byID[o.buildID] == o {
			delete(c.byID, o.buildID)
		}
		for k, x := range c.byInode {
			if x == o {
				delete(c.byInode, k)
			}
		}
		o.close(true)
	}
	clear(c.all[len(all):])
	c.all = all
	return n
}

// forgetCloser drops x from the closers Close will close (it was closed).
func (c *Cache) forgetCloser(x io.Closer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, y := range c.closers {
		if y == x {
			c.closers = append(c.closers[:i], c.closers[i+1:]...)
			return
		}
	}
}

// closeLater has Close close x.
func (c *Cache) closeLater(x io.Closer) {
	c.mu.Lock()
	c.closers = append(c.closers, x)
	c.mu.Unlock()
}

// close closes o's files, and with unmap gives back its .gopclntab's
// mappings: only for an object nothing can use any more (Sweep). Close
// leaves them: a goroutine still winding down may read a table, and
// reading an unmapped page would crash the recorder.
func (o *object) close(unmap bool) error {
	var errs []error
	if c, ok := o.gt.(io.Closer); ok && unmap {
		errs = append(errs, c.Close())
	}
	if o.file != nil {
		errs = append(errs, o.file.Close())
	}
	for _, d := range []*elf.File{o.debug, o.remote} {
		if d != nil {
			errs = append(errs, d.Close())
		}
	}
	return errors.Join(errs...)
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
