// Command schemaoracle prints, for every GroupVersionKind, the CEL declaration type that the
// Kubernetes 1.37.1 code computes, as a canonical string and its FNV-1a 64 hash. It is the
// reference that vapcheck's schema conversion is tested against (tests/fixtures/schema-oracle).
//
// Usage: schemaoracle <openapi-v3-dir> <out-dir> [<crd-dir>]
//
//	out-dir/definitions.tsv: KCM's compiled-in definitions (the resolver KCM uses first)
//	out-dir/published.tsv:   the published /openapi/v3 documents under openapi-v3-dir,
//	                         resolved like ClientDiscoveryResolver does.
//	out-dir/crds.tsv:        every served version of the CRDs in crd-dir (YAML, several
//	                         documents per file, List wrappers), published with the API
//	                         server's own builder and resolved like ClientDiscoveryResolver.
//	*.full.tsv: the same with the canonical strings.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	crdbuilder "k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	celopenapi "k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	endpointsopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	k8sscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"
	generated "k8s.io/kubernetes/pkg/generated/openapi"
)

func canon(t *apiservercel.DeclType, b *strings.Builder) {
	switch {
	case t == nil:
		b.WriteString("-")
	case t.IsList():
		b.WriteString("[")
		canon(t.ElemType, b)
		b.WriteString("]")
	case t.IsMap():
		b.WriteString("{")
		canon(t.ElemType, b)
		b.WriteString("}")
	case t.IsObject():
		b.WriteString("<" + t.TypeName() + ">(")
		names := make([]string, 0, len(t.Fields))
		for n := range t.Fields {
			names = append(names, n)
		}
		sort.Strings(names)
		for i, n := range names {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(n + ":")
			canon(t.Fields[n].Type, b)
		}
		b.WriteString(")")
	default:
		b.WriteString(t.TypeName())
	}
}

func declOf(s *spec.Schema, kind string) string {
	dt := common.SchemaDeclType(&celopenapi.Schema{Schema: s}, true)
	if dt != nil {
		dt = dt.MaybeAssignTypeName(kind)
	}
	var b strings.Builder
	canon(dt, &b)
	return b.String()
}

func gvkString(g schema.GroupVersionKind) string {
	grp := g.Group
	if grp == "" {
		grp = "core"
	}
	return grp + "/" + g.Version + "/" + g.Kind
}

type row struct{ key, val string }

func write(dir, name string, rows []row) {
	sort.Slice(rows, func(i, j int) bool { return rows[i].key < rows[j].key })
	var short, full strings.Builder
	for _, r := range rows {
		h := fnv.New64a()
		h.Write([]byte(r.val))
		fmt.Fprintf(&short, "%s\t%016x\t%d\n", r.key, h.Sum64(), len(r.val))
		fmt.Fprintf(&full, "%s\t%s\n", r.key, r.val)
	}
	must(os.WriteFile(filepath.Join(dir, name+".tsv"), []byte(short.String()), 0o644))
	must(os.WriteFile(filepath.Join(dir, name+".full.tsv"), []byte(full.String()), 0o644))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func main() {
	docs, out := os.Args[1], os.Args[2]
	must(os.MkdirAll(out, 0o755))

	// Compiled-in definitions, exactly as kube-controller-manager builds its resolver.
	schemes := []*runtime.Scheme{k8sscheme.Scheme, apiextensionsscheme.Scheme}
	namer := endpointsopenapi.NewDefinitionNamer(schemes...)
	defs := generated.GetOpenAPIDefinitions(spec.MustCreateRef)
	res := resolver.NewDefinitionsSchemaResolver(generated.GetOpenAPIDefinitions, schemes...)
	var rows []row
	for name := range defs {
		_, ext := namer.GetDefinitionName(name)
		raw, ok := ext["x-kubernetes-group-version-kind"]
		if !ok {
			continue
		}
		bs, _ := json.Marshal(raw)
		var gvks []schema.GroupVersionKind
		must(json.Unmarshal(bs, &gvks))
		for _, g := range gvks {
			s, err := res.ResolveSchema(g)
			val := ""
			if err != nil {
				val = "ERROR " + err.Error()
			} else {
				val = declOf(s, g.Kind)
			}
			rows = append(rows, row{gvkString(g) + "\t" + name, val})
		}
	}
	write(out, "definitions", rows)

	// Published documents, as ClientDiscoveryResolver resolves them.
	rows = nil
	must(filepath.Walk(docs, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		b, err := os.ReadFile(p)
		must(err)
		rel, _ := filepath.Rel(docs, p)
		rows = append(rows, resolveDocument(b, strings.TrimSuffix(rel, ".json"))...)
		return nil
	}))
	write(out, "published", rows)

	if len(os.Args) > 3 {
		rows = nil
		for _, crd := range readCRDs(os.Args[3]) {
			for _, v := range crd.Spec.Versions {
				if !v.Served {
					continue
				}
				doc, err := crdbuilder.BuildOpenAPIV3(crd, v.Name, crdbuilder.Options{V2: false})
				must(err)
				b, err := json.Marshal(doc)
				must(err)
				rows = append(rows, resolveDocument(b, "apis/"+crd.Spec.Group+"/"+v.Name)...)
			}
		}
		write(out, "crds", rows)
	}
}

