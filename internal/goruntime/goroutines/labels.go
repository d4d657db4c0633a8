package goroutines

import (
	"slices"
	"strings"

	"github.com/wallprof/wallprof/internal/goruntime/rtlayout"
)

// Label is one pprof label of a goroutine (runtime/pprof.Do,
// SetGoroutineLabels).
type Label struct {
	Key, Value string
}

// Limits on what is read of a label set: beyond them its labels are not
// read (Snapshot.LabelErrors counts it).
const (
	maxLabels      = 64
	maxLabelString = 4096
	maxMapB        = 4 // 16 buckets, up to 104 labels
)

// labelSet is a decoded label set and the header it was read from.
type labelSet struct {
	header [24]byte // the bytes at the g.labels pointer
	labels []Label
	seen   int
}

// strRef is a string header in the target.
type strRef struct{ ptr, n uint64 }

// readLabels fills in the Labels of gs (ptrs[i] is gs[i]'s g.labels) and
// returns how many of them could not be read. Label sets are
// immutable once a goroutine points to them, so a set whose first bytes
// read the same as in an earlier snapshot is taken from the cache.
func (r *Reader) readLabels(gs []Goroutine, ptrs []uint64) (failed int) {
	var want []uint64 // distinct label set addresses
	seen := make(map[uint64]bool)
	for _, p := range ptrs {
		if p != 0 && !seen[p] {
			seen[p] = true
			want = append(want, p)
		}
	}
	if len(want) == 0 {
		return 0
	}
	if r.labelSets == nil {
		r.labelSets = make(map[uint64]*labelSet)
	}
	heads := make([]read, len(want))
	hbuf := make([]byte, 24*len(want))
	for i, p := range want {
		heads[i] = read{addr: p, buf: hbuf[i*24 : i*24+24]}
	}
	r.mem.readAll(heads)
	sets := make(map[uint64][]Label, len(want))
	hdr := make(map[uint64][]byte, len(want))
	var fresh []uint64
	for i, p := range want {
		if !heads[i].ok {
			continue
		}
		hdr[p] = heads[i].buf
		if c, ok := r.labelSets[p]; ok && string(c.header[:]) == string(heads[i].buf) {
			c.seen = r.snapshots
			sets[p] = c.labels
			continue
		}
		fresh = append(fresh, p)
	}
	if len(fresh) > 0 {
		var decoded map[uint64][]Label
		if r.layout.Labels() == rtlayout.LabelsSlice {
			decoded = r.readLabelSlices(fresh, hdr)
		} else {
			decoded = r.readLabelMaps(fresh, hdr)
		}
		for p, ls := range decoded {
			c := &labelSet{labels: ls, seen: r.snapshots}
			copy(c.header[:], hdr[p])
			r.labelSets[p] = c
			sets[p] = ls
		}
	}
	for i := range gs {
		if p := ptrs[i]; p != 0 {
			ls, ok := sets[p]
			if !ok {
				failed++
			}
			gs[i].Labels = ls
		}
	}
	return failed
}

// readLabelSlices decodes label sets of Go 1.24+: {list []label}.
func (r *Reader) readLabelSlices(fresh []uint64, hdr map[uint64][]byte) map[uint64][]Label {
	lists := make([]read, 0, len(fresh))
	owner := make([]uint64, 0, len(fresh))
	for _, p := range fresh {
		h := hdr[p]
		list, n := word(h, rtlayout.LabelSliceOffset), word(h, rtlayout.LabelSliceOffset+8)
		if n == 0 || n > maxLabels || list == 0 {
			continue
		}
		lists = append(lists, read{addr: list, buf: make([]byte, n*rtlayout.LabelSize)})
		owner = append(owner, p)
	}
	r.mem.readAll(lists)
	refs := make(map[uint64][]strRef)
	for i, rd := range lists {
		if !rd.ok {
			continue
		}
		var rs []strRef
		for off := 0; off < len(rd.buf); off += rtlayout.StringHeaderBytes {
			rs = append(rs, strRef{word(rd.buf, off), word(rd.buf, off+8)})
		}
		refs[owner[i]] = rs
	}
	return r.readLabelStrings(refs)
}

