package latency

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// IsNative reports whether name is a native function, "lib:symbol": the
// part before the colon names a shared library (it contains ".so", or
// starts with "lib" and has no dot: "libc") or is an absolute path. Go
// names with colons ("type:.eq.main.T") are not.
func IsNative(name string) bool {
	lib, sym, ok := strings.Cut(name, ":")
	return ok && sym != "" && (strings.Contains(lib, ".so") || strings.HasPrefix(lib, "/") ||
		strings.HasPrefix(lib, "lib") && !strings.Contains(lib, "."))
}

// resolveNative finds "lib:symbol" in the files process pid has mapped: lib
// is a path, a file name (libc.so.6), or a file name's start (libc).
func resolveNative(pid int, name string) (Func, error) {
	lib, sym, _ := strings.Cut(name, ":")
	path, err := findMapped(pid, lib)
	if err != nil {
		return Func{}, err
	}
	root := "/proc/" + strconv.Itoa(pid) + "/root"
	ef, err := elf.Open(root + path)
	if err != nil {
		return Func{}, fmt.Errorf("%w: cannot read %s: %v", ErrRefused, path, err)
	}
	defer ef.Close()
	if !hasFunc(ef, sym) {
		return Func{}, fmt.Errorf("%w: %s has no function %s", ErrRefused, path, sym)
	}
	return Func{Name: name, Lib: root + path, Symbol: sym}, nil
}

func hasFunc(ef *elf.File, sym string) bool {
	for _, read := range []func() ([]elf.Symbol, error){ef.DynamicSymbols, ef.Symbols} {
		syms, _ := read()
		for _, s := range syms {
			if s.Name == sym && elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
				return true
			}
		}
	}
	return false
}

// findMapped returns the path of the file mapped executable by pid that lib
// names.
func findMapped(pid int, lib string) (string, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.Contains(fields[1], "x") {
			continue
		}
		path := fields[5]
		base := filepath.Base(path)
		if path == lib || base == lib || strings.HasPrefix(base, lib+".") || strings.HasPrefix(base, lib+"-") {
			return path, nil
		}
	}
	return "", fmt.Errorf("%w: process %d has no library %s mapped", ErrRefused, pid, lib)
}
