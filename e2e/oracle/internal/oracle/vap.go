package oracle

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	celopenapi "k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	k8sscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"
	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"
)

// NewSchemaResolver returns the resolver kube-controller-manager 1.37.1 uses for built-in kinds
// (cmd/kube-controller-manager/app/validatingadmissionpolicystatus.go,
// newValidatingAdmissionPolicyStatusController), without the discovery fallback that only
// matters for CRDs and aggregated APIs.
func NewSchemaResolver() resolver.SchemaResolver {
	return resolver.NewDefinitionsSchemaResolver(generatedopenapi.GetOpenAPIDefinitions, k8sscheme.Scheme, apiextensionsscheme.Scheme)
}

// ParseGVK accepts `<group>/<version>, Kind=<Kind>` (apimachinery GroupVersionKind.String, the
// core group written `/v1, Kind=Pod`), and also `v1, Kind=Pod`.
func ParseGVK(s string) (schema.GroupVersionKind, error) {
	gvPart, kind, ok := strings.Cut(s, ", Kind=")
	if !ok || kind == "" {
		return schema.GroupVersionKind{}, fmt.Errorf("gvk %q: want '<group>/<version>, Kind=<Kind>'", s)
	}
	gv, err := schema.ParseGroupVersion(strings.TrimPrefix(gvPart, "/"))
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("gvk %q: %w", s, err)
	}
	return gv.WithKind(kind), nil
}

// oneKindMapper is a RESTMapper that maps every resource to one GVK. It lets the real
// TypeChecker (whose per-GVK context is unexported) check an expression against exactly that GVK.
type oneKindMapper struct{ gvk schema.GroupVersionKind }

var errNoMapping = errors.New("oracle: no mapping")

func (m oneKindMapper) KindFor(schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return m.gvk, nil
}
func (m oneKindMapper) KindsFor(schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return []schema.GroupVersionKind{m.gvk}, nil
}
func (m oneKindMapper) ResourceFor(schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return schema.GroupVersionResource{}, errNoMapping
}
func (m oneKindMapper) ResourcesFor(schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return nil, errNoMapping
}
func (m oneKindMapper) RESTMapping(schema.GroupKind, ...string) (*meta.RESTMapping, error) {
	return nil, errNoMapping
}
func (m oneKindMapper) RESTMappings(schema.GroupKind, ...string) ([]*meta.RESTMapping, error) {
	return nil, errNoMapping
}
func (m oneKindMapper) ResourceSingularizer(string) (string, error) { return "", errNoMapping }

// VapRequest is one expression checked against one GVK, the way the status controller does.
type VapRequest struct {
	GVK        schema.GroupVersionKind
	ParamKind  *admissionv1.ParamKind
	Variables  []admissionv1.Variable
	Expression string
}

// VapResult is the per-GVK warning text (normalised) plus what the oracle learnt on the way.
type VapResult struct {
	// Warning is TypeCheckingResults.String() for this GVK with the random digits removed
	// from root type names; empty when the expression checks cleanly or the GVK is skipped.
	Warning string `json:"warning"`
	// Type is the output type (cel FormatCELType) from a replica of the checker env; empty on error.
	Type string `json:"type,omitempty"`
	// SchemaFound tells whether the GVK resolved; false means upstream skips it (no warning ever).
	SchemaFound bool `json:"schemaFound"`
	// ObjectDyn is true when the schema resolved but SchemaDeclType gave nil (object is dyn).
	ObjectDyn bool `json:"objectDyn,omitempty"`
	// ParamsSchemaFound is set when a paramKind was given.
	ParamsSchemaFound *bool `json:"paramsSchemaFound,omitempty"`
	// ReplicaMismatch carries the replica's warning when it differs from the real one (a bug
	// in the replica; the real warning wins).
	ReplicaMismatch *string `json:"replicaMismatch,omitempty"`
}

// Oracle holds the resolver shared by all requests.
type Oracle struct {
	Resolver resolver.SchemaResolver
	Mapper   meta.RESTMapper
}

