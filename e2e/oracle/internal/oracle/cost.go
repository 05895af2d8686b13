package oracle

import (
	"github.com/google/cel-go/cel"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

// CostRequest asks for the static cost estimate of one validation expression of a policy whose
// object, oldObject and params are dyn (as kube-apiserver compiles admission policies).
type CostRequest struct {
	HasParams  bool
	Variables  []admissionv1.Variable
	Expression string
}

// CostResult is cel-go's estimate (min/max), or the compile issues.
type CostResult struct {
	Issues string  `json:"issues,omitempty"`
	Error  string  `json:"error,omitempty"`
	Min    *uint64 `json:"min,omitempty"`
	Max    *uint64 `json:"max,omitempty"`
}

// EstimateCost compiles the expression in the replica of the admission policy environment
// (ReplicaEnvSet with dyn object/params, the policy's variables stored as the composited
// compiler stores them) and runs cel-go's Env.EstimateCost with Kubernetes' library cost
// estimator (library.CostEstimator) and no size estimator: the sizes of object, oldObject and
// params are unknown, as for kube-apiserver.
func EstimateCost(req CostRequest) CostResult {
	cc, err := ReplicaEnvSet(nil, req.HasParams, nil)
	if err != nil {
		return CostResult{Error: err.Error()}
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: req.HasParams, HasAuthorizer: true}
	named := make([]plugincel.NamedExpressionAccessor, len(req.Variables))
	for i, v := range req.Variables {
		named[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	cc.CompileAndStoreVariables(named, opts, environment.StoredExpressions)
	env, err := cc.Env(environment.StoredExpressions)
	if err != nil {
		return CostResult{Error: err.Error()}
	}
	ast, iss := env.Compile(req.Expression)
	if iss.Err() != nil {
		return CostResult{Issues: iss.String()}
	}
	return estimate(env, ast)
}

func estimate(env *cel.Env, ast *cel.Ast) CostResult {
	est, err := env.EstimateCost(ast, &library.CostEstimator{})
	if err != nil {
		return CostResult{Error: err.Error()}
	}
	return CostResult{Min: &est.Min, Max: &est.Max}
}
