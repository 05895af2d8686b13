package main

// `kvcheck -decls-rust`: the declarations of `kvcheck -decls` written as vapcheck's Rust table
// (crates/core/src/engines/kyverno/decls.rs), each row under the library that declares it: the library is
// found by building the base environment with that library's option alone.

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"github.com/kyverno/kyverno/pkg/cel/compiler"
	"github.com/kyverno/kyverno/pkg/cel/libs"
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
	"k8s.io/apiserver/pkg/cel/environment"
)

type library struct {
	source string
	opts   func(namespace string) []cel.EnvOption
}

func libraries() []library {
	libsctx := libs.GetLibsCtx()
	sdk := "github.com/kyverno/sdk extensions/cel/libs/"
	one := func(o cel.EnvOption) func(string) []cel.EnvOption {
		return func(string) []cel.EnvOption { return []cel.EnvOption{o} }
	}
	return []library{
		{"pkg/cel/compiler/env.go DefaultEnvOptionsWithCompat (cel-go extensions, the orValue compatibility function)", func(string) []cel.EnvOption { return compiler.DefaultEnvOptionsWithCompat() }},
		{"pkg/cel/policies/vpol/compiler/compiler.go createBaseVpolEnv (variables)", func(string) []cel.EnvOption {
			return []cel.EnvOption{
				ext.NativeTypes(reflect.TypeFor[libs.Exception](), ext.ParseStructTags(true)),
				cel.Variable(compiler.ExceptionsKey, types.NewObjectType("libs.Exception")),
			}
		}},
		{sdk + "globalcontext/lib.go", func(ns string) []cel.EnvOption {
			return []cel.EnvOption{globalcontext.Lib(globalcontext.Context{ContextInterface: compiler.ConfineGlobalContext(libsctx, ns)}, globalcontext.Latest())}
		}},
		{sdk + "resource/lib.go", func(ns string) []cel.EnvOption {
			return []cel.EnvOption{resource.Lib(resource.Context{ContextInterface: libsctx}, ns, resource.Latest())}
		}},
		{sdk + "image/lib.go", one(image.Lib(image.Latest()))},
		{sdk + "imagedata/lib.go", one(imagedata.Lib(imagedata.Context{ContextInterface: libsctx}, imagedata.Latest(), nil))},
		{sdk + "user/lib.go", one(user.Lib(user.Latest()))},
		{sdk + "hash/lib.go", one(hash.Lib(hash.Latest()))},
		{sdk + "math/lib.go", one(math.Lib(math.Latest()))},
		{sdk + "json/lib.go", one(kjson.Lib(&kjson.JsonImpl{}, kjson.Latest()))},
		{sdk + "yaml/lib.go", one(yaml.Lib(&yaml.YamlImpl{}, yaml.Latest()))},
		{sdk + "random/lib.go", one(random.Lib(random.Latest()))},
		{sdk + "x509/lib.go", one(x509.Lib(x509.Latest()))},
		{sdk + "time/lib.go", one(ktime.Lib(ktime.Latest()))},
		{sdk + "transform/lib.go", one(transform.Lib(transform.Latest()))},
		{sdk + "gzip/lib.go", one(gzip.Lib(gzip.Latest()))},
		{sdk + "http/lib.go", func(ns string) []cel.EnvOption {
			return []cel.EnvOption{http.Lib(http.Context{ContextInterface: libs.NewMockAwareHTTPContext(compiler.NewLazyCELHTTPContext(ns), libsctx.GetHTTPMocks())}, http.Latest())}
		}},
	}
}

