package symbolize

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/wallprof/wallprof/internal/profile"
)

// ErrKernelSymbolsHidden is returned by LoadKernel when /proc/kallsyms shows
// only zero addresses.
var ErrKernelSymbolsHidden = errors.New("kernel symbols are hidden: run as root or set kernel.kptr_restrict=0")

// Kernel symbolizes kernel addresses from /proc/kallsyms.
type Kernel struct {
	syms    []ksym // sorted by address
	names   string // the symbols' names, end to end (ksym.off, ksym.n)
	mapping *profile.Mapping
	// initEnd is the end of the kernel image's text (_einittext): an
	// address past it that no module or BPF symbol claims is not the last
	// core symbol's.
	initEnd uint64
}

type ksym struct {
	addr   uint64
	off, n uint32 // its name in Kernel.names
}

// LoadKernel reads /proc/kallsyms and the kernel build ID.
func LoadKernel() (*Kernel, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return nil, fmt.Errorf("open kernel symbols: %w", err)
	}
	defer f.Close()
	k, err := parseKallsyms(f)
	if err != nil {
		return nil, err
	}
	if notes, err := os.ReadFile("/sys/kernel/notes"); err == nil {
		forEachNote(notes, func(name string, typ uint32, desc []byte) {
			if name == "GNU" && typ == 3 {
				k.mapping.BuildID = hex.EncodeToString(desc)
			}
		})
	}
	return k, nil
}

// parseKallsyms reads kallsyms text: "ADDR TYPE NAME [MODULE]" per line.
// Only text symbols are kept; __pfx_ padding symbols are skipped.
func parseKallsyms(rd io.Reader) (*Kernel, error) {
	k := &Kernel{mapping: &profile.Mapping{ID: 1, File: "[kernel.kallsyms]", Kernel: true}}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	nonZero := false
	// The names end to end in one string: a string per line (or per
	// name) held 6 MB for a kernel's 70,000 text symbols.
	var names []byte
	var f [4][]byte
	for sc.Scan() {
		// "ADDR TYPE NAME [MODULE]", split without allocating: the file
		// has ~200,000 lines, and a string per field was 25 MB of garbage
		// at the recorder's start, its peak memory.
		nf := 0
		for line := sc.Bytes(); len(line) > 0 && nf < len(f); {
			line = bytes.TrimLeft(line, " \t")
			if len(line) == 0 {
				break
			}
			end := bytes.IndexAny(line, " \t")
			if end < 0 {
				end = len(line)
			}
			if nf == 3 {
				end = len(line) // the module, "[name]", to the end
			}
			f[nf] = line[:end]
			nf++
			line = line[end:]
		}
		if nf < 3 {
			continue
		}
		addr, ok := parseHex(f[0])
		if !ok {
			continue
		}
		nonZero = nonZero || addr != 0
		if len(f[1]) != 1 {
			continue
		}
		switch f[1][0] {
		case 't', 'T', 'w', 'W':
		default:
			continue
		}
		name := f[2]
		if bytes.HasPrefix(name, []byte("__pfx_")) {
			continue
		}
		off := len(names)
		names = append(names, name...)
		if nf > 3 {
			names = append(append(names, ' '), bytes.TrimRight(f[3], " \t")...)
		} else {
			switch string(name) {
			case "_stext":
				k.mapping.Start = addr
			case "_text":
				if k.mapping.Start == 0 {
					k.mapping.Start = addr
				}
			case "_etext":
				k.mapping.Limit = addr
			case "_einittext":
				k.initEnd = addr
			}
		}
		k.syms = append(k.syms, ksym{addr: addr, off: uint32(off), n: uint32(len(names) - off)})
	}
	k.names = string(names) // one copy, of the exact size
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read kernel symbols: %w", err)
	}
	if !nonZero || len(k.syms) == 0 {
		return nil, ErrKernelSymbolsHidden
	}
	sort.SliceStable(k.syms, func(i, j int) bool { return k.syms[i].addr < k.syms[j].addr })
	if k.mapping.Limit == 0 {
		k.mapping.Limit = k.syms[len(k.syms)-1].addr + 1
	}
	return k, nil
}

// KernelMapping returns the mapping kernel frames belong to (Kernel=true,
// with the kernel's build ID when /sys/kernel/notes was readable).
func (k *Kernel) KernelMapping() *profile.Mapping { return k.mapping }

// Resolve names a kernel address. Module symbols carry "[module]", BPF
// programs "[bpf]" (when the kernel lists them: net.core.bpf_jit_kallsyms).
// Names keep compiler suffixes such as ".isra.0". An address below the
// first symbol resolves to "[kernel]+0xADDR"; one past the kernel image's
// text that no module or BPF program claims (a program loaded after the
// symbols were read, a trampoline) to "[unknown kernel]".
func (k *Kernel) Resolve(addr uint64) profile.Frame {
	i := sort.Search(len(k.syms), func(i int) bool { return k.syms[i].addr > addr }) - 1
	if i < 0 {
		return profile.Frame{Function: fmt.Sprintf("[kernel]+0x%x", addr)}
	}
	if k.initEnd != 0 && addr > k.initEnd && !strings.Contains(k.name(i), " [") {
		return profile.Frame{Function: "[unknown kernel]"}
	}
	return profile.Frame{Function: k.name(i)}
}

// name is symbol i's name.
func (k *Kernel) name(i int) string {
	s := k.syms[i]
	return k.names[s.off : s.off+s.n]
}

// parseHex parses an address in hexadecimal.
func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(c)
	}
	return v, true
}
