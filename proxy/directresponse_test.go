package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// responseSeeds are answers of every kind: the usual (which the direct path
// parses itself) and those left to http.ReadResponse.
var responseSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nhello\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nContent-Type: application/json\r\nDate: Tue, 01 Dec 2026 22:56:12 GMT\r\n\r\n{\"a\":1",
	"HTTP/1.1 404 Not Found\r\ncontent-length: 3\r\nx-request-id: abc\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\nnopNEXT",
	"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 503 Busy\r\nContent-Length:  2 \r\nRetry-After:\t1\t\r\nConnection: keep-alive\r\n\r\nno",
	"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
	"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, X-Hop\r\nX-Hop: 1\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!",
	"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\nok",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nContent-Length: 2\r\n\r\n",
	"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nX-Bad : a\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
	"HTTP/1.1 200 OK\r\nX-Lf: a\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nX-Cr: a\rb\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nX-Utf8: \xc3\xa9\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\n: empty\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n",
	"HTTP/1.1  200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 999 Odd\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nok",
	"HTTP/1.1 200 OK\r\n\r\nuntil close",
}

// TestTheUsualAnswersTakeTheShortParse holds the short parse to the answers
// it exists for, such as the benchmark's and the demo upstream's.
func TestTheUsualAnswersTakeTheShortParse(t *testing.T) {
	for _, s := range responseSeeds[:5] {
		br := bufio.NewReader(strings.NewReader(s))
		_, _ = br.Peek(1)
		if _, ok := readSimpleResponse(br, httpGet()); !ok {
			t.Errorf("%q went to http.ReadResponse", s)
		}
	}
}

// FuzzShortParseAgreesWithReadResponse holds the direct path's own parse of an
// answer to http.ReadResponse's: whatever it takes, ReadResponse reads the same
// way (status, fields, length, keep-alive, body, what follows); whatever it
// leaves, it leaves unread.
func FuzzShortParseAgreesWithReadResponse(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(responseSeeds[0]), true)
	f.Fuzz(func(t *testing.T, data []byte, head bool) {
		req := httpGet()
		if head {
			req.Method = http.MethodHead
		}
		br := bufio.NewReader(bytes.NewReader(data))
		if _, err := br.Peek(1); err != nil {
			return
		}
		buffered := br.Buffered()
		sr, ok := readSimpleResponse(br, req)
		if !ok {
			if br.Buffered() != buffered {
				t.Fatalf("%q: left to ReadResponse with %d bytes consumed", data, buffered-br.Buffered())
			}
			return
		}
		wbr := bufio.NewReader(bytes.NewReader(data))
		want, err := http.ReadResponse(wbr, req)
		if err != nil {
			t.Fatalf("%q: parsed, but ReadResponse says %v", data, err)
		}
		got := &sr.resp
		if got.Status != want.Status || got.StatusCode != want.StatusCode || got.Proto != want.Proto ||
			got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor ||
			got.ContentLength != want.ContentLength || got.Close != want.Close ||
			len(want.Trailer) != 0 || want.TransferEncoding != nil || got.Request != want.Request {
			t.Fatalf("%q: parsed as\n  %+v\nReadResponse gives\n  %+v", data, got, want)
		}
		if !reflect.DeepEqual(got.Header, want.Header) {
			t.Fatalf("%q: fields %v, ReadResponse's %v", data, got.Header, want.Header)
		}
		wantBody, wantErr := io.ReadAll(want.Body)
		var gotBody []byte
		var gotErr error
		if got.Body != http.NoBody {
			sr.body.pc = &upstreamConn{br: br}
			gotBody, gotErr = readAllLength(&sr.body)
		} else if want.Body != http.NoBody {
			t.Fatalf("%q: no body, ReadResponse has one", data)
		}
		if !bytes.Equal(gotBody, wantBody) || !errors.Is(gotErr, wantErr) && gotErr != wantErr {
			t.Fatalf("%q: body %q (%v), ReadResponse's %q (%v)", data, gotBody, gotErr, wantBody, wantErr)
		}
		rest, _ := io.ReadAll(br)
		wantRest, _ := io.ReadAll(wbr)
		if !bytes.Equal(rest, wantRest) {
			t.Fatalf("%q: %q follows the answer, %q after ReadResponse's", data, rest, wantRest)
		}
	})
}

// readAllLength reads b to its end as io.ReadAll would.
func readAllLength(b *upstreamBody) ([]byte, error) {
	var out []byte
	buf := make([]byte, 3) // small reads, to cross the buffer's edges
	for {
		n, err := b.readLength(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

func httpGet() *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://upstream/", nil)
	return r
}