// declared returns the variables and overload ids the base environment extended with opts
// declares.
func declared(opts []cel.EnvOption) (map[string]bool, map[string]bool) {
	v := version.MajorMinor(1, 0)
	set, err := environment.MustBaseEnvSet(v).Extend(environment.VersionedOptions{IntroducedVersion: v, EnvOptions: opts})
	if err != nil {
		fail(err)
	}
	env, err := set.Env(environment.StoredExpressions)
	if err != nil {
		fail(err)
	}
	vars, ids := map[string]bool{}, map[string]bool{}
	for _, d := range env.Variables() {
		vars[d.Name()] = true
	}
	for _, f := range env.Functions() {
		for _, o := range f.OverloadDecls() {
			ids[o.ID()] = true
		}
	}
	return vars, ids
}

func rustString(s string) string { return fmt.Sprintf("%q", s) }

func dumpRust() {
	rows := collectDecls(vpolEnv)
	// The library of each row, by variant: the first library whose environment alone
	// declares it.
	type key struct{ what, name, id string }
	owner := map[string]map[key]string{}
	for _, variant := range []struct{ name, ns string }{{"cluster", ""}, {"namespaced", "default"}} {
		owner[variant.name] = map[key]string{}
		for _, l := range libraries() {
			vars, ids := declared(l.opts(variant.ns))
			for _, r := range rows {
				if r.Variant != variant.name {
					continue
				}
				k := key{r.What, r.Name, r.ID}
				if _, ok := owner[variant.name][k]; ok {
					continue
				}
				if (r.What == "variable" && vars[r.Name]) || (r.What == "overload" && ids[r.ID]) {
					owner[variant.name][k] = l.source
				}
			}
		}
	}
	// Rows identical in both variants are written once, as Both.
	type merged struct {
		row     declRow
		variant string
		source  string
	}
	seen := map[string]*merged{}
	var order []string
	for _, r := range rows {
		src := owner[r.Variant][key{r.What, r.Name, r.ID}]
		if r.What == "field" {
			src = "the object types of the rows above (ext.NativeTypes with ParseStructTags)"
		}
		if src == "" {
			src = "(no single library: declared by the environment as a whole)"
		}
		k := fmt.Sprintf("%s|%s|%s|%s|%v|%v|%s|%s", r.What, r.Name, r.Field, r.ID, r.Member, r.Args, r.Result, src)
		if m, ok := seen[k]; ok {
			m.variant = "Both"
			continue
		}
		v := "Cluster"
		if r.Variant == "namespaced" {
			v = "Namespaced"
		}
		seen[k] = &merged{row: r, variant: v, source: src}
		order = append(order, k)
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := seen[order[i]], seen[order[j]]
		if a.source != b.source {
			return a.source < b.source
		}
		if a.row.Name != b.row.Name {
			return a.row.Name < b.row.Name
		}
		if a.row.Field != b.row.Field {
			return a.row.Field < b.row.Field
		}
		return a.row.ID < b.row.ID
	})
	w := stdout
	fmt.Fprint(w, strings.ReplaceAll(`//! Kyverno's CEL declarations beyond the Kubernetes base environment, as data: generated by
//! ~e2e/kyverno-oracle/bin/kvcheck -decls-rust~ (then rustfmt) from Kyverno v1.19.1's own environment
//! (pkg/cel/policies/vpol/compiler/compiler.go ~createBaseVpolEnv~), each row under the file
//! of the library that declares it; ~cargo test --test it kyverno_oracle~ compares the table
//! with the environment (~kvcheck -decls~). Types are written in cel-go's syntax, ~opaque:~
//! before an opaque type's name and ~any~ for ~google.protobuf.Any~
//! ([~super::env::table_type~]).

/// Which environment a row is in: a cluster-wide policy's, a namespaced policy's, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Both environments.
    Both,
    /// A ValidatingPolicy's.
    Cluster,
    /// A NamespacedValidatingPolicy's.
    Namespaced,
}

impl Variant {
    /// Whether a row of this variant is in the environment ~v~ ([~Variant::Cluster~] or
    /// [~Variant::Namespaced~]).
    pub fn holds(self, v: Variant) -> bool {
        self == Variant::Both || self == v
    }
}

/// A variable Kyverno declares.
#[derive(Clone, Copy, Debug)]
pub struct VariableRow {
    /// The environment.
    pub variant: Variant,
    /// The name.
    pub name: &'static str,
    /// The type.
    pub ty: &'static str,
}

/// A field of an object type Kyverno declares.
#[derive(Clone, Copy, Debug)]
pub struct FieldRow {
    /// The environment.
    pub variant: Variant,
    /// The object type.
    pub object: &'static str,
    /// The field.
    pub field: &'static str,
    /// The field's type.
    pub ty: &'static str,
}

/// An overload Kyverno declares.
#[derive(Clone, Copy, Debug)]
pub struct OverloadRow {
    /// The environment.
    pub variant: Variant,
    /// The function name.
    pub function: &'static str,
    /// The overload id.
    pub id: &'static str,
    /// Called as ~receiver.function(...)~.
    pub member: bool,
    /// The argument types, receiver first.
    pub args: &'static [&'static str],
    /// The result type.
    pub result: &'static str,
}

/// [~VariableRow~]s, one a line: ~Variant "name" -> "type";~.
macro_rules! variables {
    ($( $variant:ident $name:literal -> $ty:literal ;)*) => {
        &[ $( VariableRow { variant: Variant::$variant, name: $name, ty: $ty } ),* ]
    };
}

/// [~FieldRow~]s, one a line: ~Variant "object" "field" -> "type";~.
macro_rules! fields {
    ($( $variant:ident $object:literal $field:literal -> $ty:literal ;)*) => {
        &[ $( FieldRow { variant: Variant::$variant, object: $object, field: $field, ty: $ty } ),* ]
    };
}

/// [~OverloadRow~]s, one a line: ~Variant m|g "function" "id" [args] -> "result";~, where ~m~
/// is an overload called as a member (~receiver.function(...)~) and ~g~ a global one.
macro_rules! overloads {
    (@style m) => { true };
    (@style g) => { false };
    ($( $variant:ident $style:ident $func:literal $id:literal [$($arg:literal),*] -> $res:literal ;)*) => {
        &[ $( OverloadRow {
            variant: Variant::$variant,
            function: $func,
            id: $id,
            member: overloads!(@style $style),
            args: &[$($arg),*],
            result: $res,
        } ),* ]
    };
}

`, "~", "`"))
	emit := func(what string) {
		last := ""
		for _, k := range order {
			m := seen[k]
			if m.row.What != what {
				continue
			}
			if m.source != last {
				fmt.Fprintf(w, "    // %s\n", m.source)
				last = m.source
			}
			if what == "field" {
				fmt.Fprintf(w, "    %s %s %s -> %s;\n", m.variant, rustString(m.row.Name), rustString(m.row.Field), rustString(m.row.Result))
				continue
			}
			if what == "variable" {
				fmt.Fprintf(w, "    %s %s -> %s;\n", m.variant, rustString(m.row.Name), rustString(m.row.Result))
				continue
			}
			var args []string
			for _, a := range m.row.Args {
				args = append(args, rustString(a))
			}
			style := "g"
			if m.row.Member {
				style = "m"
			}
			fmt.Fprintf(w, "    %s %s %s %s [%s] -> %s;\n",
				m.variant, style, rustString(m.row.Name), rustString(m.row.ID), strings.Join(args, ", "), rustString(m.row.Result))
		}
	}
	fmt.Fprint(w, "/// The variables.\npub const VARIABLES: &[VariableRow] = variables![\n")
	emit("variable")
	fmt.Fprint(w, "];\n\n/// The fields of the object types.\npub const FIELDS: &[FieldRow] = fields![\n")
	emit("field")
	fmt.Fprint(w, "];\n\n/// The overloads.\npub const OVERLOADS: &[OverloadRow] = overloads![\n")
	emit("overload")
	fmt.Fprint(w, "];\n")
}
