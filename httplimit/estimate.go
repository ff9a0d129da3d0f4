package httplimit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Estimate is what a request of a class with CostFrom reserves at admission: what the request
// says (a member of its JSON body, such as max_tokens, or a header), at least Min and capped at
// Max, else Default. A member or header given more than once says its largest value. The koanf
// tags name its keys in a config file's classes.<name>.estimate, which is this struct as it is.
type Estimate struct {
	JSON    string `koanf:"json"`    // a gjson path into the request's JSON body
	Header  string `koanf:"header"`  // a request header
	Default int64  `koanf:"default"` // ≥ Min
	Min     int64  `koanf:"min"`     // the least a request reserves, whatever it says; 0: 1
	Max     int64  `koanf:"max"`     // caps what the request says; 0: the limit's quota
}

// Validate checks the estimate of a class that reads its cost from the response. A field out of
// range is a *limiter.FieldError naming it.
func (e Estimate) Validate() error {
	switch {
	case e.Min < 0:
		return &limiter.FieldError{Field: "min", Err: errors.New("must be >= 0")}
	case e.Default < max(e.Min, 1):
		return &limiter.FieldError{Field: "default", Err: fmt.Errorf("must be >= %d (min)", max(e.Min, 1))}
	case e.Max < 0:
		return &limiter.FieldError{Field: "max", Err: errors.New("must be >= 0")}
	case e.Max > 0 && e.Max < e.Default:
		return &limiter.FieldError{Field: "max", Err: errors.New("must be at least the default")}
	case e.JSON != "" && e.Header != "":
		return errors.New("set json or header, not both")
	}
	return nil
}

// of is r's estimate, capped at quota when Max is not set, and whether what r says was given more
// than once. Reading a JSON member reads at most MaxCostScan bytes of the body and puts them back
// in front of the rest, so the upstream gets the body unchanged.
func (e Estimate) of(r *http.Request, quota int64) (n int64, dup bool) {
	limit := e.Max
	if limit <= 0 || (quota > 0 && limit > quota) {
		limit = quota
	}
	var ok bool
	switch {
	case e.Header != "":
		var c costReader
		c.numbers(r.Header.Values(e.Header))
		n, ok, dup = c.cost, c.found, c.dup
	case e.JSON != "" && r.Body != nil && r.Body != http.NoBody:
		head, err := io.ReadAll(io.LimitReader(r.Body, MaxCostScan+1))
		r.Body = replayBody{io.MultiReader(bytes.NewReader(head), readerOnly{r.Body, err}), r.Body}
		cut := len(head) > MaxCostScan
		res, twice := jsonLargest(head[:min(len(head), MaxCostScan)], e.JSON)
		if res.Type == gjson.Number && res.Num == math.Trunc(res.Num) && res.Num < 1<<53 {
			n, ok = int64(res.Num), true
		}
		if cut {
			// The member may be named again past the bytes read, and upstreams read the last.
			n, ok = max(n, e.Default), true
		}
		dup = twice
	}
	if !ok || n < 1 {
		n = e.Default
	}
	n = max(n, e.Min)
	if limit > 0 && n > limit {
		n = limit
	}
	return n, dup
}

// replayBody is a request body whose first bytes were read ahead and are read again.
type replayBody struct {
	io.Reader
	io.Closer
}

// readerOnly reads r, or fails with the error that cut the read ahead short.
type readerOnly struct {
	r   io.Reader
	err error
}

func (o readerOnly) Read(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	return o.r.Read(p)
}
