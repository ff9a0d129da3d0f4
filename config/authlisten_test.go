package config

import (
	"strings"
	"testing"
)

func TestAuthListenIsAnAddressOfItsOwn(t *testing.T) {
	c, err := Parse("rl.yaml", []byte("server: {listen: \"127.0.0.1:8480\", auth_listen: \"127.0.0.1:8482\"}\n"))
	if err != nil || c.Server.AuthListen != "127.0.0.1:8482" {
		t.Fatalf("auth_listen: %v, %q", err, c.Server.AuthListen)
	}
	for yaml, want := range map[string]string{
		"server: {listen: \"127.0.0.1:8480\", auth_listen: \"127.0.0.1:8480\"}\n": `server.auth_listen: "127.0.0.1:8480" is already server.listen`,
		"server: {listen: \"127.0.0.1:8480\", auth_listen: \"nowhere\"}\n":        `server.auth_listen: "nowhere" is not host:port`,
	} {
		if _, err := Parse("rl.yaml", []byte(yaml)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", strings.TrimSpace(yaml), err, want)
		}
	}
}
