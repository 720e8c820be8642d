package redis

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestKeyspaceOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, extra string
		keyspace    bool
		reconcile   time.Duration
		setNotify   bool
	}{
		{"default: poll", ``, false, DefaultFeedReconcileInterval, false},
		{"poll", `"feed": "poll",`, false, DefaultFeedReconcileInterval, false},
		{"keyspace", `"feed": "keyspace",`, true, DefaultFeedReconcileInterval, false},
		{"keyspace tuned", `"feed": "keyspace", "feedReconcileInterval": "10s", "setNotifyKeyspaceEvents": true,`, true, 10 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := decodeOptions("options", []byte(`{"address": "h:1", `+tc.extra+` "metrics": [{"name": "m", "type": "listLength", "key": "k"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			if s.keyspace != tc.keyspace || s.reconcile != tc.reconcile || s.setNotify != tc.setNotify {
				t.Errorf("keyspace %v reconcile %s setNotify %v, want %v %s %v", s.keyspace, s.reconcile, s.setNotify, tc.keyspace, tc.reconcile, tc.setNotify)
			}
		})
	}
}

func TestMissingFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cur, need, want string }{
		{"", "Kgl", "Kgl"},
		{"Kgl", "Kgl", ""},
		{"lgK", "Kglt", "t"},
		{"AK", "Kglt", ""},
		{"AE", "Kgl", "K"}, // keyevent only: A does not stand for K
		{"Ex", "Kgt", "Kgt"},
		{"K$", "Kgl", "gl"},
	} {
		if got := missingFlags(tc.cur, tc.need); got != tc.want {
			t.Errorf("missingFlags(%q, %q) = %q, want %q", tc.cur, tc.need, got, tc.want)
		}
	}
}

func ksMetrics(t *testing.T, raw string) []*metricSettings {
	t.Helper()
	s, err := decodeOptions("options", []byte(`{"address": "h:1", "metrics": [`+raw+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*metricSettings, len(s.metrics))
	for i := range s.metrics {
		out[i] = &s.metrics[i]
	}
	return out
}

// TestCommandsFor: the notified keys are read for the metrics that keep
// them, each command once; a pattern's key is also asked its TYPE, a
// notification of a key no metric keeps reads nothing.
func TestCommandsFor(t *testing.T) {
	t.Parallel()
	ms := ksMetrics(t, `{"name": "one", "type": "listLength", "key": "jobs"},
		{"name": "again", "type": "listLength", "key": "jobs"},
		{"name": "tenants", "type": "listLength", "keyPattern": "q:*"},
		{"name": "orders", "type": "streamLength", "keyPattern": "q:*"}`)
	pending := map[string]map[string]bool{
		"jobs":  {"": true},
		"q:a":   {"q:*": true},
		"other": {"": true},
	}
	cmds, names := commandsFor(pending, nil, ms)
	want := []Command{{OpLLen, "jobs"}, {OpLLen, "q:a"}, {OpType, "q:a"}, {OpXLen, "q:a"}}
	if !reflect.DeepEqual(cmds, want) {
		t.Errorf("commands %v, want %v", cmds, want)
	}
	if wantNames := []string{"again", "one", "orders", "tenants"}; !reflect.DeepEqual(names, wantNames) {
		t.Errorf("affected %v, want %v", names, wantNames)
	}
	if cmds, names := commandsFor(map[string]map[string]bool{"other": {"": true}}, nil, ms); len(cmds) != 0 || len(names) != 0 {
		t.Errorf("a key no metric keeps: commands %v, affected %v", cmds, names)
	}
}

// TestApplyReplies: a pattern's notified key joins its keys when it exists
// with the pattern's type and leaves them when gone or of another type;
// replies replace the old ones; beyond maxKeys the pattern fails as SCAN
// does; a pattern whose SCAN failed is left failed.
func TestApplyReplies(t *testing.T) {
	t.Parallel()
	ms := ksMetrics(t, `{"name": "one", "type": "listLength", "key": "jobs"},
		{"name": "tenants", "type": "listLength", "keyPattern": "q:*"},
		{"name": "broken", "type": "listLength", "keyPattern": "b:*"}`)
	lists := scan{"q:*", "list"}
	broken := scan{"b:*", "list"}
	snap := newSnapshot()
	snap.keys[lists] = []string{"q:a", "q:b"}
	snap.scanErr[broken] = errBroken
	snap.replies[Command{OpLLen, "q:a"}] = Reply{N: 3}
	snap.replies[Command{OpLLen, "q:b"}] = Reply{N: 1}
	pending := map[string]map[string]bool{
		"jobs": {"": true}, "q:a": {"q:*": true}, "q:b": {"q:*": true}, "q:c": {"q:*": true}, "q:h": {"q:*": true}, "b:x": {"b:*": true},
	}
	cmds, _ := commandsFor(pending, nil, ms)
	replies := make([]Reply, len(cmds))
	values := map[Command]Reply{
		{OpLLen, "jobs"}: {N: 7},
		{OpLLen, "q:a"}:  {N: 0}, {OpType, "q:a"}: {Type: "none"}, // popped empty: gone
		{OpLLen, "q:b"}: {N: 2}, {OpType, "q:b"}: {Type: "list"},
		{OpLLen, "q:c"}: {N: 5}, {OpType, "q:c"}: {Type: "list"}, // new
		{OpLLen, "q:h"}: {Err: errBroken}, {OpType, "q:h"}: {Type: "hash"}, // not a list
		{OpLLen, "b:x"}: {N: 1}, {OpType, "b:x"}: {Type: "list"},
	}
	for i, c := range cmds {
		r, ok := values[c]
		if !ok {
			t.Fatalf("unexpected command %v", c)
		}
		replies[i] = r
	}
	applyReplies(snap, pending, nil, ms, cmds, replies, 10)
	keys := slices.Clone(snap.keys[lists])
	slices.Sort(keys)
	if want := []string{"q:b", "q:c"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("pattern keys %v, want %v", keys, want)
	}
	if snap.replies[Command{OpLLen, "jobs"}].N != 7 || snap.replies[Command{OpLLen, "q:c"}].N != 5 {
		t.Errorf("replies not merged: %v", snap.replies)
	}
	if snap.scanErr[broken] != errBroken || snap.keys[broken] != nil {
		t.Errorf("a failed SCAN's pattern changed: keys %v err %v", snap.keys[broken], snap.scanErr[broken])
	}
	series, err := ms[1].series(snap)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range series {
		got[s.Labels["key"]] = s.Value
	}
	if want := map[string]float64{"q:b": 2, "q:c": 5}; !reflect.DeepEqual(got, want) {
		t.Errorf("series %v, want %v", got, want)
	}
	// one key too many
	pending = map[string]map[string]bool{"q:d": {"q:*": true}}
	cmds, _ = commandsFor(pending, nil, ms)
	applyReplies(snap, pending, nil, ms, cmds, []Reply{{N: 1}, {Type: "list"}}, 2)
	if err := snap.scanErr[lists]; err == nil || !strings.Contains(err.Error(), "maxKeys") {
		t.Errorf("beyond maxKeys: err %v, want the maxKeys error", err)
	}
	if _, err := ms[1].series(snap); err == nil {
		t.Error("the pattern beyond maxKeys still serves series")
	}
}

// TestKeyspaceEventsSayTheType: a pattern's key whose last event names its
// type (a list or stream command, or a deletion) is not asked its TYPE, and
// joins or leaves the pattern's keys on the event; any other event still
// asks.
func TestKeyspaceEventsSayTheType(t *testing.T) {
	t.Parallel()
	ms := ksMetrics(t, `{"name": "tenants", "type": "listLength", "keyPattern": "q:*"}`)
	lists := scan{"q:*", "list"}
	snap := newSnapshot()
	snap.keys[lists] = []string{"q:gone", "q:renamed", "q:set", "q:retyped"}
	pending := map[string]map[string]bool{
		"q:new": {"q:*": true}, "q:gone": {"q:*": true}, "q:renamed": {"q:*": true}, "q:set": {"q:*": true}, "q:retyped": {"q:*": true},
	}
	// q:retyped: an lpush, then (before the read) a DEL and a SET whose
	// own notifications come later
	events := map[string]string{"q:new": "lpush", "q:gone": "del", "q:renamed": "rename_to", "q:set": "set", "q:retyped": "lpush"}
	cmds, _ := commandsFor(pending, events, ms)
	want := []Command{{OpLLen, "q:gone"}, {OpLLen, "q:new"}, {OpLLen, "q:renamed"}, {OpType, "q:renamed"}, {OpLLen, "q:retyped"}, {OpLLen, "q:set"}, {OpType, "q:set"}}
	if !reflect.DeepEqual(cmds, want) {
		t.Fatalf("commands %v, want %v", cmds, want)
	}
	values := map[Command]Reply{
		{OpLLen, "q:gone"}: {N: 0}, {OpLLen, "q:new"}: {N: 20},
		{OpLLen, "q:renamed"}: {N: 4}, {OpType, "q:renamed"}: {Type: "list"},
		{OpLLen, "q:set"}: {Err: errBroken}, {OpType, "q:set"}: {Type: "string"},
		{OpLLen, "q:retyped"}: {Err: errBroken},
	}
	replies := make([]Reply, len(cmds))
	for i, c := range cmds {
		replies[i] = values[c]
	}
	applyReplies(snap, pending, events, ms, cmds, replies, 10)
	keys := slices.Clone(snap.keys[lists])
	slices.Sort(keys)
	if want := []string{"q:new", "q:renamed"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("pattern keys %v, want %v", keys, want)
	}
	for _, tc := range []struct {
		event, typ string
		known      bool
	}{{"rpush", "list", true}, {"lpop", "list", true}, {"xadd", "stream", true}, {"expired", "none", true}, {"rename_from", "none", true}, {"rename_to", "", false}, {"hset", "", false}, {"", "", false}} {
		if typ, known := eventType(tc.event); typ != tc.typ || known != tc.known {
			t.Errorf("eventType(%q) = %q, %v; want %q, %v", tc.event, typ, known, tc.typ, tc.known)
		}
	}
}

var errBroken = &wrongType{}

type wrongType struct{}

func (*wrongType) Error() string { return "WRONGTYPE" }

// TestPutOff: a notified key read less than the spacing ago waits for the
// rest of it; one never read, or read long enough ago, is read now.
func TestPutOff(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	pending := map[string]map[string]bool{
		"new": {"": true}, "old": {"": true}, "recent": {"q:*": true}, "just": {"": true},
	}
	lastRead := map[string]time.Time{
		"old": now.Add(-2 * time.Second), "recent": now.Add(-300 * time.Millisecond), "just": now.Add(-900 * time.Millisecond),
	}
	deferred, next := putOff(pending, lastRead, now, time.Second)
	var left []string
	for k := range pending {
		left = append(left, k)
	}
	slices.Sort(left)
	if want := []string{"new", "old"}; !reflect.DeepEqual(left, want) {
		t.Errorf("read now %v, want %v", left, want)
	}
	if want := map[string]map[string]bool{"recent": {"q:*": true}, "just": {"": true}}; !reflect.DeepEqual(deferred, want) {
		t.Errorf("put off %v, want %v", deferred, want)
	}
	if next != 100*time.Millisecond {
		t.Errorf("next flush in %s, want 100ms (the key read 900ms ago)", next)
	}
	if deferred, next := putOff(map[string]map[string]bool{"new": {"": true}}, lastRead, now, time.Second); deferred != nil || next != 0 {
		t.Errorf("nothing to put off: got %v, %s", deferred, next)
	}
}
