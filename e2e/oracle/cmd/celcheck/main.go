// Command celcheck answers CEL type-check questions with the real upstream code
// (cel-go v0.29.2, k8s.io/apiserver v0.37.1, kubernetes v1.37.1): one JSON request per stdin
// line, one JSON response per stdout line. See docs/upstream-1.37.md for the protocol.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"vapcheck.dev/e2e/oracle/internal/oracle"
)

// defaultDiscovery is set by the build script (-ldflags -X) to the discovery documents folder
// (api/discovery) of kubernetes v1.37.1 in the module cache.
var defaultDiscovery = ""

// defaultOpenAPI is set by the build script to the published OpenAPI v3 documents
// (api/openapi-spec/v3) of kubernetes v1.37.1 in the module cache (typed cost requests).
var defaultOpenAPI = ""

type request struct {
	ID        json.RawMessage        `json:"id,omitempty"`
	Env       string                 `json:"env"`
	Decls     []oracle.Decl          `json:"decls,omitempty"`
	Options   oracle.StdOptions      `json:"options,omitempty"`
	Expr      *string                `json:"expr,omitempty"`
	GVK       json.RawMessage        `json:"gvk,omitempty"`
	ParamsGVK json.RawMessage        `json:"paramsGvk,omitempty"`
	ParamKind *admissionv1.ParamKind `json:"paramKind,omitempty"`
	Variables []admissionv1.Variable `json:"variables,omitempty"`
	Policy    json.RawMessage        `json:"policy,omitempty"`
	Discovery string                 `json:"discovery,omitempty"`
	CRDs      []json.RawMessage      `json:"crds,omitempty"`
}

