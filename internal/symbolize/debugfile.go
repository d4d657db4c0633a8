package symbolize

import (
	"bytes"
	"debug/elf"
	"path/filepath"
)

// debugRoot is where distributions install separate debug files.
const debugRoot = "/usr/lib/debug"

// findDebugFile looks for the separate debug file of the object at path:
// first by build ID (/usr/lib/debug/.build-id/xx/yyyy.debug), then by
// .gnu_debuglink next to the file, in its .debug folder and under
// /usr/lib/debug. A candidate must carry the same build ID when the object
// has one. It returns nil when none is found.
func findDebugFile(path string, ef *elf.File, id string) *elf.File {
	var candidates []string
	if len(id) > 2 {
		candidates = append(candidates, filepath.Join(debugRoot, ".build-id", id[:2], id[2:]+".debug"))
	}
	if link := debugLink(ef); link != "" {
		dir := filepath.Dir(path)
		candidates = append(candidates,
			filepath.Join(dir, link),
			filepath.Join(dir, ".debug", link),
			filepath.Join(debugRoot, dir, link))
	}
	for _, c := range candidates {
		if c == path {
			continue
		}
		df, err := elf.Open(c)
		if err != nil {
			continue
		}
		if (id != "" && buildID(df) != id) || !hasDWARF(df) {
			df.Close()
			continue
		}
		return df // open until Cache.Close
	}
	return nil
}

// debugLink returns the file name recorded in .gnu_debuglink.
func debugLink(ef *elf.File) string {
	s := ef.Section(".gnu_debuglink")
	if s == nil {
		return ""
	}
	data, err := s.Data()
	if err != nil {
		return ""
	}
	if i := bytes.IndexByte(data, 0); i > 0 {
		return string(data[:i])
	}
	return ""
}
