package options

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// Empty says whether raw holds no options at all (absent or null).
func Empty(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// Decode decodes raw into out (a pointer to a struct) strictly: a key that
// is no field (matched case-sensitively, as Kubernetes does) and a value of
// the wrong type are errors. Every error names the
// path of its field below field ("options.metrics[2].key: want a string,
// got a number"; "options.metrics[2]: unknown field "kye"") and all of them
// are returned, joined. Empty options are an error ("options: required");
// a provider whose options are optional checks Empty first.
//
// Error messages never quote a value: a value may be a secret given in the
// wrong place.
func Decode(field string, raw json.RawMessage, out any) error {
	if Empty(raw) {
		return fmt.Errorf("%s: required", field)
	}
	v := reflect.ValueOf(out)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("%s: decoding into %T, not a pointer", field, out)
	}
	if !json.Valid(raw) {
		var x any
		err := json.Unmarshal(raw, &x)
		return fmt.Errorf("%s: not valid JSON: %w", field, err)
	}
	var errs Errors
	decodeValue(field, bytes.TrimSpace(raw), v.Elem(), &errs)
	return errs.Err()
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func decodeValue(path string, raw []byte, v reflect.Value, errs *Errors) {
	null := string(raw) == "null"
	if v.Kind() == reflect.Pointer {
		if null {
			v.SetZero()
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		decodeValue(path, raw, v.Elem(), errs)
		return
	}
	pt := reflect.PointerTo(v.Type())
	if pt.Implements(unmarshalerType) || pt.Implements(textUnmarshalerType) {
		// the type decodes itself (a duration, a Secret): its error names
		// no path, so the path is added here
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			errs.Add(path, "%s", leafError(err))
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		if null {
			return
		}
		decodeStruct(path, raw, v, errs)
		return
	case reflect.Slice:
		if null {
			v.SetZero()
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			break // []byte is base64, as encoding/json has it
		}
		var items []json.RawMessage
		if raw[0] != '[' {
			errs.Add(path, "want a list, got %s", kindOf(raw))
			return
		}
		if err := json.Unmarshal(raw, &items); err != nil {
			errs.Add(path, "%s", leafError(err))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, it := range items {
			decodeValue(fmt.Sprintf("%s[%d]", path, i), bytes.TrimSpace(it), s.Index(i), errs)
		}
		v.Set(s)
		return
	case reflect.Map:
		if null {
			v.SetZero()
			return
		}
		if v.Type().Key().Kind() != reflect.String {
			break
		}
		if raw[0] != '{' {
			errs.Add(path, "want an object, got %s", kindOf(raw))
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		eachKey(path, raw, errs, func(key string, val []byte) {
			e := reflect.New(v.Type().Elem()).Elem()
			decodeValue(path+"."+key, val, e, errs)
			v.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), e)
		})
		return
	}
	if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
		errs.Add(path, "%s", leafError(err))
	}
}

func decodeStruct(path string, raw []byte, v reflect.Value, errs *Errors) {
	if raw[0] != '{' {
		errs.Add(path, "want an object, got %s", kindOf(raw))
		return
	}
	fields := fieldsOf(v.Type())
	eachKey(path, raw, errs, func(key string, val []byte) {
		f, ok := fields.byName[key]
		if !ok {
			if near, ok := fields.byFold[strings.ToLower(key)]; ok {
				errs.Add(path, "unknown field %q (did you mean %q?)", key, near)
			} else {
				errs.Add(path, "unknown field %q", key)
			}
			return
		}
		decodeValue(path+"."+key, val, fieldByIndex(v, f), errs)
	})
}

// eachKey calls fn for each member of the object raw, in order. A key
// given twice is decoded twice, the last winning, as encoding/json does
// (a YAML config refuses duplicate keys before it gets here).
func eachKey(path string, raw []byte, errs *Errors, fn func(key string, val []byte)) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		errs.Add(path, "%v", err)
		return
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			errs.Add(path, "%v", err)
			return
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			errs.Add(path+"."+key, "%v", err)
			return
		}
		fn(key, bytes.TrimSpace(val))
	}
}

// fieldByIndex is v.FieldByIndex, allocating embedded pointers on the way.
func fieldByIndex(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}

type structFields struct {
	byName map[string][]int
	byFold map[string]string // lower-cased name → name, for "did you mean"
}

var fieldCache sync.Map // reflect.Type → *structFields

// fieldsOf lists a struct's JSON fields as encoding/json sees them: json
// tag names, embedded structs without a name inlined, a shallower field
// hiding a deeper one of the same name.
func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	sf := &structFields{byName: map[string][]int{}, byFold: map[string]string{}}
	depth := map[string]int{}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			idx := append(append([]int(nil), index...), i)
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				walk(ft, idx)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if d, ok := depth[name]; ok && d <= len(idx) {
				continue
			}
			depth[name] = len(idx)
			sf.byName[name] = idx
			sf.byFold[strings.ToLower(name)] = name
		}
	}
	walk(t, nil)
	fieldCache.Store(t, sf)
	return sf
}

// kindOf names the JSON kind of raw, for "want X, got Y".
func kindOf(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// leafError rewords encoding/json's type errors without the Go type path
// ("cannot unmarshal string into Go struct field Options.port of type
// int"), which names Go types, not config fields.
func leafError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		got := te.Value
		if strings.HasPrefix(got, "number ") {
			// "number 1.5" into an int: say why without the value
			return fmt.Sprintf("want %s, got a number that does not fit", goKind(te.Type))
		}
		return fmt.Sprintf("want %s, got %s", goKind(te.Type), article(got))
	}
	return err.Error()
}

func goKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

func article(jsonKind string) string {
	switch jsonKind {
	case "object", "array":
		if jsonKind == "array" {
			return "a list"
		}
		return "an object"
	case "string", "number", "bool":
		if jsonKind == "bool" {
			return "a boolean"
		}
		return "a " + jsonKind
	}
	return jsonKind
}

// Errors collects validation errors that each name their field.
type Errors struct{ errs []error }

// Add records one error for field.
func (e *Errors) Add(field, format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

// AddErr records err, which names its own field.
func (e *Errors) AddErr(err error) {
	if err != nil {
		e.errs = append(e.errs, err)
	}
}

// Len is how many errors were recorded.
func (e *Errors) Len() int { return len(e.errs) }

// Err is every recorded error joined, one a line, or nil.
func (e *Errors) Err() error { return errors.Join(e.errs...) }
