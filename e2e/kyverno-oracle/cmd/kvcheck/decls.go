package main

// `kvcheck -decls`: the declarations Kyverno's ValidatingPolicy environment adds to the
// Kubernetes base environment it extends, one JSON object a line, for the cluster-wide
// (namespace "") and the namespaced ("default") variants. vapcheck's table of Kyverno's
// libraries (crates/core/src/engines/kyverno/decls.rs) is compared with this output.
//
// The environment is built as pkg/cel/policies/vpol/compiler/compiler.go,
// (*compilerImpl).createBaseVpolEnv builds it (unexported there, so its steps are repeated
// here from the same exported pieces), then read in environment.StoredExpressions mode, as
// compileForKubernetes reads it.

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"github.com/kyverno/kyverno/pkg/cel/compiler"
	"github.com/kyverno/kyverno/pkg/cel/libs"
	"github.com/kyverno/sdk/extensions/cel/libs/generator"
	"github.com/kyverno/sdk/extensions/cel/libs/globalcontext"
	"github.com/kyverno/sdk/extensions/cel/libs/gzip"
	"github.com/kyverno/sdk/extensions/cel/libs/hash"
	"github.com/kyverno/sdk/extensions/cel/libs/http"
	"github.com/kyverno/sdk/extensions/cel/libs/image"
	"github.com/kyverno/sdk/extensions/cel/libs/imagedata"
	kjson "github.com/kyverno/sdk/extensions/cel/libs/json"
	"github.com/kyverno/sdk/extensions/cel/libs/math"
	"github.com/kyverno/sdk/extensions/cel/libs/random"
	"github.com/kyverno/sdk/extensions/cel/libs/resource"
	ktime "github.com/kyverno/sdk/extensions/cel/libs/time"
	"github.com/kyverno/sdk/extensions/cel/libs/transform"
	"github.com/kyverno/sdk/extensions/cel/libs/user"
	"github.com/kyverno/sdk/extensions/cel/libs/x509"
	"github.com/kyverno/sdk/extensions/cel/libs/yaml"
	"k8s.io/apimachinery/pkg/util/version"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	k8slibrary "k8s.io/apiserver/pkg/cel/library"
	"k8s.io/apiserver/pkg/cel/mutation"
)

// compilerVariables are the variables the compiler declares itself (createBaseVpolEnv's
// baseOpts), which vapcheck declares in code (crates/core/src/engines/kyverno/env.rs), not in the table.
var compilerVariables = map[string]bool{
	compiler.NamespaceObjectKey: true,
	compiler.ObjectKey:          true,
	compiler.OldObjectKey:       true,
	compiler.RequestKey:         true,
	compiler.VariablesKey:       true,
}

type declRow struct {
	Variant  string   `json:"variant"`
	What     string   `json:"what"`
	Name     string   `json:"name"`
	ID       string   `json:"id,omitempty"`
	Member   bool     `json:"member,omitempty"`
	Args     []string `json:"args,omitempty"`
	Field    string   `json:"field,omitempty"`
	Result   string   `json:"result"`
	TypeArgs []string `json:"typeParams,omitempty"`
}

func vpolEnv(namespace string) (*cel.Env, error) {
	v := version.MajorMinor(1, 0)
	libsctx := libs.GetLibsCtx()
	baseOpts := compiler.DefaultEnvOptionsWithCompat()
	baseOpts = append(baseOpts,
		cel.Variable(compiler.NamespaceObjectKey, compiler.NamespaceType.CelType()),
		cel.Variable(compiler.ObjectKey, cel.DynType),
		cel.Variable(compiler.OldObjectKey, cel.DynType),
		cel.Variable(compiler.RequestKey, compiler.RequestType.CelType()),
		cel.Types(compiler.NamespaceType.CelType()),
		cel.Types(compiler.RequestType.CelType()),
		cel.Variable(compiler.VariablesKey, compiler.VariablesType),
	)
	base := environment.MustBaseEnvSet(v)
	env, err := base.Env(environment.StoredExpressions)
	if err != nil {
		return nil, err
	}
	variablesProvider := compiler.NewVariablesProvider(env.CELTypeProvider())
	declProvider := apiservercel.NewDeclTypeProvider(compiler.NamespaceType, compiler.RequestType)
	declOptions, err := declProvider.EnvOptions(variablesProvider)
	if err != nil {
		return nil, err
	}
	baseOpts = append(baseOpts, declOptions...)
	libEnvOpts := []cel.EnvOption{
		ext.NativeTypes(reflect.TypeFor[libs.Exception](), ext.ParseStructTags(true)),
		cel.Variable(compiler.ExceptionsKey, types.NewObjectType("libs.Exception")),
		globalcontext.Lib(globalcontext.Context{ContextInterface: compiler.ConfineGlobalContext(libsctx, namespace)}, globalcontext.Latest()),
		resource.Lib(resource.Context{ContextInterface: libsctx}, namespace, resource.Latest()),
		image.Lib(image.Latest()),
		imagedata.Lib(imagedata.Context{ContextInterface: libsctx}, imagedata.Latest(), nil),
		user.Lib(user.Latest()),
		hash.Lib(hash.Latest()),
		math.Lib(math.Latest()),
		kjson.Lib(&kjson.JsonImpl{}, kjson.Latest()),
		yaml.Lib(&yaml.YamlImpl{}, yaml.Latest()),
		random.Lib(random.Latest()),
		x509.Lib(x509.Latest()),
		ktime.Lib(ktime.Latest()),
		transform.Lib(transform.Latest()),
		gzip.Lib(gzip.Latest()),
		http.Lib(http.Context{ContextInterface: libs.NewMockAwareHTTPContext(compiler.NewLazyCELHTTPContext(namespace), libsctx.GetHTTPMocks())}, http.Latest()),
	}
	extended, err := base.Extend(
		environment.VersionedOptions{IntroducedVersion: v, EnvOptions: baseOpts},
		environment.VersionedOptions{IntroducedVersion: v, EnvOptions: libEnvOpts},
	)
	if err != nil {
		return nil, err
	}
	return extended.Env(environment.StoredExpressions)
}

