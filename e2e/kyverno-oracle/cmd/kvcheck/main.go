// Command kvcheck is the Kyverno oracle of vapcheck: for every policies.kyverno.io document in
// the files it is given, it prints (one JSON object a line) what Kyverno's policy validation
// webhook answers when the object is created: accepted or not, and each error it gives.
//
// Upstream (github.com/kyverno/kyverno, pinned in go.mod):
//   - pkg/webhooks/policy/handlers.go, (*policyHandlers).Validate: the verdict. The object is
//     decoded by pkg/utils/admission/policy.go, UnmarshalPolicy, into the v1beta1 type of its kind
//     whatever its apiVersion (v1alpha1, v1beta1 and v1 share one schema), then validated by the
//     package of its kind: pkg/cel/policies/vpol.Validate (ValidatingPolicy and
//     NamespacedValidatingPolicy: pkg/cel/policies/vpol/compiler, (*compilerImpl).Compile),
//     mpol.Validate, gpol.Validate and dpol.Validate. ImageValidatingPolicies are validated by
//     pkg/image/verification/evaluator.Validate, which needs the cluster's Secrets and brings in
//     the image verifiers; kvcheck reports them as not checked (`checked: false`).
//   - A namespaced kind's object gets the request's namespace before admission
//     (k8s.io/apiserver/pkg/registry/rest.EnsureObjectNamespaceMatchesRequestNamespace); kvcheck
//     gives one without metadata.namespace the namespace `default`, as `kubectl create` would.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kyverno/kyverno/pkg/cel/policies/dpol"
	"github.com/kyverno/kyverno/pkg/cel/policies/gpol"
	"github.com/kyverno/kyverno/pkg/cel/policies/mpol"
	"github.com/kyverno/kyverno/pkg/cel/policies/vpol"
	admissionutils "github.com/kyverno/kyverno/pkg/utils/admission"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/yaml"
)

type result struct {
	File       string   `json:"file"`
	Document   int      `json:"document"`
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Name       string   `json:"name"`
	Namespace  string   `json:"namespace,omitempty"`
	Checked    bool     `json:"checked"`
	Accepted   bool     `json:"accepted"`
	Errors     []string `json:"errors"`
}

var stdout = bufio.NewWriter(os.Stdout)

func main() {
	defer stdout.Flush()
	if len(os.Args) == 2 && os.Args[1] == "-decls" {
		dumpDecls()
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "-decls-mpol" {
		dumpMpolDecls()
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "-decls-dpol" {
		dumpDpolDecls()
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "-decls-gpol" {
		dumpGpolDecls()
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "-decls-rust" {
		dumpRust()
		return
	}
	var files []string
	for _, arg := range os.Args[1:] {
		info, err := os.Stat(arg)
		if err != nil {
			fail(err)
		}
		if !info.IsDir() {
			files = append(files, arg)
			continue
		}
		err = filepath.Walk(arg, func(p string, i os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if !i.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			fail(err)
		}
	}
	sort.Strings(files)
	enc := json.NewEncoder(stdout)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			fail(err)
		}
		for i, doc := range splitDocuments(data) {
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil || obj == nil {
				continue
			}
			apiVersion, _ := obj["apiVersion"].(string)
			kind, _ := obj["kind"].(string)
			if !strings.HasPrefix(apiVersion, "policies.kyverno.io/") {
				continue
			}
			if err := enc.Encode(check(f, i+1, apiVersion, kind, obj)); err != nil {
				fail(err)
			}
		}
	}
}

func check(file string, document int, apiVersion, kind string, obj map[string]any) result {
	r := result{File: file, Document: document, APIVersion: apiVersion, Kind: kind, Errors: []string{}}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	r.Name, _ = meta["name"].(string)
	if strings.HasPrefix(kind, "Namespaced") {
		if ns, _ := meta["namespace"].(string); ns == "" {
			meta["namespace"] = "default"
		}
		r.Namespace, _ = meta["namespace"].(string)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		fail(err)
	}
	policy, err := admissionutils.UnmarshalPolicy(kind, raw)
	if err != nil {
		r.Checked = true
		r.Errors = append(r.Errors, err.Error())
		return r
	}
	var verr error
	switch {
	case policy.AsValidatingPolicyLike() != nil:
		_, verr = vpol.Validate(policy.AsValidatingPolicyLike())
	case policy.AsImageValidatingPolicyLike() != nil:
		return r
	case policy.AsMutatingPolicyLike() != nil:
		_, verr = mpol.Validate(policy.AsMutatingPolicyLike())
	case policy.AsGeneratingPolicyLike() != nil:
		_, verr = gpol.Validate(policy.AsGeneratingPolicyLike())
	case policy.AsDeletingPolicy() != nil:
		_, verr = dpol.Validate(policy.AsDeletingPolicy())
	default:
		r.Checked = true
		r.Errors = append(r.Errors, "failed to convert policy")
		return r
	}
	r.Checked = true
	if verr == nil {
		r.Accepted = true
		return r
	}
	var agg utilerrors.Aggregate
	if errors.As(verr, &agg) {
		for _, e := range agg.Errors() {
			r.Errors = append(r.Errors, e.Error())
		}
	} else {
		r.Errors = append(r.Errors, verr.Error())
	}
	return r
}

// splitDocuments splits a YAML stream at its `---` lines.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if t := bytes.TrimRight(line, " \t\r\n"); bytes.Equal(t, []byte("---")) || bytes.HasPrefix(t, []byte("--- ")) {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
			cur.Reset()
			continue
		}
		cur.Write(line)
	}
	return append(docs, cur.Bytes())
}

func fail(err error) {
	stdout.Flush()
	fmt.Fprintln(os.Stderr, "kvcheck:", err)
	os.Exit(2)
}