func readCRDs(dir string) []*apiextensionsv1.CustomResourceDefinition {
	var crds []*apiextensionsv1.CustomResourceDefinition
	var add func(obj map[string]interface{})
	add = func(obj map[string]interface{}) {
		if obj["kind"] == "List" {
			items, _ := obj["items"].([]interface{})
			for _, it := range items {
				if m, ok := it.(map[string]interface{}); ok {
					add(m)
				}
			}
			return
		}
		if obj["kind"] != "CustomResourceDefinition" || obj["apiVersion"] != "apiextensions.k8s.io/v1" {
			return
		}
		b, err := json.Marshal(obj)
		must(err)
		crd := &apiextensionsv1.CustomResourceDefinition{}
		must(json.Unmarshal(b, crd))
		// The defaults the API server applies when the CRD is created.
		if crd.Spec.Names.Singular == "" {
			crd.Spec.Names.Singular = strings.ToLower(crd.Spec.Names.Kind)
		}
		if crd.Spec.Names.ListKind == "" && crd.Spec.Names.Kind != "" {
			crd.Spec.Names.ListKind = crd.Spec.Names.Kind + "List"
		}
		crds = append(crds, crd)
	}
	entries, err := os.ReadDir(dir)
	must(err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		must(err)
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var obj map[string]interface{}
			if err := dec.Decode(&obj); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				panic(err)
			}
			if obj != nil {
				add(obj)
			}
		}
	}
	return crds
}

// resolveDocument resolves every kind of the group-version gv (an /openapi/v3 path) that the
// document declares, as ClientDiscoveryResolver does.
func resolveDocument(b []byte, gv string) []row {
	var rows []row
	{
		var resp struct {
			Components struct {
				Schemas map[string]*spec.Schema `json:"schemas"`
			} `json:"components"`
		}
		must(json.Unmarshal(b, &resp))
		byGVK := map[schema.GroupVersionKind][]string{}
		for ref, s := range resp.Components.Schemas {
			var gvks []schema.GroupVersionKind
			must(s.Extensions.GetObject("x-kubernetes-group-version-kind", &gvks))
			for _, g := range gvks {
				byGVK[g] = append(byGVK[g], ref)
			}
		}
		for g, refs := range byGVK {
			// Only the kinds of this document's own group-version are resolvable through it.
			want := "api/" + g.Version
			if g.Group != "" {
				want = "apis/" + g.Group + "/" + g.Version
			}
			if want != gv {
				continue
			}
			sort.Strings(refs)
			s, err := resolver.PopulateRefs(func(ref string) (*spec.Schema, bool) {
				s, ok := resp.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
				return s, ok
			}, refs[0])
			val := ""
			if err != nil {
				val = "ERROR " + err.Error()
			} else {
				val = declOf(s, g.Kind)
			}
			key := gvkString(g) + "\t" + refs[0]
			if len(refs) > 1 {
				key += " AMBIGUOUS:" + strings.Join(refs, ",")
			}
			rows = append(rows, row{key, val})
		}
	}
	return rows
}
