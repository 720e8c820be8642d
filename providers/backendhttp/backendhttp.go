// Package backendhttp is what a provider's HTTP client needs when its
// requests carry credentials to a backend it does not control (a remote
// metrics adapter, a broker's management API):
//   - no redirect is followed: a 3xx would take the bearer token or the
//     basic-auth password to wherever it points, plain http included (Go's
//     client re-sends them to the same host on another port or scheme);
//   - an answer is read up to a size bound, refused beyond it;
//   - the backend's own text shown in an error (to metric readers, in
//     logs) is a short excerpt without control characters.
package backendhttp

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// NewClient is a client over tr that follows no redirect: a 3xx is
// returned as the answer, and the request to its Location is never made.
// Requests are bounded by their context, not by the client.
func NewClient(tr http.RoundTripper) *http.Client {
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// IsRedirect says whether code is an answer NewClient's client returns
// instead of following it.
func IsRedirect(code int) bool { return code >= 300 && code < 400 }

// Redirect describes a 3xx answer for an error message: where it pointed
// (its scheme and host only, sanitised) and that it was not followed.
func Redirect(resp *http.Response) string {
	loc := resp.Header.Get("Location")
	if loc == "" {
		return "a redirect without a Location, not followed"
	}
	target := "elsewhere"
	if resp.Request == nil || resp.Request.URL == nil {
		return "a redirect, not followed (credentials are sent to the configured URL only)"
	}
	if u, err := resp.Request.URL.Parse(loc); err == nil && u.Host != "" {
		target = (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	}
	return "a redirect to " + Excerpt([]byte(target)) + ", not followed (credentials are sent to the configured URL only)"
}

// TooLargeError is an answer longer than the reader's bound.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the answer is larger than %s, the most this adapter reads", Size(e.Limit))
}

// ReadBody reads resp's body, at most limit bytes: a longer one (by its
// Content-Length, or once read) is a *TooLargeError, and no more of it is
// read.
func ReadBody(resp *http.Response, limit int64) ([]byte, error) {
	if resp.ContentLength > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	return b, nil
}

// IsTooLarge says whether err is (or wraps) a *TooLargeError.
func IsTooLarge(err error) bool {
	var tl *TooLargeError
	return errors.As(err, &tl)
}

// ExcerptBytes bounds an excerpt: enough for a Status message, too short
// to carry a page.
const ExcerptBytes = 160

// Excerpt is the start of a backend's text for an error message: control
// and other non-printing characters (escape sequences, bidi overrides,
// invalid UTF-8) become one space each, runs of spaces one space, and
// the result is at most ExcerptBytes bytes (cut on a character boundary,
// "..." after it). Empty text is "(empty)".
func Excerpt(b []byte) string {
	var out strings.Builder
	space := true // drop leading blanks
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			b = b[n:]
			if !space {
				out.WriteByte(' ')
				space = true
			}
			continue
		}
		if out.Len()+n > ExcerptBytes {
			break
		}
		b = b[n:]
		out.WriteRune(r)
		space = false
	}
	s := strings.TrimRight(out.String(), " ")
	if len(b) > 0 {
		s += "..."
	}
	if s == "" {
		return "(empty)"
	}
	return s
}

// Size is n bytes for a message: "8 MiB", "512 KiB", "100 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