// mpolEnv builds the environment of pkg/cel/policies/mpol/compiler/compiler.go,
// (*compilerImpl).newExtendedEnv (unexported there; its steps repeated from the same exported
// pieces, in its order), read in environment.StoredExpressions mode as Compile reads it.
func mpolEnv(namespace string) (*cel.Env, error) {
	v := version.MajorMinor(2, 0)
	libsctx := libs.GetLibsCtx()
	baseOpts := compiler.DefaultEnvOptionsWithCompat()
	baseOpts = append(baseOpts,
		cel.Variable(compiler.NamespaceObjectKey, compiler.NamespaceType.CelType()),
		cel.Variable(compiler.ObjectKey, cel.DynType),
		cel.Variable(compiler.OldObjectKey, cel.DynType),
		cel.Variable(compiler.RequestKey, compiler.RequestType.CelType()),
		cel.Types(compiler.NamespaceType.CelType()),
		cel.Types(compiler.RequestType.CelType()),
		cel.Types(types.NewObjectType("Object")),
		cel.Types(types.NewObjectType("JSONPatch")),
		cel.Variable(compiler.VariablesKey, compiler.VariablesType),
	)
	base := environment.MustBaseEnvSet(v)
	env, err := base.Env(environment.StoredExpressions)
	if err != nil {
		return nil, err
	}
	variablesProvider := compiler.NewVariablesProvider(env.CELTypeProvider())
	declProvider := apiservercel.NewDeclTypeProvider(compiler.NamespaceType, compiler.RequestType)
	declOptions, err := declProvider.EnvOptions(variablesProvider)
	if err != nil {
		return nil, err
	}
	baseOpts = append(baseOpts, declOptions...)
	baseOpts = append(baseOpts, common.ResolverEnvOption(&mutation.DynamicTypeResolver{}))
	libEnvOpts := []cel.EnvOption{
		ext.NativeTypes(reflect.TypeFor[libs.Exception](), ext.ParseStructTags(true)),
		cel.Variable(compiler.ExceptionsKey, types.NewObjectType("libs.Exception")),
		environment.UnversionedLib(k8slibrary.JSONPatch),
		globalcontext.Lib(globalcontext.Context{ContextInterface: compiler.ConfineGlobalContext(libsctx, namespace)}, globalcontext.Latest()),
		resource.Lib(resource.Context{ContextInterface: libsctx}, namespace, resource.Latest()),
		image.Lib(image.Latest()),
		imagedata.Lib(imagedata.Context{ContextInterface: libsctx}, imagedata.Latest(), nil),
		hash.Lib(hash.Latest()),
		math.Lib(math.Latest()),
		kjson.Lib(&kjson.JsonImpl{}, kjson.Latest()),
		yaml.Lib(&yaml.YamlImpl{}, yaml.Latest()),
		random.Lib(random.Latest()),
		x509.Lib(x509.Latest()),
		ktime.Lib(ktime.Latest()),
		transform.Lib(transform.Latest()),
		gzip.Lib(gzip.Latest()),
		user.Lib(user.Latest()),
		http.Lib(http.Context{ContextInterface: libs.NewMockAwareHTTPContext(compiler.NewLazyCELHTTPContext(namespace), libsctx.GetHTTPMocks())}, http.Latest()),
	}
	extended, err := base.Extend(
		environment.VersionedOptions{IntroducedVersion: v, EnvOptions: baseOpts},
		environment.VersionedOptions{IntroducedVersion: v, EnvOptions: libEnvOpts},
	)
	if err != nil {
		return nil, err
	}
	return extended.Env(environment.StoredExpressions)
}

