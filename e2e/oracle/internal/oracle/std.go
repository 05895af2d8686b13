package oracle

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
)

// Decl declares one variable of a plain cel-go environment.
type Decl struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// StdOptions switches the language options of the plain environment. Nil means "as Kubernetes
// sets it" (on). Ext lists cel-go extension libraries to add, as `name` or `name:version`
// (strings, sets, lists, twovar, math, encoders, bindings, regex, protos).
type StdOptions struct {
	HomogeneousAggregateLiterals *bool    `json:"homogeneousAggregateLiterals,omitempty"`
	CrossTypeNumericComparisons  *bool    `json:"crossTypeNumericComparisons,omitempty"`
	OptionalTypes                *bool    `json:"optionalTypes,omitempty"`
	DefaultUTCTimeZone           *bool    `json:"defaultUTCTimeZone,omitempty"`
	Validators                   bool     `json:"validators,omitempty"`
	Ext                          []string `json:"ext,omitempty"`
	Container                    string   `json:"container,omitempty"`
}

func on(b *bool) bool { return b == nil || *b }

// StdEnv builds a plain cel-go environment with the given declarations and options.
func StdEnv(decls []Decl, o StdOptions) (*cel.Env, error) {
	var opts []cel.EnvOption
	if on(o.HomogeneousAggregateLiterals) {
		opts = append(opts, cel.HomogeneousAggregateLiterals())
	}
	if on(o.CrossTypeNumericComparisons) {
		opts = append(opts, cel.CrossTypeNumericComparisons(true))
	}
	if on(o.OptionalTypes) {
		opts = append(opts, cel.OptionalTypes())
	}
	if on(o.DefaultUTCTimeZone) {
		opts = append(opts, cel.DefaultUTCTimeZone(true))
	}
	if o.Validators {
		// The four validators Kubernetes' base environment adds from 1.29 on
		// (k8s.io/apiserver pkg/cel/environment/base.go).
		opts = append(opts, cel.ASTValidators(
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
			cel.ValidateRegexLiterals(),
			cel.ValidateHomogeneousAggregateLiterals(),
		))
	}
	if o.Container != "" {
		opts = append(opts, cel.Container(o.Container))
	}
	for _, e := range o.Ext {
		opt, err := extOption(e)
		if err != nil {
			return nil, err
		}
		opts = append(opts, opt)
	}
	for _, d := range decls {
		t, err := ParseType(d.Type)
		if err != nil {
			return nil, fmt.Errorf("decl %q: %w", d.Name, err)
		}
		opts = append(opts, cel.Variable(d.Name, t))
	}
	return cel.NewEnv(opts...)
}

func extOption(spec string) (cel.EnvOption, error) {
	name, ver, hasVer := strings.Cut(spec, ":")
	var v uint32
	if hasVer {
		n, err := strconv.ParseUint(ver, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("ext %q: bad version", spec)
		}
		v = uint32(n)
	}
	switch name {
	case "strings":
		if hasVer {
			return ext.Strings(ext.StringsVersion(v)), nil
		}
		return ext.Strings(), nil
	case "sets":
		if hasVer {
			return ext.Sets(ext.SetsVersion(v)), nil
		}
		return ext.Sets(), nil
	case "lists":
		if hasVer {
			return ext.Lists(ext.ListsVersion(v)), nil
		}
		return ext.Lists(), nil
	case "twovar":
		if hasVer {
			return ext.TwoVarComprehensions(ext.TwoVarComprehensionsVersion(v)), nil
		}
		return ext.TwoVarComprehensions(), nil
	case "math":
		if hasVer {
			return ext.Math(ext.MathVersion(v)), nil
		}
		return ext.Math(), nil
	case "encoders":
		if hasVer {
			return ext.Encoders(ext.EncodersVersion(v)), nil
		}
		return ext.Encoders(), nil
	case "bindings":
		if hasVer {
			return ext.Bindings(ext.BindingsVersion(v)), nil
		}
		return ext.Bindings(), nil
	case "regex":
		if hasVer {
			return ext.Regex(ext.RegexVersion(v)), nil
		}
		return ext.Regex(), nil
	case "protos":
		if hasVer {
			return ext.Protos(ext.ProtosVersion(v)), nil
		}
		return ext.Protos(), nil
	}
	return nil, fmt.Errorf("unknown ext library %q", spec)
}

// StdResult is the answer for one plain-environment expression.
type StdResult struct {
	Issues string `json:"issues"`
	Type   string `json:"type"`
}

// CheckStd compiles expr in env (parse + check + validators, i.e. cel.Env.Compile).
func CheckStd(env *cel.Env, expr string) StdResult {
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return StdResult{Issues: iss.String()}
	}
	if ast == nil {
		return StdResult{}
	}
	return StdResult{Type: cel.FormatCELType(ast.OutputType())}
}
