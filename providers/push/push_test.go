package push

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers"
)

type recordingSink struct {
	mu      sync.Mutex
	samples []providers.Sample
	err     error
}

func (s *recordingSink) Append(samples []providers.Sample) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.samples = append(s.samples, samples...)
	return nil
}

func TestHandler(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token"
	tests := []struct {
		name, method, auth, ctype, body string
		sinkErr                         error
		code                            int
		contains                        string
		stored                          int
	}{
		{"text", "POST", "Bearer " + token, "text/plain; version=0.0.4", "q{queue=\"a\"} 1\nq{queue=\"b\"} 2\n", nil, 204, "", 2},
		{"json", "POST", "bearer " + token, "application/json", `{"series":[{"name":"q","value":3}]}`, nil, 204, "", 1},
		{"openmetrics", "POST", "Bearer " + token, "application/openmetrics-text", "q 1\n# EOF\n", nil, 204, "", 1},
		{"no token", "POST", "", "text/plain", "q 1", nil, 401, "bearer token", 0},
		{"wrong token", "POST", "Bearer nope", "text/plain", "q 1", nil, 401, "", 0},
		{"token prefix only", "POST", "Bearer " + token[:5], "text/plain", "q 1", nil, 401, "", 0},
		{"basic auth", "POST", "Basic " + token, "text/plain", "q 1", nil, 401, "", 0},
		{"GET", "GET", "Bearer " + token, "", "", nil, 405, "POST", 0},
		{"no content type", "POST", "Bearer " + token, "", "q 1", nil, 415, "text/plain", 0},
		{"xml", "POST", "Bearer " + token, "application/xml", "<q/>", nil, 415, "application/xml", 0},
		{"bad text", "POST", "Bearer " + token, "text/plain", "q 1\nq{ 2", nil, 400, "line 2", 0},
		{"bad json", "POST", "Bearer " + token, "application/json", `{"series":[{"name":"q"}]}`, nil, 400, "series[0].value", 0},
		{"value wraps milli", "POST", "Bearer " + token, "text/plain", "q{queue=\"a\"} 9.3e15\n", nil, 400, "metric q: value 9.3e+15 is out of range", 0},
		{"value wraps milli json", "POST", "Bearer " + token, "application/json", `{"series":[{"name":"q","value":1e300}]}`, nil, 400, "series[0].value", 0},
		{"empty", "POST", "Bearer " + token, "text/plain", "# nothing\n", nil, 400, "no series", 0},
		{"too large", "POST", "Bearer " + token, "text/plain", strings.Repeat("q 1\n", 1000), nil, 413, "larger than", 0},
		{"store full", "POST", "Bearer " + token, "text/plain", "q 1", fmt.Errorf("memory provider %q: %w", "m", providers.ErrStoreFull), 507, "series limit", 0},
		{"unrouted", "POST", "Bearer " + token, "text/plain", "q 1", errors.New(`sample 0: no route serves metric "q"`), 400, "no route", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sink := &recordingSink{err: tc.sinkErr}
			h, err := NewHandler(sink, token+"\n", 1024)
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(tc.method, "/push", strings.NewReader(tc.body))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			rec := httptest.NewRecorder()
			h.Mux().ServeHTTP(rec, req)
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != tc.code || !strings.Contains(string(body), tc.contains) {
				t.Errorf("got %d %q, want %d containing %q", rec.Code, body, tc.code, tc.contains)
			}
			if len(sink.samples) != tc.stored {
				t.Errorf("stored %d samples, want %d", len(sink.samples), tc.stored)
			}
			if tc.code == 401 && rec.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}

func TestHealthzNeedsNoToken(t *testing.T) {
	t.Parallel()
	h, _ := NewHandler(&recordingSink{}, "t", 0)
	rec := httptest.NewRecorder()
	h.Mux().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("healthz = %d", rec.Code)
	}
}

func TestEmptyTokenRefused(t *testing.T) {
	t.Parallel()
	if _, err := NewHandler(&recordingSink{}, " \n", 0); err == nil {
		t.Error("an empty token was accepted")
	}
}

// TestOpenMetrics: OpenMetrics timestamps are seconds (possibly fractional),
// not milliseconds, and the body ends with "# EOF".
func TestOpenMetrics(t *testing.T) {
	t.Parallel()
	const token = "tok"
	const ctype = "application/openmetrics-text; version=1.0.0; charset=utf-8"
	tests := []struct {
		name, body string
		code       int
		want       time.Time
		contains   string
	}{
		{"seconds", "# TYPE q gauge\nq{queue=\"a\"} 1 1767225600\n# EOF\n", 204, time.Unix(1767225600, 0), ""},
		{"fractional seconds", "q 1 1767225600.25\n# EOF", 204, time.Unix(1767225600, 250_000_000), ""},
		{"no timestamp", "q 1\n# EOF\n", 204, time.Time{}, ""},
		{"exemplar ignored", "q_total 3 1767225600 # {trace_id=\"x\"} 1 1767225599\n# EOF\n", 204, time.Unix(1767225600, 0), ""},
		{"missing EOF", "q 1 1767225600\n", 400, time.Time{}, "# EOF"},
		{"data after EOF", "q 1\n# EOF\nr 2\n", 400, time.Time{}, "after # EOF"},
		{"milliseconds are out of range", "q 1 1767225600000\n# EOF\n", 400, time.Time{}, "metric q: timestamp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sink := &recordingSink{}
			h, err := NewHandler(sink, token, 0)
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("POST", "/push", strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", ctype)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.contains) {
				t.Fatalf("got %d %q, want %d containing %q", rec.Code, rec.Body.String(), tc.code, tc.contains)
			}
			if tc.code == 204 && (len(sink.samples) != 1 || !sink.samples[0].Timestamp.Equal(tc.want)) {
				t.Errorf("stored %+v, want one sample at %s", sink.samples, tc.want)
			}
		})
	}
}

// blockingSink holds every Append until release is closed.
type blockingSink struct {
	entered chan struct{}
	release chan struct{}
}

func (s *blockingSink) Append([]providers.Sample) error {
	s.entered <- struct{}{}
	<-s.release
	return nil
}

// TestMaxInflight: pushes beyond the concurrency cap are refused with 429
// and Retry-After instead of each holding a body and its parse in memory.
func TestMaxInflight(t *testing.T) {
	t.Parallel()
	sink := &blockingSink{entered: make(chan struct{}, 8), release: make(chan struct{})}
	h, err := NewHandler(sink, "tok", 0)
	if err != nil {
		t.Fatal(err)
	}
	h.MaxInflight = 2
	do := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/push", strings.NewReader("q 1\n"))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "text/plain")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); codes <- do().Code }()
	}
	<-sink.entered
	<-sink.entered
	rec := do()
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "concurrent") {
		t.Errorf("third concurrent push: %d %q Retry-After=%q, want 429 with Retry-After", rec.Code, rec.Body.String(), rec.Header().Get("Retry-After"))
	}
	close(sink.release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusNoContent {
			t.Errorf("a push within the cap got %d", c)
		}
	}
	if rec := do(); rec.Code != http.StatusNoContent {
		t.Errorf("push after the others finished: %d", rec.Code)
	}
}
