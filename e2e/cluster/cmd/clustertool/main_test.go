package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func loadCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestCertsChainToTheCAWithTheRightNamesAndGroups(t *testing.T) {
	dir := t.TempDir()
	if err := cmdCerts([]string{dir}); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(loadCert(t, filepath.Join(dir, "ca.crt")))

	server := loadCert(t, filepath.Join(dir, "apiserver.crt"))
	for _, name := range []string{"127.0.0.1", "localhost", "::1"} {
		if _, err := server.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("serving cert for %s: %v", name, err)
		}
	}
	if _, err := server.Verify(x509.VerifyOptions{Roots: roots, DNSName: "example.com"}); err == nil {
		t.Error("serving cert must not be valid for example.com")
	}

	for file, user := range map[string]string{"admin.crt": "vapcheck-admin", "kcm.crt": "system:kube-controller-manager"} {
		cert := loadCert(t, filepath.Join(dir, file))
		opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if _, err := cert.Verify(opts); err != nil {
			t.Errorf("%s: %v", file, err)
		}
		if cert.Subject.CommonName != user || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:masters" {
			t.Errorf("%s: subject %v", file, cert.Subject)
		}
		if _, err := tls.LoadX509KeyPair(filepath.Join(dir, file), filepath.Join(dir, file[:len(file)-4]+".key")); err != nil {
			t.Errorf("%s: key pair: %v", file, err)
		}
	}
	for _, file := range []string{"sa.key", "sa.pub"} {
		if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
			t.Error(err)
		}
	}
}

func TestPortsAreDistinctAndPortFreeSeesAListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	if err := cmdPortFree([]string{busy}); err == nil {
		t.Errorf("port %s is in use but port-free said it is free", busy)
	}
	if err := cmdPorts([]string{"0"}); err == nil {
		t.Error("ports 0 must be rejected")
	}
}

func TestPortsAreBelowTheEphemeralRange(t *testing.T) {
	if low, high := listenRange(32768); low != 10000 || high != 32767 {
		t.Errorf("listenRange(32768) = %d, %d; want 10000, 32767", low, high)
	}
	if low, high := listenRange(10500); low != 10000 || high != 10999 {
		t.Errorf("listenRange(10500) = %d, %d; want 10000, 10999", low, high)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	err = cmdPorts([]string{"8"})
	os.Stdout = stdout
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(r)
	lines := strings.Fields(string(out))
	if len(lines) != 8 {
		t.Fatalf("ports 8 printed %d ports: %q", len(lines), out)
	}
	low, high := listenRange(ephemeralLow())
	seen := map[string]bool{}
	for _, p := range lines {
		n, err := strconv.Atoi(p)
		if err != nil || n < low || n > high {
			t.Errorf("port %q is outside %d-%d", p, low, high)
		}
		if seen[p] {
			t.Errorf("port %s printed twice", p)
		}
		seen[p] = true
	}
}

func TestProbeWantsStatus200(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer ok.Close()
	if err := cmdProbe([]string{ok.URL}); err != nil {
		t.Errorf("200: %v", err)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "[-]etcd failed", http.StatusInternalServerError)
	}))
	defer bad.Close()
	err := cmdProbe([]string{bad.URL})
	if err == nil || !strings.Contains(err.Error(), "HTTP 500") || !strings.Contains(err.Error(), "etcd failed") {
		t.Errorf("500: %v", err)
	}
}
