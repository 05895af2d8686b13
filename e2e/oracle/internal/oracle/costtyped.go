package oracle

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/google/cel-go/checker"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	celopenapi "k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// PublishedSchemas resolves kinds from the OpenAPI v3 documents kube-apiserver publishes (the
// files of k8s.io/kubernetes/api/openapi-spec/v3: api__v1_openapi.json,
// apis__<group>__<version>_openapi.json), the way the discovery schema resolver does: the
// component whose x-kubernetes-group-version-kind lists the GVK (the smallest name when several
// do), with its references inlined by resolver.PopulateRefs. A document is read from the first
// of Dirs that has it.
type PublishedSchemas struct {
	Dirs []string
	mu   sync.Mutex
	docs map[string]map[string]*spec.Schema
}

func (p *PublishedSchemas) components(gv schema.GroupVersion) (map[string]*spec.Schema, error) {
	name := "api__" + gv.Version + "_openapi.json"
	if gv.Group != "" {
		name = "apis__" + gv.Group + "__" + gv.Version + "_openapi.json"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.docs[name]; ok {
		return c, nil
	}
	if p.docs == nil {
		p.docs = map[string]map[string]*spec.Schema{}
	}
	var b []byte
	for _, dir := range p.Dirs {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		b = data
		break
	}
	if b == nil {
		p.docs[name] = nil
		return nil, nil
	}
	var doc struct {
		Components struct {
			Schemas map[string]*spec.Schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p.docs[name] = doc.Components.Schemas
	return doc.Components.Schemas, nil
}

// DeclType converts the kind's schema with common.SchemaDeclType(s, true), named `Kind`.
// found is false when no document or component declares the GVK; a nil type with found true
// means the schema is not exposed (object is dyn).
func (p *PublishedSchemas) DeclType(gvk schema.GroupVersionKind) (dt *apiservercel.DeclType, found bool, err error) {
	comps, err := p.components(gvk.GroupVersion())
	if err != nil || comps == nil {
		return nil, false, err
	}
	var refs []string
	for ref, s := range comps {
		var gvks []schema.GroupVersionKind
		if err := s.Extensions.GetObject("x-kubernetes-group-version-kind", &gvks); err != nil {
			return nil, false, err
		}
		for _, g := range gvks {
			if g == gvk {
				refs = append(refs, ref)
			}
		}
	}
	if len(refs) == 0 {
		return nil, false, nil
	}
	sort.Strings(refs)
	s, err := resolver.PopulateRefs(func(ref string) (*spec.Schema, bool) {
		s, ok := comps[strings.TrimPrefix(ref, "#/components/schemas/")]
		return s, ok
	}, refs[0])
	if err != nil {
		return nil, true, err
	}
	dt = common.SchemaDeclType(&celopenapi.Schema{Schema: s}, true)
	if dt == nil {
		return nil, true, nil
	}
	return dt.MaybeAssignTypeName(gvk.Kind), true, nil
}

// policySizeEstimator is apiextensions-apiserver v0.37.1
// pkg/apiserver/schema/cel/compilation.go sizeEstimator with the admission policy's roots:
// `object` and `oldObject` start at the matched kind's declaration type, `params` at the
// parameter kind's (sizeEstimator has the single root `self`). Any other root is unknown.
type policySizeEstimator struct {
	object, params *apiservercel.DeclType
}

func (c *policySizeEstimator) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	path := element.Path()
	if len(path) == 0 {
		return nil
	}
	var currentNode *apiservercel.DeclType
	switch path[0] {
	case plugincel.ObjectVarName, plugincel.OldObjectVarName:
		currentNode = c.object
	case plugincel.ParamsVarName:
		currentNode = c.params
	}
	if currentNode == nil {
		return nil
	}
	// The rest is sizeEstimator.EstimateSize verbatim.
	for _, name := range path[1:] {
		switch name {
		case "@items", "@values":
			if currentNode.ElemType == nil {
				return nil
			}
			currentNode = currentNode.ElemType
		case "@keys":
			if currentNode.KeyType == nil {
				return nil
			}
			currentNode = currentNode.KeyType
		default:
			field, ok := currentNode.Fields[name]
			if !ok {
				return nil
			}
			if field.Type == nil {
				return nil
			}
			currentNode = field.Type
		}
	}
	return &checker.SizeEstimate{Min: 0, Max: uint64(currentNode.MaxElements)}
}

func (c *policySizeEstimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}

// TypedCostRequest asks for the estimate of one expression of a policy matching GVK, with
// object/oldObject (and params, for ParamsGVK) typed from the published schemas.
type TypedCostRequest struct {
	GVK        schema.GroupVersionKind
	ParamsGVK  *schema.GroupVersionKind
	Variables  []admissionv1.Variable
	Expression string
}

// TypedCostResult adds what the resolution found to CostResult.
type TypedCostResult struct {
	CostResult
	SchemaFound       bool  `json:"schemaFound"`
	ObjectDyn         bool  `json:"objectDyn,omitempty"`
	ParamsSchemaFound *bool `json:"paramsSchemaFound,omitempty"`
}

// EstimateTypedCost compiles the expression in the replica of the type-checking environment
// (ReplicaEnvSet with the declaration types, as TypeChecker declares them) and runs cel-go's
// Env.EstimateCost with Kubernetes' library.CostEstimator whose SizeEstimator reads
// DeclType.MaxElements along the path (policySizeEstimator). An unresolved params kind is dyn
// (as in TypeChecker); an unresolved object kind is reported with SchemaFound false and no
// estimate (TypeChecker skips it).
func (p *PublishedSchemas) EstimateTypedCost(req TypedCostRequest) TypedCostResult {
	var res TypedCostResult
	objDecl, found, err := p.DeclType(req.GVK)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.SchemaFound = found
	if !found {
		return res
	}
	res.ObjectDyn = objDecl == nil
	var paramsDecl *apiservercel.DeclType
	if req.ParamsGVK != nil {
		pd, pfound, perr := p.DeclType(*req.ParamsGVK)
		if perr != nil {
			res.Error = perr.Error()
			return res
		}
		res.ParamsSchemaFound = &pfound
		paramsDecl = pd
	}
	hasParams := req.ParamsGVK != nil
	cc, err := ReplicaEnvSet(objDecl, hasParams, paramsDecl)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	named := make([]plugincel.NamedExpressionAccessor, len(req.Variables))
	for i, v := range req.Variables {
		named[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	cc.CompileAndStoreVariables(named, opts, environment.StoredExpressions)
	env, err := cc.Env(environment.StoredExpressions)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	ast, iss := env.Compile(req.Expression)
	if iss.Err() != nil {
		res.Issues = iss.String()
		return res
	}
	est, err := env.EstimateCost(ast, &library.CostEstimator{SizeEstimator: &policySizeEstimator{object: objDecl, params: paramsDecl}})
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.Min, res.Max = &est.Min, &est.Max
	return res
}
