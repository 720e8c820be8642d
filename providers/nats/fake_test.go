package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"
)

// fakeAPI answers consumer and stream info from maps, as the JetStream API
// would.
type fakeAPI struct {
	mu        sync.Mutex
	consumers map[string]jetstream.ConsumerInfo // "stream/consumer"
	streams   map[string]jetstream.StreamInfo
	err       error

	calls   atomic.Int64
	hung    atomic.Bool
	release chan struct{}
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{
		consumers: map[string]jetstream.ConsumerInfo{},
		streams:   map[string]jetstream.StreamInfo{},
		release:   make(chan struct{}),
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(f.release) }) })
	return f
}

func (f *fakeAPI) setConsumer(stream, consumer string, pending uint64, ackPending int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.consumers[stream+"/"+consumer] = jetstream.ConsumerInfo{Stream: stream, Name: consumer, NumPending: pending, NumAckPending: ackPending}
}

func (f *fakeAPI) setStream(stream string, msgs uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	si := jetstream.StreamInfo{}
	si.Config.Name = stream
	si.State.Msgs = msgs
	f.streams[stream] = si
}

func (f *fakeAPI) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// wait blocks while the fake hangs, until the test ends or ctx is done.
func (f *fakeAPI) wait(ctx context.Context) error {
	if !f.hung.Load() {
		return nil
	}
	select {
	case <-f.release:
		return errors.New("test ended")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeAPI) ConsumerInfo(ctx context.Context, stream, consumer string) (*jetstream.ConsumerInfo, error) {
	f.calls.Add(1)
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	ci, ok := f.consumers[stream+"/"+consumer]
	if !ok {
		return nil, fmt.Errorf("stream %s consumer %s: %w", stream, consumer, errNotFound)
	}
	return &ci, nil
}

func (f *fakeAPI) StreamInfo(ctx context.Context, stream string) (*jetstream.StreamInfo, error) {
	f.calls.Add(1)
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	si, ok := f.streams[stream]
	if !ok {
		return nil, fmt.Errorf("stream %s: %w", stream, errNotFound)
	}
	return &si, nil
}

// newTestProvider builds a provider over f from JSON options.
func newTestProvider(t *testing.T, raw string, f *fakeAPI, clk clock.PassiveClock) *Provider {
	t.Helper()
	o, err := decodeOptions("options", []byte(raw))
	if err != nil {
		t.Fatalf("options: %v", err)
	}
	p, err := newProvider("nats-test", &o.Options, f, clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
