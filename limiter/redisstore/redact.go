package redisstore

import (
	"errors"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RedactURL returns raw with its password replaced by "xxxxx", as
// url.URL.Redacted does, but for any string: a password url.Parse refuses
// ('#', '/', '?', a stray '%') is still covered whole, to the last '@'
// after "://". Safe for concurrent use.
func RedactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// ParseURL is redis.ParseURL with errors that never show the password
// (url.Parse's reasons quote the offending characters).
func ParseURL(raw string) (*redis.Options, error) {
	o, err := redis.ParseURL(raw)
	if err == nil {
		return o, nil
	}
	redacted := RedactURL(raw)
	if redacted == raw {
		return nil, err
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		// go-redis's own reasons (scheme, database, path) quote no password.
		return nil, err
	}
	if _, rerr := url.Parse(redacted); rerr != nil {
		return nil, rerr
	}
	return nil, &url.Error{Op: ue.Op, URL: redacted, Err: errors.New(
		"the password is not valid in a URL: percent-encode its '%', '#', '/', '?' and '@' (%25, %23, %2F, %3F, %40), or give it apart from the URL, as the password")}
}
