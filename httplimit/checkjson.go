package httplimit

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// checkBodies lends the buffers decision API bodies are read into.
var checkBodies = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// readBody reads r to its end, appending to buf (growing it as needed), and returns what it read.
func readBody(buf []byte, r io.Reader) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// decodePlainCheckRequest decodes the usual check request without reflection: one JSON object
// whose members are among "key", "endpoint" and "plan_tier" (printable ASCII strings without
// escapes), "cost" (an integer) and "dry_run" (a bool). For anything else it reports false and
// leaves req alone, so that encoding/json decodes it and every error and every other case
// (escapes, other spellings of the names, null) is encoding/json's.
func decodePlainCheckRequest(b []byte, req *CheckRequest) bool {
	var out CheckRequest
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			name, j, ok := plainString(b, i)
			if !ok {
				return false
			}
			i = skipSpace(b, j)
			if i >= len(b) || b[i] != ':' {
				return false
			}
			i = skipSpace(b, i+1)
			switch string(name) {
			case "key", "endpoint", "plan_tier":
				v, j, ok := plainString(b, i)
				if !ok {
					return false
				}
				switch string(name) {
				case "key":
					out.Key = string(v)
				case "endpoint":
					out.Endpoint = string(v)
				default:
					out.PlanTier = string(v)
				}
				i = j
			case "cost":
				n, j, ok := plainInt(b, i)
				if !ok {
					return false
				}
				out.Cost = &n
				i = j
			case "dry_run":
				switch {
				case bytes.HasPrefix(b[i:], []byte("true")):
					out.DryRun, i = true, i+4
				case bytes.HasPrefix(b[i:], []byte("false")):
					out.DryRun, i = false, i+5
				default:
					return false
				}
			default:
				return false
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return false
			}
			if b[i] == '}' {
				i++
				break
			}
			if b[i] != ',' {
				return false
			}
			i = skipSpace(b, i+1)
		}
	}
	if skipSpace(b, i) != len(b) {
		return false
	}
	*req = out
	return true
}

// skipSpace returns the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string made of printable ASCII without escapes at b[i]; it returns its
// contents and the index after it.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c < 0x20 || c == '\\' || c >= 0x7f:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// plainInt reads a JSON integer (no fraction, no exponent) at b[i] that fits an int64; it returns
// it and the index after it.
func plainInt(b []byte, i int) (int64, int, bool) {
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var n uint64
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		if n > (1<<63)/10 {
			return 0, 0, false
		}
		n = n*10 + uint64(b[i]-'0')
		i++
	}
	switch {
	case i == start, b[start] == '0' && i-start > 1:
		return 0, 0, false // no digits, or a leading zero
	case i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E'):
		return 0, 0, false // a number that is not an integer
	case neg && n > 1<<63, !neg && n > 1<<63-1:
		return 0, 0, false
	}
	if neg {
		return -int64(n), i, true
	}
	return int64(n), i, true
}

// checkResponses lends the buffers decision API answers are encoded into.
var checkResponses = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// writeCheckResponse answers with resp as JSON, encoded without reflection into a pooled buffer;
// the bytes are json.Marshal's (a test holds them equal, whatever fields CheckResponse gains).
func writeCheckResponse(w http.ResponseWriter, code int, resp *CheckResponse) {
	buf := checkResponses.Get().(*[]byte)
	b := append(appendCheckResponse((*buf)[:0], resp), '\n')
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(code)
	_, _ = w.Write(b)
	*buf = b[:0]
	checkResponses.Put(buf)
}

// appendCheckResponse appends the JSON encoding of r, as json.Marshal writes it.
func appendCheckResponse(b []byte, r *CheckResponse) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, r.Allowed)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(r.Status))
	b = append(b, `,"endpoint":`...)
	b = appendJSONString(b, r.Endpoint)
	b = append(b, `,"class":`...)
	b = appendJSONString(b, r.Class)
	b = append(b, `,"plan_tier":`...)
	b = appendJSONString(b, r.PlanTier)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, r.Limit, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, r.Remaining, 10)
	b = append(b, `,"reset":`...)
	b = strconv.AppendInt(b, r.Reset, 10)
	b = append(b, `,"retry_after":`...)
	b = strconv.AppendInt(b, r.RetryAfter, 10)
	b = append(b, `,"delay_ms":`...)
	b = strconv.AppendInt(b, r.DelayMS, 10)
	if r.Degraded {
		b = append(b, `,"degraded":true`...)
	}
	if r.DryRun {
		b = append(b, `,"dry_run":true`...)
	}
	if r.Error != "" {
		b = append(b, `,"error":`...)
		b = appendJSONString(b, r.Error)
	}
	if r.Message != "" {
		b = append(b, `,"message":`...)
		b = appendJSONString(b, r.Message)
	}
	if len(r.RefusedBy) > 0 {
		b = append(b, `,"refused_by":[`...)
		for i, n := range r.RefusedBy {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, n)
		}
		b = append(b, ']')
	}
	if r.Reservation != "" {
		b = append(b, `,"reservation":`...)
		b = appendJSONString(b, r.Reservation)
	}
	if r.Lease != "" {
		b = append(b, `,"lease":`...)
		b = appendJSONString(b, r.Lease)
	}
	return append(b, '}')
}

// appendJSONString appends s as json.Marshal writes it: printable ASCII as is, anything else
// (quotes, backslashes, HTML characters, control bytes, non-ASCII) through encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			if err != nil {
				return append(b, `""`...)
			}
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
