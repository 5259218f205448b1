package sqs

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// input is an action's parameters in the JSON protocol's shape (the
// Query protocol's form is rebuilt into the same shape, query.go):
// members by name, lists as []any, maps as map[string]any, numbers as
// json.Number, blobs as base64 strings.
type input map[string]any

// str returns a string member and whether it is present (a JSON null is
// absent).
func (in input) str(name string) (string, bool, *apiError) {
	v, ok := in[name]
	if !ok || v == nil {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, serialization(name)
	}
	return s, true, nil
}

// required returns a string member that must be there and not be empty.
func (in input) required(name string) (string, *apiError) {
	s, ok, err := in.str(name)
	if err != nil {
		return "", err
	}
	if !ok || s == "" {
		return "", missingParam(name)
	}
	return s, nil
}

// integer returns an integer member and whether it is present.
func (in input) integer(name string) (int64, bool, *apiError) {
	v, ok := in[name]
	if !ok || v == nil {
		return 0, false, nil
	}
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		if err != nil {
			return 0, false, invalidParam("Value %s for parameter %s is invalid. Reason: not an integer.", n, name)
		}
		return i, true, nil
	case string: // the Query protocol
		i, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return 0, false, invalidParam("Value %s for parameter %s is invalid. Reason: not an integer.", n, name)
		}
		return i, true, nil
	}
	return 0, false, serialization(name)
}

// bounded returns an integer member within [lo, hi], or def when absent.
func (in input) bounded(name string, lo, hi, def int64, reason string) (int64, *apiError) {
	n, ok, err := in.integer(name)
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return def, nil
	case n < lo || n > hi:
		return 0, invalidParam("Value %d for parameter %s is invalid. Reason: %s", n, name, reason)
	}
	return n, nil
}

// strings returns a list of strings.
func (in input) strings(name string) ([]string, *apiError) {
	return listOf(in, name, func(e any) (string, bool) { s, ok := e.(string); return s, ok })
}

// strmap returns a map of strings (Attributes, tags).
func (in input) strmap(name string) (map[string]string, *apiError) {
	return mapOf(in, name, func(k string, e any) (string, *apiError) {
		s, ok := e.(string)
		if !ok {
			return "", serialization(name + "." + k)
		}
		return s, nil
	})
}

// mapOf returns the map member name with each value converted by as.
func mapOf[T any](in input, name string, as func(key string, e any) (T, *apiError)) (map[string]T, *apiError) {
	v, ok := in[name]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, serialization(name)
	}
	out := make(map[string]T, len(m))
	for k, e := range m {
		t, aerr := as(k, e)
		if aerr != nil {
			return nil, aerr
		}
		out[k] = t
	}
	return out, nil
}

// list returns a list of structures (batch entries).
func (in input) list(name string) ([]input, *apiError) {
	return listOf(in, name, func(e any) (input, bool) { m, ok := e.(map[string]any); return input(m), ok })
}

// listOf returns the list member name with each element converted by as.
func listOf[T any](in input, name string, as func(any) (T, bool)) ([]T, *apiError) {
	v, ok := in[name]
	if !ok || v == nil {
		return nil, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, serialization(name)
	}
	out := make([]T, 0, len(l))
	for _, e := range l {
		t, ok := as(e)
		if !ok {
			return nil, serialization(name)
		}
		out = append(out, t)
	}
	return out, nil
}

// msgAttr is a message attribute: its data type (String, Number,
// Binary, each with an optional ".label") and value.
type msgAttr struct {
	DataType string
	String   string
	Binary   []byte
}

// binaryType reports whether the data type is Binary (or Binary.label).
func (a msgAttr) binaryType() bool { return baseType(a.DataType) == "Binary" }

func baseType(t string) string {
	for i := 0; i < len(t); i++ {
		if t[i] == '.' {
			return t[:i]
		}
	}
	return t
}

// attrs returns the message attributes member name.
func (in input) attrs(name string) (map[string]msgAttr, *apiError) {
	return mapOf(in, name, func(k string, e any) (msgAttr, *apiError) {
		var a msgAttr
		em, ok := e.(map[string]any)
		if !ok {
			return a, serialization(name + "." + k)
		}
		ev := input(em)
		var err *apiError
		if a.DataType, _, err = ev.str("DataType"); err != nil {
			return a, err
		}
		if a.String, _, err = ev.str("StringValue"); err != nil {
			return a, err
		}
		if b, ok, err := ev.str("BinaryValue"); err != nil {
			return a, err
		} else if ok {
			if a.Binary, err = decodeBlob(name, b); err != nil {
				return a, err
			}
		}
		return a, nil
	})
}

func decodeBlob(name, s string) ([]byte, *apiError) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, serialization(name)
	}
	return b, nil
}

// serialization is a member of the wrong JSON type.
func serialization(name string) *apiError {
	return &apiError{status: 400, shape: "com.amazon.coral.service#SerializationException", legacy: "SerializationException",
		msg: fmt.Sprintf("Unable to parse the value of %s.", name)}
}

// clampInt32 bounds n for a JSON integer member.
func clampInt32(n int64) int64 { return max(min(n, math.MaxInt32), math.MinInt32) }
