package symbolize

import (
	"bytes"
	"debug/elf"
	"hash/crc32"
	"io"
	"os"
	"path"
	"strings"

	"github.com/ulikunitz/xz"
)

// debugRoot is where distributions install separate debug files (Debian's
// -dbgsym packages, Fedora's -debuginfo).
const debugRoot = "/usr/lib/debug"

// findDebugFile looks for the separate debug file of the object at name (its
// path in the process's mount namespace), reading through root (the
// process's root directory) and then, for build-ID paths, wallprof's own
// root (a debug file installed on the host matches by build ID):
//   - /usr/lib/debug/.build-id/xx/yyyy.debug, by build ID;
//   - the .gnu_debuglink name next to the file, in its .debug folder and
//     under /usr/lib/debug/DIR, checked against the link's CRC32.
//
// A candidate must carry the object's build ID when both have one, and
// DWARF or a symbol table. It returns nil when none is found.
func findDebugFile(root fsRoot, name string, ef *elf.File, id string) *elf.File {
	type candidate struct {
		path    string
		roots   []fsRoot
		crc     uint32
		needCRC bool
	}
	var cands []candidate
	if isGNUBuildID(id) {
		rs := []fsRoot{root}
		if _, host := root.(hostRoot); !host {
			rs = append(rs, hostRoot{})
		}
		cands = append(cands, candidate{path: path.Join(debugRoot, ".build-id", id[:2], id[2:]+".debug"), roots: rs})
	}
	if link, crc, ok := debugLink(ef); ok && strings.HasPrefix(name, "/") {
		dir := path.Dir(name)
		for _, p := range []string{path.Join(dir, link), path.Join(dir, ".debug", link), path.Join(debugRoot, dir, link)} {
			cands = append(cands, candidate{path: p, roots: []fsRoot{root}, crc: crc, needCRC: true})
		}
	}
	for _, c := range cands {
		if c.path == name {
			continue
		}
		for _, r := range c.roots {
			f, err := r.Open(strings.TrimPrefix(c.path, "/"))
			if err != nil {
				continue
			}
			if df := checkDebugFile(f, id, c.needCRC, c.crc); df != nil {
				return df // open until Cache.Close
			}
			f.Close()
		}
	}
	return nil
}

// checkDebugFile parses f as the debug file of an object with build ID id
// (and, when needCRC, whose .gnu_debuglink says crc). It returns nil when f
// does not fit.
func checkDebugFile(f *os.File, id string, needCRC bool, crc uint32) *elf.File {
	if needCRC {
		h := crc32.NewIEEE()
		if _, err := io.Copy(h, f); err != nil || h.Sum32() != crc {
			return nil
		}
	}
	df, err := elf.NewFile(f)
	if err != nil {
		return nil
	}
	if other := buildID(df); id != "" && other != "" && other != id {
		return nil
	}
	if !hasDWARF(df) && !hasSymtab(df) {
		return nil
	}
	return df
}

// isGNUBuildID reports whether id is a GNU build ID (hex), not a Go one.
func isGNUBuildID(id string) bool {
	if len(id) < 4 || len(id)%2 != 0 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func hasSymtab(f *elf.File) bool {
	s := f.Section(".symtab")
	return s != nil && s.Type != elf.SHT_NOBITS && s.Size > 0
}

// debugLink returns the file name recorded in .gnu_debuglink and the CRC32
// of that file it records (after the name's NUL and padding to 4 bytes).
func debugLink(ef *elf.File) (string, uint32, bool) {
	s := ef.Section(".gnu_debuglink")
	if s == nil {
		return "", 0, false
	}
	data, err := s.Data()
	if err != nil {
		return "", 0, false
	}
	i := bytes.IndexByte(data, 0)
	if i <= 0 {
		return "", 0, false
	}
	off := (i + 4) &^ 3
	if off+4 > len(data) {
		return "", 0, false
	}
	name := string(data[:i])
	if strings.Contains(name, "/") {
		return "", 0, false // a bare file name, never a path
	}
	return name, ef.ByteOrder.Uint32(data[off:]), true
}

// maxMiniDebugInfo bounds the decompressed size of .gnu_debugdata.
const maxMiniDebugInfo = 256 << 20

// miniDebugInfo returns the ELF file compressed with xz in .gnu_debugdata
// (MiniDebugInfo, as Fedora ships it: the .symtab of the functions that
// .dynsym lacks), or nil.
func miniDebugInfo(ef *elf.File) *elf.File {
	s := ef.Section(".gnu_debugdata")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil
	}
	data, err := s.Data()
	if err != nil {
		return nil
	}
	r, err := xz.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	img, err := io.ReadAll(io.LimitReader(r, maxMiniDebugInfo+1))
	if err != nil || len(img) > maxMiniDebugInfo {
		return nil
	}
	mf, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		return nil
	}
	return mf
}
