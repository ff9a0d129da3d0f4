package proxy

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
)

// The usual upstream answer (HTTP/1.1, a final status, a Content-Length, plain
// ASCII fields, all of its head in the read buffer) is parsed here with a few
// allocations; any other, or anything unusual in one, goes to http.ReadResponse,
// which reads the same bytes, so both give the same answer (a differential
// fuzz test holds them to it).

// simpleResponse is a parsed answer and its body in one allocation, with
// room for the values of a usual number of fields.
type simpleResponse struct {
	resp http.Response
	body upstreamBody
	strs [8]string
}

// simpleProto is the only protocol of a usual answer's status line.
const simpleProto = "HTTP/1.1 "

// readSimpleResponse parses the answer to r at the start of br when it is one
// of the usual kind, consuming its head; ok is false, with nothing consumed,
// for every other (http.ReadResponse's to parse, or to refuse).
func readSimpleResponse(br *bufio.Reader, r *http.Request) (_ *simpleResponse, ok bool) {
	if r.Method == http.MethodHead {
		return nil, false
	}
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, false
	}
	code, first, ok := simpleStatus(buf)
	if !ok {
		return nil, false
	}
	// One string holds the status and every field name and value of the head.
	head := string(buf[:end+2])
	fields := head[first+1:]
	lines, ok := countLines(fields)
	if !ok {
		return nil, false
	}
	sr := &simpleResponse{}
	resp := &sr.resp
	resp.Status, resp.StatusCode = head[len(simpleProto):first-1], code
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	resp.Request = r
	length, ok := sr.parseFields(fields, lines)
	if !ok {
		return nil, false // or to be read until the upstream closes
	}
	if _, err := br.Discard(end + 4); err != nil {
		return nil, false
	}
	resp.ContentLength = length
	if length == 0 {
		resp.Body = http.NoBody
	} else {
		sr.body.remaining = length
		resp.Body = &sr.body
	}
	return sr, true
}

// simpleStatus parses the status line at the start of buf, "HTTP/1.1 ddd" and a
// reason or none, of a final status with a body: its code and the index of its '\n'.
func simpleStatus(buf []byte) (code, first int, ok bool) {
	const proto = simpleProto
	if len(buf) < len(proto)+4 || string(buf[:len(proto)]) != proto {
		return 0, 0, false
	}
	for _, c := range buf[len(proto) : len(proto)+3] {
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		code = code*10 + int(c-'0')
	}
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return 0, 0, false
	}
	first = bytes.IndexByte(buf, '\n')
	if buf[first-1] != '\r' || (buf[len(proto)+3] != ' ' && first != len(proto)+4) {
		return 0, 0, false
	}
	return code, first, true
}

// countLines counts the field lines of fields, each ended by CRLF (else ok is false).
func countLines(fields string) (lines int, ok bool) {
	for rest := fields; rest != ""; lines++ {
		i := indexLF(rest)
		if i < 1 || rest[i-1] != '\r' {
			return 0, false
		}
		rest = rest[i+1:]
	}
	return lines, true
}

// parseFields fills sr's header from fields, lines of them, and returns the
// Content-Length; ok is false for a field left to http.ReadResponse, or none.
func (sr *simpleResponse) parseFields(fields string, lines int) (length int64, ok bool) {
	h := make(http.Header, lines)
	sr.resp.Header = h
	strs := sr.strs[:]
	if lines > len(sr.strs) {
		strs = make([]string, lines)
	}
	length = -1
	for rest := fields; rest != ""; {
		i := indexLF(rest)
		line := rest[:i-1]
		rest = rest[i+1:]
		key, value, ok := splitField(line)
		if !ok {
			return 0, false
		}
		switch key {
		case "Content-Length":
			if length >= 0 {
				return 0, false // a list, or a conflict: ReadResponse's rules
			}
			if length = parseLength(value); length < 0 {
				return 0, false
			}
		case "Transfer-Encoding", "Trailer", "Pragma":
			return 0, false
		case "Connection":
			if hasToken([]string{value}, "close") {
				return 0, false // ReadResponse drops the field
			}
		}
		if vv := h[key]; vv != nil {
			h[key] = append(vv, value)
		} else {
			h[key], strs = strs[:1:1], strs[1:]
			h[key][0] = value
		}
	}
	return length, length >= 0
}

// indexLF is the index of the first '\n' in s, or -1.
func indexLF(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return i
		}
	}
	return -1
}

// splitField splits a field line into its canonical name and its value with
// the surrounding blanks trimmed; ok is false unless the name is a token and
// the value printable ASCII and tabs (the rest is ReadResponse's to judge).
func splitField(line string) (key, value string, ok bool) {
	colon := -1
	for i := 0; i < len(line); i++ {
		if line[i] == ':' {
			colon = i
			break
		}
		if !tokenByte[line[i]] {
			return "", "", false
		}
	}
	if colon < 1 {
		return "", "", false
	}
	v := line[colon+1:]
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c > '~' {
			return "", "", false
		}
	}
	lo, hi := 0, len(v)
	for lo < hi && (v[lo] == ' ' || v[lo] == '\t') {
		lo++
	}
	for hi > lo && (v[hi-1] == ' ' || v[hi-1] == '\t') {
		hi--
	}
	return textproto.CanonicalMIMEHeaderKey(line[:colon]), v[lo:hi], true
}

// parseLength is a Content-Length of 1 to 18 digits, or -1.
func parseLength(v string) int64 {
	if v == "" || len(v) > 18 {
		return -1
	}
	n := int64(0)
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return -1
		}
		n = n*10 + int64(v[i]-'0')
	}
	return n
}

// tokenByte marks the bytes of an RFC 9110 token, which field names are.
var tokenByte = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()
