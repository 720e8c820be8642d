package memory

import (
	"fmt"
	"hash/maphash"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unique"

	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/pushformat"
)

// sampleLabels formats labels sorted, for error messages.
func sampleLabels(lbls map[string]string) string {
	if len(lbls) == 0 {
		return ""
	}
	keys := make([]string, 0, len(lbls))
	for k := range lbls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(lbls[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// ErrStoreFull is providers.ErrStoreFull: a push would exceed the series
// limit or the byte budget.
var ErrStoreFull = providers.ErrStoreFull

// maxFutureSkew is how far ahead of the adapter's clock a pushed timestamp
// may be.
const maxFutureSkew = 5 * time.Minute

// label is one label pair. Both strings are interned: a Handle is one
// pointer, and equal strings share one copy however many series use them.
type label struct {
	name  unique.Handle[string]
	value unique.Handle[string]
}

// series is one stored time series: its labels (sorted by name, not
// including the metric name) and its latest sample. 80 bytes plus 16 per
// label.
//
// The value is a last-writer-wins register: a sample replaces it only if
// its version (ts, acc, origin), compared in that order, is greater, so
// replicas that receive the same samples in any order end with the same
// value (package push replicates them).
type series struct {
	labels []label
	value  float64
	ts     int64  // sample time, Unix nanoseconds
	acc    int64  // when the first replica accepted the sample, Unix nanoseconds
	origin uint64 // the replica that accepted it first
	seen   int64  // last push, Unix nanoseconds (for the TTL)
	hash   uint64
	next   *series // hash-collision chain
	idx    int32   // position in family.list
}

// Has, Get and Lookup make *series a labels.Labels without allocating.
func (s *series) Has(name string) bool {
	_, ok := s.Lookup(name)
	return ok
}

// Lookup returns the value of the named label and whether it is present.
func (s *series) Lookup(name string) (string, bool) {
	for _, l := range s.labels {
		if l.name.Value() == name {
			return l.value.Value(), true
		}
	}
	return "", false
}

// Get returns the value of the named label, or "".
func (s *series) Get(name string) string {
	for _, l := range s.labels {
		if l.name.Value() == name {
			return l.value.Value()
		}
	}
	return ""
}

// lookup returns the value of the label with the interned name.
func (s *series) lookup(name unique.Handle[string]) (string, bool) {
	for _, l := range s.labels {
		if l.name == name {
			return l.value.Value(), true
		}
	}
	return "", false
}

func (s *series) labelMap() map[string]string {
	m := make(map[string]string, len(s.labels))
	for _, l := range s.labels {
		m[l.name.Value()] = l.value.Value()
	}
	return m
}

// family holds every series of one metric name.
type family struct {
	name   string
	byHash map[uint64]*series
	list   []*series
	// labelNames counts the series carrying each label name, for discovery.
	labelNames map[unique.Handle[string]]int32
}

// The byte estimate of a series, which the store's byte budget counts:
// seriesOverheadBytes for the series, its index entries and its family's
// share, plus for each label labelOverheadBytes and the bytes of its name
// and value, as if no string were shared with another series (interning
// makes the real figure lower when they are). BenchmarkBytesPerSeriesAtCaps
// compares the estimate with the heap.
const (
	seriesOverheadBytes = 160
	labelOverheadBytes  = 64
)

// estimateBytes is the byte estimate of a series of metric name with lbls.
func estimateBytes(name string, lbls map[string]string) int64 {
	n := int64(seriesOverheadBytes + len(name))
	for k, v := range lbls {
		n += int64(labelOverheadBytes + len(k) + len(v))
	}
	return n
}

func estimateLabels(name string, lbls []label) int64 {
	n := int64(seriesOverheadBytes + len(name))
	for _, l := range lbls {
		n += int64(labelOverheadBytes + len(l.name.Value()) + len(l.value.Value()))
	}
	return n
}

// Store is an in-process store of the latest sample of each series. It is
// safe for concurrent use.
type Store struct {
	clock     clock.PassiveClock
	ttl       time.Duration
	maxSeries int
	maxBytes  int64
	seed      maphash.Seed

	mu       sync.RWMutex
	families map[string]*family
	count    int
	// lastAcc is the last acceptance stamp given to an unstamped sample,
	// kept strictly increasing so two such samples never tie.
	lastAcc int64
	bytes   int64 // the estimate of all series
	// gen changes whenever the set of metric names or of label names per
	// metric changes (not on value updates); discovery caches on it.
	gen uint64
}

// NewStore returns an empty store. Series not pushed for ttl are deleted;
// at most maxSeries are kept (0: no limit).
func NewStore(clk clock.PassiveClock, ttl time.Duration, maxSeries int) *Store {
	return &Store{
		clock:     clk,
		ttl:       ttl,
		maxSeries: maxSeries,
		seed:      maphash.MakeSeed(),
		families:  map[string]*family{},
	}
}

// SetMaxBytes bounds the byte estimate of all stored series (0: no bound);
// pushes beyond it are refused with ErrStoreFull. Call it before use.
func (s *Store) SetMaxBytes(n int64) { s.maxBytes = n }

// Bytes is the byte estimate of the stored series.
func (s *Store) Bytes() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.bytes
}

// checkSeries applies the per-series limits of the push formats, so a
// sample that reaches the store by another path is bounded as well.
func checkSeries(smp *providers.Sample) error {
	if len(smp.Name) > pushformat.MaxNameLen {
		return fmt.Errorf("metric name longer than %d bytes", pushformat.MaxNameLen)
	}
	if len(smp.Labels) > pushformat.MaxLabels {
		return fmt.Errorf("%d labels, more than %d", len(smp.Labels), pushformat.MaxLabels)
	}
	for k, v := range smp.Labels {
		if len(k) > pushformat.MaxNameLen {
			return fmt.Errorf("label name longer than %d bytes", pushformat.MaxNameLen)
		}
		if len(v) > pushformat.MaxLabelValueLen {
			return fmt.Errorf("label %s: value longer than %d bytes", k, pushformat.MaxLabelValueLen)
		}
	}
	return nil
}

// point is one sample ready to store.
type point struct {
	name   string
	labels []label
	hash   uint64
	value  float64
	ts     int64
	acc    int64  // 0: stamped when stored
	origin uint64 // with acc
	seen   int64  // 0: when stored
}

// newer reports whether p's version is greater than sr's.
func (p *point) newer(sr *series) bool {
	if p.ts != sr.ts {
		return p.ts > sr.ts
	}
	if p.acc != sr.acc {
		return p.acc > sr.acc
	}
	return p.origin > sr.origin
}

// prepare interns and sorts a sample's labels and hashes them.
func (s *Store) prepare(name string, lbls map[string]string, value float64, ts time.Time) point {
	p := point{name: name, value: value, ts: ts.UnixNano(), labels: make([]label, 0, len(lbls))}
	for k, v := range lbls {
		p.labels = append(p.labels, label{name: unique.Make(k), value: unique.Make(v)})
	}
	sort.Slice(p.labels, func(i, j int) bool { return p.labels[i].name.Value() < p.labels[j].name.Value() })
	var h maphash.Hash
	h.SetSeed(s.seed)
	for _, l := range p.labels {
		h.WriteString(l.name.Value())
		h.WriteByte(0xff)
		h.WriteString(l.value.Value())
		h.WriteByte(0xfe)
	}
	p.hash = h.Sum64()
	return p
}

func sameLabels(a, b []label) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// find returns the stored series of f with p's labels, or nil.
func (f *family) find(p *point) *series {
	for sr := f.byHash[p.hash]; sr != nil; sr = sr.next {
		if sameLabels(sr.labels, p.labels) {
			return sr
		}
	}
	return nil
}

// Append stores the samples: all of them, or none if one is refused (a
// timestamp too far in the future, or the series limit). A sample older
// than the stored one for its series does not replace it.
func (s *Store) Append(samples []providers.Sample) error {
	_, err := s.append(samples, nil)
	return err
}

// changedSeries is a series whose served value an append or an expiry
// changed.
type changedSeries struct {
	name   string
	labels []label
}

// appendChanged is Append that also returns the series whose served value
// changed: a new series, a new value, or a value that was older than
// staleBefore and so was not served (a zero staleBefore: never stale). A
// push of the values already stored changes nothing.
func (s *Store) appendChanged(samples []providers.Sample, staleBefore time.Time) ([]changedSeries, error) {
	var changed []changedSeries
	_, err := s.append(samples, func(p *point, isNew bool, old float64, oldTS int64) {
		if isNew || p.value != old || (!staleBefore.IsZero() && oldTS < staleBefore.UnixNano()) {
			changed = append(changed, changedSeries{name: p.name, labels: p.labels})
		}
	})
	return changed, err
}

// append stores samples; stored, if not nil, is called under the lock for
// each point that replaced (or created) its series' value, with the value
// and sample time it replaced.
func (s *Store) append(samples []providers.Sample, stored func(p *point, isNew bool, old float64, oldTS int64)) (int, error) {
	now := s.clock.Now()
	pts, err := s.points(samples, now)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkRoom(pts); err != nil {
		return 0, err
	}
	nowNano := now.UnixNano()
	for i := range pts {
		if pts[i].acc == 0 {
			s.lastAcc = max(nowNano, s.lastAcc+1)
			pts[i].acc = s.lastAcc
		}
		s.put(&pts[i], nowNano, stored)
	}
	return len(pts), nil
}

// CheckAppend returns the error Append would return now, storing nothing.
func (s *Store) CheckAppend(samples []providers.Sample) error {
	pts, err := s.points(samples, s.clock.Now())
	if err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.checkRoom(pts)
}

// points validates and prepares samples.
func (s *Store) points(samples []providers.Sample, now time.Time) ([]point, error) {
	pts := make([]point, len(samples))
	for i, smp := range samples {
		if err := checkSeries(&smp); err != nil {
			name := smp.Name
			if len(name) > 64 {
				name = name[:64] + "..."
			}
			return nil, fmt.Errorf("sample %d (%s): %w", i, name, err)
		}
		if !pushformat.ValueFits(smp.Value) {
			return nil, fmt.Errorf("sample %d (%s%s): value %v is out of range: it must be finite and its milli-value must fit an int64 (|value| < 9.223372036854775e15)", i, smp.Name, sampleLabels(smp.Labels), smp.Value)
		}
		ts := smp.Timestamp
		if ts.IsZero() {
			ts = now
		} else if !pushformat.TimeInRange(ts) {
			return nil, fmt.Errorf("sample %d (%s%s): timestamp %s out of range (after 1970-01-01T00:00:00Z, up to 2262-04-11T23:47:16Z)", i, smp.Name, sampleLabels(smp.Labels), ts.UTC().Format(time.RFC3339Nano))
		} else if ts.After(now.Add(maxFutureSkew)) {
			return nil, fmt.Errorf("sample %d (%s): timestamp %s is more than %s in the future", i, smp.Name, ts.UTC().Format(time.RFC3339), maxFutureSkew)
		}
		pts[i] = s.prepare(smp.Name, smp.Labels, smp.Value, ts)
		if smp.Accepted > 0 {
			pts[i].acc, pts[i].origin = smp.Accepted, smp.Origin
		}
		if !smp.Seen.IsZero() {
			pts[i].seen = min(smp.Seen.UnixNano(), now.UnixNano())
		}
	}
	return pts, nil
}

// checkRoom refuses points whose new series would exceed the series limit
// or the byte budget; the caller holds the lock.
func (s *Store) checkRoom(pts []point) error {
	if s.maxSeries <= 0 && s.maxBytes <= 0 {
		return nil
	}
	added := 0
	var addedBytes int64
	seenNew := map[string]map[uint64]bool{}
	for i := range pts {
		p := &pts[i]
		if f := s.families[p.name]; f != nil && f.find(p) != nil {
			continue
		}
		if seenNew[p.name] == nil {
			seenNew[p.name] = map[uint64]bool{}
		}
		if !seenNew[p.name][p.hash] {
			seenNew[p.name][p.hash] = true
			added++
			addedBytes += estimateLabels(p.name, p.labels)
		}
	}
	if s.maxSeries > 0 && s.count+added > s.maxSeries {
		return fmt.Errorf("%w: %d stored + %d new > %d", ErrStoreFull, s.count, added, s.maxSeries)
	}
	if s.maxBytes > 0 && s.bytes+addedBytes > s.maxBytes {
		return fmt.Errorf("%w: byte budget: %d bytes stored + %d new > %d (estimated; maxBytes)", ErrStoreFull, s.bytes, addedBytes, s.maxBytes)
	}
	return nil
}

func (s *Store) put(p *point, now int64, stored func(p *point, isNew bool, old float64, oldTS int64)) {
	f := s.families[p.name]
	if f == nil {
		f = &family{name: p.name, byHash: map[uint64]*series{}, labelNames: map[unique.Handle[string]]int32{}}
		s.families[p.name] = f
		s.gen++
	}
	seen := now
	if p.seen != 0 {
		seen = p.seen
	}
	if sr := f.find(p); sr != nil {
		if p.newer(sr) {
			if stored != nil {
				stored(p, false, sr.value, sr.ts)
			}
			sr.value, sr.ts, sr.acc, sr.origin = p.value, p.ts, p.acc, p.origin
		}
		sr.seen = max(sr.seen, seen)
		return
	}
	if stored != nil {
		stored(p, true, 0, 0)
	}
	sr := &series{labels: p.labels, value: p.value, ts: p.ts, acc: p.acc, origin: p.origin, seen: seen, hash: p.hash, next: f.byHash[p.hash], idx: int32(len(f.list))}
	f.byHash[p.hash] = sr
	f.list = append(f.list, sr)
	for _, l := range sr.labels {
		if f.labelNames[l.name]++; f.labelNames[l.name] == 1 {
			s.gen++
		}
	}
	s.count++
	s.bytes += estimateLabels(p.name, sr.labels)
}

// remove deletes sr from f; the caller holds the write lock.
func (s *Store) remove(f *family, sr *series) {
	// unlink from the collision chain
	if head := f.byHash[sr.hash]; head == sr {
		if sr.next == nil {
			delete(f.byHash, sr.hash)
		} else {
			f.byHash[sr.hash] = sr.next
		}
	} else {
		for prev := head; prev != nil; prev = prev.next {
			if prev.next == sr {
				prev.next = sr.next
				break
			}
		}
	}
	// swap-remove from the list
	last := f.list[len(f.list)-1]
	f.list[sr.idx] = last
	last.idx = sr.idx
	f.list[len(f.list)-1] = nil
	f.list = f.list[:len(f.list)-1]
	for _, l := range sr.labels {
		if f.labelNames[l.name]--; f.labelNames[l.name] <= 0 {
			delete(f.labelNames, l.name)
			s.gen++
		}
	}
	s.count--
	s.bytes -= estimateLabels(f.name, sr.labels)
	if len(f.list) == 0 {
		delete(s.families, f.name)
		s.gen++
	}
}

// Expire deletes the series not pushed for the TTL and returns how many.
func (s *Store) Expire() int {
	return s.expire(nil)
}

// expire deletes the series not pushed for the TTL, calling removed (if
// not nil) for each under the lock, and returns how many.
func (s *Store) expire(removed func(name string, labels []label)) int {
	cutoff := s.clock.Now().Add(-s.ttl).UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.families {
		for i := 0; i < len(f.list); {
			if sr := f.list[i]; sr.seen < cutoff {
				if removed != nil {
					removed(f.name, sr.labels)
				}
				s.remove(f, sr) // moves the last series to i
				n++
				continue
			}
			i++
		}
	}
	return n
}

// Len is the number of stored series.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.count
}

// view calls fn with the family of the metric (nil if none) under the read
// lock; series past the TTL but not yet expired are skipped by the callers
// through live().
func (s *Store) view(metric string, fn func(f *family)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(s.families[metric])
}

// live reports whether sr is within the TTL at now (Unix nanoseconds).
func (s *Store) live(sr *series, now int64) bool {
	return now-sr.seen <= int64(s.ttl)
}

// familyInfo is what discovery needs of one metric.
type familyInfo struct {
	name       string
	labelNames []string
}

// snapshot returns the metric names and their label names, sorted, and the
// generation they belong to.
func (s *Store) snapshot() ([]familyInfo, uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]familyInfo, 0, len(s.families))
	for name, f := range s.families {
		fi := familyInfo{name: name, labelNames: make([]string, 0, len(f.labelNames))}
		for ln := range f.labelNames {
			fi.labelNames = append(fi.labelNames, ln.Value())
		}
		sort.Strings(fi.labelNames)
		out = append(out, fi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, s.gen
}

// generation returns the current generation.
func (s *Store) generation() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.gen
}