// dpolEnv builds the environment of pkg/cel/policies/dpol/compiler/compiler.go,
// (*compilerImpl).createBaseDpolEnv (unexported there; its steps repeated from the same
// exported pieces, in its order): cel.NewEnv() extended, not Kubernetes' base environment set.
func dpolEnv(namespace string) (*cel.Env, error) {
	libsctx := libs.GetLibsCtx()
	baseOpts := compiler.DefaultEnvOptionsWithCompat()
	baseOpts = append(baseOpts,
		cel.Variable(compiler.NamespaceObjectKey, compiler.NamespaceType.CelType()),
		cel.Variable(compiler.ObjectKey, cel.DynType),
		cel.Variable(compiler.OldObjectKey, cel.DynType),
		cel.Variable(compiler.RequestKey, compiler.RequestType.CelType()),
		cel.Types(compiler.NamespaceType.CelType()),
		cel.Types(compiler.RequestType.CelType()),
		cel.Variable(compiler.ResourceKey, resource.ContextType),
		cel.Variable(compiler.VariablesKey, compiler.VariablesType),
		cel.Variable(compiler.ExceptionsKey, types.NewObjectType("compiler.Exception")),
	)
	env, err := cel.NewEnv()
	if err != nil {
		return nil, err
	}
	variablesProvider := compiler.NewVariablesProvider(env.CELTypeProvider())
	declProvider := apiservercel.NewDeclTypeProvider(compiler.NamespaceType, compiler.RequestType)
	declOptions, err := declProvider.EnvOptions(variablesProvider)
	if err != nil {
		return nil, err
	}
	baseOpts = append(baseOpts, declOptions...)
	baseOpts = append(baseOpts, common.ResolverEnvOption(&mutation.DynamicTypeResolver{}))
	v := compiler.KyvernoVersion
	libEnvOpts := []cel.EnvOption{
		globalcontext.Lib(globalcontext.Context{ContextInterface: compiler.ConfineGlobalContext(libsctx, namespace)}, v),
		image.Lib(v),
		imagedata.Lib(imagedata.Context{ContextInterface: libsctx}, v, nil),
		resource.Lib(resource.Context{ContextInterface: libsctx}, namespace, v),
		hash.Lib(v),
		math.Lib(v),
		kjson.Lib(&kjson.JsonImpl{}, v),
		yaml.Lib(&yaml.YamlImpl{}, v),
		random.Lib(v),
		x509.Lib(v),
		ktime.Lib(v),
		transform.Lib(v),
		gzip.Lib(v),
		http.Lib(http.Context{ContextInterface: libs.NewMockAwareHTTPContext(compiler.NewLazyCELHTTPContext(namespace), libsctx.GetHTTPMocks())}, v),
	}
	return env.Extend(append(baseOpts, libEnvOpts...)...)
}

