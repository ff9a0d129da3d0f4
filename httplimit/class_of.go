package httplimit

import "net/http"

// ClassOf is the name of the class r is decided in, matched as the
// middleware matches it (the default class when no route does). Safe for
// concurrent use.
func (p *Policy) ClassOf(r *http.Request) string { return p.match(r).class.name }
