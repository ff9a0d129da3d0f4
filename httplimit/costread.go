package httplimit

import (
	"bytes"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/rl-exporter/rl-exporter/decision"
)

// CostFrom says where the real cost of a class's request is read from its response: one of a
// header, a trailer or a gjson path into a JSON body. For a text/event-stream response the path
// is looked up in each data event and the last event that has it wins ("[DONE]" is skipped).
// The koanf tags name its keys in a config file's classes.<name>.cost_from.
type CostFrom struct {
	Header  string `koanf:"header"`
	Trailer string `koanf:"trailer"`
	JSON    string `koanf:"json"`
}

// IsZero reports a class charged its fixed cost at admission.
func (c CostFrom) IsZero() bool { return c.Header == "" && c.Trailer == "" && c.JSON == "" }

// MaxCostScan bounds what is kept of a response to find its cost in: the tail of a JSON body,
// one SSE line or event. The response itself streams through unbuffered.
const MaxCostScan = 64 << 10

// Reasons a response's cost is unknown (decision's, the reason label of the metrics).
const (
	CostMissing    = decision.CostMissing
	CostInvalid    = decision.CostInvalid
	CostTooLarge   = decision.CostTooLarge
	CostClientGone = decision.CostClientGone
)

// costReader watches a response go by for its cost; it is used by one request's goroutine.
type costReader struct {
	from     CostFrom
	sse      bool
	tail     []byte // JSON: the body's last MaxCostScan bytes (up to twice that before a trim)
	trimmed  bool
	line     []byte // SSE: the line being read
	event    []byte // SSE: the data of the event being read
	overlong bool   // SSE: the line or event being read is past MaxCostScan
	lost     bool   // SSE: an event was dropped for its size
	found    bool
	cost     int64
	reason   string
	dup      bool // the cost was given more than once: the largest is kept
}

// header inspects the final response header.
func (c *costReader) header(h http.Header) {
	c.sse = strings.HasPrefix(strings.ToLower(strings.TrimSpace(h.Get("Content-Type"))), "text/event-stream")
	if c.from.Header != "" {
		c.numbers(h.Values(c.from.Header))
	}
}

// numbers records a header or trailer given in field lines vv: a value given more than once,
// repeated or in a list, counts as its largest, for a reader that cannot be made to see less.
func (c *costReader) numbers(vv []string) {
	if len(vv) == 0 {
		c.number("", false)
		return
	}
	var best costReader
	n := 0
	for _, line := range vv {
		for v := range strings.SplitSeq(line, ",") {
			c.number(v, true)
			if n++; n == 1 || c.found && (!best.found || c.cost > best.cost) {
				best.found, best.cost, best.reason = c.found, c.cost, c.reason
			}
		}
	}
	c.found, c.cost, c.reason = best.found, best.cost, best.reason
	c.dup = c.dup || n > 1
}

// number records a header or trailer value.
func (c *costReader) number(v string, present bool) {
	if !present {
		c.reason = CostMissing
		return
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		c.reason = CostInvalid
		return
	}
	c.found, c.cost, c.reason = true, n, ""
}

// write sees body bytes after they were written to the client.
func (c *costReader) write(b []byte) {
	if c.from.JSON == "" {
		return
	}
	if !c.sse {
		c.tail = append(c.tail, b...)
		if len(c.tail) > 2*MaxCostScan {
			c.tail = c.tail[:copy(c.tail, c.tail[len(c.tail)-MaxCostScan:])]
			c.trimmed = true
		}
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			c.addLine(b)
			return
		}
		c.addLine(b[:i])
		c.endLine()
		b = b[i+1:]
	}
}

func (c *costReader) addLine(b []byte) {
	if c.overlong || len(c.line)+len(b) > MaxCostScan {
		c.overlong, c.line = true, c.line[:0]
		return
	}
	c.line = append(c.line, b...)
}

// endLine takes one SSE line: data lines join the event, a blank line ends it.
func (c *costReader) endLine() {
	line := bytes.TrimSuffix(c.line, []byte("\r"))
	c.line = c.line[:0]
	switch {
	case c.overlong:
		c.lost = true
		c.event = c.event[:0]
		if len(line) == 0 {
			c.overlong = false
		}
	case len(line) == 0:
		c.endEvent()
	case bytes.HasPrefix(line, []byte("data:")):
		v := bytes.TrimPrefix(line[5:], []byte(" "))
		if len(c.event)+len(v)+1 > MaxCostScan {
			c.overlong = true
			return
		}
		if len(c.event) > 0 {
			c.event = append(c.event, '\n')
		}
		c.event = append(c.event, v...)
	}
}