// gpolEnv builds the environment of pkg/cel/policies/gpol/compiler/compiler.go,
// (*compilerImpl).createBaseGpolEnv (unexported there; its steps repeated from the same
// exported pieces, in its order): cel.NewEnv with DynamicResourceEnvOptionsWithCompat.
func gpolEnv(namespace string) (*cel.Env, error) {
	libsctx := libs.GetLibsCtx()
	baseOpts := compiler.DynamicResourceEnvOptionsWithCompat()
	baseOpts = append(baseOpts,
		cel.Variable(compiler.NamespaceObjectKey, compiler.NamespaceType.CelType()),
		cel.Variable(compiler.ObjectKey, cel.DynType),
		cel.Variable(compiler.OldObjectKey, cel.DynType),
		cel.Variable(compiler.RequestKey, compiler.RequestType.CelType()),
		cel.Types(compiler.NamespaceType.CelType()),
		cel.Types(compiler.RequestType.CelType()),
		cel.Variable(compiler.VariablesKey, compiler.VariablesType),
	)
	baseEnv, err := cel.NewEnv(baseOpts...)
	if err != nil {
		return nil, err
	}
	variablesProvider := compiler.NewVariablesProvider(baseEnv.CELTypeProvider())
	declProvider := apiservercel.NewDeclTypeProvider(compiler.NamespaceType, compiler.RequestType)
	declOptions, err := declProvider.EnvOptions(variablesProvider)
	if err != nil {
		return nil, err
	}
	baseOpts = append(baseOpts, declOptions...)
	libEnvOpts := []cel.EnvOption{
		ext.NativeTypes(reflect.TypeFor[libs.Exception](), ext.ParseStructTags(true)),
		cel.Variable(compiler.ExceptionsKey, types.NewObjectType("libs.Exception")),
		generator.Lib(generator.Context{ContextInterface: libsctx}, namespace, generator.Latest()),
		globalcontext.Lib(globalcontext.Context{ContextInterface: compiler.ConfineGlobalContext(libsctx, namespace)}, globalcontext.Latest()),
		resource.Lib(resource.Context{ContextInterface: libsctx}, namespace, resource.Latest()),
		image.Lib(image.Latest()),
		imagedata.Lib(imagedata.Context{ContextInterface: libsctx}, imagedata.Latest(), nil),
		hash.Lib(hash.Latest()),
		math.Lib(math.Latest()),
		kjson.Lib(&kjson.JsonImpl{}, kjson.Latest()),
		yaml.Lib(&yaml.YamlImpl{}, yaml.Latest()),
		random.Lib(random.Latest()),
		x509.Lib(x509.Latest()),
		ktime.Lib(ktime.Latest()),
		transform.Lib(transform.Latest()),
		gzip.Lib(gzip.Latest()),
		http.Lib(http.Context{ContextInterface: libs.NewMockAwareHTTPContext(compiler.NewLazyCELHTTPContext(namespace), libsctx.GetHTTPMocks())}, http.Latest()),
	}
	return cel.NewEnv(append(baseOpts, libEnvOpts...)...)
}

// dumpGpolDecls is `kvcheck -decls-gpol`: as dumpDpolDecls, for the GeneratingPolicy
// environment (gpolEnv; vapcheck: generating_base_env).
func dumpGpolDecls() {
	dumpRows(append(collectDecls(gpolEnv), collectRemoved(gpolEnv)...))
}

// dumpDpolDecls is `kvcheck -decls-dpol`: the rows of the DeletingPolicy environment
// (dpolEnv) as collectDecls reads them, plus what it lacks of Kubernetes' base environment
// (collectRemoved), which vapcheck builds without the libraries concerned
// (crates/core/src/engines/kyverno/env.rs, deleting_base_env).
func dumpDpolDecls() {
	dumpRows(append(collectDecls(dpolEnv), collectRemoved(dpolEnv)...))
}

// collectRemoved lists, for both variants of the environment envOf builds, the overloads and
// macros of Kubernetes' base environment (StoredExpressions) it does not declare.
func collectRemoved(envOf func(namespace string) (*cel.Env, error)) []declRow {
	base, err := environment.MustBaseEnvSet(version.MajorMinor(1, 0)).Env(environment.StoredExpressions)
	if err != nil {
		fail(err)
	}
	out := []declRow{}
	for _, variant := range []struct{ name, ns string }{{"cluster", ""}, {"namespaced", "default"}} {
		env, err := envOf(variant.ns)
		if err != nil {
			fail(err)
		}
		envFns := env.Functions()
		for name, fn := range base.Functions() {
			known := map[string]bool{}
			if e, ok := envFns[name]; ok {
				for _, o := range e.OverloadDecls() {
					known[o.ID()] = true
				}
			}
			for _, o := range fn.OverloadDecls() {
				if !known[o.ID()] {
					out = append(out, declRow{Variant: variant.name, What: "removed-overload", Name: name, ID: o.ID()})
				}
			}
		}
		envMacros := map[string]bool{}
		for _, m := range env.Macros() {
			envMacros[m.MacroKey()] = true
		}
		for _, m := range base.Macros() {
			if !envMacros[m.MacroKey()] {
				out = append(out, declRow{Variant: variant.name, What: "removed-macro", Name: m.MacroKey()})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Variant != b.Variant {
			return a.Variant < b.Variant
		}
		if a.What != b.What {
			return a.What < b.What
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.ID < b.ID
	})
	return out
}

// typeText writes t in the syntax of vapcheck's tables (cel-go's type syntax, opaque types
// marked `opaque:`).
func typeText(t *types.Type) string {
	params := func() string {
		var ps []string
		for _, p := range t.Parameters() {
			ps = append(ps, typeText(p))
		}
		return strings.Join(ps, ", ")
	}
	switch t.Kind() {
	case types.ListKind:
		return "list(" + params() + ")"
	case types.MapKind:
		return "map(" + params() + ")"
	case types.OpaqueKind:
		if t.TypeName() == "optional_type" {
			return "optional_type(" + params() + ")"
		}
		if len(t.Parameters()) > 0 {
			return "opaque:" + t.TypeName() + "(" + params() + ")"
		}
		return "opaque:" + t.TypeName()
	case types.TypeKind:
		if len(t.Parameters()) > 0 {
			return "type(" + params() + ")"
		}
		return "type"
	case types.AnyKind:
		return "any"
	case types.TypeParamKind:
		return t.TypeName()
	case types.TimestampKind:
		return "timestamp"
	case types.DurationKind:
		return "duration"
	}
	return t.String()
}

func dumpDecls() {
	dumpRows(collectDecls(vpolEnv))
}

// dumpMpolDecls is `kvcheck -decls-mpol`: the same rows for the MutatingPolicy environment
// (mpolEnv), which vapcheck builds as the ValidatingPolicy one plus the mutation types and
// jsonpatch.escapeKey (crates/core/src/engines/kyverno/env.rs, mutating_verdict_env).
func dumpMpolDecls() {
	dumpRows(collectDecls(mpolEnv))
}

func dumpRows(rows []declRow) {
	enc := json.NewEncoder(stdout)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			fail(err)
		}
	}
}

