// Command clustertool does the small jobs of e2e/cluster/up that need crypto or networking,
// so the scripts depend on nothing but bash, coreutils and Go:
//
//	clustertool ports N                 print N distinct free TCP ports on 127.0.0.1, one a line
//	clustertool port-free PORT          exit 0 if 127.0.0.1:PORT can be bound, 1 if it is in use
//	clustertool certs DIR               write a CA, the API server's serving cert, client certs
//	                                    for the admin and kube-controller-manager, and the
//	                                    service-account signing key pair into DIR
//	clustertool probe URL [flags]       one HTTPS/HTTP GET; exit 0 if the answer is 200, else
//	                                    print the status and body (or error) to stderr, exit 1
//
// It uses only the Go standard library.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "ports":
		err = cmdPorts(os.Args[2:])
	case "port-free":
		err = cmdPortFree(os.Args[2:])
	case "certs":
		err = cmdCerts(os.Args[2:])
	case "probe":
		err = cmdProbe(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "clustertool %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: clustertool ports N | port-free PORT | certs DIR | probe URL [--ca F] [--cert F --key F] [--insecure] [--timeout D]")
	os.Exit(2)
}

// cmdPorts binds N listeners at once (so the ports are distinct), prints their ports and closes
// them. The ports are picked at random below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default), never inside it: the kernel
// gives ports of that range to outgoing connections as their local port, so a free ephemeral
// port picked here could be taken by any client's connection (one to another control plane of
// the same test run, say) before the component binds it ("bind: address already in use").
// Ports below the range are only ever taken by a listener that asks for them.
func cmdPorts(args []string) error {
	if len(args) != 1 {
		return errors.New("want exactly one argument N")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 || n > 32 {
		return fmt.Errorf("N must be a number from 1 to 32, got %q", args[0])
	}
	low, high := listenRange(ephemeralLow())
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for tries := 0; len(listeners) < n; tries++ {
		if tries == 1000 {
			return fmt.Errorf("found only %d free ports in 127.0.0.1:%d-%d after %d tries", len(listeners), low, high, tries)
		}
		port := low + mrand.IntN(high-low+1)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // in use (or just taken by another picker): try another one
		}
		listeners = append(listeners, l)
	}
	for _, l := range listeners {
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
	}
	return nil
}

// ephemeralLow is the first port of the kernel's ephemeral range, 32768 where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return low
}

// listenRange is where cmdPorts picks: from 10000 (above the well-known and most registered
// ports) to just below the ephemeral range; with an ephemeral range that starts too low to
// leave 1000 ports there, the 1000 ports above 10000 are used.
func listenRange(ephemeralLow int) (int, int) {
	const low = 10000
	if ephemeralLow-1-low < 1000 {
		return low, low + 999
	}
	return low, ephemeralLow - 1
}

func cmdPortFree(args []string) error {
	if len(args) != 1 {
		return errors.New("want exactly one argument PORT")
	}
	port, err := strconv.Atoi(args[0])
	if err != nil || port < 1 || port > 65535 {
		return fmt.Errorf("PORT must be a number from 1 to 65535, got %q", args[0])
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("127.0.0.1:%d is in use: %v", port, err)
	}
	return l.Close()
}

// cmdCerts writes everything the control plane needs for TLS and authentication:
//
//	ca.crt, ca.key                 a throw-away CA that signs all certificates below
//	apiserver.crt, apiserver.key   serving cert for 127.0.0.1, ::1, localhost and the in-cluster names
//	admin.crt, admin.key           client cert, user "vapcheck-admin" in group system:masters
//	kcm.crt, kcm.key               client cert for kube-controller-manager (also system:masters)
//	sa.key, sa.pub                 RSA key pair that signs and verifies service-account tokens
func cmdCerts(args []string) error {
	if len(args) != 1 {
		return errors.New("want exactly one argument DIR")
	}
	dir := args[0]
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	now := time.Now()
	notAfter := now.Add(10 * 365 * 24 * time.Hour)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "vapcheck-e2e-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writeCert(filepath.Join(dir, "ca.crt"), caDER); err != nil {
		return err
	}
	if err := writeECKey(filepath.Join(dir, "ca.key"), caKey); err != nil {
		return err
	}

	leaf := func(name string, tmpl *x509.Certificate) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl.SerialNumber = serial()
		tmpl.NotBefore = now.Add(-time.Hour)
		tmpl.NotAfter = notAfter
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		if err := writeCert(filepath.Join(dir, name+".crt"), der); err != nil {
			return err
		}
		return writeECKey(filepath.Join(dir, name+".key"), key)
	}
	if err := leaf("apiserver", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		// 10.0.0.1 is the first address of --service-cluster-ip-range, the "kubernetes" service.
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.0.0.1")},
	}); err != nil {
		return err
	}
	// The API server maps a client certificate's CN to the user name and O to its groups.
	if err := leaf("admin", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "vapcheck-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return err
	}
	if err := leaf("kcm", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:kube-controller-manager", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	saPriv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)})
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), saPriv, 0o600); err != nil {
		return err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}), 0o644)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		// crypto/rand does not fail on Linux; a fixed serial would still give valid certs.
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

func writeCert(path string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeECKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

func cmdProbe(args []string) error {
	if len(args) < 1 || strings.HasPrefix(args[0], "-") {
		return errors.New("want the URL first")
	}
	url := args[0]
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	ca := fs.String("ca", "", "PEM file with the CA that signed the server certificate")
	cert := fs.String("cert", "", "client certificate (PEM)")
	key := fs.String("key", "", "client key (PEM)")
	insecure := fs.Bool("insecure", false, "do not verify the server certificate")
	timeout := fs.Duration("timeout", 5*time.Second, "request timeout")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	tlsConfig := &tls.Config{InsecureSkipVerify: *insecure}
	if *ca != "" {
		pemBytes, err := os.ReadFile(*ca)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return fmt.Errorf("%s holds no PEM certificate", *ca)
		}
		tlsConfig.RootCAs = pool
	}
	if *cert != "" || *key != "" {
		pair, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			return err
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	client := &http.Client{
		Timeout:   *timeout,
		Transport: &http.Transport{TLSClientConfig: tlsConfig, Proxy: nil},
	}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
