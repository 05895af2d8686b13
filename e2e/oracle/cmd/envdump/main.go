// Command envdump prints, as JSON lines, every function declaration (name, overload ids,
// member/global, argument and result types) and every variable of the environment the
// Kubernetes 1.37.1 ValidatingAdmissionPolicy type checker builds (typechecking.go buildEnvSet,
// StoredExpressions), read from the live cel.Env. Output is sorted so it diffs cleanly.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/google/cel-go/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"vapcheck.dev/e2e/oracle/internal/oracle"
)

type overload struct {
	ID         string   `json:"id"`
	Member     bool     `json:"member"`
	TypeParams []string `json:"typeParams,omitempty"`
	Args       []string `json:"args"`
	Result     string   `json:"result"`
}

type function struct {
	Kind      string     `json:"kind"`
	Name      string     `json:"name"`
	Overloads []overload `json:"overloads"`
}

func main() {
	// object and params as dyn: the function set does not depend on the object schema.
	cc, err := oracle.ReplicaEnvSet(nil, true, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env, err := cc.Env(environment.StoredExpressions)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	libs := env.Libraries()
	sort.Strings(libs)
	_ = enc.Encode(map[string]any{"kind": "libraries", "names": libs})
	var vars []map[string]string
	for _, v := range env.Variables() {
		vars = append(vars, map[string]string{"name": v.Name(), "type": cel.FormatCELType(v.Type())})
	}
	sort.Slice(vars, func(i, j int) bool { return vars[i]["name"] < vars[j]["name"] })
	for _, v := range vars {
		_ = enc.Encode(map[string]any{"kind": "variable", "name": v["name"], "type": v["type"]})
	}
	var macros []string
	for _, m := range env.Macros() {
		macros = append(macros, m.MacroKey())
	}
	sort.Strings(macros)
	_ = enc.Encode(map[string]any{"kind": "macros", "keys": macros})
	fns := env.Functions()
	names := make([]string, 0, len(fns))
	for n := range fns {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := function{Kind: "function", Name: n}
		for _, o := range fns[n].OverloadDecls() {
			ol := overload{ID: o.ID(), Member: o.IsMemberFunction(), Result: cel.FormatCELType(o.ResultType()), Args: []string{}}
			for _, a := range o.ArgTypes() {
				ol.Args = append(ol.Args, cel.FormatCELType(a))
			}
			ol.TypeParams = append(ol.TypeParams, o.TypeParams()...)
			sort.Strings(ol.TypeParams)
			f.Overloads = append(f.Overloads, ol)
		}
		sort.Slice(f.Overloads, func(i, j int) bool { return f.Overloads[i].ID < f.Overloads[j].ID })
		_ = enc.Encode(f)
	}
}