// collectDecls reads the declarations of both variants of the environment envOf builds.
func collectDecls(envOf func(namespace string) (*cel.Env, error)) []declRow {
	base, err := environment.MustBaseEnvSet(version.MajorMinor(1, 0)).Env(environment.StoredExpressions)
	if err != nil {
		fail(err)
	}
	out := []declRow{}
	for _, variant := range []struct{ name, ns string }{{"cluster", ""}, {"namespaced", "default"}} {
		env, err := envOf(variant.ns)
		if err != nil {
			fail(err)
		}
		baseVars := map[string]string{}
		for _, v := range base.Variables() {
			baseVars[v.Name()] = typeText(v.Type())
		}
		for _, v := range env.Variables() {
			if t, ok := baseVars[v.Name()]; ok && t == typeText(v.Type()) {
				continue
			}
			if compilerVariables[v.Name()] {
				continue
			}
			out = append(out, declRow{Variant: variant.name, What: "variable", Name: v.Name(), Result: typeText(v.Type())})
		}
		envVars := map[string]bool{}
		for _, v := range env.Variables() {
			envVars[v.Name()] = true
		}
		for _, v := range base.Variables() {
			if !envVars[v.Name()] {
				out = append(out, declRow{Variant: variant.name, What: "removed-variable", Name: v.Name(), Result: baseVars[v.Name()]})
			}
		}
		baseFns := base.Functions()
		for name, fn := range env.Functions() {
			known := map[string]bool{}
			if b, ok := baseFns[name]; ok {
				for _, o := range b.OverloadDecls() {
					known[o.ID()] = true
				}
			}
			for _, o := range fn.OverloadDecls() {
				if known[o.ID()] {
					continue
				}
				row := declRow{Variant: variant.name, What: "overload", Name: name, ID: o.ID(), Member: o.IsMemberFunction(), Result: typeText(o.ResultType()), Args: []string{}}
				for _, a := range o.ArgTypes() {
					row.Args = append(row.Args, typeText(a))
				}
				row.TypeArgs = o.TypeParams()
				out = append(out, row)
			}
		}
	}
	// The fields of the object types the rows name (ext.NativeTypes of the libraries).
	for _, variant := range []struct{ name, ns string }{{"cluster", ""}, {"namespaced", "default"}} {
		env, err := envOf(variant.ns)
		if err != nil {
			fail(err)
		}
		provider := env.CELTypeProvider()
		names := map[string]bool{}
		for _, r := range out {
			if r.Variant != variant.name {
				continue
			}
			for _, t := range append(append([]string{}, r.Args...), r.Result) {
				for _, part := range strings.FieldsFunc(t, func(c rune) bool { return c == '(' || c == ')' || c == ',' || c == ' ' }) {
					if strings.Contains(part, ".") && !strings.HasPrefix(part, "opaque:") {
						names[part] = true
					}
				}
			}
		}
		for name := range names {
			fields, ok := provider.FindStructFieldNames(name)
			if !ok {
				continue
			}
			for _, f := range fields {
				ft, ok := provider.FindStructFieldType(name, f)
				if !ok {
					continue
				}
				out = append(out, declRow{Variant: variant.name, What: "field", Name: name, Field: f, Result: typeText(ft.Type)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Variant != b.Variant {
			return a.Variant < b.Variant
		}
		if a.What != b.What {
			return a.What < b.What
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.ID < b.ID
	})
	return out
}
