package scenario

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FieldError is a malformed value, located by its path in the document
// (e.g. steps[2].pods[0].status.startTime).
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(path, format string, args ...any) error {
	return &FieldError{Path: path, Err: fmt.Errorf(format, args...)}
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	durationType    = reflect.TypeFor[Duration]()
)

// decodeValue stores the generic JSON value v (as decoded with UseNumber)
// into dst, strictly: unknown fields and mistyped values are errors that
// name their path. Types with their own JSON decoding (times, quantities)
// decode themselves.
func decodeValue(path string, v any, dst reflect.Value) error {
	t := dst.Type()
	if t == durationType {
		s, ok := v.(string)
		if !ok {
			return fieldErr(path, "want a duration such as \"30s\" or \"5m\", got %s", describe(v))
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fieldErr(path, "%v", err)
		}
		dst.Set(reflect.ValueOf(Duration(d)))
		return nil
	}
	if t.Kind() == reflect.Pointer {
		if v == nil {
			dst.SetZero()
			return nil
		}
		elem := reflect.New(t.Elem())
		if err := decodeValue(path, v, elem.Elem()); err != nil {
			return err
		}
		dst.Set(elem)
		return nil
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		raw, err := json.Marshal(v)
		if err != nil {
			return fieldErr(path, "%v", err)
		}
		if err := dst.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			return fieldErr(path, "%v", err)
		}
		return nil
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) && t.Kind() != reflect.String {
		s, ok := v.(string)
		if !ok {
			return fieldErr(path, "want a string, got %s", describe(v))
		}
		if err := dst.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			return fieldErr(path, "%v", err)
		}
		return nil
	}
	if v == nil {
		dst.SetZero()
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return fieldErr(path, "want an object, got %s", describe(v))
		}
		fields := structFields(t)
		for _, key := range sortedKeys(m) {
			idx, ok := fields[key]
			if !ok {
				return fieldErr(join(path, key), "unknown field")
			}
			if err := decodeValue(join(path, key), m[key], dst.FieldByIndex(idx)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return fieldErr(path, "want an object, got %s", describe(v))
		}
		out := reflect.MakeMapWithSize(t, len(m))
		for _, key := range sortedKeys(m) {
			k := reflect.New(t.Key()).Elem()
			if t.Key().Kind() != reflect.String {
				return fieldErr(path, "unsupported map key type %s", t.Key())
			}
			k.SetString(key)
			val := reflect.New(t.Elem()).Elem()
			if err := decodeValue(join(path, key), m[key], val); err != nil {
				return err
			}
			out.SetMapIndex(k, val)
		}
		dst.Set(out)
		return nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			s, ok := v.(string)
			if !ok {
				return fieldErr(path, "want a base64 string, got %s", describe(v))
			}
			var b []byte
			if err := json.Unmarshal([]byte(strconv.Quote(s)), &b); err != nil {
				return fieldErr(path, "%v", err)
			}
			dst.SetBytes(b)
			return nil
		}
		list, ok := v.([]any)
		if !ok {
			return fieldErr(path, "want a list, got %s", describe(v))
		}
		out := reflect.MakeSlice(t, len(list), len(list))
		for i, item := range list {
			if err := decodeValue(fmt.Sprintf("%s[%d]", path, i), item, out.Index(i)); err != nil {
				return err
			}
		}
		dst.Set(out)
		return nil
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return fieldErr(path, "want a string, got %s", describe(v))
		}
		dst.SetString(s)
		return nil
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return fieldErr(path, "want true or false, got %s", describe(v))
		}
		dst.SetBool(b)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return fieldErr(path, "want an integer, got %s", describe(v))
		}
		i, err := strconv.ParseInt(n.String(), 10, t.Bits())
		if err != nil {
			return fieldErr(path, "want an integer that fits in %d bits, got %s", t.Bits(), n)
		}
		dst.SetInt(i)
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			return fieldErr(path, "want a non-negative integer, got %s", describe(v))
		}
		u, err := strconv.ParseUint(n.String(), 10, t.Bits())
		if err != nil {
			return fieldErr(path, "want a non-negative integer that fits in %d bits, got %s", t.Bits(), n)
		}
		dst.SetUint(u)
		return nil
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			return fieldErr(path, "want a number, got %s", describe(v))
		}
		f, err := strconv.ParseFloat(n.String(), t.Bits())
		if err != nil || math.IsInf(f, 0) {
			return fieldErr(path, "want a finite number, got %s", n)
		}
		dst.SetFloat(f)
		return nil
	case reflect.Interface:
		dst.Set(reflect.ValueOf(v))
		return nil
	}
	return fieldErr(path, "unsupported type %s", t)
}

// structFields maps JSON names to field indexes, flattening inline fields.
func structFields(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(append([]int(nil), prefix...), i)
			inline := (f.Anonymous && name == "") || slices.Contains(strings.Split(opts, ","), "inline")
			if inline && f.Type.Kind() == reflect.Struct {
				walk(f.Type, idx)
				continue
			}
			if name == "" {
				name = f.Name
			}
			out[name] = idx
		}
	}
	walk(t, nil)
	return out
}

// sortedKeys orders keys so that the first error reported is the same every run.
func sortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// parseGeneric decodes JSON text into generic values, numbers kept exact.
func parseGeneric(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("unexpected data after the document")
	}
	return v, nil
}
