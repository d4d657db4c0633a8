// Package gt is the ground truth of wallprof bench's tests: commit A of a
// module whose benchmark commit B (slower.go.txt) makes slower by
// allocating in a loop in the function scratch.
package gt

// Sum returns the FNV-1a hash of data.
func Sum(data []byte) uint64 {
	var h uint64 = 14695981039346656037
	for _, b := range data {
		h ^= uint64(b)
		h *= 1099511628211
	}
	return h
}
