package collector

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// selfSigned writes a certificate for 127.0.0.1 and its key into dir.
func selfSigned(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "rl-exporter test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "cert.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	write(t, filepath.Join(dir, "key.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})))
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// serve runs Serve on a free loopback port and stops it when the test ends.
func serve(t *testing.T, h http.Handler, webConfig string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan error, 1)
	go func() { done <- Serve(l, srv, webConfig, nil) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return l.Addr().String()
}

func TestServeWithTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	pool := selfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "web.yml")
	write(t, cfgPath, "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\nbasic_auth_users:\n  prometheus: "+string(hash)+"\n")

	c := newTestCollector(t, Config{Endpoints: []string{"/v1/search"}})
	mux := http.NewServeMux()
	mux.Handle("/metrics", c.Handler())
	addr := serve(t, mux, cfgPath)

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	cases := []struct {
		name       string
		user, pass string
		code       int
	}{
		{"no credentials are refused", "", "", http.StatusUnauthorized},
		{"a wrong password is refused", "prometheus", "guess", http.StatusUnauthorized},
		{"the configured user scrapes", "prometheus", "s3cret", http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
			if tc.user != "" {
				req.SetBasicAuth(tc.user, tc.pass)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.code)
			}
			if tc.code == http.StatusOK && !strings.Contains(string(body), "rate_limit_requests_total") {
				t.Errorf("body lacks the metrics:\n%.300s", body)
			}
		})
	}
	// Plain HTTP on the TLS listener gets nothing useful.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP was served metrics: %.200s", body)
		}
	}
}

func TestServeWithoutWebConfigIsPlainHTTP(t *testing.T) {
	c := newTestCollector(t, Config{})
	addr := serve(t, c.Handler(), "")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestBadWebConfigIsRefusedNamingTheFile(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, content, want string
	}{
		{"an unknown field", "tls_server_config:\n  cert_fil: cert.pem\n", "cert_fil"},
		{"a missing certificate", "tls_server_config:\n  cert_file: nope.pem\n  key_file: nope-key.pem\n", "nope"},
		{"a password that is not a bcrypt hash", "basic_auth_users:\n  prometheus: plaintext\n", "bcrypt"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "web"+string(rune('a'+i))+".yml")
			write(t, path, tc.content)
			err := ValidateWebConfig(path)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ValidateWebConfig = %v, want an error naming %s and %q", err, path, tc.want)
			}
			l, lerr := net.Listen("tcp", "127.0.0.1:0")
			if lerr != nil {
				t.Fatal(lerr)
			}
			defer l.Close()
			if err := Serve(l, &http.Server{}, path, nil); err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("Serve = %v, want the same error", err)
			}
		})
	}
	if err := ValidateWebConfig(filepath.Join(dir, "missing.yml")); err == nil || !strings.Contains(err.Error(), "missing.yml") {
		t.Errorf("a missing file: %v", err)
	}
}