// Snapshot calls fn with copies of the live series (within the TTL), at
// most n at a time, with their versions and the time each was last
// received, for a replica that copies this one's state. The store is read
// one metric at a time, so writers wait for one family's copy at most and
// the copy in memory is one family's pointers and one batch of samples.
// fn's error ends the walk and is returned.
func (s *Store) Snapshot(n int, fn func([]providers.Sample) error) error {
	if n <= 0 {
		n = 1000
	}
	s.mu.RLock()
	names := make([]string, 0, len(s.families))
	for name := range s.families {
		names = append(names, name)
	}
	s.mu.RUnlock()
	sort.Strings(names)
	type copied struct {
		labels        []label
		value         float64
		ts, acc, seen int64
		origin        uint64
	}
	batch := make([]providers.Sample, 0, n)
	for _, name := range names {
		now := s.clock.Now().UnixNano()
		var list []copied
		s.mu.RLock()
		if f := s.families[name]; f != nil {
			list = make([]copied, 0, len(f.list))
			for _, sr := range f.list {
				if s.live(sr, now) {
					list = append(list, copied{labels: sr.labels, value: sr.value, ts: sr.ts, acc: sr.acc, seen: sr.seen, origin: sr.origin})
				}
			}
		}
		s.mu.RUnlock()
		for _, c := range list {
			lbls := make(map[string]string, len(c.labels))
			for _, l := range c.labels {
				lbls[l.name.Value()] = l.value.Value()
			}
			batch = append(batch, providers.Sample{Name: name, Labels: lbls, Value: c.value, Timestamp: time.Unix(0, c.ts),
				Accepted: c.acc, Origin: c.origin, Seen: time.Unix(0, c.seen)})
			if len(batch) == n {
				if err := fn(batch); err != nil {
					return err
				}
				batch = make([]providers.Sample, 0, n)
			}
		}
	}
	if len(batch) > 0 {
		return fn(batch)
	}
	return nil
}
