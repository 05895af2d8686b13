package oracle

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

var gaVersion = regexp.MustCompile(`^v[0-9]+$`)

// NewDiscoveryMapper builds the same kind of RESTMapper KCM uses (client-go
// restmapper.NewDiscoveryRESTMapper over the API server's discovery) from the discovery
// documents of kubernetes v1.37.1 (api/discovery/: api__v1.json for the core group, apis.json
// and apis__<group>__<version>.json for the others). The core group comes first, as in
// client-go discovery ServerGroupsAndResources. With allVersions false only GA versions
// (`v<N>`) are kept: kube-apiserver 1.37.1 serves no alpha or beta version by default
// (pkg/controlplane/instance.go, DefaultAPIResourceConfigSource).
func NewDiscoveryMapper(dir string, allVersions bool) (meta.RESTMapper, error) {
	groups, err := discoveryGroups(dir, allVersions)
	if err != nil {
		return nil, err
	}
	return restmapper.NewDiscoveryRESTMapper(groups), nil
}

func discoveryGroups(dir string, allVersions bool) ([]*restmapper.APIGroupResources, error) {
	readJSON := func(name string, into any) error {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, into); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	var core metav1.APIResourceList
	if err := readJSON("api__v1.json", &core); err != nil {
		return nil, err
	}
	coreGV := metav1.GroupVersionForDiscovery{GroupVersion: "v1", Version: "v1"}
	out := []*restmapper.APIGroupResources{{
		Group:              metav1.APIGroup{Name: "", Versions: []metav1.GroupVersionForDiscovery{coreGV}, PreferredVersion: coreGV},
		VersionedResources: map[string][]metav1.APIResource{"v1": core.APIResources},
	}}
	var groups metav1.APIGroupList
	if err := readJSON("apis.json", &groups); err != nil {
		return nil, err
	}
	for _, g := range groups.Groups {
		agr := &restmapper.APIGroupResources{Group: g, VersionedResources: map[string][]metav1.APIResource{}}
		agr.Group.Versions = nil
		for _, v := range g.Versions {
			if !allVersions && !gaVersion.MatchString(v.Version) {
				continue
			}
			var rl metav1.APIResourceList
			if err := readJSON("apis__"+g.Name+"__"+v.Version+".json", &rl); err != nil {
				return nil, err
			}
			agr.Group.Versions = append(agr.Group.Versions, v)
			agr.VersionedResources[v.Version] = rl.APIResources
		}
		if len(agr.Group.Versions) == 0 {
			continue
		}
		if !allVersions && !gaVersion.MatchString(agr.Group.PreferredVersion.Version) {
			agr.Group.PreferredVersion = agr.Group.Versions[0]
		}
		out = append(out, agr)
	}
	return out, nil
}

// ParsePolicy reads a ValidatingAdmissionPolicy from JSON or YAML.
func ParsePolicy(data []byte) (*admissionv1.ValidatingAdmissionPolicy, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	var p admissionv1.ValidatingAdmissionPolicy
	if err := json.Unmarshal(j, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ExpressionWarning mirrors admissionregistration/v1 ExpressionWarning.
type ExpressionWarning struct {
	FieldRef string `json:"fieldRef"`
	Warning  string `json:"warning"`
}

// PerGVK is the warning one expression gets for one checked GVK (empty when clean).
type PerGVK struct {
	FieldRef   string `json:"fieldRef"`
	Expression string `json:"expression"`
	GVK        string `json:"gvk"`
	ObjectDyn  bool   `json:"objectDyn,omitempty"`
	Warning    string `json:"warning"`
}

// PolicyResult is what the status controller would compute for one policy.
type PolicyResult struct {
	// GVKs checked (after schema resolution), in upstream order.
	GVKs []string `json:"gvks"`
	// ParamsGVK as upstream parses spec.paramKind (empty if none/unparseable).
	ParamsGVK string `json:"paramsGvk,omitempty"`
	// TypeChecking is status.typeChecking as the controller would apply it.
	TypeChecking struct {
		ExpressionWarnings []ExpressionWarning `json:"expressionWarnings,omitempty"`
	} `json:"typeChecking"`
	PerGVK []PerGVK `json:"perGvk"`
}

// CheckPolicy runs validating.TypeChecker.Check (the exact status computation) and, for the
// per-GVK view, CreateContext + CheckExpression.
func (o *Oracle) CheckPolicy(p *admissionv1.ValidatingAdmissionPolicy) PolicyResult {
	tc := &validating.TypeChecker{SchemaResolver: o.Resolver, RestMapper: o.Mapper}
	var res PolicyResult
	res.PerGVK = []PerGVK{}
	ctx := tc.CreateContext(p)
	gvks, dyn := contextGVKs(ctx)
	kinds := []string{}
	for _, g := range gvks {
		res.GVKs = append(res.GVKs, g.String())
		kinds = append(kinds, g.Kind)
	}
	if res.GVKs == nil {
		res.GVKs = []string{}
	}
	if pk := contextParamsGVK(ctx); !pk.Empty() {
		res.ParamsGVK = pk.String()
		kinds = append(kinds, pk.Kind)
	}
	for _, w := range tc.Check(p) {
		res.TypeChecking.ExpressionWarnings = append(res.TypeChecking.ExpressionWarnings,
			ExpressionWarning{FieldRef: w.FieldRef, Warning: NormalizeTypeNames(w.Warning, kinds...)})
	}
	check := func(fieldRef, expr string) {
		byGVK := map[schema.GroupVersionKind]string{}
		for _, r := range tc.CheckExpression(ctx, expr) {
			byGVK[r.GVK] = NormalizeTypeNames(r.String(), kinds...)
		}
		for i, g := range gvks {
			res.PerGVK = append(res.PerGVK, PerGVK{FieldRef: fieldRef, Expression: expr, GVK: g.String(), ObjectDyn: dyn[i], Warning: byGVK[g]})
		}
	}
	for i, v := range p.Spec.Validations {
		check(fmt.Sprintf("spec.validations[%d].expression", i), v.Expression)
		if v.MessageExpression != "" {
			check(fmt.Sprintf("spec.validations[%d].messageExpression", i), v.MessageExpression)
		}
	}
	return res
}

// contextGVKs reads the unexported gvks/declTypes of a TypeCheckingContext (read-only reflection;
// the context is opaque by design upstream).
func contextGVKs(ctx *validating.TypeCheckingContext) ([]schema.GroupVersionKind, []bool) {
	v := reflect.ValueOf(ctx).Elem()
	gv := v.FieldByName("gvks")
	dt := v.FieldByName("declTypes")
	out := make([]schema.GroupVersionKind, 0, gv.Len())
	dyn := make([]bool, 0, gv.Len())
	for i := 0; i < gv.Len(); i++ {
		e := gv.Index(i)
		out = append(out, schema.GroupVersionKind{
			Group:   e.FieldByName("Group").String(),
			Version: e.FieldByName("Version").String(),
			Kind:    e.FieldByName("Kind").String(),
		})
		dyn = append(dyn, i < dt.Len() && dt.Index(i).IsNil())
	}
	return out, dyn
}

func contextParamsGVK(ctx *validating.TypeCheckingContext) schema.GroupVersionKind {
	e := reflect.ValueOf(ctx).Elem().FieldByName("paramGVK")
	return schema.GroupVersionKind{
		Group:   e.FieldByName("Group").String(),
		Version: e.FieldByName("Version").String(),
		Kind:    e.FieldByName("Kind").String(),
	}
}
