package options

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// Bounds of a file read for a secret, a certificate or a key.
const (
	// MaxFileBytes is the largest such file read: a token, a password or a
	// PEM bundle is a few KiB; a bigger file is a mistake (a log named
	// instead of a token), and reading it whole would cost the adapter
	// memory at every reload.
	MaxFileBytes = 1 << 20
	// FileReadTimeout bounds one read, so a file on a hung network mount
	// fails the reload instead of stalling it.
	FileReadTimeout = 5 * time.Second
)

// Secret is a credential read from a file (a mounted Secret) or from an
// environment variable, never written in the config itself: in the config
// it is {file: /path} or {env: NAME}, and a plain string there is refused.
type Secret struct {
	File string `json:"file,omitempty"`
	Env  string `json:"env,omitempty"`
}

// UnmarshalJSON refuses an inline value, without quoting it.
func (s *Secret) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] != '{' {
		return errors.New(`an inline secret is refused: give {file: /path/to/it} (a mounted Secret) or {env: VARIABLE}`)
	}
	type plain Secret
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("want {file: ...} or {env: ...}: %w", err)
	}
	*s = Secret(p)
	return nil
}

// String names the source, never the value.
func (s *Secret) String() string {
	switch {
	case s == nil:
		return "<none>"
	case s.File != "":
		return "file " + s.File
	case s.Env != "":
		return "env " + s.Env
	}
	return "<none>"
}

// IsSet says whether a source is configured.
func (s *Secret) IsSet() bool { return s != nil && (s.File != "" || s.Env != "") }

// Validate checks that at most one source is set and that a file, if it
// exists here, is a regular file (a FIFO would block the reader forever).
// A missing file is not an error: check-config may run where the Secret
// is not mounted.
func (s *Secret) Validate(field string, errs *Errors) {
	if s == nil {
		return
	}
	if s.File != "" && s.Env != "" {
		errs.Add(field, "set file or env, not both")
	}
	if s.File != "" {
		CheckFile(field+".file", s.File, errs)
	}
}

// Value reads the secret; "" when unset. Trailing newlines of a file are
// dropped (kubectl create secret --from-file keeps them). Errors name the
// field and the source, never the value.
func (s *Secret) Value(field string) (string, error) {
	switch {
	case s == nil:
		return "", nil
	case s.File != "":
		b, err := ReadFile(context.Background(), s.File)
		if err != nil {
			return "", fmt.Errorf("%s.file: %w", field, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	case s.Env != "":
		v, ok := os.LookupEnv(s.Env)
		if !ok {
			return "", fmt.Errorf("%s.env: environment variable %s is not set", field, s.Env)
		}
		return v, nil
	}
	return "", nil
}

// ErrNotRegular is returned (wrapped) for a file that is a FIFO, a device,
// a socket or a directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned (wrapped) for a file over MaxFileBytes.
var ErrTooLarge = fmt.Errorf("larger than %d bytes", MaxFileBytes)

// CheckFile records an error for field if path exists and is not a regular
// file, or is larger than MaxFileBytes. It never opens the file.
func CheckFile(field, path string, errs *Errors) {
	fi, err := os.Stat(path)
	if err != nil {
		return // missing here; read (and reported) when the provider starts
	}
	if err := checkInfo(path, fi); err != nil {
		errs.Add(field, "%v", err)
	}
}

func checkInfo(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is %s, %w: name a file (a mounted Secret)", path, modeName(fi.Mode()), ErrNotRegular)
	}
	if fi.Size() > MaxFileBytes {
		return fmt.Errorf("%s is %d bytes, %w", path, fi.Size(), ErrTooLarge)
	}
	return nil
}

func modeName(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeDevice != 0, m&os.ModeCharDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "not a regular file (" + m.String() + ")"
}

// ReadFile reads a secret, certificate or key file: a regular file only,
// at most MaxFileBytes, within FileReadTimeout (or ctx's deadline, if
// sooner). A FIFO or a device is refused without blocking: the file is
// opened non-blocking and checked on the open descriptor, so a file
// swapped for a FIFO after a check is refused too.
func ReadFile(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, FileReadTimeout)
	defer cancel()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := readRegular(path)
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-ctx.Done():
		// the read goroutine ends when the file system answers
		return nil, fmt.Errorf("reading %s: %w", path, ctx.Err())
	}
}

func readRegular(path string) ([]byte, error) {
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if err := checkInfo(path, fi); err != nil {
		return nil, err // a device is not even opened: opening may act on it
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkInfo(path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s grew past %d bytes while read: %w", path, MaxFileBytes, ErrTooLarge)
	}
	return b, nil
}
