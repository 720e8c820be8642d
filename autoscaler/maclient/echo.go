package maclient

import (
	"bytes"
	"hash/maphash"
	"sync"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// echoCapacity bounds the writes kept for their echo: normally one is
// taken within milliseconds, and one whose echo never comes (a watch
// restarted in between) is only dropped later.
const echoCapacity = 256

// echoes are the objects this client's status writes got back, kept until
// the watch sends the same bytes: the informer then gets a copy of the
// object decoded once already. At 1,000 objects most watch events are
// these echoes, and decoding them was most of the autoscaler's decoding.
type echoes struct {
	seed   maphash.Seed
	mu     sync.Mutex
	byHash map[uint64]echo
	ring   [echoCapacity]uint64 // hashes in the order put, for eviction
	next   int
}

type echo struct {
	raw []byte
	obj *v1alpha1.MetricAutoscaler
}

func newEchoes() *echoes {
	return &echoes{seed: maphash.MakeSeed(), byHash: make(map[uint64]echo, echoCapacity)}
}

// put keeps obj, decoded from raw (the answer to a status write), for
// the watch event with the same object.
func (e *echoes) put(raw []byte, obj *v1alpha1.MetricAutoscaler) {
	raw = bytes.TrimSpace(raw)
	h := maphash.Bytes(e.seed, raw)
	e.mu.Lock()
	defer e.mu.Unlock()
	if old := e.ring[e.next]; old != 0 {
		delete(e.byHash, old)
	}
	e.ring[e.next] = h
	e.next = (e.next + 1) % echoCapacity
	e.byHash[h] = echo{raw: raw, obj: obj}
}

// take returns the object put with the same bytes as raw, once; nil when
// there is none.
func (e *echoes) take(raw []byte) *v1alpha1.MetricAutoscaler {
	h := maphash.Bytes(e.seed, raw)
	e.mu.Lock()
	defer e.mu.Unlock()
	ec, ok := e.byHash[h]
	if !ok || !bytes.Equal(ec.raw, raw) {
		return nil
	}
	delete(e.byHash, h)
	return ec.obj
}