// CheckVap runs the real validating.TypeChecker on a one-validation policy whose only rule maps
// (through oneKindMapper) to req.GVK.
func (o *Oracle) CheckVap(req VapRequest) VapResult {
	var res VapResult
	tc := &validating.TypeChecker{SchemaResolver: o.Resolver, RestMapper: oneKindMapper{gvk: req.GVK}}
	policy := &admissionv1.ValidatingAdmissionPolicy{}
	policy.Name = "oracle"
	policy.Spec.ParamKind = req.ParamKind
	policy.Spec.Variables = req.Variables
	policy.Spec.MatchConstraints = &admissionv1.MatchResources{
		ResourceRules: []admissionv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionv1.RuleWithOperations{
				Rule: admissionv1.Rule{
					APIGroups:   []string{"oracle"},
					APIVersions: []string{"oracle"},
					Resources:   []string{"oracle"},
				},
			},
		}},
	}
	policy.Spec.Validations = []admissionv1.Validation{{Expression: req.Expression}}
	warnings := tc.Check(policy)
	kinds := []string{req.GVK.Kind}
	var paramsGVK schema.GroupVersionKind
	if req.ParamKind != nil {
		if gv, err := schema.ParseGroupVersion(req.ParamKind.APIVersion); err == nil {
			paramsGVK = gv.WithKind(req.ParamKind.Kind)
			kinds = append(kinds, paramsGVK.Kind)
		}
	}
	if len(warnings) > 0 {
		res.Warning = NormalizeTypeNames(warnings[0].Warning, kinds...)
	}

	objDecl, found, err := o.declType(req.GVK, req.GVK.Kind)
	res.SchemaFound = found && err == nil
	if !res.SchemaFound {
		return res
	}
	res.ObjectDyn = objDecl == nil
	var paramsDecl *apiservercel.DeclType
	if !paramsGVK.Empty() {
		pd, pfound, perr := o.declType(paramsGVK, paramsGVK.Kind)
		ok := pfound && perr == nil
		res.ParamsSchemaFound = &ok
		if ok {
			paramsDecl = pd
		}
	}
	replicaWarning, outType := replicaCheck(req.GVK, objDecl, !paramsGVK.Empty(), paramsDecl, req.Variables, req.Expression)
	if replicaWarning != res.Warning {
		res.ReplicaMismatch = &replicaWarning
	}
	if res.Warning == "" {
		res.Type = outType
	}
	return res
}

// declType mirrors TypeChecker.declType but names the root deterministically (`name`, no digits).
func (o *Oracle) declType(gvk schema.GroupVersionKind, name string) (*apiservercel.DeclType, bool, error) {
	s, err := o.Resolver.ResolveSchema(gvk)
	if err != nil {
		if errors.Is(err, resolver.ErrSchemaNotFound) {
			return nil, false, nil
		}
		return nil, false, err
	}
	dt := common.SchemaDeclType(&celopenapi.Schema{Schema: s}, true)
	if dt == nil {
		return nil, true, nil
	}
	return dt.MaybeAssignTypeName(name), true, nil
}

// ReplicaEnvSet rebuilds the environment set of typechecking.go buildEnvSet (k8s.io/apiserver
// v0.37.1) followed by NewCompositedCompilerForTypeChecking, so that its cel.Env can be
// inspected. objDecl/paramsDecl nil means dyn.
func ReplicaEnvSet(objDecl *apiservercel.DeclType, hasParams bool, paramsDecl *apiservercel.DeclType) (*plugincel.CompositedCompiler, error) {
	base := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	requestType := plugincel.BuildRequestType()
	namespaceType := plugincel.BuildNamespaceType()
	declTypes := []*apiservercel.DeclType{namespaceType, requestType}
	varOpts := []cel.EnvOption{
		cel.Variable(plugincel.NamespaceVarName, namespaceType.CelType()),
		cel.Variable(plugincel.RequestVarName, requestType.CelType()),
	}
	objType := cel.DynType
	if objDecl != nil {
		declTypes = append(declTypes, objDecl)
		objType = objDecl.CelType()
	}
	varOpts = append(varOpts,
		cel.Variable(plugincel.ObjectVarName, objType),
		cel.Variable(plugincel.OldObjectVarName, objType))
	if hasParams {
		pt := cel.DynType
		if paramsDecl != nil {
			declTypes = append(declTypes, paramsDecl)
			pt = paramsDecl.CelType()
		}
		varOpts = append(varOpts, cel.Variable(plugincel.ParamsVarName, pt))
	}
	varOpts = append(varOpts, cel.Variable("authorizer", library.AuthorizerType))
	set, err := base.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        varOpts,
		DeclTypes:         declTypes,
	})
	if err != nil {
		return nil, err
	}
	cc, err := plugincel.NewCompositedCompilerForTypeChecking(set)
	if err != nil {
		return nil, err
	}
	cc.Compiler = &replicaCompiler{cc: cc}
	return cc, nil
}

