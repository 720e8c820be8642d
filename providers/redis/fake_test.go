package redis

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeClient is a Redis at the provider's seam: lists and streams by key,
// with canned errors, counting calls.
type fakeClient struct {
	mu      sync.Mutex
	lists   map[string]int64
	streams map[string]fakeStream
	// cmdErr fails one command; scanErr fails SCANs of a pattern; tripErr
	// fails every round trip.
	cmdErr  map[Command]error
	scanErr map[string]error
	tripErr error

	hung    atomic.Bool
	release chan struct{}

	scans, pipelines atomic.Int64
	lastCmds         []Command
}

type fakeStream struct {
	length int64
	groups []Group
}

func newFake(t *testing.T) *fakeClient {
	f := &fakeClient{
		lists: map[string]int64{}, streams: map[string]fakeStream{},
		cmdErr: map[Command]error{}, scanErr: map[string]error{}, release: make(chan struct{}),
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(f.release) }) })
	return f
}

// hang makes every call block until the test ends, ignoring its context:
// the provider must not rely on the client honouring it.
func (f *fakeClient) hang() { f.hung.Store(true) }

func (f *fakeClient) wait() {
	if f.hung.Load() {
		<-f.release
	}
}

func (f *fakeClient) Scan(ctx context.Context, pattern, typ string, count, max int) ([]string, error) {
	f.scans.Add(1)
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tripErr != nil {
		return nil, f.tripErr
	}
	if err := f.scanErr[pattern]; err != nil {
		return nil, err
	}
	re := globRegexp(pattern)
	var keys []string
	add := func(k string) {
		if re.MatchString(k) {
			keys = append(keys, k)
		}
	}
	switch typ {
	case "list":
		for k, n := range f.lists {
			if n > 0 { // Redis deletes empty lists
				add(k)
			}
		}
	case "stream":
		for k := range f.streams {
			add(k)
		}
	default:
		return nil, fmt.Errorf("fake: unknown type %q", typ)
	}
	if len(keys) > max {
		return nil, fmt.Errorf("more than %d keys match", max)
	}
	sort.Strings(keys)
	return keys, nil
}

func (f *fakeClient) Pipeline(ctx context.Context, cmds []Command) ([]Reply, error) {
	f.pipelines.Add(1)
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastCmds = append([]Command(nil), cmds...)
	if f.tripErr != nil {
		return nil, f.tripErr
	}
	out := make([]Reply, len(cmds))
	for i, c := range cmds {
		if err := f.cmdErr[c]; err != nil {
			out[i].Err = err
			continue
		}
		switch c.Op {
		case OpLLen:
			if _, ok := f.streams[c.Key]; ok {
				out[i].Err = errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")
			}
			out[i].N = f.lists[c.Key]
		case OpXLen:
			out[i].N = f.streams[c.Key].length
		case OpXInfoGroups:
			s, ok := f.streams[c.Key]
			out[i].NoKey = !ok
			out[i].Groups = append([]Group(nil), s.groups...)
		}
	}
	return out, nil
}

func (f *fakeClient) Close() error { return nil }

// globRegexp turns a SCAN MATCH glob (*, ?, \ escapes) into a regexp.
func globRegexp(glob string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '\\':
			if i+1 < len(glob) {
				i++
				b.WriteString(regexp.QuoteMeta(glob[i : i+1]))
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

func lag(n int64) *int64 { return &n }
