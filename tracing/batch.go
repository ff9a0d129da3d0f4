package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// BatchSpanName is the name of the span of one batch of decisions sent
// to Redis together.
const BatchSpanName = "rate_limit.redis_batch"

// AttrBatchSize is the number of decisions in a batch.
const AttrBatchSize = attribute.Key("rate_limit.batch_size")

// TraceBatch keeps the trace context of decisions that the Redis store
// sends together (it implements redisstore.BatchTracer). A batch of one
// decision runs its Redis calls as children of that decision's span. A
// batch of several starts a span of its own, linked to every decision's
// span, under which its Redis calls run; each decision's span gets a
// link back to it. Disabled, or when no decision is traced, it returns
// batch unchanged after one branch per decision. Safe for concurrent use.
func (p *Provider) TraceBatch(batch context.Context, decisions []context.Context) (context.Context, func()) {
	if !p.Enabled() {
		return batch, nil
	}
	traced := 0
	var only trace.SpanContext
	for _, d := range decisions {
		if sc := trace.SpanContextFromContext(d); sc.IsValid() {
			traced++
			only = sc
		}
	}
	switch {
	case traced == 0:
		return batch, nil
	case len(decisions) == 1:
		return trace.ContextWithSpanContext(batch, only), nil
	}
	links := make([]trace.Link, 0, traced)
	for _, d := range decisions {
		if sc := trace.SpanContextFromContext(d); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	ctx, span := p.tracer.Start(batch, BatchSpanName,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithLinks(links...),
		trace.WithAttributes(AttrBatchSize.Int(len(decisions))))
	back := trace.Link{SpanContext: span.SpanContext()}
	for _, d := range decisions {
		if s := trace.SpanFromContext(d); s.IsRecording() {
			s.AddLink(back)
		}
	}
	return ctx, func() { span.End() }
}