// replicaCompiler mirrors typechecking.go typeCheckingCompiler.CompileCELExpression.
type replicaCompiler struct{ cc *plugincel.CompositedCompiler }

func (r *replicaCompiler) CompileCELExpression(acc plugincel.ExpressionAccessor, _ plugincel.OptionalVariableDeclarations, mode environment.Type) plugincel.CompilationResult {
	env, err := r.cc.Env(mode)
	if err != nil {
		return plugincel.CompilationResult{Error: &apiservercel.Error{Type: apiservercel.ErrorTypeInternal, Detail: fmt.Sprintf("fail to build env: %v", err)}, ExpressionAccessor: acc}
	}
	ast, issues := env.Compile(acc.GetExpression())
	if issues != nil {
		return plugincel.CompilationResult{Error: &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: issues.String()}, ExpressionAccessor: acc}
	}
	return plugincel.CompilationResult{OutputType: ast.OutputType()}
}

type exprAccessor string

func (e exprAccessor) GetExpression() string    { return string(e) }
func (e exprAccessor) ReturnTypes() []*cel.Type { return []*cel.Type{cel.AnyType} }

// replicaCheck returns the warning the replica env produces (same layout as
// TypeCheckingResult.String) and the output type.
func replicaCheck(gvk schema.GroupVersionKind, objDecl *apiservercel.DeclType, hasParams bool, paramsDecl *apiservercel.DeclType, vars []admissionv1.Variable, expr string) (string, string) {
	cc, err := ReplicaEnvSet(objDecl, hasParams, paramsDecl)
	if err != nil {
		return fmt.Sprintf("%v: type checking error: %v\n", gvk, err), ""
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	named := make([]plugincel.NamedExpressionAccessor, len(vars))
	for i, v := range vars {
		named[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	cc.CompileAndStoreVariables(named, opts, environment.StoredExpressions)
	result := cc.CompileCELExpression(exprAccessor(expr), opts, environment.StoredExpressions)
	if e := result.Error; e != nil {
		if e.Type == apiservercel.ErrorTypeInvalid {
			return fmt.Sprintf("%v: %s\n", gvk, e), ""
		}
		return fmt.Sprintf("%v: type checking error: %v\n", gvk, e), ""
	}
	return "", cel.FormatCELType(result.OutputType)
}

var digitsRe = regexp.MustCompile(`^[0-9]+`)

// NormalizeTypeNames removes the nanosecond digits that typechecking.go generateUniqueTypeName
// appends to root type names (`Deployment123456789` -> `Deployment`). Snippet and caret lines
// (` | ...`) are left alone so expression text is never altered.
func NormalizeTypeNames(text string, kinds ...string) string {
	if text == "" {
		return text
	}
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if strings.HasPrefix(line, " | ") {
			continue
		}
		for _, kind := range kinds {
			if kind == "" {
				continue
			}
			line = replaceKindDigits(line, kind)
		}
		lines[i] = line
	}
	return strings.Join(lines, "\n")
}

func replaceKindDigits(line, kind string) string {
	var b strings.Builder
	rest := line
	for {
		idx := strings.Index(rest, kind)
		if idx < 0 {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:idx+len(kind)])
		rest = rest[idx+len(kind):]
		// only a name boundary before the kind counts
		if idx > 0 {
			prev := line[len(line)-len(rest)-len(kind)-1]
			if isIdentByte(prev) {
				continue
			}
		}
		if d := digitsRe.FindString(rest); d != "" {
			rest = rest[len(d):]
		}
	}
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// cachingResolver memoises ResolveSchema. The definitions resolver deep-copies and inlines the
// schema on every call and nothing downstream (SchemaDeclType) mutates it, so sharing the result
// between requests changes nothing but speed.
type cachingResolver struct {
	inner resolver.SchemaResolver
	mu    sync.Mutex
	cache map[schema.GroupVersionKind]cachedSchema
}

type cachedSchema struct {
	s   *spec.Schema
	err error
}

// NewCachingResolver wraps r with a per-GVK memo.
func NewCachingResolver(r resolver.SchemaResolver) resolver.SchemaResolver {
	return &cachingResolver{inner: r, cache: map[schema.GroupVersionKind]cachedSchema{}}
}

func (c *cachingResolver) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cache[gvk]; ok {
		return e.s, e.err
	}
	s, err := c.inner.ResolveSchema(gvk)
	c.cache[gvk] = cachedSchema{s: s, err: err}
	return s, err
}