// parseCRDs reads each entry as a CRD object or as a YAML/JSON string.
func parseCRDs(raw []json.RawMessage) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for i, r := range raw {
		data := []byte(r)
		var str string
		if err := json.Unmarshal(r, &str); err == nil {
			data = []byte(str)
		}
		crd, err := oracle.ParseCRD(data)
		if err != nil {
			return nil, fmt.Errorf("crds[%d]: %w", i, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

type server struct {
	oracle        *oracle.Oracle
	discoveryPath string
	mu            sync.Mutex
	mappers       map[string]meta.RESTMapper
	published     *oracle.PublishedSchemas
}

func (s *server) mapper(which string) (meta.RESTMapper, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.mappers[which]; ok {
		return m, nil
	}
	if s.discoveryPath == "" {
		return nil, errors.New("no discovery document: pass -discovery <kubernetes module>/api/discovery")
	}
	m, err := oracle.NewDiscoveryMapper(s.discoveryPath, which == "all")
	if err != nil {
		return nil, err
	}
	s.mappers[which] = m
	return m, nil
}

func parseGVKField(raw json.RawMessage) (schema.GroupVersionKind, error) {
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		return oracle.ParseGVK(str)
	}
	var obj struct {
		Group   string `json:"group"`
		Version string `json:"version"`
		Kind    string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("gvk: want a string or {group, version, kind}: %w", err)
	}
	if obj.Version == "" || obj.Kind == "" {
		return schema.GroupVersionKind{}, errors.New("gvk: version and kind are required")
	}
	return schema.GroupVersionKind{Group: obj.Group, Version: obj.Version, Kind: obj.Kind}, nil
}

func (s *server) handle(line []byte) (resp any) {
	defer func() {
		if r := recover(); r != nil {
			resp = map[string]any{"error": fmt.Sprintf("panic: %v", r), "stack": string(debug.Stack())}
		}
	}()
	var req request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return map[string]any{"error": "bad request: " + err.Error()}
	}
	withID := func(m map[string]any) map[string]any {
		if len(req.ID) > 0 {
			m["id"] = req.ID
		}
		return m
	}
	fail := func(err error) any { return withID(map[string]any{"error": err.Error()}) }
	switch req.Env {
	case "std":
		if req.Expr == nil {
			return fail(errors.New("std: expr is required"))
		}
		env, err := oracle.StdEnv(req.Decls, req.Options)
		if err != nil {
			return fail(err)
		}
		r := oracle.CheckStd(env, *req.Expr)
		return withID(map[string]any{"issues": r.Issues, "type": r.Type})
	case "vap":
		if req.Expr == nil {
			return fail(errors.New("vap: expr is required"))
		}
		gvk, err := parseGVKField(req.GVK)
		if err != nil {
			return fail(err)
		}
		vr := oracle.VapRequest{GVK: gvk, ParamKind: req.ParamKind, Variables: req.Variables, Expression: *req.Expr}
		if len(req.ParamsGVK) > 0 {
			pg, err := parseGVKField(req.ParamsGVK)
			if err != nil {
				return fail(fmt.Errorf("paramsGvk: %w", err))
			}
			vr.ParamKind = &admissionv1.ParamKind{APIVersion: pg.GroupVersion().String(), Kind: pg.Kind}
		}
		o := s.oracle
		if len(req.CRDs) > 0 {
			crds, err := parseCRDs(req.CRDs)
			if err != nil {
				return fail(err)
			}
			if o, err = s.oracle.WithCRDs(crds, "", false); err != nil {
				return fail(err)
			}
		}
		r := o.CheckVap(vr)
		out := map[string]any{"warning": r.Warning, "type": r.Type, "schemaFound": r.SchemaFound}
		if r.ObjectDyn {
			out["objectDyn"] = true
		}
		if r.ParamsSchemaFound != nil {
			out["paramsSchemaFound"] = *r.ParamsSchemaFound
		}
		if r.ReplicaMismatch != nil {
			out["replicaMismatch"] = *r.ReplicaMismatch
		}
		return withID(out)
	case "policy":
		if len(req.Policy) == 0 {
			return fail(errors.New("policy: policy is required"))
		}
		data := []byte(req.Policy)
		var str string
		if err := json.Unmarshal(req.Policy, &str); err == nil {
			data = []byte(str)
		}
		p, err := oracle.ParsePolicy(data)
		if err != nil {
			return fail(fmt.Errorf("policy: %w", err))
		}
		which := req.Discovery
		if which == "" {
			which = "ga"
		}
		if which != "ga" && which != "all" {
			return fail(errors.New(`discovery: want "ga" or "all"`))
		}
		o := *s.oracle
		if len(req.CRDs) > 0 {
			crds, err := parseCRDs(req.CRDs)
			if err != nil {
				return fail(err)
			}
			if s.discoveryPath == "" {
				return fail(errors.New("no discovery documents: pass -discovery"))
			}
			withCRDs, err := s.oracle.WithCRDs(crds, s.discoveryPath, which == "all")
			if err != nil {
				return fail(err)
			}
			o = *withCRDs
		} else {
			m, err := s.mapper(which)
			if err != nil {
				return fail(err)
			}
			o.Mapper = m
		}
		r := o.CheckPolicy(p)
		return withID(map[string]any{"gvks": r.GVKs, "paramsGvk": r.ParamsGVK, "typeChecking": r.TypeChecking, "perGvk": r.PerGVK})
	case "cost":
		if req.Expr == nil {
			return fail(errors.New("cost: expr is required"))
		}
		if len(req.GVK) > 0 {
			return s.typedCost(req, withID)
		}
		r := oracle.EstimateCost(oracle.CostRequest{HasParams: req.ParamKind != nil, Variables: req.Variables, Expression: *req.Expr})
		if r.Error != "" {
			return fail(errors.New(r.Error))
		}
		if r.Issues != "" {
			return withID(map[string]any{"issues": r.Issues})
		}
		return withID(map[string]any{"min": *r.Min, "max": *r.Max})
	default:
		return fail(fmt.Errorf("unknown env %q (want std, vap, policy or cost)", req.Env))
	}
}

// typedCost answers a cost request with a gvk: object/oldObject typed from the published
// schema of that kind, params from paramsGvk (or paramKind), sizes from the schemas.
func (s *server) typedCost(req request, withID func(map[string]any) map[string]any) any {
	fail := func(err error) any { return withID(map[string]any{"error": err.Error()}) }
	if len(s.published.Dirs) == 0 || s.published.Dirs[0] == "" {
		return fail(errors.New("no OpenAPI documents: pass -openapi <kubernetes module>/api/openapi-spec/v3"))
	}
	gvk, err := parseGVKField(req.GVK)
	if err != nil {
		return fail(err)
	}
	tr := oracle.TypedCostRequest{GVK: gvk, Variables: req.Variables, Expression: *req.Expr}
	// As TypeChecker: params are declared when the params GVK is not empty.
	if req.ParamKind != nil {
		return fail(errors.New("cost with gvk: give the params kind as paramsGvk"))
	}
	if len(req.ParamsGVK) > 0 {
		pg, err := parseGVKField(req.ParamsGVK)
		if err != nil {
			return fail(fmt.Errorf("paramsGvk: %w", err))
		}
		tr.ParamsGVK = &pg
	}
	r := s.published.EstimateTypedCost(tr)
	if r.Error != "" {
		return fail(errors.New(r.Error))
	}
	out := map[string]any{"schemaFound": r.SchemaFound}
	if r.ObjectDyn {
		out["objectDyn"] = true
	}
	if r.ParamsSchemaFound != nil {
		out["paramsSchemaFound"] = *r.ParamsSchemaFound
	}
	if r.Issues != "" {
		out["issues"] = r.Issues
	}
	if r.Min != nil {
		out["min"], out["max"] = *r.Min, *r.Max
	}
	return withID(out)
}

func main() {
	echo := flag.Bool("echo", false, "wrap each response as {\"input\": <request>, \"output\": <response>}")
	disc := flag.String("discovery", defaultDiscovery, "folder of the kubernetes discovery documents (policy env)")
	openapi := flag.String("openapi", defaultOpenAPI, "folder of the published OpenAPI v3 documents (typed cost env)")
	openapiExtra := flag.String("openapi-extra", "", "a further folder of OpenAPI v3 documents, same file names (typed cost env)")
	klog.InitFlags(nil)
	flag.Parse()
	s := &server{oracle: &oracle.Oracle{Resolver: oracle.NewCachingResolver(oracle.NewSchemaResolver())}, discoveryPath: *disc, mappers: map[string]meta.RESTMapper{}, published: &oracle.PublishedSchemas{Dirs: []string{*openapi}}}
	if *openapiExtra != "" {
		s.published.Dirs = append(s.published.Dirs, *openapiExtra)
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for {
		line, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			resp := s.handle(line)
			if *echo {
				var input any = string(bytes.TrimSpace(line))
				if json.Valid(bytes.TrimSpace(line)) {
					input = json.RawMessage(bytes.TrimSpace(line))
				}
				resp = map[string]any{"input": input, "output": resp}
			}
			if e := enc.Encode(resp); e != nil {
				fmt.Fprintln(os.Stderr, "celcheck:", e)
				os.Exit(1)
			}
			if e := out.Flush(); e != nil {
				os.Exit(1)
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "celcheck:", err)
			os.Exit(1)
		}
	}
}
