package httplimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"
)

// strictDecode is how the decision API decodes a body that is not of the
// plain shape: encoding/json, unknown fields refused, nothing after.
func strictDecode(b []byte) (CheckRequest, bool) {
	var req CheckRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if dec.Decode(&req) != nil {
		return req, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return req, false
	}
	return req, true
}

var checkBodiesToDecode = []string{
	`{"key":"user:alice","endpoint":"GET /api/v1/orders/42"}`,
	` { "key" : "ip:10.0.0.1" ,"endpoint":"/a", "plan_tier":"pro", "cost": 3 } ` + "\n",
	`{"key":"k","endpoint":"GET /a","cost":-0}`,
	`{"key":"k","endpoint":"GET /a","cost":9223372036854775807}`,
	`{"key":"k","endpoint":"GET /a","cost":-9223372036854775808}`,
	`{"key":"k","key":"k2","endpoint":"GET /a","cost":1,"cost":2}`,
	`{}`,
	`{"key":"k","endpoint":"GET /a","dry_run":true}`,
	` {"dry_run" : false, "key":"k","endpoint":"GET /a"}`,
	// Shapes the plain decoder leaves to encoding/json.
	`{"key":"k","endpoint":"GET /a","cost":9223372036854775808}`,
	`{"key":"k","endpoint":"GET /a","cost":1.0}`,
	`{"key":"k","endpoint":"GET /a","cost":1e2}`,
	`{"key":"k","endpoint":"GET /a","cost":01}`,
	`{"key":"k","endpoint":"GET /a","cost":null}`,
	`{"key":"k\"q","endpoint":"GET /a"}`,
	`{"KEY":"k","endpoint":"GET /a"}`,
	`{"key":"é","endpoint":"GET /a"}`,
	`{"key":"k","endpoint":"GET /a","extra":1}`,
	`{"key":"k","endpoint":"GET /a"}}`,
	`{"key":"k","endpoint":"GET /a"} {}`,
	`{"key":"k","endpoint":"GET /a",}`,
	`{"key":"k" "endpoint":"GET /a"}`,
	`["key"]`, ``, `{`, `{"key"`, `{"key":}`, `{"key":-}`, `{"key":"k","cost":-}`,
}

// Whatever the plain decoder accepts, encoding/json accepts with the same
// result; it never accepts what encoding/json refuses.
func TestThePlainCheckDecoderAgreesWithEncodingJSON(t *testing.T) {
	check := func(body []byte) bool {
		var fast CheckRequest
		if !decodePlainCheckRequest(body, &fast) {
			return false
		}
		slow, ok := strictDecode(body)
		if !ok {
			t.Fatalf("%q: the plain decoder accepted what encoding/json refuses", body)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: plain decoder %+v, encoding/json %+v", body, fast, slow)
		}
		return true
	}
	accepted := 0
	for _, b := range checkBodiesToDecode {
		if check([]byte(b)) {
			accepted++
		}
	}
	if accepted != 9 {
		t.Errorf("the plain decoder took %d of the bodies of the usual shape, want all 9", accepted)
	}
	// Mutations of the usual shapes, byte by byte.
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte(`{}[]":,. -+0123456789eE\kyndpotcslanrfu_` + "\t\n\x00\xff")
	for range 50_000 {
		b := []byte(checkBodiesToDecode[rng.IntN(9)])
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(b) + 1)
			switch rng.IntN(3) {
			case 0: // replace
				if i < len(b) {
					b[i] = alphabet[rng.IntN(len(alphabet))]
				}
			case 1: // insert
				b = append(b[:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
			default: // delete
				if i < len(b) {
					b = append(b[:i], b[i+1:]...)
				}
			}
		}
		check(b)
	}
}

// The decision API's answer is byte for byte what json.Marshal writes,
// for every field CheckResponse has now or gains later.
func TestTheCheckResponseEncoderWritesWhatJSONMarshalWrites(t *testing.T) {
	odd := "a<b>&\"c\\d\u2028é\x01\xff"
	var full CheckResponse
	v := reflect.ValueOf(&full).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			f.SetString(odd + v.Type().Field(i).Name)
		case reflect.Int64:
			f.SetInt(-int64(i) * 1_000_000_007)
		case reflect.Slice:
			if f.Type().Elem().Kind() != reflect.String {
				t.Fatalf("CheckResponse.%s is a slice of %s: teach appendCheckResponse and this test about it", v.Type().Field(i).Name, f.Type().Elem().Kind())
			}
			f.Set(reflect.ValueOf([]string{odd + v.Type().Field(i).Name, "b"}))
		default:
			t.Fatalf("CheckResponse.%s is a %s: teach appendCheckResponse and this test about it", v.Type().Field(i).Name, f.Kind())
		}
	}
	for name, r := range map[string]CheckResponse{
		"every field set":    full,
		"the zero value":     {},
		"an allowed request": {Allowed: true, Status: "allowed", Endpoint: "GET /api/v1/orders/{id}", Class: "orders", PlanTier: "free", Limit: 100, Remaining: 99, Reset: 1},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendCheckResponse(nil, &r); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}
