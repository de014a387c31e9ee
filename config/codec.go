package config

import (
	"encoding"
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/cycled/cycled/internal/strictdecode"
)

// encodePlain renders v as JSON-friendly values with the configuration's key names:
// structs by their yaml tags (inline fields flattened), durations and text marshalers as
// strings, maps with sorted keys.
func encodePlain(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	t := v.Type()
	if t == reflect.TypeFor[time.Duration]() {
		return time.Duration(v.Int()).String()
	}
	if p, ok := v.Interface().(plainer); ok && t.Kind() != reflect.Pointer {
		return p.plainValue()
	}
	if t.Implements(reflect.TypeFor[encoding.TextMarshaler]()) && (t.Kind() != reflect.Pointer || !v.IsNil()) {
		b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return err.Error()
		}
		return string(b)
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return encodePlain(v.Elem())
	case reflect.Struct:
		m := map[string]any{}
		for _, f := range strictdecode.Fields(t) {
			m[f.Name] = encodePlain(v.FieldByIndex(f.Index))
		}
		return m
	case reflect.Map:
		m := map[string]any{}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			m[fmt.Sprint(k.Interface())] = encodePlain(v.MapIndex(k))
		}
		return m
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && v.IsNil() {
			return []any{}
		}
		s := make([]any, v.Len())
		for i := range s {
			s[i] = encodePlain(v.Index(i))
		}
		return s
	}
	return v.Interface()
}
