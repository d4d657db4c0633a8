package symbolize

import "debug/elf"

// FileBuildID returns the build ID of the ELF file at path: the GNU build
// ID as hex, or else the Go build ID ("" when it has neither).
func FileBuildID(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return buildID(f), nil
}
