package inspect

import (
	"encoding/json"
	"io"
	"reflect"
	"strings"
)

// encodeByElement writes the struct v as encoding/json does, followed by a
// newline, but each element of its top-level slices on its own: json
// encodes a whole value into one buffer first, which for a Snapshot of
// 10,000 Services grew to 32 MB beside the 18 MB it held; element by
// element the buffer holds one virtual server. A struct with an embedded
// field (whose fields json would flatten) is encoded whole.
func encodeByElement(w io.Writer, v any) error {
	rv := reflect.ValueOf(v)
	rt := rv.Type()
	for i := range rt.NumField() {
		if rt.Field(i).Anonymous {
			return json.NewEncoder(w).Encode(v)
		}
	}
	bw := &errWriter{w: w}
	bw.write("{")
	first := true
	for i := range rt.NumField() {
		f := rt.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fv := rv.Field(i)
		if hasOption(opts, "omitempty") && isEmpty(fv) || hasOption(opts, "omitzero") && fv.IsZero() {
			continue
		}
		if !first {
			bw.write(",")
		}
		first = false
		bw.json(name)
		bw.write(":")
		if fv.Kind() == reflect.Slice && !fv.IsNil() && fv.Type().Elem().Kind() != reflect.Uint8 && !hasOption(opts, "string") {
			bw.write("[")
			for j := range fv.Len() {
				if j > 0 {
					bw.write(",")
				}
				bw.json(fv.Index(j).Interface())
			}
			bw.write("]")
			continue
		}
		bw.json(fv.Interface())
	}
	bw.write("}\n")
	return bw.err
}

func hasOption(opts, name string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == name {
			return true
		}
	}
	return false
}

// isEmpty is encoding/json's omitempty rule.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// errWriter keeps the first error and writes nothing after it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) write(s string) {
	if e.err == nil {
		_, e.err = io.WriteString(e.w, s)
	}
}

func (e *errWriter) json(v any) {
	if e.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		e.err = err
		return
	}
	_, e.err = e.w.Write(b)
}
