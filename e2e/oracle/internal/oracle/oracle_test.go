package oracle

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/cel-go/cel"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestParseTypeRoundTrip(t *testing.T) {
	for _, s := range []string{"int", "list(string)", "map(string, dyn)", "optional_type(int)",
		"list(map(string, list(bytes)))", "type(int)", "timestamp", "null_type", "A", "list(A)"} {
		ty, err := ParseType(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		want := s
		if s == "null_type" {
			want = "null"
		}
		if got := cel.FormatCELType(ty); got != want {
			t.Errorf("ParseType(%q) prints %q", s, got)
		}
	}
	for _, bad := range []string{"", "list(", "map(int)", "Foo", "int(int)", "list(int))", "list int"} {
		if _, err := ParseType(bad); err == nil {
			t.Errorf("ParseType(%q): expected an error", bad)
		}
	}
}

func TestNormalizeTypeNames(t *testing.T) {
	in := "apps/v1, Kind=Deployment: ERROR: <input>:1:13: found no matching overload for '_==_' applied to '(Deployment123456789.spec, MyDeployment42)'\n | object.kind == 'Deployment12'\n | ............^\n"
	want := "apps/v1, Kind=Deployment: ERROR: <input>:1:13: found no matching overload for '_==_' applied to '(Deployment.spec, MyDeployment42)'\n | object.kind == 'Deployment12'\n | ............^\n"
	if got := NormalizeTypeNames(in, "Deployment"); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

func TestParseGVK(t *testing.T) {
	for s, want := range map[string]schema.GroupVersionKind{
		"apps/v1, Kind=Deployment": {Group: "apps", Version: "v1", Kind: "Deployment"},
		"/v1, Kind=Pod":            {Version: "v1", Kind: "Pod"},
		"v1, Kind=Pod":             {Version: "v1", Kind: "Pod"},
	} {
		got, err := ParseGVK(s)
		if err != nil || got != want {
			t.Errorf("ParseGVK(%q) = %v, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "Pod", "a/b/c, Kind=X", "/v1, Kind="} {
		if _, err := ParseGVK(bad); err == nil {
			t.Errorf("ParseGVK(%q): expected an error", bad)
		}
	}
}

var (
	oracleOnce sync.Once
	theOracle  *Oracle
)

func testOracle() *Oracle {
	oracleOnce.Do(func() {
		theOracle = &Oracle{Resolver: NewCachingResolver(NewSchemaResolver())}
	})
	return theOracle
}

func TestCheckVapKnownAnswers(t *testing.T) {
	o := testOracle()
	deploy := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	cases := []struct {
		expr, warning, typ string
	}{
		// shared doc §2.6 example
		{"object.replicas > 1", "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas > 1\n | ......^\n", ""},
		{"object.spec.replicas > 1", "", "bool"},
		{"object.metadata.namespace", "", "string"},
		{"object.spec == 1", "apps/v1, Kind=Deployment: ERROR: <input>:1:13: found no matching overload for '_==_' applied to '(Deployment.spec, int)'\n | object.spec == 1\n | ............^\n", ""},
		{"'😀' + 1", "apps/v1, Kind=Deployment: ERROR: <input>:1:5: found no matching overload for '_+_' applied to '(string, int)'\n | '😀' + 1\n | .．..^\n", ""},
	}
	for _, c := range cases {
		r := o.CheckVap(VapRequest{GVK: deploy, Expression: c.expr})
		if r.Warning != c.warning || r.Type != c.typ || !r.SchemaFound || r.ReplicaMismatch != nil {
			t.Errorf("%q: got %+v", c.expr, r)
		}
	}
	r := o.CheckVap(VapRequest{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, Expression: "undeclared"})
	if r.SchemaFound || r.Warning != "" {
		t.Errorf("unknown kind: got %+v", r)
	}
}

func TestCheckPolicyCoreGroupMatchesAllGroups(t *testing.T) {
	dir := os.Getenv("ORACLE_DISCOVERY")
	if dir == "" {
		// e2e/oracle/test sets it; under CI a missing prerequisite fails instead of skipping.
		if ci := os.Getenv("CI"); ci == "true" || ci == "1" {
			t.Fatal("ORACLE_DISCOVERY (kubernetes module api/discovery) not set (required under CI)")
		}
		t.Skip("ORACLE_DISCOVERY (kubernetes module api/discovery) not set")
	}
	if _, err := os.Stat(filepath.Join(dir, "api__v1.json")); err != nil {
		t.Fatal(err)
	}
	m, err := NewDiscoveryMapper(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePolicy([]byte(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: t}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [events, deployments, "pods/status"]}
  validations:
  - expression: object.foo == 1
`))
	if err != nil {
		t.Fatal(err)
	}
	o := *testOracle()
	o.Mapper = m
	r := o.CheckPolicy(p)
	want := []string{"/v1, Kind=Event", "apps/v1, Kind=Deployment", "events.k8s.io/v1, Kind=Event"}
	if strings.Join(r.GVKs, "|") != strings.Join(want, "|") {
		t.Fatalf("gvks = %v, want %v", r.GVKs, want)
	}
	if len(r.TypeChecking.ExpressionWarnings) != 1 || strings.Count(r.TypeChecking.ExpressionWarnings[0].Warning, "undefined field 'foo'") != 3 {
		t.Fatalf("warnings = %+v", r.TypeChecking.ExpressionWarnings)
	}
}

func TestCheckVapWithCRD(t *testing.T) {
	crd, err := ParseCRD([]byte(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              port: {x-kubernetes-int-or-string: true}
              template: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	o, err := testOracle().WithCRDs([]*apiextensionsv1.CustomResourceDefinition{crd}, "", false)
	if err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}
	for expr, want := range map[string]string{
		"object.spec.size + 1":                 "int",
		"object.spec.port":                     "dyn",
		"object.spec.template.metadata.labels": "map(string, string)",
		"object.spec.template.kind":            "string",
		"object.metadata.namespace":            "string",
	} {
		r := o.CheckVap(VapRequest{GVK: gvk, Expression: expr})
		if !r.SchemaFound || r.Warning != "" || r.Type != want {
			t.Errorf("%q: got %+v, want type %s", expr, r, want)
		}
	}
	r := o.CheckVap(VapRequest{GVK: gvk, Expression: "object.spec.nope"})
	if !strings.Contains(r.Warning, "example.com/v1, Kind=Gadget: ERROR: <input>:1:12: undefined field 'nope'") {
		t.Errorf("got %+v", r)
	}
}

func TestEstimateCostKnownAnswers(t *testing.T) {
	for _, c := range []struct {
		expr     string
		min, max uint64
	}{
		{"[1, 2].all(x, x > 0)", 17, 21},
		{"has(object.spec)", 1, 1}, // Kubernetes: PresenceTestHasCost(false)
		{"authorizer.group('apps').resource('deployments').check('get').allowed()", 350004, 350004},
	} {
		r := EstimateCost(CostRequest{Expression: c.expr})
		if r.Min == nil || r.Max == nil {
			t.Errorf("%s: no estimate: %+v", c.expr, r)
			continue
		}
		if *r.Min != c.min || *r.Max != c.max {
			t.Errorf("%s: got (%d, %d), want (%d, %d)", c.expr, *r.Min, *r.Max, c.min, c.max)
		}
	}
}

// The typed cost mode against the fixture document of tests/fixtures/cost-openapi, with the
// sizes worked out by hand from pkg/cel/common/schemas.go. `all(x, true)` costs 3 (object,
// spec, field) + 1 (accumulator init) + 3 per element.
func TestEstimateTypedCostKnownAnswers(t *testing.T) {
	p := &PublishedSchemas{Dirs: []string{"../../../../tests/fixtures/cost-openapi"}}
	bounded := schema.GroupVersionKind{Group: "cost.vapcheck.dev", Version: "v1", Kind: "Bounded"}
	for _, c := range []struct {
		expr     string
		min, max uint64
	}{
		// maxItems: 10.
		{"object.spec.items.all(x, true)", 4, 4 + 3*10},
		// No maxItems; Item's MinSerializedSize is 2 + (4+2+4 for required `name`) + (3+4+4 for
		// required `opt`; `port` has a default) = 23: (3 MiB - 2) / 24 = 131071 elements.
		{"object.spec.freeItems.all(x, true)", 4, 4 + 3*131071},
		// No maxItems, strings (min size 2): (3 MiB - 2) / 3 = 1048575.
		{"object.spec.tags.all(x, true)", 4, 4 + 3*1048575},
		// maxProperties: 4.
		{"object.spec.labels.all(x, true)", 4, 4 + 3*4},
	} {
		r := p.EstimateTypedCost(TypedCostRequest{GVK: bounded, Expression: c.expr})
		if r.Min == nil || r.Max == nil || !r.SchemaFound {
			t.Errorf("%s: no estimate: %+v", c.expr, r)
			continue
		}
		if *r.Min != c.min || *r.Max != c.max {
			t.Errorf("%s: got (%d, %d), want (%d, %d)", c.expr, *r.Min, *r.Max, c.min, c.max)
		}
	}
	r := p.EstimateTypedCost(TypedCostRequest{GVK: schema.GroupVersionKind{Group: "nope", Version: "v1", Kind: "Nope"}, Expression: "1"})
	if r.SchemaFound || r.Min != nil {
		t.Errorf("unknown kind: got %+v", r)
	}
}