// readLabelMaps decodes label sets of Go 1.20–1.23: *map[string]string.
// It reads the buckets, their overflow chains and, in a map still growing,
// the old buckets not yet moved.
func (r *Reader) readLabelMaps(fresh []uint64, hdr map[uint64][]byte) map[uint64][]Label {
	hmaps := make([]read, len(fresh))
	for i, p := range fresh {
		hmaps[i] = read{addr: word(hdr[p], 0), buf: make([]byte, 48)}
	}
	r.mem.readAll(hmaps)
	var queue []read
	var owners []bucketOwner
	for i, h := range hmaps {
		if !h.ok || h.addr == 0 {
			continue
		}
		b, flags := h.buf[rtlayout.HmapB], h.buf[rtlayout.HmapFlags]
		buckets, old := word(h.buf, rtlayout.HmapBuckets), word(h.buf, rtlayout.HmapOldbuckets)
		if b > maxMapB || buckets == 0 {
			continue
		}
		queue = append(queue, read{addr: buckets, buf: make([]byte, rtlayout.BucketSize<<b)})
		owners = append(owners, bucketOwner{set: fresh[i]})
		if old != 0 {
			ob := b
			if flags&rtlayout.HmapSameSizeGrow == 0 && ob > 0 {
				ob--
			}
			queue = append(queue, read{addr: old, buf: make([]byte, rtlayout.BucketSize<<ob)})
			owners = append(owners, bucketOwner{set: fresh[i], old: true})
		}
	}
	refs := make(map[uint64][]strRef)
	bad := make(map[uint64]bool)
	for round := 0; len(queue) > 0; round++ {
		if round == 8 { // overflow chains this long: give up on those maps
			for _, o := range owners {
				bad[o.set] = true
			}
			break
		}
		r.mem.readAll(queue)
		var next []read
		var nextOwners []bucketOwner
		for i, rd := range queue {
			o := owners[i]
			if !rd.ok {
				bad[o.set] = true
				continue
			}
			for off := 0; off+rtlayout.BucketSize <= len(rd.buf); off += rtlayout.BucketSize {
				bk := rd.buf[off : off+rtlayout.BucketSize]
				if o.old && bk[0] >= rtlayout.BucketEvacuated && bk[0] < rtlayout.BucketMinTopHash {
					continue // moved to the new buckets, read there
				}
				refs[o.set] = append(refs[o.set], bucketStrings(bk)...)
				if ovf := word(bk, rtlayout.BucketOverflow); ovf != 0 {
					next = append(next, read{addr: ovf, buf: make([]byte, rtlayout.BucketSize)})
					nextOwners = append(nextOwners, o)
				}
			}
		}
		queue, owners = next, nextOwners
	}
	for set := range bad {
		delete(refs, set)
	}
	return r.readLabelStrings(refs)
}

// bucketOwner says which label set a bucket read belongs to, and whether
// it is an old bucket of a growing map.
type bucketOwner struct {
	set uint64
	old bool
}

// bucketStrings returns the key and value headers of the used slots of a
// bucket.
func bucketStrings(bk []byte) []strRef {
	var rs []strRef
	for slot := 0; slot < 8; slot++ {
		if bk[slot] < rtlayout.BucketMinTopHash {
			continue
		}
		k := rtlayout.BucketKeys + slot*rtlayout.StringHeaderBytes
		v := rtlayout.BucketValues + slot*rtlayout.StringHeaderBytes
		rs = append(rs, strRef{word(bk, k), word(bk, k+8)}, strRef{word(bk, v), word(bk, v+8)})
	}
	return rs
}

// readLabelStrings reads the strings of each set (key, value, key, ...)
// and returns the sets sorted by key.
func (r *Reader) readLabelStrings(refs map[uint64][]strRef) map[uint64][]Label {
	var reads []read
	type span struct {
		set        uint64
		start, end int
	}
	var spans []span
	for p, rs := range refs {
		bad := false
		for _, s := range rs {
			bad = bad || s.n > maxLabelString || (s.n > 0 && s.ptr == 0)
		}
		if bad {
			continue
		}
		start := len(reads)
		for _, s := range rs {
			reads = append(reads, read{addr: s.ptr, buf: make([]byte, s.n)})
		}
		spans = append(spans, span{p, start, len(reads)})
	}
	r.mem.readAll(reads)
	out := make(map[uint64][]Label, len(spans))
	for _, sp := range spans {
		var ls []Label
		ok := true
		for i := sp.start; i+1 < sp.end; i += 2 {
			ok = ok && reads[i].ok && reads[i+1].ok
			ls = append(ls, Label{string(reads[i].buf), string(reads[i+1].buf)})
		}
		if ok {
			slices.SortFunc(ls, func(a, b Label) int { return strings.Compare(a.Key, b.Key) })
			out[sp.set] = ls
		}
	}
	return out
}
