// Command checkbench times upstream's status computation per policy: the TypeChecker of
// k8s.io/apiserver v0.37.1 (pkg/admission/plugin/policy/validating/typechecking.go,
// TypeChecker.Check) with the schema resolver and REST mapper kube-controller-manager 1.37.1
// gives it (cmd/kube-controller-manager/app/validatingadmissionpolicystatus.go
// startValidatingAdmissionPolicyStatusController: the definitions resolver of the built-in
// kinds, a discovery REST mapper; here over the discovery documents of kubernetes v1.37.1,
// GA versions, as in oracle.NewDiscoveryMapper). The process is started once and kept warm:
// one untimed round over every policy first, then -rounds timed rounds.
//
// Input: a file with one ValidatingAdmissionPolicy per line (JSON). Output (stdout, one JSON
// object): the number of policies, rounds, total nanoseconds of the timed rounds, and each
// policy's status.typeChecking (type names normalised as by the celcheck policy env) so the
// caller can check both sides computed the same thing. Used by benches/upstream_per_policy.rs
// (e2e/bench/README.md).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/klog/v2"

	"vapcheck.dev/e2e/oracle/internal/oracle"
)

// defaultDiscovery is set by the build script (-ldflags -X), as for celcheck.
var defaultDiscovery = ""

type result struct {
	Policies     int                          `json:"policies"`
	Rounds       int                          `json:"rounds"`
	TotalNs      int64                        `json:"totalNs"`
	TypeChecking [][]oracle.ExpressionWarning `json:"typeChecking"`
}

func main() {
	rounds := flag.Int("rounds", 10, "timed rounds over every policy (after one untimed round)")
	disc := flag.String("discovery", defaultDiscovery, "folder of the kubernetes discovery documents")
	klog.InitFlags(nil)
	flag.Parse()
	if flag.NArg() != 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "usage: checkbench [-rounds N] [-discovery DIR] POLICIES.jsonl")
		os.Exit(2)
	}
	policies, err := readPolicies(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "checkbench:", err)
		os.Exit(1)
	}
	mapper, err := oracle.NewDiscoveryMapper(*disc, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "checkbench: discovery:", err)
		os.Exit(1)
	}
	// Uncached, as in kube-controller-manager (celcheck memoises it; the status controller
	// does not).
	tc := &validating.TypeChecker{SchemaResolver: oracle.NewSchemaResolver(), RestMapper: mapper}
	for _, p := range policies {
		tc.Check(p)
	}
	start := time.Now()
	for r := 0; r < *rounds; r++ {
		for _, p := range policies {
			tc.Check(p)
		}
	}
	out := result{Policies: len(policies), Rounds: *rounds, TotalNs: time.Since(start).Nanoseconds()}
	o := &oracle.Oracle{Resolver: oracle.NewSchemaResolver(), Mapper: mapper}
	for _, p := range policies {
		w := o.CheckPolicy(p).TypeChecking.ExpressionWarnings
		if w == nil {
			w = []oracle.ExpressionWarning{}
		}
		out.TypeChecking = append(out.TypeChecking, w)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "checkbench:", err)
		os.Exit(1)
	}
}

func readPolicies(path string) ([]*admissionv1.ValidatingAdmissionPolicy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []*admissionv1.ValidatingAdmissionPolicy
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		p := &admissionv1.ValidatingAdmissionPolicy{}
		if err := json.Unmarshal(sc.Bytes(), p); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, p)
	}
	return out, sc.Err()
}
