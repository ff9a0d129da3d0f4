package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Paths says how a request's path is read before its route is chosen, so that the class is the
// one of the path the upstream reads: percent-encoded unreserved bytes are decoded, dot segments
// resolved and repeated slashes merged (always), and the options below settle what upstreams
// disagree on. The zero value is the default. A Policy holds one; its methods are safe for
// concurrent use.
type Paths struct {
	// EscapedSlashes is what an encoded slash or backslash (%2F, %5C) in a path does: refused
	// (PathsReject, the default), decoded to '/' before matching and forwarding (PathsDecode), or
	// kept within its segment (PathsKeep), for an upstream that never decodes it.
	EscapedSlashes string
	// Case is PathsSensitive (the default) or PathsInsensitive: routes then match whatever the
	// case of the path. Matching only: the path goes on as the client wrote it.
	Case string
	// TrailingSlash is PathsIgnore (the default: a path ending in '/' matches what it matches
	// without, unless a pattern names it with its slash) or PathsStrict.
	TrailingSlash string
}

// The values of Paths' fields (server.paths in the configuration).
const (
	PathsReject      = "reject"
	PathsDecode      = "decode"
	PathsKeep        = "keep"
	PathsSensitive   = "sensitive"
	PathsInsensitive = "insensitive"
	PathsIgnore      = "ignore"
	PathsStrict      = "strict"
)

// Validate names the first field with a value Paths does not know, as a
// *limiter.FieldError.
func (ps Paths) Validate() error {
	switch ps.EscapedSlashes {
	case "", PathsReject, PathsDecode, PathsKeep:
	default:
		return &limiter.FieldError{Field: "escaped_slashes", Err: fmt.Errorf("%q: want reject, decode or keep", ps.EscapedSlashes)}
	}
	switch ps.Case {
	case "", PathsSensitive, PathsInsensitive:
	default:
		return &limiter.FieldError{Field: "case", Err: fmt.Errorf("%q: want sensitive or insensitive", ps.Case)}
	}
	switch ps.TrailingSlash {
	case "", PathsIgnore, PathsStrict:
	default:
		return &limiter.FieldError{Field: "trailing_slash", Err: fmt.Errorf("%q: want ignore or strict", ps.TrailingSlash)}
	}
	return nil
}

// WithDefaults is ps with its empty fields set to their defaults.
func (ps Paths) WithDefaults() Paths {
	if ps.EscapedSlashes == "" {
		ps.EscapedSlashes = PathsReject
	}
	if ps.Case == "" {
		ps.Case = PathsSensitive
	}
	if ps.TrailingSlash == "" {
		ps.TrailingSlash = PathsIgnore
	}
	return ps
}

// ErrEscapedSlash is a path refused for an encoded slash or backslash (Paths.EscapedSlashes reject).
var ErrEscapedSlash = errors.New("the path has an encoded slash or backslash (%2F, %5C), which upstreams read differently; server.paths.escaped_slashes rejects it")

// normalize sets u's path to the one the upstream reads (Paths), or fails with ErrEscapedSlash;
// u is left alone when its path is already so, which is the common case and allocates nothing.
func (ps Paths) normalize(u *url.URL) error {
	if !strings.HasPrefix(u.Path, "/") {
		return nil // "*" of OPTIONS, or no path: nothing to match
	}
	if isNormalURL(u) {
		return nil
	}
	escaped := u.EscapedPath() // allocates only for a path with escapes
	norm, err := ps.normalPath(escaped)
	if err != nil {
		return err
	}
	path, err := url.PathUnescape(norm)
	if err != nil {
		return fmt.Errorf("path %q: %w", escaped, err)
	}
	u.Path, u.RawPath = path, ""
	if path != norm {
		u.RawPath = norm
	}
	return nil
}

// request is r with its path normal (normalize): r itself when it is, else a shallow copy.
// ps is a pointer: a Paths copied per request is three strings for nothing.
func (ps *Paths) request(r *http.Request) (*http.Request, error) {
	if !strings.HasPrefix(r.URL.Path, "/") || isNormalURL(r.URL) {
		return r, nil
	}
	u := *r.URL
	if err := ps.normalize(&u); err != nil {
		return nil, err
	}
	r = r.WithContext(r.Context())
	r.URL = &u
	return r, nil
}

// pathByte classes the bytes of a decoded path: 0 for one EscapedPath writes as it is, pathEscaped
// for one it escapes (the escaped path then holds a '%'), pathSlash for '/'. Taken from net/url
// itself, so that isNormalURL and isNormal never disagree on what is escaped.
var pathByte = func() (t [256]uint8) {
	for c := range 256 {
		// After a slash: EscapedPath leaves the path "*" (of OPTIONS) alone, not a '*' in a path.
		if s := "/" + string([]byte{byte(c)}); (&url.URL{Path: s}).EscapedPath() != s {
			t[c] = pathEscaped
		}
	}
	t['/'] = pathSlash
	return t
}()

const (
	pathEscaped = 1 + iota
	pathSlash
)

// isNormalURL is isNormal(u.EscapedPath()). A usual request has no RawPath, and its escaped path
// is its path escaped: one pass over the path's bytes then answers, without escaping it first,
// which every request would pay for (about a third of the check's time).
func isNormalURL(u *url.URL) bool {
	if u.RawPath != "" || u.Path == "*" {
		return isNormal(u.EscapedPath())
	}
	p := u.Path
	for i := 0; i < len(p); i++ {
		switch pathByte[p[i]] {
		case 0:
			continue
		case pathEscaped:
			return false
		}
		rest := p[i+1:]
		if rest == "" {
			return true
		}
		switch rest[0] {
		case '/':
			return false
		case '.':
			if rest == "." || rest == ".." || strings.HasPrefix(rest, "./") || strings.HasPrefix(rest, "../") {
				return false
			}
		}
	}
	return true
}

