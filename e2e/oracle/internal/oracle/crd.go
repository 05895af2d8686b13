package oracle

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/restmapper"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"
)

// ParseCRD reads an apiextensions.k8s.io/v1 CustomResourceDefinition (JSON or YAML) and applies
// the API server's defaulting.
func ParseCRD(data []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := json.Unmarshal(j, &crd); err != nil {
		return nil, err
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(&crd)
	return &crd, nil
}

// crdResolver answers like resolver.ClientDiscoveryResolver would against an API server whose
// /openapi/v3/apis/<group>/<version> documents are built the way apiextensions-apiserver v0.37.1
// builds them (pkg/controller/openapiv3/controller.go buildV3Spec + updateGroupVersion:
// builder.BuildOpenAPIV3 per CRD and served version, builder.MergeSpecsV3 per group version).
type crdResolver struct {
	docs map[schema.GroupVersion]map[string]*spec.Schema
}

// newCRDResolver builds the per-group-version documents of the given CRDs.
func newCRDResolver(crds []*apiextensionsv1.CustomResourceDefinition) (*crdResolver, error) {
	specs := map[schema.GroupVersion][]*spec3.OpenAPI{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			doc, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{V2: false, IncludeSelectableFields: true})
			if err != nil {
				return nil, fmt.Errorf("crd %s version %s: %w", crd.Name, v.Name, err)
			}
			gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
			specs[gv] = append(specs[gv], doc)
		}
	}
	r := &crdResolver{docs: map[schema.GroupVersion]map[string]*spec.Schema{}}
	for gv, list := range specs {
		merged, err := builder.MergeSpecsV3(list...)
		if err != nil {
			return nil, fmt.Errorf("merge %s: %w", gv, err)
		}
		// Round-trip through JSON like the discovery client does with the served document.
		raw, err := json.Marshal(merged)
		if err != nil {
			return nil, err
		}
		var resp struct {
			Components struct {
				Schemas map[string]*spec.Schema `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(raw, &resp); err != nil {
			return nil, err
		}
		r.docs[gv] = resp.Components.Schemas
	}
	return r, nil
}

const componentsPrefix = "#/components/schemas/"

// ResolveSchema mirrors resolver.ClientDiscoveryResolver.ResolveSchema (apiserver
// pkg/cel/openapi/resolver/discovery.go): find the component tagged with the GVK, then inline refs.
func (r *crdResolver) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	schemas, ok := r.docs[gvk.GroupVersion()]
	if !ok {
		return nil, fmt.Errorf("cannot resolve group version %q: %w", gvk.GroupVersion(), resolver.ErrSchemaNotFound)
	}
	names := make([]string, 0, len(schemas))
	for n := range schemas {
		names = append(names, n)
	}
	sort.Strings(names)
	ref := ""
	for _, n := range names {
		var gvks []schema.GroupVersionKind
		if err := schemas[n].Extensions.GetObject("x-kubernetes-group-version-kind", &gvks); err != nil {
			return nil, err
		}
		for _, g := range gvks {
			if g == gvk && ref == "" {
				ref = n
			}
		}
	}
	if ref == "" {
		return nil, fmt.Errorf("cannot resolve group version kind %q: %w", gvk, resolver.ErrSchemaNotFound)
	}
	return resolver.PopulateRefs(func(ref string) (*spec.Schema, bool) {
		s, ok := schemas[strings.TrimPrefix(ref, componentsPrefix)]
		return s, ok
	}, componentsPrefix+ref)
}

// WithCRDs returns a copy of o whose resolver falls back to the CRDs' published schemas (as KCM
// combines the definitions resolver with the discovery resolver), and whose mapper, if
// discoveryDir is set, also maps the CRDs' resources.
func (o *Oracle) WithCRDs(crds []*apiextensionsv1.CustomResourceDefinition, discoveryDir string, allVersions bool) (*Oracle, error) {
	cr, err := newCRDResolver(crds)
	if err != nil {
		return nil, err
	}
	out := *o
	base := o.Resolver
	out.Resolver = combined{primary: base, secondary: cr}
	if discoveryDir != "" {
		groups, err := discoveryGroups(discoveryDir, allVersions)
		if err != nil {
			return nil, err
		}
		out.Mapper = restmapper.NewDiscoveryRESTMapper(append(groups, crdGroups(crds)...))
	}
	return &out, nil
}

// combined mirrors DefinitionsSchemaResolver.Combine (apiserver
// pkg/cel/openapi/resolver/combined.go): the secondary answers every GVK the compiled-in
// definitions do not know (the definitions resolver reports exactly those as ErrSchemaNotFound).
type combined struct{ primary, secondary resolver.SchemaResolver }

func (c combined) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	s, err := c.primary.ResolveSchema(gvk)
	if err == nil || !errors.Is(err, resolver.ErrSchemaNotFound) {
		return s, err
	}
	return c.secondary.ResolveSchema(gvk)
}

func crdGroups(crds []*apiextensionsv1.CustomResourceDefinition) []*restmapper.APIGroupResources {
	byGroup := map[string]*restmapper.APIGroupResources{}
	var order []string
	for _, crd := range crds {
		g := crd.Spec.Group
		agr, ok := byGroup[g]
		if !ok {
			agr = &restmapper.APIGroupResources{Group: metav1.APIGroup{Name: g}, VersionedResources: map[string][]metav1.APIResource{}}
			byGroup[g] = agr
			order = append(order, g)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			if _, seen := agr.VersionedResources[v.Name]; !seen {
				gv := metav1.GroupVersionForDiscovery{GroupVersion: g + "/" + v.Name, Version: v.Name}
				agr.Group.Versions = append(agr.Group.Versions, gv)
				if v.Storage || agr.Group.PreferredVersion.Version == "" {
					agr.Group.PreferredVersion = gv
				}
			}
			agr.VersionedResources[v.Name] = append(agr.VersionedResources[v.Name], metav1.APIResource{
				Name:         crd.Spec.Names.Plural,
				SingularName: crd.Spec.Names.Singular,
				Namespaced:   crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
				Kind:         crd.Spec.Names.Kind,
				ShortNames:   crd.Spec.Names.ShortNames,
				Verbs:        metav1.Verbs{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"},
			})
		}
	}
	out := make([]*restmapper.APIGroupResources, 0, len(order))
	for _, g := range order {
		out = append(out, byGroup[g])
	}
	return out
}

var _ meta.RESTMapper = oneKindMapper{}
