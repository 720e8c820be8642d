package backendhttp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestExcerpt(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 200) // 2 bytes each
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "upstream connect error\n", "upstream connect error"},
		{"empty", " \r\n\t", "(empty)"},
		{"control characters", "a\x1b[31mred\x1b[0m\r\nInjected: header\x00z", "a [31mred [0m Injected: header z"},
		{"bidi override and invalid UTF-8", "ab\u202ecd\xff\xfeef", "ab cd ef"},
		{"cut on a character boundary", long, strings.Repeat("é", ExcerptBytes/2) + "..."},
		{"exactly the bound", strings.Repeat("x", ExcerptBytes), strings.Repeat("x", ExcerptBytes)},
		{"one over", strings.Repeat("x", ExcerptBytes+1), strings.Repeat("x", ExcerptBytes) + "..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Excerpt([]byte(tc.in))
			if got != tc.want {
				t.Errorf("Excerpt(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if len(got) > ExcerptBytes+len("...") {
				t.Errorf("%d bytes, more than %d", len(got), ExcerptBytes+3)
			}
			for _, r := range got {
				if r < 0x20 || r == 0x7f || r == '\u202e' {
					t.Errorf("control character %U in %q", r, got)
				}
			}
		})
	}
}

// TestNoRedirect: the client returns the 3xx; the target never sees a
// request, so never the credentials.
func TestNoRedirect(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	defer target.Close()
	for _, code := range []int{301, 302, 303, 307, 308} {
		src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/steal?x=1", code)
		}))
		c := NewClient(http.DefaultTransport)
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, src.URL, nil)
		req.Header.Set("Authorization", "Bearer secret")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		src.Close()
		if resp.StatusCode != code || !IsRedirect(resp.StatusCode) {
			t.Errorf("status %d, want the %d itself", resp.StatusCode, code)
		}
		msg := Redirect(resp)
		if !strings.Contains(msg, target.URL) || strings.Contains(msg, "steal") || !strings.Contains(msg, "not followed") {
			t.Errorf("Redirect() = %q: want the target's scheme and host only, and 'not followed'", msg)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests, want 0", n)
	}
}

func TestReadBody(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("chunked") != "" {
			w.(http.Flusher).Flush() // no Content-Length
		}
		_, _ = w.Write([]byte(strings.Repeat("x", 100)))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		query   string
		limit   int64
		wantErr bool
	}{
		{"", 100, false},
		{"", 99, true},
		{"?chunked=1", 100, false},
		{"?chunked=1", 99, true},
	} {
		resp, err := http.Get(srv.URL + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ReadBody(resp, tc.limit)
		resp.Body.Close()
		switch {
		case tc.wantErr && (!IsTooLarge(err) || b != nil):
			t.Errorf("%s limit %d: %d bytes, %v; want a TooLargeError", tc.query, tc.limit, len(b), err)
		case !tc.wantErr && (err != nil || len(b) != 100):
			t.Errorf("%s limit %d: %d bytes, %v; want 100", tc.query, tc.limit, len(b), err)
		}
	}
	if got := (&TooLargeError{Limit: 8 << 20}).Error(); !strings.Contains(got, "8 MiB") {
		t.Errorf("message %q does not say 8 MiB", got)
	}
}