func (c *costReader) endEvent() {
	ev := c.event
	c.event = c.event[:0]
	if len(ev) == 0 || string(ev) == "[DONE]" {
		return
	}
	if r, dup := jsonLargest(ev, c.from.JSON); r.Exists() {
		c.result(r)
		c.dup = c.dup || dup
	}
}

func (c *costReader) result(r gjson.Result) {
	if r.Type != gjson.Number || r.Num < 0 || r.Num != math.Trunc(r.Num) || r.Num >= 1<<53 {
		c.found, c.reason = false, CostInvalid
		return
	}
	c.found, c.cost, c.reason = true, int64(r.Num), ""
}

// end is called once the response is over, with its header (trailers included) as the handler
// left it, and whether the client was lost on the way.
func (c *costReader) end(h http.Header, gone bool) {
	switch {
	case c.from.Trailer != "":
		k := http.CanonicalHeaderKey(c.from.Trailer)
		vv, ok := h[k]
		if !ok {
			vv, ok = h[http.TrailerPrefix+k]
		}
		if !ok {
			vv, ok = h[http.TrailerPrefix+c.from.Trailer]
		}
		if !ok {
			vv = nil
		}
		c.numbers(vv)
	case c.from.JSON != "" && c.sse:
		if !c.overlong {
			c.endLine() // a last line without its newline
		}
		c.endEvent()
		if !c.found && c.reason == "" {
			c.reason = CostMissing
			if c.lost {
				c.reason = CostTooLarge
			}
		}
	case c.from.JSON != "":
		c.jsonBody()
	}
	if gone && !c.found {
		c.reason = CostClientGone
	}
}

// jsonBody looks the path up in the whole body, or, when only its tail was kept, in the value
// after the last occurrence of the path's first member: a usage object ends a long answer.
func (c *costReader) jsonBody() {
	if !c.trimmed {
		if r, dup := jsonLargest(c.tail, c.from.JSON); r.Exists() {
			c.result(r)
			c.dup = dup
			return
		}
		c.reason = CostMissing
		return
	}
	c.reason = CostTooLarge
	first, rest, nested := strings.Cut(c.from.JSON, ".")
	i := bytes.LastIndex(c.tail, []byte(strconv.Quote(first)))
	if i < 0 {
		return
	}
	v := bytes.TrimLeft(c.tail[i+len(first)+2:], " \t\r\n")
	if len(v) == 0 || v[0] != ':' {
		return
	}
	r := gjson.ParseBytes(v[1:])
	dup := false
	if nested {
		r, dup = jsonLargest([]byte(r.Raw), rest)
	}
	if r.Exists() {
		c.result(r)
		c.dup = dup
	}
}

// costWriter is the response writer of a request whose cost is read from its response: it passes
// every write and flush straight through and shows the bytes to its costReader afterwards.
type costWriter struct {
	http.ResponseWriter
	read   costReader
	wrote  bool
	gone   bool
	failed bool // the upstream gave no answer: the reservation is cancelled
}

func (w *costWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 {
		w.wrote = true
		w.read.header(w.ResponseWriter.Header())
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *costWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.read.write(b[:n])
	if err != nil {
		w.gone = true
	}
	return n, err
}

// Flush passes a flush on at once, so that a stream reaches the client as the upstream sends it.
func (w *costWriter) Flush() {
	if err := http.NewResponseController(w.ResponseWriter).Flush(); err != nil {
		w.gone = true
	}
}

// Unwrap lets http.ResponseController reach the connection (hijack, deadlines).
func (w *costWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish ends the watch: the cost found, else the reason it is unknown.
func (w *costWriter) finish() (cost int64, reason string) {
	if !w.wrote {
		w.read.header(w.ResponseWriter.Header()) // net/http sends it as it is
	}
	w.read.end(w.ResponseWriter.Header(), w.gone)
	if w.read.found {
		return w.read.cost, ""
	}
	if w.read.reason == "" {
		return 0, CostMissing
	}
	return 0, w.read.reason
}
