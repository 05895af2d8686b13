// Command gkcheck is the Gatekeeper oracle of vapcheck: for every ConstraintTemplate document in
// the files it is given, it prints (one JSON object a line) what Gatekeeper's K8sNativeValidation
// driver answers when the template is added, and the CEL compile error of each expression of
// the template's K8sNativeValidation code in the environment the driver compiles it in.
//
// Upstream (github.com/open-policy-agent/gatekeeper/v3, pinned in go.mod):
//   - pkg/drivers/k8scel/driver.go, (*Driver).AddTemplate: the verdict. It returns an error only
//     when pkg/drivers/k8scel/schema.GetSourceFromTemplate does (one target, the source decodes,
//     Source.Validate: reserved names, failurePolicy); CEL compile errors are kept inside the
//     compiled evaluators ("FRICTION: compilation errors are possible, but we cannot introspect"),
//     so the template is accepted and the expression fails at evaluation.
//   - The compile errors are read here the way AddTemplate compiles: a CompositedCompiler over
//     environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()), the variables
//     transform.AllVariablesCEL() (anyObject, params) then the user's, compiled with
//     OptionalVariableDeclarations{HasParams: true}; matchConditions, validations and
//     messageExpressions with OptionalVariableDeclarations{} (no `params`), all in
//     environment.StoredExpressions mode.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-policy-agent/frameworks/constraint/pkg/apis"
	"github.com/open-policy-agent/frameworks/constraint/pkg/core/templates"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel"
	pSchema "github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel/schema"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel/transform"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"
)

type compileError struct {
	Field string `json:"field"`
	Error string `json:"error"`
}

type result struct {
	File     string         `json:"file"`
	Document int            `json:"document"`
	Name     string         `json:"name"`
	Accepted bool           `json:"accepted"`
	Error    string         `json:"error,omitempty"`
	Compile  []compileError `json:"compileErrors"`
}

func main() {
	var files []string
	for _, arg := range os.Args[1:] {
		info, err := os.Stat(arg)
		if err != nil {
			fail(err)
		}
		if !info.IsDir() {
			files = append(files, arg)
			continue
		}
		err = filepath.Walk(arg, func(p string, i os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if !i.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			fail(err)
		}
	}
	sort.Strings(files)
	scheme := runtime.NewScheme()
	if err := apis.AddToScheme(scheme); err != nil {
		fail(err)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			fail(err)
		}
		for i, doc := range splitDocuments(data) {
			var u unstructured.Unstructured
			if err := yaml.Unmarshal(doc, &u.Object); err != nil || u.Object == nil {
				continue
			}
			if u.GetKind() != "ConstraintTemplate" || !strings.HasPrefix(u.GetAPIVersion(), "templates.gatekeeper.sh/") {
				continue
			}
			if err := enc.Encode(check(scheme, f, i+1, &u)); err != nil {
				fail(err)
			}
		}
	}
}

func check(scheme *runtime.Scheme, file string, document int, u *unstructured.Unstructured) result {
	r := result{File: file, Document: document, Name: u.GetName(), Compile: []compileError{}}
	versioned, err := scheme.New(u.GroupVersionKind())
	if err != nil {
		r.Error = err.Error()
		return r
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, versioned); err != nil {
		r.Error = err.Error()
		return r
	}
	scheme.Default(versioned)
	ct := &templates.ConstraintTemplate{}
	if err := scheme.Convert(versioned, ct, nil); err != nil {
		r.Error = err.Error()
		return r
	}
	driver, err := k8scel.New()
	if err != nil {
		fail(err)
	}
	if err := addTemplate(driver, ct); err != nil {
		r.Error = err.Error()
		return r
	}
	r.Accepted = true
	source, err := pSchema.GetSourceFromTemplate(ct)
	if err != nil {
		fail(err)
	}
	r.Compile = compileErrors(source)
	return r
}

// addTemplate is (*Driver).AddTemplate, with a panic turned into an error: v3.23.1 dereferences
// a nil source (schema.GetSource on K8sNativeValidation code without `source`).
func addTemplate(driver *k8scel.Driver, ct *templates.ConstraintTemplate) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return driver.AddTemplate(context.Background(), ct)
}

// compileErrors compiles as (*Driver).AddTemplate does and reads each result's error.
func compileErrors(source *pSchema.Source) []compileError {
	out := []compileError{}
	add := func(field string, res cel.CompilationResult) {
		if res.Error != nil {
			out = append(out, compileError{Field: field, Error: res.Error.Error()})
		}
	}
	compiler, err := cel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		fail(err)
	}
	withParams := cel.OptionalVariableDeclarations{HasParams: true}
	none := cel.OptionalVariableDeclarations{}
	for i, v := range transform.AllVariablesCEL() {
		add(fmt.Sprintf("gatekeeper_internal_variables[%d].expression", i),
			compiler.CompileAndStoreVariable(v, withParams, environment.StoredExpressions))
	}
	for i, v := range source.Variables {
		add(fmt.Sprintf("variables[%d].expression", i), compiler.CompileAndStoreVariable(
			&validating.Variable{Name: v.Name, Expression: v.Expression}, withParams, environment.StoredExpressions))
	}
	for i, m := range source.MatchConditions {
		add(fmt.Sprintf("matchCondition[%d].expression", i), compiler.CompileCELExpression(
			&matchconditions.MatchCondition{Name: m.Name, Expression: m.Expression}, none, environment.StoredExpressions))
	}
	for i, v := range source.Validations {
		add(fmt.Sprintf("validations[%d].expression", i), compiler.CompileCELExpression(
			&validating.ValidationCondition{Expression: v.Expression, Message: v.Message}, none, environment.StoredExpressions))
		if v.MessageExpression != "" {
			add(fmt.Sprintf("validations[%d].messageExpression", i), compiler.CompileCELExpression(
				&validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}, none, environment.StoredExpressions))
		}
	}
	return out
}

// splitDocuments splits a YAML stream at its `---` lines.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if t := bytes.TrimRight(line, " \t\r\n"); bytes.Equal(t, []byte("---")) || bytes.HasPrefix(t, []byte("--- ")) {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
			cur.Reset()
			continue
		}
		cur.Write(line)
	}
	return append(docs, cur.Bytes())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gkcheck:", err)
	os.Exit(2)
}
