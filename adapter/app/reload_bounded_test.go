package app

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/metricscale/metricscale/adapter/config"
	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/catalog"
	"github.com/metricscale/metricscale/providers/memory"
	"github.com/metricscale/metricscale/providers/naming"
)

// hangs bounds the waits of the tests below for what must not hang: on
// a4cfce8 each of them blocked for good (issue 27, item 6).
const hangs = 30 * time.Second

// hangFactory builds providers whose New blocks until released (a secret
// on a hung mount, a dial that never answers), and whose Close blocks when
// stuck is set (a provider that never lets go).
type hangFactory struct {
	entered chan struct{}
	release chan struct{}
	stuck   chan struct{}
}

func (f *hangFactory) Validate(string, json.RawMessage) error { return nil }

func (f *hangFactory) New(name string, _ json.RawMessage, _ providers.Deps) (providers.Provider, error) {
	if f.entered != nil {
		f.entered <- struct{}{}
		<-f.release
	}
	return &hangProvider{name: name, stuck: f.stuck}, nil
}

type hangProvider struct {
	name  string
	stuck chan struct{}
}

func (p *hangProvider) Name() string { return p.name }

func (p *hangProvider) Close() error {
	if p.stuck != nil {
		<-p.stuck
	}
	return nil
}

// newBoundedEnv is a started reloader whose config has a memory provider,
// plus "hang" providers built by f.
func newBoundedEnv(t *testing.T, f *hangFactory, initial string) (*reloader, func([]byte) (*config.Config, error)) {
	t.Helper()
	registerReloadMetrics()
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(initial), 0o644); err != nil {
		t.Fatal(err)
	}
	factories := catalog.Factories()
	factories["hang"] = f
	factories[memory.Type] = memory.Factory{SeriesTTL: time.Hour, MaxAge: time.Hour}
	parse := func(data []byte) (*config.Config, error) { return config.Parse(data, factories) }
	deps := providers.Deps{Resources: naming.NewResolver(meta.NewDefaultRESTMapper(nil), nil)}
	rl := newReloader(file, parse, factories, deps)
	cfg, err := parse([]byte(initial))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rl.init(cfg, []byte(initial)); err != nil {
		t.Fatal(err)
	}
	rl.start(context.Background())
	return rl, parse
}

const memOnly = `
providers:
- name: mem
  type: memory
routes:
- metric: "*"
  provider: mem
`

// within runs fn and fails the test if it has not returned within hangs.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(hangs):
		t.Fatalf("%s did not return within %s", what, hangs)
	}
}

// A provider's New that blocks (a secret read, a dial) must not hold stop:
// on a4cfce8 the reload built providers under the lock stop takes.
func TestStopDoesNotWaitForAReloadsBuild(t *testing.T) {
	t.Parallel()
	f := &hangFactory{}
	rl, _ := newBoundedEnv(t, f, memOnly)
	f.entered, f.release = make(chan struct{}), make(chan struct{})
	withHang := memOnly + "- metric: \"hung_*\"\n  provider: h\n"
	withHang = strings.Replace(withHang, "routes:", "- name: h\n  type: hang\nroutes:", 1)
	outcome := make(chan reloadOutcome, 1)
	go func() { outcome <- rl.apply([]byte(withHang), "test") }()
	<-f.entered // the reload is inside New
	within(t, "stop, while a reload's New blocks", rl.stop)
	close(f.release)
	select {
	case got := <-outcome:
		if got != reloadUnchanged {
			t.Errorf("a reload that finished after stop = %v, want it dropped (reloadUnchanged)", got)
		}
	case <-time.After(hangs):
		t.Fatal("the reload did not return once New did")
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.running["h"] != nil {
		t.Error("a provider built after stop was put in service")
	}
}

// stop waits for providers at most stopWait.
func TestStopIsBounded(t *testing.T) {
	t.Parallel()
	f := &hangFactory{stuck: make(chan struct{})}
	defer close(f.stuck)
	withStuck := strings.Replace(memOnly, "routes:", "- name: s\n  type: hang\nroutes:", 1) + "- metric: \"stuck_*\"\n  provider: s\n"
	rl, _ := newBoundedEnv(t, f, withStuck)
	rl.stopWait = 50 * time.Millisecond
	within(t, "stop, with a provider whose Close never returns", rl.stop)
}

func mkfifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "password")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	return p
}

// A secret file: that is a FIFO is refused by check-config's validation
// and by a reload, naming the field, instead of blocking the reader.
func TestFIFOSecretIsRefused(t *testing.T) {
	t.Parallel()
	fifo := mkfifo(t)
	withKafka := strings.Replace(memOnly, "routes:", `- name: k
  type: kafka
  options:
    brokers: ["127.0.0.1:1"]
    sasl: {mechanism: PLAIN, username: u, password: {file: `+fifo+`}}
    metrics: [{name: lag, group: g, topics: [jobs]}]
routes:`, 1) + "- metric: \"lag\"\n  provider: k\n"
	want := "providers[1].options.sasl.password.file: " + fifo + " is a FIFO, not a regular file"

	// check-config
	if _, err := config.Parse([]byte(withKafka), catalog.Factories()); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("check-config: %v\nwant an error containing %q", err, want)
	}

	// reload
	rl, _ := newBoundedEnv(t, &hangFactory{}, memOnly)
	var got reloadOutcome
	within(t, "a reload naming a FIFO secret", func() { got = rl.apply([]byte(withKafka), "test") })
	if got != reloadFailed {
		t.Errorf("reload = %v, want reloadFailed", got)
	}
	within(t, "stop", rl.stop)
}