// isNormal reports whether an escaped path is its own normal form: no escape, backslash, empty,
// "." or ".." segment. Every request asks: the searches below are the runtime's vectorised
// ones, which a loop over the bytes with a switch is twice as slow as on a usual path.
func isNormal(p string) bool {
	if strings.IndexByte(p, '%') >= 0 || strings.IndexByte(p, '\\') >= 0 || strings.Contains(p, "//") {
		return false
	}
	for rest := p; ; {
		i := strings.Index(rest, "/.")
		if i < 0 {
			return true
		}
		seg := rest[i+1:] // from the dot
		if seg == "." || seg == ".." || strings.HasPrefix(seg, "./") || strings.HasPrefix(seg, "../") {
			return false
		}
		rest = seg
	}
}

// normalPath is the escaped path p in normal form: unreserved bytes decoded (RFC 3986, 6.2.2.2),
// other escapes in upper case, encoded slashes as EscapedSlashes says, then dot segments removed
// (RFC 3986, 5.2.4) and empty segments dropped; a path ending in '/' (or in a dot segment) keeps
// one trailing slash.
func (ps Paths) normalPath(p string) (string, error) {
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '\\' {
			if err := ps.slash(&b, `\`); err != nil {
				return "", err
			}
			continue
		}
		if c != '%' || i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2]) {
			b.WriteByte(c)
			continue
		}
		v := unhex(p[i+1])<<4 | unhex(p[i+2])
		esc := "%" + strings.ToUpper(p[i+1:i+3])
		i += 2
		switch {
		case v == '/' || v == '\\':
			if err := ps.slash(&b, esc); err != nil {
				return "", err
			}
		case unreserved(v):
			b.WriteByte(v)
		default:
			b.WriteString(esc)
		}
	}
	return removeDotSegments(b.String()), nil
}

// slash writes an encoded slash or backslash (written as esc) as EscapedSlashes says.
func (ps Paths) slash(b *strings.Builder, esc string) error {
	switch ps.EscapedSlashes {
	case PathsDecode:
		b.WriteByte('/')
	case PathsKeep:
		if esc == `\` {
			esc = "%5C"
		}
		b.WriteString(esc)
	default:
		return ErrEscapedSlash
	}
	return nil
}

// removeDotSegments resolves "." and ".." and drops empty segments of a path starting with '/';
// ".." never climbs above the root.
func removeDotSegments(p string) string {
	segs := strings.Split(p[1:], "/")
	out := segs[:0]
	trailing := false
	for _, s := range segs {
		trailing = s == "" || s == "." || s == ".."
		switch s {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return "/"
	}
	norm := "/" + strings.Join(out, "/")
	if trailing {
		norm += "/"
	}
	return norm
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}

// unreserved reports whether c stands for itself in a URL path (RFC 3986, 2.3).
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// matchPattern is the pattern a route is registered under in the ServeMux: pattern itself, its
// path lowered when routes match whatever the case.
func (ps Paths) matchPattern(pattern string) string {
	if ps.Case != PathsInsensitive {
		return pattern
	}
	i := patternPathStart(pattern)
	var b strings.Builder
	b.WriteString(pattern[:i])
	// Wildcard names keep their case: they name, they do not match.
	for rest := pattern[i:]; rest != ""; {
		j := strings.IndexByte(rest, '{')
		k := strings.IndexByte(rest[max(j, 0):], '}')
		if j < 0 || k < 0 {
			b.WriteString(strings.ToLower(rest))
			break
		}
		b.WriteString(strings.ToLower(rest[:j]))
		b.WriteString(rest[j : j+k+1])
		rest = rest[j+k+1:]
	}
	return b.String()
}

// patternPathStart is the index of the path in a ServeMux pattern "[METHOD ][HOST]/PATH".
func patternPathStart(pattern string) int {
	start := 0
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		start = i + len(pattern[i:]) - len(strings.TrimLeft(pattern[i:], " \t"))
	}
	if j := strings.IndexByte(pattern[start:], '/'); j >= 0 {
		return start + j
	}
	return start
}

// slashDepth is, for a pattern that names a path ending in '/' ("/a/b/", "/a/{x}/", "/a/b/{$}"),
// the number of slashes of the paths it names so; 0 for any other.
func slashDepth(pattern string) int {
	path := strings.TrimSuffix(pattern[patternPathStart(pattern):], "{$}")
	if !strings.HasSuffix(path, "/") {
		return 0
	}
	return strings.Count(path, "/")
}

// matchURL is the path r is matched on when it is not r's own: lowered when routes match
// whatever the case, without its trailing slash when that slash is to be ignored (trimSlash).
func (ps *Paths) matchURL(u *url.URL, trimSlash bool) (url.URL, bool) {
	m := url.URL{Path: u.Path, RawPath: u.RawPath}
	changed := false
	if ps.Case == PathsInsensitive {
		m.Path, m.RawPath = strings.ToLower(m.Path), strings.ToLower(m.RawPath)
		changed = m.Path != u.Path || m.RawPath != u.RawPath
	}
	if trimSlash {
		m.Path, m.RawPath = strings.TrimSuffix(m.Path, "/"), strings.TrimSuffix(m.RawPath, "/")
		changed = true
	}
	return m, changed
}

// refusePath answers a request refused for its path (ErrEscapedSlash) on a way in that answers
// it itself: 400 with a bad_path body.
func refusePath(w http.ResponseWriter, err error) {
	writeJSON(w, "application/json", http.StatusBadRequest, RejectedBody{Error: "bad_path", Message: err.Error()})
}
