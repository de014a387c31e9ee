package modules

import (
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/cycled/cycled/fault"
)

// fuzzBody serves body, then (endless) body again and again, counting the bytes read.
type fuzzBody struct {
	body    []byte
	endless bool
	off     int
	read    int64
}

func (b *fuzzBody) Read(p []byte) (int, error) {
	if len(b.body) == 0 {
		return 0, io.EOF
	}
	if b.off == len(b.body) {
		if !b.endless {
			return 0, io.EOF
		}
		b.off = 0
	}
	n := copy(p, b.body[b.off:])
	b.off += n
	b.read += int64(n)
	return n, nil
}

// FuzzHTTPResponse checks the decoder of remote answers: whatever the status and body, it
// never panics, never reads more than max_body+1 bytes, and classifies into a value or one
// of the kinds a remote answer can have, consistently with the status. The seed corpus is
// in testdata/fuzz/FuzzHTTPResponse; run with go test -fuzz FuzzHTTPResponse ./modules/.
func FuzzHTTPResponse(f *testing.F) {
	f.Add(200, []byte(`{"value": {"a": [1, 2.5e300, "x", null, true]}}`), uint16(64), false)
	f.Add(200, []byte(`{"error": {"kind": "contract", "message": "bad"}}`), uint16(1024), false)
	f.Add(200, []byte(`{"error": {"kind": "none"}}`), uint16(1024), false)
	f.Add(200, []byte(`{"value": 1} x`), uint16(1024), false)
	f.Add(200, []byte(`{"value": "`), uint16(8), true)
	f.Add(503, []byte("busy"), uint16(2), true)
	f.Add(404, []byte(""), uint16(0), false)
	f.Add(299, []byte(`{"value": 1e999}`), uint16(100), false)
	f.Fuzz(func(t *testing.T, status int, body []byte, maxBody uint16, endless bool) {
		max := int64(maxBody)
		r := &fuzzBody{body: body, endless: endless}
		v, err := decodeResponse(status, r, max)
		if max == 0 {
			max = DefaultMaxBody
		}
		if r.read > max+1 {
			t.Fatalf("read %d bytes, max_body %d", r.read, max)
		}
		k := fault.Classify(err)
		ok2xx := status >= 200 && status <= 299
		switch {
		case err == nil:
			if !ok2xx {
				t.Fatalf("status %d gave a value", status)
			}
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("value %#v does not encode: %v", v, err)
			}
		case !ok2xx:
			want := fault.KindDownstream
			if status == 408 || status == 429 || (status >= 500 && status <= 599) {
				want = fault.KindTransient
			}
			if k != want {
				t.Fatalf("status %d: %v (%v), want %v", status, k, err, want)
			}
		default:
			switch k {
			case fault.KindValidation, fault.KindContract, fault.KindControl, fault.KindTransient, fault.KindDownstream, fault.KindInternal:
			default:
				t.Fatalf("status %d: kind %v (%v)", status, k, err)
			}
			var fe *fault.Error
			if !errors.As(err, &fe) {
				t.Fatalf("unmarked error %v", err)
			}
		}
		if err != nil && err.Error() == "" {
			t.Fatal("an error without a message")
		}
	})
}
